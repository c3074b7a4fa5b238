//! The level of every offered triple, exactly as spec §3 steps 2–4: per layer its named, class and inherited
//! levels, the strictest layer, the reserved subject. Inheritance is one pass over the condensation: each
//! component carries the set of restrictively named tools it reaches.

use std::collections::BTreeSet;

use super::{Analysis, TripleDecision};
use crate::check::{ClassSource, Model, NodeId, Rules, layer_noun};
use crate::diagnostics::{Code, Diagnostic};
use crate::effects::{EffectSet, Effects, NextHop, RESERVED_SLOT};
use crate::syntax::{Sources, Span};
use crate::table::{EffectClass, Level, NamedRow, Reason, ReasonKind, Route, Row, SourceRef};

/// The restrictively named tools each component reaches through at least one call.
fn reach_sets(model: &Model<'_>, effects: &Effects) -> Vec<Vec<NodeId>> {
    let mut restrictive = vec![false; model.nodes.len()];
    let mut mark = |rules: &Rules<'_>| {
        for (id, named) in &rules.named {
            if named.iter().any(|r| r.level >= Level::Propose) {
                restrictive[*id] = true;
            }
        }
    };
    if let Some(r) = &model.package_rules {
        mark(r);
    }
    for a in model.agents.values() {
        mark(&a.rules);
    }
    for s in model.skills.values() {
        if let Some(r) = &s.rules {
            mark(r);
        }
    }
    for m in model.modes.values() {
        if let Some(r) = &m.rules {
            mark(r);
        }
    }
    let mut reach: Vec<Vec<NodeId>> = vec![Vec::new(); effects.components.len()];
    for (ci, members) in effects.components.iter().enumerate() {
        let mut set: BTreeSet<NodeId> = BTreeSet::new();
        let cyclic = members.len() > 1 || members.iter().any(|m| model.nodes[*m].calls.iter().any(|(c, _)| c == m));
        for &m in members {
            if cyclic && restrictive[m] {
                set.insert(m);
            }
            for (c, _) in &model.nodes[m].calls {
                let cc = effects.component_of[*c];
                if cc != ci {
                    if restrictive[*c] {
                        set.insert(*c);
                    }
                    set.extend(reach[cc].iter().copied());
                }
            }
        }
        reach[ci] = set.into_iter().collect();
    }
    reach
}

pub(super) struct LayerEval {
    pub(super) row: Option<Row>,
    /// Every level the layer can give, whatever the arguments.
    pub(super) possible: BTreeSet<Option<Level>>,
    pub(super) because: Vec<(Reason, Option<Span>)>,
    /// The callee that sets the inherited floor, with its rule's span.
    pub(super) inherited_from: Option<(NodeId, Span)>,
}

impl LayerEval {
    pub(super) fn max(&self) -> Option<Level> {
        self.possible.iter().max().copied().flatten()
    }
    pub(super) fn min(&self) -> Option<Level> {
        self.possible.iter().min().copied().flatten()
    }
}

pub(super) fn source_ref(sources: &Sources, span: Span) -> SourceRef {
    SourceRef { file: sources.name(span.file).to_string(), line: sources.line(span) }
}

