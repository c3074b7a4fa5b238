//! Modes, task-scoped approval (spec §3c, §5a) on `policies/research-desk`: the direct-call halves of
//! `shared/cases/delegation-modes.md` outcomes 4, 5 and 6 (the delegated halves come with delegation), and the
//! pipeline of one call, one test per step boundary.

use permits::runtime::{
    AdmitAll, ApproveMode, Authorization, Call, EventKind, Handled, MemorySink, NewRule, ProposalRequest, RunOutcome,
    Runtime, Scope, Status, WorkFor,
};
use permits::table::{CallRef, Level, Table};
use serde_json::json;

type R = Result<(), Box<dyn std::error::Error>>;

fn desk() -> Result<Table, Box<dyn std::error::Error>> {
    Ok(permits::compile::compile_path(&crate::root().join("policies/research-desk"))?)
}

fn runtime() -> Result<(Runtime, MemorySink), Box<dyn std::error::Error>> {
    let sink = MemorySink::new();
    Ok((Runtime::new(desk()?, AdmitAll).with_audit(sink.clone()), sink))
}

fn edit() -> Call {
    Call::new("Coder", "FixBug", "EditFile")
        .with_arguments(json!({"path": "src/lib.rs", "text": "fix"}))
        .for_person("Ben")
}

fn read() -> Call {
    Call::new("Coder", "FixBug", "ReadFile").with_arguments(json!({"path": "src/lib.rs"})).for_person("Ben")
}

fn push() -> Call {
    Call::new("Coder", "FixBug", "GitPush").with_arguments(json!({"branch": "fix-1"})).for_person("Ben")
}

fn mail(to: &str) -> Call {
    Call::new("Researcher", "Look", "SendMail").with_arguments(json!({"to": to})).for_person("Ben")
}

fn done(_: &permits::runtime::RunContext<'_>) -> RunOutcome {
    RunOutcome::Done(json!("ok"))
}

/// Outcome 4: in task `T-plan` (mode Plan) EditFile is `never`, ReadFile `alone`; a call in `T-plan` that names
/// no mode, or another mode, is `never` ("not this task's mode").
#[test]
fn outcome_4_a_plan_task_changes_nothing_and_keeps_its_mode() -> R {
    let (rt, _) = runtime()?;
    let ran = rt.run_alone(&read().in_mode("Plan").in_task("T-plan"), done)?;
    assert_eq!(ran.decision.level, Level::Alone);
    assert_eq!(rt.task("T-plan")?.and_then(|t| t.mode).as_deref(), Some("Plan"));
    let d = rt.decide(&edit().in_mode("Plan").in_task("T-plan"))?;
    assert_eq!(d.level, Level::Never);
    assert!(d.reasons.iter().any(|r| r.rule == "changes: never"), "{:?}", d.reasons);
    for call in [read().in_task("T-plan"), read().in_mode("Unattended").in_task("T-plan")] {
        let d = rt.decide(&call)?;
        assert_eq!(d.level, Level::Never);
        let why = d.refusal.unwrap_or_default();
        assert!(why.starts_with("not this task's mode (`T-plan` runs in mode `Plan`"), "{why}");
    }
    // Offered to the model in Plan: only what is not `never` there.
    let offered: Vec<String> =
        rt.offered_tools_in("Coder", "FixBug", Some("Plan")).into_iter().map(|t| t.name).collect();
    assert_eq!(offered, ["ReadFile"]);
    assert_eq!(
        rt.levels_in("Coder", "FixBug", Some("Plan")),
        [("ReadFile".to_string(), Level::Alone), ("EditFile".into(), Level::Never), ("GitPush".into(), Level::Never)]
    );
    assert_eq!(rt.offered_tools("Coder", "FixBug").len(), 3);
    assert!(rt.offered_tools_in("Coder", "FixBug", Some("Plam")).is_empty());
    Ok(())
}

/// Outcome 5: in `T-night` (mode Unattended) EditFile is `alone`; a proposal decided by the requester is `never`
/// ("unattended: nobody to ask"); GitPush, routed to the Maintainers queue (Ada, not Ben), stays `propose`.
#[test]
fn outcome_5_unattended_asks_nobody_but_keeps_what_others_decide() -> R {
    let (rt, _) = runtime()?;
    let ran = rt.run_alone(&edit().in_mode("Unattended").in_task("T-night"), done)?;
    assert_eq!(ran.decision.level, Level::Alone);
    let d = rt.decide(&mail("a@x.example").in_mode("Unattended").in_task("T-night-2"))?;
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("unattended: nobody to ask")));
    let p = rt.propose(&ProposalRequest::new(push().in_mode("Unattended"), "T-night", "ship the fix"))?;
    assert_eq!(
        (p.level, p.status, p.decider.persons.clone()),
        (Level::Propose, Status::Waiting, vec!["Ada".to_string()])
    );
    assert_eq!(p.mode.as_deref(), Some("Unattended"));
    // The same mail in no mode is a proposal for Ben.
    assert_eq!(rt.decide(&mail("a@x.example"))?.level, Level::Propose);
    Ok(())
}

