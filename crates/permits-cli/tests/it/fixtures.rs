//! The runtime's fixture tables (`crates/permits-runtime/tests/fixtures/*.json`) are what the compiler
//! writes today for the packages and edits of `registry.rs`. Run with `PERMITS_BLESS_FIXTURES=1` to rewrite
//! them after a deliberate change (and review the diff).

use std::fs;
use std::path::PathBuf;

use crate::registry::{FIXTURES, Fixture, without_tests};

fn fixtures_dir() -> PathBuf {
    crate::root().join("crates/permits-runtime/tests/fixtures")
}

/// The fixture's table as the compiler writes it: the package as it is, or a copy without its `test`
/// blocks with the edits applied.
fn compile(f: &Fixture) -> String {
    let package = crate::root().join(f.package);
    if f.edits.is_empty() {
        return permits::compile::compile_path(&package).unwrap_or_else(|e| panic!("{}: {e}", f.name)).to_pretty_json();
    }
    let dir = std::env::temp_dir().join(format!("permits-fixture-{}-{}", f.name, std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp folder");
    let mut applied = vec![false; f.edits.len()];
    for entry in fs::read_dir(&package).expect("package") {
        let entry = entry.expect("entry");
        let mut text = without_tests(&fs::read_to_string(entry.path()).expect("text"));
        for (i, (file, from, to)) in f.edits.iter().enumerate() {
            if entry.file_name() == *file && text.contains(from) {
                text = text.replacen(from, to, 1);
                applied[i] = true;
            }
        }
        fs::write(dir.join(entry.file_name()), text).expect("write");
    }
    let table = permits::compile::compile_path(&dir);
    let _ = fs::remove_dir_all(&dir);
    assert!(applied.iter().all(|a| *a), "{}: an edit's text is not in its file", f.name);
    table.unwrap_or_else(|e| panic!("{}: {e}", f.name)).to_pretty_json()
}

#[test]
fn every_fixture_table_is_current() {
    let bless = std::env::var_os("PERMITS_BLESS_FIXTURES").is_some();
    let mut stale = Vec::new();
    for f in FIXTURES {
        let path = fixtures_dir().join(format!("{}.json", f.name));
        let expected = compile(f);
        if fs::read_to_string(&path).ok().as_deref() != Some(expected.as_str()) {
            if bless {
                fs::write(&path, &expected).expect("write the fixture");
            } else {
                stale.push(f.name);
            }
        }
    }
    let mut listed: Vec<String> = FIXTURES.iter().map(|f| format!("{}.json", f.name)).collect();
    listed.sort();
    let mut present: Vec<String> = fs::read_dir(fixtures_dir())
        .expect("fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    present.sort();
    assert!(
        stale.is_empty(),
        "stale fixtures {stale:?}: run `PERMITS_BLESS_FIXTURES=1 cargo test -p permits-cli --test it fixtures` and review the diff"
    );
    assert_eq!(present, listed, "every fixture file is in registry.rs, and every entry has its file");
}
