//! Per-task budgets (spec §6 "Per task") on `policies/research-desk`: `shared/cases/delegation-modes.md`
//! outcome 8, direct and delegated, as values (statuses, spent per task, audit kinds), the cap
//! for operator grants, automatic grants and alone spends alike, a spend that names no task, and races: calls
//! of one task spending from its per-task amount from two threads and from two OS processes on one SQLite
//! ledger never exceed it.

use std::path::Path;
use std::process::Command;
use std::sync::Barrier;

use permits::runtime::{
    AdmitAll, ApproveMode, Authorization, Basis, Call, EventKind, Handled, MemorySink, ProposalRequest, Refusal,
    RunOutcome, Runtime, RuntimeError, SqliteStore, Status,
};
use permits::table::{Level, Table};
use serde_json::json;

use crate::support::Temp;

type R = Result<(), Box<dyn std::error::Error>>;

fn desk() -> Result<Table, Box<dyn std::error::Error>> {
    Ok(permits::compile::compile_path(&crate::root().join("policies/research-desk"))?)
}

/// The research desk with the Researcher's `spends: alone` made `spends: propose`, so a small buy is
/// proposed and granted automatically (the delegated half of outcome 8 gets this from Coder's layer).
fn desk_proposing_spends(tmp: &Temp) -> Result<Table, Box<dyn std::error::Error>> {
    let from = crate::root().join("policies/research-desk");
    for entry in std::fs::read_dir(&from)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let text = std::fs::read_to_string(&path)?;
        let text = if name == "agents.permits" {
            assert!(text.contains("        spends: alone\n"), "the research desk's Researcher spends alone");
            text.replace("        spends: alone\n", "        spends: propose\n")
        } else if name == "tests.permits" {
            continue;
        } else {
            text
        };
        tmp.write(&format!("desk/{name}"), text);
    }
    Ok(permits::compile::compile_path(&tmp.path("desk"))?)
}

fn buy(amount: u64) -> Call {
    Call::new("Researcher", "Look", "BuyCredits").with_arguments(json!({"amount": amount})).for_person("Ben")
}

/// The other side's answer for an operation: conclusive, accepted.
fn accepted(ctx: &permits::runtime::RunContext<'_>, amount: u64) -> RunOutcome {
    RunOutcome::Done(json!({"operation": ctx.operation, "amount": amount, "outcome": "accepted"}))
}

fn refusal(r: Result<impl Sized, RuntimeError>) -> Option<(Refusal, String)> {
    match r {
        Err(RuntimeError::Refused { refusal, message }) => Some((refusal, message)),
        _ => None,
    }
}

fn figures(rt: &Runtime, task: &str) -> Result<(u64, u64), RuntimeError> {
    rt.task_spending("Research", task).map(|t| (t.spent, t.reserved))
}

