//! The warnings that need levels (spec §3 "Checks on declarations"), one pass over the finished levels of
//! every triple, in the order the triples were computed: the reserved subject, a named `alone` that inherits
//! a stricter level, a skill entry or setting that would loosen its agent, and routes that can never be used.
//! Each cause is reported once, however many triples share it.

use std::collections::{BTreeMap, BTreeSet};

use super::Analysis;
use super::levels::TripleFacts;
use crate::diagnostics::{Code, Diagnostic};
use crate::effects::{self, RESERVED_SLOT};
use crate::model::NodeId;
use crate::syntax::Span;
use crate::table::{Layer, Level};

/// Every level warning of the package.
pub(super) fn lints(a: &Analysis<'_>, facts: &[TripleFacts<'_>]) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    let mut reserved_warned: BTreeSet<NodeId> = BTreeSet::new();
    let mut loosen_warned: BTreeSet<(Span, &str)> = BTreeSet::new();
    let mut alone_inherit_warned: BTreeSet<Span> = BTreeSet::new();
    let mut agent_route_used: BTreeMap<Span, bool> = BTreeMap::new();
    for f in facts {
        let (tool, agent_name, skill_name) = (f.tool, f.agent, f.skill);
        let (Some(agent), Some(skill)) = (a.model.agents.get(agent_name), a.model.skills.get(skill_name)) else {
            continue;
        };
        if f.reserved && reserved_warned.insert(tool) {
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
            diags.push(d.help("remove it from the skills that offer it; no list or approval can make it run"));
        }
        for (l, rules) in f
            .layers
            .iter()
            .zip(a.model.package_rules.iter().chain(std::iter::once(&agent.rules)).chain(skill.rules.iter()))
        {
            if let (Some(n), Some((callee, span))) = (rules.named_level(tool), l.inherited_from) {
                // An inherited floor is `propose` or stricter, so the layer's level is then above `alone`.
                if n.level == Level::Alone && alone_inherit_warned.insert(n.span) {
                    let callee_name = a.model.nodes[callee].name;
                    diags.push(
                        Diagnostic::new(
                            Code::LevelsAloneInherits,
                            format!("`{}` is named `alone` but calls `{callee_name}`", a.model.nodes[tool].name),
                        )
                        .at(n.span, "named alone here")
                        .with(
                            span,
                            format!("`{callee_name}` is named `{}` here, and that wins", l.max().unwrap_or(Level::Alone)),
                        )
                        .help("a wrapper cannot launder a tool it calls; name the wrapper at the callee's level, or stop calling it"),
                    );
                }
            }
        }
        if let Some(skill_rules) = &skill.rules {
            if let Some(n) = skill_rules.named_level(tool) {
                if f.agent_level.is_some_and(|al| n.level < al) && loosen_warned.insert((n.span, agent_name)) {
                    // A conditional agent entry: the skill's entry loses only where the agent is stricter,
                    // so say when.
                    let sometimes = f.agent_least.is_some_and(|least| n.level >= least);
                    // Name the agent rule that decides, not merely the first one.
                    let agent_reason = f
                        .layers
                        .iter()
                        .find(|l| l.row.as_ref().is_some_and(|r| r.layer == Layer::Agent))
                        .and_then(|l| l.because.iter().rev().find(|(r, _)| Some(r.level) == l.max()).cloned());
                    let mut d = Diagnostic::new(
                        Code::LevelsSkillLoosens,
                        format!(
                            "the skill `{skill_name}` names `{}` `{}`, but the agent `{agent_name}` says `{}`{}",
                            a.model.nodes[tool].name,
                            n.level,
                            f.agent_level.unwrap_or(Level::Alone),
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
                        Some((r, None)) => {
                            d = d.help(format!(
                                "a skill can only tighten: the agent's `{}` wins; change the agent's rules to loosen",
                                r.rule
                            ))
                        }
                        None => {}
                    }
                    if d.help.is_none() {
                        d = d.help(
                            "a skill can only tighten: the agent's rule wins; change the agent's rules to loosen",
                        );
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
                                format!(
                                    "the skill `{skill_name}` sets `{class}: {sl}`, but the agent `{agent_name}` says `{class}: {al}`"
                                ),
                            )
                            .at(*span, "this setting cannot take effect")
                            .help("a skill can only tighten: the agent's setting wins"),
                        );
                    }
                }
            }
        }
        if let Some(span) = f.route_span {
            if skill.routes.contains_key(&tool) {
                if !f.proposes() {
                    let shown = f.possible.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(" or ");
                    diags.push(
                        Diagnostic::new(
                            Code::LevelsRouteUnused,
                            format!(
                                "the route of `{}` in `{skill_name}` can never be used for the agent `{agent_name}`",
                                a.model.nodes[tool].name
                            ),
                        )
                        .at(span, format!("the triple is `{shown}`, so nothing is proposed"))
                        .help(
                            "routes apply to `propose` and `propose_every_time`; remove the route or change the level",
                        ),
                    );
                }
            } else {
                let used = agent_route_used.entry(span).or_insert(false);
                *used |= f.proposes();
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
    diags
}
