//! Diff: every triple whose decision changed between two decision tables, each marked widening,
//! narrowing or neutral (`permitc diff`, spec §7). Works on tables, so either side may come from sources
//! or from a compiled file; the rule responsible is named from NEW's `because`.
//!
//! Widening (what CI must stop): a level that became less strict; a new triple that is not `never`; a
//! route that moved from a person, role or queue to the requester; an effect that became assumed; a
//! conditional level where some call may now be less strict than before (conservative: when conditions
//! changed and every new level is not at least every old one, it is reported as widening).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::table::{ChainLink, Entry, Level, Reason, Route, Table};

/// How a change moves authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Some call may now be decided less strictly, or a new triple runs: CI should stop it.
    Widening,
    /// Stricter than before.
    Narrowing,
    /// Changed, neither wider nor narrower (a route between two persons, an effect added whose level
    /// did not move, a new `never` triple).
    Neutral,
}

/// What happened to a triple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Offered in NEW only.
    Added,
    /// Offered in OLD only.
    Removed,
    /// Offered in both, decided differently.
    Changed,
}

/// One side of a change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    /// The level when it does not depend on arguments.
    pub level: Option<Level>,
    /// Every level the triple can take.
    pub possible: Vec<Level>,
    /// Who decides.
    pub route: Route,
}

/// One changed triple.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The agent.
    pub agent: String,
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// Added, removed or changed.
    pub kind: ChangeKind,
    /// The overall direction: the widest of the details.
    pub direction: Direction,
    /// Each thing that changed, in words, with its direction.
    pub details: Vec<(Direction, String)>,
    /// OLD's decision, when it had the triple.
    pub old: Option<Side>,
    /// NEW's decision, when it has the triple.
    pub new: Option<Side>,
    /// The rules in NEW that decide the triple now (rule text and `file:line`).
    pub responsible: Vec<String>,
}

/// Every triple whose decision differs, sorted by (agent, skill, tool).
pub fn diff(old: &Table, new: &Table) -> Vec<Change> {
    let mut keys: BTreeSet<(&str, &str, &str)> = BTreeSet::new();
    for t in [old, new] {
        for (a, skills) in &t.entries {
            for (s, tools) in skills {
                for tool in tools.keys() {
                    keys.insert((a, s, tool));
                }
            }
        }
    }
    let mut chains = Chains::new([old, new]);
    let mut out = Vec::new();
    for (a, s, t) in keys {
        let (o, n) = (old.entry(a, s, t), new.entry(a, s, t));
        let mut details = Vec::new();
        let kind = match (o, n) {
            (None, Some(ne)) => {
                let p = possible(ne);
                let dir = if p == [Level::Never] { Direction::Neutral } else { Direction::Widening };
                details.push((dir, format!("newly offered at {}", shown(ne))));
                ChangeKind::Added
            }
            (Some(oe), None) => {
                let p = possible(oe);
                let dir = if p == [Level::Never] { Direction::Neutral } else { Direction::Narrowing };
                details.push((dir, format!("no longer offered (was {})", shown(oe))));
                ChangeKind::Removed
            }
            (Some(oe), Some(ne)) => {
                compare_levels(oe, ne, &mut details);
                compare_modes(old, new, (a, s, t), &mut details);
                compare_delegations(old, new, (a, s, t), &mut chains, &mut details);
                compare_routes(&oe.route, &ne.route, &mut details);
                compare_effects(old, new, t, &mut details);
                ChangeKind::Changed
            }
            (None, None) => continue,
        };
        if details.is_empty() {
            continue;
        }
        let direction = details.iter().map(|(d, _)| *d).min().unwrap_or(Direction::Neutral);
        let responsible = n.map(responsible_rules).unwrap_or_default();
        out.push(Change {
            agent: a.to_string(),
            skill: s.to_string(),
            tool: t.to_string(),
            kind,
            direction,
            details,
            old: o.map(side),
            new: n.map(side),
            responsible,
        });
    }
    out
}

fn possible(e: &Entry) -> Vec<Level> {
    if let Some(l) = e.level {
        return vec![l];
    }
    if e.reserved {
        return vec![Level::Never];
    }
    let mut acc: BTreeSet<Option<Level>> = BTreeSet::from([None]);
    for row in &e.rows {
        let p = row.possible_levels();
        acc = acc.iter().flat_map(|x| p.iter().map(move |y| (*x).max(*y))).collect();
    }
    acc.into_iter().map(|l| l.unwrap_or(Level::Alone)).collect::<BTreeSet<_>>().into_iter().collect()
}

fn shown(e: &Entry) -> String {
    let p = possible(e);
    match p.as_slice() {
        [one] => format!("`{one}`"),
        many => format!("`{}` (by arguments)", many.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(" | ")),
    }
}

fn side(e: &Entry) -> Side {
    Side { level: e.level, possible: possible(e), route: e.route.clone() }
}

