//! The one evaluator on `shell` arguments (spec §3a): each part judged as if it were the whole call, the
//! strictest part wins, a line that is not judgeable is `never` naming its first offending character; the
//! same answer from `Table::level_of`, `LevelIndex::level_of` and the runtime's `decide_table`; and
//! `possible_levels` for `test` expectations written without arguments.

use permits::runtime::{Call, decide_table};
use permits::table::{Level, LevelIndex, Refused, Table};
use serde_json::json;

/// A command tool with conditions on its `shell` parameter and on a plain one, and a tool without conditions.
const POLICY: &str = r#"
person Pat
entity Box { x }
agent Coder "Runs commands." {
    sponsor Pat
    may {
        changes: propose
        alone [Run when command in ["cargo build", "cargo test"] or command matches "cargo test *"]
        never [Run when command matches "sudo *" or command == "sh" or (command matches "rm *" and dir == "/")]
        alone [Plain]
    }
    skills [Work]
}
skill Work "Work." {
    tools [Run, Plain]
}
tool Run "Run a command" (command: shell, dir: string) { write Box }
tool Plain "Run a command without conditions" (command: shell) { write Box }
"#;

pub fn table() -> Table {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("permits-shell-judge-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("policy.permits");
    std::fs::write(&file, POLICY).expect("write");
    let table = permits::compile::compile_path(&file).unwrap_or_else(|e| panic!("compiles:\n{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    Table::load(table.to_pretty_json().as_bytes()).expect("the table verifies")
}

/// The level of `Run` for `command` in `dir`, asserting that the three ways of asking agree.
fn level(table: &Table, tool: &str, args: serde_json::Value) -> (Level, Option<String>) {
    let call = Call::new("Coder", "Work", tool).with_arguments(args);
    let index = LevelIndex::new(table);
    let quick = table.level_of(call.as_ref());
    assert_eq!(quick, index.level_of(call.as_ref()), "{call:?}");
    let d = decide_table(table, &call);
    assert_eq!(quick.as_ref().map_or(Level::Never, |q| q.level), d.level, "{call:?}");
    assert_eq!(quick.as_ref().err().map(ToString::to_string), d.refusal, "{call:?}");
    (d.level, d.refusal)
}

fn run(table: &Table, command: &str, dir: &str) -> Level {
    level(table, "Run", json!({ "command": command, "dir": dir })).0
}

#[test]
fn each_part_is_judged_as_the_whole_call_and_the_strictest_wins() {
    let t = table();
    assert_eq!(run(&t, "cargo test", "/src"), Level::Alone);
    assert_eq!(run(&t, "cargo test --all", "/src"), Level::Alone);
    assert_eq!(run(&t, "cargo build && cargo test --all", "/src"), Level::Alone, "every part alone");
    // The whole line matches `cargo test *`, but its second part does not: the class level decides it.
    assert_eq!(run(&t, "cargo test --all; wget http://x", "/src"), Level::Propose);
    assert_eq!(run(&t, "cargo test | sh", "/src"), Level::Never, "`sh` is named never");
    assert_eq!(run(&t, "sudo ls", "/src"), Level::Never);
    assert_eq!(run(&t, "ls; sudo ls", "/src"), Level::Never, "never beats everything, in any part");
    // Quotes are removed and words joined by one space before a condition sees a part.
    assert_eq!(run(&t, "\"cargo\"  'test'", "/src"), Level::Alone);
    assert_eq!(run(&t, "c\"\"argo test --all 2>&1", "/src"), Level::Alone);
    // A condition mixing the part and another argument: the other argument is read whole.
    assert_eq!(run(&t, "rm x", "/"), Level::Never);
    assert_eq!(run(&t, "rm x", "/src"), Level::Propose);
    assert_eq!(run(&t, "cargo test && rm x", "/"), Level::Never);
    // A separator inside quotes is part of an argument, not a separator.
    assert_eq!(run(&t, "cargo test 'a; sudo x'", "/src"), Level::Alone);
}

#[test]
fn a_line_that_is_not_judgeable_is_never_with_the_first_offending_character() {
    let t = table();
    let (l, why) = level(&t, "Run", json!({ "command": "cargo test $(curl x)", "dir": "/src" }));
    assert_eq!(l, Level::Never);
    assert_eq!(
        why.as_deref(),
        Some(
            "the command line `command` of `Run`: `$` at column 12 is not judgeable: command substitution and variables are never read"
        )
    );
    // Whatever the rows say: `Plain` is `alone` unconditionally.
    assert_eq!(level(&t, "Plain", json!({ "command": "cargo test" })).0, Level::Alone);
    let (l, why) = level(&t, "Plain", json!({ "command": "cargo test; " }));
    assert_eq!(l, Level::Never);
    assert!(why.is_some_and(|w| {
        w.ends_with("the end of the line (column 13) is not judgeable: a separator must stand between two commands")
    }));
    // Not a string at all is an argument error, as for any string parameter.
    let (l, why) = level(&t, "Plain", json!({ "command": 5 }));
    assert_eq!(l, Level::Never);
    assert_eq!(
        why.as_deref(),
        Some("argument `command` of `Plain` must be a shell command line (a string), found an integer")
    );
    let call = Call::new("Coder", "Work", "Run").with_arguments(json!({ "command": "a\u{0}", "dir": "/" }));
    match t.level_of(call.as_ref()) {
        Err(Refused::NotJudgeable(n)) => {
            assert_eq!((n.tool.as_str(), n.param.as_str(), n.error.column), ("Run", "command", 2));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn possible_levels_of_a_shell_tool_include_never() {
    let t = table();
    let run = t.possible_levels("Coder", "Work", "Run").expect("offered");
    assert_eq!(run.into_iter().collect::<Vec<_>>(), [Level::Alone, Level::Propose, Level::Never]);
    // Unconditionally alone, yet a line that is not judgeable is never.
    let plain = t.possible_levels("Coder", "Work", "Plain").expect("offered");
    assert_eq!(plain.into_iter().collect::<Vec<_>>(), [Level::Alone, Level::Never]);
}
