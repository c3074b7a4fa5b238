//! The execution protocol for hosts that run tools themselves (the approval service's): claim, confirm or
//! refuse, the outcome (spec §5 "Execute", §5a "Idempotent execution"), on the hardening shop
//! (`holes.table.json`): a spend routed to a buyer, a standing rule that makes small orders alone.

use std::path::Path;
use std::sync::{Arc, Mutex};

use permits_runtime::table::{Level, Table};
use permits_runtime::{
    AdmitAll, ApproveMode, AuthorityRefusal, Call, CallClaim, Claiming, ManualClock, NewRule, ProposalRequest, Refusal,
    RunOutcome, Runtime, RuntimeError, Scope, Status, VersionQuery, Versions, WorkFor,
};
use serde_json::{Value, json};

type R = Result<(), Box<dyn std::error::Error>>;

fn shop() -> Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/holes.table.json");
    Table::load_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn runtime() -> Runtime {
    Runtime::new(shop(), AdmitAll).with_clock(ManualClock::at(1_767_225_600))
}

fn order(sku: &str, amount: u64) -> Call {
    Call::new("Clerkbot", "Reorder", "PlaceOrder")
        .with_arguments(json!({"sku": sku, "quantity": 1, "amount": amount}))
        .for_person("Sam")
}

fn accepted(operation: &str, amount: u64) -> Value {
    json!({"operation": operation, "amount": amount, "outcome": "accepted"})
}

fn supplies(rt: &Runtime) -> Result<(u64, u64), RuntimeError> {
    let b = rt.budget("Supplies")?;
    Ok((b.reserved, b.spent))
}

fn refusal<T: std::fmt::Debug>(result: Result<T, RuntimeError>) -> Result<(Refusal, String), String> {
    match result {
        Err(e) => Ok((e.refusal().ok_or_else(|| format!("not a refusal: {e}"))?, e.to_string())),
        Ok(v) => Err(format!("expected a refusal, got {v:?}")),
    }
}

/// An order of 900 for Sam, approved by Max (a buyer): granted, 900 reserved.
fn granted(rt: &Runtime, key: &str) -> Result<String, RuntimeError> {
    let p = rt.propose(&ProposalRequest::new(order("vanilla", 900), key, "the freezer runs low"))?;
    rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    Ok(p.id)
}

#[test]
fn claim_confirm_receipt_runs_once_as_the_approver() -> R {
    let rt = runtime();
    let id = granted(&rt, "order-1")?;
    let claimed = rt.claim(&id, "tok-a", None)?;
    assert_eq!((claimed.status, claimed.confirmed), (Status::Granted, false));
    assert_eq!((claimed.runs_as.as_str(), claimed.accounts.as_slice()), ("Max", &["Clerkbot".to_string()][..]));
    assert_eq!(claimed.operation, "order-1:P-1");
    assert_eq!(claimed.claim_token.as_deref(), Some("tok-a"));
    // A retry with the same token is the same answer; another token is refused.
    assert_eq!(rt.claim(&id, "tok-a", None)?, claimed);
    let (r, message) = refusal(rt.claim(&id, "tok-b", None))?;
    assert_eq!(r, Refusal::Claimed);
    assert_eq!(message, "proposal `P-1` was executed under another claim: its grant is consumed; nothing runs");
    assert_eq!(refusal(rt.confirm(&id, "tok-b"))?.0, Refusal::Claimed);
    // A receipt before the confirmation is refused.
    let (r, message) = refusal(rt.record_outcome(&id, "tok-a", RunOutcome::Done(accepted("order-1:P-1", 900))))?;
    assert_eq!(r, Refusal::NotClaimed);
    assert!(message.contains("not confirmed"), "{message}");
    let sending = rt.confirm(&id, "tok-a")?;
    assert_eq!((sending.status, sending.confirmed), (Status::Sending, true));
    assert_eq!(rt.confirm(&id, "tok-a")?, sending, "a retried confirmation is the same answer");
    assert_eq!(rt.proposal(&id)?.ran_as.as_deref(), Some("Max"));
    let done = rt.record_outcome(&id, "tok-a", RunOutcome::Done(accepted("order-1:P-1", 900)))?;
    assert_eq!(done.status, Status::Done);
    assert_eq!(supplies(&rt)?, (0, 900));
    // A retried receipt changes nothing, even with another outcome.
    let again = rt.record_outcome(&id, "tok-a", RunOutcome::Failed("lost".into()))?;
    assert_eq!(again, done);
    assert_eq!(supplies(&rt)?, (0, 900));
    // An embedded execute of a done proposal returns the stored receipt and runs nothing.
    let ex = rt.execute(&id, None, |_| panic!("a done proposal runs nothing"))?;
    assert_eq!((ex.ran, ex.proposal.receipt), (false, Some(accepted("order-1:P-1", 900))));
    Ok(())
}