fn compare_levels(o: &Entry, n: &Entry, details: &mut Vec<(Direction, String)>) {
    let (po, pn) = (possible(o), possible(n));
    match (o.level, n.level) {
        (Some(a), Some(b)) if a == b => {
            if o.rows != n.rows {
                details.push((Direction::Neutral, format!("still `{b}`, decided by other rules")));
            }
        }
        (Some(a), Some(b)) => {
            let dir = if b < a { Direction::Widening } else { Direction::Narrowing };
            details.push((dir, format!("`{a}` → `{b}`")));
        }
        _ => {
            if o.rows == n.rows {
                return;
            }
            // Conditions are involved. Narrowing only when every new level is at least every old one;
            // otherwise some call may be decided less strictly now, which CI must see.
            let (old_max, new_min) = (po.iter().max(), pn.iter().min());
            let dir = if new_min < old_max {
                Direction::Widening
            } else if po == pn {
                Direction::Neutral
            } else {
                Direction::Narrowing
            };
            details.push((dir, format!("{} → {} (conditions changed)", shown(o), shown(n))));
        }
    }
}

/// Spec §3c: a mode's rows are compared like any layer's, for each mode both tables declare. A call in the
/// mode that may now be decided less strictly is a widening (a loosened or removed mode entry).
fn compare_modes(old: &Table, new: &Table, (a, s, t): (&str, &str, &str), details: &mut Vec<(Direction, String)>) {
    for mode in old.modes.keys().filter(|m| new.modes.contains_key(*m)) {
        let (Ok(po), Ok(pn)) =
            (old.possible_levels_in(a, s, t, Some(mode)), new.possible_levels_in(a, s, t, Some(mode)))
        else {
            continue;
        };
        compare_sets(&po, &pn, &format!("in mode `{mode}`"), details);
    }
}

/// Spec §3b: a delegated call of the triple, through every declared chain that ends at its agent and skill
/// in either table (`chains`). A new or widened `delegates` entry (an undeclared chain, `never`, that now
/// decides something) and a loosened row of any link of a chain are widenings; a removed entry is a
/// narrowing. Each is named by its chain, nearest link first ("via `B.T` via `A.S`").
fn compare_delegations(
    old: &Table,
    new: &Table,
    (a, s, t): (&str, &str, &str),
    chains: &mut Chains<'_>,
    details: &mut Vec<(Direction, String)>,
) {
    let Some(found) = chains.to(a, s) else {
        details.push((
            Direction::Widening,
            format!(
                "more than {MAX_CHAINS} delegation chains end at `{a}.{s}`: not compared one by one, so taken as widening"
            ),
        ));
        return;
    };
    for via in found {
        let (Ok(po), Ok(pn)) =
            (old.possible_levels_via(a, s, t, None, via), new.possible_levels_via(a, s, t, None, via))
        else {
            continue;
        };
        let named: String = via.iter().map(|l| format!(" via `{l}`")).collect();
        compare_sets(&po, &pn, named.trim_start(), details);
    }
}

/// How many delegation chains `diff` compares for one agent and skill; past it, the triple is reported as a
/// widening (conservative: CI stops and a person looks). Tables compiled from sources have no cycles, but a
/// package where many skills delegate to many could have exponentially many chains.
const MAX_CHAINS: usize = 4096;

/// The delegation chains of two tables: for each delegated `Agent.Skill`, every chain (nearest link first) of
/// declared links that ends at it in either table, found once and kept.
struct Chains<'t> {
    /// `Agent.Skill` → the links that delegate to it in either table: (agent, skill) where the agent has the
    /// skill and the skill's `delegates` names the child.
    parents: BTreeMap<String, BTreeSet<(&'t str, &'t str)>>,
    /// The chains found for each (agent, skill); `None` when there are more than [`MAX_CHAINS`].
    found: BTreeMap<(String, String), Option<Vec<Vec<ChainLink>>>>,
}

