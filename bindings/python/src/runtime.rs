//! `permits.Runtime`: one method per runtime operation, each a thin call of `permits_runtime::Runtime`.
//!
//! Every method that touches the store goes through [`PyRuntime::op`]: re-entry from a callback is
//! refused, the clock callable is read, the GIL is released for the whole operation (so waiting for the
//! store's lock never holds it), a panic is caught, and a callback's failure becomes
//! `permits.Refused(kind="callback")`. The object is `frozen` and `Sync`: share one runtime between
//! threads.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, PoisonError, RwLock};

use permits_runtime::{
    AdmitAll, ApproveMode, AuditEvent, AuditSink, Authority, Call, Handled, JsonLinesSink, ManualClock, MemoryStore,
    NewRule, PostgresStore, PostgresTarget, Principal, ProposalRequest, Runtime, RuntimeError, Scope, SqliteStore,
    Store, SystemClock,
};
use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;

use crate::convert::{
    Arguments, Callable, Chain, EvidenceList, Exc, Json, LeaseArg, Mode, PathArg, Seconds, Text, WorkForArg, error,
    input_error, internal_error, refused, runtime_error, seconds, type_name,
};
use crate::host::{self, OpScope, PyAudit, PyAuthority, PyNaming, PyVersions, ScopeClock, VetoStore};
use crate::results::{self, BudgetStatus, Decision, Execution, Lease, OfferedTool, Proposal, Ran, StandingRule, Task};
use crate::table::{Indexed, PyTable, Signed, level_str, no_arguments};

/// The host's authority: `permits.ADMIT_ALL` (in Rust), or a Python callable.
enum HostAuthority {
    All(AdmitAll),
    Python(PyAuthority),
}

impl Authority for HostAuthority {
    fn admits(&self, who: Principal<'_>, tool: &str, arguments: &Value) -> Result<(), String> {
        match self {
            HostAuthority::All(a) => a.admits(who, tool, arguments),
            HostAuthority::Python(a) => a.admits(who, tool, arguments),
        }
    }
}

/// The runtime's clock: the system's, a `permits.ManualClock` (in Rust), or a callable read once per
/// operation.
enum HostClock {
    System,
    Manual(ManualClock),
    Python(Py<PyAny>),
}

/// The audit sink, shared with the Python object so it can report failures.
struct SharedAudit(Arc<PyAudit>);

impl AuditSink for SharedAudit {
    fn record(&self, event: &AuditEvent) {
        self.0.record(event);
    }
}

/// The runtime (spec §5), over a table, a store and the host's callbacks.
#[pyclass(frozen, module = "permits", name = "Runtime")]
pub struct PyRuntime {
    rt: Runtime,
    /// The table in force with its level index (`level`) and its signature, swapped with the runtime's by
    /// `replace_table`.
    index: RwLock<(Arc<Indexed>, Option<Arc<Signed>>)>,
    clock: HostClock,
    audit: Option<Arc<PyAudit>>,
}

fn table_arg<'py>(obj: &Bound<'py, PyAny>) -> PyResult<(Arc<Indexed>, Option<Arc<Signed>>)> {
    match obj.cast::<PyTable>() {
        Ok(t) => Ok((t.get().indexed.clone(), t.get().signed.clone())),
        Err(_) => Err(input_error(obj.py(), format!("expected a permits.Table, not `{}`", type_name(obj)))),
    }
}

fn call_of(
    agent: Text,
    skill: Text,
    tool: Text,
    arguments: Option<Arguments>,
    requester: Option<Text>,
    mode: Option<Text>,
    via: Option<Chain>,
) -> Call {
    Call {
        agent: agent.0,
        skill: skill.0,
        tool: tool.0,
        arguments: arguments.map_or_else(no_arguments, |a| a.0),
        requester: requester.map(|r| r.0),
        operation_key: None,
        mode: mode.map(|m| m.0),
        via: via.unwrap_or_default().0,
    }
}

/// The parts of a proposal request beyond the call.
struct RequestParts {
    operation_key: Text,
    why: Text,
    evidence: Option<EvidenceList>,
    destination: Option<Text>,
    lifetime: Option<Seconds>,
}

impl RequestParts {
    fn request(self, call: Call) -> ProposalRequest {
        let mut request = ProposalRequest::new(call, self.operation_key.0, self.why.0);
        if let Some(evidence) = self.evidence {
            request = request.with_evidence(evidence.0);
        }
        if let Some(destination) = self.destination {
            request = request.with_destination(destination.0);
        }
        if let Some(lifetime) = self.lifetime {
            request = request.with_lifetime(lifetime.0);
        }
        request
    }
}

