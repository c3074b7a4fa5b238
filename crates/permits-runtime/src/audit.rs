//! Audit events (spec §5 "Audit"): every decision, proposal, grant, execution, rejection, revocation, rule
//! change and refusal goes to a host [`AuditSink`]. A JSON-lines sink ships.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A call was decided (its level is the outcome).
    Decision,
    /// A proposal was made, or a retry returned an existing one.
    Proposal,
    /// A grant was recorded (approval).
    Grant,
    /// A call ran (alone, or a granted proposal), or its outcome was recorded.
    Execution,
    /// A person said no.
    Rejection,
    /// The requester or the agent withdrew a proposal.
    Withdrawal,
    /// A proposal was revoked.
    Revocation,
    /// A proposal expired undecided.
    Expiry,
    /// A proposal became `superseded` by a newer one for the same subject.
    Supersession,
    /// A standing rule was made.
    RuleCreated,
    /// A standing rule was revoked.
    RuleRevoked,
    /// Something was refused: the reason says why.
    Refusal,
    /// A task was bound to its root, person and mode, or ended (spec §5a "Tasks").
    Task,
}

/// One audit event: who, the triple, the proposal and its fingerprint, the outcome and the reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditEvent {
    /// When, in seconds since the Unix epoch (from the runtime's clock).
    pub at: u64,
    /// What happened.
    pub kind: EventKind,
    /// Who acted: a person, or the agent's name; `None` when the runtime acted on its own (expiry).
    pub who: Option<String>,
    /// The agent of the triple.
    pub agent: String,
    /// The skill of the triple.
    pub skill: String,
    /// The tool of the triple.
    pub tool: String,
    /// The proposal's id, when there is one.
    pub proposal: Option<String>,
    /// The proposal's fingerprint, when there is one.
    pub fingerprint: Option<String>,
    /// The standing rule's id, when one is involved.
    pub rule: Option<String>,
    /// The outcome: a level (`propose`), a status (`granted`) or `refused`.
    pub outcome: String,
    /// Why, when there is a reason (the refusal's message, the rejection's reason).
    pub reason: Option<String>,
}

/// Where audit events go. Recording must not fail the action: a sink that cannot write keeps the error to
/// itself (see [`JsonLinesSink::failures`]).
pub trait AuditSink {
    /// Records one event.
    fn record(&self, event: &AuditEvent);
}

/// A sink that drops every event.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl AuditSink for NullSink {
    fn record(&self, _: &AuditEvent) {}
}

/// A sink that keeps every event in memory; clones share the same list, so a host keeps one clone to read.
#[derive(Clone, Debug, Default)]
pub struct MemorySink {
    events: Arc<Mutex<Vec<AuditEvent>>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> MemorySink {
        MemorySink::default()
    }

    /// Every event recorded so far, oldest first.
    pub fn events(&self) -> Vec<AuditEvent> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl AuditSink for MemorySink {
    fn record(&self, event: &AuditEvent) {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).push(event.clone());
    }
}

/// A sink that writes each event as one line of JSON to any writer (a file, stderr, a socket), and flushes
/// after each line.
#[derive(Debug)]
pub struct JsonLinesSink<W: Write> {
    out: Mutex<W>,
    failures: Mutex<u64>,
}

impl<W: Write> JsonLinesSink<W> {
    /// A sink writing to `out`.
    pub fn new(out: W) -> JsonLinesSink<W> {
        JsonLinesSink { out: Mutex::new(out), failures: Mutex::new(0) }
    }

    /// How many events could not be written (an I/O error).
    pub fn failures(&self) -> u64 {
        *self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writer back, for reading what was written (e.g. a `Vec<u8>` in tests).
    pub fn into_inner(self) -> W {
        self.out.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<W: Write> AuditSink for JsonLinesSink<W> {
    fn record(&self, event: &AuditEvent) {
        let written = serde_json::to_string(event).map_err(std::io::Error::other).and_then(|line| {
            let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            out.flush()
        });
        if written.is_err() {
            *self.failures.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        }
    }
}
