//! The one evaluator: the level of one call against a table (spec §3 "The level of (agent, skill, tool)",
//! §5 "Decide", §6 the allowance floor, §7 `test` expectations).
//!
//! Everything that asks "what level does this call get?" asks it here: the runtime's decision (which adds
//! reasons, the decider and standing rules on top), [`LevelIndex`] (the same answer through one hash
//! lookup), `permitc decide`, and the compiler's `test` blocks. The steps, in order, each with its typed
//! refusal:
//!
//! 1. offered? ([`Table::offered`], [`NotOffered`]);
//! 2. the person the work is for is in the table ([`Refused::UnknownPerson`]);
//! 3. the arguments fit the tool's parameters ([`check_arguments`], [`ArgumentError`]);
//! 4. a `shell` argument is judgeable (spec §3a, [`crate::shell::split`]; [`Refused::NotJudgeable`]);
//! 5. the level over the rows, conditions included ([`Refused::Condition`]); the reserved subject. For a tool
//!    with a `shell` parameter, each part of the line is judged as if it were the whole call (the rows
//!    evaluated with the argument replaced by the part's normalized text) and the call's level is the
//!    strictest of the parts' levels;
//! 6. the budget's allowance floor ([`Refused::Budget`] when the spend cannot be read).
//!
//! A tool without a `shell` parameter pays nothing for step 4 and the per-part judgement: [`LevelIndex`]
//! knows which tools have one, and [`Table::level_of`] looks through the tool's few parameters.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use super::{
    Arguments, BudgetInfo, ChainLink, ConditionError, Entry, Level, LinkEntry, ModeEntry, NameMap, ParamType, Route,
    Table, ToolInfo,
};
use crate::shell;

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

/// Why a triple is not offered (spec §3 step 1). `Display` gives the spec's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotOffered {
    /// The table has no such agent: "unknown agent".
    UnknownAgent,
    /// The table has no such skill: "unknown skill".
    UnknownSkill,
    /// The skill is not one of the agent's: "not one of the agent's skills".
    NotAgentsSkill,
    /// The table has no such tool: "unknown tool".
    UnknownTool,
    /// The tool is not in the skill's `tools`: "not one of the skill's tools".
    NotSkillsTool,
}

impl NotOffered {
    /// The words of spec §3 step 1.
    pub fn as_str(self) -> &'static str {
        match self {
            NotOffered::UnknownAgent => "unknown agent",
            NotOffered::UnknownSkill => "unknown skill",
            NotOffered::NotAgentsSkill => "not one of the agent's skills",
            NotOffered::UnknownTool => "unknown tool",
            NotOffered::NotSkillsTool => "not one of the skill's tools",
        }
    }
}

impl serde::Serialize for NotOffered {
    /// As its words (`"unknown skill"`).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for NotOffered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call's arguments do not fit the tool's parameters (spec §5 "Decide": missing, extra, mistyped →
/// refused; §2: a money argument is never negative). `Display` names the tool and the parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgumentError {
    /// The arguments are not a JSON object.
    NotAnObject {
        /// The tool.
        tool: String,
    },
    /// A parameter has no argument.
    Missing {
        /// The tool.
        tool: String,
        /// The parameter.
        param: String,
    },
    /// An argument names no parameter of the tool.
    Extra {
        /// The tool.
        tool: String,
        /// The argument's name.
        name: String,
    },
    /// An argument is not of its parameter's type.
    Mistyped {
        /// The tool.
        tool: String,
        /// The parameter.
        param: String,
        /// The parameter's type.
        expected: ParamType,
        /// What was given, in words ("a string", "a number with a fraction").
        found: &'static str,
    },
    /// A `money` argument is negative (spec §2: money is never negative, budget or not).
    NegativeMoney {
        /// The tool.
        tool: String,
        /// The parameter.
        param: String,
        /// The amount given.
        amount: i64,
    },
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgumentError::NotAnObject { tool } => write!(f, "the arguments of `{tool}` are not a JSON object"),
            ArgumentError::Missing { tool, param } => write!(f, "argument `{param}` of `{tool}` is missing"),
            ArgumentError::Extra { tool, name } => write!(f, "`{tool}` has no parameter `{name}`"),
            ArgumentError::Mistyped { tool, param, expected, found } => {
                write!(f, "argument `{param}` of `{tool}` must be {}, found {found}", type_words(expected))
            }
            ArgumentError::NegativeMoney { tool, param, amount } => {
                write!(f, "the amount `{param}` of `{tool}` is {amount}: an amount is never negative")
            }
        }
    }
}

/// Why a call's level is `never` outright. `Display` gives the words the runtime puts in a decision's
/// `refusal`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The triple is not offered (spec §3 step 1).
    NotOffered(NotOffered),
    /// The person the work is for is not in the table.
    UnknownPerson(Box<str>),
    /// The call names a mode the table does not declare (spec §3c: an unknown mode → `never`).
    UnknownMode(Box<str>),
    /// A link of the call's delegation chain is not a declared `delegates` entry (spec §3b).
    NotDelegation(Box<NotDelegation>),
    /// The arguments do not fit the tool's parameters.
    Arguments(Box<ArgumentError>),
    /// A `shell` argument is not judgeable (spec §3a): the call is `never` whatever the conditions say.
    NotJudgeable(Box<NotJudgeableShell>),
    /// The tool has a second `shell` parameter (spec §2: at most one per tool), in a table the compiler did
    /// not write: no line of it is judged.
    SecondShellParameter(Box<SecondShell>),
    /// A condition of the entry cannot be evaluated on the arguments (spec §3 item 5: fail closed).
    Condition(Box<ConditionError>),
    /// The tool's spend cannot be read: it spends from a budget the table does not declare (spec §6).
    Budget(Box<BudgetRefusal>),
}

