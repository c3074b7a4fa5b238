//! Pest pairs → syntax tree: one function per node, each quoting the rule it reads.
//!
//! `unreachable!` appears only where the grammar guarantees the shape; the comment beside it names the
//! rule. Lexical errors (non-ASCII identifiers, reserved words, bad escapes) are collected in the
//! context, never raised, so one file reports all of them.

use pest::Parser;
use pest::iterators::Pair;

use super::ast::*;
use crate::diagnostics::{Code, Diagnostic};
use crate::table::{CompareOp, EffectClass, Level};

#[derive(pest_derive::Parser)]
#[grammar = "../../../grammar/permits.pest"]
struct PermitsParser;

/// Words that cannot name anything (spec §1): the levels, the classes, the types, `permits`, and every
/// keyword.
pub const RESERVED: &[&str] = &[
    "alone",
    "propose",
    "propose_every_time",
    "never",
    "reads",
    "changes",
    "sends",
    "spends",
    "reaches_out",
    "permits",
    "any",
    "dynamic",
    "requester",
    "string",
    "int",
    "bool",
    "money",
    "entity",
    "tool",
    "tools",
    "extern",
    "fn",
    "role",
    "roles",
    "person",
    "queue",
    "decided_by",
    "may",
    "agent",
    "acts_as",
    "sponsor",
    "skill",
    "skills",
    "route",
    "delegates",
    "via",
    "to",
    "supervises",
    "decides_proposals",
    "widens_autonomy",
    "proposal_lifetime",
    "grant_lifetime",
    "read",
    "write",
    "create",
    "delete",
    "send",
    "spend",
    "by",
    "reach",
    "call",
    "version",
    "subject",
    "everything",
    "changes_alone",
    "when",
    "and",
    "or",
    "not",
    "in",
    "matches",
    "budget",
    "mode",
    "unattended",
    "test",
    "expect",
    "is",
];

/// The deepest nesting of parentheses a file may have (conditions are the only place they nest).
pub const MAX_NESTING: usize = 32;

/// The type names that [`RESERVED`] leaves out (spec §1: reserved only where a type is expected): a tool,
/// an agent or a parameter may be called `shell`, but an entity — whose name is a type — may not.
const TYPE_NAMES_IN_TYPES_ONLY: &[&str] = &["shell", "number", "json"];

/// The index of the `"` that closes the string opened at `open` (escapes skipped), or the length of the text
/// when it is not closed.
fn closing_quote(bytes: &[u8], open: usize) -> usize {
    let mut i = open + 1;
    while i < bytes.len() && bytes[i] != b'"' {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    i.min(bytes.len())
}

/// The byte offset of the first `(` deeper than [`MAX_NESTING`], outside strings and comments.
fn too_deep(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = closing_quote(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(i);
                }
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

struct Ctx {
    file: FileId,
    diags: Vec<Diagnostic>,
}

impl Ctx {
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        Span { file: self.file, start: to_u32(s.start()), end: to_u32(s.end()) }
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The children of a pair without the comments pest inserts between tokens.
fn inner<'i>(pair: Pair<'i, Rule>) -> impl Iterator<Item = Pair<'i, Rule>> {
    pair.into_inner().filter(|p| p.as_rule() != Rule::COMMENT)
}

/// Parses one file. `None` when the file does not follow the grammar (the diagnostics say where).
pub(super) fn parse_file(file: FileId, text: &str) -> (Option<File>, Vec<Diagnostic>) {
    let mut ctx = Ctx { file, diags: Vec::new() };
    // pest's generated parser recurses once per nested parenthesis: refuse deep nesting before parsing.
    if let Some(at) = too_deep(text) {
        let at = to_u32(at);
        ctx.diags.push(
            Diagnostic::new(Code::SyntaxTooDeep, format!("parentheses nest more than {MAX_NESTING} deep"))
                .at(Span { file, start: at, end: at.saturating_add(1) }, "too deep here")
                .help("split the condition, or write it with fewer parentheses (`and` binds tighter than `or`)"),
        );
        return (None, ctx.diags);
    }
    let pair = match PermitsParser::parse(Rule::file, text) {
        Ok(mut pairs) => match pairs.next() {
            Some(p) => p,
            // `file` always produces exactly one pair on success.
            None => return (Some(File { id: file, declarations: Vec::new(), comments: Vec::new() }), ctx.diags),
        },
        Err(e) => {
            ctx.diags.push(syntax_error(file, text, &e));
            return (None, ctx.diags);
        }
    };
    let comments = comments_of(file, text);
    // file = { SOI ~ declaration* ~ EOI }
    let declarations =
        inner(pair).filter(|p| p.as_rule() == Rule::declaration).map(|p| declaration_from_pair(p, &mut ctx)).collect();
    (Some(File { id: file, declarations, comments }), ctx.diags)
}

/// The `COMMENT`s of a file that parsed, in written order, found by scanning the text rather than by a
/// second walk over every pair: in a file that follows the grammar, `/` occurs outside strings only in
/// comments, so each `//` outside a string opens an ordinary comment unless it opens a doc comment
/// (`///` but not `////`). Like the rule, a comment ends before `\r` or `\n`.
fn comments_of(file: FileId, text: &str) -> Vec<Comment> {
    let bytes = text.as_bytes();
    let mut comments = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = closing_quote(bytes, i) + 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                let start = i;
                while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    i += 1;
                }
                let doc = bytes.get(start + 2) == Some(&b'/') && bytes.get(start + 3) != Some(&b'/');
                if !doc {
                    let body = text.get(start..i).unwrap_or("").trim_start_matches('/');
                    let span = Span { file, start: to_u32(start), end: to_u32(i) };
                    comments.push(Comment { text: body.to_string(), span });
                }
            }
            _ => i += 1,
        }
    }
    comments
}

