//! The bicycle workshop (`shared/cases/workshop.md`), outcomes 1–9, on the compiled `policies/workshop`
//! and a small fake host: one repair, the workshop app's own permissions, and a scripted agent.

use std::sync::{Arc, Mutex};

use permits_runtime::table::{Level, ParamInfo, ParamType, Table};
use permits_runtime::{
    ApproveMode, Authority, Call, Evidence, Handled, ManualClock, MemorySink, Naming, NewRule, Principal, Proposal,
    ProposalRequest, Refusal, RunContext, RunOutcome, Runtime, Scope, Status, VersionQuery, Versions, WorkFor,
};
use serde_json::{Value, json};

type R = Result<(), Box<dyn std::error::Error>>;

fn table() -> Result<Table, String> {
    crate::fixture("workshop")
}

/// The workshop's app: repair T-7 and who may do what in it.
#[derive(Clone)]
struct Workshop {
    repair: Arc<Mutex<Repair>>,
}

#[derive(Clone, Debug)]
struct Repair {
    fault: String,
    note: String,
    price: i64,
    revision: u64,
}

impl Workshop {
    fn new() -> Workshop {
        let repair = Repair { fault: "rear brake does not bite".into(), note: String::new(), price: 0, revision: 1 };
        Workshop { repair: Arc::new(Mutex::new(repair)) }
    }

