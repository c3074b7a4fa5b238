//! Check: name resolution and the declaration checks of spec §1–§3 that need no effects or levels.
//!
//! Input: the syntax tree. Output: a [`Model`] — every tool and function as a node of the call graph with
//! its operations and resolved calls, every layer's rules resolved to nodes, people and authority — and
//! every diagnostic found. All errors are collected; a name that fails to resolve is reported once and
//! then left out, so one cause gives one error. This stage never does I/O.

use std::collections::{BTreeMap, HashMap};

use crate::diagnostics::{Code, Diagnostic, closest};
pub use crate::model::*;
use crate::syntax::ast::*;
use crate::table::{EffectClass, Holder, Layer, Level, ParamType, Route as TableRoute};

/// What a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Entity,
    Tool,
    Function,
    Role,
    Person,
    Queue,
    Agent,
    Skill,
    Budget,
    Mode,
}

impl Kind {
    /// The noun with its article: `an entity`, `a tool`.
    fn with_article(self) -> String {
        let noun = self.noun();
        if noun.starts_with(['a', 'e', 'i', 'o', 'u']) { format!("an {noun}") } else { format!("a {noun}") }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Entity => "entity",
            Kind::Tool => "tool",
            Kind::Function => "function",
            Kind::Role => "role",
            Kind::Person => "person",
            Kind::Queue => "queue",
            Kind::Agent => "agent",
            Kind::Skill => "skill",
            Kind::Budget => "budget",
            Kind::Mode => "mode",
        }
    }
}

struct Checker<'a> {
    names: NameMap<&'a str, (Kind, Span)>,
    docs: NameMap<&'a str, String>,
    entities: NameMap<&'a str, &'a Entity>,
    budgets: NameMap<&'a str, &'a Budget>,
    diags: Vec<Diagnostic>,
}

/// Resolves and checks a package. Returns the model (built even when there are errors, from what
/// resolved) and every diagnostic of this stage.
pub fn check(package: &Package) -> (Model<'_>, Vec<Diagnostic>) {
    let mut c = Checker {
        names: NameMap::default(),
        docs: NameMap::default(),
        entities: NameMap::default(),
        budgets: NameMap::default(),
        diags: Vec::new(),
    };
    c.collect_names(package);

    // Nodes: tools and functions, sorted by name so node ids do not depend on file order.
    let mut node_decls: Vec<(&str, &Declaration, NodeKind<'_>)> = Vec::new();
    for d in package.declarations() {
        match &d.kind {
            DeclarationKind::Tool(t) => node_decls.push((&t.name.name, d, NodeKind::Tool(t))),
            DeclarationKind::Function(f) => node_decls.push((&f.name.name, d, NodeKind::Function(f))),
            _ => {}
        }
    }
    node_decls.sort_by(|a, b| a.0.cmp(b.0));
    node_decls.dedup_by(|a, b| a.0 == b.0); // a duplicate is already an error; keep the first
    let node_of: NameMap<&str, NodeId> = node_decls.iter().enumerate().map(|(i, (n, _, _))| (*n, i)).collect();
    let nodes = node_decls.iter().map(|(_, d, k)| c.node(d, *k, &node_of)).collect();

    let mut model = Model {
        nodes,
        node_of,
        agents: BTreeMap::new(),
        skills: BTreeMap::new(),
        persons: BTreeMap::new(),
        roles: BTreeMap::new(),
        entities: c.entities.iter().map(|(k, v)| (*k, *v)).collect(),
        docs: std::mem::take(&mut c.docs),
        queues: BTreeMap::new(),
        authority: BTreeMap::new(),
        package_rules: None,
        tests: Vec::new(),
        proposal_lifetime: None,
        grant_lifetime: None,
        budgets: BTreeMap::new(),
        modes: BTreeMap::new(),
    };
    let mut package_may_span: Option<Span> = None;
    let mut lifetime_spans: BTreeMap<LifetimeKind, Span> = BTreeMap::new();
    for d in package.declarations() {
        match &d.kind {
            DeclarationKind::Role(r) => {
                model.roles.entry(&r.name.name).or_insert(r.name.span);
            }
            DeclarationKind::Person(p) => {
                let mut roles: Vec<&str> =
                    p.roles.iter().filter(|r| c.resolve(r, &[Kind::Role])).map(|r| r.name.as_str()).collect();
                c.warn_repeats(&p.roles, "role");
                roles.sort_unstable();
                roles.dedup();
                model.persons.entry(&p.name.name).or_insert(roles);
            }
            DeclarationKind::Queue(q) => {
                let holders = c.holders(&q.decided_by);
                model.queues.entry(&q.name.name).or_insert(holders);
            }
            DeclarationKind::Authority(a) => {
                let holders = c.holders(&a.holders);
                let list = model.authority.entry(a.kind).or_default();
                for h in holders {
                    if !list.contains(&h) {
                        list.push(h);
                    }
                }
            }
            DeclarationKind::Budget(b) => {
                if let Some(budget) = c.budget(b) {
                    model.budgets.entry(&b.name.name).or_insert(budget);
                }
            }
            DeclarationKind::Lifetime(l) => {
                if let Some(first) = lifetime_spans.get(&l.kind) {
                    c.diags.push(repeated("the lifetime", l.value_span, *first));
                } else {
                    lifetime_spans.insert(l.kind, l.value_span);
                    match l.kind {
                        LifetimeKind::Proposal => model.proposal_lifetime = Some(l.seconds),
                        LifetimeKind::Grant => model.grant_lifetime = Some(l.seconds),
                    }
                }
            }
            DeclarationKind::Mode(m) => {
                if model.modes.contains_key(m.name.name.as_str()) {
                    continue; // a duplicate name is already an error
                }
                let mode = c.mode(d, m, &model);
                model.modes.insert(&m.name.name, mode);
            }
            DeclarationKind::May(block) => {
                if let Some(first) = package_may_span {
                    c.diags.push(repeated("the package-wide `may` block", block.span, first));
                } else {
                    package_may_span = Some(block.span);
                    model.package_rules = Some(c.rules(Layer::Package, block, &model.node_of, &model.nodes));
                }
            }
            _ => {}
        }
    }
    // Queues nobody can decide.
    for d in package.declarations() {
        if let DeclarationKind::Queue(q) = &d.kind {
            let decidable = model.queues.get(q.name.name.as_str()).is_some_and(|hs| {
                hs.iter().any(|h| match h {
                    Holder::Person(_) => true,
                    Holder::Role(r) => model.persons.values().any(|roles| roles.contains(&r.as_str())),
                })
            });
            if !decidable {
                c.diags.push(
                    Diagnostic::new(
                        Code::CheckQueueUndecidable,
                        format!("nobody can decide the queue `{}`", q.name.name),
                    )
                    .at(q.name.span, "no person decides what is routed here")
                    .help("add `decided_by [..]` with a person, or a role that some person holds"),
                );
            }
        }
    }
    for d in package.declarations() {
        if let DeclarationKind::Skill(s) = &d.kind {
            if model.skills.contains_key(s.name.name.as_str()) {
                continue;
            }
            let skill = c.skill(d, s, &model);
            model.skills.insert(&s.name.name, skill);
        }
    }
    for d in package.declarations() {
        if let DeclarationKind::Agent(a) = &d.kind {
            if model.agents.contains_key(a.name.name.as_str()) {
                continue;
            }
            let agent = c.agent(d, a, &model);
            model.agents.insert(&a.name.name, agent);
        }
    }
    c.delegations(&mut model);
    for d in package.declarations() {
        if let DeclarationKind::Test(t) = &d.kind {
            let test = c.test(t, &model);
            model.tests.push(test);
        }
    }
    (model, c.diags)
}

/// The code of an `alone` that says nothing in a layer that only tightens: a mode's own (modes only
/// tighten, spec §3c), else the package-wide and skill layers'.
fn alone_code(layer: Layer) -> Code {
    if layer == Layer::Mode { Code::LevelsModeAlone } else { Code::LevelsAloneIgnored }
}

/// A label to suggest for a tool that has none, from its name: `RunCommand` → `Run command`, `SetPrice` →
/// `Set price`, `HTTPGet` → `HTTP get`. Only a start: the author writes what a person should read.
fn label_from_name(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
        let next = chars.get(i + 1).copied();
        // A new word at an upper-case letter after a lower-case one or a digit, or at the last capital of a
        // run of capitals followed by a lower-case letter (`HTTPGet` → `HTTP`, `Get`); `_` separates too.
        let boundary = c.is_ascii_uppercase()
            && (prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit())
                || (prev.is_some_and(|p| p.is_ascii_uppercase()) && next.is_some_and(|n| n.is_ascii_lowercase())));
        if (boundary || c == '_') && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c != '_' {
            word.push(c);
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let words: Vec<String> = words
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            let acronym = w.len() > 1 && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
            match (i, acronym) {
                (_, true) => w,
                (0, false) => {
                    let mut cs = w.chars();
                    cs.next()
                        .map(|f| f.to_ascii_uppercase().to_string() + &cs.as_str().to_ascii_lowercase())
                        .unwrap_or_default()
                }
                (_, false) => w.to_ascii_lowercase(),
            }
        })
        .collect();
    words.join(" ")
}