/// declaration = { doc_comment* ~ (entity_decl | extern_tool_decl | tool_decl | …) }
fn declaration_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Declaration {
    let span = ctx.span(&pair);
    let mut docs = Vec::new();
    let mut kind = None;
    for p in inner(pair) {
        match p.as_rule() {
            Rule::doc_comment => {
                let line = p.as_str().trim_start_matches("///").trim_end_matches('\r');
                docs.push(line.strip_prefix(' ').unwrap_or(line).to_string());
            }
            Rule::entity_decl => kind = Some(DeclarationKind::Entity(entity_from_pair(p, ctx))),
            Rule::tool_decl => kind = Some(DeclarationKind::Tool(tool_from_pair(p, ToolKind::Defined, ctx))),
            Rule::extern_tool_decl => kind = Some(DeclarationKind::Tool(tool_from_pair(p, ToolKind::Extern, ctx))),
            Rule::fn_decl => kind = Some(DeclarationKind::Function(function_from_pair(p, ctx))),
            Rule::role_decl => kind = Some(DeclarationKind::Role(role_from_pair(p, ctx))),
            Rule::person_decl => kind = Some(DeclarationKind::Person(person_from_pair(p, ctx))),
            Rule::queue_decl => kind = Some(DeclarationKind::Queue(queue_from_pair(p, ctx))),
            Rule::may_block => kind = Some(DeclarationKind::May(may_from_pair(p, ctx))),
            Rule::agent_decl => kind = Some(DeclarationKind::Agent(agent_from_pair(p, ctx))),
            Rule::skill_decl => kind = Some(DeclarationKind::Skill(skill_from_pair(p, ctx))),
            Rule::authority_stmt => kind = Some(DeclarationKind::Authority(authority_from_pair(p, ctx))),
            Rule::lifetime_stmt => kind = Some(DeclarationKind::Lifetime(lifetime_from_pair(p, ctx))),
            Rule::test_decl => kind = Some(DeclarationKind::Test(test_from_pair(p, ctx))),
            Rule::budget_decl => kind = Some(DeclarationKind::Budget(budget_from_pair(p, ctx))),
            Rule::mode_decl => kind = Some(DeclarationKind::Mode(mode_from_pair(p, ctx))),
            _ => unreachable!("declaration: no other alternatives"),
        }
    }
    let Some(kind) = kind else {
        unreachable!("declaration: the grammar requires one alternative after the doc comments")
    };
    Declaration { docs, kind, span }
}

/// ident = @{ (ASCII_ALPHA | XID_START) ~ ident_char* }, used where a name is referenced.
fn ident_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Ident {
    let span = ctx.span(&pair);
    let name = pair.as_str().to_string();
    if !name.is_ascii() {
        ctx.diags.push(
            Diagnostic::new(Code::SyntaxNonAscii, format!("the name `{name}` has a non-ASCII character"))
                .at(span, "not ASCII")
                .help("names are ASCII letters, digits and `_`: look-alike letters from other scripts would let two different names read the same to a reviewer"),
        );
    }
    Ident { name, span }
}

/// An `ident` that defines a name: it must not be a reserved word.
fn defining_ident(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Ident {
    let ident = ident_from_pair(pair, ctx);
    if RESERVED.contains(&ident.name.as_str()) {
        ctx.diags.push(
            Diagnostic::new(Code::SyntaxReserved, format!("`{}` is a reserved word", ident.name))
                .at(ident.span, "cannot be used as a name")
                .help("choose another name; levels, effect classes, types, `permits` and keywords are reserved"),
        );
    }
    ident
}

/// A parameter's name: local to its tool, so keywords are allowed (`role: string`), except the words a
/// condition is made of and the level and class names.
fn param_ident(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Ident {
    const NOT_FOR_PARAMS: &[&str] = &[
        "when",
        "and",
        "or",
        "not",
        "in",
        "matches",
        "alone",
        "propose",
        "propose_every_time",
        "never",
        "reads",
        "changes",
        "sends",
        "spends",
        "reaches_out",
        "permits",
    ];
    let ident = ident_from_pair(pair, ctx);
    if NOT_FOR_PARAMS.contains(&ident.name.as_str()) {
        ctx.diags.push(
            Diagnostic::new(Code::SyntaxReserved, format!("`{}` is a reserved word", ident.name))
                .at(ident.span, "cannot be used as a parameter name")
                .help(
                    "choose another name; levels, effect classes, `permits` and the words of conditions are reserved",
                ),
        );
    }
    ident
}

/// string = @{ "\"" ~ ("\\" ~ ANY | !("\"" | "\\") ~ ANY)* ~ "\"" }
fn string_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> StringLit {
    let span = ctx.span(&pair);
    let raw = pair.as_str();
    let body = &raw[1..raw.len() - 1];
    let mut value = String::with_capacity(body.len());
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\r' && chars.peek().is_some_and(|(_, n)| *n == '\n') {
            continue; // CRLF and LF are equivalent
        }
        if c != '\\' {
            value.push(c);
            continue;
        }
        let at = Span { file: ctx.file, start: span.start + 1 + to_u32(i), end: span.start + 3 + to_u32(i) };
        match chars.next() {
            Some((_, '"')) => value.push('"'),
            Some((_, '\\')) => value.push('\\'),
            Some((_, 'n')) => value.push('\n'),
            Some((_, 't')) => value.push('\t'),
            Some((_, 'u')) => {
                let mut hex = String::new();
                let mut closed = false;
                if chars.peek().is_some_and(|(_, c)| *c == '{') {
                    chars.next();
                    for (_, c) in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        hex.push(c);
                    }
                }
                match u32::from_str_radix(&hex, 16).ok().filter(|_| closed && hex.len() <= 6).and_then(char::from_u32) {
                    Some(c) => value.push(c),
                    None => ctx.diags.push(
                        Diagnostic::new(Code::SyntaxEscape, "a bad unicode escape")
                            .at(at, "here")
                            .help("write `\\u{…}` with 1 to 6 hex digits naming a Unicode scalar value"),
                    ),
                }
            }
            other => {
                let shown = other.map(|(_, c)| c.to_string()).unwrap_or_default();
                ctx.diags.push(
                    Diagnostic::new(Code::SyntaxEscape, format!("unknown escape `\\{shown}`"))
                        .at(at, "here")
                        .help("the escapes are `\\\"`, `\\\\`, `\\n`, `\\t` and `\\u{…}`"),
                );
            }
        }
    }
    StringLit { value, span }
}

/// name_list = { "[" ~ (ident ~ ("," ~ ident)* ~ ","?)? ~ "]" }
fn name_list_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Vec<Ident> {
    inner(pair).map(|p| ident_from_pair(p, ctx)).collect()
}

/// entity_decl = { kw_entity ~ ident ~ "{" ~ (ident ~ ("," ~ ident)* ~ ","?)? ~ "}" }
fn entity_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Entity {
    let mut it = inner(pair).skip(1);
    let mut name = None;
    let mut fields = Vec::new();
    for p in it.by_ref() {
        if name.is_none() {
            let ident = defining_ident(p, ctx);
            // Spec §1: the type names the reserved words leave out are reserved where a type is expected,
            // and an entity's name is one (`x: Doc`): there it would always mean the built-in type.
            if TYPE_NAMES_IN_TYPES_ONLY.contains(&ident.name.as_str()) {
                ctx.diags.push(
                    Diagnostic::new(Code::SyntaxReserved, format!("`{}` is a type name", ident.name))
                        .at(ident.span, "an entity's name is a type, and this one is built in")
                        .help(format!(
                            "choose another name: where a type is expected, `{}` always means the built-in type",
                            ident.name
                        )),
                );
            }
            name = Some(ident);
        } else {
            fields.push(ident_from_pair(p, ctx));
        }
    }
    Entity { name: name.unwrap_or_else(|| unreachable!("entity_decl: the name follows the keyword")), fields }
}