#[test]
fn a_refused_claim_fails_final_and_releases_the_reservation() -> R {
    let rt = runtime();
    let id = granted(&rt, "order-1")?;
    rt.claim(&id, "tok-a", None)?;
    assert_eq!(supplies(&rt)?, (900, 0));
    let failed = rt.refuse_claim(&id, "tok-a", AuthorityRefusal::Person, "only a manager may order")?;
    assert_eq!(failed.status, Status::Failed);
    assert_eq!(
        failed.reason.as_deref(),
        Some("`Clerkbot` runs `PlaceOrder` on behalf of `Max`, who may not: only a manager may order")
    );
    assert_eq!(supplies(&rt)?, (0, 0));
    assert_eq!(rt.refuse_claim(&id, "tok-a", AuthorityRefusal::Person, "again")?, failed, "the same answer");
    assert_eq!(refusal(rt.confirm(&id, "tok-a"))?.0, Refusal::Status);
    assert_eq!(refusal(rt.claim(&id, "tok-b", None))?.0, Refusal::Claimed);
    assert_eq!(refusal(rt.approve(&id, "Max", &rt.proposal(&id)?.fingerprint, ApproveMode::Once))?.0, Refusal::Status);
    // A confirmed claim cannot be refused afterwards: it ran or runs.
    let id = granted(&rt, "order-2")?;
    rt.claim(&id, "tok-c", None)?;
    rt.confirm(&id, "tok-c")?;
    assert_eq!(refusal(rt.refuse_claim(&id, "tok-c", AuthorityRefusal::Agent, "no"))?.0, Refusal::NotClaimed);
    assert_eq!(rt.proposal(&id)?.status, Status::Sending);
    Ok(())
}

#[test]
fn claims_are_rechecked_like_execute() -> R {
    let rt = runtime();
    let p = rt.propose(&ProposalRequest::new(order("vanilla", 900), "order-1", "low").with_destination("https://a"))?;
    // Not approved: nothing is claimed.
    assert_eq!(refusal(rt.claim(&p.id, "tok-a", Some("https://a")))?.0, Refusal::NotApproved);
    rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    assert_eq!(refusal(rt.claim(&p.id, "tok-a", Some("https://b")))?.0, Refusal::Destination);
    // Revoked after the claim: the confirmation is refused, and the reservation was released.
    rt.claim(&p.id, "tok-a", Some("https://a"))?;
    rt.revoke(&p.id, "Lucy", "not now")?;
    assert_eq!(refusal(rt.confirm(&p.id, "tok-a"))?.0, Refusal::Status);
    assert_eq!(supplies(&rt)?, (0, 0));
    // A table installed between claim and confirmation: the claim is dropped, and claimed again.
    let id = granted(&rt, "order-2")?;
    rt.claim(&id, "tok-b", None)?;
    let mut t = shop();
    t.package.grant_lifetime_seconds += 1;
    t.seal();
    rt.replace_table(t)?;
    let (r, message) = refusal(rt.confirm(&id, "tok-b"))?;
    assert_eq!(r, Refusal::NotClaimed);
    assert!(message.starts_with("the table changed since proposal `P-2` was claimed"), "{message}");
    assert_eq!(rt.claim(&id, "tok-c", None)?.claim_token.as_deref(), Some("tok-c"));
    assert_eq!(rt.confirm(&id, "tok-c")?.status, Status::Sending);
    Ok(())
}

