//! Every conversion between Python and Rust, in one place: arguments in (typed newtypes that raise
//! `permits.InputError` for anything else), JSON values both ways, and the runtime's errors out as the
//! `permits` exception hierarchy (`python/permits/_errors.py`).
//!
//! Nothing here trusts its input: a value that is not JSON, an integer beyond 64 bits, a float that is not
//! finite, bytes where text is expected, a dict key that is not a str, or a value nested deeper than
//! [`MAX_DEPTH`] is an `InputError` raised before the runtime is asked, so nothing is stored.

use std::path::PathBuf;

use permits_runtime::table::{LoadError, ParamType};
use permits_runtime::{ApproveMode, Evidence, RuntimeError, TableRefusal, WorkFor};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyModule, PyString, PyTuple, PyType};
use serde_json::{Map, Number, Value};

use crate::results::{Everybody, Evidence as PyEvidence, Lease as PyLease};

/// The deepest a JSON value from Python may nest (a dict in a list in a dict … counts one per level). The
/// limit is the binding's: the runtime's records stay small, and a cycle (`d["d"] = d`) ends here.
pub const MAX_DEPTH: usize = 64;

/// The `permits` exception classes, defined in Python (`permits._errors`).
#[derive(Clone, Copy, Debug)]
pub enum Exc {
    /// `permits.Error`: the base, and an internal failure (a panic, which should never happen).
    Error,
    /// `permits.Refused(kind, message)`.
    Refused,
    /// `permits.StoreError(message)`.
    Store,
    /// `permits.TableError(kind, message)`.
    Table,
    /// `permits.NotFound(kind, id, message)`.
    NotFound,
    /// `permits.InputError(message)`.
    Input,
    /// `permits.ToolError(message, result)`.
    Tool,
}

impl Exc {
    fn name(self) -> &'static str {
        match self {
            Exc::Error => "Error",
            Exc::Refused => "Refused",
            Exc::Store => "StoreError",
            Exc::Table => "TableError",
            Exc::NotFound => "NotFound",
            Exc::Input => "InputError",
            Exc::Tool => "ToolError",
        }
    }
}

/// An exception of class `exc` with these constructor arguments. If `permits._errors` cannot be imported
/// (a broken installation), the import's own error is raised instead.
pub fn error<A>(py: Python<'_>, exc: Exc, args: A) -> PyErr
where
    A: for<'py> IntoPyObject<'py> + Send + Sync + 'static,
{
    static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let class = ERRORS
        .get_or_try_init(py, || py.import("permits._errors").map(Bound::unbind))
        .and_then(|m| m.bind(py).getattr(exc.name()))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match class {
        Ok(class) => PyErr::from_type(class, args),
        Err(e) => e,
    }
}

/// `permits.InputError(message)`.
pub fn input_error(py: Python<'_>, message: impl Into<String>) -> PyErr {
    error(py, Exc::Input, (message.into(),))
}

/// `permits.Refused(kind, message)`.
pub fn refused(py: Python<'_>, kind: &str, message: impl Into<String>) -> PyErr {
    error(py, Exc::Refused, (kind.to_string(), message.into()))
}

/// The runtime's error as its `permits` exception: a refusal with its kind, an unknown id, a store failure.
pub fn runtime_error(py: Python<'_>, e: RuntimeError) -> PyErr {
    let message = e.to_string();
    match e {
        RuntimeError::Refused { refusal, .. } => refused(py, &refusal.code(), message),
        RuntimeError::UnknownProposal(id) => error(py, Exc::NotFound, ("proposal", id, message)),
        RuntimeError::UnknownRule(id) => error(py, Exc::NotFound, ("rule", id, message)),
        RuntimeError::UnknownTask(key) => error(py, Exc::NotFound, ("task", key, message)),
        RuntimeError::UnknownBudget(id) => error(py, Exc::NotFound, ("budget", id, message)),
        RuntimeError::UnknownExecution(id) => error(py, Exc::NotFound, ("execution", id, message)),
        RuntimeError::Table(refusal) => error(py, Exc::Table, (table_refusal_kind(&refusal), message)),
        RuntimeError::Store(_) => error(py, Exc::Store, (message,)),
    }
}

/// The kind of a table the runtime did not install (or that is not the store's current one).
pub fn table_refusal_kind(refusal: &TableRefusal) -> &'static str {
    match refusal {
        TableRefusal::Unsigned { .. } => "unsigned",
        TableRefusal::OtherTable { .. } => "other_table",
        TableRefusal::UntrustedKey { .. } => "untrusted_key",
        TableRefusal::BadSignature { .. } => "bad_signature",
        TableRefusal::Rollback { .. } => "rollback",
        TableRefusal::NotCurrent { .. } => "not_current",
        TableRefusal::NotSupervisor { .. } => "not_supervisor",
    }
}