    fn repair(&self) -> Repair {
        self.repair.lock().map(|r| r.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    fn price(&self) -> i64 {
        self.repair().price
    }

    /// Someone rewrites the repair's fault: its revision moves.
    fn rewrite_fault(&self, fault: &str) {
        if let Ok(mut r) = self.repair.lock() {
            r.fault = fault.to_string();
            r.revision += 1;
        }
    }

    /// Runs a tool in the app, as the runtime's closure.
    fn run(&self, ctx: &RunContext<'_>) -> RunOutcome {
        let Ok(mut r) = self.repair.lock() else { return RunOutcome::Failed("the repair is locked".into()) };
        match ctx.tool {
            "PartsFor" => RunOutcome::Done(json!(["brake pads", "brake cable"])),
            "NoteRepair" => {
                r.note = ctx.arguments["note"].as_str().unwrap_or_default().to_string();
                RunOutcome::Done(json!("noted"))
            }
            "SetPrice" => {
                r.price = ctx.arguments["price"].as_i64().unwrap_or_default();
                RunOutcome::Done(json!({"price": r.price, "set_as": ctx.runs_as}))
            }
            other => RunOutcome::Failed(format!("the app has no `{other}`")),
        }
    }
}

impl Authority for Workshop {
    /// Mechanics and managers may read and update repairs; only a manager or the Helper account (the
    /// estimator's) may set a price.
    fn admits(&self, who: Principal<'_>, tool: &str, _: &Value) -> Result<(), String> {
        let role = match who {
            Principal::Agent("Estimator") => "Helper",
            Principal::Person("Noor") => "Manager",
            Principal::Person("Mia") => "Mechanic",
            _ => return Err(format!("`{}` has no account in the workshop", who.name())),
        };
        match (tool, role) {
            ("SetPrice", "Manager" | "Helper") => Ok(()),
            ("SetPrice", _) => Err("only a manager may set a price".into()),
            _ => Ok(()),
        }
    }
}

impl Versions for Workshop {
    fn covered_version(&self, q: VersionQuery<'_>) -> Option<String> {
        (q.entity == Some("Repair") && q.id == "T-7" && q.field == "revision")
            .then(|| format!("r{}", self.repair().revision))
    }
}

impl Naming for Workshop {
    fn show(&self, _: &str, param: &ParamInfo, value: &Value) -> String {
        match (&param.ty, value) {
            (ParamType::Entity(e), Value::String(id)) if e == "Repair" => format!("Ticket {id}"),
            (_, Value::String(s)) => s.clone(),
            (_, other) => other.to_string(),
        }
    }
}

struct World {
    rt: Runtime,
    app: Workshop,
    audit: MemorySink,
}

fn world() -> Result<World, String> {
    let app = Workshop::new();
    let audit = MemorySink::new();
    let rt = Runtime::new(table()?, app.clone())
        .with_clock(ManualClock::at(1_767_225_600))
        .with_versions(app.clone())
        .with_naming(app.clone())
        .with_audit(audit.clone());
    Ok(World { rt, app, audit })
}

/// The scripted agent: one estimate for `person` in `skill` under `key`: note alone (EstimateRepair
/// only), then SetPrice. Returns what the runtime did with the SetPrice call.
fn estimate(
    w: &World,
    person: &str,
    skill: &str,
    key: &str,
    price: i64,
    why: &str,
) -> Result<Handled, Box<dyn std::error::Error>> {
    let mut evidence = Vec::new();
    if skill == "EstimateRepair" {
        let note = json!({"repair": "T-7", "note": "Pads and a cable."});
        let call = Call::new("Estimator", skill, "NoteRepair").with_arguments(note.clone()).for_person(person);
        let Handled::Ran(ran) = w.rt.call(&ProposalRequest::new(call, key, "note what is needed"), |c| w.app.run(c))?
        else {
            return Err("the note was not alone".into());
        };
        let RunOutcome::Done(answer) = ran.outcome else { return Err("the note failed".into()) };
        evidence.push(Evidence { tool: "NoteRepair".into(), arguments: note, answer });
    }
    let call = Call::new("Estimator", skill, "SetPrice")
        .with_arguments(json!({"repair": "T-7", "price": price}))
        .for_person(person);
    Ok(w.rt.call(&ProposalRequest::new(call, key, why).with_evidence(evidence), |c| w.app.run(c))?)
}

fn proposed(handled: Handled) -> Result<Proposal, Box<dyn std::error::Error>> {
    match handled {
        Handled::Proposed(p) => Ok(*p),
        Handled::Ran(_) => Err("ran alone instead of proposing".into()),
    }
}

const WHY: &str = "Pads, a cable and an hour of work.";

#[test]
fn outcome_1_the_table() -> R {
    let w = world()?;
    let levels = w.rt.levels("Estimator", "EstimateRepair");
    let expected = [
        ("PartsFor", Level::Alone),
        ("NoteRepair", Level::Alone),
        ("SetPrice", Level::Propose),
        ("ScrapRepair", Level::Never),
    ];
    assert_eq!(levels, expected.map(|(t, l)| (t.to_string(), l)));
    let offered: Vec<String> = w.rt.offered_tools("Estimator", "EstimateRepair").into_iter().map(|t| t.name).collect();
    assert_eq!(offered, ["PartsFor", "NoteRepair", "SetPrice"]);
    Ok(())
}

#[test]
fn outcome_2_mia_asks_for_an_estimate() -> R {
    let w = world()?;
    let p = proposed(estimate(&w, "Mia", "EstimateRepair", "mia-1", 45, WHY)?)?;
    assert_eq!(w.app.repair().note, "Pads and a cable.");
    assert_eq!(p.status, Status::Waiting);
    assert_eq!(w.app.price(), 0);
    assert_eq!(p.label, "Set the price");
    let shown: Vec<(&str, &str)> = p.shown.iter().map(|a| (a.name.as_str(), a.shown.as_str())).collect();
    assert_eq!(shown, [("repair", "Ticket T-7"), ("price", "45")]);
    assert_eq!(p.why, WHY);
    assert_eq!(p.evidence.len(), 1);
    assert_eq!(p.evidence[0].tool, "NoteRepair");
    assert_eq!(p.evidence[0].answer, json!("noted"));
    assert_eq!(p.covered_version.as_deref(), Some("r1"));
    assert_eq!(p.requester.as_deref(), Some("Mia"));
    assert_eq!(p.decider.persons, ["Mia"]);
    assert_eq!(p.fingerprint.len(), 64);
    Ok(())
}

#[test]
fn outcome_3_mia_approves_and_it_fails_as_hers() -> R {
    let w = world()?;
    let p = proposed(estimate(&w, "Mia", "EstimateRepair", "mia-1", 45, WHY)?)?;
    let err =
        w.rt.approve_and_run(&p.id, "Mia", &p.fingerprint, ApproveMode::Once, |c| w.app.run(c))
            .err()
            .ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Authority));
    assert_eq!(
        err.to_string(),
        "`Estimator` runs `SetPrice` on behalf of `Mia`, who may not: only a manager may set a price"
    );
    let p = w.rt.proposal(&p.id)?;
    assert_eq!(p.status, Status::Failed);
    assert_eq!(p.answer_for_agent(), format!("failed: {err}"));
    assert_eq!(w.app.price(), 0);
    Ok(())
}

