//! The table's data types (spec §4): everything the runtime needs, and nothing it does not. Every struct
//! refuses unknown fields; maps keyed by name are `BTreeMap`s.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::*;

/// The only table format this runtime reads (`header.format`).
pub const FORMAT: u32 = 1;

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
    pub authority: AuthorityStatements,
    /// Every budget, by name (spec §6); absent from the JSON when the package declares none. Budget
    /// figures are in no entry's digest: the runtime checks them against their current values at grant
    /// and at execution.
    #[serde(default)]
    pub budgets: BTreeMap<String, BudgetInfo>,
    /// Every mode, by name (spec §3c); absent from the JSON when the package declares none, so tables
    /// without modes (and their digests) are unchanged.
    #[serde(default)]
    pub modes: BTreeMap<String, ModeInfo>,
    /// One entry per offered triple: `entries[agent][skill][tool]`.
    pub entries: BTreeMap<String, BTreeMap<String, BTreeMap<String, Entry>>>,
    /// What each delegating link adds to a delegated call (spec §3b): `links[agent][skill][tool]` for every
    /// agent, each of its skills with a `delegates` list, and every tool a descendant over the transitive
    /// closure of those lists can be offered. Absent from the JSON when no skill delegates, so tables
    /// without delegation (and their digests) are unchanged.
    #[serde(default)]
    pub links: BTreeMap<String, BTreeMap<String, BTreeMap<String, LinkEntry>>>,
}

impl Table {
    /// How many decisions the table holds: one entry per offered (agent, skill, tool).
    pub fn decision_count(&self) -> usize {
        self.entries.values().flat_map(|skills| skills.values()).map(|tools| tools.len()).sum()
    }
}

impl Serialize for Table {
    /// The members in key order: the canonical JSON (spec §4) sorts them anyway, and a table that arrives
    /// sorted is written without a copy. `budgets` and `modes` are left out when empty, as in the JSON of
    /// tables without them.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut t = serializer.serialize_struct("Table", 14)?;
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
        if self.links.is_empty() {
            t.skip_field("links")?;
        } else {
            t.serialize_field("links", &self.links)?;
        }
        if self.modes.is_empty() {
            t.skip_field("modes")?;
        } else {
            t.serialize_field("modes", &self.modes)?;
        }
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
    /// `pinned "sha256:HEX"` (an `extern tool`): the digest of the tool's definition where it lives (an MCP
    /// server's whole tool object, canonical JSON). A host that sees another definition under the tool's name
    /// must not call it. Part of `definition_digest`. Absent from the JSON for an unpinned tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
    /// SHA-256 (hex) of the tool's canonical definition and of everything it calls (spec §2).
    pub definition_digest: String,
}

impl ToolInfo {
    /// The tool's `shell` parameter (spec §3a), or `Ok(None)` when it has none. A tool has at most one: the
    /// compiler refuses a second.
    ///
    /// Errors: the name of a second `shell` parameter, in a table the compiler did not write; a call of such
    /// a tool is `never` ([`crate::Refused::SecondShellParameter`]).
    #[inline]
    pub fn shell_param(&self) -> Result<Option<&str>, &str> {
        let mut found = None;
        for p in &self.params {
            if matches!(p.ty, ParamType::Shell) {
                if found.is_some() {
                    return Err(&p.name);
                }
                found = Some(p.name.as_str());
            }
        }
        Ok(found)
    }
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
    /// `per_task`: the most one task (one operation key, spec §5a) may hold reserved and spent together,
    /// in the minor unit; absent from the JSON when the budget sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_task: Option<u64>,
}

/// A mode (spec §3c): a named layer a host chooses for a task. Its rows are in the entries
/// ([`Entry::modes`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeInfo {
    /// What the mode is for ("Look, change nothing.").
    pub description: Option<String>,
    /// The doc comment, lines joined by `\n`.
    pub doc: Option<String>,
    /// `unattended`: nobody is at the keyboard, so a proposal that would wait for the requester is `never`
    /// (pipeline step 7). Absent from the JSON when `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unattended: bool,
}

