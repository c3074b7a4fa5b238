//! A skill's own lists (`shared/cases/skill-grants.md`), outcomes 1–4, on the compiled
//! `policies/skill-grants`; outcome 3 recompiles an edited copy of the package.

use std::fs;

use permits::runtime::{
    AdmitAll, ApproveMode, Call, NewRule, ProposalRequest, Refusal, RunOutcome, Runtime, Scope, Status, WorkFor,
};
use permits::table::{Level, Table};
use serde_json::json;

type R = Result<(), Box<dyn std::error::Error>>;

fn package() -> std::path::PathBuf {
    crate::root().join("policies/skill-grants")
}

fn table() -> Result<Table, String> {
    permits::compile::compile_path(&package())
}

/// The text without its `test "…" { … }` blocks: they state the levels of the unedited policy, which an
/// edited copy deliberately changes.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("\ntest \"").map(|i| i + 1).or_else(|| rest.starts_with("test \"").then_some(0)) {
        out.push_str(&rest[..start]);
        match rest[start..].find('}') {
            Some(end) => rest = &rest[start + end + 1..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// Compiles a copy of the package with one text edit (`file`, `from` → `to`); `Err` with the rendered
/// diagnostics when it does not compile.
fn edited(name: &str, file: &str, from: &str, to: &str) -> Result<Result<Table, String>, Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("permits-runtime-{name}-{}", std::process::id()));
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
    if !found {
        return Err(format!("`{from}` is not in `{file}` of the package").into());
    }
    let compiled = permits::compile::compile_path(&dir);
    let _ = fs::remove_dir_all(&dir);
    Ok(compiled)
}

fn call(skill: &str, tool: &str, args: serde_json::Value) -> Call {
    Call::new("Coder", skill, tool).with_arguments(args)
}

#[test]
fn outcome_1_the_skill_only_tightens() -> R {
    let t = table()?;
    let rt = Runtime::new(t.clone(), AdmitAll);
    let levels = rt.levels("Coder", "Refactor");
    let expected = [("ReadFile", Level::Alone), ("EditFile", Level::Propose), ("RunTests", Level::Never)];
    assert_eq!(levels, expected.map(|(t, l)| (t.to_string(), l)));
    let d = rt.decide(&call("Refactor", "Deploy", json!({"environment": "production"})))?;
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("not one of the skill's tools")));
    let d = rt.decide(&call("Refactor", "EditFile", json!({"path": "src/lib.rs", "patch": "…"})))?;
    assert_eq!(d.level, Level::Propose);
    Ok(())
}

#[test]
fn outcome_2_propose_every_time_takes_no_standing_rule() -> R {
    let rt = Runtime::new(table()?, AdmitAll);
    let deploy = call("Release", "Deploy", json!({"environment": "production"}));
    assert_eq!(rt.decide(&deploy)?.level, Level::ProposeEveryTime);
    let err = rt
        .allow_alone(&NewRule {
            agent: "Coder".into(),
            tool: "Deploy".into(),
            skill: Some("Release".into()),
            work_for: WorkFor::Person("Priya".into()),
            by: "Priya".into(),
            scope: Scope::AnyArguments,
            expires_at: None,
        })
        .err()
        .ok_or("a rule was made")?;
    assert_eq!(err.refusal(), Some(Refusal::Rule));
    assert!(err.to_string().contains("`Deploy` is `propose_every_time` for `Coder` in `Release`"), "{err}");
    // "Approve, always like this" is refused as a whole: no rule and no grant.
    let p = rt.propose(&ProposalRequest::new(deploy, "release-1", "ship 1.2"))?;
    assert_eq!(p.decider.persons, ["Priya"]);
    let err = rt.approve(&p.id, "Priya", &p.fingerprint, ApproveMode::AlwaysLikeThis).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::Rule));
    assert_eq!(rt.proposal(&p.id)?.status, Status::Waiting);
    assert!(rt.rules()?.is_empty());
    Ok(())
}

#[test]
fn outcome_3_an_edit_of_the_skills_lists_makes_its_waiting_proposals_stale_only() -> R {
    let before = table()?;
    let after = edited(
        "release-never",
        "agents.permits",
        "propose_every_time [Deploy]",
        "propose_every_time [Deploy]\n        never [RunTests]",
    )??;
    let digest = |t: &Table, skill: &str, tool: &str| t.entry("Coder", skill, tool).map(|e| e.entry_digest.clone());
    assert_ne!(digest(&before, "Release", "RunTests"), digest(&after, "Release", "RunTests"));
    assert_eq!(digest(&before, "Refactor", "EditFile"), digest(&after, "Refactor", "EditFile"));

    let rt = Runtime::new(before, AdmitAll);
    let tests = rt.propose(&ProposalRequest::new(
        call("Release", "RunTests", json!({"filter": "all"})),
        "rel-1",
        "check the release",
    ))?;
    let edit = rt.propose(&ProposalRequest::new(
        call("Refactor", "EditFile", json!({"path": "src/lib.rs", "patch": "rename"})),
        "ref-1",
        "rename a function",
    ))?;
    rt.replace_table(after)?;
    let mut runs = 0;
    let err = rt
        .approve_and_run(&tests.id, "Priya", &tests.fingerprint, ApproveMode::Once, |_| {
            runs += 1;
            RunOutcome::Done(json!("ran"))
        })
        .err()
        .ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Stale));
    assert_eq!(rt.proposal(&tests.id)?.status, Status::Stale);
    let done = rt.approve_and_run(&edit.id, "Priya", &edit.fingerprint, ApproveMode::Once, |_| {
        runs += 1;
        RunOutcome::Done(json!("edited"))
    })?;
    assert_eq!(done.proposal.status, Status::Done);
    assert_eq!(runs, 1);
    Ok(())
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
