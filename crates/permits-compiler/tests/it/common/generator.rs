//! A generator of small random packages, kept as an in-memory structure ([`Pkg`]) and rendered to
//! `.permits` source text. The structure is the input of the naive spec evaluator in `spec.rs`, so the
//! differential test shares no code with the compiler: only the rendered text goes through `permits`.
//!
//! Every generated package is valid by construction (no error diagnostics): claims are rendered as the
//! proven set plus random extra classes, extern tools always claim something, no `spend` (refused until
//! budgets land), at least one agent with a skill with a tool.

use std::collections::BTreeSet;

use permits_compiler::compile::{Output, compile_loaded};
use permits_compiler::syntax::{Source, Sources, parse_sources};
use permits_table::Level;
use proptest::prelude::*;

/// Effect bits: `reads`, `changes`, `sends`, `spends`, `reaches_out` (bits 0–4, the order of spec §2),
/// and the reserved subject `permits` (bit 5).
pub const CLASS_NAMES: [&str; 5] = ["reads", "changes", "sends", "spends", "reaches_out"];
/// The reserved subject's bit.
pub const RESERVED: u8 = 1 << 5;
/// Every class bit.
pub const CLASSES: u8 = 0b1_1111;

/// The integer arguments every conditional entry is evaluated on (each tool has one parameter `n`, an `int` or a `number`).
pub const ARGS: [i64; 7] = [-3, 0, 1, 2, 4, 5, 9];

/// A call graph node: a tool or a function, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeRef {
    /// `tools[i]`, named `T{i}`.
    Tool(usize),
    /// `fns[i]`, named `f{i}`.
    Fn(usize),
}

/// One operation of a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `read E` → reads.
    Read,
    /// `write E.f` → changes.
    Write,
    /// `create E` → changes.
    Create,
    /// `send email` → sends.
    Send,
    /// `reach "api.example.com"` → reaches_out.
    Reach,
    /// `write permits` → changes and the reserved subject.
    WritePermits,
    /// `call dynamic` → every class and the reserved subject.
    Dynamic,
    /// `call X`.
    Call(NodeRef),
    /// `call any [X, Y]`.
    CallAny(Vec<NodeRef>),
}

/// A tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolG {
    /// `extern tool` (no body, claim required).
    pub external: bool,
    /// For an extern tool, its claim (non-empty class bits); otherwise extra classes claimed beyond the
    /// proven set, when the tool has a claim at all.
    pub claim: Option<u8>,
    /// The body (empty for an extern tool).
    pub ops: Vec<Op>,
}

/// A function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FnG {
    /// Extra classes claimed beyond the proven set, when it has a claim.
    pub claim: Option<u8>,
    /// The body.
    pub ops: Vec<Op>,
}

/// A condition on the parameter `n` (`n: int`, or `n: number` in a package with a [`Cond::Half`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    /// `n OP k`.
    Cmp(&'static str, i64),
    /// `n OP h`, where `h` is the odd number of halves given (`Half("<", 3)` is `n < 1.5`): a decimal
    /// literal, so the package declares `n: number` (spec §2).
    Half(&'static str, i64),
    /// `(a and b)`.
    And(Box<Cond>, Box<Cond>),
    /// `(a or b)`.
    Or(Box<Cond>, Box<Cond>),
    /// `not a`.
    Not(Box<Cond>),
}

impl Cond {
    /// Evaluates the condition on `n`, straight from the operators' meaning.
    pub fn holds(&self, n: i64) -> bool {
        let compare = |op: &str, a: i64, b: i64| match op {
            "<" => a < b,
            "<=" => a <= b,
            "==" => a == b,
            "!=" => a != b,
            ">=" => a >= b,
            ">" => a > b,
            other => unreachable!("the generator makes no operator `{other}`"),
        };
        match self {
            Cond::Cmp(op, k) => compare(op, n, *k),
            // n OP h/2 exactly when 2n OP h: whole numbers of halves, no rounding anywhere.
            Cond::Half(op, h) => compare(op, 2 * n, *h),
            Cond::And(a, b) => a.holds(n) && b.holds(n),
            Cond::Or(a, b) => a.holds(n) || b.holds(n),
            Cond::Not(a) => !a.holds(n),
        }
    }

    /// Whether the condition has a decimal literal anywhere.
    pub fn has_half(&self) -> bool {
        match self {
            Cond::Cmp(..) => false,
            Cond::Half(..) => true,
            Cond::And(a, b) | Cond::Or(a, b) => a.has_half() || b.has_half(),
            Cond::Not(a) => a.has_half(),
        }
    }

    /// The source text.
    pub fn render(&self) -> String {
        match self {
            Cond::Cmp(op, k) => format!("n {op} {k}"),
            Cond::Half(op, h) => format!("n {op} {}{}.5", if *h < 0 { "-" } else { "" }, h.abs() / 2),
            Cond::And(a, b) => format!("({} and {})", a.render(), b.render()),
            Cond::Or(a, b) => format!("({} or {})", a.render(), b.render()),
            Cond::Not(a) => format!("not {}", a.render()),
        }
    }
}

/// A list entry: a tool (by index) and an optional condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryG {
    /// `tools[tool]`.
    pub tool: usize,
    /// `when …`.
    pub when: Option<Cond>,
}