fn eval_layer(
    a: &Analysis<'_>,
    rules: &Rules<'_>,
    owner: &str,
    tool: NodeId,
    level_set: EffectSet,
    reach: &[NodeId],
) -> LayerEval {
    let model = &a.model;
    let layer = rules.layer;
    let tool_name = model.nodes[tool].name;
    let reason = |kind, level, rule: String, via: Option<String>, span: Option<Span>| {
        (Reason { layer: Some(layer), kind, level, rule, via, at: span.map(|s| source_ref(a.sources, s)) }, span)
    };
    let named_rules: &[crate::check::NamedRule] = rules.named.get(&tool).map(Vec::as_slice).unwrap_or(&[]);
    let named: Vec<NamedRow> =
        named_rules.iter().map(|r| NamedRow { level: r.level, when: r.condition.clone() }).collect();
    // Class level over the tool's classes; an empty set counts as `reads` (alone in the agent layer).
    let classes: Vec<EffectClass> =
        if level_set.is_empty() { vec![EffectClass::Reads] } else { level_set.classes().collect() };
    let per_class: Vec<(EffectClass, Level, ClassSource)> =
        classes.iter().filter_map(|c| rules.class_level(*c).map(|(l, src)| (*c, l, src))).collect();
    let class = per_class.iter().map(|(_, l, _)| *l).max();
    // A caller inherits a callee's restrictive entry whatever its condition.
    let mut inherited: Option<(Level, NodeId, Span)> = None;
    // A tool named in a list and sitting in a cycle calls itself, transitively: like any caller it
    // inherits its own restrictive entry whatever the condition (a recursive call's arguments are not
    // checked). When an unconditional entry at least as strict always applies, that copy would only
    // repeat the named reason, so it is left out.
    let covered = |level: Level| named_rules.iter().any(|u| u.condition.is_none() && u.level >= level);
    for c in reach.iter() {
        if let Some(r) = rules.named_level(*c) {
            if *c == tool && covered(r.level) {
                continue;
            }
            if r.level >= Level::Propose && inherited.is_none_or(|(l, _, _)| r.level > l) {
                inherited = Some((r.level, *c, r.span));
            }
        }
    }
    let row = Row { layer, named, class, inherited: inherited.map(|(l, _, _)| l) };
    let possible = row.possible_levels();
    let max = possible.iter().max().copied().flatten();
    let mut because = Vec::new();
    let conditional = named_rules.iter().any(|r| r.condition.is_some());
    let entry_rule = |r: &crate::check::NamedRule| match &r.condition {
        Some(c) => format!("{} [{tool_name} when {c}]", r.level),
        None => format!("{} [{tool_name}]", r.level),
    };
    if conditional {
        for r in named_rules {
            because.push(reason(ReasonKind::Named, r.level, entry_rule(r), None, Some(r.span)));
        }
    } else if let Some(r) = rules.named_level(tool) {
        because.push(reason(ReasonKind::Named, r.level, entry_rule(r), None, Some(r.span)));
    }
    // The class level decides when no named entry applies.
    if named_rules.iter().all(|r| r.condition.is_some()) {
        if let Some(cl) = class {
            for (c, l, src) in per_class.iter().filter(|(_, l, _)| *l == cl) {
                let shown = if level_set.is_empty() { "no effects".to_string() } else { c.to_string() };
                match src {
                    ClassSource::Setting(span) => because.push(reason(
                        ReasonKind::Class,
                        *l,
                        format!("{c}: {l}"),
                        Some(c.to_string()),
                        Some(*span),
                    )),
                    ClassSource::Preset(span) => {
                        let preset = a.sources.slice(*span).trim().to_string();
                        because.push(reason(
                            ReasonKind::Class,
                            *l,
                            format!("{preset}: {c} -> {l}"),
                            Some(c.to_string()),
                            Some(*span),
                        ));
                    }
                    ClassSource::Default => because.push(reason(
                        ReasonKind::Default,
                        *l,
                        format!("default: {shown} -> {l} ({} {owner})", layer_noun(layer)),
                        Some(c.to_string()),
                        None,
                    )),
                }
            }
        }
    }
    if let Some((l, callee, span)) = inherited {
        if max == Some(l) {
            // Quote the callee's rule as written, condition included: it is inherited unconditionally.
            let callee_name = model.nodes[callee].name;
            let text = match rules.named_level(callee).and_then(|r| r.condition.as_ref()) {
                Some(c) => format!("{l} [{callee_name} when {c}]"),
                None => format!("{l} [{callee_name}]"),
            };
            because.push(reason(ReasonKind::Inherited, l, text, Some(callee_name.to_string()), Some(span)));
        }
    }
    let says_something = !row.named.is_empty() || row.class.is_some() || row.inherited.is_some();
    LayerEval {
        row: says_something.then_some(row),
        possible,
        because,
        inherited_from: inherited.map(|(_, c, s)| (c, s)),
    }
}

