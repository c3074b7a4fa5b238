//! The audit events of the runtime (spec §5 "Audit"), as the service keeps them until the store's own hash
//! chain (issue #14) holds them: each event appended as one JSON line to a file beside the store (flushed
//! per event) and numbered from 1 in the file's order; the last [`KEPT`] are kept in memory for
//! `GET /v1/audit`, reloaded from the file when the service starts.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use permits_runtime::{AuditEvent, AuditSink};
use serde_json::Value;

/// How many of the latest events `GET /v1/audit` can return.
pub(crate) const KEPT: usize = 100_000;

/// The audit log: the file and the latest events.
#[derive(Debug)]
pub(crate) struct AuditLog {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    file: File,
    /// The latest events with their numbers, oldest first.
    latest: VecDeque<(u64, Value)>,
    /// The number of the last event.
    last: u64,
    /// Events that could not be written to the file.
    failures: u64,
}

impl AuditLog {
    /// Opens (or creates) the file, reading back the numbers and the latest events.
    pub(crate) fn open(path: &Path) -> Result<AuditLog, String> {
        let mut latest = VecDeque::new();
        let mut last = 0;
        if let Ok(existing) = File::open(path) {
            for line in BufReader::new(existing).lines() {
                let line = line.map_err(|e| format!("cannot read the audit log `{}`: {e}", path.display()))?;
                last += 1;
                // A line that does not decode (a torn last write) keeps its number and is shown as text.
                let event = serde_json::from_str(&line).unwrap_or(Value::String(line));
                latest.push_back((last, event));
                if latest.len() > KEPT {
                    latest.pop_front();
                }
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open the audit log `{}`: {e}", path.display()))?;
        Ok(AuditLog { inner: Mutex::new(Inner { file, latest, last, failures: 0 }) })
    }

    /// The events numbered after `after`, at most `limit` of them, and the number of the last event.
    pub(crate) fn after(&self, after: u64, limit: usize) -> (Vec<(u64, Value)>, u64) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let events = inner.latest.iter().filter(|(n, _)| *n > after).take(limit).cloned().collect();
        (events, inner.last)
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
        let value = serde_json::to_value(event).unwrap_or(Value::Null);
        let mut inner = self.0.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let line = value.to_string();
        let written = inner.file.write_all(line.as_bytes()).and_then(|()| inner.file.write_all(b"\n"));
        if written.is_err() {
            inner.failures += 1;
        }
        inner.last += 1;
        let n = inner.last;
        inner.latest.push_back((n, value));
        if inner.latest.len() > KEPT {
            inner.latest.pop_front();
        }
    }
}