/// The workshop's repair T-7, whose revision moves.
#[derive(Clone)]
struct Revision(Arc<Mutex<u64>>);

impl Versions for Revision {
    fn covered_version(&self, q: VersionQuery<'_>) -> Option<String> {
        (q.id == "T-7").then(|| self.0.lock().map(|r| format!("r{r}")).ok()).flatten()
    }
}

#[test]
fn a_changed_covered_version_is_stale_at_the_claim() -> R {
    let revision = Revision(Arc::new(Mutex::new(1)));
    let rt = Runtime::new(crate::fixture("workshop")?, AdmitAll).with_versions(revision.clone());
    let call = Call::new("Estimator", "EstimateRepair", "SetPrice")
        .with_arguments(json!({"repair": "T-7", "price": 45}))
        .for_person("Mia");
    let p = rt.propose(&ProposalRequest::new(call, "mia-1", "pads and a cable"))?;
    rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once)?;
    *revision.0.lock().map_err(|_| "poisoned")? = 2;
    let (r, message) = refusal(rt.claim(&p.id, "tok-a", None))?;
    assert_eq!(r, Refusal::Stale);
    assert!(message.contains("the covered version is `r2` instead of `r1`"), "{message}");
    assert_eq!(rt.proposal(&p.id)?.status, Status::Stale);
    Ok(())
}

fn small_orders_alone(rt: &Runtime) -> Result<String, RuntimeError> {
    let rule = rt.allow_alone(&NewRule {
        agent: "Clerkbot".into(),
        tool: "PlaceOrder".into(),
        skill: Some("Reorder".into()),
        work_for: WorkFor::Person("Sam".into()),
        by: "Lucy".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: None,

        via: Vec::new(),
    })?;
    Ok(rule.id)
}

#[test]
fn an_alone_run_is_claimed_confirmed_and_settled() -> R {
    let rt = runtime();
    let rule = small_orders_alone(&rt)?;
    let request = ProposalRequest::new(order("mint", 300), "order-1", "a tub of mint");
    let claimed = rt.claim_alone(&request, "tok-a")?;
    assert_eq!((claimed.id.as_str(), claimed.status, claimed.runs_as.as_str()), ("A-1", Status::Granted, "Sam"));
    assert_eq!(claimed.operation, "A-1");
    assert_eq!(supplies(&rt)?, (300, 0));
    assert_eq!(rt.rules()?.iter().find(|r| r.id == rule).map(|r| r.uses), Some(1));
    // The lost answer: the same token and call answer the same, and admit nothing more.
    assert_eq!(rt.claim_alone(&request, "tok-a")?, claimed);
    assert_eq!(supplies(&rt)?, (300, 0));
    let other = ProposalRequest::new(order("mint", 400), "order-1", "two tubs");
    assert_eq!(refusal(rt.claim_alone(&other, "tok-a"))?.0, Refusal::Claimed);
    // Settlement follows a send: not before the confirmation.
    assert_eq!(refusal(rt.settle("A-1", &accepted("A-1", 300)))?.0, Refusal::NotSent);
    assert_eq!(rt.confirm("A-1", "tok-a")?.status, Status::Sending);
    let unknown = rt.record_outcome("A-1", "tok-a", RunOutcome::Done(json!({"queued": true})))?;
    assert_eq!(unknown.status, Status::Unknown, "not conclusive: the reservation stays");
    assert_eq!(supplies(&rt)?, (300, 0));
    rt.settle("A-1", &accepted("A-1", 300))?;
    assert_eq!(supplies(&rt)?, (0, 300));
    let settled = rt.execution("A-1")?;
    assert_eq!((settled.status, settled.receipt), (Status::Done, Some(accepted("A-1", 300))));
    Ok(())
}

