//! The decision table: the compiled artifact, the runtime's only input (spec §4).
//!
//! Only this module derives `Serialize`/`Deserialize`: the table is a deliberate format, separate from
//! the syntax tree. Maps keyed by name are `BTreeMap`s (sorted); lists with a declared order (a skill's
//! tools, an agent's skills) keep it. Every struct refuses unknown fields, so a flipped key is a load
//! error rather than a silently dropped rule.
//!
//! Digests are SHA-256 over canonical JSON ([`canonical_json`]): object keys sorted, no insignificant
//! whitespace, integers only.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod canonical;
mod decide;

pub use decide::{
    ArgumentError, CallRef, LevelIndex, LevelOf, NotOffered, Refused, arguments_fit, check_arguments, type_words,
    value_fits,
};

#[doc(hidden)]
pub use canonical::push_json_escaped;

/// The only table format this runtime reads (`header.format`).
pub const FORMAT: u32 = 1;

/// A level, from least to most strict (spec §3). `Ord` follows strictness, so `max` is "strictest wins".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// The agent may run the call on its own.
    Alone,
    /// The agent must propose the exact call to a person first; a standing rule may make it alone.
    Propose,
    /// Like `propose`, and no standing rule can ever make it alone.
    ProposeEveryTime,
    /// The call is not made, whatever anyone approves.
    Never,
}

impl Level {
    /// Every level, least strict first.
    pub const ALL: [Level; 4] = [Level::Alone, Level::Propose, Level::ProposeEveryTime, Level::Never];

    /// The keyword as written in sources and in the table: `alone`, `propose`, `propose_every_time`, `never`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Alone => "alone",
            Level::Propose => "propose",
            Level::ProposeEveryTime => "propose_every_time",
            Level::Never => "never",
        }
    }

    /// Parses a level keyword; `None` for anything else.
    pub fn from_keyword(word: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == word)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A class of effect (spec §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectClass {
    /// Looks something up. Always `alone` by class.
    Reads,
    /// Writes, creates or deletes data.
    Changes,
    /// Sends a message.
    Sends,
    /// Spends money from a budget.
    Spends,
    /// Reaches a host outside.
    ReachesOut,
}

impl EffectClass {
    /// Every class, in the order of spec §2.
    pub const ALL: [EffectClass; 5] =
        [EffectClass::Reads, EffectClass::Changes, EffectClass::Sends, EffectClass::Spends, EffectClass::ReachesOut];

    /// The keyword: `reads`, `changes`, `sends`, `spends`, `reaches_out`.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::Reads => "reads",
            EffectClass::Changes => "changes",
            EffectClass::Sends => "sends",
            EffectClass::Spends => "spends",
            EffectClass::ReachesOut => "reaches_out",
        }
    }

    /// Parses a class keyword; `None` for anything else.
    pub fn from_keyword(word: &str) -> Option<EffectClass> {
        EffectClass::ALL.into_iter().find(|c| c.as_str() == word)
    }
}

impl fmt::Display for EffectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The compiled decision table of one package (spec §4).
///
/// Serialized with its members in key order (see its `Serialize` impl), so that the canonical writer
/// never has to move the whole table's bytes to sort them.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    /// Format, compiler and digests. Not covered by `table_digest`.
    pub header: Header,
    /// Package-wide settings.
    pub package: PackageSettings,
    /// Every tool (not functions: they are never offered), by name.
    pub tools: BTreeMap<String, ToolInfo>,
    /// Every agent, by name.
    pub agents: BTreeMap<String, AgentInfo>,
    /// Every skill, by name.
    pub skills: BTreeMap<String, SkillInfo>,
    /// Every person, by name.
    pub persons: BTreeMap<String, PersonInfo>,
    /// Every role, by name.
    pub roles: BTreeMap<String, RoleInfo>,
    /// Every entity, by name (for hosts that show what a proposal is about).
    pub entities: BTreeMap<String, EntityInfo>,
    /// Every queue, by name.
    pub queues: BTreeMap<String, QueueInfo>,
    /// The package-wide authority statements.
    pub authority: Authority,
    /// Every budget, by name (spec §6); absent from the JSON when the package declares none. Budget
    /// figures are in no entry's digest: the runtime checks them against their current values at grant
    /// and at execution.
    #[serde(default)]
    pub budgets: BTreeMap<String, BudgetInfo>,
    /// One entry per offered triple: `entries[agent][skill][tool]`.
    pub entries: BTreeMap<String, BTreeMap<String, BTreeMap<String, Entry>>>,
}

impl Serialize for Table {
    /// The members in key order: the canonical JSON (spec §4) sorts them anyway, and a table that arrives
    /// sorted is written without a copy. `budgets` is left out when empty, as in the JSON of tables
    /// without budgets.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut t = serializer.serialize_struct("Table", 12)?;
        t.serialize_field("agents", &self.agents)?;
        t.serialize_field("authority", &self.authority)?;
        if self.budgets.is_empty() {
            t.skip_field("budgets")?;
        } else {
            t.serialize_field("budgets", &self.budgets)?;
        }
        t.serialize_field("entities", &self.entities)?;
        t.serialize_field("entries", &self.entries)?;
        t.serialize_field("header", &self.header)?;
        t.serialize_field("package", &self.package)?;
        t.serialize_field("persons", &self.persons)?;
        t.serialize_field("queues", &self.queues)?;
        t.serialize_field("roles", &self.roles)?;
        t.serialize_field("skills", &self.skills)?;
        t.serialize_field("tools", &self.tools)?;
        t.end()
    }
}