/// A table that did not load, as `permits.TableError(kind, message)`.
pub fn table_error(py: Python<'_>, e: &LoadError) -> PyErr {
    let kind = match e {
        LoadError::Io { .. } => "io",
        LoadError::Malformed(_) => "malformed",
        LoadError::UnknownFormat { .. } => "unknown_format",
        LoadError::DigestMismatch { .. } => "digest_mismatch",
    };
    error(py, Exc::Table, (kind, e.to_string()))
}

/// A Rust panic caught at the boundary, as `permits.Error`: it never reaches Python as a panic.
pub fn internal_error(py: Python<'_>, payload: &(dyn std::any::Any + Send)) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string());
    error(py, Exc::Error, (format!("internal error in the permits runtime (a bug; please report it): {what}"),))
}

/// What an object is, for a message: its type's name (`bytes`, `NoneType`).
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".to_string())
}

/// "not `bytes`: decode it first" and the like.
fn not_this(obj: &Bound<'_, PyAny>) -> String {
    if obj.cast::<PyBytes>().is_ok() || obj.cast::<PyByteArray>().is_ok() {
        return format!("not `{}`: decode the bytes to a str first", type_name(obj));
    }
    format!("not `{}`", type_name(obj))
}

// ---------------------------------------------------------------------------------------------------------
// JSON values.

/// A Python value as JSON: `None`, `bool`, `int` (64 bits), finite `float`, `str`, `list` and `tuple`, and
/// `dict` with `str` keys, nested at most [`MAX_DEPTH`] deep.
///
/// Errors: `InputError` naming what is wrong and where (`arguments["a"][2]`).
pub fn json_from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    value_from_py(obj, 0).map_err(|bad| {
        // A path through a deep value is cut to its first steps.
        let steps = bad.path.len();
        let mut path: String = bad.path.iter().rev().take(8).map(String::as_str).collect();
        if steps > 8 {
            path.push_str(&format!("…({} more)", steps - 8));
        }
        input_error(obj.py(), format!("{what}{path} {}", bad.why))
    })
}

/// Why a value is not JSON, and where: the path's segments innermost first (built only on the way out, so
/// a good value pays nothing for it).
struct Bad {
    path: Vec<String>,
    why: String,
}

impl Bad {
    fn new(why: String) -> Bad {
        Bad { path: Vec::new(), why }
    }

    fn at(mut self, segment: String) -> Bad {
        self.path.push(segment);
        self
    }
}