/// Outcome 8, the direct call: in `T3` a buy of 1500 is `propose` (over `alone_up_to`); Ben approves, it
/// executes, a conclusive receipt settles it: 1500 spent in `T3`. A second buy of 800 in `T3` is refused at
/// grant with the figures; the same 800 in `T4` is granted. A buy of 300 in `T5` runs alone (the
/// Researcher's `spends: alone`, within the allowance) and counts in `T5` alone.
#[test]
fn outcome_8_per_task_budget_direct_call() -> R {
    let sink = MemorySink::new();
    let rt = Runtime::new(desk()?, AdmitAll).with_audit(sink.clone());
    let request = |amount: u64, task: &str| ProposalRequest::new(buy(amount), task, "Credits for the search.");

    assert_eq!(rt.decide(&buy(1500).in_task("T3"))?.level, Level::Propose);
    let first = rt.propose(&request(1500, "T3"))?;
    assert_eq!(first.status, Status::Waiting, "1500 is over the allowance: nobody granted it");
    let granted = rt.approve(&first.id, "Ben", &first.fingerprint, ApproveMode::Once)?;
    assert_eq!((granted.status, granted.grant.map(|g| g.basis)), (Status::Granted, Some(Basis::Operator)));
    assert_eq!(figures(&rt, "T3")?, (0, 1500), "held at grant");
    let ran = rt.execute(&first.id, None, |ctx| accepted(ctx, 1500))?;
    assert_eq!(ran.proposal.status, Status::Done);
    assert_eq!(figures(&rt, "T3")?, (1500, 0), "spent 1500 in T3");

    let second = rt.propose(&request(800, "T3"))?;
    assert_eq!(second.status, Status::Waiting);
    let (kind, message) = refusal(rt.approve(&second.id, "Ben", &second.fingerprint, ApproveMode::Once))
        .ok_or("the second buy in T3 must be refused")?;
    assert_eq!(kind, Refusal::Budget);
    assert_eq!(
        message,
        "budget `Research`, task `T3`: per task: 1500 of 2000 cents held (1500 spent, 0 reserved); 800 cents more would exceed it (500 left)"
    );
    assert_eq!(rt.proposal(&second.id)?.status, Status::Waiting, "nothing was granted");
    assert_eq!(figures(&rt, "T3")?, (1500, 0), "nothing more is held in T3");

    let elsewhere = rt.propose(&request(800, "T4"))?;
    assert_eq!(rt.approve(&elsewhere.id, "Ben", &elsewhere.fingerprint, ApproveMode::Once)?.status, Status::Granted);
    assert_eq!(figures(&rt, "T4")?, (0, 800));

    let small = rt.call(&request(300, "T5"), |ctx| accepted(ctx, 300))?;
    let Handled::Ran(ran) = small else { return Err("300 in T5 runs alone".into()) };
    assert_eq!(ran.decision.level, Level::Alone);
    assert_eq!(figures(&rt, "T5")?, (300, 0));
    assert_eq!(figures(&rt, "T3")?, (1500, 0), "another task's spend is not T3's");

    let total = rt.budget("Research")?;
    assert_eq!((total.spent, total.reserved, total.per_task), (1800, 800, Some(2000)));

    // The audit: Ben's operator grants, the refusal naming the figures, and how each execution was authorized.
    let events = sink.events();
    let grants: Vec<(Option<&str>, Option<&str>)> = events
        .iter()
        .filter(|e| e.kind == EventKind::Grant)
        .map(|e| (e.proposal.as_deref(), e.who.as_deref()))
        .collect();
    assert_eq!(grants, [(Some(first.id.as_str()), Some("Ben")), (Some(elsewhere.id.as_str()), Some("Ben"))]);
    assert!(
        events.iter().any(|e| e.kind == EventKind::Refusal
            && e.proposal.as_deref() == Some(second.id.as_str())
            && e.reason.as_deref() == Some(message.as_str())),
        "the refusal is audited"
    );
    let authorized: Vec<(&str, Option<&Authorization>)> = events
        .iter()
        .filter(|e| e.kind == EventKind::Execution)
        .map(|e| (e.outcome.as_str(), e.authorized_by.as_ref()))
        .collect();
    let ben = Authorization::Person("Ben".into());
    assert_eq!(
        authorized,
        [
            ("sending", Some(&ben)),
            ("done", Some(&ben)),
            ("admitted", Some(&Authorization::PolicyAlone)),
            ("done", Some(&Authorization::PolicyAlone)),
        ]
    );
    let settled: Vec<&str> =
        events.iter().filter(|e| e.kind == EventKind::Settlement).map(|e| e.outcome.as_str()).collect();
    // The alone spend is settled by its own event; the proposal's settlement is its execution's `done`.
    assert_eq!(settled, ["spent"]);
    Ok(())
}

