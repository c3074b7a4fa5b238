//! Proposals (spec §5 "Proposals" … "Expiry"): their status (long-polled, or as a stream of server-sent
//! events), withdrawal by the host, and the person-only decisions: approve, reject, revoke, resolve.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};
use permits_runtime::{ApproveMode, Principal, Proposal, Status};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{App, Caller};
use crate::body::{Json, Query};
use crate::error::ApiError;
use crate::keys::KeyKind;
use crate::stated::{Statement, stating};

/// The longest `?wait=SECONDS` a status request waits: a longer wait is cut to it.
pub(crate) const MAX_WAIT_SECONDS: u64 = 60;
/// How long an event stream lasts at most; the client reconnects for more.
const MAX_STREAM: Duration = Duration::from_secs(600);
/// How often a wait looks again without being woken (a proposal expiring on its own).
const RECHECK: Duration = Duration::from_secs(1);
/// The most proposals one `GET /v1/proposals` lists.
const MAX_LISTED: usize = 1000;

/// A proposal as the API shows it: the runtime's record, its claim token (`claim`) left out (it is the
/// claiming host's secret), and `answer`, what the agent is told as the tool's answer now.
pub(crate) fn proposal_json(p: &Proposal) -> Value {
    let mut value = serde_json::to_value(p).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        // `claim` is the claim token itself.
        object.remove("claim");
        object.insert("answer".into(), Value::String(p.answer_for_agent()));
    }
    value
}

/// The query of `GET /v1/proposals/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatusQuery {
    /// Wait up to this many seconds (at most [`MAX_WAIT_SECONDS`]) for the status to change.
    #[serde(default)]
    wait: Option<u64>,
    /// The status the caller knows: answer as soon as it is another (default: the status when asked).
    #[serde(default)]
    status: Option<Status>,
}

async fn read(app: &Arc<App>, caller: &Caller, id: &str) -> Result<Proposal, ApiError> {
    let id = id.to_string();
    let p = app.run(move |app| Ok(app.rt.proposal(&id)?)).await?;
    caller.may_read(&p.agent)?;
    Ok(p)
}

/// `GET /v1/proposals/{id}[?wait=SECONDS[&status=S]]`: the proposal now, or — with `wait` — as soon as its
/// status is not `status` (the status when asked, by default), or when the wait ends.
pub(crate) async fn status(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<StatusQuery>,
) -> Result<axum::Json<Value>, ApiError> {
    let mut changes = app.changes.subscribe();
    let first = read(&app, &caller, &id).await?;
    let Some(wait) = query.wait.filter(|w| *w > 0) else { return Ok(axum::Json(proposal_json(&first))) };
    let known = query.status.unwrap_or(first.status);
    if first.status != known {
        return Ok(axum::Json(proposal_json(&first)));
    }
    let deadline = Instant::now() + Duration::from_secs(wait.min(MAX_WAIT_SECONDS));
    loop {
        let next = (Instant::now() + RECHECK).min(deadline);
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(next) => {}
        }
        let now = read(&app, &caller, &id).await?;
        if now.status != known || Instant::now() >= deadline {
            return Ok(axum::Json(proposal_json(&now)));
        }
    }
}

