//! The vocabulary shared by the sources and the table: levels, effect classes, layers, parameter types,
//! routes and holders, comparison operators and literals (spec §2, §3). Each keyword is spelled once here.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Decimal;

/// A level, from least to most strict (spec §3). `Ord` follows strictness, so `max` is "strictest wins".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// The agent may run the call on its own.
    Alone,
    /// The agent must propose the exact call to a person first; a standing rule may make it alone.
    Propose,
    /// Like `propose`, and no standing rule can ever make it alone.
    ProposeEveryTime,
    /// The call is not made, whatever anyone approves.
    Never,
}

impl Level {
    /// Every level, least strict first.
    pub const ALL: [Level; 4] = [Level::Alone, Level::Propose, Level::ProposeEveryTime, Level::Never];

    /// The keyword as written in sources and in the table: `alone`, `propose`, `propose_every_time`, `never`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Alone => "alone",
            Level::Propose => "propose",
            Level::ProposeEveryTime => "propose_every_time",
            Level::Never => "never",
        }
    }

    /// Parses a level keyword; `None` for anything else.
    pub fn from_keyword(word: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == word)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A class of effect (spec §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectClass {
    /// Looks something up. Always `alone` by class.
    Reads,
    /// Writes, creates or deletes data.
    Changes,
    /// Sends a message.
    Sends,
    /// Spends money from a budget.
    Spends,
    /// Reaches a host outside.
    ReachesOut,
}

impl EffectClass {
    /// Every class, in the order of spec §2.
    pub const ALL: [EffectClass; 5] =
        [EffectClass::Reads, EffectClass::Changes, EffectClass::Sends, EffectClass::Spends, EffectClass::ReachesOut];

    /// The keyword: `reads`, `changes`, `sends`, `spends`, `reaches_out`.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::Reads => "reads",
            EffectClass::Changes => "changes",
            EffectClass::Sends => "sends",
            EffectClass::Spends => "spends",
            EffectClass::ReachesOut => "reaches_out",
        }
    }

    /// Parses a class keyword; `None` for anything else.
    pub fn from_keyword(word: &str) -> Option<EffectClass> {
        EffectClass::ALL.into_iter().find(|c| c.as_str() == word)
    }
}

impl fmt::Display for EffectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The type of a parameter (spec §2).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    /// A string.
    String,
    /// A signed 64-bit integer.
    Int,
    /// `true` or `false`.
    Bool,
    /// An integer amount in a budget's minor unit (cents); never a float.
    Money,
    /// A shell command line (spec §3a): a string in arguments, never compared as one string but read with
    /// [`crate::shell::split`] and judged part by part. At most one per tool. Serialized `"shell"`.
    Shell,
    /// A JSON number, integer or fraction (spec §2); never money. Serialized `"number"`.
    Number,
    /// Any JSON value (spec §2); no condition may read it. Serialized `"json"`.
    Json,
    /// An id of the named entity, which the host resolves; a string in arguments.
    Entity(String),
}

/// A role or a person named in an authority statement or a queue.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
    /// Everyone who holds the role.
    Role(String),
    /// One person.
    Person(String),
}

/// Who decides a proposal (spec §3 "Routes").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// The person the work is for, or the agent's sponsor when it is for nobody (the default).
    Requester,
    /// One person.
    Person(String),
    /// Any holder of the role.
    Role(String),
    /// Any member of the queue.
    Queue(String),
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Requester => f.write_str("requester"),
            Route::Person(p) => write!(f, "person {p}"),
            Route::Role(r) => write!(f, "role {r}"),
            Route::Queue(q) => write!(f, "queue {q}"),
        }
    }
}

/// The layers that speak for a triple (spec §3, §3c).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The package-wide `may`.
    Package,
    /// The agent's `may` (always present).
    Agent,
    /// The skill's `may`.
    Skill,
    /// The `may` of the mode the call is made in (spec §3c): it only tightens.
    Mode,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Package => "package",
            Layer::Agent => "agent",
            Layer::Skill => "skill",
            Layer::Mode => "mode",
        })
    }
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareOp {
    /// `<`
    #[serde(rename = "<")]
    Lt,
    /// `<=`
    #[serde(rename = "<=")]
    Le,
    /// `==`
    #[serde(rename = "==")]
    Eq,
    /// `!=`
    #[serde(rename = "!=")]
    Ne,
    /// `>=`
    #[serde(rename = ">=")]
    Ge,
    /// `>`
    #[serde(rename = ">")]
    Gt,
}

impl CompareOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Ge => ">=",
            CompareOp::Gt => ">",
        }
    }

    /// Parses an operator; `None` for anything else.
    pub fn from_str_op(op: &str) -> Option<CompareOp> {
        [CompareOp::Lt, CompareOp::Le, CompareOp::Eq, CompareOp::Ne, CompareOp::Ge, CompareOp::Gt]
            .into_iter()
            .find(|o| o.as_str() == op)
    }

    pub(crate) fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CompareOp::Lt => ordering == Less,
            CompareOp::Le => ordering != Greater,
            CompareOp::Eq => ordering == Equal,
            CompareOp::Ne => ordering != Equal,
            CompareOp::Ge => ordering != Less,
            CompareOp::Gt => ordering == Greater,
        }
    }
}

/// A value in a condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Literal {
    /// A whole number (for `int` and `money` parameters; money in minor units).
    Int(i64),
    /// A string (for `string` and entity parameters).
    String(String),
    /// `true` or `false`.
    Bool(bool),
    /// An exact decimal (for `number` parameters, spec §2): `{"number": "2.75"}` in the table. Added after
    /// format 1 was first published, as a new variant only: a table without a `number` condition serializes
    /// (and hashes) exactly as before, and a runtime that predates it refuses a table that has one as
    /// malformed (closed), never misreads it.
    Number(Decimal),
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Int(n) => write!(f, "{n}"),
            Literal::String(s) => write!(f, "{}", serde_json::Value::String(s.clone())),
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::Number(n) => write!(f, "{n}"),
        }
    }
}
