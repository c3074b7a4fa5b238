//! A deliberately naive reading of docs/language.md §2–§3 over the generator's own structure ([`Pkg`]): no
//! call graph, no components, no sharing with the compiler. Reachability is a plain worklist per node;
//! levels are computed per (agent, skill, tool, argument) straight from the numbered steps of §3.

use std::collections::BTreeSet;

use permits_table::Level;

use super::generator::{AgentG, CLASSES, MayG, NodeRef, Op, Pkg, Preset, RESERVED};

/// Which layer a `may` block is (spec §3 step 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// The package-wide `may`.
    Package,
    /// A mode's `may` (spec §3c: it tightens exactly like the package-wide one).
    Mode,
    /// The agent's `may` (always present).
    Agent,
    /// The skill's `may`.
    Skill,
}

/// The nodes a node calls directly.
pub fn callees(p: &Pkg, n: NodeRef) -> Vec<NodeRef> {
    let mut out = Vec::new();
    for op in p.ops(n) {
        match op {
            Op::Call(c) => out.push(*c),
            Op::CallAny(cs) => out.extend(cs.iter().copied()),
            _ => {}
        }
    }
    out
}

/// Every node reachable from `n` through at least one call (`n` itself only when it is on a cycle).
pub fn reach(p: &Pkg, n: NodeRef) -> BTreeSet<NodeRef> {
    let mut seen = BTreeSet::new();
    let mut work = callees(p, n);
    while let Some(x) = work.pop() {
        if seen.insert(x) {
            work.extend(callees(p, x));
        }
    }
    seen
}

/// What a node's own body proves (§2 table), without calls; for an extern tool, its claim.
pub fn own(p: &Pkg, n: NodeRef) -> u8 {
    if let NodeRef::Tool(i) = n {
        if p.tools[i].external {
            return p.tools[i].claim.unwrap_or(0);
        }
    }
    own_ops(p, n)
}

/// What a node's own operations prove (an extern tool has none).
pub fn own_ops(p: &Pkg, n: NodeRef) -> u8 {
    let mut bits = 0;
    for op in p.ops(n) {
        bits |= match op {
            Op::Read => 1 << 0,
            Op::Write | Op::Create => 1 << 1,
            Op::Send => 1 << 2,
            Op::Reach => 1 << 4,
            Op::WritePermits => (1 << 1) | RESERVED,
            Op::Dynamic => CLASSES | RESERVED,
            Op::Call(_) | Op::CallAny(_) => 0,
        };
    }
    bits
}

/// The proven effect set (class bits and the reserved bit): the node's own and everything it reaches.
pub fn proven(p: &Pkg, n: NodeRef) -> u8 {
    reach(p, n).into_iter().fold(own(p, n), |acc, x| acc | own(p, x))
}

/// The part of the proven set that a real body operation proves somewhere (the rest is `assumed`).
pub fn real(p: &Pkg, n: NodeRef) -> u8 {
    reach(p, n).into_iter().fold(own_ops(p, n), |acc, x| acc | own_ops(p, x))
}

/// The classes a tool's level is computed over: its claim when it has one, else its proven set (§2).
pub fn level_set(p: &Pkg, t: usize) -> u8 {
    p.claim_bits(NodeRef::Tool(t)).unwrap_or_else(|| proven(p, NodeRef::Tool(t)) & CLASSES)
}

/// What a layer says about one class (§3 step 2, "class level").
pub fn class_setting(may: &MayG, kind: LayerKind, class: usize) -> Option<Level> {
    let tightening = kind != LayerKind::Agent;
    if class == 0 {
        // reads: always alone in the agent layer; nothing elsewhere.
        return (!tightening).then_some(Level::Alone);
    }
    if let Some(l) = may.settings[class - 1] {
        return if tightening && l == Level::Alone { None } else { Some(l) };
    }
    if let Some(preset) = may.preset {
        let l = match (preset, class) {
            (Preset::Everything, _) | (Preset::ChangesAlone, 1) => Level::Alone,
            (Preset::ChangesAlone, _) => Level::Propose,
        };
        return if tightening && l == Level::Alone { None } else { Some(l) };
    }
    (!tightening).then_some(Level::Propose)
}

/// The strictest class level of a layer over a tool's classes (an empty set counts as `reads`).
pub fn class_level(p: &Pkg, may: &MayG, kind: LayerKind, t: usize) -> Option<Level> {
    let set = level_set(p, t);
    let set = if set == 0 { 1 } else { set };
    (0..5).filter(|c| set & (1 << c) != 0).filter_map(|c| class_setting(may, kind, c)).max()
}

/// Every entry of a layer naming a tool: (level, condition).
pub fn entries(may: &MayG, t: usize) -> Vec<(Level, Option<&super::generator::Cond>)> {
    may.lists
        .iter()
        .flat_map(|(l, es)| es.iter().filter(move |e| e.tool == t).map(move |e| (*l, e.when.as_ref())))
        .collect()
}

