//! Shared support of the property, differential and adversarial tests: a generator of small random
//! packages ([`generator`]) and a naive reading of the spec over the generator's own structure ([`spec`]).
#![allow(dead_code, reason = "each test file uses a different part of the support")]

pub mod generator;
pub mod spec;

use permits_table::{CallRef, Level, Table};

/// The level the one evaluator gives a call with these arguments and no person (`Table::level_of`), with
/// the refusal's words when it refuses: what a `test` expectation with arguments states.
pub fn level_with(
    table: &Table,
    agent: &str,
    skill: &str,
    tool: &str,
    args: &serde_json::Map<String, serde_json::Value>,
) -> (Level, String) {
    let arguments = serde_json::Value::Object(args.clone());
    match table.level_of(CallRef { agent, skill, tool, arguments: &arguments, requester: None }) {
        Ok(of) => (of.level, String::new()),
        Err(why) => (Level::Never, why.to_string()),
    }
}