/// The table's header (spec §4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Always [`FORMAT`]; the runtime refuses any other.
    pub format: u32,
    /// The compiler that wrote the table, e.g. `permitc 0.1.0`. Informational.
    pub compiler: String,
    /// SHA-256 (hex) over each source's relative path and bytes, length-prefixed, in sorted path order.
    /// Informational: it says which sources the table came from.
    pub source_digest: String,
    /// SHA-256 (hex) over the canonical JSON of the whole table except the header.
    pub table_digest: String,
}

/// Package-wide settings (spec §5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageSettings {
    /// How long a proposal waits for a decision before it expires, in seconds (default 7 days).
    pub proposal_lifetime_seconds: u64,
    /// The longest a grant lasts, in seconds (default 24 hours).
    pub grant_lifetime_seconds: u64,
}

/// Default `proposal_lifetime`: 7 days, in seconds.
pub const DEFAULT_PROPOSAL_LIFETIME_SECONDS: u64 = 7 * 24 * 3600;
/// Default `grant_lifetime`: 24 hours, in seconds.
pub const DEFAULT_GRANT_LIFETIME_SECONDS: u64 = 24 * 3600;

/// A tool as the runtime sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInfo {
    /// The label a person reads ("Set the price").
    pub label: String,
    /// The doc comment, lines joined by `\n`.
    pub doc: Option<String>,
    /// `true` for an `extern tool` (no body; its claim is trusted and marked assumed).
    pub external: bool,
    /// The parameters in declared order.
    pub params: Vec<ParamInfo>,
    /// The proven effect set: each class with whether it is only assumed and the first hop of its witness.
    pub effects: BTreeMap<EffectClass, EffectInfo>,
    /// The claimed effect set, when the tool claims one; levels use it when present.
    pub claim: Option<Vec<EffectClass>>,
    /// When the tool writes the reserved entity `permits` (itself or through a call): the witness's first
    /// hop. Such a tool is `never` for every agent.
    pub reserved: Option<Hop>,
    /// `version P.F`: what a yes covers.
    pub version: Option<VersionInfo>,
    /// `subject P`: the parameter that says what a proposal is about.
    pub subject: Option<String>,
    /// `spend BUDGET by PARAM`: the budget every execution of the tool is checked against, and the `money`
    /// parameter that says how much (spec §6). Absent from the JSON for a tool that spends from no budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spends: Option<SpendInfo>,
    /// SHA-256 (hex) of the tool's canonical definition and of everything it calls (spec §2).
    pub definition_digest: String,
}

/// A budget (spec §6): a spending account with an automatic allowance and a cumulative ceiling, in whole
/// numbers of its minor unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetInfo {
    /// The currency code (`USD`). Informational: amounts are never converted.
    pub currency: String,
    /// The minor unit amounts are counted in (`cents`).
    pub unit: String,
    /// The most that may be spent and reserved together, in the minor unit. The runtime checks against
    /// the smaller of this and the ceiling it installed first: a new table never raises it silently.
    pub ceiling: u64,
    /// The largest amount one call may spend without a person, in the minor unit: the automatic allowance.
    /// A call above it is at least `propose`.
    pub alone_up_to: u64,
    /// The budget's doc comment, lines joined by `\n`.
    pub doc: Option<String>,
}

/// One call's spend (spec §6): the budget it spends from, with its current figures, and the amount of
/// the call's `money` argument, in the budget's minor unit. See [`Table::spend_of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpendOf<'t> {
    /// The budget's name.
    pub budget: &'t str,
    /// The budget's figures in this table.
    pub info: &'t BudgetInfo,
    /// The amount, in the budget's minor unit.
    pub amount: u64,
}

impl SpendOf<'_> {
    /// Whether the amount is above the budget's automatic allowance: an `alone` call is then `propose`.
    pub fn over_allowance(&self) -> bool {
        self.amount > self.info.alone_up_to
    }
}

/// Why a call's spend cannot be read (spec §6): the call is `never`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpendError {
    /// The tool spends from a budget the table does not declare.
    UnknownBudget,
    /// The amount argument is missing or not a whole number.
    MissingAmount,
    /// The amount is negative.
    NegativeAmount(i64),
}

/// How a tool spends: `spend BUDGET by PARAM` (spec §6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendInfo {
    /// The budget's name (a key of [`Table::budgets`]).
    pub budget: String,
    /// The tool's `money` parameter that holds the amount, in the budget's minor unit.
    pub param: String,
}

/// A declared parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamInfo {
    /// The parameter's name.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: ParamType,
}

/// The type of a parameter (spec §2).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    /// A string.
    String,
    /// A signed 64-bit integer.
    Int,
    /// `true` or `false`.
    Bool,
    /// An integer amount in a budget's minor unit (cents); never a float.
    Money,
    /// An id of the named entity, which the host resolves; a string in arguments.
    Entity(String),
}

/// One class of a tool's proven effect set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectInfo {
    /// `true` when every witness of the class ends at an `extern tool`'s claim.
    pub assumed: bool,
    /// The first hop of the witness.
    pub witness: Hop,
}

/// One hop of a witness path: an operation, a call, or an extern claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hop {
    /// What the hop is.
    pub kind: HopKind,
    /// The operation's canonical text (`write Repair.price`), or the callee's name for a call.
    pub text: String,
    /// Where it is written.
    pub at: SourceRef,
}

