//! Tasks (spec §5a "Tasks"): an operation key bound, on its first call, to its root agent and skill, the
//! person the work is for and the mode; read, and ended by the host of its root agent.

use std::sync::Arc;

use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::{App, Caller};
use crate::body::Json;
use crate::error::ApiError;

/// `GET /v1/tasks/{key}`: the task bound to an operation key.
pub(crate) async fn task(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    let shown = key.clone();
    let task = app.run(move |app| Ok(app.rt.task(&key)?)).await?;
    let Some(task) = task else { return Err(ApiError::not_found(format!("there is no task `{shown}`"))) };
    caller.may_read(&task.root_agent)?;
    Ok(axum::Json(json!({"task": task})))
}

/// `POST /v1/tasks/{key}/end` (a host key for the task's root agent): the task's rules end; the key keeps
/// its binding.
pub(crate) async fn end(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(key): Path<String>,
    Json(_): Json<super::proposals::Empty>,
) -> Result<axum::Json<Value>, ApiError> {
    app.change(move |app| {
        if let Some(task) = app.rt.task(&key)? {
            caller.host_of(&task.root_agent)?;
        }
        Ok(axum::Json(json!({"task": app.rt.end_task(&key)?})))
    })
    .await
}