/// Spec §6: every execution of a tool that spends from a budget is checked against it, so a tool that
/// reaches a `spend` through what it calls must say how much itself, from the same budget. Budgets
/// reached are propagated over the condensation (callees first), like effects. Reports
/// `permits::check::spend_unbound` naming the budget and the call through which it is reached.
pub(super) fn check_spend_binding(model: &Model<'_>, effects: &Effects) -> Vec<Diagnostic> {
    let mut reached: Vec<BTreeSet<&str>> = vec![BTreeSet::new(); effects.components.len()];
    for (ci, members) in effects.components.iter().enumerate() {
        let mut set: BTreeSet<&str> = BTreeSet::new();
        for &m in members {
            if let Some(sp) = model.nodes[m].spend {
                set.insert(sp.budget);
            }
            for (callee, _) in &model.nodes[m].calls {
                let cc = effects.component_of[*callee];
                if cc != ci {
                    set.extend(reached[cc].iter().copied());
                }
            }
        }
        reached[ci] = set;
    }
    let mut out = Vec::new();
    for (id, node) in model.nodes.iter().enumerate() {
        if !node.is_tool() || node.is_extern() {
            continue;
        }
        let own = node.spend.map(|sp| sp.budget);
        let ci = effects.component_of[id];
        for budget in &reached[ci] {
            if Some(*budget) == own {
                continue;
            }
            // The call through which the budget is reached (the first one written); a callee's own `spend`
            // is in its component's set.
            let via = node.calls.iter().find(|(c, _)| reached[effects.component_of[*c]].contains(budget));
            let mut d = Diagnostic::new(
                Code::CheckSpendUnbound,
                format!("`{}` spends from the budget `{budget}` but says no amount of its own", node.name),
            )
            .at(node.name_span, "every execution of a spending tool is checked against its budget");
            if let Some((callee, span)) = via {
                d = d.with(*span, format!("spends from `{budget}` through `{}`", model.nodes[*callee].name));
            }
            d = match own {
                None => d.help(format!(
                    "add `spend {budget} by PARAM` to `{}`, with a `money` parameter holding the amount the host computes",
                    node.name
                )),
                Some(other) => d.help(format!(
                    "`{}` spends from `{other}`; a tool spends from one budget: split it, or call a tool of the same budget",
                    node.name
                )),
            };
            out.push(d);
        }
    }
    out
}

/// What the levels pass knows of one offered triple: each layer's evaluation (kept for the lints), and what
/// the decision is made of.
pub(super) struct TripleFacts<'a> {
    pub(super) agent: &'a str,
    pub(super) skill: &'a str,
    pub(super) tool: NodeId,
    /// The layers in order: package-wide (if any), agent, skill (if it has a `may`).
    pub(super) layers: Vec<LayerEval>,
    /// The most the agent layer gives: a skill entry below it cannot take effect for the arguments that
    /// give it.
    pub(super) agent_level: Option<Level>,
    /// The least the agent layer gives: a skill entry below it can take effect for no arguments at all.
    pub(super) agent_least: Option<Level>,
    /// Every level the triple can take (the strictest layer, over every combination).
    pub(super) possible: BTreeSet<Level>,
    pub(super) because: Vec<(Reason, Option<Span>)>,
    pub(super) reserved: bool,
    pub(super) route: Route,
    pub(super) route_span: Option<Span>,
    /// Each mode whose layer says something about the tool: its name, its evaluation and every level the
    /// triple can take in it.
    pub(super) modes: Vec<(&'a str, LayerEval, BTreeSet<Level>)>,
}

impl<'a> TripleFacts<'a> {
    /// Whether the triple can be proposed: a route can be used.
    pub(super) fn proposes(&self) -> bool {
        self.possible.iter().any(|l| matches!(l, Level::Propose | Level::ProposeEveryTime))
    }

    /// The decision the table is built from.
    pub(super) fn into_decision(self) -> TripleDecision<'a> {
        let level = if self.possible.len() == 1 { self.possible.iter().next().copied() } else { None };
        let modes = self
            .modes
            .into_iter()
            .filter_map(|(mode, eval, possible)| {
                let row = eval.row?;
                let level = if possible.len() == 1 { possible.iter().next().copied() } else { None };
                Some(super::ModeDecision {
                    mode,
                    level,
                    possible: possible.into_iter().collect(),
                    row,
                    because: eval.because,
                })
            })
            .collect();
        TripleDecision {
            agent: self.agent,
            skill: self.skill,
            tool: self.tool,
            level,
            possible: self.possible.into_iter().collect(),
            rows: self.layers.into_iter().filter_map(|l| l.row).collect(),
            because: self.because,
            route: self.route,
            route_span: self.route_span,
            reserved: self.reserved,
            modes,
        }
    }
}

