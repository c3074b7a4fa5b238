//! A race host (issue #22, "Four separate OS processes … racing"): one host process with its own runtime and
//! its own [`PostgresStore`] connection, driven round by round by the race tests in
//! `tests/runtime/races.rs`, which start four of it on one database and act as their start barrier.
//!
//! ```text
//! race_host --db postgres://…/db --kind ceiling|execute|supersede|revoke --host N [--witness FILE]
//! ```
//!
//! It prints `ready` once connected, then reads commands from stdin, one a line, and answers each with one
//! line on stdout:
//!
//! - `prep R` (kind `ceiling`): proposes this host's order of 900 cents for round R; answers `prepped R`.
//! - `go R [ARG]`: this host's part of round R, answered `done R JSON` (the JSON says what happened: a
//!   grant or a refusal, whether the run ran, the proposal's status, the times of each use).
//!
//! It ends at the end of stdin. The table is the hardening shop (`tests/fixtures/holes.table.json`); for
//! `execute` and `supersede` its ceiling is raised so that the budget never refuses (the race is about
//! the grant and the key, not the ceiling). Every runtime error is answered in the JSON (`error`, and
//! `store: true` for a [`RuntimeError::Store`]), never by exiting: the test decides what is allowed.
//! With `--witness FILE`, every run of `execute` appends `P-ID HOST` to FILE (opened for appending): what
//! actually ran, counted outside the store.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use permits_runtime::table::Table;
use permits_runtime::{AdmitAll, ApproveMode, Call, PostgresStore, ProposalRequest, RunOutcome, Runtime, RuntimeError};
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

struct Args {
    db: String,
    kind: String,
    host: usize,
    witness: Option<String>,
}

fn args() -> Result<Args, Error> {
    let mut a = Args { db: String::new(), kind: String::new(), host: 0, witness: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
        match flag.as_str() {
            "--db" => a.db = value,
            "--kind" => a.kind = value,
            "--host" => a.host = value.parse()?,
            "--witness" => a.witness = Some(value),
            other => return Err(format!("unknown flag `{other}`").into()),
        }
    }
    if a.db.is_empty() || !["ceiling", "execute", "supersede", "revoke"].contains(&a.kind.as_str()) {
        return Err("give `--db postgres://…` and `--kind ceiling|execute|supersede|revoke`".into());
    }
    Ok(a)
}

/// The hardening shop; for `execute` and `supersede` with a ceiling that never refuses.
fn table(kind: &str) -> Result<Table, Error> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/holes.table.json");
    let mut table = Table::load_path(&path)?;
    if kind == "execute" || kind == "supersede" {
        if let Some(budget) = table.budgets.get_mut("Supplies") {
            budget.ceiling = 1 << 50;
        }
        table.seal();
    }
    Ok(table)
}

fn order(amount: u64) -> Call {
    Call::new("Clerkbot", "Reorder", "PlaceOrder")
        .with_arguments(json!({"sku": "vanilla", "quantity": 1, "amount": amount}))
        .for_person("Sam")
}

fn markdown() -> Call {
    Call::new("Clerkbot", "ClearStock", "MarkDown")
        .with_arguments(json!({"sku": "mint", "percent": 20}))
        .for_person("Sam")
}

