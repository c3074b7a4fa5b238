//! Storage of proposals, standing rules and the budget ledger (spec §5, §6), behind a transactional trait.
//!
//! Every state change of the runtime happens inside one [`Transaction`]: it reads what it needs, writes
//! every record the change touches, and commits once. Dropping a transaction without committing rolls it
//! back. This is the shape of an SQLite `BEGIN IMMEDIATE … COMMIT`, so a durable store fits behind the same
//! trait: [`MemoryStore`] (lost with the process) and, with the `sqlite` feature,
//! [`crate::SqliteStore`] (durable).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::audit::{AuditHead, ChainedEvent};
use super::error::StoreError;
use super::records::{BudgetRecord, Lease, Proposal, Reservation, Run, StandingRule, Status, TableInstall, Task};

/// Which proposals a [`Transaction::proposal_page`] reads: every filter given must hold (an empty query
/// matches every proposal). Built by the runtime ([`crate::Runtime::waiting_page_for`],
/// [`crate::Runtime::proposal_page`]) for the inbox's lists and the API's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProposalQuery {
    /// Only proposals in this status.
    pub status: Option<Status>,
    /// Only proposals under this operation key (one task's).
    pub operation_key: Option<String>,
    /// Only proposals of these agents (a host key's).
    pub agents: Option<Vec<String>>,
    /// Only proposals routed to one of these deciders ([`decider_key`]).
    pub deciders: Option<DeciderQuery>,
    /// Only proposals this person asked for (the requester) or decided: a person's history.
    pub involving: Option<String>,
    /// Only proposals whose expiry is after this time (seconds since the Unix epoch): with `waiting`, the
    /// ones still open, although a store may hold one past its expiry until the runtime reads it.
    pub open_at: Option<u64>,
}

/// The deciders a person's queue is read by: a proposal matches when its [`decider_key`] is one of
/// `direct`, or one of `shared` and its requester is not `person` (a person never decides their own
/// request routed to their role or queue, spec §5 "Who decides"), or — with `own_requests` — when its
/// requester is `person`, whoever decides it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeciderQuery {
    /// Keys that match whoever asked: `person:NAME`, `requester:NAME`, `sponsored:AGENT`.
    pub direct: Vec<String>,
    /// Keys of a group: `role:NAME`, `queue:NAME`.
    pub shared: Vec<String>,
    /// The person whose queue it is: the shared keys leave out their own requests.
    pub person: String,
    /// Also every proposal `person` asked for (their requests, decided by others too).
    pub own_requests: bool,
}

/// How many proposals of a query have one [`decider_key`] ([`Transaction::proposal_counts`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProposalCount {
    /// The decider key.
    pub decider: String,
    /// Whether these are requests of the query's [`DeciderQuery::person`] (false without one).
    pub own: bool,
    /// How many.
    pub count: usize,
}

/// One page of proposals ([`Transaction::proposal_page`]): newest first, and how many match in all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProposalPage {
    /// The page, newest first.
    pub proposals: Vec<Proposal>,
    /// How many proposals match the query, on every page together.
    pub total: usize,
}

/// The key a proposal's deciders are indexed by: `person:NAME`, `role:NAME`, `queue:NAME`, or for the
/// default route, `requester:NAME` (the person the work is for) or `sponsored:AGENT` (work for nobody,
/// decided by the agent's sponsor).
pub fn decider_key(p: &Proposal) -> String {
    use crate::table::Route;
    match (&p.decider.route, &p.requester) {
        (Route::Person(n), _) => format!("person:{n}"),
        (Route::Role(n), _) => format!("role:{n}"),
        (Route::Queue(n), _) => format!("queue:{n}"),
        (Route::Requester, Some(r)) => format!("requester:{r}"),
        (Route::Requester, None) => format!("sponsored:{}", p.agent),
    }
}

