//! Conditions: type-checking a written condition against a tool's parameters, lowering it to the table's
//! typed tree, and the interval analysis that finds conditions that never or always hold (spec §3 item 5);
//! and [`decimal`], the one diagnostic for a decimal written where money or a whole number is expected.
//!
//! Lowering happens in `check` (each list entry's condition against the named tool); the analysis runs
//! on the lowered tree, so it sees exactly what the runtime will evaluate.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound;

use crate::diagnostics::{Code, Diagnostic, closest};
use crate::syntax::Span;
use crate::syntax::ast::{ConditionExpr, ConditionExprKind, Ident, LiteralExpr, LiteralValue};
use crate::table::shell::pattern_can_match_part;
use crate::table::{CompareOp, Condition, Decimal, Literal as Value, ParamType};

/// How a tool spends (spec §6), for the help of a decimal written as money: the `money` parameter, the
/// budget, and the budget's unit when it names one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spend<'a> {
    /// The tool's `money` parameter the spend is by.
    pub param: &'a str,
    /// The budget.
    pub budget: &'a str,
    /// The budget's `unit` (`cents`), when it is written as a name.
    pub unit: Option<&'a str>,
}

/// What a decimal was written for, to say the way out ([`decimal`]).
#[derive(Clone, Copy, Debug)]
pub enum DecimalFor<'a> {
    /// A `money` parameter (`param`), with the spend of the tool when it spends by that parameter.
    Money {
        /// The parameter.
        param: &'a str,
        /// The tool's spend by it, if any.
        spend: Option<Spend<'a>>,
    },
    /// An `int` parameter.
    Int {
        /// The parameter.
        param: &'a str,
    },
    /// A figure of a budget (`ceiling`, `alone_up_to`).
    Budget {
        /// The budget.
        budget: &'a str,
        /// The field.
        field: &'a str,
        /// The budget's unit, when it names one.
        unit: Option<&'a str>,
    },
}

/// Minor units known to be a hundredth of their currency, so that a decimal's two places convert exactly.
const HUNDREDTHS: [&str; 12] = [
    "cents",
    "cent",
    "pence",
    "penny",
    "pennies",
    "centimes",
    "centime",
    "centavos",
    "centavo",
    "paise",
    "kopecks",
    "hundredths",
];

/// A decimal as a whole number of hundredths (`20.00` → 2000, `0.5` → 50): `None` with more than two
/// decimal places or beyond `i64`.
fn hundredths(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.')?;
    if fraction.len() > 2 {
        return None;
    }
    let whole: i128 = whole.parse().ok()?;
    let fraction: i128 = format!("{fraction:0<2}").parse().ok()?;
    let n = whole.checked_mul(100)?.checked_add(fraction)?;
    i64::try_from(if negative { -n } else { n }).ok()
}