/// Nanoseconds since the Unix epoch: one clock for every process on the machine.
fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// A runtime error as the JSON the test reads.
fn error_json(e: &RuntimeError) -> Value {
    json!({
        "error": e.to_string(),
        "refusal": e.refusal(),
        "store": matches!(e, RuntimeError::Store(_)),
    })
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("race_host: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    let a = args()?;
    let rt = Runtime::new(table(&a.kind)?, AdmitAll).with_store(PostgresStore::connect(&a.db)?);
    let mut witness = match &a.witness {
        Some(path) => Some(std::fs::OpenOptions::new().create(true).append(true).open(path)?),
        None => None,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    // The proposal this host prepared for the current round (kind `ceiling`).
    let mut prepared: Option<(String, String)> = None;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let (command, round) = match words.as_slice() {
            [command, round, ..] => (*command, round.parse::<u64>()?),
            _ => return Err(format!("a command is `prep R` or `go R [ARG]`, not `{line}`").into()),
        };
        let arg = words.get(2).copied().unwrap_or_default();
        let h = a.host;
        let answer = match (command, a.kind.as_str()) {
            ("prep", "ceiling") => {
                let p = rt.propose(&ProposalRequest::new(order(900), format!("c{round}-h{h}"), "the last tubs"))?;
                prepared = Some((p.id, p.fingerprint));
                writeln!(out, "prepped {round}")?;
                out.flush()?;
                continue;
            }
            ("go", "ceiling") => {
                let (id, fingerprint) = prepared.take().ok_or("`go` before `prep`")?;
                match rt.approve(&id, "Max", &fingerprint, ApproveMode::Once) {
                    Ok(p) => json!({"id": id, "granted": true, "status": p.status}),
                    Err(e) => json!({"id": id, "granted": false, "why": error_json(&e)}),
                }
            }
            ("go", "execute") => {
                let receipt = json!({"operation": format!("x{round}:{arg}"), "amount": 900, "outcome": "accepted"});
                let mut ran = false;
                let result = rt.execute(arg, None, |_| {
                    ran = true;
                    if let Some(file) = witness.as_mut() {
                        // One write of one line: appends from several processes do not interleave.
                        let _ = file.write_all(format!("{arg} {h}\n").as_bytes());
                    }
                    RunOutcome::Done(receipt)
                });
                match result {
                    Ok(ex) => json!({"ran": ran, "reported_ran": ex.ran, "status": ex.proposal.status}),
                    Err(e) => json!({"ran": ran, "why": error_json(&e)}),
                }
            }
            ("go", "supersede") => {
                // Hosts 0 and 1 ask within the automatic allowance (500): granted at once; hosts 2 and 3 over
                // it: waiting, then approved by Max, unless another host's proposal superseded it first.
                let amount = [300, 400, 700, 800][h % 4];
                match rt.propose(&ProposalRequest::new(order(amount), format!("s{round}"), "the freezer")) {
                    Ok(p) => {
                        let approved = if p.status == permits_runtime::Status::Waiting {
                            match rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once) {
                                Ok(g) => json!({"status": g.status}),
                                Err(e) => error_json(&e),
                            }
                        } else {
                            Value::Null
                        };
                        json!({"id": p.id, "proposed": p.status, "approved": approved})
                    }
                    Err(e) => json!({"why": error_json(&e)}),
                }
            }
            ("go", "revoke") if arg == "revoke" => {
                let rule = words.get(3).copied().unwrap_or_default();
                let start = now_ns();
                let result = rt.revoke_rule(rule, "Lucy", "the sale is over");
                let end = now_ns();
                match result {
                    Ok(r) => {
                        json!({"revoked": r.revoked.is_some(), "start": start.to_string(), "end": end.to_string()})
                    }
                    Err(e) => json!({"revoked": false, "why": error_json(&e)}),
                }
            }
            ("go", "revoke") => {
                // Up to three uses, until one is refused.
                let mut uses = Vec::new();
                for _ in 0..3 {
                    let start = now_ns();
                    let result = rt.run_alone(&markdown(), |_| RunOutcome::Done(json!({"marked": true})));
                    let end = now_ns();
                    let (admitted, rule, why) = match &result {
                        Ok(ran) => (true, ran.decision.standing_rule.clone(), Value::Null),
                        Err(e) => (false, None, error_json(e)),
                    };
                    uses.push(json!({
                        "admitted": admitted, "rule": rule, "why": why,
                        "start": start.to_string(), "end": end.to_string(),
                    }));
                    if !admitted {
                        break;
                    }
                }
                json!({ "uses": uses })
            }
            _ => return Err(format!("`{command}` is not a command of kind `{}`", a.kind).into()),
        };
        writeln!(out, "done {round} {answer}")?;
        out.flush()?;
    }
    Ok(())
}
