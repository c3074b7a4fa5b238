//! The typed objects Python sees: results (`Decision`, `Proposal`, `Ran`, `Execution`, `StandingRule`,
//! `BudgetStatus`, `AuditEvent`, …), what callbacks are given (`Principal`, `VersionQuery`, `Param`,
//! `RunContext`), and the small values a host passes in (`Evidence`, `Failed`, `Unknown`, `EVERYBODY`,
//! `ADMIT_ALL`, `ManualClock`).
//!
//! Each result wraps the runtime's own record and converts a field when it is read; `to_dict()` is the
//! record's serde form (the JSON the runtime stores and `permitc decide` prints), as Python values.

use permits_runtime as rt;
use permits_runtime::table::{Level, Route};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{Arguments, Json, Seconds, Text, dict_of, json_to_py, type_word};

fn level_word(level: Level) -> &'static str {
    level.as_str()
}

fn route_parts(route: &Route) -> (&'static str, Option<String>) {
    match route {
        Route::Requester => ("requester", None),
        Route::Person(p) => ("person", Some(p.clone())),
        Route::Role(r) => ("role", Some(r.clone())),
        Route::Queue(q) => ("queue", Some(q.clone())),
    }
}

fn outcome_parts(outcome: &rt::RunOutcome) -> (&'static str, Option<&serde_json::Value>, Option<&str>) {
    match outcome {
        rt::RunOutcome::Done(receipt) => ("done", Some(receipt), None),
        rt::RunOutcome::Failed(why) => ("failed", None, Some(why)),
        rt::RunOutcome::Unknown(why) => ("unknown", None, Some(why)),
    }
}

/// An account the host's authority is asked about: `kind` is `"agent"` (the agent's own account) or
/// `"person"`.
#[pyclass(frozen, eq, hash, module = "permits")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    /// `"agent"` or `"person"`.
    #[pyo3(get)]
    pub kind: String,
    /// The account's name in the table.
    #[pyo3(get)]
    pub name: String,
}

impl Principal {
    /// The runtime's principal.
    pub fn of(p: rt::Principal<'_>) -> Principal {
        match p {
            rt::Principal::Agent(n) => Principal { kind: "agent".into(), name: n.into() },
            rt::Principal::Person(n) => Principal { kind: "person".into(), name: n.into() },
        }
    }

    /// As the runtime's principal.
    pub fn as_runtime(&self) -> rt::Principal<'_> {
        if self.kind == "agent" { rt::Principal::Agent(&self.name) } else { rt::Principal::Person(&self.name) }
    }
}

#[pymethods]
impl Principal {
    /// The agent's own account.
    #[staticmethod]
    fn agent(name: Text) -> Principal {
        Principal { kind: "agent".into(), name: name.0 }
    }

    /// A person.
    #[staticmethod]
    fn person(name: Text) -> Principal {
        Principal { kind: "person".into(), name: name.0 }
    }

    fn __repr__(&self) -> String {
        format!("Principal.{}({:?})", self.kind, self.name)
    }
}

/// Whose work a standing rule applies to when it is everybody's: `permits.EVERYBODY`.
#[pyclass(frozen, eq, hash, module = "permits")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Everybody;

#[pymethods]
impl Everybody {
    fn __repr__(&self) -> &'static str {
        "permits.EVERYBODY"
    }
}

/// An authority that admits every account: `permits.ADMIT_ALL`, for hosts whose application enforces
/// nothing of its own (the policy's levels still apply). Runs in Rust: no Python call per check.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct AdmitAll;

#[pymethods]
impl AdmitAll {
    fn __call__(&self, _who: &Bound<'_, PyAny>, _tool: &Bound<'_, PyAny>, _arguments: &Bound<'_, PyAny>) -> bool {
        true
    }

    fn __repr__(&self) -> &'static str {
        "permits.ADMIT_ALL"
    }
}

/// A clock that moves only when told to (tests, simulations): whole seconds since the Unix epoch. Runs in
/// Rust: no Python call per reading.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct ManualClock(pub rt::ManualClock);

#[pymethods]
impl ManualClock {
    #[new]
    fn new(seconds: crate::convert::Seconds) -> ManualClock {
        ManualClock(rt::ManualClock::at(seconds.0))
    }