/// `claim_alone_confirmed`: the claim and the confirmation in one transaction — `sending` at once, with the
/// same reservation, rule use and events as the two steps; a retry answers the same; a claim made without
/// the confirmation is confirmed by the confirmed call's retry; what must be proposed is still refused.
#[test]
fn an_alone_run_claimed_and_confirmed_at_once_is_sending() -> R {
    let rt = runtime();
    let rule = small_orders_alone(&rt)?;
    let request = ProposalRequest::new(order("mint", 300), "order-1", "a tub of mint");
    let claimed = rt.claim_alone_confirmed(&request, "tok-a")?;
    assert_eq!((claimed.id.as_str(), claimed.status, claimed.runs_as.as_str()), ("A-1", Status::Sending, "Sam"));
    assert!(claimed.confirmed);
    assert_eq!(supplies(&rt)?, (300, 0));
    assert_eq!(rt.rules()?.iter().find(|r| r.id == rule).map(|r| r.uses), Some(1));
    assert_eq!(rt.claim_alone_confirmed(&request, "tok-a")?, claimed);
    assert_eq!(supplies(&rt)?, (300, 0));
    let outcomes: Vec<String> = rt
        .audit_chain()?
        .into_iter()
        .filter(|e| e.event.proposal.as_deref() == Some("A-1"))
        .map(|e| e.event.outcome)
        .collect();
    assert_eq!(outcomes, ["claimed", "sending"]);
    rt.record_outcome("A-1", "tok-a", RunOutcome::Done(json!({"queued": true})))?;
    rt.settle("A-1", &accepted("A-1", 300))?;
    assert_eq!(supplies(&rt)?, (0, 300));
    // Claimed in two steps, the first answer lost: the confirmed call's retry confirms it.
    let second = ProposalRequest::new(order("mint", 300), "order-2", "another tub");
    assert_eq!(rt.claim_alone(&second, "tok-b")?.status, Status::Granted);
    assert_eq!(rt.claim_alone_confirmed(&second, "tok-b")?.status, Status::Sending);
    let (r, _) =
        refusal(rt.claim_alone_confirmed(&ProposalRequest::new(order("mint", 900), "order-3", "big"), "tok-c"))?;
    assert_eq!(r, Refusal::MustPropose);
    Ok(())
}

/// The events of the audit chain as (kind, outcome, execution), for comparing two ways of doing the same.
fn chain_steps(rt: &Runtime) -> Result<Vec<(String, String, Option<String>)>, RuntimeError> {
    Ok(rt
        .audit_chain()?
        .into_iter()
        .map(|e| (format!("{:?}", e.event.kind), e.event.outcome, e.event.proposal))
        .collect())
}