/// The error for a decimal written where money or a whole number is expected (spec §2: money is a whole
/// number of minor units, never a float): `permits::check::decimal`, at the literal.
///
/// The help gives the number in minor units. **The rule:** a decimal is read as an amount with two decimal
/// places, so its minor-unit figure is the decimal times 100 (`20.00` → `2000`). Where the amount counts in
/// a budget's unit (a `spend` by that parameter, or the budget's own figures), the help names that unit,
/// and says "if a `UNIT` is a hundredth of the currency" unless the unit is one known to be (`cents`,
/// `pence`, …); for a `money` parameter the tool spends from no budget by, it says "the smallest unit of the
/// currency". With more than two decimal places no figure is suggested. An `int` parameter just takes a
/// whole number.
pub fn decimal(text: &str, at: Span, wanted: DecimalFor<'_>) -> Diagnostic {
    let figure = hundredths(text);
    let in_unit = |unit: Option<&str>, budget: &str| -> (String, String) {
        match unit {
            Some(u) if HUNDREDTHS.contains(&u) => (format!("`{u}`, the unit of the budget `{budget}`"), String::new()),
            Some(u) => (
                format!("`{u}`, the unit of the budget `{budget}`"),
                format!(" if a `{u}` is a hundredth of the currency"),
            ),
            None => {
                (format!("the unit of the budget `{budget}`"), " if that unit is a hundredth of the currency".into())
            }
        }
    };
    let (message, help) = match wanted {
        DecimalFor::Int { param } => (
            format!("`{text}` is a decimal, but `{param}` is `int`"),
            format!("`{param}` takes a whole number, like `{}`", text.split('.').next().unwrap_or("0")),
        ),
        DecimalFor::Money { param, spend } => {
            let (unit, condition) = match spend {
                Some(s) => in_unit(s.unit, s.budget),
                None => (
                    "the smallest unit of the currency (the tool spends from no budget by it)".to_string(),
                    " if that is a hundredth, as a cent is".to_string(),
                ),
            };
            let way_out = match figure {
                Some(n) => format!("write `{n}` for {text}{condition}"),
                None => format!("`{text}` has more decimal places than a hundredth; write a whole number"),
            };
            (
                format!("`{text}` is a decimal, but `{param}` is money"),
                format!("money is a whole number of {unit}: {way_out}"),
            )
        }
        DecimalFor::Budget { budget, field, unit } => {
            let (unit, condition) = in_unit(unit, budget);
            let way_out = match figure.filter(|n| *n >= 0) {
                Some(n) => format!("write `{field}: {n}` for {text}{condition}"),
                None => "write a whole number, never negative".to_string(),
            };
            (
                format!("`{text}` is a decimal, but the budget field `{field}` is money"),
                format!("a budget's figures are whole numbers of {unit}: {way_out}"),
            )
        }
    };
    let label = match (wanted, figure) {
        (DecimalFor::Int { .. }, _) | (_, None) => "a decimal".to_string(),
        (_, Some(n)) => format!("a decimal: `{n}` in minor units"),
    };
    Diagnostic::new(Code::CheckDecimal, message).at(at, label).help(help)
}

/// Type-checks `written` against the parameters of `tool` and lowers it. `spend` is how the tool spends,
/// for the help of a decimal written as money. Every error is pushed to `diags`; `None` when there was any.
pub fn lower(
    written: &ConditionExpr,
    tool: &str,
    params: &[(&str, ParamType)],
    spend: Option<Spend<'_>>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Condition> {
    let before = diags.len();
    let lowered = lower_inner(written, tool, params, spend, diags);
    if diags.len() > before { None } else { lowered }
}

/// A parameter type as written in sources (`money`, `shell`, an entity's name).
pub(crate) fn type_name(ty: &ParamType) -> String {
    match ty {
        ParamType::String => "string".into(),
        ParamType::Int => "int".into(),
        ParamType::Bool => "bool".into(),
        ParamType::Money => "money".into(),
        ParamType::Shell => "shell".into(),
        ParamType::Number => "number".into(),
        ParamType::Json => "json".into(),
        ParamType::Entity(e) => e.clone(),
    }
}

/// What a value is, in words, for a type error: "a number", "a string".
pub(crate) fn value_kind(v: &LiteralValue) -> &'static str {
    match v {
        LiteralValue::Value(Value::Int(_)) => "a number",
        LiteralValue::Decimal(_) => "a decimal number",
        LiteralValue::Value(Value::String(_)) => "a string",
        LiteralValue::Value(Value::Bool(_)) => "`true` or `false`",
        LiteralValue::Value(Value::Number(_)) => "a decimal number",
    }
}

/// What a parameter of a type takes, in words: "a whole number", "an id of a `Repair` (a string)".
pub(crate) fn type_words(ty: &ParamType) -> String {
    match ty {
        ParamType::Int => "a whole number".into(),
        ParamType::Money => "a whole number of minor units".into(),
        ParamType::String => "a string".into(),
        ParamType::Shell => "a command line (a string)".into(),
        ParamType::Bool => "`true` or `false`".into(),
        ParamType::Number => "a number".into(),
        ParamType::Json => "any JSON value".into(),
        ParamType::Entity(e) => format!("an id of a `{e}` (a string)"),
    }
}

