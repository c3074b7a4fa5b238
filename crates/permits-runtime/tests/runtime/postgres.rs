//! Many hosts, one ledger (issue #22): runtimes with their own [`PostgresStore`] each (their own
//! connection, as hosts on different machines have) race on one PostgreSQL database, on the compiled
//! hardening shop (`holes.table.json`: the budget `Supplies`, ceiling 10,000 cents, orders routed to a
//! buyer). The server is the one `PERMITS_TEST_POSTGRES` names (`.ci/postgres start` starts one); each test
//! makes its own database and drops it. Without the variable these tests fail, saying how to give it.

use std::path::Path;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU32, Ordering};

use permits_runtime::table::Table;
use permits_runtime::{AdmitAll, ApproveMode, Call, PostgresStore, ProposalRequest, Refusal, RunOutcome, Runtime};
use postgres::{Config, NoTls};
use serde_json::json;

type R = Result<(), Box<dyn std::error::Error>>;

/// A database of its own on the test server, dropped at the end.
pub(crate) struct Database {
    pub(crate) admin: Config,
    pub(crate) name: String,
    pub(crate) config: Config,
    /// The test server's URL (`PERMITS_TEST_POSTGRES`), naming its own database.
    admin_url: String,
}

impl Database {
    pub(crate) fn new(test: &str) -> Result<Database, Box<dyn std::error::Error>> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let url = std::env::var("PERMITS_TEST_POSTGRES").map_err(|_| {
            "the PostgreSQL tests need a server: set PERMITS_TEST_POSTGRES to a URL whose user may create databases, \
             e.g. `eval \"$(.ci/postgres start)\"` at the repository's root"
        })?;
        let admin: Config = url.parse()?;
        let name = format!("permits_it_{}_{}_{test}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        admin.connect(NoTls)?.batch_execute(&format!("CREATE DATABASE {name}"))?;
        let mut config = admin.clone();
        config.dbname(&name);
        Ok(Database { admin, name, config, admin_url: url })
    }

    /// The database's URL, for a host in another process: the server's URL with this database's name.
    pub(crate) fn url(&self) -> Result<String, String> {
        let (base, query) = match self.admin_url.split_once('?') {
            Some((base, query)) => (base, format!("?{query}")),
            None => (self.admin_url.as_str(), String::new()),
        };
        let at = base.find("://").map(|i| i + 3).ok_or("PERMITS_TEST_POSTGRES is not a postgres:// URL")?;
        let server = match base[at..].find('/') {
            Some(slash) => &base[..at + slash],
            None => base,
        };
        Ok(format!("{server}/{}{query}", self.name))
    }

