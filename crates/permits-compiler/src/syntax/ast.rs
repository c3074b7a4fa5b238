//! The syntax tree of a package: what the sources say, with a span on every node.
//!
//! Nothing here is resolved or checked beyond what the grammar guarantees and the lexical rules of
//! spec §1 (ASCII identifiers, reserved words, string escapes). The tree keeps declared order and
//! comments, so the formatter can print it back. It is deliberately not `Serialize`: the decision
//! table (`crate::table`) is the only serialized format.

use crate::table::{CompareOp, EffectClass, Level};

/// Which source file of a package a span points into: an index into [`super::Sources`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub u32);

/// A byte range `[start, end)` in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// The file the range is in.
    pub file: FileId,
    /// First byte, inclusive.
    pub start: u32,
    /// Last byte, exclusive.
    pub end: u32,
}

impl Span {
    /// The smallest span covering both `self` and `other` (which must be in the same file).
    pub fn to(self, other: Span) -> Span {
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// A name as written, with where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    /// The name (ASCII letters, digits and `_`, starting with a letter).
    pub name: String,
    /// Where it is written.
    pub span: Span,
}

/// A string literal with its escapes decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StringLit {
    /// The decoded value.
    pub value: String,
    /// The literal, quotes included.
    pub span: Span,
}

/// A comment (`// …`), kept for the formatter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    /// The text after `//`.
    pub text: String,
    /// The comment, `//` included.
    pub span: Span,
}

/// One parsed `.permits` file.
#[derive(Clone, Debug)]
pub struct File {
    /// Which source it came from.
    pub id: FileId,
    /// Its declarations, in written order.
    pub declarations: Vec<Declaration>,
    /// Its ordinary comments, in written order.
    pub comments: Vec<Comment>,
}

/// A package: every file of one folder (or one file), in sorted relative-path order.
#[derive(Clone, Debug, Default)]
pub struct Package {
    /// The parsed files.
    pub files: Vec<File>,
}

impl Package {
    /// Every declaration of every file, in file order and then written order.
    pub fn declarations(&self) -> impl Iterator<Item = &Declaration> {
        self.files.iter().flat_map(|f| f.declarations.iter())
    }
}

/// A top-level declaration and the doc comments above it.
#[derive(Clone, Debug)]
pub struct Declaration {
    /// The doc comment lines (`///`), without the slashes and one leading space.
    pub docs: Vec<String>,
    /// What is declared.
    pub kind: DeclarationKind,
    /// The whole declaration, doc comments included.
    pub span: Span,
}

impl Declaration {
    /// The doc comment as one text, lines joined by `\n`; `None` without one.
    pub fn doc_text(&self) -> Option<String> {
        if self.docs.is_empty() { None } else { Some(self.docs.join("\n")) }
    }
}

/// The kinds of top-level declaration.
#[derive(Clone, Debug)]
pub enum DeclarationKind {
    /// `entity`
    Entity(Entity),
    /// `tool` or `extern tool`
    Tool(Tool),
    /// `fn`
    Function(Function),
    /// `role`
    Role(Role),
    /// `person`
    Person(Person),
    /// `queue`
    Queue(Queue),
    /// the package-wide `may`
    May(MayBlock),
    /// `agent`
    Agent(Agent),
    /// `skill`
    Skill(Skill),
    /// `supervises` / `decides_proposals` / `widens_autonomy`
    Authority(AuthorityStmt),
    /// `proposal_lifetime` / `grant_lifetime`
    Lifetime(LifetimeStmt),
    /// `test "name" { .. }`
    Test(TestBlock),
    /// `budget`
    Budget(Budget),
    /// `mode`
    Mode(Mode),
}

/// `mode Plan "Look, change nothing." { may { .. } unattended }` (spec §3c).
#[derive(Clone, Debug)]
pub struct Mode {
    /// The mode's name.
    pub name: Ident,
    /// What the mode is for, if written.
    pub description: Option<StringLit>,
    /// Its statements, in written order.
    pub statements: Vec<ModeStatement>,
}

/// A statement of a mode.
#[derive(Clone, Debug)]
pub enum ModeStatement {
    /// `may { .. }`: the mode's layer, which only tightens.
    May(MayBlock),
    /// `unattended`: nobody is at the keyboard.
    Unattended(Span),
}

/// `budget Supplies { currency: "USD", unit: cents, ceiling: 2500, alone_up_to: 0 }` (spec §6).
#[derive(Clone, Debug)]
pub struct Budget {
    /// The budget's name.
    pub name: Ident,
    /// Its fields, in written order (checked after parsing: each of `currency`, `unit`, `ceiling` and
    /// `alone_up_to` exactly once).
    pub fields: Vec<BudgetField>,
}

