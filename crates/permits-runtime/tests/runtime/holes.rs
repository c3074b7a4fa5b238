//! The holes of issue #14, each closed by the test named for it (README "Guarantees"), on the compiled
//! `tests/fixtures/holes` shop (`holes.table.json`, kept current by `permits-cli`'s `holes` tests) and edited
//! copies of it. Each test asserts values — statuses, reserved and spent, event kinds, levels — and failed on
//! the code before its fix (the commit that added it says how).

use std::path::Path;

use permits_runtime::table::{Level, Table};
use permits_runtime::{
    AdmitAll, ApproveMode, Call, Clock, EventKind, ManualClock, MemorySink, NewRule, Proposal, ProposalRequest,
    Refusal, RunOutcome, Runtime, RuntimeError, Scope, Status, WorkFor,
};
use serde_json::{Value, json};

type R = Result<(), Box<dyn std::error::Error>>;

const DAY: u64 = 24 * 3600;

/// The compiled hardening shop.
fn shop() -> Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/holes.table.json");
    Table::load_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The shop with one edit, sealed again (a recompiled policy).
fn edited(edit: impl FnOnce(&mut Table)) -> Table {
    let mut t = shop();
    edit(&mut t);
    t.seal();
    t
}

struct World {
    rt: Runtime,
    clock: ManualClock,
    audit: MemorySink,
}

fn world_on(table: Table) -> World {
    let clock = ManualClock::at(1_767_225_600);
    let audit = MemorySink::new();
    let rt = Runtime::new(table, AdmitAll).with_clock(clock.clone()).with_audit(audit.clone());
    World { rt, clock, audit }
}

fn world() -> World {
    world_on(shop())
}

fn order(sku: &str, amount: u64, person: &str) -> Call {
    Call::new("Clerkbot", "Reorder", "PlaceOrder")
        .with_arguments(json!({"sku": sku, "quantity": 1, "amount": amount}))
        .for_person(person)
}

fn markdown(sku: &str, percent: i64, person: &str) -> Call {
    Call::new("Clerkbot", "ClearStock", "MarkDown")
        .with_arguments(json!({"sku": sku, "percent": percent}))
        .for_person(person)
}

fn propose(w: &World, call: Call, key: &str) -> Result<Proposal, RuntimeError> {
    w.rt.propose(&ProposalRequest::new(call, key, "we are running low"))
}

/// (reserved, spent) of the shop's budget, in cents.
fn supplies(w: &World) -> Result<(u64, u64), RuntimeError> {
    let b = w.rt.budget("Supplies")?;
    Ok((b.reserved, b.spent))
}

fn refusal_of<T: std::fmt::Debug>(r: Result<T, RuntimeError>) -> Result<(Refusal, String), String> {
    match r {
        Err(e) => Ok((e.refusal().ok_or_else(|| format!("not a refusal: {e}"))?, e.to_string())),
        Ok(v) => Err(format!("not refused: {v:?}")),
    }
}

fn kinds(w: &World) -> Vec<EventKind> {
    w.audit.events().iter().map(|e| e.kind).collect()
}

fn done(receipt: Value) -> impl FnOnce(&permits_runtime::RunContext<'_>) -> RunOutcome {
    move |_| RunOutcome::Done(receipt)
}

// ---------------------------------------------------------------------------------------------------------
// Hole 2: atomic decisions.