/// A link of a delegation chain that is not declared ([`Refused::NotDelegation`]): `parent` (an
/// `Agent.Skill`) does not delegate to `child`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotDelegation {
    /// The delegating link, `Agent.Skill`.
    pub parent: String,
    /// What it was to delegate to, `Agent.Skill`.
    pub child: String,
}

/// A `shell` argument that is not judgeable ([`Refused::NotJudgeable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotJudgeableShell {
    /// The tool.
    pub tool: String,
    /// Its `shell` parameter.
    pub param: String,
    /// The first offending character, its column, and why.
    pub error: shell::NotJudgeable,
}

/// A second `shell` parameter in a table the compiler did not write ([`Refused::SecondShellParameter`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondShell {
    /// The tool.
    pub tool: String,
    /// The second `shell` parameter.
    pub param: String,
}

/// Why a tool's spend cannot be read ([`Refused::Budget`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetRefusal {
    /// The tool.
    pub tool: String,
    /// The budget it names.
    pub budget: String,
    /// The tool's `money` parameter that holds the amount.
    pub param: String,
    /// Why.
    pub error: SpendError,
}

impl Refused {
    /// The refusal for a spend that cannot be read ([`Table::spend_of`]'s error).
    pub fn budget(tool_name: &str, tool: &ToolInfo, error: SpendError) -> Refused {
        let (budget, param) =
            tool.spends.as_ref().map_or((String::new(), String::new()), |s| (s.budget.clone(), s.param.clone()));
        Refused::Budget(Box::new(BudgetRefusal { tool: tool_name.to_string(), budget, param, error }))
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::NotOffered(why) => f.write_str(why.as_str()),
            Refused::UnknownPerson(person) => write!(f, "unknown person `{person}`"),
            Refused::UnknownMode(mode) => write!(f, "unknown mode `{mode}`"),
            Refused::NotDelegation(d) => {
                write!(f, "not a declared delegation: `{}` does not delegate to `{}`", d.parent, d.child)
            }
            Refused::Arguments(e) => e.fmt(f),
            Refused::NotJudgeable(n) => write!(f, "the command line `{}` of `{}`: {}", n.param, n.tool, n.error),
            Refused::SecondShellParameter(s) => {
                write!(f, "`{}` has a second `shell` parameter `{}`: a tool has at most one", s.tool, s.param)
            }
            Refused::Condition(e) => e.fmt(f),
            Refused::Budget(b) => match b.error {
                SpendError::UnknownBudget => {
                    write!(f, "`{}` spends from `{}`, which the table does not declare", b.tool, b.budget)
                }
                SpendError::MissingAmount => {
                    write!(f, "the amount `{}` of `{}` is missing or not a whole number", b.param, b.tool)
                }
                SpendError::NegativeAmount(a) => {
                    write!(f, "the amount `{}` of `{}` is {a}: an amount is never negative", b.param, b.tool)
                }
            },
        }
    }
}

/// One call to decide, borrowed: the triple, its arguments (a JSON object) and the person the work is for.
#[derive(Clone, Copy, Debug)]
pub struct CallRef<'c> {
    /// The agent.
    pub agent: &'c str,
    /// The skill it works in.
    pub skill: &'c str,
    /// The tool.
    pub tool: &'c str,
    /// The arguments: a JSON object with one member per parameter of the tool.
    pub arguments: &'c Value,
    /// The person the work is for; `None` when it is for nobody.
    pub requester: Option<&'c str>,
    /// The mode the call is made in (spec §3c); `None` for no mode.
    pub mode: Option<&'c str>,
    /// The delegation chain (spec §3b): each delegating agent with the skill it was working in, nearest
    /// first, root last; empty for a direct call.
    pub via: &'c [ChainLink],
}

/// The level of one call, borrowed from the table ([`Table::level_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelOf<'t> {
    /// The level after the allowance floor (pipeline steps 1–4 of spec §3c); standing rules come after.
    pub level: Level,
    /// Who decides a proposal of the triple (the runtime resolves it to persons).
    pub route: &'t Route,
    /// The triple's entry: its reasons and digests.
    pub entry: &'t Entry,
    /// The tool.
    pub tool: &'t ToolInfo,
    /// `true` when the call spends more than its budget's automatic allowance (spec §6): an `alone` level
    /// is then `propose` (see `floored`), and no standing rule makes it alone. [`Table::spend_of`] gives the
    /// spend itself.
    pub over_allowance: bool,
    /// `true` when the allowance floor raised an `alone` level to `propose` (spec §6).
    pub floored: bool,
    /// What the call's mode says about the triple, when it names a mode that says something (spec §3c).
    pub mode: Option<&'t ModeEntry>,
}

impl<'t> LevelOf<'t> {
    /// The digest that stands for the call in fingerprints and rules: the mode's call digest for a call in
    /// a mode that says something about the triple, else the entry's `entry_digest` (spec §3b, §3c).
    pub fn call_digest(&self) -> &'t str {
        self.mode.map_or(self.entry.entry_digest.as_str(), |m| m.call_digest.as_str())
    }

    /// The level before the allowance floor: what the entry's rows give these arguments.
    pub fn rows_level(&self) -> Level {
        if self.floored { Level::Alone } else { self.level }
    }
}

impl SpendOf<'_> {
    /// The reason the allowance floor adds to a decision, in words: "budget `Supplies`: 900 cents is over
    /// the automatic allowance of 500 cents".
    pub fn allowance_words(&self) -> String {
        format!(
            "budget `{}`: {} {unit} is over the automatic allowance of {} {unit}",
            self.budget,
            self.amount,
            self.info.alone_up_to,
            unit = self.info.unit
        )
    }
}

impl Table {
    /// The entry for a triple, or why it is not offered (spec §3 step 1). The one place these reasons are
    /// decided, in this order.
    ///
    /// Errors: [`NotOffered`], when the triple is not offered (the answer is then `never`).
    pub fn offered(&self, agent: &str, skill: &str, tool: &str) -> Result<&Entry, NotOffered> {
        self.offered_with_tool(agent, skill, tool).map(|(entry, _)| entry)
    }