/// Whether a value fits a parameter type: numbers for `int` and `money`, strings for `string`, `shell` and
/// entities (ids), booleans for `bool`.
fn fits(ty: &ParamType, v: &Value) -> bool {
    matches!(
        (ty, v),
        (ParamType::Int | ParamType::Money, Value::Int(_))
            | (ParamType::String | ParamType::Shell | ParamType::Entity(_), Value::String(_))
            | (ParamType::Bool, Value::Bool(_))
    )
}

/// Whether a parameter takes `==`, `!=`, `in [..]` and `matches`: a string, a `shell` command line (each
/// part, spec §3a) or an entity id.
fn is_text(ty: &ParamType) -> bool {
    matches!(ty, ParamType::String | ParamType::Shell | ParamType::Entity(_))
}

/// Spec §3a: a condition on a `shell` parameter whose pattern or literal could never match a part is refused
/// (`permits::check::shell_pattern`), at the literal. Nothing for other parameters.
fn check_part_pattern(param: &Ident, ty: &ParamType, text: &str, at: Span, diags: &mut Vec<Diagnostic>) -> bool {
    if *ty != ParamType::Shell {
        return true;
    }
    match pattern_can_match_part(text) {
        Ok(()) => true,
        Err(never) => {
            diags.push(
                Diagnostic::new(
                    Code::CheckShellPattern,
                    format!("this can never match a part of the command line `{}`", param.name),
                )
                .at(at, never.to_string())
                .with(param.span, format!("`{}` is `shell`: each part of its line is judged alone", param.name))
                .help(never.help()),
            );
            false
        }
    }
}