fn mode_of(mode: Option<Mode>) -> ApproveMode {
    mode.map_or(ApproveMode::Once, |m| m.0)
}

/// `permits.ToolError`: the tool raised or returned something that is not JSON, after the runtime recorded
/// the outcome (`result`); the tool's exception is the cause.
fn tool_error(py: Python<'_>, result: Py<PyAny>, cause: PyErr) -> PyErr {
    let message = format!("the tool raised {cause}: the runtime recorded the outcome as `unknown`");
    let err = error(py, Exc::Tool, (message, result));
    err.set_cause(py, Some(cause));
    err
}

impl PyRuntime {
    /// Runs one runtime operation (see the module documentation).
    fn op<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&Runtime) -> Result<R, RuntimeError> + Send) -> PyResult<R> {
        if let Some(name) = host::in_callback() {
            return Err(refused(
                py,
                "reentry",
                format!(
                    "the `{name}` callback called back into the runtime: a callback runs while the runtime holds its store, so it must answer from what it was given"
                ),
            ));
        }
        let now = self.read_clock(py)?;
        let scope = OpScope::enter(now);
        let rt = &self.rt;
        let outcome = py.detach(move || catch_unwind(AssertUnwindSafe(move || f(rt))));
        if let Some(failure) = scope.finish() {
            let err = refused(
                py,
                "callback",
                format!(
                    "the `{}` callback failed: {}: the transaction it was called in was rolled back",
                    failure.callback, failure.error
                ),
            );
            err.set_cause(py, Some(failure.error));
            return Err(err);
        }
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(runtime_error(py, e)),
            Err(panic) => Err(internal_error(py, panic.as_ref())),
        }
    }

    /// The time for the next operation, from the host's clock callable (`None`: the runtime reads its own).
    fn read_clock(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let HostClock::Python(f) = &self.clock else { return Ok(None) };
        match host::marked("clock", |py| f.bind(py).call0().and_then(|answer| seconds(&answer))) {
            Ok(Seconds(now)) => Ok(Some(now)),
            Err(e) => {
                let err = refused(py, "callback", format!("the `clock` callback failed: {e}: nothing was done"));
                err.set_cause(py, Some(e));
                Err(err)
            }
        }
    }

    /// A call that may run the tool: the tool's exception, if it raised, is raised as `permits.ToolError`
    /// once the runtime has recorded the outcome.
    fn with_tool<R: Send>(
        &self,
        py: Python<'_>,
        run: &Py<PyAny>,
        f: impl FnOnce(
            &Runtime,
            &mut dyn FnMut(&permits_runtime::RunContext<'_>) -> permits_runtime::RunOutcome,
        ) -> Result<R, RuntimeError>
        + Send,
        to_py: impl FnOnce(Python<'_>, R) -> PyResult<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let mut raised: Option<PyErr> = None;
        let outcome = self.op(py, |rt| {
            let mut tool = |ctx: &permits_runtime::RunContext<'_>| host::run_tool(run, ctx, &mut raised);
            f(rt, &mut tool)
        });
        match (outcome, raised) {
            (Ok(value), None) => to_py(py, value),
            (Ok(value), Some(cause)) => Err(tool_error(py, to_py(py, value)?, cause)),
            (Err(e), None) => Err(e),
            (Err(e), Some(cause)) => {
                e.set_cause(py, Some(cause));
                Err(e)
            }
        }
    }
}

fn handled_to_py(py: Python<'_>, handled: Handled) -> PyResult<Py<PyAny>> {
    Ok(match handled {
        Handled::Ran(ran) => Py::new(py, Ran(*ran))?.into_any(),
        Handled::Proposed(p) => Py::new(py, Proposal(*p))?.into_any(),
    })
}

#[pymethods]
impl PyRuntime {
    /// A runtime over `table` with the host's `authority` (a callable, or `permits.ADMIT_ALL`).
    ///
    /// `store`: `":memory:"` (the default; lost with the process), the path of an SQLite ledger file
    /// (created if missing), or a PostgreSQL connection string (`postgres://…`, `postgresql://…`, or libpq's
    /// key-value form `host=… dbname=…`, as `PostgresTarget::is_postgres` tells; TLS with `sslmode=require`
    /// and `sslrootcert=PATH`) for a ledger shared by hosts on several machines (issue #22). `versions`,
    /// `naming`, `clock` (a callable or a `permits.ManualClock`) and `audit` (a callable given each event,
    /// or the path of a JSON-lines file to append to) are optional.
    #[new]
    #[expect(clippy::too_many_arguments, reason = "the Python signature: the table and each host callback")]
    #[pyo3(signature = (table, *, authority, store = None, versions = None, naming = None, audit = None, clock = None))]
    fn new(
        py: Python<'_>,
        table: &Bound<'_, PyAny>,
        authority: &Bound<'_, PyAny>,
        store: Option<&Bound<'_, PyAny>>,
        versions: Option<Callable>,
        naming: Option<Callable>,
        audit: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyRuntime> {
        let (indexed, signed) = table_arg(table)?;
        let authority = if authority.cast::<results::AdmitAll>().is_ok() {
            HostAuthority::All(AdmitAll)
        } else {
            let Callable(f) = authority.extract()?;
            HostAuthority::Python(PyAuthority(f))
        };
        let clock = match clock {
            None => HostClock::System,
            Some(c) if c.cast::<results::ManualClock>().is_ok() => match c.cast::<results::ManualClock>() {
                Ok(m) => HostClock::Manual(m.get().0.clone()),
                Err(_) => HostClock::System,
            },
            Some(c) => HostClock::Python(c.extract::<Callable>()?.0),
        };
        let audit = match audit {
            None => None,
            Some(a) if a.is_callable() => Some(Arc::new(PyAudit::Callable {
                f: a.to_owned().unbind(),
                failures: Default::default(),
                last: Default::default(),
            })),
            Some(a) => {
                let PathArg(path) = a.extract().map_err(|_| {
                    input_error(py, format!("audit is a callable or a file path, not `{}`", type_name(a)))
                })?;
                let file = py.detach(|| std::fs::OpenOptions::new().create(true).append(true).open(&path));
                let file = file.map_err(|e| {
                    error(py, Exc::Store, (format!("cannot open the audit file `{}`: {e}", path.display()),))
                })?;
                Some(Arc::new(PyAudit::File(JsonLinesSink::new(file))))
            }
        };
        let store: Box<dyn Store + Send + Sync> = match store {
            None => Box::new(MemoryStore::new()),
            Some(s) if s.cast::<PyString>().is_ok_and(|s| s.to_str().is_ok_and(|s| s == ":memory:")) => {
                Box::new(MemoryStore::new())
            }
            Some(s) if s.cast::<PyString>().is_ok_and(|s| s.to_str().is_ok_and(PostgresTarget::is_postgres)) => {
                let url: String = s.extract()?;
                // Connecting (and migrating) waits for the server: never with the GIL.
                let connected = py.detach(|| PostgresStore::connect(&url));
                Box::new(connected.map_err(|e| runtime_error(py, RuntimeError::Store(e)))?)
            }
            Some(s) => {
                let PathArg(path) = s.extract()?;
                // Opening may wait for another connection's lock (a migration): never with the GIL.
                let opened = py.detach(|| SqliteStore::open(&path));
                Box::new(opened.map_err(|e| runtime_error(py, RuntimeError::Store(e)))?)
            }
        };
        // The runtime owns its copy of the table (`Runtime::new` takes it by value); a large table's copy is
        // made without the GIL.
        let source = indexed.clone();
        let table = py.detach(move || source.table().clone());
        let mut rt = Runtime::new(table, authority).with_store(VetoStore(store));
        if let Some(signed) = &signed {
            // A table loaded with `trust=`: the runtime trusts those keys from now on, and installs its table
            // with its signature (the store's serials refuse a rollback).
            rt = rt.with_trusted_keys(signed.trusted.clone()).with_signature(signed.signature.clone());
        }
        rt = match &clock {
            HostClock::System => rt.with_clock(SystemClock),
            HostClock::Manual(m) => rt.with_clock(m.clone()),
            HostClock::Python(_) => rt.with_clock(ScopeClock),
        };
        if let Some(Callable(f)) = versions {
            rt = rt.with_versions(PyVersions(f));
        }
        if let Some(Callable(f)) = naming {
            rt = rt.with_naming(PyNaming(f));
        }
        if let Some(a) = &audit {
            rt = rt.with_audit(SharedAudit(a.clone()));
        }
        Ok(PyRuntime { rt, index: RwLock::new((indexed, signed)), clock, audit })
    }

    /// The table in force.
    #[getter]
    fn table(&self) -> PyTable {
        let (indexed, signed) = self.index.read().unwrap_or_else(PoisonError::into_inner).clone();
        PyTable { indexed, signed }
    }

    /// Swaps in another table (a recompiled policy): waiting and granted proposals are re-decided on it
    /// when they are approved or executed.
    fn replace_table(&self, py: Python<'_>, table: &Bound<'_, PyAny>) -> PyResult<()> {
        let (indexed, signed) = table_arg(table)?;
        let next = indexed.clone();
        let signature = signed.as_ref().map(|s| s.signature.clone());
        self.op(py, move |rt| match signature {
            Some(signature) => rt.replace_table_signed(next.table().clone(), signature),
            None => rt.replace_table(next.table().clone()),
        })?;
        *self.index.write().unwrap_or_else(PoisonError::into_inner) = (indexed, signed);
        Ok(())
    }

    /// Installs the runtime's own table as the store's current one: what a host restarting on a store
    /// another runtime used does before anything else, since a runtime whose table is not the store's
    /// current one changes nothing. Installing the current table again changes nothing.
    fn install_table(&self, py: Python<'_>) -> PyResult<()> {
        self.op(py, |rt| rt.install_table())
    }

    /// The table's level of one call, through the level index built once per table: `alone`, `propose`,
    /// `propose_every_time` or `never`. Standing rules (in the store) are not consulted: `call` decides
    /// the call itself. Holds no lock but the table's; safe to call from anywhere.
    #[pyo3(signature = (agent, skill, tool, arguments = None, *, requester = None))]
    fn level<'py>(
        &self,
        py: Python<'py>,
        agent: Text,
        skill: Text,
        tool: Text,
        arguments: Option<Arguments>,
        requester: Option<Text>,
    ) -> Bound<'py, PyString> {
        let arguments = arguments.map_or_else(no_arguments, |a| a.0);
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner).0.clone();
        let level = index.level(&agent.0, &skill.0, &tool.0, &arguments, requester.as_ref().map(|r| r.0.as_str()));
        level_str(py, level)
    }

    /// The table's level of each tool of `skill` for `agent`, in the skill's order; with `mode`, for calls
    /// in that mode (a tool `never` in the mode is `never`; every tool is in an unknown mode); with `via`
    /// (`["Agent.Skill", …]`, nearest first), for calls delegated along that chain (every link's layers
    /// too; every tool is `never` on an undeclared chain).
    #[pyo3(signature = (agent, skill, *, mode = None, via = None))]
    fn levels(&self, agent: Text, skill: Text, mode: Option<Text>, via: Option<Chain>) -> Vec<(String, &'static str)> {
        let mode = mode.as_ref().map(|m| m.0.as_str());
        let via = via.unwrap_or_default().0;
        self.rt.levels_via(&agent.0, &skill.0, mode, &via).into_iter().map(|(t, l)| (t, l.as_str())).collect()
    }

    /// The tools to offer the model for `agent` in `skill` (never a `never` one), in the skill's order;
    /// with `mode`, those not `never` in that mode (an unknown mode offers nothing); with `via`, those no
    /// link of the chain makes `never` (an undeclared chain offers nothing).
    #[pyo3(signature = (agent, skill, *, mode = None, via = None))]
    fn offered_tools(&self, agent: Text, skill: Text, mode: Option<Text>, via: Option<Chain>) -> Vec<OfferedTool> {
        let mode = mode.as_ref().map(|m| m.0.as_str());
        let via = via.unwrap_or_default().0;
        self.rt.offered_tools_via(&agent.0, &skill.0, mode, &via).into_iter().map(OfferedTool).collect()
    }

    /// Decides a call with the standing rules in force (an audit event); an unknown name or bad arguments
    /// give a `never` decision.
    #[pyo3(signature = (agent, skill, tool, arguments = None, *, requester = None, mode = None, via = None))]
    #[expect(clippy::too_many_arguments, reason = "the Python signature: one parameter per part of the call")]
    fn decide(
        &self,
        py: Python<'_>,
        agent: Text,
        skill: Text,
        tool: Text,
        arguments: Option<Arguments>,
        requester: Option<Text>,
        mode: Option<Text>,
        via: Option<Chain>,
    ) -> PyResult<Decision> {
        let call = call_of(agent, skill, tool, arguments, requester, mode, via);
        self.op(py, |rt| rt.decide(&call)).map(Decision)
    }

    /// Handles one tool call of the agent: an `alone` call runs now through `run` (→ `Ran`); a `propose`
    /// or `propose_every_time` call becomes a `Proposal`; a `never` call raises `Refused`. `lease` (a
    /// `permits.Lease` of the task `operation_key`) presents the lease the host holds: while the task is
    /// leased, only a call presenting its current lease is made (`Refused(kind="not_holder")`).
    #[pyo3(signature = (agent, skill, tool, arguments = None, *, operation_key, why, run, requester = None, evidence = None, destination = None, lifetime = None, mode = None, via = None, lease = None))]
    #[expect(clippy::too_many_arguments, reason = "the Python signature: one parameter per part of the request")]
    fn call(
        &self,
        py: Python<'_>,
        agent: Text,
        skill: Text,
        tool: Text,
        arguments: Option<Arguments>,
        operation_key: Text,
        why: Text,
        run: Callable,
        requester: Option<Text>,
        evidence: Option<EvidenceList>,
        destination: Option<Text>,
        lifetime: Option<Seconds>,
        mode: Option<Text>,
        via: Option<Chain>,
        lease: Option<LeaseArg>,
    ) -> PyResult<Py<PyAny>> {
        let call = call_of(agent, skill, tool, arguments, requester, mode, via);
        let request = RequestParts { operation_key, why, evidence, destination, lifetime }.request(call);
        let lease = lease.map(|l| l.0);
        self.with_tool(
            py,
            &run.0,
            |rt, tool| match &lease {
                Some(lease) => rt.holding(lease).call(&request, tool),
                None => rt.call(&request, tool),
            },
            handled_to_py,
        )
    }

    /// Runs an `alone` call through `run`; any other level raises `Refused` (`must_propose`, `never`).
    /// `operation_key` puts the call in that task (bound on its first call to its root agent, skill and
    /// person: a call that is not the task's is `never`); without one it is in no task. `lease`: the task's
    /// lease the host holds (see `call`).
    #[pyo3(signature = (agent, skill, tool, arguments = None, *, run, requester = None, operation_key = None, mode = None, via = None, lease = None))]
    #[expect(clippy::too_many_arguments, reason = "the Python signature: one parameter per part of the call")]
    fn run_alone(
        &self,
        py: Python<'_>,
        agent: Text,
        skill: Text,
        tool: Text,
        arguments: Option<Arguments>,
        run: Callable,
        requester: Option<Text>,
        operation_key: Option<Text>,
        mode: Option<Text>,
        via: Option<Chain>,
        lease: Option<LeaseArg>,
    ) -> PyResult<Py<PyAny>> {
        let mut call = call_of(agent, skill, tool, arguments, requester, mode, via);
        call.operation_key = operation_key.map(|k| k.0);
        let lease = lease.map(|l| l.0);
        self.with_tool(
            py,
            &run.0,
            |rt, tool| match &lease {
                Some(lease) => rt.holding(lease).run_alone(&call, tool),
                None => rt.run_alone(&call, tool),
            },
            |py, ran| Ok(Py::new(py, Ran(ran))?.into_any()),
        )
    }

    /// Makes a proposal of the exact call (a retry under the same operation key returns the same one).
    /// `lease`: the task's lease the host holds (see `call`).
    #[pyo3(signature = (agent, skill, tool, arguments = None, *, operation_key, why, requester = None, evidence = None, destination = None, lifetime = None, mode = None, via = None, lease = None))]
    #[expect(clippy::too_many_arguments, reason = "the Python signature: one parameter per part of the request")]
    fn propose(
        &self,
        py: Python<'_>,
        agent: Text,
        skill: Text,
        tool: Text,
        arguments: Option<Arguments>,
        operation_key: Text,
        why: Text,
        requester: Option<Text>,
        evidence: Option<EvidenceList>,
        destination: Option<Text>,
        lifetime: Option<Seconds>,
        mode: Option<Text>,
        via: Option<Chain>,
        lease: Option<LeaseArg>,
    ) -> PyResult<Proposal> {
        let call = call_of(agent, skill, tool, arguments, requester, mode, via);
        let request = RequestParts { operation_key, why, evidence, destination, lifetime }.request(call);
        let lease = lease.map(|l| l.0);
        self.op(py, |rt| match &lease {
            Some(lease) => rt.holding(lease).propose(&request),
            None => rt.propose(&request),
        })
        .map(Proposal)
    }

    /// A person approves the proposal, passing the fingerprint they were shown. `mode="always_like_this"`
    /// also makes a standing rule for them, in the same transaction, only where the policy lets them.
    #[pyo3(signature = (proposal_id, person, fingerprint, *, mode = None))]
    fn approve(
        &self,
        py: Python<'_>,
        proposal_id: Text,
        person: Text,
        fingerprint: Text,
        mode: Option<Mode>,
    ) -> PyResult<Proposal> {
        let mode = mode_of(mode);
        self.op(py, |rt| rt.approve(&proposal_id.0, &person.0, &fingerprint.0, mode)).map(Proposal)
    }

    /// Executes a granted proposal through `run` toward `destination` (the approved one): the single
    /// authorization point, everything rechecked. A `done` proposal returns its stored receipt and runs
    /// nothing.
    ///
    /// `claim_token` (spec §5a "Idempotent execution"): the host's token for this execution, kept until it
    /// knows the outcome. A retry with the same token after a lost answer returns the same claim or receipt
    /// and runs nothing, whatever the proposal's status since; another token on a consumed grant is refused
    /// (`Refused(kind="claimed")`). Without one, a retry while the proposal is `sending` or `unknown` is
    /// refused (`status`).
    ///
    /// `lease`: the task's lease the host holds (spec §5a "Leases"): while the proposal's task is leased,
    /// a host that does not present its current lease cannot execute it, even with a valid grant
    /// (`Refused(kind="not_holder")`, nothing runs).
    #[pyo3(signature = (proposal_id, *, run, destination = None, claim_token = None, lease = None))]
    fn execute(
        &self,
        py: Python<'_>,
        proposal_id: Text,
        run: Callable,
        destination: Option<Text>,
        claim_token: Option<Text>,
        lease: Option<LeaseArg>,
    ) -> PyResult<Py<PyAny>> {
        let destination = destination.map(|d| d.0);
        let claim = claim_token.map(|c| c.0);
        let lease = lease.map(|l| l.0);
        self.with_tool(
            py,
            &run.0,
            |rt, tool| match (&claim, &lease) {
                (Some(claim), Some(lease)) => {
                    rt.holding(lease).execute_claimed(&proposal_id.0, destination.as_deref(), claim, tool)
                }
                (None, Some(lease)) => rt.holding(lease).execute(&proposal_id.0, destination.as_deref(), tool),
                (Some(claim), None) => rt.execute_claimed(&proposal_id.0, destination.as_deref(), claim, tool),
                (None, None) => rt.execute(&proposal_id.0, destination.as_deref(), tool),
            },
            |py, e| Ok(Py::new(py, Execution(e))?.into_any()),
        )
    }

    /// `approve` then `execute` toward the proposal's own destination ("approve and run now").
    #[pyo3(signature = (proposal_id, person, fingerprint, *, run, mode = None))]
    fn approve_and_run(
        &self,
        py: Python<'_>,
        proposal_id: Text,
        person: Text,
        fingerprint: Text,
        run: Callable,
        mode: Option<Mode>,
    ) -> PyResult<Py<PyAny>> {
        let mode = mode_of(mode);
        self.with_tool(
            py,
            &run.0,
            |rt, tool| rt.approve_and_run(&proposal_id.0, &person.0, &fingerprint.0, mode, tool),
            |py, e| Ok(Py::new(py, Execution(e))?.into_any()),
        )
    }

    /// A person says no, with a reason the agent is told → `rejected`, final.
    fn reject(&self, py: Python<'_>, proposal_id: Text, person: Text, reason: Text) -> PyResult<Proposal> {
        self.op(py, |rt| rt.reject(&proposal_id.0, &person.0, &reason.0)).map(Proposal)
    }

    /// The requester or the agent (`by`, a `permits.Principal`) withdraws a waiting proposal.
    fn withdraw(&self, py: Python<'_>, proposal_id: Text, by: &Bound<'_, PyAny>) -> PyResult<Proposal> {
        let Ok(by) = by.cast::<results::Principal>() else {
            return Err(input_error(py, format!("by is a permits.Principal, not `{}`", type_name(by))));
        };
        let by = by.get().clone();
        self.op(py, |rt| rt.withdraw(&proposal_id.0, by.as_runtime())).map(Proposal)
    }

    /// Whoever may decide it, or a supervisor, revokes a proposal.
    fn revoke(&self, py: Python<'_>, proposal_id: Text, person: Text, why: Text) -> PyResult<Proposal> {
        self.op(py, |rt| rt.revoke(&proposal_id.0, &person.0, &why.0)).map(Proposal)
    }

    /// Makes a standing rule "from now on, alone" for `agent`'s `tool` (in `skill`, or every skill that
    /// offers it at `propose`), in the work of `work_for` (a person, or `permits.EVERYBODY`), made `by` a
    /// person the policy lets. `scope="any"` (the default) covers any arguments; `scope="these"` only
    /// `arguments` exactly. `expires_at` (seconds since the Unix epoch, later than now) ends it; `None`
    /// keeps it until revoked. `via` (`["Agent.Skill", …]`, nearest first; it needs `skill`) makes it for
    /// calls delegated along exactly that chain, and for no other.
    #[pyo3(signature = (agent, tool, *, work_for, by, skill = None, scope = None, arguments = None, expires_at = None, via = None))]
    #[expect(clippy::too_many_arguments, reason = "the Python signature: one parameter per part of the rule")]
    fn allow_alone(
        &self,
        py: Python<'_>,
        agent: Text,
        tool: Text,
        work_for: WorkForArg,
        by: Text,
        skill: Option<Text>,
        scope: Option<Text>,
        arguments: Option<Arguments>,
        expires_at: Option<Seconds>,
        via: Option<Chain>,
    ) -> PyResult<StandingRule> {
        let scope = match (scope.as_ref().map(|s| s.0.as_str()), arguments) {
            (None | Some("any"), None) => Scope::AnyArguments,
            (None | Some("any"), Some(_)) => {
                return Err(input_error(py, "arguments= is for scope=\"these\": a rule for any arguments takes none"));
            }
            (Some("these"), Some(arguments)) => Scope::these(&arguments.0),
            (Some("these"), None) => {
                return Err(input_error(py, "scope=\"these\" needs arguments=: the exact arguments the rule covers"));
            }
            (Some(other), _) => {
                return Err(input_error(py, format!("scope is \"these\" or \"any\", not `{other}`")));
            }
        };
        let rule = NewRule {
            agent: agent.0,
            tool: tool.0,
            skill: skill.map(|s| s.0),
            work_for: work_for.0,
            by: by.0,
            scope,
            expires_at: expires_at.map(|e| e.0),
            mode: None,
            via: via.unwrap_or_default().0,
        };
        self.op(py, |rt| rt.allow_alone(&rule)).map(StandingRule)
    }

    /// Revokes a standing rule, by its maker or a supervisor, with a reason.
    fn revoke_rule(&self, py: Python<'_>, rule_id: Text, by: Text, why: Text) -> PyResult<StandingRule> {
        self.op(py, |rt| rt.revoke_rule(&rule_id.0, &by.0, &why.0)).map(StandingRule)
    }

    /// The task bound to an operation key (by its first call), or `None` when no call bound it.
    fn task(&self, py: Python<'_>, operation_key: Text) -> PyResult<Option<Task>> {
        self.op(py, |rt| rt.task(&operation_key.0)).map(|t| t.map(Task))
    }

    /// Ends a task: its task rules end; the key keeps its binding (a later call under it must still be the
    /// same root, person and mode). Ending an ended task changes nothing. `NotFound(kind="task")` when no
    /// call bound the key.
    fn end_task(&self, py: Python<'_>, operation_key: Text) -> PyResult<Task> {
        self.op(py, |rt| rt.end_task(&operation_key.0)).map(Task)
    }

    /// A supervisor settles an `unknown` proposal with a conclusive receipt from the other side
    /// (`{"operation": "KEY:P-n", "outcome": "accepted" | "rejected", …}`): `done` or `failed`.
    fn resolve(&self, py: Python<'_>, proposal_id: Text, by: Text, receipt: Json) -> PyResult<Proposal> {
        self.op(py, |rt| rt.resolve(&proposal_id.0, &by.0, &receipt.0)).map(Proposal)
    }

    /// A supervisor (`by`, of the table in force) installs `table` over a rollback refusal; a signature (a
    /// table loaded with `trust=`), when the runtime trusts keys, must still verify. Audited as forced.
    fn force_table(&self, py: Python<'_>, table: &Bound<'_, PyAny>, by: Text) -> PyResult<()> {
        let (indexed, signed) = table_arg(table)?;
        let next = indexed.clone();
        let signature = signed.as_ref().map(|s| s.signature.clone());
        self.op(py, move |rt| rt.force_table(next.table().clone(), signature, &by.0))?;
        *self.index.write().unwrap_or_else(PoisonError::into_inner) = (indexed, signed);
        Ok(())
    }

    /// The proposal with this id, as it is now.
    fn proposal(&self, py: Python<'_>, proposal_id: Text) -> PyResult<Proposal> {
        self.op(py, |rt| rt.proposal(&proposal_id.0)).map(Proposal)
    }

    /// Every proposal, oldest first, as they are now.
    fn proposals(&self, py: Python<'_>) -> PyResult<Vec<Proposal>> {
        self.op(py, |rt| rt.proposals()).map(|all| all.into_iter().map(Proposal).collect())
    }

    /// The waiting proposals `person` may decide now, oldest first.
    fn waiting_for(&self, py: Python<'_>, person: Text) -> PyResult<Vec<Proposal>> {
        self.op(py, |rt| rt.waiting_for(&person.0)).map(|all| all.into_iter().map(Proposal).collect())
    }

    /// Marks every waiting proposal past its expiry `expired`; their ids.
    fn expire_due(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.op(py, |rt| rt.expire_due())
    }

    /// Every standing rule, revoked ones included, oldest first.
    fn rules(&self, py: Python<'_>) -> PyResult<Vec<StandingRule>> {
        self.op(py, |rt| rt.rules()).map(|all| all.into_iter().map(StandingRule).collect())
    }

    /// A budget as it stands now.
    fn budget(&self, py: Python<'_>, name: Text) -> PyResult<BudgetStatus> {
        self.op(py, |rt| rt.budget(&name.0)).map(BudgetStatus)
    }

    /// Every budget of the table as it stands now, by name.
    fn budgets(&self, py: Python<'_>) -> PyResult<Vec<BudgetStatus>> {
        self.op(py, |rt| rt.budgets()).map(|all| all.into_iter().map(BudgetStatus).collect())
    }

    /// A supervisor installs the table's ceiling of `budget` (a new policy never raises it silently).
    fn raise_ceiling(&self, py: Python<'_>, budget: Text, by: Text) -> PyResult<BudgetStatus> {
        self.op(py, |rt| rt.raise_ceiling(&budget.0, &by.0)).map(BudgetStatus)
    }

    /// Settles a spend whose outcome was not confirmed with the other side's `receipt`: conclusive ones
    /// (naming the operation, the amount, and `"outcome": "accepted"` or `"rejected"`) only. `lease`: the
    /// task's lease the host holds: while the task is leased, only its current holder settles
    /// (`Refused(kind="not_holder")`).
    #[pyo3(signature = (holder, receipt, *, lease = None))]
    fn settle(&self, py: Python<'_>, holder: Text, receipt: Json, lease: Option<LeaseArg>) -> PyResult<BudgetStatus> {
        let lease = lease.map(|l| l.0);
        self.op(py, |rt| match &lease {
            Some(lease) => rt.holding(lease).settle(&holder.0, &receipt.0),
            None => rt.settle(&holder.0, &receipt.0),
        })
        .map(BudgetStatus)
    }

    /// Takes the task `operation_key` for `holder` (a name the host chooses, one per worker) for `seconds`
    /// (1 to 86400) (spec §5a "Leases"): the `Lease`, with its fence. A key never leased gets fence 1; a key
    /// whose lease expired or was released, the next one — every lease handed out before is fenced. Taking
    /// binds nothing (the task need not be bound yet). `Refused(kind="not_holder")` while a lease is held,
    /// another holder's or `holder`'s own (renew that one instead); `kind="too_large"` for an
    /// over-long key or holder or more than 86400 seconds, `kind="invalid_request"` for an empty key or
    /// holder or 0 seconds.
    fn take_task(&self, py: Python<'_>, operation_key: Text, holder: Text, seconds: Seconds) -> PyResult<Lease> {
        self.op(py, |rt| rt.take_task(&operation_key.0, &holder.0, seconds.0)).map(Lease)
    }

    /// Renews a lease the host holds for `seconds` from now (1 to 86400), keeping its fence: the renewed
    /// `Lease`. `Refused(kind="not_holder")` when another fence is current (the task was taken over).
    fn renew_task(&self, py: Python<'_>, lease: LeaseArg, seconds: Seconds) -> PyResult<Lease> {
        self.op(py, |rt| rt.renew_task(&lease.0, seconds.0)).map(Lease)
    }

    /// Releases a lease before it expires: from now another host may take the task (releasing a released
    /// or expired lease changes nothing). `Refused(kind="not_holder")` when another fence is current.
    fn release_task(&self, py: Python<'_>, lease: LeaseArg) -> PyResult<Lease> {
        self.op(py, |rt| rt.release_task(&lease.0)).map(Lease)
    }

    /// The lease on `operation_key` as the store has it (expired and released ones included), or `None`
    /// when the key was never leased.
    fn lease(&self, py: Python<'_>, operation_key: Text) -> PyResult<Option<Lease>> {
        self.op(py, |rt| rt.lease(&operation_key.0)).map(|l| l.map(Lease))
    }

    /// How many audit events the sink could not take (a callable that raised, a file that failed).
    #[getter]
    fn audit_failures(&self) -> u64 {
        self.audit.as_ref().map_or(0, |a| a.failures())
    }

    /// The last failure of a callable audit sink, in words.
    #[getter]
    fn last_audit_failure(&self) -> Option<String> {
        self.audit.as_ref().and_then(|a| a.last_failure())
    }

    fn __repr__(&self) -> String {
        format!("Runtime(table {})", self.rt.table().header.table_digest)
    }
}
