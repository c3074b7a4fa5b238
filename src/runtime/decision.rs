//! Deciding one call against the table (spec §3 "The level of (agent, skill, tool)", §5 "Decide").

use serde::Serialize;
use serde_json::{Map, Value};

use super::records::{Decider, StandingRule, WorkFor};
use crate::table::{Entry, Holder, Level, ParamType, Reason, Route, Table, ToolInfo, canonical_value, sha256_hex};

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
        }
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
}

/// The decision for one call (spec §5 "Decide"): its level, why, and who decides a proposal of it.
///
/// Serializes to the JSON that `permitc decide` prints (see [`Decision::to_json`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The agent.
    pub agent: String,
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// The person the work is for, if any.
    pub requester: Option<String>,
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
    /// The rules behind the table's level, with their places in the sources.
    pub reasons: Vec<Reason>,
    /// Who decides a proposal of this call, for `propose` and `propose_every_time`.
    pub decider: Option<Decider>,
    /// The standing rule that makes the call `alone`, if one does.
    pub standing_rule: Option<String>,
    /// The triple's `entry_digest`, when offered.
    pub entry_digest: Option<String>,
    /// The tool's `definition_digest`, when the tool exists.
    pub definition_digest: Option<String>,
}

impl Decision {
    /// The decision as pretty JSON (keys sorted, two-space indentation, no final newline): what
    /// `permitc decide` prints.
    pub fn to_json(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        serde_json::to_string_pretty(&value).unwrap_or_default()
    }