fn lower_inner(
    w: &ConditionExpr,
    tool: &str,
    params: &[(&str, ParamType)],
    spend: Option<Spend<'_>>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Condition> {
    let param_type = |param: &crate::syntax::ast::Ident, diags: &mut Vec<Diagnostic>| -> Option<ParamType> {
        match params.iter().find(|(n, _)| *n == param.name) {
            Some((_, ParamType::Json)) => {
                diags.push(
                    Diagnostic::new(
                        Code::CheckConditionType,
                        format!("no condition may read `{}`: it is `json`", param.name),
                    )
                    .at(param.span, "any JSON value: nothing to compare")
                    .help("a `json` argument is passed through unread (spec §2); give the tool a typed parameter to decide on"),
                );
                None
            }
            Some((_, ty)) => Some(ty.clone()),
            None => {
                let mut d = Diagnostic::new(
                    Code::CheckConditionParam,
                    format!("the tool `{tool}` has no parameter `{}`", param.name),
                )
                .at(param.span, "not a parameter of the tool");
                d = match closest(&param.name, params.iter().map(|(n, _)| *n)) {
                    Some(near) => d.help(format!("did you mean `{near}`?")),
                    None => d.help(format!(
                        "a condition reads the tool's own parameters: {}",
                        if params.is_empty() {
                            "this tool has none".to_string()
                        } else {
                            params.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                        }
                    )),
                };
                diags.push(d);
                None
            }
        }
    };
    match &w.kind {
        ConditionExprKind::Or(parts) => {
            let lowered: Vec<Option<Condition>> =
                parts.iter().map(|p| lower_inner(p, tool, params, spend, diags)).collect();
            lowered.into_iter().collect::<Option<Vec<_>>>().map(Condition::Any)
        }
        ConditionExprKind::And(parts) => {
            let lowered: Vec<Option<Condition>> =
                parts.iter().map(|p| lower_inner(p, tool, params, spend, diags)).collect();
            lowered.into_iter().collect::<Option<Vec<_>>>().map(Condition::All)
        }
        ConditionExprKind::Not(inner) => {
            lower_inner(inner, tool, params, spend, diags).map(|c| Condition::Not(Box::new(c)))
        }
        ConditionExprKind::Compare { param, op, value } => {
            let ty = param_type(param, diags)?;
            let ordering = !matches!(op, CompareOp::Eq | CompareOp::Ne);
            if ordering && ty == ParamType::Shell {
                diags.push(
                    Diagnostic::new(
                        Code::CheckShellOrder,
                        format!("`{}` cannot order the command line `{}`", op.as_str(), param.name),
                    )
                    .at(value.span, "a part of a command line is not a number")
                    .with(param.span, format!("`{}` is `shell`", param.name))
                    .help(format!(
                        "each part of a `shell` argument is text: compare it with `==`, `!=`, `in [..]` or `matches`, e.g. `{} matches \"cargo test *\"`",
                        param.name
                    )),
                );
                return None;
            }
            if ty == ParamType::Number {
                // Spec §2: a `number` is compared with `<` … `>` against decimal literals; a whole number
                // is one too. The table holds the exact decimal, so `10` here also takes `10.5` as argument.
                let decimal = match &value.value {
                    LiteralValue::Value(Value::Int(n)) => Some(Decimal::from_i64(*n)),
                    LiteralValue::Decimal(text) => Decimal::parse(text),
                    LiteralValue::Value(_) => None,
                };
                let Some(decimal) = decimal else {
                    diags.push(mismatch(param, &ty, value));
                    return None;
                };
                return Some(Condition::Compare { param: param.name.clone(), op: *op, value: Value::Number(decimal) });
            }
            let literal = match &value.value {
                LiteralValue::Value(v) => v,
                LiteralValue::Decimal(text) => {
                    let wanted = match ty {
                        ParamType::Money => Some(DecimalFor::Money {
                            param: &param.name,
                            spend: spend.filter(|s| s.param == param.name),
                        }),
                        ParamType::Int => Some(DecimalFor::Int { param: &param.name }),
                        _ => None,
                    };
                    diags.push(match wanted {
                        Some(wanted) => decimal(text, value.span, wanted)
                            .with(param.span, format!("`{}` is `{}`", param.name, type_name(&ty))),
                        None => mismatch(param, &ty, value),
                    });
                    return None;
                }
            };
            if !fits(&ty, literal) {
                diags.push(mismatch(param, &ty, value));
                return None;
            }
            if ordering && !matches!(ty, ParamType::Int | ParamType::Money) {
                diags.push(
                    Diagnostic::new(Code::CheckConditionType, format!("`{}` orders numbers, but `{}` is `{}`", op.as_str(), param.name, type_name(&ty)))
                        .at(w.span, "not a number")
                        .help("`<`, `<=`, `>=`, `>` compare `int`, `money` and `number` parameters; strings take `==`, `!=`, `in [..]` and `matches`"),
                );
                return None;
            }
            if let Value::String(text) = literal {
                if !check_part_pattern(param, &ty, text, value.span, diags) {
                    return None;
                }
            }
            Some(Condition::Compare { param: param.name.clone(), op: *op, value: literal.clone() })
        }
        ConditionExprKind::In { param, values } => {
            let ty = param_type(param, diags)?;
            if !is_text(&ty) {
                diags.push(
                    Diagnostic::new(
                        Code::CheckConditionType,
                        format!("`in` needs a string parameter, but `{}` is `{}`", param.name, type_name(&ty)),
                    )
                    .at(w.span, "not a string")
                    .help("for numbers, compare with `==` or a range: `amount >= 1 and amount <= 5`"),
                );
                return None;
            }
            let mut out = Vec::new();
            let mut ok = true;
            for v in values {
                match &v.value {
                    LiteralValue::Value(Value::String(s)) => {
                        ok &= check_part_pattern(param, &ty, s, v.span, diags);
                        out.push(s.clone());
                    }
                    _ => {
                        diags.push(mismatch(param, &ty, v));
                        return None;
                    }
                }
            }
            ok.then(|| Condition::In { param: param.name.clone(), values: out })
        }
        ConditionExprKind::Matches { param, glob } => {
            let ty = param_type(param, diags)?;
            if !is_text(&ty) {
                diags.push(
                    Diagnostic::new(
                        Code::CheckConditionType,
                        format!("`matches` needs a string parameter, but `{}` is `{}`", param.name, type_name(&ty)),
                    )
                    .at(w.span, "not a string")
                    .help("`matches \"glob\"` tests strings; compare numbers with `<`, `<=`, `==`, `!=`, `>=`, `>`"),
                );
                return None;
            }
            if !check_part_pattern(param, &ty, &glob.value, glob.span, diags) {
                return None;
            }
            Some(Condition::Matches { param: param.name.clone(), glob: glob.value.clone() })
        }
    }
}

