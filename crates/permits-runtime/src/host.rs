//! What the host supplies: who may do what in its application ([`Authority`]), how an argument reads to a
//! person ([`Naming`]) and the current value of what a yes covers ([`Versions`]) (spec §5).

use serde_json::Value;

use crate::table::ParamInfo;

/// An account the host's authority is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Principal<'a> {
    /// The agent's own account (its name in the table).
    Agent(&'a str),
    /// A person (their name in the table): the approver of an operator grant, or the person the work is for,
    /// or the agent's sponsor when the work is for nobody.
    Person(&'a str),
}

impl Principal<'_> {
    /// The account's name.
    pub fn name(&self) -> &str {
        match self {
            Principal::Agent(n) | Principal::Person(n) => n,
        }
    }
}

/// The host's own permissions (spec §5 "Execution admission"): before any tool runs, alone calls included,
/// the runtime asks it about the agent's account **and** about the person the call runs for; both must be
/// admitted.
pub trait Authority {
    /// `Ok(())` when `principal` may run `tool` with `arguments` (a JSON object of the tool's parameters) in
    /// the host's application; otherwise `Err` with the reason a person reads ("only a manager may set a
    /// price").
    fn admits(&self, principal: Principal<'_>, tool: &str, arguments: &Value) -> Result<(), String>;
}

/// An [`Authority`] that admits everyone: for hosts whose application enforces nothing of its own, and for
/// tests. The policy's levels still apply.
#[derive(Clone, Copy, Debug, Default)]
pub struct AdmitAll;

impl Authority for AdmitAll {
    fn admits(&self, _: Principal<'_>, _: &str, _: &Value) -> Result<(), String> {
        Ok(())
    }
}

/// Turns an argument into what a person reads on the approval screen ("Ticket T-7") (spec §5 "Display").
pub trait Naming {
    /// How `value`, the argument for `param` of `tool`, reads to a person.
    fn show(&self, tool: &str, param: &ParamInfo, value: &Value) -> String;
}

/// The default [`Naming`]: a string as it is, anything else as its JSON text (`45`, `true`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PlainNaming;

impl Naming for PlainNaming {
    fn show(&self, _: &str, _: &ParamInfo, value: &Value) -> String {
        match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// What a covered version is asked about: the tool's `version P.F` and the argument given for `P`.
#[derive(Clone, Copy, Debug)]
pub struct VersionQuery<'a> {
    /// The tool.
    pub tool: &'a str,
    /// The parameter `P` (e.g. `repair`).
    pub param: &'a str,
    /// The entity `P` identifies, when `P` is an entity (e.g. `Repair`).
    pub entity: Option<&'a str>,
    /// The argument given for `P` (e.g. `"T-7"`).
    pub id: &'a Value,
    /// The field `F` (e.g. `revision`).
    pub field: &'a str,
}

/// The current value of what a yes covers (spec §2 `version P.F`, §5): the runtime asks when a proposal is
/// made, approved and executed, so a change in between makes the approval `stale`.
pub trait Versions {
    /// The covered version now, as an opaque string (`r1`); `None` when the host cannot say, which refuses
    /// the call (an unknown version is never a match).
    fn covered_version(&self, query: VersionQuery<'_>) -> Option<String>;

    /// The version of the instructions `agent` works under now (its prompt set), as an opaque string, or
    /// `None` when the host gives none (the default). It is in every proposal's fingerprint (spec §5): a
    /// proposal made under other instructions is `stale` when it is approved or executed.
    fn instruction_version(&self, agent: &str) -> Option<String> {
        let _ = agent;
        None
    }
}

/// A [`Versions`] that knows nothing: every tool with a `version` is refused. The default, so a host that
/// forgot to supply versions fails closed.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoVersions;

impl Versions for NoVersions {
    fn covered_version(&self, _: VersionQuery<'_>) -> Option<String> {
        None
    }
}