/// The kinds of hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HopKind {
    /// An operation in the body proves the effect.
    Operation,
    /// A call: the effect continues in the callee.
    Call,
    /// An extern tool's claim: trusted, not proven.
    Claim,
}

/// A place in the sources: the file relative to the package root and a 1-based line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    /// The file, relative to the package root, with `/` separators.
    pub file: String,
    /// The 1-based line.
    pub line: u32,
}

impl fmt::Display for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// `version P.F`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionInfo {
    /// The parameter (an entity id).
    pub param: String,
    /// The entity's field whose current value the host supplies.
    pub field: String,
}

/// An agent as the runtime sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentInfo {
    /// What the agent is for.
    pub purpose: Option<String>,
    /// The doc comment.
    pub doc: Option<String>,
    /// The roles its account holds (`acts_as`).
    pub acts_as: Vec<String>,
    /// The person who answers for it; the decider when the work is for nobody.
    pub sponsor: String,
    /// Its skills, in declared order.
    pub skills: Vec<String>,
}

/// A skill as the runtime sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillInfo {
    /// What the job is.
    pub description: Option<String>,
    /// The doc comment.
    pub doc: Option<String>,
    /// The only tools offered in it, in declared order.
    pub tools: Vec<String>,
    /// Its routes, by tool.
    pub routes: BTreeMap<String, Route>,
    /// SHA-256 (hex) of the canonical form of the skill's `may` block and routes; part of every entry
    /// digest of the skill.
    pub rules_digest: String,
}

/// A role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleInfo {
    /// The doc comment.
    pub doc: Option<String>,
}

/// An entity: a kind of thing the host's tools work on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityInfo {
    /// The doc comment.
    pub doc: Option<String>,
    /// Its fields, in declared order.
    pub fields: Vec<String>,
}

/// A person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonInfo {
    /// The doc comment.
    pub doc: Option<String>,
    /// The roles they hold, sorted.
    pub roles: Vec<String>,
}

/// A queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueInfo {
    /// The doc comment.
    pub doc: Option<String>,
    /// Who decides what is routed to it, in declared order.
    pub decided_by: Vec<Holder>,
}

/// A role or a person named in an authority statement or a queue.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
    /// Everyone who holds the role.
    Role(String),
    /// One person.
    Person(String),
}

/// The package-wide authority statements (spec §3, §5).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Authority {
    /// May make standing rules for others or everybody, and revoke any proposal or rule.
    pub supervises: Vec<Holder>,
    /// May decide any proposal, routed or not.
    pub decides_proposals: Vec<Holder>,
    /// May make standing rules for themselves.
    pub widens_autonomy: Vec<Holder>,
}

/// Who decides a proposal (spec §3 "Routes").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// The person the work is for, or the agent's sponsor when it is for nobody (the default).
    Requester,
    /// One person.
    Person(String),
    /// Any holder of the role.
    Role(String),
    /// Any member of the queue.
    Queue(String),
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Requester => f.write_str("requester"),
            Route::Person(p) => write!(f, "person {p}"),
            Route::Role(r) => write!(f, "role {r}"),
            Route::Queue(q) => write!(f, "queue {q}"),
        }
    }
}

/// The three layers that speak for a triple (spec §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The package-wide `may`.
    Package,
    /// The agent's `may` (always present).
    Agent,
    /// The skill's `may`.
    Skill,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Package => "package",
            Layer::Agent => "agent",
            Layer::Skill => "skill",
        })
    }
}

/// The decision for one offered (agent, skill, tool).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The level, stated when it does not depend on the arguments; `None` when a condition decides
    /// (use [`Entry::level_for`]).
    pub level: Option<Level>,
    /// What each layer says, for the runtime to compute the level: package, agent, skill, in that order;
    /// a layer that says nothing is absent.
    pub rows: Vec<Row>,
    /// `true` when the tool writes the reserved entity `permits`: `never`, over everything.
    pub reserved: bool,
    /// Who decides proposals of this triple.
    pub route: Route,
    /// Why: every rule that produced a layer's level, with its place in the sources.
    pub because: Vec<Reason>,
    /// SHA-256 (hex) of what decides the triple, without file, line or raw text (spec §4).
    pub entry_digest: String,
}

impl Entry {
    /// The level for a call's arguments: per layer, the strictest named entry whose condition holds,
    /// else the class level, raised to the inherited floor; then the strictest layer; `never` when the
    /// tool writes the reserved entity. `Alone` if nothing speaks (never the case for a compiled entry:
    /// the agent layer always speaks).
    ///
    /// Errors: [`ConditionError`] when any condition of the entry cannot be evaluated on `args`; the
    /// caller decides `never`.
    pub fn level_for(&self, args: &serde_json::Map<String, serde_json::Value>) -> Result<Level, ConditionError> {
        if self.reserved {
            return Ok(Level::Never);
        }
        let mut level = Level::Alone;
        for row in &self.rows {
            if let Some(l) = row.level_for(args)? {
                level = level.max(l);
            }
        }
        Ok(level)
    }

    /// The level without arguments: [`Entry::level_for`] on no arguments, and `never` when a condition
    /// needs one (fail closed).
    pub fn level_from_rows(&self) -> Level {
        self.level_for(&serde_json::Map::new()).unwrap_or(Level::Never)
    }
}

