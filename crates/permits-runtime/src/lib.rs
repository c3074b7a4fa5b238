//! The runtime agents embed (spec §5): decisions, exact-call proposals, approvals, routes, standing rules
//! and audit, over a verified decision table. It has no parser: it builds with `--no-default-features`.
//!
//! A host builds one [`Runtime`] from a loaded [`Table`] (see [`Table::load`]) and its own [`Authority`],
//! and optionally a [`Clock`], a [`Store`], a [`Naming`] callback, a [`Versions`] callback and an
//! [`AuditSink`]. For every tool call the agent makes, the host calls [`Runtime::call`]: an `alone` call
//! runs at once (after the host's authority admits the agent's account and the person the work is for),
//! a `propose` or `propose_every_time` call becomes a [`Proposal`] held for a person, and a `never` call is
//! refused. A person then [`Runtime::approve`]s, [`Runtime::reject`]s or [`Runtime::revoke`]s, and the host
//! [`Runtime::execute`]s a granted proposal (the single authorization point: everything is rechecked).
//!
//! Every state change is one store transaction; every decision, proposal, grant, execution, rejection,
//! revocation, rule change, settlement, table install and refusal is an [`AuditEvent`], appended to the
//! store's one hash chain ([`ChainedEvent`]) in that same transaction (spec §5a). An operation key is one
//! task ([`Task`]); the store has one current table ([`Runtime::install_table`], signed tables in
//! [`signing`]); every accepted size and depth is in [`limits`]; what a person reads has its invisible
//! characters made visible ([`display`]).
//!
//! Host callbacks ([`Authority`], [`Naming`], [`Versions`]) are called while the runtime holds a store
//! transaction: they must not call back into the runtime. The closure that runs a tool is called outside
//! any transaction.
//!
//! ```no_run
//! use permits_runtime::{AdmitAll, ApproveMode, Call, Handled, ProposalRequest, RunOutcome, Runtime};
//! use permits_runtime::table::Table;
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let table = Table::load_path("workshop.table.json".as_ref())?; // written by `permitc compile`
//! let rt = Runtime::new(table, AdmitAll); // the host's own permissions go here
//! let call = Call::new("Estimator", "EstimateRepair", "NoteRepair")
//!     .with_arguments(json!({"repair": "T-7", "note": "Pads and a cable."}))
//!     .for_person("Mia");
//! match rt.call(&ProposalRequest::new(call, "request-1", "note the parts"), |ctx| {
//!     // Run the tool in the host's app, as `ctx.runs_as`; the receipt is any JSON.
//!     RunOutcome::Done(json!("noted"))
//! })? {
//!     Handled::Ran(ran) => println!("ran for {}", ran.runs_as),
//!     Handled::Proposed(p) => {
//!         // Show p.label, p.shown, p.why, p.evidence to p.decider; then, when a person says yes:
//!         rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |_| RunOutcome::Done(json!("ok")))?;
//!     }
//! }
//! # Ok(())
//! # }
//! ```

pub use permits_table as table;

mod audit;
mod clock;
mod decision;
pub mod display;
mod error;
mod host;
mod ledger;
pub mod limits;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod record_text;
mod records;
pub mod signing;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
mod target;

// The `Runtime`'s operations, one family per file, each an `impl Runtime` block (spec §5, §6).
mod budget; // budgets, raising a ceiling, settlement
mod call; // decide, call, run alone
mod claim; // the execution protocol: claim, confirm or refuse, the outcome
mod events; // audit events and the one refusal helper
mod execute; // the single authorization point
mod install; // one current table per store: installs, rollbacks, signatures
mod leases; // task leases: take, renew, release, fencing
mod lifecycle; // approve, reject, withdraw, revoke, the recheck, expiry
mod offer; // levels and the tools to offer the model
mod propose; // proposals, automatic grants, supersession
mod rules; // standing rules
mod tasks; // tasks: the operation key's binding, `end_task`
mod words; // what a person reads: refusal messages, reasons, routes

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;

