//! The table's loader and its one evaluator (`permits_table`: `Table::load`, `Table::level_of`,
//! `LevelIndex`, `Table::possible_levels`, `check_arguments`), on a compiled package. Written against the
//! mutants of the evaluator that the corpus and the differential test did not tell apart (docs/mutants.md).

use std::collections::BTreeSet;

use permits_table::{
    ArgumentError, BudgetRefusal, CallRef, Level, LevelIndex, LoadError, NotOffered, ParamType, Refused, Route,
    SpendError, Table, arguments_fit, check_arguments, value_fits,
};
use serde_json::{Value, json};

use crate::common::table_of;

/// A package with a budget and an allowance, a conditional entry, a fixed level, the reserved subject, and
/// parameters of every type; a skill no agent has and a tool no skill offers.
const PACKAGE: &str = r#"entity Order { total }
person Pat
budget Supplies { currency: "USD", unit: cents, ceiling: 100000, alone_up_to: 500 }
agent Clerk "Buys supplies." {
    sponsor Pat
    may {
        spends: alone
        alone [Refund when amount <= 100]
        never [Restock]
    }
    skills [Buying]
}
skill Buying "Buy supplies." {
    tools [Buy, Refund, Look, Grant, Restock]
}
skill Other "No agent's." {
    tools [Look]
}
tool Buy "Buy supplies" (item: string, amount: money) {
    spend Supplies by amount
}
tool Restock "Restock" (item: string, amount: money) {
    spend Supplies by amount
}
tool Refund "Refund an order" (order: Order, amount: money, urgent: bool, count: int) {
    write Order.total
}
tool Look "Look an order up" (order: Order) { read Order }
tool Grant "Grant itself more" () { write permits }
tool Spare "Offered nowhere" () { read Order }
"#;

fn call<'c>(tool: &'c str, arguments: &'c Value) -> CallRef<'c> {
    CallRef { agent: "Clerk", skill: "Buying", tool, arguments, requester: None, mode: None, via: &[] }
}

/// `Table::level_of` and `LevelIndex::level_of` on one call: they must agree; the table's answer.
fn both<'t>(table: &'t Table, index: &LevelIndex<'t>, call: CallRef<'_>) -> Result<(Level, bool, Level), Refused> {
    let direct = table.level_of(call);
    assert_eq!(index.level_of(call), direct, "{call:?}");
    direct.map(|of| (of.level, of.floored, of.rows_level()))
}

/// Levels, the allowance floor and the spend, the same through the index.
#[test]
fn levels_of_calls_with_the_floor_and_the_spend() {
    let table = table_of(PACKAGE);
    let index = LevelIndex::new(&table);
    let at = |amount: i64| json!({ "item": "tape", "amount": amount });
    let (five_hundred, five_hundred_one) = (at(500), at(501));
    assert_eq!(both(&table, &index, call("Buy", &five_hundred)), Ok((Level::Alone, false, Level::Alone)));
    assert_eq!(both(&table, &index, call("Buy", &five_hundred_one)), Ok((Level::Propose, true, Level::Alone)));
    let of = table.level_of(call("Buy", &five_hundred_one)).expect("decided");
    assert!(of.over_allowance);
    let spend = table.spend_of(of.tool, five_hundred_one.as_object().expect("an object")).expect("read");
    let spend = spend.expect("Buy spends");
    assert_eq!((spend.budget, spend.amount, spend.over_allowance()), ("Supplies", 501, true));
    assert_eq!(of.tool, &table.tools["Buy"]);
    assert_eq!(of.entry, table.entry("Clerk", "Buying", "Buy").expect("offered"));
    assert_eq!(of.route, &Route::Requester);
    assert!(!table.level_of(call("Buy", &five_hundred)).expect("decided").over_allowance);
    let spend = table.spend_of(of.tool, five_hundred.as_object().expect("an object")).expect("read");
    let spend = spend.expect("Buy spends");
    assert_eq!((spend.amount, spend.over_allowance()), (500, false));
    // `never` by name, over the allowance or not.
    assert_eq!(both(&table, &index, call("Restock", &five_hundred)), Ok((Level::Never, false, Level::Never)));
    assert_eq!(both(&table, &index, call("Restock", &five_hundred_one)), Ok((Level::Never, false, Level::Never)));
    let refund = |amount: i64| json!({ "order": "o1", "amount": amount, "urgent": false, "count": -2 });
    let (small, large) = (refund(100), refund(101));
    assert_eq!(both(&table, &index, call("Refund", &small)), Ok((Level::Alone, false, Level::Alone)));
    assert_eq!(both(&table, &index, call("Refund", &large)), Ok((Level::Propose, false, Level::Propose)));
    assert!(!table.level_of(call("Refund", &large)).expect("decided").over_allowance);
    assert_eq!(both(&table, &index, call("Look", &json!({ "order": "o1" }))), Ok((Level::Alone, false, Level::Alone)));
    assert_eq!(both(&table, &index, call("Grant", &json!({}))), Ok((Level::Never, false, Level::Never)));
    // The person the work is for must be in the table.
    let look = json!({ "order": "o1" });
    let for_pat = CallRef { requester: Some("Pat"), ..call("Look", &look) };
    assert_eq!(both(&table, &index, for_pat), Ok((Level::Alone, false, Level::Alone)));
    let for_nobody = CallRef { requester: Some("Nobody"), ..call("Look", &look) };
    assert_eq!(both(&table, &index, for_nobody), Err(Refused::UnknownPerson("Nobody".into())));
}

