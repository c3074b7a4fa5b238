//! The records the runtime keeps: proposals with their grants, and standing rules (spec §5). They
//! serialize both ways, so a durable store can keep them as JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::table::{Level, Route};

/// The status of a proposal (spec §5). The last seven are final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting for a decision.
    Waiting,
    /// Approved: a grant is recorded and not yet consumed.
    Granted,
    /// The grant was consumed and the call is running.
    Sending,
    /// The call ran; the receipt is stored.
    Done,
    /// The call was started but its outcome could not be confirmed.
    Unknown,
    /// The call was refused at execution (the host's authority, or the current table says `never`), or the
    /// tool reported a failure. Final.
    Failed,
    /// A person said no, with a reason. Final.
    Rejected,
    /// What the yes covered changed. Final.
    Stale,
    /// Undecided past its expiry. Final.
    Expired,
    /// Revoked by a decider or a supervisor. Final.
    Revoked,
    /// Replaced by a newer proposal for the same subject in the same work. Final.
    Superseded,
    /// Withdrawn by the requester or the agent before any grant. Final.
    Withdrawn,
}

impl Status {
    /// The status as written in records: `waiting`, `granted`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Waiting => "waiting",
            Status::Granted => "granted",
            Status::Sending => "sending",
            Status::Done => "done",
            Status::Unknown => "unknown",
            Status::Failed => "failed",
            Status::Rejected => "rejected",
            Status::Stale => "stale",
            Status::Expired => "expired",
            Status::Revoked => "revoked",
            Status::Superseded => "superseded",
            Status::Withdrawn => "withdrawn",
        }
    }

    /// `true` for the statuses nothing can leave: `failed`, `rejected`, `stale`, `expired`, `revoked`,
    /// `superseded`, `withdrawn`.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Status::Failed
                | Status::Rejected
                | Status::Stale
                | Status::Expired
                | Status::Revoked
                | Status::Superseded
                | Status::Withdrawn
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// On what basis a grant was recorded (spec §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// A person approved it.
    Operator,
    /// The runtime granted it within a budget's automatic allowance (no person asked).
    Automatic,
    /// A record from before bases existed: never authorizes an execution.
    Unknown,
}

/// An approval of one fingerprint (spec §5): consumed by exactly one execution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The person who approved (`None` for an automatic grant).
    pub approver: Option<String>,
    /// The basis.
    pub basis: Basis,
    /// When it was granted, in seconds since the Unix epoch.
    pub granted_at: u64,
    /// When it stops authorizing, in seconds since the Unix epoch (at most the package's grant lifetime
    /// after `granted_at`).
    pub expires_at: u64,
}

/// A tool run before the proposal, and what it returned: evidence a person reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The tool that ran.
    pub tool: String,
    /// Its arguments (a JSON object).
    pub arguments: Value,
    /// What it returned.
    pub answer: Value,
}

/// One argument as a person reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownArgument {
    /// The parameter's name.
    pub name: String,
    /// The argument as the host's naming callback shows it ("Ticket T-7", "45").
    pub shown: String,
}

/// Who decides a proposal, resolved from its route (spec §3 "Routes", §5 "Who decides").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decider {
    /// The route of the triple (`requester` by default).
    pub route: Route,
    /// The persons the route names now, sorted: the requester (or the sponsor when the work is for nobody),
    /// the person, the holders of the role, or the members of the queue. Persons admitted by
    /// `decides_proposals` may decide too and are not listed.
    pub persons: Vec<String>,
}

impl Decider {
    /// What a waiting task says it waits on, for a person to read: "a decision from Noor", "a decision from
    /// a SupportReviewer (Riley)", "a decision from the Finance queue (Noor)".
    pub fn waiting_on(&self) -> String {
        let who = self.persons.join(", ");
        match &self.route {
            Route::Requester | Route::Person(_) if !who.is_empty() => format!("a decision from {who}"),
            Route::Role(role) => format!("a decision from a {role} ({who})"),
            Route::Queue(queue) => format!("a decision from the {queue} queue ({who})"),
            _ => "a decision from nobody yet".to_string(),
        }
    }
}

