//! Kinds of failure that must be impossible (`shared/cases/failure-classes.md`), the runtime's share:
//! kinds 3, 5, 6, 7, 8, 9, 10, 12 and 13, on the compiled `policies/workshop` (and edited copies of it), as fixture tables.

use std::sync::{Arc, Mutex};

use permits_runtime::table::{Level, LoadError, Table};
use permits_runtime::{
    AdmitAll, ApproveMode, Authority, Call, Handled, ManualClock, NewRule, Principal, Proposal, ProposalRequest,
    Refusal, RunContext, RunOutcome, Runtime, RuntimeError, Scope, Status, VersionQuery, Versions, WorkFor,
    decide_table, fingerprint,
};
use serde_json::{Value, json};

type R = Result<(), Box<dyn std::error::Error>>;

const DAY: u64 = 24 * 3600;

fn table() -> Result<Table, String> {
    crate::fixture("workshop")
}

/// A minimal workshop host: the repair's revision, a count of runs, and a price only a manager or the
/// Helper account may set.
#[derive(Clone, Default)]
struct Host {
    revision: Arc<Mutex<u64>>,
    runs: Arc<Mutex<u64>>,
}

impl Host {
    fn runs(&self) -> u64 {
        self.runs.lock().map(|r| *r).unwrap_or(u64::MAX)
    }
    fn bump(&self) {
        if let Ok(mut r) = self.revision.lock() {
            *r += 1;
        }
    }
    fn run(&self, _: &RunContext<'_>) -> RunOutcome {
        match self.runs.lock() {
            Ok(mut r) => {
                *r += 1;
                RunOutcome::Done(json!({"run": *r}))
            }
            Err(_) => RunOutcome::Unknown("locked".into()),
        }
    }
}

impl Authority for Host {
    fn admits(&self, who: Principal<'_>, tool: &str, _: &Value) -> Result<(), String> {
        match (who, tool) {
            (Principal::Person("Mia"), "SetPrice") => Err("only a manager may set a price".into()),
            _ => Ok(()),
        }
    }
}

impl Versions for Host {
    fn covered_version(&self, q: VersionQuery<'_>) -> Option<String> {
        (q.id == "T-7").then(|| self.revision.lock().map(|r| format!("r{}", *r + 1)).ok()).flatten()
    }
}

fn runtime(table: Table) -> (Runtime, Host, ManualClock) {
    let host = Host::default();
    let clock = ManualClock::at(1_767_225_600);
    let rt = Runtime::new(table, host.clone()).with_versions(host.clone()).with_clock(clock.clone());
    (rt, host, clock)
}

fn set_price(price: i64, person: &str) -> Call {
    Call::new("Estimator", "EstimateRepair", "SetPrice")
        .with_arguments(json!({"repair": "T-7", "price": price}))
        .for_person(person)
}

fn propose(rt: &Runtime, price: i64, person: &str, key: &str) -> Result<Proposal, RuntimeError> {
    rt.propose(&ProposalRequest::new(set_price(price, person), key, "a price"))
}

fn scrap() -> Call {
    Call::new("Estimator", "EstimateRepair", "ScrapRepair").with_arguments(json!({"repair": "T-7"})).for_person("Noor")
}

#[test]
fn kind_3_nothing_makes_a_never_tool_run() -> R {
    let (rt, host, _) = runtime(table()?);
    let err = rt.propose(&ProposalRequest::new(scrap(), "k", "scrap it")).err().ok_or("proposed")?;
    assert_eq!(err.refusal(), Some(Refusal::Never));
    assert!(rt.proposals()?.is_empty());
    assert_eq!(rt.run_alone(&scrap(), |c| host.run(c)).err().and_then(|e| e.refusal()), Some(Refusal::Never));
    let rule = NewRule {
        agent: "Estimator".into(),
        tool: "ScrapRepair".into(),
        skill: Some("EstimateRepair".into()),
        work_for: WorkFor::Everybody,
        by: "Noor".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: None,

        via: Vec::new(),
    };
    assert_eq!(rt.allow_alone(&rule).err().and_then(|e| e.refusal()), Some(Refusal::Rule));
    // A decider's yes with a valid fingerprint, then the policy says never: nothing runs.
    let p = propose(&rt, 45, "Noor", "k")?;
    rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once)?;
    rt.replace_table(crate::fixture("workshop-never-setprice")?)?;
    let err = rt.execute(&p.id, None, |c| host.run(c)).err().ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Stale));
    assert_eq!(rt.decide(&set_price(45, "Noor"))?.level, Level::Never);
    assert_eq!(host.runs(), 0);
    Ok(())
}

