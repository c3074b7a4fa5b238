//! A complete small agent host that embeds the permits runtime: the bicycle workshop of
//! `shared/cases/workshop.md`, steps 2–4, with a scripted model instead of a network call.
//!
//! Run it with `cargo run --example embed` (compiles `policies/workshop` with the library's compiler),
//! or with a compiled table: `cargo run --no-default-features --example embed -- table.json`.

use std::sync::{Arc, Mutex};

use permits::runtime::{
    ApproveMode, Authority, Call, Evidence, Handled, MemorySink, Naming, Principal, Proposal, ProposalRequest,
    RunContext, RunOutcome, Runtime, RuntimeError, Status, VersionQuery, Versions,
};
use permits::table::{ParamInfo, ParamType, Table};
use serde_json::{Value, json};

/// The workshop's own app: one repair, and who may do what in it.
#[derive(Clone)]
struct Workshop {
    repair: Arc<Mutex<Repair>>,
}

#[derive(Debug)]
struct Repair {
    ticket: &'static str,
    fault: &'static str,
    note: String,
    price: i64,
    revision: u64,
}

impl Workshop {
    fn price(&self) -> i64 {
        self.repair.lock().map(|r| r.price).unwrap_or_default()
    }

    /// Runs a tool in the app. The runtime calls this only once the call is admitted.
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
                RunOutcome::Done(json!({"ticket": r.ticket, "price": r.price, "set_as": ctx.runs_as}))
            }
            other => RunOutcome::Failed(format!("the app has no `{other}`")),
        }
    }
}

impl Authority for Workshop {
    /// Mechanics and managers may read and update repairs; only a manager or the Helper account may set a
    /// price.
    fn admits(&self, who: Principal<'_>, tool: &str, _: &Value) -> Result<(), String> {
        let manager_or_helper = matches!(who, Principal::Person("Noor") | Principal::Agent("Estimator"));
        match tool {
            "SetPrice" if !manager_or_helper => Err("only a manager may set a price".into()),
            _ => Ok(()),
        }
    }
}

