//! A skill's own lists (`shared/cases/skill-grants.md`), outcome 4: unknown names are errors at compile time,
//! and `never` at run time.

use std::fs;
use std::path::PathBuf;

use permits::runtime::{AdmitAll, Call, ProposalRequest, Refusal, RunOutcome, Runtime};
use permits::table::Level;
use serde_json::{Value, json};

use crate::registry::without_tests;

type R = Result<(), Box<dyn std::error::Error>>;

fn package() -> PathBuf {
    crate::root().join("policies/skill-grants")
}

fn table() -> Result<permits::table::Table, String> {
    permits::compile::compile_path(&package())
}

fn call(skill: &str, tool: &str, args: Value) -> Call {
    Call::new("Coder", skill, tool).with_arguments(args)
}

/// Compiles a copy of the package with one text edit: the table, or the rendered diagnostics.
fn edited(
    name: &str,
    file: &str,
    from: &str,
    to: &str,
) -> Result<Result<permits::table::Table, String>, Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("permits-unknown-names-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let mut found = false;
    for entry in fs::read_dir(package())? {
        let entry = entry?;
        let mut text = without_tests(&fs::read_to_string(entry.path())?);
        if entry.file_name() == file && text.contains(from) {
            text = text.replacen(from, to, 1);
            found = true;
        }
        fs::write(dir.join(entry.file_name()), text)?;
    }
    let compiled = permits::compile::compile_path(&dir);
    let _ = fs::remove_dir_all(&dir);
    if !found {
        return Err(format!("`{from}` is not in `{file}`").into());
    }
    Ok(compiled)
}

#[test]
fn outcome_4_unknown_names_are_errors_at_compile_time_and_never_at_run_time() -> R {
    let err = edited(
        "unknown-tool",
        "agents.permits",
        "tools [ReadFile, EditFile, RunTests]",
        "tools [ReadFile, EditFiel, RunTests]",
    )?
    .err()
    .ok_or("a skill naming an unknown tool compiled")?;
    assert!(err.contains("EditFiel") && err.contains("EditFile"), "{err}");
    let err = edited("unknown-skill", "agents.permits", "skills [Refactor, Release]", "skills [Refactor, Releese]")?
        .err()
        .ok_or("an agent naming an unknown skill compiled")?;
    assert!(err.contains("Releese"), "{err}");
    let rt = Runtime::new(table()?, AdmitAll);
    let d = rt.decide(&call("Hotfix", "ReadFile", json!({"path": "README.md"})))?;
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("unknown skill")));
    let err = rt
        .call(&ProposalRequest::new(call("Hotfix", "ReadFile", json!({"path": "README.md"})), "k", "read"), |_| {
            RunOutcome::Done(json!("read"))
        });
    assert_eq!(err.err().and_then(|e| e.refusal()), Some(Refusal::Never));
    Ok(())
}