#[test]
fn kind_5_unknown_means_never() -> R {
    let t = table()?;
    let args = json!({"repair": "T-7", "price": 45});
    let cases = [
        (Call::new("Estimatr", "EstimateRepair", "SetPrice"), "unknown agent"),
        (Call::new("Estimator", "EstimateRepairs", "SetPrice"), "unknown skill"),
        // A tool the host added after the table was compiled.
        (Call::new("Estimator", "EstimateRepair", "EmailCustomer"), "unknown tool"),
        (Call::new("Estimator", "PriceFleetRepair", "NoteRepair"), "not one of the skill's tools"),
    ];
    for (call, reason) in cases {
        let d = decide_table(&t, &call.with_arguments(args.clone()));
        assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some(reason)));
    }
    let d =
        decide_table(&t, &set_price(45, "Mia").with_arguments(json!({"repair": "T-7", "price": 45, "discount": 5})));
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("`SetPrice` has no parameter `discount`")));
    let d = decide_table(&t, &set_price(45, "Eve"));
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("unknown person `Eve`")));
    Ok(())
}

#[test]
fn kind_6_any_edit_gives_a_new_fingerprint() -> R {
    let t = table()?;
    let digest =
        t.entry("Estimator", "EstimateRepair", "SetPrice").map(|e| e.entry_digest.clone()).ok_or("no entry")?;
    let base = fingerprint(&set_price(45, "Mia"), &digest, Some("r1"), None);
    let others = [
        fingerprint(&set_price(46, "Mia"), &digest, Some("r1"), None),
        fingerprint(
            &set_price(45, "Mia").with_arguments(json!({"repair": "T-8", "price": 45})),
            &digest,
            Some("r1"),
            None,
        ),
        fingerprint(&set_price(45, "Mia"), &digest, Some("r2"), None),
        fingerprint(&set_price(45, "Mia"), &"0".repeat(64), Some("r1"), None),
        fingerprint(&set_price(45, "Mia"), &digest, Some("r1"), Some("https://elsewhere.example")),
        fingerprint(&Call { tool: "NoteRepair".into(), ..set_price(45, "Mia") }, &digest, Some("r1"), None),
        fingerprint(&Call { skill: "PriceFleetRepair".into(), ..set_price(45, "Mia") }, &digest, Some("r1"), None),
    ];
    for other in &others {
        assert_ne!(&base, other);
    }
    // A change of the triple's entry (the skill's lists) makes a waiting proposal stale.
    let (rt, host, _) = runtime(t);
    let p = propose(&rt, 45, "Noor", "k")?;
    rt.replace_table(crate::fixture("workshop-entry-change")?)?;
    let err =
        rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |c| host.run(c)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Stale));
    assert_eq!(host.runs(), 0);
    Ok(())
}

#[test]
fn kind_7_identical_proposals_are_decided_independently() -> R {
    let (rt, host, _) = runtime(table()?);
    let a = propose(&rt, 45, "Noor", "work-a")?;
    let b = propose(&rt, 45, "Noor", "work-b")?;
    assert_ne!(a.id, b.id);
    assert_eq!(a.fingerprint, b.fingerprint);
    rt.approve(&a.id, "Noor", &a.fingerprint, ApproveMode::Once)?;
    assert_eq!(rt.proposal(&b.id)?.status, Status::Waiting);
    assert_eq!(rt.execute(&b.id, None, |c| host.run(c)).err().and_then(|e| e.refusal()), Some(Refusal::NotApproved));
    assert!(rt.execute(&a.id, None, |c| host.run(c))?.ran);
    assert!(!rt.execute(&a.id, None, |c| host.run(c))?.ran);
    assert_eq!(host.runs(), 1);
    rt.reject(&b.id, "Noor", "one is enough")?;
    assert_eq!(rt.proposal(&a.id)?.status, Status::Done);
    Ok(())
}

#[test]
fn kind_8_approve_once_is_not_approve_always() -> R {
    let (rt, host, _) = runtime(table()?);
    let p = propose(&rt, 45, "Noor", "k1")?;
    rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |c| host.run(c))?;
    assert!(rt.rules()?.is_empty());
    let next = rt.call(&ProposalRequest::new(set_price(45, "Noor"), "k2", "again"), |c| host.run(c))?;
    assert!(matches!(next, Handled::Proposed(_)));
    assert_eq!(host.runs(), 1);
    Ok(())
}

#[test]
fn kind_9_everything_is_rechecked_at_execution() -> R {
    let (rt, host, _) = runtime(table()?);
    let p = propose(&rt, 45, "Noor", "k1")?;
    rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once)?;
    host.bump();
    assert_eq!(rt.execute(&p.id, None, |c| host.run(c)).err().and_then(|e| e.refusal()), Some(Refusal::Stale));
    let q = propose(&rt, 45, "Noor", "k2")?;
    rt.approve(&q.id, "Noor", &q.fingerprint, ApproveMode::Once)?;
    rt.replace_table(crate::fixture("workshop-never-setprice")?)?;
    assert_eq!(rt.execute(&q.id, None, |c| host.run(c)).err().and_then(|e| e.refusal()), Some(Refusal::Stale));
    assert_eq!(host.runs(), 0);
    Ok(())
}

