//! Inputs kept from fuzzing (`fuzz/`, see `fuzz/README.md`), each run through the same path as its fuzz
//! target, with its real outcome asserted.
//!
//! No fuzz run has found a crash, a panic or a timeout yet. What is kept here are the inputs of the
//! `table_load` target that reach the runtime with a table that is consistent JSON but inconsistent
//! content: the fuzzer renamed or dropped a skill or a tool, and the target sealed the table again (as a
//! compiler bug, or a writer able to hash, would). The digest then verifies, so `Table::load` accepts the
//! table, and the runtime alone must fail closed on the names that do not resolve.
//!
//! A crashing input found later goes into `tests/fuzz_regressions/` with a test here naming its target
//! and the outcome the fix gives.

use std::path::Path;

use permits_runtime::table::{Level, LoadError, Table};
use permits_runtime::{Call, Decision, decide_table};
use serde_json::{Value, json};

/// The `table_load` target's path: load; a table refused only for its digest is parsed and sealed again;
/// it must then load from its own JSON, unchanged.
fn table_load(name: &str) -> Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runtime/fuzz_regressions").join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let err = Table::load(&bytes).expect_err("a mutated table does not verify as written");
    assert!(matches!(err, LoadError::DigestMismatch { .. }), "{name}: refused only for its digest, not {err}");
    let mut table: Table = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name} parses as a table: {e}"));
    table.seal();
    let again = Table::load(table.to_pretty_json().as_bytes()).unwrap_or_else(|e| panic!("{name}, sealed, loads: {e}"));
    assert_eq!(again, table);
    again
}

fn decide(table: &Table, triple: [&str; 3], arguments: Value) -> Decision {
    decide_table(table, &Call::new(triple[0], triple[1], triple[2]).with_arguments(arguments))
}

fn refused(d: &Decision) -> (Level, Option<&str>) {
    (d.level, d.refusal.as_deref())
}

#[test]
fn an_entry_for_a_tool_the_table_does_not_define_is_never() {
    // A mutated `policies/shop` table: `PlaceOrder` is gone from `tools`, but the skill `Reorder` still
    // lists it and its entry (`propose`, routed to Lucy) is still there.
    let t = table_load("entry_for_unknown_tool.json");
    assert!(!t.tools.contains_key("PlaceOrder"));
    assert_eq!(t.entry("Restocker", "Reorder", "PlaceOrder").and_then(|e| e.level), Some(Level::Propose));
    let order = json!({ "sku": "vanilla", "quantity": 10, "amount": 5000 });
    let d = decide(&t, ["Restocker", "Reorder", "PlaceOrder"], order);
    assert_eq!(refused(&d), (Level::Never, Some("unknown tool")));
    assert!(!d.offered && d.decider.is_none() && d.definition_digest.is_none());

    // The skill `ClearStock` lists `StockLevel`, which has no entry there: not offered, never.
    let d = decide(&t, ["Restocker", "ClearStock", "StockLevel"], json!({ "sku": "vanilla" }));
    assert_eq!(refused(&d), (Level::Never, Some("not one of the skill's tools")));

    // What still resolves is decided as the table says.
    let d = decide(&t, ["Restocker", "Reorder", "StockLevel"], json!({ "sku": "vanilla" }));
    assert_eq!(refused(&d), (Level::Alone, None));
}

#[test]
fn a_skill_the_agent_lists_but_nobody_defines_is_never() {
    // A mutated `policies/shop` table: the skill `Reorder` is now `R#eorder`; the agent still lists
    // `Reorder`.
    let t = table_load("agent_lists_unknown_skill.json");
    assert_eq!(t.agents["Restocker"].skills, ["Reorder", "ClearStock"]);
    assert!(!t.skills.contains_key("Reorder") && t.skills.contains_key("R#eorder"));
    let d = decide(&t, ["Restocker", "Reorder", "StockLevel"], json!({ "sku": "vanilla" }));
    assert_eq!(refused(&d), (Level::Never, Some("unknown skill")));
    // The renamed skill is not one of the agent's.
    let d = decide(&t, ["Restocker", "R#eorder", "StockLevel"], json!({ "sku": "vanilla" }));
    assert_eq!(refused(&d), (Level::Never, Some("not one of the agent's skills")));
    // The other skill is untouched (its `MarkDown` entry now takes one `amount`).
    let d = decide(&t, ["Restocker", "ClearStock", "MarkDown"], json!({ "amount": 5 }));
    assert_eq!(refused(&d), (Level::Alone, None));
}
