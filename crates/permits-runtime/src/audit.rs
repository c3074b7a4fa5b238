//! Audit events (spec §5 "Audit", §5a "Audit is complete, atomic and tamper-evident"): every decision,
//! proposal, grant, execution, rejection, revocation, rule change, ceiling, settlement, table install and
//! refusal is an event, written into the store's **one hash chain** in the same transaction as the change
//! it records ([`ChainedEvent`]: each carries the hash of the one before), and handed to a host
//! [`AuditSink`] after the commit. [`verify_chain`] checks a chain (a store's, or a JSON-lines export).

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A supervisor installed a budget's ceiling (`raise_ceiling`).
    Ceiling,
    /// A spend was settled: its reservation moved to spent, or was released.
    Settlement,
    /// A table was installed in the store (spec §5a "One current table per store").
    TableInstalled,
}

/// How an execution was authorized (spec §5a): every execution event says which.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Authorization {
    /// The policy makes the call `alone`.
    PolicyAlone,
    /// A standing rule (its id) makes it `alone`.
    StandingRule(String),
    /// A task rule (its id) makes it `alone`.
    TaskRule(String),
    /// A grant the runtime recorded within a budget's automatic allowance.
    AutomaticGrant,
    /// The person who approved it.
    Person(String),
}

/// One audit event: who, the triple, the proposal and its fingerprint, the outcome and the reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// For an execution: how it was authorized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorized_by: Option<Authorization>,
}

/// An event in the store's hash chain (spec §5a): its place, the hash of the event before it, and its own
/// hash = SHA-256 (hex) of the canonical JSON of {`seq`, `prev`, `event`}. The first event's `prev` is 64
/// zeros. One line of the JSON-lines export.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainedEvent {
    /// Its place in the chain, from 1.
    pub seq: u64,
    /// The hash of the event before (64 zeros for the first).
    pub prev: String,
    /// Its own hash.
    pub hash: String,
    /// The event.
    pub event: AuditEvent,
}

/// The end of a chain: the last event's place and hash. A head kept where the store's writers cannot
/// reach tells a truncated or rewritten chain from a whole one later ([`verify_chain`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditHead {
    /// The last event's place (the number of events).
    pub seq: u64,
    /// The last event's hash.
    pub hash: String,
}

/// The `prev` of the first event of a chain.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

impl ChainedEvent {
    /// Chains `event` after `head` (`None` for the first event).
    pub fn after(head: Option<&AuditHead>, event: AuditEvent) -> ChainedEvent {
        let (seq, prev) = match head {
            Some(h) => (h.seq.saturating_add(1), h.hash.clone()),
            None => (1, GENESIS.to_string()),
        };
        let hash = chain_hash(seq, &prev, &event);
        ChainedEvent { seq, prev, hash, event }
    }

    /// This event as the head of its chain.
    pub fn head(&self) -> AuditHead {
        AuditHead { seq: self.seq, hash: self.hash.clone() }
    }
}

/// SHA-256 (hex) of the canonical JSON of {`seq`, `prev`, `event`}.
fn chain_hash(seq: u64, prev: &str, event: &AuditEvent) -> String {
    let value = serde_json::json!({"seq": seq, "prev": prev, "event": event});
    crate::table::sha256_hex(crate::table::canonical_value(&value).as_bytes())
}

/// Why a chain does not verify.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// An event is not where the chain says (a gap, a repeat, an insertion).
    #[error("event {found} is where event {expected} should be: the chain has a gap or an insertion")]
    Order {
        /// The place the chain expected.
        expected: u64,
        /// The place the event states.
        found: u64,
    },
    /// An event's `prev` is not the hash of the event before.
    #[error("event {seq} does not follow the event before it: its `prev` is not that event's hash")]
    Link {
        /// The event's place.
        seq: u64,
    },
    /// An event's content does not hash to its `hash`: it was edited.
    #[error("event {seq} was changed after it was written: its content does not match its hash")]
    Tampered {
        /// The event's place.
        seq: u64,
    },
    /// The chain ends before the head it should reach: events were taken off its end.
    #[error("the chain ends at event {found}, before the kept head (event {expected}): events were taken off its end")]
    Head {
        /// The kept head's place.
        expected: u64,
        /// The last event's place (0 for an empty chain).
        found: u64,
        /// The last event's hash (empty for an empty chain).
        found_hash: String,
    },
    /// The event at the kept head's place has another hash: the chain was rewritten at or before it.
    #[error(
        "event {seq} has hash {found_hash}, not the kept head's {expected_hash}: the chain was rewritten at or before it"
    )]
    Rewritten {
        /// The kept head's place.
        seq: u64,
        /// The kept head's hash.
        expected_hash: String,
        /// The hash of the event at that place now.
        found_hash: String,
    },
    /// A line of an export that is not a chained event.
    #[error("line {line} is not an audit event: {why}")]
    Malformed {
        /// The line, from 1.
        line: usize,
        /// Why.
        why: String,
    },
}

/// Verifies a chain from its first event (spec §5a): places from 1 without gaps, each `prev` the hash of
/// the event before, each hash the hash of its content; and, when `expected` is given (a head kept
/// earlier, where the store's writers cannot reach), that the chain reaches that head: its event at that
/// place has that hash. A chain that has grown since verifies; one cut before the head, or rewritten up to
/// it, does not. Returns the chain's own head (`None` for an empty chain).
///
/// Errors: the first [`ChainError`] found; [`ChainError::Head`] for a chain that ends before the kept
/// head, [`ChainError::Rewritten`] for one whose event there has another hash.
pub fn verify_chain<'e>(
    events: impl IntoIterator<Item = &'e ChainedEvent>,
    expected: Option<&AuditHead>,
) -> Result<Option<AuditHead>, ChainError> {
    let mut head: Option<AuditHead> = None;
    let mut at_kept: Option<String> = None;
    for e in events {
        let (seq, prev) = match &head {
            Some(h) => (h.seq.saturating_add(1), h.hash.as_str()),
            None => (1, GENESIS),
        };
        if e.seq != seq {
            return Err(ChainError::Order { expected: seq, found: e.seq });
        }
        if e.prev != prev {
            return Err(ChainError::Link { seq });
        }
        if chain_hash(e.seq, &e.prev, &e.event) != e.hash {
            return Err(ChainError::Tampered { seq });
        }
        if expected.is_some_and(|want| want.seq == e.seq) {
            at_kept = Some(e.hash.clone());
        }
        head = Some(e.head());
    }
    if let Some(want) = expected {
        match at_kept {
            None => {
                let (found, found_hash) = head.as_ref().map_or((0, String::new()), |h| (h.seq, h.hash.clone()));
                return Err(ChainError::Head { expected: want.seq, found, found_hash });
            }
            Some(found_hash) if found_hash != want.hash => {
                return Err(ChainError::Rewritten { seq: want.seq, expected_hash: want.hash.clone(), found_hash });
            }
            Some(_) => {}
        }
    }
    Ok(head)
}

/// Reads a JSON-lines export (one [`ChainedEvent`] per line; blank lines ignored).
///
/// Errors: [`ChainError::Malformed`] with the line.
pub fn read_export(text: &str) -> Result<Vec<ChainedEvent>, ChainError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: ChainedEvent =
            serde_json::from_str(line).map_err(|e| ChainError::Malformed { line: n + 1, why: e.to_string() })?;
        out.push(e);
    }
    Ok(out)
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
