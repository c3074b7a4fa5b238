//! The model: the resolved package that `check` builds and every later stage reads — tools and functions
//! as nodes of the call graph, their operations, effect sets, the layers' rules, people and authority —
//! and the canonical text of statements. It sits below both `check` (which builds it) and `effects`
//! (which computes over it), so neither depends on the other. No stage serializes it.

use std::collections::BTreeMap;

use crate::syntax::Span;
use crate::syntax::ast::*;
use crate::table::{EffectClass, Holder, Layer, Level, ParamType, Route as TableRoute};

/// Index of a node (tool or function) in [`Model::nodes`].
pub type NodeId = usize;

pub use crate::table::NameMap;

/// The resolved package.
#[derive(Debug)]
pub struct Model<'a> {
    /// Every tool and function, sorted by name. A node's index is its [`NodeId`].
    pub nodes: Vec<Node<'a>>,
    /// Node by name.
    pub node_of: NameMap<&'a str, NodeId>,
    /// Every agent, by name.
    pub agents: BTreeMap<&'a str, AgentModel<'a>>,
    /// Every skill, by name.
    pub skills: BTreeMap<&'a str, SkillModel<'a>>,
    /// Every person and their roles (sorted).
    pub persons: BTreeMap<&'a str, Vec<&'a str>>,
    /// Every role.
    pub roles: BTreeMap<&'a str, Span>,
    /// Every entity.
    pub entities: BTreeMap<&'a str, &'a Entity>,
    /// The doc comment of every named declaration that has one.
    pub docs: NameMap<&'a str, String>,
    /// Every queue and who decides it.
    pub queues: BTreeMap<&'a str, Vec<Holder>>,
    /// `supervises`, `decides_proposals`, `widens_autonomy`, in written order, duplicates removed.
    pub authority: BTreeMap<AuthorityKind, Vec<Holder>>,
    /// The package-wide `may`, if any.
    pub package_rules: Option<Rules<'a>>,
    /// The `test` blocks, resolved, in file and written order.
    pub tests: Vec<TestModel<'a>>,
    /// `proposal_lifetime` in seconds, if written.
    pub proposal_lifetime: Option<u64>,
    /// `grant_lifetime` in seconds, if written.
    pub grant_lifetime: Option<u64>,
    /// Every budget whose fields checked, by name (spec §6).
    pub budgets: BTreeMap<&'a str, BudgetModel<'a>>,
    /// Every mode, by name (spec §3c).
    pub modes: BTreeMap<&'a str, ModeModel<'a>>,
}

/// A mode, resolved (spec §3c).
#[derive(Debug)]
pub struct ModeModel<'a> {
    /// The declaration.
    pub declaration: &'a Declaration,
    /// The mode.
    pub mode: &'a Mode,
    /// Its layer, if it has a `may` (it tightens like the package-wide one).
    pub rules: Option<Rules<'a>>,
    /// `unattended`.
    pub unattended: bool,
}

/// A budget, checked (spec §6): figures are whole numbers in the minor unit (`unit`, e.g. cents).
#[derive(Clone, Debug)]
pub struct BudgetModel<'a> {
    /// Where its name is written.
    pub name_span: Span,
    /// `currency` (`"USD"`).
    pub currency: String,
    /// `unit`: the minor unit amounts are counted in (`cents`).
    pub unit: &'a str,
    /// `ceiling`: the most that may be spent and reserved together, in the minor unit.
    pub ceiling: u64,
    /// `alone_up_to`: the largest amount a call may spend without a person (the automatic allowance).
    pub alone_up_to: u64,
    /// `per_task`: the most one task may hold reserved and spent, if set.
    pub per_task: Option<u64>,
}

/// A `spend BUDGET by PARAM` operation, resolved: the budget and the `money` parameter of its node.
#[derive(Clone, Copy, Debug)]
pub struct SpendOp<'a> {
    /// The budget.
    pub budget: &'a str,
    /// The `money` parameter that says how much.
    pub param: &'a str,
    /// The operation.
    pub span: Span,
}

/// A `test` block, resolved.
#[derive(Debug)]
pub struct TestModel<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its expectations whose names resolved.
    pub expects: Vec<ExpectModel<'a>>,
}

/// One `expect`, resolved: the triple, the arguments as a call's JSON object, the expected level.
#[derive(Debug)]
pub struct ExpectModel<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The skill.
    pub skill: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// The arguments.
    pub args: serde_json::Map<String, serde_json::Value>,
    /// The mode the call is made in (`in MODE`), if written and known.
    pub mode: Option<&'a str>,
    /// The delegation chain (`via A.S …`), nearest first (spec §3b).
    pub via: Vec<crate::table::ChainLink>,
    /// The expected level.
    pub level: Level,
    /// The whole statement.
    pub span: Span,
    /// Where the expected level is written.
    pub level_span: Span,
}