/// `decide_and_claim`: the decision and the claim of an alone call in one transaction record what
/// `decide` then `claim_alone_confirmed` record, event for event, and leave the same run, reservation and
/// rule use; a call that must be proposed is answered `Propose` and makes nothing; an unknown tool `Never`.
#[test]
fn a_call_decided_and_claimed_at_once_records_what_the_two_steps_record() -> R {
    let (one, two) = (runtime(), runtime());
    let (rule, _) = (small_orders_alone(&one)?, small_orders_alone(&two)?);
    let request = ProposalRequest::new(order("mint", 300), "order-1", "a tub of mint");
    let CallClaim::Alone { decision, execution } =
        one.decide_and_claim(&request, "tok-a", Claiming::ClaimAndConfirm)?
    else {
        return Err("a small order under the rule is alone".into());
    };
    assert_eq!((decision.level, decision.standing_rule.as_deref()), (Level::Alone, Some(rule.as_str())));
    assert_eq!((execution.id.as_str(), execution.status, execution.confirmed), ("A-1", Status::Sending, true));
    // The same in two steps on another runtime.
    assert_eq!(two.decide(&request.call.clone().in_task("order-1"))?.level, Level::Alone);
    let claimed = two.claim_alone_confirmed(&request, "tok-a")?;
    assert_eq!(claimed, *execution);
    assert_eq!(chain_steps(&one)?, chain_steps(&two)?);
    let steps = chain_steps(&one)?;
    let tail: Vec<(&str, &str)> = steps[steps.len() - 4..].iter().map(|(k, o, _)| (k.as_str(), o.as_str())).collect();
    assert_eq!(tail, [("Decision", "alone"), ("Task", "bound"), ("Execution", "claimed"), ("Execution", "sending")]);
    assert_eq!(supplies(&one)?, supplies(&two)?);
    assert_eq!(supplies(&one)?, (300, 0));
    assert_eq!(one.rules()?.iter().find(|r| r.id == rule).map(|r| r.uses), Some(1));
    // A retry with the same token answers the same run.
    let again = one.decide_and_claim(&request, "tok-a", Claiming::ClaimAndConfirm)?;
    assert_eq!(again, CallClaim::Alone { decision: decision.clone(), execution: execution.clone() });
    // Claim only: granted, not confirmed.
    let claim_only = ProposalRequest::new(order("mint", 300), "order-2", "another tub");
    match one.decide_and_claim(&claim_only, "tok-b", Claiming::Claim)? {
        CallClaim::Alone { execution, .. } => {
            assert_eq!((execution.status, execution.confirmed), (Status::Granted, false));
        }
        other => return Err(format!("expected alone, got {other:?}").into()),
    }
    // Over the rule's reach: proposed, nothing claimed or reserved.
    let big = ProposalRequest::new(order("mint", 900), "order-3", "a big order");
    match one.decide_and_claim(&big, "tok-c", Claiming::ClaimAndConfirm)? {
        CallClaim::Propose(d) => assert_eq!(d.level, Level::Propose),
        other => return Err(format!("expected propose, got {other:?}").into()),
    }
    assert!(matches!(one.execution("A-3"), Err(RuntimeError::UnknownExecution(_))));
    assert_eq!(supplies(&one)?, (600, 0));
    let unknown = ProposalRequest::new(Call::new("Clerkbot", "Reorder", "Shred").for_person("Sam"), "order-4", "");
    match one.decide_and_claim(&unknown, "tok-d", Claiming::ClaimAndConfirm)? {
        CallClaim::Never(d) => assert!(d.refusal_message().contains("Shred"), "{}", d.refusal_message()),
        other => return Err(format!("expected never, got {other:?}").into()),
    }
    Ok(())
}

/// `claim_if_alone`: an alone call is decided and claimed as `decide_and_claim` does it, event for event;
/// a call that is not alone (proposed, never) answers `None` and leaves the store as it was — no event, no
/// reservation, no run — so that the host that makes it another way records it once.
#[test]
fn a_call_claimed_only_if_alone_records_nothing_when_it_is_not() -> R {
    let (one, two) = (runtime(), runtime());
    let (rule, _) = (small_orders_alone(&one)?, small_orders_alone(&two)?);
    let request = ProposalRequest::new(order("mint", 300), "order-1", "a tub of mint");
    let Some(claimed) = one.claim_if_alone(&request, "tok-a", Claiming::ClaimAndConfirm)? else {
        return Err("a small order under the rule is alone".into());
    };
    let CallClaim::Alone { execution, .. } = two.decide_and_claim(&request, "tok-a", Claiming::ClaimAndConfirm)? else {
        return Err("the same call on the other runtime is alone".into());
    };
    assert_eq!(claimed, *execution);
    assert_eq!((claimed.id.as_str(), claimed.status, claimed.confirmed), ("A-1", Status::Sending, true));
    assert_eq!(chain_steps(&one)?, chain_steps(&two)?);
    assert_eq!(one.rules()?.iter().find(|r| r.id == rule).map(|r| r.uses), Some(1));
    // A retry with the same token answers the same run.
    assert_eq!(one.claim_if_alone(&request, "tok-a", Claiming::ClaimAndConfirm)?, Some(claimed));
    // Over the rule's reach (propose), and a tool the table does not have (never): nothing at all.
    let before = (chain_steps(&one)?, supplies(&one)?);
    let big = ProposalRequest::new(order("mint", 900), "order-3", "a big order");
    assert_eq!(one.claim_if_alone(&big, "tok-c", Claiming::ClaimAndConfirm)?, None);
    let unknown = ProposalRequest::new(Call::new("Clerkbot", "Reorder", "Shred").for_person("Sam"), "order-4", "");
    assert_eq!(one.claim_if_alone(&unknown, "tok-d", Claiming::ClaimAndConfirm)?, None);
    assert_eq!((chain_steps(&one)?, supplies(&one)?), before);
    assert!(matches!(one.execution("A-2"), Err(RuntimeError::UnknownExecution(_))));
    assert!(one.proposals()?.is_empty());
    // The call made the other way afterwards is recorded once: its decision, then the proposal.
    let proposal = one.propose(&big)?;
    assert_eq!(proposal.status, Status::Waiting);
    let steps = chain_steps(&one)?;
    assert_eq!(steps.len(), before.0.len() + 2, "{steps:?}");
    Ok(())
}

