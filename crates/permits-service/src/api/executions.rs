//! The execution protocol (spec §5 "Execute", §5a "Idempotent execution"), for a host that runs the tool
//! itself: **claim** (`P-n`: everything is rechecked; the answer says whom it runs as) → the host checks its
//! own permissions → **confirm** (`sending`) or **refuse** (`failed`, final) → **receipt**. An alone call
//! (`A-n`) is claimed by `POST /v1/calls` and goes on from the confirmation. Every step takes the claim
//! token, and a retry with the same token answers the same; another token is refused. Then settlement.

use std::sync::Arc;

use axum::extract::{Path, State};
use permits_runtime::{AuthorityRefusal, Claimed, Lease, RunOutcome};
use serde::Deserialize;
use serde_json::{Value, json};

use super::tasks::{LeaseBody, presented};
use super::{App, Caller};
use crate::body::Json;
use crate::error::ApiError;
use crate::stated::{Statement, stating};

/// An execution as the token holder sees it (the claim token included).
fn execution_json(c: &Claimed) -> Value {
    serde_json::to_value(c).unwrap_or(Value::Null)
}

/// `GET /v1/executions/{id}`: an execution as it is now (`P-n` or `A-n`), without its claim token.
pub(crate) async fn status(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    let c = app.run(move |app| Ok(app.rt.execution(&id)?)).await?;
    caller.may_read(&c.agent)?;
    let mut value = execution_json(&c);
    if let Some(object) = value.as_object_mut() {
        object.insert("claim_token".into(), Value::Null);
    }
    Ok(axum::Json(value))
}

/// Checks that the caller hosts the execution's agent, then runs `f` with the execution's id and the lease
/// the body presents (`lease: {holder, fence}`, for the execution's operation key), in one blocking task.
async fn as_host(
    app: Arc<App>,
    caller: Caller,
    id: String,
    lease: Option<LeaseBody>,
    f: impl FnOnce(&App, &str, Option<&Lease>) -> Result<Claimed, ApiError> + Send + 'static,
) -> Result<axum::Json<Value>, ApiError> {
    app.change(move |app| {
        let current = app.rt.execution(&id)?;
        // The agent's and every delegating agent's account (spec §3b).
        caller.host_of_all(current.accounts.iter().map(String::as_str))?;
        let lease = lease.map(|l| presented(&current.operation_key, l));
        Ok(axum::Json(execution_json(&f(app, &id, lease.as_ref())?)))
    })
    .await
}

/// The body of `POST /v1/executions/{id}/claim`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClaimBody {
    /// The host's claim token (unique per execution attempt; e.g. 32 random bytes in hex).
    token: String,
    /// The destination the host is about to use: it must be the approved one.
    #[serde(default)]
    destination: Option<String>,
    /// The covered version now, for a tool with `version P.F`: a change since the proposal is `stale`.
    #[serde(default)]
    covered_version: Option<String>,
    /// The version of the instructions the agent works under now: a change since the proposal is `stale`.
    #[serde(default)]
    instruction_version: Option<String>,
    /// The task's lease the host holds (spec §5a "Leases"), when the task is leased.
    #[serde(default)]
    lease: Option<LeaseBody>,
}

/// `POST /v1/executions/{id}/claim` (a host key for the agent).
pub(crate) async fn claim(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<ClaimBody>,
) -> Result<axum::Json<Value>, ApiError> {
    as_host(app, caller, id, body.lease, move |app, id, lease| {
        if id.starts_with("A-") {
            // An alone run was claimed by its call: the same token answers the same.
            let current = app.rt.execution(id)?;
            if current.claim_token.as_deref() == Some(body.token.as_str()) {
                return Ok(current);
            }
            return Err(ApiError::from(permits_runtime::RuntimeError::Refused {
                refusal: permits_runtime::Refusal::Claimed,
                message: format!("execution `{id}` is claimed with another claim token: nothing runs twice"),
            }));
        }
        let mut claimed =
            stating(Statement::version(body.covered_version, body.instruction_version), || match lease {
                Some(lease) => app.rt.holding(lease).claim(id, &body.token, body.destination.as_deref()),
                None => app.rt.claim(id, &body.token, body.destination.as_deref()),
            })?;
        // A `done` proposal answers any token with its stored receipt: the token that ran it stays its own.
        if claimed.claim_token.as_deref() != Some(body.token.as_str()) {
            claimed.claim_token = None;
        }
        Ok(claimed)
    })
    .await
}