fn repeated(what: &str, again: Span, first: Span) -> Diagnostic {
    Diagnostic::new(Code::CheckRepeated, format!("{what} is written twice"))
        .at(again, "written again here")
        .with(first, "first written here")
        .help("keep one and merge the other into it")
}

/// `entity` has no field `field`: with the nearest field name, or how to add it.
fn no_field(entity: &Entity, field: &Ident) -> Diagnostic {
    let near = closest(&field.name, entity.fields.iter().map(|f| f.name.as_str()));
    let d =
        Diagnostic::new(Code::CheckField, format!("the entity `{}` has no field `{}`", entity.name.name, field.name))
            .at(field.span, "no such field")
            .with(entity.name.span, "the entity is declared here");
    match near {
        Some(n) => d.help(format!("did you mean `{n}`?")),
        None => d.help("add the field to the entity's declaration"),
    }
}

/// A claim as an effect set, with where it is written.
fn claimed_set(c: &Claim) -> (EffectSet, Span) {
    let mut set = EffectSet::EMPTY;
    for (class, _) in &c.classes {
        set.insert_class(*class);
    }
    (set, c.span)
}

/// Where a node's body first writes each statement it may write only once.
#[derive(Default)]
struct Witnesses {
    spend: Option<Span>,
    version: Option<Span>,
    subject: Option<Span>,
}

impl<'a> Checker<'a> {
    fn collect_names(&mut self, package: &'a Package) {
        for d in package.declarations() {
            let (ident, kind) = match &d.kind {
                DeclarationKind::Entity(e) => (&e.name, Kind::Entity),
                DeclarationKind::Tool(t) => (&t.name, Kind::Tool),
                DeclarationKind::Function(f) => (&f.name, Kind::Function),
                DeclarationKind::Role(r) => (&r.name, Kind::Role),
                DeclarationKind::Person(p) => (&p.name, Kind::Person),
                DeclarationKind::Queue(q) => (&q.name, Kind::Queue),
                DeclarationKind::Agent(a) => (&a.name, Kind::Agent),
                DeclarationKind::Skill(s) => (&s.name, Kind::Skill),
                DeclarationKind::Budget(b) => (&b.name, Kind::Budget),
                DeclarationKind::Mode(m) => (&m.name, Kind::Mode),
                DeclarationKind::Test(_) => continue,
                DeclarationKind::May(_) | DeclarationKind::Authority(_) | DeclarationKind::Lifetime(_) => {
                    if !d.docs.is_empty() {
                        self.diags.push(
                            Diagnostic::new(Code::CheckDocDropped, "this doc comment is not kept")
                                .at(Span { end: d.span.start + 3, ..d.span }, "`///` documents a named declaration")
                                .help("doc comments travel into the table with tools, agents, skills, people, roles, queues and entities; write `//` here"),
                        );
                    }
                    continue;
                }
            };
            if let Some((first_kind, first)) = self.names.get(ident.name.as_str()) {
                self.diags.push(
                    Diagnostic::new(Code::CheckDuplicate, format!("`{}` is defined twice", ident.name))
                        .at(ident.span, format!("defined again here as {}", kind.with_article()))
                        .with(*first, format!("first defined here as {}", first_kind.with_article()))
                        .help("names are global within a package and share one namespace: rename one of them"),
                );
                continue;
            }
            self.names.insert(&ident.name, (kind, ident.span));
            if let Some(doc) = d.doc_text() {
                self.docs.insert(&ident.name, doc);
            }
            if let DeclarationKind::Entity(e) = &d.kind {
                self.entities.insert(&e.name.name, e);
                self.warn_repeats(&e.fields, "field");
            }
            if let DeclarationKind::Budget(b) = &d.kind {
                self.budgets.insert(&b.name.name, b);
            }
        }
    }

    /// Checks that `ident` names something of one of `kinds`; reports it otherwise.
    fn resolve(&mut self, ident: &Ident, kinds: &[Kind]) -> bool {
        // The words are built only for a diagnostic: this runs once per name use (every call edge).
        let wanted = || kinds.iter().map(|k| k.noun()).collect::<Vec<_>>().join(" or ");
        match self.names.get(ident.name.as_str()) {
            Some((kind, _)) if kinds.contains(kind) => true,
            Some((kind, span)) => {
                let wanted = wanted();
                let mut d = Diagnostic::new(
                    Code::CheckWrongKind,
                    format!("`{}` is {}, not a {wanted}", ident.name, kind.with_article()),
                )
                .at(ident.span, format!("a {wanted} is expected here"))
                .with(*span, format!("`{}` is defined here", ident.name));
                d = if *kind == Kind::Function && kinds.contains(&Kind::Tool) {
                    d.help(
                        "a `fn` is never offered to an agent and never named in a list; make it a `tool` to offer it",
                    )
                } else {
                    d.help(format!("name a {wanted} here"))
                };
                self.diags.push(d);
                false
            }
            None => {
                let wanted = wanted();
                let candidates = self.names.iter().filter(|(_, (k, _))| kinds.contains(k)).map(|(n, _)| *n);
                let mut d = Diagnostic::new(Code::CheckUnknown, format!("unknown {wanted} `{}`", ident.name))
                    .at(ident.span, format!("no {wanted} has this name"));
                d = match closest(&ident.name, candidates) {
                    Some(near) => d.help(format!("did you mean `{near}`?")),
                    None => d.help(format!("define the {wanted}, or name one that exists")),
                };
                self.diags.push(d);
                false
            }
        }
    }

    fn warn_repeats(&mut self, names: &[Ident], what: &str) {
        for (i, n) in names.iter().enumerate() {
            if let Some(first) = names[..i].iter().find(|m| m.name == n.name) {
                self.diags.push(
                    Diagnostic::new(Code::CheckListedTwice, format!("the {what} `{}` is listed twice", n.name))
                        .at(n.span, "listed again here")
                        .with(first.span, "first listed here")
                        .help("remove the repetition"),
                );
            }
        }
    }

    fn holders(&mut self, names: &[Ident]) -> Vec<Holder> {
        self.warn_repeats(names, "name");
        let mut out = Vec::new();
        for n in names {
            if self.resolve(n, &[Kind::Role, Kind::Person]) {
                let h = match self.names.get(n.name.as_str()) {
                    Some((Kind::Role, _)) => Holder::Role(n.name.clone()),
                    _ => Holder::Person(n.name.clone()),
                };
                if !out.contains(&h) {
                    out.push(h);
                }
            }
        }
        out
    }

