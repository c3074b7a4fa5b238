//! The holes of issue #14 that need the compiler or the real `permitc` (the others are in
//! `crates/permits-runtime/tests/runtime/holes.rs`), and the check that the runtime's compiled fixture is current.

use std::path::PathBuf;
use std::process::Command;

type R = Result<(), Box<dyn std::error::Error>>;

fn fixtures() -> PathBuf {
    crate::root().join("crates/permits-runtime/tests/fixtures")
}

/// Runs `permitc` with `args`; (exit code, stdout, stderr).
fn permitc(args: &[&str]) -> Result<(i32, String, String), Box<dyn std::error::Error>> {
    let out = Command::new(env!("CARGO_BIN_EXE_permitc")).args(args).env("NO_COLOR", "1").output()?;
    Ok((out.status.code().unwrap_or(-1), String::from_utf8(out.stdout)?, String::from_utf8(out.stderr)?))
}

#[test]
fn the_runtime_holes_fixture_is_current() -> R {
    let package = fixtures().join("holes");
    let (code, table, stderr) = permitc(&["compile", &package.to_string_lossy(), "-o", "-"])?;
    assert_eq!(code, 0, "{stderr}");
    let kept = std::fs::read_to_string(fixtures().join("holes.table.json"))?;
    assert!(
        kept == table,
        "crates/permits-runtime/tests/fixtures/holes.table.json is out of date: run `permitc compile crates/permits-runtime/tests/fixtures/holes -o crates/permits-runtime/tests/fixtures/holes.table.json`"
    );
    Ok(())
}
