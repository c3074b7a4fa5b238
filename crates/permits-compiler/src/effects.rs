//! Effects: the call graph of tools and functions, effect inference over its strongly connected
//! components, witnesses, claims and definition digests (spec §2).
//!
//! The call graph is a petgraph `DiGraph`; its components come from `kosaraju_scc`, which is iterative
//! (`tarjan_scc` recurses and overflows on a 100k-deep chain) and yields components callees first. One
//! pass over the components in that order computes every node's effect set: linear in nodes + edges.
//! A witness is stored as the next hop only (an operation, a call with its span, or an extern claim),
//! so memory stays linear; [`Effects::witness_path`] walks the hops.

use petgraph::graph::{DiGraph, NodeIndex};

use crate::diagnostics::{Code, Diagnostic};
pub use crate::model::{EffectSet, RESERVED_SLOT, SLOTS, slot};
use crate::model::{Model, NodeId, NodeKind};
use crate::syntax::{Sources, Span};
use sha2::{Digest, Sha256};

use crate::table::{EffectClass, hex, push_json_escaped, sha256_hex};

/// The next hop of a witness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHop {
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
    pub witness: Vec<[Option<NextHop>; SLOTS]>,
    /// The strongly connected components, callees first.
    pub components: Vec<Vec<NodeId>>,
    /// Each node's component (an index into `components`).
    pub component_of: Vec<usize>,
    /// Each node's definition digest (hex).
    pub definition_digest: Vec<String>,
}

impl Effects {
    /// The classes a node's level is computed over: its claim when it has one, else its proven set. A claim
    /// that is safer than what is proven (`permits::effects::understated`, an error, so no table is built)
    /// counts together with the proof, so that levels, and the warnings that follow from them (a route that
    /// "can never be used"), do not rest on the claim that was refused: one cause, one error.
    pub fn level_set(&self, model: &Model<'_>, node: NodeId) -> EffectSet {
        match model.nodes[node].claim {
            Some((claim, _)) => claim.classes_only().union(self.sets[node].classes_only()),
            None => self.sets[node].classes_only(),
        }
    }

