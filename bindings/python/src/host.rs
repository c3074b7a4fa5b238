//! What Python supplies to the runtime — the host's `authority`, `versions`, `naming`, `clock` and `audit`
//! callbacks and the tool to run — and the rules they run under.
//!
//! Every runtime operation runs with the GIL released (see `runtime::PyRuntime::op`). A callback
//! re-acquires it only to call into Python, on the thread of the operation; an operation's state lives in a
//! thread-local [`Scope`], so one runtime serves many threads at once:
//!
//! - **A failing callback changes nothing.** An exception raised in `authority`, `versions` or `naming`, or
//!   an answer of the wrong type, is recorded in the scope; the callback answers the runtime as a refusal
//!   would (never an allow), and [`VetoStore`] refuses to commit the transaction it was called in, which
//!   rolls it back. The operation then raises `permits.Refused(kind="callback")` with the exception as its
//!   cause.
//! - **The clock is read once per operation**, before it begins (with the GIL, outside any lock), so a
//!   clock that raises stops the operation before anything happened.
//! - **No re-entry.** While `authority`, `versions`, `naming`, `clock` or `audit` runs, a runtime method
//!   called on the same thread is refused (`permits.Refused(kind="reentry")`) instead of waiting for the
//!   store lock its own operation holds. The tool may call back in: it runs outside any transaction.
//! - **Audit failures never undo an operation**: the sink is called after the commit; a failure is
//!   counted ([`PyAudit::failures`]).

use std::cell::RefCell;
use std::fs::File;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use permits_runtime::table::ParamInfo;
use permits_runtime::{
    AuditEvent, AuditHead, AuditSink, Authority, BudgetRecord, ChainedEvent, Clock, JsonLinesSink, Naming, Principal,
    Proposal, Reservation, Run, RunContext, RunOutcome, StandingRule, Store, StoreError, SystemClock, TableInstall,
    Task, Transaction, VersionQuery, Versions,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};
use serde_json::Value;

use crate::convert::{input_error, json_from_py, json_to_py, type_name};
use crate::results;

/// The state of the operation running on this thread.
#[derive(Default)]
struct Scope {
    /// The time of this operation, read from the host's clock callable before it began.
    now: Option<u64>,
    /// The first callback failure of this operation: it vetoes every commit that follows.
    failure: Option<Failure>,
    /// The callback running on this thread now, if any.
    in_callback: Option<&'static str>,
}

thread_local! {
    static SCOPE: RefCell<Scope> = RefCell::new(Scope::default());
}

/// A callback that raised, or answered with the wrong type.
pub struct Failure {
    /// Its name (`authority`).
    pub callback: &'static str,
    /// What it raised (or the `InputError` for its answer).
    pub error: PyErr,
}

/// One runtime operation on this thread: a fresh [`Scope`] while it lives, the previous one back after
/// (an operation the tool starts from inside another one has its own).
pub struct OpScope {
    saved: Option<Scope>,
}

impl OpScope {
    /// Begins an operation whose clock reads `now` (`None`: the runtime's own clock).
    pub fn enter(now: Option<u64>) -> OpScope {
        let fresh = Scope { now, failure: None, in_callback: None };
        OpScope { saved: Some(SCOPE.with(|s| s.replace(fresh))) }
    }

    /// Ends the operation: its callback failure, if one happened.
    pub fn finish(mut self) -> Option<Failure> {
        let saved = self.saved.take().unwrap_or_default();
        SCOPE.with(|s| s.replace(saved)).failure
    }
}

impl Drop for OpScope {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            SCOPE.with(|s| s.replace(saved));
        }
    }
}

/// The callback running on this thread, if any: a runtime method called now is re-entry.
pub fn in_callback() -> Option<&'static str> {
    SCOPE.with(|s| s.borrow().in_callback)
}

fn failed() -> bool {
    SCOPE.with(|s| s.borrow().failure.is_some())
}

