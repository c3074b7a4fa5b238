//! A lease host (issue #22, spec §5a "Leases"): one host process with its own runtime and its own store —
//! an SQLite file, or with the feature `postgres` a PostgreSQL database — that takes the shop's restocking
//! task by a lease and sends its order to the supplier test peer (`examples/supplier`). The fencing test
//! (`tests/runtime/fencing.rs`) starts two of it, host A and host B, on one store: A takes the task and
//! gets the grant, then stalls past its lease; B takes the task over and executes; A's late execute and
//! settle are refused.
//!
//! ```text
//! lease_host --db FILE|postgres://… --host NAME --supplier http://127.0.0.1:PORT --witness FILE
//! ```
//!
//! It prints `ready` once its store is open, then reads commands from stdin, one a line, and answers each
//! with one line of JSON on stdout. A host that is sent nothing stalls: its lease runs out while it waits.
//!
//! - `take SECONDS`: [`Runtime::take_task`] of the task for this host; its lease is the one it presents from
//!   then on. Answers `{"fence", "taken_at", "expires_at"}`.
//! - `propose`: proposes vanilla × 6 (1,500 cents) toward the supplier's `/orders`, presenting the lease if
//!   it has one. Answers `{"id", "status", "fingerprint"}`.
//! - `approve ID FINGERPRINT`: Lucy approves the proposal once. Answers `{"status"}`.
//! - `execute ID`: executes the proposal, presenting the lease if it has one; the run appends `ID HOST` to
//!   the witness file (what actually ran, counted outside the store and outside the supplier, which
//!   replays an operation it has seen) and sends the order. Answers `{"ran", "status"}`.
//! - `settle ID`: settles the proposal with an accepted receipt, presenting the lease. Answers
//!   `{"reserved", "spent"}`.
//!
//! Every runtime error is answered as `{"error", "refusal", "ran"}`, never by exiting: the test decides
//! what is allowed. It ends at the end of stdin.

#[path = "../../../examples/supplier/client.rs"]
#[allow(dead_code, reason = "the client serves several includers")]
mod supplier_client;

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use permits_runtime::table::Table;
use permits_runtime::{
    AdmitAll, ApproveMode, Call, Lease, ProposalRequest, RunContext, RunOutcome, Runtime, RuntimeError, SqliteStore,
};
use serde_json::{Value, json};
use supplier_client::{Supplier, order_outcome};

type Error = Box<dyn std::error::Error>;

/// The task both hosts work on: one restocking order.
const TASK: &str = "restock-2026-12-02";

struct Args {
    db: String,
    host: String,
    supplier: String,
    witness: String,
}

fn args() -> Result<Args, Error> {
    let mut a = Args { db: String::new(), host: String::new(), supplier: String::new(), witness: String::new() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
        match flag.as_str() {
            "--db" => a.db = value,
            "--host" => a.host = value,
            "--supplier" => a.supplier = value,
            "--witness" => a.witness = value,
            other => return Err(format!("unknown flag `{other}`").into()),
        }
    }
    if [&a.db, &a.host, &a.supplier, &a.witness].iter().any(|v| v.is_empty()) {
        return Err("give `--db`, `--host`, `--supplier` and `--witness`".into());
    }
    Ok(a)
}

/// The shop's compiled policy (`policies/shop`): an order of 1,500 waits for Lucy.
fn table() -> Result<Table, Error> {
    Ok(Table::load_path(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/shop.json"))?)
}

fn runtime(db: &str) -> Result<Runtime, Error> {
    let rt = Runtime::new(table()?, AdmitAll);
    if db.starts_with("postgres://") || db.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(rt.with_store(permits_runtime::PostgresStore::connect(db)?));
        #[cfg(not(feature = "postgres"))]
        return Err("this lease host was built without the feature `postgres`".into());
    }
    Ok(rt.with_store(SqliteStore::open(Path::new(db))?))
}

fn order() -> Call {
    Call::new("Restocker", "Reorder", "PlaceOrder")
        .with_arguments(json!({"sku": "vanilla", "quantity": 6, "amount": 1500}))
        .for_person("Lucy")
}

/// The host's run: the witness line, then the order to the supplier with the runtime's operation id.
fn send(supplier: &Supplier, witness: &mut std::fs::File, line: &str, ctx: &RunContext<'_>) -> RunOutcome {
    // One write of one line: appends from several processes do not interleave.
    if let Err(e) = witness.write_all(line.as_bytes()) {
        return RunOutcome::Failed(format!("the witness file cannot be written: {e}"));
    }
    order_outcome(supplier, ctx)
}

/// A runtime error as the JSON the test reads.
fn error_json(e: &RuntimeError, ran: bool) -> Value {
    json!({"error": e.to_string(), "refusal": e.refusal(), "ran": ran})
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lease_host: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    let a = args()?;
    let rt = runtime(&a.db)?;
    let supplier = Supplier::new(&a.supplier);
    let destination = format!("{}/orders", supplier.base_url());
    let mut witness = std::fs::OpenOptions::new().create(true).append(true).open(&a.witness)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut lease: Option<Lease> = None;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["take", seconds] => match rt.take_task(TASK, &a.host, seconds.parse()?) {
                Ok(l) => {
                    let answer = json!({"fence": l.fence, "taken_at": l.taken_at, "expires_at": l.expires_at});
                    lease = Some(l);
                    answer
                }
                Err(e) => error_json(&e, false),
            },
            ["propose"] => {
                let request =
                    ProposalRequest::new(order(), TASK, "the freezer runs low").with_destination(&destination);
                let proposed = match &lease {
                    Some(l) => rt.holding(l).propose(&request),
                    None => rt.propose(&request),
                };
                match proposed {
                    Ok(p) => json!({"id": p.id, "status": p.status, "fingerprint": p.fingerprint}),
                    Err(e) => error_json(&e, false),
                }
            }
            ["approve", id, fingerprint] => match rt.approve(id, "Lucy", fingerprint, ApproveMode::Once) {
                Ok(p) => json!({"status": p.status}),
                Err(e) => error_json(&e, false),
            },
            ["execute", id] => {
                let mut ran = false;
                let witnessed = format!("{id} {}\n", a.host);
                let run = |ctx: &RunContext<'_>| {
                    ran = true;
                    send(&supplier, &mut witness, &witnessed, ctx)
                };
                let executed = match &lease {
                    Some(l) => rt.holding(l).execute(id, Some(&destination), run),
                    None => rt.execute(id, Some(&destination), run),
                };
                match executed {
                    Ok(ex) => json!({"ran": ran, "reported_ran": ex.ran, "status": ex.proposal.status}),
                    Err(e) => error_json(&e, ran),
                }
            }
            ["settle", id] => {
                let receipt = json!({"operation": format!("{TASK}:{id}"), "amount": 1500, "outcome": "accepted"});
                let settled = match &lease {
                    Some(l) => rt.holding(l).settle(id, &receipt),
                    None => rt.settle(id, &receipt),
                };
                match settled {
                    Ok(b) => json!({"reserved": b.reserved, "spent": b.spent}),
                    Err(e) => error_json(&e, false),
                }
            }
            _ => return Err(format!("`{line}` is not a command of the lease host").into()),
        };
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(())
}