/// `key: value` in a budget.
#[derive(Clone, Debug)]
pub struct BudgetField {
    /// The field's name (`ceiling`).
    pub key: Ident,
    /// Its value.
    pub value: BudgetValue,
    /// The whole field.
    pub span: Span,
}

/// The value of a budget field, as written.
#[derive(Clone, Debug)]
pub enum BudgetValue {
    /// A string (`"USD"`).
    String(StringLit),
    /// A whole number, as written (`2500`, `-1`): converted and range-checked by the checker.
    Number(String, Span),
    /// A decimal, as written (`50000.00`): refused by the checker (a budget's figures are whole numbers of
    /// its minor unit).
    Decimal(String, Span),
    /// A name (`cents`).
    Name(Ident),
}

impl BudgetValue {
    /// Where the value is written.
    pub fn span(&self) -> Span {
        match self {
            BudgetValue::String(s) => s.span,
            BudgetValue::Number(_, span) | BudgetValue::Decimal(_, span) => *span,
            BudgetValue::Name(i) => i.span,
        }
    }
}

/// `test "name" { expect .. }`: expectations about compiled levels.
#[derive(Clone, Debug)]
pub struct TestBlock {
    /// The test's name.
    pub name: StringLit,
    /// Its expectations, in written order.
    pub expects: Vec<Expect>,
}

/// `expect Agent.Skill.Tool(args) is LEVEL`
#[derive(Clone, Debug)]
pub struct Expect {
    /// The agent.
    pub agent: Ident,
    /// The skill.
    pub skill: Ident,
    /// The tool.
    pub tool: Ident,
    /// The call's arguments, in written order.
    pub args: Vec<(Ident, LiteralExpr)>,
    /// `via Agent.Skill …`: the call's delegation chain, nearest first (spec §3b); empty for a direct call.
    pub via: Vec<DelegateRef>,
    /// `in MODE`: the mode the call is made in, if written.
    pub mode: Option<Ident>,
    /// The expected level.
    pub level: Level,
    /// Where the level is written.
    pub level_span: Span,
    /// The whole statement.
    pub span: Span,
}

/// `entity Repair { ticket, fault }`
#[derive(Clone, Debug)]
pub struct Entity {
    /// The entity's name.
    pub name: Ident,
    /// Its fields, in written order.
    pub fields: Vec<Ident>,
}

/// Whether a tool has a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolKind {
    /// `tool`: effects are proven from the body.
    Defined,
    /// `extern tool`: no body, the claim is the only evidence.
    Extern,
}

/// `tool Name "label" (params) : claim { body }` or `extern tool …`.
#[derive(Clone, Debug)]
pub struct Tool {
    /// With or without a body.
    pub kind: ToolKind,
    /// The tool's name.
    pub name: Ident,
    /// The label a person reads; required (a missing one is a check error).
    pub label: Option<StringLit>,
    /// The parameters, in declared order.
    pub params: Vec<Param>,
    /// The claimed effect set, if written.
    pub claim: Option<Claim>,
    /// `pinned "sha256:HEX"` (extern tools only): the digest of the tool's definition where it lives.
    pub pinned: Option<StringLit>,
    /// The statements of the body (for an extern tool, only `version` and `subject`).
    pub body: Vec<Statement>,
    /// Where the body's braces are, if there is a body.
    pub body_span: Option<Span>,
}

/// `fn name(params) : claim { body }`
#[derive(Clone, Debug)]
pub struct Function {
    /// The function's name.
    pub name: Ident,
    /// The parameters, in declared order.
    pub params: Vec<Param>,
    /// The claimed effect set, if written.
    pub claim: Option<Claim>,
    /// The statements of the body.
    pub body: Vec<Statement>,
}

/// `name: type` or `name?: type`
#[derive(Clone, Debug)]
pub struct Param {
    /// The parameter's name.
    pub name: Ident,
    /// `true` for `name?: type`: the argument may be missing.
    pub optional: bool,
    /// The type as written: `string`, `int`, `bool`, `money`, `shell`, `number`, `json` or an entity name.
    pub ty: Ident,
    /// The whole parameter.
    pub span: Span,
}

/// `: changes + sends`
#[derive(Clone, Debug)]
pub struct Claim {
    /// The classes, in written order, each with where it is written.
    pub classes: Vec<(EffectClass, Span)>,
    /// The whole claim, colon included.
    pub span: Span,
}

/// A statement in a body.
#[derive(Clone, Debug)]
pub struct Statement {
    /// What the statement is.
    pub kind: StatementKind,
    /// The whole statement.
    pub span: Span,
}