/// What one layer says about one triple.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Which layer.
    pub layer: Layer,
    /// The list entries of the layer that name the tool, each with its condition if it has one.
    pub named: Vec<NamedRow>,
    /// The layer's class level over the tool's effect set: the fallback when no named entry applies.
    pub class: Option<Level>,
    /// The strictest level the layer names a tool this tool calls (a floor; conditions of the callee's
    /// entry do not matter: a caller inherits it unconditionally).
    pub inherited: Option<Level>,
}

impl Row {
    /// The layer's level for a call's arguments: the strictest named entry that applies, else the class
    /// level; at least the inherited floor. `None` when the layer says nothing.
    ///
    /// Errors: [`ConditionError`] when a condition cannot be evaluated.
    pub fn level_for(
        &self,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Option<Level>, ConditionError> {
        let mut named: Option<Level> = None;
        for n in &self.named {
            let applies = match &n.when {
                Some(c) => c.eval(args)?,
                None => true,
            };
            if applies {
                named = named.max(Some(n.level));
            }
        }
        Ok(Self::combine(named.or(self.class), self.inherited))
    }

    /// Every level the layer can give, whatever the arguments (conditions taken as independent).
    pub fn possible_levels(&self) -> BTreeSet<Option<Level>> {
        let unconditional = self.named.iter().filter(|n| n.when.is_none()).map(|n| n.level).max();
        let mut out = BTreeSet::new();
        // No conditional entry applies.
        out.insert(Self::combine(unconditional.or(self.class), self.inherited));
        // Some conditional entry applies (the strictest applying one decides).
        for n in self.named.iter().filter(|n| n.when.is_some()) {
            out.insert(Self::combine(Some(unconditional.map_or(n.level, |u| u.max(n.level))), self.inherited));
        }
        out
    }

    /// Whether any named entry has a condition.
    pub fn is_conditional(&self) -> bool {
        self.named.iter().any(|n| n.when.is_some())
    }

    fn combine(base: Option<Level>, floor: Option<Level>) -> Option<Level> {
        match (base, floor) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A list entry naming the tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedRow {
    /// The list's level.
    pub level: Level,
    /// The entry's condition; the entry applies only when it holds.
    pub when: Option<Condition>,
}

/// One reason behind a decision (spec §3 "Every decision carries its reasons").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// The layer the rule belongs to; `None` for the reserved-subject rule.
    pub layer: Option<Layer>,
    /// What kind of rule.
    pub kind: ReasonKind,
    /// The level the rule gives.
    pub level: Level,
    /// The rule's canonical form (`never [ScrapRepair]`, `changes: propose`,
    /// `default: changes -> propose (agent Estimator)`); formatting-independent.
    pub rule: String,
    /// For a class or default rule, the effect class; for an inherited or reserved rule, the called tool
    /// responsible; otherwise `None`.
    pub via: Option<String>,
    /// Where the rule is written; `None` for a synthetic default.
    pub at: Option<SourceRef>,
}

/// The kinds of reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    /// A list names the tool.
    Named,
    /// A class setting over the tool's effect set.
    Class,
    /// The agent layer's default for an unset class (or `reads`, always alone).
    Default,
    /// The tool calls a tool the layer names at a restrictive level.
    Inherited,
    /// The tool writes the reserved entity `permits`.
    Reserved,
    /// The budget's automatic allowance (spec §6): an amount above `alone_up_to` is at least `propose`.
    /// Added by the runtime to a decision; never written in a table.
    Budget,
}

/// Errors of [`Table::load`] and [`Table::load_path`].
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The table file could not be read.
    #[error("cannot read the table `{path}`: {source}")]
    Io {
        /// The path given.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The bytes are not a table: bad JSON, a missing or unknown field, a wrong type.
    #[error("the table is malformed: {0}")]
    Malformed(String),
    /// `header.format` is not [`FORMAT`].
    #[error("the table has format {found}, this runtime reads format {expected}")]
    UnknownFormat {
        /// The format in the header.
        found: u64,
        /// [`FORMAT`].
        expected: u32,
    },
    /// The content does not match `header.table_digest`: the table was edited after compiling.
    #[error(
        "the table's digest does not match its content (stated {stated}, computed {computed}): it was changed after compiling"
    )]
    DigestMismatch {
        /// The digest in the header.
        stated: String,
        /// The digest of the content.
        computed: String,
    },
}

impl Table {
    /// Loads and verifies a table from bytes: the format must be [`FORMAT`], every field known, and the
    /// content must hash to `header.table_digest`.
    ///
    /// Errors: [`LoadError::Malformed`], [`LoadError::UnknownFormat`], [`LoadError::DigestMismatch`].
    pub fn load(bytes: &[u8]) -> Result<Table, LoadError> {
        // The common case, a well-formed table: straight from the bytes to the struct, no `Value` tree.
        // Anything it refuses (or a table of another format) goes through the path below, which gives the
        // errors their exact wording (`from_slice`'s would add a line and column) and refuses a table of
        // another format as such rather than as malformed.
        // The UTF-8 check is made once for the whole text (word at a time while it is ASCII), so that
        // `from_str` need not validate each string again.
        let parsed = std::str::from_utf8(bytes).ok().and_then(|text| serde_json::from_str::<Table>(text).ok());
        if let Some(table) = parsed {
            if table.header.format == FORMAT {
                let computed = table.compute_digest();
                if computed != table.header.table_digest {
                    return Err(LoadError::DigestMismatch { stated: table.header.table_digest.clone(), computed });
                }
                return Ok(table);
            }
        }
        Table::load_slow(bytes)
    }