/// budget_decl = { kw_budget ~ ident ~ "{" ~ (budget_field ~ ("," ~ budget_field)* ~ ","?)? ~ "}" }
fn budget_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Budget {
    let mut name = None;
    let mut fields = Vec::new();
    for p in inner(pair).skip(1) {
        if name.is_none() {
            name = Some(defining_ident(p, ctx));
        } else {
            fields.push(budget_field_from_pair(p, ctx));
        }
    }
    Budget { name: name.unwrap_or_else(|| unreachable!("budget_decl: the name follows the keyword")), fields }
}

/// budget_field = { ident ~ ":" ~ budget_value }, budget_value = _{ string | decimal | number | ident }
fn budget_field_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> BudgetField {
    let span = ctx.span(&pair);
    let mut it = inner(pair);
    let key = ident_from_pair(it.next().unwrap_or_else(|| unreachable!("budget_field: a key")), ctx);
    let v = it.next().unwrap_or_else(|| unreachable!("budget_field: a value"));
    let value = match v.as_rule() {
        Rule::string => BudgetValue::String(string_from_pair(v, ctx)),
        Rule::number => BudgetValue::Number(v.as_str().to_string(), ctx.span(&v)),
        Rule::decimal => BudgetValue::Decimal(v.as_str().to_string(), ctx.span(&v)),
        _ => BudgetValue::Name(ident_from_pair(v, ctx)),
    };
    BudgetField { key, value, span }
}

/// tool_decl = { kw_tool ~ ident ~ string? ~ params ~ claim? ~ body }
/// extern_tool_decl = { kw_extern ~ kw_tool ~ ident ~ string? ~ params ~ claim? ~ pinned? ~ body? }
fn tool_from_pair(pair: Pair<'_, Rule>, kind: ToolKind, ctx: &mut Ctx) -> Tool {
    let mut name = None;
    let mut label = None;
    let mut params = Vec::new();
    let mut claim = None;
    let mut pinned = None;
    let mut body = Vec::new();
    let mut body_span = None;
    for p in inner(pair) {
        match p.as_rule() {
            Rule::kw_tool | Rule::kw_extern => {}
            Rule::ident => name = Some(defining_ident(p, ctx)),
            Rule::string => label = Some(string_from_pair(p, ctx)),
            Rule::params => params = params_from_pair(p, ctx),
            Rule::claim => claim = Some(claim_from_pair(p, ctx)),
            Rule::pinned => {
                let lit = inner(p).find(|q| q.as_rule() == Rule::string);
                pinned = lit.map(|q| string_from_pair(q, ctx));
            }
            Rule::body => {
                body_span = Some(ctx.span(&p));
                body = body_from_pair(p, ctx);
            }
            _ => unreachable!("tool_decl: no other parts"),
        }
    }
    let name = name.unwrap_or_else(|| unreachable!("tool_decl: a name is required"));
    Tool { kind, name, label, params, claim, pinned, body, body_span }
}

/// fn_decl = { kw_fn ~ ident ~ params ~ claim? ~ body }
fn function_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Function {
    let mut name = None;
    let mut params = Vec::new();
    let mut claim = None;
    let mut body = Vec::new();
    for p in inner(pair) {
        match p.as_rule() {
            Rule::kw_fn => {}
            Rule::ident => name = Some(defining_ident(p, ctx)),
            Rule::params => params = params_from_pair(p, ctx),
            Rule::claim => claim = Some(claim_from_pair(p, ctx)),
            Rule::body => body = body_from_pair(p, ctx),
            _ => unreachable!("fn_decl: no other parts"),
        }
    }
    let name = name.unwrap_or_else(|| unreachable!("fn_decl: a name is required"));
    Function { name, params, claim, body }
}

/// params = { "(" ~ (param ~ ("," ~ param)* ~ ","?)? ~ ")" }; param = { ident ~ optional_mark? ~ ":" ~ ident }
fn params_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Vec<Param> {
    inner(pair)
        .map(|p| {
            let span = ctx.span(&p);
            let mut it = inner(p).peekable();
            let Some(name) = it.next() else { unreachable!("param: a name") };
            let optional = it.next_if(|q| q.as_rule() == Rule::optional_mark).is_some();
            let Some(ty) = it.next() else { unreachable!("param: a type") };
            Param { name: param_ident(name, ctx), optional, ty: ident_from_pair(ty, ctx), span }
        })
        .collect()
}

/// claim = { ":" ~ effect_class ~ ("+" ~ effect_class)* }
fn claim_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Claim {
    let span = ctx.span(&pair);
    let classes = inner(pair).map(|p| (effect_class(&p), ctx.span(&p))).collect();
    Claim { classes, span }
}

/// effect_class = @{ ("reads" | "changes" | "sends" | "spends" | "reaches_out") ~ !ident_char }
fn effect_class(pair: &Pair<'_, Rule>) -> EffectClass {
    EffectClass::from_keyword(pair.as_str()).unwrap_or_else(|| unreachable!("effect_class: one of five words"))
}

/// level = @{ ("propose_every_time" | "propose" | "alone" | "never") ~ !ident_char }
fn level(pair: &Pair<'_, Rule>) -> Level {
    Level::from_keyword(pair.as_str()).unwrap_or_else(|| unreachable!("level: one of four words"))
}

/// body = { "{" ~ body_stmt* ~ "}" }
fn body_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Vec<Statement> {
    inner(pair).map(|p| statement_from_pair(p, ctx)).collect()
}