/// The statements of a body.
#[derive(Clone, Debug)]
pub enum StatementKind {
    /// `read X`
    Read(EntityRef),
    /// `write X`
    Write(EntityRef),
    /// `create X`
    Create(EntityRef),
    /// `delete X`
    Delete(EntityRef),
    /// `send CHANNEL`
    Send(Target),
    /// `spend BUDGET by PARAM`
    Spend {
        /// The budget spent from.
        budget: Ident,
        /// The `money` parameter holding the amount.
        by: Ident,
    },
    /// `reach HOST`
    Reach(Target),
    /// `call F`
    Call(Ident),
    /// `call any [A, B]`
    CallAny(Vec<Ident>),
    /// `call dynamic`
    CallDynamic,
    /// `version P.F`
    Version {
        /// The parameter (of an entity type).
        param: Ident,
        /// The entity's field.
        field: Ident,
    },
    /// `subject P`
    Subject(Ident),
}

/// `Repair` or `Repair.note`.
#[derive(Clone, Debug)]
pub struct EntityRef {
    /// The entity (`permits` for the reserved entity).
    pub entity: Ident,
    /// The field, if one is named.
    pub field: Option<Ident>,
    /// The whole reference.
    pub span: Span,
}

/// A channel or host: a free name or a string.
#[derive(Clone, Debug)]
pub struct Target {
    /// The name, or the string's value.
    pub text: String,
    /// Whether it was written as a string literal.
    pub quoted: bool,
    /// Where it is written.
    pub span: Span,
}

/// `role Name`
#[derive(Clone, Debug)]
pub struct Role {
    /// The role's name.
    pub name: Ident,
}

/// `person Name { roles [..] }`
#[derive(Clone, Debug)]
pub struct Person {
    /// The person's name.
    pub name: Ident,
    /// The roles they hold.
    pub roles: Vec<Ident>,
}

/// `queue Name { decided_by [..] }`
#[derive(Clone, Debug)]
pub struct Queue {
    /// The queue's name.
    pub name: Ident,
    /// Roles or persons who decide what is routed to it.
    pub decided_by: Vec<Ident>,
}

/// Which package-wide authority statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AuthorityKind {
    /// `supervises`: may make standing rules for others and revoke anything.
    Supervises,
    /// `decides_proposals`: may decide any proposal.
    DecidesProposals,
    /// `widens_autonomy`: may make standing rules for themselves.
    WidensAutonomy,
}

/// `supervises [Manager]`
#[derive(Clone, Debug)]
pub struct AuthorityStmt {
    /// Which statement.
    pub kind: AuthorityKind,
    /// Roles or persons it admits.
    pub holders: Vec<Ident>,
}

/// Which package lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LifetimeKind {
    /// `proposal_lifetime`: how long a proposal waits before it expires (default 7 days).
    Proposal,
    /// `grant_lifetime`: the longest a grant lasts (default 24 hours).
    Grant,
}

/// `proposal_lifetime 7d`
#[derive(Clone, Debug)]
pub struct LifetimeStmt {
    /// Which lifetime.
    pub kind: LifetimeKind,
    /// The duration in seconds.
    pub seconds: u64,
    /// Where the duration is written.
    pub value_span: Span,
}

/// A `may` block: one layer of rules.
#[derive(Clone, Debug)]
pub struct MayBlock {
    /// Its statements, in written order.
    pub statements: Vec<MayStatement>,
    /// The whole block, keyword included.
    pub span: Span,
}

/// A statement of a `may` block.
#[derive(Clone, Debug)]
pub enum MayStatement {
    /// `everything` or `changes_alone`.
    Preset(Preset, Span),
    /// `changes: propose`
    Setting(ClassSetting),
    /// `never [A, B]`
    List(ToolList),
}

/// The presets a `may` block may start with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// All four classes alone.
    Everything,
    /// Changes alone, the rest propose.
    ChangesAlone,
}

impl Preset {
    /// The keyword as written: `everything`, `changes_alone`. Digests use it (never a Rust name).
    pub fn as_str(self) -> &'static str {
        match self {
            Preset::Everything => "everything",
            Preset::ChangesAlone => "changes_alone",
        }
    }
}

/// `changes: propose`
#[derive(Clone, Debug)]
pub struct ClassSetting {
    /// The class.
    pub class: EffectClass,
    /// Where the class is written.
    pub class_span: Span,
    /// Its level.
    pub level: Level,
    /// The whole setting.
    pub span: Span,
}