    /// One line a person reads: "`Estimator` / `EstimateRepair` / `SetPrice`: propose (waits on a decision
    /// from Mia)".
    pub fn summary(&self) -> String {
        let mut out = format!("`{}` / `{}` / `{}`: {}", self.agent, self.skill, self.tool, self.level);
        if let Some(refusal) = &self.refusal {
            out.push_str(&format!(" ({refusal})"));
        } else if let Some(rule) = &self.standing_rule {
            out.push_str(&format!(" (standing rule `{rule}`)"));
        } else if let (Level::Propose | Level::ProposeEveryTime, Some(d)) = (self.level, &self.decider) {
            out.push_str(&format!(" (waits on {})", d.waiting_on()));
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
    decide_with(table, call, &[])
}

/// Decides with the standing rules in force (spec §5 "Standing rules").
pub(crate) fn decide_with(table: &Table, call: &Call, rules: &[StandingRule]) -> Decision {
    let mut d = Decision {
        agent: call.agent.clone(),
        skill: call.skill.clone(),
        tool: call.tool.clone(),
        requester: call.requester.clone(),
        level: Level::Never,
        table_level: None,
        offered: false,
        refusal: None,
        reasons: Vec::new(),
        decider: None,
        standing_rule: None,
        entry_digest: None,
        definition_digest: table.tools.get(&call.tool).map(|t| t.definition_digest.clone()),
    };
    let refuse = |mut d: Decision, why: String| {
        d.level = Level::Never;
        d.refusal = Some(why);
        d
    };
    let entry = match table.offered(&call.agent, &call.skill, &call.tool) {
        Ok(entry) => entry,
        Err(why) => return refuse(d, why.into()),
    };
    // INVARIANT: `offered` succeeded, so the agent and the tool exist.
    let (Some(agent), Some(tool)) = (table.agents.get(&call.agent), table.tools.get(&call.tool)) else {
        return refuse(d, "unknown agent".into());
    };
    d.offered = true;
    d.table_level = entry.level;
    d.reasons = entry.because.clone();
    d.entry_digest = Some(entry.entry_digest.clone());
    d.decider = Some(resolve_decider(table, &entry.route, call.requester.as_deref(), &agent.sponsor));
    if let Some(person) = &call.requester {
        if !table.persons.contains_key(person) {
            return refuse(d, format!("unknown person `{person}`"));
        }
    }
    if let Err(why) = check_arguments(&call.tool, tool, &call.arguments) {
        return refuse(d, why);
    }
    let level = match level_for_call(entry, tool, &call.arguments) {
        Ok(level) => level,
        Err(why) => return refuse(d, why),
    };
    d.table_level = Some(level);
    d.level = level;
    if level == Level::Propose {
        if let Some(rule) = rules.iter().find(|r| rule_applies(r, call, tool, entry)) {
            d.level = Level::Alone;
            d.standing_rule = Some(rule.id.clone());
        }
    }
    // Spec §6: a spend is checked against its budget whatever the level; an `alone` call (by a list, a
    // preset or a standing rule) over the automatic allowance is treated as `propose`.
    match super::ledger::spend_of(table, &call.tool, tool, &call.arguments) {
        Err(why) => return refuse(d, why),
        Ok(Some(spend)) if d.level == Level::Alone && spend.over_allowance() => {
            d.level = Level::Propose;
            d.standing_rule = None;
            d.reasons.push(Reason {
                layer: None,
                kind: crate::table::ReasonKind::Budget,
                level: Level::Propose,
                rule: format!(
                    "budget `{}`: {} {unit} is over the automatic allowance of {} {unit}",
                    spend.budget,
                    spend.amount,
                    spend.info.alone_up_to,
                    unit = spend.info.unit
                ),
                via: None,
                at: None,
            });
        }
        Ok(_) => {}
    }
    d
}

/// The level an entry gives a call's arguments (spec §3): `never` for the reserved subject; else the
/// stated level, or the rows evaluated on the arguments, their conditions included.
///
/// Errors: a condition that cannot be evaluated (the caller decides `never`, spec §3 item 5).
fn level_for_call(entry: &Entry, tool: &ToolInfo, arguments: &Value) -> Result<Level, String> {
    if entry.reserved || tool.reserved.is_some() {
        return Ok(Level::Never);
    }
    if let Some(level) = entry.level {
        return Ok(level);
    }
    let empty = Map::new();
    let args = arguments.as_object().unwrap_or(&empty);
    entry.level_for(args).map_err(|e| e.to_string())
}

/// The level an entry gives without arguments (spec §3): `never` for the reserved subject; else the
/// stated level, or the rows folded without arguments (`never` when a condition needs one).
pub(crate) fn entry_level(entry: &Entry, tool: &ToolInfo) -> Level {
    if entry.reserved || tool.reserved.is_some() {
        return Level::Never;
    }
    entry.level.unwrap_or_else(|| entry.level_from_rows())
}

/// Whether a standing rule makes this call alone: in force, for this agent, tool and skill, for the person
/// the work is for (or everybody), and bound to the tool's and the entry's current digests.
fn rule_applies(rule: &StandingRule, call: &Call, tool: &ToolInfo, entry: &Entry) -> bool {
    rule.revoked.is_none()
        && rule.agent == call.agent
        && rule.tool == call.tool
        && rule.skill.as_ref().is_none_or(|s| *s == call.skill)
        && match &rule.work_for {
            WorkFor::Everybody => true,
            WorkFor::Person(p) => call.requester.as_ref() == Some(p),
        }
        && rule.definition_digest == tool.definition_digest
        && rule.covered.get(&call.skill) == Some(&entry.entry_digest)
}

/// Checks arguments against the tool's parameters: a JSON object with exactly the declared names, each of
/// its type (`string` and entities: a string; `int` and `money`: an integer; `bool`).
pub(crate) fn check_arguments(tool_name: &str, tool: &ToolInfo, arguments: &Value) -> Result<(), String> {
    let Value::Object(map) = arguments else {
        return Err(format!("the arguments of `{tool_name}` are not a JSON object"));
    };
    for param in &tool.params {
        let Some(value) = map.get(&param.name) else {
            return Err(format!("argument `{}` of `{tool_name}` is missing", param.name));
        };
        let fits = match &param.ty {
            ParamType::String | ParamType::Entity(_) => value.is_string(),
            ParamType::Int | ParamType::Money => value.is_i64(),
            ParamType::Bool => value.is_boolean(),
        };
        if !fits {
            return Err(format!(
                "argument `{}` of `{tool_name}` must be {}, found {}",
                param.name,
                type_words(&param.ty),
                value_words(value)
            ));
        }
    }
    if let Some(extra) = map.keys().find(|k| !tool.params.iter().any(|p| &p.name == *k)) {
        return Err(format!("`{tool_name}` has no parameter `{extra}`"));
    }
    Ok(())
}

fn type_words(ty: &ParamType) -> String {
    match ty {
        ParamType::String => "a string".into(),
        ParamType::Int => "an integer".into(),
        ParamType::Bool => "`true` or `false`".into(),
        ParamType::Money => "an integer amount in minor units".into(),
        ParamType::Entity(e) => format!("the id of a `{e}` (a string)"),
    }
}

fn value_words(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number with a fraction",
        Value::Number(_) => "a number out of range",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The persons a route names now (spec §3 "Routes"): `requester` is the person the work is for, or the
/// agent's sponsor when the work is for nobody.
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

/// The fingerprint of a proposal (spec §5): SHA-256 (hex) of the canonical JSON of {agent, skill, tool,
/// entry_digest, arguments, covered_version, destination}; an absent version or destination is `null`.
pub fn fingerprint(
    call: &Call,
    entry_digest: &str,
    covered_version: Option<&str>,
    destination: Option<&str>,
) -> String {
    let value = serde_json::json!({
        "agent": call.agent,
        "skill": call.skill,
        "tool": call.tool,
        "entry_digest": entry_digest,
        "arguments": call.arguments,
        "covered_version": covered_version,
        "destination": destination,
    });
    sha256_hex(canonical_value(&value).as_bytes())
}

#[cfg(all(test, feature = "compiler"))]
mod tests {
    use super::*;
    use serde_json::json;

    /// `decide_level` gives `decide_table`'s level, and refuses exactly when `decide_table` does, on every
    /// offered triple of a generated package with conditions, with good and bad arguments, for a known
    /// and an unknown person, and on triples that are not offered.
    #[test]
    fn decide_level_agrees_with_decide_table() {
        let mut sources = crate::syntax::Sources::default();
        let text = crate::generate::generate(&crate::generate::Config::sized(300));
        sources.add(crate::syntax::Source::new("gen.permits", text.into_bytes()));
        let out = crate::compile::compile_loaded(crate::syntax::parse_sources(sources));
        let table = out.table.expect("the generated package compiles");
        let person = table.persons.keys().next().cloned();
        let index = crate::table::LevelIndex::new(&table);
        let argument_sets = [
            json!({ "amount": 500, "to": "ops@example.com" }),
            json!({ "amount": 5_000_000, "to": "x@rival.example" }),
            json!({ "amount": "500", "to": "ops@example.com" }),
            json!({ "amount": 500 }),
            json!({ "amount": 500, "to": "a", "extra": 1 }),
            json!({ "amount": 500, "tx": "ops@example.com" }),
            json!({ "amount": 500, "to": 7 }),
            json!({}),
            json!([1]),
        ];
        let mut calls = Vec::new();
        for (agent, skills) in &table.entries {
            for (skill, tools) in skills {
                for tool in tools.keys().take(4) {
                    calls.push(Call::new(agent, skill, tool));
                }
                calls.push(Call::new(agent, skill, "NoSuchTool"));
                calls.push(Call::new(agent, "NoSuchSkill", "T1"));
                if let Some(other) = table.tools.keys().find(|t| !tools.contains_key(*t)) {
                    calls.push(Call::new(agent, skill, other));
                }
            }
            calls.push(Call::new(agent, "A0S0", "T1"));
        }
        calls.push(Call::new("Nobody", "A0S0", "T1"));
        let mut checked = 0;
        for call in calls {
            for args in &argument_sets {
                for requester in [None, person.clone(), Some("NoSuchPerson".to_string())] {
                    let call = Call { arguments: args.clone(), requester, ..call.clone() };
                    let full = decide_table(&table, &call);
                    let quick = table.decide_level(&call.agent, &call.skill, &call.tool, &call.arguments, call.requester.as_deref());
                    let indexed = index.decide_level(&call.agent, &call.skill, &call.tool, &call.arguments, call.requester.as_deref());
                    assert_eq!(quick, indexed, "{call:?}");
                    assert_eq!(quick.map_or(Level::Never, |q| q.level), full.level, "{call:?}");
                    assert_eq!(quick.is_err(), full.refusal.is_some(), "{call:?}: {quick:?} vs {:?}", full.refusal);
                    if let Err(crate::table::Refused::NotOffered(why)) = quick {
                        assert_eq!(full.refusal.as_deref(), Some(why));
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000, "{checked}");
    }
}
