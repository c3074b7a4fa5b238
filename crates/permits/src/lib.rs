//! # permits
//!
//! A language and compiler for what AI agents may do **alone**, what they must **propose** to a person
//! first, what they must propose **every time**, and what they **never** do; and the small runtime that
//! agents embed to apply the compiled decision table. This crate is the facade hosts depend on: it
//! re-exports the workspace's crates under stable paths.
//!
//! | path | crate | what |
//! |---|---|---|
//! | [`table`] | `permits-table` | the decision table: format, canonical JSON, digests, the one evaluator (§4) |
//! | [`runtime`] | `permits-runtime` | decisions, proposals, approvals, routes, standing rules, budgets (§5, §6) |
//! | [`compiler`] and its modules ([`compile`], [`syntax`], …) | `permits-compiler` | sources → table (feature `compiler`) |
//!
//! With `default-features = false` only [`table`] and [`runtime`] are built: they need serde, serde_json,
//! sha2 and thiserror, and no parser. Section numbers (§) refer to the language reference,
//! `docs/language.md`.

pub use permits_runtime as runtime;
pub use permits_table as table;

/// The compiler (feature `compiler`): `permits-compiler`, whose modules are also re-exported here.
#[cfg(feature = "compiler")]
pub use permits_compiler as compiler;
#[cfg(feature = "compiler")]
pub use permits_compiler::{
    check, compile, conditions, diagnostics, diff, effects, explain, fmt, graph, model, syntax,
};

/// The architecture: crates, modules and their invariants (the repository's `ARCHITECTURE.md`).
#[doc = include_str!("../../../ARCHITECTURE.md")]
pub mod architecture {}
