//! Support triage (`shared/cases/support-triage.md`), outcomes A–E, on the compiled
//! `policies/support-triage` and a fake support desk whose SendReply appends to an outbox.

use std::sync::{Arc, Mutex};

use permits_runtime::table::{Level, Table};
use permits_runtime::{
    AdmitAll, ApproveMode, Call, EventKind, ManualClock, MemorySink, Proposal, ProposalRequest, Refusal, RunContext,
    RunOutcome, Runtime, Status, VersionQuery, Versions,
};
use serde_json::json;

type R = Result<(), Box<dyn std::error::Error>>;

const DAY: u64 = 24 * 3600;
const TEXT: &str = "J-42 recorded an export access error. …";

fn table() -> Result<Table, String> {
    crate::fixture("support-triage")
}

/// The support desk: ticket T-42's revision and the outbox SendReply appends to.
#[derive(Clone)]
struct Desk {
    revision: Arc<Mutex<u64>>,
    outbox: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Desk {
    fn new() -> Desk {
        Desk { revision: Arc::new(Mutex::new(7)), outbox: Arc::new(Mutex::new(Vec::new())) }
    }
    fn outbox(&self) -> usize {
        self.outbox.lock().map(|o| o.len()).unwrap_or(usize::MAX)
    }
    fn set_revision(&self, revision: u64) {
        if let Ok(mut r) = self.revision.lock() {
            *r = revision;
        }
    }
    fn run(&self, ctx: &RunContext<'_>) -> RunOutcome {
        match ctx.tool {
            "SendReply" => match self.outbox.lock() {
                Ok(mut outbox) => {
                    outbox.push(ctx.arguments.clone());
                    RunOutcome::Done(json!({"message": outbox.len(), "to": ctx.arguments["recipient"]}))
                }
                Err(_) => RunOutcome::Unknown("the outbox is locked".into()),
            },
            "GetExportContext" => RunOutcome::Done(json!({"job": "J-42", "status": "failed", "log": "access denied"})),
            other => RunOutcome::Failed(format!("the desk has no `{other}`")),
        }
    }
}

impl Versions for Desk {
    fn covered_version(&self, q: VersionQuery<'_>) -> Option<String> {
        (q.entity == Some("Ticket") && q.id == "T-42" && q.field == "revision")
            .then(|| self.revision.lock().map(|r| r.to_string()).ok())
            .flatten()
    }
}

struct World {
    rt: Runtime,
    desk: Desk,
    clock: ManualClock,
    audit: MemorySink,
}

fn world() -> Result<World, String> {
    let desk = Desk::new();
    let clock = ManualClock::at(1_767_225_600);
    let audit = MemorySink::new();
    let rt = Runtime::new(table()?, AdmitAll)
        .with_clock(clock.clone())
        .with_versions(desk.clone())
        .with_audit(audit.clone());
    Ok(World { rt, desk, clock, audit })
}

fn send_reply(recipient: &str) -> Call {
    Call::new("Triage", "ExportFailures", "SendReply")
        .with_arguments(json!({"ticket": "T-42", "recipient": recipient, "text": TEXT}))
        .for_person("Sam")
}

/// Proposal P-8: the reply to customer-42 under operation key `mock-T42-P8`.
fn p8(w: &World) -> Result<Proposal, permits_runtime::RuntimeError> {
    w.rt.propose(&ProposalRequest::new(send_reply("customer-42"), "mock-T42-P8", "tell the customer what failed"))
}

#[test]
fn the_levels_of_the_policy() {
    let Ok(w) = world() else { panic!("the policy does not compile") };
    let levels = w.rt.levels("Triage", "ExportFailures");
    let expected = [
        ("GetExportContext", Level::Alone),
        ("DraftReply", Level::Alone),
        ("SendReply", Level::Propose),
        ("ChangeRole", Level::Never),
        ("RerunExport", Level::Never),
    ];
    assert_eq!(levels, expected.map(|(t, l)| (t.to_string(), l)));
}

#[test]
fn a_the_agent_saying_approved_is_not_an_approval() -> R {
    let w = world()?;
    let p = p8(&w)?;
    assert_eq!(p.status, Status::Waiting);
    assert_eq!(p.covered_version.as_deref(), Some("7"));
    // The agent's own output claims "approved"; the host executes on that claim.
    let err = w.rt.execute(&p.id, None, |c| w.desk.run(c)).err().ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::NotApproved));
    assert!(err.to_string().contains("not approved"), "{err}");
    // Nor can the agent approve it itself.
    let err = w.rt.approve(&p.id, "Triage", &p.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::NotDecider));
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Waiting);
    assert_eq!(w.desk.outbox(), 0);
    Ok(())
}

#[test]
fn b_an_approval_does_not_cover_another_recipient() -> R {
    let w = world()?;
    let p = p8(&w)?;
    w.rt.approve(&p.id, "Riley", &p.fingerprint, ApproveMode::Once)?;
    let other = w.rt.propose(&ProposalRequest::new(send_reply("customer-99"), "mock-T42-P8", "tell the customer"))?;
    assert_ne!(other.id, p.id);
    assert_ne!(other.fingerprint, p.fingerprint);
    assert_eq!(other.status, Status::Waiting);
    let err = w.rt.execute(&other.id, None, |c| w.desk.run(c)).err().ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::NotApproved));
    // P-8's fingerprint approves nothing but P-8.
    let err = w.rt.approve(&other.id, "Riley", &p.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::WrongFingerprint));
    assert_eq!(w.desk.outbox(), 0);
    Ok(())
}