/// A tool or a function: a node of the call graph.
#[derive(Debug)]
pub struct Node<'a> {
    /// Its name.
    pub name: &'a str,
    /// Where its name is written.
    pub name_span: Span,
    /// The declaration (for docs and the definition digest).
    pub declaration: &'a Declaration,
    /// A tool (offerable) or a function.
    pub kind: NodeKind<'a>,
    /// Its parameters, resolved.
    pub params: Vec<(&'a str, ParamType)>,
    /// Whether each parameter of `params` (same index) is optional (`name?: type`).
    pub optional: Vec<bool>,
    /// The effects its own operations prove, each with the operation's span and canonical text.
    pub operations: Vec<Operation>,
    /// Its resolved calls (a `call any` gives one edge per target; `call dynamic` gives an operation).
    pub calls: Vec<(NodeId, Span)>,
    /// The claim, resolved to a set.
    pub claim: Option<(EffectSet, Span)>,
    /// `version P.F`.
    pub version: Option<(&'a str, &'a str)>,
    /// `subject P`.
    pub subject: Option<&'a str>,
    /// Its own `spend` operation, resolved (at most one per tool or function).
    pub spend: Option<SpendOp<'a>>,
}

impl Node<'_> {
    /// Whether this is an `extern tool`.
    pub fn is_extern(&self) -> bool {
        matches!(self.kind, NodeKind::Tool(t) if t.kind == ToolKind::Extern)
    }

    /// Whether this is a tool (offerable) rather than a function.
    pub fn is_tool(&self) -> bool {
        matches!(self.kind, NodeKind::Tool(_))
    }
}

/// What a node is.
#[derive(Clone, Copy, Debug)]
pub enum NodeKind<'a> {
    /// `tool` or `extern tool`.
    Tool(&'a Tool),
    /// `fn`.
    Function(&'a Function),
}

/// An operation of a body and what it proves.
#[derive(Clone, Debug)]
pub struct Operation {
    /// The effects it proves (one class, or for `call dynamic` all of them and the reserved subject).
    pub effects: EffectSet,
    /// Where it is written.
    pub span: Span,
    /// Its canonical text (`write Repair.price`).
    pub text: String,
}

/// An agent, resolved.
#[derive(Debug)]
pub struct AgentModel<'a> {
    /// The declaration.
    pub declaration: &'a Declaration,
    /// The agent.
    pub agent: &'a Agent,
    /// `acts_as`.
    pub acts_as: Vec<&'a str>,
    /// The sponsor (a person), if it resolved.
    pub sponsor: Option<&'a str>,
    /// Skills in declared order (those that resolved).
    pub skills: Vec<&'a str>,
    /// The agent's layer (always present; empty without a `may`).
    pub rules: Rules<'a>,
    /// Routes, the default for all its skills.
    pub routes: BTreeMap<NodeId, (TableRoute, Span)>,
}

/// A skill, resolved.
#[derive(Debug)]
pub struct SkillModel<'a> {
    /// The declaration.
    pub declaration: &'a Declaration,
    /// The skill.
    pub skill: &'a Skill,
    /// Its tools in declared order (those that resolved; duplicates removed).
    pub tools: Vec<NodeId>,
    /// Its layer, if it has a `may`.
    pub rules: Option<Rules<'a>>,
    /// Its routes.
    pub routes: BTreeMap<NodeId, (TableRoute, Span)>,
    /// Its `delegates` entries (spec §3b) that resolved — an agent and one of its skills —, in written order,
    /// each once, with the entry's span.
    pub delegates: Vec<(&'a str, &'a str, Span)>,
}

/// One layer's rules, resolved (a `may` block).
#[derive(Debug)]
pub struct Rules<'a> {
    /// Which layer.
    pub layer: Layer,
    /// The block, if written.
    pub block: Option<&'a MayBlock>,
    /// The preset, if any.
    pub preset: Option<(Preset, Span)>,
    /// The class settings written, by class (never `reads`).
    pub settings: BTreeMap<EffectClass, (Level, Span)>,
    /// The named entries by tool (in node order, which is name order): level, the entry's span, the list's
    /// span.
    pub named: BTreeMap<NodeId, Vec<NamedRule>>,
}

/// A list entry naming a tool.
#[derive(Clone, Debug)]
pub struct NamedRule {
    /// The list's level.
    pub level: Level,
    /// The entry's condition, lowered and type-checked (`None`: unconditional).
    pub condition: Option<crate::table::Condition>,
    /// The entry.
    pub span: Span,
    /// The whole list.
    pub list_span: Span,
}

