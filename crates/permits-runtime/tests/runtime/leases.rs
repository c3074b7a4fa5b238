//! Task leases (spec §5a "Leases") on the hardening shop (`holes.table.json`: orders routed to a buyer,
//! `StockLevel` alone): the execution protocol under a takeover, alone calls, renewal and release, bad
//! input. The two-host fencing scenario over every store is in the store conformance suite
//! (`a_taken_over_lease_fences_the_old_holder`); across OS processes, with the supplier, on an SQLite file
//! and on PostgreSQL in `fencing.rs`.

use std::path::Path;

use permits_runtime::table::Table;
use permits_runtime::{
    AdmitAll, ApproveMode, Call, EventKind, Lease, MAX_LEASE_SECONDS, ManualClock, ProposalRequest, Refusal,
    RunOutcome, Runtime, RuntimeError, Status,
};
use serde_json::{Value, json};

type R = Result<(), Box<dyn std::error::Error>>;

const START: u64 = 1_767_225_600;

fn shop() -> Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/holes.table.json");
    Table::load_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One runtime (one store) and its clock: two hosts in one process are two [`Runtime::holding`] views.
fn runtime() -> (Runtime, ManualClock) {
    let clock = ManualClock::at(START);
    (Runtime::new(shop(), AdmitAll).with_clock(clock.clone()), clock)
}

fn order(amount: u64) -> Call {
    Call::new("Clerkbot", "Reorder", "PlaceOrder")
        .with_arguments(json!({"sku": "vanilla", "quantity": 1, "amount": amount}))
        .for_person("Sam")
}

fn accepted(operation: &str, amount: u64) -> Value {
    json!({"operation": operation, "amount": amount, "outcome": "accepted"})
}

fn refusal<T: std::fmt::Debug>(result: Result<T, RuntimeError>) -> Result<(Refusal, String), String> {
    match result {
        Err(e) => Ok((e.refusal().ok_or_else(|| format!("not a refusal: {e}"))?, e.to_string())),
        Ok(v) => Err(format!("expected a refusal, got {v:?}")),
    }
}

/// Host A takes `order-1`, proposes an order of 900 and Max approves it; then A stalls past its lease and B
/// takes the task over. Returns (A's lease, B's lease, the proposal's id).
fn taken_over(rt: &Runtime, clock: &ManualClock, a_claims: bool) -> Result<(Lease, Lease, String), RuntimeError> {
    let a = rt.take_task("order-1", "host-a", 30)?;
    let p = rt.holding(&a).propose(&ProposalRequest::new(order(900), "order-1", "the freezer runs low"))?;
    rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    if a_claims {
        rt.holding(&a).claim(&p.id, "tok-a", None)?;
    }
    clock.advance(30);
    let b = rt.take_task("order-1", "host-b", 30)?;
    Ok((a, b, p.id))
}

#[test]
fn an_unconfirmed_claim_of_a_fenced_host_gives_way_to_the_new_holder() -> R {
    let (rt, clock) = runtime();
    let (a, b, id) = taken_over(&rt, &clock, true)?;
    assert_eq!((a.fence, b.fence), (1, 2));
    // A wakes up: its confirmation is refused, so nothing it claimed starts.
    let (r, message) = refusal(rt.holding(&a).confirm(&id, "tok-a"))?;
    assert_eq!(r, Refusal::NotHolder);
    assert_eq!(
        message,
        "this host no longer holds the task `order-1`: `host-b` holds it now (fence 2); `host-a` may not act under it"
    );
    // B claims the grant A never confirmed: A's claim is dropped, B's runs once.
    let claimed = rt.holding(&b).claim(&id, "tok-b", None)?;
    assert_eq!(claimed.claim_token.as_deref(), Some("tok-b"));
    assert_eq!(rt.proposal(&id)?.host_claim.and_then(|c| c.fence), Some(2));
    assert_eq!(rt.holding(&b).confirm(&id, "tok-b")?.status, Status::Sending);
    let done = rt.holding(&b).record_outcome(&id, "tok-b", RunOutcome::Done(accepted("order-1:P-1", 900)))?;
    assert_eq!(done.status, Status::Done);
    // A's old token holds nothing now.
    assert_eq!(refusal(rt.record_outcome(&id, "tok-a", RunOutcome::Done(json!("ran"))))?.0, Refusal::Claimed);
    let budget = rt.budget("Supplies")?;
    assert_eq!((budget.reserved, budget.spent), (0, 900), "one order, settled once");
    let dropped: Vec<String> = rt
        .audit_chain()?
        .into_iter()
        .filter(|e| e.event.outcome == "claim dropped")
        .filter_map(|e| e.event.reason)
        .collect();
    assert_eq!(
        dropped,
        ["the unconfirmed claim `tok-a` was made before `host-b` took task `order-1` (fence 2): it is dropped"]
    );
    Ok(())
}

