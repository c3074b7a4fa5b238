//! Deciding one call against the table (spec §3 "The level of (agent, skill, tool)", §5 "Decide").

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::records::{Decider, Scope, StandingRule, WorkFor};
use crate::table::{
    Arguments, CallRef, ChainLink, Entry, Holder, Level, Reason, ReasonKind, Route, Table, ToolInfo, canonical_value,
    chain_digest, sha256_hex, shell,
};

/// One call an agent wants to make: the triple, the arguments and the person the work is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The agent's name.
    pub agent: String,
    /// The skill it works in.
    pub skill: String,
    /// The tool it wants to call.
    pub tool: String,
    /// The arguments: a JSON object with one member per parameter of the tool.
    pub arguments: Value,
    /// The person the work is for (a person of the table); `None` when it is for nobody, and then the
    /// agent's sponsor stands in.
    pub requester: Option<String>,
    /// The host's operation key: the task the call belongs to (spec §5a "Tasks"). [`crate::Runtime::call`]
    /// and [`crate::Runtime::propose`] take it from the request; a call that names one is checked against
    /// the task's binding (and binds it, when it runs alone).
    pub operation_key: Option<String>,
    /// The mode the call is made in (spec §3c); `None` for no mode. The task's first call binds its mode
    /// (spec §5a): a later call under the key that names another mode, or none, is `never`.
    pub mode: Option<String>,
    /// The delegation chain (spec §3b): each delegating agent with the skill it was working in, nearest
    /// first, root last ([`Call::delegated_by`]); empty for a direct call. A link that is not a declared
    /// `delegates` entry makes the call `never`; every link's two layers are in its level.
    pub via: Vec<ChainLink>,
}

impl Call {
    /// A call with no arguments (`{}`), for nobody.
    pub fn new(agent: impl Into<String>, skill: impl Into<String>, tool: impl Into<String>) -> Call {
        Call {
            agent: agent.into(),
            skill: skill.into(),
            tool: tool.into(),
            arguments: Value::Object(Map::new()),
            requester: None,
            operation_key: None,
            mode: None,
            via: Vec::new(),
        }
    }

    /// The same call, delegated by `agent` working in `skill` (spec §3b): call it once per link, nearest
    /// first (the agent that handed the work to this one), root last.
    pub fn delegated_by(mut self, agent: impl Into<String>, skill: impl Into<String>) -> Call {
        self.via.push(ChainLink::new(agent, skill));
        self
    }

    /// The root of the call's work (spec §5a "Tasks"): the last link of its chain, or the call's own agent
    /// and skill for a direct call.
    pub fn root(&self) -> (&str, &str) {
        self.via.last().map_or((self.agent.as_str(), self.skill.as_str()), |l| (l.agent.as_str(), l.skill.as_str()))
    }

    /// The same call, in this mode (spec §3c).
    pub fn in_mode(mut self, mode: impl Into<String>) -> Call {
        self.mode = Some(mode.into());
        self
    }

    /// The same call with these arguments (a JSON object).
    pub fn with_arguments(mut self, arguments: Value) -> Call {
        self.arguments = arguments;
        self
    }

    /// The same call, in work done for `person`.
    pub fn for_person(mut self, person: impl Into<String>) -> Call {
        self.requester = Some(person.into());
        self
    }

    /// The same call, under this operation key (its task).
    pub fn in_task(mut self, operation_key: impl Into<String>) -> Call {
        self.operation_key = Some(operation_key.into());
        self
    }

    /// The call borrowed, as the one evaluator takes it ([`Table::level_of`], [`crate::table::LevelIndex`]).
    pub fn as_ref(&self) -> CallRef<'_> {
        CallRef {
            agent: &self.agent,
            skill: &self.skill,
            tool: &self.tool,
            arguments: &self.arguments,
            requester: self.requester.as_deref(),
            mode: self.mode.as_deref(),
            via: &self.via,
        }
    }
}