/// A preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// `everything`: all four classes alone.
    Everything,
    /// `changes_alone`: changes alone, the rest propose.
    ChangesAlone,
}

/// A `may` block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MayG {
    /// The preset, written first.
    pub preset: Option<Preset>,
    /// Class settings for `changes`, `sends`, `spends`, `reaches_out` (index 0–3 = class bits 1–4).
    pub settings: [Option<Level>; 4],
    /// The lists, in order.
    pub lists: Vec<(Level, Vec<EntryG>)>,
}

/// A skill `S{i}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillG {
    /// Its tools (indices, distinct, non-empty), in order.
    pub tools: Vec<usize>,
    /// Its `may`, if written.
    pub may: Option<MayG>,
    /// Its `delegates` entries (agent, skill), each naming a skill of a later index that the agent has, so
    /// delegation is acyclic (spec §3b: a cycle is an error).
    pub delegates: Vec<(usize, usize)>,
}

/// An agent `A{i}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentG {
    /// Its skills (indices, distinct, non-empty), in order.
    pub skills: Vec<usize>,
    /// Its `may`, if written (an absent one is an empty one).
    pub may: Option<MayG>,
}

/// A mode `M{i}` (spec §3c): a named layer that only tightens, and may be `unattended`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModeG {
    /// Its `may`, if written (it tightens like the package-wide one).
    pub may: Option<MayG>,
    /// `unattended`: a proposal waiting for the requester is `never` in this mode (the runtime's step 7).
    pub unattended: bool,
}

/// A generated package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pkg {
    /// `T0`, `T1`, …
    pub tools: Vec<ToolG>,
    /// `f0`, `f1`, …
    pub fns: Vec<FnG>,
    /// `A0`, …
    pub agents: Vec<AgentG>,
    /// `S0`, …
    pub skills: Vec<SkillG>,
    /// The package-wide `may`, if written.
    pub package_may: Option<MayG>,
    /// `M0`, `M1`, … (none in most packages).
    pub modes: Vec<ModeG>,
}

/// The name of a node.
pub fn node_name(n: NodeRef) -> String {
    match n {
        NodeRef::Tool(i) => format!("T{i}"),
        NodeRef::Fn(i) => format!("f{i}"),
    }
}

fn level_word(l: Level) -> &'static str {
    l.as_str()
}

fn class_list(bits: u8) -> String {
    (0..5).filter(|b| bits & (1 << b) != 0).map(|b| CLASS_NAMES[b]).collect::<Vec<_>>().join(" + ")
}

