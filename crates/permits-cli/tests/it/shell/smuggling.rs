//! At least sixty smuggling attempts (`smuggling.txt`) against the shipped coding agent's `RunCommand`, each
//! asserted with its exact level through the real `permitc decide` and through the runtime's
//! `decide_table` (and `LevelIndex`, the same evaluator): separators, substitutions, globs, comments,
//! escapes, redirections, groups, reserved words, assignments, quoting tricks, empty parts, controls and
//! non-ASCII look-alikes (spec §3a).

use std::process::{Command, Stdio};

use permits::runtime::{Call, decide_table};
use permits::table::{Level, LevelIndex, Table};
use serde_json::json;

use super::{decode, shown};

/// One case: the line and what it must give.
struct Case {
    number: usize,
    line: String,
    level: Level,
    /// For a line that is not judgeable: the column the refusal names.
    column: Option<usize>,
}

fn cases() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/shell/smuggling.txt");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut cases = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let (expect, line) = raw.split_once('\t').unwrap_or_else(|| panic!("smuggling line {number}: no tab"));
        let (level, column) = match expect.split_once('@') {
            Some((level, column)) => (level, Some(column.parse().unwrap_or_else(|e| panic!("line {number}: {e}")))),
            None => (expect, None),
        };
        let level = Level::from_keyword(level).unwrap_or_else(|| panic!("smuggling line {number}: level {level:?}"));
        assert!(column.is_none() || level == Level::Never, "smuggling line {number}: a column goes with never");
        let line = decode(line).unwrap_or_else(|e| panic!("smuggling line {number}: {e}"));
        cases.push(Case { number, line, level, column });
    }
    cases
}

/// What a decision must say for a case: the level, and for a line that is not judgeable the refusal naming
/// the column; otherwise no refusal.
fn check(case: &Case, level: &str, refusal: Option<&str>, by: &str) -> Option<String> {
    let want_refusal = case.column.map(|c| format!("column {c}"));
    let ok = level == case.level.as_str()
        && match (&want_refusal, refusal) {
            (Some(col), Some(r)) => {
                r.contains("is not judgeable") && (r.contains(&format!("at {col} ")) || r.contains(&format!("({col})")))
            }
            (None, None) => true,
            _ => false,
        };
    (!ok).then(|| {
        format!(
            "line {}: {} ({by})\n   want {}{}\n    got {level} {refusal:?}",
            case.number,
            shown(&case.line),
            case.level,
            want_refusal.map(|c| format!(", not judgeable at {c}")).unwrap_or_default()
        )
    })
}

#[test]
fn smuggling_attempts_get_their_exact_level_through_permitc_decide_and_the_runtime() {
    let cases = cases();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let table_path = super::coding_agent::compiled_table("smuggling");
    let table = Table::load_path(&table_path).expect("the table loads");
    let index = LevelIndex::new(&table);
    let mut failures = Vec::new();
    for case in &cases {
        let args = json!({ "command": case.line });
        // The real binary, as a host in another language asks it.
        let out = Command::new(env!("CARGO_BIN_EXE_permitc"))
            .args(["decide", "--agent", "Coder", "--skill", "FixBug", "--tool", "RunCommand", "--table"])
            .arg(&table_path)
            .arg("--args")
            .arg(args.to_string())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("permitc runs");
        assert!(out.status.success(), "line {}: {}", case.number, String::from_utf8_lossy(&out.stderr));
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        failures.extend(check(case, d["level"].as_str().unwrap_or(""), d["refusal"].as_str(), "permitc decide"));
        // The runtime, and the index an embedding agent asks first.
        let call = Call::new("Coder", "FixBug", "RunCommand").with_arguments(args);
        let runtime = decide_table(&table, &call);
        failures.extend(check(case, runtime.level.as_str(), runtime.refusal.as_deref(), "decide_table"));
        let indexed = index.level_of(call.as_ref());
        assert_eq!(indexed, table.level_of(call.as_ref()), "line {}", case.number);
        assert_eq!(indexed.map_or(Level::Never, |l| l.level), runtime.level, "line {}", case.number);
    }
    let _ = std::fs::remove_file(&table_path);
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
    // Every level occurs, and most attempts are refused as not judgeable.
    for level in [Level::Alone, Level::Propose, Level::Never] {
        assert!(cases.iter().any(|c| c.level == level), "no case is {level}");
    }
    assert!(cases.iter().filter(|c| c.column.is_some()).count() >= 60);
}
