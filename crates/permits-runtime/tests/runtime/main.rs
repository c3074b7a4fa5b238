//! The runtime's integration tests, one binary, on tables alone: no parser, no compiler. The scenario tables
//! are fixtures (`tests/fixtures/*.json`, listed in `tests/fixtures/registry.rs`), compiled from
//! `policies/`; permitc's tests keep them current.

/// The example hosts as child processes, for the tests that start them (`fencing`, `races`).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod child;
mod claims;
mod failures;
// The lease host is an SQLite build (`examples/lease_host.rs`); with `postgres` it runs on PostgreSQL too.
#[cfg(feature = "sqlite")]
mod fencing;
mod fuzz_regressions;
mod holes;
mod leases;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod races;
#[path = "../fixtures/registry.rs"]
#[allow(dead_code, reason = "the registry's helpers serve the compiler-side test that writes the fixtures")]
mod registry;
#[cfg(feature = "postgres")]
mod restart;
#[cfg(feature = "postgres")]
mod shop_postgres;
mod skill_grants;
/// The supplier test peer's client, for the tests that send orders to it (`fencing`, `shop_postgres`).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[path = "../../../../examples/supplier/client.rs"]
#[allow(dead_code, reason = "the client serves several includers")]
mod supplier_client;
mod support_triage;
mod workshop;

use permits_runtime::table::Table;

/// The fixture table `name` (see [`registry::FIXTURES`]), loaded and verified as a host loads a table.
fn fixture(name: &str) -> Result<Table, String> {
    if !registry::FIXTURES.iter().any(|f| f.name == name) {
        return Err(format!("no fixture `{name}` in tests/fixtures/registry.rs"));
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(format!("{name}.json"));
    Table::load_path(&path).map_err(|e| e.to_string())
}