/// body_stmt = _{ op_call | op_read | op_write | … | version_stmt | subject_stmt }
fn statement_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Statement {
    let span = ctx.span(&pair);
    let rule = pair.as_rule();
    // Every operation starts with its keyword(s); the operands follow.
    let mut parts = inner(pair).filter(|p| {
        !matches!(
            p.as_rule(),
            Rule::kw_read
                | Rule::kw_write
                | Rule::kw_create
                | Rule::kw_delete
                | Rule::kw_send
                | Rule::kw_spend
                | Rule::kw_by
                | Rule::kw_reach
                | Rule::kw_call
                | Rule::kw_version
                | Rule::kw_subject
        )
    });
    let mut next = || parts.next().unwrap_or_else(|| unreachable!("body_stmt: operands as the grammar requires"));
    let kind = match rule {
        Rule::op_read => StatementKind::Read(entity_ref_from_pair(next(), ctx)),
        Rule::op_write => StatementKind::Write(entity_ref_from_pair(next(), ctx)),
        Rule::op_create => StatementKind::Create(entity_ref_from_pair(next(), ctx)),
        Rule::op_delete => StatementKind::Delete(entity_ref_from_pair(next(), ctx)),
        Rule::op_send => StatementKind::Send(target_from_pair(next(), ctx)),
        Rule::op_reach => StatementKind::Reach(target_from_pair(next(), ctx)),
        Rule::op_spend => {
            let budget = ident_from_pair(next(), ctx);
            let by = ident_from_pair(next(), ctx);
            StatementKind::Spend { budget, by }
        }
        // op_call = { kw_call ~ (kw_any ~ name_list | kw_dynamic | ident) }
        Rule::op_call => {
            let first = next();
            match first.as_rule() {
                Rule::kw_any => StatementKind::CallAny(name_list_from_pair(next(), ctx)),
                Rule::kw_dynamic => StatementKind::CallDynamic,
                _ => StatementKind::Call(ident_from_pair(first, ctx)),
            }
        }
        Rule::version_stmt => {
            let param = ident_from_pair(next(), ctx);
            let field = ident_from_pair(next(), ctx);
            StatementKind::Version { param, field }
        }
        Rule::subject_stmt => StatementKind::Subject(ident_from_pair(next(), ctx)),
        _ => unreachable!("body_stmt: no other statements"),
    };
    Statement { kind, span }
}

/// entity_ref = { ident ~ ("." ~ ident)? }
fn entity_ref_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> EntityRef {
    let span = ctx.span(&pair);
    let mut it = inner(pair);
    let entity = ident_from_pair(it.next().unwrap_or_else(|| unreachable!("entity_ref: an entity")), ctx);
    let field = it.next().map(|p| ident_from_pair(p, ctx));
    EntityRef { entity, field, span }
}

/// target = { ident | string }
fn target_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Target {
    let span = ctx.span(&pair);
    let p = inner(pair).next().unwrap_or_else(|| unreachable!("target: a name or a string"));
    match p.as_rule() {
        Rule::string => Target { text: string_from_pair(p, ctx).value, quoted: true, span },
        _ => Target { text: ident_from_pair(p, ctx).name, quoted: false, span },
    }
}

/// role_decl = { kw_role ~ ident }
fn role_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Role {
    let p = inner(pair).nth(1).unwrap_or_else(|| unreachable!("role_decl: a name"));
    Role { name: defining_ident(p, ctx) }
}

/// person_decl = { kw_person ~ ident ~ ("{" ~ (kw_roles ~ name_list)? ~ "}")? }
fn person_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Person {
    let mut name = None;
    let mut roles = Vec::new();
    for p in inner(pair) {
        match p.as_rule() {
            Rule::ident => name = Some(defining_ident(p, ctx)),
            Rule::name_list => roles = name_list_from_pair(p, ctx),
            _ => {}
        }
    }
    Person { name: name.unwrap_or_else(|| unreachable!("person_decl: a name")), roles }
}

/// queue_decl = { kw_queue ~ ident ~ "{" ~ (kw_decided_by ~ name_list)? ~ "}" }
fn queue_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Queue {
    let mut name = None;
    let mut decided_by = Vec::new();
    for p in inner(pair) {
        match p.as_rule() {
            Rule::ident => name = Some(defining_ident(p, ctx)),
            Rule::name_list => decided_by = name_list_from_pair(p, ctx),
            _ => {}
        }
    }
    Queue { name: name.unwrap_or_else(|| unreachable!("queue_decl: a name")), decided_by }
}

/// authority_stmt = { authority_kind ~ name_list }
fn authority_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> AuthorityStmt {
    let mut it = inner(pair);
    let kind_pair = it.next().unwrap_or_else(|| unreachable!("authority_stmt: a kind"));
    let kind = match inner(kind_pair).next().map(|p| p.as_rule()) {
        Some(Rule::kw_supervises) => AuthorityKind::Supervises,
        Some(Rule::kw_decides_proposals) => AuthorityKind::DecidesProposals,
        _ => AuthorityKind::WidensAutonomy,
    };
    let holders = name_list_from_pair(it.next().unwrap_or_else(|| unreachable!("authority_stmt: a list")), ctx);
    AuthorityStmt { kind, holders }
}

/// lifetime_stmt = { lifetime_kind ~ duration }
fn lifetime_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> LifetimeStmt {
    let mut it = inner(pair);
    let kind_pair = it.next().unwrap_or_else(|| unreachable!("lifetime_stmt: a kind"));
    let kind = match inner(kind_pair).next().map(|p| p.as_rule()) {
        Some(Rule::kw_proposal_lifetime) => LifetimeKind::Proposal,
        _ => LifetimeKind::Grant,
    };
    let d = it.next().unwrap_or_else(|| unreachable!("lifetime_stmt: a duration"));
    let value_span = ctx.span(&d);
    let text = d.as_str();
    let (digits, unit) = text.split_at(text.len() - 1);
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => 86400,
    };
    let seconds = digits.parse::<u64>().ok().and_then(|n| n.checked_mul(scale));
    let seconds = match seconds {
        Some(s) if s > 0 => s,
        _ => {
            ctx.diags.push(
                Diagnostic::new(Code::SyntaxNumber, format!("the duration `{text}` is out of range"))
                    .at(value_span, "here")
                    .help("write a positive whole number of seconds, minutes, hours or days, like `7d`"),
            );
            0
        }
    };
    LifetimeStmt { kind, seconds, value_span }
}

