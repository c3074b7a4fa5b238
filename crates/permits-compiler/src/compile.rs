//! Compile: the level of every offered (agent, skill, tool) exactly as spec §3, the checks that need
//! levels, and the decision table of spec §4.
//!
//! Inheritance ("a wrapper cannot launder a tool the agent must not run alone") is computed in one pass
//! over the condensation: each component carries the set of restrictively named tools it reaches, so the
//! cost does not grow with the number of layers times tools.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::check::{self, ClassSource, Model, NodeId, Rules, layer_noun};
use crate::diagnostics::{Code, Diagnostic};
use crate::effects::{self, EffectSet, Effects, Hop, RESERVED_SLOT};
use crate::syntax::{self, Loaded, Sources, Span};
use crate::table::{
    self, AgentInfo, Authority, BudgetInfo, EffectClass, EffectInfo, EntityInfo, Entry, Header, Hop as TableHop,
    HopKind, Layer, Level, NamedRow, PackageSettings, ParamInfo, PersonInfo, QueueInfo, Reason, ReasonKind, RoleInfo,
    Route, Row, SkillInfo, SourceRef, SpendInfo, Table, ToolInfo, VersionInfo, canonical_digest,
};

/// The compiler's name and version, as written in `header.compiler`.
pub const COMPILER: &str = concat!("permitc ", env!("CARGO_PKG_VERSION"));

/// Everything the analysis knows about a package that checked clean enough to analyse.
#[derive(Debug)]
pub struct Analysis<'a> {
    /// The sources, for places.
    pub sources: &'a Sources,
    /// The resolved package.
    pub model: Model<'a>,
    /// Inferred effects.
    pub effects: Effects,
    /// Every offered triple's decision, sorted by (agent, skill, tool).
    pub decisions: Vec<Decision<'a>>,
}

/// The compiled decision for one offered triple, with the spans of its reasons (for `explain`).
#[derive(Debug)]
pub struct Decision<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The skill.
    pub skill: &'a str,
    /// The tool.
    pub tool: NodeId,
    /// The level, when it does not depend on the arguments.
    pub level: Option<Level>,
    /// Every level the triple can take, least strict first (one element when `level` is set).
    pub possible: Vec<Level>,
    /// Per layer, what it says.
    pub rows: Vec<Row>,
    /// Why, each reason with the span of its rule (none for a synthetic default).
    pub because: Vec<(Reason, Option<Span>)>,
    /// Who decides.
    pub route: Route,
    /// Where the route is written, if it is.
    pub route_span: Option<Span>,
    /// Whether the tool writes the reserved entity.
    pub reserved: bool,
}

/// The outcome of one `test` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestOutcome {
    /// The test's name.
    pub name: String,
    /// How many expectations it holds.
    pub expectations: usize,
    /// Each expectation that failed: the triple, expected and actual level, and why.
    pub failures: Vec<TestFailure>,
}

/// One failed expectation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestFailure {
    /// `(agent, skill, tool)`.
    pub triple: String,
    /// The level written in the test.
    pub expected: Level,
    /// The level the table gives.
    pub actual: Level,
    /// Why the table gives it (the deciding rules, or why the triple is not offered).
    pub why: String,
}

/// The result of compiling one package.
#[derive(Debug)]
pub struct Output {
    /// The package's sources.
    pub sources: Sources,
    /// The table, when nothing but failed `test` expectations is an error (a package whose tests fail
    /// still compiles, so `permitc test` can report them; `compile` writes no table then).
    pub table: Option<Table>,
    /// The outcome of every `test` block (run when the package compiles; a failure is also an error
    /// diagnostic).
    pub tests: Vec<TestOutcome>,
    /// Every diagnostic of every stage, errors and warnings, in stage order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Output {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Whether every error is a failed `test` expectation (`test::failed`, `test::depends_on_arguments`):
    /// the table was built, only its tests failed.
    pub fn only_tests_failed(&self) -> bool {
        self.diagnostics.iter().filter(|d| d.is_error()).all(|d| d.code.is_test_failure())
    }
}