impl ProposalQuery {
    /// Whether `p` matches every filter of the query: what every store's [`Transaction::proposal_page`]
    /// answers, indexed or not.
    pub fn matches(&self, p: &Proposal) -> bool {
        self.status.is_none_or(|s| p.status == s)
            && self.operation_key.as_ref().is_none_or(|k| &p.operation_key == k)
            && self.agents.as_ref().is_none_or(|a| a.contains(&p.agent))
            && self.deciders.as_ref().is_none_or(|d| {
                let key = decider_key(p);
                let own = p.requester.as_deref() == Some(d.person.as_str());
                d.direct.contains(&key) || (d.shared.contains(&key) && !own) || (d.own_requests && own)
            })
            && self.involving.as_ref().is_none_or(|x| {
                p.requester.as_deref() == Some(x.as_str()) || p.decided_by.as_deref() == Some(x.as_str())
            })
            && self.open_at.is_none_or(|t| p.expires_at > t)
    }
}

/// A store of proposals and standing rules.
pub trait Store {
    /// Begins a transaction. Transactions are serialized: a second `begin` waits until the first one ends
    /// (commit or drop). Never begin a second transaction on a thread that holds one.
    ///
    /// Errors: the store's, when it cannot begin.
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, StoreError>;
}

/// One transaction. Reads see its own writes. Nothing is visible to others, or durable, before
/// [`Transaction::commit`]; dropping it without committing discards every write.
pub trait Transaction {
    /// The next number of a sequence (`"proposal"`, `"rule"`), starting at 1.
    fn next_number(&mut self, sequence: &str) -> Result<u64, StoreError>;
    /// The proposal with this id.
    fn proposal(&mut self, id: &str) -> Result<Option<Proposal>, StoreError>;
    /// The proposal with this fingerprint under this operation key (at most one exists).
    fn proposal_by_fingerprint(
        &mut self,
        operation_key: &str,
        fingerprint: &str,
    ) -> Result<Option<Proposal>, StoreError>;
    /// The proposals under this operation key for this tool and subject (canonical JSON of the subject
    /// argument), oldest first.
    fn proposals_for_subject(
        &mut self,
        operation_key: &str,
        tool: &str,
        subject: &str,
    ) -> Result<Vec<Proposal>, StoreError>;
    /// Every proposal, oldest first.
    fn proposals(&mut self) -> Result<Vec<Proposal>, StoreError>;
    /// The proposals stored with this status, oldest first (a `waiting` one may be past its expiry: the
    /// runtime expires it as it reads it). A store with an index overrides this filter of [`Transaction::proposals`].
    fn proposals_in_status(&mut self, status: Status) -> Result<Vec<Proposal>, StoreError> {
        Ok(self.proposals()?.into_iter().filter(|p| p.status == status).collect())
    }
    /// One page of the proposals that match `query` ([`ProposalQuery::matches`]), **newest first**: at most
    /// `limit` of them after skipping `offset`, with how many match in all. A store with indexes on the
    /// query's columns (SQLite, PostgreSQL) reads only the page and counts through the index; this default
    /// filters [`Transaction::proposals`].
    fn proposal_page(
        &mut self,
        query: &ProposalQuery,
        offset: usize,
        limit: usize,
    ) -> Result<ProposalPage, StoreError> {
        let mut all: Vec<Proposal> = self.proposals()?.into_iter().filter(|p| query.matches(p)).collect();
        let total = all.len();
        all.reverse();
        Ok(ProposalPage { proposals: all.into_iter().skip(offset).take(limit).collect(), total })
    }
    /// How many proposals match `query`, by [`decider_key`] and by whether they are the query's person's
    /// own requests, sorted: the inbox's counts, without reading the records where the store has the
    /// columns. This default counts [`Transaction::proposals`].
    fn proposal_counts(&mut self, query: &ProposalQuery) -> Result<Vec<ProposalCount>, StoreError> {
        let person = query.deciders.as_ref().map(|d| d.person.as_str());
        let mut counts: BTreeMap<(String, bool), usize> = BTreeMap::new();
        for p in self.proposals()?.into_iter().filter(|p| query.matches(p)) {
            let own = person.is_some() && p.requester.as_deref() == person;
            *counts.entry((decider_key(&p), own)).or_default() += 1;
        }
        Ok(counts.into_iter().map(|((decider, own), count)| ProposalCount { decider, own, count }).collect())
    }
    /// Inserts or replaces a proposal (by id).
    fn put_proposal(&mut self, proposal: &Proposal) -> Result<(), StoreError>;
    /// Every standing rule, revoked ones included, oldest first.
    fn rules(&mut self) -> Result<Vec<StandingRule>, StoreError>;
    /// Inserts or replaces a standing rule (by id).
    fn put_rule(&mut self, rule: &StandingRule) -> Result<(), StoreError>;
    /// The ledger record of a budget, if the budget was ever used.
    fn budget(&mut self, name: &str) -> Result<Option<BudgetRecord>, StoreError>;
    /// Inserts or replaces a budget's ledger record (by name).
    fn put_budget(&mut self, record: &BudgetRecord) -> Result<(), StoreError>;
    /// The reservation a holder (a proposal id, or `A-n`) has, if any.
    fn reservation(&mut self, holder: &str) -> Result<Option<Reservation>, StoreError>;
    /// Inserts or replaces a reservation (by holder).
    fn put_reservation(&mut self, reservation: &Reservation) -> Result<(), StoreError>;
    /// Removes a holder's reservation (nothing when it has none).
    fn remove_reservation(&mut self, holder: &str) -> Result<(), StoreError>;
    /// The sum of a budget's reservations, in its minor unit.
    fn reserved_total(&mut self, budget: &str) -> Result<u64, StoreError>;
    /// The sum of a budget's reservations held for one task ([`Reservation::task`]), in its minor unit.
    fn reserved_for_task(&mut self, budget: &str, task: &str) -> Result<u64, StoreError>;
    /// What one task spent from a budget (spec §6 "Per task"), in its minor unit: 0 when it never spent.
    fn task_spent(&mut self, budget: &str, task: &str) -> Result<u64, StoreError>;
    /// Sets what one task spent from a budget (inserts or replaces, by budget and task).
    fn put_task_spent(&mut self, budget: &str, task: &str, spent: u64) -> Result<(), StoreError>;
    /// The alone run with this id (`A-n`).
    fn run(&mut self, id: &str) -> Result<Option<Run>, StoreError>;
    /// The alone run claimed with this claim token (at most one exists).
    fn run_by_token(&mut self, token: &str) -> Result<Option<Run>, StoreError>;
    /// Inserts or replaces an alone run (by id).
    fn put_run(&mut self, run: &Run) -> Result<(), StoreError>;
    /// The head of the store's audit chain (its last event), if it has any (spec §5a).
    fn audit_head(&mut self) -> Result<Option<AuditHead>, StoreError>;
    /// Appends an event to the audit chain; its `seq` follows the head's.
    fn append_audit(&mut self, event: &ChainedEvent) -> Result<(), StoreError>;
    /// Every event of the audit chain, oldest first.
    fn audit_events(&mut self) -> Result<Vec<ChainedEvent>, StoreError>;
    /// Every table installed in the store, oldest first; the last is the current one (spec §5a).
    fn installed_tables(&mut self) -> Result<Vec<TableInstall>, StoreError>;
    /// The store's current table: the last one installed, if any.
    fn current_table(&mut self) -> Result<Option<TableInstall>, StoreError>;
    /// Records a table install; its `seq` follows the last one's.
    fn put_installed_table(&mut self, install: &TableInstall) -> Result<(), StoreError>;
    /// The task bound to an operation key, if any (spec §5a "Tasks").
    fn task(&mut self, key: &str) -> Result<Option<Task>, StoreError>;
    /// Inserts or replaces a task (by key).
    fn put_task(&mut self, task: &Task) -> Result<(), StoreError>;
    /// The lease on an operation key, if one was ever taken (spec §5a "Leases"); an expired or released
    /// one stays, so the next take knows the fence to pass.
    fn lease(&mut self, key: &str) -> Result<Option<Lease>, StoreError>;
    /// Inserts or replaces a lease (by key).
    fn put_lease(&mut self, lease: &Lease) -> Result<(), StoreError>;
    /// Makes every write of the transaction visible and durable, at once.
    fn commit(self: Box<Self>) -> Result<(), StoreError>;
    /// Commits like [`Transaction::commit`], but may return before the commit itself is durable. The runtime
    /// uses it only where losing the commit to a power loss breaks no promise ([`Lazily`] says which), never
    /// for a change that must hold before something acts on it (a claim, a grant, a reservation). The commit
    /// is visible and in the chain's order at once, and durable with the store's next sync (a power loss
    /// before it can lose that commit, and then every commit after it, so the chain stays whole); the
    /// durable commits before it (what it read that matters) are durable before it returns. `when` says how
    /// soon the store syncs it when no durable commit comes first. The default is [`Transaction::commit`];
    /// the SQLite store with [`crate::Synchronous::Group`] returns without waiting for its sync (a background
    /// thread runs it, [`Lazily`]), PostgreSQL commits with `synchronous_commit = off`.
    fn commit_lazily(self: Box<Self>, when: Lazily) -> Result<(), StoreError> {
        let _ = when;
        self.commit()
    }
    /// Commits like [`Transaction::commit`] and starts the commit's sync without waiting for it: the
    /// answer's [`Syncing::wait`] returns once the commit is durable. The runtime uses it only for a claim
    /// whose tool only reads ([`crate::Runtime::claim_if_alone_syncing`]), so that the read runs while the
    /// disk syncs and its answer is held until the claim is durable. The commit is visible at once. The
    /// default is [`Transaction::commit`] (durable before it returns) and an already finished
    /// [`Syncing`]; the SQLite store with [`crate::Synchronous::Group`] hands the sync to its background
    /// thread at once.
    fn commit_syncing(self: Box<Self>) -> Result<Syncing, StoreError> {
        self.commit().map(|()| Syncing::durable())
    }
}

