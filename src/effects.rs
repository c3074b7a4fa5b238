//! Effects: the call graph of tools and functions, effect inference over its strongly connected
//! components, witnesses, claims and definition digests (spec §2).
//!
//! The call graph is a petgraph `DiGraph`; its components come from `kosaraju_scc`, which is iterative
//! (`tarjan_scc` recurses and overflows on a 100k-deep chain) and yields components callees first. One
//! pass over the components in that order computes every node's effect set: linear in nodes + edges.
//! A witness is stored as the next hop only (an operation, a call with its span, or an extern claim),
//! so memory stays linear; [`Effects::witness_path`] walks the hops.

use petgraph::graph::{DiGraph, NodeIndex};

use crate::check::{Model, NodeId, NodeKind};
use crate::diagnostics::{Diagnostic, codes};
use crate::syntax::{Sources, Span};
use crate::table::{EffectClass, canonical_digest, sha256_hex};

/// A set of effect classes plus the reserved subject (writing the entity `permits`), as bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EffectSet(u8);

/// The slot of the reserved subject in an [`EffectSet`] and in a witness array.
pub const RESERVED_SLOT: usize = 5;
/// How many slots: five classes and the reserved subject.
pub const SLOTS: usize = 6;

impl EffectSet {
    /// No effects.
    pub const EMPTY: EffectSet = EffectSet(0);
    /// Every class and the reserved subject: what `call dynamic` proves.
    pub const ALL_AND_RESERVED: EffectSet = EffectSet(0b11_1111);

    /// The set of one class.
    pub fn of(class: EffectClass) -> EffectSet {
        EffectSet(1 << slot(class))
    }

    /// Adds a class.
    pub fn insert_class(&mut self, class: EffectClass) {
        self.0 |= 1 << slot(class);
    }

    /// Adds the reserved subject.
    pub fn insert_reserved(&mut self) {
        self.0 |= 1 << RESERVED_SLOT;
    }

    /// Whether the set holds a class.
    pub fn contains(self, class: EffectClass) -> bool {
        self.0 & (1 << slot(class)) != 0
    }

    /// Whether the set holds a slot (0–4 classes, 5 the reserved subject).
    pub fn has_slot(self, s: usize) -> bool {
        self.0 & (1 << s) != 0
    }

    /// Whether the reserved subject is in the set.
    pub fn is_reserved(self) -> bool {
        self.has_slot(RESERVED_SLOT)
    }

    /// The union.
    pub fn union(self, other: EffectSet) -> EffectSet {
        EffectSet(self.0 | other.0)
    }

    /// The classes only (without the reserved subject).
    pub fn classes_only(self) -> EffectSet {
        EffectSet(self.0 & 0b1_1111)
    }

    /// Whether every element of `self` is in `other`.
    pub fn is_subset(self, other: EffectSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The classes in the set, in the order of spec §2.
    pub fn classes(self) -> impl Iterator<Item = EffectClass> {
        EffectClass::ALL.into_iter().filter(move |c| self.contains(*c))
    }

    /// `reads + changes` (or `nothing`).
    pub fn describe(self) -> String {
        let v: Vec<&str> = self.classes().map(EffectClass::as_str).collect();
        if v.is_empty() { "nothing".to_string() } else { v.join(" + ") }
    }
}

fn slot(class: EffectClass) -> usize {
    match class {
        EffectClass::Reads => 0,
        EffectClass::Changes => 1,
        EffectClass::Sends => 2,
        EffectClass::Spends => 3,
        EffectClass::ReachesOut => 4,
    }
}

/// The next hop of a witness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// The node's own operation (an index into its `operations`) proves it.
    Operation(usize),
    /// The effect continues in the callee; the span is the call.
    Call(NodeId, Span),
    /// An extern tool's claim (at the span) is the only evidence.
    Claim(Span),
}