#[test]
fn kind_10_a_standing_rule_follows_the_tools_content_not_its_name() -> R {
    let (rt, host, _) = runtime(table()?);
    let rule = rt.allow_alone(&NewRule {
        agent: "Estimator".into(),
        tool: "SetPrice".into(),
        skill: None,
        work_for: WorkFor::Person("Noor".into()),
        by: "Noor".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: None,

        via: Vec::new(),
    })?;
    assert_eq!(rule.covered.len(), 2);
    assert_eq!(rt.decide(&set_price(45, "Noor"))?.level, Level::Alone);
    rt.replace_table(crate::fixture("workshop-new-body")?)?;
    let d = rt.decide(&set_price(45, "Noor"))?;
    assert_eq!((d.level, d.standing_rule), (Level::Propose, None));
    let handled = rt.call(&ProposalRequest::new(set_price(45, "Noor"), "k", "price"), |c| host.run(c))?;
    assert!(matches!(handled, Handled::Proposed(_)));
    assert_eq!(host.runs(), 0);
    Ok(())
}

#[test]
fn kind_12_silence_is_not_consent() -> R {
    let (rt, host, clock) = runtime(table()?);
    let p = propose(&rt, 45, "Mia", "k")?;
    clock.advance(7 * DAY);
    assert_eq!(rt.expire_due()?, vec![p.id.clone()]);
    assert_eq!(rt.proposal(&p.id)?.status, Status::Expired);
    let err =
        rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |c| host.run(c)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::ProposalExpired));
    assert_eq!(
        rt.execute(&p.id, None, |c| host.run(c)).err().and_then(|e| e.refusal()),
        Some(Refusal::ProposalExpired)
    );
    // A shorter lifetime from the host.
    let q = rt.propose(&ProposalRequest::new(set_price(46, "Mia"), "k2", "price").with_lifetime(60))?;
    clock.advance(61);
    assert_eq!(rt.proposal(&q.id)?.status, Status::Expired);
    assert_eq!(host.runs(), 0);
    Ok(())
}

#[test]
fn kind_13_a_tampered_or_malformed_table_is_refused() -> R {
    let text = table()?.to_pretty_json();
    assert!(Table::load(text.as_bytes()).is_ok());
    let mut value: Value = serde_json::from_str(&text)?;
    let level =
        value.pointer_mut("/entries/Estimator/EstimateRepair/ScrapRepair/level").ok_or("no level for ScrapRepair")?;
    assert_eq!(*level, json!("never"));
    *level = json!("alone");
    let tampered = serde_json::to_vec(&value)?;
    assert!(matches!(Table::load(&tampered), Err(LoadError::DigestMismatch { .. })));

    let mut extra: Value = serde_json::from_str(&text)?;
    if let Some(entry) =
        extra.pointer_mut("/entries/Estimator/EstimateRepair/ScrapRepair").and_then(Value::as_object_mut)
    {
        entry.insert("levle".into(), json!("alone"));
    }
    assert!(matches!(Table::load(&serde_json::to_vec(&extra)?), Err(LoadError::Malformed(_))));
    let other_format = text.replacen("\"format\": 1", "\"format\": 99", 1);
    assert!(matches!(Table::load(other_format.as_bytes()), Err(LoadError::UnknownFormat { found: 99, .. })));
    for bad in [&b""[..], b"null", b"[]", b"{}", b"{\"header\": {\"format\": 1}}", &text.as_bytes()[..text.len() / 3]] {
        assert!(Table::load(bad).is_err());
    }
    Ok(())
}

#[test]
fn kind_13_malformed_calls_and_host_failures_fail_closed() -> R {
    let t = table()?;
    let odd = [
        json!(null),
        json!([]),
        json!("T-7"),
        json!({"repair": null, "price": 45}),
        json!({"repair": "T-7", "price": 1e30}),
        json!({"repair": "T-7", "price": 18446744073709551615u64}),
        json!({"repair": ["T-7"], "price": {"cents": 45}}),
    ];
    for args in odd {
        let d = decide_table(&t, &set_price(45, "Mia").with_arguments(args));
        assert_eq!(d.level, Level::Never);
        assert!(d.refusal.is_some());
    }
    // The host cannot say the covered version: nothing is proposed.
    let rt = Runtime::new(t.clone(), AdmitAll);
    assert_eq!(propose(&rt, 45, "Noor", "k").err().and_then(|e| e.refusal()), Some(Refusal::UnknownVersion));
    // The host's authority refuses the person it runs for: failed, final.
    let (rt, host, _) = runtime(t);
    let p = propose(&rt, 45, "Mia", "k")?;
    let err =
        rt.approve_and_run(&p.id, "Mia", &p.fingerprint, ApproveMode::Once, |c| host.run(c)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Authority));
    assert_eq!(rt.proposal(&p.id)?.status, Status::Failed);
    assert_eq!(host.runs(), 0);
    // Unknown records are errors, not panics.
    assert!(matches!(rt.approve("P-999", "Noor", "x", ApproveMode::Once), Err(RuntimeError::UnknownProposal(_))));
    assert!(matches!(rt.revoke_rule("R-9", "Noor", "why"), Err(RuntimeError::UnknownRule(_))));
    Ok(())
}