/// The decision for one call (spec §5 "Decide"): its level, why, and who decides a proposal of it.
///
/// Serializes to the JSON that `permitc decide` prints (see [`Decision::to_json`]), and reads back from it
/// (the approval service's answers, read by its clients).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The agent.
    pub agent: String,
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// The person the work is for, if any.
    pub requester: Option<String>,
    /// The mode the call is made in, if any (spec §3c); absent from the JSON for no mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The call's delegation chain, nearest first (spec §3b); absent from the JSON for a direct call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<ChainLink>,
    /// The level of this call: the table's, made `never` by a refusal, or `alone` by a standing rule.
    pub level: Level,
    /// The level the table gives the triple, before arguments and standing rules; `None` when the triple
    /// is not offered.
    pub table_level: Option<Level>,
    /// `true` when the table has an entry for the triple (the skill offers the tool).
    pub offered: bool,
    /// Why the call is refused outright, when it is: "unknown agent", "unknown skill", "not one of the
    /// agent's skills", "unknown tool", "not one of the skill's tools", "unknown person `X`", or an argument
    /// that does not match the tool's parameters.
    pub refusal: Option<String>,
    /// The rules behind this call's level, with their places in the sources: for an entry a condition
    /// decides, only those that decide these arguments (the entries whose condition held, or the class
    /// level when none did; for a `shell` argument, those of its strictest parts); for a call refused
    /// outright, every rule of the triple.
    pub reasons: Vec<Reason>,
    /// Who decides a proposal of this call: only when it is `propose` or `propose_every_time`.
    pub decider: Option<Decider>,
    /// For a tool with a `shell` parameter whose line was judged (spec §3a): each part's normalized text
    /// and level, in order; the call's level is the strictest. Absent from the JSON otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<PartLevel>>,
    /// The standing rule that makes the call `alone`, if one does (a task rule too: see `task_rule`).
    pub standing_rule: Option<String>,
    /// `true` when that rule is a **task rule** (spec §5a "Task-scoped approval"); absent from the JSON
    /// otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub task_rule: bool,
    /// The triple's `entry_digest`, when offered; for a call in a mode that says something about the
    /// triple, the mode's call digest (spec §3c), which stands for the call in fingerprints and rules.
    pub entry_digest: Option<String>,
    /// The tool's `definition_digest`, when the tool exists.
    pub definition_digest: Option<String>,
}

/// One part of a `shell` argument and the level it gets as if it were the whole call (spec §3a).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartLevel {
    /// The part, normalized: quotes removed, words joined by one space.
    pub text: String,
    /// Its level.
    pub level: Level,
}

impl Decision {
    /// The decision as pretty JSON (keys sorted, two-space indentation, no final newline): what
    /// `permitc decide` prints.
    pub fn to_json(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        serde_json::to_string_pretty(&value).unwrap_or_default()
    }

    /// The message a call refused with this decision gets (what [`crate::Runtime::call`] says of a `never`
    /// call): the triple, and the refusal or the rules behind the level with their places.
    pub fn refusal_message(&self) -> String {
        crate::words::refusal_message(self)
    }

    /// One line a person reads: "`Estimator` / `EstimateRepair` / `SetPrice`: propose (waits on a decision
    /// from Mia)".
    pub fn summary(&self) -> String {
        let via: String = self.via.iter().map(|l| format!(" via `{l}`")).collect();
        let mut out = format!("`{}` / `{}` / `{}`{via}: {}", self.agent, self.skill, self.tool, self.level);
        if let Some(refusal) = &self.refusal {
            out.push_str(&format!(" ({refusal})"));
        } else if let Some(rule) = &self.standing_rule {
            let kind = if self.task_rule { "task rule" } else { "standing rule" };
            out.push_str(&format!(" ({kind} `{rule}`)"));
        } else if let (Level::Propose | Level::ProposeEveryTime, Some(d)) = (self.level, &self.decider) {
            out.push_str(&format!(" (waits on {})", d.waiting_on()));
        }
        if let Some(parts) = &self.parts {
            let shown: Vec<String> =
                parts.iter().map(|p| format!("`{}` {}", shell::visible(&p.text), p.level)).collect();
            out.push_str(&format!("; parts: {}", shown.join(", ")));
        }
        out
    }
}

/// Decides `call` against `table` alone, with no standing rules (spec §3, §5): what `permitc decide` prints.
///
/// Never fails: an unknown agent, skill, tool or person, a tool outside the skill, or arguments that do not
/// match the tool's parameters (missing, extra, mistyped) give level `never` with the reason in
/// [`Decision::refusal`].
pub fn decide_table(table: &Table, call: &Call) -> Decision {
    decide_with(table, call, &[], 0)
}

