//! Conditions on a tool's arguments as the runtime evaluates them (spec §3 item 5): a small typed tree,
//! its evaluator (fail closed) and its canonical printing; [`Arguments`], the arguments as conditions read
//! them (a `shell` argument one part at a time, spec §3a).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{CompareOp, Decimal, Literal};

/// A condition on a tool's arguments, as the runtime evaluates it (spec §3 item 5). A small typed tree:
/// the compiler has checked every parameter and type against the tool, so evaluation needs no parser.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// Every part holds.
    All(Vec<Condition>),
    /// At least one part holds.
    Any(Vec<Condition>),
    /// The part does not hold.
    Not(Box<Condition>),
    /// `param OP value`.
    Compare {
        /// The parameter.
        param: String,
        /// The comparison.
        op: CompareOp,
        /// The value compared with.
        value: Literal,
    },
    /// `param in [..]`: the string argument is one of the values.
    In {
        /// The parameter (a string or an entity id).
        param: String,
        /// The values.
        values: Vec<String>,
    },
    /// `param matches "glob"`: `*` matches any run of characters, `?` any one character; case-sensitive.
    Matches {
        /// The parameter (a string or an entity id).
        param: String,
        /// The pattern.
        glob: String,
    },
}

/// Why a condition cannot be evaluated. The decision is then `never` (fail closed, spec §3 item 5).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    /// The argument the condition reads is missing.
    #[error("the argument `{0}` is missing, so the condition cannot be evaluated")]
    Missing(String),
    /// The argument has the wrong type for the comparison.
    #[error("the argument `{param}` is not {expected}, so the condition cannot be evaluated")]
    Mistyped {
        /// The parameter.
        param: String,
        /// What was expected: "a whole number", "a string", "true or false".
        expected: &'static str,
    },
}

/// A call's arguments as conditions read them: the JSON object, with at most one argument read as another
/// text. That is how a `shell` argument is judged (spec §3a): each part as if it were the whole call, so its
/// conditions see the part's normalized text in place of the line.
#[derive(Clone, Copy, Debug)]
pub struct Arguments<'a> {
    map: &'a Map<String, Value>,
    /// `(parameter, text)`: the argument read as `text` instead of its value in `map`.
    part: Option<(&'a str, &'a str)>,
}

/// One argument as a condition reads it.
#[derive(Clone, Copy)]
enum Arg<'a> {
    Json(&'a Value),
    Text(&'a str),
}

impl Arg<'_> {
    fn as_i64(self) -> Option<i64> {
        match self {
            Arg::Json(v) => v.as_i64(),
            Arg::Text(_) => None,
        }
    }

    fn as_decimal(self) -> Option<Decimal> {
        match self {
            Arg::Json(Value::Number(n)) => Decimal::from_json(n),
            Arg::Json(_) | Arg::Text(_) => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Arg::Json(v) => v.as_str(),
            Arg::Text(t) => Some(t),
        }
    }

    fn as_bool(self) -> Option<bool> {
        match self {
            Arg::Json(v) => v.as_bool(),
            Arg::Text(_) => None,
        }
    }
}

impl<'a> Arguments<'a> {
    /// The arguments as given: a JSON object's members.
    pub fn new(map: &'a Map<String, Value>) -> Arguments<'a> {
        Arguments { map, part: None }
    }

    /// The same arguments with `param` read as `text`: one part of a `shell` argument, normalized (spec §3a).
    #[must_use]
    pub fn with_part(self, param: &'a str, text: &'a str) -> Arguments<'a> {
        Arguments { map: self.map, part: Some((param, text)) }
    }

    /// The JSON object underneath, the `shell` argument as given (its whole line).
    pub fn map(&self) -> &'a Map<String, Value> {
        self.map
    }

    fn get(&self, name: &str) -> Option<Arg<'a>> {
        match self.part {
            Some((param, text)) if param == name => Some(Arg::Text(text)),
            _ => self.map.get(name).map(Arg::Json),
        }
    }
}