fn record_failure(callback: &'static str, error: PyErr) {
    SCOPE.with(|s| {
        let mut s = s.borrow_mut();
        if s.failure.is_none() {
            s.failure = Some(Failure { callback, error });
        }
    });
}

/// Runs `f` with the GIL as the callback `name` (re-entry refused meanwhile). An error is recorded as the
/// operation's failure (see the module documentation) and gives `None`.
fn callback<T>(name: &'static str, f: impl FnOnce(Python<'_>) -> PyResult<T>) -> Option<T> {
    match marked(name, f) {
        Ok(value) => Some(value),
        Err(error) => {
            record_failure(name, error);
            None
        }
    }
}

/// Runs `f` with the GIL, marked as the callback `name`.
pub fn marked<T>(name: &'static str, f: impl FnOnce(Python<'_>) -> PyResult<T>) -> PyResult<T> {
    let outcome = Python::try_attach(|py| {
        let previous = SCOPE.with(|s| s.borrow_mut().in_callback.replace(name));
        let result = f(py);
        SCOPE.with(|s| s.borrow_mut().in_callback = previous);
        result
    });
    outcome.unwrap_or_else(|| Err(crate::convert::detached_error("the Python interpreter is shutting down")))
}

/// The host's `authority(who, tool, arguments)`: `True` admits; `False` or a reason (a `str`) refuses.
pub struct PyAuthority(pub Py<PyAny>);

impl Authority for PyAuthority {
    fn admits(&self, who: Principal<'_>, tool: &str, arguments: &Value) -> Result<(), String> {
        let answer = callback("authority", |py| {
            let principal = results::Principal::of(who);
            let answer = self.0.bind(py).call1((principal, tool, json_to_py(py, arguments)?))?;
            if let Ok(b) = answer.cast::<PyBool>() {
                return Ok(if b.is_true() { Ok(()) } else { Err("the host's authority refuses".to_string()) });
            }
            if let Ok(s) = answer.cast::<PyString>() {
                let reason = s.to_str().map(str::trim).unwrap_or_default();
                return Ok(Err(if reason.is_empty() {
                    "the host's authority refuses".to_string()
                } else {
                    reason.to_string()
                }));
            }
            Err(input_error(
                py,
                format!(
                    "the `authority` callback returned `{}`: it answers True, False or a reason (str)",
                    type_name(&answer)
                ),
            ))
        });
        answer.unwrap_or_else(|| Err("the host's `authority` callback failed".to_string()))
    }
}

/// The host's `versions(query)`: the covered version as a `str`, or `None` when it cannot say.
pub struct PyVersions(pub Py<PyAny>);

impl Versions for PyVersions {
    fn covered_version(&self, query: VersionQuery<'_>) -> Option<String> {
        callback("versions", |py| {
            let answer = self.0.bind(py).call1((results::VersionQuery::of(&query),))?;
            if answer.is_none() {
                return Ok(None);
            }
            match answer.cast::<PyString>() {
                Ok(s) => Ok(Some(s.to_str()?.to_owned())),
                Err(_) => Err(input_error(
                    py,
                    format!("the `versions` callback returned `{}`: it answers a str, or None", type_name(&answer)),
                )),
            }
        })
        .flatten()
    }
}

/// The host's `naming(tool, param, value)`: how an argument reads to a person, a `str`.
pub struct PyNaming(pub Py<PyAny>);

impl Naming for PyNaming {
    fn show(&self, tool: &str, param: &ParamInfo, value: &Value) -> String {
        callback("naming", |py| {
            let answer = self.0.bind(py).call1((tool, results::Param::of(param), json_to_py(py, value)?))?;
            match answer.cast::<PyString>() {
                Ok(s) => Ok(s.to_str()?.to_owned()),
                Err(_) => Err(input_error(
                    py,
                    format!("the `naming` callback returned `{}`: it answers a str", type_name(&answer)),
                )),
            }
        })
        .unwrap_or_default()
    }
}

/// The clock of a runtime whose host gave a callable: the time the operation read before it began.
pub struct ScopeClock;