#[test]
fn hole_2_a_refused_always_like_this_leaves_no_grant_no_reservation_and_no_rule() -> R {
    let w = world();
    // Sam's order goes to a buyer; Max is one, but buyers may not widen autonomy.
    let p = propose(&w, order("vanilla", 900, "Sam"), "order-1")?;
    assert_eq!(p.status, Status::Waiting);
    let (refusal, message) = refusal_of(w.rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::AlwaysLikeThis))?;
    assert_eq!(refusal, Refusal::Rule, "{message}");
    let after = w.rt.proposal(&p.id)?;
    assert_eq!((after.status, after.grant.is_some()), (Status::Waiting, false));
    assert_eq!(supplies(&w)?, (0, 0), "the refused approval reserved nothing");
    assert!(w.rt.rules()?.is_empty());
    // Expiry and withdrawal release whatever is held: nothing is left behind.
    w.clock.advance(8 * DAY);
    assert_eq!(w.rt.expire_due()?, vec![p.id.clone()]);
    assert_eq!(supplies(&w)?, (0, 0));
    let q = propose(&w, order("vanilla", 900, "Sam"), "order-2")?;
    let _ = w.rt.approve(&q.id, "Max", &q.fingerprint, ApproveMode::AlwaysLikeThis);
    assert_eq!(w.rt.withdraw(&q.id, permits_runtime::Principal::Person("Sam"))?.status, Status::Withdrawn);
    assert_eq!(supplies(&w)?, (0, 0));
    Ok(())
}

#[test]
fn hole_2_a_granted_spend_that_turns_stale_or_failed_releases_its_reservation() -> R {
    let w = world();
    let p = propose(&w, order("vanilla", 900, "Sam"), "order-1")?;
    w.rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    assert_eq!(supplies(&w)?, (900, 0));
    // A recompiled policy changes the entry: the grant is stale, and so is its hold on the money.
    w.rt.replace_table(edited(|t| {
        if let Some(e) =
            t.entries.get_mut("Clerkbot").and_then(|s| s.get_mut("Reorder")).and_then(|e| e.get_mut("PlaceOrder"))
        {
            e.entry_digest = "0".repeat(64);
        }
    }));
    let (refusal, _) = refusal_of(w.rt.execute(&p.id, None, done(json!("sent"))))?;
    assert_eq!(refusal, Refusal::Stale);
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Stale);
    assert_eq!(supplies(&w)?, (0, 0), "a stale grant holds no money");
    // The same for a grant the current table makes `never`: `failed`, released.
    let w = world();
    let p = propose(&w, order("vanilla", 900, "Sam"), "order-1")?;
    w.rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    w.rt.replace_table(edited(|t| {
        if let Some(e) =
            t.entries.get_mut("Clerkbot").and_then(|s| s.get_mut("Reorder")).and_then(|e| e.get_mut("PlaceOrder"))
        {
            e.reserved = true;
        }
    }));
    let (refusal, _) = refusal_of(w.rt.execute(&p.id, None, done(json!("sent"))))?;
    assert_eq!(refusal, Refusal::NowNever);
    assert_eq!((w.rt.proposal(&p.id)?.status, supplies(&w)?), (Status::Failed, (0, 0)));
    assert!(kinds(&w).contains(&EventKind::Refusal));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 3: settlement follows a send.

fn accepted(operation: &str, amount: u64) -> Value {
    json!({"operation": operation, "amount": amount, "outcome": "accepted"})
}

#[test]
fn hole_3_settle_is_refused_for_a_spend_never_sent_and_accepted_after_a_send() -> R {
    let w = world();
    let p = propose(&w, order("vanilla", 900, "Sam"), "order-1")?;
    w.rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    assert_eq!(supplies(&w)?, (900, 0));
    // Granted, never sent: a receipt naming it moves nothing.
    let before = w.audit.events().len();
    let (refusal, message) = refusal_of(w.rt.settle(&p.id, &accepted("order-1:P-1", 900)))?;
    assert_eq!(refusal, Refusal::NotSent, "{message}");
    assert_eq!(supplies(&w)?, (900, 0));
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Granted);
    assert_eq!(w.audit.events()[before..].iter().map(|e| e.kind).collect::<Vec<_>>(), [EventKind::Refusal]);
    // Sent, outcome unknown: now the same receipt settles it.
    let ex = w.rt.execute(&p.id, None, |_| RunOutcome::Unknown("the supplier timed out".into()))?;
    assert_eq!(ex.proposal.status, Status::Unknown);
    w.rt.settle(&p.id, &accepted("order-1:P-1", 900))?;
    assert_eq!((w.rt.proposal(&p.id)?.status, supplies(&w)?), (Status::Done, (0, 900)));
    Ok(())
}