    /// [`Table::load`] through a `serde_json::Value`: looks at the format first.
    fn load_slow(bytes: &[u8]) -> Result<Table, LoadError> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| LoadError::Malformed(e.to_string()))?;
        let format = value.get("header").and_then(|h| h.get("format"));
        match format.and_then(serde_json::Value::as_u64) {
            Some(f) if f == u64::from(FORMAT) => {}
            Some(found) => return Err(LoadError::UnknownFormat { found, expected: FORMAT }),
            None => return Err(LoadError::Malformed("`header.format` is missing or not a number".into())),
        }
        let table: Table = serde_json::from_value(value).map_err(|e| LoadError::Malformed(e.to_string()))?;
        let computed = table.compute_digest();
        if computed != table.header.table_digest {
            return Err(LoadError::DigestMismatch { stated: table.header.table_digest.clone(), computed });
        }
        Ok(table)
    }

    /// Reads a table file and loads it with [`Table::load`].
    ///
    /// Errors: [`LoadError::Io`] and those of [`Table::load`].
    pub fn load_path(path: &Path) -> Result<Table, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io { path: path.display().to_string(), source })?;
        Table::load(&bytes)
    }

    /// SHA-256 (hex) of the canonical JSON of everything but the header.
    pub fn compute_digest(&self) -> String {
        // The canonical form is written straight from the struct (no `Value` tree), leaving out `header`.
        // INVARIANT: the table's types serialize with string map keys only; a fallback here would be a
        // well-formed wrong digest.
        let bytes = canonical::to_canonical_bytes(self, None, Some("header")).expect("a table serializes");
        sha256_hex(&bytes)
    }

    /// Sets `header.table_digest` to the digest of the current content.
    pub fn seal(&mut self) {
        self.header.table_digest = self.compute_digest();
    }

    /// The table as written by `permitc compile`: JSON with sorted keys, two-space indentation and a final
    /// newline. The same table always gives the same bytes.
    pub fn to_pretty_json(&self) -> String {
        // INVARIANT: the table's types serialize with string map keys only.
        let mut bytes = canonical::to_canonical_bytes(self, Some(2), None).expect("a table serializes");
        bytes.push(b'\n');
        // INVARIANT: the writer writes only `str`s and ASCII punctuation, so the bytes are UTF-8.
        String::from_utf8(bytes).expect("canonical JSON is UTF-8")
    }

    /// The entry for a triple, if it is offered.
    pub fn entry(&self, agent: &str, skill: &str, tool: &str) -> Option<&Entry> {
        self.entries.get(agent)?.get(skill)?.get(tool)
    }
}

impl Table {
    /// The spend of a call of `tool` with `arguments` (spec §6): `None` when the tool spends from no budget.
    /// The one reading of a spend, used by the runtime's ledger and [`Table::level_of`].
    ///
    /// Errors: [`SpendError`] — the call is then `never`.
    pub fn spend_of<'t>(
        &'t self,
        tool: &ToolInfo,
        arguments: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Option<SpendOf<'t>>, SpendError> {
        let Some(spends) = &tool.spends else { return Ok(None) };
        let (budget, info) = self.budgets.get_key_value(&spends.budget).ok_or(SpendError::UnknownBudget)?;
        let amount =
            arguments.get(&spends.param).and_then(serde_json::Value::as_i64).ok_or(SpendError::MissingAmount)?;
        let amount = u64::try_from(amount).map_err(|_| SpendError::NegativeAmount(amount))?;
        Ok(Some(SpendOf { budget, info, amount }))
    }
}

/// A hash map keyed by names, hashed with [`NameHasher`]. Only looked up, never iterated into output.
pub(crate) type NameMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<NameHasher>>;

/// FxHash (rustc's hasher): a multiply and a rotate per word, and a final mix. Names are short and come
/// from a verified table or the package being compiled, so a keyed hash buys nothing here. Used by
/// [`LevelIndex`] and the checker's name maps.
#[derive(Default)]
pub struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        // The last 1–7 bytes as one word, read as two overlapping halves (no copy, no loop). `str`'s `Hash`
        // writes a 0xff byte after the bytes, so names of different lengths still hash apart.
        let rest = chunks.remainder();
        let n = rest.len();
        let word = match rest {
            [] => return,
            [a, b, c, d, ..] => {
                let last = [rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]];
                u64::from(u32::from_le_bytes([*a, *b, *c, *d])) | u64::from(u32::from_le_bytes(last)) << 32
            }
            [a, ..] => u64::from(*a) | u64::from(rest[n / 2]) << 8 | u64::from(rest[n - 1]) << 16,
        };
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }

    fn write_u8(&mut self, b: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    /// FxHash's state with a final mix (MurmurHash3's `fmix64`). A hash map takes its bucket from the low
    /// bits, and FxHash's last multiply leaves those depending on few bytes of a name: `T12345` and
    /// `T12399` would share a bucket. The mix spreads every bit over all of them.
    fn finish(&self) -> u64 {
        let mut k = self.0;
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
}

/// SHA-256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// The canonical JSON of a serializable value: keys sorted, no whitespace (spec §4).
///
/// Errors: serde's, for a value that cannot be JSON (a map with non-string keys).
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let bytes = canonical::to_canonical_bytes(value, None, None)?;
    String::from_utf8(bytes).map_err(serde::ser::Error::custom)
}