/// Loads, checks and compiles the package at `path` (a folder or one file).
///
/// Errors: [`syntax::LoadError`] when the path cannot be read; every problem in the sources is a
/// diagnostic in the [`Output`].
pub fn compile_package(path: &Path) -> Result<Output, syntax::LoadError> {
    Ok(compile_loaded(syntax::load_package(path)?))
}

/// Compiles the package at `path` and returns its table, or the rendered diagnostics (plain text, no
/// colour) when it has errors or cannot be read. A convenience for tests and hosts that compile at start.
///
/// Errors: the rendered diagnostics, as one string.
pub fn compile_path(path: &Path) -> Result<Table, String> {
    let out = compile_package(path).map_err(|e| e.to_string())?;
    match out.table {
        Some(t) if !out.has_errors() => Ok(t),
        _ => Err(crate::diagnostics::render_plain(&out.diagnostics, &out.sources)),
    }
}

/// Runs check, effects and levels on a loaded package and builds the table when nothing is an error.
pub fn compile_loaded(loaded: Loaded) -> Output {
    let Loaded { sources, package, mut diagnostics } = loaded;
    // A file that does not parse fails the package; analysing the rest would only add errors caused by
    // the missing file (an unknown name defined there, zero decisions).
    let unparsed = package.files.len() < sources.len();
    let mut tests = Vec::new();
    let table = if unparsed {
        None
    } else {
        let (analysis, mut diags) = analyze(&package, &sources);
        diagnostics.append(&mut diags);
        let errors = diagnostics.iter().any(Diagnostic::is_error);
        match analysis {
            Some(a) if !errors => {
                let table = build_table(&a);
                let (outcomes, mut failed) = run_tests(&a, &table);
                tests = outcomes;
                diagnostics.append(&mut failed);
                Some(table)
            }
            _ => None,
        }
    };
    Output { sources, table, tests, diagnostics }
}

/// Check, infer and decide. Returns the analysis and the diagnostics of these stages. Call it only on a
/// package whose every file parsed ([`compile_loaded`] does so).
pub fn analyze<'a>(package: &'a syntax::ast::Package, sources: &'a Sources) -> (Option<Analysis<'a>>, Vec<Diagnostic>) {
    let (model, mut diagnostics) = check::check(package);
    let (effects, mut d) = effects::infer(&model, sources);
    diagnostics.append(&mut d);
    diagnostics.append(&mut check_spend_binding(&model, &effects));
    let mut analysis = Analysis { sources, model, effects, decisions: Vec::new() };
    let mut d = decide_all(&mut analysis);
    diagnostics.append(&mut d);
    if analysis.decisions.is_empty() && !sources.is_empty() && !diagnostics.iter().any(Diagnostic::is_error) {
        diagnostics.push(
            Diagnostic::new(Code::LevelsNoDecisions, "the package compiles to zero decisions")
                .help("give an agent a `skills [..]` list whose skills list `tools [..]`; a package that decides nothing has lost something"),
        );
    }
    (Some(analysis), diagnostics)
}