#[test]
fn outcome_4_noor_approves_and_it_runs_as_her() -> R {
    let w = world()?;
    let first = proposed(estimate(&w, "Mia", "EstimateRepair", "mia-1", 45, WHY)?)?;
    let _ = w.rt.approve_and_run(&first.id, "Mia", &first.fingerprint, ApproveMode::Once, |c| w.app.run(c));
    let p = proposed(estimate(&w, "Mia", "EstimateRepair", "mia-2", 45, WHY)?)?;
    assert_ne!(p.id, first.id);
    let done = w.rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |c| w.app.run(c))?;
    assert_eq!(done.proposal.status, Status::Done);
    assert_eq!(w.app.price(), 45);
    let grant = done.proposal.grant.clone().ok_or("no grant")?;
    assert_eq!(grant.approver.as_deref(), Some("Noor"));
    assert_eq!(done.proposal.tool, "SetPrice");
    assert_eq!(done.proposal.ran_as.as_deref(), Some("Noor"));
    assert_eq!(done.proposal.receipt, Some(json!({"price": 45, "set_as": "Noor"})));
    Ok(())
}

#[test]
fn outcome_5_a_no_gives_the_reason() -> R {
    let w = world()?;
    let p = proposed(estimate(&w, "Mia", "EstimateRepair", "mia-1", 45, WHY)?)?;
    let err = w.rt.reject(&p.id, "Noor", "").err().ok_or("rejected without a reason")?;
    assert_eq!(err.refusal(), Some(Refusal::ReasonRequired));
    assert_eq!(err.to_string(), "a rejection needs a reason: the agent is told it");
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Waiting);
    let p = w.rt.reject(&p.id, "Noor", "Quote the cable separately.")?;
    assert_eq!(p.status, Status::Rejected);
    assert_eq!(p.reason.as_deref(), Some("Quote the cable separately."));
    assert_eq!(p.answer_for_agent(), "rejected: Quote the cable separately.");
    assert_eq!(w.app.price(), 0);
    Ok(())
}

#[test]
fn outcome_6_a_yes_does_not_cover_what_changed() -> R {
    let w = world()?;
    let p = proposed(estimate(&w, "Mia", "EstimateRepair", "mia-1", 45, WHY)?)?;
    w.app.rewrite_fault("front brake does not bite");
    assert_eq!(w.app.repair().revision, 2);
    let err =
        w.rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |c| w.app.run(c))
            .err()
            .ok_or("it ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Stale));
    assert!(err.to_string().contains("the covered version is `r2` instead of `r1`"), "{err}");
    let p = w.rt.proposal(&p.id)?;
    assert_eq!(p.status, Status::Stale);
    assert!(p.answer_for_agent().contains("look again"));
    assert_eq!(w.app.price(), 0);
    Ok(())
}