/// Outcome 8, delegated (Researcher.Look.BuyCredits via Coder.FixBug): 1500 in `T3` is `propose` (Coder's layer
/// leaves `spends` unset: the agent-layer default), Ben approves, it runs and settles: 1500 spent in `T3`; 800
/// more in `T3` is refused at grant with the figures; 800 in `T4` is granted; 300 via Coder in `T5` is
/// proposed and granted **automatically** (within `alone_up_to`, nobody asked). The task's root is Coder.FixBug.
#[test]
fn outcome_8_per_task_budget_delegated() -> R {
    let sink = MemorySink::new();
    let rt = Runtime::new(desk()?, AdmitAll).with_audit(sink.clone());
    let via = |amount: u64| buy(amount).delegated_by("Coder", "FixBug");
    let request = |amount: u64, task: &str| ProposalRequest::new(via(amount), task, "Credits for the search.");

    let first = rt.propose(&request(1500, "T3"))?;
    assert_eq!((first.level, first.status), (Level::Propose, Status::Waiting));
    rt.approve(&first.id, "Ben", &first.fingerprint, ApproveMode::Once)?;
    assert_eq!(rt.execute(&first.id, None, |ctx| accepted(ctx, 1500))?.proposal.status, Status::Done);
    assert_eq!(figures(&rt, "T3")?, (1500, 0));
    assert_eq!(rt.task("T3")?.map(|t| (t.root_agent, t.root_skill)), Some(("Coder".into(), "FixBug".into())));

    let second = rt.propose(&request(800, "T3"))?;
    let (kind, message) = refusal(rt.approve(&second.id, "Ben", &second.fingerprint, ApproveMode::Once))
        .ok_or("the second buy in T3 must be refused")?;
    assert_eq!(kind, Refusal::Budget);
    assert_eq!(
        message,
        "budget `Research`, task `T3`: per task: 1500 of 2000 cents held (1500 spent, 0 reserved); 800 cents more would exceed it (500 left)"
    );
    let elsewhere = rt.propose(&request(800, "T4"))?;
    assert_eq!(rt.approve(&elsewhere.id, "Ben", &elsewhere.fingerprint, ApproveMode::Once)?.status, Status::Granted);

    let small = rt.propose(&request(300, "T5"))?;
    assert_eq!((small.status, small.grant.as_ref().map(|g| g.basis)), (Status::Granted, Some(Basis::Automatic)));
    assert_eq!(figures(&rt, "T5")?, (0, 300));
    let automatic: Vec<Option<String>> = sink
        .events()
        .iter()
        .filter(|e| e.kind == EventKind::Grant && e.who.is_none())
        .map(|e| e.proposal.clone())
        .collect();
    assert_eq!(automatic, [Some(small.id.clone())], "one automatic grant, nobody asked: the 300 in T5");
    let ran = rt.execute(&small.id, None, |ctx| accepted(ctx, 300))?;
    assert_eq!(ran.proposal.status, Status::Done);
    let authorized: Vec<Option<Authorization>> = sink
        .events()
        .iter()
        .filter(|e| e.kind == EventKind::Execution && e.proposal.as_deref() == Some(small.id.as_str()))
        .map(|e| e.authorized_by.clone())
        .collect();
    assert_eq!(authorized, [Some(Authorization::AutomaticGrant), Some(Authorization::AutomaticGrant)]);
    assert_eq!(figures(&rt, "T5")?, (300, 0));
    Ok(())
}

