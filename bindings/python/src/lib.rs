//! The permits runtime as a Python module, `permits._permits`, re-exported by the `permits` package
//! (`python/permits/`). One Rust function per runtime operation; every conversion in `convert`.
//!
//! | module | what |
//! |---|---|
//! | `client` | what `permits.Client` needs from Rust: bodies checked as the runtime checks input, answers read into its records |
//! | `convert` | Python ↔ JSON, typed arguments (`permits.InputError` for anything else), errors → exceptions |
//! | `host` | the host's callbacks, the per-operation scope (clock, failures, re-entry), the vetoing store |
//! | `results` | the typed objects Python sees (`Decision`, `Proposal`, `Ran`, …) |
//! | `table` | `permits.Table`: a verified table and its level index, owned together |
//! | `runtime` | `permits.Runtime`: the operations, each with the GIL released |
//!
//! Guarantees (ARCHITECTURE.md, "The Python binding"): the runtime object is `Sync` and shared between
//! threads; the GIL is released for every operation that touches the store and re-acquired only to call
//! a Python callback; a callback that raises or answers with the wrong type rolls back the transaction it
//! was called in and raises `permits.Refused(kind="callback")`, never an allow; a callback that calls back
//! into the runtime is refused (`kind="reentry"`); a Rust panic is caught and raised as `permits.Error`.

mod client;
mod convert;
mod host;
mod results;
mod runtime;
mod table;

use pyo3::prelude::*;

/// The native module: every class the `permits` package re-exports.
#[pymodule]
fn _permits(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<table::PyTable>()?;
    m.add_class::<runtime::PyRuntime>()?;
    m.add_class::<results::AdmitAll>()?;
    m.add_class::<results::AuditEvent>()?;
    m.add_class::<results::BudgetStatus>()?;
    m.add_class::<results::Claimed>()?;
    m.add_class::<results::Decider>()?;
    m.add_class::<results::Decision>()?;
    m.add_class::<results::Everybody>()?;
    m.add_class::<results::Evidence>()?;
    m.add_class::<results::Execution>()?;
    m.add_class::<results::Failed>()?;
    m.add_class::<results::Grant>()?;
    m.add_class::<results::Lease>()?;
    m.add_class::<results::ManualClock>()?;
    m.add_class::<results::OfferedTool>()?;
    m.add_class::<results::Param>()?;
    m.add_class::<results::Principal>()?;
    m.add_class::<results::Proposal>()?;
    m.add_class::<results::Ran>()?;
    m.add_class::<results::Reason>()?;
    m.add_class::<results::RuleRevocation>()?;
    m.add_class::<results::RunContext>()?;
    m.add_class::<results::StandingRule>()?;
    m.add_class::<results::Task>()?;
    m.add_class::<results::Unknown>()?;
    m.add_class::<results::VersionQuery>()?;
    m.add_function(wrap_pyfunction!(client::_encode, m)?)?;
    m.add_function(wrap_pyfunction!(client::_evidence, m)?)?;
    m.add_function(wrap_pyfunction!(client::_decode, m)?)?;
    m.add("ADMIT_ALL", results::AdmitAll)?;
    m.add("EVERYBODY", results::Everybody)?;
    m.add("MAX_DEPTH", convert::MAX_DEPTH)?;
    Ok(())
}
