//! `explain`: why an (agent, skill, tool) gets its level (spec §7) — computed here as a value, rendered by
//! the command line as text or JSON. The value holds everything either rendering shows: the level or the
//! levels it can take, the route, every reason with its place and the rule as written, the witness path of
//! each effect, the claim and the budget.
//!
//! The JSON form (`permitc explain --format json`) is this value serialized: its shape is the type.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::compile::Analysis;
use crate::diagnostics::closest;
use crate::effects::{self, NextHop};
use crate::syntax::Span;
use crate::table::{Layer, Level, NotOffered, ParamType, ReasonKind, Route, Row};

/// What `explain` says of one triple.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Explanation {
    /// The triple is not offered: `never`, with the runtime's reason.
    NotOffered(NotOfferedTriple),
    /// The triple is offered.
    Offered(Box<OfferedTriple>),
    /// The triple is offered, but the chain it was asked through has a link that is not a declared
    /// delegation (spec §3b): `never`, with the runtime's reason.
    Undeclared(UndeclaredChain),
}

/// A delegated call through a chain with a link that is not a declared delegation (spec §3b): the call is
/// `never`, a decision like any other (the same as `permitc decide --via` and the runtime give).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UndeclaredChain {
    /// The agent asked about.
    pub agent: String,
    /// The skill asked about.
    pub skill: String,
    /// The tool asked about.
    pub tool: String,
    /// The chain asked through, nearest first.
    pub via: Vec<crate::table::ChainLink>,
    /// Always `never`.
    pub level: Level,
    /// The first undeclared link, in the runtime's words ("not a declared delegation: `Researcher.Look`
    /// does not delegate to `Coder.FixBug`").
    pub refusal: String,
}

/// A triple that is not offered (spec §3 step 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotOfferedTriple {
    /// The agent asked about.
    pub agent: String,
    /// The skill asked about.
    pub skill: String,
    /// The tool asked about.
    pub tool: String,
    /// Always `never`.
    pub level: Level,
    /// Always `false`.
    pub offered: bool,
    /// Why, in the runtime's words ("unknown skill").
    pub reason: NotOffered,
    /// When a name is not in the package: "unknown skill `Estimat`; did you mean `Estimate`?". Not in the
    /// JSON form; the command line prints it as an error.
    #[serde(skip)]
    pub unknown: Option<String>,
}

/// An offered triple, explained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OfferedTriple {
    /// The agent.
    pub agent: String,
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// The level, when it does not depend on the arguments.
    pub level: Option<Level>,
    /// Every level the triple can take, least strict first.
    pub possible: Vec<Level>,
    /// Always `true`.
    pub offered: bool,
    /// Who decides a proposal.
    pub route: Route,
    /// The route in words: for `requester`, who that is ("the sponsor `Noor` when it is for nobody").
    #[serde(skip)]
    pub route_words: String,
    /// Every rule behind the level.
    pub reasons: Vec<ExplainedReason>,
    /// The witness path of each effect of the tool (and of the reserved subject).
    pub witnesses: Vec<Witness>,
    /// The table's rows for the triple (the mode's row last, when explained in a mode that says something).
    pub rows: Vec<Row>,
    /// The mode the triple is explained in (spec §3c), if any; absent from the JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The delegation chain the call is explained through (spec §3b), nearest first; absent from the JSON
    /// for a direct call. Each link's rows follow the entry's (and the mode's) in `rows`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<crate::table::ChainLink>,
    /// The budget the tool spends from.
    pub budget: Option<BudgetUse>,
    /// The tool's claim, in words (`reads + sends`), when it has one.
    #[serde(skip)]
    pub claim: Option<String>,
    /// The tool's `shell` parameter, when it has one: its line is judged part by part (spec §3a).
    #[serde(skip)]
    pub shell: Option<String>,
}

/// One reason, with where its rule is written and the rule as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExplainedReason {
    /// The layer; `None` for the reserved subject.
    pub layer: Option<Layer>,
    /// What kind of rule.
    pub kind: ReasonKind,
    /// The level the rule gives.
    pub level: Level,
    /// The rule's canonical form.
    pub rule: String,
    /// The effect class or the callee responsible (see [`crate::table::Reason::via`]).
    pub via: Option<String>,
    /// `file:line`, or `None` for a synthetic default.
    pub at: Option<String>,
    /// The rule as written, whitespace collapsed and comments removed.
    pub text: Option<String>,
    /// For a delegated call, the link whose layer gives this reason (`Coder.FixBug`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Whether the rule decides the level (an `*` in the text form).
    #[serde(skip)]
    pub decisive: bool,
}