pub use audit::{
    AuditEvent, AuditHead, AuditSink, Authorization, ChainError, ChainedEvent, EventKind, GENESIS, JsonLinesSink,
    MemorySink, NullSink, read_export, verify_chain,
};
pub use claim::{AdmittedRead, AloneClaim, AuthorityRefusal, CallClaim, Claimed, Claiming};
pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::{Call, Decision, FINGERPRINT_FORMAT, PartLevel, decide_table, fingerprint, fingerprint_with};
pub use error::{Refusal, RuntimeError, StoreError};
pub use host::{AdmitAll, Authority, Naming, NoVersions, PlainNaming, Principal, VersionQuery, Versions};
pub use leases::{Holding, MAX_LEASE_SECONDS};
pub use ledger::{BudgetStatus, TaskSpending, conclusive};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, PostgresTarget};
pub use records::{
    Basis, BudgetRecord, Decider, Evidence, Grant, HostClaim, Lease, Proposal, Reservation, RuleRevocation, Run, Scope,
    ShownArgument, StandingRule, Status, TableInstall, Task, WorkFor,
};
#[cfg(feature = "sqlite")]
pub use sqlite::{Checkpoints, SqliteStore, Synchronous};
pub use store::{
    DeciderQuery, Lazily, MemoryStore, ProposalCount, ProposalPage, ProposalQuery, Store, Syncing, Transaction,
    decider_key,
};

use decision::{decide_with, holds, resolve_decider};
use events::About;
use lifecycle::{may_decide, route_source};

use install::Current;
use ledger::Reserve;
pub use signing::{TableRefusal, TableSignature, TrustedKeys};
pub use target::is_postgres_target;
use tasks::{Binding, not_this_task};
use words::{outcome_words, reasons_for, refusal_message, route_words, words_of};

use crate::table::{Level, ParamInfo, Reason, Route, Table};

/// What an agent asks for when a call must be proposed: the call, the host's operation key, why, the
/// evidence, the destination and an optional shorter lifetime (spec §5 "Proposals").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalRequest {
    /// The call.
    pub call: Call,
    /// The host's operation key: the task or work item this call belongs to. A retry under the same key
    /// returns the same proposal; another key gives an independent one.
    pub operation_key: String,
    /// Why the agent wants it, for the person who decides.
    pub why: String,
    /// Tools run before, and what they returned.
    pub evidence: Vec<Evidence>,
    /// What the host will send to (a supplier's endpoint), for a tool that reaches out; part of the
    /// fingerprint.
    pub destination: Option<String>,
    /// A lifetime shorter than the package's `proposal_lifetime`, in seconds; a longer one is cut to it.
    pub lifetime_seconds: Option<u64>,
}

impl ProposalRequest {
    /// A request with no evidence, no destination and the package's lifetime.
    pub fn new(call: Call, operation_key: impl Into<String>, why: impl Into<String>) -> ProposalRequest {
        ProposalRequest {
            call,
            operation_key: operation_key.into(),
            why: why.into(),
            evidence: Vec::new(),
            destination: None,
            lifetime_seconds: None,
        }
    }

    /// The same request with this evidence.
    pub fn with_evidence(mut self, evidence: Vec<Evidence>) -> ProposalRequest {
        self.evidence = evidence;
        self
    }

    /// The same request with this destination.
    pub fn with_destination(mut self, destination: impl Into<String>) -> ProposalRequest {
        self.destination = Some(destination.into());
        self
    }

    /// The same request with this lifetime, in seconds (at most the package's).
    pub fn with_lifetime(mut self, seconds: u64) -> ProposalRequest {
        self.lifetime_seconds = Some(seconds);
        self
    }
}

/// What the runtime hands the host's closure when a tool runs.
#[derive(Clone, Copy, Debug)]
pub struct RunContext<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The skill.
    pub skill: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// The checked arguments (a JSON object).
    pub arguments: &'a Value,
    /// The person the call runs for: the approver of an operator grant, else the person the work is for,
    /// else the agent's sponsor.
    pub runs_as: &'a str,
    /// The proposal, when a granted proposal runs.
    pub proposal: Option<&'a Proposal>,
    /// The approved destination, if any.
    pub destination: Option<&'a str>,
    /// The operation id to send to the other side, so it can recognise a repeat (spec §6): for a proposal
    /// `OPERATION_KEY:P-n`; for an alone call that spends from a budget `A-n`; empty for an alone call that
    /// spends nothing. A receipt that settles a spend names it.
    pub operation: &'a str,
}