/// `never [A, B]`
#[derive(Clone, Debug)]
pub struct ToolList {
    /// The level the list gives.
    pub level: Level,
    /// The named tools, in written order.
    pub entries: Vec<ListEntry>,
    /// The whole list, level included.
    pub span: Span,
}

/// One tool named in a list.
#[derive(Clone, Debug)]
pub struct ListEntry {
    /// The tool.
    pub tool: Ident,
    /// `when …`: the entry applies only when the condition holds.
    pub condition: Option<ConditionExpr>,
    /// The whole entry.
    pub span: Span,
}

/// A condition on a tool's parameters, as written (spec §3 item 5).
#[derive(Clone, Debug)]
pub struct ConditionExpr {
    /// What it says.
    pub kind: ConditionExprKind,
    /// Where it is written.
    pub span: Span,
}

/// The shapes of a condition.
#[derive(Clone, Debug)]
pub enum ConditionExprKind {
    /// `a or b`
    Or(Vec<ConditionExpr>),
    /// `a and b`
    And(Vec<ConditionExpr>),
    /// `not a` (a run of `not`s is folded to its parity, so this never nests in itself)
    Not(Box<ConditionExpr>),
    /// `param OP value`
    Compare {
        /// The parameter.
        param: Ident,
        /// The operator.
        op: CompareOp,
        /// The value.
        value: LiteralExpr,
    },
    /// `param in [..]`
    In {
        /// The parameter.
        param: Ident,
        /// The values.
        values: Vec<LiteralExpr>,
    },
    /// `param matches "glob"`
    Matches {
        /// The parameter.
        param: Ident,
        /// The pattern.
        glob: StringLit,
    },
}

/// A value in a condition or a `test` argument, with where it is written.
#[derive(Clone, Debug)]
pub struct LiteralExpr {
    /// The value.
    pub value: LiteralValue,
    /// Where.
    pub span: Span,
}

/// A value as written: one the table can hold, or a decimal, which a `number` parameter takes and the
/// checker refuses where money or a whole number is expected (`permits::check::decimal`). The syntax stage
/// never makes a `Value(Literal::Number(_))`: a decimal stays as written until `check` lowers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiteralValue {
    /// A whole number, a string, `true` or `false`.
    Value(crate::table::Literal),
    /// A decimal, as written (`20.00`, `-0.5`).
    Decimal(String),
}

/// `agent Name "purpose" { .. }`
#[derive(Clone, Debug)]
pub struct Agent {
    /// The agent's name.
    pub name: Ident,
    /// Its purpose, if written.
    pub purpose: Option<StringLit>,
    /// Its statements, in written order.
    pub statements: Vec<AgentStatement>,
}

/// A statement of an agent.
#[derive(Clone, Debug)]
pub enum AgentStatement {
    /// `acts_as [..]`
    ActsAs(Vec<Ident>, Span),
    /// `sponsor P`
    Sponsor(Ident, Span),
    /// `may { .. }`
    May(MayBlock),
    /// `skills [..]`
    Skills(Vec<Ident>, Span),
    /// `route T to ..`: the default for all its skills.
    Route(RouteStmt),
}

/// `skill Name "description" { .. }`
#[derive(Clone, Debug)]
pub struct Skill {
    /// The skill's name.
    pub name: Ident,
    /// Its description, if written.
    pub description: Option<StringLit>,
    /// Its statements, in written order.
    pub statements: Vec<SkillStatement>,
}

/// A statement of a skill.
#[derive(Clone, Debug)]
pub enum SkillStatement {
    /// `tools [..]`
    Tools(Vec<Ident>, Span),
    /// `may { .. }`
    May(MayBlock),
    /// `route T to ..`
    Route(RouteStmt),
    /// `delegates [Agent.Skill, ..]` (spec §3b), with the whole statement's span.
    Delegates(Vec<DelegateRef>, Span),
}

/// `Researcher.Look` in a `delegates` list: an agent and one of its skills (spec §3b).
#[derive(Clone, Debug)]
pub struct DelegateRef {
    /// The agent handed the work.
    pub agent: Ident,
    /// The skill it works in.
    pub skill: Ident,
    /// `Agent.Skill`.
    pub span: Span,
}

/// `route T to person P`
#[derive(Clone, Debug)]
pub struct RouteStmt {
    /// The tool routed.
    pub tool: Ident,
    /// Who decides.
    pub target: RouteTarget,
    /// The whole statement.
    pub span: Span,
}

/// Who decides a routed proposal.
#[derive(Clone, Debug)]
pub enum RouteTarget {
    /// `to person P`
    Person(Ident),
    /// `to role R`
    Role(Ident),
    /// `to queue Q`
    Queue(Ident),
    /// `to requester`: the default, written out.
    Requester(Span),
}