impl Condition {
    /// Evaluates the condition on a call's arguments (a JSON object's map). Whole numbers must be JSON
    /// integers, strings JSON strings, booleans JSON booleans; a decimal ([`Literal::Number`]) is compared
    /// exactly with any JSON number, read as [`Decimal::from_json`] says.
    ///
    /// Errors: [`ConditionError`] when an argument the condition reads is missing or of the wrong type;
    /// the caller decides `never`.
    pub fn eval(&self, args: &Map<String, Value>) -> Result<bool, ConditionError> {
        self.eval_on(Arguments::new(args))
    }

    /// [`Condition::eval`] on [`Arguments`]: a `shell` argument read as one of its parts.
    ///
    /// Errors: as [`Condition::eval`].
    pub fn eval_on(&self, args: Arguments<'_>) -> Result<bool, ConditionError> {
        match self {
            Condition::All(parts) => {
                // Evaluate every part, so a missing argument anywhere fails closed, not only when reached.
                let mut all = true;
                for p in parts {
                    all &= p.eval_on(args)?;
                }
                Ok(all)
            }
            Condition::Any(parts) => {
                let mut any = false;
                for p in parts {
                    any |= p.eval_on(args)?;
                }
                Ok(any)
            }
            Condition::Not(p) => Ok(!p.eval_on(args)?),
            Condition::Compare { param, op, value } => {
                let arg = args.get(param).ok_or_else(|| ConditionError::Missing(param.clone()))?;
                let ordering = match value {
                    Literal::Int(n) => {
                        let a = arg.as_i64().ok_or_else(|| ConditionError::Mistyped {
                            param: param.clone(),
                            expected: "a whole number",
                        })?;
                        a.cmp(n)
                    }
                    Literal::String(s) => {
                        let a = arg
                            .as_str()
                            .ok_or_else(|| ConditionError::Mistyped { param: param.clone(), expected: "a string" })?;
                        a.cmp(s.as_str())
                    }
                    Literal::Bool(b) => {
                        let a = arg.as_bool().ok_or_else(|| ConditionError::Mistyped {
                            param: param.clone(),
                            expected: "true or false",
                        })?;
                        a.cmp(b)
                    }
                    Literal::Number(n) => {
                        let a = arg
                            .as_decimal()
                            .ok_or_else(|| ConditionError::Mistyped { param: param.clone(), expected: "a number" })?;
                        a.cmp(n)
                    }
                };
                Ok(op.holds(ordering))
            }
            Condition::In { param, values } => {
                let arg = args.get(param).ok_or_else(|| ConditionError::Missing(param.clone()))?;
                let a = arg
                    .as_str()
                    .ok_or_else(|| ConditionError::Mistyped { param: param.clone(), expected: "a string" })?;
                Ok(values.iter().any(|v| v == a))
            }
            Condition::Matches { param, glob } => {
                let arg = args.get(param).ok_or_else(|| ConditionError::Missing(param.clone()))?;
                let a = arg
                    .as_str()
                    .ok_or_else(|| ConditionError::Mistyped { param: param.clone(), expected: "a string" })?;
                Ok(glob_matches(glob, a))
            }
        }
    }

    fn fmt_prec(&self, f: &mut fmt::Formatter<'_>, outer: u8) -> fmt::Result {
        // Precedence: or 1, and 2, not 3, comparison 4.
        let (prec, parts, word) = match self {
            Condition::Any(p) => (1, p, " or "),
            Condition::All(p) => (2, p, " and "),
            Condition::Not(inner) => {
                f.write_str("not ")?;
                return inner.fmt_prec(f, 3);
            }
            Condition::Compare { param, op, value } => return write!(f, "{param} {} {value}", op.as_str()),
            Condition::In { param, values } => {
                let vs: Vec<String> = values.iter().map(|v| Literal::String(v.clone()).to_string()).collect();
                return write!(f, "{param} in [{}]", vs.join(", "));
            }
            Condition::Matches { param, glob } => {
                return write!(f, "{param} matches {}", Literal::String(glob.clone()));
            }
        };
        if prec < outer {
            f.write_str("(")?;
        }
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                f.write_str(word)?;
            }
            p.fmt_prec(f, prec + 1)?;
        }
        if prec < outer {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// The canonical text of a condition, as written in sources (`amount <= 10000 and not to matches "*@x"`).
impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_prec(f, 0)
    }
}