/// The result of inference over the whole call graph.
#[derive(Debug)]
pub struct Effects {
    /// Each node's proven effect set (for an extern tool, its claim).
    pub sets: Vec<EffectSet>,
    /// The part of each set proven by a body operation somewhere (the rest is assumed).
    pub real: Vec<EffectSet>,
    /// Each node's witness hop per slot.
    pub witness: Vec<[Option<Hop>; SLOTS]>,
    /// The strongly connected components, callees first.
    pub components: Vec<Vec<NodeId>>,
    /// Each node's component (an index into `components`).
    pub component_of: Vec<usize>,
    /// Each node's definition digest (hex).
    pub definition_digest: Vec<String>,
}

impl Effects {
    /// The classes a node's level is computed over: its claim when it has one, else its proven set.
    pub fn level_set(&self, model: &Model<'_>, node: NodeId) -> EffectSet {
        match model.nodes[node].claim {
            Some((claim, _)) => claim.classes_only(),
            None => self.sets[node].classes_only(),
        }
    }

    /// The witness path of a slot from a node: the hops in order, ending at an operation or a claim.
    /// Empty when the node does not have the slot.
    pub fn witness_path(&self, node: NodeId, s: usize) -> Vec<(NodeId, Hop)> {
        let mut out = Vec::new();
        let mut at = node;
        // The walk ends: a call within a component goes strictly closer to a source, across components
        // it goes to an earlier one. The bound is a second guard.
        for _ in 0..=self.sets.len() {
            match self.witness[at].get(s).copied().flatten() {
                None => break,
                Some(hop @ Hop::Call(next, _)) => {
                    out.push((at, hop));
                    at = next;
                }
                Some(hop) => {
                    out.push((at, hop));
                    break;
                }
            }
        }
        out
    }
}