    /// Checks a budget's fields (spec §6): `currency` (a string), `unit` (a name), `ceiling` and
    /// `alone_up_to` (whole numbers ≥ 0 in the minor unit), each exactly once; every problem is reported.
    fn budget(&mut self, b: &'a Budget) -> Option<BudgetModel<'a>> {
        const FIELDS: [&str; 5] = ["currency", "unit", "ceiling", "alone_up_to", "per_task"];
        const REQUIRED: [&str; 4] = ["currency", "unit", "ceiling", "alone_up_to"];
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let (mut currency, mut unit, mut ceiling, mut alone_up_to, mut per_task) = (None, None, None, None, None);
        for f in &b.fields {
            let key = f.key.name.as_str();
            if !FIELDS.contains(&key) {
                let mut d = Diagnostic::new(Code::CheckBudget, format!("a budget has no field `{key}`"))
                    .at(f.key.span, "unknown field");
                d = match closest(key, FIELDS.iter().copied()) {
                    Some(n) => d.help(format!(
                        "did you mean `{n}`? a budget has `currency`, `unit`, `ceiling`, `alone_up_to` and optionally `per_task`"
                    )),
                    None => d.help("a budget has `currency`, `unit`, `ceiling`, `alone_up_to` and optionally `per_task`"),
                };
                self.diags.push(d);
                continue;
            }
            if let Some(first) = seen.get(key) {
                self.diags.push(repeated(&format!("the budget field `{key}`"), f.span, *first));
                continue;
            }
            seen.insert(key, f.span);
            let wrong = |what: &str| {
                Diagnostic::new(Code::CheckBudget, format!("the budget field `{key}` must be {what}"))
                    .at(f.value.span(), format!("not {what}"))
            };
            match (key, &f.value) {
                ("currency", BudgetValue::String(s)) => currency = Some(s.value.clone()),
                ("currency", _) => {
                    self.diags.push(wrong("a string").help("write the currency code in quotes: `currency: \"USD\"`"))
                }
                ("unit", BudgetValue::Name(n)) => unit = Some(n.name.as_str()),
                ("unit", _) => {
                    self.diags.push(wrong("a name").help("name the minor unit amounts are counted in: `unit: cents`"))
                }
                (_, BudgetValue::Number(text, span)) => match text.parse::<u64>() {
                    Ok(v) if v <= i64::MAX as u64 => {
                        if key == "ceiling" {
                            ceiling = Some(v);
                        } else if key == "per_task" {
                            per_task = Some((v, *span));
                        } else {
                            alone_up_to = Some((v, *span));
                        }
                    }
                    _ => self.diags.push(
                        Diagnostic::new(
                            Code::CheckBudget,
                            format!("the budget field `{key}` must be a whole number from 0 to {}", i64::MAX),
                        )
                        .at(*span, "out of range")
                        .help("amounts are whole numbers in the budget's minor unit (cents), never negative"),
                    ),
                },
                (_, BudgetValue::Decimal(text, span)) => self.diags.push(crate::conditions::decimal(
                    text,
                    *span,
                    crate::conditions::DecimalFor::Budget {
                        budget: &b.name.name,
                        field: key,
                        unit: self.budget_unit(&b.name.name),
                    },
                )),
                _ => self.diags.push(
                    wrong("a whole number")
                        .help("amounts are whole numbers in the budget's minor unit: `ceiling: 2500` for $25.00"),
                ),
            }
        }
        let missing: Vec<&str> = REQUIRED.iter().copied().filter(|k| !seen.contains_key(k)).collect();
        if !missing.is_empty() {
            let list = missing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
            self.diags.push(
                Diagnostic::new(Code::CheckBudget, format!("the budget `{}` is missing {list}", b.name.name))
                    .at(b.name.span, "declared here")
                    .help(format!(
                        "write every field: `budget {} {{ currency: \"USD\", unit: cents, ceiling: 2500, alone_up_to: 0 }}`",
                        b.name.name
                    )),
            );
        }
        let (ceiling, (alone_up_to, alone_span)) = (ceiling?, alone_up_to?);
        if alone_up_to > ceiling {
            self.diags.push(
                Diagnostic::new(
                    Code::CheckBudgetAllowance,
                    format!("`alone_up_to` of budget `{}` is above its ceiling", b.name.name),
                )
                .at(alone_span, format!("{alone_up_to} is more than the ceiling of {ceiling}"))
                .help("no call can spend more than the ceiling: lower `alone_up_to`, or raise `ceiling`"),
            );
        }
        if let Some((per_task, span)) = per_task {
            if per_task > ceiling {
                self.diags.push(
                    Diagnostic::new(
                        Code::CheckBudgetPerTask,
                        format!("`per_task` of budget `{}` is above its ceiling", b.name.name),
                    )
                    .at(span, format!("{per_task} is more than the ceiling of {ceiling}"))
                    .help("no task can hold more than the ceiling: lower `per_task`, or raise `ceiling`"),
                );
            }
        }
        Some(BudgetModel {
            name_span: b.name.span,
            currency: currency?,
            unit: unit?,
            ceiling,
            alone_up_to,
            per_task: per_task.map(|(v, _)| v),
        })
    }

    /// Checks the parameter of `spend BUDGET by PARAM`: a parameter of the node, of type `money`.
    fn spend_param(&mut self, node: &Ident, params: &[Param], by: &Ident) -> bool {
        match params.iter().find(|p| p.name.name == by.name) {
            Some(p) if p.ty.name == "money" && p.optional => {
                self.diags.push(
                    Diagnostic::new(Code::CheckSpend, format!("`spend` by `{}`, which is optional", by.name))
                        .at(by.span, format!("`{}` may be missing", by.name))
                        .with(p.span, "declared optional here")
                        .help(format!("the amount a tool spends is always given: write `{}: money`", by.name)),
                );
                false
            }
            Some(p) if p.ty.name == "money" => true,
            Some(p) => {
                self.diags.push(
                    Diagnostic::new(Code::CheckSpend, format!("`spend` by `{}`, which is not `money`", by.name))
                        .at(by.span, format!("`{}` is `{}`", by.name, p.ty.name))
                        .with(p.ty.span, "declared here")
                        .help("an amount is a `money` parameter: a whole number in the budget's minor unit, computed by the host"),
                );
                false
            }
            None => {
                let near = closest(&by.name, params.iter().map(|p| p.name.name.as_str()));
                let mut d = Diagnostic::new(
                    Code::CheckSpend,
                    format!("`{}` has no parameter `{}` to spend by", node.name, by.name),
                )
                .at(by.span, "no parameter has this name");
                d = match near {
                    Some(n) => d.help(format!("did you mean `{n}`? name a `money` parameter of `{}`", node.name)),
                    None => d.help(format!("add a parameter like `amount: money` to `{}` and spend by it", node.name)),
                };
                self.diags.push(d);
                false
            }
        }
    }

    /// The unit a budget's amounts count in, as its `unit` field names it (read from the declaration, so it
    /// does not matter which is checked first).
    fn budget_unit(&self, budget: &str) -> Option<&'a str> {
        let b = self.budgets.get(budget)?;
        b.fields.iter().find(|f| f.key.name == "unit").and_then(|f| match &f.value {
            BudgetValue::Name(n) => Some(n.name.as_str()),
            _ => None,
        })
    }