    /// [`Table::offered`], with the tool's information.
    fn offered_with_tool(&self, agent: &str, skill: &str, tool: &str) -> Result<(&Entry, &ToolInfo), NotOffered> {
        let a = self.agents.get(agent).ok_or(NotOffered::UnknownAgent)?;
        let s = self.skills.get(skill).ok_or(NotOffered::UnknownSkill)?;
        if !a.skills.iter().any(|x| x == skill) {
            return Err(NotOffered::NotAgentsSkill);
        }
        let t = self.tools.get(tool).ok_or(NotOffered::UnknownTool)?;
        if !s.tools.iter().any(|x| x == tool) {
            return Err(NotOffered::NotSkillsTool);
        }
        let entry = self.entry(agent, skill, tool).ok_or(NotOffered::NotSkillsTool)?;
        Ok((entry, t))
    }

    /// The level of one call against the table alone, with no standing rules (spec §3, §5 "Decide", §6):
    /// the one evaluator. No allocation on the way to an answer for an offered, well-formed call.
    ///
    /// Errors: [`Refused`], when the level is `never` because the call is refused outright.
    pub fn level_of(&self, call: CallRef<'_>) -> Result<LevelOf<'_>, Refused> {
        let (entry, tool) = self.offered_with_tool(call.agent, call.skill, call.tool).map_err(Refused::NotOffered)?;
        let links = |child: (&str, &str), link: &ChainLink, tool: &str| link_entry(self, child, link, tool);
        level_of_offered(self, entry, tool, tool.shell_param(), call, |args| arguments_fit(tool, args), links)
    }

    /// Every level the triple can get over every well-typed argument set, the allowance floor included
    /// (spec §7: a `test` expectation written without arguments). One level means it does not depend on
    /// the arguments. Conditions are taken as independent, so the set may hold a level no argument set
    /// reaches (never one fewer). A tool with a `shell` parameter can always be `never`: a line that is not
    /// judgeable is a string, so a well-typed argument (spec §3a); and the strictest of several parts' levels
    /// is one of the levels a single part can get, so the parts add no other level.
    ///
    /// Errors: [`NotOffered`].
    pub fn possible_levels(&self, agent: &str, skill: &str, tool: &str) -> Result<BTreeSet<Level>, NotOffered> {
        self.possible_levels_in(agent, skill, tool, None)
    }

    /// Who a proposal of `tool` by `agent` in `skill` along `via` (nearest first; empty for a direct call) is
    /// routed to, as [`Table::level_of`] finds it: the entry's route, or the route of the link nearest the
    /// root that has one (spec §3b). `None` when the triple is not offered or a link is not a declared
    /// delegation.
    pub fn route_via(&self, agent: &str, skill: &str, tool: &str, via: &[ChainLink]) -> Option<&Route> {
        let mut route = &self.entry(agent, skill, tool)?.route;
        let mut child = (agent, skill);
        for link in via {
            let rows = link_entry(self, child, link, tool)?;
            if let Some(r) = &rows.route {
                route = r;
            }
            child = (link.agent.as_str(), link.skill.as_str());
        }
        Some(route)
    }

    /// [`Table::possible_levels_in`] for a delegated call (spec §3b): every link's rows are more layers; a
    /// chain with a link that is not a declared delegation gives only `never`. `via` is nearest first; an
    /// empty chain is a direct call.
    ///
    /// Errors: [`NotOffered`].
    pub fn possible_levels_via(
        &self,
        agent: &str,
        skill: &str,
        tool: &str,
        mode: Option<&str>,
        via: &[ChainLink],
    ) -> Result<BTreeSet<Level>, NotOffered> {
        let mut acc = self.possible_levels_in(agent, skill, tool, mode)?;
        let mut child = (agent, skill);
        for link in via {
            let Some(rows) = link_entry(self, child, link, tool) else {
                return Ok(BTreeSet::from([Level::Never]));
            };
            let options = crate::possible_levels_of(rows.level, &rows.rows);
            acc = acc.iter().flat_map(|a| options.iter().map(move |o| (*a).max(*o))).collect();
            child = (link.agent.as_str(), link.skill.as_str());
        }
        Ok(acc)
    }

    /// [`Table::possible_levels`] for a call in `mode` (spec §3c): the mode's row is one more layer. A mode
    /// the table does not declare gives only `never`.
    ///
    /// Errors: [`NotOffered`].
    pub fn possible_levels_in(
        &self,
        agent: &str,
        skill: &str,
        tool: &str,
        mode: Option<&str>,
    ) -> Result<BTreeSet<Level>, NotOffered> {
        let (entry, info) = self.offered_with_tool(agent, skill, tool)?;
        let mode_row = match mode {
            None => None,
            Some(m) if !self.modes.contains_key(m) => return Ok(BTreeSet::from([Level::Never])),
            Some(m) => entry.modes.get(m).map(|me| &me.row),
        };
        if entry.reserved || info.reserved.is_some() {
            return Ok(BTreeSet::from([Level::Never]));
        }
        let stated = match (entry.level, mode_row) {
            (Some(level), None) => Some(level),
            (Some(level), Some(row)) if row.named.iter().all(|n| n.when.is_none()) => {
                Some(row.level_for(&Map::new()).ok().flatten().map_or(level, |m| m.max(level)))
            }
            _ => None,
        };
        let mut levels = match stated {
            Some(level) => BTreeSet::from([level]),
            None => {
                // The strictest over the layers of one choice of level per layer.
                let mut acc = BTreeSet::from([Level::Alone]);
                for row in entry.rows.iter().chain(mode_row) {
                    let options = row.possible_levels();
                    let mut next = BTreeSet::new();
                    for a in &acc {
                        for o in &options {
                            next.insert(o.map_or(*a, |o| o.max(*a)));
                        }
                    }
                    acc = next;
                }
                acc
            }
        };
        // The floor: an `alone` spend over the allowance is `propose`, and amounts are unbounded above.
        if levels.contains(&Level::Alone) && info.spends.is_some() {
            levels.insert(Level::Propose);
        }
        if info.shell_param() != Ok(None) {
            levels.insert(Level::Never);
        }
        Ok(levels)
    }
}

/// The rest of [`Table::level_of`] once the triple is offered: the person, the arguments, the `shell`
/// argument's parts, the level, the floor. `shell` is [`ToolInfo::shell_param`]; `fit` is [`arguments_fit`]
/// (or a faster equivalent); on `false` the error comes from [`check_arguments`].
fn level_of_offered<'t>(
    table: &'t Table,
    entry: &'t Entry,
    tool: &'t ToolInfo,
    shell: Result<Option<&str>, &str>,
    call: CallRef<'_>,
    fit: impl Fn(&Map<String, Value>) -> bool,
    links: impl Fn((&str, &str), &ChainLink, &str) -> Option<&'t LinkEntry>,
) -> Result<LevelOf<'t>, Refused> {
    match level_or_fault(table, entry, tool, shell, call, fit, links) {
        Ok(of) => Ok(of),
        Err(fault) => Err(refusal(fault, table, entry, tool, shell, call)),
    }
}

