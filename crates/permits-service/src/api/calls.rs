//! Decide and call (spec §5 "Decide", "Execution admission", "Proposals"): a call `alone` becomes an
//! execution to run (claimed with the request's claim token), `propose` a proposal, `never` a refusal.

use std::sync::Arc;

use axum::extract::State;
use permits_runtime::table::ChainLink;
use permits_runtime::{Call, CallClaim, Claiming, Evidence, ProposalRequest};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::proposals::proposal_json;
use super::tasks::{LeaseBody, presented};
use super::{App, Caller};
use crate::body::Json;
use crate::error::ApiError;
use crate::stated::{Statement, stating};

/// The call of `POST /v1/decide`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideBody {
    agent: String,
    skill: String,
    tool: String,
    /// The call's arguments: an object (absent: `{}`); anything else is a body that does not fit.
    #[serde(default)]
    arguments: Map<String, Value>,
    #[serde(default)]
    requester: Option<String>,
    /// The mode the call is made in (spec §3c); none for no mode.
    #[serde(default)]
    mode: Option<String>,
    /// The delegation chain (spec §3b), nearest first, root last, as proposals show it; empty for a direct
    /// call.
    #[serde(default)]
    via: Vec<ChainLink>,
}

/// The call of `POST /v1/calls`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallBody {
    agent: String,
    skill: String,
    tool: String,
    /// The call's arguments: an object (absent: `{}`); anything else is a body that does not fit.
    #[serde(default)]
    arguments: Map<String, Value>,
    #[serde(default)]
    requester: Option<String>,
    /// The mode the call is made in (spec §3c); the task's first call binds it, and a later call of the
    /// task in another mode (or none) is `never`.
    #[serde(default)]
    mode: Option<String>,
    /// The delegation chain (spec §3b), nearest first, root last; empty for a direct call. A link that is
    /// not a declared delegation makes the call `never`.
    #[serde(default)]
    via: Vec<ChainLink>,
    operation_key: String,
    claim_token: String,
    /// The host checked its own permissions before the call, or has none to check: an alone call is
    /// claimed and confirmed in one transaction (`Runtime::claim_alone_confirmed`), answered `sending`.
    #[serde(default)]
    confirm: bool,
    #[serde(default)]
    why: String,
    #[serde(default)]
    evidence: Vec<EvidenceBody>,
    #[serde(default)]
    destination: Option<String>,
    #[serde(default)]
    covered_version: Option<String>,
    #[serde(default)]
    shown: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    instruction_version: Option<String>,
    #[serde(default)]
    lifetime_seconds: Option<u64>,
    /// The task's lease the host holds (spec §5a "Leases"): while the task `operation_key` is leased,
    /// only a call presenting its current lease is made.
    #[serde(default)]
    lease: Option<LeaseBody>,
}

/// One item of evidence: a tool run before, and what it returned.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EvidenceBody {
    tool: String,
    /// The call's arguments: an object (absent: `{}`); anything else is a body that does not fit.
    #[serde(default)]
    arguments: Map<String, Value>,
    answer: Value,
}

/// The triple, arguments, person and mode of a request body.
struct CallParts {
    agent: String,
    skill: String,
    tool: String,
    arguments: Value,
    requester: Option<String>,
    mode: Option<String>,
    via: Vec<ChainLink>,
}

fn call_of(parts: CallParts) -> Call {
    let mut call = Call::new(parts.agent, parts.skill, parts.tool).with_arguments(parts.arguments);
    call.requester = parts.requester;
    call.mode = parts.mode;
    call.via = parts.via;
    call
}