    /// The witness path of a slot from a node: the hops in order, ending at an operation or a claim.
    /// Empty when the node does not have the slot.
    pub fn witness_path(&self, node: NodeId, s: usize) -> Vec<(NodeId, NextHop)> {
        let mut out = Vec::new();
        let mut at = node;
        // The walk ends: a call within a component goes strictly closer to a source, across components
        // it goes to an earlier one. The bound is a second guard.
        for _ in 0..=self.sets.len() {
            match self.witness[at].get(s).copied().flatten() {
                None => break,
                Some(hop @ NextHop::Call(next, _)) => {
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
    let edges = model.nodes.iter().map(|node| node.calls.len()).sum();
    let mut graph: DiGraph<(), ()> = DiGraph::with_capacity(n, edges);
    for _ in 0..n {
        graph.add_node(());
    }
    for (i, node) in model.nodes.iter().enumerate() {
        for (callee, _) in &node.calls {
            graph.add_edge(NodeIndex::new(i), NodeIndex::new(*callee), ());
        }
    }
    let components: Vec<Vec<NodeId>> = petgraph::algo::kosaraju_scc(&graph)
        .into_iter()
        .map(|c| c.into_iter().map(NodeIndex::index).collect())
        .collect();
    let mut component_of = vec![0; n];
    for (ci, c) in components.iter().enumerate() {
        for &m in c {
            component_of[m] = ci;
        }
    }

    let callers = Callers::new(model, &components, &component_of);
    let mut sets = vec![EffectSet::EMPTY; n];
    let mut real = vec![EffectSet::EMPTY; n];
    let mut witness = vec![[None; SLOTS]; n];
    let mut definition_digest = vec![String::new(); n];
    let mut queue = std::collections::VecDeque::new();
    let mut digests = DigestWriter::default();

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
        #[expect(clippy::needless_range_loop, reason = "the slot indexes the sets, the witnesses and the queue alike")]
        for s in 0..SLOTS {
            if !set.has_slot(s) {
                continue;
            }
            // Phase 1: witnesses that end at a real operation; phase 2 (only when there is none): at a claim.
            for phase in 0..2 {
                if phase == 1 && proven.has_slot(s) {
                    break;
                }
                queue.clear();
                for &m in members {
                    let node = &model.nodes[m];
                    let hop = if phase == 0 {
                        node.operations.iter().position(|op| op.effects.has_slot(s)).map(NextHop::Operation).or_else(
                            || {
                                node.calls
                                    .iter()
                                    .find(|(c, _)| component_of[*c] != ci && real[*c].has_slot(s))
                                    .map(|(c, sp)| NextHop::Call(*c, *sp))
                            },
                        )
                    } else {
                        let claimed = node.is_extern() && node.claim.is_some_and(|(c, _)| c.has_slot(s));
                        node.claim.filter(|_| claimed).map(|(_, sp)| NextHop::Claim(sp)).or_else(|| {
                            node.calls
                                .iter()
                                .find(|(c, _)| component_of[*c] != ci && sets[*c].has_slot(s))
                                .map(|(c, sp)| NextHop::Call(*c, *sp))
                        })
                    };
                    if let Some(h) = hop {
                        witness[m][s] = Some(h);
                        queue.push_back(m);
                    }
                }
                while let Some(y) = queue.pop_front() {
                    for &(x, k) in callers.of(y) {
                        if witness[x][s].is_none() {
                            witness[x][s] = Some(NextHop::Call(y, model.nodes[x].calls[k].1));
                            queue.push_back(x);
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
        let mut called: Vec<&str> = members
            .iter()
            .flat_map(|&m| model.nodes[m].calls.iter())
            .filter(|(c, _)| component_of[*c] != ci)
            .map(|(c, _)| definition_digest[*c].as_str())
            .collect();
        called.sort_unstable();
        called.dedup();
        let unit = digests.unit(model, members, &called);
        for &m in members {
            definition_digest[m] = digests.member(model.nodes[m].name, &unit);
        }
    }

    let effects = Effects { sets, real, witness, components, component_of, definition_digest };
    let diagnostics = check_claims(model, &effects, sources);
    (effects, diagnostics)
}

/// The internal callers of every node (calls within its component), for the walk back from the sources of
/// a witness: one flat array, each node's callers a range of it. Within a node's range, callers come in
/// the order of their component's members and then of their calls, which the witnesses depend on.
struct Callers {
    /// Where each node's callers start in `list`; `start[n + 1]` is where they end.
    start: Vec<usize>,
    /// The caller and the index of the call in its `calls`.
    list: Vec<(NodeId, usize)>,
}

impl Callers {
    fn new(model: &Model<'_>, components: &[Vec<NodeId>], component_of: &[usize]) -> Callers {
        let n = model.nodes.len();
        let internal = |m: NodeId| {
            let ci = component_of[m];
            model.nodes[m].calls.iter().enumerate().filter(move |(_, (callee, _))| component_of[*callee] == ci)
        };
        let mut start = vec![0; n + 1];
        for m in 0..n {
            for (_, (callee, _)) in internal(m) {
                start[*callee + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut next = start.clone();
        let mut list = vec![(0, 0); start[n]];
        for members in components {
            for &m in members {
                for (k, (callee, _)) in internal(m) {
                    list[next[*callee]] = (m, k);
                    next[*callee] += 1;
                }
            }
        }
        Callers { start, list }
    }

    /// The internal callers of a node, each with the index of its call (the span is looked up only for
    /// a caller that takes the hop: most do not, and the lookup is a cache miss).
    fn of(&self, node: NodeId) -> &[(NodeId, usize)] {
        &self.list[self.start[node]..self.start[node + 1]]
    }
}

/// Writes the canonical JSON of the definition digests straight into SHA-256, without a
/// `serde_json::Value` per node: one component can hold most of the package. The bytes are what
/// [`canonical_digest`] writes for the same forms (keys sorted, no whitespace); keys are written here in
/// sorted order, so nothing needs reordering.
#[derive(Default)]
struct DigestWriter {
    /// Reused between components; flushed into the hash in chunks.
    buf: Vec<u8>,
    /// The members of a component in name order.
    order: Vec<NodeId>,
}

impl DigestWriter {
    /// The digest of a component: `{"calls": called, "members": [local form of each member, by name]}`.
    fn unit(&mut self, model: &Model<'_>, members: &[NodeId], called: &[&str]) -> String {
        // Node ids follow names (`Model::nodes` is sorted by name, names distinct); the check keeps the
        // name order exact even for a model built otherwise.
        self.order.clear();
        self.order.extend_from_slice(members);
        self.order.sort_unstable();
        if !self.order.windows(2).all(|w| model.nodes[w[0]].name < model.nodes[w[1]].name) {
            self.order.sort_by(|a, b| model.nodes[*a].name.cmp(model.nodes[*b].name));
        }
        let mut hasher = Sha256::new();
        let buf = &mut self.buf;
        buf.clear();
        buf.extend_from_slice(b"{\"calls\":[");
        for (i, digest) in called.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            push_json_str(buf, digest);
        }
        buf.extend_from_slice(b"],\"members\":[");
        for (i, &m) in self.order.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            push_local_form(buf, model, m);
            if buf.len() >= 1 << 16 {
                hasher.update(&buf[..]);
                buf.clear();
            }
        }
        buf.extend_from_slice(b"]}");
        hasher.update(&buf[..]);
        hex(&hasher.finalize())
    }

    /// A member's definition digest: `{"name": name, "unit": unit}`.
    fn member(&mut self, name: &str, unit: &str) -> String {
        let buf = &mut self.buf;
        buf.clear();
        buf.extend_from_slice(b"{\"name\":");
        push_json_str(buf, name);
        buf.extend_from_slice(b",\"unit\":");
        push_json_str(buf, unit);
        buf.push(b'}');
        sha256_hex(buf)
    }
}

/// Appends the canonical form of a node's own definition: signature, label, doc, claim and body; no spans,
/// no formatting. The object `{"body", "claim", "doc", "kind", "label", "name", "params"}`, keys in order,
/// and `"pinned"` last for a pinned extern tool; a parameter is `[name, type]`, or `[name, type, "optional"]`
/// for `name?: type` (so a file without either digests as before they existed).
fn push_local_form(out: &mut Vec<u8>, model: &Model<'_>, m: NodeId) {
    let node = &model.nodes[m];
    let (kind, label, body, pinned) = match node.kind {
        NodeKind::Tool(t) => (
            if node.is_extern() { "extern_tool" } else { "tool" },
            t.label.as_ref().map(|l| &l.value),
            &t.body,
            t.pinned.as_ref().map(|p| &p.value),
        ),
        NodeKind::Function(f) => ("fn", None, &f.body, None),
    };
    out.extend_from_slice(b"{\"body\":[");
    for (i, s) in body.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        crate::model::statement_pieces(&s.kind, |piece| push_json_escaped(out, piece));
        out.push(b'"');
    }
    out.extend_from_slice(b"],\"claim\":");
    match node.claim {
        None => out.extend_from_slice(b"null"),
        Some((claim, _)) => {
            out.push(b'[');
            for (i, class) in claim.classes().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_json_str(out, class.as_str());
            }
            out.push(b']');
        }
    }
    // `Declaration::doc_text`: the lines joined by `\n`, or null.
    out.extend_from_slice(b",\"doc\":");
    let docs = &node.declaration.docs;
    if docs.is_empty() {
        out.extend_from_slice(b"null");
    } else {
        out.push(b'"');
        for (i, line) in docs.iter().enumerate() {
            if i > 0 {
                push_json_escaped(out, "\n");
            }
            push_json_escaped(out, line);
        }
        out.push(b'"');
    }
    out.extend_from_slice(b",\"kind\":");
    push_json_str(out, kind);
    out.extend_from_slice(b",\"label\":");
    match label {
        Some(l) => push_json_str(out, l),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"name\":");
    push_json_str(out, node.name);
    out.extend_from_slice(b",\"params\":[");
    for (i, (name, ty)) in node.params.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        push_json_str(out, name);
        out.push(b',');
        // A type is a string or a one-member object, so serde_json's compact form is already canonical.
        // INVARIANT: `ParamType` derives `Serialize` and a `Vec` never refuses a write.
        serde_json::to_writer(&mut *out, ty).expect("a parameter type serializes");
        if node.optional.get(i).copied().unwrap_or(false) {
            out.extend_from_slice(b",\"optional\"");
        }
        out.push(b']');
    }
    out.push(b']');
    if let Some(pin) = pinned {
        out.extend_from_slice(b",\"pinned\":");
        push_json_str(out, pin);
    }
    out.push(b'}');
}

/// Appends `s` as a JSON string.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    push_json_escaped(out, s);
    out.push(b'"');
}

/// Labels that walk a witness path, hop by hop, ending at the operation or claim.
pub fn witness_labels(model: &Model<'_>, effects: &Effects, node: NodeId, s: usize) -> Vec<(Span, String)> {
    effects
        .witness_path(node, s)
        .into_iter()
        .map(|(at, hop)| match hop {
            NextHop::Call(callee, span) => {
                (span, format!("`{}` calls `{}`", model.nodes[at].name, model.nodes[callee].name))
            }
            NextHop::Operation(i) => {
                let op = &model.nodes[at].operations[i];
                let what = if s == RESERVED_SLOT {
                    "the reserved subject `permits`".to_string()
                } else {
                    format!("`{}`", slot_name(s))
                };
                (op.span, format!("`{}` proves {what}", op.text))
            }
            NextHop::Claim(span) => {
                (span, format!("the extern tool `{}` claims `{}` (assumed)", model.nodes[at].name, slot_name(s)))
            }
        })
        .collect()
}

/// An extern tool's claim as the last hop of a witness, in words, as the table and `explain` write it:
/// `claimed by the author: reads + sends`. Made from the claim's classes, not its source, so layout and
/// the comments around a claim never reach the table.
pub fn claim_words(model: &Model<'_>, node: NodeId) -> String {
    let claim = model.nodes[node].claim.map_or_else(|| "nothing".to_string(), |(c, _)| c.describe());
    format!("claimed by the author: {claim}")
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
                    Diagnostic::new(
                        Code::EffectsDynamic,
                        format!("`call dynamic` makes `{}` never for every agent", node.name),
                    )
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
            let mut d = Diagnostic::new(
                Code::EffectsUnderstated,
                format!("the {kind} `{}` is claimed safer than it is", node.name),
            )
            .at(
                claim_span,
                format!(
                    "claimed `{}`, but it also {}",
                    claim.describe(),
                    missing.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(" and ")
                ),
            );
            for class in &missing {
                for (span, msg) in witness_labels(model, effects, i, slot(*class)) {
                    d = d.with(span, msg);
                }
            }
            d = d.help(format!(
                "add {names} to the claim, or remove what proves it; a claim is an upper bound the checker must prove"
            ));
            out.push(d);
        }
        // Claiming `reads` adds no caution (reads is always alone), so it is never "too wide"; and a claim
        // already reported as too narrow is not also reported as too wide.
        let unproven: Vec<EffectClass> =
            claim.classes().filter(|c| *c != EffectClass::Reads && !proven.contains(*c)).collect();
        if !unproven.is_empty() && missing.is_empty() {
            out.push(
                Diagnostic::new(
                    Code::EffectsOverstated,
                    format!("the claim of `{}` is wider than what it does", node.name),
                )
                .at(
                    claim_span,
                    format!(
                        "nothing proves {}",
                        unproven.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(" or ")
                    ),
                )
                .help("the level uses the claim, so this only adds caution; narrow the claim if the tool cannot do it"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{Source, Sources, parse_sources};

    /// The definition digests as they were first written: a `serde_json::Value` per form, hashed by
    /// [`crate::table::canonical_digest`]. The streaming writer must give the same bytes.
    fn reference_digests(model: &Model<'_>, effects: &Effects) -> Vec<String> {
        use crate::table::canonical_digest;
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
            let params: Vec<serde_json::Value> = node
                .params
                .iter()
                .zip(&node.optional)
                .map(|((name, ty), optional)| {
                    let ty = serde_json::to_value(ty).unwrap_or_default();
                    if *optional { serde_json::json!([name, ty, "optional"]) } else { serde_json::json!([name, ty]) }
                })
                .collect();
            let claim: Option<Vec<&str>> = node.claim.map(|(c, _)| c.classes().map(EffectClass::as_str).collect());
            let body: Vec<String> = body.iter().map(|s| crate::check::statement_text(&s.kind)).collect();
            let mut form = serde_json::json!({
                "kind": kind, "name": node.name, "label": label, "doc": node.declaration.doc_text(),
                "params": params, "claim": claim, "body": body,
            });
            if let (NodeKind::Tool(t), Some(map)) = (node.kind, form.as_object_mut()) {
                if let Some(pin) = &t.pinned {
                    map.insert("pinned".into(), serde_json::Value::from(pin.value.clone()));
                }
            }
            form
        }
        let mut out = vec![String::new(); model.nodes.len()];
        for members in &effects.components {
            let ci = effects.component_of[members[0]];
            let mut named: Vec<(&str, serde_json::Value)> =
                members.iter().map(|&m| (model.nodes[m].name, local_form(model, m))).collect();
            named.sort_by(|a, b| a.0.cmp(b.0));
            let forms: Vec<serde_json::Value> = named.into_iter().map(|(_, form)| form).collect();
            let mut called: Vec<&str> = members
                .iter()
                .flat_map(|&m| model.nodes[m].calls.iter())
                .filter(|(c, _)| effects.component_of[*c] != ci)
                .map(|(c, _)| out[*c].as_str())
                .collect();
            called.sort_unstable();
            called.dedup();
            let unit = canonical_digest(&serde_json::json!({ "members": forms, "calls": called })).unwrap_or_default();
            for &m in members {
                out[m] = canonical_digest(&serde_json::json!({ "name": model.nodes[m].name, "unit": unit }))
                    .unwrap_or_default();
            }
        }
        out
    }

    #[test]
    fn digests_are_the_canonical_json_of_the_forms() {
        let text = r#"
entity Stock { sku, price }
entity Ticket { id }

/// Counts "tubs" \ with a tab	and é.
/// Second line.
tool StockLevel "Count the \"tubs\" left" (sku: string, t: Ticket, n: int, ok: bool, amount: money) : reads {
    read Stock
    write Stock.price
    send "mail\"box\\ é"
    reach example
    call Helper
    call any [Helper, Other]
    version t.id
    subject sku
}

fn Helper() {
    call Other
    create Stock
    delete Stock.sku
}

fn Other() : reads + changes {
    call Helper
    reach "x.example"
}

extern tool Search "Search" (q: string) : reaches_out

tool Dyn "Dynamic" () {
    call dynamic
    call Search
}
"#;
        let mut sources = Sources::default();
        sources.add(Source::new("t.permits", text.as_bytes().to_vec()));
        let loaded = parse_sources(sources);
        let (model, _) = crate::check::check(&loaded.package);
        assert_eq!(model.nodes.len(), 5);
        let (effects, _) = infer(&model, &loaded.sources);
        assert_eq!(effects.definition_digest, reference_digests(&model, &effects));
    }
}