    /// The time now.
    fn now(&self) -> u64 {
        rt::Clock::now(&self.0)
    }

    /// Sets the time.
    fn set(&self, seconds: crate::convert::Seconds) {
        self.0.set(seconds.0);
    }

    /// Moves the time forward.
    fn advance(&self, seconds: crate::convert::Seconds) {
        self.0.advance(seconds.0);
    }

    fn __call__(&self) -> u64 {
        self.now()
    }

    fn __repr__(&self) -> String {
        format!("ManualClock({})", self.now())
    }
}

/// What the tool returns when it certainly did not take effect: the proposal becomes `failed`.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Failed {
    /// Why.
    #[pyo3(get)]
    pub reason: String,
}

#[pymethods]
impl Failed {
    #[new]
    fn new(reason: Text) -> Failed {
        Failed { reason: reason.0 }
    }

    fn __repr__(&self) -> String {
        format!("Failed({:?})", self.reason)
    }
}

/// What the tool returns when it started but cannot confirm the outcome: the proposal becomes `unknown`
/// (a spend stays reserved until `settle`).
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Unknown {
    /// Why.
    #[pyo3(get)]
    pub reason: String,
}

#[pymethods]
impl Unknown {
    #[new]
    fn new(reason: Text) -> Unknown {
        Unknown { reason: reason.0 }
    }

    fn __repr__(&self) -> String {
        format!("Unknown({:?})", self.reason)
    }
}

/// A tool run before a proposal, and what it returned: evidence a person reads.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Evidence(pub rt::Evidence);

#[pymethods]
impl Evidence {
    #[new]
    fn new(tool: Text, arguments: Arguments, answer: Json) -> Evidence {
        Evidence(rt::Evidence { tool: tool.0, arguments: arguments.0, answer: answer.0 })
    }

    #[getter]
    fn tool(&self) -> &str {
        &self.0.tool
    }

    #[getter]
    fn arguments<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.0.arguments)
    }

    #[getter]
    fn answer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.0.answer)
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }

    fn __repr__(&self) -> String {
        format!("Evidence(tool={:?})", self.0.tool)
    }
}

/// A parameter of a tool: its name and type (`string`, `int`, `bool`, `money`, or an entity's name, then
/// also in `entity`).
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Param(pub permits_runtime::table::ParamInfo);

impl Param {
    /// The table's parameter.
    pub fn of(p: &permits_runtime::table::ParamInfo) -> Param {
        Param(p.clone())
    }
}

#[pymethods]
impl Param {
    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }

    #[getter]
    fn r#type(&self) -> &str {
        type_word(&self.0.ty)
    }

    #[getter]
    fn entity(&self) -> Option<&str> {
        match &self.0.ty {
            permits_runtime::table::ParamType::Entity(e) => Some(e),
            _ => None,
        }
    }

    fn __repr__(&self) -> String {
        format!("Param({:?}: {})", self.0.name, type_word(&self.0.ty))
    }
}

/// What the `versions` callback is asked: the tool's `version PARAM.FIELD` and the argument given for
/// `PARAM` (`id`).
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct VersionQuery {
    /// The tool.
    #[pyo3(get)]
    pub tool: String,
    /// The parameter (`repair`).
    #[pyo3(get)]
    pub param: String,
    /// The entity the parameter names (`Repair`), if it names one.
    #[pyo3(get)]
    pub entity: Option<String>,
    /// The field (`revision`).
    #[pyo3(get)]
    pub field: String,
    id: serde_json::Value,
}

impl VersionQuery {
    /// The runtime's query.
    pub fn of(q: &rt::VersionQuery<'_>) -> VersionQuery {
        VersionQuery {
            tool: q.tool.into(),
            param: q.param.into(),
            entity: q.entity.map(str::to_string),
            field: q.field.into(),
            id: q.id.clone(),
        }
    }
}

#[pymethods]
impl VersionQuery {
    /// The argument given for the parameter (`"T-7"`).
    #[getter]
    fn id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.id)
    }

    fn __repr__(&self) -> String {
        format!("VersionQuery({}.{} of {} = {})", self.param, self.field, self.tool, self.id)
    }
}