/// A proposal: the exact call an agent wants to make, held for a person (spec §5 "Proposals").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The runtime's id (`P-1`).
    pub id: String,
    /// The host's operation key: the task or work item the proposal belongs to.
    pub operation_key: String,
    /// The agent.
    pub agent: String,
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// The tool's label ("Set the price").
    pub label: String,
    /// The arguments (a JSON object, checked against the tool's parameters).
    pub arguments: Value,
    /// Each argument as a person reads it, in the tool's parameter order.
    pub shown: Vec<ShownArgument>,
    /// The covered version when the proposal was made (`r1`), for a tool with `version P.F`.
    pub covered_version: Option<String>,
    /// What the host will send to, for a tool that reaches out.
    pub destination: Option<String>,
    /// Why the agent wants it.
    pub why: String,
    /// Tools run before, and what they returned.
    pub evidence: Vec<Evidence>,
    /// The person the work is for; `None` when it is for nobody.
    pub requester: Option<String>,
    /// Who decides.
    pub decider: Decider,
    /// The level when it was proposed (`propose` or `propose_every_time`, or `alone` if proposed anyway).
    pub level: Level,
    /// The triple's `entry_digest` when it was proposed (for a call in a mode that says something about
    /// the triple, the mode's call digest).
    pub entry_digest: String,
    /// The mode the call was proposed in (spec §3c); absent for no mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The call's delegation chain, nearest first (spec §3b): "Researcher in Look, for Coder in FixBug";
    /// absent for a direct call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<crate::table::ChainLink>,
    /// The tool's `definition_digest` when it was proposed.
    pub definition_digest: String,
    /// The canonical JSON of the `subject` argument, for a tool with `subject P` (spec §6 supersession).
    pub subject: Option<String>,
    /// SHA-256 (hex) of canonical {`v`, agent, skill, tool, entry_digest, arguments, covered version,
    /// destination, person, chain, mode, instruction version}: what a yes covers (see
    /// [`crate::fingerprint_with`]).
    pub fingerprint: String,
    /// The fingerprint's format ([`crate::FINGERPRINT_FORMAT`]); 1 for a record from before format 2, which
    /// is `stale` when it is decided or executed.
    #[serde(default = "format_1")]
    pub fingerprint_format: u32,
    /// The version of the instructions the agent worked under when it proposed (the host's
    /// [`crate::Versions::instruction_version`]), if the host gives one.
    #[serde(default)]
    pub instruction_version: Option<String>,
    /// When it was made, in seconds since the Unix epoch.
    pub created_at: u64,
    /// When it expires undecided, in seconds since the Unix epoch.
    pub expires_at: u64,
    /// The status.
    pub status: Status,
    /// The grant, once approved.
    pub grant: Option<Grant>,
    /// The host's claim token of the execution that consumed the grant (spec §5a "Idempotent execution"),
    /// when it gave one.
    #[serde(default)]
    pub claim: Option<String>,
    /// Who the call ran as (the approver of an operator grant, else the requester or sponsor), once it ran.
    pub ran_as: Option<String>,
    /// The receipt the host returned when it ran.
    pub receipt: Option<Value>,
    /// The latest reason: a rejection's (given back to the agent), a failure's, a refusal's, a revocation's.
    pub reason: Option<String>,
    /// Who last decided it (approved, rejected, revoked, withdrew), if anyone.
    pub decided_by: Option<String>,
    /// The state of a claim by a host that runs the tool itself ([`crate::Runtime::claim`]): whom it runs
    /// as, and whether the host confirmed it; the token is [`Proposal::claim`]. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_claim: Option<HostClaim>,
}

/// The fingerprint format of a record written before the format was recorded.
fn format_1() -> u32 {
    1
}

impl Proposal {
    /// Why the agent wants it, as a person is shown it: line breaks kept, every other invisible
    /// character made visible (spec §5a, [`crate::display::visible_lines`]).
    pub fn why_for_person(&self) -> String {
        crate::display::visible_lines(&self.why)
    }

    /// The evidence as a person is shown it, one text per item: "`Tool` {arguments} → answer", with every
    /// invisible character made visible (spec §5a).
    pub fn evidence_for_person(&self) -> Vec<String> {
        self.evidence
            .iter()
            .map(|e| {
                crate::display::visible_lines(&format!(
                    "`{}` {} → {}",
                    e.tool,
                    crate::table::canonical_value(&e.arguments),
                    crate::table::canonical_value(&e.answer)
                ))
            })
            .collect()
    }

    /// What the agent is told as the tool's answer while or after the proposal is decided: the status, and
    /// the reason when there is one ("rejected: Quote the cable separately.").
    pub fn answer_for_agent(&self) -> String {
        match (&self.status, &self.reason) {
            (Status::Waiting, _) => format!("proposed `{}`: waiting on {}", self.tool, self.decider.waiting_on()),
            (Status::Stale, _) => format!(
                "the proposal for `{}` is stale: what it covered changed; look again and propose anew",
                self.tool
            ),
            (status, Some(reason)) => format!("{status}: {reason}"),
            (status, None) => status.to_string(),
        }
    }
}

