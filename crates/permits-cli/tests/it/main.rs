//! `permitc`'s tests, one binary: each runs the real binary (or the compiled policies through the whole
//! product: CLI, compiler and runtime together).

mod adversarial;
#[cfg(feature = "postgres")]
mod audit_postgres;
mod bad_input;
mod cases_levels;
mod ci_hook;
mod cli;
#[path = "../../../permits-compiler/tests/it/common/mod.rs"]
mod common;
mod conditions;
mod deep;
mod delegation;
mod diff;
mod evaluator;
mod fixtures;
mod holes;
mod laws;
mod modes;
mod per_task;
mod sarif;
mod shell;
mod shop_spending;
mod supplier;
mod support;
mod unknown_names;

#[path = "../../../permits-runtime/tests/fixtures/registry.rs"]
mod registry;
#[path = "../../../../examples/supplier/client.rs"]
mod supplier_client;

/// The repository's root: `policies/`, `examples/` and the README are there.
fn root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}
