//! Many hosts on one ledger (BENCHMARKS.md "Many hosts, one ledger"): `--hosts N` threads, each a host with
//! its own runtime and its own store (its own SQLite connection, or its own PostgreSQL connection, as hosts
//! on different machines have), on one fresh ledger, with the hardening shop's table (`Supplies` raised so
//! the ceiling never refuses). Two phases, each bounded by `--seconds`:
//!
//! 1. **reservations**: every host makes proposals of 600 cents (untimed), then approves them all: each
//!    approval is one transaction that checks the budget and reserves the amount. Approvals per second.
//! 2. **cycles**: propose → approve → execute (the grant consumed, the run's receipt settling the spend),
//!    three operations and their transactions per cycle. Cycles per second.
//!
//! ```text
//! cargo run --release -p permits-runtime --features postgres --example hosts -- --store ledger.db --hosts 4
//! cargo run --release -p permits-runtime --features postgres --example hosts -- --store "$PERMITS_TEST_POSTGRES" --hosts 4
//! ```
//!
//! A `postgres://` store names a server and a database whose user may create databases: the run makes a
//! database of its own and drops it at the end. A file is made fresh (removed first if it exists).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use permits_runtime::table::Table;
use permits_runtime::{AdmitAll, ApproveMode, Call, PostgresStore, ProposalRequest, RunOutcome, Runtime, SqliteStore};
use serde_json::json;

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    store: String,
    hosts: usize,
    seconds: u64,
    proposals: usize,
}

fn args() -> Result<Args, Error> {
    let mut a = Args { store: String::new(), hosts: 1, seconds: 10, proposals: 400 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
        match flag.as_str() {
            "--store" => a.store = value,
            "--hosts" => a.hosts = value.parse::<usize>()?.clamp(1, 64),
            "--seconds" => a.seconds = value.parse()?,
            "--proposals" => a.proposals = value.parse()?,
            other => return Err(format!("unknown flag `{other}`").into()),
        }
    }
    if a.store.is_empty() {
        return Err("give `--store FILE` or `--store postgres://…`".into());
    }
    Ok(a)
}

/// Where the hosts' stores are opened.
#[allow(clippy::large_enum_variant, reason = "one value per run")]
enum Ledger {
    File(PathBuf),
    Postgres { admin: postgres::Config, name: String, config: postgres::Config },
}

impl Ledger {
    fn new(store: &str) -> Result<Ledger, Error> {
        if store.starts_with("postgres://") || store.starts_with("postgresql://") {
            let admin: postgres::Config = store.parse()?;
            let name = format!("permits_bench_{}", std::process::id());
            admin.connect(postgres::NoTls)?.batch_execute(&format!("CREATE DATABASE {name}"))?;
            let mut config = admin.clone();
            config.dbname(&name);
            Ok(Ledger::Postgres { admin, name, config })
        } else {
            let path = PathBuf::from(store);
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            Ok(Ledger::File(path))
        }
    }

    fn host(&self, table: Table) -> Result<Runtime, Error> {
        let rt = Runtime::new(table, AdmitAll);
        Ok(match self {
            Ledger::File(path) => rt.with_store(SqliteStore::open(path)?),
            Ledger::Postgres { config, .. } => rt.with_store(PostgresStore::with_config(config.clone())?),
        })
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        match self {
            Ledger::File(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Ledger::Postgres { admin, name, .. } => {
                if let Ok(mut client) = admin.connect(postgres::NoTls) {
                    let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
                }
            }
        }
    }
}

fn table() -> Result<Table, Error> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/holes.table.json");
    let mut table = Table::load_path(&path)?;
    if let Some(budget) = table.budgets.get_mut("Supplies") {
        budget.ceiling = 1 << 50;
    }
    table.seal();
    Ok(table)
}

fn order(key: &str) -> ProposalRequest {
    let call = Call::new("Clerkbot", "Reorder", "PlaceOrder")
        .with_arguments(json!({"sku": "vanilla", "quantity": 1, "amount": 600}))
        .for_person("Sam");
    ProposalRequest::new(call, key, "we are low")
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hosts: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    let a = args()?;
    let ledger = Ledger::new(&a.store)?;
    let table = table()?;
    let hosts: Vec<Runtime> = (0..a.hosts).map(|_| ledger.host(table.clone())).collect::<Result<_, _>>()?;
    let limit = Duration::from_secs(a.seconds);

    // Phase 1: approvals, each one budget check and reservation.
    let mut waiting = Vec::new();
    for (h, rt) in hosts.iter().enumerate() {
        let mut mine = Vec::new();
        for n in 0..a.proposals {
            mine.push(rt.propose(&order(&format!("r{h}-{n}")))?);
        }
        waiting.push(mine);
    }
    let start = Barrier::new(a.hosts);
    let began = Instant::now();
    let approved: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .zip(&waiting)
            .map(|(rt, mine)| {
                let start = &start;
                scope.spawn(move || -> Result<usize, Error> {
                    start.wait();
                    let began = Instant::now();
                    let mut done = 0;
                    for p in mine {
                        if began.elapsed() > limit {
                            break;
                        }
                        rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
                        done += 1;
                    }
                    Ok(done)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a host panicked")?.map_err(|e| e.to_string()))
            .sum::<Result<usize, String>>()
    })?;
    let reservations = approved as f64 / began.elapsed().as_secs_f64();

    // Phase 2: full cycles.
    let start = Barrier::new(a.hosts);
    let began = Instant::now();
    let cycles: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(h, rt)| {
                let start = &start;
                scope.spawn(move || -> Result<usize, Error> {
                    start.wait();
                    let began = Instant::now();
                    let mut n = 0;
                    while began.elapsed() < limit {
                        let key = format!("c{h}-{n}");
                        let p = rt.propose(&order(&key))?;
                        rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
                        let receipt =
                            json!({"operation": format!("{key}:{}", p.id), "amount": 600, "outcome": "accepted"});
                        let ex = rt.execute(&p.id, None, |_| RunOutcome::Done(receipt))?;
                        if !ex.ran {
                            return Err(format!("{} did not run", p.id).into());
                        }
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a host panicked")?.map_err(|e| e.to_string()))
            .sum::<Result<usize, String>>()
    })?;
    let per_second = cycles as f64 / began.elapsed().as_secs_f64();
    let budget = hosts[0].budget("Supplies")?;
    let expected_spent = 600 * cycles as u64;
    if budget.spent != expected_spent {
        return Err(format!("spent {} instead of {expected_spent}", budget.spent).into());
    }
    let kind = match ledger {
        Ledger::File(_) => "sqlite",
        Ledger::Postgres { .. } => "postgres",
    };
    println!(
        "{kind} hosts={} reservations/s={reservations:.0} ({approved} approvals) cycles/s={per_second:.0} ({cycles} cycles, spent {} checked)",
        a.hosts, budget.spent
    );
    Ok(())
}