/// What the tool is given when it runs.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct RunContext {
    /// The agent.
    #[pyo3(get)]
    pub agent: String,
    /// The skill.
    #[pyo3(get)]
    pub skill: String,
    /// The tool.
    #[pyo3(get)]
    pub tool: String,
    /// The person it runs for: the approver of an operator grant, else the person the work is for, else the
    /// agent's sponsor.
    #[pyo3(get)]
    pub runs_as: String,
    /// The approved destination, if any.
    #[pyo3(get)]
    pub destination: Option<String>,
    /// The operation id to send to the other side (`KEY:P-n`, `A-n`, or empty).
    #[pyo3(get)]
    pub operation: String,
    arguments: serde_json::Value,
    proposal: Option<rt::Proposal>,
}

impl RunContext {
    /// The runtime's context.
    pub fn of(c: &rt::RunContext<'_>) -> RunContext {
        RunContext {
            agent: c.agent.into(),
            skill: c.skill.into(),
            tool: c.tool.into(),
            runs_as: c.runs_as.into(),
            destination: c.destination.map(str::to_string),
            operation: c.operation.into(),
            arguments: c.arguments.clone(),
            proposal: c.proposal.cloned(),
        }
    }
}

#[pymethods]
impl RunContext {
    /// The checked arguments.
    #[getter]
    fn arguments<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.arguments)
    }

    /// The proposal, when a granted proposal runs.
    #[getter]
    fn proposal(&self) -> Option<Proposal> {
        self.proposal.clone().map(Proposal)
    }

    fn __repr__(&self) -> String {
        format!("RunContext({}/{}/{} as {:?})", self.agent, self.skill, self.tool, self.runs_as)
    }
}

/// Who decides a proposal: the route (`route` is `requester`, `person`, `role` or `queue`, with its
/// `route_name`) and the persons it names now.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Decider(pub rt::Decider);

#[pymethods]
impl Decider {
    #[getter]
    fn route(&self) -> &'static str {
        route_parts(&self.0.route).0
    }

    #[getter]
    fn route_name(&self) -> Option<String> {
        route_parts(&self.0.route).1
    }

    #[getter]
    fn persons(&self) -> Vec<String> {
        self.0.persons.clone()
    }

    /// "a decision from Noor", "a decision from a SupportReviewer (Riley)".
    fn waiting_on(&self) -> String {
        self.0.waiting_on()
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }

    fn __repr__(&self) -> String {
        format!("Decider({})", self.0.waiting_on())
    }
}

/// One rule behind a level: its layer, kind, level, canonical form, what it goes through, and where it is
/// written (`file:line`).
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Reason(pub permits_runtime::table::Reason);

#[pymethods]
impl Reason {
    #[getter]
    fn layer(&self) -> Option<String> {
        self.0.layer.map(|l| l.to_string())
    }

    #[getter]
    fn kind(&self) -> String {
        serde_json::to_value(self.0.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }

    #[getter]
    fn level(&self) -> &'static str {
        level_word(self.0.level)
    }

    #[getter]
    fn rule(&self) -> &str {
        &self.0.rule
    }

    #[getter]
    fn via(&self) -> Option<&str> {
        self.0.via.as_deref()
    }

    #[getter]
    fn at(&self) -> Option<String> {
        self.0.at.as_ref().map(|a| a.to_string())
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }

    fn __repr__(&self) -> String {
        format!("Reason({:?})", self.0.rule)
    }
}

/// The decision for one call: its level, why, and who decides a proposal of it.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Decision(pub rt::Decision);