/// What went wrong, small and `Copy`: the hot path returns it, and [`refusal`] (off the hot path) gives it
/// its words.
#[derive(Clone, Copy)]
enum Fault {
    Mode,
    Chain,
    Person,
    Arguments,
    NotJudgeable,
    SecondShell,
    Condition,
    Budget(SpendError),
}

/// [`level_of_offered`] without building a refusal: what an agent asks before every call stays small.
#[inline]
fn level_or_fault<'t>(
    table: &'t Table,
    entry: &'t Entry,
    tool: &'t ToolInfo,
    shell: Result<Option<&str>, &str>,
    call: CallRef<'_>,
    fit: impl Fn(&Map<String, Value>) -> bool,
    links: impl Fn((&str, &str), &ChainLink, &str) -> Option<&'t LinkEntry>,
) -> Result<LevelOf<'t>, Fault> {
    let mode = match call.mode {
        None => None,
        Some(m) if !table.modes.contains_key(m) => return Err(Fault::Mode),
        Some(m) => entry.modes.get(m),
    };
    if let Some(person) = call.requester {
        if !table.persons.contains_key(person) {
            return Err(Fault::Person);
        }
    }
    let Some(args) = call.arguments.as_object().filter(|args| fit(args)) else { return Err(Fault::Arguments) };
    let level = match shell {
        Ok(None) => {
            if entry.reserved || tool.reserved.is_some() {
                Level::Never
            } else if let Some(m) = mode {
                match m.level {
                    Some(level) => level,
                    None => moded_level(entry, m, Arguments::new(args)).map_err(|_| Fault::Condition)?,
                }
            } else if let Some(level) = entry.level {
                level
            } else {
                entry.level_for(args).map_err(|_| Fault::Condition)?
            }
        }
        Ok(Some(param)) => shell_level(entry, mode, tool, param, args)?,
        Err(_) => return Err(Fault::SecondShell),
    };
    // A delegated call: every link's two layers (spec §3b), and the route nearest the root that sends the
    // tool to someone other than the requester.
    let mut level = level;
    let mut route = &entry.route;
    // One pass, nearest first: the last link with a route of its own is the one nearest the root.
    let mut child = (call.agent, call.skill);
    for link in call.via {
        let rows = links(child, link, call.tool).ok_or(Fault::Chain)?;
        if level != Level::Never {
            level = level.max(link_level(rows, shell.ok().flatten(), args).map_err(|_| Fault::Condition)?);
        }
        if let Some(r) = &rows.route {
            route = r;
        }
        child = (link.agent.as_str(), link.skill.as_str());
    }
    let over_allowance = table.spend_of(tool, args).map_err(Fault::Budget)?.is_some_and(|s| s.over_allowance());
    let floored = level == Level::Alone && over_allowance;
    Ok(LevelOf {
        level: if floored { Level::Propose } else { level },
        route,
        entry,
        tool,
        over_allowance,
        floored,
        mode,
    })
}

/// The rows a delegating link adds for `tool` when it really delegates to `child` (spec §3b): the link's
/// agent has the link's skill, the skill's `delegates` names `child`, and the table holds the link's rows
/// for the tool; `None` otherwise (the call is then `never`: "not a declared delegation").
fn link_entry<'t>(table: &'t Table, child: (&str, &str), link: &ChainLink, tool: &str) -> Option<&'t LinkEntry> {
    let agent = table.agents.get(link.agent.as_str())?;
    if !agent.skills.contains(&link.skill) {
        return None;
    }
    let skill = table.skills.get(link.skill.as_str())?;
    if !skill.delegates.iter().any(|d| d.split_once('.') == Some(child)) {
        return None;
    }
    table.links.get(link.agent.as_str())?.get(link.skill.as_str())?.get(tool)
}

/// A link's level for a call: stated, or its rows on the arguments — for a tool with a `shell` parameter,
/// the strictest over the line's parts, each judged as if it were the whole call (spec §3a).
fn link_level(link: &LinkEntry, shell: Option<&str>, args: &Map<String, Value>) -> Result<Level, ConditionError> {
    if let Some(level) = link.level {
        return Ok(level);
    }
    let Some(param) = shell else { return link.level_on(Arguments::new(args)) };
    let line = args.get(param).and_then(Value::as_str).unwrap_or_default();
    // INVARIANT: the line was judged judgeable before; stay closed if it is not.
    let parts = shell::part_texts(line).map_err(|_| ConditionError::Missing(param.to_string()))?;
    let mut level = Level::Alone;
    for part in parts.iter() {
        level = level.max(link.level_on(Arguments::new(args).with_part(param, part))?);
    }
    Ok(level)
}