#[test]
fn a_confirmed_claim_keeps_its_run_and_its_report_after_a_takeover() -> R {
    let (rt, clock) = runtime();
    let a = rt.take_task("order-1", "host-a", 30)?;
    let p = rt.holding(&a).propose(&ProposalRequest::new(order(900), "order-1", "the freezer runs low"))?;
    rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    rt.holding(&a).claim(&p.id, "tok-a", None)?;
    assert_eq!(rt.holding(&a).confirm(&p.id, "tok-a")?.status, Status::Sending);
    clock.advance(45);
    let b = rt.take_task("order-1", "host-b", 30)?;
    // It may have run: B cannot claim it again.
    assert_eq!(refusal(rt.holding(&b).claim(&p.id, "tok-b", None))?.0, Refusal::Claimed);
    // A's report of what ran is recorded (refusing it would only lose what happened) …
    let reported = rt.holding(&a).record_outcome(&p.id, "tok-a", RunOutcome::Done(json!({"order": "PO-9"})))?;
    assert_eq!(reported.status, Status::Unknown, "not conclusive: the reservation waits for a settlement");
    // … but the settlement is the holder's: A is refused, B settles.
    let receipt = accepted("order-1:P-1", 900);
    assert_eq!(refusal(rt.holding(&a).settle(&p.id, &receipt))?.0, Refusal::NotHolder);
    assert_eq!(refusal(rt.settle(&p.id, &receipt))?.0, Refusal::NotHolder, "no lease at all: refused while held");
    assert_eq!(rt.holding(&b).settle(&p.id, &receipt)?.spent, 900);
    Ok(())
}

#[test]
fn alone_calls_and_alone_claims_need_the_current_lease() -> R {
    let (rt, clock) = runtime();
    let stock =
        Call::new("Clerkbot", "Reorder", "StockLevel").with_arguments(json!({"sku": "vanilla"})).for_person("Sam");
    let request = ProposalRequest::new(stock.clone(), "order-1", "how much is left");
    let a = rt.take_task("order-1", "host-a", 30)?;
    let ran = rt.holding(&a).run_alone(&stock.clone().in_task("order-1"), |_| RunOutcome::Done(json!(12)))?;
    assert_eq!(ran.outcome, RunOutcome::Done(json!(12)));
    // Another host without the lease: refused while A holds it, for an alone call too.
    let (r, message) = refusal(rt.run_alone(&stock.clone().in_task("order-1"), |_| RunOutcome::Done(json!(0))))?;
    assert_eq!(r, Refusal::NotHolder);
    assert!(message.starts_with("task `order-1` is held by `host-a` until 1767225630"), "{message}");
    assert_eq!(refusal(rt.claim_alone(&request, "tok-1"))?.0, Refusal::NotHolder);
    let claimed = rt.holding(&a).claim_alone(&request, "tok-1")?;
    assert_eq!((claimed.id.as_str(), claimed.status), ("A-1", Status::Granted));
    clock.advance(30);
    let b = rt.take_task("order-1", "host-b", 30)?;
    // A's retry of its own alone claim and its confirmation are refused; B's own call runs.
    assert_eq!(refusal(rt.holding(&a).claim_alone(&request, "tok-1"))?.0, Refusal::NotHolder);
    assert_eq!(refusal(rt.holding(&a).confirm("A-1", "tok-1"))?.0, Refusal::NotHolder);
    let handled = rt.holding(&b).call(&request, |_| RunOutcome::Done(json!(11)))?;
    assert!(matches!(handled, permits_runtime::Handled::Ran(_)), "{handled:?}");
    // Under another key the lease is not presented, and nothing is held there.
    let elsewhere = rt.holding(&a).run_alone(&stock.in_task("order-2"), |_| RunOutcome::Done(json!(3)))?;
    assert_eq!(elsewhere.outcome, RunOutcome::Done(json!(3)));
    Ok(())
}