fn mismatch(param: &Ident, ty: &ParamType, value: &LiteralExpr) -> Diagnostic {
    let wanted = match ty {
        ParamType::Int | ParamType::Money => "a number",
        ParamType::String | ParamType::Shell | ParamType::Entity(_) => "a string",
        ParamType::Bool => "`true` or `false`",
        ParamType::Number => "a number",
        ParamType::Json => "nothing: no condition reads a `json` parameter",
    };
    Diagnostic::new(
        Code::CheckConditionType,
        format!("`{}` is `{}`, but it is compared with {}", param.name, type_name(ty), value_kind(&value.value)),
    )
    .at(value.span, format!("expected {wanted}"))
    .with(param.span, format!("`{}` is `{}`", param.name, type_name(ty)))
    .help(match ty {
        ParamType::Money => {
            "money is an integer in the budget's minor unit (cents): write `amount <= 10000`, not `100.00` or `\"100\"`"
        }
        ParamType::Int => "write a whole number",
        ParamType::Bool => "write `true` or `false`",
        ParamType::Number => "write a number, like `10`, `-3` or `2.75`",
        ParamType::Shell => "write a quoted command, compared with each part of the line: `command == \"cargo test\"`",
        _ => "write a quoted string",
    })
}

/// What a condition's truth is, whatever the arguments, when interval reasoning on one parameter can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Constant {
    /// No arguments make it hold.
    Never,
    /// Every argument makes it hold.
    Always,
}

/// Whether a condition over one parameter never or always holds. `None` when it may go either way, or
/// when it mentions several parameters or a `matches` (which this analysis does not decide).
pub fn constant(c: &Condition) -> Option<Constant> {
    let mut param = None;
    let set = set_of(c, &mut param)?;
    if set.is_empty() {
        Some(Constant::Never)
    } else if set.is_full() {
        Some(Constant::Always)
    } else {
        None
    }
}

/// The arguments that satisfy a condition on one parameter: an interval set for whole numbers and for
/// decimals, a finite or cofinite set for strings and booleans.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Set {
    /// Sorted, disjoint, inclusive intervals within the i64 range (`int` and `money`).
    Ints(Vec<(i128, i128)>),
    /// Sorted, disjoint, non-empty intervals of exact decimals (`number`), each bound open or closed;
    /// `Unbounded` is −∞ as a lower bound and +∞ as an upper one. No two intervals touch, so one set has
    /// one spelling (every number is `[(Unbounded, Unbounded)]`).
    ///
    /// The domain is every decimal: an argument is always one (spec §2), so a set empty here holds for no
    /// argument and a full one for every argument. The converse need not be true (no `f64` lies strictly
    /// between two decimals a hair apart): such a condition is left undecided, never wrongly warned about.
    Numbers(Vec<(Bound<Decimal>, Bound<Decimal>)>),
    /// `false`: exactly these values; `true`: every value except these.
    Strings(bool, BTreeSet<String>),
    /// Which of false/true.
    Bools([bool; 2]),
}

const MIN: i128 = i64::MIN as i128;
const MAX: i128 = i64::MAX as i128;

impl Set {
    fn is_empty(&self) -> bool {
        match self {
            Set::Ints(v) => v.is_empty(),
            Set::Numbers(v) => v.is_empty(),
            Set::Strings(co, s) => !co && s.is_empty(),
            Set::Bools(b) => !b[0] && !b[1],
        }
    }

    fn is_full(&self) -> bool {
        match self {
            Set::Ints(v) => v.as_slice() == [(MIN, MAX)],
            Set::Numbers(v) => v.as_slice() == [(Bound::Unbounded, Bound::Unbounded)],
            Set::Strings(co, s) => *co && s.is_empty(),
            Set::Bools(b) => b[0] && b[1],
        }
    }

