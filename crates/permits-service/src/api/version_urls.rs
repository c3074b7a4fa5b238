//! Version URLs (see [`crate::version_urls`]): a host registers, per tool of its agents, the URL the
//! service asks for the covered version when a person approves.

use std::sync::Arc;

use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{App, Caller};
use crate::body::Json;
use crate::error::ApiError;
use crate::keys::KeyKind;
use crate::version_urls::Registration;

/// The body of `POST /v1/version-urls`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegisterBody {
    agent: String,
    tool: String,
    url: String,
}

/// The body of `POST /v1/version-urls/remove`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemoveBody {
    agent: String,
    tool: String,
}

fn store_error(message: String) -> ApiError {
    ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "store", message)
}

/// `POST /v1/version-urls` (a host key for the agent): registers, or replaces, the version URL of one of
/// the agent's tools. The table in force must offer the tool to the agent and declare its `version`.
pub(crate) async fn register(
    State(app): State<Arc<App>>,
    caller: Caller,
    Json(body): Json<RegisterBody>,
) -> Result<axum::Json<Value>, ApiError> {
    caller.host_of(&body.agent)?;
    if !app.versions.available() {
        return Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "unavailable",
            crate::version_urls::UNAVAILABLE,
        ));
    }
    let table = app.rt.table();
    let offered =
        table.entries.get(&body.agent).is_some_and(|skills| skills.values().any(|t| t.contains_key(&body.tool)));
    if !offered {
        return Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "not_offered",
            format!("the table in force does not offer `{}` to `{}`: no version URL for it", body.tool, body.agent),
        ));
    }
    if table.tools.get(&body.tool).is_none_or(|t| t.version.is_none()) {
        return Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "no_version",
            format!("tool `{}` declares no `version P.F`: there is no version to ask for", body.tool),
        ));
    }
    app.versions.check_url(&body.url).map_err(|m| ApiError::bad_request("bad_url", m))?;
    let registration = Registration {
        agent: body.agent,
        tool: body.tool,
        url: body.url,
        key: caller.0.id.clone(),
        registered_at: crate::server::now(),
    };
    let answer = registration.clone();
    app.run(move |app| app.versions.register(&registration).map_err(store_error)).await?;
    Ok(axum::Json(json!({"version_url": answer})))
}

/// `GET /v1/version-urls`: for a host key, its agents' registrations; for a person or admin key, all.
pub(crate) async fn list(State(app): State<Arc<App>>, caller: Caller) -> Result<axum::Json<Value>, ApiError> {
    let all = app.run(|app| app.versions.list().map_err(store_error)).await?;
    let key = caller.0;
    let listed: Vec<Registration> =
        all.into_iter().filter(|r| key.kind != KeyKind::Host || key.agents.contains(&r.agent)).collect();
    Ok(axum::Json(json!({"version_urls": listed})))
}

/// `POST /v1/version-urls/remove` (a host key for the agent): approvals of the tool are no longer asked.
pub(crate) async fn remove(
    State(app): State<Arc<App>>,
    caller: Caller,
    Json(body): Json<RemoveBody>,
) -> Result<axum::Json<Value>, ApiError> {
    caller.host_of(&body.agent)?;
    let removed = app.run(move |app| app.versions.remove(&body.agent, &body.tool).map_err(store_error)).await?;
    Ok(axum::Json(json!({"removed": removed})))
}