/// What one mode says about one offered triple ([`Entry::modes`]): present only where the mode's `may`
/// says something about the tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeEntry {
    /// The triple's level in the mode, stated when it does not depend on the arguments (the strictest of
    /// the entry's level and the mode's row); `None` when a condition decides.
    pub level: Option<Level>,
    /// The mode's row for the tool (layer `mode`).
    pub row: Row,
    /// Why the mode's row gives its level, with places in the sources.
    pub because: Vec<Reason>,
    /// The **call digest** of a call in this mode (spec §3b, §3c): SHA-256 (hex) of the entry digest, the
    /// mode's name and its row. It stands where `entry_digest` stands in fingerprints and rules.
    pub call_digest: String,
}

/// One link of a delegation chain (spec §3b): a delegating agent and the skill it was working in when it
/// handed the work on. A call's chain is written nearest first, root last.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainLink {
    /// The delegating agent.
    pub agent: String,
    /// The skill it was working in (one with a `delegates` entry for the next link down).
    pub skill: String,
}

impl ChainLink {
    /// The link `agent.skill`.
    pub fn new(agent: impl Into<String>, skill: impl Into<String>) -> ChainLink {
        ChainLink { agent: agent.into(), skill: skill.into() }
    }
}

impl ChainLink {
    /// Reads `Agent.Skill` (as `--via` takes it); `None` unless it is exactly two non-empty names joined by
    /// one `.`.
    pub fn parse(text: &str) -> Option<ChainLink> {
        let (agent, skill) = text.split_once('.')?;
        (!agent.is_empty() && !skill.is_empty() && !skill.contains('.')).then(|| ChainLink::new(agent, skill))
    }
}

/// Every level a stack of rows can give (the strictest over one choice of level per row; `Alone` when no
/// row speaks), or just `stated` when the level does not depend on the arguments: a link's possible levels
/// (spec §3b), for `test` expectations without arguments and `explain`.
pub fn possible_levels_of(stated: Option<Level>, rows: &[Row]) -> BTreeSet<Level> {
    if let Some(level) = stated {
        return BTreeSet::from([level]);
    }
    let mut out = BTreeSet::from([Level::Alone]);
    for row in rows {
        let here = row.possible_levels();
        out = out.iter().flat_map(|a| here.iter().map(move |h| h.map_or(*a, |h| h.max(*a)))).collect();
    }
    out
}

impl fmt::Display for ChainLink {
    /// `Coder.FixBug`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.agent, self.skill)
    }
}

/// What one delegating link — an agent working in one of its skills, which hands the work on — adds to a
/// delegated call of one tool (spec §3b): its two layers for the acting tool, computed as §3 step 2 (the
/// agent's `may` with the agent-layer defaults, then the delegating skill's `may` if it has one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkEntry {
    /// The strictest level the link's two layers give, stated when it does not depend on the arguments;
    /// `None` when a condition decides.
    pub level: Option<Level>,
    /// The link's rows: its agent layer (always), then its skill layer when the skill has a `may`.
    pub rows: Vec<Row>,
    /// Why the rows give their levels, with places in the sources.
    pub because: Vec<Reason>,
    /// The link's own route for the tool (its skill's, else its agent's), when it has one that is not
    /// `requester`: a delegated proposal goes to the route nearest the root (spec §3b "Route").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// SHA-256 (hex) of the link's agent and skill names, its rows, its route and the tool's definition
    /// digest: part of a delegated call's call digest, so an edit to the link's rules makes a waiting
    /// delegated proposal stale.
    pub link_digest: String,
}

