//! The call graph as Graphviz DOT (`permitc graph`, spec §7): every tool and function with its effect set;
//! with an agent, only what that agent is offered and what those tools call, each offered tool with its
//! level per skill; and the delegation edges between `Agent.Skill` pairs (spec §3b).

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::compile::Analysis;
use crate::effects::EffectSet;

/// The DOT text of a package's call graph. `agent`: restrict to the tools the agent is offered (in any of
/// its skills) and everything they call; `None` for the whole package. `name` titles the graph.
///
/// Node shapes: a tool is a box, an `extern tool` a dashed box, a function an ellipse. Each label holds
/// the name, the effect set (`assumed` effects marked `?`), and for an agent, the level in each skill,
/// the node filled by its strictest level (green alone, yellow propose, orange propose_every_time, red
/// never).
pub fn dot(a: &Analysis<'_>, name: &str, agent: Option<&str>) -> String {
    let model = &a.model;
    let n = model.nodes.len();
    let mut keep = vec![agent.is_none(); n];
    if let Some(agent) = agent {
        // Every tool offered to the agent, then everything reachable from them (an explicit stack).
        let mut stack: Vec<usize> = a.decisions.iter().filter(|d| d.agent == agent).map(|d| d.tool).collect();
        while let Some(x) = stack.pop() {
            if keep[x] {
                continue;
            }
            keep[x] = true;
            stack.extend(model.nodes[x].calls.iter().map(|(c, _)| *c));
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quote(name));
    let _ = writeln!(out, "  rankdir=LR;");
    let _ = writeln!(out, "  node [fontname=\"Helvetica\", fontsize=11];");
    for (i, node) in model.nodes.iter().enumerate() {
        if !keep[i] {
            continue;
        }
        let set = a.effects.sets[i];
        let mut label = format!("{}\n{}", node.name, effects_text(set, a.effects.real[i]));
        let mut fill = "";
        if let Some(agent) = agent {
            // Fill by the strictest level the agent meets the tool at.
            let strictest =
                a.decisions.iter().filter(|d| d.agent == agent && d.tool == i).flat_map(|d| d.possible.iter()).max();
            fill = match strictest {
                Some(crate::table::Level::Alone) => ", fillcolor=\"#d9f2d9\"",
                Some(crate::table::Level::Propose) => ", fillcolor=\"#fff2cc\"",
                Some(crate::table::Level::ProposeEveryTime) => ", fillcolor=\"#ffe0b3\"",
                Some(crate::table::Level::Never) => ", fillcolor=\"#f4cccc\"",
                None => "",
            };
            for d in a.decisions.iter().filter(|d| d.agent == agent && d.tool == i) {
                let level = match d.level {
                    Some(l) => l.to_string(),
                    None => d.possible.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("|"),
                };
                let _ = write!(label, "\n{}: {level}", d.skill);
            }
        }
        let (shape, style) = if !node.is_tool() {
            ("ellipse", "solid")
        } else if node.is_extern() {
            ("box", if fill.is_empty() { "dashed" } else { "\"dashed,filled\"" })
        } else {
            ("box", if fill.is_empty() { "solid" } else { "filled" })
        };
        let colour = if set.is_reserved() { ", color=\"red\"" } else { "" };
        let _ = writeln!(
            out,
            "  {} [shape={shape}, style={style}, label={}{colour}{fill}];",
            quote(node.name),
            quote(&label)
        );
    }
    let mut edges = BTreeSet::new();
    for (i, node) in model.nodes.iter().enumerate() {
        if !keep[i] {
            continue;
        }
        for (c, _) in &node.calls {
            edges.insert((node.name, model.nodes[*c].name));
        }
    }
    for (from, to) in edges {
        let _ = writeln!(out, "  {} -> {};", quote(from), quote(to));
    }
    // Delegation (spec §3b): a hexagon per `Agent.Skill` that delegates or is delegated to, a dashed edge
    // per `delegates` entry; with an agent, only the entries of its own skills.
    let mut links: BTreeSet<(String, String)> = BTreeSet::new();
    for (agent_name, ag) in &model.agents {
        if agent.is_some_and(|only| only != *agent_name) {
            continue;
        }
        for skill in &ag.skills {
            for (to_agent, to_skill, _) in model.skills.get(skill).map(|s| s.delegates.as_slice()).unwrap_or(&[]) {
                links.insert((format!("{agent_name}.{skill}"), format!("{to_agent}.{to_skill}")));
            }
        }
    }
    let ends: BTreeSet<&String> = links.iter().flat_map(|(a, b)| [a, b]).collect();
    for end in ends {
        let _ = writeln!(out, "  {} [shape=hexagon, label={}];", quote(end), quote(end));
    }
    for (from, to) in &links {
        let _ = writeln!(out, "  {} -> {} [style=dashed, label=\"delegates\"];", quote(from), quote(to));
    }
    out.push_str("}\n");
    out
}

fn effects_text(set: EffectSet, real: EffectSet) -> String {
    let mut parts: Vec<String> =
        set.classes().map(|c| if real.contains(c) { c.to_string() } else { format!("{c}?") }).collect();
    if set.is_reserved() {
        parts.push("writes permits".into());
    }
    if parts.is_empty() { "no effects".into() } else { parts.join(", ") }
}

/// A DOT string literal.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