/// Spec §6: every execution of a tool that spends from a budget is checked against it, so a tool that
/// reaches a `spend` through what it calls must say how much itself, from the same budget. Budgets
/// reached are propagated over the condensation (callees first), like effects. Reports
/// `permits::check::spend_unbound` naming the budget and the call through which it is reached.
fn check_spend_binding(model: &Model<'_>, effects: &Effects) -> Vec<Diagnostic> {
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
            // The call through which the budget is reached (the first one written).
            let via = node.calls.iter().find(|(c, _)| {
                let cc = effects.component_of[*c];
                reached[cc].contains(budget) || model.nodes[*c].spend.is_some_and(|sp| sp.budget == *budget)
            });
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

struct LayerEval {
    row: Option<Row>,
    /// Every level the layer can give, whatever the arguments.
    possible: BTreeSet<Option<Level>>,
    because: Vec<(Reason, Option<Span>)>,
    /// The callee that sets the inherited floor, with its rule's span.
    inherited_from: Option<(NodeId, Span)>,
}

impl LayerEval {
    fn max(&self) -> Option<Level> {
        self.possible.iter().max().copied().flatten()
    }
    fn min(&self) -> Option<Level> {
        self.possible.iter().min().copied().flatten()
    }
}

fn source_ref(sources: &Sources, span: Span) -> SourceRef {
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

fn decide_all(a: &mut Analysis<'_>) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    let reach = reach_sets(&a.model, &a.effects);
    let mut decisions = Vec::new();
    let mut reserved_warned: BTreeSet<NodeId> = BTreeSet::new();
    let mut loosen_warned: BTreeSet<(Span, &str)> = BTreeSet::new();
    let mut alone_inherit_warned: BTreeSet<Span> = BTreeSet::new();
    let mut agent_route_used: BTreeMap<Span, bool> = BTreeMap::new();
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
                // The least and the most the agent layer gives: a skill entry below the most cannot take
                // effect for the arguments that give it (below the least, for no arguments at all).
                let (agent_least, agent_level) = (agent_eval.min(), agent_eval.max());
                layers.push(agent_eval);
                if let Some(r) = &skill.rules {
                    layers.push(eval_layer(a, r, skill_name, tool, level_set, reach_t));
                }
                let reserved = a.effects.sets[tool].is_reserved();
                // Every level the triple can take: the strictest layer, over every combination.
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
                        Some((at, Hop::Operation(i))) => {
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
                    if reserved_warned.insert(tool) {
                        let mut d = Diagnostic::new(
                            Code::EffectsReserved,
                            format!(
                                "`{}` writes the reserved entity `permits`, so it is never for every agent",
                                a.model.nodes[tool].name
                            ),
                        )
                        .at(a.model.nodes[tool].name_span, "an agent must not widen its own authority");
                        for (span, msg) in effects::witness_labels(&a.model, &a.effects, tool, RESERVED_SLOT) {
                            d = d.with(span, msg);
                        }
                        diags.push(
                            d.help("remove it from the skills that offer it; no list or approval can make it run"),
                        );
                    }
                }
                // Warnings that need levels.
                for (l, rules) in layers
                    .iter()
                    .zip(a.model.package_rules.iter().chain(std::iter::once(&agent.rules)).chain(skill.rules.iter()))
                {
                    if let (Some(n), Some((callee, span))) = (rules.named_level(tool), l.inherited_from) {
                        if n.level == Level::Alone
                            && l.max() > Some(Level::Alone)
                            && alone_inherit_warned.insert(n.span)
                        {
                            let callee_name = a.model.nodes[callee].name;
                            diags.push(
                                Diagnostic::new(Code::LevelsAloneInherits, format!("`{}` is named `alone` but calls `{callee_name}`", a.model.nodes[tool].name))
                                    .at(n.span, "named alone here")
                                    .with(span, format!("`{callee_name}` is named `{}` here, and that wins", l.max().unwrap_or(Level::Alone)))
                                    .help("a wrapper cannot launder a tool it calls; name the wrapper at the callee's level, or stop calling it"),
                            );
                        }
                    }
                }
                if let Some(skill_rules) = &skill.rules {
                    if let Some(n) = skill_rules.named_level(tool) {
                        if agent_level.is_some_and(|al| n.level < al) && loosen_warned.insert((n.span, agent_name)) {
                            // A conditional agent entry: the skill's entry loses only where the agent is
                            // stricter, so say when.
                            let sometimes = agent_least.is_some_and(|least| n.level >= least);
                            // Name the agent rule that decides, not merely the first one.
                            let agent_reason = layers
                                .iter()
                                .find(|l| l.row.as_ref().is_some_and(|r| r.layer == Layer::Agent))
                                .and_then(|l| l.because.iter().rev().find(|(r, _)| Some(r.level) == l.max()).cloned());
                            let mut d = Diagnostic::new(
                                Code::LevelsSkillLoosens,
                                format!(
                                    "the skill `{skill_name}` names `{}` `{}`, but the agent `{agent_name}` says `{}`{}",
                                    a.model.nodes[tool].name,
                                    n.level,
                                    agent_level.unwrap_or(Level::Alone),
                                    if sometimes { " for some arguments" } else { "" }
                                ),
                            )
                            .at(
                                n.span,
                                if sometimes {
                                    "this entry cannot take effect where the agent is stricter"
                                } else {
                                    "this entry cannot take effect"
                                },
                            );
                            match agent_reason {
                                Some((r, Some(span))) => d = d.with(span, format!("the agent's rule `{}` wins", r.rule)),
                                Some((r, None)) => d = d.help(format!("a skill can only tighten: the agent's `{}` wins; change the agent's rules to loosen", r.rule)),
                                None => {}
                            }
                            if d.help.is_none() {
                                d = d.help("a skill can only tighten: the agent's rule wins; change the agent's rules to loosen");
                            }
                            diags.push(d);
                        }
                    }
                    for (class, (sl, span)) in &skill_rules.settings {
                        if let Some((al, _)) = agent.rules.class_level(*class) {
                            if *sl < al && *sl != Level::Alone && loosen_warned.insert((*span, agent_name)) {
                                diags.push(
                                    Diagnostic::new(
                                        Code::LevelsSkillLoosens,
                                        format!("the skill `{skill_name}` sets `{class}: {sl}`, but the agent `{agent_name}` says `{class}: {al}`"),
                                    )
                                    .at(*span, "this setting cannot take effect")
                                    .help("a skill can only tighten: the agent's setting wins"),
                                );
                            }
                        }
                    }
                }
                let (route, route_span) = match skill.routes.get(&tool).or_else(|| agent.routes.get(&tool)) {
                    Some((r, span)) => (r.clone(), Some(*span)),
                    None => (Route::Requester, None),
                };
                let proposes = possible.iter().any(|l| matches!(l, Level::Propose | Level::ProposeEveryTime));
                let level = if possible.len() == 1 { possible.iter().next().copied() } else { None };
                let shown = possible.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(" or ");
                if let Some(span) = route_span {
                    if skill.routes.contains_key(&tool) {
                        if !proposes {
                            diags.push(
                                Diagnostic::new(
                                    Code::LevelsRouteUnused,
                                    format!("the route of `{}` in `{skill_name}` can never be used for the agent `{agent_name}`", a.model.nodes[tool].name),
                                )
                                .at(span, format!("the triple is `{shown}`, so nothing is proposed"))
                                .help("routes apply to `propose` and `propose_every_time`; remove the route or change the level"),
                            );
                        }
                    } else {
                        let used = agent_route_used.entry(span).or_insert(false);
                        *used |= proposes;
                    }
                }
                decisions.push(Decision {
                    agent: agent_name,
                    skill: skill_name,
                    tool,
                    level,
                    possible: possible.into_iter().collect(),
                    rows: layers.into_iter().filter_map(|l| l.row).collect(),
                    because,
                    route,
                    route_span,
                    reserved,
                });
            }
        }
    }
    for (span, used) in agent_route_used {
        if !used {
            diags.push(
                Diagnostic::new(Code::LevelsRouteUnused, "this route can never be used")
                    .at(span, "every triple it covers is `alone` or `never`")
                    .help("routes apply to `propose` and `propose_every_time`; remove the route or change the level"),
            );
        }
    }
    decisions.sort_by(|x, y| {
        (x.agent, x.skill, a.model.nodes[x.tool].name).cmp(&(y.agent, y.skill, a.model.nodes[y.tool].name))
    });
    a.decisions = decisions;
    diags
}