    /// How a node spends, for the help of a decimal written as money.
    fn spend_of(&self, node: &Node<'a>) -> Option<crate::conditions::Spend<'a>> {
        node.spend.map(|s| crate::conditions::Spend {
            param: s.param,
            budget: s.budget,
            unit: self.budget_unit(s.budget),
        })
    }

    fn param_type(&mut self, ty: &Ident) -> Option<ParamType> {
        // `number` and `json` are written like the other built-in types.
        match ty.name.as_str() {
            "string" => Some(ParamType::String),
            "int" => Some(ParamType::Int),
            "bool" => Some(ParamType::Bool),
            "money" => Some(ParamType::Money),
            "shell" => Some(ParamType::Shell),
            "number" => Some(ParamType::Number),
            "json" => Some(ParamType::Json),
            name => match self.names.get(name) {
                Some((Kind::Entity, _)) => Some(ParamType::Entity(name.to_string())),
                _ => {
                    let entities = self
                        .entities
                        .keys()
                        .copied()
                        .chain(["string", "int", "bool", "money", "shell", "number", "json"]);
                    let near = closest(name, entities);
                    let mut d =
                        Diagnostic::new(Code::CheckType, format!("unknown type `{name}`")).at(ty.span, "not a type");
                    d = match near {
                        Some(n) => d.help(format!(
                            "did you mean `{n}`? types are `string`, `int`, `bool`, `money`, `shell`, `number`, `json` or an entity"
                        )),
                        None => d.help("types are `string`, `int`, `bool`, `money`, `shell`, `number`, `json` or an entity"),
                    };
                    self.diags.push(d);
                    None
                }
            },
        }
    }

    fn entity_ref(&mut self, r: &EntityRef) -> bool {
        if r.entity.name == "permits" {
            return true; // the reserved entity: any field (policy, table, rules) is the same subject
        }
        if !self.resolve(&r.entity, &[Kind::Entity]) {
            return false;
        }
        if let (Some(field), Some(entity)) = (&r.field, self.entities.get(r.entity.name.as_str())) {
            if !entity.fields.iter().any(|f| f.name == field.name) {
                self.diags.push(no_field(entity, field));
                return false;
            }
        }
        true
    }

    /// Builds the node of a tool or function: the tool's own declaration checks, then its parameters, its
    /// claim and its body, in that order (the order the diagnostics come in).
    fn node(&mut self, decl: &'a Declaration, kind: NodeKind<'a>, node_of: &NameMap<&str, NodeId>) -> Node<'a> {
        let (name, params, claim, body) = match kind {
            NodeKind::Tool(t) => (&t.name, &t.params, &t.claim, &t.body),
            NodeKind::Function(f) => (&f.name, &f.params, &f.claim, &f.body),
        };
        if let NodeKind::Tool(t) = kind {
            self.tool_declaration(t);
        }
        let (resolved_params, optional) = self.params(name, params, kind);
        let mut node = Node {
            name: &name.name,
            name_span: name.span,
            declaration: decl,
            kind,
            params: resolved_params,
            optional,
            operations: Vec::new(),
            calls: Vec::new(),
            claim: claim.as_ref().map(claimed_set),
            version: None,
            subject: None,
            spend: None,
        };
        self.body(&mut node, name, params, body, node_of);
        node
    }

    /// The checks of a tool's declaration line that need nothing else: a label, an extern tool's claim, and
    /// the form of a `pinned` digest.
    fn tool_declaration(&mut self, t: &Tool) {
        let name = &t.name;
        if t.label.is_none() {
            self.diags.push(
                Diagnostic::new(Code::CheckMissingLabel, format!("the tool `{}` has no label", name.name))
                    .at(name.span, "a label is expected after the name")
                    .help(format!(
                        "write what a person reads on the approval screen: `tool {} \"{}\" (..)`",
                        name.name,
                        label_from_name(&name.name)
                    )),
            );
        }
        if t.kind == ToolKind::Extern && t.claim.is_none() {
            self.diags.push(
                Diagnostic::new(Code::CheckExternClaim, format!("the extern tool `{}` has no claim", name.name))
                    .at(name.span, "an extern tool has no body, so its claim is the only evidence")
                    .help("state what it does after the parameters, e.g. `: reaches_out` or `: changes + sends`"),
            );
        }
        if let Some(pin) = &t.pinned {
            if !is_pin(&pin.value) {
                self.diags.push(
                    Diagnostic::new(
                        Code::CheckPinned,
                        format!("the pin of `{}` is not a SHA-256 digest", name.name),
                    )
                    .at(pin.span, "expected `sha256:` and 64 lowercase hex digits")
                    .help("write the digest `permitc mcp import` printed, e.g. `pinned \"sha256:9f86d081884c7d65…\"` (all 64 digits)"),
                );
            }
        }
    }