#[pymethods]
impl Decision {
    #[getter]
    fn agent(&self) -> &str {
        &self.0.agent
    }
    #[getter]
    fn skill(&self) -> &str {
        &self.0.skill
    }
    #[getter]
    fn tool(&self) -> &str {
        &self.0.tool
    }
    #[getter]
    fn requester(&self) -> Option<&str> {
        self.0.requester.as_deref()
    }
    /// `alone`, `propose`, `propose_every_time` or `never`.
    #[getter]
    fn level(&self) -> &'static str {
        level_word(self.0.level)
    }
    #[getter]
    fn table_level(&self) -> Option<&'static str> {
        self.0.table_level.map(level_word)
    }
    #[getter]
    fn offered(&self) -> bool {
        self.0.offered
    }
    #[getter]
    fn refusal(&self) -> Option<&str> {
        self.0.refusal.as_deref()
    }
    #[getter]
    fn reasons(&self) -> Vec<Reason> {
        self.0.reasons.iter().cloned().map(Reason).collect()
    }
    #[getter]
    fn decider(&self) -> Option<Decider> {
        self.0.decider.clone().map(Decider)
    }
    #[getter]
    fn standing_rule(&self) -> Option<&str> {
        self.0.standing_rule.as_deref()
    }
    /// `True` when `standing_rule` is a task rule (approved "for this task").
    #[getter]
    fn task_rule(&self) -> bool {
        self.0.task_rule
    }
    /// The mode the call is made in; `None` for no mode.
    #[getter]
    fn mode(&self) -> Option<&str> {
        self.0.mode.as_deref()
    }
    /// The call's delegation chain, `["Agent.Skill", …]` nearest first, root last; `[]` for a direct call.
    #[getter]
    fn via(&self) -> Vec<String> {
        self.0.via.iter().map(ToString::to_string).collect()
    }
    #[getter]
    fn entry_digest(&self) -> Option<&str> {
        self.0.entry_digest.as_deref()
    }
    #[getter]
    fn definition_digest(&self) -> Option<&str> {
        self.0.definition_digest.as_deref()
    }
    /// One line a person reads.
    fn summary(&self) -> String {
        self.0.summary()
    }
    /// The JSON `permitc decide` prints.
    fn to_json(&self) -> String {
        self.0.to_json()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("Decision({})", self.0.summary())
    }
}

/// A grant: who approved (`None` for an automatic one), on what basis (`operator`, `automatic`,
/// `unknown`), when, and until when.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Grant(pub rt::Grant);

#[pymethods]
impl Grant {
    #[getter]
    fn approver(&self) -> Option<&str> {
        self.0.approver.as_deref()
    }
    #[getter]
    fn basis(&self) -> &'static str {
        match self.0.basis {
            rt::Basis::Operator => "operator",
            rt::Basis::Automatic => "automatic",
            rt::Basis::Unknown => "unknown",
        }
    }
    #[getter]
    fn granted_at(&self) -> u64 {
        self.0.granted_at
    }
    #[getter]
    fn expires_at(&self) -> u64 {
        self.0.expires_at
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("Grant({} by {:?})", self.basis(), self.0.approver)
    }
}

/// A proposal: the exact call an agent wants to make, held for a person.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Proposal(pub rt::Proposal);