impl Pkg {
    /// The type of every tool's parameter `n`: `number` when some condition has a decimal literal
    /// ([`Cond::Half`]), else `int`. The arguments are whole numbers either way, so the reference reads both
    /// alike; a `number` package exercises the table's exact decimal comparison (whole-number literals
    /// against a `number` included).
    pub fn param_type(&self) -> &'static str {
        let mays = self
            .package_may
            .iter()
            .chain(self.agents.iter().filter_map(|a| a.may.as_ref()))
            .chain(self.skills.iter().filter_map(|s| s.may.as_ref()))
            .chain(self.modes.iter().filter_map(|m| m.may.as_ref()));
        let half = mays
            .flat_map(|m| m.lists.iter().flat_map(|(_, entries)| entries.iter()))
            .any(|e| e.when.as_ref().is_some_and(Cond::has_half));
        if half { "number" } else { "int" }
    }

    /// The operations of a node.
    pub fn ops(&self, n: NodeRef) -> &[Op] {
        match n {
            NodeRef::Tool(i) => &self.tools[i].ops,
            NodeRef::Fn(i) => &self.fns[i].ops,
        }
    }

    /// The claim as rendered (class bits), if the node has one: an extern tool's own claim; for a body,
    /// the proven classes plus the generated extra ones (`reads` when that would be empty).
    pub fn claim_bits(&self, n: NodeRef) -> Option<u8> {
        let extra = match n {
            NodeRef::Tool(i) if self.tools[i].external => return self.tools[i].claim,
            NodeRef::Tool(i) => self.tools[i].claim?,
            NodeRef::Fn(i) => self.fns[i].claim?,
        };
        let bits = (crate::common::spec::proven(self, n) & CLASSES) | extra;
        Some(if bits == 0 { 1 } else { bits })
    }

    fn render_may(&self, may: &MayG, indent: &str) -> String {
        let mut out = format!("{indent}may {{\n");
        match may.preset {
            Some(Preset::Everything) => out.push_str(&format!("{indent}    everything\n")),
            Some(Preset::ChangesAlone) => out.push_str(&format!("{indent}    changes_alone\n")),
            None => {}
        }
        for (i, s) in may.settings.iter().enumerate() {
            if let Some(l) = s {
                out.push_str(&format!("{indent}    {}: {}\n", CLASS_NAMES[i + 1], level_word(*l)));
            }
        }
        for (level, entries) in &may.lists {
            let items: Vec<String> = entries
                .iter()
                .map(|e| match &e.when {
                    Some(c) => format!("T{} when {}", e.tool, c.render()),
                    None => format!("T{}", e.tool),
                })
                .collect();
            out.push_str(&format!("{indent}    {} [{}]\n", level_word(*level), items.join(", ")));
        }
        out.push_str(&format!("{indent}}}\n"));
        out
    }

    fn render_op(op: &Op) -> String {
        match op {
            Op::Read => "read E".into(),
            Op::Write => "write E.f".into(),
            Op::Create => "create E".into(),
            Op::Send => "send email".into(),
            Op::Reach => "reach \"api.example.com\"".into(),
            Op::WritePermits => "write permits".into(),
            Op::Dynamic => "call dynamic".into(),
            Op::Call(n) => format!("call {}", node_name(*n)),
            Op::CallAny(ns) => {
                format!("call any [{}]", ns.iter().map(|n| node_name(*n)).collect::<Vec<_>>().join(", "))
            }
        }
    }

    /// The package as top-level declarations, each a self-contained piece of source text, in a fixed
    /// order. Any split of them into files is the same package.
    pub fn declarations(&self) -> Vec<String> {
        let mut out = vec![
            "entity E { f }\n".to_string(),
            "role Boss\n".to_string(),
            "person P0 { roles [Boss] }\n".to_string(),
            "person P1\n".to_string(),
            "supervises [Boss]\nwidens_autonomy [Boss]\ndecides_proposals [Boss]\n".to_string(),
        ];
        if let Some(may) = &self.package_may {
            out.push(self.render_may(may, ""));
        }
        let ty = self.param_type();
        for (i, t) in self.tools.iter().enumerate() {
            let claim = self.claim_bits(NodeRef::Tool(i)).map(|b| format!(" : {}", class_list(b))).unwrap_or_default();
            if t.external {
                out.push(format!("extern tool T{i} \"Tool {i}\" (n: {ty}){claim}\n"));
            } else {
                let body: String = t.ops.iter().map(|op| format!("    {}\n", Self::render_op(op))).collect();
                out.push(format!("/// Tool number {i}.\ntool T{i} \"Tool {i}\" (n: {ty}){claim} {{\n{body}}}\n"));
            }
        }
        for (i, f) in self.fns.iter().enumerate() {
            let claim = self.claim_bits(NodeRef::Fn(i)).map(|b| format!(" : {}", class_list(b))).unwrap_or_default();
            let body: String = f.ops.iter().map(|op| format!("    {}\n", Self::render_op(op))).collect();
            out.push(format!("fn f{i}(){claim} {{\n{body}}}\n"));
        }
        for (i, a) in self.agents.iter().enumerate() {
            let may = a.may.as_ref().map(|m| self.render_may(m, "    ")).unwrap_or_default();
            let skills = a.skills.iter().map(|s| format!("S{s}")).collect::<Vec<_>>().join(", ");
            out.push(format!("agent A{i} \"Agent {i}\" {{\n    sponsor P0\n{may}    skills [{skills}]\n}}\n"));
        }
        for (i, s) in self.skills.iter().enumerate() {
            let may = s.may.as_ref().map(|m| self.render_may(m, "    ")).unwrap_or_default();
            let tools = s.tools.iter().map(|t| format!("T{t}")).collect::<Vec<_>>().join(", ");
            let delegates = if s.delegates.is_empty() {
                String::new()
            } else {
                let list = s.delegates.iter().map(|(a, s)| format!("A{a}.S{s}")).collect::<Vec<_>>().join(", ");
                format!("    delegates [{list}]\n")
            };
            out.push(format!("skill S{i} \"Skill {i}\" {{\n    tools [{tools}]\n{may}{delegates}}}\n"));
        }
        for (i, m) in self.modes.iter().enumerate() {
            let may = m.may.as_ref().map(|m| self.render_may(m, "    ")).unwrap_or_default();
            let unattended = if m.unattended { "    unattended\n" } else { "" };
            out.push(format!("mode M{i} \"Mode {i}\" {{\n{may}{unattended}}}\n"));
        }
        out
    }

    /// The whole package as one file.
    pub fn render(&self) -> String {
        self.declarations().join("\n")
    }

    /// Every offered triple `(agent, skill, tool)` by index.
    pub fn triples(&self) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for (a, ag) in self.agents.iter().enumerate() {
            for &s in &ag.skills {
                for &t in &self.skills[s].tools {
                    out.push((a, s, t));
                }
            }
        }
        out
    }
}