#[test]
fn hole_3_a_supervisor_resolves_an_unknown_outcome_that_spends_nothing() -> R {
    let w = world();
    let p = w.rt.propose(&ProposalRequest::new(markdown("mint", 20, "Sam"), "clear-1", "mint does not sell"))?;
    let ex =
        w.rt.approve_and_run(&p.id, "Sam", &p.fingerprint, ApproveMode::Once, |_| RunOutcome::Unknown("lost".into()))?;
    assert_eq!(ex.proposal.status, Status::Unknown);
    let conclusive = json!({"operation": "clear-1:P-1", "outcome": "accepted"});
    let (refusal, _) = refusal_of(w.rt.resolve(&p.id, "Sam", &conclusive))?;
    assert_eq!(refusal, Refusal::NotDecider, "only a supervisor resolves");
    let (refusal, _) = refusal_of(w.rt.resolve(&p.id, "Lucy", &json!({"outcome": "accepted"})))?;
    assert_eq!(refusal, Refusal::NotConclusive);
    assert_eq!(w.rt.resolve(&p.id, "Lucy", &conclusive)?.status, Status::Done);
    // A spend is settled, never resolved.
    let q = propose(&w, order("mint", 900, "Sam"), "order-2")?;
    let ex =
        w.rt.approve_and_run(&q.id, "Max", &q.fingerprint, ApproveMode::Once, |_| RunOutcome::Unknown("lost".into()))?;
    assert_eq!(ex.proposal.status, Status::Unknown);
    let (refusal, _) =
        refusal_of(w.rt.resolve(&q.id, "Lucy", &json!({"operation": "order-2:P-2", "outcome": "accepted"})))?;
    assert_eq!(refusal, Refusal::NotConclusive);
    assert_eq!(supplies(&w)?, (900, 0));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 9: what a person is shown is what runs.

#[test]
fn hole_9_invisible_and_bidi_characters_are_shown_and_a_blank_reason_is_refused() -> R {
    let w = world_on(edited(|t| {
        if let Some(tool) = t.tools.get_mut("SetNote") {
            tool.label = "Write a note\u{202e}\u{e0041}".into();
        }
    }));
    let note = Call::new("Clerkbot", "ClearStock", "SetNote")
        .with_arguments(json!({"sku": "mint\u{200b}", "note": "fine\u{202e}gnp.exe\u{7}"}))
        .for_person("Max");
    let p = w.rt.propose(&ProposalRequest::new(note, "note-1", "as asked\u{2066}\nsecond line"))?;
    assert_eq!(p.label, "Write a note\\u{202e}\\u{e0041}");
    let shown: Vec<(&str, &str)> = p.shown.iter().map(|a| (a.name.as_str(), a.shown.as_str())).collect();
    assert_eq!(shown, [("sku", "mint\\u{200b}"), ("note", "fine\\u{202e}gnp.exe\\u{7}")]);
    assert_eq!(p.why_for_person(), "as asked\\u{2066}\nsecond line");
    // What runs is the exact call: the arguments are kept as given.
    assert_eq!(p.arguments["note"], "fine\u{202e}gnp.exe\u{7}");
    // A reason of invisible characters only is no reason.
    for blank in ["\u{200b}\u{200b}", " \u{202e} ", "\u{e0020}\t", "\u{feff}"] {
        let (refusal, _) = refusal_of(w.rt.reject(&p.id, "Sam", blank))?;
        assert_eq!(refusal, Refusal::ReasonRequired, "{blank:?}");
    }
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Waiting);
    assert_eq!(w.rt.reject(&p.id, "Sam", "not \u{200b}now")?.status, Status::Rejected);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Who decides (spec §5), with hole 1.

#[test]
fn who_decides_a_person_route_naming_the_requester_lets_the_requester_decide() -> R {
    let w = world();
    let note =
        Call::new("Clerkbot", "ClearStock", "SetNote").with_arguments(json!({"sku": "mint", "note": "last tubs"}));
    // Notes are routed to person Sam: when the work is Sam's, Sam decides (the policy named him).
    let p = propose(&w, note.clone().for_person("Sam"), "note-1")?;
    assert_eq!(p.decider.persons, ["Sam"]);
    assert_eq!(w.rt.approve(&p.id, "Sam", &p.fingerprint, ApproveMode::Once)?.status, Status::Granted);
    // Max's note is Sam's to decide, not Max's, and the refusal says why without contradicting itself.
    let q = propose(&w, note.for_person("Max"), "note-2")?;
    let (refusal, message) = refusal_of(w.rt.approve(&q.id, "Max", &q.fingerprint, ApproveMode::Once))?;
    assert_eq!(refusal, Refusal::NotDecider);
    assert_eq!(
        message,
        "`Max` may not decide proposal `P-2`: the decision is `Sam`'s because skill `ClearStock` routes `SetNote` to person `Sam`"
    );
    Ok(())
}

#[test]
fn who_decides_a_group_route_never_lets_the_requester_decide() -> R {
    let w = world();
    // Orders are routed to role Buyer; Max and Ida are buyers. Max's order is Ida's to decide.
    let p = propose(&w, order("vanilla", 900, "Max"), "order-1")?;
    assert_eq!(p.decider.persons, ["Ida"]);
    let (refusal, message) = refusal_of(w.rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once))?;
    assert_eq!(refusal, Refusal::NotDecider);
    assert_eq!(
        message,
        "`Max` may not decide proposal `P-1`: the work is for `Max`, and skill `Reorder` routes `PlaceOrder` to role `Buyer`, so the decision is someone else's; the decision is `Ida`'s"
    );
    assert!(w.rt.waiting_for("Max")?.is_empty());
    assert_eq!(w.rt.waiting_for("Ida")?.len(), 1);
    assert_eq!(w.rt.approve(&p.id, "Ida", &p.fingerprint, ApproveMode::Once)?.status, Status::Granted);
    // Lucy, admitted by `decides_proposals`, decides anything, her own work included.
    let q = propose(&w, order("mint", 900, "Lucy"), "order-2")?;
    assert_eq!(w.rt.approve(&q.id, "Lucy", &q.fingerprint, ApproveMode::Once)?.status, Status::Granted);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 11: a standing rule has a scope and may expire.

#[test]
fn hole_11_a_rule_covers_only_its_scope_and_ends_at_its_expiry() -> R {
    let w = world();
    let these = json!({"sku": "mint", "percent": 20});
    let rule = w.rt.allow_alone(&NewRule {
        agent: "Clerkbot".into(),
        tool: "MarkDown".into(),
        skill: Some("ClearStock".into()),
        work_for: WorkFor::Person("Sam".into()),
        by: "Lucy".into(),
        scope: Scope::these(&json!({"percent": 20, "sku": "mint"})),
        expires_at: Some(w.clock.now() + DAY),
    })?;
    let created = w.audit.events().into_iter().find(|e| e.kind == EventKind::RuleCreated).ok_or("no event")?;
    assert_eq!(
        created.reason.as_deref(),
        Some(
            format!("these arguments: {{\"percent\":20,\"sku\":\"mint\"}}; expires at {}", w.clock.now() + DAY)
                .as_str()
        )
    );
    assert_eq!(w.rt.decide(&markdown("mint", 20, "Sam"))?.standing_rule.as_deref(), Some(rule.id.as_str()));
    assert_eq!(w.rt.decide(&markdown("mint", 20, "Sam"))?.level, Level::Alone);
    // Other arguments are not covered: a 90% markdown is still proposed.
    assert_eq!(w.rt.decide(&markdown("mint", 90, "Sam"))?.level, Level::Propose);
    assert_eq!(w.rt.decide(&markdown("vanilla", 20, "Sam"))?.level, Level::Propose);
    // At its expiry it stops applying.
    w.clock.advance(DAY);
    assert_eq!(w.rt.decide(&markdown("mint", 20, "Sam"))?.level, Level::Propose);
    // "Always these arguments" from an approval makes the narrow rule for the requester.
    let p = propose(&w, markdown("mint", 30, "Sam"), "clear-1")?;
    let ex = w.rt.approve_and_run(&p.id, "Sam", &p.fingerprint, ApproveMode::AlwaysTheseArguments, done(these))?;
    assert_eq!(ex.proposal.status, Status::Done);
    let rules = w.rt.rules()?;
    assert_eq!(rules[1].scope, Scope::these(&json!({"sku": "mint", "percent": 30})));
    assert_eq!(w.rt.decide(&markdown("mint", 30, "Sam"))?.level, Level::Alone);
    assert_eq!(w.rt.decide(&markdown("mint", 31, "Sam"))?.level, Level::Propose);
    // A rule already expired is refused.
    let (refusal, _) = refusal_of(w.rt.allow_alone(&NewRule { expires_at: Some(w.clock.now()), ..rule_for_sam() }))?;
    assert_eq!(refusal, Refusal::Rule);
    Ok(())
}

fn rule_for_sam() -> NewRule {
    NewRule {
        agent: "Clerkbot".into(),
        tool: "MarkDown".into(),
        skill: Some("ClearStock".into()),
        work_for: WorkFor::Person("Sam".into()),
        by: "Lucy".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
    }
}

// ---------------------------------------------------------------------------------------------------------
// Hole 6: authority is rechecked at execution.

/// The shop where `person` holds no role any more.
fn without_roles(person: &str) -> Table {
    edited(|t| {
        if let Some(p) = t.persons.get_mut(person) {
            p.roles.clear();
        }
    })
}

#[test]
fn hole_6_a_grant_does_not_outlive_its_approvers_authority() -> R {
    let w = world();
    let p = propose(&w, order("vanilla", 900, "Sam"), "order-1")?;
    w.rt.approve(&p.id, "Ida", &p.fingerprint, ApproveMode::Once)?;
    // Ida is no longer a buyer: her yes no longer authorizes anything.
    w.rt.replace_table(without_roles("Ida"));
    let mut ran = false;
    let (refusal, message) = refusal_of(w.rt.execute(&p.id, None, |_| {
        ran = true;
        RunOutcome::Done(json!("sent"))
    }))?;
    assert_eq!(refusal, Refusal::NotDecider, "{message}");
    assert!(message.contains("`Ida`"), "{message}");
    assert!(!ran);
    let after = w.rt.proposal(&p.id)?;
    assert_eq!((after.status, after.reason.is_some()), (Status::Granted, true));
    // A current decider approves again, and it runs as theirs.
    w.rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    let ex = w.rt.execute(&p.id, None, done(accepted("order-1:P-1", 900)))?;
    assert_eq!((ex.proposal.status, ex.proposal.ran_as.as_deref()), (Status::Done, Some("Max")));
    Ok(())
}

#[test]
fn hole_6_a_standing_rule_applies_only_while_its_maker_may_make_it() -> R {
    let w = world();
    let rule = w.rt.allow_alone(&rule_for_sam())?;
    assert_eq!(w.rt.decide(&markdown("mint", 20, "Sam"))?.standing_rule.as_deref(), Some(rule.id.as_str()));
    // Lucy no longer supervises: the rule she made for Sam stops applying.
    w.rt.replace_table(without_roles("Lucy"));
    let d = w.rt.decide(&markdown("mint", 20, "Sam"))?;
    assert_eq!((d.level, d.standing_rule), (Level::Propose, None));
    Ok(())
}