/// The witness of one effect: the call path to an operation that proves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Witness {
    /// The effect class, or `reserved` for the reserved subject.
    pub effect: &'static str,
    /// The path: `CloseTicket → notify → send email`.
    pub path: String,
    /// `file:line` of the operation (or the extern tool's claim).
    pub at: String,
    /// Whether the path ends at an extern tool's claim.
    pub assumed: bool,
}

/// The budget a tool spends from (spec §6), with its figures in the budget's minor unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetUse {
    /// The budget.
    pub name: String,
    /// The tool's `money` parameter that holds the amount.
    pub by: String,
    /// The currency code.
    pub currency: String,
    /// The minor unit (`cents`).
    pub unit: String,
    /// The cumulative ceiling.
    pub ceiling: u64,
    /// The automatic allowance per call.
    pub alone_up_to: u64,
    /// `per_task`: the most one task (one operation key) may hold reserved and spent; absent from the JSON
    /// when the budget sets none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_task: Option<u64>,
    /// `file:line` of the budget's declaration.
    pub at: String,
}

/// Explains (agent, skill, tool) in an analysed package. A name that is not in the package gives the
/// runtime's answer, `never` with its reason, and says which name is unknown and the nearest one.
pub fn explain(a: &Analysis<'_>, agent: &str, skill: &str, tool: &str) -> Explanation {
    explain_in(a, agent, skill, tool, None)
}

/// [`explain`] for a call in `mode` (spec §3c): the mode's row is one more layer, its rules are among the
/// reasons and the level is the level in the mode. A mode the package does not declare, or one that says
/// nothing about the tool, adds nothing (the command line refuses an unknown mode before it asks).
pub fn explain_in(a: &Analysis<'_>, agent: &str, skill: &str, tool: &str, mode: Option<&str>) -> Explanation {
    let Some(d) = offered(a, agent, skill, tool).ok().and_then(|()| {
        a.decisions.iter().find(|d| d.agent == agent && d.skill == skill && a.model.nodes[d.tool].name == tool)
    }) else {
        let reason = offered(a, agent, skill, tool).err().unwrap_or(NotOffered::NotSkillsTool);
        return Explanation::NotOffered(NotOfferedTriple {
            agent: agent.to_string(),
            skill: skill.to_string(),
            tool: tool.to_string(),
            level: Level::Never,
            offered: false,
            reason,
            unknown: unknown_name(a, agent, skill, tool),
        });
    };
    let moded = mode.and_then(|m| d.modes.iter().find(|x| x.mode == m));
    let (level, possible) = match moded {
        Some(m) => (m.level, m.possible.clone()),
        None => (d.level, d.possible.clone()),
    };
    let strictest = possible.iter().max().copied().unwrap_or(Level::Never);
    let reasons = d
        .because
        .iter()
        .chain(moded.into_iter().flat_map(|m| m.because.iter()))
        .map(|(r, span)| {
            let (at, text) = span.map(|s| rule_text(a, s)).unzip();
            ExplainedReason {
                layer: r.layer,
                kind: r.kind,
                level: r.level,
                rule: r.rule.clone(),
                via: r.via.clone(),
                at,
                text,
                link: None,
                decisive: level.is_none_or(|l| l == r.level) || r.level == strictest,
            }
        })
        .collect();
    let mut witnesses = Vec::new();
    for s in 0..effects::SLOTS {
        if !a.effects.sets[d.tool].has_slot(s) {
            continue;
        }
        let mut hops = vec![tool.to_string()];
        let mut end = String::new();
        for (at, hop) in a.effects.witness_path(d.tool, s) {
            match hop {
                NextHop::Call(c, _) => hops.push(a.model.nodes[c].name.to_string()),
                NextHop::Operation(i) => {
                    let op = &a.model.nodes[at].operations[i];
                    hops.push(op.text.clone());
                    end = rule_text(a, op.span).0;
                }
                NextHop::Claim(span) => {
                    hops.push(effects::claim_words(&a.model, at));
                    end = rule_text(a, span).0;
                }
            }
        }
        let assumed = s < effects::RESERVED_SLOT && !a.effects.real[d.tool].has_slot(s);
        witnesses.push(Witness { effect: effects::slot_name(s), path: hops.join(" → "), at: end, assumed });
    }
    let node = &a.model.nodes[d.tool];
    let budget = node.spend.and_then(|sp| {
        let b = a.model.budgets.get(sp.budget)?;
        Some(BudgetUse {
            name: sp.budget.to_string(),
            by: sp.param.to_string(),
            currency: b.currency.clone(),
            unit: b.unit.to_string(),
            ceiling: b.ceiling,
            alone_up_to: b.alone_up_to,
            per_task: b.per_task,
            at: rule_text(a, b.name_span).0,
        })
    });
    Explanation::Offered(Box::new(OfferedTriple {
        agent: agent.to_string(),
        skill: skill.to_string(),
        tool: tool.to_string(),
        level,
        possible,
        offered: true,
        route: d.route.clone(),
        route_words: route_words(a, &d.route, agent),
        reasons,
        witnesses,
        rows: d.rows.iter().chain(moded.map(|m| &m.row)).cloned().collect(),
        mode: mode.map(str::to_string),
        via: Vec::new(),
        budget,
        claim: node.claim.map(|(claim, _)| claim.describe()),
        shell: node.params.iter().find(|(_, ty)| *ty == ParamType::Shell).map(|(param, _)| param.to_string()),
    }))
}