fn table_hop(a: &Analysis<'_>, node: NodeId, hop: Hop) -> TableHop {
    match hop {
        Hop::Operation(i) => {
            let op = &a.model.nodes[node].operations[i];
            TableHop { kind: HopKind::Operation, text: op.text.clone(), at: source_ref(a.sources, op.span) }
        }
        Hop::Call(c, span) => {
            TableHop { kind: HopKind::Call, text: a.model.nodes[c].name.to_string(), at: source_ref(a.sources, span) }
        }
        Hop::Claim(span) => TableHop {
            kind: HopKind::Claim,
            text: a.sources.slice(span).trim().to_string(),
            at: source_ref(a.sources, span),
        },
    }
}

/// The canonical form of a layer's rules: preset, settings and named entries (no spans).
fn rules_form(a: &Analysis<'_>, rules: Option<&Rules<'_>>) -> serde_json::Value {
    let Some(rules) = rules else { return serde_json::Value::Null };
    let preset = rules.preset.map(|(p, _)| p.as_str());
    let settings: BTreeMap<&str, &str> = rules.settings.iter().map(|(c, (l, _))| (c.as_str(), l.as_str())).collect();
    let named: BTreeMap<&str, Vec<&str>> = rules
        .named
        .iter()
        .map(|(id, v)| {
            let mut levels: Vec<&str> = v.iter().map(|r| r.level.as_str()).collect();
            levels.sort_unstable();
            (a.model.nodes[*id].name, levels)
        })
        .collect();
    serde_json::json!({ "preset": preset, "settings": settings, "named": named })
}