/// Which lazy commit this is ([`Transaction::commit_lazily`]), and so how soon the store makes it durable
/// when no durable commit comes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lazily {
    /// A question's audit event (a decide, spec §5 "Decide", §5a "Audit"), the transaction's one write:
    /// synced at once, by a background sync.
    Question,
    /// The receipt of an execution, recorded after the host has handed the tool's answer on (an MCP
    /// gateway's alone call, [`crate::Runtime::record_outcome_lazily`]): synced with the next durable commit,
    /// or once the store has had no commit for [`Lazily::QUIET_MILLIS`] milliseconds, so that calls following
    /// one another share the next claim's sync instead of each paying a sync of its own after its answer.
    /// Lost to a power loss, the run stays `sending` (its outcome not recorded, never run again, its
    /// reservation held): what a crash just before the receipt leaves.
    Receipt,
}

impl Lazily {
    /// How long (milliseconds) a store must have had no commit before a [`Lazily::Receipt`] is synced on its
    /// own (10).
    pub const QUIET_MILLIS: u64 = 10;
    /// The longest (milliseconds) a [`Lazily::Receipt`] waits for its sync, however busy the store (1,000).
    pub const MAX_LAG_MILLIS: u64 = 1000;
}

/// A commit's sync, which may still be running ([`Transaction::commit_syncing`]): nothing the commit
/// authorizes may leave the host before [`Syncing::wait`] has returned `Ok`.
#[must_use = "wait for the sync before anything the commit authorizes leaves the host"]
pub struct Syncing {
    wait: Option<Box<dyn FnOnce() -> Result<(), StoreError> + Send>>,
}