/// Why a chain cannot be explained: a link that is not a declared delegation (spec §3b), in the words the
/// runtime uses ("not a declared delegation: `Researcher.Look` does not delegate to `Coder.FixBug`").
pub fn undeclared_link(a: &Analysis<'_>, agent: &str, skill: &str, via: &[crate::table::ChainLink]) -> Option<String> {
    let mut child = (agent, skill);
    for link in via {
        let declared =
            a.model.agents.get(link.agent.as_str()).is_some_and(|ag| ag.skills.contains(&link.skill.as_str()))
                && a.model
                    .skills
                    .get(link.skill.as_str())
                    .is_some_and(|s| s.delegates.iter().any(|(da, ds, _)| (*da, *ds) == child));
        if !declared {
            return Some(format!("not a declared delegation: `{link}` does not delegate to `{}.{}`", child.0, child.1));
        }
        child = (link.agent.as_str(), link.skill.as_str());
    }
    None
}

/// [`explain_in`] for a call delegated through `via` (spec §3b, nearest first): each link's two layers are
/// more rows and reasons (each reason naming its link), the level is the strictest over all of them, and the
/// route is the one nearest the root that names someone other than the requester. Call it with a declared
/// chain ([`undeclared_link`] says why one is not); an undeclared link adds nothing here.
pub fn explain_via(
    a: &Analysis<'_>,
    agent: &str,
    skill: &str,
    tool: &str,
    mode: Option<&str>,
    via: &[crate::table::ChainLink],
) -> Explanation {
    let mut e = explain_in(a, agent, skill, tool, mode);
    let Explanation::Offered(d) = &mut e else { return e };
    let mut possible: BTreeSet<Level> = d.possible.iter().copied().collect();
    let mut route = None;
    for link in via {
        let Some(l) = a
            .links
            .iter()
            .find(|l| l.agent == link.agent && l.skill == link.skill && a.model.nodes[l.tool].name == tool)
        else {
            continue;
        };
        let options = crate::table::possible_levels_of(l.level, &l.rows);
        possible = possible.iter().flat_map(|x| options.iter().map(move |o| (*x).max(*o))).collect();
        d.rows.extend(l.rows.iter().cloned());
        if let Some(r) = &l.route {
            route = Some(r.clone());
        }
        for (r, span) in &l.because {
            let (at, text) = span.map(|s| rule_text(a, s)).unzip();
            d.reasons.push(ExplainedReason {
                layer: r.layer,
                kind: r.kind,
                level: r.level,
                rule: r.rule.clone(),
                via: r.via.clone(),
                at,
                text,
                link: Some(link.to_string()),
                decisive: false,
            });
        }
    }
    d.possible = possible.into_iter().collect();
    d.level = if d.possible.len() == 1 { d.possible.first().copied() } else { None };
    let strictest = d.possible.iter().max().copied().unwrap_or(Level::Never);
    for r in &mut d.reasons {
        r.decisive = d.level.is_none_or(|l| l == r.level) || r.level == strictest;
    }
    if let Some(r) = route {
        let root = via.last().map_or(agent, |l| l.agent.as_str());
        d.route_words = route_words(a, &r, root);
        d.route = r;
    }
    d.via = via.to_vec();
    e
}

