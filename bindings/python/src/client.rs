//! What `permits.Client` (python/permits/client.py, plain Python over the standard library's HTTP) needs
//! from Rust: its request bodies checked with the runtime's own conversions (`_encode`: the same
//! `permits.InputError` for NaN, bytes, huge integers, deep nesting as `permits.Runtime` raises, before
//! anything is sent), and the service's answers read into the runtime's own records (`_decode`), so the
//! client returns the same typed objects as the embedded runtime (`Proposal`, `Decision`, …).

use permits_runtime as rt;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::convert::{EvidenceList, Json, Text, json_from_py, json_to_py};
use crate::results::{AuditEvent, BudgetStatus, Claimed, Decision, Lease, OfferedTool, Proposal, StandingRule, Task};

/// The most bytes a request body may have: the service's limit (a larger one is refused with 413).
pub const MAX_BODY: usize = 256 * 1024;
/// How deep a request body may nest, the outermost object counting as 1: the service's limit.
pub const MAX_BODY_DEPTH: usize = 32;

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The body of a request as JSON bytes: a value the runtime's conversions accept, nested at most
/// [`MAX_BODY_DEPTH`] deep and at most [`MAX_BODY`] bytes long, as the service takes it
/// (`permits.InputError` otherwise, with the path of the first bad part).
#[pyfunction]
pub fn _encode<'py>(py: Python<'py>, body: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let body = json_from_py(body, "the request")?;
    let nested = depth(&body);
    if nested > MAX_BODY_DEPTH {
        return Err(crate::convert::input_error(
            py,
            format!(
                "the request nests {nested} deep, more than the service's {MAX_BODY_DEPTH} (its arguments at most {}): nothing was sent",
                MAX_BODY_DEPTH - 1
            ),
        ));
    }
    let bytes = serde_json::to_vec(&body)
        .map_err(|e| crate::convert::input_error(py, format!("the request does not serialize: {e}")))?;
    if bytes.len() > MAX_BODY {
        return Err(crate::convert::input_error(
            py,
            format!("the request is {} bytes, more than the service's {MAX_BODY}: nothing was sent", bytes.len()),
        ));
    }
    Ok(PyBytes::new(py, &bytes))
}

/// Evidence as the service takes it: a list of `{"tool", "arguments", "answer"}` dicts, from what
/// `Runtime.propose` takes (`permits.Evidence` objects or such dicts).
#[pyfunction]
pub fn _evidence<'py>(py: Python<'py>, evidence: EvidenceList) -> PyResult<Bound<'py, PyAny>> {
    let items: Vec<Value> = evidence
        .0
        .iter()
        .map(|e| serde_json::json!({"tool": e.tool, "arguments": e.arguments, "answer": e.answer}))
        .collect();
    json_to_py(py, &Value::Array(items))
}

fn read<T: DeserializeOwned>(kind: &str, value: Value) -> PyResult<T> {
    serde_json::from_value(value)
        .map_err(|e| PyValueError::new_err(format!("the service's answer is not a {kind} this client reads: {e}")))
}

/// One record of the service's answer as the typed object the embedded runtime returns: `kind` is
/// `proposal`, `decision`, `claimed`, `rule`, `budget`, `task`, `lease`, `offered_tool` or `audit_event`. A
/// `ValueError` when it does not fit (a service of another version).
#[pyfunction]
pub fn _decode(py: Python<'_>, kind: Text, value: Json) -> PyResult<Py<PyAny>> {
    let value = value.0;
    Ok(match kind.0.as_str() {
        "proposal" => Py::new(py, Proposal(read::<rt::Proposal>("proposal", value)?))?.into_any(),
        "decision" => Py::new(py, Decision(read::<rt::Decision>("decision", value)?))?.into_any(),
        "claimed" => Py::new(py, Claimed(read::<rt::Claimed>("execution", value)?))?.into_any(),
        "rule" => Py::new(py, StandingRule(read::<rt::StandingRule>("standing rule", value)?))?.into_any(),
        "budget" => Py::new(py, BudgetStatus(read::<rt::BudgetStatus>("budget", value)?))?.into_any(),
        "task" => Py::new(py, Task(read::<rt::Task>("task", value)?))?.into_any(),
        "lease" => Py::new(py, Lease(read::<rt::Lease>("lease", value)?))?.into_any(),
        "offered_tool" => Py::new(py, OfferedTool(read::<rt::OfferedTool>("tool", value)?))?.into_any(),
        "audit_event" => Py::new(py, AuditEvent(read::<rt::AuditEvent>("audit event", value)?))?.into_any(),
        other => return Err(PyValueError::new_err(format!("no record kind `{other}`"))),
    })
}