/// SHA-256 (hex) of the canonical JSON of a serializable value (see [`canonical_json`]), without building
/// the string.
///
/// Errors: serde's, for a value that cannot be JSON (a map with non-string keys).
pub fn canonical_digest<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    Ok(sha256_hex(&canonical::to_canonical_bytes(value, None, None)?))
}

/// The canonical JSON of a JSON value: keys sorted (explicitly, whatever map type serde_json uses),
/// no whitespace.
pub fn canonical_value(value: &serde_json::Value) -> String {
    // INVARIANT: a `Value`'s map keys are strings, so it always serializes.
    canonical_json(value).expect("a JSON value serializes")
}

/// The reference the canonical writer is tested against (here and by the compiler's tests on real
/// tables): the `Value` tree, keys sorted explicitly. Slow; not for use.
#[doc(hidden)]
pub fn reference_canonical(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out, None, 0);
    out
}

/// [`reference_canonical`] with two-space indentation: the reference of [`Table::to_pretty_json`].
#[doc(hidden)]
pub fn reference_pretty(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out, Some(2), 0);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String, indent: Option<usize>, depth: usize) {
    use serde_json::Value;
    let newline = |out: &mut String, depth: usize| {
        if let Some(width) = indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', width * depth));
        }
    };
    match value {
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                out.push_str(&serde_json::Value::String(key.clone()).to_string());
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                if let Some(v) = map.get(key) {
                    write_canonical(v, out, indent, depth + 1);
                }
            }
            newline(out, depth);
            out.push('}');
        }
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_canonical(item, out, indent, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A condition on a tool's arguments, as the runtime evaluates it (spec §3 item 5). A small typed tree:
/// the compiler has checked every parameter and type against the tool, so evaluation needs no parser.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// Every part holds.
    All(Vec<Condition>),
    /// At least one part holds.
    Any(Vec<Condition>),
    /// The part does not hold.
    Not(Box<Condition>),
    /// `param OP value`.
    Compare {
        /// The parameter.
        param: String,
        /// The comparison.
        op: CompareOp,
        /// The value compared with.
        value: Literal,
    },
    /// `param in [..]`: the string argument is one of the values.
    In {
        /// The parameter (a string or an entity id).
        param: String,
        /// The values.
        values: Vec<String>,
    },
    /// `param matches "glob"`: `*` matches any run of characters, `?` any one character; case-sensitive.
    Matches {
        /// The parameter (a string or an entity id).
        param: String,
        /// The pattern.
        glob: String,
    },
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareOp {
    /// `<`
    #[serde(rename = "<")]
    Lt,
    /// `<=`
    #[serde(rename = "<=")]
    Le,
    /// `==`
    #[serde(rename = "==")]
    Eq,
    /// `!=`
    #[serde(rename = "!=")]
    Ne,
    /// `>=`
    #[serde(rename = ">=")]
    Ge,
    /// `>`
    #[serde(rename = ">")]
    Gt,
}

impl CompareOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Ge => ">=",
            CompareOp::Gt => ">",
        }
    }

    /// Parses an operator; `None` for anything else.
    pub fn from_str_op(op: &str) -> Option<CompareOp> {
        [CompareOp::Lt, CompareOp::Le, CompareOp::Eq, CompareOp::Ne, CompareOp::Ge, CompareOp::Gt]
            .into_iter()
            .find(|o| o.as_str() == op)
    }

    fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CompareOp::Lt => ordering == Less,
            CompareOp::Le => ordering != Greater,
            CompareOp::Eq => ordering == Equal,
            CompareOp::Ne => ordering != Equal,
            CompareOp::Ge => ordering != Less,
            CompareOp::Gt => ordering == Greater,
        }
    }
}

/// A value in a condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Literal {
    /// A whole number (for `int` and `money` parameters; money in minor units).
    Int(i64),
    /// A string (for `string` and entity parameters).
    String(String),
    /// `true` or `false`.
    Bool(bool),
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Int(n) => write!(f, "{n}"),
            Literal::String(s) => write!(f, "{}", serde_json::Value::String(s.clone())),
            Literal::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Why a condition cannot be evaluated. The decision is then `never` (fail closed, spec §3 item 5).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    /// The argument the condition reads is missing.
    #[error("the argument `{0}` is missing, so the condition cannot be evaluated")]
    Missing(String),
    /// The argument has the wrong type for the comparison.
    #[error("the argument `{param}` is not {expected}, so the condition cannot be evaluated")]
    Mistyped {
        /// The parameter.
        param: String,
        /// What was expected: "a whole number", "a string", "true or false".
        expected: &'static str,
    },
}

