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
//! revocation, rule change and refusal is an [`AuditEvent`].
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
mod error;
mod host;
mod ledger;
mod records;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;

pub use audit::{AuditEvent, AuditSink, EventKind, JsonLinesSink, MemorySink, NullSink};
pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::{Call, Decision, PartLevel, decide_table, fingerprint};
pub use error::{Refusal, RuntimeError, StoreError};
pub use host::{AdmitAll, Authority, Naming, NoVersions, PlainNaming, Principal, VersionQuery, Versions};
pub use ledger::{BudgetStatus, conclusive};
pub use records::{
    Basis, BudgetRecord, Decider, Evidence, Grant, Proposal, Reservation, RuleRevocation, ShownArgument, StandingRule,
    Status, WorkFor,
};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{MemoryStore, Store, Transaction};

use decision::{decide_with, entry_level, holds, resolve_decider};

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
    /// This call, and from now on calls of this (agent, tool, skill) in work done for the approver run
    /// alone: a standing rule.
    AlwaysLikeThis,
}

/// A standing rule to make with [`Runtime::allow_alone`].
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
}

/// A tool as offered to the model in one skill: never a `never` one.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

/// The embedded runtime (spec §5). Cheap to share between threads (`&Runtime` is enough for every
/// operation).
pub struct Runtime {
    table: RwLock<Arc<Table>>,
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
            table: RwLock::new(Arc::new(table)),
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