/// `GET /v1/proposals/{id}/events`: a stream of server-sent events, `event: proposal` with the proposal's
/// JSON, first as it is and then at every change of its status, until it is final or `done` (or after ten
/// minutes: reconnect for more). A comment keeps the connection alive every 15 seconds.
pub(crate) async fn events(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let changes = app.changes.subscribe();
    let first = read(&app, &caller, &id).await?;
    let end = Instant::now() + MAX_STREAM;
    struct Watch {
        app: Arc<App>,
        caller: Caller,
        id: String,
        changes: tokio::sync::watch::Receiver<u64>,
        last: Option<Status>,
        first: Option<Proposal>,
        end: Instant,
        over: bool,
    }
    let state = Watch { app, caller, id, changes, last: None, first: Some(first), end, over: false };
    let stream = stream::unfold(state, |mut w| async move {
        if w.over {
            return None;
        }
        loop {
            let p = match w.first.take() {
                Some(p) => p,
                None => {
                    if Instant::now() >= w.end {
                        return None;
                    }
                    tokio::select! {
                        _ = w.changes.changed() => {}
                        _ = tokio::time::sleep_until((Instant::now() + RECHECK).min(w.end)) => {}
                    }
                    match read(&w.app, &w.caller, &w.id).await {
                        Ok(p) => p,
                        Err(e) => {
                            w.over = true;
                            let event = Event::default()
                                .event("error")
                                .data(json!({"error": {"code": e.code, "message": e.message}}).to_string());
                            return Some((Ok(event), w));
                        }
                    }
                }
            };
            if Some(p.status) == w.last {
                continue;
            }
            w.last = Some(p.status);
            w.over = p.status.is_final() || p.status == Status::Done;
            let event = Event::default().event("proposal").id(p.status.as_str()).data(proposal_json(&p).to_string());
            return Some((Ok(event), w));
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// The query of `GET /v1/proposals`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only proposals in this status.
    #[serde(default)]
    status: Option<Status>,
}

/// `GET /v1/proposals[?status=S]`: for a host key, its agents' proposals; for a person key, the `waiting`
/// proposals that person may decide now (their queue), or with a `status` other than `waiting` every
/// proposal in it (a person may read any proposal, [`Caller::may_read`]); oldest first, at most 1000.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> Result<axum::Json<Value>, ApiError> {
    let key = caller.0.clone();
    let listed = app
        .run(move |app| {
            let all = match (&key.kind, &key.person) {
                (KeyKind::Person, Some(person)) => match query.status {
                    None | Some(Status::Waiting) => app.rt.waiting_for(person)?,
                    Some(_) => app.rt.proposals()?,
                },
                (KeyKind::Host, _) => {
                    app.rt.proposals()?.into_iter().filter(|p| key.agents.contains(&p.agent)).collect()
                }
                _ => app.rt.proposals()?,
            };
            Ok(all
                .iter()
                .filter(|p| query.status.is_none_or(|s| s == p.status))
                .take(MAX_LISTED)
                .map(proposal_json)
                .collect::<Vec<_>>())
        })
        .await?;
    Ok(axum::Json(json!({"proposals": listed})))
}

/// `POST /v1/proposals/{id}/withdraw`: the agent (a host key for it) or the requester (their person key)
/// withdraws a `waiting` proposal.
pub(crate) async fn withdraw(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(_): Json<Empty>,
) -> Result<axum::Json<Value>, ApiError> {
    let key = caller.0.clone();
    app.change(move |app| {
        let p = match (&key.kind, &key.person) {
            (KeyKind::Person, Some(person)) => app.rt.withdraw(&id, Principal::Person(person))?,
            (KeyKind::Host, _) => {
                let p = app.rt.proposal(&id)?;
                Caller(key.clone()).host_of_chain(&p.agent, &p.via)?;
                app.rt.withdraw(&id, Principal::Agent(&p.agent))?
            }
            _ => return Err(ApiError::forbidden("host_only", "only the agent's host or the requester withdraws")),
        };
        Ok(axum::Json(proposal_json(&p)))
    })
    .await
}

/// An empty object: `{}` (a body is still required, so that a stray GET-like POST is refused clearly).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Empty {}

/// The body of `POST /v1/proposals/{id}/approve`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveBody {
    /// The fingerprint the person was shown.
    fingerprint: String,
    /// `once` (the default), `always_like_this` (a standing rule, any arguments),
    /// `always_these_arguments`, `for_this_task` (a task rule for these arguments, spec §5a) or
    /// `for_this_task_any_arguments`.
    #[serde(default)]
    mode: Mode,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    #[default]
    Once,
    AlwaysLikeThis,
    AlwaysTheseArguments,
    ForThisTask,
    ForThisTaskAnyArguments,
}

/// `POST /v1/proposals/{id}/approve` (a person key: the person approves as themselves).
///
/// When the proposal's host registered a version URL for the tool ([`crate::version_urls`]), the service
/// asks it first: a version other than the proposal's makes the approval `stale` (final), before the yes.
/// When it does not answer, the approval is made against the version the proposal was made with, and the
/// answer's `version_check` says so; the claim still rechecks the version the host states then.
pub(crate) async fn approve(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<ApproveBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let person = caller.person("approve")?;
    let mode = match body.mode {
        Mode::Once => ApproveMode::Once,
        Mode::AlwaysLikeThis => ApproveMode::AlwaysLikeThis,
        Mode::AlwaysTheseArguments => ApproveMode::AlwaysTheseArguments,
        Mode::ForThisTask => ApproveMode::ForThisTask { any_arguments: false },
        Mode::ForThisTaskAnyArguments => ApproveMode::ForThisTask { any_arguments: true },
    };
    let (p, check) = approve_as(&app, id, person, body.fingerprint, mode).await?;
    let mut answer = proposal_json(&p);
    if let (Some(check), Some(object)) = (check, answer.as_object_mut()) {
        object.insert("version_check".into(), check);
    }
    Ok(axum::Json(answer))
}

/// `person` approves proposal `id` of `fingerprint` in `mode`: the one approval of the API and of the inbox
/// (asking the host's version URL first, see [`approve`]). Answers the proposal and what the version URL
/// answered, if one was asked.
pub(crate) async fn approve_as(
    app: &Arc<App>,
    id: String,
    person: String,
    fingerprint: String,
    mode: ApproveMode,
) -> Result<(Proposal, Option<Value>), ApiError> {
    let read_id = id.clone();
    let recorded = app.run(move |app| Ok(app.rt.proposal(&read_id)?)).await?;
    // The host's URL is asked only for an approval that could be made: by a person who may decide, of
    // exactly what they were shown. Anyone else is refused by `approve` below, and asks nobody.
    let may = app.rt.may_decide(&recorded, &person).is_ok() && fingerprint == recorded.fingerprint;
    let check = if may { version_check(app, &recorded).await } else { None };
    // A person cannot know the subject's version: the host's URL is asked; without one (or without an
    // answer) the version the proposal was made with is stated, and a changed subject is caught at the
    // claim (see `stated`).
    let version = match &check {
        Some(VersionCheck { answered: Some(version), .. }) => Some(version.clone()),
        _ => recorded.covered_version.clone(),
    };
    let outcome = app
        .change(move |app| {
            let statement = Statement::version(version, recorded.instruction_version);
            Ok(stating(statement, || app.rt.approve(&id, &person, &fingerprint, mode))?)
        })
        .await;
    if let Some(check) = &check {
        let label = match (&check.answered, &outcome) {
            (None, _) => "unanswered",
            (Some(_), Err(e)) if e.code == "stale" => "changed",
            (Some(_), _) => "same",
        };
        app.metrics.version_check(label);
    }
    Ok((outcome?, check.map(|c| c.json())))
}

/// What a version URL answered at approval.
struct VersionCheck {
    url: String,
    /// The version it answered, or `None` when it did not answer (`why`).
    answered: Option<String>,
    why: Option<String>,
    /// The version the proposal was made with.
    proposed: Option<String>,
}

impl VersionCheck {
    fn json(&self) -> Value {
        match &self.answered {
            Some(version) => json!({"url": self.url, "outcome": "same", "version": version}),
            None => json!({
                "url": self.url,
                "outcome": "unanswered",
                "version": self.proposed,
                "message": format!(
                    "the version URL did not answer ({}): approved against the version the proposal was made with; the claim rechecks it",
                    self.why.as_deref().unwrap_or("no answer")
                ),
            }),
        }
    }
}

/// Asks the version URL registered for the proposal's tool, if there is one and the tool has a version.
async fn version_check(app: &Arc<App>, p: &Proposal) -> Option<VersionCheck> {
    if !matches!(p.status, Status::Waiting | Status::Granted) {
        return None;
    }
    let table = app.rt.table();
    let version = table.tools.get(&p.tool)?.version.clone()?;
    let entity = table.tools.get(&p.tool)?.params.iter().find(|q| q.name == version.param).and_then(|q| match &q.ty {
        permits_runtime::table::ParamType::Entity(e) => Some(e.clone()),
        _ => None,
    });
    let (agent, tool) = (p.agent.clone(), p.tool.clone());
    let registration = app.run(move |app| Ok(app.versions.find(&agent, &tool).ok().flatten())).await.ok()??;
    let question = json!({
        "agent": p.agent, "tool": p.tool, "proposal": p.id, "param": version.param, "entity": entity,
        "id": p.arguments.get(&version.param), "field": version.field,
    });
    let (answered, why) = match app.versions.ask(&registration.url, &question).await {
        Ok(v) => (Some(v), None),
        Err(why) => (None, Some(why)),
    };
    Some(VersionCheck { url: registration.url, answered, why, proposed: p.covered_version.clone() })
}

/// The body of `POST /v1/proposals/{id}/reject`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RejectBody {
    /// Why: given back to the agent as the tool's answer; must contain a visible character. A missing one
    /// is the runtime's refusal of a blank one (422 `reason_required`), not a body that does not fit.
    #[serde(default)]
    reason: String,
}