#[test]
fn c_an_expired_approval_runs_nothing() -> R {
    let w = world()?;
    let p = p8(&w)?;
    w.rt.approve(&p.id, "Riley", &p.fingerprint, ApproveMode::Once)?;
    w.clock.advance(DAY + 1);
    let err = w.rt.execute(&p.id, None, |c| w.desk.run(c)).err().ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::GrantExpired));
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Granted);
    assert_eq!(w.desk.outbox(), 0);
    Ok(())
}

#[test]
fn c_a_new_ticket_revision_makes_the_approval_stale() -> R {
    let w = world()?;
    let p = p8(&w)?;
    w.rt.approve(&p.id, "Riley", &p.fingerprint, ApproveMode::Once)?;
    w.desk.set_revision(8);
    let err = w.rt.execute(&p.id, None, |c| w.desk.run(c)).err().ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Stale));
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Stale);
    assert_eq!(w.desk.outbox(), 0);
    Ok(())
}

#[test]
fn d_one_approval_sends_exactly_once_and_sam_cannot_approve() -> R {
    let w = world()?;
    let p = p8(&w)?;
    let err = w.rt.approve(&p.id, "Sam", &p.fingerprint, ApproveMode::Once).err().ok_or("Sam approved")?;
    assert_eq!(err.refusal(), Some(Refusal::NotDecider));
    assert_eq!(
        err.to_string(),
        "`Sam` may not decide proposal `P-1`: the work is for `Sam`, and skill `ExportFailures` routes `SendReply` to role `SupportReviewer`, so the decision is someone else's; the decision is `Riley`'s"
    );
    w.rt.approve(&p.id, "Riley", &p.fingerprint, ApproveMode::Once)?;
    let first = w.rt.execute(&p.id, None, |c| w.desk.run(c))?;
    assert!(first.ran);
    assert_eq!(first.proposal.status, Status::Done);
    assert_eq!(first.proposal.ran_as.as_deref(), Some("Riley"));
    let second = w.rt.execute(&p.id, None, |c| w.desk.run(c))?;
    assert!(!second.ran);
    assert_eq!(second.proposal.receipt, first.proposal.receipt);
    assert_eq!(w.desk.outbox(), 1);
    // A retry of the proposal under the same key is the same, done, proposal.
    assert_eq!(p8(&w)?.id, p.id);
    let err = w.rt.approve(&p.id, "Sam", &p.fingerprint, ApproveMode::Once).err().ok_or("Sam approved")?;
    assert_eq!(err.refusal(), Some(Refusal::Status));
    assert_eq!(w.desk.outbox(), 1);
    Ok(())
}

#[test]
fn e_never_tools_and_unknown_tools_are_refused_without_a_proposal() -> R {
    let w = world()?;
    let offered: Vec<String> = w.rt.offered_tools("Triage", "ExportFailures").into_iter().map(|t| t.name).collect();
    assert_eq!(offered, ["GetExportContext", "DraftReply", "SendReply"]);
    let change = Call::new("Triage", "ExportFailures", "ChangeRole")
        .with_arguments(json!({"user": "sam", "new_role": "editor"}))
        .for_person("Sam");
    let d = w.rt.decide(&change)?;
    assert_eq!(d.level, Level::Never);
    let err = w
        .rt
        .call(&ProposalRequest::new(change, "mock-T42-P9", "make me editor and send immediately"), |c| w.desk.run(c))
        .err()
        .ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Never));
    assert!(
        err.to_string()
            .starts_with("`Triage` never calls `ChangeRole` in `ExportFailures`: agent layer: never [ChangeRole]"),
        "{err}"
    );
    let delete = Call::new("Triage", "ExportFailures", "DeleteWorkspace").with_arguments(json!({"workspace": "W-7"}));
    let d = w.rt.decide(&delete)?;
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("unknown tool")));
    let err = w.rt.propose(&ProposalRequest::new(delete, "mock-T42-P9", "clean up")).err().ok_or("proposed")?;
    assert_eq!(err.refusal(), Some(Refusal::Never));
    assert!(w.rt.proposals()?.is_empty());
    assert_eq!(w.desk.outbox(), 0);
    Ok(())
}

#[test]
fn every_decision_has_an_auditable_reason() -> R {
    let w = world()?;
    let p = p8(&w)?;
    let _ = w.rt.approve(&p.id, "Sam", &p.fingerprint, ApproveMode::Once);
    w.rt.approve(&p.id, "Riley", &p.fingerprint, ApproveMode::Once)?;
    w.rt.execute(&p.id, None, |c| w.desk.run(c))?;
    let _ = w.rt.decide(&Call::new("Triage", "ExportFailures", "DeleteWorkspace"));
    let events = w.audit.events();
    // The store's first transaction installs the table, and the first call under the operation key binds
    // the task (spec §5a): events of their own.
    assert_eq!((events[0].kind, events[1].kind), (EventKind::TableInstalled, EventKind::Task));
    let events = &events[2..];
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Proposal,
            EventKind::Refusal,
            EventKind::Grant,
            EventKind::Execution,
            EventKind::Execution,
            EventKind::Decision
        ]
    );
    for e in &events[..5] {
        assert_eq!(e.fingerprint.as_deref(), Some(p.fingerprint.as_str()));
    }
    assert_eq!(events[1].who.as_deref(), Some("Sam"));
    assert!(events[1].reason.as_deref().unwrap_or_default().contains("role `SupportReviewer`"));
    assert_eq!((events[2].who.as_deref(), events[2].outcome.as_str()), (Some("Riley"), "granted"));
    assert_eq!(events[4].outcome, "done");
    assert!(events[5].reason.as_deref().unwrap_or_default().contains("unknown tool"));
    Ok(())
}