#[pymethods]
impl Proposal {
    #[getter]
    fn id(&self) -> &str {
        &self.0.id
    }
    /// The mode the call was proposed in; `None` for no mode.
    #[getter]
    fn mode(&self) -> Option<&str> {
        self.0.mode.as_deref()
    }
    /// The call's delegation chain, `["Agent.Skill", …]` nearest first, root last; `[]` for a direct call.
    #[getter]
    fn via(&self) -> Vec<String> {
        self.0.via.iter().map(ToString::to_string).collect()
    }
    #[getter]
    fn operation_key(&self) -> &str {
        &self.0.operation_key
    }
    #[getter]
    fn agent(&self) -> &str {
        &self.0.agent
    }
    #[getter]
    fn skill(&self) -> &str {
        &self.0.skill
    }
    #[getter]
    fn tool(&self) -> &str {
        &self.0.tool
    }
    #[getter]
    fn label(&self) -> &str {
        &self.0.label
    }
    #[getter]
    fn arguments<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.0.arguments)
    }
    /// Each argument as a person reads it, `(name, shown)`, in the tool's parameter order.
    #[getter]
    fn shown(&self) -> Vec<(String, String)> {
        self.0.shown.iter().map(|a| (a.name.clone(), a.shown.clone())).collect()
    }
    #[getter]
    fn covered_version(&self) -> Option<&str> {
        self.0.covered_version.as_deref()
    }
    #[getter]
    fn destination(&self) -> Option<&str> {
        self.0.destination.as_deref()
    }
    #[getter]
    fn why(&self) -> &str {
        &self.0.why
    }
    #[getter]
    fn evidence(&self) -> Vec<Evidence> {
        self.0.evidence.iter().cloned().map(Evidence).collect()
    }
    #[getter]
    fn requester(&self) -> Option<&str> {
        self.0.requester.as_deref()
    }
    #[getter]
    fn decider(&self) -> Decider {
        Decider(self.0.decider.clone())
    }
    #[getter]
    fn level(&self) -> &'static str {
        level_word(self.0.level)
    }
    #[getter]
    fn entry_digest(&self) -> &str {
        &self.0.entry_digest
    }
    #[getter]
    fn definition_digest(&self) -> &str {
        &self.0.definition_digest
    }
    #[getter]
    fn subject(&self) -> Option<&str> {
        self.0.subject.as_deref()
    }
    /// What a yes covers: approve exactly this.
    #[getter]
    fn fingerprint(&self) -> &str {
        &self.0.fingerprint
    }
    #[getter]
    fn created_at(&self) -> u64 {
        self.0.created_at
    }
    #[getter]
    fn expires_at(&self) -> u64 {
        self.0.expires_at
    }
    /// `waiting`, `granted`, `sending`, `done`, `unknown`, or the final `failed`, `rejected`, `stale`,
    /// `expired`, `revoked`, `superseded`, `withdrawn`.
    #[getter]
    fn status(&self) -> &'static str {
        self.0.status.as_str()
    }
    #[getter]
    fn grant(&self) -> Option<Grant> {
        self.0.grant.clone().map(Grant)
    }
    #[getter]
    fn ran_as(&self) -> Option<&str> {
        self.0.ran_as.as_deref()
    }
    #[getter]
    fn receipt<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.0.receipt.as_ref().map(|r| json_to_py(py, r)).transpose()
    }
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }
    #[getter]
    fn decided_by(&self) -> Option<&str> {
        self.0.decided_by.as_deref()
    }
    /// The operation id its execution sends to the other side: `OPERATION_KEY:P-n`.
    #[getter]
    fn operation(&self) -> String {
        rt::operation_id(&self.0)
    }
    /// What the agent is told as the tool's answer.
    fn answer_for_agent(&self) -> String {
        self.0.answer_for_agent()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("Proposal({} {} {}/{}/{})", self.0.id, self.0.status, self.0.agent, self.0.skill, self.0.tool)
    }
}

/// An `alone` call that ran: the decision, the person it ran for, and what the tool reported (`outcome`
/// `done` with its `receipt`, or `failed` / `unknown` with a `reason`).
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Ran(pub rt::Ran);

#[pymethods]
impl Ran {
    #[getter]
    fn decision(&self) -> Decision {
        Decision(self.0.decision.clone())
    }
    #[getter]
    fn runs_as(&self) -> &str {
        &self.0.runs_as
    }
    #[getter]
    fn outcome(&self) -> &'static str {
        outcome_parts(&self.0.outcome).0
    }
    #[getter]
    fn receipt<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        outcome_parts(&self.0.outcome).1.map(|r| json_to_py(py, r)).transpose()
    }
    #[getter]
    fn reason(&self) -> Option<&str> {
        outcome_parts(&self.0.outcome).2
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let (outcome, receipt, reason) = outcome_parts(&self.0.outcome);
        d.set_item("decision", dict_of(py, &self.0.decision)?)?;
        d.set_item("runs_as", &self.0.runs_as)?;
        d.set_item("outcome", outcome)?;
        d.set_item("receipt", receipt.map(|r| json_to_py(py, r)).transpose()?)?;
        d.set_item("reason", reason)?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        format!("Ran({} as {:?}: {})", self.0.decision.tool, self.0.runs_as, self.outcome())
    }
}

/// What `execute` did: the proposal after it (`done`, `unknown` or `failed`), and whether the tool ran
/// now (`False` for a proposal that was already `done`: its stored receipt, nothing run again).
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Execution(pub rt::Execution);

#[pymethods]
impl Execution {
    #[getter]
    fn proposal(&self) -> Proposal {
        Proposal(self.0.proposal.clone())
    }
    #[getter]
    fn ran(&self) -> bool {
        self.0.ran
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("proposal", dict_of(py, &self.0.proposal)?)?;
        d.set_item("ran", self.0.ran)?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        format!("Execution({} {}, ran={})", self.0.proposal.id, self.0.proposal.status, self.0.ran)
    }
}

/// The revocation of a standing rule: by whom, why, when.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct RuleRevocation(pub rt::RuleRevocation);