    /// The table in force.
    pub fn table(&self) -> Arc<Table> {
        self.table.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Swaps in another table (a recompiled policy, already verified by [`Table::load`]). Waiting and
    /// granted proposals are re-decided on it when they are approved or executed: a changed entry makes
    /// them `stale`, a `never` makes them final.
    pub fn replace_table(&self, table: Table) {
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
    }

    /// The table's level of each tool of `skill` for `agent`, in the skill's declared order (spec §3); empty
    /// when the skill is unknown. A tool the agent is not offered there is `never`; an entry whose level
    /// depends on arguments (a condition) shows its level without arguments, `never` when a condition needs
    /// one (see [`Runtime::decide`] for a real call).
    pub fn levels(&self, agent: &str, skill: &str) -> Vec<(String, Level)> {
        let table = self.table();
        let offered = table.agents.get(agent).is_some_and(|a| a.skills.iter().any(|s| s == skill));
        let Some(s) = table.skills.get(skill) else { return Vec::new() };
        s.tools
            .iter()
            .map(|t| {
                let level = match (offered, table.entry(agent, skill, t), table.tools.get(t)) {
                    (true, Some(entry), Some(tool)) => entry_level(entry, tool),
                    _ => Level::Never,
                };
                (t.clone(), level)
            })
            .collect()
    }

    /// The tools to offer the model for `agent` in `skill`, in the skill's order: every tool that is not
    /// `never` for every call (a `never` tool is not offered at all; a tool whose level depends on a
    /// condition is offered, and each call is decided on its arguments).
    pub fn offered_tools(&self, agent: &str, skill: &str) -> Vec<OfferedTool> {
        let table = self.table();
        if !table.agents.get(agent).is_some_and(|a| a.skills.iter().any(|s| s == skill)) {
            return Vec::new();
        }
        let Some(s) = table.skills.get(skill) else { return Vec::new() };
        s.tools
            .iter()
            .filter_map(|name| {
                let tool = table.tools.get(name)?;
                let entry = table.entry(agent, skill, name)?;
                if entry.reserved || tool.reserved.is_some() || entry.level == Some(Level::Never) {
                    return None;
                }
                Some(OfferedTool {
                    name: name.clone(),
                    label: tool.label.clone(),
                    doc: tool.doc.clone(),
                    params: tool.params.clone(),
                    level: entry.level,
                })
            })
            .collect()
    }

    /// Decides a call on the current table with the standing rules in force (spec §5 "Decide"). Recorded
    /// as an audit event.
    ///
    /// Errors: [`RuntimeError::Store`] only; an unknown name or bad arguments give a `never` decision.
    pub fn decide(&self, call: &Call) -> Result<Decision, RuntimeError> {
        let table = self.table();
        self.transact(|tx, events| {
            let decision = decide_with(&table, call, &tx.rules()?);
            events.push(self.call_event(EventKind::Decision, Some(&call.agent), call, &decision));
            Ok(decision)
        })
    }

    /// Handles one tool call of the agent (spec §5): an `alone` call runs now through `run` (see
    /// [`Runtime::run_alone`]); a `propose` or `propose_every_time` call becomes a proposal (see
    /// [`Runtime::propose`]); a `never` call is refused.
    ///
    /// Errors: [`Refusal::Never`], and those of [`Runtime::run_alone`] and [`Runtime::propose`].
    pub fn call(
        &self,
        request: &ProposalRequest,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Handled, RuntimeError> {
        let decision = self.decide(&request.call)?;
        match decision.level {
            Level::Alone => self.run_alone(&request.call, run).map(|r| Handled::Ran(Box::new(r))),
            Level::Never => Err(RuntimeError::refused(Refusal::Never, refusal_message(&decision))),
            Level::Propose | Level::ProposeEveryTime => self.propose(request).map(|p| Handled::Proposed(Box::new(p))),
        }
    }

    /// Runs an `alone` call (spec §5 "Execution admission"): decides it with the standing rules in force;
    /// the host's authority must admit the agent's account and the person the work is for (or the sponsor);
    /// a standing rule that made it alone counts a use; then `run` runs it, outside any transaction.
    ///
    /// Errors: [`Refusal::Never`] (with the rules or the reason), [`Refusal::MustPropose`] when the level is
    /// not `alone`, [`Refusal::Authority`], [`RuntimeError::Store`].
    pub fn run_alone(&self, call: &Call, run: impl FnOnce(&RunContext<'_>) -> RunOutcome) -> Result<Ran, RuntimeError> {
        let table = self.table();
        let admitted = self.transact(|tx, events| {
            let decision = decide_with(&table, call, &tx.rules()?);
            let refuse = |events: &mut Vec<AuditEvent>, refusal: Refusal, message: String| {
                let mut e = self.call_event(EventKind::Refusal, Some(&call.agent), call, &decision);
                e.outcome = "refused".into();
                e.reason = Some(message.clone());
                events.push(e);
                Err(RuntimeError::refused(refusal, message))
            };
            match decision.level {
                Level::Alone => {}
                Level::Never => return refuse(events, Refusal::Never, refusal_message(&decision)),
                Level::Propose | Level::ProposeEveryTime => {
                    return refuse(events, Refusal::MustPropose, refusal_message(&decision));
                }
            }
            let sponsor = table.agents.get(&call.agent).map(|a| a.sponsor.clone()).unwrap_or_default();
            let runs_as = call.requester.clone().unwrap_or(sponsor);
            if let Err(message) = self.admit(&call.agent, &runs_as, &call.tool, &call.arguments) {
                return refuse(events, Refusal::Authority, message);
            }
            // Spec §6: the amount of an alone spend is reserved at execution admission.
            let mut holder = None;
            if let Some(tool) = table.tools.get(&call.tool) {
                if let Ok(Some(spend)) = ledger::spend_of(&table, &call.tool, tool, &call.arguments) {
                    let id = format!("A-{}", tx.next_number("run")?);
                    if let Err(message) = ledger::reserve(tx, &id, &spend, self.clock.now())? {
                        return refuse(events, Refusal::Budget, message);
                    }
                    holder = Some((id, spend.amount));
                }
            }
            if let Some(rule_id) = &decision.standing_rule {
                if let Some(mut rule) = tx.rules()?.into_iter().find(|r| &r.id == rule_id) {
                    rule.uses += 1;
                    tx.put_rule(&rule)?;
                }
            }
            let mut e = self.call_event(EventKind::Execution, Some(&runs_as), call, &decision);
            e.outcome = "admitted".into();
            events.push(e);
            Ok((decision, runs_as, holder))
        })?;
        let (decision, runs_as, holder) = admitted;
        let operation = holder.as_ref().map_or("", |(id, _)| id.as_str());
        let outcome = run(&RunContext {
            agent: &call.agent,
            skill: &call.skill,
            tool: &call.tool,
            arguments: &call.arguments,
            runs_as: &runs_as,
            proposal: None,
            destination: None,
            operation,
        });
        if let Some((id, amount)) = &holder {
            // Settle the alone spend: a conclusive accepted receipt spends, a failure releases, anything
            // else keeps the reservation until [`Runtime::settle`].
            self.transact(|tx, _| {
                match &outcome {
                    RunOutcome::Done(receipt) => match conclusive(receipt, id, *amount) {
                        Some(true) => ledger::settle_spent(tx, id)?,
                        Some(false) => ledger::release(tx, id)?,
                        None => {}
                    },
                    RunOutcome::Failed(_) => ledger::release(tx, id)?,
                    RunOutcome::Unknown(_) => {}
                }
                Ok(())
            })?;
        }
        let mut e = self.call_event(EventKind::Execution, Some(&runs_as), call, &decision);
        let (word, reason) = outcome_words(&outcome);
        e.outcome = word.into();
        e.reason = reason;
        self.audit.record(&e);
        Ok(Ran { decision, runs_as, outcome })
    }

    /// Makes a proposal of the exact call (spec §5 "Proposals"): checks the call (a `never` call is refused
    /// and makes no proposal), asks the host for the covered version, computes the fingerprint, and in one
    /// transaction returns the existing proposal for the same fingerprint and operation key (a retry; in
    /// whatever status it is), or supersedes earlier `waiting`/`granted` proposals for the same subject
    /// (spec §6) and records a new `waiting` one whose decider comes from the route.
    ///
    /// Errors: [`Refusal::Never`], [`Refusal::UnknownVersion`], [`Refusal::Unresolved`] (an earlier
    /// proposal for the same subject is `sending`, `unknown` or `done`), [`RuntimeError::Store`].
    pub fn propose(&self, request: &ProposalRequest) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        let call = &request.call;
        self.transact(|tx, events| {
            let decision = decide_with(&table, call, &[]);
            let refuse = |events: &mut Vec<AuditEvent>, refusal: Refusal, message: String| {
                let mut e = self.call_event(EventKind::Refusal, Some(&call.agent), call, &decision);
                e.outcome = "refused".into();
                e.reason = Some(message.clone());
                events.push(e);
                Err(RuntimeError::refused(refusal, message))
            };
            // The route's decider, whatever the level (a decision names one only for a proposed level).
            let decider = table.offered(&call.agent, &call.skill, &call.tool).ok().zip(table.agents.get(&call.agent)).map(
                |(entry, agent)| resolve_decider(&table, &entry.route, call.requester.as_deref(), &agent.sponsor),
            );
            let (Some(tool), Some(entry_digest), Some(decider), true) =
                (table.tools.get(&call.tool), decision.entry_digest.clone(), decider, decision.level != Level::Never)
            else {
                return refuse(events, Refusal::Never, refusal_message(&decision));
            };
            let covered_version = match self.covered_version(&table, call) {
                Ok(v) => v,
                Err(message) => return refuse(events, Refusal::UnknownVersion, message),
            };
            let fp = fingerprint(call, &entry_digest, covered_version.as_deref(), request.destination.as_deref());
            if let Some(mut existing) = tx.proposal_by_fingerprint(&request.operation_key, &fp)? {
                self.expire_if_due(tx, events, &mut existing, now)?;
                self.grant_automatically(tx, events, &table, decision.level, &mut existing, now)?;
                let mut e = self.proposal_event(EventKind::Proposal, Some(&call.agent), &existing);
                e.reason = Some("a retry: the same call under the same operation key".into());
                events.push(e);
                return Ok(existing);
            }
            let subject = tool.subject.as_ref().and_then(|p| call.arguments.get(p)).map(crate::table::canonical_value);
            let mut earlier = Vec::new();
            if let Some(subject) = &subject {
                for mut old in tx.proposals_for_subject(&request.operation_key, &call.tool, subject)? {
                    self.expire_if_due(tx, events, &mut old, now)?;
                    match old.status {
                        Status::Sending | Status::Unknown | Status::Done => {
                            let message = format!(
                                "proposal `{}` for the same subject in this work is `{}`: resolve it first, or use a new operation key",
                                old.id, old.status
                            );
                            return refuse(events, Refusal::Unresolved, message);
                        }
                        Status::Waiting | Status::Granted => earlier.push(old),
                        _ => {}
                    }
                }
            }
            let id = format!("P-{}", tx.next_number("proposal")?);
            for mut old in earlier {
                old.status = Status::Superseded;
                old.reason = Some(format!("superseded by `{id}`"));
                ledger::release(tx, &old.id)?;
                tx.put_proposal(&old)?;
                events.push(self.proposal_event(EventKind::Supersession, Some(&call.agent), &old));
            }
            let lifetime = request
                .lifetime_seconds
                .map_or(table.package.proposal_lifetime_seconds, |s| s.min(table.package.proposal_lifetime_seconds));
            let shown = tool
                .params
                .iter()
                .map(|p| ShownArgument {
                    name: p.name.clone(),
                    shown: call.arguments.get(&p.name).map(|v| self.naming.show(&call.tool, p, v)).unwrap_or_default(),
                })
                .collect();
            let proposal = Proposal {
                id,
                operation_key: request.operation_key.clone(),
                agent: call.agent.clone(),
                skill: call.skill.clone(),
                tool: call.tool.clone(),
                label: tool.label.clone(),
                arguments: call.arguments.clone(),
                shown,
                covered_version,
                destination: request.destination.clone(),
                why: request.why.clone(),
                evidence: request.evidence.clone(),
                requester: call.requester.clone(),
                decider,
                level: decision.level,
                entry_digest,
                definition_digest: tool.definition_digest.clone(),
                subject,
                fingerprint: fp,
                created_at: now,
                expires_at: now.saturating_add(lifetime),
                status: Status::Waiting,
                grant: None,
                ran_as: None,
                receipt: None,
                reason: None,
                decided_by: None,
            };
            let mut proposal = proposal;
            tx.put_proposal(&proposal)?;
            events.push(self.proposal_event(EventKind::Proposal, Some(&call.agent), &proposal));
            self.grant_automatically(tx, events, &table, decision.level, &mut proposal, now)?;
            Ok(proposal)
        })
    }

    /// A person approves a proposal (spec §5 "Approve"), passing the fingerprint they were shown. The
    /// fingerprint is re-derived from the current table entry, covered version and destination (any
    /// difference → `stale`, final); the call is re-decided on the current table (`never` now → `failed`,
    /// final); then a grant is recorded (basis `operator`, expiring after the package's grant lifetime) →
    /// `granted`. Approving a `granted` proposal again refreshes its grant. With
    /// [`ApproveMode::AlwaysLikeThis`] a standing rule for the approver is made in the same transaction
    /// (if it cannot be made, nothing is approved).
    ///
    /// Errors: [`Refusal::NotDecider`] (naming who decides and why), [`Refusal::WrongFingerprint`],
    /// [`Refusal::Stale`], [`Refusal::NowNever`], [`Refusal::ProposalExpired`], [`Refusal::Status`],
    /// [`Refusal::UnknownVersion`], [`Refusal::Rule`], [`RuntimeError::UnknownProposal`],
    /// [`RuntimeError::Store`].
    pub fn approve(
        &self,
        id: &str,
        person: &str,
        fingerprint: &str,
        mode: ApproveMode,
    ) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            self.check_status(events, person, &p, "approved", &[Status::Waiting, Status::Granted])?;
            if let Err(message) = may_decide(&table, &p, person) {
                return Err(self.refusal(events, person, &p, Refusal::NotDecider, message));
            }
            if fingerprint != p.fingerprint {
                let message = format!(
                    "the fingerprint `{fingerprint}` is not the one of proposal `{}`: approve exactly what you were shown",
                    p.id
                );
                return Err(self.refusal(events, person, &p, Refusal::WrongFingerprint, message));
            }
            self.recheck(tx, events, &table, &mut p, person)?;
            // Spec §6: the ceiling is checked and the amount reserved at grant time (a re-grant reserves
            // nothing more).
            match self.spend_for(&table, &p) {
                Err(message) => return Err(self.refusal(events, person, &p, Refusal::Budget, message)),
                Ok(Some(spend)) => {
                    if let Err(message) = ledger::reserve(tx, &p.id, &spend, now)? {
                        p.reason = Some(message.clone());
                        tx.put_proposal(&p)?;
                        return Err(self.refusal(events, person, &p, Refusal::Budget, message));
                    }
                }
                Ok(None) => {}
            }
            if mode == ApproveMode::AlwaysLikeThis {
                let new = NewRule {
                    agent: p.agent.clone(),
                    tool: p.tool.clone(),
                    skill: Some(p.skill.clone()),
                    work_for: WorkFor::Person(person.to_string()),
                    by: person.to_string(),
                };
                self.make_rule(tx, events, &table, &new, now)?;
            }
            p.grant = Some(Grant {
                approver: Some(person.to_string()),
                basis: Basis::Operator,
                granted_at: now,
                expires_at: now.saturating_add(table.package.grant_lifetime_seconds),
            });
            p.status = Status::Granted;
            p.decided_by = Some(person.to_string());
            p.reason = None;
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Grant, Some(person), &p));
            Ok(p)
        })
    }

    /// Executes a granted proposal: the single authorization point (spec §5 "Execute"). `destination` must
    /// be the approved one; a `done` proposal returns its stored receipt and runs nothing; then everything
    /// is rechecked now — the fingerprint on the current table and covered version (`stale`), the current
    /// level (`never` → `failed`), the grant (present, unexpired, basis `operator`), and the host's
    /// authority for the agent's account and the person it runs for (the approver; refused → `failed`,
    /// final). On admission the grant is consumed (`sending`), `run` runs outside any transaction, and the
    /// outcome is recorded (`done` with the receipt, `failed`, or `unknown`).
    ///
    /// Errors: [`Refusal::Destination`], [`Refusal::NotApproved`], [`Refusal::Stale`],
    /// [`Refusal::NowNever`], [`Refusal::GrantExpired`] and [`Refusal::Basis`] (the proposal stays
    /// `granted`, the reason recorded), [`Refusal::Authority`], [`Refusal::ProposalExpired`],
    /// [`Refusal::Status`], [`Refusal::UnknownVersion`], [`RuntimeError::UnknownProposal`],
    /// [`RuntimeError::Store`].
    pub fn execute(
        &self,
        id: &str,
        destination: Option<&str>,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        let admitted = self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            let agent = p.agent.clone();
            if destination != p.destination.as_deref() {
                let message = format!(
                    "the destination {} is not the approved one ({}): nothing runs",
                    words_of(destination),
                    words_of(p.destination.as_deref())
                );
                return Err(self.refusal(events, &agent, &p, Refusal::Destination, message));
            }
            if p.status == Status::Done {
                events.push(self.proposal_event(EventKind::Execution, Some(&agent), &p));
                return Ok(None);
            }
            self.expire_if_due(tx, events, &mut p, now)?;
            if p.status == Status::Waiting {
                let message = format!(
                    "proposal `{}` is not approved: nothing runs until {} approves it",
                    p.id,
                    p.decider.waiting_on()
                );
                return Err(self.refusal(events, &agent, &p, Refusal::NotApproved, message));
            }
            self.check_status(events, &agent, &p, "executed", &[Status::Granted])?;
            let Some(grant) = p.grant.clone() else {
                let message = format!("proposal `{}` has no grant: nothing runs", p.id);
                return Err(self.refusal(events, &agent, &p, Refusal::NotApproved, message));
            };
            self.recheck(tx, events, &table, &mut p, &agent)?;
            let not_now = |tx: &mut dyn Transaction, events: &mut Vec<AuditEvent>, p: &mut Proposal, refusal, message: String| {
                p.reason = Some(message.clone());
                tx.put_proposal(p)?;
                Err::<(), _>(self.refusal(events, &agent, p, refusal, message))
            };
            if now >= grant.expires_at {
                let message = format!(
                    "the grant of proposal `{}` expired at {}: nothing runs until it is approved again",
                    p.id, grant.expires_at
                );
                not_now(tx, events, &mut p, Refusal::GrantExpired, message)?;
            }
            let spend = match self.spend_for(&table, &p) {
                Ok(spend) => spend,
                Err(message) => return not_now(tx, events, &mut p, Refusal::Budget, message).map(|()| None),
            };
            let runs_as = match (grant.basis, &grant.approver) {
                (Basis::Operator, Some(approver)) => approver.clone(),
                // Spec §6: at execution an automatic grant must still fit the current allowance.
                (Basis::Automatic, _) if spend.is_some_and(|s| !s.over_allowance()) => {
                    let sponsor = table.agents.get(&p.agent).map(|a| a.sponsor.clone()).unwrap_or_default();
                    p.requester.clone().unwrap_or(sponsor)
                }
                (Basis::Automatic, _) => {
                    let message = match spend {
                        Some(s) => format!(
                            "the automatic grant of proposal `{}` no longer fits the allowance of budget `{}` ({} {unit} is over {} {unit}): it waits for a person's approval",
                            p.id,
                            s.budget,
                            s.amount,
                            s.info.alone_up_to,
                            unit = s.info.unit
                        ),
                        None => format!(
                            "the automatic grant of proposal `{}` is not covered by any budget's allowance now: it waits for a person's approval",
                            p.id
                        ),
                    };
                    return not_now(tx, events, &mut p, Refusal::Basis, message).map(|()| None);
                }
                _ => {
                    let message =
                        format!("the grant of proposal `{}` has no known basis: it waits for a person's approval", p.id);
                    return not_now(tx, events, &mut p, Refusal::Basis, message).map(|()| None);
                }
            };
            if let Some(spend) = spend {
                if let Err(message) = ledger::check_held(tx, &p.id, &spend, now)? {
                    return not_now(tx, events, &mut p, Refusal::Budget, message).map(|()| None);
                }
            }
            if let Err(message) = self.admit(&p.agent, &runs_as, &p.tool, &p.arguments) {
                p.status = Status::Failed;
                p.reason = Some(message.clone());
                ledger::release(tx, &p.id)?;
                tx.put_proposal(&p)?;
                return Err(self.refusal(events, &runs_as, &p, Refusal::Authority, message));
            }
            p.status = Status::Sending;
            p.ran_as = Some(runs_as.clone());
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Execution, Some(&runs_as), &p));
            Ok(Some(p))
        })?;
        let Some(sending) = admitted else {
            return Ok(Execution { proposal: self.proposal(id)?, ran: false });
        };
        let runs_as = sending.ran_as.clone().unwrap_or_default();
        let operation = operation_id(&sending);
        let outcome = run(&RunContext {
            agent: &sending.agent,
            skill: &sending.skill,
            tool: &sending.tool,
            arguments: &sending.arguments,
            runs_as: &runs_as,
            proposal: Some(&sending),
            destination: sending.destination.as_deref(),
            operation: &operation,
        });
        let spend_amount = self.spend_for(&table, &sending).ok().flatten().map(|s| s.amount);
        let proposal = self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            let (status, receipt, reason) = match (outcome, spend_amount) {
                (RunOutcome::Done(receipt), None) => (Status::Done, Some(receipt), None),
                // Spec §6 "Settlement": only a conclusive receipt moves the reservation.
                (RunOutcome::Done(receipt), Some(amount)) => match conclusive(&receipt, &operation, amount) {
                    Some(true) => {
                        ledger::settle_spent(tx, &p.id)?;
                        (Status::Done, Some(receipt), None)
                    }
                    Some(false) => {
                        ledger::release(tx, &p.id)?;
                        (Status::Failed, Some(receipt), Some("the other side rejected the operation: nothing was spent".to_string()))
                    }
                    None => (
                        Status::Unknown,
                        Some(receipt),
                        Some(format!(
                            "the receipt does not name operation `{operation}` and amount {amount} with an outcome: not conclusive; the reservation stays until it is settled"
                        )),
                    ),
                },
                (RunOutcome::Failed(why), _) => {
                    ledger::release(tx, &p.id)?;
                    (Status::Failed, None, Some(why))
                }
                (RunOutcome::Unknown(why), _) => (Status::Unknown, None, Some(why)),
            };
            // A proposal revoked while sending stays revoked (the other side may have acted); its receipt
            // is still kept.
            if p.status == Status::Sending {
                p.status = status;
                p.reason = reason;
            }
            p.receipt = receipt;
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Execution, Some(&runs_as), &p));
            Ok(p)
        })?;
        Ok(Execution { proposal, ran: true })
    }

    /// "Approve and run now" (the agents kit's behaviour): [`Runtime::approve`] then [`Runtime::execute`]
    /// toward the proposal's own destination.
    ///
    /// Errors: those of both.
    pub fn approve_and_run(
        &self,
        id: &str,
        person: &str,
        fingerprint: &str,
        mode: ApproveMode,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        let approved = self.approve(id, person, fingerprint, mode)?;
        self.execute(id, approved.destination.as_deref(), run)
    }

    /// A person says no (spec §5 "Reject"): `reason` must not be blank; it is stored and given back to the
    /// agent as the tool's answer ([`Proposal::answer_for_agent`]) → `rejected`, final.
    ///
    /// Errors: [`Refusal::ReasonRequired`], [`Refusal::NotDecider`], [`Refusal::Status`],
    /// [`Refusal::ProposalExpired`], [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn reject(&self, id: &str, person: &str, reason: &str) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            if reason.trim().is_empty() {
                let message = "a rejection needs a reason: the agent is told it".to_string();
                return Err(self.refusal(events, person, &p, Refusal::ReasonRequired, message));
            }
            self.check_status(events, person, &p, "rejected", &[Status::Waiting, Status::Granted])?;
            if let Err(message) = may_decide(&table, &p, person) {
                return Err(self.refusal(events, person, &p, Refusal::NotDecider, message));
            }
            p.status = Status::Rejected;
            p.reason = Some(reason.to_string());
            p.decided_by = Some(person.to_string());
            ledger::release(tx, &p.id)?;
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Rejection, Some(person), &p));
            Ok(p)
        })
    }

    /// The requester (a person) or the agent withdraws a `waiting` proposal (spec §5) → `withdrawn`.
    ///
    /// Errors: [`Refusal::NotDecider`] (someone else), [`Refusal::Status`] (not `waiting`),
    /// [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn withdraw(&self, id: &str, by: Principal<'_>) -> Result<Proposal, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            let allowed = match by {
                Principal::Agent(a) => a == p.agent,
                Principal::Person(person) => p.requester.as_deref() == Some(person),
            };
            if !allowed {
                let message = format!(
                    "only the requester or the agent `{}` may withdraw proposal `{}`, not `{}`",
                    p.agent,
                    p.id,
                    by.name()
                );
                return Err(self.refusal(events, by.name(), &p, Refusal::NotDecider, message));
            }
            self.check_status(events, by.name(), &p, "withdrawn", &[Status::Waiting])?;
            p.status = Status::Withdrawn;
            p.decided_by = Some(by.name().to_string());
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Withdrawal, Some(by.name()), &p));
            Ok(p)
        })
    }

    /// Whoever may decide a proposal, or a supervisor, revokes it (spec §5 "Revoke"): a `waiting` or
    /// `granted` one → `revoked`; a `sending` or `unknown` one is marked `revoked` too (the other side may
    /// have acted). Revoking a `revoked` proposal again changes nothing.
    ///
    /// Errors: [`Refusal::NotDecider`], [`Refusal::Status`] (any other status),
    /// [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn revoke(&self, id: &str, person: &str, why: &str) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            if p.status == Status::Revoked {
                return Ok(p);
            }
            if !holds(&table, person, &table.authority.supervises) {
                if let Err(message) = may_decide(&table, &p, person) {
                    return Err(self.refusal(events, person, &p, Refusal::NotDecider, message));
                }
            }
            self.check_status(
                events,
                person,
                &p,
                "revoked",
                &[Status::Waiting, Status::Granted, Status::Sending, Status::Unknown],
            )?;
            if matches!(p.status, Status::Waiting | Status::Granted) {
                ledger::release(tx, &p.id)?; // a sending or unknown one keeps it: the other side may have acted
            }
            p.status = Status::Revoked;
            p.reason = Some(if why.trim().is_empty() { format!("revoked by `{person}`") } else { why.to_string() });
            p.decided_by = Some(person.to_string());
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Revocation, Some(person), &p));
            Ok(p)
        })
    }

    /// Makes a standing rule, "from now on, alone" (spec §5 "Standing rules"): only over entries whose level
    /// is exactly `propose` (refused for `never`, `propose_every_time`, a tool outside the skill, and a tool
    /// with a `shell` parameter, for which a rule for any arguments is not allowed); for
    /// oneself by a person admitted by `widens_autonomy` (or `supervises`), for someone else or everybody
    /// only by `supervises`; on a routed triple only by its decider or a supervisor. It binds the tool's
    /// `definition_digest` and each covered entry's `entry_digest`.
    ///
    /// Errors: [`Refusal::Rule`] with the reason, [`RuntimeError::Store`].
    pub fn allow_alone(&self, rule: &NewRule) -> Result<StandingRule, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| self.make_rule(tx, events, &table, rule, now))
    }

    /// Revokes a standing rule (spec §5 `revoke_rule`): by its maker or a supervisor, with a reason. Revoking
    /// a revoked rule changes nothing.
    ///
    /// Errors: [`Refusal::ReasonRequired`], [`Refusal::NotDecider`], [`RuntimeError::UnknownRule`],
    /// [`RuntimeError::Store`].
    pub fn revoke_rule(&self, id: &str, by: &str, why: &str) -> Result<StandingRule, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            let Some(mut rule) = tx.rules()?.into_iter().find(|r| r.id == id) else {
                return Err(RuntimeError::UnknownRule(id.to_string()));
            };
            let refuse = |events: &mut Vec<AuditEvent>, refusal: Refusal, message: String| {
                let mut e = self.rule_event(EventKind::Refusal, by, &rule);
                e.outcome = "refused".into();
                e.reason = Some(message.clone());
                events.push(e);
                RuntimeError::refused(refusal, message)
            };
            if rule.revoked.is_some() {
                return Ok(rule);
            }
            if why.trim().is_empty() {
                return Err(refuse(events, Refusal::ReasonRequired, "revoking a standing rule needs a reason".into()));
            }
            if rule.by != by && !holds(&table, by, &table.authority.supervises) {
                let message = format!(
                    "only `{}`, who made standing rule `{}`, or a supervisor may revoke it, not `{by}`",
                    rule.by, rule.id
                );
                return Err(refuse(events, Refusal::NotDecider, message));
            }
            rule.revoked = Some(RuleRevocation { by: by.to_string(), why: why.to_string(), at: now });
            tx.put_rule(&rule)?;
            let mut e = self.rule_event(EventKind::RuleRevoked, by, &rule);
            e.reason = Some(why.to_string());
            events.push(e);
            Ok(rule)
        })
    }

    /// The proposal with this id, as it is now (a `waiting` one past its expiry becomes `expired`).
    ///
    /// Errors: [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn proposal(&self, id: &str) -> Result<Proposal, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            Ok(p)
        })
    }

    /// Every proposal, oldest first, as they are now (expiring what is due).
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn proposals(&self) -> Result<Vec<Proposal>, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut all = tx.proposals()?;
            for p in &mut all {
                self.expire_if_due(tx, events, p, now)?;
            }
            Ok(all)
        })
    }

    /// The `waiting` proposals `person` may decide now (spec §5 "Who decides"), oldest first: a person's
    /// queue of approvals.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn waiting_for(&self, person: &str) -> Result<Vec<Proposal>, RuntimeError> {
        let table = self.table();
        Ok(self
            .proposals()?
            .into_iter()
            .filter(|p| p.status == Status::Waiting && may_decide(&table, p, person).is_ok())
            .collect())
    }

    /// Marks every `waiting` proposal past its expiry `expired` (spec §5 "Expiry": silence is never
    /// consent) and returns their ids.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn expire_due(&self) -> Result<Vec<String>, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut expired = Vec::new();
            for mut p in tx.proposals()? {
                if self.expire_if_due(tx, events, &mut p, now)? {
                    expired.push(p.id);
                }
            }
            Ok(expired)
        })
    }

    /// Every standing rule, revoked ones included, oldest first.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn rules(&self) -> Result<Vec<StandingRule>, RuntimeError> {
        self.transact(|tx, _| Ok(tx.rules()?))
    }

    /// A budget as it stands now (spec §6): the current table's figures and the ledger's (installed
    /// ceiling, spent, reserved, room), in the budget's minor unit.
    ///
    /// Errors: [`RuntimeError::UnknownBudget`], [`RuntimeError::Store`].
    pub fn budget(&self, name: &str) -> Result<BudgetStatus, RuntimeError> {
        let table = self.table();
        let Some(info) = table.budgets.get(name) else { return Err(RuntimeError::UnknownBudget(name.to_string())) };
        self.transact(|tx, _| Ok(ledger::status(tx, name, info)?))
    }

    /// Every budget of the current table as it stands now, by name.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn budgets(&self) -> Result<Vec<BudgetStatus>, RuntimeError> {
        let table = self.table();
        self.transact(|tx, _| {
            let mut all = Vec::new();
            for (name, info) in &table.budgets {
                all.push(ledger::status(tx, name, info)?);
            }
            Ok(all)
        })
    }

    /// Installs the current table's ceiling of `budget` as the ledger's installed ceiling (spec §6: a new
    /// policy never raises the installed ceiling silently; a supervisor does it here, on purpose). Spent and
    /// reserved stay.
    ///
    /// Errors: [`Refusal::NotDecider`] (not a supervisor), [`RuntimeError::UnknownBudget`],
    /// [`RuntimeError::Store`].
    pub fn raise_ceiling(&self, budget: &str, by: &str) -> Result<BudgetStatus, RuntimeError> {
        let table = self.table();
        let Some(info) = table.budgets.get(budget) else { return Err(RuntimeError::UnknownBudget(budget.to_string())) };
        if !holds(&table, by, &table.authority.supervises) {
            return Err(RuntimeError::refused(
                Refusal::NotDecider,
                format!("only a supervisor installs a new ceiling for budget `{budget}`, not `{by}`"),
            ));
        }
        self.transact(|tx, _| {
            ledger::install_ceiling(tx, budget, info)?;
            Ok(ledger::status(tx, budget, info)?)
        })
    }

    /// Settles a spend whose outcome was not confirmed (spec §6 "Settlement"): `holder` is a proposal id
    /// (status `unknown`, or `revoked` while sending) or the `A-n` operation of a call that ran alone, and
    /// `receipt` the other side's answer. A conclusive receipt — it names the operation
    /// ([`RunContext::operation`]) and the amount, with `"outcome": "accepted"` or `"rejected"` (see
    /// [`conclusive`]) — moves the reservation to spent or releases it; the proposal becomes `done` or
    /// `failed` (a revoked one stays revoked). Returns the budget afterwards.
    ///
    /// Errors: [`Refusal::NotConclusive`] (nothing changes), [`RuntimeError::UnknownProposal`] (no such
    /// holder), [`RuntimeError::Store`].
    pub fn settle(&self, holder: &str, receipt: &Value) -> Result<BudgetStatus, RuntimeError> {
        let table = self.table();
        self.transact(|tx, events| {
            let Some(reservation) = tx.reservation(holder)? else {
                return Err(RuntimeError::refused(
                    Refusal::NotConclusive,
                    format!("`{holder}` holds no reservation: there is nothing to settle"),
                ));
            };
            let mut proposal = tx.proposal(holder)?;
            let operation = proposal.as_ref().map_or_else(|| holder.to_string(), operation_id);
            let Some(accepted) = conclusive(receipt, &operation, reservation.amount) else {
                return Err(RuntimeError::refused(
                    Refusal::NotConclusive,
                    format!(
                        "the receipt does not name operation `{operation}` and amount {} with an outcome `accepted` or `rejected`: nothing changes",
                        reservation.amount
                    ),
                ));
            };
            if accepted {
                ledger::settle_spent(tx, holder)?;
            } else {
                ledger::release(tx, holder)?;
            }
            if let Some(p) = &mut proposal {
                if matches!(p.status, Status::Unknown | Status::Sending) {
                    p.status = if accepted { Status::Done } else { Status::Failed };
                    p.reason = (!accepted).then(|| "the other side rejected the operation: nothing was spent".to_string());
                }
                p.receipt = Some(receipt.clone());
                tx.put_proposal(p)?;
                events.push(self.proposal_event(EventKind::Execution, None, p));
            }
            let info = table.budgets.get(&reservation.budget).cloned().unwrap_or(crate::table::BudgetInfo {
                currency: String::new(),
                unit: String::new(),
                ceiling: 0,
                alone_up_to: 0,
                doc: None,
            });
            Ok(ledger::status(tx, &reservation.budget, &info)?)
        })
    }

    // ----------------------------------------------------------------------------------------------------

    /// Runs `f` in one store transaction and commits it, also when `f` returns a refusal (a refusal may
    /// record a final status, and writes nothing it should not); a store error rolls everything back.
    /// Audit events are delivered after the commit.
    fn transact<R>(
        &self,
        f: impl FnOnce(&mut dyn Transaction, &mut Vec<AuditEvent>) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        let mut tx = self.store.begin()?;
        let mut events = Vec::new();
        let result = f(tx.as_mut(), &mut events);
        if let Err(RuntimeError::Store(_)) = &result {
            return result;
        }
        tx.commit()?;
        for event in &events {
            self.audit.record(event);
        }
        result
    }

    /// The spend of a proposal on the current table, if its tool spends from a budget.
    fn spend_for<'t>(&self, table: &'t Table, p: &Proposal) -> Result<Option<ledger::Spend<'t>>, String> {
        match table.tools.get(&p.tool) {
            Some(tool) => ledger::spend_of(table, &p.tool, tool, &p.arguments),
            None => Ok(None),
        }
    }

    /// Spec §6 "Automatic grants": on every propose (a retry included), a `waiting` proposal whose level is
    /// `propose` (not `propose_every_time`), whose amount is within the budget's allowance and fits under
    /// the ceiling is granted with basis `automatic`, no person asked; the amount is reserved. When the
    /// ceiling has no room it stays `waiting`, the reason recorded.
    fn grant_automatically(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        level: Level,
        p: &mut Proposal,
        now: u64,
    ) -> Result<(), RuntimeError> {
        if p.status != Status::Waiting || level != Level::Propose {
            return Ok(());
        }
        let Ok(Some(spend)) = self.spend_for(table, p) else { return Ok(()) };
        if spend.over_allowance() {
            return Ok(());
        }
        match ledger::reserve(tx, &p.id, &spend, now)? {
            Err(message) => {
                p.reason = Some(format!("not granted automatically: {message}"));
                tx.put_proposal(p)?;
            }
            Ok(()) => {
                p.grant = Some(Grant {
                    approver: None,
                    basis: Basis::Automatic,
                    granted_at: now,
                    expires_at: now.saturating_add(table.package.grant_lifetime_seconds),
                });
                p.status = Status::Granted;
                p.reason = None;
                tx.put_proposal(p)?;
                events.push(self.proposal_event(EventKind::Grant, None, p));
            }
        }
        Ok(())
    }

    fn admit(&self, agent: &str, runs_as: &str, tool: &str, arguments: &Value) -> Result<(), String> {
        self.authority
            .admits(Principal::Agent(agent), tool, arguments)
            .map_err(|why| format!("the agent's account `{agent}` may not run `{tool}`: {why}"))?;
        self.authority
            .admits(Principal::Person(runs_as), tool, arguments)
            .map_err(|why| format!("`{agent}` runs `{tool}` on behalf of `{runs_as}`, who may not: {why}"))
    }

    fn covered_version(&self, table: &Table, call: &Call) -> Result<Option<String>, String> {
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

    /// Re-derives the fingerprint on the current table and covered version, and re-decides: a difference
    /// makes the proposal `stale`, `never` now makes it `failed`; both final and recorded.
    fn recheck(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        p: &mut Proposal,
        who: &str,
    ) -> Result<(), RuntimeError> {
        let call = proposal_call(p);
        let decision = decide_with(table, &call, &[]);
        let version = match self.covered_version(table, &call) {
            Ok(v) => v,
            Err(message) => return Err(self.refusal(events, who, p, Refusal::UnknownVersion, message)),
        };
        let current = decision
            .entry_digest
            .as_deref()
            .map(|digest| fingerprint(&call, digest, version.as_deref(), p.destination.as_deref()));
        let same_tool = decision.definition_digest.as_deref() == Some(p.definition_digest.as_str());
        if current.as_deref() != Some(p.fingerprint.as_str()) || !same_tool {
            let mut changed = Vec::new();
            if !decision.offered {
                changed.push("the triple is no longer offered".to_string());
            } else if decision.entry_digest.as_deref() != Some(p.entry_digest.as_str()) || !same_tool {
                changed.push("the rules or the tool changed".to_string());
            }
            if version != p.covered_version {
                changed.push(format!(
                    "the covered version is {} instead of {}",
                    words_of(version.as_deref()),
                    words_of(p.covered_version.as_deref())
                ));
            }
            let message = format!(
                "proposal `{}` is stale ({}): nothing runs; the agent must look again",
                p.id,
                if changed.is_empty() { "what it covers changed".to_string() } else { changed.join(", ") }
            );
            p.status = Status::Stale;
            p.reason = Some(message.clone());
            tx.put_proposal(p)?;
            return Err(self.refusal(events, who, p, Refusal::Stale, message));
        }
        if decision.level == Level::Never {
            let message = format!("on the current table, {}", refusal_message(&decision));
            p.status = Status::Failed;
            p.reason = Some(message.clone());
            tx.put_proposal(p)?;
            return Err(self.refusal(events, who, p, Refusal::NowNever, message));
        }
        Ok(())
    }

    fn check_status(
        &self,
        events: &mut Vec<AuditEvent>,
        who: &str,
        p: &Proposal,
        verb: &str,
        allowed: &[Status],
    ) -> Result<(), RuntimeError> {
        if allowed.contains(&p.status) {
            return Ok(());
        }
        let refusal = if p.status == Status::Expired { Refusal::ProposalExpired } else { Refusal::Status };
        let message = if p.status == Status::Expired {
            format!("proposal `{}` expired undecided: it cannot be {verb}; nothing runs", p.id)
        } else {
            format!("proposal `{}` is `{}`: it cannot be {verb}", p.id, p.status)
        };
        Err(self.refusal(events, who, p, refusal, message))
    }

    fn expire_if_due(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        p: &mut Proposal,
        now: u64,
    ) -> Result<bool, RuntimeError> {
        if p.status != Status::Waiting || now < p.expires_at {
            return Ok(false);
        }
        p.status = Status::Expired;
        p.reason = Some("nobody decided before it expired: silence is not consent".into());
        tx.put_proposal(p)?;
        events.push(self.proposal_event(EventKind::Expiry, None, p));
        Ok(true)
    }

    fn make_rule(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        new: &NewRule,
        now: u64,
    ) -> Result<StandingRule, RuntimeError> {
        let refuse = |events: &mut Vec<AuditEvent>, message: String| {
            events.push(AuditEvent {
                at: now,
                kind: EventKind::Refusal,
                who: Some(new.by.clone()),
                agent: new.agent.clone(),
                skill: new.skill.clone().unwrap_or_default(),
                tool: new.tool.clone(),
                proposal: None,
                fingerprint: None,
                rule: None,
                outcome: "refused".into(),
                reason: Some(message.clone()),
            });
            RuntimeError::refused(Refusal::Rule, message)
        };
        let (agent_name, tool_name) = (&new.agent, &new.tool);
        let Some(agent) = table.agents.get(agent_name) else {
            return Err(refuse(events, format!("unknown agent `{agent_name}`")));
        };
        let Some(tool) = table.tools.get(tool_name) else {
            return Err(refuse(events, format!("unknown tool `{tool_name}`")));
        };
        // Spec §5: a rule for any arguments is not allowed for a tool with a `shell` parameter (it would let
        // every command line the rules propose run alone), and rules bound to these exact arguments are not
        // made yet: so none is.
        if let Ok(Some(param)) | Err(param) = tool.shell_param() {
            return Err(refuse(
                events,
                format!(
                    "`{tool_name}` takes the command line `{param}`: a standing rule would let any command line that is proposed run alone; approve each proposal instead"
                ),
            ));
        }
        let skills: Vec<String> = match &new.skill {
            Some(skill) => {
                if !table.skills.contains_key(skill) {
                    return Err(refuse(events, format!("unknown skill `{skill}`")));
                }
                if !agent.skills.contains(skill) {
                    return Err(refuse(events, format!("`{skill}` is not one of the skills of `{agent_name}`")));
                }
                vec![skill.clone()]
            }
            None => agent.skills.clone(),
        };
        let mut covered = BTreeMap::new();
        let mut routed = Vec::new();
        for skill in &skills {
            let Some(entry) = table.entry(agent_name, skill, tool_name) else {
                if new.skill.is_some() {
                    return Err(refuse(
                        events,
                        format!(
                            "`{tool_name}` is not one of the tools of skill `{skill}`: a standing rule cannot offer it"
                        ),
                    ));
                }
                continue;
            };
            // A conditional entry is covered: at each call the rule applies only when the computed level
            // is exactly `propose`.
            let level = if entry.level.is_none() && !entry.reserved && tool.reserved.is_none() {
                Level::Propose
            } else {
                entry_level(entry, tool)
            };
            match level {
                Level::Never => {
                    return Err(refuse(
                        events,
                        format!(
                            "`{agent_name}` never calls `{tool_name}` in `{skill}` ({}): no standing rule can make it alone",
                            reasons_for(&entry.because, Level::Never)
                        ),
                    ));
                }
                Level::ProposeEveryTime => {
                    return Err(refuse(
                        events,
                        format!(
                            "`{tool_name}` is `propose_every_time` for `{agent_name}` in `{skill}` ({}): it takes no standing rule",
                            reasons_for(&entry.because, Level::ProposeEveryTime)
                        ),
                    ));
                }
                Level::Alone => {}
                Level::Propose => {
                    covered.insert(skill.clone(), entry.entry_digest.clone());
                    if entry.route != Route::Requester {
                        routed.push((skill.clone(), entry.route.clone()));
                    }
                }
            }
        }
        if covered.is_empty() {
            return Err(refuse(
                events,
                format!(
                    "`{tool_name}` is not at `propose` for `{agent_name}` in any skill: there is nothing to make alone"
                ),
            ));
        }
        let by = &new.by;
        if !table.persons.contains_key(by) {
            return Err(refuse(
                events,
                format!("`{by}` is not a person of the table: only a person makes a standing rule"),
            ));
        }
        let supervisor = holds(table, by, &table.authority.supervises);
        match &new.work_for {
            WorkFor::Person(p) if p == by => {
                if !supervisor && !holds(table, by, &table.authority.widens_autonomy) {
                    return Err(refuse(
                        events,
                        format!("`{by}` may not widen an agent's autonomy: `widens_autonomy` does not admit them"),
                    ));
                }
            }
            WorkFor::Person(p) => {
                if !table.persons.contains_key(p) {
                    return Err(refuse(events, format!("unknown person `{p}`")));
                }
                if !supervisor {
                    return Err(refuse(
                        events,
                        format!("only a supervisor makes a standing rule for someone else (`{p}`), not `{by}`"),
                    ));
                }
            }
            WorkFor::Everybody => {
                if !supervisor {
                    return Err(refuse(
                        events,
                        format!("only a supervisor makes a standing rule for everybody, not `{by}`"),
                    ));
                }
            }
        }
        for (skill, route) in &routed {
            let decider = resolve_decider(table, route, None, &agent.sponsor);
            if !supervisor && !decider.persons.contains(by) {
                return Err(refuse(
                    events,
                    format!(
                        "skill `{skill}` routes `{tool_name}` to {}: only its decider or a supervisor makes a standing rule for it, not `{by}`",
                        route_words(route)
                    ),
                ));
            }
        }
        let rule = StandingRule {
            id: format!("R-{}", tx.next_number("rule")?),
            agent: agent_name.clone(),
            tool: tool_name.clone(),
            skill: new.skill.clone(),
            work_for: new.work_for.clone(),
            by: by.clone(),
            definition_digest: tool.definition_digest.clone(),
            covered,
            created_at: now,
            uses: 0,
            revoked: None,
        };
        tx.put_rule(&rule)?;
        events.push(self.rule_event(EventKind::RuleCreated, by, &rule));
        Ok(rule)
    }

    fn refusal(
        &self,
        events: &mut Vec<AuditEvent>,
        who: &str,
        p: &Proposal,
        refusal: Refusal,
        message: String,
    ) -> RuntimeError {
        let mut e = self.proposal_event(EventKind::Refusal, Some(who), p);
        e.outcome = "refused".into();
        e.reason = Some(message.clone());
        events.push(e);
        RuntimeError::refused(refusal, message)
    }

    fn proposal_event(&self, kind: EventKind, who: Option<&str>, p: &Proposal) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind,
            who: who.map(str::to_string),
            agent: p.agent.clone(),
            skill: p.skill.clone(),
            tool: p.tool.clone(),
            proposal: Some(p.id.clone()),
            fingerprint: Some(p.fingerprint.clone()),
            rule: None,
            outcome: p.status.to_string(),
            reason: p.reason.clone(),
        }
    }

    fn call_event(&self, kind: EventKind, who: Option<&str>, call: &Call, decision: &Decision) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind,
            who: who.map(str::to_string),
            agent: call.agent.clone(),
            skill: call.skill.clone(),
            tool: call.tool.clone(),
            proposal: None,
            fingerprint: None,
            rule: decision.standing_rule.clone(),
            outcome: decision.level.to_string(),
            reason: Some(refusal_message(decision)),
        }
    }

    fn rule_event(&self, kind: EventKind, who: &str, rule: &StandingRule) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind,
            who: Some(who.to_string()),
            agent: rule.agent.clone(),
            skill: rule.skill.clone().unwrap_or_default(),
            tool: rule.tool.clone(),
            proposal: None,
            fingerprint: None,
            rule: Some(rule.id.clone()),
            outcome: if rule.revoked.is_some() { "revoked".into() } else { "in force".into() },
            reason: None,
        }
    }
}

