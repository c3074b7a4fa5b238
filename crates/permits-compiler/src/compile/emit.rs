//! The decision table of spec §4, built from an analysis without errors: tools, agents, skills, people,
//! authority, budgets and one entry per offered triple with its rows, route, reasons and digests.

use std::collections::BTreeMap;

use super::levels::source_ref;
use super::{Analysis, COMPILER};
use crate::check::{NodeId, Rules};
use crate::effects::{NextHop, RESERVED_SLOT};
use crate::table::{
    self, AgentInfo, AuthorityStatements, BudgetInfo, EffectInfo, EntityInfo, Entry, Header, Hop as TableHop, HopKind,
    LinkEntry, ModeEntry, ModeInfo, PackageSettings, ParamInfo, PersonInfo, QueueInfo, RoleInfo, Route, SkillInfo,
    SpendInfo, Table, ToolInfo, VersionInfo, canonical_digest,
};

fn table_hop(a: &Analysis<'_>, node: NodeId, hop: NextHop) -> TableHop {
    match hop {
        NextHop::Operation(i) => {
            let op = &a.model.nodes[node].operations[i];
            TableHop { kind: HopKind::Operation, text: op.text.clone(), at: source_ref(a.sources, op.span) }
        }
        NextHop::Call(c, span) => {
            TableHop { kind: HopKind::Call, text: a.model.nodes[c].name.to_string(), at: source_ref(a.sources, span) }
        }
        NextHop::Claim(span) => TableHop {
            kind: HopKind::Claim,
            text: crate::effects::claim_words(&a.model, node),
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
                params: node
                    .params
                    .iter()
                    .zip(&node.optional)
                    .map(|((n, ty), optional)| ParamInfo { name: n.to_string(), ty: ty.clone(), optional: *optional })
                    .collect(),
                effects: effects_map,
                claim: node.claim.map(|(c, _)| c.classes().collect()),
                reserved: a.effects.witness[i][RESERVED_SLOT].map(|h| table_hop(a, i, h)),
                version: node.version.map(|(p, f)| VersionInfo { param: p.to_string(), field: f.to_string() }),
                subject: node.subject.map(str::to_string),
                spends: node
                    .spend
                    .filter(|_| !node.is_extern())
                    .map(|sp| SpendInfo { budget: sp.budget.to_string(), param: sp.param.to_string() }),
                pinned: t.pinned.as_ref().map(|p| p.value.clone()),
                definition_digest: a.effects.definition_digest[i].clone(),
            },
        );
    }
    let mut skills = BTreeMap::new();
    let mut skill_digests = BTreeMap::new();
    for (name, s) in &model.skills {
        let routes: BTreeMap<String, Route> =
            s.routes.iter().map(|(id, (r, _))| (model.nodes[*id].name.to_string(), r.clone())).collect();
        let delegates: Vec<String> = s.delegates.iter().map(|(agent, skill, _)| format!("{agent}.{skill}")).collect();
        // `delegates` is in the digest only when written, so skills without one keep their digests.
        let mut form = serde_json::json!({ "may": rules_form(a, s.rules.as_ref()), "routes": json_of(&routes) });
        if let (false, Some(o)) = (delegates.is_empty(), form.as_object_mut()) {
            o.insert("delegates".to_string(), serde_json::json!(delegates));
        }
        let digest = digest_of(&form);
        skill_digests.insert(*name, digest.clone());
        skills.insert(
            name.to_string(),
            SkillInfo {
                description: s.skill.description.as_ref().map(|d| d.value.clone()),
                doc: s.declaration.doc_text(),
                tools: s.tools.iter().map(|id| model.nodes[*id].name.to_string()).collect(),
                routes,
                rules_digest: digest,
                delegates,
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
        let modes = d
            .modes
            .iter()
            .map(|m| {
                let rules: Vec<serde_json::Value> = m
                    .because
                    .iter()
                    .map(|(r, _)| serde_json::json!({ "kind": r.kind, "level": r.level, "rule": r.rule, "via": r.via }))
                    .collect();
                let call_digest = digest_of(&serde_json::json!({
                    "entry_digest": digest,
                    "mode": m.mode,
                    "row": json_of(&m.row),
                    "rules": rules,
                }));
                let entry = ModeEntry {
                    level: m.level,
                    row: m.row.clone(),
                    because: m.because.iter().map(|(r, _)| r.clone()).collect(),
                    call_digest,
                };
                (m.mode.to_string(), entry)
            })
            .collect();
        entries.entry(d.agent.to_string()).or_default().entry(d.skill.to_string()).or_default().insert(
            tool_name.to_string(),
            Entry {
                modes,
                level: d.level,
                rows: d.rows.clone(),
                reserved: d.reserved,
                route: d.route.clone(),
                because: d.because.iter().map(|(r, _)| r.clone()).collect(),
                entry_digest: digest,
            },
        );
    }
    let mut links: BTreeMap<String, BTreeMap<String, BTreeMap<String, LinkEntry>>> = BTreeMap::new();
    for l in &a.links {
        let tool_name = model.nodes[l.tool].name;
        let rules: Vec<serde_json::Value> = l
            .because
            .iter()
            .map(|(r, _)| serde_json::json!({ "layer": r.layer, "kind": r.kind, "level": r.level, "rule": r.rule, "via": r.via }))
            .collect();
        let link_digest = digest_of(&serde_json::json!({
            "agent": l.agent,
            "skill": l.skill,
            "tool": tool_name,
            "rows": json_of(&l.rows),
            "route": json_of(&l.route),
            "rules": rules,
            "definition_digest": tools[tool_name].definition_digest,
        }));
        links.entry(l.agent.to_string()).or_default().entry(l.skill.to_string()).or_default().insert(
            tool_name.to_string(),
            LinkEntry {
                level: l.level,
                rows: l.rows.clone(),
                because: l.because.iter().map(|(r, _)| r.clone()).collect(),
                route: l.route.clone(),
                link_digest,
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
        authority: AuthorityStatements {
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
                    per_task: b.per_task,
                };
                (n.to_string(), info)
            })
            .collect(),
        modes: model
            .modes
            .iter()
            .map(|(n, m)| {
                let info = ModeInfo {
                    description: m.mode.description.as_ref().map(|d| d.value.clone()),
                    doc: m.declaration.doc_text(),
                    unattended: m.unattended,
                };
                (n.to_string(), info)
            })
            .collect(),
        entries,
        links,
    };
    table.seal();
    table
}
