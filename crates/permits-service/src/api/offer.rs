//! What an agent is offered (spec §3, §5): the tools of a skill with their levels, and the table in force.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::{App, Caller};
use crate::error::ApiError;

/// `GET /v1/agents/{agent}/skills/{skill}/tools`: the tools to offer the model (never a `never` one), in the
/// skill's order, each with its label, parameters, level (`null` when a condition on the arguments decides
/// it) and pin (when it has one), and the level of every tool of the skill.
pub(crate) async fn tools(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path((agent, skill)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    caller.may_read(&agent)?;
    let offered: Vec<Value> = app
        .rt
        .offered_tools(&agent, &skill)
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
    let levels: Vec<Value> =
        app.rt.levels(&agent, &skill).into_iter().map(|(tool, level)| json!({"tool": tool, "level": level})).collect();
    Ok(Json(json!({"agent": agent, "skill": skill, "tools": offered, "levels": levels})))
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
