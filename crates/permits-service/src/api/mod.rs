//! The routes, one file per family (offer, calls, proposals, executions, tasks, rules and budgets, the
//! service itself), each route one call of the runtime on tokio's blocking pool
//! ([`App::run`]). Who may call what is decided here, from the caller's key ([`Caller`]); what the call
//! means is the runtime's.

mod admin;
mod calls;
mod executions;
mod offer;
mod proposals;
mod rules;
mod tasks;
mod version_urls;

pub(crate) use proposals::approve_as;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use permits_runtime::Runtime;
use tokio::sync::watch;

use crate::audit::AuditLog;
use crate::error::ApiError;
use crate::keys::{Key, KeyKind, KeyStore};
use crate::metrics::Metrics;
use crate::version_urls::VersionUrls;

/// How the ledger commits, as SQLite reads it back at startup (shown by `/healthz`).
#[derive(Clone, Debug)]
pub(crate) struct Storage {
    /// `wal` for a file.
    pub(crate) journal_mode: String,
    /// `FULL` or `NORMAL` (`--sync`).
    pub(crate) synchronous: &'static str,
}

/// The service's state, shared by every request.
pub(crate) struct App {
    pub(crate) rt: Runtime,
    pub(crate) keys: KeyStore,
    /// The version URLs hosts registered, asked at approval.
    pub(crate) versions: VersionUrls,
    /// How the ledger commits.
    pub(crate) storage: Storage,
    pub(crate) metrics: Metrics,
    pub(crate) audit: Arc<AuditLog>,
    /// The table file `SIGHUP` reads again.
    pub(crate) table_path: PathBuf,
    /// Bumped after every operation that may change a proposal: long polls and event streams wake on it.
    pub(crate) changes: watch::Sender<u64>,
    /// One table install at a time.
    pub(crate) installing: Mutex<()>,
    /// The inbox's settings and its sign-in throttle.
    pub(crate) inbox: crate::inbox::Inbox,
    /// The webhooks new proposals are announced to.
    pub(crate) webhooks: crate::webhooks::Webhooks,
}

impl App {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        rt: Runtime,
        keys: KeyStore,
        versions: VersionUrls,
        storage: Storage,
        audit: Arc<AuditLog>,
        table_path: PathBuf,
        inbox: crate::inbox::Inbox,
        webhooks: crate::webhooks::Webhooks,
    ) -> App {
        App {
            rt,
            keys,
            versions,
            storage,
            metrics: Metrics::default(),
            audit,
            table_path,
            changes: watch::Sender::new(0),
            installing: Mutex::new(()),
            inbox,
            webhooks,
        }
    }

    /// Runs `f` (runtime calls: they block on the store), timing it. On the service's multi-threaded async
    /// runtime it runs on the request's own worker, which hands its other tasks to another thread first
    /// (`block_in_place`): no hop to the blocking pool and back on the path of every call (measured in
    /// BENCHMARKS.md); elsewhere on the blocking pool. A panic inside `f` is an internal error answered
    /// without its message (no stack trace leaves the service), as the blocking pool's would be.
    pub(crate) async fn run<R: Send + 'static>(
        self: &Arc<App>,
        f: impl FnOnce(&App) -> Result<R, ApiError> + Send + 'static,
    ) -> Result<R, ApiError> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        let failed = || ApiError::internal("the operation failed inside the service; nothing more is known");
        let started = Instant::now();
        let result = match Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))).map_err(|_| failed())
            })?,
            _ => {
                let app = self.clone();
                tokio::task::spawn_blocking(move || f(&app)).await.map_err(|_| failed())?
            }
        };
        self.metrics.operation(started.elapsed());
        result
    }

    /// [`App::run`] for an operation that may change a proposal, an execution or a rule: long polls and
    /// event streams are woken after it, whatever it answered.
    pub(crate) async fn change<R: Send + 'static>(
        self: &Arc<App>,
        f: impl FnOnce(&App) -> Result<R, ApiError> + Send + 'static,
    ) -> Result<R, ApiError> {
        let result = self.run(f).await;
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
        result
    }
}

/// Every route.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/healthz", get(admin::health))
        .route("/metrics", get(admin::metrics))
        .route("/v1/openapi.json", get(admin::openapi))
        .route("/v1/table", get(offer::table))
        .route("/v1/agents/{agent}/skills/{skill}/tools", get(offer::tools))
        .route("/v1/decide", post(calls::decide))
        .route("/v1/calls", post(calls::call))
        .route("/v1/proposals", get(proposals::list))
        .route("/v1/proposals/{id}", get(proposals::status))
        .route("/v1/proposals/{id}/events", get(proposals::events))
        .route("/v1/proposals/{id}/withdraw", post(proposals::withdraw))
        .route("/v1/proposals/{id}/approve", post(proposals::approve))
        .route("/v1/proposals/{id}/reject", post(proposals::reject))
        .route("/v1/proposals/{id}/revoke", post(proposals::revoke))
        .route("/v1/proposals/{id}/resolve", post(proposals::resolve))
        .route("/v1/executions/{id}", get(executions::status))
        .route("/v1/executions/{id}/claim", post(executions::claim))
        .route("/v1/executions/{id}/confirm", post(executions::confirm))
        .route("/v1/executions/{id}/refuse", post(executions::refuse))
        .route("/v1/executions/{id}/receipt", post(executions::receipt))
        .route("/v1/settle", post(executions::settle))
        .route("/v1/tasks/{key}", get(tasks::task))
        .route("/v1/tasks/{key}/end", post(tasks::end))
        .route("/v1/tasks/{key}/lease", get(tasks::lease).post(tasks::take))
        .route("/v1/tasks/{key}/lease/renew", post(tasks::renew))
        .route("/v1/tasks/{key}/lease/release", post(tasks::release))
        .route("/v1/rules", get(rules::list).post(rules::allow_alone))
        .route("/v1/rules/{id}/revoke", post(rules::revoke))
        .route("/v1/budgets", get(rules::budgets))
        .route("/v1/budgets/{name}", get(rules::budget))
        .route("/v1/budgets/{name}/raise", post(rules::raise))
        .route("/v1/version-urls", get(version_urls::list).post(version_urls::register))
        .route("/v1/version-urls/remove", post(version_urls::remove))
        .route("/v1/audit", get(admin::audit))
        .route("/v1/audit/verify", get(admin::verify))
        .route("/v1/admin/table", post(admin::install))
        .merge(crate::inbox::router())
        .fallback(not_found)
        .method_not_allowed_fallback(not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), count))
        .with_state(app)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route: see /v1/openapi.json")
}

