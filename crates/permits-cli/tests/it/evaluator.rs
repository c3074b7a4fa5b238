//! One evaluator: `Table::level_of`, `LevelIndex::level_of` and the runtime's `decide_table` give the same
//! level and the same refusal on the triples of a generated package with conditions.

use permits::runtime::{Call, decide_table};
use permits::table::Level;
use serde_json::json;

/// `level_of` (on the table and through the index) gives `decide_table`'s level, and refuses exactly when `decide_table` does, on every
/// offered triple of a generated package with conditions, with good and bad arguments, for a known
/// and an unknown person, and on triples that are not offered.
#[test]
fn level_of_agrees_with_decide_table() {
    let mut sources = permits::syntax::Sources::default();
    let text = permits_testkit::generate::generate(&permits_testkit::generate::Config::sized(300));
    sources.add(permits::syntax::Source::new("gen.permits", text.into_bytes()));
    let out = permits::compile::compile_loaded(permits::syntax::parse_sources(sources));
    let table = out.table.expect("the generated package compiles");
    let person = table.persons.keys().next().cloned();
    let index = permits::table::LevelIndex::new(&table);
    let argument_sets = [
        json!({ "amount": 500, "to": "ops@example.com" }),
        json!({ "amount": 5_000_000, "to": "x@rival.example" }),
        json!({ "amount": "500", "to": "ops@example.com" }),
        json!({ "amount": 500 }),
        json!({ "amount": 500, "to": "a", "extra": 1 }),
        json!({ "amount": 500, "tx": "ops@example.com" }),
        json!({ "amount": 500, "to": 7 }),
        json!({}),
        json!([1]),
    ];
    let mut calls = Vec::new();
    for (agent, skills) in &table.entries {
        for (skill, tools) in skills {
            for tool in tools.keys().take(4) {
                calls.push(Call::new(agent, skill, tool));
            }
            calls.push(Call::new(agent, skill, "NoSuchTool"));
            calls.push(Call::new(agent, "NoSuchSkill", "T1"));
            if let Some(other) = table.tools.keys().find(|t| !tools.contains_key(*t)) {
                calls.push(Call::new(agent, skill, other));
            }
        }
        calls.push(Call::new(agent, "A0S0", "T1"));
    }
    calls.push(Call::new("Nobody", "A0S0", "T1"));
    let mut checked = 0;
    for call in calls {
        for args in &argument_sets {
            for requester in [None, person.clone(), Some("NoSuchPerson".to_string())] {
                let call = Call { arguments: args.clone(), requester, ..call.clone() };
                let full = decide_table(&table, &call);
                let r = call.as_ref();
                let quick = table.level_of(r);
                let indexed = index.level_of(r);
                assert_eq!(quick, indexed, "{call:?}");
                assert_eq!(quick.as_ref().map_or(Level::Never, |q| q.level), full.level, "{call:?}");
                assert_eq!(quick.as_ref().err().map(ToString::to_string), full.refusal, "{call:?}");
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}