/// The level one layer gives tool `t` for the argument `n` (§3 step 2): the strictest entry that names
/// it and applies, else the class level; raised to the strictest restrictive entry of any tool it
/// calls transitively, whatever that entry's condition.
pub fn layer_level(p: &Pkg, may: &MayG, kind: LayerKind, t: usize, n: i64) -> Option<Level> {
    let named = entries(may, t).into_iter().filter(|(_, c)| c.is_none_or(|c| c.holds(n))).map(|(l, _)| l).max();
    let base = named.or_else(|| class_level(p, may, kind, t));
    let inherited = reach(p, NodeRef::Tool(t))
        .into_iter()
        .filter_map(|c| match c {
            NodeRef::Tool(ct) => entries(may, ct).into_iter().map(|(l, _)| l).filter(|l| *l >= Level::Propose).max(),
            NodeRef::Fn(_) => None,
        })
        .max();
    base.max(inherited)
}

/// The level of (agent `a`, skill `s`, tool `t`) for the argument `n` (§3 steps 1–4); `None` when the
/// triple is not offered.
pub fn triple_level(p: &Pkg, a: usize, s: usize, t: usize, n: i64) -> Option<Level> {
    let agent: &AgentG = p.agents.get(a)?;
    let skill = p.skills.get(s)?;
    if !agent.skills.contains(&s) || !skill.tools.contains(&t) {
        return None;
    }
    if proven(p, NodeRef::Tool(t)) & RESERVED != 0 {
        return Some(Level::Never);
    }
    let empty = MayG::default();
    let mut level: Option<Level> = None;
    if let Some(m) = &p.package_may {
        level = level.max(layer_level(p, m, LayerKind::Package, t, n));
    }
    level = level.max(layer_level(p, agent.may.as_ref().unwrap_or(&empty), LayerKind::Agent, t, n));
    if let Some(m) = &skill.may {
        level = level.max(layer_level(p, m, LayerKind::Skill, t, n));
    }
    Some(level.unwrap_or(Level::Alone))
}

/// The level of (agent `a`, skill `s`, tool `t`) for the argument `n` in mode `mode` (spec §3c), read
/// independently of the table: `None` when the triple is not offered; an unknown mode (`mode` past the
/// package's modes) is `never`; otherwise the mode's `may` is one more layer, tightening like the
/// package-wide one (unset says nothing, `alone` says nothing, restrictive entries are inherited through
/// calls), and the strictest of all the layers wins. `unattended` adds no layer: it acts on proposals at
/// run time (pipeline step 7), so it never changes a level.
pub fn mode_level(p: &Pkg, mode: usize, a: usize, s: usize, t: usize, n: i64) -> Option<Level> {
    let level = triple_level(p, a, s, t, n)?;
    let Some(m) = p.modes.get(mode) else {
        return Some(Level::Never);
    };
    let layer = m.may.as_ref().and_then(|may| layer_level(p, may, LayerKind::Mode, t, n));
    Some(level.max(layer.unwrap_or(Level::Alone)))
}

/// The level of (agent `a`, skill `s`, tool `t`) for `n`, delegated through `via` (nearest first, each an
/// (agent, skill) pair by index), read independently of the table (spec §3b): `None` when the triple is
/// not offered; `never` when a link is not a declared delegation (the link's agent has the link's skill,
/// whose `delegates` names the link below); otherwise every link adds two layers — its agent's `may` (with
/// the agent-layer defaults) and its skill's — each computed for the acting tool as §3 step 2, and the
/// strictest of all wins.
pub fn chain_level(p: &Pkg, a: usize, s: usize, t: usize, n: i64, via: &[(usize, usize)]) -> Option<Level> {
    let mut level = triple_level(p, a, s, t, n)?;
    let mut child = (a, s);
    let empty = MayG::default();
    for &(la, ls) in via {
        let declared = p.agents.get(la).is_some_and(|ag| ag.skills.contains(&ls))
            && p.skills.get(ls).is_some_and(|sk| sk.delegates.contains(&child));
        if !declared {
            return Some(Level::Never);
        }
        let agent = &p.agents[la];
        let layers = [
            layer_level(p, agent.may.as_ref().unwrap_or(&empty), LayerKind::Agent, t, n),
            p.skills[ls].may.as_ref().and_then(|m| layer_level(p, m, LayerKind::Skill, t, n)),
        ];
        for l in layers.into_iter().flatten() {
            level = level.max(l);
        }
        child = (la, ls);
    }
    Some(level)
}

/// Every declared delegation chain of one or two links that ends at (agent `a`, skill `s`), nearest first.
pub fn chains_to(p: &Pkg, a: usize, s: usize) -> Vec<Vec<(usize, usize)>> {
    let parents = |child: (usize, usize)| -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (la, ag) in p.agents.iter().enumerate() {
            for &ls in &ag.skills {
                if p.skills[ls].delegates.contains(&child) {
                    out.push((la, ls));
                }
            }
        }
        out
    };
    let mut out = Vec::new();
    for first in parents((a, s)) {
        out.push(vec![first]);
        for second in parents(first) {
            out.push(vec![first, second]);
        }
    }
    out
}
