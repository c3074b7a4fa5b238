//! Arbitrary bytes as a decision table: `Table::load` answers `Ok` or `Err`, never panics.
//!
//! A SHA-256 digest cannot be forged by mutation, so almost every mutated table is refused as
//! `DigestMismatch`. To reach the runtime with tables that are well-formed JSON but inconsistent (a skill
//! an agent lists but nobody defines, an entry for a tool that does not exist, a route to a missing queue,
//! a sponsor who is nobody), such a table is sealed again, as a compiler bug or a hostile writer with the
//! means to hash would produce it. Every table that gets this far is written back and must load
//! unchanged, and every triple it has an entry for (and every agent × skill × tool name it mentions) is
//! decided: `decide_table` never panics, and a refusal is `never`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use permits::runtime::{Call, decide_table};
use permits::table::{Level, LoadError, ParamType, Table};
use serde_json::{Map, Value};

fn decide(table: &Table, agent: &str, skill: &str, tool: &str) {
    // Arguments of the declared types, so the decision reaches the entry's conditions.
    let mut args = Map::new();
    for p in table.tools.get(tool).map(|t| t.params.as_slice()).unwrap_or_default() {
        let v = match p.ty {
            ParamType::Int | ParamType::Money => Value::from(0),
            ParamType::Bool => Value::Bool(false),
            ParamType::String | ParamType::Entity(_) => Value::String(String::new()),
            ParamType::Shell => Value::String("cargo test".into()),
            // A fraction, so a condition on a `number` parameter compares it with a decimal literal.
            ParamType::Number => Value::from(0.5),
            ParamType::Json => Value::Object(Map::new()),
        };
        args.insert(p.name.clone(), v);
    }
    let call = Call::new(agent, skill, tool).with_arguments(Value::Object(args));
    let d = decide_table(table, &call);
    if d.refusal.is_some() {
        assert_eq!(d.level, Level::Never, "a refused call is `never`: {}", d.summary());
    }
    let sponsor = table.agents.get(agent).map(|a| a.sponsor.clone()).unwrap_or_default();
    let d = decide_table(table, &call.for_person(sponsor));
    let _ = (d.to_json(), d.summary());
}

fuzz_target!(|data: &[u8]| {
    let table = match Table::load(data) {
        Ok(t) => t,
        Err(LoadError::DigestMismatch { .. }) => {
            // Parsed straight into a `Table`, a repeated key is an error (through a `Value` the last wins).
            let Ok(mut t) = serde_json::from_slice::<Table>(data) else { return };
            t.seal();
            t
        }
        Err(_) => return,
    };
    let again =
        Table::load(table.to_pretty_json().as_bytes()).unwrap_or_else(|e| panic!("a sealed table does not load: {e}"));
    assert_eq!(again, table);
    for (agent, skills) in &table.entries {
        for (skill, tools) in skills {
            for tool in tools.keys() {
                decide(&table, agent, skill, tool);
            }
        }
    }
    // Every combination of the names the agents and skills mention, offered or not.
    for (agent, a) in &table.agents {
        for skill in &a.skills {
            for tool in table.skills.get(skill).map(|s| s.tools.as_slice()).unwrap_or_default() {
                decide(&table, agent, skill, tool);
            }
        }
    }
});