#[pymethods]
impl RuleRevocation {
    #[getter]
    fn by(&self) -> &str {
        &self.0.by
    }
    #[getter]
    fn why(&self) -> &str {
        &self.0.why
    }
    #[getter]
    fn at(&self) -> u64 {
        self.0.at
    }
    fn __repr__(&self) -> String {
        format!("RuleRevocation(by={:?}, why={:?})", self.0.by, self.0.why)
    }
}

/// A standing rule: "from now on, alone" for one (agent, tool[, skill]) in someone's work.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct StandingRule(pub rt::StandingRule);

#[pymethods]
impl StandingRule {
    #[getter]
    fn id(&self) -> &str {
        &self.0.id
    }
    /// The mode it applies in; `None`: only calls in no mode.
    #[getter]
    fn mode(&self) -> Option<&str> {
        self.0.mode.as_deref()
    }
    /// The chain it was made for, `["Agent.Skill", …]` nearest first: it applies only to calls with exactly
    /// this chain; `[]`: only to direct calls.
    #[getter]
    fn via(&self) -> Vec<String> {
        self.0.via.iter().map(ToString::to_string).collect()
    }
    /// A task rule's task (operation key); `None` for a standing rule.
    #[getter]
    fn task(&self) -> Option<&str> {
        self.0.task.as_deref()
    }
    #[getter]
    fn agent(&self) -> &str {
        &self.0.agent
    }
    #[getter]
    fn tool(&self) -> &str {
        &self.0.tool
    }
    #[getter]
    fn skill(&self) -> Option<&str> {
        self.0.skill.as_deref()
    }
    /// The person whose work it applies to, or `permits.EVERYBODY`.
    #[getter]
    fn work_for(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match &self.0.work_for {
            rt::WorkFor::Person(p) => p.into_pyobject(py)?.into_any().unbind(),
            rt::WorkFor::Everybody => Py::new(py, Everybody)?.into_any(),
            rt::WorkFor::Nobody => py.None(),
        })
    }
    #[getter]
    fn by(&self) -> &str {
        &self.0.by
    }
    /// `"any arguments"` or `"these arguments: {…}"` (the canonical JSON of the arguments it covers).
    #[getter]
    fn scope(&self) -> String {
        self.0.scope.words()
    }
    /// When it stops applying (seconds since the Unix epoch), or `None` until revoked.
    #[getter]
    fn expires_at(&self) -> Option<u64> {
        self.0.expires_at
    }
    #[getter]
    fn definition_digest(&self) -> &str {
        &self.0.definition_digest
    }
    /// Each covered skill and its entry's digest when the rule was made.
    #[getter]
    fn covered(&self) -> std::collections::BTreeMap<String, String> {
        self.0.covered.clone()
    }
    #[getter]
    fn created_at(&self) -> u64 {
        self.0.created_at
    }
    #[getter]
    fn uses(&self) -> u64 {
        self.0.uses
    }
    #[getter]
    fn revoked(&self) -> Option<RuleRevocation> {
        self.0.revoked.clone().map(RuleRevocation)
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("StandingRule({} {}/{} by {:?})", self.0.id, self.0.agent, self.0.tool, self.0.by)
    }
}

/// A budget as it stands now, in its minor unit.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct BudgetStatus(pub rt::BudgetStatus);

#[pymethods]
impl BudgetStatus {
    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }
    #[getter]
    fn currency(&self) -> &str {
        &self.0.currency
    }
    #[getter]
    fn unit(&self) -> &str {
        &self.0.unit
    }
    #[getter]
    fn ceiling(&self) -> u64 {
        self.0.ceiling
    }
    #[getter]
    fn installed_ceiling(&self) -> Option<u64> {
        self.0.installed_ceiling
    }
    #[getter]
    fn effective_ceiling(&self) -> u64 {
        self.0.effective_ceiling
    }
    #[getter]
    fn alone_up_to(&self) -> u64 {
        self.0.alone_up_to
    }
    /// The most one task may hold reserved and spent (`per_task`); `None` when the budget sets none.
    #[getter]
    fn per_task(&self) -> Option<u64> {
        self.0.per_task
    }
    #[getter]
    fn spent(&self) -> u64 {
        self.0.spent
    }
    #[getter]
    fn reserved(&self) -> u64 {
        self.0.reserved
    }
    #[getter]
    fn room(&self) -> u64 {
        self.0.room
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        let b = &self.0;
        format!("BudgetStatus({}: spent {}, reserved {}, room {} {})", b.name, b.spent, b.reserved, b.room, b.unit)
    }
}