/// Outcome 6 (direct half): approved *for this task* with *these arguments*, the same call again in `T1` runs
/// alone (audit: task rule); another argument is proposed; in `T2` it is proposed; after `end_task(T1)` it is
/// proposed again; for Ada under `T1` it is `never`. With *any arguments* both run alone in `T1`.
#[test]
fn outcome_6_a_task_rule_lives_exactly_as_long_as_its_task() -> R {
    let (rt, sink) = runtime()?;
    let a = mail("a@x.example");
    let p = rt.propose(&ProposalRequest::new(a.clone(), "T1", "tell a"))?;
    rt.approve_and_run(&p.id, "Ben", &p.fingerprint, ApproveMode::ForThisTask { any_arguments: false }, done)?;
    let rule = rt.rules()?.pop().ok_or("no rule")?;
    assert_eq!((rule.task.as_deref(), rule.mode.as_deref()), (Some("T1"), None));
    assert!(matches!(&rule.scope, Scope::TheseArguments(_)));
    let again = rt.call(&ProposalRequest::new(a.clone(), "T1", "tell a again"), done)?;
    let Handled::Ran(ran) = again else { return Err("not run alone".into()) };
    assert!(ran.decision.task_rule);
    let authorized: Vec<_> =
        sink.events().into_iter().filter(|e| e.kind == EventKind::Execution).filter_map(|e| e.authorized_by).collect();
    assert!(authorized.contains(&Authorization::TaskRule(rule.id.clone())), "{authorized:?}");
    assert_eq!(rt.decide(&mail("b@x.example").in_task("T1"))?.level, Level::Propose);
    assert_eq!(rt.decide(&a.clone().in_task("T2"))?.level, Level::Propose);
    let for_ada = rt.decide(&Call { requester: Some("Ada".into()), ..a.clone() }.in_task("T1"))?;
    assert_eq!(for_ada.level, Level::Never);
    assert!(for_ada.refusal.unwrap_or_default().starts_with("not this task's person"));
    rt.end_task("T1")?;
    assert_eq!(rt.decide(&a.clone().in_task("T1"))?.level, Level::Propose);

    // Any arguments, in a new task.
    let p = rt.propose(&ProposalRequest::new(a.clone(), "T5", "tell a"))?;
    rt.approve(&p.id, "Ben", &p.fingerprint, ApproveMode::ForThisTask { any_arguments: true })?;
    assert_eq!(rt.decide(&a.clone().in_task("T5"))?.level, Level::Alone);
    assert_eq!(rt.decide(&mail("b@x.example").in_task("T5"))?.level, Level::Alone);
    assert_eq!(rt.decide(&mail("b@x.example").in_task("T6"))?.level, Level::Propose);
    Ok(())
}

/// §3c step 5 after step 2: a standing rule does not lift a mode's `never`, and a rule made in no mode does not
/// apply in a mode (nor one made in a mode outside it).
#[test]
fn a_rule_applies_only_in_its_own_mode_and_never_lifts_a_modes_never() -> R {
    let (rt, _) = runtime()?;
    let rule = |mode: Option<&str>| NewRule {
        agent: "Researcher".into(),
        tool: "SendMail".into(),
        skill: Some("Look".into()),
        work_for: WorkFor::Person("Ben".into()),
        by: "Ben".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: mode.map(str::to_string),
        via: Vec::new(),
    };
    rt.allow_alone(&rule(None))?;
    assert_eq!(rt.decide(&mail("a@x.example"))?.level, Level::Alone);
    // Plan says `sends: never`: no rule lifts it, and the rule of no mode is not Plan's.
    let d = rt.decide(&mail("a@x.example").in_mode("Plan"))?;
    assert_eq!((d.level, d.standing_rule), (Level::Never, None));
    // Unattended adds no layer, but the rule was made in no mode: it is a proposal for the requester there,
    // so step 7 makes it `never`.
    assert_eq!(rt.decide(&mail("a@x.example").in_mode("Unattended"))?.level, Level::Never);
    rt.allow_alone(&rule(Some("Unattended")))?;
    assert_eq!(rt.decide(&mail("a@x.example").in_mode("Unattended"))?.level, Level::Alone);
    // A rule in Plan cannot be made: SendMail is `never` there.
    assert!(rt.allow_alone(&rule(Some("Plan"))).is_err());
    assert!(rt.allow_alone(&rule(Some("Plam"))).is_err());
    Ok(())
}

