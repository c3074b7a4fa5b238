//! `permitc diff OLD NEW`: each kind of widening, a pure narrowing, neutral changes, tables as input, and
//! the exit codes of `--fail-on-widen`. Every pair is a small package written to a temp folder.

use std::path::{Path, PathBuf};
use std::process::Command;

const BASE: &str = r#"
entity Doc { body, owner }
person Noor { roles [Lead] }
role Lead
tool Read "Read a doc" (doc: Doc) : reads { read Doc }
tool Edit "Edit a doc" (doc: Doc, words: int) { write Doc.body }
tool Wrap "Edit through a wrapper" (doc: Doc) { call Edit }
extern tool Publish "Publish a doc" (doc: Doc) : reaches_out
fn mail() { send email }
tool Share "Share a doc" (doc: Doc) { call mail }
agent Writer {
    sponsor Noor
    may {
        never [Publish]
    }
    skills [Draft]
}
skill Draft {
    tools [Read, Edit, Share]
    route Edit to person Noor
}
"#;

struct Pair {
    dir: PathBuf,
}

impl Pair {
    fn new(name: &str, old: &str, new: &str) -> Pair {
        let dir = std::env::temp_dir().join(format!("permits-diff-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (side, text) in [("old", old), ("new", new)] {
            std::fs::create_dir_all(dir.join(side)).expect("temp dir");
            std::fs::write(dir.join(side).join("p.permits"), text).expect("write");
        }
        Pair { dir }
    }

    fn run(&self, extra: &[&str]) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_permitc"))
            .env("NO_COLOR", "1")
            .arg("diff")
            .arg(self.dir.join("old"))
            .arg(self.dir.join("new"))
            .args(extra)
            .output()
            .expect("permitc runs");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn json(&self) -> serde_json::Value {
        let (code, out) = self.run(&["--format", "json"]);
        assert_eq!(code, 0, "without --fail-on-widen diff exits 0: {out}");
        serde_json::from_str(&out).expect("JSON")
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The one change of a pair, as (agent, skill, tool, direction, details).
fn only_change(v: &serde_json::Value) -> (String, String, Vec<String>) {
    let changes = v["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "exactly one change: {changes:#?}");
    let c = &changes[0];
    let details =
        c["details"].as_array().expect("details").iter().map(|d| d[1].as_str().unwrap_or("").to_string()).collect();
    (c["tool"].as_str().unwrap_or("").to_string(), c["direction"].as_str().unwrap_or("").to_string(), details)
}

fn edited(replace: &str, with: &str) -> String {
    assert!(BASE.contains(replace), "{replace}");
    BASE.replacen(replace, with, 1)
}

#[test]
fn identical_packages_differ_in_nothing() {
    let p = Pair::new("same", BASE, BASE);
    let (code, out) = p.run(&["--fail-on-widen"]);
    assert_eq!(code, 0);
    assert_eq!(out, "no decision changed\n");
}

#[test]
fn a_less_strict_level_widens_and_fails_ci() {
    let p = Pair::new("level", BASE, &edited("never [Publish]", "never [Publish]\n        alone [Edit]"));
    let (tool, dir, details) = only_change(&p.json());
    assert_eq!((tool.as_str(), dir.as_str()), ("Edit", "widening"));
    assert!(details.iter().any(|d| d == "`propose` → `alone`"), "{details:?}");
    let (code, out) = p.run(&["--fail-on-widen"]);
    assert_eq!(code, 1, "--fail-on-widen exits 1 on a widening");
    assert!(out.contains("WIDENING  (Writer, Draft, Edit)"), "{out}");
    assert!(out.contains("because alone [Edit] (p.permits:"), "the rule responsible in NEW, with its line: {out}");
}

#[test]
fn a_new_triple_that_is_not_never_widens_and_a_new_never_one_does_not() {
    let p = Pair::new("added", BASE, &edited("tools [Read, Edit, Share]", "tools [Read, Edit, Share, Wrap]"));
    let v = p.json();
    let (tool, dir, _) = only_change(&v);
    assert_eq!((tool.as_str(), dir.as_str()), ("Wrap", "widening"));
    assert_eq!(v["changes"][0]["kind"], "added");
    let p = Pair::new("added-never", BASE, &edited("tools [Read, Edit, Share]", "tools [Read, Edit, Share, Publish]"));
    let (tool, dir, _) = only_change(&p.json());
    assert_eq!((tool.as_str(), dir.as_str()), ("Publish", "neutral"));
    assert_eq!(p.run(&["--fail-on-widen"]).0, 0);
}

#[test]
fn a_route_moved_from_a_person_to_the_requester_widens() {
    let p = Pair::new("route", BASE, &edited("route Edit to person Noor", "route Edit to requester"));
    let (tool, dir, details) = only_change(&p.json());
    assert_eq!((tool.as_str(), dir.as_str()), ("Edit", "widening"));
    assert_eq!(details, vec!["route `person Noor` → `requester`".to_string()]);
}

#[test]
fn an_effect_that_became_assumed_widens() {
    // Share's `sends` was proven by its body; now it comes from an extern tool's claim.
    let new = edited("fn mail() { send email }", "extern tool Mailer \"Send mail\" () : sends").replacen(
        "tool Share \"Share a doc\" (doc: Doc) { call mail }",
        "tool Share \"Share a doc\" (doc: Doc) { call Mailer }",
        1,
    );
    let p = Pair::new("assumed", BASE, &new);
    let (tool, dir, details) = only_change(&p.json());
    assert_eq!((tool.as_str(), dir.as_str()), ("Share", "widening"));
    assert!(details.iter().any(|d| d.contains("`sends` is now only assumed")), "{details:?}");
}

#[test]
fn a_condition_that_lets_more_through_widens() {
    let old = edited("never [Publish]", "never [Publish]\n        alone [Edit when words <= 10]");
    let new = edited("never [Publish]", "never [Publish]\n        alone [Edit when words <= 1000]");
    let p = Pair::new("condition", &old, &new);
    let (tool, dir, details) = only_change(&p.json());
    assert_eq!(
        (tool.as_str(), dir.as_str()),
        ("Edit", "widening"),
        "conditions changed and some call may be less strict"
    );
    assert!(details[0].contains("(conditions changed)"), "{details:?}");
}

#[test]
fn a_pure_narrowing_is_reported_and_passes_ci() {
    let p = Pair::new("narrow", BASE, &edited("never [Publish]", "never [Publish, Edit]"));
    let (tool, dir, details) = only_change(&p.json());
    assert_eq!((tool.as_str(), dir.as_str()), ("Edit", "narrowing"));
    assert_eq!(details, vec!["`propose` → `never`".to_string()]);
    let (code, out) = p.run(&["--fail-on-widen"]);
    assert_eq!(code, 0, "narrowing does not fail CI");
    assert!(out.starts_with("1 decision changed: 0 widening, 1 narrowing, 0 neutral"), "{out}");
    // A triple that is no longer offered is a narrowing too.
    let removed =
        edited("tools [Read, Edit, Share]", "tools [Read, Share]").replacen("route Edit to person Noor", "", 1);
    let p = Pair::new("removed", BASE, &removed);
    let v = p.json();
    let (tool, dir, _) = only_change(&v);
    assert_eq!((tool.as_str(), dir.as_str()), ("Edit", "narrowing"));
    assert_eq!(v["changes"][0]["kind"], "removed");
}

#[test]
fn compiled_tables_work_as_either_side() {
    let p = Pair::new("tables", BASE, &edited("never [Publish]", "never [Publish]\n        alone [Edit]"));
    let table = p.dir.join("old.json");
    let out = Command::new(env!("CARGO_BIN_EXE_permitc"))
        .args(["compile"])
        .arg(p.dir.join("old"))
        .arg("-o")
        .arg(&table)
        .output()
        .expect("compile runs");
    assert!(out.status.success());
    let run = Command::new(env!("CARGO_BIN_EXE_permitc"))
        .arg("diff")
        .arg(&table)
        .arg(p.dir.join("new"))
        .arg("--fail-on-widen")
        .output()
        .expect("diff runs");
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stdout).contains("WIDENING  (Writer, Draft, Edit)"));
}

#[test]
fn a_tampered_or_missing_table_is_an_io_failure() {
    let p = Pair::new("bad-table", BASE, BASE);
    let bogus = p.dir.join("bogus.json");
    std::fs::write(&bogus, "{\"header\": {\"format\": 1}}").expect("write");
    for side in [bogus.as_path(), Path::new("/nonexistent/permits.json")] {
        let run = Command::new(env!("CARGO_BIN_EXE_permitc"))
            .arg("diff")
            .arg(side)
            .arg(p.dir.join("new"))
            .output()
            .expect("runs");
        assert_eq!(run.status.code(), Some(2), "{}", String::from_utf8_lossy(&run.stderr));
    }
}