/// Whether `text` matches `glob`: `*` is any run of characters (also none), `?` exactly one character,
/// everything else itself. Iterative, linear in practice (one backtrack point), and allocation-free: it walks
/// both strings by byte offsets, a character at a time (two characters are equal exactly when their UTF-8
/// bytes are).
pub fn glob_matches(glob: &str, text: &str) -> bool {
    let (g, t) = (glob.as_bytes(), text.as_bytes());
    let (mut gi, mut ti) = (0, 0);
    // The last `*` seen, and the offset in `text` it has absorbed up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let t_len = char_len(t, ti);
        match g.get(gi) {
            Some(b'?') => {
                gi += 1;
                ti += t_len;
                continue;
            }
            Some(b'*') => {
                star = Some((gi, ti));
                gi += 1;
                continue;
            }
            // ASCII, the usual case: one byte each (a lead byte of `text` equal to `b` is ASCII too).
            Some(&b) if b < 0x80 && t.get(ti) == Some(&b) => {
                gi += 1;
                ti += 1;
                continue;
            }
            Some(&b) if b < 0x80 => {}
            Some(_) => {
                let g_len = char_len(g, gi);
                if g.get(gi..gi + g_len) == t.get(ti..ti + t_len) {
                    gi += g_len;
                    ti += t_len;
                    continue;
                }
            }
            None => {}
        }
        match star {
            Some((sg, st)) => {
                let st = st + char_len(t, st);
                gi = sg + 1;
                ti = st;
                star = Some((sg, st));
            }
            None => return false,
        }
    }
    while g.get(gi) == Some(&b'*') {
        gi += 1;
    }
    gi == g.len()
}

/// The length in bytes of the UTF-8 character that begins at `at` (1 past the end, so a loop stops).
fn char_len(bytes: &[u8], at: usize) -> usize {
    match bytes.get(at) {
        Some(b) if *b < 0x80 => 1,
        Some(b) if *b >= 0xF0 => 4,
        Some(b) if *b >= 0xE0 => 3,
        Some(_) => 2,
        None => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    /// The first implementation, over `Vec<char>`s: the reference the allocation-free one is held to.
    fn reference(glob: &str, text: &str) -> bool {
        let g: Vec<char> = glob.chars().collect();
        let t: Vec<char> = text.chars().collect();
        let (mut gi, mut ti) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            if gi < g.len() && (g[gi] == '?' || (g[gi] != '*' && g[gi] == t[ti])) {
                gi += 1;
                ti += 1;
            } else if gi < g.len() && g[gi] == '*' {
                star = Some((gi, ti));
                gi += 1;
            } else if let Some((sg, st)) = star {
                gi = sg + 1;
                ti = st + 1;
                star = Some((sg, st + 1));
            } else {
                return false;
            }
        }
        while gi < g.len() && g[gi] == '*' {
            gi += 1;
        }
        gi == g.len()
    }

    /// Every glob and text of up to four characters over an alphabet of `*`, `?`, ASCII and 2-, 3- and
    /// 4-byte characters: the same answer as the reference.
    #[test]
    fn glob_matches_agrees_with_the_reference() {
        let alphabet = ['*', '?', 'a', 'b', 'é', '日', '𝄞'];
        let strings = |max: usize| {
            let mut out = vec![String::new()];
            let mut frontier = vec![String::new()];
            for _ in 0..max {
                let mut next = Vec::new();
                for s in &frontier {
                    for c in alphabet {
                        let mut t = s.clone();
                        t.push(c);
                        next.push(t);
                    }
                }
                out.extend(next.iter().cloned());
                frontier = next;
            }
            out
        };
        let globs = strings(4);
        let texts: Vec<String> = strings(4).into_iter().filter(|t| !t.contains(['*', '?'])).collect();
        let mut checked = 0;
        for g in &globs {
            for t in &texts {
                assert_eq!(glob_matches(g, t), reference(g, t), "{g:?} {t:?}");
                checked += 1;
            }
        }
        assert!(checked > 1_000_000, "{checked}");
    }
}