#[test]
fn an_alone_run_refused_by_the_host_releases_its_reservation() -> R {
    let rt = runtime();
    small_orders_alone(&rt)?;
    let claimed = rt.claim_alone(&ProposalRequest::new(order("mint", 300), "order-1", "mint"), "tok-a")?;
    let failed = rt.refuse_claim(&claimed.id, "tok-a", AuthorityRefusal::Agent, "the shop account is locked")?;
    assert_eq!(failed.status, Status::Failed);
    assert_eq!(
        failed.reason.as_deref(),
        Some("the agent's account `Clerkbot` may not run `PlaceOrder`: the shop account is locked")
    );
    assert_eq!(supplies(&rt)?, (0, 0));
    assert_eq!(refusal(rt.confirm(&claimed.id, "tok-a"))?.0, Refusal::Status);
    // What must be proposed is never claimed alone, and makes no run.
    let (r, _) = refusal(rt.claim_alone(&ProposalRequest::new(order("mint", 900), "order-2", "big"), "tok-b"))?;
    assert_eq!(r, Refusal::MustPropose);
    assert!(matches!(rt.execution("A-2"), Err(RuntimeError::UnknownExecution(_))));
    Ok(())
}

#[cfg(feature = "sqlite")]
#[test]
fn claims_and_runs_survive_a_restart_and_never_run_twice() -> R {
    use permits_runtime::SqliteStore;
    let dir = std::env::temp_dir().join(format!("permits-claims-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("ledger.db");
    let open = || -> Result<Runtime, Box<dyn std::error::Error>> {
        Ok(Runtime::new(shop(), AdmitAll)
            .with_clock(ManualClock::at(1_767_225_600))
            .with_store(SqliteStore::open(&db)?))
    };
    let (id, run): (String, permits_runtime::Claimed) = {
        let rt = open()?;
        small_orders_alone(&rt)?;
        let id = granted(&rt, "order-1")?;
        rt.claim(&id, "tok-a", None)?;
        rt.confirm(&id, "tok-a")?;
        let run = rt.claim_alone(&ProposalRequest::new(order("mint", 300), "order-2", "mint"), "tok-r")?;
        (id, run)
    };
    let rt = open()?;
    assert_eq!(rt.execution(&id)?.status, Status::Sending);
    assert_eq!(refusal(rt.claim(&id, "tok-b", None))?.0, Refusal::Claimed);
    assert_eq!(refusal(rt.confirm(&id, "tok-b"))?.0, Refusal::Claimed);
    assert_eq!(rt.claim_alone(&ProposalRequest::new(order("mint", 300), "order-2", "mint"), "tok-r")?, run);
    assert_eq!(supplies(&rt)?, (1200, 0));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `Runtime::waiting` (the inbox's "waiting for me"): only the waiting proposals, oldest first, one past its
/// expiry made `expired` and left out; the same on the memory store and on an SQLite file, where it is read
/// through the index on the status (and again after the file is reopened).
#[cfg(feature = "sqlite")]
#[test]
fn waiting_lists_only_waiting_proposals_on_every_store() -> R {
    let dir = std::env::temp_dir().join(format!("permits-waiting-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("ledger.db");
    let clock = ManualClock::at(1_767_225_600);
    let on_file = || -> Result<Runtime, Box<dyn std::error::Error>> {
        Ok(Runtime::new(shop(), AdmitAll)
            .with_clock(clock.clone())
            .with_store(permits_runtime::SqliteStore::open(&db)?))
    };
    for rt in [Runtime::new(shop(), AdmitAll).with_clock(clock.clone()), on_file()?] {
        let ids: Vec<String> = ["o-1", "o-2", "o-3", "o-4"]
            .iter()
            .map(|key| rt.propose(&ProposalRequest::new(order("vanilla", 900), *key, "low")).map(|p| p.id))
            .collect::<Result<_, _>>()?;
        let p2 = rt.proposal(&ids[1])?;
        rt.approve(&p2.id, "Max", &p2.fingerprint, ApproveMode::Once)?;
        rt.reject(&ids[2], "Max", "not now")?;
        let waiting: Vec<String> = rt.waiting()?.into_iter().map(|p| p.id).collect();
        assert_eq!(waiting, [ids[0].clone(), ids[3].clone()]);
        assert_eq!(rt.waiting_for("Max")?.len(), 2);
        assert!(rt.waiting_for("Sam")?.is_empty(), "Sam asked; Max decides");
    }
    assert_eq!(on_file()?.waiting()?.len(), 2, "the file reopened");
    // Past their expiry they are expired as they are read, and listed no more.
    clock.advance(shop().package.proposal_lifetime_seconds + 1);
    let rt = on_file()?;
    assert!(rt.waiting()?.is_empty());
    assert_eq!(rt.proposal("P-1")?.status, Status::Expired);
    assert_eq!(rt.proposals()?.iter().filter(|p| p.status == Status::Waiting).count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_claim_never_confirmed_for_ten_minutes_gives_way_to_another_host() -> R {
    let clock = ManualClock::at(1_767_225_600);
    let rt = Runtime::new(shop(), AdmitAll).with_clock(clock.clone());
    let id = granted(&rt, "order-1")?;
    rt.claim(&id, "tok-a", None)?;
    // The host that claimed went away before confirming. Within the claim's lifetime the grant stays bound.
    clock.advance(permits_runtime::limits::CLAIM_LIFETIME_SECONDS - 1);
    assert_eq!(refusal(rt.claim(&id, "tok-b", None))?.0, Refusal::Claimed);
    clock.advance(1);
    let claimed = rt.claim(&id, "tok-b", None)?;
    assert_eq!((claimed.claim_token.as_deref(), claimed.status), (Some("tok-b"), Status::Granted));
    // The old token holds nothing now: its confirmation is refused, and nothing runs twice.
    let (r, message) = refusal(rt.confirm(&id, "tok-a"))?;
    assert_eq!(r, Refusal::Claimed, "{message}");
    assert_eq!(rt.confirm(&id, "tok-b")?.status, Status::Sending);
    let done = rt.record_outcome(&id, "tok-b", RunOutcome::Done(accepted("order-1:P-1", 900)))?;
    assert_eq!(done.status, Status::Done);
    assert_eq!(supplies(&rt)?, (0, 900));
    let dropped: Vec<String> = rt
        .audit_chain()?
        .into_iter()
        .filter(|e| e.event.outcome == "claim dropped")
        .filter_map(|e| e.event.reason)
        .collect();
    assert_eq!(
        dropped,
        ["the claim `tok-a` was not confirmed within 600 s of 1767225600: it is dropped, and the grant claimed anew"]
    );
    // A confirmed claim never expires: it may have run.
    let second = granted(&rt, "order-2")?;
    rt.claim(&second, "tok-c", None)?;
    rt.confirm(&second, "tok-c")?;
    clock.advance(10 * permits_runtime::limits::CLAIM_LIFETIME_SECONDS);
    assert_eq!(refusal(rt.claim(&second, "tok-d", None))?.0, Refusal::Claimed);
    Ok(())
}