/// One audit event: what happened, who, the triple, the proposal and fingerprint, the outcome and why.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct AuditEvent(pub rt::AuditEvent);

#[pymethods]
impl AuditEvent {
    #[getter]
    fn at(&self) -> u64 {
        self.0.at
    }
    /// `decision`, `proposal`, `grant`, `execution`, `rejection`, `withdrawal`, `revocation`, `expiry`,
    /// `supersession`, `rule_created`, `rule_revoked` or `refusal`.
    #[getter]
    fn kind(&self) -> String {
        serde_json::to_value(self.0.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }
    #[getter]
    fn who(&self) -> Option<&str> {
        self.0.who.as_deref()
    }
    #[getter]
    fn agent(&self) -> &str {
        &self.0.agent
    }
    #[getter]
    fn skill(&self) -> &str {
        &self.0.skill
    }
    #[getter]
    fn tool(&self) -> &str {
        &self.0.tool
    }
    #[getter]
    fn proposal(&self) -> Option<&str> {
        self.0.proposal.as_deref()
    }
    #[getter]
    fn fingerprint(&self) -> Option<&str> {
        self.0.fingerprint.as_deref()
    }
    #[getter]
    fn rule(&self) -> Option<&str> {
        self.0.rule.as_deref()
    }
    #[getter]
    fn outcome(&self) -> &str {
        &self.0.outcome
    }
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("AuditEvent({} {} {})", self.kind(), self.0.tool, self.0.outcome)
    }
}

/// A tool as offered to the model in one skill (never a `never` one), with its level (`None` when a
/// condition on the arguments decides it).
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct OfferedTool(pub rt::OfferedTool);

#[pymethods]
impl OfferedTool {
    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }
    #[getter]
    fn label(&self) -> &str {
        &self.0.label
    }
    #[getter]
    fn doc(&self) -> Option<&str> {
        self.0.doc.as_deref()
    }
    #[getter]
    fn params(&self) -> Vec<Param> {
        self.0.params.iter().map(Param::of).collect()
    }
    #[getter]
    fn level(&self) -> Option<&'static str> {
        self.0.level.map(level_word)
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("OfferedTool({:?})", self.0.name)
    }
}

/// An execution as a host that runs the tool itself sees it (`permits.Client`'s claim, confirm, refuse,
/// receipt and execution): a granted proposal (`P-n`) or an alone call (`A-n`), what to run, the accounts
/// the host's permissions must admit, the person it runs as, and how far it got.
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Claimed(pub rt::Claimed);

#[pymethods]
impl Claimed {
    /// `P-n` (a proposal) or `A-n` (an alone call).
    #[getter]
    fn id(&self) -> &str {
        &self.0.id
    }
    #[getter]
    fn operation_key(&self) -> &str {
        &self.0.operation_key
    }
    #[getter]
    fn agent(&self) -> &str {
        &self.0.agent
    }
    #[getter]
    fn skill(&self) -> &str {
        &self.0.skill
    }
    #[getter]
    fn tool(&self) -> &str {
        &self.0.tool
    }
    #[getter]
    fn arguments<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.0.arguments)
    }
    #[getter]
    fn requester(&self) -> Option<&str> {
        self.0.requester.as_deref()
    }
    /// The agent accounts the host's permissions must admit.
    #[getter]
    fn accounts(&self) -> Vec<String> {
        self.0.accounts.clone()
    }
    /// The person it runs as (empty before a claim).
    #[getter]
    fn runs_as(&self) -> &str {
        &self.0.runs_as
    }
    #[getter]
    fn destination(&self) -> Option<&str> {
        self.0.destination.as_deref()
    }
    /// The operation id to send to the other side: `OPERATION_KEY:P-n`, or `A-n`.
    #[getter]
    fn operation(&self) -> &str {
        &self.0.operation
    }
    /// `granted` (claimed, not confirmed), `sending` (confirmed: run it now), `done`, `failed`, `unknown`,
    /// or whatever else the proposal became.
    #[getter]
    fn status(&self) -> &'static str {
        self.0.status.as_str()
    }
    /// The claim token that holds it, when the caller holds it (`None` otherwise).
    #[getter]
    fn claim_token(&self) -> Option<&str> {
        self.0.claim_token.as_deref()
    }
    #[getter]
    fn confirmed(&self) -> bool {
        self.0.confirmed
    }
    #[getter]
    fn receipt<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.0.receipt.as_ref().map(|r| json_to_py(py, r)).transpose()
    }
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("Claimed({} {} {}, runs as {:?})", self.0.id, self.0.tool, self.0.status.as_str(), self.0.runs_as)
    }
}