/// may_block = { kw_may ~ "{" ~ may_stmt* ~ "}" }
fn may_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> MayBlock {
    let span = ctx.span(&pair);
    let mut statements = Vec::new();
    for p in inner(pair) {
        let pspan = ctx.span(&p);
        match p.as_rule() {
            Rule::kw_may => {}
            // preset = { kw_everything | kw_changes_alone }
            Rule::preset => {
                let preset = match inner(p).next().map(|k| k.as_rule()) {
                    Some(Rule::kw_everything) => Preset::Everything,
                    _ => Preset::ChangesAlone,
                };
                statements.push(MayStatement::Preset(preset, pspan));
            }
            // class_setting = { effect_class ~ ":" ~ level }
            Rule::class_setting => {
                let mut it = inner(p);
                let (Some(c), Some(l)) = (it.next(), it.next()) else { unreachable!("class_setting: class and level") };
                statements.push(MayStatement::Setting(ClassSetting {
                    class: effect_class(&c),
                    class_span: ctx.span(&c),
                    level: level(&l),
                    span: pspan,
                }));
            }
            // tool_list = { level ~ "[" ~ (list_entry ~ ("," ~ list_entry)* ~ ","?)? ~ "]" }
            Rule::tool_list => {
                let mut it = inner(p);
                let l = it.next().unwrap_or_else(|| unreachable!("tool_list: a level"));
                let entries = it.map(|e| list_entry_from_pair(e, ctx)).collect();
                statements.push(MayStatement::List(ToolList { level: level(&l), entries, span: pspan }));
            }
            _ => unreachable!("may_stmt: no other statements"),
        }
    }
    MayBlock { statements, span }
}

/// mode_decl = { kw_mode ~ ident ~ string? ~ "{" ~ mode_stmt* ~ "}" }; mode_stmt = _{ may_block | unattended_stmt }
fn mode_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Mode {
    let mut name = None;
    let mut description = None;
    let mut statements = Vec::new();
    for p in inner(pair) {
        match p.as_rule() {
            Rule::ident => name = Some(defining_ident(p, ctx)),
            Rule::string => description = Some(string_from_pair(p, ctx)),
            Rule::may_block => statements.push(ModeStatement::May(may_from_pair(p, ctx))),
            Rule::unattended_stmt => statements.push(ModeStatement::Unattended(ctx.span(&p))),
            _ => {}
        }
    }
    Mode { name: name.unwrap_or_else(|| unreachable!("mode_decl: a name")), description, statements }
}

/// test_decl = { kw_test ~ string ~ "{" ~ expect_stmt* ~ "}" }
fn test_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> TestBlock {
    let mut name = None;
    let mut expects = Vec::new();
    for p in inner(pair) {
        match p.as_rule() {
            Rule::string => name = Some(string_from_pair(p, ctx)),
            Rule::expect_stmt => expects.push(expect_from_pair(p, ctx)),
            _ => {}
        }
    }
    TestBlock { name: name.unwrap_or_else(|| unreachable!("test_decl: a name")), expects }
}

/// expect_stmt = { kw_expect ~ ident ~ "." ~ ident ~ "." ~ ident ~ call_args? ~ expect_mode? ~ kw_is ~ level }
fn expect_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Expect {
    let span = ctx.span(&pair);
    let mut names = Vec::new();
    let mut args = Vec::new();
    let mut lvl = None;
    let mut mode = None;
    let mut via = Vec::new();
    for p in inner(pair) {
        match p.as_rule() {
            Rule::ident => names.push(ident_from_pair(p, ctx)),
            // expect_via = { kw_via ~ delegate_ref }
            Rule::expect_via => {
                if let Some(r) = inner(p).find(|q| q.as_rule() == Rule::delegate_ref) {
                    via.push(delegate_ref_from_pair(r, ctx));
                }
            }
            // expect_mode = { kw_in ~ ident }
            Rule::expect_mode => mode = inner(p).find(|q| q.as_rule() == Rule::ident).map(|q| ident_from_pair(q, ctx)),
            // call_args = { "(" ~ (call_arg ~ ("," ~ call_arg)* ~ ","?)? ~ ")" }; call_arg = { ident ~ ":" ~ literal }
            Rule::call_args => {
                for a in inner(p) {
                    let mut it = inner(a);
                    let (Some(n), Some(v)) = (it.next(), it.next()) else {
                        unreachable!("call_arg: a name and a value")
                    };
                    args.push((ident_from_pair(n, ctx), literal_from_pair(v, ctx)));
                }
            }
            Rule::level => lvl = Some((level(&p), ctx.span(&p))),
            _ => {}
        }
    }
    let (Some(tool), Some(skill), Some(agent)) = (names.pop(), names.pop(), names.pop()) else {
        unreachable!("expect_stmt: agent, skill and tool")
    };
    let (level, level_span) = lvl.unwrap_or_else(|| unreachable!("expect_stmt: a level"));
    Expect { agent, skill, tool, args, via, mode, level, level_span, span }
}

/// delegate_ref = { ident ~ "." ~ ident }
fn delegate_ref_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> DelegateRef {
    let span = ctx.span(&pair);
    let mut names = inner(pair).map(|i| ident_from_pair(i, ctx)).collect::<Vec<_>>().into_iter();
    let agent = names.next().unwrap_or_else(|| unreachable!("delegate_ref: an agent"));
    let skill = names.next().unwrap_or_else(|| unreachable!("delegate_ref: a skill"));
    DelegateRef { agent, skill, span }
}

/// list_entry = { ident ~ (kw_when ~ condition)? }
fn list_entry_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> ListEntry {
    let span = ctx.span(&pair);
    let mut tool = None;
    let mut condition = None;
    for p in inner(pair) {
        match p.as_rule() {
            Rule::ident => tool = Some(ident_from_pair(p, ctx)),
            Rule::condition => condition = Some(condition_from_pair(p, ctx)),
            _ => {}
        }
    }
    ListEntry { tool: tool.unwrap_or_else(|| unreachable!("list_entry: a name")), condition, span }
}

/// condition = { or_expr }
fn condition_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> ConditionExpr {
    let p = inner(pair).next().unwrap_or_else(|| unreachable!("condition: an or_expr"));
    or_from_pair(p, ctx)
}

/// or_expr = { and_expr ~ (kw_or ~ and_expr)* }
fn or_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> ConditionExpr {
    let span = ctx.span(&pair);
    let mut parts: Vec<ConditionExpr> =
        inner(pair).filter(|p| p.as_rule() == Rule::and_expr).map(|p| and_from_pair(p, ctx)).collect();
    if parts.len() == 1 {
        return parts.remove(0);
    }
    ConditionExpr { kind: ConditionExprKind::Or(parts), span }
}

/// and_expr = { not_expr ~ (kw_and ~ not_expr)* }
fn and_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> ConditionExpr {
    let span = ctx.span(&pair);
    let mut parts: Vec<ConditionExpr> =
        inner(pair).filter(|p| p.as_rule() == Rule::not_expr).map(|p| not_from_pair(p, ctx)).collect();
    if parts.len() == 1 {
        return parts.remove(0);
    }
    ConditionExpr { kind: ConditionExprKind::And(parts), span }
}