/// What the host's closure reports after running a tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// It ran; the receipt (any JSON) is stored and returned by a repeated execute. → `done`.
    Done(Value),
    /// It certainly did not take effect, with why. → `failed`.
    Failed(String),
    /// It was started but the outcome cannot be confirmed, with why. → `unknown`.
    Unknown(String),
}

/// An `alone` call that ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ran {
    /// The decision that let it run.
    pub decision: Decision,
    /// The person it ran for.
    pub runs_as: String,
    /// What the host reported.
    pub outcome: RunOutcome,
}

/// What [`Runtime::call`] did with a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handled {
    /// The call was `alone` and ran.
    Ran(Box<Ran>),
    /// The call became a proposal (or a retry returned the existing one).
    Proposed(Box<Proposal>),
}

/// The result of [`Runtime::execute`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The proposal after the execution: `done` (with its receipt), `unknown` or `failed`.
    pub proposal: Proposal,
    /// `false` when the proposal was already `done` and its stored receipt is returned without running.
    pub ran: bool,
}

/// How a person approves (spec §5 "Standing rules").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApproveMode {
    /// This one call.
    Once,
    /// This call, and from now on calls of this (agent, tool, skill) in work done for the proposal's
    /// requester run alone, **whatever their arguments**: a standing rule with scope
    /// [`Scope::AnyArguments`] (the workshop's "from now on, alone").
    AlwaysLikeThis,
    /// This call, and from now on the **same call** (these exact canonical arguments) in work done for
    /// the proposal's requester runs alone: a standing rule with scope [`Scope::TheseArguments`].
    AlwaysTheseArguments,
    /// This call, and for the rest of the task (the proposal's operation key, spec §5a "Task-scoped
    /// approval") later calls of the same (agent, skill, tool) in the task's mode whose level is exactly
    /// `propose` run alone: a **task rule**, ended by [`Runtime::end_task`] or the grant lifetime. With
    /// `any_arguments: false` it covers these exact arguments ([`Scope::TheseArguments`]), else any.
    ForThisTask {
        /// `true`: any arguments; `false`: these exact arguments.
        any_arguments: bool,
    },
}

/// A standing rule to make with [`Runtime::allow_alone`] (spec §5 "Standing rules").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRule {
    /// The agent.
    pub agent: String,
    /// The tool.
    pub tool: String,
    /// One skill, or `None` for every skill of the agent that offers the tool at `propose`.
    pub skill: Option<String>,
    /// For whose work.
    pub work_for: WorkFor,
    /// The person making it.
    pub by: String,
    /// Which calls it covers: these exact arguments, or any.
    pub scope: Scope,
    /// When it stops applying, in seconds since the Unix epoch; `None` for a rule that lasts until
    /// revoked. Must be later than now.
    pub expires_at: Option<u64>,
    /// The mode it is for (spec §3c step 5): it applies only to calls in exactly this mode; `None` for
    /// calls in no mode.
    pub mode: Option<String>,
    /// The delegation chain to make it for, nearest first (spec §3b): the rule applies only to calls with
    /// exactly this chain; empty for direct calls. Every link must be a declared delegation.
    pub via: Vec<crate::table::ChainLink>,
}

/// A tool as offered to the model in one skill: never a `never` one. Its serde form is what the approval
/// service answers for it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OfferedTool {
    /// The tool's name.
    pub name: String,
    /// Its label.
    pub label: String,
    /// Its doc comment.
    pub doc: Option<String>,
    /// Its parameters, in declared order.
    pub params: Vec<ParamInfo>,
    /// The table's level for the triple (`alone`, `propose` or `propose_every_time`); `None` when a
    /// condition on the arguments decides it.
    pub level: Option<Level>,
    /// The tool's pin (`pinned "sha256:…"`, spec §2): a gateway offers it only while the definition where it
    /// lives still has this digest. Absent for an unpinned tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
}