impl Syncing {
    /// A commit that is durable already.
    pub fn durable() -> Syncing {
        Syncing { wait: None }
    }

    /// A commit whose sync is running: `wait` returns once it is durable.
    pub(crate) fn pending(wait: impl FnOnce() -> Result<(), StoreError> + Send + 'static) -> Syncing {
        Syncing { wait: Some(Box::new(wait)) }
    }

    /// Returns once the commit is durable (at once for [`Syncing::durable`]).
    ///
    /// Errors: the sync failed, now or before (the store's message): the commit may be lost to a power loss
    /// or an operating-system crash, so nothing it authorized may leave the host.
    pub fn wait(self) -> Result<(), StoreError> {
        match self.wait {
            Some(wait) => wait(),
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for Syncing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.wait.is_some() { "Syncing(pending)" } else { "Syncing(durable)" })
    }
}

/// The in-memory store: lost when the process ends. Transactions hold a lock for their whole life and
/// keep a copy of the state from before their first write, restored on rollback.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<MemoryState>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

#[derive(Clone, Debug, Default)]
struct MemoryState {
    sequences: BTreeMap<String, u64>,
    /// Proposals by number (ids are `P-n`), so iteration is oldest first.
    proposals: BTreeMap<u64, Proposal>,
    proposal_numbers: BTreeMap<String, u64>,
    rules: BTreeMap<u64, StandingRule>,
    rule_numbers: BTreeMap<String, u64>,
    next_slot: u64,
    budgets: BTreeMap<String, BudgetRecord>,
    /// What each task spent, by (budget, task).
    task_spent: BTreeMap<(String, String), u64>,
    reservations: BTreeMap<String, Reservation>,
    runs: BTreeMap<String, Run>,
    tasks: BTreeMap<String, Task>,
    leases: BTreeMap<String, Lease>,
    audit: Vec<ChainedEvent>,
    tables: Vec<TableInstall>,
}

