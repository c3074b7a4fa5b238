//! The service itself: health, metrics, the OpenAPI document, the audit, and installing a table.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use permits_runtime::table::Table;
use permits_runtime::{ChainedEvent, TableSignature, verify_chain};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{App, Caller};
use crate::body::{MAX_TABLE_BODY, Query, read_bounded};
use crate::error::ApiError;
use crate::keys::KeyKind;

/// The most events one `GET /v1/audit` returns.
const MAX_EVENTS: usize = 1000;

/// `GET /healthz` (no key): the service answers, with the table in force and how the ledger commits.
pub(crate) async fn health(State(app): State<Arc<App>>) -> axum::Json<Value> {
    let table = app.rt.table();
    axum::Json(json!({
        "ok": true,
        "table_digest": table.header.table_digest,
        "version": env!("CARGO_PKG_VERSION"),
        "store": {"journal_mode": app.storage.journal_mode, "synchronous": app.storage.synchronous},
    }))
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
    /// Events after this place in the chain (0: from the first).
    #[serde(default)]
    after: u64,
    /// At most this many (at most 1000; 100 by default).
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /v1/audit?after=SEQ&limit=N` (a person or admin key): the store's audit chain (spec §5a), oldest
/// first: each event with its place, the hash of the one before and its own; and the chain's head.
pub(crate) async fn audit(
    State(app): State<Arc<App>>,
    caller: Caller,
    Query(query): Query<AuditQuery>,
) -> Result<axum::Json<Value>, ApiError> {
    reader_of_the_audit(&caller)?;
    let limit = query.limit.unwrap_or(100).min(MAX_EVENTS);
    let (events, head) = app
        .run(move |app| {
            let chain = app.rt.audit_chain()?;
            let head = chain.last().map(|e| json!({"seq": e.seq, "hash": e.hash}));
            let events: Vec<ChainedEvent> = chain.into_iter().filter(|e| e.seq > query.after).take(limit).collect();
            Ok((events, head))
        })
        .await?;
    Ok(axum::Json(json!({"events": events, "head": head})))
}

fn reader_of_the_audit(caller: &Caller) -> Result<(), ApiError> {
    if caller.0.kind == KeyKind::Host {
        return Err(ApiError::forbidden("person_only", "the audit is read with a person's or an admin's key"));
    }
    Ok(())
}

/// `GET /v1/audit/verify` (a person or admin key): checks the store's audit chain — every event in place,
/// linked to the one before, unchanged since written — and answers its head; a broken chain is a 409.
pub(crate) async fn verify(State(app): State<Arc<App>>, caller: Caller) -> Result<axum::Json<Value>, ApiError> {
    reader_of_the_audit(&caller)?;
    app.run(|app| {
        let chain = app.rt.audit_chain()?;
        match verify_chain(&chain, None) {
            Ok(head) => Ok(axum::Json(json!({
                "ok": true,
                "events": chain.len(),
                "head": head.map(|h| json!({"seq": h.seq, "hash": h.hash})),
            }))),
            Err(e) => Err(ApiError::new(
                StatusCode::CONFLICT,
                "chain_broken",
                format!("the audit chain does not verify: {e}"),
            )),
        }
    })
    .await
}

/// `POST /v1/admin/table` (an admin key): the body is a table as `permitc compile` writes it, or
/// `{"table": TABLE, "signature": SIGNATURE}` for a signed one (the `.sig` file's contents); it is installed
/// through the same checks as a reload on `SIGHUP`, and a refused one leaves the table in force.
pub(crate) async fn install(
    State(app): State<Arc<App>>,
    caller: Caller,
    request: Request,
) -> Result<axum::Json<Value>, ApiError> {
    caller.admin()?;
    let bytes = read_bounded(request, MAX_TABLE_BODY).await?;
    let digest = app
        .run(move |app| {
            let signed = serde_json::from_slice::<Value>(&bytes)
                .is_ok_and(|v| v.get("table").is_some() && v.get("header").is_none());
            if signed {
                let envelope: Envelope = crate::body::parse(&bytes)?;
                app.install(envelope.table.to_string().as_bytes(), envelope.signature)
            } else {
                app.install(&bytes, None)
            }
        })
        .await?;
    Ok(axum::Json(json!({"table_digest": digest})))
}

/// A signed table, posted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    table: Value,
    #[serde(default)]
    signature: Option<TableSignature>,
}

impl App {
    /// Installs a table from its bytes: loaded and verified as the runtime loads one (format, digest,
    /// unknown fields), then installed with `Runtime::replace_table` (or `replace_table_signed`): the
    /// signature against the trusted keys, the serial against rollback, one current table per store (spec
    /// §5a), every refusal audited by the runtime. When either refuses, the table in force stays.
    pub(crate) fn install(&self, bytes: &[u8], signature: Option<TableSignature>) -> Result<String, ApiError> {
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
        let installed = match signature {
            Some(signature) => self.rt.replace_table_signed(table, signature),
            None => self.rt.replace_table(table),
        };
        if let Err(e) = installed {
            self.metrics.reload("refused");
            let message = format!("the table was refused, the one in force stays: {e}");
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "table_refused", message));
        }
        self.metrics.reload("installed");
        Ok(digest)
    }
}