fn digest_of(value: &serde_json::Value) -> String {
    // INVARIANT: a `Value` always serializes (its map keys are strings); a failure here would otherwise be
    // a well-formed wrong digest.
    canonical_digest(value).expect("a JSON value serializes")
}

/// A table value as JSON, for a digest.
fn json_of<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Value {
    // INVARIANT: the table's types derive `Serialize` with string map keys only, so this cannot fail; a
    // default here would be a well-formed wrong digest.
    serde_json::to_value(value).expect("table values serialize")
}

/// Builds the decision table from an analysis without errors.
pub fn build_table(a: &Analysis<'_>) -> Table {
    let model = &a.model;
    let mut tools = BTreeMap::new();
    for (i, node) in model.nodes.iter().enumerate() {
        let crate::check::NodeKind::Tool(t) = node.kind else { continue };
        let mut effects_map = BTreeMap::new();
        for class in a.effects.sets[i].classes() {
            let s = crate::model::slot(class);
            if let Some(hop) = a.effects.witness[i][s] {
                effects_map.insert(
                    class,
                    EffectInfo { assumed: !a.effects.real[i].contains(class), witness: table_hop(a, i, hop) },
                );
            }
        }
        tools.insert(
            node.name.to_string(),
            ToolInfo {
                label: t.label.as_ref().map(|l| l.value.clone()).unwrap_or_default(),
                doc: node.declaration.doc_text(),
                external: node.is_extern(),
                params: node.params.iter().map(|(n, ty)| ParamInfo { name: n.to_string(), ty: ty.clone() }).collect(),
                effects: effects_map,
                claim: node.claim.map(|(c, _)| c.classes().collect()),
                reserved: a.effects.witness[i][RESERVED_SLOT].map(|h| table_hop(a, i, h)),
                version: node.version.map(|(p, f)| VersionInfo { param: p.to_string(), field: f.to_string() }),
                subject: node.subject.map(str::to_string),
                spends: node
                    .spend
                    .filter(|_| !node.is_extern())
                    .map(|sp| SpendInfo { budget: sp.budget.to_string(), param: sp.param.to_string() }),
                definition_digest: a.effects.definition_digest[i].clone(),
            },
        );
    }
    let mut skills = BTreeMap::new();
    let mut skill_digests = BTreeMap::new();
    for (name, s) in &model.skills {
        let routes: BTreeMap<String, Route> =
            s.routes.iter().map(|(id, (r, _))| (model.nodes[*id].name.to_string(), r.clone())).collect();
        let digest =
            digest_of(&serde_json::json!({ "may": rules_form(a, s.rules.as_ref()), "routes": json_of(&routes) }));
        skill_digests.insert(*name, digest.clone());
        skills.insert(
            name.to_string(),
            SkillInfo {
                description: s.skill.description.as_ref().map(|d| d.value.clone()),
                doc: s.declaration.doc_text(),
                tools: s.tools.iter().map(|id| model.nodes[*id].name.to_string()).collect(),
                routes,
                rules_digest: digest,
            },
        );
    }
    let agents = model
        .agents
        .iter()
        .map(|(name, ag)| {
            (
                name.to_string(),
                AgentInfo {
                    purpose: ag.agent.purpose.as_ref().map(|p| p.value.clone()),
                    doc: ag.declaration.doc_text(),
                    acts_as: ag.acts_as.iter().map(|s| s.to_string()).collect(),
                    sponsor: ag.sponsor.unwrap_or_default().to_string(),
                    skills: ag.skills.iter().map(|s| s.to_string()).collect(),
                },
            )
        })
        .collect();
    let mut entries: BTreeMap<String, BTreeMap<String, BTreeMap<String, Entry>>> = BTreeMap::new();
    for d in &a.decisions {
        let tool_name = model.nodes[d.tool].name;
        let info = &tools[tool_name];
        let rules: Vec<serde_json::Value> = d
            .because
            .iter()
            .map(|(r, _)| serde_json::json!({ "layer": r.layer, "kind": r.kind, "level": r.level, "rule": r.rule, "via": r.via }))
            .collect();
        let digest = digest_of(&serde_json::json!({
            "rows": json_of(&d.rows),
            "reserved": d.reserved,
            "route": json_of(&d.route),
            "effects": json_of(&info.effects)
                .as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.get("assumed").cloned().unwrap_or_default())).collect::<serde_json::Map<_, _>>()),
            "claim": json_of(&info.claim),
            "definition_digest": info.definition_digest,
            "version": json_of(&info.version),
            "rules": rules,
            "skill": skill_digests.get(d.skill),
        }));
        entries.entry(d.agent.to_string()).or_default().entry(d.skill.to_string()).or_default().insert(
            tool_name.to_string(),
            Entry {
                level: d.level,
                rows: d.rows.clone(),
                reserved: d.reserved,
                route: d.route.clone(),
                because: d.because.iter().map(|(r, _)| r.clone()).collect(),
                entry_digest: digest,
            },
        );
    }
    let doc = |name: &str| model.docs.get(name).cloned();
    let holders = |k| model.authority.get(&k).cloned().unwrap_or_default();
    let mut table = Table {
        header: Header {
            format: table::FORMAT,
            compiler: COMPILER.to_string(),
            source_digest: a.sources.digest(),
            table_digest: String::new(),
        },
        package: PackageSettings {
            proposal_lifetime_seconds: model.proposal_lifetime.unwrap_or(table::DEFAULT_PROPOSAL_LIFETIME_SECONDS),
            grant_lifetime_seconds: model.grant_lifetime.unwrap_or(table::DEFAULT_GRANT_LIFETIME_SECONDS),
        },
        tools,
        agents,
        skills,
        persons: model
            .persons
            .iter()
            .map(|(n, roles)| {
                (n.to_string(), PersonInfo { doc: doc(n), roles: roles.iter().map(|r| r.to_string()).collect() })
            })
            .collect(),
        roles: model.roles.keys().map(|r| (r.to_string(), RoleInfo { doc: doc(r) })).collect(),
        queues: model
            .queues
            .iter()
            .map(|(n, h)| (n.to_string(), QueueInfo { doc: doc(n), decided_by: h.clone() }))
            .collect(),
        entities: model
            .entities
            .iter()
            .map(|(n, e)| {
                (n.to_string(), EntityInfo { doc: doc(n), fields: e.fields.iter().map(|f| f.name.clone()).collect() })
            })
            .collect(),
        authority: Authority {
            supervises: holders(crate::syntax::ast::AuthorityKind::Supervises),
            decides_proposals: holders(crate::syntax::ast::AuthorityKind::DecidesProposals),
            widens_autonomy: holders(crate::syntax::ast::AuthorityKind::WidensAutonomy),
        },
        budgets: model
            .budgets
            .iter()
            .map(|(n, b)| {
                let info = BudgetInfo {
                    currency: b.currency.clone(),
                    unit: b.unit.to_string(),
                    ceiling: b.ceiling,
                    alone_up_to: b.alone_up_to,
                    doc: doc(n),
                };
                (n.to_string(), info)
            })
            .collect(),
        entries,
    };
    table.seal();
    table
}