#[test]
fn outcome_7_from_now_on_alone() -> R {
    let w = world()?;
    let p = proposed(estimate(&w, "Noor", "EstimateRepair", "noor-1", 45, WHY)?)?;
    let done = w.rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::AlwaysLikeThis, |c| w.app.run(c))?;
    assert_eq!(done.proposal.status, Status::Done);
    let rules = w.rt.rules()?;
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    assert_eq!((rule.agent.as_str(), rule.tool.as_str()), ("Estimator", "SetPrice"));
    assert_eq!(rule.work_for, WorkFor::Person("Noor".into()));

    let Handled::Ran(ran) = estimate(&w, "Noor", "EstimateRepair", "noor-2", 50, WHY)? else {
        return Err("the next estimate proposed".into());
    };
    assert_eq!(ran.decision.standing_rule.as_deref(), Some(rule.id.as_str()));
    assert_eq!(w.app.price(), 50);
    assert_eq!(w.rt.proposals()?.len(), 1);
    assert_eq!(w.rt.rules()?[0].uses, 1);

    let revoked = w.rt.revoke_rule(&rule.id, "Noor", "Prices are mine again.")?;
    assert_eq!(revoked.revoked.map(|r| r.why), Some("Prices are mine again.".to_string()));
    let p = proposed(estimate(&w, "Noor", "EstimateRepair", "noor-3", 55, WHY)?)?;
    assert_eq!(p.status, Status::Waiting);
    assert_eq!(w.app.price(), 50);
    assert_eq!(w.rt.proposals()?.len(), 2);
    Ok(())
}

#[test]
fn outcome_8_what_it_never_does_takes_no_rule() -> R {
    let w = world()?;
    let err =
        w.rt.allow_alone(&NewRule {
            agent: "Estimator".into(),
            tool: "ScrapRepair".into(),
            skill: None,
            work_for: WorkFor::Everybody,
            by: "Noor".into(),
            scope: Scope::AnyArguments,
            expires_at: None,
            mode: None,

            via: Vec::new(),
        })
        .err()
        .ok_or("a rule was made")?;
    assert_eq!(err.refusal(), Some(Refusal::Rule));
    assert!(err.to_string().starts_with("`Estimator` never calls `ScrapRepair` in `EstimateRepair`"), "{err}");
    assert!(err.to_string().contains("never [ScrapRepair]"), "{err}");
    assert!(w.rt.rules()?.is_empty());
    Ok(())
}

#[test]
fn outcome_9_a_routed_decision_is_not_the_requesters() -> R {
    let w = world()?;
    let p =
        proposed(estimate(&w, "Mia", "PriceFleetRepair", "fleet-1", 38, "A fleet rate: pads, a cable and an hour.")?)?;
    assert_eq!(p.decider.persons, ["Noor"]);
    assert_eq!(p.decider.waiting_on(), "a decision from Noor");
    assert_eq!(p.answer_for_agent(), "proposed `SetPrice`: waiting on a decision from Noor");
    let err =
        w.rt.approve_and_run(&p.id, "Mia", &p.fingerprint, ApproveMode::Once, |c| w.app.run(c))
            .err()
            .ok_or("Mia decided")?;
    assert_eq!(err.refusal(), Some(Refusal::NotDecider));
    assert_eq!(
        err.to_string(),
        "`Mia` may not decide proposal `P-1`: the decision is `Noor`'s because skill `PriceFleetRepair` routes `SetPrice` to person `Noor`; the work is for `Mia`, but the decision is not theirs"
    );
    assert_eq!(w.app.price(), 0);
    let done = w.rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |c| w.app.run(c))?;
    assert_eq!(done.proposal.status, Status::Done);
    assert_eq!(w.app.price(), 38);
    Ok(())
}

#[test]
fn every_step_is_in_the_audit() -> R {
    let w = world()?;
    let p = proposed(estimate(&w, "Mia", "EstimateRepair", "mia-1", 45, WHY)?)?;
    let _ = w.rt.approve_and_run(&p.id, "Mia", &p.fingerprint, ApproveMode::Once, |c| w.app.run(c));
    let events = w.audit.events();
    let failed = events
        .iter()
        .find(|e| e.outcome == "refused" && e.proposal.as_deref() == Some(p.id.as_str()))
        .ok_or("no refusal")?;
    assert_eq!(failed.who.as_deref(), Some("Mia"));
    assert_eq!(failed.fingerprint.as_deref(), Some(p.fingerprint.as_str()));
    assert_eq!(
        (failed.agent.as_str(), failed.skill.as_str(), failed.tool.as_str()),
        ("Estimator", "EstimateRepair", "SetPrice")
    );
    assert!(failed.reason.as_deref().unwrap_or_default().contains("only a manager may set a price"));
    Ok(())
}
