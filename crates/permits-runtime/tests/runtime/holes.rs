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
    }))?;
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
    }))?;
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
        "`Max` may not decide proposal `P-2`: the decision is `Sam`'s because skill `ClearStock` routes `SetNote` to person `Sam`; the work is for `Max`, but the decision is not theirs"
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
        mode: None,

        via: Vec::new(),
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
        mode: None,
        via: Vec::new(),
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
    w.rt.replace_table(without_roles("Ida"))?;
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
    w.rt.replace_table(without_roles("Lucy"))?;
    let d = w.rt.decide(&markdown("mint", 20, "Sam"))?;
    assert_eq!((d.level, d.standing_rule), (Level::Propose, None));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 8: the fingerprint says who the work is for; tasks.

#[test]
fn hole_8_an_operation_key_is_one_persons_task_and_never_returns_anothers_proposal() -> R {
    let w = world();
    let sams = propose(&w, order("mint", 900, "Sam"), "order-1")?;
    w.rt.approve(&sams.id, "Ida", &sams.fingerprint, ApproveMode::Once)?;
    assert_eq!(supplies(&w)?, (900, 0));
    // The same call for Max under Sam's key: not Sam's proposal back, but `never` (not this task's person).
    let (refusal, message) = refusal_of(propose(&w, order("mint", 900, "Max"), "order-1"))?;
    assert_eq!(refusal, Refusal::Never);
    assert!(message.contains("not this task's person"), "{message}");
    // Nor may Max's order for the same subject supersede Sam's and release Sam's money.
    let (refusal, _) = refusal_of(propose(&w, order("mint", 300, "Max"), "order-1"))?;
    assert_eq!(refusal, Refusal::Never);
    assert_eq!((w.rt.proposal(&sams.id)?.status, supplies(&w)?), (Status::Granted, (900, 0)));
    // The task is bound to its root too: another skill under the key is not this task's.
    let count =
        Call::new("Clerkbot", "ClearStock", "StockLevel").with_arguments(json!({"sku": "mint"})).for_person("Sam");
    let (refusal, message) = refusal_of(w.rt.run_alone(&count.clone().in_task("order-1"), done(json!(3))))?;
    assert_eq!(refusal, Refusal::Never);
    assert!(message.contains("not this task's root"), "{message}");
    let task = w.rt.task("order-1")?.ok_or("no binding")?;
    assert_eq!(
        (task.root_agent.as_str(), task.root_skill.as_str(), task.person.as_deref()),
        ("Clerkbot", "Reorder", Some("Sam"))
    );
    assert_eq!(task.mode, None);
    // Ending the task keeps its binding.
    w.rt.end_task("order-1")?;
    assert!(w.rt.task("order-1")?.and_then(|t| t.ended_at).is_some());
    assert_eq!(refusal_of(propose(&w, order("mint", 900, "Max"), "order-1"))?.0, Refusal::Never);
    // The fingerprint (format 2) covers the person the work is for.
    let other = propose(&w, order("mint", 900, "Max"), "order-2")?;
    assert_ne!(other.fingerprint, sams.fingerprint);
    assert_eq!(other.fingerprint_format, permits_runtime::FINGERPRINT_FORMAT);
    Ok(())
}

/// Instructions whose version a test moves.
#[derive(Clone, Default)]
struct Prompts(std::sync::Arc<std::sync::Mutex<String>>);

impl permits_runtime::Versions for Prompts {
    fn covered_version(&self, _: permits_runtime::VersionQuery<'_>) -> Option<String> {
        None
    }
    fn instruction_version(&self, _: &str) -> Option<String> {
        self.0.lock().ok().map(|v| v.clone())
    }
}

#[test]
fn hole_8_changed_instructions_or_an_old_fingerprint_format_make_a_proposal_stale() -> R {
    let prompts = Prompts::default();
    *prompts.0.lock().map_err(|e| e.to_string())? = "prompts-1".into();
    let w = world();
    let rt = Runtime::new(shop(), AdmitAll).with_clock(w.clock.clone()).with_versions(prompts.clone());
    let p = rt.propose(&ProposalRequest::new(markdown("mint", 20, "Sam"), "clear-1", "slow seller"))?;
    assert_eq!(p.instruction_version.as_deref(), Some("prompts-1"));
    *prompts.0.lock().map_err(|e| e.to_string())? = "prompts-2".into();
    let (refusal, message) = refusal_of(rt.approve(&p.id, "Sam", &p.fingerprint, ApproveMode::Once))?;
    assert_eq!(refusal, Refusal::Stale);
    assert!(message.contains("the instructions are `prompts-2` instead of `prompts-1`"), "{message}");
    assert_eq!(rt.proposal(&p.id)?.status, Status::Stale);
    Ok(())
}