/// Infers every node's effect set, witnesses and definition digest; checks claims.
pub fn infer(model: &Model<'_>, sources: &Sources) -> (Effects, Vec<Diagnostic>) {
    let n = model.nodes.len();
    let mut graph: DiGraph<(), Span> = DiGraph::with_capacity(n, 0);
    for _ in 0..n {
        graph.add_node(());
    }
    for (i, node) in model.nodes.iter().enumerate() {
        for (callee, span) in &node.calls {
            graph.add_edge(NodeIndex::new(i), NodeIndex::new(*callee), *span);
        }
    }
    let components: Vec<Vec<NodeId>> =
        petgraph::algo::kosaraju_scc(&graph).into_iter().map(|c| c.into_iter().map(NodeIndex::index).collect()).collect();
    let mut component_of = vec![0; n];
    for (ci, c) in components.iter().enumerate() {
        for &m in c {
            component_of[m] = ci;
        }
    }

    let mut sets = vec![EffectSet::EMPTY; n];
    let mut real = vec![EffectSet::EMPTY; n];
    let mut witness = vec![[None; SLOTS]; n];
    let mut definition_digest = vec![String::new(); n];

    for (ci, members) in components.iter().enumerate() {
        let mut set = EffectSet::EMPTY;
        let mut proven = EffectSet::EMPTY;
        for &m in members {
            let node = &model.nodes[m];
            for op in &node.operations {
                set = set.union(op.effects);
                proven = proven.union(op.effects);
            }
            if node.is_extern() {
                if let Some((claim, _)) = node.claim {
                    set = set.union(claim);
                }
            }
            for (callee, _) in &node.calls {
                if component_of[*callee] != ci {
                    set = set.union(sets[*callee]);
                    proven = proven.union(real[*callee]);
                }
            }
        }
        // Internal callers of each member, for the walk back from the sources of a witness.
        let mut callers: std::collections::HashMap<NodeId, Vec<(NodeId, Span)>> = std::collections::HashMap::new();
        for &m in members {
            for (callee, span) in &model.nodes[m].calls {
                if component_of[*callee] == ci {
                    callers.entry(*callee).or_default().push((m, *span));
                }
            }
        }
        for s in 0..SLOTS {
            if !set.has_slot(s) {
                continue;
            }
            // Phase 1: witnesses that end at a real operation; phase 2 (only when there is none): at a claim.
            for phase in 0..2 {
                if phase == 1 && proven.has_slot(s) {
                    break;
                }
                let mut queue = std::collections::VecDeque::new();
                for &m in members {
                    let node = &model.nodes[m];
                    let hop = if phase == 0 {
                        node.operations.iter().position(|op| op.effects.has_slot(s)).map(Hop::Operation).or_else(|| {
                            node.calls.iter().find(|(c, _)| component_of[*c] != ci && real[*c].has_slot(s)).map(|(c, sp)| Hop::Call(*c, *sp))
                        })
                    } else {
                        let claimed = node.is_extern() && node.claim.is_some_and(|(c, _)| c.has_slot(s));
                        node.claim.filter(|_| claimed).map(|(_, sp)| Hop::Claim(sp)).or_else(|| {
                            node.calls.iter().find(|(c, _)| component_of[*c] != ci && sets[*c].has_slot(s)).map(|(c, sp)| Hop::Call(*c, *sp))
                        })
                    };
                    if let Some(h) = hop {
                        witness[m][s] = Some(h);
                        queue.push_back(m);
                    }
                }
                while let Some(y) = queue.pop_front() {
                    for (x, span) in callers.get(&y).map(Vec::as_slice).unwrap_or(&[]) {
                        if witness[*x][s].is_none() {
                            witness[*x][s] = Some(Hop::Call(y, *span));
                            queue.push_back(*x);
                        }
                    }
                }
            }
        }
        for &m in members {
            sets[m] = set;
            real[m] = proven;
        }
        // Definition digests: the component is hashed as one unit over its members' canonical forms and
        // the digests of everything outside it that they call.
        // Sorted by name (each form's `name`) without a key string per comparison: a component can hold
        // most of the package.
        let mut named: Vec<(&str, serde_json::Value)> = members.iter().map(|&m| (model.nodes[m].name, local_form(model, m))).collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        let forms: Vec<serde_json::Value> = named.into_iter().map(|(_, form)| form).collect();
        let mut called: Vec<&str> = members
            .iter()
            .flat_map(|&m| model.nodes[m].calls.iter())
            .filter(|(c, _)| component_of[*c] != ci)
            .map(|(c, _)| definition_digest[*c].as_str())
            .collect();
        called.sort_unstable();
        called.dedup();
        // The value `json!({ "members": forms, "calls": called })` builds, without `json!`'s copy of `forms`.
        let unit_form: serde_json::Map<String, serde_json::Value> =
            [("members".to_string(), serde_json::Value::Array(forms)), ("calls".to_string(), serde_json::Value::from(called))].into_iter().collect();
        let unit = canonical_digest(&unit_form).unwrap_or_else(|_| sha256_hex(b""));
        for &m in members {
            definition_digest[m] =
                canonical_digest(&serde_json::json!({ "name": model.nodes[m].name, "unit": unit })).unwrap_or_else(|_| sha256_hex(b""));
        }
    }

    let effects = Effects { sets, real, witness, components, component_of, definition_digest };
    let diagnostics = check_claims(model, &effects, sources);
    (effects, diagnostics)
}

/// The canonical form of a node's own definition: signature, label, doc, claim and body; no spans, no
/// formatting.
fn local_form(model: &Model<'_>, m: NodeId) -> serde_json::Value {
    let node = &model.nodes[m];
    let (kind, label, body) = match node.kind {
        NodeKind::Tool(t) => (
            if node.is_extern() { "extern_tool" } else { "tool" },
            t.label.as_ref().map(|l| l.value.clone()),
            &t.body,
        ),
        NodeKind::Function(f) => ("fn", None, &f.body),
    };
    let params: Vec<serde_json::Value> =
        node.params.iter().map(|(name, ty)| serde_json::json!([name, serde_json::to_value(ty).unwrap_or_default()])).collect();
    let claim: Option<Vec<&str>> = node.claim.map(|(c, _)| c.classes().map(EffectClass::as_str).collect());
    let body: Vec<String> = body.iter().map(|s| crate::check::statement_text(&s.kind)).collect();
    serde_json::json!({
        "kind": kind,
        "name": node.name,
        "label": label,
        "doc": node.declaration.doc_text(),
        "params": params,
        "claim": claim,
        "body": body,
    })
}