/// Every way a call's arguments can miss the tool's parameters is refused with its own error, the same
/// through the index (whose sorted fast path must not accept a prefix or a mistyped value).
#[test]
fn arguments_that_do_not_fit_are_refused() {
    let table = table_of(PACKAGE);
    let index = LevelIndex::new(&table);
    let refused = |tool: &str, arguments: Value| match both(&table, &index, call(tool, &arguments)) {
        Err(Refused::Arguments(e)) => {
            assert!(!arguments.as_object().is_some_and(|a| arguments_fit(&table.tools[tool], a)), "{arguments}");
            assert_eq!(check_arguments(tool, &table.tools[tool], &arguments), Err((*e).clone()));
            *e
        }
        other => panic!("{tool} {arguments}: refused for its arguments, got {other:?}"),
    };
    let (buy, refund) = ("Buy".to_string(), "Refund".to_string());
    assert_eq!(refused("Buy", json!([1])), ArgumentError::NotAnObject { tool: buy.clone() });
    assert_eq!(refused("Buy", json!("x")), ArgumentError::NotAnObject { tool: buy.clone() });
    assert_eq!(
        refused("Buy", json!({ "amount": 5 })),
        ArgumentError::Missing { tool: buy.clone(), param: "item".into() }
    );
    assert_eq!(
        refused("Buy", json!({ "item": "x" })),
        ArgumentError::Missing { tool: buy.clone(), param: "amount".into() }
    );
    assert_eq!(
        refused("Buy", json!({ "amount": 5, "item": "x", "note": "" })),
        ArgumentError::Extra { tool: buy.clone(), name: "note".into() }
    );
    assert_eq!(
        refused("Buy", json!({ "amount": 5, "items": "x" })),
        ArgumentError::Missing { tool: buy.clone(), param: "item".into() }
    );
    assert_eq!(
        refused("Buy", json!({ "amount": -5, "item": "x" })),
        ArgumentError::NegativeMoney { tool: buy.clone(), param: "amount".into(), amount: -5 }
    );
    let mistyped = |e: ArgumentError| match e {
        ArgumentError::Mistyped { tool, param, expected, .. } => (tool, param, expected),
        other => panic!("mistyped, got {other:?}"),
    };
    assert_eq!(
        mistyped(refused("Buy", json!({ "amount": 2.5, "item": "x" }))),
        (buy.clone(), "amount".into(), ParamType::Money)
    );
    assert_eq!(
        mistyped(refused("Buy", json!({ "amount": 5, "item": 1 }))),
        (buy.clone(), "item".into(), ParamType::String)
    );
    let refund_with = |key: &str, value: Value| {
        let mut args = json!({ "order": "o1", "amount": 5, "urgent": true, "count": 1 });
        args[key] = value;
        mistyped(refused("Refund", args))
    };
    assert_eq!(refund_with("order", json!(3)), (refund.clone(), "order".into(), ParamType::Entity("Order".into())));
    assert_eq!(refund_with("urgent", json!("yes")), (refund.clone(), "urgent".into(), ParamType::Bool));
    assert_eq!(refund_with("count", json!(1.5)), (refund.clone(), "count".into(), ParamType::Int));
    assert_eq!(refund_with("count", json!("1")), (refund, "count".into(), ParamType::Int));
    // What fits.
    let fits = json!({ "amount": 0, "item": "" });
    assert_eq!(check_arguments("Buy", &table.tools["Buy"], &fits), Ok(()));
    assert!(arguments_fit(&table.tools["Buy"], fits.as_object().expect("an object")));
}

/// The one reading of "which value fits which type".
#[test]
fn values_fit_their_types() {
    let cases = [
        (ParamType::String, json!("x"), true),
        (ParamType::String, json!(1), false),
        (ParamType::Entity("Order".into()), json!("o1"), true),
        (ParamType::Entity("Order".into()), json!(null), false),
        (ParamType::Int, json!(-3), true),
        (ParamType::Int, json!(1.5), false),
        (ParamType::Int, json!("3"), false),
        (ParamType::Money, json!(0), true),
        (ParamType::Money, json!(7), true),
        (ParamType::Money, json!(-1), false),
        (ParamType::Money, json!(u64::MAX), false),
        (ParamType::Bool, json!(false), true),
        (ParamType::Bool, json!(0), false),
    ];
    for (ty, value, fits) in cases {
        assert_eq!(value_fits(&ty, &value), fits, "{ty:?} {value}");
    }
}

