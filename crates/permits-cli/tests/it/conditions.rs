//! Conditions end to end (spec §3 item 5): written in sources, carried in the table, evaluated by the
//! runtime on each call's arguments; fail closed when a condition cannot be evaluated; bounded nesting.

use std::process::Command;

use permits::runtime::{Call, decide_table};
use permits::table::{Level, Table};
use serde_json::json;

/// A refund policy whose conditional entries are written over several lines, with comments between.
const SHOP: &str = r#"
entity Order { total }
person Lucy
tool Refund "Refund an order" (order: Order, amount: money) { write Order.total }
tool Email "Email a customer" (to: string, urgent: bool) { send email }
agent Clerk {
    sponsor Lucy
    may {
        alone [
            Refund
                // small refunds need nobody
                when amount
                     < 100
        ]
        never [Email when to matches "*@rival.example"
                      or to in ["press@news.example"]]
        alone [Email when not (urgent == true) and to != "ceo@shop.example"]
    }
    skills [Desk]
}
skill Desk { tools [Refund, Email] }
"#;

fn table() -> Table {
    // One folder per call: the tests run in parallel and each removes its own.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("permits-conditions-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("shop.permits");
    std::fs::write(&file, SHOP).expect("write");
    let table = permits::compile::compile_path(&file).unwrap_or_else(|e| panic!("compiles:\n{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    // What the runtime sees went through the serialized format.
    Table::load(table.to_pretty_json().as_bytes()).expect("the table verifies")
}

fn level(table: &Table, tool: &str, args: serde_json::Value) -> (Level, Option<String>) {
    let d = decide_table(table, &Call::new("Clerk", "Desk", tool).with_arguments(args));
    (d.level, d.refusal)
}

#[test]
fn a_condition_written_over_several_lines_is_kept() {
    let t = table();
    assert_eq!(t.entry("Clerk", "Desk", "Refund").and_then(|e| e.level), None, "the level depends on the arguments");
    assert_eq!(level(&t, "Refund", json!({ "order": "O-1", "amount": 500 })).0, Level::Propose, "500 is not under 100");
    assert_eq!(level(&t, "Refund", json!({ "order": "O-1", "amount": 99 })).0, Level::Alone);
    assert_eq!(level(&t, "Refund", json!({ "order": "O-1", "amount": 100 })).0, Level::Propose);
}

#[test]
fn every_operator_decides_per_call() {
    let t = table();
    let email = |to: &str, urgent: bool| level(&t, "Email", json!({ "to": to, "urgent": urgent })).0;
    assert_eq!(email("boss@rival.example", false), Level::Never, "matches");
    assert_eq!(email("press@news.example", false), Level::Never, "in");
    assert_eq!(email("a@customer.example", false), Level::Alone, "not, ==, !=, and");
    assert_eq!(email("a@customer.example", true), Level::Propose, "urgent mail falls back to the class level");
    assert_eq!(email("ceo@shop.example", false), Level::Propose, "!= excludes the CEO");
    assert_eq!(email("boss@rival.example", true), Level::Never, "never beats everything");
}

#[test]
fn missing_or_mistyped_arguments_are_never() {
    let t = table();
    let (l, why) = level(&t, "Refund", json!({ "order": "O-1" }));
    assert_eq!(l, Level::Never, "a missing argument");
    assert!(why.is_some_and(|w| w.contains("amount")));
    assert_eq!(level(&t, "Refund", json!({ "order": "O-1", "amount": "50" })).0, Level::Never, "a string for money");
    assert_eq!(level(&t, "Refund", json!({ "order": "O-1", "amount": 50.0 })).0, Level::Never, "a float for money");
    assert_eq!(level(&t, "Email", json!({ "to": 7, "urgent": false })).0, Level::Never, "a number for a string");
}

#[test]
fn the_condition_is_part_of_the_entry_digest() {
    let a = table();
    let digest = |t: &Table| t.entry("Clerk", "Desk", "Refund").map(|e| e.entry_digest.clone());
    let dir = std::env::temp_dir().join(format!("permits-conditions-digest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("shop.permits");
    std::fs::write(&file, SHOP.replace("< 100", "< 1000")).expect("write");
    let b = permits::compile::compile_path(&file).expect("compiles");
    std::fs::write(
        &file,
        SHOP.replace("// small refunds need nobody", "").replace("\n        alone [\n", "\n        alone [ "),
    )
    .expect("write");
    let c = permits::compile::compile_path(&file).expect("compiles");
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(digest(&a), digest(&b), "a different bound is a different entry");
    assert_eq!(digest(&a), digest(&c), "reformatting is not");
}

#[test]
fn one_hundred_thousand_nested_parentheses_are_a_clear_error() {
    let n = 100_000;
    let text = format!(
        "entity E {{ x }}\nperson P\ntool T \"t\" (a: int) {{ write E.x }}\nagent A {{ sponsor P may {{ alone [T when {}a < 1{}] }} skills [S] }}\nskill S {{ tools [T] }}\n",
        "(".repeat(n),
        ")".repeat(n)
    );
    let dir = std::env::temp_dir().join(format!("permits-nesting-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("deep.permits");
    std::fs::write(&file, text).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_permitc"))
        .env("NO_COLOR", "1")
        .args(["check", "--format", "json"])
        .arg(&file)
        .output()
        .expect("permitc runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "an error, not a crash");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let d = &v["packages"][0]["diagnostics"];
    assert_eq!(d.as_array().map(Vec::len), Some(1));
    assert_eq!(d[0]["code"], "permits::syntax::too_deep");
    assert_eq!(d[0]["message"], "parentheses nest more than 32 deep");
    assert_eq!(d[0]["labels"][0]["line"], 4);
}

/// Conditions on a `number` parameter through the real `permitc compile` and `permitc decide` (spec §2): the
/// JSON number argument is compared exactly with the decimal literal, in whatever form the JSON writes it
/// (`0.1`, `10.0`, `1e1`, `-0.5`), and an argument that is not a number is `never`.
#[test]
fn permitc_decides_number_conditions_exactly() {
    let dir = std::env::temp_dir().join(format!("permits-number-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("mix.permits");
    let table = dir.join("mix.json");
    std::fs::write(
        &file,
        r#"person Pat
entity Batch { mix }
tool Mix "Mix a batch" (ratio: number, litres: number) { write Batch.mix }
agent Mixer {
    sponsor Pat
    may {
        alone [Mix when ratio <= 0.1 and litres <= 10]
        never [Mix when ratio < -0.5]
    }
    skills [Paint]
}
skill Paint { tools [Mix] }
test "the bounds hold exactly" {
    expect Mixer.Paint.Mix(ratio: 0.1, litres: 10) is alone
    expect Mixer.Paint.Mix(ratio: 0.1000001, litres: 10) is propose
}
"#,
    )
    .expect("write");
    let permitc = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_permitc")).env("NO_COLOR", "1").args(args).output().expect("permitc runs")
    };
    let compiled = permitc(&["compile".as_ref(), file.as_os_str(), "-o".as_ref(), table.as_os_str()]);
    assert_eq!(compiled.status.code(), Some(0), "{}", String::from_utf8_lossy(&compiled.stderr));
    let decide = |arguments: &str| -> (String, String) {
        let out = permitc(&[
            "decide".as_ref(),
            "--table".as_ref(),
            table.as_os_str(),
            "--agent".as_ref(),
            "Mixer".as_ref(),
            "--skill".as_ref(),
            "Paint".as_ref(),
            "--tool".as_ref(),
            "Mix".as_ref(),
            "--args".as_ref(),
            arguments.as_ref(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        (v["level"].as_str().unwrap_or_default().to_string(), v.to_string())
    };
    for (arguments, want) in [
        (r#"{"ratio": 0.1, "litres": 10}"#, "alone"),
        (r#"{"ratio": 0.1, "litres": 10.0}"#, "alone"),
        (r#"{"ratio": 1e-1, "litres": 1e1}"#, "alone"),
        (r#"{"ratio": 0, "litres": -3}"#, "alone"),
        (r#"{"ratio": 0.1, "litres": 10.000001}"#, "propose"),
        (r#"{"ratio": 0.10000000001, "litres": 1}"#, "propose"),
        (r#"{"ratio": -0.5, "litres": 1}"#, "alone"),
        (r#"{"ratio": -0.5000001, "litres": 1}"#, "never"),
        (r#"{"ratio": "0.1", "litres": 1}"#, "never"),
        (r#"{"litres": 1}"#, "never"),
    ] {
        let (level, whole) = decide(arguments);
        assert_eq!(level, want, "{arguments}: {whole}");
    }
    // The table holds the decimals as their canonical text.
    let text = std::fs::read_to_string(&table).expect("table");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(text.contains(r#""number": "0.1""#) && text.contains(r#""number": "-0.5""#), "{text}");
}
