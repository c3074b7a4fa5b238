//! Tasks (spec §5a "Tasks"): an operation key bound, on its first call, to its root agent and skill, the
//! person the work is for and the mode; read, and ended by the host of its root agent.
//!
//! Leases (spec §5a "Leases"): a host takes the task `POST /v1/tasks/{key}/lease` `{holder, seconds}`,
//! renews it (`…/lease/renew` `{holder, fence, seconds}`) while it works, and releases it
//! (`…/lease/release` `{holder, fence}`); while the lease is held, only a call presenting it — `lease:
//! {holder, fence}` in the body of `POST /v1/calls`, `/v1/executions/{id}/claim`, `/confirm`, `/refuse` and
//! `/v1/settle` — acts under the key ([`presented`]). Only a host key takes, renews or releases a lease
//! (a person's key and an admin's never work under a task): for a bound task, a host key for its root
//! agent (as `end`); for a key no call bound yet, any host key (a worker takes the task before its first
//! call).

use std::sync::Arc;

use axum::extract::{Path, State};
use permits_runtime::Lease;
use serde::Deserialize;
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

/// A lease as a request presents it: `{holder, fence}`, what `POST /v1/tasks/{key}/lease` answered. The
/// runtime compares only the key, the holder and the fence with the store's lease.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseBody {
    /// The holder named when the lease was taken.
    holder: String,
    /// The lease's fence, as the take answered it.
    fence: u64,
}

/// The lease `body` presents for the task `key` (the call's operation key, or the execution's): the key's
/// current lease if its holder and fence are the store's.
pub(crate) fn presented(key: &str, body: LeaseBody) -> Lease {
    Lease { key: key.to_string(), holder: body.holder, fence: body.fence, taken_at: 0, expires_at: 0 }
}

/// The body of `POST /v1/tasks/{key}/lease`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TakeBody {
    /// Who takes it: a name the host chooses, one per worker (`host-a:4711`).
    holder: String,
    /// For how long, in seconds (1 to 86400).
    seconds: u64,
}

/// The body of `POST /v1/tasks/{key}/lease/renew`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RenewBody {
    /// The holder named when the lease was taken.
    holder: String,
    /// The lease's fence.
    fence: u64,
    /// For how long from now, in seconds (1 to 86400).
    seconds: u64,
}

/// Only a host key takes, renews or releases a lease: for a bound task, a host key for its root agent; for
/// a key no call bound, any host key.
fn may_lease(app: &App, caller: &Caller, key: &str) -> Result<(), ApiError> {
    match app.rt.task(key)? {
        Some(task) => caller.host_of(&task.root_agent),
        None => caller.host_key("take, renew or release a task's lease"),
    }
}

/// `GET /v1/tasks/{key}/lease`: the key's lease as the store has it (expired and released ones included),
/// `null` when it was never leased. For a bound task, what may read the task reads it.
pub(crate) async fn lease(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    app.run(move |app| {
        if let Some(task) = app.rt.task(&key)? {
            caller.may_read(&task.root_agent)?;
        }
        Ok(axum::Json(json!({"lease": app.rt.lease(&key)?})))
    })
    .await
}

/// `POST /v1/tasks/{key}/lease`: takes the task for `holder` for `seconds`; the lease, with its fence.
/// Refused (`not_holder`, 409) while a lease is held: another holder's, or `holder`'s own (renew it).
pub(crate) async fn take(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(key): Path<String>,
    Json(body): Json<TakeBody>,
) -> Result<axum::Json<Value>, ApiError> {
    app.change(move |app| {
        may_lease(app, &caller, &key)?;
        Ok(axum::Json(json!({"lease": app.rt.take_task(&key, &body.holder, body.seconds)?})))
    })
    .await
}

/// `POST /v1/tasks/{key}/lease/renew`: the lease `{holder, fence}` held for `seconds` from now, its fence
/// kept. Refused (`not_holder`) when another fence is current.
pub(crate) async fn renew(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(key): Path<String>,
    Json(body): Json<RenewBody>,
) -> Result<axum::Json<Value>, ApiError> {
    app.change(move |app| {
        may_lease(app, &caller, &key)?;
        let lease = presented(&key, LeaseBody { holder: body.holder, fence: body.fence });
        Ok(axum::Json(json!({"lease": app.rt.renew_task(&lease, body.seconds)?})))
    })
    .await
}

/// `POST /v1/tasks/{key}/lease/release`: the lease `{holder, fence}` ends now (releasing it again changes
/// nothing). Refused (`not_holder`) when another fence is current.
pub(crate) async fn release(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(key): Path<String>,
    Json(body): Json<LeaseBody>,
) -> Result<axum::Json<Value>, ApiError> {
    app.change(move |app| {
        may_lease(app, &caller, &key)?;
        let lease = presented(&key, body);
        Ok(axum::Json(json!({"lease": app.rt.release_task(&lease)?})))
    })
    .await
}