#[test]
fn renewal_release_and_takeover_move_the_fence_and_are_audited() -> R {
    let (rt, clock) = runtime();
    let first = rt.take_task("order-1", "host-a", 30)?;
    assert_eq!(
        first,
        Lease { key: "order-1".into(), holder: "host-a".into(), fence: 1, taken_at: START, expires_at: START + 30 }
    );
    clock.advance(20);
    let renewed = rt.renew_task(&first, 60)?;
    assert_eq!((renewed.fence, renewed.expires_at), (1, START + 80));
    // The holder does not take its own live lease again (that would fence its own handle out): it renews.
    let (r, message) = refusal(rt.take_task("order-1", "host-a", 60))?;
    assert_eq!(
        (r, message.as_str()),
        (
            Refusal::NotHolder,
            "task `order-1` is held by `host-a` already, with fence 1 until 1767225680: renew it to hold it longer \
             (or release it and take it again for a new fence)"
        )
    );
    assert_eq!(rt.lease("order-1")?, Some(renewed.clone()), "the refused take changed nothing");
    // Released and taken again, it has a new fence: its older handle is fenced, and told its fence is stale.
    rt.release_task(&first)?;
    let again = rt.take_task("order-1", "host-a", 60)?;
    assert_eq!((again.fence, again.expires_at), (2, START + 80));
    let (r, message) = refusal(rt.renew_task(&first, 30))?;
    assert_eq!(
        (r, message.as_str()),
        (
            Refusal::NotHolder,
            "this host no longer holds the task `order-1`: fence 1 is not the current fence 2 of `host-a`'s lease; \
             `host-a` may not act under it"
        )
    );
    // An expired lease nobody took renews (nothing acted in between).
    clock.advance(61);
    assert_eq!(rt.renew_task(&again, 30)?.expires_at, START + 111);
    let released = rt.release_task(&again)?;
    assert_eq!(released.expires_at, START + 81);
    assert_eq!(rt.release_task(&again)?, released, "releasing again changes nothing");
    let other = rt.take_task("order-1", "host-b", 30)?;
    assert_eq!((other.fence, other.taken_at), (3, START + 81));
    assert_eq!(refusal(rt.release_task(&again))?.0, Refusal::NotHolder);
    assert_eq!(rt.lease("order-1")?, Some(other));
    assert_eq!(rt.lease("order-2")?, None);
    let reasons: Vec<String> = rt
        .audit_chain()?
        .into_iter()
        .filter(|e| e.event.kind == EventKind::Task)
        .filter_map(|e| e.event.reason)
        .collect();
    assert_eq!(
        reasons,
        [
            "task `order-1` leased: `host-a` holds it with fence 1 until 1767225630",
            "task `order-1` renewed: `host-a` holds it with fence 1 until 1767225680",
            "task `order-1` released: `host-a` holds it with fence 1 until 1767225620",
            "task `order-1` leased: `host-a` holds it with fence 2 until 1767225680",
            "task `order-1` renewed: `host-a` holds it with fence 2 until 1767225711",
            "task `order-1` released: `host-a` holds it with fence 2 until 1767225681",
            "task `order-1` leased: `host-b` holds it with fence 3 until 1767225711 (taken over from `host-a`, fence 2)",
        ]
    );
    Ok(())
}

#[test]
fn bad_lease_input_is_refused_and_stores_nothing() -> R {
    let (rt, _clock) = runtime();
    let long = "k".repeat(600);
    let empty = "a lease needs an operation key and a holder: neither may be empty";
    for (key, holder, seconds, kind, expected) in [
        ("order-1", "host-a", 0, Refusal::InvalidRequest, "a lease is taken for 1 to 86400 seconds, not 0"),
        (
            "order-1",
            "host-a",
            MAX_LEASE_SECONDS + 1,
            Refusal::TooLarge,
            "a lease is taken for 1 to 86400 seconds, not 86401: renew it to hold it longer",
        ),
        ("order-1", "", 30, Refusal::InvalidRequest, empty),
        ("", "host-a", 30, Refusal::InvalidRequest, empty),
    ] {
        let (r, message) = refusal(rt.take_task(key, holder, seconds))?;
        assert_eq!((r, message.as_str()), (kind, expected));
    }
    let (r, message) = refusal(rt.take_task(&long, "host-a", 30))?;
    assert_eq!(r, Refusal::TooLarge);
    assert!(message.starts_with("the operation key is 600 bytes"), "{message}");
    assert_eq!(rt.lease("order-1")?, None);
    assert_eq!(rt.lease("")?, None);
    // A lease that was never handed out (a forged one) is fenced.
    let forged = Lease { key: "order-1".into(), holder: "host-z".into(), fence: 7, taken_at: 0, expires_at: u64::MAX };
    let (r, message) = refusal(rt.holding(&forged).propose(&ProposalRequest::new(order(100), "order-1", "why")))?;
    assert_eq!(r, Refusal::NotHolder);
    assert_eq!(
        message,
        "this host no longer holds the task `order-1`: the store has no lease on it; `host-z` may not act under it"
    );
    assert!(rt.proposals()?.is_empty(), "nothing was proposed");
    Ok(())
}