/// `POST /v1/proposals/{id}/reject` (a person key).
pub(crate) async fn reject(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<RejectBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let person = caller.person("reject")?;
    app.change(move |app| Ok(axum::Json(proposal_json(&app.rt.reject(&id, &person, &body.reason)?)))).await
}

/// The body of `POST /v1/proposals/{id}/revoke`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevokeBody {
    /// Why.
    #[serde(default)]
    why: String,
}

/// `POST /v1/proposals/{id}/revoke` (a person key: a decider of the proposal or a supervisor).
pub(crate) async fn revoke(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<RevokeBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let person = caller.person("revoke")?;
    app.change(move |app| Ok(axum::Json(proposal_json(&app.rt.revoke(&id, &person, &body.why)?)))).await
}

/// The body of `POST /v1/proposals/{id}/resolve`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResolveBody {
    /// A conclusive receipt: `{"operation": "KEY:P-n", "outcome": "accepted" | "rejected", …}`.
    receipt: Value,
}

/// `POST /v1/proposals/{id}/resolve` (a person key: a supervisor).
pub(crate) async fn resolve(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<ResolveBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let person = caller.person("resolve")?;
    app.change(move |app| Ok(axum::Json(proposal_json(&app.rt.resolve(&id, &person, &body.receipt)?)))).await
}