/// not_expr = { kw_not* ~ primary }
fn not_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> ConditionExpr {
    let span = ctx.span(&pair);
    let mut nots = 0usize;
    let mut primary = None;
    for p in inner(pair) {
        match p.as_rule() {
            Rule::kw_not => nots += 1,
            _ => primary = Some(primary_from_pair(p, ctx)),
        }
    }
    let primary = primary.unwrap_or_else(|| unreachable!("not_expr: a primary"));
    // `not not a` is `a`: fold the run to its parity, so the tree never nests `not`s.
    if nots % 2 == 1 { ConditionExpr { kind: ConditionExprKind::Not(Box::new(primary)), span } } else { primary }
}

/// primary = { "(" ~ or_expr ~ ")" | comparison }
fn primary_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> ConditionExpr {
    let p = inner(pair).next().unwrap_or_else(|| unreachable!("primary: an or_expr or a comparison"));
    match p.as_rule() {
        Rule::or_expr => or_from_pair(p, ctx),
        _ => comparison_from_pair(p, ctx),
    }
}

/// comparison = { ident ~ (in_list | matches_glob | compare_op ~ literal) }
fn comparison_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> ConditionExpr {
    let span = ctx.span(&pair);
    let mut it = inner(pair);
    let param = ident_from_pair(it.next().unwrap_or_else(|| unreachable!("comparison: a parameter")), ctx);
    let next = it.next().unwrap_or_else(|| unreachable!("comparison: an operator"));
    let kind = match next.as_rule() {
        Rule::in_list => {
            let values =
                inner(next).filter(|p| p.as_rule() == Rule::literal).map(|p| literal_from_pair(p, ctx)).collect();
            ConditionExprKind::In { param, values }
        }
        Rule::matches_glob => {
            let glob = inner(next).find(|p| p.as_rule() == Rule::string).map(|p| string_from_pair(p, ctx));
            ConditionExprKind::Matches { param, glob: glob.unwrap_or_else(|| unreachable!("matches_glob: a string")) }
        }
        _ => {
            let op = CompareOp::from_str_op(next.as_str()).unwrap_or_else(|| unreachable!("compare_op: six operators"));
            let value = literal_from_pair(it.next().unwrap_or_else(|| unreachable!("comparison: a value")), ctx);
            ConditionExprKind::Compare { param, op, value }
        }
    };
    ConditionExpr { kind, span }
}

/// literal = { decimal | number | string | boolean }
///
/// A decimal is kept as written: only `check` knows whether the parameter is a `number` (which takes it)
/// or `int`/`money` (which refuse it).
fn literal_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> LiteralExpr {
    let span = ctx.span(&pair);
    let p = inner(pair).next().unwrap_or_else(|| unreachable!("literal: a decimal, number, string or boolean"));
    let value = match p.as_rule() {
        Rule::decimal => return LiteralExpr { value: LiteralValue::Decimal(p.as_str().to_string()), span },
        Rule::string => crate::table::Literal::String(string_from_pair(p, ctx).value),
        Rule::boolean => crate::table::Literal::Bool(p.as_str() == "true"),
        _ => match p.as_str().parse::<i64>() {
            Ok(n) => crate::table::Literal::Int(n),
            Err(_) => {
                ctx.diags.push(
                    Diagnostic::new(Code::SyntaxNumber, format!("the number `{}` is out of range", p.as_str()))
                        .at(span, "does not fit in 64 bits")
                        .help(format!(
                            "whole numbers in conditions are signed 64-bit integers (money in minor units, like cents); against a `number` parameter, write it as a decimal: `{}.0`",
                            p.as_str()
                        )),
                );
                crate::table::Literal::Int(0)
            }
        },
    };
    LiteralExpr { value: LiteralValue::Value(value), span }
}

/// agent_decl = { kw_agent ~ ident ~ string? ~ "{" ~ agent_stmt* ~ "}" }
fn agent_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Agent {
    let mut name = None;
    let mut purpose = None;
    let mut statements = Vec::new();
    for p in inner(pair) {
        let span = ctx.span(&p);
        match p.as_rule() {
            Rule::kw_agent => {}
            Rule::ident => name = Some(defining_ident(p, ctx)),
            Rule::string => purpose = Some(string_from_pair(p, ctx)),
            Rule::acts_as_stmt => statements.push(AgentStatement::ActsAs(list_after_keyword(p, ctx), span)),
            Rule::sponsor_stmt => {
                let who = inner(p).nth(1).unwrap_or_else(|| unreachable!("sponsor_stmt: a name"));
                statements.push(AgentStatement::Sponsor(ident_from_pair(who, ctx), span));
            }
            Rule::may_block => statements.push(AgentStatement::May(may_from_pair(p, ctx))),
            Rule::skills_stmt => statements.push(AgentStatement::Skills(list_after_keyword(p, ctx), span)),
            Rule::route_stmt => statements.push(AgentStatement::Route(route_from_pair(p, ctx))),
            _ => unreachable!("agent_stmt: no other statements"),
        }
    }
    Agent { name: name.unwrap_or_else(|| unreachable!("agent_decl: a name")), purpose, statements }
}

