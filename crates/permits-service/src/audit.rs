//! The host sink of the service's runtime (spec §5 "Audit": events are kept in the store's chain and
//! handed to a host sink): each event, once committed, appended as one JSON line to a file beside the
//! store, for a log shipper to tail. The chain in the store is the record (`GET /v1/audit`, `GET
//! /v1/audit/verify`); this file is a copy.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use permits_runtime::{AuditEvent, AuditSink};

/// The JSON-lines copy of the audit.
#[derive(Debug)]
pub(crate) struct AuditLog {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    file: File,
    /// Events that could not be written to the file.
    failures: u64,
}

impl AuditLog {
    /// Opens (or creates) the file, to append to it.
    pub(crate) fn open(path: &Path) -> Result<AuditLog, String> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open the audit log `{}`: {e}", path.display()))?;
        Ok(AuditLog { inner: Mutex::new(Inner { file, failures: 0 }) })
    }

    /// How many events could not be written to the file.
    pub(crate) fn failures(&self) -> u64 {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).failures
    }
}

/// The runtime's audit sink in the service.
#[derive(Clone, Debug)]
pub(crate) struct Sink(pub(crate) Arc<AuditLog>);

impl AuditSink for Sink {
    fn record(&self, event: &AuditEvent) {
        let mut line = serde_json::to_string(event).unwrap_or_default();
        line.push('\n');
        let mut inner = self.0.inner.lock().unwrap_or_else(PoisonError::into_inner);
        // One `write` of the whole line to a file opened to append: another process appending to the same
        // copy (the MCP gateway's lane, `permits_mcp::lane`) never splits it.
        let written = inner.file.write_all(line.as_bytes());
        if written.is_err() {
            inner.failures += 1;
        }
    }
}