impl<'a> Rules<'a> {
    pub(crate) fn empty(layer: Layer) -> Rules<'a> {
        Rules { layer, block: None, preset: None, settings: BTreeMap::new(), named: BTreeMap::new() }
    }

    /// The strictest named entry for a tool in this layer.
    pub fn named_level(&self, node: NodeId) -> Option<&NamedRule> {
        self.named.get(&node)?.iter().max_by_key(|r| r.level)
    }

    /// The level this layer gives a class, and where that comes from: a setting (with its span), the
    /// preset, or the agent layer's default. `None` when the layer says nothing about the class.
    pub fn class_level(&self, class: EffectClass) -> Option<(Level, ClassSource)> {
        if class == EffectClass::Reads {
            return (self.layer == Layer::Agent).then_some((Level::Alone, ClassSource::Default));
        }
        if let Some((level, span)) = self.settings.get(&class) {
            if self.layer != Layer::Agent && *level == Level::Alone {
                return None; // those layers only tighten; warned in `check`
            }
            return Some((*level, ClassSource::Setting(*span)));
        }
        if let Some((preset, span)) = self.preset {
            let level = match (preset, class) {
                (Preset::Everything, _) | (Preset::ChangesAlone, EffectClass::Changes) => Level::Alone,
                (Preset::ChangesAlone, _) => Level::Propose,
            };
            if self.layer != Layer::Agent && level == Level::Alone {
                return None;
            }
            return Some((level, ClassSource::Preset(span)));
        }
        (self.layer == Layer::Agent).then_some((Level::Propose, ClassSource::Default))
    }
}

/// Where a layer's class level comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassSource {
    /// A class setting, written at the span.
    Setting(Span),
    /// The block's preset, written at the span.
    Preset(Span),
    /// The agent layer's default: `reads` alone, every other class `propose`.
    Default,
}

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

/// The slot of a class in an [`EffectSet`] and in a witness array (0–4; [`RESERVED_SLOT`] is the reserved
/// subject's).
pub fn slot(class: EffectClass) -> usize {
    match class {
        EffectClass::Reads => 0,
        EffectClass::Changes => 1,
        EffectClass::Sends => 2,
        EffectClass::Spends => 3,
        EffectClass::ReachesOut => 4,
    }
}

/// How a layer is named in messages.
pub fn layer_noun(layer: Layer) -> &'static str {
    match layer {
        Layer::Package => "package-wide",
        Layer::Agent => "agent",
        Layer::Skill => "skill",
        Layer::Mode => "mode",
    }
}

/// The canonical text of a statement: keywords and names, single spaces, no spans.
pub fn statement_text(kind: &StatementKind) -> String {
    let mut out = String::new();
    statement_pieces(kind, |piece| out.push_str(piece));
    out
}

/// The pieces of [`statement_text`] in order: the text is their concatenation. The definition digests
/// write them straight into their canonical JSON, without a `String` per statement.
pub fn statement_pieces(kind: &StatementKind, mut emit: impl FnMut(&str)) {
    fn er(keyword: &str, r: &EntityRef, emit: &mut impl FnMut(&str)) {
        emit(keyword);
        emit(&r.entity.name);
        if let Some(f) = &r.field {
            emit(".");
            emit(&f.name);
        }
    }
    match kind {
        StatementKind::Read(r) => er("read ", r, &mut emit),
        StatementKind::Write(r) => er("write ", r, &mut emit),
        StatementKind::Create(r) => er("create ", r, &mut emit),
        StatementKind::Delete(r) => er("delete ", r, &mut emit),
        StatementKind::Send(t) | StatementKind::Reach(t) => {
            emit(if matches!(kind, StatementKind::Send(_)) { "send " } else { "reach " });
            // A quoted target as a JSON string (the canonical escaper), never Rust's `Debug` form.
            // INVARIANT: a `str` always serializes.
            if t.quoted {
                emit(&crate::table::canonical_json(&t.text).expect("a string serializes"))
            } else {
                emit(&t.text)
            }
        }
        StatementKind::Spend { budget, by } => {
            for piece in ["spend ", &budget.name, " by ", &by.name] {
                emit(piece);
            }
        }
        StatementKind::Call(t) => {
            emit("call ");
            emit(&t.name);
        }
        StatementKind::CallAny(ts) => {
            emit("call any [");
            for (i, t) in ts.iter().enumerate() {
                if i > 0 {
                    emit(", ");
                }
                emit(&t.name);
            }
            emit("]");
        }
        StatementKind::CallDynamic => emit("call dynamic"),
        StatementKind::Version { param, field } => {
            for piece in ["version ", &param.name, ".", &field.name] {
                emit(piece);
            }
        }
        StatementKind::Subject(p) => {
            emit("subject ");
            emit(&p.name);
        }
    }
}
