//! Standing rules (spec §5 "Standing rules") and budgets (spec §6): read by any key; made, revoked and
//! raised only with a person's key, as that person.

use std::sync::Arc;

use axum::extract::{Path, State};
use permits_runtime::{NewRule, Scope, WorkFor};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{App, Caller};
use crate::body::Json;
use crate::error::ApiError;

/// `GET /v1/rules`: every standing rule, revoked ones included, oldest first.
pub(crate) async fn list(State(app): State<Arc<App>>, _caller: Caller) -> Result<axum::Json<Value>, ApiError> {
    let rules = app.run(|app| Ok(app.rt.rules()?)).await?;
    Ok(axum::Json(json!({"rules": rules})))
}

/// For whose work a new rule applies.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum WorkForBody {
    Person(String),
    Nobody,
    Everybody,
}

/// Which calls a new rule covers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum ScopeBody {
    /// Exactly these arguments (a JSON object).
    TheseArguments(Value),
    AnyArguments,
}

/// The body of `POST /v1/rules` (`allow_alone`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleBody {
    agent: String,
    tool: String,
    #[serde(default)]
    skill: Option<String>,
    work_for: WorkForBody,
    scope: ScopeBody,
    #[serde(default)]
    expires_at: Option<u64>,
    /// The mode the rule is made for (spec §3c step 5): it applies only to calls in exactly this mode; none
    /// for calls in no mode.
    #[serde(default)]
    mode: Option<String>,
    /// The delegation chain the rule is made for (spec §3b), nearest first, root last: it applies only to
    /// calls with exactly this chain; empty for direct calls. It needs `skill`, and every link must be a
    /// declared delegation (else the runtime refuses it: 403 `rule`).
    #[serde(default)]
    via: Vec<permits_runtime::table::ChainLink>,
}

/// `POST /v1/rules` (a person key: the rule is made by that person, who must be allowed to make it).
pub(crate) async fn allow_alone(
    State(app): State<Arc<App>>,
    caller: Caller,
    Json(body): Json<RuleBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let by = caller.person("make a standing rule")?;
    let rule = NewRule {
        agent: body.agent,
        tool: body.tool,
        skill: body.skill,
        work_for: match body.work_for {
            WorkForBody::Person(p) => WorkFor::Person(p),
            WorkForBody::Nobody => WorkFor::Nobody,
            WorkForBody::Everybody => WorkFor::Everybody,
        },
        by,
        scope: match body.scope {
            ScopeBody::TheseArguments(arguments) => Scope::these(&arguments),
            ScopeBody::AnyArguments => Scope::AnyArguments,
        },
        expires_at: body.expires_at,
        mode: body.mode,
        via: body.via,
    };
    app.change(move |app| Ok(axum::Json(json!({"rule": app.rt.allow_alone(&rule)?})))).await
}

/// The body of `POST /v1/rules/{id}/revoke`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevokeRuleBody {
    /// Why; a missing one is refused as a blank one (422 `reason_required`).
    #[serde(default)]
    why: String,
}

/// `POST /v1/rules/{id}/revoke` (a person key: the rule's maker or a supervisor).
pub(crate) async fn revoke(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<RevokeRuleBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let by = caller.person("revoke a standing rule")?;
    app.change(move |app| Ok(axum::Json(json!({"rule": app.rt.revoke_rule(&id, &by, &body.why)?})))).await
}

/// `GET /v1/budgets`: every budget of the table as it stands.
pub(crate) async fn budgets(State(app): State<Arc<App>>, _caller: Caller) -> Result<axum::Json<Value>, ApiError> {
    let budgets = app.run(|app| Ok(app.rt.budgets()?)).await?;
    Ok(axum::Json(json!({"budgets": budgets})))
}

/// `GET /v1/budgets/{name}`.
pub(crate) async fn budget(
    State(app): State<Arc<App>>,
    _caller: Caller,
    Path(name): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    let budget = app.run(move |app| Ok(app.rt.budget(&name)?)).await?;
    Ok(axum::Json(json!({"budget": budget})))
}

/// `POST /v1/budgets/{name}/raise` (a person key: a supervisor installs the table's ceiling).
pub(crate) async fn raise(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(name): Path<String>,
    Json(_): Json<super::proposals::Empty>,
) -> Result<axum::Json<Value>, ApiError> {
    let by = caller.person("raise a ceiling")?;
    app.change(move |app| Ok(axum::Json(json!({"budget": app.rt.raise_ceiling(&name, &by)?})))).await
}