/// `kw_… ~ name_list`: the list.
fn list_after_keyword(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Vec<Ident> {
    inner(pair).find(|p| p.as_rule() == Rule::name_list).map(|p| name_list_from_pair(p, ctx)).unwrap_or_default()
}

/// skill_decl = { kw_skill ~ ident ~ string? ~ "{" ~ skill_stmt* ~ "}" }
fn skill_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> Skill {
    let mut name = None;
    let mut description = None;
    let mut statements = Vec::new();
    for p in inner(pair) {
        let span = ctx.span(&p);
        match p.as_rule() {
            Rule::kw_skill => {}
            Rule::ident => name = Some(defining_ident(p, ctx)),
            Rule::string => description = Some(string_from_pair(p, ctx)),
            Rule::tools_stmt => statements.push(SkillStatement::Tools(list_after_keyword(p, ctx), span)),
            Rule::may_block => statements.push(SkillStatement::May(may_from_pair(p, ctx))),
            Rule::route_stmt => statements.push(SkillStatement::Route(route_from_pair(p, ctx))),
            Rule::delegates_stmt => {
                let refs = inner(p)
                    .filter(|r| r.as_rule() == Rule::delegate_ref)
                    .map(|r| delegate_ref_from_pair(r, ctx))
                    .collect();
                statements.push(SkillStatement::Delegates(refs, span));
            }
            _ => unreachable!("skill_stmt: no other statements"),
        }
    }
    Skill { name: name.unwrap_or_else(|| unreachable!("skill_decl: a name")), description, statements }
}

/// route_stmt = { kw_route ~ ident ~ kw_to ~ route_target }
/// route_target = { kw_person ~ ident | kw_role ~ ident | kw_queue ~ ident | kw_requester }
fn route_from_pair(pair: Pair<'_, Rule>, ctx: &mut Ctx) -> RouteStmt {
    let span = ctx.span(&pair);
    let mut tool = None;
    let mut target = None;
    for p in inner(pair) {
        match p.as_rule() {
            Rule::ident => tool = Some(ident_from_pair(p, ctx)),
            Rule::route_target => {
                let tspan = ctx.span(&p);
                let mut it = inner(p);
                let kw = it.next().map(|k| k.as_rule());
                let name = it.next().map(|n| ident_from_pair(n, ctx));
                target = Some(match (kw, name) {
                    (Some(Rule::kw_person), Some(n)) => RouteTarget::Person(n),
                    (Some(Rule::kw_role), Some(n)) => RouteTarget::Role(n),
                    (Some(Rule::kw_queue), Some(n)) => RouteTarget::Queue(n),
                    _ => RouteTarget::Requester(tspan),
                });
            }
            _ => {}
        }
    }
    let (Some(tool), Some(target)) = (tool, target) else { unreachable!("route_stmt: a tool and a target") };
    RouteStmt { tool, target, span }
}

/// A pest error as a diagnostic: what was found, what was expected (in the language's words).
fn syntax_error(file: FileId, text: &str, e: &pest::error::Error<Rule>) -> Diagnostic {
    use pest::error::{ErrorVariant, InputLocation};
    let start = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    // Point at the offending token: up to the next whitespace or punctuation, at least one character.
    let rest = text.get(start..).unwrap_or("");
    let token: String = {
        let first = rest.chars().next();
        match first {
            None => String::new(),
            Some(c) if c.is_alphanumeric() || c == '_' => {
                rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
            }
            Some(c) => c.to_string(),
        }
    };
    let end = start + token.len().max(usize::from(!token.is_empty()));
    let span = Span { file, start: to_u32(start), end: to_u32(end.max(start)) };
    let expected = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<&str> =
                positives.iter().filter(|r| !matches!(r, Rule::COMMENT | Rule::WHITESPACE)).map(rule_name).collect();
            names.sort_unstable();
            names.dedup();
            names
        }
        ErrorVariant::CustomError { .. } => Vec::new(),
    };
    let found = if token.is_empty() {
        "end of file".to_string()
    } else if token.trim().is_empty() || token.chars().all(char::is_control) {
        format!("{token:?}")
    } else {
        format!("`{token}`")
    };
    let label = match expected.len() {
        0 => "unexpected here".to_string(),
        1 => format!("expected {}", expected[0]),
        _ => {
            let (last, rest) = expected.split_last().unwrap_or((&"", &[]));
            format!("expected {} or {}", rest.join(", "), last)
        }
    };
    let help = if rest.starts_with("///") {
        "doc comments go only above top-level declarations; inside a block write an ordinary `//` comment".to_string()
    } else if token.is_empty() {
        // At the end of the file the label has no character to stand under: say what was expected here.
        format!("the file ends too soon ({label}): is it cut short, or is a `}}`, `]` or `)` missing?")
    } else {
        "see the grammar in `grammar/permits.pest` and the language tour in the README".to_string()
    };
    Diagnostic::new(Code::SyntaxParse, format!("unexpected {found}")).at(span, label).help(help)
}