/// Compiles files held in memory, added in the order given (name, text).
pub fn compile_files(files: &[(String, String)]) -> Output {
    let mut sources = Sources::default();
    for (name, text) in files {
        sources.add(Source::new(name.clone(), text.as_bytes().to_vec()));
    }
    compile_loaded(parse_sources(sources))
}

/// Compiles a package as one file `package.permits`; panics with the rendered diagnostics (and the
/// source) when it does not compile: the generator only makes valid packages.
pub fn compile_pkg(pkg: &Pkg) -> permits_table::Table {
    compile_text(&pkg.render())
}

/// Compiles one source text; panics with the diagnostics when it does not compile.
pub fn compile_text(text: &str) -> permits_table::Table {
    let out = compile_files(&[("package.permits".to_string(), text.to_string())]);
    match out.table {
        Some(t) if !out.has_errors() => t,
        _ => panic!(
            "a generated package did not compile:\n{}\n--- source ---\n{text}",
            permits_compiler::diagnostics::render_plain(&out.diagnostics, &out.sources)
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies.

fn level() -> impl Strategy<Value = Level> + Clone {
    prop_oneof![Just(Level::Alone), Just(Level::Propose), Just(Level::ProposeEveryTime), Just(Level::Never)]
}

/// A condition on `n`, at most two levels of `and`/`or`/`not`; about one comparison in five has a decimal
/// literal (`n < 1.5`), which makes the package's `n` a `number`.
pub fn cond() -> impl Strategy<Value = Cond> {
    let op = prop_oneof![Just("<"), Just("<="), Just("=="), Just("!="), Just(">="), Just(">")];
    let leaf = prop_oneof![
        4 => (op.clone(), -2i64..8).prop_map(|(op, k)| Cond::Cmp(op, k)),
        1 => (op, -3i64..8).prop_map(|(op, k)| Cond::Half(op, 2 * k + 1)),
    ];
    leaf.prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Cond::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Cond::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|a| Cond::Not(Box::new(a))),
        ]
    })
}