impl Store for MemoryStore {
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Box::new(MemoryTransaction { guard, before: None, audit_len: None, committed: false }))
    }
}

struct MemoryTransaction<'a> {
    guard: MutexGuard<'a, MemoryState>,
    /// The state before the first write, without the audit chain (which only grows, so a rollback only
    /// truncates it, and a transaction never copies it).
    before: Option<MemoryState>,
    /// The chain's length before the transaction's first append.
    audit_len: Option<usize>,
    committed: bool,
}

impl MemoryTransaction<'_> {
    fn write(&mut self) -> &mut MemoryState {
        if self.before.is_none() {
            let audit = std::mem::take(&mut self.guard.audit);
            self.before = Some(self.guard.clone());
            self.guard.audit = audit;
        }
        &mut self.guard
    }
}

impl Drop for MemoryTransaction<'_> {
    fn drop(&mut self) {
        if !self.committed {
            if let Some(before) = self.before.take() {
                let audit = std::mem::take(&mut self.guard.audit);
                *self.guard = before;
                self.guard.audit = audit;
            }
            if let Some(len) = self.audit_len {
                self.guard.audit.truncate(len);
            }
        }
    }
}

impl Transaction for MemoryTransaction<'_> {
    fn next_number(&mut self, sequence: &str) -> Result<u64, StoreError> {
        let counter = self.write().sequences.entry(sequence.to_string()).or_insert(0);
        *counter += 1;
        Ok(*counter)
    }

    fn proposal(&mut self, id: &str) -> Result<Option<Proposal>, StoreError> {
        let state = &*self.guard;
        Ok(state.proposal_numbers.get(id).and_then(|n| state.proposals.get(n)).cloned())
    }

    fn proposal_by_fingerprint(
        &mut self,
        operation_key: &str,
        fingerprint: &str,
    ) -> Result<Option<Proposal>, StoreError> {
        Ok(self
            .guard
            .proposals
            .values()
            .find(|p| p.operation_key == operation_key && p.fingerprint == fingerprint)
            .cloned())
    }

    fn proposals_for_subject(
        &mut self,
        operation_key: &str,
        tool: &str,
        subject: &str,
    ) -> Result<Vec<Proposal>, StoreError> {
        Ok(self
            .guard
            .proposals
            .values()
            .filter(|p| p.operation_key == operation_key && p.tool == tool && p.subject.as_deref() == Some(subject))
            .cloned()
            .collect())
    }

    fn proposals(&mut self) -> Result<Vec<Proposal>, StoreError> {
        Ok(self.guard.proposals.values().cloned().collect())
    }

    fn put_proposal(&mut self, proposal: &Proposal) -> Result<(), StoreError> {
        let state = self.write();
        let slot = match state.proposal_numbers.get(&proposal.id) {
            Some(slot) => *slot,
            None => {
                state.next_slot += 1;
                state.proposal_numbers.insert(proposal.id.clone(), state.next_slot);
                state.next_slot
            }
        };
        state.proposals.insert(slot, proposal.clone());
        Ok(())
    }

    fn rules(&mut self) -> Result<Vec<StandingRule>, StoreError> {
        Ok(self.guard.rules.values().cloned().collect())
    }

    fn put_rule(&mut self, rule: &StandingRule) -> Result<(), StoreError> {
        let state = self.write();
        let slot = match state.rule_numbers.get(&rule.id) {
            Some(slot) => *slot,
            None => {
                state.next_slot += 1;
                state.rule_numbers.insert(rule.id.clone(), state.next_slot);
                state.next_slot
            }
        };
        state.rules.insert(slot, rule.clone());
        Ok(())
    }

    fn budget(&mut self, name: &str) -> Result<Option<BudgetRecord>, StoreError> {
        Ok(self.guard.budgets.get(name).cloned())
    }

    fn put_budget(&mut self, record: &BudgetRecord) -> Result<(), StoreError> {
        self.write().budgets.insert(record.name.clone(), record.clone());
        Ok(())
    }

    fn reservation(&mut self, holder: &str) -> Result<Option<Reservation>, StoreError> {
        Ok(self.guard.reservations.get(holder).cloned())
    }

    fn put_reservation(&mut self, reservation: &Reservation) -> Result<(), StoreError> {
        self.write().reservations.insert(reservation.holder.clone(), reservation.clone());
        Ok(())
    }

    fn remove_reservation(&mut self, holder: &str) -> Result<(), StoreError> {
        self.write().reservations.remove(holder);
        Ok(())
    }

    fn reserved_total(&mut self, budget: &str) -> Result<u64, StoreError> {
        Ok(self
            .guard
            .reservations
            .values()
            .filter(|r| r.budget == budget)
            .fold(0u64, |sum, r| sum.saturating_add(r.amount)))
    }

    fn reserved_for_task(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        Ok(self
            .guard
            .reservations
            .values()
            .filter(|r| r.budget == budget && r.task.as_deref() == Some(task))
            .fold(0u64, |sum, r| sum.saturating_add(r.amount)))
    }

    fn task_spent(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        Ok(self.guard.task_spent.get(&(budget.to_string(), task.to_string())).copied().unwrap_or(0))
    }

    fn put_task_spent(&mut self, budget: &str, task: &str, spent: u64) -> Result<(), StoreError> {
        self.write().task_spent.insert((budget.to_string(), task.to_string()), spent);
        Ok(())
    }

    fn run(&mut self, id: &str) -> Result<Option<Run>, StoreError> {
        Ok(self.guard.runs.get(id).cloned())
    }

    fn run_by_token(&mut self, token: &str) -> Result<Option<Run>, StoreError> {
        Ok(self.guard.runs.values().find(|r| r.token == token).cloned())
    }

    fn put_run(&mut self, run: &Run) -> Result<(), StoreError> {
        // A claim token is bound to one run, as the durable stores' unique index keeps it.
        if self.guard.runs.values().any(|r| r.token == run.token && r.id != run.id) {
            return Err(StoreError(format!("cannot store the run `{}`: its claim token is another run's", run.id)));
        }
        self.write().runs.insert(run.id.clone(), run.clone());
        Ok(())
    }

    fn audit_head(&mut self) -> Result<Option<AuditHead>, StoreError> {
        Ok(self.guard.audit.last().map(ChainedEvent::head))
    }

    fn append_audit(&mut self, event: &ChainedEvent) -> Result<(), StoreError> {
        // A place in the chain is taken once, as the durable stores' primary key keeps it.
        if self.guard.audit.iter().any(|e| e.seq == event.seq) {
            return Err(StoreError(format!("cannot store audit event {}: its place is taken", event.seq)));
        }
        if self.audit_len.is_none() {
            self.audit_len = Some(self.guard.audit.len());
        }
        self.guard.audit.push(event.clone());
        Ok(())
    }

    fn audit_events(&mut self) -> Result<Vec<ChainedEvent>, StoreError> {
        Ok(self.guard.audit.clone())
    }

    fn installed_tables(&mut self) -> Result<Vec<TableInstall>, StoreError> {
        Ok(self.guard.tables.clone())
    }

    fn current_table(&mut self) -> Result<Option<TableInstall>, StoreError> {
        Ok(self.guard.tables.last().cloned())
    }

    fn put_installed_table(&mut self, install: &TableInstall) -> Result<(), StoreError> {
        self.write().tables.push(install.clone());
        Ok(())
    }

    fn task(&mut self, key: &str) -> Result<Option<Task>, StoreError> {
        Ok(self.guard.tasks.get(key).cloned())
    }

    fn put_task(&mut self, task: &Task) -> Result<(), StoreError> {
        self.write().tasks.insert(task.key.clone(), task.clone());
        Ok(())
    }

    fn lease(&mut self, key: &str) -> Result<Option<Lease>, StoreError> {
        Ok(self.guard.leases.get(key).cloned())
    }

    fn put_lease(&mut self, lease: &Lease) -> Result<(), StoreError> {
        self.write().leases.insert(lease.key.clone(), lease.clone());
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.committed = true;
        Ok(())
    }
}