async fn not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take this method")
}

/// Counts every answer by route (its template, `/v1/proposals/{id}`) and status.
async fn count(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |m| m.as_str()).to_string();
    let response = next.run(request).await;
    app.metrics.request(&route, response.status().as_u16());
    response
}

/// The caller: the key of the request's `Authorization: Bearer` token.
pub(crate) struct Caller(pub(crate) Key);

impl FromRequestParts<Arc<App>> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Caller, Response> {
        let unauthorized = |message: &str| {
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            response
        };
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            return Err(unauthorized("this route needs a key: `Authorization: Bearer permits_…`"));
        };
        let Some(token) = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) else {
            return Err(unauthorized("the `Authorization` header is not `Bearer permits_…`"));
        };
        match app.keys.find(token.trim()) {
            Ok(Some(key)) => Ok(Caller(key)),
            Ok(None) => Err(unauthorized("this key is unknown or revoked")),
            // In the runtime's words for a store error (`RuntimeError::Store`): the same answer whichever
            // connection failed.
            Err(e) => Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store", format!("the store failed: {e}"))
                .into_response()),
        }
    }
}

impl Caller {
    /// A host key that acts for `agent`.
    pub(crate) fn host_of(&self, agent: &str) -> Result<(), ApiError> {
        match self.0.kind {
            KeyKind::Host if self.0.agents.iter().any(|a| a == agent) => Ok(()),
            KeyKind::Host => Err(ApiError::forbidden(
                "not_your_agent",
                format!(
                    "key `{}` is a host key for {}, not for `{agent}`",
                    self.0.id,
                    self.0.agents.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")
                ),
            )),
            _ => Err(ApiError::forbidden(
                "host_only",
                format!(
                    "key `{}` is a {} key: only a host key for the agent does this",
                    self.0.id,
                    self.0.kind.as_str()
                ),
            )),
        }
    }

    /// A host key, for any agents: `what` is what only a host does ("take a task's lease").
    pub(crate) fn host_key(&self, what: &str) -> Result<(), ApiError> {
        match self.0.kind {
            KeyKind::Host => Ok(()),
            kind => Err(ApiError::forbidden(
                "host_only",
                format!("only a host key may {what}: key `{}` is a {} key", self.0.id, kind.as_str()),
            )),
        }
    }

    /// The person a person key acts as. Every route that decides for a person takes one: a host key never
    /// approves, rejects, revokes, resolves or makes a rule.
    pub(crate) fn person(&self, what: &str) -> Result<String, ApiError> {
        match (&self.0.kind, &self.0.person) {
            (KeyKind::Person, Some(person)) => Ok(person.clone()),
            _ => Err(ApiError::forbidden(
                "person_only",
                format!(
                    "only a person's key may {what}: key `{}` is a {} key, and a host never decides for a person",
                    self.0.id,
                    self.0.kind.as_str()
                ),
            )),
        }
    }

    /// An admin key.
    pub(crate) fn admin(&self) -> Result<(), ApiError> {
        match self.0.kind {
            KeyKind::Admin => Ok(()),
            kind => Err(ApiError::forbidden(
                "admin_only",
                format!("only an admin key installs a table: key `{}` is a {} key", self.0.id, kind.as_str()),
            )),
        }
    }

    /// A host key that acts for `agent` and for every delegating agent of its chain `via` (spec §3b): a
    /// delegated call spends its root's task, person and per-task amounts, so a host for the child alone
    /// may not make it.
    pub(crate) fn host_of_chain(&self, agent: &str, via: &[permits_runtime::table::ChainLink]) -> Result<(), ApiError> {
        self.host_of_all(std::iter::once(agent).chain(via.iter().map(|l| l.agent.as_str())))
    }

    /// A host key that acts for every one of `agents`.
    pub(crate) fn host_of_all<'a>(&self, agents: impl IntoIterator<Item = &'a str>) -> Result<(), ApiError> {
        agents.into_iter().try_for_each(|a| self.host_of(a))
    }

    /// Whether the caller may read what concerns `agent`: its host, any person, an admin.
    pub(crate) fn may_read(&self, agent: &str) -> Result<(), ApiError> {
        match self.0.kind {
            KeyKind::Host => self.host_of(agent),
            KeyKind::Person | KeyKind::Admin => Ok(()),
        }
    }
}