    fn complement(self) -> Set {
        match self {
            Set::Ints(v) => {
                let mut out = Vec::new();
                let mut next = MIN;
                for (lo, hi) in v {
                    if lo > next {
                        out.push((next, lo - 1));
                    }
                    next = hi + 1;
                }
                if next <= MAX {
                    out.push((next, MAX));
                }
                Set::Ints(out)
            }
            Set::Numbers(v) => {
                // The gaps: before the first interval, between each two, after the last.
                let mut out = Vec::new();
                let mut next = Some(Bound::Unbounded);
                for (lo, hi) in v {
                    if let (Some(from), Some(to)) = (next.take(), flip(lo)) {
                        if nonempty(&from, &to) {
                            out.push((from, to));
                        }
                    }
                    next = flip(hi);
                }
                if let Some(from) = next {
                    out.push((from, Bound::Unbounded));
                }
                Set::Numbers(out)
            }
            Set::Strings(co, s) => Set::Strings(!co, s),
            Set::Bools(b) => Set::Bools([!b[0], !b[1]]),
        }
    }

    fn intersect(self, other: Set) -> Option<Set> {
        Some(match (self, other) {
            (Set::Ints(a), Set::Ints(b)) => {
                let mut out = Vec::new();
                let (mut i, mut j) = (0, 0);
                while i < a.len() && j < b.len() {
                    let lo = a[i].0.max(b[j].0);
                    let hi = a[i].1.min(b[j].1);
                    if lo <= hi {
                        out.push((lo, hi));
                    }
                    if a[i].1 < b[j].1 { i += 1 } else { j += 1 }
                }
                Set::Ints(out)
            }
            (Set::Numbers(a), Set::Numbers(b)) => {
                let mut out = Vec::new();
                let (mut i, mut j) = (0, 0);
                while i < a.len() && j < b.len() {
                    let lo = if lower_cmp(&a[i].0, &b[j].0) == Ordering::Less { &b[j].0 } else { &a[i].0 };
                    let hi = if upper_cmp(&a[i].1, &b[j].1) == Ordering::Less { &a[i].1 } else { &b[j].1 };
                    if nonempty(lo, hi) {
                        out.push((lo.clone(), hi.clone()));
                    }
                    if upper_cmp(&a[i].1, &b[j].1) == Ordering::Less { i += 1 } else { j += 1 }
                }
                Set::Numbers(out)
            }
            (Set::Strings(ca, a), Set::Strings(cb, b)) => match (ca, cb) {
                (false, false) => Set::Strings(false, a.intersection(&b).cloned().collect()),
                (false, true) => Set::Strings(false, a.difference(&b).cloned().collect()),
                (true, false) => Set::Strings(false, b.difference(&a).cloned().collect()),
                (true, true) => Set::Strings(true, a.union(&b).cloned().collect()),
            },
            (Set::Bools(a), Set::Bools(b)) => Set::Bools([a[0] && b[0], a[1] && b[1]]),
            _ => return None,
        })
    }

    fn union(self, other: Set) -> Option<Set> {
        // A ∪ B = ¬(¬A ∩ ¬B)
        Some(self.complement().intersect(other.complement())?.complement())
    }
}

/// The other side's bound at the same point: the upper bound just below a lower bound (`[x` → `x)`,
/// `(x` → `x]`) and the other way round. `None` for an unbounded end (nothing lies beyond it).
fn flip(b: Bound<Decimal>) -> Option<Bound<Decimal>> {
    match b {
        Bound::Included(x) => Some(Bound::Excluded(x)),
        Bound::Excluded(x) => Some(Bound::Included(x)),
        Bound::Unbounded => None,
    }
}

/// Orders lower bounds by how much they leave out: −∞ first; at one value, closed (`[x`) before open (`(x`).
fn lower_cmp(a: &Bound<Decimal>, b: &Bound<Decimal>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y).then_with(|| open_last(a).cmp(&open_last(b)))
        }
    }
}

/// Orders upper bounds by how much they take in: at one value, open (`x)`) before closed (`x]`); +∞ last.
fn upper_cmp(a: &Bound<Decimal>, b: &Bound<Decimal>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Greater,
        (_, Bound::Unbounded) => Ordering::Less,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y).then_with(|| open_last(b).cmp(&open_last(a)))
        }
    }
}

/// 1 for an open bound, 0 for a closed one, to break a tie at one value.
fn open_last(b: &Bound<Decimal>) -> u8 {
    u8::from(matches!(b, Bound::Excluded(_)))
}