impl LinkEntry {
    /// The link's level for a call's arguments: the strictest of its rows (spec §3b); `Alone` when neither
    /// says anything (never the case for a compiled link: the agent layer always speaks).
    ///
    /// Errors: [`ConditionError`] when a condition cannot be evaluated; the caller decides `never`.
    pub fn level_on(&self, args: Arguments<'_>) -> Result<Level, ConditionError> {
        if let Some(l) = self.level {
            return Ok(l);
        }
        let mut level: Option<Level> = None;
        for row in &self.rows {
            level = level.max(row.level_on(args)?);
        }
        Ok(level.unwrap_or(Level::Alone))
    }
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
    /// `name?: type`: the argument may be missing (spec §2). Absent from the JSON when `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
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
    /// The operation's canonical text (`write Repair.price`), the callee's name for a call, or for an
    /// extern tool's claim what the author claimed (`claimed by the author: reads + sends`).
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
    /// The agents, each in one of its skills, that may be handed work from this skill (spec §3b), as
    /// `Agent.Skill`, in written order. Absent from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegates: Vec<String>,
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

/// The package-wide authority statements (spec §3, §5).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityStatements {
    /// May make standing rules for others or everybody, and revoke any proposal or rule.
    pub supervises: Vec<Holder>,
    /// May decide any proposal, routed or not.
    pub decides_proposals: Vec<Holder>,
    /// May make standing rules for themselves.
    pub widens_autonomy: Vec<Holder>,
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
    /// What each mode that says something about the tool adds, by mode name (spec §3c); absent from the
    /// JSON when no mode does.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub modes: BTreeMap<String, ModeEntry>,
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
        self.level_on(Arguments::new(args))
    }

    /// [`Entry::level_for`] on [`Arguments`]: for one part of a `shell` argument, the level of that part as
    /// if it were the whole call (spec §3a).
    ///
    /// Errors: as [`Entry::level_for`].
    pub fn level_on(&self, args: Arguments<'_>) -> Result<Level, ConditionError> {
        if self.reserved {
            return Ok(Level::Never);
        }
        let mut level = Level::Alone;
        for row in &self.rows {
            if let Some(l) = row.level_on(args)? {
                level = level.max(l);
            }
        }
        Ok(level)
    }

    /// The reasons that decide a call with these arguments (spec §3 "Every decision carries its reasons"),
    /// in [`Entry::because`] order. An entry whose level does not depend on the arguments (its `level` is
    /// stated) keeps every reason. Otherwise, per layer: the named entries whose condition holds (those at the
    /// strictest level among them), or the layer's class level when none holds; the inherited floor when it
    /// sets the layer's level; and the reserved-subject rule. So `permitc decide` says which entry's
    /// condition held. `tool` is the tool's name, as the reasons' rules spell it.
    ///
    /// Errors: [`ConditionError`] when a condition cannot be evaluated (the call is then `never`).
    pub fn deciding_reasons(&self, tool: &str, args: Arguments<'_>) -> Result<Vec<&Reason>, ConditionError> {
        if self.level.is_some() {
            return Ok(self.because.iter().collect());
        }
        // Per layer, what decides it: the rules of the named entries that hold, or the class; the floor.
        let mut deciding: Vec<(Layer, Vec<String>, bool, Option<Level>)> = Vec::new();
        for row in &self.rows {
            let mut held: Vec<&NamedRow> = Vec::new();
            for n in &row.named {
                if n.when.as_ref().map_or(Ok(true), |c| c.eval_on(args))? {
                    held.push(n);
                }
            }
            let strictest = held.iter().map(|n| n.level).max();
            let base = strictest.or(row.class);
            let level = Row::combine(base, row.inherited);
            let rules = held
                .iter()
                .filter(|n| Some(n.level) == strictest)
                .map(|n| match &n.when {
                    Some(c) => format!("{} [{tool} when {c}]", n.level),
                    None => format!("{} [{tool}]", n.level),
                })
                .collect();
            let class_decides = strictest.is_none() && base == level;
            let floor = row.inherited.filter(|i| Some(*i) == level);
            let rules = if base == level { rules } else { Vec::new() };
            deciding.push((row.layer, rules, class_decides, floor));
        }
        Ok(self
            .because
            .iter()
            .filter(|r| {
                let Some(layer) = r.layer else { return true };
                deciding.iter().filter(|(l, ..)| *l == layer).any(|(_, rules, class_decides, floor)| match r.kind {
                    ReasonKind::Named => rules.contains(&r.rule),
                    ReasonKind::Class | ReasonKind::Default => *class_decides,
                    ReasonKind::Inherited => *floor == Some(r.level),
                    ReasonKind::Reserved | ReasonKind::Budget => true,
                })
            })
            .collect())
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
        self.level_on(Arguments::new(args))
    }

    /// [`Row::level_for`] on [`Arguments`] (a `shell` argument read as one of its parts, spec §3a).
    ///
    /// Errors: [`ConditionError`] when a condition cannot be evaluated.
    pub fn level_on(&self, args: Arguments<'_>) -> Result<Option<Level>, ConditionError> {
        let mut named: Option<Level> = None;
        for n in &self.named {
            let applies = match &n.when {
                Some(c) => c.eval_on(args)?,
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