/// Automatic grants count toward the cap like any other (spec §6): with the Researcher's spends proposed,
/// six buys of 300 in one task are granted automatically (1800), the seventh is not (it waits for a person,
/// the reason naming the figures), and a person's approval of it is refused too; the same buy in another task
/// is granted automatically.
#[test]
fn automatic_grants_stop_at_the_per_task_cap() -> R {
    let tmp = Temp::new("per-task-automatic");
    let sink = MemorySink::new();
    let rt = Runtime::new(desk_proposing_spends(&tmp)?, AdmitAll).with_audit(sink.clone());
    let mut statuses = Vec::new();
    let mut last = None;
    for n in 0..7 {
        // Each a new buy: the same call under one key would be a retry of the first, so each goes to
        // another endpoint (the destination is part of the fingerprint).
        let request = ProposalRequest::new(buy(300), "T6", format!("search {n}"))
            .with_destination(format!("https://credits.example.com/order/{n}"));
        let p = rt.propose(&request)?;
        statuses.push(p.status);
        last = Some(p);
    }
    assert_eq!(statuses, [vec![Status::Granted; 6], vec![Status::Waiting]].concat());
    let last = last.ok_or("seven proposals")?;
    assert_eq!(
        last.reason.as_deref(),
        Some(
            "not granted automatically: budget `Research`, task `T6`: per task: 1800 of 2000 cents held (0 spent, 1800 reserved); 300 cents more would exceed it (200 left)"
        )
    );
    assert_eq!(
        refusal(rt.approve(&last.id, "Ben", &last.fingerprint, ApproveMode::Once)).map(|r| r.0),
        Some(Refusal::Budget)
    );
    assert_eq!(figures(&rt, "T6")?, (0, 1800));
    let other = rt.propose(&ProposalRequest::new(buy(300), "T7", "search"))?;
    assert_eq!((other.status, other.grant.map(|g| g.basis)), (Status::Granted, Some(Basis::Automatic)));
    assert_eq!(figures(&rt, "T7")?, (0, 300));
    let automatic = sink.events().iter().filter(|e| e.kind == EventKind::Grant && e.who.is_none()).count();
    assert_eq!(automatic, 7, "six in T6, one in T7: nobody asked");
    Ok(())
}

/// A call with no task under a budget with `per_task` (spec §5a: every call carries its operation key; §6:
/// the cap cannot be escaped): an alone spend that names no task is refused, nothing is reserved or spent,
/// and the refusal says why. The same call in a task runs.
#[test]
fn a_spend_that_names_no_task_is_refused_under_a_per_task_budget() -> R {
    let sink = MemorySink::new();
    let rt = Runtime::new(desk()?, AdmitAll).with_audit(sink.clone());
    let mut ran = false;
    let refused = refusal(rt.run_alone(&buy(300), |ctx| {
        ran = true;
        accepted(ctx, 300)
    }))
    .ok_or("a spend without a task must be refused")?;
    assert!(!ran, "nothing ran");
    assert_eq!(
        refused,
        (
            Refusal::Budget,
            "budget `Research` caps what each task holds (2000 cents per task): a spend from it needs the task's operation key, and this call names none".to_string()
        )
    );
    let total = rt.budget("Research")?;
    assert_eq!((total.spent, total.reserved), (0, 0));
    assert!(
        sink.events().iter().any(|e| e.kind == EventKind::Refusal && e.reason.as_deref() == Some(refused.1.as_str()))
    );
    let ran = rt.run_alone(&buy(300).in_task("T8"), |ctx| accepted(ctx, 300))?;
    assert_eq!(ran.decision.level, Level::Alone);
    assert_eq!(figures(&rt, "T8")?, (300, 0));
    Ok(())
}

/// How many alone buys of 300 one worker tries in the task `T-race`.
const TRIES: usize = 5;

/// One worker: a runtime on the SQLite ledger at `db` making [`TRIES`] alone buys of 300 in `T-race`, each
/// settled by a conclusive receipt. Returns how many ran, and checks every other one was refused for the
/// task's cap (never for anything else).
fn race_worker(table: &Table, db: &Path, start: Option<&Barrier>) -> Result<usize, Box<dyn std::error::Error>> {
    let rt = Runtime::new(table.clone(), AdmitAll).with_store(SqliteStore::open(db)?);
    if let Some(start) = start {
        start.wait();
    }
    let mut ran = 0;
    for _ in 0..TRIES {
        match rt.run_alone(&buy(300).in_task("T-race"), |ctx| accepted(ctx, 300)) {
            Ok(_) => ran += 1,
            Err(RuntimeError::Refused { refusal: Refusal::Budget, message })
                if message.starts_with("budget `Research`, task `T-race`: per task: 1800 of 2000 cents held") => {}
            Err(e) => return Err(format!("a buy failed for another reason: {e}").into()),
        }
    }
    Ok(ran)
}