impl ExplainedReason {
    /// The layer in words: `package-wide layer`, `agent layer`, `skill layer`, `reserved subject`.
    pub fn layer_words(&self) -> &'static str {
        match self.layer {
            Some(Layer::Package) => "package-wide layer",
            Some(Layer::Agent) => "agent layer",
            Some(Layer::Skill) => "skill layer",
            Some(Layer::Mode) => "mode layer",
            None => "reserved subject",
        }
    }

    /// For an inherited level, the callee responsible: `Some("notify")`.
    pub fn inherited_from(&self) -> Option<&str> {
        match self.kind {
            ReasonKind::Inherited => self.via.as_deref(),
            _ => None,
        }
    }
}

/// Why the model does not offer the triple (spec §3 step 1, the order of [`crate::table::Table::offered`]).
fn offered(a: &Analysis<'_>, agent: &str, skill: &str, tool: &str) -> Result<(), NotOffered> {
    let m = &a.model;
    let ag = m.agents.get(agent).ok_or(NotOffered::UnknownAgent)?;
    let sk = m.skills.get(skill).ok_or(NotOffered::UnknownSkill)?;
    if !ag.skills.contains(&skill) {
        return Err(NotOffered::NotAgentsSkill);
    }
    let &id = m.node_of.get(tool).filter(|id| m.nodes[**id].is_tool()).ok_or(NotOffered::UnknownTool)?;
    if !sk.tools.contains(&id) {
        return Err(NotOffered::NotSkillsTool);
    }
    Ok(())
}

/// The first name that is not in the package, with the nearest one: a misspelt name is most likely a typo,
/// not a question.
fn unknown_name(a: &Analysis<'_>, agent: &str, skill: &str, tool: &str) -> Option<String> {
    let m = &a.model;
    [
        ("agent", agent, m.agents.keys().copied().collect::<Vec<_>>()),
        ("skill", skill, m.skills.keys().copied().collect()),
        ("tool", tool, m.nodes.iter().filter(|n| n.is_tool()).map(|n| n.name).collect()),
    ]
    .into_iter()
    .find(|(_, name, names)| !names.contains(name))
    .map(|(what, name, names)| match closest(name, names.iter().copied()) {
        Some(near) => format!("unknown {what} `{name}`; did you mean `{near}`?"),
        None => format!("unknown {what} `{name}`"),
    })
}

fn route_words(a: &Analysis<'_>, route: &Route, agent: &str) -> String {
    match route {
        Route::Requester => {
            let sponsor = a.model.agents.get(agent).and_then(|x| x.sponsor).unwrap_or("?");
            format!("requester (the person the work is for; the sponsor `{sponsor}` when it is for nobody)")
        }
        other => other.to_string(),
    }
}

/// `file:line` of a span, and the rule as written: from the start of its first line to its end, comments
/// removed, whitespace collapsed (a condition written over several lines is quoted whole).
fn rule_text(a: &Analysis<'_>, span: Span) -> (String, String) {
    let src = a.sources.get(span.file);
    let (line, col) = src.line_col(span.start);
    let start = (span.start - (col - 1)) as usize;
    let first_line_end = src.text[start..].find('\n').map_or(src.text.len(), |i| start + i);
    let end = (span.end as usize).max(first_line_end).min(src.text.len());
    let raw = src.text.get(start..end).unwrap_or("");
    let raw = raw.lines().map(strip_comment).collect::<Vec<_>>().join(" ");
    let text = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    (format!("{}:{}", a.sources.display_name(span.file), line), text)
}

/// A line without its `//` comment (a `//` inside a string is not a comment).
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut escaped = false;
    let bytes = line.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}
