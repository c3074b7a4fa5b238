//! The service itself: health, metrics, the OpenAPI document, the audit, and installing a table.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use permits_runtime::table::Table;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{App, Caller};
use crate::body::{MAX_TABLE_BODY, Query, read_bounded};
use crate::error::ApiError;
use crate::keys::KeyKind;

/// The most events one `GET /v1/audit` returns.
const MAX_EVENTS: usize = 1000;

/// `GET /healthz` (no key): the service answers, with the table in force.
pub(crate) async fn health(State(app): State<Arc<App>>) -> axum::Json<Value> {
    let table = app.rt.table();
    axum::Json(json!({"ok": true, "table_digest": table.header.table_digest, "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /metrics` (no key: bind the service to loopback or a private network): Prometheus text.
pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let (proposals, budgets) = app
        .run(|app| {
            let mut by_status = BTreeMap::new();
            for p in app.rt.proposals()? {
                *by_status.entry(p.status.to_string()).or_insert(0u64) += 1;
            }
            Ok((by_status, app.rt.budgets()?))
        })
        .await?;
    let text = app.metrics.render(&proposals, &budgets, app.audit.failures());
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}

/// `GET /v1/openapi.json` (no key).
pub(crate) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], crate::OPENAPI).into_response()
}

/// The query of `GET /v1/audit`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    /// Events numbered after this one (0: from the first kept).
    #[serde(default)]
    after: u64,
    /// At most this many (at most 1000; 100 by default).
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /v1/audit?after=N&limit=M` (a person or admin key): the audit events, numbered, oldest first.
pub(crate) async fn audit(
    State(app): State<Arc<App>>,
    caller: Caller,
    Query(query): Query<AuditQuery>,
) -> Result<axum::Json<Value>, ApiError> {
    if caller.0.kind == KeyKind::Host {
        return Err(ApiError::forbidden("person_only", "the audit is read with a person's or an admin's key"));
    }
    let (events, last) = app.audit.after(query.after, query.limit.unwrap_or(100).min(MAX_EVENTS));
    let events: Vec<Value> = events.into_iter().map(|(n, e)| json!({"n": n, "event": e})).collect();
    Ok(axum::Json(json!({"events": events, "last": last})))
}

/// `GET /v1/audit/verify`: 501 until the store keeps the audit as a hash chain (issue #14).
pub(crate) async fn verify(_caller: Caller) -> ApiError {
    ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        "not_implemented",
        "the audit is not a hash chain in the store yet (issue #14): there is nothing to verify",
    )
}

/// `POST /v1/admin/table` (an admin key): the body is a table (as `permitc compile` writes it); it is
/// installed through the same checks as a reload on `SIGHUP`, and a refused one leaves the table in force.
pub(crate) async fn install(
    State(app): State<Arc<App>>,
    caller: Caller,
    request: Request,
) -> Result<axum::Json<Value>, ApiError> {
    caller.admin()?;
    let bytes = read_bounded(request, MAX_TABLE_BODY).await?;
    let digest = app.run(move |app| app.install(&bytes)).await?;
    Ok(axum::Json(json!({"table_digest": digest})))
}

impl App {
    /// Installs a table from its bytes: loaded and verified as the runtime loads one (format, digest,
    /// unknown fields), then swapped in with `Runtime::replace_table`; when either refuses, the table in
    /// force stays. Signatures, serials and rollback are checked by `replace_table` once the runtime has
    /// them (issue #14); this goes through it unchanged.
    pub(crate) fn install(&self, bytes: &[u8]) -> Result<String, ApiError> {
        let _one = self.installing.lock().unwrap_or_else(PoisonError::into_inner);
        let table = match Table::load(bytes) {
            Ok(table) => table,
            Err(e) => {
                self.metrics.reload("refused");
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "table_refused",
                    format!("the table was refused, the one in force stays: {e}"),
                ));
            }
        };
        let digest = table.header.table_digest.clone();
        self.rt.replace_table(table);
        self.metrics.reload("installed");
        Ok(digest)
    }
}