/// The evaluator in a mode: an unknown mode is `never` with its name; choosing a mode never loosens a call
/// (every triple of the package, every mode); the fingerprint covers the mode (outcome 9's mode half).
#[test]
fn choosing_a_mode_never_loosens_and_the_fingerprint_covers_it() -> R {
    let table = desk()?;
    let none = json!({});
    let call =
        |agent, skill, tool, mode| CallRef { agent, skill, tool, arguments: &none, requester: None, mode, via: &[] };
    let err = table.level_of(call("Coder", "FixBug", "ReadFile", Some("Plam"))).err().ok_or("decided")?;
    assert_eq!(err.to_string(), "unknown mode `Plam`");
    let mut checked = 0;
    for (agent, skills) in &table.entries {
        for (skill, tools) in skills {
            for tool in tools.keys() {
                let base = table.possible_levels(agent, skill, tool).map_err(|e| e.to_string())?;
                for mode in table.modes.keys() {
                    let moded = table.possible_levels_in(agent, skill, tool, Some(mode)).map_err(|e| e.to_string())?;
                    assert!(moded.first() >= base.first(), "{agent}.{skill}.{tool} in {mode}: {moded:?} < {base:?}");
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 16);
    let (rt, _) = runtime()?;
    let direct = rt.propose(&ProposalRequest::new(push(), "T7", "ship"))?;
    let moded = rt.propose(&ProposalRequest::new(push().in_mode("Unattended"), "T8", "ship"))?;
    assert_ne!(direct.fingerprint, moded.fingerprint);
    Ok(())
}

/// §3c step 6 before step 7: in an `unattended` mode an automatic grant (within the allowance) still proceeds,
/// asking nobody; a spend over the allowance would wait for the requester, so it is `never`.
#[test]
fn an_automatic_grant_proceeds_in_an_unattended_mode() -> R {
    let dir = std::env::temp_dir().join(format!("permits-modes-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("night.permits"),
        r#"
budget Credits { currency: "USD", unit: cents, ceiling: 10000, alone_up_to: 500 }
mode Night "Nobody is at the keyboard." { unattended }
person Pat
agent Buyer "Buys credits." {
    sponsor Pat
    may { spends: propose }
    skills [Buying]
}
skill Buying "Buy credits." { tools [BuyCredits] }
tool BuyCredits "Buy credits" (amount: money) { spend Credits by amount }
"#,
    )?;
    let table = permits::compile::compile_path(&dir)?;
    std::fs::remove_dir_all(&dir)?;
    let rt = Runtime::new(table, AdmitAll);
    let buy = |amount: i64| {
        Call::new("Buyer", "Buying", "BuyCredits")
            .with_arguments(json!({"amount": amount}))
            .for_person("Pat")
            .in_mode("Night")
    };
    assert_eq!(rt.decide(&buy(300))?.level, Level::Propose);
    let p = rt.propose(&ProposalRequest::new(buy(300), "N1", "top up"))?;
    assert_eq!(p.status, Status::Granted);
    assert_eq!(p.grant.map(|g| g.basis), Some(permits::runtime::Basis::Automatic));
    let d = rt.decide(&buy(900))?;
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("unattended: nobody to ask")));
    assert!(rt.propose(&ProposalRequest::new(buy(900), "N2", "top up")).is_err());
    Ok(())
}

/// `diff` treats a mode's rows like any layer's (spec §3c): loosening a mode's entry is a widening.
#[test]
fn loosening_a_mode_is_a_widening() -> R {
    let package = |plan: &str| -> Result<Table, Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("permits-modes-diff-{}-{}", std::process::id(), plan.len()));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join("p.permits"),
            format!(
                r#"
mode Plan "Look." {{ may {{ {plan} }} }}
person Pat
agent Coder "Fixes bugs." {{
    sponsor Pat
    may {{ changes: alone }}
    skills [FixBug]
}}
skill FixBug "Fix one bug." {{ tools [EditFile] }}
tool EditFile "Edit a file" (path: string) {{ write Repo.files }}
entity Repo {{ files }}
"#
            ),
        )?;
        let table = permits::compile::compile_path(&dir)?;
        std::fs::remove_dir_all(&dir)?;
        Ok(table)
    };
    let (strict, loose) = (package("changes: never")?, package("changes: propose")?);
    let changes = permits::diff::diff(&strict, &loose);
    let change = changes.iter().find(|c| c.tool == "EditFile").ok_or("no change")?;
    assert_eq!(change.direction, permits::diff::Direction::Widening);
    assert!(change.details.iter().any(|(_, d)| d == "in mode `Plan`: `never` → `propose`"), "{:?}", change.details);
    let back = permits::diff::diff(&loose, &strict);
    assert_eq!(
        back.iter().find(|c| c.tool == "EditFile").map(|c| c.direction),
        Some(permits::diff::Direction::Narrowing)
    );
    Ok(())
}