impl Table {
    /// The rows each link of a delegation chain adds for `tool` (spec §3b), nearest first, when every link
    /// is a declared delegation (the link's agent has the link's skill, whose `delegates` names the link
    /// below); `None` when one is not. An empty chain gives an empty list.
    pub fn chain_links(&self, agent: &str, skill: &str, tool: &str, via: &[ChainLink]) -> Option<Vec<&LinkEntry>> {
        let mut child = (agent, skill);
        let mut out = Vec::with_capacity(via.len());
        for link in via {
            out.push(link_entry(self, child, link, tool)?);
            child = (link.agent.as_str(), link.skill.as_str());
        }
        Some(out)
    }
}

/// The **call digest** of a delegated call (spec §3b "Digest"): SHA-256 (hex) of the canonical JSON of
/// {`base`: the entry's digest (or the mode's call digest), `links`: [{agent, skill, link_digest}, …] nearest
/// first}. It stands where `entry_digest` stands in fingerprints and rules, so an edit to any link's rules
/// makes a waiting delegated proposal stale, and a rule made for one chain never matches another. A direct
/// call's digest is `base` itself.
pub fn chain_digest(base: &str, via: &[ChainLink], links: &[&LinkEntry]) -> String {
    let links: Vec<Value> = via
        .iter()
        .zip(links)
        .map(|(l, e)| serde_json::json!({ "agent": l.agent, "skill": l.skill, "link_digest": e.link_digest }))
        .collect();
    crate::sha256_hex(crate::canonical_value(&serde_json::json!({ "base": base, "links": links })).as_bytes())
}

/// The first undeclared link of a chain, in words ([`Refused::NotDelegation`]).
fn undeclared(table: &Table, call: CallRef<'_>) -> NotDelegation {
    let mut child = (call.agent, call.skill);
    for link in call.via {
        if link_entry(table, child, link, call.tool).is_none() {
            return NotDelegation { parent: link.to_string(), child: format!("{}.{}", child.0, child.1) };
        }
        child = (link.agent.as_str(), link.skill.as_str());
    }
    // INVARIANT: called only for a chain with an undeclared link; name the whole chain if none is found.
    NotDelegation { parent: String::new(), child: format!("{}.{}", call.agent, call.skill) }
}

/// The level of a call in a mode on `args`: the strictest of the entry's rows and the mode's row (spec
/// §3c: the mode is one more layer).
fn moded_level(entry: &Entry, mode: &ModeEntry, args: Arguments<'_>) -> Result<Level, ConditionError> {
    let base = entry.level_on(args)?;
    Ok(mode.row.level_on(args)?.map_or(base, |m| m.max(base)))
}

/// The refusal of a fault, with its words: the arguments checked again to say which one is wrong, the
/// condition evaluated again to say which argument it could not read.
#[cold]
#[inline(never)]
fn refusal(
    fault: Fault,
    table: &Table,
    entry: &Entry,
    tool: &ToolInfo,
    shell: Result<Option<&str>, &str>,
    call: CallRef<'_>,
) -> Refused {
    match fault {
        Fault::NotJudgeable => {
            let param = shell.ok().flatten().unwrap_or_default();
            let line = call.arguments.get(param).and_then(Value::as_str).unwrap_or_default();
            match shell::split(line) {
                Err(error) => Refused::NotJudgeable(Box::new(NotJudgeableShell {
                    tool: call.tool.to_string(),
                    param: param.to_string(),
                    error,
                })),
                // INVARIANT: the same line fails again; stay closed if it ever does not.
                Ok(_) => Refused::Arguments(Box::new(ArgumentError::NotAnObject { tool: call.tool.to_string() })),
            }
        }
        Fault::SecondShell => Refused::SecondShellParameter(Box::new(SecondShell {
            tool: call.tool.to_string(),
            param: shell.err().unwrap_or_default().to_string(),
        })),
        Fault::Mode => Refused::UnknownMode(call.mode.unwrap_or_default().into()),
        Fault::Chain => Refused::NotDelegation(Box::new(undeclared(table, call))),
        Fault::Person => Refused::UnknownPerson(call.requester.unwrap_or_default().into()),
        Fault::Arguments => Refused::Arguments(Box::new(match check_arguments(call.tool, tool, call.arguments) {
            Err(e) => e,
            // INVARIANT: `fit` says no exactly when `check_arguments` errs; stay closed if they ever disagree.
            Ok(()) => ArgumentError::NotAnObject { tool: call.tool.to_string() },
        })),
        Fault::Condition => {
            let empty = Map::new();
            let args = call.arguments.as_object().unwrap_or(&empty);
            let mode = call.mode.and_then(|m| entry.modes.get(m));
            let level = match mode {
                Some(m) => moded_level(entry, m, Arguments::new(args)),
                None => entry.level_for(args),
            };
            match level {
                Err(e) => Refused::Condition(Box::new(e)),
                // INVARIANT: the same rows on the same arguments fail again; stay closed if they ever do not.
                Ok(_) => Refused::Condition(Box::new(ConditionError::Missing(String::new()))),
            }
        }
        Fault::Budget(error) => Refused::budget(call.tool, tool, error),
    }
}