impl<'t> Chains<'t> {
    fn new(tables: [&'t Table; 2]) -> Chains<'t> {
        let mut parents: BTreeMap<String, BTreeSet<(&str, &str)>> = BTreeMap::new();
        for table in tables {
            for (agent, info) in &table.agents {
                for skill in &info.skills {
                    let Some(skill_info) = table.skills.get(skill) else { continue };
                    for child in &skill_info.delegates {
                        parents.entry(child.clone()).or_default().insert((agent, skill));
                    }
                }
            }
        }
        Chains { parents, found: BTreeMap::new() }
    }

    /// Every chain that ends at `agent.skill`, sorted; `None` past [`MAX_CHAINS`].
    fn to(&mut self, agent: &str, skill: &str) -> Option<&[Vec<ChainLink>]> {
        let key = (agent.to_string(), skill.to_string());
        if !self.found.contains_key(&key) {
            let mut out = Vec::new();
            let complete = self.walk(&format!("{agent}.{skill}"), &mut Vec::new(), &mut out);
            self.found.insert(key.clone(), complete.then_some(out));
        }
        self.found.get(&key).and_then(|c| c.as_deref())
    }

    /// Extends `chain` (which ends, at its root, with the link delegating to `child`) by each link that
    /// delegates to `child`, depth first; a link already in the chain is not taken again (a cycle). Returns
    /// false when `out` would exceed [`MAX_CHAINS`].
    fn walk(&self, child: &str, chain: &mut Vec<ChainLink>, out: &mut Vec<Vec<ChainLink>>) -> bool {
        let Some(parents) = self.parents.get(child) else { return true };
        for &(agent, skill) in parents {
            if chain.iter().any(|l| l.agent == agent && l.skill == skill) {
                continue;
            }
            if out.len() >= MAX_CHAINS {
                return false;
            }
            chain.push(ChainLink::new(agent, skill));
            out.push(chain.clone());
            let complete = self.walk(&format!("{agent}.{skill}"), chain, out);
            chain.pop();
            if !complete {
                return false;
            }
        }
        true
    }
}

/// Two sets of possible levels of one call (`what`: "in mode `Plan`", "via `Coder.FixBug`"): nothing when equal;
/// a widening when some call may now be decided less strictly, else a narrowing.
fn compare_sets(po: &BTreeSet<Level>, pn: &BTreeSet<Level>, what: &str, details: &mut Vec<(Direction, String)>) {
    if po == pn {
        return;
    }
    let dir = if pn.first() < po.first() || pn.last() < po.last() { Direction::Widening } else { Direction::Narrowing };
    let words = |p: &BTreeSet<Level>| p.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(" | ");
    details.push((dir, format!("{what}: {} → {}", words(po), words(pn))));
}

fn compare_routes(o: &Route, n: &Route, details: &mut Vec<(Direction, String)>) {
    if o == n {
        return;
    }
    let dir = match (o, n) {
        (_, Route::Requester) => Direction::Widening,
        (Route::Requester, _) => Direction::Narrowing,
        _ => Direction::Neutral,
    };
    details.push((dir, format!("route `{o}` → `{n}`")));
}

fn compare_effects(old: &Table, new: &Table, tool: &str, details: &mut Vec<(Direction, String)>) {
    let (Some(o), Some(n)) = (old.tools.get(tool), new.tools.get(tool)) else { return };
    for (class, ne) in &n.effects {
        match o.effects.get(class) {
            None => details.push((Direction::Neutral, format!("now `{class}`"))),
            Some(oe) if !oe.assumed && ne.assumed => details.push((
                Direction::Widening,
                format!("`{class}` is now only assumed (an extern tool's claim), no longer proven"),
            )),
            Some(oe) if oe.assumed && !ne.assumed => {
                details.push((Direction::Narrowing, format!("`{class}` is now proven")))
            }
            _ => {}
        }
    }
    for class in o.effects.keys().filter(|c| !n.effects.contains_key(*c)) {
        details.push((Direction::Neutral, format!("no longer `{class}`")));
    }
}

fn responsible_rules(e: &Entry) -> Vec<String> {
    let top = possible(e).into_iter().max();
    let render = |r: &Reason| match &r.at {
        Some(at) => format!("{} ({at})", r.rule),
        None => r.rule.clone(),
    };
    let deciding: Vec<String> =
        e.because.iter().filter(|r| Some(r.level) == top || e.level.is_none()).map(render).collect();
    if deciding.is_empty() { e.because.iter().map(render).collect() } else { deciding }
}

/// The diff as a review comment: a headline, then one paragraph per change, widenings first.
pub fn render_human(changes: &[Change]) -> String {
    use std::fmt::Write;
    let widening = changes.iter().filter(|c| c.direction == Direction::Widening).count();
    let narrowing = changes.iter().filter(|c| c.direction == Direction::Narrowing).count();
    let mut out = String::new();
    if changes.is_empty() {
        out.push_str("no decision changed\n");
        return out;
    }
    let _ = writeln!(
        out,
        "{} changed: {widening} widening, {narrowing} narrowing, {} neutral\n",
        if changes.len() == 1 { "1 decision".to_string() } else { format!("{} decisions", changes.len()) },
        changes.len() - widening - narrowing
    );
    let mut sorted: Vec<&Change> = changes.iter().collect();
    sorted.sort_by_key(|c| c.direction);
    for c in sorted {
        let tag = match c.direction {
            Direction::Widening => "WIDENING ",
            Direction::Narrowing => "narrowing",
            Direction::Neutral => "neutral  ",
        };
        let _ = writeln!(out, "{tag} ({}, {}, {})", c.agent, c.skill, c.tool);
        for (_, d) in &c.details {
            let _ = writeln!(out, "          {d}");
        }
        for r in &c.responsible {
            let _ = writeln!(out, "          because {r}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_moves_are_classified() {
        let mut d = Vec::new();
        compare_routes(&Route::Person("Noor".into()), &Route::Requester, &mut d);
        compare_routes(&Route::Requester, &Route::Role("Manager".into()), &mut d);
        compare_routes(&Route::Person("Noor".into()), &Route::Queue("Finance".into()), &mut d);
        let dirs: Vec<Direction> = d.iter().map(|(x, _)| *x).collect();
        assert_eq!(dirs, vec![Direction::Widening, Direction::Narrowing, Direction::Neutral]);
    }
}