/// What every race leaves: 6 buys of 300 ran (1800 of the cap of 2000; a seventh would be 2100), spent in
/// the task and in the total, nothing reserved.
fn check_race_ledger(table: &Table, db: &Path, ran: usize) -> R {
    assert_eq!(ran, 6, "exactly six buys of 300 fit under 2000");
    let rt = Runtime::new(table.clone(), AdmitAll).with_store(SqliteStore::open(db)?);
    assert_eq!(figures(&rt, "T-race")?, (1800, 0));
    let total = rt.budget("Research")?;
    assert_eq!((total.spent, total.reserved), (1800, 0));
    Ok(())
}

/// Two threads, each with its own store on one SQLite file (as two hosts have), race to spend from one
/// task's per-task amount: together they never exceed it.
#[test]
fn two_threads_spending_in_one_task_never_exceed_its_cap() -> R {
    let tmp = Temp::new("per-task-threads");
    let db = tmp.path("ledger.db");
    let table = desk()?;
    // The file exists (and is migrated) before the threads open it.
    drop(SqliteStore::open(&db)?);
    let start = Barrier::new(2);
    let ran: Vec<Result<usize, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..2).map(|_| scope.spawn(|| race_worker(&table, &db, Some(&start)).map_err(|e| e.to_string()))).collect();
        handles.into_iter().map(|h| h.join().map_err(|_| "a worker panicked".to_string()).and_then(|r| r)).collect()
    });
    let ran = ran.into_iter().collect::<Result<Vec<usize>, String>>()?;
    check_race_ledger(&table, &db, ran.iter().sum())
}

/// The variable that makes [`a_per_task_race_worker_process`] a worker of
/// [`two_processes_spending_in_one_task_never_exceed_its_cap`]: the ledger's path.
const WORKER_LEDGER: &str = "PERMITS_PER_TASK_WORKER_LEDGER";

/// Run by [`two_processes_spending_in_one_task_never_exceed_its_cap`] in child processes of this test binary,
/// with [`WORKER_LEDGER`] set: one worker on that ledger, printing how many of its buys ran. Run alone (the
/// variable unset), it is one worker on a ledger of its own, which spends 5 × 300 and checks it.
#[test]
fn a_per_task_race_worker_process() -> R {
    let table = desk()?;
    match std::env::var_os(WORKER_LEDGER) {
        Some(db) => {
            let ran = race_worker(&table, Path::new(&db), None)?;
            println!("\nran {ran}");
        }
        None => {
            let tmp = Temp::new("per-task-worker");
            let db = tmp.path("ledger.db");
            assert_eq!(race_worker(&table, &db, None)?, TRIES, "5 × 300 fit under 2000");
            let rt = Runtime::new(table, AdmitAll).with_store(SqliteStore::open(&db)?);
            assert_eq!(figures(&rt, "T-race")?, (1500, 0));
        }
    }
    Ok(())
}

/// Two OS processes (this test binary, running [`a_per_task_race_worker_process`]) on one SQLite file race to
/// spend from one task's per-task amount: together they never exceed it.
#[test]
fn two_processes_spending_in_one_task_never_exceed_its_cap() -> R {
    let tmp = Temp::new("per-task-processes");
    let db = tmp.path("ledger.db");
    let table = desk()?;
    drop(SqliteStore::open(&db)?);
    let exe = std::env::current_exe()?;
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "per_task::a_per_task_race_worker_process", "--nocapture", "--test-threads=1"])
                .env(WORKER_LEDGER, &db)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut ran = 0;
    for child in children {
        let out = child.wait_with_output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "a worker process failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let line =
            stdout.lines().find_map(|l| l.strip_prefix("ran ")).ok_or_else(|| format!("no count in: {stdout}"))?;
        ran += line.trim().parse::<usize>()?;
    }
    check_race_ledger(&table, &db, ran)
}