/// Labels that walk a witness path, hop by hop, ending at the operation or claim.
pub fn witness_labels(model: &Model<'_>, effects: &Effects, node: NodeId, s: usize) -> Vec<(Span, String)> {
    effects
        .witness_path(node, s)
        .into_iter()
        .map(|(at, hop)| match hop {
            Hop::Call(callee, span) => (span, format!("`{}` calls `{}`", model.nodes[at].name, model.nodes[callee].name)),
            Hop::Operation(i) => {
                let op = &model.nodes[at].operations[i];
                let what = if s == RESERVED_SLOT { "the reserved subject `permits`".to_string() } else { format!("`{}`", slot_name(s)) };
                (op.span, format!("`{}` proves {what}", op.text))
            }
            Hop::Claim(span) => (span, format!("the extern tool `{}` claims `{}` (assumed)", model.nodes[at].name, slot_name(s))),
        })
        .collect()
}

/// The name of a slot: a class, or `permits` for the reserved subject.
pub fn slot_name(s: usize) -> &'static str {
    EffectClass::ALL.get(s).map(|c| c.as_str()).unwrap_or("permits")
}

fn check_claims(model: &Model<'_>, effects: &Effects, _sources: &Sources) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, node) in model.nodes.iter().enumerate() {
        for op in &node.operations {
            if op.effects == EffectSet::ALL_AND_RESERVED {
                out.push(
                    Diagnostic::warning(codes::EFFECTS_DYNAMIC, format!("`call dynamic` makes `{}` never for every agent", node.name))
                        .at(op.span, "a call to anything proves every effect and the reserved subject")
                        .help("list every possible target with `call any [A, B, ..]`"),
                );
            }
        }
        let Some((claim, claim_span)) = node.claim else { continue };
        if node.is_extern() {
            continue;
        }
        let proven = effects.sets[i].classes_only();
        let missing: Vec<EffectClass> = proven.classes().filter(|c| !claim.contains(*c)).collect();
        if !missing.is_empty() {
            let kind = if node.is_tool() { "tool" } else { "function" };
            let names = missing.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
            let mut d = Diagnostic::error(codes::EFFECTS_UNDERSTATED, format!("the {kind} `{}` is claimed safer than it is", node.name))
                .at(claim_span, format!("claimed `{}`, but it also {}", claim.describe(), missing.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(" and ")));
            for class in &missing {
                for (span, msg) in witness_labels(model, effects, i, slot(*class)) {
                    d = d.with(span, msg);
                }
            }
            d = d.help(format!("add {names} to the claim, or remove what proves it; a claim is an upper bound the checker must prove"));
            out.push(d);
        }
        // Claiming `reads` adds no caution (reads is always alone), so it is never "too wide"; and a claim
        // already reported as too narrow is not also reported as too wide.
        let unproven: Vec<EffectClass> =
            claim.classes().filter(|c| *c != EffectClass::Reads && !proven.contains(*c)).collect();
        if !unproven.is_empty() && missing.is_empty() {
            out.push(
                Diagnostic::warning(
                    codes::EFFECTS_OVERSTATED,
                    format!("the claim of `{}` is wider than what it does", node.name),
                )
                .at(claim_span, format!("nothing proves {}", unproven.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(" or ")))
                .help("the level uses the claim, so this only adds caution; narrow the claim if the tool cannot do it"),
            );
        }
    }
    out
}