/// The embedded runtime (spec §5). Cheap to share between threads (`&Runtime` is enough for every
/// operation).
pub struct Runtime {
    current: RwLock<Current>,
    trusted: TrustedKeys,
    store: Box<dyn Store + Send + Sync>,
    clock: Box<dyn Clock + Send + Sync>,
    authority: Box<dyn Authority + Send + Sync>,
    naming: Box<dyn Naming + Send + Sync>,
    versions: Box<dyn Versions + Send + Sync>,
    audit: Box<dyn AuditSink + Send + Sync>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("table_digest", &self.table().header.table_digest).finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime over `table` with the host's `authority`, the system clock, an in-memory store, plain
    /// naming, no covered versions (tools with `version` are refused until [`Runtime::with_versions`]) and
    /// no audit sink.
    pub fn new(table: Table, authority: impl Authority + Send + Sync + 'static) -> Runtime {
        Runtime {
            current: RwLock::new(Current { table: Arc::new(table), signature: None }),
            trusted: TrustedKeys::default(),
            store: Box::new(MemoryStore::new()),
            clock: Box::new(SystemClock),
            authority: Box::new(authority),
            naming: Box::new(PlainNaming),
            versions: Box::new(NoVersions),
            audit: Box::new(NullSink),
        }
    }

    /// The same runtime with this clock.
    pub fn with_clock(mut self, clock: impl Clock + Send + Sync + 'static) -> Runtime {
        self.clock = Box::new(clock);
        self
    }

    /// The same runtime with this store.
    pub fn with_store(mut self, store: impl Store + Send + Sync + 'static) -> Runtime {
        self.store = Box::new(store);
        self
    }

    /// The same runtime with this naming callback.
    pub fn with_naming(mut self, naming: impl Naming + Send + Sync + 'static) -> Runtime {
        self.naming = Box::new(naming);
        self
    }

    /// The same runtime with this covered-version callback.
    pub fn with_versions(mut self, versions: impl Versions + Send + Sync + 'static) -> Runtime {
        self.versions = Box::new(versions);
        self
    }

    /// The same runtime with this audit sink.
    pub fn with_audit(mut self, audit: impl AuditSink + Send + Sync + 'static) -> Runtime {
        self.audit = Box::new(audit);
        self
    }

    /// The same runtime trusting these keys to sign its tables (spec §5a): from then on it installs only
    /// tables signed by one of them (see [`Runtime::with_signature`], [`Runtime::replace_table_signed`]).
    pub fn with_trusted_keys(mut self, keys: TrustedKeys) -> Runtime {
        self.trusted = keys;
        self
    }

    /// The same runtime with the signature of the table it was built with (`permitc compile --sign`),
    /// checked when the table is installed in the store.
    pub fn with_signature(self, signature: TableSignature) -> Runtime {
        self.current.write().unwrap_or_else(PoisonError::into_inner).signature = Some(signature);
        self
    }

    /// The table in force.
    pub fn table(&self) -> Arc<Table> {
        self.current.read().unwrap_or_else(PoisonError::into_inner).table.clone()
    }

    /// Runs `f` in one store transaction and commits it, also when `f` returns a refusal (a refusal may
    /// record a final status, and writes nothing it should not); a store error rolls everything back.
    /// The events `f` pushes are appended to the store's audit chain in the same transaction, and handed
    /// to the sink after the commit.
    pub(crate) fn transact<R>(
        &self,
        f: impl FnOnce(&mut dyn Transaction, &mut Vec<AuditEvent>) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        self.transact_as(Commit::Durable, f)
    }

    /// [`Runtime::transact`] for a question (a decide): when the only events are decisions (nothing else
    /// changed: no table installed, no task bound), the store may answer before the commit is durable
    /// ([`Transaction::commit_lazily`]).
    pub(crate) fn transact_question<R>(
        &self,
        f: impl FnOnce(&mut dyn Transaction, &mut Vec<AuditEvent>) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        self.transact_as(Commit::Question, f)
    }

    /// [`Runtime::transact`], committed as `commit` says.
    pub(crate) fn transact_as<R>(
        &self,
        commit: Commit,
        f: impl FnOnce(&mut dyn Transaction, &mut Vec<AuditEvent>) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        self.transact_kept(commit, |tx, events| f(tx, events).map(Kept::Commit))
    }