/// Runs the package's `test` blocks against its table, on the one evaluator (spec §7): an expectation
/// written with arguments states exactly what the runtime decides for that call ([`Table::level_of`], no
/// person); written without, the level for every well-typed argument set ([`Table::possible_levels`], the
/// allowance floor included), an error when that depends on the arguments.
fn run_tests(a: &Analysis<'_>, table: &Table) -> (Vec<TestOutcome>, Vec<Diagnostic>) {
    let mut outcomes = Vec::new();
    let mut diags = Vec::new();
    for t in &a.model.tests {
        let mut failures = Vec::new();
        for e in &t.expects {
            let triple = format!("({}, {}, {})", e.agent, e.skill, e.tool);
            let (actual, why) = match expectation_level(table, e) {
                Ok(found) => found,
                Err(levels) => {
                    let words: Vec<String> = levels.iter().map(|l| format!("`{l}`")).collect();
                    let words = words.join(" or ");
                    diags.push(
                        Diagnostic::new(
                            Code::TestDependsOnArguments,
                            format!("test `{}`: the level of {triple} depends on the arguments: {words}", t.name),
                        )
                        .at(e.span, "no arguments given")
                        .help(format!(
                            "give the call's arguments, one `expect` per case: `expect {}.{}.{}(…) is {}`",
                            e.agent, e.skill, e.tool, e.level
                        )),
                    );
                    let actual = levels.last().copied().unwrap_or(Level::Never);
                    failures.push(TestFailure {
                        triple,
                        expected: e.level,
                        actual,
                        why: format!("it depends on the arguments: {words}"),
                    });
                    continue;
                }
            };
            if actual != e.level {
                diags.push(
                    Diagnostic::new(
                        Code::TestFailed,
                        format!("test `{}`: {triple} is `{actual}`, not `{}`", t.name, e.level),
                    )
                    .at(e.level_span, format!("expected `{}`", e.level))
                    .with(e.span, format!("the table says `{actual}`"))
                    .help(format!("why: {why}; change the policy or the expectation")),
                );
                failures.push(TestFailure { triple, expected: e.level, actual, why });
            }
        }
        outcomes.push(TestOutcome { name: t.name.to_string(), expectations: t.expects.len(), failures });
    }
    (outcomes, diags)
}