/// Each reason a triple is not offered, in the order spec §3 step 1 checks them, from every entry point.
#[test]
fn triples_that_are_not_offered_say_why() {
    let table = table_of(PACKAGE);
    let index = LevelIndex::new(&table);
    let none = json!({});
    for ((agent, skill, tool), why) in [
        (("Nobody", "Buying", "Look"), NotOffered::UnknownAgent),
        (("Clerk", "Nope", "Look"), NotOffered::UnknownSkill),
        (("Clerk", "Other", "Look"), NotOffered::NotAgentsSkill),
        (("Clerk", "Buying", "Nope"), NotOffered::UnknownTool),
        (("Clerk", "Buying", "Spare"), NotOffered::NotSkillsTool),
    ] {
        assert_eq!(table.offered(agent, skill, tool), Err(why), "{agent} {skill} {tool}");
        assert_eq!(table.possible_levels(agent, skill, tool), Err(why));
        let c = CallRef { agent, skill, tool, arguments: &none, requester: None, mode: None, via: &[] };
        assert_eq!(table.level_of(c), Err(Refused::NotOffered(why)));
        assert_eq!(index.level_of(c), Err(Refused::NotOffered(why)));
    }
    assert_eq!(table.offered("Clerk", "Buying", "Look"), Ok(table.entry("Clerk", "Buying", "Look").expect("offered")));
}

/// The levels a triple can take over every argument set: the floor adds `propose` to an `alone` spend only.
/// The table holds one decision per offered triple.
#[test]
fn possible_levels_of_each_triple() {
    let table = table_of(PACKAGE);
    assert_eq!(table.decision_count(), 5);
    let possible = |tool: &str| table.possible_levels("Clerk", "Buying", tool).expect("offered");
    assert_eq!(possible("Buy"), BTreeSet::from([Level::Alone, Level::Propose]));
    assert_eq!(possible("Refund"), BTreeSet::from([Level::Alone, Level::Propose]));
    assert_eq!(possible("Look"), BTreeSet::from([Level::Alone]));
    assert_eq!(possible("Restock"), BTreeSet::from([Level::Never]));
    assert_eq!(possible("Grant"), BTreeSet::from([Level::Never]));
}

/// The reserved subject is `never` when either the entry or the tool says so (a table edited and sealed
/// again may disagree with itself; the evaluator stays closed), even where no stated level says `never`
/// and the rows alone would give `propose`.
#[test]
fn the_reserved_subject_is_never_from_the_entry_or_the_tool() {
    fn grant(t: &mut Table) -> &mut permits_table::Entry {
        let entry = t.entries.get_mut("Clerk").and_then(|s| s.get_mut("Buying")).and_then(|t| t.get_mut("Grant"));
        entry.expect("offered")
    }
    let table = table_of(PACKAGE);
    let mut unstated = table.clone();
    grant(&mut unstated).level = None;
    let mut by_entry = unstated.clone();
    by_entry.tools.get_mut("Grant").expect("Grant").reserved = None;
    let mut by_tool = unstated.clone();
    grant(&mut by_tool).reserved = false;
    let none = json!({});
    for t in [&table, &unstated, &by_entry, &by_tool] {
        assert_eq!(t.possible_levels("Clerk", "Buying", "Grant"), Ok(BTreeSet::from([Level::Never])));
        assert_eq!(t.level_of(call("Grant", &none)).map(|of| of.level), Ok(Level::Never));
        assert_eq!(LevelIndex::new(t).level_of(call("Grant", &none)).map(|of| of.level), Ok(Level::Never));
    }
    // Without the reserved subject, the rows say `propose` (`write permits` is a change).
    let mut neither = by_tool.clone();
    neither.tools.get_mut("Grant").expect("Grant").reserved = None;
    assert_eq!(neither.possible_levels("Clerk", "Buying", "Grant"), Ok(BTreeSet::from([Level::Propose])));
    assert_eq!(neither.level_of(call("Grant", &none)).map(|of| of.level), Ok(Level::Propose));
}