/// The operation id a proposal's execution sends to the other side (spec §6): `OPERATION_KEY:P-n`, unique
/// per proposal and stable across restarts, so the other side can recognise a repeat.
pub fn operation_id(p: &Proposal) -> String {
    format!("{}:{}", p.operation_key, p.id)
}

fn load(tx: &mut dyn Transaction, id: &str) -> Result<Proposal, RuntimeError> {
    tx.proposal(id)?.ok_or_else(|| RuntimeError::UnknownProposal(id.to_string()))
}

fn proposal_call(p: &Proposal) -> Call {
    Call {
        agent: p.agent.clone(),
        skill: p.skill.clone(),
        tool: p.tool.clone(),
        arguments: p.arguments.clone(),
        requester: p.requester.clone(),
    }
}

fn words_of(value: Option<&str>) -> String {
    match value {
        Some(v) => format!("`{v}`"),
        None => "none".to_string(),
    }
}

fn outcome_words(outcome: &RunOutcome) -> (&'static str, Option<String>) {
    match outcome {
        RunOutcome::Done(_) => ("done", None),
        RunOutcome::Failed(why) => ("failed", Some(why.clone())),
        RunOutcome::Unknown(why) => ("unknown", Some(why.clone())),
    }
}

/// Who may decide a proposal now (spec §5 "Who decides"): a person admitted by `decides_proposals`, or the
/// route's decider — but never the requester of a proposal routed elsewhere.
fn may_decide(table: &Table, p: &Proposal, person: &str) -> Result<(), String> {
    if !table.persons.contains_key(person) {
        return Err(format!("`{person}` is not a person of the table: only a person decides a proposal"));
    }
    if holds(table, person, &table.authority.decides_proposals) {
        return Ok(());
    }
    let sponsor = table.agents.get(&p.agent).map(|a| a.sponsor.as_str()).unwrap_or_default();
    let route = &p.decider.route;
    let decider = resolve_decider(table, route, p.requester.as_deref(), sponsor);
    let who = match route {
        Route::Requester | Route::Person(_) => {
            decider.persons.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        }
        Route::Role(r) => format!("a holder of role `{r}`"),
        Route::Queue(q) => format!("a member of queue `{q}`"),
    };
    if *route != Route::Requester {
        let source = match table.skills.get(&p.skill).and_then(|s| s.routes.get(&p.tool)) {
            Some(r) if r == route => format!("skill `{}`", p.skill),
            _ => format!("agent `{}`", p.agent),
        };
        let because = format!("the decision is {who}'s because {source} routes `{}` to {}", p.tool, route_words(route));
        if p.requester.as_deref() == Some(person) {
            return Err(format!("{because}; the work is for `{person}`, but the decision is not `{person}`'s"));
        }
        if decider.persons.iter().any(|d| d == person) {
            return Ok(());
        }
        return Err(format!("`{person}` may not decide proposal `{}`: {because}", p.id));
    }
    if decider.persons.iter().any(|d| d == person) {
        return Ok(());
    }
    Err(format!("`{person}` may not decide proposal `{}`: the decision is {who}'s, the person the work is for", p.id))
}