/// A claim by a host that runs the tool itself (the execution protocol, [`crate::Runtime::claim`]): the
/// execution is bound to the claim token, and runs only once the host confirms it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostClaim {
    /// The person the execution runs for (see [`crate::RunContext::runs_as`]).
    pub runs_as: String,
    /// When it was claimed, in seconds since the Unix epoch.
    pub claimed_at: u64,
    /// When the host confirmed it (its own permissions admitted the agent's account and the person): the
    /// execution is then `sending`. `None` while the host has not answered.
    pub confirmed_at: Option<u64>,
    /// The `table_digest` of the table the claim was checked on: a confirmation on another table is refused.
    pub table_digest: String,
    /// The fence of the task's lease the claim was made under (spec §5a "Leases"); `None` without one. An
    /// unconfirmed claim under an older fence is dropped when the task's current holder claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
}

/// An `alone` call admitted for a host that runs it itself (spec §5 "Execution admission"; the approval
/// service's execution protocol): claimed, then confirmed or refused by the host, then its outcome. Its id
/// (`A-n`) is also the operation id sent to the other side, and the holder of its reservation when it spends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// The runtime's id (`A-1`).
    pub id: String,
    /// The host's operation key (the task the call belongs to).
    pub operation_key: String,
    /// The agent.
    pub agent: String,
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// The checked arguments (a JSON object).
    pub arguments: Value,
    /// The person the work is for; `None` when it is for nobody.
    pub requester: Option<String>,
    /// The call's delegation chain, nearest first (spec §3b): its agents' accounts are admitted with the
    /// agent's. Absent for a direct call (and in runs stored before delegation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<crate::table::ChainLink>,
    /// The standing rule that made the call `alone`, if one did.
    pub standing_rule: Option<String>,
    /// The amount reserved under the run's id, when the tool spends from a budget.
    pub amount: Option<u64>,
    /// `granted` (claimed, the host has not confirmed), `sending` (confirmed), then `done`, `failed` or
    /// `unknown`.
    pub status: Status,
    /// The claim token that admitted it.
    pub token: String,
    /// The claim: the person it runs for, and whether the host confirmed it.
    pub host_claim: HostClaim,
    /// The receipt the host returned.
    pub receipt: Option<Value>,
    /// Why it failed or is unknown, when it did or is.
    pub reason: Option<String>,
    /// When it was admitted, in seconds since the Unix epoch.
    pub created_at: u64,
}

/// For whose work a standing rule applies (spec §5 "Standing rules").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkFor {
    /// Work done for this person.
    Person(String),
    /// Work done for nobody (the agent's sponsor stands in).
    Nobody,
    /// Work done for anybody (and for nobody).
    Everybody,
}

/// Which calls a standing rule covers (spec §5 "Standing rules": `these arguments` or `any arguments`);
/// the approval screen and the audit say which ([`Scope::words`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Exactly these arguments: the canonical JSON of the arguments object (see [`Scope::these`]).
    TheseArguments(String),
    /// Any arguments the tool's parameters accept.
    AnyArguments,
}

impl Scope {
    /// The scope of exactly `arguments` (a JSON object), kept in canonical form: key order and
    /// whitespace do not matter.
    pub fn these(arguments: &Value) -> Scope {
        Scope::TheseArguments(crate::table::canonical_value(arguments))
    }

    /// Whether a call with `arguments` is covered.
    pub fn covers(&self, arguments: &Value) -> bool {
        match self {
            Scope::AnyArguments => true,
            Scope::TheseArguments(canonical) => *canonical == crate::table::canonical_value(arguments),
        }
    }

    /// What a person reads: "these arguments: {…}" or "any arguments".
    pub fn words(&self) -> String {
        match self {
            Scope::AnyArguments => "any arguments".to_string(),
            Scope::TheseArguments(canonical) => format!("these arguments: {canonical}"),
        }
    }

    /// [`Scope::AnyArguments`]: what a rule stored before scopes existed covered.
    fn any() -> Scope {
        Scope::AnyArguments
    }
}