impl Clock for ScopeClock {
    fn now(&self) -> u64 {
        // Every operation reads the callable first; only a runtime call outside an operation (none today)
        // would fall back to the system's time.
        SCOPE.with(|s| s.borrow().now).unwrap_or_else(|| SystemClock.now())
    }
}

/// The audit sink: a Python callable given each event, or a JSON-lines file.
pub enum PyAudit {
    /// `audit(event)`, with failures counted.
    Callable {
        /// The callable.
        f: Py<PyAny>,
        /// How many events it failed to take.
        failures: AtomicU64,
        /// The last failure, in words.
        last: Mutex<Option<String>>,
    },
    /// One JSON line per event, appended to a file.
    File(JsonLinesSink<File>),
}

impl PyAudit {
    /// How many events could not be recorded.
    pub fn failures(&self) -> u64 {
        match self {
            PyAudit::Callable { failures, .. } => failures.load(Ordering::Relaxed),
            PyAudit::File(sink) => sink.failures(),
        }
    }

    /// The last failure of a callable sink, in words.
    pub fn last_failure(&self) -> Option<String> {
        match self {
            PyAudit::Callable { last, .. } => last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
            PyAudit::File(_) => None,
        }
    }
}

impl AuditSink for PyAudit {
    fn record(&self, event: &AuditEvent) {
        match self {
            PyAudit::File(sink) => sink.record(event),
            PyAudit::Callable { f, failures, last } => {
                let outcome = marked("audit", |py| f.bind(py).call1((results::AuditEvent(event.clone()),)).map(|_| ()));
                if let Err(e) = outcome {
                    failures.fetch_add(1, Ordering::Relaxed);
                    *last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e.to_string());
                }
            }
        }
    }
}

/// Runs the tool for the runtime: `run(ctx)` returns the receipt (any JSON), or `permits.Failed(why)` /
/// `permits.Unknown(why)`. An exception, or a return value that is not JSON, is recorded as `unknown` (the
/// tool may have acted) and kept in `raised` for the caller to raise as `permits.ToolError`.
pub fn run_tool(run: &Py<PyAny>, ctx: &RunContext<'_>, raised: &mut Option<PyErr>) -> RunOutcome {
    // Not `marked`: the tool runs outside any transaction, so it may call back into the runtime.
    let outcome = Python::try_attach(|py| -> PyResult<RunOutcome> {
        let answer = run.bind(py).call1((results::RunContext::of(ctx),))?;
        if let Ok(f) = answer.cast::<results::Failed>() {
            return Ok(RunOutcome::Failed(f.get().reason.clone()));
        }
        if let Ok(u) = answer.cast::<results::Unknown>() {
            return Ok(RunOutcome::Unknown(u.get().reason.clone()));
        }
        json_from_py(&answer, "the tool's receipt").map(RunOutcome::Done)
    });
    match outcome {
        Some(Ok(outcome)) => outcome,
        Some(Err(e)) => {
            let outcome = RunOutcome::Unknown(format!("the tool raised {e}: it may have acted"));
            *raised = Some(e);
            outcome
        }
        None => RunOutcome::Unknown("the Python interpreter is shutting down: the tool did not run".into()),
    }
}

/// The store, wrapped so that a transaction in which a callback failed is never committed (it is rolled
/// back when dropped): a failing callback changes nothing, whatever the runtime did with its answer.
pub struct VetoStore(pub Box<dyn Store + Send + Sync>);

impl Store for VetoStore {
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(VetoTransaction(self.0.begin()?)))
    }
}

struct VetoTransaction<'a>(Box<dyn Transaction + 'a>);