    /// A host: a runtime on its own connection to the database.
    fn host(&self) -> Result<Runtime, Box<dyn std::error::Error>> {
        Ok(Runtime::new(shop(), AdmitAll).with_store(PostgresStore::with_config(self.config.clone())?))
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Ok(mut client) = self.admin.connect(NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

pub(crate) fn shop() -> Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/holes.table.json");
    Table::load_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub(crate) fn order(amount: u64) -> Call {
    Call::new("Clerkbot", "Reorder", "PlaceOrder")
        .with_arguments(json!({"sku": "vanilla", "quantity": 1, "amount": amount}))
        .for_person("Sam")
}

const HOSTS: usize = 4;

#[test]
fn postgres_hosts_racing_to_execute_one_grant_run_it_once() -> R {
    let db = Database::new("execute")?;
    let hosts: Vec<Runtime> = (0..HOSTS).map(|_| db.host()).collect::<Result<_, _>>()?;
    // Ten orders of 900 cents, each settled by its one run: 9,000 of the ceiling's 10,000.
    const ROUNDS: u32 = 10;
    let runs = AtomicU32::new(0);
    for round in 0..ROUNDS {
        let p = hosts[0].propose(&ProposalRequest::new(order(900), format!("order-{round}"), "we are low"))?;
        hosts[1].approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
        let start = Barrier::new(HOSTS);
        let outcomes: Vec<Result<bool, Option<Refusal>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = hosts
                .iter()
                .map(|rt| {
                    let (start, runs, id) = (&start, &runs, p.id.clone());
                    let receipt =
                        json!({"operation": format!("order-{round}:{id}"), "amount": 900, "outcome": "accepted"});
                    scope.spawn(move || {
                        start.wait();
                        rt.execute(&id, None, |_| {
                            runs.fetch_add(1, Ordering::SeqCst);
                            RunOutcome::Done(receipt)
                        })
                        .map(|ex| ex.ran)
                        .map_err(|e| e.refusal())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(Err(None))).collect()
        });
        let ran = outcomes.iter().filter(|o| matches!(o, Ok(true))).count();
        assert_eq!(ran, 1, "round {round}: {outcomes:?}");
        // Every other host was refused (the grant was consumed), or came after the run and got its
        // stored outcome without running; none failed in the store.
        assert!(outcomes.iter().all(|o| matches!(o, Ok(_) | Err(Some(_)))), "round {round}: {outcomes:?}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), ROUNDS, "one run per grant");
    let budget = hosts[3].budget("Supplies")?;
    assert_eq!((budget.reserved, budget.spent), (0, 9_000), "each grant settled once");
    Ok(())
}

#[test]
fn postgres_hosts_racing_for_the_last_of_a_ceiling_never_overspend() -> R {
    let db = Database::new("ceiling")?;
    let hosts: Vec<Runtime> = (0..HOSTS).map(|_| db.host()).collect::<Result<_, _>>()?;
    // 24 orders of 900 cents under a ceiling of 10,000: 11 fit (9,900), 13 do not.
    let proposals = (0..24)
        .map(|n| hosts[n % HOSTS].propose(&ProposalRequest::new(order(900), format!("order-{n}"), "we are low")))
        .collect::<Result<Vec<_>, _>>()?;
    let start = Barrier::new(HOSTS);
    let outcomes: Vec<Result<(), Option<Refusal>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(i, rt)| {
                let (start, mine) = (&start, proposals.iter().skip(i).step_by(HOSTS).collect::<Vec<_>>());
                scope.spawn(move || {
                    start.wait();
                    mine.into_iter()
                        .map(|p| {
                            rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)
                                .map(|_| ())
                                .map_err(|e| e.refusal())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    assert_eq!(outcomes.len(), 24);
    let granted = outcomes.iter().filter(|o| o.is_ok()).count();
    let over = outcomes.iter().filter(|o| **o == Err(Some(Refusal::Budget))).count();
    assert_eq!((granted, over), (11, 13), "{outcomes:?}");
    let budget = hosts[0].budget("Supplies")?;
    assert_eq!((budget.reserved, budget.spent), (9_900, 0));
    // Every host reads the same ledger.
    for rt in &hosts {
        assert_eq!(rt.budget("Supplies")?.reserved, 9_900);
    }
    Ok(())
}

/// The research desk (`research-desk.json`): the budget `Research`, alone up to 500, 2000 per task.
fn desk() -> Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/research-desk.json");
    Table::load_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn credits(amount: u64) -> Call {
    Call::new("Researcher", "Look", "BuyCredits").with_arguments(json!({"amount": amount})).for_person("Ben")
}

/// Spec §6 "Per task" on one PostgreSQL database: hosts racing to spend from one task's per-task amount — alone
/// buys admitted and settled, and operator grants — never take the task over its cap of 2000 cents.
#[test]
fn postgres_hosts_spending_in_one_task_never_exceed_its_cap() -> R {
    let db = Database::new("pertask")?;
    let hosts: Vec<Runtime> = (0..HOSTS)
        .map(|_| Ok(Runtime::new(desk(), AdmitAll).with_store(PostgresStore::with_config(db.config.clone())?)))
        .collect::<Result<_, Box<dyn std::error::Error>>>()?;
    // Alone buys of 300, five per host: six fit (1800), a seventh would be 2100.
    let start = Barrier::new(HOSTS);
    let outcomes: Vec<Result<(), Option<Refusal>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|rt| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    (0..5)
                        .map(|_| {
                            rt.run_alone(&credits(300).in_task("T-alone"), |ctx| {
                                RunOutcome::Done(
                                    json!({"operation": ctx.operation, "amount": 300, "outcome": "accepted"}),
                                )
                            })
                            .map(|_| ())
                            .map_err(|e| e.refusal())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    let ran = outcomes.iter().filter(|o| o.is_ok()).count();
    let over = outcomes.iter().filter(|o| **o == Err(Some(Refusal::Budget))).count();
    assert_eq!((ran, over), (6, 14), "{outcomes:?}");
    let task = hosts[0].task_spending("Research", "T-alone")?;
    assert_eq!((task.spent, task.reserved), (1800, 0));

    // Operator grants of 600 (over the allowance, so proposed), eight in one task: three fit (1800).
    let proposals = (0..8)
        .map(|n| {
            let request = ProposalRequest::new(credits(600), "T-granted", "credits")
                .with_destination(format!("https://credits.example.com/{n}"));
            hosts[n % HOSTS].propose(&request)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let start = Barrier::new(HOSTS);
    let outcomes: Vec<Result<(), Option<Refusal>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(i, rt)| {
                let (start, mine) = (&start, proposals.iter().skip(i).step_by(HOSTS).collect::<Vec<_>>());
                scope.spawn(move || {
                    start.wait();
                    mine.into_iter()
                        .map(|p| {
                            rt.approve(&p.id, "Ben", &p.fingerprint, ApproveMode::Once)
                                .map(|_| ())
                                .map_err(|e| e.refusal())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    let granted = outcomes.iter().filter(|o| o.is_ok()).count();
    let over = outcomes.iter().filter(|o| **o == Err(Some(Refusal::Budget))).count();
    assert_eq!((granted, over), (3, 5), "{outcomes:?}");
    for rt in &hosts {
        let task = rt.task_spending("Research", "T-granted")?;
        assert_eq!((task.spent, task.reserved), (0, 1800));
    }
    let total = hosts[1].budget("Research")?;
    assert_eq!((total.spent, total.reserved), (1800, 1800));
    Ok(())
}

/// Spec §6 "Per task", §3b on one PostgreSQL database: delegated children of one task (the Researcher via
/// Coder.FixBug, one per host, each on its own connection) racing to spend from the task's per-task amount.
/// Their buys of 300 are proposed (Coder's layer) and granted automatically while the cap has room, each
/// reserving at its grant: exactly six are granted (1800 of 2000), the rest wait with the cap as their
/// reason, and once the granted ones have run the task holds 1800 spent, nothing reserved — never over.
#[test]
fn postgres_delegated_children_of_one_task_never_exceed_its_cap() -> R {
    let db = Database::new("children")?;
    let hosts: Vec<Runtime> = (0..HOSTS)
        .map(|_| Ok(Runtime::new(desk(), AdmitAll).with_store(PostgresStore::with_config(db.config.clone())?)))
        .collect::<Result<_, Box<dyn std::error::Error>>>()?;
    let start = Barrier::new(HOSTS);
    let outcomes: Vec<Result<(permits_runtime::Status, Option<String>), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(child, rt)| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    (0..3)
                        .map(|n| {
                            let to = format!("https://credits.example.com/child-{child}/{n}");
                            let request = ProposalRequest::new(
                                credits(300).delegated_by("Coder", "FixBug"),
                                "T-children",
                                "credits",
                            )
                            .with_destination(to.clone());
                            let p = rt.propose(&request).map_err(|e| e.to_string())?;
                            if p.status == permits_runtime::Status::Granted {
                                rt.execute(&p.id, Some(&to), |ctx| {
                                    RunOutcome::Done(
                                        json!({"operation": ctx.operation, "amount": 300, "outcome": "accepted"}),
                                    )
                                })
                                .map_err(|e| e.to_string())?;
                            }
                            Ok((p.status, p.reason))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|_| vec![Err("a child panicked".into())])).collect()
    });
    let outcomes = outcomes.into_iter().collect::<Result<Vec<_>, String>>()?;
    let granted = outcomes.iter().filter(|(s, _)| *s == permits_runtime::Status::Granted).count();
    assert_eq!((granted, outcomes.len()), (6, 3 * HOSTS), "{outcomes:?}");
    for (status, reason) in outcomes.iter().filter(|(s, _)| *s != permits_runtime::Status::Granted) {
        assert_eq!(*status, permits_runtime::Status::Waiting);
        let reason = reason.as_deref().unwrap_or_default();
        assert!(
            reason.starts_with(
                "not granted automatically: budget `Research`, task `T-children`: per task: 1800 of 2000 cents held"
            ),
            "{reason}"
        );
    }
    let task = hosts[0].task_spending("Research", "T-children")?;
    assert_eq!((task.spent, task.reserved), (1800, 0));
    let total = hosts[2].budget("Research")?;
    assert_eq!((total.spent, total.reserved), (1800, 0));
    assert_eq!(
        hosts[1].task("T-children")?.map(|t| (t.root_agent, t.root_skill)),
        Some(("Coder".into(), "FixBug".into()))
    );
    Ok(())
}