/// Decides with the standing rules in force (spec §5 "Standing rules").
/// `now` (seconds since the Unix epoch) decides which rules have expired.
pub(crate) fn decide_with(table: &Table, call: &Call, rules: &[StandingRule], now: u64) -> Decision {
    let mut d = Decision {
        agent: call.agent.clone(),
        skill: call.skill.clone(),
        tool: call.tool.clone(),
        requester: call.requester.clone(),
        mode: call.mode.clone(),
        via: call.via.clone(),
        level: Level::Never,
        table_level: None,
        offered: false,
        refusal: None,
        reasons: Vec::new(),
        decider: None,
        parts: None,
        standing_rule: None,
        task_rule: false,
        entry_digest: None,
        definition_digest: table.tools.get(&call.tool).map(|t| t.definition_digest.clone()),
    };
    // The decision's extras (reasons, digests) are filled once the triple is offered, whatever else refuses
    // the call after that.
    let mut decider = None;
    if let (Ok(entry), Some(agent)) =
        (table.offered(&call.agent, &call.skill, &call.tool), table.agents.get(&call.agent))
    {
        d.offered = true;
        d.table_level = entry.level;
        d.reasons = entry.because.clone();
        d.entry_digest = Some(entry.entry_digest.clone());
        decider = Some(resolve_decider(table, &entry.route, call.requester.as_deref(), &agent.sponsor));
    }
    let of = match table.level_of(call.as_ref()) {
        Ok(of) => of,
        Err(why) => {
            d.level = Level::Never;
            d.refusal = Some(why.to_string());
            return d;
        }
    };
    d.table_level = Some(of.rows_level());
    d.level = of.level;
    if let Some(args) = call.arguments.as_object() {
        let (reasons, parts) = deciding_reasons(call, of.entry, of.tool, args, of.rows_level());
        d.reasons = reasons;
        d.parts = parts;
    }
    if let Some(mode) = of.mode {
        d.entry_digest = Some(mode.call_digest.clone());
        d.reasons.extend(mode.because.iter().cloned());
    }
    // A delegated call (spec §3b): every link's reasons, the call digest over the chain (so a rule made for
    // another chain, or for the direct call, never matches), and the route nearest the root; with nobody
    // to work for, the root agent's sponsor decides.
    let chain =
        if call.via.is_empty() { None } else { table.chain_links(&call.agent, &call.skill, &call.tool, &call.via) };
    let call_digest: std::borrow::Cow<'_, str> = match &chain {
        Some(links) => std::borrow::Cow::Owned(chain_digest(of.call_digest(), &call.via, links)),
        None => std::borrow::Cow::Borrowed(of.call_digest()),
    };
    if let Some(links) = &chain {
        d.reasons.extend(links.iter().flat_map(|l| l.because.iter().cloned()));
        d.entry_digest = Some(call_digest.to_string());
        let (root, _) = call.root();
        let sponsor = table.agents.get(root).map_or("", |a| a.sponsor.as_str());
        decider = Some(resolve_decider(table, of.route, call.requester.as_deref(), sponsor));
    }
    // Spec §3c step 5: a standing rule makes a call whose level is exactly `propose` alone, but a spend
    // over the automatic allowance stays `propose` (§6: "a spend still passes its budget").
    if of.level == Level::Propose && !of.floored {
        if let Some(rule) = rules.iter().find(|r| rule_applies(table, r, call, of.tool, of.route, &call_digest, now)) {
            d.level = Level::Alone;
            d.standing_rule = Some(rule.id.clone());
            d.task_rule = rule.task.is_some();
            if of.over_allowance {
                d.level = Level::Propose;
                d.standing_rule = None;
                d.task_rule = false;
                push_floor_reason(&mut d, table, of.tool, &call.arguments);
            }
        }
    }
    if of.floored {
        push_floor_reason(&mut d, table, of.tool, &call.arguments);
    }
    // Spec §3c step 7 (after step 6, an automatic grant, which asks nobody): in an `unattended` mode a
    // proposal that would wait for the requester is `never`; one routed to anyone else stays.
    let unattended = call.mode.as_ref().and_then(|m| table.modes.get(m)).is_some_and(|m| m.unattended);
    if unattended && matches!(d.level, Level::Propose | Level::ProposeEveryTime) {
        let asks_requester = match of.route {
            Route::Requester => true,
            Route::Person(p) => call.requester.as_deref() == Some(p.as_str()),
            Route::Role(_) | Route::Queue(_) => false,
        };
        let automatic = d.level == Level::Propose && !of.over_allowance && of.tool.spends.is_some();
        if asks_requester && !automatic {
            d.level = Level::Never;
            d.refusal = Some("unattended: nobody to ask".to_string());
        }
    }
    if matches!(d.level, Level::Propose | Level::ProposeEveryTime) {
        d.decider = decider;
    }
    d
}