/// `POST /v1/decide`: the decision for one call, standing rules included (recorded in the audit).
pub(crate) async fn decide(
    State(app): State<Arc<App>>,
    caller: Caller,
    Json(body): Json<DecideBody>,
) -> Result<axum::Json<Value>, ApiError> {
    caller.host_of_chain(&body.agent, &body.via)?;
    let call = call_of(CallParts {
        agent: body.agent,
        skill: body.skill,
        tool: body.tool,
        arguments: Value::Object(body.arguments),
        requester: body.requester,
        mode: body.mode,
        via: body.via,
    });
    let decision = app.run(move |app| Ok(app.rt.decide(&call)?)).await?;
    app.metrics.decision(decision.level);
    Ok(axum::Json(serde_json::to_value(&decision).map_err(|e| ApiError::internal(e.to_string()))?))
}

/// `POST /v1/calls`: one tool call of the agent. `alone` → `{"outcome": "alone", "execution"}`: admitted
/// and claimed with `claim_token` (a retry with the same token answers the same); the host confirms or
/// refuses it (or, with `"confirm": true`, it is confirmed in the same transaction), runs it, and reports
/// the receipt. `propose` / `propose_every_time` → `{"outcome":
/// "proposed", "proposal"}` (a retry under the same operation key is the same proposal). `never` → 403 with
/// the reason, and nothing is made.
pub(crate) async fn call(
    State(app): State<Arc<App>>,
    caller: Caller,
    Json(body): Json<CallBody>,
) -> Result<axum::Json<Value>, ApiError> {
    caller.host_of_chain(&body.agent, &body.via)?;
    let call = call_of(CallParts {
        agent: body.agent,
        skill: body.skill,
        tool: body.tool,
        arguments: Value::Object(body.arguments),
        requester: body.requester,
        mode: body.mode,
        via: body.via,
    });
    let request = ProposalRequest {
        call,
        operation_key: body.operation_key,
        why: body.why,
        evidence: body
            .evidence
            .into_iter()
            .map(|e| Evidence { tool: e.tool, arguments: Value::Object(e.arguments), answer: e.answer })
            .collect(),
        destination: body.destination,
        lifetime_seconds: body.lifetime_seconds,
    };
    let token = body.claim_token;
    let confirm = body.confirm;
    let lease = body.lease.map(|l| presented(&request.operation_key, l));
    let statement =
        Statement { version: body.covered_version, shown: body.shown, instruction_version: body.instruction_version };
    let metrics_app = app.clone();
    let (answer, proposed) = app
        .change(move |app| {
            // As `Runtime::call`: decide, then run alone, propose, or refuse. An alone call is decided and
            // claimed in one transaction (`Runtime::decide_and_claim`).
            let claiming = if confirm { Claiming::ClaimAndConfirm } else { Claiming::Claim };
            let decided = match &lease {
                Some(lease) => app.rt.holding(lease).decide_and_claim(&request, &token, claiming)?,
                None => app.rt.decide_and_claim(&request, &token, claiming)?,
            };
            let answer = match decided {
                CallClaim::Alone { decision, execution } => {
                    metrics_app.metrics.decision(decision.level);
                    json!({"outcome": "alone", "decision": decision, "execution": execution})
                }
                CallClaim::Never(decision) => {
                    metrics_app.metrics.decision(decision.level);
                    return Err(ApiError::from(permits_runtime::RuntimeError::Refused {
                        refusal: permits_runtime::Refusal::Never,
                        message: decision.refusal_message(),
                    }));
                }
                CallClaim::Propose(decision) => {
                    metrics_app.metrics.decision(decision.level);
                    let proposal = stating(statement, || match &lease {
                        Some(lease) => app.rt.holding(lease).propose(&request),
                        None => app.rt.propose(&request),
                    })?;
                    let answer =
                        json!({"outcome": "proposed", "decision": decision, "proposal": proposal_json(&proposal)});
                    return Ok((axum::Json(answer), Some(proposal)));
                }
            };
            Ok((axum::Json(answer), None))
        })
        .await?;
    // A new proposal is announced to its webhooks (once: `webhooks::notify` keeps which were).
    if let Some(proposal) = proposed {
        crate::webhooks::notify(&app, proposal);
    }
    Ok(answer)
}