/// A route with its name in backticks: "person `Noor`", "role `SupportReviewer`".
fn route_words(route: &Route) -> String {
    match route {
        Route::Requester => "the requester".to_string(),
        Route::Person(p) => format!("person `{p}`"),
        Route::Role(r) => format!("role `{r}`"),
        Route::Queue(q) => format!("queue `{q}`"),
    }
}

fn reasons_for(reasons: &[Reason], level: Level) -> String {
    let texts: Vec<String> = reasons.iter().filter(|r| r.level == level).map(describe_reason).collect();
    if texts.is_empty() { "the table says so".to_string() } else { texts.join("; ") }
}

fn describe_reason(r: &Reason) -> String {
    let mut out = String::new();
    if let Some(layer) = r.layer {
        out.push_str(&format!("{layer} layer: "));
    }
    out.push_str(&r.rule);
    if let Some(via) = &r.via {
        out.push_str(&format!(" via `{via}`"));
    }
    if let Some(at) = &r.at {
        out.push_str(&format!(" at {at}"));
    }
    out
}

/// The message a refused call gets: the triple, and the reason or the rules behind the level (layer, rule,
/// callee, file:line).
fn refusal_message(d: &Decision) -> String {
    if let Some(refusal) = &d.refusal {
        return format!("`{}` may not call `{}` in `{}`: {refusal}", d.agent, d.tool, d.skill);
    }
    let rules = reasons_for(&d.reasons, d.table_level.unwrap_or(d.level));
    match d.level {
        Level::Never => format!("`{}` never calls `{}` in `{}`: {rules}", d.agent, d.tool, d.skill),
        Level::Alone => format!("`{}` calls `{}` in `{}` alone: {rules}", d.agent, d.tool, d.skill),
        level => format!("`{}` must propose `{}` in `{}` ({level}): {rules}", d.agent, d.tool, d.skill),
    }
}