/// The reasons that decide an accepted call ([`Entry::deciding_reasons`]), and for a `shell` argument each
/// part's level. A part's reasons count when the part is as strict as the call (`level`, the rows' level);
/// the parts were judged by [`Table::level_of`] already, so the line is judgeable and no condition fails
/// here (should one, every reason is kept: closed, and complete).
fn deciding_reasons(
    call: &Call,
    entry: &Entry,
    tool: &ToolInfo,
    args: &Map<String, Value>,
    level: Level,
) -> (Vec<Reason>, Option<Vec<PartLevel>>) {
    let all = || entry.because.clone();
    let Ok(Some(param)) = tool.shell_param() else {
        let reasons = entry.deciding_reasons(&call.tool, Arguments::new(args));
        return (reasons.map_or_else(|_| all(), |r| r.into_iter().cloned().collect()), None);
    };
    let line = args.get(param).and_then(Value::as_str).unwrap_or_default();
    let Ok(texts) = shell::part_texts(line) else { return (all(), None) };
    let mut parts = Vec::new();
    let mut deciding: Vec<&Reason> = Vec::new();
    for text in texts.iter() {
        let view = Arguments::new(args).with_part(param, text);
        let (Ok(part_level), Ok(reasons)) = (entry.level_on(view), entry.deciding_reasons(&call.tool, view)) else {
            return (all(), None);
        };
        if part_level == level {
            deciding.extend(reasons);
        }
        parts.push(PartLevel { text: text.to_string(), level: part_level });
    }
    // In the entry's order, each once.
    let reasons = entry.because.iter().filter(|r| deciding.iter().any(|d| std::ptr::eq(*d, *r))).cloned().collect();
    (reasons, Some(parts))
}

/// The reason the budget's allowance floor adds (spec §6).
fn push_floor_reason(d: &mut Decision, table: &Table, tool: &ToolInfo, arguments: &Value) {
    let spend = arguments.as_object().and_then(|args| table.spend_of(tool, args).ok().flatten());
    if let Some(spend) = spend {
        d.reasons.push(Reason {
            layer: None,
            kind: ReasonKind::Budget,
            level: Level::Propose,
            rule: spend.allowance_words(),
            via: None,
            at: None,
        });
    }
}

/// The level an entry gives without arguments (spec §3): `never` for the reserved subject; else the
/// stated level, or the rows folded without arguments (`never` when a condition needs one).
/// In a mode that says something about the triple (`mode`), the mode's row is one more layer (spec §3c).
pub(crate) fn entry_level_in(entry: &Entry, tool: &ToolInfo, mode: Option<&crate::table::ModeEntry>) -> Level {
    if entry.reserved || tool.reserved.is_some() {
        return Level::Never;
    }
    match mode {
        None => entry.level.unwrap_or_else(|| entry.level_from_rows()),
        Some(m) => m.level.unwrap_or_else(|| {
            let base = entry.level_from_rows();
            match m.row.level_for(&Map::new()) {
                Ok(level) => level.map_or(base, |l| l.max(base)),
                Err(_) => Level::Never,
            }
        }),
    }
}

/// Whether a standing rule makes this call alone: in force (not revoked, not expired), for this agent,
/// tool and skill, for the person the work is for (or everybody), covering these arguments (its scope),
/// bound to the tool's and the entry's current digests, and only while its maker may still make it on the
/// current table (spec §5a "Authority is rechecked").
fn rule_applies(
    table: &Table,
    rule: &StandingRule,
    call: &Call,
    tool: &ToolInfo,
    route: &Route,
    call_digest: &str,
    now: u64,
) -> bool {
    rule.revoked.is_none()
        && rule.mode == call.mode
        && rule.via == call.via
        && rule.task.as_ref().is_none_or(|task| call.operation_key.as_ref() == Some(task))
        && rule.expires_at.is_none_or(|at| now < at)
        && rule.scope.covers(&call.arguments)
        // Spec §5: never a rule for any arguments on a tool with a `shell` parameter, not even one stored by a
        // release that made them (it would let every proposed command line run alone).
        && (rule.scope != Scope::AnyArguments || tool.shell_param() == Ok(None))
        && rule.agent == call.agent
        && rule.tool == call.tool
        && rule.skill.as_ref().is_none_or(|s| *s == call.skill)
        && match &rule.work_for {
            WorkFor::Everybody => true,
            WorkFor::Person(p) => call.requester.as_ref() == Some(p),
            WorkFor::Nobody => call.requester.is_none(),
        }
        && rule.definition_digest == tool.definition_digest
        && rule.covered.get(&call.skill).map(String::as_str) == Some(call_digest)
        && {
            let routed = [(call.skill.as_str(), route)];
            let routed = if *route == Route::Requester { &routed[..0] } else { &routed[..] };
            crate::rules::may_make_rule(table, &rule.agent, &rule.tool, &rule.work_for, &rule.by, routed).is_ok()
        }
}