/// A proposal's status after proposing, and its reason.
type Outcome = (Status, Option<String>);

/// How many delegated buys of 300 each child tries in [`two_delegated_children_of_one_task_never_exceed_its_cap`].
const CHILD_TRIES: usize = 5;

/// One delegated child of the task `T-children` (the Researcher working for Coder in FixBug, spec §3b): a
/// runtime on the SQLite ledger at `db` proposing [`CHILD_TRIES`] buys of 300, each granted automatically
/// while the task's cap has room (Coder's layer proposes; within `alone_up_to` nobody is asked) and then
/// executed and settled. Returns the statuses of its proposals after proposing, and the reasons of those not
/// granted.
fn delegated_child(
    table: &Table,
    db: &Path,
    child: usize,
    start: &Barrier,
) -> Result<Vec<Outcome>, Box<dyn std::error::Error>> {
    let rt = Runtime::new(table.clone(), AdmitAll).with_store(SqliteStore::open(db)?);
    start.wait();
    let mut out = Vec::new();
    for n in 0..CHILD_TRIES {
        // Each a new buy: another destination, so not a retry of the first.
        let to = format!("https://credits.example.com/child-{child}/{n}");
        let request = ProposalRequest::new(buy(300).delegated_by("Coder", "FixBug"), "T-children", "credits")
            .with_destination(to.clone());
        let p = rt.propose(&request)?;
        if p.status == Status::Granted {
            let ran = rt.execute(&p.id, Some(&to), |ctx| accepted(ctx, 300))?;
            assert_eq!(ran.proposal.status, Status::Done);
        }
        out.push((p.status, p.reason));
    }
    Ok(out)
}

/// Two delegated children of one task (each the Researcher via Coder.FixBug, each with its own store on one
/// SQLite file, as two hosts have) race to spend from the task's per-task amount (spec §6 "Per task", §3b):
/// exactly six buys of 300 are granted (1800 of 2000; a seventh would be 2100), the other four wait with the
/// cap as their reason, and the task and the budget hold 1800 spent, nothing reserved — never over. The
/// task's root is Coder.FixBug.
#[test]
fn two_delegated_children_of_one_task_never_exceed_its_cap() -> R {
    let tmp = Temp::new("per-task-children");
    let db = tmp.path("ledger.db");
    let table = desk()?;
    drop(SqliteStore::open(&db)?);
    let start = Barrier::new(2);
    let outcomes: Vec<Result<Vec<Outcome>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|child| {
                let (table, db, start) = (&table, &db, &start);
                scope.spawn(move || delegated_child(table, db, child, start).map_err(|e| e.to_string()))
            })
            .collect();
        handles.into_iter().map(|h| h.join().map_err(|_| "a child panicked".to_string()).and_then(|r| r)).collect()
    });
    let outcomes: Vec<Outcome> =
        outcomes.into_iter().collect::<Result<Vec<_>, String>>()?.into_iter().flatten().collect();
    let granted = outcomes.iter().filter(|(s, _)| *s == Status::Granted).count();
    assert_eq!(granted, 6, "{outcomes:?}");
    for (status, reason) in outcomes.iter().filter(|(s, _)| *s != Status::Granted) {
        assert_eq!(*status, Status::Waiting);
        let reason = reason.as_deref().unwrap_or_default();
        assert!(
            reason.starts_with(
                "not granted automatically: budget `Research`, task `T-children`: per task: 1800 of 2000 cents held"
            ) && reason.ends_with("300 cents more would exceed it (200 left)"),
            "{reason}"
        );
    }
    let rt = Runtime::new(table.clone(), AdmitAll).with_store(SqliteStore::open(&db)?);
    assert_eq!(figures(&rt, "T-children")?, (1800, 0));
    let total = rt.budget("Research")?;
    assert_eq!((total.spent, total.reserved), (1800, 0));
    assert_eq!(rt.task("T-children")?.map(|t| (t.root_agent, t.root_skill)), Some(("Coder".into(), "FixBug".into())));
    Ok(())
}