    /// [`Runtime::transact_as`] where `f` may also answer [`Kept::RollBack`]: nothing it did is kept, its
    /// events included (the store rolls the transaction back).
    pub(crate) fn transact_kept<R>(
        &self,
        commit: Commit,
        f: impl FnOnce(&mut dyn Transaction, &mut Vec<AuditEvent>) -> Result<Kept<R>, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        let (r, syncing) = self.transact_syncing(commit, f)?;
        syncing.wait()?;
        Ok(r)
    }

    /// [`Runtime::transact_kept`], answering with the commit's [`Syncing`] instead of waiting for it: still
    /// running only for [`Commit::Syncing`].
    pub(crate) fn transact_syncing<R>(
        &self,
        commit: Commit,
        f: impl FnOnce(&mut dyn Transaction, &mut Vec<AuditEvent>) -> Result<Kept<R>, RuntimeError>,
    ) -> Result<(R, Syncing), RuntimeError> {
        let mut tx = self.store.begin()?;
        let mut events = Vec::new();
        // Spec §5a: a runtime whose table is not the store's current one changes nothing (the refusal
        // itself is audited); the first transaction on an empty store installs the runtime's table.
        let result = match self.ensure_current(tx.as_mut(), &mut events) {
            Ok(()) => f(tx.as_mut(), &mut events),
            Err(e) => Err(e),
        };
        self.conclude(tx, events, result, commit)
    }

    /// The end of [`Runtime::transact_syncing`]'s transaction `tx`, once its body gave `result`: a store
    /// error or [`Kept::RollBack`] rolls it back (`tx` dropped); anything else — a refusal too — appends
    /// `events` to the audit chain and commits as `commit` says, then hands the events to the sink. A
    /// refusal is answered once what it recorded is durable.
    pub(crate) fn conclude<R>(
        &self,
        mut tx: Box<dyn Transaction + '_>,
        events: Vec<AuditEvent>,
        result: Result<Kept<R>, RuntimeError>,
        commit: Commit,
    ) -> Result<(R, Syncing), RuntimeError> {
        let result = match result {
            Err(RuntimeError::Store(e)) => return Err(RuntimeError::Store(e)),
            // Dropped uncommitted: rolled back.
            Ok(Kept::RollBack(r)) => return Ok((r, Syncing::durable())),
            Ok(Kept::Commit(r)) => Ok(r),
            Err(e) => Err(e),
        };
        // Spec §5a: every event joins the store's one chain in the transaction of the change it records.
        let mut head = tx.audit_head()?;
        for event in &events {
            let chained = ChainedEvent::after(head.as_ref(), event.clone());
            tx.append_audit(&chained)?;
            head = Some(chained.head());
        }
        let only_decisions = events.iter().all(|e| e.kind == EventKind::Decision);
        let syncing = match commit {
            Commit::Question if only_decisions => tx.commit_lazily(Lazily::Question).map(|()| Syncing::durable())?,
            Commit::Receipt => tx.commit_lazily(Lazily::Receipt).map(|()| Syncing::durable())?,
            Commit::Syncing => tx.commit_syncing()?,
            Commit::Durable | Commit::Question => tx.commit().map(|()| Syncing::durable())?,
        };
        for event in &events {
            self.audit.record(event);
        }
        match result {
            Ok(r) => Ok((r, syncing)),
            // A refusal is answered once what it recorded is durable, whatever the commit.
            Err(e) => {
                syncing.wait()?;
                Err(e)
            }
        }
    }