/// A standing rule: "from now on, alone" for one (agent, tool[, skill]) (spec §5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandingRule {
    /// The runtime's id (`R-1`).
    pub id: String,
    /// The agent.
    pub agent: String,
    /// The tool.
    pub tool: String,
    /// The skill, when the rule is for one skill only.
    pub skill: Option<String>,
    /// For whose work it applies.
    pub work_for: WorkFor,
    /// The person who made it.
    pub by: String,
    /// The tool's `definition_digest` when it was made: a changed tool is no longer covered.
    pub definition_digest: String,
    /// Each covered skill with its entry's `entry_digest` when it was made: a changed entry is no longer
    /// covered.
    pub covered: std::collections::BTreeMap<String, String>,
    /// Which calls it covers (a rule stored before scopes existed covers any arguments, as it did).
    #[serde(default = "Scope::any")]
    pub scope: Scope,
    /// The mode it was made in: it applies only to calls in exactly this mode (spec §3c step 5; `None`:
    /// only to calls in no mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The delegation chain it was made for, nearest first (spec §3b): it applies only to calls with exactly
    /// this chain (empty: only to direct calls). Absent for a direct call's rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<crate::table::ChainLink>,
    /// For a **task rule** (spec §5a "Task-scoped approval"): the operation key of its task. It applies only
    /// to calls under that key and ends with the task (`end_task`) or at its expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// When it stops applying, in seconds since the Unix epoch; `None` until revoked.
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// When it was made, in seconds since the Unix epoch.
    pub created_at: u64,
    /// How many calls ran alone because of it.
    pub uses: u64,
    /// Set when it is revoked.
    pub revoked: Option<RuleRevocation>,
}

/// The revocation of a standing rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRevocation {
    /// Who revoked it.
    pub by: String,
    /// Why.
    pub why: String,
    /// When, in seconds since the Unix epoch.
    pub at: u64,
}

/// What the store keeps of one budget (spec §6): the installed ceiling and what was spent, in the minor
/// unit. What is reserved is the sum of the budget's [`Reservation`]s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetRecord {
    /// The budget's name.
    pub name: String,
    /// The ceiling installed when the runtime first used the budget (or raised explicitly since).
    pub installed_ceiling: u64,
    /// What executions spent (moved from reservations by conclusive receipts).
    pub spent: u64,
}

/// Money held for a granted, unsent spend (spec §6 "reservation"): moves to spent on acceptance,
/// released on rejection, revocation or supersession.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Who holds it: a proposal id (`P-3`), or `A-n` for a call that ran alone.
    pub holder: String,
    /// The budget.
    pub budget: String,
    /// The amount, in the budget's minor unit.
    pub amount: u64,
    /// When it was made, in seconds since the Unix epoch.
    pub created_at: u64,
    /// The task (operation key) it is held for (spec §6 "Per task"): a proposal's operation key, or the key
    /// of the call that ran alone; `None` for an alone call that named no task, and for a reservation made
    /// before schema version 5 that could not be traced to one. Settling it adds to the task's spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// A task: one operation key, bound on its first call to its root agent and skill, the person the work is
/// for and the mode (spec §5a "Tasks"). Every later call under the key must match, or it is `never`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// The host's operation key.
    pub key: String,
    /// The root agent: the agent of the first call (the chain's root, once delegation exists).
    pub root_agent: String,
    /// The root agent's skill.
    pub root_skill: String,
    /// The person the work is for; `None` when it is for nobody.
    pub person: Option<String>,
    /// The mode the task runs in (spec §3c); `None` for no mode.
    pub mode: Option<String>,
    /// When the first call bound it, in seconds since the Unix epoch.
    pub bound_at: u64,
    /// When `end_task` ended it (its task rules end; the binding stays), in seconds since the Unix epoch.
    pub ended_at: Option<u64>,
}

/// One table installed in a store (spec §5a "One current table per store"): the store keeps them in order,
/// and the last is the current one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInstall {
    /// Its place in the store's history, from 1.
    pub seq: u64,
    /// The table's `table_digest`.
    pub table_digest: String,
    /// The serial of its signature, when it was signed.
    pub serial: Option<u64>,
    /// The key that signed it (hex), when it was signed.
    pub key: Option<String>,
    /// When it was installed, in seconds since the Unix epoch.
    pub installed_at: u64,
    /// The supervisor who forced it over a refusal (a rollback), if one did.
    pub forced_by: Option<String>,
}

/// A task's lease (spec §5a "Leases"): while it is held (until `expires_at`), only its holder may propose,
/// execute or settle under the key, and only while it presents this lease's `fence`. A host that takes the
/// task after the lease expired (or was released) gets the next fence, and every call that presents an
/// older one is refused: "this host no longer holds the task".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The task's operation key.
    pub key: String,
    /// Who holds it: a name the host chooses (one per worker, e.g. `host-a:4711`).
    pub holder: String,
    /// The fencing number: 1 for the key's first lease, one more at every take; a renewal keeps it.
    pub fence: u64,
    /// When this holder took it (this fence), in seconds since the Unix epoch.
    pub taken_at: u64,
    /// Until when it is held, in seconds since the Unix epoch; at or after it, another host may take it.
    /// A release sets it to the moment of the release.
    pub expires_at: u64,
}

impl Lease {
    /// Whether the lease is held at `now` (seconds since the Unix epoch).
    pub fn held_at(&self, now: u64) -> bool {
        now < self.expires_at
    }
}