/// `permitc decide --task KEY` (no ledger): the decision, the task, and for a spend the budget's per-task
/// figures with nothing spent; an amount above `per_task` says it would be refused at grant. Without
/// `--task` the output is the decision alone, as before.
#[test]
fn permitc_decide_with_a_task_shows_the_per_task_figures() -> R {
    let tmp = Temp::new("per-task-decide");
    let table = tmp.path("desk.json");
    let compiled = crate::support::permitc(&["compile", "policies/research-desk", "-o", &table.to_string_lossy()]);
    assert_eq!(compiled.code, 0, "{}", compiled.stderr);
    let decide = |amount: u64, extra: &[&str]| {
        let args = format!("{{\"amount\": {amount}}}");
        let table = table.to_string_lossy().into_owned();
        let mut all = vec![
            "decide",
            "--table",
            &table,
            "--agent",
            "Researcher",
            "--skill",
            "Look",
            "--tool",
            "BuyCredits",
            "--args",
            &args,
            "--requester",
            "Ben",
        ];
        all.extend_from_slice(extra);
        crate::support::permitc(&all)
    };
    let run = decide(1500, &["--task", "T3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout)?;
    assert_eq!(json["level"], "propose");
    assert_eq!(json["task"], "T3");
    assert_eq!(
        json["spend"],
        json!({"budget": "Research", "amount": 1500, "unit": "cents", "ceiling": 100000, "alone_up_to": 500,
               "per_task": 2000, "task_spent": 0, "task_reserved": 0, "task_room": 2000, "fits_task": true})
    );
    let run = decide(1500, &["--task", "T3", "--format", "human"]);
    assert_eq!(
        run.stdout.trim_end(),
        "`Researcher` / `Look` / `BuyCredits`: propose (waits on a decision from Ben); task `T3`: budget `Research`: 1500 cents of the 2000 cents one task may hold (500 left after it; decide keeps no ledger, so the task has spent nothing)"
    );
    let run = decide(2500, &["--task", "T3", "--format", "human"]);
    assert!(
        run.stdout.trim_end().ends_with(
            "task `T3`: budget `Research`: 2500 cents is more than the 2000 cents one task may hold: refused at grant"
        ),
        "{}",
        run.stdout
    );
    let json: serde_json::Value = serde_json::from_str(&decide(2500, &["--task", "T3"]).stdout)?;
    assert_eq!(json["spend"]["fits_task"], false);
    // Without a task: the decision alone.
    let json: serde_json::Value = serde_json::from_str(&decide(1500, &[]).stdout)?;
    assert_eq!((json.get("task"), json.get("spend")), (None, None));
    assert_eq!(json["level"], "propose");
    Ok(())
}

/// `permitc explain` of a tool that spends from a budget with `per_task` names the cap (text and JSON).
#[test]
fn permitc_explain_names_the_per_task_cap() -> R {
    let args =
        ["explain", "--agent", "Researcher", "--skill", "Look", "--tool", "BuyCredits", "policies/research-desk"];
    let run = crate::support::permitc(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "ceiling 100000, alone up to 500, 2000 per task (declared at policies/research-desk/tools.permits:6)"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("holds at most 2000 cents reserved and spent; a call with no task cannot spend from it")
    );
    let run = crate::support::permitc(&[&args[..], &["--format", "json"]].concat());
    let json: serde_json::Value = serde_json::from_str(&run.stdout)?;
    assert_eq!(json["budget"]["per_task"], 2000);
    Ok(())
}