/// The level an expectation finds, with why; `Err` with every possible level when it is written without
/// arguments and the level depends on them.
fn expectation_level(table: &Table, e: &crate::check::ExpectModel<'_>) -> Result<(Level, String), Vec<Level>> {
    if e.args.is_empty() {
        return match table.possible_levels(e.agent, e.skill, e.tool) {
            Err(why) => Ok((Level::Never, why.to_string())),
            Ok(levels) if levels.len() == 1 => {
                let level = levels.first().copied().unwrap_or(Level::Never);
                let because =
                    table.entry(e.agent, e.skill, e.tool).map(|entry| entry.because.as_slice()).unwrap_or(&[]);
                Ok((level, deciding_rules(because, level)))
            }
            Ok(levels) => Err(levels.into_iter().collect()),
        };
    }
    let arguments = serde_json::Value::Object(e.args.clone());
    let call =
        crate::table::CallRef { agent: e.agent, skill: e.skill, tool: e.tool, arguments: &arguments, requester: None };
    Ok(match table.level_of(call) {
        Err(why) => (Level::Never, why.to_string()),
        Ok(of) if of.floored => (of.level, of.spend.map(|s| s.allowance_words()).unwrap_or_default()),
        Ok(of) => (of.level, deciding_rules(&of.entry.because, of.level)),
    })
}

/// The rules behind a level, in words: "decided by `never [X]` (a.permits:3)".
fn deciding_rules(because: &[crate::table::Reason], level: Level) -> String {
    let rules: Vec<String> = because
        .iter()
        .filter(|r| r.level == level)
        .map(|r| match &r.at {
            Some(at) => format!("`{}` ({at})", r.rule),
            None => format!("`{}`", r.rule),
        })
        .collect();
    if rules.is_empty() { "the rows of the entry".to_string() } else { format!("decided by {}", rules.join(", ")) }
}