/// The level of a call of a tool whose `shell` parameter is `param` (spec §3a): the line is read with
/// [`shell::part_texts`] (the parts of [`shell::split`], in one allocation), and each part is judged as if
/// it were the whole call — the entry's rows evaluated with the argument replaced by the part's normalized
/// text; the call's level is the strictest of the parts'.
/// Every part is evaluated, so a condition that cannot be evaluated fails the call closed wherever it is.
///
/// Errors: `Fault::NotJudgeable` (the line is not judgeable: `never`, whatever the conditions say) and
/// `Fault::Condition`.
fn shell_level(
    entry: &Entry,
    mode: Option<&ModeEntry>,
    tool: &ToolInfo,
    param: &str,
    args: &Map<String, Value>,
) -> Result<Level, Fault> {
    // INVARIANT: `fit` accepted the arguments, so the `shell` argument is a string; stay closed otherwise.
    let line = args.get(param).and_then(Value::as_str).unwrap_or_default();
    let parts = shell::part_texts(line).map_err(|_| Fault::NotJudgeable)?;
    if entry.reserved || tool.reserved.is_some() {
        return Ok(Level::Never);
    }
    if let Some(level) = mode.map_or(entry.level, |m| m.level) {
        return Ok(level);
    }
    let mut level = Level::Alone;
    for part in parts.iter() {
        let part_args = Arguments::new(args).with_part(param, part);
        let part_level = match mode {
            Some(m) => moded_level(entry, m, part_args),
            None => entry.level_on(part_args),
        };
        level = level.max(part_level.map_err(|_| Fault::Condition)?);
    }
    Ok(level)
}

/// Checks a call's arguments against the tool's parameters (spec §5 "Decide"): a JSON object with exactly
/// the declared names (an optional parameter's may be missing), each of its type (`string`, `shell` and
/// entities: a string; `int`: an integer; `money`: a non-negative integer; `bool`: a boolean; `number`: any
/// JSON number; `json`: any value). Whether a `shell` argument's line is judgeable is the next step
/// of [`Table::level_of`], not a matter of type: a line that is not judgeable is a well-typed `never`.
///
/// Errors: the first [`ArgumentError`], parameters in declared order, then the first extra name.
pub fn check_arguments(tool_name: &str, tool: &ToolInfo, arguments: &Value) -> Result<(), ArgumentError> {
    let Value::Object(map) = arguments else {
        return Err(ArgumentError::NotAnObject { tool: tool_name.to_string() });
    };
    for param in &tool.params {
        let Some(value) = map.get(&param.name) else {
            if param.optional {
                continue;
            }
            return Err(ArgumentError::Missing { tool: tool_name.to_string(), param: param.name.clone() });
        };
        if !value_fits(&param.ty, value) {
            if let (ParamType::Money, Some(amount)) = (&param.ty, value.as_i64()) {
                return Err(ArgumentError::NegativeMoney {
                    tool: tool_name.to_string(),
                    param: param.name.clone(),
                    amount,
                });
            }
            return Err(ArgumentError::Mistyped {
                tool: tool_name.to_string(),
                param: param.name.clone(),
                expected: param.ty.clone(),
                found: value_words(value),
            });
        }
    }
    if let Some(extra) = map.keys().find(|k| !tool.params.iter().any(|p| &p.name == *k)) {
        return Err(ArgumentError::Extra { tool: tool_name.to_string(), name: extra.clone() });
    }
    Ok(())
}

/// Whether a call's arguments fit the tool's parameters: [`check_arguments`] as a yes or no, without
/// building an error.
pub fn arguments_fit(tool: &ToolInfo, args: &Map<String, Value>) -> bool {
    let typed = tool.params.iter().all(|param| match args.get(&param.name) {
        Some(value) => value_fits(&param.ty, value),
        None => param.optional,
    });
    typed && args.keys().all(|k| tool.params.iter().any(|p| p.name == *k))
}

/// Whether an argument's value is of its parameter's type: the one reading of "which value fits which
/// type" for call arguments.
pub fn value_fits(ty: &ParamType, value: &Value) -> bool {
    match ty {
        ParamType::String | ParamType::Shell | ParamType::Entity(_) => value.is_string(),
        ParamType::Int => value.is_i64(),
        // Non-negative and within `i64`, as conditions and budgets read it.
        ParamType::Money => value.as_i64().is_some_and(|n| n >= 0),
        ParamType::Bool => value.is_boolean(),
        ParamType::Number => value.is_number(),
        ParamType::Json => true,
    }
}

/// A parameter type in words, for refusals: "a string", "an integer", "a non-negative integer amount in
/// minor units".
pub fn type_words(ty: &ParamType) -> String {
    match ty {
        ParamType::String => "a string".into(),
        ParamType::Int => "an integer".into(),
        ParamType::Bool => "`true` or `false`".into(),
        ParamType::Money => "a non-negative integer amount in minor units (at most 2^63 - 1)".into(),
        ParamType::Shell => "a shell command line (a string)".into(),
        ParamType::Number => "a number".into(),
        ParamType::Json => "any JSON value".into(),
        ParamType::Entity(e) => format!("the id of a `{e}` (a string)"),
    }
}

/// A JSON value's kind in words, for refusals.
fn value_words(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number with a fraction",
        Value::Number(n) if n.is_i64() => "an integer",
        // A `u64` above `i64::MAX`: no parameter type reads it.
        Value::Number(_) => "an integer out of range",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The offered triples of a table in one hash map, for answering [`Table::level_of`] at the rate an agent
/// asks it. The table's `BTreeMap`s cost a string comparison per step of a search (about 30 for a tool
/// among 10,000); here a triple is one hash lookup. Build it once per loaded table.
#[derive(Debug)]
pub struct LevelIndex<'t> {
    table: &'t Table,
    /// `(agent, skill, tool)` → the triple's entry and tool, for the triples [`Table::offered`] accepts.
    offered: NameMap<Triple<'t>, Offered<'t>>,
    /// `(link agent, link skill, child agent, child skill, tool)` → the link's rows, for every declared
    /// delegation (spec §3b): one hash lookup per link of a chain checks the link and finds its rows.
    links: NameMap<LinkKey<'t>, &'t LinkEntry>,
}

/// A key of [`LevelIndex::links`]: a delegating link, the pair it delegates to, and the tool.
#[derive(Clone, Copy, Debug)]
struct LinkKey<'a>([&'a str; 5]);