/// The body of `POST /v1/executions/{id}/confirm`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfirmBody {
    /// The claim token.
    token: String,
    /// The task's lease the host holds, when the task is leased.
    #[serde(default)]
    lease: Option<LeaseBody>,
}

/// `POST /v1/executions/{id}/confirm`: the host's permissions admit the agent's account and the person
/// → `sending`; the host runs it now.
pub(crate) async fn confirm(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<ConfirmBody>,
) -> Result<axum::Json<Value>, ApiError> {
    as_host(app, caller, id, body.lease, move |app, id, lease| {
        Ok(match lease {
            Some(lease) => app.rt.holding(lease).confirm(id, &body.token)?,
            None => app.rt.confirm(id, &body.token)?,
        })
    })
    .await
}

/// Which account the host's permissions refused.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Principal {
    Agent,
    Person,
}

/// The body of `POST /v1/executions/{id}/refuse`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefuseBody {
    /// The claim token.
    token: String,
    /// `agent` (the agent's account) or `person` (the person it runs as).
    principal: Principal,
    /// What the host's permissions said ("only a manager may set a price").
    reason: String,
    /// The task's lease the host holds, when the task is leased.
    #[serde(default)]
    lease: Option<LeaseBody>,
}

/// `POST /v1/executions/{id}/refuse`: the host's permissions refused → `failed`, final.
pub(crate) async fn refuse(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<RefuseBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let refused = match body.principal {
        Principal::Agent => AuthorityRefusal::Agent,
        Principal::Person => AuthorityRefusal::Person,
    };
    as_host(app, caller, id, body.lease, move |app, id, lease| {
        Ok(match lease {
            Some(lease) => app.rt.holding(lease).refuse_claim(id, &body.token, refused, &body.reason)?,
            None => app.rt.refuse_claim(id, &body.token, refused, &body.reason)?,
        })
    })
    .await
}

/// What the host reports after running.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Done,
    Failed,
    Unknown,
}

/// The body of `POST /v1/executions/{id}/receipt`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReceiptBody {
    /// The claim token.
    token: String,
    /// `done` (it ran: `receipt` is stored), `failed` (it certainly did not take effect: `reason`) or
    /// `unknown` (started, outcome not confirmed: `reason`).
    outcome: Outcome,
    /// The receipt (any JSON), for `done`.
    #[serde(default)]
    receipt: Option<Value>,
    /// Why, for `failed` and `unknown`.
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/executions/{id}/receipt`: the outcome of a confirmed execution. A retry answers the same and
/// changes nothing. It takes no lease: what ran is recorded whoever holds the task now (an execution
/// admitted under a lease ran; refusing its report would only lose what happened), and settling it
/// afterwards needs the lease.
pub(crate) async fn receipt(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<ReceiptBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let outcome = match body.outcome {
        Outcome::Done => RunOutcome::Done(body.receipt.unwrap_or(Value::Null)),
        Outcome::Failed => RunOutcome::Failed(body.reason.unwrap_or_else(|| "the host reported a failure".into())),
        Outcome::Unknown => {
            RunOutcome::Unknown(body.reason.unwrap_or_else(|| "the host could not confirm the outcome".into()))
        }
    };
    as_host(app, caller, id, None, move |app, id, _| Ok(app.rt.record_outcome(id, &body.token, outcome)?)).await
}

/// The body of `POST /v1/settle`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SettleBody {
    /// The execution whose spend is settled: a proposal id (`P-3`) or an alone run's (`A-2`).
    holder: String,
    /// The other side's conclusive receipt: `{"operation", "amount", "outcome": "accepted" | "rejected"}`.
    receipt: Value,
    /// The task's lease the host holds, when the task is leased.
    #[serde(default)]
    lease: Option<LeaseBody>,
}

/// `POST /v1/settle` (a host key for the execution's agent): settles a spend that was sent (spec §6
/// "Settlement", §5a "Settlement follows a send"); answers the budget afterwards.
pub(crate) async fn settle(
    State(app): State<Arc<App>>,
    caller: Caller,
    Json(body): Json<SettleBody>,
) -> Result<axum::Json<Value>, ApiError> {
    app.change(move |app| {
        let current = app.rt.execution(&body.holder)?;
        caller.host_of_all(current.accounts.iter().map(String::as_str))?;
        let budget = match body.lease.map(|l| presented(&current.operation_key, l)) {
            Some(lease) => app.rt.holding(&lease).settle(&body.holder, &body.receipt)?,
            None => app.rt.settle(&body.holder, &body.receipt)?,
        };
        Ok(axum::Json(json!({"budget": budget})))
    })
    .await
}
