//! What an agent is offered (spec §3, §5): the tools of a skill with their levels, and the table in force.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use permits_runtime::table::ChainLink;
use serde_json::{Value, json};

use super::{App, Caller};
use crate::body::Query;
use crate::error::ApiError;

/// The query of `GET /v1/agents/{agent}/skills/{skill}/tools`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OfferQuery {
    /// The mode the calls will be made in (spec §3c): a tool that is `never` in it is not offered.
    #[serde(default)]
    mode: Option<String>,
    /// The delegation chain the calls will be made along (spec §3b): `Agent.Skill` links joined by `,`,
    /// nearest first, root last (`?via=Coder.FixBug`); none for direct calls.
    #[serde(default)]
    via: Option<String>,
}

/// Reads `?via=`: `Agent.Skill` links joined by `,`, nearest first. A link that is not two names joined by one
/// `.` is refused (400 `invalid_query`); an undeclared one is the runtime's (every tool `never`).
fn chain_of(text: &str) -> Result<Vec<ChainLink>, ApiError> {
    text.split(',')
        .map(|link| {
            ChainLink::parse(link.trim()).ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_query",
                    format!("`via`: the link `{link}` is not `Agent.Skill` (links are joined by `,`, nearest first)"),
                )
            })
        })
        .collect()
}

/// `GET /v1/agents/{agent}/skills/{skill}/tools[?mode=M][&via=A.S,…]`: the tools to offer the model (never a `never`
/// one), in the skill's order, each with its label, parameters, level (`null` when a condition on the
/// arguments decides it) and pin (when it has one), and the level of every tool of the skill; in mode `M` when given (spec §3c: a
/// tool that is `never` in the mode is not offered; a mode the table does not declare offers nothing); along
/// the chain `via` when given (spec §3b: each tool's level is also every link's; an undeclared chain offers
/// nothing).
pub(crate) async fn tools(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path((agent, skill)): Path<(String, String)>,
    Query(query): Query<OfferQuery>,
) -> Result<Json<Value>, ApiError> {
    let via = query.via.as_deref().map(chain_of).transpose()?.unwrap_or_default();
    // A host reads the offer of a chain only when it hosts every agent of it (spec §3b).
    for account in std::iter::once(agent.as_str()).chain(via.iter().map(|l| l.agent.as_str())) {
        caller.may_read(account)?;
    }
    let mode = query.mode.as_deref();
    let offered: Vec<Value> = app
        .rt
        .offered_tools_via(&agent, &skill, mode, &via)
        .into_iter()
        .map(|t| {
            let mut tool =
                json!({"name": t.name, "label": t.label, "doc": t.doc, "params": t.params, "level": t.level});
            // The pin (spec §2), for a gateway that offers the tool only while its definition still has it.
            if let Some(pin) = t.pinned {
                tool["pinned"] = json!(pin);
            }
            tool
        })
        .collect();
    let levels: Vec<Value> = app
        .rt
        .levels_via(&agent, &skill, mode, &via)
        .into_iter()
        .map(|(tool, level)| json!({"tool": tool, "level": level}))
        .collect();
    let mut answer = json!({"agent": agent, "skill": skill, "tools": offered, "levels": levels});
    if let (Some(mode), Some(object)) = (query.mode, answer.as_object_mut()) {
        object.insert("mode".into(), Value::String(mode));
    }
    if let (false, Some(object)) = (via.is_empty(), answer.as_object_mut()) {
        object.insert("via".into(), json!(via));
    }
    Ok(Json(answer))
}

/// `GET /v1/table`: the table in force (its header and package settings).
pub(crate) async fn table(State(app): State<Arc<App>>, _caller: Caller) -> Json<Value> {
    let table = app.rt.table();
    Json(json!({
        "format": table.header.format,
        "compiler": table.header.compiler,
        "source_digest": table.header.source_digest,
        "table_digest": table.header.table_digest,
        "proposal_lifetime_seconds": table.package.proposal_lifetime_seconds,
        "grant_lifetime_seconds": table.package.grant_lifetime_seconds,
    }))
}