/// The levels of every offered triple (spec §3 steps 2–4): per layer named, class and inherited levels,
/// the strictest layer, the reserved subject. No diagnostics: the lints read the result.
pub(super) fn compute<'a>(a: &Analysis<'a>) -> Vec<TripleFacts<'a>> {
    let reach = reach_sets(&a.model, &a.effects);
    let mut out = Vec::new();
    for (agent_name, agent) in &a.model.agents {
        for skill_name in &agent.skills {
            let Some(skill) = a.model.skills.get(skill_name) else { continue };
            for &tool in &skill.tools {
                let level_set = a.effects.level_set(&a.model, tool);
                let reach_t = &reach[a.effects.component_of[tool]];
                let mut layers = Vec::new();
                if let Some(r) = &a.model.package_rules {
                    layers.push(eval_layer(a, r, "", tool, level_set, reach_t));
                }
                let agent_eval = eval_layer(a, &agent.rules, agent_name, tool, level_set, reach_t);
                let (agent_least, agent_level) = (agent_eval.min(), agent_eval.max());
                layers.push(agent_eval);
                if let Some(r) = &skill.rules {
                    layers.push(eval_layer(a, r, skill_name, tool, level_set, reach_t));
                }
                let reserved = a.effects.sets[tool].is_reserved();
                let mut possible: BTreeSet<Option<Level>> = BTreeSet::from([None]);
                for l in &layers {
                    possible = possible.iter().flat_map(|x| l.possible.iter().map(move |y| (*x).max(*y))).collect();
                }
                let mut possible: BTreeSet<Level> = possible.into_iter().map(|l| l.unwrap_or(Level::Alone)).collect();
                let mut because: Vec<(Reason, Option<Span>)> =
                    layers.iter().flat_map(|l| l.because.iter().cloned()).collect();
                if reserved {
                    possible = BTreeSet::from([Level::Never]);
                    let path = a.effects.witness_path(tool, RESERVED_SLOT);
                    let (via, span) = match path.last() {
                        Some((at, NextHop::Operation(i))) => {
                            (a.model.nodes[*at].name.to_string(), Some(a.model.nodes[*at].operations[*i].span))
                        }
                        _ => (a.model.nodes[tool].name.to_string(), None),
                    };
                    because.push((
                        Reason {
                            layer: None,
                            kind: ReasonKind::Reserved,
                            level: Level::Never,
                            rule: "writes the reserved entity permits".to_string(),
                            via: Some(via),
                            at: span.map(|s| source_ref(a.sources, s)),
                        },
                        span,
                    ));
                }
                let mut modes = Vec::new();
                for (mode_name, mode) in &a.model.modes {
                    let Some(r) = &mode.rules else { continue };
                    let eval = eval_layer(a, r, mode_name, tool, level_set, reach_t);
                    if eval.row.is_none() {
                        continue;
                    }
                    let in_mode: BTreeSet<Level> = if reserved {
                        BTreeSet::from([Level::Never])
                    } else {
                        possible
                            .iter()
                            .flat_map(|x| eval.possible.iter().map(move |y| y.map_or(*x, |y| y.max(*x))))
                            .collect()
                    };
                    modes.push((*mode_name, eval, in_mode));
                }
                let (route, route_span) = match skill.routes.get(&tool).or_else(|| agent.routes.get(&tool)) {
                    Some((r, span)) => (r.clone(), Some(*span)),
                    None => (Route::Requester, None),
                };
                out.push(TripleFacts {
                    agent: agent_name,
                    skill: skill_name,
                    tool,
                    layers,
                    agent_level,
                    agent_least,
                    possible,
                    because,
                    reserved,
                    route,
                    route_span,
                    modes,
                });
            }
        }
    }
    out
}