impl Transaction for VetoTransaction<'_> {
    fn next_number(&mut self, sequence: &str) -> Result<u64, StoreError> {
        self.0.next_number(sequence)
    }
    fn proposal(&mut self, id: &str) -> Result<Option<Proposal>, StoreError> {
        self.0.proposal(id)
    }
    fn proposal_by_fingerprint(&mut self, key: &str, fingerprint: &str) -> Result<Option<Proposal>, StoreError> {
        self.0.proposal_by_fingerprint(key, fingerprint)
    }
    fn proposals_for_subject(&mut self, key: &str, tool: &str, subject: &str) -> Result<Vec<Proposal>, StoreError> {
        self.0.proposals_for_subject(key, tool, subject)
    }
    fn proposals(&mut self) -> Result<Vec<Proposal>, StoreError> {
        self.0.proposals()
    }
    fn put_proposal(&mut self, proposal: &Proposal) -> Result<(), StoreError> {
        self.0.put_proposal(proposal)
    }
    fn rules(&mut self) -> Result<Vec<StandingRule>, StoreError> {
        self.0.rules()
    }
    fn put_rule(&mut self, rule: &StandingRule) -> Result<(), StoreError> {
        self.0.put_rule(rule)
    }
    fn budget(&mut self, name: &str) -> Result<Option<BudgetRecord>, StoreError> {
        self.0.budget(name)
    }
    fn put_budget(&mut self, record: &BudgetRecord) -> Result<(), StoreError> {
        self.0.put_budget(record)
    }
    fn reservation(&mut self, holder: &str) -> Result<Option<Reservation>, StoreError> {
        self.0.reservation(holder)
    }
    fn put_reservation(&mut self, reservation: &Reservation) -> Result<(), StoreError> {
        self.0.put_reservation(reservation)
    }
    fn remove_reservation(&mut self, holder: &str) -> Result<(), StoreError> {
        self.0.remove_reservation(holder)
    }
    fn reserved_total(&mut self, budget: &str) -> Result<u64, StoreError> {
        self.0.reserved_total(budget)
    }
    fn reserved_for_task(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        self.0.reserved_for_task(budget, task)
    }
    fn task_spent(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        self.0.task_spent(budget, task)
    }
    fn put_task_spent(&mut self, budget: &str, task: &str, spent: u64) -> Result<(), StoreError> {
        self.0.put_task_spent(budget, task, spent)
    }
    fn audit_head(&mut self) -> Result<Option<AuditHead>, StoreError> {
        self.0.audit_head()
    }
    fn append_audit(&mut self, event: &ChainedEvent) -> Result<(), StoreError> {
        self.0.append_audit(event)
    }
    fn audit_events(&mut self) -> Result<Vec<ChainedEvent>, StoreError> {
        self.0.audit_events()
    }
    fn installed_tables(&mut self) -> Result<Vec<TableInstall>, StoreError> {
        self.0.installed_tables()
    }
    fn current_table(&mut self) -> Result<Option<TableInstall>, StoreError> {
        self.0.current_table()
    }
    fn put_installed_table(&mut self, install: &TableInstall) -> Result<(), StoreError> {
        self.0.put_installed_table(install)
    }
    fn run(&mut self, id: &str) -> Result<Option<Run>, StoreError> {
        self.0.run(id)
    }
    fn run_by_token(&mut self, token: &str) -> Result<Option<Run>, StoreError> {
        self.0.run_by_token(token)
    }
    fn put_run(&mut self, run: &Run) -> Result<(), StoreError> {
        self.0.put_run(run)
    }
    fn task(&mut self, key: &str) -> Result<Option<Task>, StoreError> {
        self.0.task(key)
    }
    fn put_task(&mut self, task: &Task) -> Result<(), StoreError> {
        self.0.put_task(task)
    }
    fn lease(&mut self, key: &str) -> Result<Option<permits_runtime::Lease>, StoreError> {
        self.0.lease(key)
    }
    fn put_lease(&mut self, lease: &permits_runtime::Lease) -> Result<(), StoreError> {
        self.0.put_lease(lease)
    }
    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        if failed() {
            // Dropping the inner transaction rolls it back.
            return Err(StoreError("a host callback failed: the transaction was rolled back".into()));
        }
        self.0.commit()
    }
}