fn value_from_py(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, Bad> {
    if let Ok(s) = obj.cast::<PyString>() {
        return s.to_str().map(|s| Value::String(s.to_owned())).map_err(|_| Bad::new(LONE_SURROGATE.into()));
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(n) = i.extract::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        if let Ok(n) = i.extract::<u64>() {
            return Ok(Value::Number(n.into()));
        }
        return Err(Bad::new("is an integer out of range: permits takes integers of 64 bits".into()));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| Bad::new(format!("is {}: not a JSON number", f.value())));
    }
    if depth >= MAX_DEPTH {
        return Err(Bad::new(format!("nests deeper than {MAX_DEPTH} levels: permits takes at most {MAX_DEPTH}")));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(Bad::new(format!("has the key {}: keys must be str", repr_of(&k))));
            };
            let Ok(key) = key.to_str() else { return Err(Bad::new(format!("has a key that {LONE_SURROGATE}"))) };
            let value = value_from_py(&v, depth + 1).map_err(|bad| bad.at(format!("[{key:?}]")))?;
            map.insert(key.to_owned(), value);
        }
        return Ok(Value::Object(map));
    }
    let items = if let Ok(l) = obj.cast::<PyList>() {
        Some(l.iter().collect::<Vec<_>>())
    } else {
        obj.cast::<PyTuple>().ok().map(|t| t.iter().collect::<Vec<_>>())
    };
    if let Some(items) = items {
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            out.push(value_from_py(item, depth + 1).map_err(|bad| bad.at(format!("[{i}]")))?);
        }
        return Ok(Value::Array(out));
    }
    Err(Bad::new(format!("is {}: permits takes JSON values (None, bool, int, float, str, list, dict)", not_this(obj))))
}

const LONE_SURROGATE: &str = "is a str that is not valid Unicode (a lone surrogate)";

fn text_of(s: &Bound<'_, PyString>, what: &str) -> PyResult<String> {
    s.to_str().map(str::to_owned).map_err(|_| input_error(s.py(), format!("{what} {LONE_SURROGATE}")))
}

fn repr_of(obj: &Bound<'_, PyAny>) -> String {
    obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| type_name(obj))
}

/// A JSON value as Python: objects as `dict`, arrays as `list`, numbers as `int` or `float`.
pub fn json_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// A record as a Python `dict` (its serde form): `to_dict()` of the result classes.
pub fn dict_of<'py>(py: Python<'py>, record: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(record)
        .map_err(|e| error(py, Exc::Error, (format!("internal error: a record did not serialize: {e}"),)))?;
    json_to_py(py, &value)
}

// ---------------------------------------------------------------------------------------------------------
// Arguments: one newtype per kind of parameter, each raising `InputError` for anything else.

/// A `str` (bytes and everything else refused).
#[derive(Clone, Debug)]
pub struct Text(pub String);

impl<'py> FromPyObject<'_, 'py> for Text {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Text> {
        match obj.cast::<PyString>() {
            Ok(s) => text_of(&s, "the str").map(Text),
            Err(_) => Err(input_error(obj.py(), format!("expected a str, {}", not_this(&obj)))),
        }
    }
}

/// The arguments of a call: a `dict` of JSON values with `str` keys.
#[derive(Clone, Debug)]
pub struct Arguments(pub Value);

impl<'py> FromPyObject<'_, 'py> for Arguments {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Arguments> {
        if obj.cast::<PyDict>().is_err() {
            return Err(input_error(
                obj.py(),
                format!("the arguments must be a dict of the tool's parameters, {}", not_this(&obj)),
            ));
        }
        json_from_py(&obj, "arguments").map(Arguments)
    }
}

/// Any JSON value (a receipt).
#[derive(Clone, Debug)]
pub struct Json(pub Value);

impl<'py> FromPyObject<'_, 'py> for Json {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Json> {
        json_from_py(&obj, "the value").map(Json)
    }
}

/// Whole seconds: an `int` (not a `bool`) from 0 to 2⁶³−1 (what the SQLite ledger can store).
#[derive(Clone, Copy, Debug)]
pub struct Seconds(pub u64);

impl<'py> FromPyObject<'_, 'py> for Seconds {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Seconds> {
        seconds(&obj)
    }
}