/// What one delegating link adds for one tool a descendant can be offered (spec §3b): the link's agent
/// layer and delegating skill's layer for the tool, as §3 step 2.
#[derive(Debug)]
pub struct LinkDecision<'a> {
    /// The delegating agent.
    pub agent: &'a str,
    /// The skill it works in, which has the `delegates` list.
    pub skill: &'a str,
    /// The tool a descendant can be offered.
    pub tool: NodeId,
    /// The strictest level of the two layers, when it does not depend on the arguments.
    pub level: Option<Level>,
    /// The agent layer's row, then the skill layer's when it says something.
    pub rows: Vec<Row>,
    /// Why, each reason with the span of its rule.
    pub because: Vec<(Reason, Option<Span>)>,
    /// The link's own route for the tool when it is not `requester`.
    pub route: Option<Route>,
}

/// Every tool a skill's descendants can be offered over the transitive closure of `delegates` (spec §3b),
/// by skill; a cycle (an error of its own) ends where it closes.
fn descendant_tools<'a>(model: &Model<'a>) -> std::collections::BTreeMap<&'a str, BTreeSet<NodeId>> {
    fn visit<'a>(
        model: &Model<'a>,
        skill: &'a str,
        memo: &mut std::collections::BTreeMap<&'a str, BTreeSet<NodeId>>,
        on_path: &mut BTreeSet<&'a str>,
    ) -> BTreeSet<NodeId> {
        if let Some(done) = memo.get(skill) {
            return done.clone();
        }
        let mut out = BTreeSet::new();
        if !on_path.insert(skill) {
            return out;
        }
        if let Some(s) = model.skills.get(skill) {
            for (_, child, _) in &s.delegates {
                if let Some(c) = model.skills.get(child) {
                    out.extend(c.tools.iter().copied());
                }
                out.extend(visit(model, child, memo, on_path));
            }
        }
        on_path.remove(skill);
        memo.insert(skill, out.clone());
        out
    }
    let mut memo = std::collections::BTreeMap::new();
    for (name, s) in &model.skills {
        if !s.delegates.is_empty() {
            let mut on_path = BTreeSet::new();
            visit(model, name, &mut memo, &mut on_path);
        }
    }
    memo.retain(|_, tools| !tools.is_empty());
    memo
}

/// The rows of every delegating link (spec §3b): for every agent, each of its skills that delegates, and
/// every tool that skill's descendants can be offered, in (agent, skill, tool name) order.
pub(super) fn compute_links<'a>(a: &Analysis<'a>) -> Vec<LinkDecision<'a>> {
    let reach = reach_sets(&a.model, &a.effects);
    let below = descendant_tools(&a.model);
    let mut out = Vec::new();
    for (agent_name, agent) in &a.model.agents {
        for skill_name in &agent.skills {
            let (Some(skill), Some(tools)) = (a.model.skills.get(skill_name), below.get(skill_name)) else {
                continue;
            };
            let mut tools: Vec<NodeId> = tools.iter().copied().collect();
            tools.sort_by_key(|t| a.model.nodes[*t].name);
            for tool in tools {
                let level_set = a.effects.level_set(&a.model, tool);
                let reach_t = &reach[a.effects.component_of[tool]];
                let mut layers = vec![eval_layer(a, &agent.rules, agent_name, tool, level_set, reach_t)];
                if let Some(r) = &skill.rules {
                    layers.push(eval_layer(a, r, skill_name, tool, level_set, reach_t));
                }
                let mut possible: BTreeSet<Option<Level>> = BTreeSet::from([None]);
                for l in &layers {
                    possible = possible.iter().flat_map(|x| l.possible.iter().map(move |y| (*x).max(*y))).collect();
                }
                let possible: BTreeSet<Level> = possible.into_iter().map(|l| l.unwrap_or(Level::Alone)).collect();
                let level = if possible.len() == 1 { possible.iter().next().copied() } else { None };
                let route = skill
                    .routes
                    .get(&tool)
                    .or_else(|| agent.routes.get(&tool))
                    .map(|(r, _)| r.clone())
                    .filter(|r| *r != Route::Requester);
                out.push(LinkDecision {
                    agent: agent_name,
                    skill: skill_name,
                    tool,
                    level,
                    because: layers.iter().flat_map(|l| l.because.iter().cloned()).collect(),
                    rows: layers.into_iter().filter_map(|l| l.row).collect(),
                    route,
                });
            }
        }
    }
    out
}