/// How a rule reads in a message.
fn rule_name(rule: &Rule) -> &'static str {
    match rule {
        Rule::EOI => "the end of the file",
        Rule::ident | Rule::list_entry | Rule::entity_ref => "a name",
        Rule::string => "a string",
        Rule::duration => "a duration like `7d`",
        Rule::number => "a number",
        Rule::decimal => "a decimal number",
        Rule::boolean => "`true` or `false`",
        Rule::literal => "a value (a number, a string, `true` or `false`)",
        Rule::compare_op => "a comparison (`<`, `<=`, `==`, `!=`, `>=`, `>`)",
        Rule::in_list | Rule::kw_in => "`in`",
        Rule::matches_glob | Rule::kw_matches => "`matches`",
        Rule::kw_when => "`when`",
        Rule::kw_test | Rule::test_decl => "`test`",
        Rule::kw_expect | Rule::expect_stmt => "`expect`",
        Rule::kw_is => "`is`",
        Rule::call_args => "`(`",
        Rule::call_arg => "an argument (`name: value`)",
        Rule::kw_and => "`and`",
        Rule::kw_or => "`or`",
        Rule::kw_not => "`not`",
        Rule::condition | Rule::or_expr | Rule::and_expr | Rule::not_expr | Rule::primary | Rule::comparison => {
            "a condition"
        }
        Rule::level => "a level (`alone`, `propose`, `propose_every_time`, `never`)",
        Rule::effect_class => "an effect class",
        Rule::declaration | Rule::doc_comment => "a declaration",
        Rule::name_list => "`[`",
        Rule::params => "`(`",
        Rule::claim => "`:`",
        Rule::body => "`{`",
        Rule::target => "a name or a string",
        Rule::op_read
        | Rule::op_write
        | Rule::op_create
        | Rule::op_delete
        | Rule::op_send
        | Rule::op_spend
        | Rule::op_reach
        | Rule::op_call => "an operation",
        Rule::version_stmt => "`version`",
        Rule::subject_stmt => "`subject`",
        Rule::preset | Rule::class_setting | Rule::tool_list => "a rule (`changes: propose`, `never [..]`)",
        Rule::acts_as_stmt => "`acts_as`",
        Rule::sponsor_stmt => "`sponsor`",
        Rule::skills_stmt => "`skills`",
        Rule::tools_stmt => "`tools`",
        Rule::route_stmt => "`route`",
        Rule::delegates_stmt | Rule::kw_delegates => "`delegates`",
        Rule::delegate_ref => "`Agent.Skill`",
        Rule::expect_via | Rule::kw_via => "`via`",
        Rule::route_target => "`person`, `role`, `queue` or `requester`",
        Rule::may_block => "`may`",
        Rule::authority_kind | Rule::authority_stmt => "an authority statement",
        Rule::lifetime_kind | Rule::lifetime_stmt => "a lifetime",
        Rule::kw_entity => "`entity`",
        Rule::kw_tool => "`tool`",
        Rule::kw_tools => "`tools`",
        Rule::kw_extern => "`extern`",
        Rule::kw_pinned | Rule::pinned => "`pinned`",
        Rule::optional_mark => "`?`",
        Rule::kw_fn => "`fn`",
        Rule::kw_role => "`role`",
        Rule::kw_roles => "`roles`",
        Rule::kw_person => "`person`",
        Rule::kw_queue => "`queue`",
        Rule::kw_decided_by => "`decided_by`",
        Rule::kw_may => "`may`",
        Rule::kw_agent => "`agent`",
        Rule::kw_acts_as => "`acts_as`",
        Rule::kw_sponsor => "`sponsor`",
        Rule::kw_skill => "`skill`",
        Rule::kw_skills => "`skills`",
        Rule::kw_route => "`route`",
        Rule::kw_to => "`to`",
        Rule::kw_requester => "`requester`",
        Rule::kw_by => "`by`",
        Rule::kw_read
        | Rule::kw_write
        | Rule::kw_create
        | Rule::kw_delete
        | Rule::kw_send
        | Rule::kw_spend
        | Rule::kw_reach
        | Rule::kw_call => "an operation",
        Rule::kw_version => "`version`",
        Rule::kw_subject => "`subject`",
        Rule::kw_everything | Rule::kw_changes_alone => "a rule (`changes: propose`, `never [..]`)",
        Rule::kw_supervises | Rule::kw_decides_proposals | Rule::kw_widens_autonomy => "an authority statement",
        Rule::kw_proposal_lifetime | Rule::kw_grant_lifetime => "a lifetime",
        Rule::kw_any => "`any`",
        Rule::kw_dynamic => "`dynamic`",
        Rule::kw_budget => "`budget`",
        Rule::budget_field => "a budget field (`ceiling: 2500`)",
        Rule::entity_decl
        | Rule::tool_decl
        | Rule::extern_tool_decl
        | Rule::fn_decl
        | Rule::role_decl
        | Rule::person_decl
        | Rule::queue_decl
        | Rule::agent_decl
        | Rule::skill_decl
        | Rule::budget_decl => "a declaration",
        _ => "another token",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Option<File>, Vec<Diagnostic>) {
        parse_file(FileId(0), text)
    }

    #[test]
    fn a_tool_with_comments_docs_and_a_body() {
        let (file, diags) = parse(
            "// a comment\n/// Sets the price.\ntool SetPrice \"Set the price\" (repair: Repair, price: money) : changes {\n  write Repair.price // trailing\n  version repair.revision\n}\n",
        );
        assert!(diags.is_empty(), "{diags:?}");
        let file = file.expect("parsed");
        assert_eq!(file.comments.len(), 2);
        assert_eq!(file.comments[1].text, " trailing");
        let decl = &file.declarations[0];
        assert_eq!(decl.docs, vec!["Sets the price.".to_string()]);
        let DeclarationKind::Tool(tool) = &decl.kind else { panic!("a tool") };
        assert_eq!(tool.name.name, "SetPrice");
        assert_eq!(tool.label.as_ref().map(|l| l.value.as_str()), Some("Set the price"));
        assert_eq!(tool.params.len(), 2);
        assert_eq!(tool.claim.as_ref().map(|c| c.classes.len()), Some(1));
        assert_eq!(tool.body.len(), 2);
        assert!(matches!(tool.body[1].kind, StatementKind::Version { .. }));
    }

    #[test]
    fn keywords_do_not_swallow_longer_names() {
        let (file, diags) = parse("role toolbox\nrole proposer\n");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(file.expect("parsed").declarations.len(), 2);
    }

    #[test]
    fn non_ascii_and_reserved_names_are_refused_with_their_codes() {
        let (_, diags) = parse("role Mаnager\nrole never\n");
        let codes: Vec<_> = diags.iter().map(|d| d.code).collect();
        assert_eq!(codes, vec![Code::SyntaxNonAscii, Code::SyntaxReserved]);
    }

    #[test]
    fn an_entity_may_not_take_a_type_name_but_a_tool_may() {
        for name in ["shell", "number", "json"] {
            let (_, diags) = parse(&format!("entity {name} {{ text }}\n"));
            let found: Vec<_> = diags.iter().map(|d| (d.code, d.message.as_str())).collect();
            assert_eq!(found, [(Code::SyntaxReserved, format!("`{name}` is a type name").as_str())]);
        }
        let (file, diags) = parse("extern tool shell \"Run a command\" (command: shell) : reaches_out\nrole json\n");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(file.map(|f| f.declarations.len()), Some(2));
    }

    #[test]
    fn string_escapes_decode_and_bad_ones_are_reported() {
        let (file, diags) = parse("agent A \"a\\\"b\\u{e9}\\n\" { sponsor P }\n");
        assert!(diags.is_empty(), "{diags:?}");
        let file = file.expect("parsed");
        let DeclarationKind::Agent(agent) = &file.declarations[0].kind else { panic!("an agent") };
        assert_eq!(agent.purpose.as_ref().map(|p| p.value.as_str()), Some("a\"bé\n"));
        let (_, diags) = parse("agent A \"\\q\" { }\n");
        assert_eq!(diags[0].code, Code::SyntaxEscape);
    }

    #[test]
    fn a_syntax_error_says_what_was_expected() {
        let (file, diags) = parse("tool T \"x\" () { wirte Repair }\n");
        assert!(file.is_none());
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].message, "unexpected `wirte`");
        let label = &diags[0].primary.as_ref().expect("a label").message;
        assert!(label.contains("an operation"), "{label}");
    }

    /// A file cut off inside a block: the message names the end of the file in plain words.
    #[test]
    fn a_truncated_file_says_unexpected_end_of_file() {
        let (file, diags) =
            parse("agent Clerk \"Keeps notes.\" {\n    sponsor Pat\n    may {\n        alone [ReadNote]");
        assert!(file.is_none());
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, Code::SyntaxParse);
        assert_eq!(diags[0].message, "unexpected end of file");
        let label = &diags[0].primary.as_ref().expect("a label").message;
        assert!(label.contains("a rule"), "{label}");
    }

    #[test]
    fn crlf_and_trailing_commas_are_accepted() {
        let (file, diags) = parse("entity Repair {\r\n  ticket,\r\n  note,\r\n}\r\nrole A // x\r\n");
        assert!(diags.is_empty(), "{diags:?}");
        let file = file.expect("parsed");
        let DeclarationKind::Entity(e) = &file.declarations[0].kind else { panic!("an entity") };
        assert_eq!(e.fields.len(), 2);
        assert_eq!(file.comments[0].text, " x");
    }
}