/// [`Seconds`] from any object (the clock's answer).
pub fn seconds(obj: &Bound<'_, PyAny>) -> PyResult<Seconds> {
    let py = obj.py();
    if obj.cast::<PyBool>().is_err() {
        if let Ok(i) = obj.cast::<PyInt>() {
            return match i.extract::<i64>() {
                Ok(n) if n >= 0 => Ok(Seconds(n.unsigned_abs())),
                _ => Err(input_error(py, format!("{} is not a number of seconds from 0 to 2**63-1", repr_of(obj)))),
            };
        }
    }
    Err(input_error(py, format!("expected whole seconds (an int), {}", not_this(obj))))
}

/// `"once"`, `"always_like_this"`, `"always_these_arguments"`, `"for_this_task"` or
/// `"for_this_task_any_arguments"` (a task rule, spec §5a): how a person approves.
#[derive(Clone, Copy, Debug)]
pub struct Mode(pub ApproveMode);

impl<'py> FromPyObject<'_, 'py> for Mode {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Mode> {
        let Text(word) = obj.extract()?;
        match word.as_str() {
            "once" => Ok(Mode(ApproveMode::Once)),
            "always_like_this" => Ok(Mode(ApproveMode::AlwaysLikeThis)),
            "always_these_arguments" => Ok(Mode(ApproveMode::AlwaysTheseArguments)),
            "for_this_task" => Ok(Mode(ApproveMode::ForThisTask { any_arguments: false })),
            "for_this_task_any_arguments" => Ok(Mode(ApproveMode::ForThisTask { any_arguments: true })),
            other => Err(input_error(
                obj.py(),
                format!(
                    "the mode is `once`, `always_like_this`, `always_these_arguments`, `for_this_task` or `for_this_task_any_arguments`, not `{other}`"
                ),
            )),
        }
    }
}

/// A lease to present (spec §5a "Leases"): a `permits.Lease`, as `take_task` answered it (or `None`, as
/// the keyword's default: no lease).
#[derive(Clone, Debug)]
pub struct LeaseArg(pub permits_runtime::Lease);

impl<'py> FromPyObject<'_, 'py> for LeaseArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<LeaseArg> {
        match obj.cast::<PyLease>() {
            Ok(lease) => Ok(LeaseArg(lease.get().0.clone())),
            Err(_) => Err(input_error(
                obj.py(),
                format!("lease is a permits.Lease (what take_task answered), {}", not_this(&obj)),
            )),
        }
    }
}

/// For whose work a standing rule applies: a person's name, `permits.EVERYBODY`, or `None` (work done for
/// nobody: calls with no requester).
#[derive(Clone, Debug)]
pub struct WorkForArg(pub WorkFor);

impl<'py> FromPyObject<'_, 'py> for WorkForArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<WorkForArg> {
        if obj.cast::<Everybody>().is_ok() {
            return Ok(WorkForArg(WorkFor::Everybody));
        }
        if obj.is_none() {
            return Ok(WorkForArg(WorkFor::Nobody));
        }
        match obj.cast::<PyString>() {
            Ok(s) => text_of(&s, "work_for").map(|p| WorkForArg(WorkFor::Person(p))),
            Err(_) => Err(input_error(
                obj.py(),
                format!("work_for is a person's name, permits.EVERYBODY or None (nobody's work), {}", not_this(&obj)),
            )),
        }
    }
}

/// The evidence of a proposal: a list (or tuple) of `permits.Evidence`, or of dicts with exactly `tool`
/// (str), `arguments` (dict) and `answer` (any JSON).
#[derive(Clone, Debug)]
pub struct EvidenceList(pub Vec<Evidence>);