impl std::hash::Hash for LinkKey<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for name in self.0 {
            state.write(name.as_bytes());
            state.write_u8(0xff);
        }
    }
}

impl PartialEq for LinkKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| same_name(a, b))
    }
}

impl Eq for LinkKey<'_> {}

/// An (agent, skill, tool) key of a [`LevelIndex`].
#[derive(Clone, Copy, Debug)]
struct Triple<'a>(&'a str, &'a str, &'a str);

impl std::hash::Hash for Triple<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for name in [self.0, self.1, self.2] {
            state.write(name.as_bytes());
            state.write_u8(0xff);
        }
    }
}

impl PartialEq for Triple<'_> {
    fn eq(&self, other: &Self) -> bool {
        same_name(self.2, other.2) && same_name(self.1, other.1) && same_name(self.0, other.0)
    }
}

impl Eq for Triple<'_> {}

/// `a == b`, without a call to `memcmp` for names of up to 8 bytes (most agent, skill, tool and parameter
/// names): two overlapping word loads each.
fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let half = |x: &[u8], at: usize| x.get(at..at + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => a == b,
    }
}

/// One offered triple in a [`LevelIndex`].
#[derive(Debug)]
struct Offered<'t> {
    entry: &'t Entry,
    tool: &'t ToolInfo,
    /// [`ToolInfo::shell_param`], once: a tool without a `shell` parameter is never split.
    shell: Result<Option<&'t str>, &'t str>,
    /// The tool's parameters sorted by name, when the names are all different (always so in a table the
    /// compiler wrote: `check` refuses a repeated parameter); `None` otherwise.
    sorted_params: Option<Vec<(&'t str, &'t ParamType)>>,
}

impl Offered<'_> {
    /// [`arguments_fit`], the same answer ([`fit_sorted`]).
    fn fit(&self, args: &Map<String, Value>) -> bool {
        fit_sorted(self.sorted_params.as_deref(), self.tool, args)
    }
}

/// [`arguments_fit`], the same answer, given the tool's parameters sorted by name when their names are all
/// different. Arguments usually come with exactly the parameters' names, and a JSON object's names iterate
/// sorted: then one pass over both, comparing names and types pairwise, says yes. Anything else (another
/// order, a missing or extra name, a wrong type) goes to [`arguments_fit`], which decides.
fn fit_sorted(sorted: Option<&[(&str, &ParamType)]>, tool: &ToolInfo, args: &Map<String, Value>) -> bool {
    if let Some(params) = sorted {
        let pairwise = || {
            args.iter().zip(params).all(|((name, value), (param, ty))| same_name(name, param) && value_fits(ty, value))
        };
        if args.len() == params.len() && pairwise() {
            return true;
        }
    }
    arguments_fit(tool, args)
}