/// A `may` block over `nt` tools.
pub fn may(nt: usize) -> impl Strategy<Value = MayG> {
    let preset = proptest::option::weighted(0.2, prop_oneof![Just(Preset::Everything), Just(Preset::ChangesAlone)]);
    let setting = proptest::option::weighted(0.3, level());
    let entry = (0..nt, proptest::option::weighted(0.35, cond())).prop_map(|(tool, when)| EntryG { tool, when });
    let list = (level(), proptest::collection::vec(entry, 1..3));
    (preset, [setting.clone(), setting.clone(), setting.clone(), setting], proptest::collection::vec(list, 0..3))
        .prop_map(|(preset, settings, lists)| MayG { preset, settings, lists })
}

/// A mode over `nt` tools: mostly a `may` block, sometimes `unattended` too (or only).
pub fn mode(nt: usize) -> impl Strategy<Value = ModeG> {
    (proptest::option::weighted(0.85, may(nt)), proptest::bool::weighted(0.3))
        .prop_map(|(may, unattended)| ModeG { may, unattended })
}

fn distinct(v: Vec<usize>) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    v.into_iter().filter(|x| seen.insert(*x)).collect()
}

/// A small random package: 1–6 tools (some extern), 0–3 functions, call edges (cycles included),
/// claims, 1–3 agents, 1–3 skills, `may` blocks in every layer, 0–2 modes.
pub fn pkg() -> impl Strategy<Value = Pkg> {
    (1usize..=6, 0usize..=3, 1usize..=3, 1usize..=3).prop_flat_map(|(nt, nf, na, ns)| {
        let node = (0..nt + nf).prop_map(move |i| if i < nt { NodeRef::Tool(i) } else { NodeRef::Fn(i - nt) });
        let op = prop_oneof![
            4 => Just(Op::Read),
            3 => Just(Op::Write),
            1 => Just(Op::Create),
            3 => Just(Op::Send),
            3 => Just(Op::Reach),
            1 => Just(Op::WritePermits),
            1 => Just(Op::Dynamic),
            8 => node.clone().prop_map(Op::Call),
            2 => proptest::collection::vec(node, 1..3).prop_map(Op::CallAny),
        ];
        let ops = proptest::collection::vec(op, 0..4);
        let tool = (proptest::bool::weighted(0.2), 1u8..32, proptest::option::weighted(0.3, 0u8..32), ops.clone())
            .prop_map(|(external, ext_claim, extra, ops)| {
                if external {
                    ToolG { external, claim: Some(ext_claim), ops: Vec::new() }
                } else {
                    ToolG { external, claim: extra, ops }
                }
            });
        let function = (proptest::option::weighted(0.2, 0u8..32), ops).prop_map(|(claim, ops)| FnG { claim, ops });
        let delegate = (0..na, 0..ns);
        let skill = (
            proptest::collection::vec(0..nt, 1..=nt),
            proptest::option::weighted(0.6, may(nt)),
            proptest::collection::vec(delegate, 0..3),
        )
            .prop_map(|(tools, may, delegates)| SkillG { tools: distinct(tools), may, delegates });
        let agent = (proptest::collection::vec(0..ns, 1..=ns), proptest::option::weighted(0.8, may(nt)))
            .prop_map(|(skills, may)| AgentG { skills: distinct(skills), may });
        (
            proptest::collection::vec(tool, nt),
            proptest::collection::vec(function, nf),
            proptest::collection::vec(agent, na),
            proptest::collection::vec(skill, ns),
            proptest::option::weighted(0.5, may(nt)),
            proptest::collection::vec(mode(nt), 0..=2),
        )
            .prop_map(|(tools, fns, agents, skills, package_may, modes)| {
                let mut p = Pkg { tools, fns, agents, skills, package_may, modes };
                // Keep the entries that name a later skill the agent has, each once: acyclic and valid.
                for i in 0..p.skills.len() {
                    let mut seen = BTreeSet::new();
                    let kept: Vec<(usize, usize)> = p.skills[i]
                        .delegates
                        .iter()
                        .copied()
                        .filter(|&(a, s)| s > i && p.agents[a].skills.contains(&s) && seen.insert((a, s)))
                        .collect();
                    p.skills[i].delegates = kept;
                }
                p
            })
    })
}

/// The number of cases: `PROPTEST_CASES` when set, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
