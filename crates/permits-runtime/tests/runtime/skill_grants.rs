//! A skill's own lists (`shared/cases/skill-grants.md`), outcomes 1–4, on the compiled
//! `policies/skill-grants`; outcome 3 recompiles an edited copy of the package.

use permits_runtime::table::{Level, Table};
use permits_runtime::{
    AdmitAll, ApproveMode, Call, NewRule, ProposalRequest, Refusal, RunOutcome, Runtime, Scope, Status, WorkFor,
};
use serde_json::json;

type R = Result<(), Box<dyn std::error::Error>>;

fn table() -> Result<Table, String> {
    crate::fixture("skill-grants")
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
            mode: None,

            via: Vec::new(),
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
    let after = crate::fixture("skill-grants-release-never")?;
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