    /// Resolves the parameters of the node `name`: a name declared twice is reported and the second left out;
    /// a type that does not resolve is left out (reported by `param_type`); a tool's second `shell`
    /// parameter is reported and kept. Returns the parameters with their types and, at the same index,
    /// whether each is optional.
    fn params(
        &mut self,
        name: &Ident,
        params: &'a [Param],
        kind: NodeKind<'a>,
    ) -> (Vec<(&'a str, ParamType)>, Vec<bool>) {
        let mut resolved = Vec::new();
        let mut optional = Vec::new();
        for (i, p) in params.iter().enumerate() {
            if let Some(first) = params[..i].iter().find(|q| q.name.name == p.name.name) {
                self.diags.push(
                    Diagnostic::new(Code::CheckDuplicate, format!("the parameter `{}` is declared twice", p.name.name))
                        .at(p.name.span, "declared again here")
                        .with(first.name.span, "first declared here")
                        .help("rename one of them"),
                );
                continue;
            }
            if let Some(ty) = self.param_type(&p.ty) {
                // The second is kept as a `shell` parameter, so that conditions on it add no error of their own.
                if ty == ParamType::Shell && matches!(kind, NodeKind::Tool(_)) {
                    if let Some(first) = params[..i].iter().find(|q| q.ty.name == "shell") {
                        self.diags.push(
                            Diagnostic::new(
                                Code::CheckShellTwice,
                                format!("the tool `{}` has a second `shell` parameter `{}`", name.name, p.name.name),
                            )
                            .at(p.ty.span, "a second command line")
                            .with(first.ty.span, format!("`{}` is the tool's `shell` parameter", first.name.name))
                            .help("a call is judged on one command line, part by part: make the other parameter a `string`, or split the tool in two"),
                        );
                    }
                }
                resolved.push((p.name.name.as_str(), ty));
                optional.push(p.optional);
            }
        }
        (resolved, optional)
    }

    /// Walks the body of `node` (named `name`, with the declared `params`): each statement adds an operation
    /// (the effects it proves), call edges, or one of the node's witnesses (`spend`, `version`, `subject`,
    /// each written at most once). An extern tool's body holds only `version` and `subject`.
    fn body(
        &mut self,
        node: &mut Node<'a>,
        name: &Ident,
        params: &'a [Param],
        body: &'a [Statement],
        node_of: &NameMap<&str, NodeId>,
    ) {
        let mut seen = Witnesses::default();
        let is_extern = node.is_extern();
        for s in body {
            if is_extern && !matches!(s.kind, StatementKind::Version { .. } | StatementKind::Subject(_)) {
                self.diags.push(
                    Diagnostic::new(Code::CheckExternBody, format!("the extern tool `{}` has an operation", name.name))
                        .at(s.span, "an extern tool has no body to prove")
                        .help("an extern tool's block holds only `version` and `subject`; to prove effects, make it a `tool` with a body"),
                );
                continue;
            }
            match &s.kind {
                StatementKind::Call(target) => self.call_edge(node, target, s.span, node_of),
                StatementKind::CallAny(targets) => {
                    self.warn_repeats(targets, "call target");
                    for target in targets {
                        self.call_edge(node, target, target.span, node_of);
                    }
                }
                StatementKind::Spend { budget, by } => self.spend(node, name, params, s, budget, by, &mut seen.spend),
                StatementKind::Version { param, field } => self.version(node, params, s, param, field, &mut seen),
                StatementKind::Subject(param) => self.subject(node, params, s, param, &mut seen),
                kind => {
                    if let Some(effects) = self.proven_effects(kind) {
                        node.operations.push(Operation { effects, span: s.span, text: statement_text(kind) });
                    }
                }
            }
        }
    }

    /// The effects an access or reach statement proves (`read`, `write`, `create`, `delete`, `send`, `reach`,
    /// `call dynamic`); `None` when its entity does not resolve (reported), or for the statements the other
    /// functions of `body` take.
    fn proven_effects(&mut self, kind: &StatementKind) -> Option<EffectSet> {
        match kind {
            StatementKind::Read(r) => self.entity_ref(r).then(|| EffectSet::of(EffectClass::Reads)),
            StatementKind::Write(r) | StatementKind::Create(r) | StatementKind::Delete(r) => {
                self.entity_ref(r).then(|| {
                    let mut set = EffectSet::of(EffectClass::Changes);
                    if r.entity.name == "permits" {
                        set.insert_reserved();
                    }
                    set
                })
            }
            StatementKind::Send(_) => Some(EffectSet::of(EffectClass::Sends)),
            StatementKind::Reach(_) => Some(EffectSet::of(EffectClass::ReachesOut)),
            StatementKind::CallDynamic => Some(EffectSet::ALL_AND_RESERVED),
            StatementKind::Call(_)
            | StatementKind::CallAny(_)
            | StatementKind::Spend { .. }
            | StatementKind::Version { .. }
            | StatementKind::Subject(_) => None,
        }
    }

    /// Adds a call edge, at `span`, when `target` resolves to a tool or function.
    fn call_edge(&mut self, node: &mut Node<'a>, target: &Ident, span: Span, node_of: &NameMap<&str, NodeId>) {
        if self.resolve(target, &[Kind::Tool, Kind::Function]) {
            if let Some(&id) = node_of.get(target.name.as_str()) {
                node.calls.push((id, span));
            }
        }
    }

    /// `spend BUDGET by PARAM`: proves `spends` whatever the names; binds the node's spend when the budget
    /// resolves and the parameter is a required `money` one. A second `spend` is reported and ignored.
    #[expect(
        clippy::too_many_arguments,
        reason = "the node, its name and parameters, the statement and its two names, and where `spend` was first written"
    )]
    fn spend(
        &mut self,
        node: &mut Node<'a>,
        name: &Ident,
        params: &[Param],
        s: &Statement,
        budget: &'a Ident,
        by: &'a Ident,
        seen: &mut Option<Span>,
    ) {
        if let Some(first) = *seen {
            self.diags.push(
                repeated("`spend`", s.span, first)
                    .help("a tool spends from one budget, by one `money` parameter: the runtime checks that amount"),
            );
            return;
        }
        *seen = Some(s.span);
        let budget_ok = self.resolve(budget, &[Kind::Budget]);
        let param_ok = self.spend_param(name, params, by);
        // The effect is proven either way (a spend is a spend); the binding needs both names.
        node.operations.push(Operation {
            effects: EffectSet::of(EffectClass::Spends),
            span: s.span,
            text: statement_text(&s.kind),
        });
        if budget_ok && param_ok {
            node.spend = Some(SpendOp { budget: &budget.name, param: &by.name, span: s.span });
        }
    }

    /// `version PARAM.FIELD` (tools only): the parameter must be of an entity type that has the field.
    fn version(
        &mut self,
        node: &mut Node<'a>,
        params: &[Param],
        s: &Statement,
        param: &'a Ident,
        field: &'a Ident,
        seen: &mut Witnesses,
    ) {
        if let Some(first) = seen.version {
            self.diags.push(repeated("`version`", s.span, first));
            return;
        }
        seen.version = Some(s.span);
        if !node.is_tool() {
            self.diags.push(
                Diagnostic::new(Code::CheckVersion, "a function has no covered version")
                    .at(s.span, "`version` is for tools")
                    .help("move `version` to the tool that calls this function"),
            );
            return;
        }
        let ty = params.iter().find(|p| p.name.name == param.name).map(|p| &p.ty);
        match ty.and_then(|t| self.entities.get(t.name.as_str()).copied()) {
            None => self.diags.push(
                Diagnostic::new(
                    Code::CheckVersion,
                    format!("`version {}.{}` needs a parameter of an entity type", param.name, field.name),
                )
                .at(
                    param.span,
                    match ty {
                        Some(_) => "this parameter is not of an entity type",
                        None => "no parameter has this name",
                    },
                )
                .help("name a parameter whose type is an entity, and one of that entity's fields"),
            ),
            Some(entity) if entity.fields.iter().any(|f| f.name == field.name) => {
                node.version = Some((&param.name, &field.name));
            }
            Some(entity) => self.diags.push(no_field(entity, field)),
        }
    }

    /// `subject PARAM` (tools only): the parameter must be one of the tool's.
    fn subject(
        &mut self,
        node: &mut Node<'a>,
        params: &[Param],
        s: &Statement,
        param: &'a Ident,
        seen: &mut Witnesses,
    ) {
        if let Some(first) = seen.subject {
            self.diags.push(repeated("`subject`", s.span, first));
            return;
        }
        seen.subject = Some(s.span);
        if !node.is_tool() {
            self.diags.push(
                Diagnostic::new(Code::CheckVersion, "a function has no subject")
                    .at(s.span, "`subject` is for tools")
                    .help("move `subject` to the tool that calls this function"),
            );
        } else if params.iter().any(|p| p.name.name == param.name) {
            node.subject = Some(&param.name);
        } else {
            let near = closest(&param.name, params.iter().map(|p| p.name.name.as_str()));
            let mut d = Diagnostic::new(Code::CheckVersion, format!("`subject {}` names no parameter", param.name))
                .at(param.span, "no parameter has this name");
            d = match near {
                Some(n) => d.help(format!("did you mean `{n}`?")),
                None => d.help("name one of the tool's parameters"),
            };
            self.diags.push(d);
        }
    }

    /// Resolves a `may` block of a layer and checks it.
    fn rules(
        &mut self,
        layer: Layer,
        block: &'a MayBlock,
        node_of: &NameMap<&str, NodeId>,
        nodes: &[Node<'a>],
    ) -> Rules<'a> {
        let mut rules = Rules::empty(layer);
        rules.block = Some(block);
        for (i, stmt) in block.statements.iter().enumerate() {
            match stmt {
                MayStatement::Preset(preset, span) => {
                    if i > 0 {
                        self.diags.push(
                            Diagnostic::new(
                                Code::CheckPreset,
                                "a preset must be the first statement of its `may` block",
                            )
                            .at(*span, "written after other rules")
                            .with(block.span, "in this block")
                            .help("move the preset to the top: the rules after it refine it"),
                        );
                    } else {
                        rules.preset = Some((*preset, *span));
                        if layer != Layer::Agent {
                            let what = match preset {
                                Preset::Everything => "the preset `everything`",
                                Preset::ChangesAlone => "the `alone` part of `changes_alone`",
                            };
                            self.diags.push(
                                Diagnostic::new(alone_code(layer), format!("{what} says nothing in the {} layer", layer_noun(layer)))
                                    .at(*span, "this layer only tightens")
                                    .help("the agent's `may` decides what runs alone; set only the classes this layer tightens"),
                            );
                        }
                    }
                }
                MayStatement::Setting(s) => {
                    if s.class == EffectClass::Reads {
                        self.diags.push(
                            Diagnostic::new(Code::CheckReadsSetting, "`reads` cannot be set")
                                .at(s.class_span, "reads is always `alone`")
                                .help("to tighten a tool that only reads, name it in a list: `propose [ToolName]`"),
                        );
                        continue;
                    }
                    if let Some((_, first)) = rules.settings.get(&s.class) {
                        self.diags.push(
                            Diagnostic::new(Code::CheckRepeated, format!("`{}` is set twice in one block", s.class))
                                .at(s.span, "set again here")
                                .with(*first, "first set here")
                                .help("keep one setting per class"),
                        );
                        continue;
                    }
                    if layer != Layer::Agent && s.level == Level::Alone {
                        self.diags.push(
                            Diagnostic::new(
                                alone_code(layer),
                                format!("`{}: alone` says nothing in the {} layer", s.class, layer_noun(layer)),
                            )
                            .at(s.span, "this layer only tightens")
                            .help("the agent's `may` decides what runs alone; remove this setting"),
                        );
                    }
                    rules.settings.insert(s.class, (s.level, s.span));
                }
                MayStatement::List(list) => {
                    let names: Vec<Ident> = list.entries.iter().map(|e| e.tool.clone()).collect();
                    self.warn_repeats(&names, "tool");
                    for entry in &list.entries {
                        if !self.resolve(&entry.tool, &[Kind::Tool]) {
                            continue;
                        }
                        let Some(&id) = node_of.get(entry.tool.name.as_str()) else { continue };
                        let condition = match &entry.condition {
                            None => None,
                            Some(written) => {
                                let spend = self.spend_of(&nodes[id]);
                                let lowered = crate::conditions::lower(
                                    written,
                                    nodes[id].name,
                                    &nodes[id].params,
                                    spend,
                                    &mut self.diags,
                                );
                                match lowered.as_ref().and_then(crate::conditions::constant) {
                                    Some(crate::conditions::Constant::Never) => self.diags.push(
                                        Diagnostic::new(Code::CheckConditionNever, "this condition never holds")
                                            .at(written.span, "no arguments satisfy it")
                                            .help(format!(
                                                "the entry for `{}` never applies; fix the bounds or remove the entry",
                                                nodes[id].name
                                            )),
                                    ),
                                    Some(crate::conditions::Constant::Always) => self.diags.push(
                                        Diagnostic::new(Code::CheckConditionAlways, "this condition always holds")
                                            .at(written.span, "every argument satisfies it")
                                            .help(format!(
                                                "write `{} [{}]` without the condition",
                                                list.level, nodes[id].name
                                            )),
                                    ),
                                    None => {}
                                }
                                if lowered.is_none() {
                                    continue;
                                }
                                lowered
                            }
                        };
                        let existing = rules.named.entry(id).or_default();
                        let conditional = condition.is_some();
                        if let Some(other) =
                            existing.iter().find(|r| r.level != list.level && !conditional && r.condition.is_none())
                        {
                            let wins = other.level.max(list.level);
                            self.diags.push(
                                Diagnostic::new(
                                    Code::LevelsTwoLists,
                                    format!("`{}` is in two lists of one layer", nodes[id].name),
                                )
                                .at(entry.span, format!("named `{}` here", list.level))
                                .with(other.span, format!("and `{}` here", other.level))
                                .help(format!("the strictest wins, so it is `{wins}`; keep it in one list")),
                            );
                        }
                        if layer == Layer::Mode && list.level == Level::Alone {
                            self.diags.push(
                                Diagnostic::new(
                                    Code::LevelsModeAlone,
                                    format!("`alone [{}]` cannot make anything alone in a mode", nodes[id].name),
                                )
                                .at(entry.span, "modes only tighten: a named entry only takes the tool out of this mode's class settings")
                                .help("the agent's `may` decides what runs alone; in a mode name only what it tightens"),
                            );
                        }
                        if layer == Layer::Package && list.level == Level::Alone {
                            self.diags.push(
                                Diagnostic::new(
                                    Code::LevelsAloneIgnored,
                                    format!("`alone [{}]` cannot make anything alone in the package-wide layer", nodes[id].name),
                                )
                                .at(entry.span, "this layer only tightens: a named entry only takes the tool out of this layer's class settings")
                                .help("the agent's `may` decides what runs alone; name the tool `alone` there, and here only what this layer tightens"),
                            );
                        }
                        existing.push(NamedRule {
                            level: list.level,
                            condition,
                            span: entry.span,
                            list_span: list.span,
                        });
                    }
                }
            }
        }
        // A conditional entry never decides when an unconditional entry of the same layer is as strict.
        for (id, named) in &rules.named {
            let Some(strongest) = named.iter().filter(|r| r.condition.is_none()).max_by_key(|r| r.level) else {
                continue;
            };
            for r in named.iter().filter(|r| r.condition.is_some() && r.level <= strongest.level) {
                self.diags.push(
                    Diagnostic::new(
                        Code::LevelsShadowed,
                        format!("this entry for `{}` never decides", nodes[*id].name),
                    )
                    .at(r.span, format!("`{}` when its condition holds", r.level))
                    .with(strongest.span, format!("but `{}` always applies here", strongest.level))
                    .help("the strictest applicable entry wins, so the condition changes nothing; remove one of them"),
                );
            }
        }
        rules
    }

    /// Resolves a mode (spec §3c): its `may` block (at most one; a mode layer only tightens, so `alone`
    /// warns) and `unattended` (at most once).
    fn mode(&mut self, decl: &'a Declaration, m: &'a Mode, model: &Model<'a>) -> ModeModel<'a> {
        let mut out = ModeModel { declaration: decl, mode: m, rules: None, unattended: false };
        let (mut may_span, mut unattended_span): (Option<Span>, Option<Span>) = (None, None);
        for stmt in &m.statements {
            match stmt {
                ModeStatement::May(block) => {
                    if let Some(first) = may_span {
                        self.diags.push(repeated("the mode's `may` block", block.span, first));
                        continue;
                    }
                    may_span = Some(block.span);
                    out.rules = Some(self.rules(Layer::Mode, block, &model.node_of, &model.nodes));
                }
                ModeStatement::Unattended(span) => {
                    if let Some(first) = unattended_span {
                        self.diags.push(repeated("`unattended`", *span, first));
                        continue;
                    }
                    unattended_span = Some(*span);
                    out.unattended = true;
                }
            }
        }
        out
    }

    /// Resolves every skill's `delegates` entries once all agents are known (spec §3b): an unknown agent or
    /// skill (with the nearest name), a skill that is not one of the agent's, an entry written twice; then a
    /// cycle among the skills (a skill that delegates, through any chain of entries, to itself) is an error
    /// naming the whole cycle.
    fn delegations(&mut self, model: &mut Model<'a>) {
        type Entries<'a> = Vec<(&'a str, &'a str, Span)>;
        let mut resolved: Vec<(&'a str, Entries<'a>)> = Vec::new();
        for (name, skill) in &model.skills {
            let mut list: Vec<(&'a str, &'a str, Span)> = Vec::new();
            let mut seen: BTreeMap<(&str, &str), Span> = BTreeMap::new();
            for stmt in &skill.skill.statements {
                let SkillStatement::Delegates(refs, _) = stmt else { continue };
                for r in refs {
                    let agent_ok = self.resolve(&r.agent, &[Kind::Agent]);
                    let skill_ok = self.resolve(&r.skill, &[Kind::Skill]);
                    if !(agent_ok && skill_ok) {
                        continue;
                    }
                    let Some(agent) = model.agents.get(r.agent.name.as_str()) else { continue };
                    if !agent.skills.contains(&r.skill.name.as_str()) {
                        let has = agent.skills.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ");
                        let mut d = Diagnostic::new(
                            Code::CheckDelegateSkill,
                            format!("`{}` is not one of the skills of `{}`", r.skill.name, r.agent.name),
                        )
                        .at(r.span, "delegated here")
                        .with(agent.agent.name.span, format!("`{}` is declared here", r.agent.name));
                        d = match closest(&r.skill.name, agent.skills.iter().copied()) {
                            Some(near) => d.help(format!("did you mean `{}.{near}`?", r.agent.name)),
                            None if has.is_empty() => d.help(format!("give `{}` skills first", r.agent.name)),
                            None => d.help(format!("`{}` has the skills {has}", r.agent.name)),
                        };
                        self.diags.push(d);
                        continue;
                    }
                    let key = (r.agent.name.as_str(), r.skill.name.as_str());
                    if let Some(first) = seen.get(&key) {
                        self.diags.push(repeated(&format!("the delegation to `{}.{}`", key.0, key.1), r.span, *first));
                        continue;
                    }
                    seen.insert(key, r.span);
                    list.push((key.0, key.1, r.span));
                }
            }
            resolved.push((name, list));
        }
        for (name, list) in resolved {
            if let Some(skill) = model.skills.get_mut(name) {
                skill.delegates = list;
            }
        }
        // A cycle among skills: the strongly connected components of the delegation graph (one pass); each
        // component that can reach itself is one error, at its entries, in name order.
        let names: Vec<&'a str> = model.skills.keys().copied().collect();
        let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut graph = petgraph::graph::DiGraph::<(), ()>::with_capacity(names.len(), 0);
        for _ in &names {
            graph.add_node(());
        }
        for (i, n) in names.iter().enumerate() {
            for (_, next, _) in &model.skills[n].delegates {
                if let Some(&j) = index.get(next) {
                    graph.add_edge(petgraph::graph::NodeIndex::new(i), petgraph::graph::NodeIndex::new(j), ());
                }
            }
        }
        let mut cycles: Vec<Vec<&'a str>> = petgraph::algo::tarjan_scc(&graph)
            .into_iter()
            .map(|c| {
                let mut members: Vec<&'a str> = c.iter().map(|n| names[n.index()]).collect();
                members.sort_unstable();
                members
            })
            .filter(|m| m.len() > 1 || model.skills[m[0]].delegates.iter().any(|(_, s, _)| *s == m[0]))
            .collect();
        cycles.sort();
        for members in cycles {
            let mut entries: Vec<(&str, &str, Span)> = Vec::new();
            for m in &members {
                for (_, next, span) in &model.skills[m].delegates {
                    if members.contains(next) {
                        entries.push((m, next, *span));
                    }
                }
            }
            let list = members.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
            let Some(((first_from, first_to, first_span), rest)) = entries.split_first() else { continue };
            let mut d = Diagnostic::new(Code::CheckDelegationCycle, format!("the skills {list} delegate in a cycle"))
                .at(*first_span, format!("`{first_from}` delegates to `{first_to}`"));
            for (from, to, span) in rest {
                d = d.with(*span, format!("`{from}` delegates to `{to}`"));
            }
            self.diags.push(d.help("a delegation chain must end: remove one of these `delegates` entries"));
        }
    }

    fn route(&mut self, r: &RouteStmt) -> Option<TableRoute> {
        match &r.target {
            RouteTarget::Person(p) => self.resolve(p, &[Kind::Person]).then(|| TableRoute::Person(p.name.clone())),
            RouteTarget::Role(p) => self.resolve(p, &[Kind::Role]).then(|| TableRoute::Role(p.name.clone())),
            RouteTarget::Queue(p) => self.resolve(p, &[Kind::Queue]).then(|| TableRoute::Queue(p.name.clone())),
            RouteTarget::Requester(_) => Some(TableRoute::Requester),
        }
    }

    fn skill(&mut self, decl: &'a Declaration, s: &'a Skill, model: &Model<'a>) -> SkillModel<'a> {
        let mut out = SkillModel {
            declaration: decl,
            skill: s,
            tools: Vec::new(),
            rules: None,
            routes: BTreeMap::new(),
            delegates: Vec::new(),
        };
        let mut tools_span = None;
        let mut may_span = None;
        for stmt in &s.statements {
            match stmt {
                SkillStatement::Tools(names, span) => {
                    if let Some(first) = tools_span {
                        self.diags.push(repeated("`tools`", *span, first));
                        continue;
                    }
                    tools_span = Some(*span);
                    self.warn_repeats(names, "tool");
                    for n in names {
                        if self.resolve(n, &[Kind::Tool]) {
                            if let Some(&id) = model.node_of.get(n.name.as_str()) {
                                if !out.tools.contains(&id) {
                                    out.tools.push(id);
                                }
                            }
                        }
                    }
                }
                SkillStatement::May(block) => {
                    if let Some(first) = may_span {
                        self.diags.push(repeated("the skill's `may` block", block.span, first));
                        continue;
                    }
                    may_span = Some(block.span);
                    out.rules = Some(self.rules(Layer::Skill, block, &model.node_of, &model.nodes));
                }
                SkillStatement::Route(_) | SkillStatement::Delegates(..) => {}
            }
        }
        for stmt in &s.statements {
            if let SkillStatement::Route(r) = stmt {
                let target = self.route(r);
                if !self.resolve(&r.tool, &[Kind::Tool]) {
                    continue;
                }
                let Some(&id) = model.node_of.get(r.tool.name.as_str()) else { continue };
                if !out.tools.contains(&id) {
                    self.diags.push(
                        Diagnostic::new(
                            Code::CheckRouteUnlisted,
                            format!("the skill `{}` routes `{}`, which it does not list", s.name.name, r.tool.name),
                        )
                        .at(r.tool.span, "not one of the skill's tools")
                        .help(format!("add `{}` to the skill's `tools`, or remove the route", r.tool.name)),
                    );
                    continue;
                }
                if let Some((_, first)) = out.routes.get(&id) {
                    self.diags.push(repeated(&format!("the route of `{}`", r.tool.name), r.span, *first));
                    continue;
                }
                if let Some(t) = target {
                    out.routes.insert(id, (t, r.span));
                }
            }
        }
        out
    }

    fn test(&mut self, t: &'a TestBlock, model: &Model<'a>) -> TestModel<'a> {
        let mut expects = Vec::new();
        for e in &t.expects {
            let agent = self.resolve(&e.agent, &[Kind::Agent]);
            let skill = self.resolve(&e.skill, &[Kind::Skill]);
            let tool = self.resolve(&e.tool, &[Kind::Tool]);
            let mode = e.mode.as_ref().is_none_or(|m| self.resolve(m, &[Kind::Mode]));
            let mut via = true;
            for r in &e.via {
                via &= self.resolve(&r.agent, &[Kind::Agent]);
                via &= self.resolve(&r.skill, &[Kind::Skill]);
            }
            let Some(&node) = model.node_of.get(e.tool.name.as_str()).filter(|_| agent && skill && tool && mode && via)
            else {
                continue;
            };
            let params = &model.nodes[node].params;
            let mut args = serde_json::Map::new();
            let mut ok = true;
            for (name, value) in &e.args {
                let Some((_, ty)) = params.iter().find(|(n, _)| *n == name.name) else {
                    let mut d = Diagnostic::new(
                        Code::CheckConditionParam,
                        format!("the tool `{}` has no parameter `{}`", e.tool.name, name.name),
                    )
                    .at(name.span, "not a parameter of the tool");
                    d = match closest(&name.name, params.iter().map(|(n, _)| *n)) {
                        Some(near) => d.help(format!("did you mean `{near}`?")),
                        None => d.help("name the tool's own parameters"),
                    };
                    self.diags.push(d);
                    ok = false;
                    continue;
                };
                use crate::conditions::DecimalFor;
                use crate::syntax::ast::LiteralValue::{Decimal, Value};
                use crate::table::Literal;
                let json = match (&value.value, ty) {
                    (Value(Literal::Int(n)), ParamType::Int | ParamType::Money | ParamType::Number) => {
                        serde_json::Value::from(*n)
                    }
                    (Value(Literal::Int(n)), ParamType::Json) => serde_json::Value::from(*n),
                    (Value(Literal::String(s)), ParamType::Json) => serde_json::Value::from(s.clone()),
                    (Value(Literal::Bool(b)), ParamType::Json) => serde_json::Value::from(*b),
                    (Value(Literal::String(s)), ParamType::String | ParamType::Shell | ParamType::Entity(_)) => {
                        serde_json::Value::from(s.clone())
                    }
                    (Value(Literal::Bool(b)), ParamType::Bool) => serde_json::Value::from(*b),
                    (Decimal(text), ParamType::Number) => {
                        // As a call's JSON would carry it: the `f64` nearest the decimal, which conditions
                        // read back as its shortest decimal (`0.1` as 0.1; permits-table's `number` module).
                        match text.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                            Some(n) => serde_json::Value::Number(n),
                            None => {
                                self.diags.push(
                                    Diagnostic::new(
                                        Code::CheckConditionType,
                                        format!("the argument `{}` is too large for a JSON number", name.name),
                                    )
                                    .at(value.span, "beyond what a call's JSON can carry")
                                    .help("give a number a host can send, within the range of a 64-bit float"),
                                );
                                ok = false;
                                continue;
                            }
                        }
                    }
                    (Decimal(text), ParamType::Money | ParamType::Int) => {
                        let wanted = if *ty == ParamType::Int {
                            DecimalFor::Int { param: &name.name }
                        } else {
                            let spend = self.spend_of(&model.nodes[node]).filter(|s| s.param == name.name);
                            DecimalFor::Money { param: &name.name, spend }
                        };
                        self.diags.push(crate::conditions::decimal(text, value.span, wanted));
                        ok = false;
                        continue;
                    }
                    (given, _) => {
                        let kind = crate::conditions::value_kind(given);
                        let help = match (ty, given) {
                            (ParamType::Entity(e), Value(Literal::Int(n))) => {
                                format!("an id of a `{e}` is a string: write `{}: \"{n}\"`", name.name)
                            }
                            (ParamType::Entity(e), _) => format!("an id of a `{e}` is a string, in quotes"),
                            (ParamType::String | ParamType::Shell, Value(Literal::Int(n))) => {
                                format!("write it as a string: `{}: \"{n}\"`", name.name)
                            }
                            (ParamType::String | ParamType::Shell, _) => "write a quoted string".to_string(),
                            (ParamType::Int | ParamType::Money, _) => "write a whole number".to_string(),
                            (ParamType::Number, _) => "write a number, like `10` or `2.75`".to_string(),
                            (ParamType::Json, _) => "write a whole number, a string or `true`/`false`".to_string(),
                            (ParamType::Bool, _) => "write `true` or `false`".to_string(),
                        };
                        self.diags.push(
                            Diagnostic::new(
                                Code::CheckConditionType,
                                format!(
                                    "the argument `{}` is given {kind}, but its parameter is `{}`",
                                    name.name,
                                    crate::conditions::type_name(ty)
                                ),
                            )
                            .at(value.span, format!("not {}", crate::conditions::type_words(ty)))
                            .help(help),
                        );
                        ok = false;
                        continue;
                    }
                };
                if args.insert(name.name.clone(), json).is_some() {
                    self.diags.push(
                        Diagnostic::new(Code::CheckRepeated, format!("the argument `{}` is given twice", name.name))
                            .at(name.span, "given again here")
                            .help("give each argument once"),
                    );
                    ok = false;
                }
            }
            if ok {
                expects.push(ExpectModel {
                    agent: &e.agent.name,
                    skill: &e.skill.name,
                    tool: &e.tool.name,
                    args,
                    mode: e.mode.as_ref().map(|m| m.name.as_str()),
                    via: e.via.iter().map(|r| crate::table::ChainLink::new(&r.agent.name, &r.skill.name)).collect(),
                    level: e.level,
                    span: e.span,
                    level_span: e.level_span,
                });
            }
        }
        TestModel { name: &t.name.value, expects }
    }

    fn agent(&mut self, decl: &'a Declaration, a: &'a Agent, model: &Model<'a>) -> AgentModel<'a> {
        let mut out = AgentModel {
            declaration: decl,
            agent: a,
            acts_as: Vec::new(),
            sponsor: None,
            skills: Vec::new(),
            rules: Rules::empty(Layer::Agent),
            routes: BTreeMap::new(),
        };
        let (mut acts_span, mut sponsor_span, mut may_span, mut skills_span) = (None, None, None, None);
        for stmt in &a.statements {
            match stmt {
                AgentStatement::ActsAs(roles, span) => {
                    if let Some(first) = acts_span {
                        self.diags.push(repeated("`acts_as`", *span, first));
                        continue;
                    }
                    acts_span = Some(*span);
                    self.warn_repeats(roles, "role");
                    for r in roles {
                        if self.resolve(r, &[Kind::Role]) && !out.acts_as.contains(&r.name.as_str()) {
                            out.acts_as.push(&r.name);
                        }
                    }
                }
                AgentStatement::Sponsor(p, span) => {
                    if let Some(first) = sponsor_span {
                        self.diags.push(repeated("`sponsor`", *span, first));
                        continue;
                    }
                    sponsor_span = Some(*span);
                    if self.resolve(p, &[Kind::Person]) {
                        out.sponsor = Some(&p.name);
                    }
                }
                AgentStatement::May(block) => {
                    if let Some(first) = may_span {
                        self.diags.push(repeated("the agent's `may` block", block.span, first));
                        continue;
                    }
                    may_span = Some(block.span);
                    out.rules = self.rules(Layer::Agent, block, &model.node_of, &model.nodes);
                }
                AgentStatement::Skills(skills, span) => {
                    if let Some(first) = skills_span {
                        self.diags.push(repeated("`skills`", *span, first));
                        continue;
                    }
                    skills_span = Some(*span);
                    self.warn_repeats(skills, "skill");
                    for s in skills {
                        if self.resolve(s, &[Kind::Skill]) && !out.skills.contains(&s.name.as_str()) {
                            out.skills.push(&s.name);
                        }
                    }
                }
                AgentStatement::Route(_) => {}
            }
        }
        if sponsor_span.is_none() {
            self.diags.push(
                Diagnostic::new(Code::CheckNoSponsor, format!("the agent `{}` has no sponsor", a.name.name))
                    .at(a.name.span, "every agent needs a person who answers for it")
                    .help("add `sponsor PERSON`: the sponsor decides proposals when the work is for nobody"),
            );
        }
        for stmt in &a.statements {
            if let AgentStatement::Route(r) = stmt {
                let target = self.route(r);
                if !self.resolve(&r.tool, &[Kind::Tool]) {
                    continue;
                }
                let Some(&id) = model.node_of.get(r.tool.name.as_str()) else { continue };
                let listed = out.skills.iter().any(|s| model.skills.get(s).is_some_and(|sk| sk.tools.contains(&id)));
                if !listed {
                    self.diags.push(
                        Diagnostic::new(
                            Code::CheckRouteUnlisted,
                            format!(
                                "the agent `{}` routes `{}`, which none of its skills lists",
                                a.name.name, r.tool.name
                            ),
                        )
                        .at(r.tool.span, "not offered in any of the agent's skills")
                        .help("add the tool to one of the agent's skills, or remove the route"),
                    );
                    continue;
                }
                if let Some((_, first)) = out.routes.get(&id) {
                    self.diags.push(repeated(&format!("the route of `{}`", r.tool.name), r.span, *first));
                    continue;
                }
                if let Some(t) = target {
                    out.routes.insert(id, (t, r.span));
                }
            }
        }
        out
    }
}

/// Whether `text` is a pin as spec §2 writes it: `sha256:` and 64 lowercase hex digits.
pub(crate) fn is_pin(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

#[cfg(test)]
mod tests {
    use super::label_from_name;

    #[test]
    fn a_suggested_label_reads_the_tool_name_as_words() {
        let cases = [
            ("SetPrice", "Set price"),
            ("RunCommand", "Run command"),
            ("Refund", "Refund"),
            ("HTTPGet", "HTTP get"),
            ("send_email", "Send email"),
            ("Mail2Customer", "Mail2 customer"),
            ("x", "X"),
        ];
        for (name, label) in cases {
            assert_eq!(label_from_name(name), label, "{name}");
        }
    }
}