/// The persons who decide a route now (spec §3 "Routes", §5 "Who decides"): `requester` is the person the
/// work is for, or the agent's sponsor when the work is for nobody; a person route names its person (the
/// requester too, when the policy names them); a role's holders and a queue's members decide **except the
/// person the work is for**: a proposal routed to a group is never decided by its requester.
pub(crate) fn resolve_decider(table: &Table, route: &Route, requester: Option<&str>, sponsor: &str) -> Decider {
    let mut persons: Vec<String> = match route {
        Route::Requester => vec![requester.unwrap_or(sponsor).to_string()],
        Route::Person(p) => vec![p.clone()],
        Route::Role(r) => holders_of_role(table, r),
        Route::Queue(q) => match table.queues.get(q) {
            Some(queue) => {
                let mut all = Vec::new();
                for holder in &queue.decided_by {
                    match holder {
                        Holder::Person(p) => all.push(p.clone()),
                        Holder::Role(r) => all.extend(holders_of_role(table, r)),
                    }
                }
                all
            }
            None => Vec::new(),
        },
    };
    if matches!(route, Route::Role(_) | Route::Queue(_)) {
        persons.retain(|p| Some(p.as_str()) != requester);
    }
    persons.sort();
    persons.dedup();
    Decider { route: route.clone(), persons }
}

fn holders_of_role(table: &Table, role: &str) -> Vec<String> {
    table.persons.iter().filter(|(_, p)| p.roles.iter().any(|r| r == role)).map(|(n, _)| n.clone()).collect()
}

/// Whether `person` is one of `holders` (by name, or by one of their roles).
pub(crate) fn holds(table: &Table, person: &str, holders: &[Holder]) -> bool {
    let roles = table.persons.get(person).map(|p| p.roles.as_slice()).unwrap_or(&[]);
    holders.iter().any(|h| match h {
        Holder::Person(p) => p == person,
        Holder::Role(r) => table.persons.contains_key(person) && roles.contains(r),
    })
}

/// The fingerprint format this runtime writes (spec §5): 2 adds the person the work is for, the delegation
/// chain (empty for now), the mode (none for now) and the instruction version. A proposal of another
/// format is `stale` when it is decided or executed (never silently re-bound).
pub const FINGERPRINT_FORMAT: u32 = 2;

/// The fingerprint of a proposal with no instruction version: [`fingerprint_with`] with `None`.
pub fn fingerprint(
    call: &Call,
    entry_digest: &str,
    covered_version: Option<&str>,
    destination: Option<&str>,
) -> String {
    fingerprint_with(call, entry_digest, covered_version, destination, None)
}

/// The fingerprint of a proposal (spec §5), format [`FINGERPRINT_FORMAT`]: SHA-256 (hex) of the canonical
/// JSON of {`v`: 2, agent, skill, tool, entry_digest, arguments, covered_version, destination, `person`
/// (the person the work is for), `chain` (the delegation chain, nearest first, `[{agent, skill}, …]`; `[]`
/// for a direct call), `mode` (`null` for no mode),
/// `instruction_version`}; an absent version, destination, person or instruction version is `null`.
pub fn fingerprint_with(
    call: &Call,
    entry_digest: &str,
    covered_version: Option<&str>,
    destination: Option<&str>,
    instruction_version: Option<&str>,
) -> String {
    let value = serde_json::json!({
        "v": FINGERPRINT_FORMAT,
        "agent": call.agent,
        "skill": call.skill,
        "tool": call.tool,
        "entry_digest": entry_digest,
        "arguments": call.arguments,
        "covered_version": covered_version,
        "destination": destination,
        "person": call.requester,
        "chain": call.via,
        "mode": call.mode,
        "instruction_version": instruction_version,
    });
    sha256_hex(canonical_value(&value).as_bytes())
}