impl<'py> FromPyObject<'_, 'py> for EvidenceList {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<EvidenceList> {
        let py = obj.py();
        let items: Vec<Bound<'py, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = obj.cast::<PyTuple>() {
            t.iter().collect()
        } else {
            return Err(input_error(py, format!("evidence is a list of permits.Evidence, {}", not_this(&obj))));
        };
        let mut out = Vec::with_capacity(items.len());
        for item in &items {
            if let Ok(e) = item.cast::<PyEvidence>() {
                out.push(e.get().0.clone());
                continue;
            }
            let Ok(d) = item.cast::<PyDict>() else {
                return Err(input_error(
                    py,
                    format!("each evidence is a permits.Evidence or a dict, {}", not_this(item)),
                ));
            };
            let value = json_from_py(d, "evidence")?;
            let e: Evidence = serde_json::from_value(value).map_err(|e| {
                input_error(py, format!("evidence is {{\"tool\": str, \"arguments\": dict, \"answer\": any}}: {e}"))
            })?;
            if !e.arguments.is_object() {
                return Err(input_error(py, "the arguments of an evidence must be a dict"));
            }
            out.push(e);
        }
        Ok(EvidenceList(out))
    }
}

/// A delegation chain (spec §3b): a list (or tuple) of `"Agent.Skill"` strs, nearest first, root last, as
/// `permitc decide --via` takes them. Anything else — a str alone, a link that is not two names joined by
/// one `.` — is an `InputError`; an undeclared link is the runtime's (`never`).
#[derive(Clone, Debug, Default)]
pub struct Chain(pub Vec<permits_runtime::table::ChainLink>);

impl<'py> FromPyObject<'_, 'py> for Chain {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Chain> {
        let py = obj.py();
        let items: Vec<Bound<'py, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = obj.cast::<PyTuple>() {
            t.iter().collect()
        } else {
            return Err(input_error(
                py,
                format!("via is a list of \"Agent.Skill\" strs, nearest first, {}", not_this(&obj)),
            ));
        };
        let mut out = Vec::with_capacity(items.len());
        for item in &items {
            let Text(text) = item.extract()?;
            let Some(link) = permits_runtime::table::ChainLink::parse(&text) else {
                return Err(input_error(
                    py,
                    format!("each link of via is \"Agent.Skill\" (two names joined by one `.`), not `{text}`"),
                ));
            };
            out.push(link);
        }
        Ok(Chain(out))
    }
}

/// A file path: a `str` or an `os.PathLike` whose `__fspath__` is a `str` (bytes paths are refused).
#[derive(Clone, Debug)]
pub struct PathArg(pub PathBuf);

impl<'py> FromPyObject<'_, 'py> for PathArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<PathArg> {
        let py = obj.py();
        let fspath = if obj.cast::<PyString>().is_ok() {
            obj.to_owned()
        } else if obj.hasattr("__fspath__")? {
            obj.call_method0("__fspath__")?
        } else {
            return Err(input_error(py, format!("expected a path (str or os.PathLike), {}", not_this(&obj))));
        };
        match fspath.cast::<PyString>() {
            Ok(s) => text_of(s, "the path").map(|p| PathArg(PathBuf::from(p))),
            Err(_) => Err(input_error(py, format!("expected a str path, {}", not_this(&fspath)))),
        }
    }
}

/// A Python callable (a host callback, or the tool to run).
#[derive(Debug)]
pub struct Callable(pub Py<PyAny>);

impl<'py> FromPyObject<'_, 'py> for Callable {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Callable> {
        if obj.is_callable() {
            Ok(Callable(obj.to_owned().unbind()))
        } else {
            Err(input_error(obj.py(), format!("expected a callable, {}", not_this(&obj))))
        }
    }
}

/// A parameter's type as the policy spells it: `string`, `int`, `bool`, `money`, `shell`, `number`, `json`, or
/// the entity's name.
pub fn type_word(ty: &ParamType) -> &str {
    match ty {
        ParamType::String => "string",
        ParamType::Int => "int",
        ParamType::Bool => "bool",
        ParamType::Money => "money",
        ParamType::Shell => "shell",
        ParamType::Number => "number",
        ParamType::Json => "json",
        ParamType::Entity(e) => e,
    }
}

/// A `PyRuntimeError` without the GIL (for the rare case the interpreter cannot be attached).
pub fn detached_error(message: &str) -> PyErr {
    PyRuntimeError::new_err(message.to_string())
}