/// A task: an operation key, bound on its first call to its root agent and skill, the person the work is
/// for and the mode; `ended_at` once it was ended (its task rules end, the binding stays).
#[pyclass(frozen, module = "permits")]
#[derive(Clone, Debug)]
pub struct Task(pub rt::Task);

#[pymethods]
impl Task {
    #[getter]
    fn key(&self) -> &str {
        &self.0.key
    }
    #[getter]
    fn root_agent(&self) -> &str {
        &self.0.root_agent
    }
    #[getter]
    fn root_skill(&self) -> &str {
        &self.0.root_skill
    }
    /// The person the work is for; `None` when it is for nobody.
    #[getter]
    fn person(&self) -> Option<&str> {
        self.0.person.as_deref()
    }
    #[getter]
    fn mode(&self) -> Option<&str> {
        self.0.mode.as_deref()
    }
    /// Seconds since the Unix epoch.
    #[getter]
    fn bound_at(&self) -> u64 {
        self.0.bound_at
    }
    /// Seconds since the Unix epoch, once ended.
    #[getter]
    fn ended_at(&self) -> Option<u64> {
        self.0.ended_at
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("Task({:?}, root {:?})", self.0.key, self.0.root_agent)
    }
}

/// A task's lease (spec §5a "Leases"), as `take_task` and `renew_task` answer it: while it is held (until
/// `expires_at`), only a call presenting it (`lease=`) acts under the key `key`. A host that takes the
/// task over gets the next `fence`, and every call presenting an older one is refused
/// (`Refused(kind="not_holder")`).
///
/// `Lease(key, holder, fence)` makes one from what a host kept (the runtime compares only the key, the
/// holder and the fence with the store's lease).
#[pyclass(frozen, eq, module = "permits")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease(pub rt::Lease);

#[pymethods]
impl Lease {
    #[new]
    #[pyo3(signature = (key, holder, fence, *, taken_at = Seconds(0), expires_at = Seconds(0)))]
    fn new(
        key: Text,
        holder: Text,
        fence: &Bound<'_, PyAny>,
        taken_at: Seconds,
        expires_at: Seconds,
    ) -> PyResult<Lease> {
        // A fence is a whole number like a number of seconds (`int`, not `bool`, 0 to 2**63-1).
        let fence = crate::convert::seconds(fence)
            .map_err(|_| {
                crate::convert::input_error(fence.py(), format!("fence is an int from 0 to 2**63-1, not {fence}"))
            })?
            .0;
        Ok(Lease(rt::Lease { key: key.0, holder: holder.0, fence, taken_at: taken_at.0, expires_at: expires_at.0 }))
    }
    /// The task's operation key.
    #[getter]
    fn key(&self) -> &str {
        &self.0.key
    }
    /// Who holds it: the name the host chose (one per worker).
    #[getter]
    fn holder(&self) -> &str {
        &self.0.holder
    }
    /// 1 for the key's first lease, one more at every take; a renewal keeps it.
    #[getter]
    fn fence(&self) -> u64 {
        self.0.fence
    }
    /// When this holder took it (this fence), in seconds since the Unix epoch.
    #[getter]
    fn taken_at(&self) -> u64 {
        self.0.taken_at
    }
    /// Until when it is held, in seconds since the Unix epoch (a release sets it to the release's moment).
    #[getter]
    fn expires_at(&self) -> u64 {
        self.0.expires_at
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_of(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!(
            "Lease({:?}, holder {:?}, fence {}, until {})",
            self.0.key, self.0.holder, self.0.fence, self.0.expires_at
        )
    }
}