#[cfg(feature = "sqlite")]
#[test]
fn hole_8_a_waiting_proposal_of_the_old_fingerprint_format_becomes_stale() -> R {
    use permits_runtime::{SqliteStore, Store};
    let dir = std::env::temp_dir().join(format!("permits-holes-v1-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("ledger.db");
    let rt = Runtime::new(shop(), AdmitAll).with_store(SqliteStore::open(&db)?);
    let p = rt.propose(&ProposalRequest::new(markdown("mint", 20, "Sam"), "clear-1", "slow seller"))?;
    {
        // The record as a release before fingerprint format 2 wrote it.
        let store = SqliteStore::open(&db)?;
        let mut tx = store.begin()?;
        let mut old = tx.proposal(&p.id)?.ok_or("gone")?;
        old.fingerprint_format = 1;
        tx.put_proposal(&old)?;
        tx.commit()?;
    }
    let (refusal, message) = refusal_of(rt.approve(&p.id, "Sam", &p.fingerprint, ApproveMode::Once))?;
    assert_eq!(refusal, Refusal::Stale);
    assert!(message.contains("fingerprint format 1"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 10: idempotent execution.

#[test]
fn hole_10_a_retry_with_the_same_claim_token_gets_the_claim_and_another_token_is_refused() -> R {
    let w = world();
    let p = propose(&w, markdown("mint", 20, "Sam"), "clear-1")?;
    w.rt.approve(&p.id, "Sam", &p.fingerprint, ApproveMode::Once)?;
    let mut runs = 0;
    // The run's outcome could not be confirmed, and the host lost the answer: it retries with its token.
    let first = w.rt.execute_claimed(&p.id, None, "claim-1", |_| {
        runs += 1;
        RunOutcome::Unknown("the connection dropped".into())
    })?;
    assert_eq!((first.ran, first.proposal.status), (true, Status::Unknown));
    let again = w.rt.execute_claimed(&p.id, None, "claim-1", |_| {
        runs += 1;
        RunOutcome::Done(json!("twice"))
    })?;
    assert_eq!(
        (again.ran, again.proposal.status, again.proposal.claim.as_deref()),
        (false, Status::Unknown, Some("claim-1"))
    );
    // Another token on the consumed grant is refused, and nothing runs.
    let (refusal, _) = refusal_of(w.rt.execute_claimed(&p.id, None, "claim-2", |_| {
        runs += 1;
        RunOutcome::Done(json!("again"))
    }))?;
    assert_eq!(refusal, Refusal::Claimed);
    assert_eq!(runs, 1);
    // Once done, the same token returns the stored receipt.
    let q = propose(&w, markdown("mint", 25, "Sam"), "clear-2")?;
    w.rt.approve(&q.id, "Sam", &q.fingerprint, ApproveMode::Once)?;
    w.rt.execute_claimed(&q.id, None, "claim-3", done(json!({"price": 80})))?;
    let replay = w.rt.execute_claimed(&q.id, None, "claim-3", done(json!("not this")))?;
    assert_eq!((replay.ran, replay.proposal.receipt), (false, Some(json!({"price": 80}))));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 4: bounded input, durable output.

/// A JSON value `depth` levels deep: `[[…[1]…]]`.
#[cfg(feature = "sqlite")]
fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 1..depth {
        v = json!([v]);
    }
    v
}

#[cfg(feature = "sqlite")]
#[test]
fn hole_4_one_deep_value_never_makes_the_store_unreadable() -> R {
    use permits_runtime::{Evidence, SqliteStore, limits};
    let dir = std::env::temp_dir().join(format!("permits-holes-deep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let rt = Runtime::new(shop(), AdmitAll).with_store(SqliteStore::open(&dir.join("ledger.db"))?);
    let fine = rt.propose(&ProposalRequest::new(markdown("mint", 20, "Sam"), "clear-1", "slow seller"))?;
    // Evidence 126 levels deep is refused at the API, with the limit in the message; nothing is stored.
    let deep =
        ProposalRequest::new(markdown("vanilla", 20, "Sam"), "clear-2", "slow seller").with_evidence(vec![Evidence {
            tool: "StockLevel".into(),
            arguments: json!({"sku": "vanilla"}),
            answer: nested(126),
        }]);
    let (refusal, message) = refusal_of(rt.propose(&deep))?;
    assert_eq!(refusal, Refusal::TooLarge);
    assert_eq!(
        message,
        format!("evidence item 1's answer is more than {0} levels deep: at most {0} are accepted", limits::MAX_DEPTH)
    );
    let long = ProposalRequest::new(markdown("vanilla", 20, "Sam"), "clear-3", "x".repeat(limits::MAX_WHY_BYTES + 1));
    assert_eq!(refusal_of(rt.propose(&long))?.0, Refusal::TooLarge);
    // Everyone's records still read.
    assert_eq!(rt.proposals()?.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), [fine.id.as_str()]);
    // A receipt 127 levels deep cannot be refused (the tool ran): it is stored as a note, and the stored
    // receipt replays.
    rt.approve(&fine.id, "Sam", &fine.fingerprint, ApproveMode::Once)?;
    let ran = rt.execute(&fine.id, None, done(nested(127)))?;
    assert_eq!(ran.proposal.status, Status::Done);
    let note = ran.proposal.receipt.clone().ok_or("no receipt")?;
    assert!(note["receipt_not_stored"]["why"].as_str().unwrap_or_default().contains("levels deep"), "{note}");
    let replay = rt.execute(&fine.id, None, done(json!("not again")))?;
    assert_eq!((replay.ran, replay.proposal.receipt), (false, Some(note)));
    assert_eq!(rt.proposals()?.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 5: the audit is complete, atomic and tamper-evident.

#[test]
fn hole_5_every_operation_is_one_event_in_the_stores_chain_saying_how_it_was_authorized() -> R {
    use permits_runtime::{Authorization, ChainError, read_export, verify_chain};
    let w = world();
    // Operations the audit used to miss: a refused and a successful `raise_ceiling`, an inconclusive
    // `settle`, `approve` and `revoke_rule` of unknown ids, an alone spend's settlement, `replace_table`.
    assert_eq!(refusal_of(w.rt.raise_ceiling("Supplies", "Max"))?.0, Refusal::NotDecider);
    w.rt.raise_ceiling("Supplies", "Lucy")?;
    assert!(w.rt.approve("P-404", "Lucy", "f", ApproveMode::Once).is_err());
    assert!(w.rt.revoke_rule("R-404", "Lucy", "gone").is_err());
    let rule = w.rt.allow_alone(&NewRule {
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
    let ran = w.rt.run_alone(&order("mint", 300, "Sam"), |ctx| RunOutcome::Done(accepted(ctx.operation, 300)))?;
    assert_eq!(ran.decision.standing_rule.as_deref(), Some(rule.id.as_str()));
    assert_eq!(supplies(&w)?, (0, 300));
    let p = propose(&w, order("vanilla", 900, "Sam"), "order-1")?;
    w.rt.approve(&p.id, "Ida", &p.fingerprint, ApproveMode::Once)?;
    w.rt.execute(&p.id, None, |_| RunOutcome::Unknown("timeout".into()))?;
    assert_eq!(refusal_of(w.rt.settle(&p.id, &json!({"ok": true})))?.0, Refusal::NotConclusive);
    w.rt.replace_table(edited(|t| t.package.grant_lifetime_seconds = 3600))?;

    let chain = w.rt.audit_chain()?;
    let kinds: Vec<EventKind> = chain.iter().map(|c| c.event.kind).collect();
    use EventKind as K;
    assert_eq!(
        kinds,
        [
            K::TableInstalled,
            K::Refusal,
            K::Ceiling,
            K::Refusal,
            K::Refusal,
            K::RuleCreated,
            K::Execution,
            K::Settlement,
            K::Execution,
            K::Task,
            K::Proposal,
            K::Grant,
            K::Execution,
            K::Execution,
            K::Refusal,
            K::TableInstalled
        ]
    );
    // The store's chain is what the sink saw, in order.
    assert_eq!(chain.iter().map(|c| c.event.clone()).collect::<Vec<_>>(), w.audit.events());
    // Each execution says how it was authorized.
    let how: Vec<Option<Authorization>> =
        chain.iter().filter(|c| c.event.kind == K::Execution).map(|c| c.event.authorized_by.clone()).collect();
    assert_eq!(
        how,
        [
            Some(Authorization::StandingRule(rule.id.clone())),
            Some(Authorization::StandingRule(rule.id.clone())),
            Some(Authorization::Person("Ida".into())),
            Some(Authorization::Person("Ida".into())),
        ]
    );
    // The chain verifies, up to its readable head; an export is the same chain.
    let head = w.rt.audit_head()?.ok_or("no head")?;
    assert_eq!(verify_chain(&chain, Some(&head))?, Some(head.clone()));
    let mut export = Vec::new();
    assert_eq!(w.rt.export_audit(&mut export)?, chain.len() as u64);
    let text = String::from_utf8(export)?;
    assert_eq!(read_export(&text)?, chain);
    // Editing one event, dropping one, or cutting the end shows.
    let edited_text = text.replacen("\"Ida\"", "\"Max\"", 1);
    assert!(matches!(verify_chain(&read_export(&edited_text)?, None), Err(ChainError::Tampered { .. })));
    let mut dropped = chain.clone();
    dropped.remove(3);
    assert!(matches!(verify_chain(&dropped, None), Err(ChainError::Order { expected: 4, found: 5 })));
    assert_eq!(w.rt.installed_tables()?.len(), 2);
    assert!(
        matches!(verify_chain(&chain[..10], Some(&head)), Err(ChainError::Head { expected, found: 10, .. }) if expected == head.seq)
    );
    // A head kept earlier: the chain grown since still reaches it; rewritten up to it, it does not.
    let earlier = chain[9].head();
    assert_eq!(verify_chain(&chain, Some(&earlier))?, Some(head.clone()));
    let other = permits_runtime::AuditHead { seq: 10, hash: "0".repeat(64) };
    assert!(matches!(
        verify_chain(&chain, Some(&other)),
        Err(ChainError::Rewritten { seq: 10, ref found_hash, .. }) if *found_hash == chain[9].hash
    ));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 7: one current table per store, no silent rollback, signed tables.

/// The shop where `MarkDown` is `never` in `ClearStock`.
fn markdown_never() -> Table {
    edited(|t| {
        if let Some(e) =
            t.entries.get_mut("Clerkbot").and_then(|s| s.get_mut("ClearStock")).and_then(|e| e.get_mut("MarkDown"))
        {
            e.reserved = true;
        }
    })
}

fn table_refusal(r: Result<(), RuntimeError>) -> Result<permits_runtime::TableRefusal, String> {
    match r {
        Err(RuntimeError::Table(refusal)) => Ok(refusal),
        other => Err(format!("not a table refusal: {other:?}")),
    }
}

#[test]
fn hole_7_an_older_table_is_refused_and_a_tool_made_never_stays_never() -> R {
    use permits_runtime::TableRefusal;
    use permits_runtime::signing::sign;
    let secret = "42".repeat(32);
    let (old, new) = (shop(), markdown_never());
    let clock = ManualClock::at(1_767_225_600);
    let audit = MemorySink::new();
    let rt = Runtime::new(shop(), AdmitAll).with_clock(clock.clone()).with_audit(audit.clone()).with_signature(sign(
        &old.header.table_digest,
        1,
        &secret,
    )?);
    let w = World { rt, clock, audit };
    assert_eq!(w.rt.decide(&markdown("mint", 20, "Sam"))?.level, Level::Propose);
    w.rt.replace_table_signed(new.clone(), sign(&new.header.table_digest, 2, &secret)?)?;
    assert_eq!(w.rt.decide(&markdown("mint", 20, "Sam"))?.level, Level::Never);
    // Putting the older release back is a rollback: refused, audited with both digests, nothing changes.
    let refusal = table_refusal(w.rt.replace_table_signed(old.clone(), sign(&old.header.table_digest, 1, &secret)?))?;
    assert_eq!(refusal, TableRefusal::Rollback { digest: old.header.table_digest.clone(), serial: 1, highest: 2 });
    assert_eq!(w.rt.decide(&markdown("mint", 20, "Sam"))?.level, Level::Never, "never stays never");
    let last = w.audit.events().into_iter().rfind(|e| e.kind == EventKind::Refusal).ok_or("no refusal event")?;
    let reason = last.reason.unwrap_or_default();
    assert!(reason.contains(&old.header.table_digest) && reason.contains(&new.header.table_digest), "{reason}");
    // A supervisor may force it, on purpose; that is audited as forced.
    let again = sign(&old.header.table_digest, 1, &secret)?;
    assert!(matches!(
        table_refusal(w.rt.force_table(old.clone(), Some(again.clone()), "Max"))?,
        TableRefusal::NotSupervisor { .. }
    ));
    w.rt.force_table(old, Some(again), "Lucy")?;
    assert_eq!(w.rt.installed_tables()?.last().and_then(|t| t.forced_by.clone()).as_deref(), Some("Lucy"));
    assert_eq!(
        w.audit.events().last().map(|e| (e.kind, e.outcome.clone())),
        Some((EventKind::TableInstalled, "forced".into()))
    );
    assert_eq!(w.rt.decide(&markdown("mint", 20, "Sam"))?.level, Level::Propose);
    Ok(())
}

#[cfg(feature = "sqlite")]
#[test]
fn hole_7_a_runtime_whose_table_is_not_the_stores_current_one_changes_nothing() -> R {
    use permits_runtime::{SqliteStore, TableRefusal};
    let dir = std::env::temp_dir().join(format!("permits-holes-current-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("ledger.db");
    let first = Runtime::new(shop(), AdmitAll).with_store(SqliteStore::open(&db)?);
    let second = Runtime::new(shop(), AdmitAll).with_store(SqliteStore::open(&db)?);
    first.propose(&ProposalRequest::new(markdown("mint", 20, "Sam"), "k-1", "slow"))?;
    // Another host installs the newer table in the shared store: the second runtime is behind.
    let third = Runtime::new(shop(), AdmitAll).with_store(SqliteStore::open(&db)?);
    third.replace_table(markdown_never())?;
    let behind = second.propose(&ProposalRequest::new(markdown("mint", 30, "Sam"), "k-2", "slow"));
    assert!(matches!(behind, Err(RuntimeError::Table(TableRefusal::NotCurrent { .. }))), "{behind:?}");
    // Once it loads the current table it works, on that table.
    second.replace_table(markdown_never())?;
    assert_eq!(second.decide(&markdown("mint", 30, "Sam"))?.level, Level::Never);
    assert_eq!(second.installed_tables()?.len(), 2);
    drop((first, second, third));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn hole_7_signed_tables_unsigned_mis_signed_and_rolled_back_are_refused() -> R {
    use permits_runtime::signing::sign;
    use permits_runtime::{TableRefusal, TrustedKeys};
    let secret = "42".repeat(32);
    let other = "17".repeat(32);
    let key = permits_runtime::signing::public_key_of(&secret)?;
    let trusted = || TrustedKeys::from_hex([key.as_str()]);
    let old = shop();
    let new = markdown_never();
    let signed = |t: &Table, serial: u64, secret: &str| sign(&t.header.table_digest, serial, secret);
    // Unsigned: refused at the first change.
    let rt = Runtime::new(shop(), AdmitAll).with_trusted_keys(trusted()?);
    let r = rt.propose(&ProposalRequest::new(markdown("mint", 20, "Sam"), "k", "why"));
    assert!(matches!(r, Err(RuntimeError::Table(TableRefusal::Unsigned { .. }))), "{r:?}");
    // Signed at serial 5 by the trusted key: installed.
    let rt = Runtime::new(shop(), AdmitAll).with_trusted_keys(trusted()?).with_signature(signed(&old, 5, &secret)?);
    rt.propose(&ProposalRequest::new(markdown("mint", 20, "Sam"), "k", "why"))?;
    // Mis-signed: by an untrusted key, for another table, or a signature that does not verify.
    let untrusted = table_refusal(rt.replace_table_signed(new.clone(), signed(&new, 6, &other)?))?;
    assert!(matches!(untrusted, TableRefusal::UntrustedKey { .. }), "{untrusted}");
    let elsewhere = table_refusal(rt.replace_table_signed(new.clone(), signed(&old, 6, &secret)?))?;
    assert!(matches!(elsewhere, TableRefusal::OtherTable { .. }), "{elsewhere}");
    let mut forged = signed(&new, 6, &secret)?;
    forged.serial = 7;
    assert!(matches!(table_refusal(rt.replace_table_signed(new.clone(), forged))?, TableRefusal::BadSignature { .. }));
    assert!(matches!(table_refusal(rt.replace_table(new.clone()))?, TableRefusal::Unsigned { .. }));
    // The newer serial installs; the older table, even re-signed at its own serial, is a rollback.
    rt.replace_table_signed(new.clone(), signed(&new, 6, &secret)?)?;
    let back = table_refusal(rt.replace_table_signed(old.clone(), signed(&old, 5, &secret)?))?;
    assert_eq!(back, TableRefusal::Rollback { digest: old.header.table_digest.clone(), serial: 5, highest: 6 });
    assert_eq!(rt.decide(&markdown("mint", 20, "Sam"))?.level, Level::Never);
    let installs = rt.installed_tables()?;
    assert_eq!(installs.iter().map(|i| i.serial).collect::<Vec<_>>(), [Some(5), Some(6)]);
    Ok(())
}
