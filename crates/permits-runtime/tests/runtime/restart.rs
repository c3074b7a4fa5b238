//! The PostgreSQL server restarted under load (issue #22): four hosts (threads, each a runtime on its own
//! connection) run propose → approve → execute cycles on a cluster of this test's own (`.ci/postgres
//! start`: restarting the shared test server would break the other tests), which the test restarts as a
//! crash would (`pg_ctl restart -m immediate`) while they run. Every failure a host sees is a typed store
//! error that says the operation may be retried (or, for a connection lost during the commit itself, that
//! the record must be read again first); each host retries until its cycle is through, and after
//! the restart every host completes more cycles. No grant runs twice or is consumed twice, and the ledger,
//! the runs and the audit chain agree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use permits_runtime::{
    AdmitAll, ApproveMode, EventKind, PostgresStore, ProposalRequest, Refusal, RunOutcome, Runtime, RuntimeError,
    Status, verify_chain,
};
use serde_json::json;

use crate::postgres::{order, shop};

type E = Box<dyn std::error::Error + Send + Sync>;

/// A throwaway cluster of this test's own, stopped and removed when dropped.
struct Cluster {
    dir: String,
    url: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/postgres")
}

impl Cluster {
    fn start() -> Result<Cluster, E> {
        let out = Command::new("bash").arg(script()).arg("start").output()?;
        if !out.status.success() {
            return Err(format!(
                "`.ci/postgres start` failed (the test needs PostgreSQL's initdb and pg_ctl, e.g. Debian's postgresql): {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let text = String::from_utf8(out.stdout)?;
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")).map(str::to_string))
                .ok_or_else(|| format!("`.ci/postgres start` printed no {name}: {text}"))
        };
        Ok(Cluster { dir: var("PERMITS_PG_DIR")?, url: var("PERMITS_TEST_POSTGRES")? })
    }

    /// `pg_ctl restart -m immediate`: every backend ends at once, as in a crash, and the server recovers
    /// from its log on the way up.
    fn restart(&self) -> Result<(), E> {
        let out = Command::new("bash").arg(script()).args(["restart", &self.dir, "immediate"]).output()?;
        if !out.status.success() {
            return Err(format!("`.ci/postgres restart` failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).args(["stop", &self.dir]).output();
    }
}

/// What the hosts saw.
#[derive(Default)]
struct Seen {
    /// Every error, as its message.
    errors: Vec<String>,
    /// Runs per proposal, counted where the run happens.
    runs: BTreeMap<String, u32>,
    /// The proposals each cycle made.
    proposals: Vec<String>,
    /// Cycles whose execution's answer was lost after the claim committed, settled by the host.
    settled_after_loss: u32,
}

const HOSTS: usize = 4;
/// Cycles each host completes before the restart, and again after it.
const CYCLES: u64 = 25;
/// How long a host keeps retrying one step before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// `step` until it is not a store error; every error is recorded, and anything but a store error fails.
fn retried<T>(seen: &Mutex<Seen>, mut step: impl FnMut() -> Result<T, RuntimeError>) -> Result<T, E> {
    let began = Instant::now();
    loop {
        match step() {
            Ok(v) => return Ok(v),
            Err(RuntimeError::Store(e)) => {
                seen.lock().map_err(|_| "poisoned")?.errors.push(e.0);
                if began.elapsed() > PATIENCE {
                    return Err("the store did not come back".into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(other) => return Err(format!("not a store error: {other}").into()),
        }
    }
}

/// One cycle of host `h`: propose, approve, execute with a claim token; after a lost answer the same token
/// tells the host where it stands, and the host records the outcome of a run it already made.
fn cycle(rt: &Runtime, h: usize, c: u64, seen: &Mutex<Seen>) -> Result<(), E> {
    let key = format!("h{h}-c{c}");
    let p = retried(seen, || rt.propose(&ProposalRequest::new(order(900), key.clone(), "we are low")))?;
    seen.lock().map_err(|_| "poisoned")?.proposals.push(p.id.clone());
    retried(seen, || rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once))?;
    let receipt = json!({"operation": format!("{key}:{}", p.id), "amount": 900, "outcome": "accepted"});
    let mut ran = false;
    let run = |ran: &mut bool| -> Result<RunOutcome, E> {
        *ran = true;
        *seen.lock().map_err(|_| "poisoned")?.runs.entry(p.id.clone()).or_default() += 1;
        Ok(RunOutcome::Done(receipt.clone()))
    };
    let ex = retried(seen, || {
        rt.execute_claimed(&p.id, None, &key, |_| match run(&mut ran) {
            Ok(outcome) => outcome,
            Err(e) => RunOutcome::Unknown(e.to_string()),
        })
    })?;
    if ex.proposal.status == Status::Sending {
        // The claim was committed but its answer, or the outcome's, was lost: run it if it has not run (the
        // other side would recognise the operation id), and settle the spend with the receipt. A settlement
        // whose answer was lost is found settled on the retry.
        if !ran {
            run(&mut ran)?;
        }
        seen.lock().map_err(|_| "poisoned")?.settled_after_loss += 1;
        retried(seen, || match rt.settle(&p.id, &receipt) {
            Err(e) if e.refusal() == Some(Refusal::NotConclusive) && rt.proposal(&p.id)?.status == Status::Done => {
                Ok(())
            }
            other => other.map(|_| ()),
        })?;
    }
    let done = retried(seen, || rt.proposal(&p.id))?;
    if done.status != Status::Done {
        return Err(format!("{} is {} after its cycle", p.id, done.status).into());
    }
    Ok(())
}

#[test]
fn the_server_restarted_under_load_gives_typed_errors_then_recovers_and_runs_no_grant_twice() -> Result<(), E> {
    let cluster = Cluster::start()?;
    let mut table = shop();
    if let Some(budget) = table.budgets.get_mut("Supplies") {
        budget.ceiling = 1 << 50;
    }
    table.seal();
    let hosts: Vec<Runtime> = (0..HOSTS)
        .map(|_| Ok(Runtime::new(table.clone(), AdmitAll).with_store(PostgresStore::connect(&cluster.url)?)))
        .collect::<Result<_, E>>()?;
    let seen = Mutex::new(Seen::default());
    let restarted = AtomicBool::new(false);
    let before = AtomicU64::new(0);
    let outcome: Result<(), E> = std::thread::scope(|scope| {
        let workers: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(h, rt)| {
                let (seen, restarted, before) = (&seen, &restarted, &before);
                scope.spawn(move || -> Result<u64, E> {
                    let (mut c, mut after) = (0, 0);
                    // Until the restart is over, then CYCLES more.
                    while after < CYCLES {
                        let during = restarted.load(Ordering::SeqCst);
                        cycle(rt, h, c, seen)?;
                        c += 1;
                        if during {
                            after += 1;
                        } else if c == CYCLES {
                            before.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    Ok(c)
                })
            })
            .collect();
        // Restart while every host is in the middle of its cycles.
        let began = Instant::now();
        while before.load(Ordering::SeqCst) < HOSTS as u64 && began.elapsed() < PATIENCE {
            std::thread::sleep(Duration::from_millis(5));
        }
        let restart = cluster.restart();
        restarted.store(true, Ordering::SeqCst);
        restart?;
        for w in workers {
            w.join().map_err(|_| "a host panicked")??;
        }
        Ok(())
    });
    outcome?;
    let seen = seen.into_inner().map_err(|_| "poisoned")?;
    eprintln!(
        "restart: {} cycles, {} store errors seen and retried, {} executions settled after a lost answer",
        seen.proposals.len(),
        seen.errors.len(),
        seen.settled_after_loss
    );
    // The hosts saw the restart, as typed errors that say what happened.
    assert!(!seen.errors.is_empty(), "no host saw the restart");
    assert!(
        seen.errors.iter().any(|e| e.starts_with(PostgresStore::CONNECTION_LOST)),
        "no host lost its connection mid-operation: {:?}",
        seen.errors
    );
    // A lost connection says so; a host that cannot connect while the server is down or starting up is
    // told why (the server's words and SQLSTATE, or the socket's error), and that nothing was done.
    // A connection lost during the `COMMIT` itself cannot know whether the server committed: that error says
    // so, and that the record must be read again before a retry (each step here is idempotent, by its
    // operation key, fingerprint or claim token, so the retry is that read).
    for e in &seen.errors {
        let lost = e.starts_with(PostgresStore::CONNECTION_LOST);
        let down = e.starts_with("cannot connect to PostgreSQL: ")
            && !e.contains("db error")
            && e.contains("nothing was done");
        let safe = (lost || down) && e.ends_with("the operation is safe to retry");
        let at_commit = lost
            && e.contains("during the commit")
            && e.ends_with("the transaction was committed whole or not at all; read the record again before retrying");
        assert!(safe || at_commit, "{e}");
    }
    // Each grant ran once; the ledger and the chain agree.
    let count = seen.proposals.len();
    assert!(count as u64 >= 2 * CYCLES * HOSTS as u64);
    assert_eq!(seen.runs.len(), count);
    assert!(
        seen.runs.values().all(|n| *n == 1),
        "{:?}",
        seen.runs.iter().filter(|(_, n)| **n != 1).collect::<Vec<_>>()
    );
    let rt = &hosts[0];
    let b = rt.budget("Supplies")?;
    assert_eq!((b.reserved, b.spent), (0, 900 * count as u64), "each grant settled once");
    let chain = rt.audit_chain()?;
    assert_eq!(verify_chain(&chain, rt.audit_head()?.as_ref())?, rt.audit_head()?);
    let mut consumed: BTreeMap<&str, u32> = BTreeMap::new();
    // An admission is an execution event `sending`; a retry under the same claim token is audited too, with
    // the proposal's status and the reason saying it is a retry, and consumes nothing.
    let admissions = chain.iter().filter(|e| {
        e.event.kind == EventKind::Execution
            && e.event.outcome == "sending"
            && !e.event.reason.as_deref().is_some_and(|r| r.starts_with("a retry of claim"))
    });
    for e in admissions {
        *consumed.entry(e.event.proposal.as_deref().unwrap_or_default()).or_default() += 1;
    }
    assert_eq!(consumed.len(), count);
    assert!(consumed.values().all(|n| *n == 1), "a grant consumed twice: {consumed:?}");
    Ok(())
}