/// Whether some decimal lies between a lower and an upper bound: `[x, x]` holds x, `[x, x)` nothing.
fn nonempty(lo: &Bound<Decimal>, hi: &Bound<Decimal>) -> bool {
    match (lo, hi) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(x), Bound::Included(y)) => x <= y,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => x < y,
    }
}

fn set_of<'c>(c: &'c Condition, param: &mut Option<&'c str>) -> Option<Set> {
    let mut same = |p: &'c str| match param {
        Some(q) => *q == p,
        None => {
            *param = Some(p);
            true
        }
    };
    match c {
        Condition::All(parts) => {
            let mut acc: Option<Set> = None;
            for p in parts {
                let s = set_of(p, param)?;
                acc = Some(match acc {
                    None => s,
                    Some(a) => a.intersect(s)?,
                });
            }
            acc
        }
        Condition::Any(parts) => {
            let mut acc: Option<Set> = None;
            for p in parts {
                let s = set_of(p, param)?;
                acc = Some(match acc {
                    None => s,
                    Some(a) => a.union(s)?,
                });
            }
            acc
        }
        Condition::Not(inner) => Some(set_of(inner, param)?.complement()),
        Condition::Compare { param: p, op, value } => {
            if !same(p) {
                return None;
            }
            match value {
                Value::Int(n) => {
                    let n = i128::from(*n);
                    let interval = |lo: i128, hi: i128| if lo <= hi { vec![(lo, hi)] } else { Vec::new() };
                    Some(match op {
                        CompareOp::Lt => Set::Ints(interval(MIN, n - 1)),
                        CompareOp::Le => Set::Ints(interval(MIN, n)),
                        CompareOp::Eq => Set::Ints(vec![(n, n)]),
                        CompareOp::Ne => Set::Ints(vec![(n, n)]).complement(),
                        CompareOp::Ge => Set::Ints(interval(n, MAX)),
                        CompareOp::Gt => Set::Ints(interval(n + 1, MAX)),
                    })
                }
                Value::Number(d) => {
                    let one = |lo, hi| Set::Numbers(vec![(lo, hi)]);
                    let at = || Bound::Included(d.clone());
                    let past = || Bound::Excluded(d.clone());
                    Some(match op {
                        CompareOp::Lt => one(Bound::Unbounded, past()),
                        CompareOp::Le => one(Bound::Unbounded, at()),
                        CompareOp::Eq => one(at(), at()),
                        CompareOp::Ne => one(at(), at()).complement(),
                        CompareOp::Ge => one(at(), Bound::Unbounded),
                        CompareOp::Gt => one(past(), Bound::Unbounded),
                    })
                }
                Value::String(s) => {
                    let one = Set::Strings(false, BTreeSet::from([s.clone()]));
                    Some(if *op == CompareOp::Ne { one.complement() } else { one })
                }
                Value::Bool(b) => {
                    let mut set = [false, false];
                    set[usize::from(*b)] = true;
                    let one = Set::Bools(set);
                    Some(if *op == CompareOp::Ne { one.complement() } else { one })
                }
            }
        }
        Condition::In { param: p, values } => {
            if !same(p) {
                return None;
            }
            Some(Set::Strings(false, values.iter().cloned().collect()))
        }
        Condition::Matches { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(param: &str, op: CompareOp, n: i64) -> Condition {
        Condition::Compare { param: param.into(), op, value: Value::Int(n) }
    }

    #[test]
    fn intervals_find_never_and_always() {
        let never = Condition::All(vec![cmp("amount", CompareOp::Lt, 0), cmp("amount", CompareOp::Gt, 10)]);
        assert_eq!(constant(&never), Some(Constant::Never));
        let always = Condition::Any(vec![cmp("amount", CompareOp::Lt, 100), cmp("amount", CompareOp::Ge, 100)]);
        assert_eq!(constant(&always), Some(Constant::Always));
        let sometimes = Condition::All(vec![cmp("amount", CompareOp::Ge, 0), cmp("amount", CompareOp::Le, 10)]);
        assert_eq!(constant(&sometimes), None);
        let two_params = Condition::All(vec![cmp("a", CompareOp::Lt, 0), cmp("b", CompareOp::Gt, 10)]);
        assert_eq!(constant(&two_params), None);
        assert_eq!(constant(&Condition::Not(Box::new(cmp("a", CompareOp::Le, i64::MAX)))), Some(Constant::Never));
    }

    fn n(op: CompareOp, text: &str) -> Condition {
        Condition::Compare { param: "ratio".into(), op, value: Value::Number(Decimal::parse(text).expect("decimal")) }
    }

    /// Decimal comparisons are analysed on exact decimals, with open (`<`, `>`) and closed (`<=`, `>=`)
    /// bounds: a contradiction is `never`, a cover of every number `always`, and bounds that meet or come
    /// close leave the condition undecided.
    #[test]
    fn number_conditions_are_decided_on_exact_decimals() {
        assert_eq!(constant(&n(CompareOp::Lt, "0.5")), None);
        assert_eq!(
            constant(&Condition::All(vec![n(CompareOp::Gt, "0.3"), n(CompareOp::Lt, "0.2")])),
            Some(Constant::Never)
        );
        assert_eq!(
            constant(&Condition::All(vec![n(CompareOp::Lt, "0"), n(CompareOp::Gt, "10")])),
            Some(Constant::Never)
        );
        assert_eq!(
            constant(&Condition::All(vec![n(CompareOp::Lt, "0.5"), n(CompareOp::Ge, "0.5")])),
            Some(Constant::Never)
        );
        assert_eq!(constant(&Condition::All(vec![n(CompareOp::Le, "0.5"), n(CompareOp::Ge, "0.5")])), None);
        assert_eq!(constant(&Condition::All(vec![n(CompareOp::Gt, "0.2"), n(CompareOp::Lt, "0.2000001")])), None);
        // No whole number lies in (9, 10), but 9.5 does.
        assert_eq!(constant(&Condition::All(vec![n(CompareOp::Gt, "9"), n(CompareOp::Lt, "10")])), None);
        assert_eq!(
            constant(&Condition::Any(vec![n(CompareOp::Lt, "0.5"), n(CompareOp::Ge, "0.5")])),
            Some(Constant::Always)
        );
        assert_eq!(constant(&Condition::Any(vec![n(CompareOp::Lt, "0.5"), n(CompareOp::Gt, "0.5")])), None);
        assert_eq!(
            constant(&Condition::Any(vec![n(CompareOp::Lt, "0.5"), n(CompareOp::Gt, "0.5"), n(CompareOp::Eq, "0.50")])),
            Some(Constant::Always)
        );
        assert_eq!(
            constant(&Condition::All(vec![n(CompareOp::Eq, "1.5"), n(CompareOp::Ne, "1.50")])),
            Some(Constant::Never)
        );
        assert_eq!(
            constant(&Condition::Any(vec![n(CompareOp::Le, "-1"), n(CompareOp::Gt, "-1")])),
            Some(Constant::Always)
        );
        let not_between =
            Condition::Not(Box::new(Condition::All(vec![n(CompareOp::Gt, "1.5"), n(CompareOp::Lt, "1.5")])));
        assert_eq!(constant(&not_between), Some(Constant::Always));
        assert_eq!(constant(&Condition::Not(Box::new(n(CompareOp::Ne, "2")))), None);
    }

    #[test]
    fn strings_and_booleans_are_decided_too() {
        let s = |op, v: &str| Condition::Compare { param: "to".into(), op, value: Value::String(v.into()) };
        let never = Condition::All(vec![s(CompareOp::Eq, "a"), s(CompareOp::Eq, "b")]);
        assert_eq!(constant(&never), Some(Constant::Never));
        let always = Condition::Any(vec![s(CompareOp::Eq, "a"), s(CompareOp::Ne, "a")]);
        assert_eq!(constant(&always), Some(Constant::Always));
        let matches = Condition::Matches { param: "to".into(), glob: "*".into() };
        assert_eq!(constant(&matches), None);
        let b = |v| Condition::Compare { param: "urgent".into(), op: CompareOp::Eq, value: Value::Bool(v) };
        assert_eq!(constant(&Condition::Any(vec![b(true), b(false)])), Some(Constant::Always));
    }
}