impl<'t> LevelIndex<'t> {
    /// Indexes every triple of `table` that it offers.
    pub fn new(table: &'t Table) -> LevelIndex<'t> {
        let mut offered = NameMap::default();
        for (agent, skills) in &table.entries {
            for (skill, tools) in skills {
                for tool in tools.keys() {
                    if let Ok((entry, info)) = table.offered_with_tool(agent, skill, tool) {
                        let mut params: Vec<(&str, &ParamType)> =
                            info.params.iter().map(|p| (p.name.as_str(), &p.ty)).collect();
                        params.sort_unstable_by_key(|&(name, _)| name);
                        let distinct = params.windows(2).all(|w| w[0].0 != w[1].0);
                        let sorted_params = distinct.then_some(params);
                        let shell = info.shell_param();
                        offered.insert(Triple(agent, skill, tool), Offered { entry, tool: info, shell, sorted_params });
                    }
                }
            }
        }
        // Every declared delegation: exactly what `link_entry` accepts, keyed for one lookup.
        let mut links = NameMap::default();
        for (agent, skills) in &table.links {
            for (skill, tools) in skills {
                let declared = table.agents.get(agent).is_some_and(|a| a.skills.contains(skill));
                let Some(info) = table.skills.get(skill).filter(|_| declared) else { continue };
                for child in &info.delegates {
                    let Some((child_agent, child_skill)) = child.split_once('.') else { continue };
                    for (tool, entry) in tools {
                        links.insert(LinkKey([agent, skill, child_agent, child_skill, tool]), entry);
                    }
                }
            }
        }
        LevelIndex { table, offered, links }
    }

    /// [`Table::level_of`], the same answer; a triple that is not offered is answered by the table (which
    /// says why).
    ///
    /// Errors: [`Refused`], as [`Table::level_of`].
    pub fn level_of(&self, call: CallRef<'_>) -> Result<LevelOf<'t>, Refused> {
        let Some(offered) = self.offered.get(&Triple(call.agent, call.skill, call.tool)) else {
            return self.table.level_of(call);
        };
        let links = |child: (&str, &str), link: &ChainLink, tool: &str| {
            self.links.get(&LinkKey([&link.agent, &link.skill, child.0, child.1, tool])).copied()
        };
        level_of_offered(self.table, offered.entry, offered.tool, offered.shell, call, |args| offered.fit(args), links)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::ParamInfo;

    /// `same_name` is `==` on every pair of a set of names of length 0 to 12 that differ in one byte at
    /// each position, or in length only.
    #[test]
    fn same_name_is_string_equality() {
        let mut names = vec![String::new()];
        for n in 1..=12 {
            let base: String = (0..n).map(|i| char::from(b'a' + i)).collect();
            names.push(base.clone());
            for at in 0..usize::from(n) {
                let mut bytes = base.clone().into_bytes();
                bytes[at] = b'Z';
                names.push(String::from_utf8(bytes).unwrap_or_default());
            }
        }
        names.push("Ωmega".into());
        for a in &names {
            for b in &names {
                assert_eq!(same_name(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    /// Triples that differ anywhere are different keys (no false match through the hash or `eq`), and a
    /// name moved from one field to the next is another triple.
    #[test]
    fn triples_compare_by_all_three_names() {
        use std::hash::BuildHasher;
        let hasher = rustc_hash::FxBuildHasher;
        let t = Triple("A0", "A0S0", "T12");
        assert_eq!(t, Triple("A0", "A0S0", "T12"));
        assert_eq!(hasher.hash_one(t), hasher.hash_one(Triple("A0", "A0S0", "T12")));
        for other in [
            Triple("A0", "A0S0", "T13"),
            Triple("A1", "A0S0", "T12"),
            Triple("A0", "A0S1", "T12"),
            Triple("A0A0S0", "", "T12"),
        ] {
            assert_ne!(t, other);
        }
        assert_ne!(hasher.hash_one(Triple("ab", "c", "")), hasher.hash_one(Triple("a", "bc", "")));
    }

    /// `name?: type` may be missing but not mistyped; `number` takes any JSON number and nothing else; `json`
    /// takes any value (spec §2).
    #[test]
    fn optional_number_and_json_parameters() {
        let tool = ToolInfo {
            label: "t".into(),
            doc: None,
            external: true,
            params: vec![
                ParamInfo { name: "q".into(), ty: ParamType::String, optional: false },
                ParamInfo { name: "limit".into(), ty: ParamType::Number, optional: true },
                ParamInfo { name: "filter".into(), ty: ParamType::Json, optional: true },
            ],
            effects: BTreeMap::new(),
            claim: None,
            reserved: None,
            version: None,
            subject: None,
            spends: None,
            pinned: None,
            definition_digest: String::new(),
        };
        let ok = |v: Value| check_arguments("T", &tool, &v);
        assert_eq!(ok(json!({"q": "x"})), Ok(()));
        assert_eq!(ok(json!({"q": "x", "limit": 2.5, "filter": {"a": [1, null]}})), Ok(()));
        assert_eq!(ok(json!({"q": "x", "limit": -3})), Ok(()));
        assert!(matches!(ok(json!({"limit": 1})), Err(ArgumentError::Missing { ref param, .. }) if param == "q"));
        assert!(
            matches!(ok(json!({"q": "x", "limit": "2"})), Err(ArgumentError::Mistyped { ref param, .. }) if param == "limit")
        );
        assert!(matches!(ok(json!({"q": "x", "other": 1})), Err(ArgumentError::Extra { .. })));
        let map = |v: Value| v.as_object().cloned().unwrap_or_default();
        assert!(arguments_fit(&tool, &map(json!({"q": "x"}))));
        assert!(!arguments_fit(&tool, &map(json!({"q": "x", "limit": null}))));
        assert_eq!(serde_json::to_value(ParamType::Number).ok(), Some(json!("number")));
        assert_eq!(serde_json::to_value(ParamType::Json).ok(), Some(json!("json")));
        // `optional` is left out of the JSON when false, so tables without optional parameters are unchanged.
        assert_eq!(serde_json::to_value(&tool.params[0]).ok(), Some(json!({"name": "q", "type": "string"})));
        assert_eq!(
            serde_json::to_value(&tool.params[1]).ok(),
            Some(json!({"name": "limit", "type": "number", "optional": true}))
        );
    }

    /// The index's argument check (`fit_sorted`) gives `arguments_fit`'s answer on every set of up to three
    /// arguments drawn from the parameters' names and near misses, with values of each type, for distinct
    /// and for repeated parameter names.
    #[test]
    fn indexed_argument_check_agrees_with_arguments_fit() {
        let param = |name: &str, ty: ParamType| ParamInfo { name: name.into(), ty, optional: false };
        let tool = |params: Vec<ParamInfo>| ToolInfo {
            label: "t".into(),
            doc: None,
            external: false,
            params,
            effects: BTreeMap::new(),
            claim: None,
            reserved: None,
            version: None,
            subject: None,
            spends: None,
            pinned: None,
            definition_digest: String::new(),
        };
        let tools = [
            tool(vec![]),
            tool(vec![param("to", ParamType::String), param("amount", ParamType::Money)]),
            tool(vec![
                param("b", ParamType::Bool),
                param("a", ParamType::Int),
                param("c", ParamType::Entity("E".into())),
            ]),
            tool(vec![param("a", ParamType::Int), param("a", ParamType::Int)]),
        ];
        let values = [json!(1), json!("x"), json!(true), json!(null), json!(-2)];
        for info in &tools {
            let mut params: Vec<(&str, &ParamType)> = info.params.iter().map(|p| (p.name.as_str(), &p.ty)).collect();
            params.sort_unstable_by_key(|&(name, _)| name);
            let distinct = params.windows(2).all(|w| w[0].0 != w[1].0);
            let sorted = distinct.then_some(params);
            let mut names: Vec<&str> = info.params.iter().map(|p| p.name.as_str()).collect();
            names.extend(["amounx", "zz", "a"]);
            names.sort_unstable();
            names.dedup();
            let mut checked = 0;
            for mask in 0u32..(1 << names.len()) {
                let chosen: Vec<&str> =
                    names.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, n)| *n).collect();
                if chosen.len() > 3 {
                    continue;
                }
                for pick in 0..values.len().pow(u32::try_from(chosen.len()).unwrap_or(0)) {
                    let mut map = serde_json::Map::new();
                    let mut p = pick;
                    for name in &chosen {
                        map.insert((*name).to_string(), values[p % values.len()].clone());
                        p /= values.len();
                    }
                    assert_eq!(
                        fit_sorted(sorted.as_deref(), info, &map),
                        arguments_fit(info, &map),
                        "{:?} {map:?}",
                        info.params
                    );
                    checked += 1;
                }
            }
            assert!(checked > 20, "{checked}");
        }
    }
}