    /// Spec §5 "Authority", §3b: every agent account of the work — the acting agent and each delegating agent
    /// of its chain — and the person it runs as must be admitted.
    pub(crate) fn admit(
        &self,
        agent: &str,
        via: &[crate::table::ChainLink],
        runs_as: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<(), String> {
        use claim::{AuthorityRefusal, authority_message};
        for account in std::iter::once(agent).chain(via.iter().map(|l| l.agent.as_str())) {
            self.authority
                .admits(Principal::Agent(account), tool, arguments)
                .map_err(|why| authority_message(account, runs_as, tool, AuthorityRefusal::Agent, &why))?;
        }
        self.authority
            .admits(Principal::Person(runs_as), tool, arguments)
            .map_err(|why| authority_message(agent, runs_as, tool, AuthorityRefusal::Person, &why))
    }

    pub(crate) fn covered_version(&self, table: &Table, call: &Call) -> Result<Option<String>, String> {
        let Some(tool) = table.tools.get(&call.tool) else { return Ok(None) };
        let Some(version) = &tool.version else { return Ok(None) };
        let entity = tool.params.iter().find(|p| p.name == version.param).and_then(|p| match &p.ty {
            crate::table::ParamType::Entity(e) => Some(e.as_str()),
            _ => None,
        });
        let missing = || {
            format!(
                "the host cannot say the covered version `{}.{}` of `{}`: nothing is proposed, approved or run without it",
                version.param, version.field, call.tool
            )
        };
        let id = call.arguments.get(&version.param).ok_or_else(missing)?;
        self.versions
            .covered_version(VersionQuery {
                tool: &call.tool,
                param: &version.param,
                entity,
                id,
                field: &version.field,
            })
            .map(Some)
            .ok_or_else(missing)
    }
}

/// What [`Runtime::transact_kept`] does with a transaction that answered.
pub(crate) enum Kept<R> {
    /// Commit it (with its events) and answer `R`.
    Commit(R),
    /// Roll it back (nothing recorded) and answer `R`.
    RollBack(R),
}

/// How [`Runtime::transact_as`] commits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    /// Durably, before the answer: every state change.
    Durable,
    /// A question's audit event only: [`Transaction::commit_lazily`] with [`Lazily::Question`].
    Question,
    /// A receipt recorded after the tool's answer was handed on: [`Transaction::commit_lazily`] with
    /// [`Lazily::Receipt`].
    Receipt,
    /// A claim of a tool that only reads, its answer held until the claim is durable:
    /// [`Transaction::commit_syncing`].
    Syncing,
}

/// The operation id a proposal's execution sends to the other side (spec §6): `OPERATION_KEY:P-n`, unique
/// per proposal and stable across restarts, so the other side can recognise a repeat.
pub fn operation_id(p: &Proposal) -> String {
    format!("{}:{}", p.operation_key, p.id)
}

/// Checks a proposal request against the documented limits ([`limits`]).
pub(crate) fn check_request(request: &ProposalRequest) -> Result<(), String> {
    limits::check_text("the operation key", &request.operation_key, limits::MAX_KEY_BYTES)?;
    if let Some(d) = &request.destination {
        limits::check_text("the destination", d, limits::MAX_KEY_BYTES)?;
    }
    limits::check_value("the arguments", &request.call.arguments, limits::MAX_ARGUMENTS_BYTES)?;
    limits::check_text("why", &request.why, limits::MAX_WHY_BYTES)?;
    if request.evidence.len() > limits::MAX_EVIDENCE_ITEMS {
        return Err(format!(
            "the evidence has {} items: at most {} are accepted",
            request.evidence.len(),
            limits::MAX_EVIDENCE_ITEMS
        ));
    }
    let mut total = 0usize;
    for (n, e) in request.evidence.iter().enumerate() {
        total += limits::check_value(
            &format!("evidence item {}'s arguments", n + 1),
            &e.arguments,
            limits::MAX_EVIDENCE_BYTES,
        )?;
        total +=
            limits::check_value(&format!("evidence item {}'s answer", n + 1), &e.answer, limits::MAX_EVIDENCE_BYTES)?;
        total += e.tool.len();
    }
    if total > limits::MAX_EVIDENCE_BYTES {
        return Err(format!("the evidence is {total} bytes: at most {} are accepted", limits::MAX_EVIDENCE_BYTES));
    }
    Ok(())
}

pub(crate) fn load(tx: &mut dyn Transaction, id: &str) -> Result<Proposal, RuntimeError> {
    tx.proposal(id)?.ok_or_else(|| RuntimeError::UnknownProposal(id.to_string()))
}

pub(crate) fn proposal_call(p: &Proposal) -> Call {
    Call {
        agent: p.agent.clone(),
        skill: p.skill.clone(),
        tool: p.tool.clone(),
        arguments: p.arguments.clone(),
        requester: p.requester.clone(),
        operation_key: Some(p.operation_key.clone()),
        mode: p.mode.clone(),
        via: p.via.clone(),
    }
}