impl Condition {
    /// Evaluates the condition on a call's arguments (a JSON object's map). Numbers must be JSON
    /// integers, strings JSON strings, booleans JSON booleans.
    ///
    /// Errors: [`ConditionError`] when an argument the condition reads is missing or of the wrong type;
    /// the caller decides `never`.
    pub fn eval(&self, args: &serde_json::Map<String, serde_json::Value>) -> Result<bool, ConditionError> {
        match self {
            Condition::All(parts) => {
                // Evaluate every part, so a missing argument anywhere fails closed, not only when reached.
                let mut all = true;
                for p in parts {
                    all &= p.eval(args)?;
                }
                Ok(all)
            }
            Condition::Any(parts) => {
                let mut any = false;
                for p in parts {
                    any |= p.eval(args)?;
                }
                Ok(any)
            }
            Condition::Not(p) => Ok(!p.eval(args)?),
            Condition::Compare { param, op, value } => {
                let arg = args.get(param).ok_or_else(|| ConditionError::Missing(param.clone()))?;
                let ordering = match value {
                    Literal::Int(n) => {
                        let a = arg
                            .as_i64()
                            .ok_or(ConditionError::Mistyped { param: param.clone(), expected: "a whole number" })?;
                        a.cmp(n)
                    }
                    Literal::String(s) => {
                        let a = arg
                            .as_str()
                            .ok_or(ConditionError::Mistyped { param: param.clone(), expected: "a string" })?;
                        a.cmp(s.as_str())
                    }
                    Literal::Bool(b) => {
                        let a = arg
                            .as_bool()
                            .ok_or(ConditionError::Mistyped { param: param.clone(), expected: "true or false" })?;
                        a.cmp(b)
                    }
                };
                Ok(op.holds(ordering))
            }
            Condition::In { param, values } => {
                let arg = args.get(param).ok_or_else(|| ConditionError::Missing(param.clone()))?;
                let a = arg.as_str().ok_or(ConditionError::Mistyped { param: param.clone(), expected: "a string" })?;
                Ok(values.iter().any(|v| v == a))
            }
            Condition::Matches { param, glob } => {
                let arg = args.get(param).ok_or_else(|| ConditionError::Missing(param.clone()))?;
                let a = arg.as_str().ok_or(ConditionError::Mistyped { param: param.clone(), expected: "a string" })?;
                Ok(glob_matches(glob, a))
            }
        }
    }

    fn fmt_prec(&self, f: &mut fmt::Formatter<'_>, outer: u8) -> fmt::Result {
        // Precedence: or 1, and 2, not 3, comparison 4.
        let (prec, parts, word) = match self {
            Condition::Any(p) => (1, p, " or "),
            Condition::All(p) => (2, p, " and "),
            Condition::Not(inner) => {
                f.write_str("not ")?;
                return inner.fmt_prec(f, 3);
            }
            Condition::Compare { param, op, value } => return write!(f, "{param} {} {value}", op.as_str()),
            Condition::In { param, values } => {
                let vs: Vec<String> = values.iter().map(|v| Literal::String(v.clone()).to_string()).collect();
                return write!(f, "{param} in [{}]", vs.join(", "));
            }
            Condition::Matches { param, glob } => {
                return write!(f, "{param} matches {}", Literal::String(glob.clone()));
            }
        };
        if prec < outer {
            f.write_str("(")?;
        }
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                f.write_str(word)?;
            }
            p.fmt_prec(f, prec + 1)?;
        }
        if prec < outer {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// The canonical text of a condition, as written in sources (`amount <= 10000 and not to matches "*@x"`).
impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_prec(f, 0)
    }
}