impl Versions for Workshop {
    fn covered_version(&self, q: VersionQuery<'_>) -> Option<String> {
        let r = self.repair.lock().ok()?;
        (q.entity == Some("Repair") && q.id == r.ticket && q.field == "revision").then(|| format!("r{}", r.revision))
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

/// The scripted model: for a request to estimate, it looks parts up, notes them, and sets a price.
struct ScriptedModel;

impl ScriptedModel {
    fn tool_calls(&self, fault: &str) -> Vec<(&'static str, Value, &'static str)> {
        vec![
            ("PartsFor", json!({"fault": fault}), "find the parts"),
            ("NoteRepair", json!({"repair": "T-7", "note": "Pads and a cable."}), "note what is needed"),
            ("SetPrice", json!({"repair": "T-7", "price": 45}), "Pads, a cable and an hour of work."),
        ]
    }
}

/// One request of a person to the agent: the model's tool calls go through the runtime one by one.
/// Returns the proposal the request ended in, if any.
fn handle_request(
    rt: &Runtime,
    app: &Workshop,
    person: &str,
    operation_key: &str,
) -> Result<Option<Proposal>, RuntimeError> {
    println!("\n{person} asks the estimator for an estimate of T-7 (work item `{operation_key}`)");
    let offered: Vec<String> = rt.offered_tools("Estimator", "EstimateRepair").into_iter().map(|t| t.name).collect();
    println!("  tools offered to the model: {}", offered.join(", "));
    let fault = app.repair.lock().map(|r| r.fault).unwrap_or_default();
    let mut evidence = Vec::new();
    for (tool, arguments, why) in ScriptedModel.tool_calls(fault) {
        let call = Call::new("Estimator", "EstimateRepair", tool).with_arguments(arguments.clone()).for_person(person);
        let request = ProposalRequest::new(call, operation_key, why).with_evidence(evidence.clone());
        match rt.call(&request, |ctx| app.run(ctx)) {
            Ok(Handled::Ran(ran)) => {
                println!("  {tool}: ran alone for {} → {:?}", ran.runs_as, ran.outcome);
                if let RunOutcome::Done(answer) = ran.outcome {
                    evidence.push(Evidence { tool: tool.to_string(), arguments, answer });
                }
            }
            Ok(Handled::Proposed(p)) => {
                println!("  {tool}: proposed as {} ({}), {}", p.id, p.status, p.answer_for_agent());
                println!("    the approval screen shows: {}", p.label);
                for arg in &p.shown {
                    println!("      {} = {}", arg.name, arg.shown);
                }
                println!("      why: {}", p.why);
                println!(
                    "      evidence: {} earlier call(s); covered version {:?}",
                    p.evidence.len(),
                    p.covered_version
                );
                return Ok(Some(*p));
            }
            Err(e) => println!("  {tool}: refused: {e}"),
        }
    }
    Ok(None)
}

fn load_table() -> Result<Table, String> {
    if let Some(path) = std::env::args().nth(1) {
        return Table::load_path(std::path::Path::new(&path)).map_err(|e| e.to_string());
    }
    #[cfg(feature = "compiler")]
    {
        permits::compile::compile_path(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/workshop"),
        )
    }
    #[cfg(not(feature = "compiler"))]
    {
        Err("without the compiler, pass a compiled table: `cargo run --example embed -- table.json`".into())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let table = load_table()?;
    let app = Workshop {
        repair: Arc::new(Mutex::new(Repair {
            ticket: "T-7",
            fault: "rear brake does not bite",
            note: String::new(),
            price: 0,
            revision: 1,
        })),
    };
    let audit = MemorySink::new();
    let rt =
        Runtime::new(table, app.clone()).with_versions(app.clone()).with_naming(app.clone()).with_audit(audit.clone());

    // Step 2: Mia asks for an estimate; the note is written alone, the price is proposed to her.
    let Some(first) = handle_request(&rt, &app, "Mia", "request-1")? else { return Err("no proposal".into()) };
    println!("  the price is still {}", app.price());

    // Step 3: Mia approves and runs it now; the call runs as the agent on her behalf, and she may not set
    // a price.
    println!("\nMia approves {}", first.id);
    match rt.approve_and_run(&first.id, "Mia", &first.fingerprint, ApproveMode::Once, |ctx| app.run(ctx)) {
        Ok(done) => println!("  {} is {}", done.proposal.id, done.proposal.status),
        Err(e) => println!("  refused: {e}"),
    }
    println!("  {} is now {}; the price is {}", first.id, rt.proposal(&first.id)?.status, app.price());

    // Step 4: a new request by Mia; Noor (a manager, who decides any proposal) approves it.
    let Some(second) = handle_request(&rt, &app, "Mia", "request-2")? else { return Err("no proposal".into()) };
    println!("\nNoor approves {}", second.id);
    let done = rt.approve_and_run(&second.id, "Noor", &second.fingerprint, ApproveMode::Once, |ctx| app.run(ctx))?;
    let approver = done.proposal.grant.as_ref().and_then(|g| g.approver.clone()).unwrap_or_default();
    println!(
        "  {} is {}: {approver} approved {} and it ran as {}; the price is {}",
        done.proposal.id,
        done.proposal.status,
        done.proposal.tool,
        done.proposal.ran_as.as_deref().unwrap_or("nobody"),
        app.price()
    );
    if done.proposal.status != Status::Done {
        return Err(format!("{} ended `{}`", done.proposal.id, done.proposal.status).into());
    }

    println!("\naudit ({} events):", audit.events().len());
    for e in audit.events() {
        println!(
            "  {:?} {} {}/{}/{} {} {}",
            e.kind,
            e.who.as_deref().unwrap_or("-"),
            e.agent,
            e.skill,
            e.tool,
            e.proposal.as_deref().unwrap_or("-"),
            e.outcome
        );
    }
    Ok(())
}