/// A spend that cannot be read: the budget is not in the table, the amount is missing or negative.
#[test]
fn spends_that_cannot_be_read() {
    let table = table_of(PACKAGE);
    let buy = &table.tools["Buy"];
    let map = |v: Value| v.as_object().cloned().expect("an object");
    assert_eq!(table.spend_of(buy, &map(json!({ "item": "x" }))), Err(SpendError::MissingAmount));
    assert_eq!(table.spend_of(buy, &map(json!({ "amount": "5" }))), Err(SpendError::MissingAmount));
    assert_eq!(table.spend_of(buy, &map(json!({ "amount": -5 }))), Err(SpendError::NegativeAmount(-5)));
    assert_eq!(table.spend_of(&table.tools["Look"], &map(json!({ "order": "o" }))), Ok(None));
    let spend = table.spend_of(buy, &map(json!({ "amount": 7 }))).expect("read").expect("Buy spends");
    assert_eq!((spend.budget, spend.info, spend.amount), ("Supplies", &table.budgets["Supplies"], 7));
    let mut no_budget = table.clone();
    no_budget.budgets.clear();
    let args = json!({ "item": "x", "amount": 7 });
    let refused = Refused::Budget(Box::new(BudgetRefusal {
        tool: "Buy".into(),
        budget: "Supplies".into(),
        param: "amount".into(),
        error: SpendError::UnknownBudget,
    }));
    assert_eq!(no_budget.level_of(call("Buy", &args)), Err(refused.clone()));
    assert_eq!(LevelIndex::new(&no_budget).level_of(call("Buy", &args)), Err(refused));
}

/// The compiled table's JSON with one textual replacement, which must apply.
fn edited(table: &Table, from: &str, to: &str) -> String {
    let text = table.to_pretty_json();
    assert!(text.contains(from), "`{from}` is not in the table");
    text.replacen(from, to, 1)
}

/// A table that only the loader's slow path reads (a repeated key: the fast path refuses it, the `Value`
/// path keeps the last) is held to its digest like any other: it loads with the right digest and is refused
/// with a wrong one.
#[test]
fn a_table_with_a_repeated_key_loads_only_with_its_digest() {
    let table = table_of(PACKAGE);
    let digest = &table.header.table_digest;
    // The header repeats `compiler` (not covered by the digest): the table is the same.
    let repeated = edited(&table, "\"compiler\":", "\"compiler\": \"another\",\n    \"compiler\":");
    assert_eq!(Table::load(repeated.as_bytes()).expect("loads"), table);
    let wrong = repeated.replacen(digest.as_str(), &"0".repeat(64), 1);
    match Table::load(wrong.as_bytes()) {
        Err(LoadError::DigestMismatch { stated, computed }) => {
            assert_eq!((stated, computed), ("0".repeat(64), digest.clone()));
        }
        other => panic!("a wrong digest must be refused, got {other:?}"),
    }
    // A repeated key whose last value changes the content is refused for its digest.
    let tampered = edited(&table, "\"alone_up_to\": 500", "\"alone_up_to\": 500,\n      \"alone_up_to\": 90000");
    assert!(matches!(Table::load(tampered.as_bytes()), Err(LoadError::DigestMismatch { .. })));
}

/// The fast path checks the digest too, and a table of another format is refused as such on both paths.
#[test]
fn the_loader_checks_the_digest_and_the_format() {
    let table = table_of(PACKAGE);
    let text = table.to_pretty_json();
    assert_eq!(Table::load(text.as_bytes()).expect("loads"), table);
    let tampered = edited(&table, "\"alone_up_to\": 500", "\"alone_up_to\": 90000");
    match Table::load(tampered.as_bytes()) {
        Err(LoadError::DigestMismatch { stated, computed }) => {
            assert_eq!(stated, table.header.table_digest);
            assert_ne!(computed, stated);
        }
        other => panic!("a changed table must be refused, got {other:?}"),
    }
    let format = edited(&table, "\"format\": 1", "\"format\": 2");
    assert!(matches!(Table::load(format.as_bytes()), Err(LoadError::UnknownFormat { found: 2, expected: 1 })));
    let repeated_format = format.replacen("\"compiler\":", "\"compiler\": \"x\",\n    \"compiler\":", 1);
    assert!(matches!(Table::load(repeated_format.as_bytes()), Err(LoadError::UnknownFormat { found: 2, expected: 1 })));
    let no_format = edited(&table, "\"format\": 1", "\"format\": \"1\"");
    assert!(matches!(Table::load(no_format.as_bytes()), Err(LoadError::Malformed(_))));
}

/// `Table::load_path` reads the file and loads it; a missing file is an I/O error naming the path.
#[test]
fn load_path_reads_the_file() {
    let table = table_of(PACKAGE);
    let dir = std::env::temp_dir().join(format!("permits-evaluator-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let path = dir.join("t.json");
    std::fs::write(&path, table.to_pretty_json()).expect("written");
    assert_eq!(Table::load_path(&path).expect("loads"), table);
    let missing = dir.join("missing.json");
    match Table::load_path(&missing) {
        Err(LoadError::Io { path, .. }) => assert_eq!(path, missing.display().to_string()),
        other => panic!("a missing file is an I/O error, got {other:?}"),
    }
    std::fs::remove_dir_all(&dir).expect("removed");
}