/// Whether `text` matches `glob`: `*` is any run of characters (also none), `?` exactly one character,
/// everything else itself. Iterative, linear in practice (one backtrack point).
pub fn glob_matches(glob: &str, text: &str) -> bool {
    let g: Vec<char> = glob.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut gi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && (g[gi] == '?' || (g[gi] != '*' && g[gi] == t[ti])) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some((gi, ti));
            gi += 1;
        } else if let Some((sg, st)) = star {
            gi = sg + 1;
            ti = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    while gi < g.len() && g[gi] == '*' {
        gi += 1;
    }
    gi == g.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        match v {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        }
    }

    fn cmp(param: &str, op: CompareOp, value: Literal) -> Condition {
        Condition::Compare { param: param.into(), op, value }
    }

    #[test]
    fn each_comparison_operator_on_numbers() {
        let a = args(json!({ "amount": 100 }));
        let cases = [
            (CompareOp::Lt, 101, true),
            (CompareOp::Lt, 100, false),
            (CompareOp::Le, 100, true),
            (CompareOp::Le, 99, false),
            (CompareOp::Eq, 100, true),
            (CompareOp::Eq, 101, false),
            (CompareOp::Ne, 101, true),
            (CompareOp::Ne, 100, false),
            (CompareOp::Ge, 100, true),
            (CompareOp::Ge, 101, false),
            (CompareOp::Gt, 99, true),
            (CompareOp::Gt, 100, false),
        ];
        for (op, n, want) in cases {
            assert_eq!(cmp("amount", op, Literal::Int(n)).eval(&a), Ok(want), "100 {} {n}", op.as_str());
        }
    }

    #[test]
    fn strings_booleans_in_matches_and_connectives() {
        let a = args(json!({ "to": "ceo@rival.example", "urgent": true }));
        assert_eq!(cmp("to", CompareOp::Eq, Literal::String("ceo@rival.example".into())).eval(&a), Ok(true));
        assert_eq!(cmp("to", CompareOp::Ne, Literal::String("x".into())).eval(&a), Ok(true));
        assert_eq!(cmp("urgent", CompareOp::Eq, Literal::Bool(true)).eval(&a), Ok(true));
        assert_eq!(cmp("urgent", CompareOp::Ne, Literal::Bool(true)).eval(&a), Ok(false));
        let inn = Condition::In { param: "to".into(), values: vec!["a".into(), "ceo@rival.example".into()] };
        assert_eq!(inn.eval(&a), Ok(true));
        let rival = Condition::Matches { param: "to".into(), glob: "*@rival.example".into() };
        assert_eq!(rival.eval(&a), Ok(true));
        assert_eq!(Condition::Not(Box::new(rival.clone())).eval(&a), Ok(false));
        assert_eq!(Condition::All(vec![rival.clone(), inn.clone()]).eval(&a), Ok(true));
        let nobody = Condition::Matches { param: "to".into(), glob: "?@*".into() };
        assert_eq!(Condition::Any(vec![nobody.clone(), rival]).eval(&a), Ok(true));
        assert_eq!(nobody.eval(&a), Ok(false));
    }

    #[test]
    fn missing_and_mistyped_arguments_cannot_be_evaluated() {
        let c = cmp("amount", CompareOp::Le, Literal::Int(100));
        assert_eq!(c.eval(&args(json!({}))), Err(ConditionError::Missing("amount".into())));
        assert!(matches!(c.eval(&args(json!({ "amount": "50" }))), Err(ConditionError::Mistyped { .. })));
        assert!(matches!(c.eval(&args(json!({ "amount": 50.5 }))), Err(ConditionError::Mistyped { .. })));
        // An `or` whose first part holds still fails closed on a missing argument in another part.
        let either =
            Condition::Any(vec![cmp("a", CompareOp::Eq, Literal::Int(1)), cmp("b", CompareOp::Eq, Literal::Int(1))]);
        assert_eq!(either.eval(&args(json!({ "a": 1 }))), Err(ConditionError::Missing("b".into())));
    }

    #[test]
    fn globs() {
        assert!(glob_matches("*", ""));
        assert!(glob_matches("a*c", "abbbc"));
        assert!(glob_matches("a?c", "abc"));
        assert!(!glob_matches("a?c", "ac"));
        assert!(glob_matches("*@x.example", "me@x.example"));
        assert!(!glob_matches("*@x.example", "me@x.example.evil"));
        assert!(glob_matches("**a**", "bab"));
        assert!(glob_matches("é*", "été"));
    }

    #[test]
    fn a_conditional_entry_decides_per_call_and_fails_closed() {
        let entry = Entry {
            level: None,
            rows: vec![Row {
                layer: Layer::Agent,
                named: vec![NamedRow {
                    level: Level::Alone,
                    when: Some(cmp("amount", CompareOp::Lt, Literal::Int(100))),
                }],
                class: Some(Level::Propose),
                inherited: None,
            }],
            reserved: false,
            route: Route::Requester,
            because: Vec::new(),
            entry_digest: String::new(),
        };
        assert_eq!(entry.level_for(&args(json!({ "amount": 50 }))), Ok(Level::Alone));
        assert_eq!(entry.level_for(&args(json!({ "amount": 500 }))), Ok(Level::Propose));
        assert_eq!(entry.level_from_rows(), Level::Never);
        assert_eq!(entry.rows[0].possible_levels().len(), 2);
    }

    #[test]
    fn conditions_print_canonically() {
        let c = Condition::Any(vec![
            Condition::All(vec![cmp("a", CompareOp::Ge, Literal::Int(1)), cmp("a", CompareOp::Le, Literal::Int(5))]),
            Condition::Not(Box::new(Condition::In { param: "t".into(), values: vec!["x\"y".into()] })),
        ]);
        assert_eq!(c.to_string(), r#"a >= 1 and a <= 5 or not t in ["x\"y"]"#);
        let nested = Condition::All(vec![Condition::Any(vec![
            cmp("a", CompareOp::Eq, Literal::Int(1)),
            cmp("b", CompareOp::Eq, Literal::Bool(false)),
        ])]);
        assert_eq!(nested.to_string(), "(a == 1 or b == false)");
    }

    /// The canonical writer gives exactly what `to_value` + the key-sorting writer gave, compact and
    /// pretty, on odd values (the compiler's tests hold it to the reference on every real policy and a
    /// generated package).
    #[test]
    fn canonical_writer_matches_the_value_reference() {
        let odd = json!({ "z": [1, -2, 3.5, {}, [], null, true], "a\"b": { "y": "\u{1}\n\u{e9}", "x": [{ "b": 1, "a": 2 }] }, "": {} });
        assert_eq!(canonical_value(&odd), reference_canonical(&odd));
        assert_eq!(
            String::from_utf8(canonical::to_canonical_bytes(&odd, Some(2), None).expect("pretty")).expect("utf-8"),
            reference_pretty(&odd)
        );
        let condition = Condition::Any(vec![
            Condition::Not(Box::new(cmp("a", CompareOp::Ge, Literal::Int(-1)))),
            Condition::In { param: "t".into(), values: vec![] },
        ]);
        let holders = vec![Holder::Role("r".into()), Holder::Person("p".into())];
        let effects: BTreeMap<EffectClass, u8> = EffectClass::ALL.into_iter().zip(0..).collect();
        for value in [serde_json::to_value(&condition), serde_json::to_value(&holders), serde_json::to_value(&effects)]
        {
            let value = value.expect("value");
            assert_eq!(canonical_value(&value), reference_canonical(&value));
        }
        assert_eq!(
            canonical_json(&condition).expect("c"),
            reference_canonical(&serde_json::to_value(&condition).expect("v"))
        );
        assert_eq!(
            canonical_json(&holders).expect("h"),
            reference_canonical(&serde_json::to_value(&holders).expect("v"))
        );
        assert_eq!(
            canonical_json(&effects).expect("e"),
            reference_canonical(&serde_json::to_value(&effects).expect("v"))
        );
        let pretty_condition = canonical::to_canonical_bytes(&condition, Some(2), None).expect("pretty");
        assert_eq!(
            String::from_utf8(pretty_condition).expect("utf-8"),
            reference_pretty(&serde_json::to_value(&condition).expect("v"))
        );
    }
}
