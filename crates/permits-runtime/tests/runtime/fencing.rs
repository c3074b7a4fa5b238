//! Lease fencing across OS processes, with the supplier (issue #22, spec §5a "Leases"): two lease hosts
//! (`examples/lease_host.rs`, each a process with its own runtime and its own store) on one ledger — an
//! SQLite file, and a PostgreSQL database (`PERMITS_TEST_POSTGRES`) — and the supplier test peer
//! (`examples/supplier`), a third process that receives the orders. Host A takes the task for one second,
//! proposes the order and gets Lucy's grant, then stalls (it is sent nothing) past its lease; host B,
//! refused while A holds the task, takes it over once the lease has run out (fence 2) and executes; then A
//! wakes up, and its execute and its settle are refused ("this host no longer holds the task"). The
//! supplier receives one order; a witness file the runs append to shows that only B's run ran (the
//! supplier replays an operation id it has seen, so its count alone could not tell a second send).

use crate::child::{HostProcess, example_exe};
use crate::supplier_client;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use permits_runtime::{AdmitAll, EventKind, Runtime, Status, Store, verify_chain};
use serde_json::Value;
use supplier_client::SupplierProcess;

type R = Result<(), Box<dyn std::error::Error>>;
type E = Box<dyn std::error::Error>;

/// The task the lease hosts work on (`lease_host`'s `TASK`).
const TASK: &str = "restock-2026-12-02";

/// One lease host process (`lease_host`), its stdin, and its lines of output.
struct Host(HostProcess);

impl Host {
    fn start(db: &str, name: &'static str, supplier: &str, witness: &Path) -> Result<Host, E> {
        let features: &[&str] = if cfg!(feature = "postgres") { &["postgres"] } else { &[] };
        let mut command = Command::new(example_exe("lease_host", features)?);
        command.args(["--db", db, "--host", name, "--supplier", supplier]).arg("--witness").arg(witness);
        let host = Host(HostProcess::start(name, command)?);
        let ready = host.0.line()?;
        if ready != "ready" {
            return Err(format!("{name}: `{ready}` where `ready` was expected").into());
        }
        Ok(host)
    }

    /// Sends `command` and returns the host's answer.
    fn ask(&mut self, command: &str) -> Result<Value, E> {
        self.0.send(command)?;
        Ok(serde_json::from_str(&self.0.line()?)?)
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A folder of the test's own, removed at the end.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Result<Temp, E> {
        let dir = std::env::temp_dir().join(format!("permits-fencing-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Temp(dir))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The scenario on the store at `db` (a file or a URL), checked through `parent`, a runtime of the test's
/// own on the same store.
fn a_stalled_host_is_fenced(db: &str, parent: &Runtime, temp: &Temp) -> R {
    let exe = supplier_client::build_supplier()?;
    let supplier = SupplierProcess::start(&exe, &temp.0.join("supplier.db"))?;
    let witness = temp.0.join("witness");
    let witnessed = || std::fs::read_to_string(&witness).unwrap_or_default();
    let mut a = Host::start(db, "host-a", &supplier.url, &witness)?;
    let mut b = Host::start(db, "host-b", &supplier.url, &witness)?;

    // A takes the task for one second, proposes the order, and Lucy grants it: A is ready to execute.
    let taken = a.ask("take 1")?;
    assert_eq!(taken["fence"], 1, "{taken}");
    let expires_at = taken["expires_at"].as_u64().ok_or("no expiry")?;
    assert_eq!(taken["taken_at"].as_u64().map(|t| t + 1), Some(expires_at));
    let proposed = a.ask("propose")?;
    assert_eq!(proposed["status"], "waiting", "{proposed}");
    let id = proposed["id"].as_str().ok_or("no proposal id")?.to_string();
    let fingerprint = proposed["fingerprint"].as_str().ok_or("no fingerprint")?;
    let approved = a.ask(&format!("approve {id} {fingerprint}"))?;
    assert_eq!(approved["status"], "granted", "{approved}");

    // While A holds the task, B can neither take it nor execute under it.
    let refused = b.ask("take 30")?;
    assert_eq!(refused["refusal"], "not_holder", "{refused}");
    assert_eq!(
        refused["error"],
        format!(
            "task `{TASK}` is held by `host-a` until {expires_at}: take it after that, or when `host-a` releases it"
        )
    );
    let refused = b.ask(&format!("execute {id}"))?;
    assert_eq!((&refused["refusal"], &refused["ran"]), (&Value::from("not_holder"), &Value::from(false)), "{refused}");
    assert_eq!(
        refused["error"],
        format!(
            "task `{TASK}` is held by `host-a` until {expires_at}: only its holder acts under it (take the task, or wait)"
        )
    );
    assert_eq!(supplier.supplier.orders().map_err(|e| e.to_string())?.len(), 0);

    // A stalls (it is sent nothing) until its lease has run out by the clock every host reads; B takes the
    // task over, with the next fence, and executes: the order reaches the supplier.
    let deadline = Instant::now() + Duration::from_secs(10);
    while unix_now() < expires_at {
        assert!(Instant::now() < deadline, "the clock did not reach the lease's expiry");
        std::thread::sleep(Duration::from_millis(50));
    }
    let took_over = b.ask("take 30")?;
    assert_eq!(took_over["fence"], 2, "{took_over}");
    let executed = b.ask(&format!("execute {id}"))?;
    assert_eq!(
        (&executed["ran"], &executed["reported_ran"], &executed["status"]),
        (&Value::from(true), &Value::from(true), &Value::from("done")),
        "{executed}"
    );
    let operation = format!("{TASK}:{id}");
    let orders = supplier.supplier.orders().map_err(|e| e.to_string())?;
    assert_eq!(orders.len(), 1);
    assert_eq!(
        (orders[0]["operation"].as_str(), orders[0]["sku"].as_str(), orders[0]["amount"].as_i64()),
        (Some(operation.as_str()), Some("vanilla"), Some(1500))
    );
    assert_eq!(witnessed(), format!("{id} host-b\n"));

    // A wakes up with its old lease: its execute and its settle are refused, and nothing runs.
    let fenced = format!(
        "this host no longer holds the task `{TASK}`: `host-b` holds it now (fence 2); `host-a` may not act under it"
    );
    let late = a.ask(&format!("execute {id}"))?;
    assert_eq!((&late["refusal"], &late["ran"]), (&Value::from("not_holder"), &Value::from(false)), "{late}");
    assert_eq!(late["error"], fenced.as_str());
    let late = a.ask(&format!("settle {id}"))?;
    assert_eq!(late["refusal"], "not_holder", "{late}");
    assert_eq!(late["error"], fenced.as_str());

    // The supplier counts one order; only B's run ran; the ledger has the order done and spent once.
    assert_eq!(supplier.supplier.orders().map_err(|e| e.to_string())?.len(), 1);
    assert_eq!(witnessed(), format!("{id} host-b\n"));
    let p = parent.proposal(&id)?;
    assert_eq!(p.status, Status::Done);
    let budget = parent.budget("Supplies")?;
    assert_eq!((budget.reserved, budget.spent), (0, 1500));
    assert_eq!(parent.lease(TASK)?.map(|l| (l.holder, l.fence)), Some(("host-b".to_string(), 2)));
    // Both refusals of A are in the chain, which verifies.
    let chain = parent.audit_chain()?;
    assert_eq!(verify_chain(&chain, parent.audit_head()?.as_ref())?, parent.audit_head()?);
    let refusals: Vec<&str> = chain
        .iter()
        .filter(|c| c.event.kind == EventKind::Refusal && c.event.reason.as_deref() == Some(fenced.as_str()))
        .map(|c| c.event.who.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(refusals, ["host-a", "host-a"], "the late execute and the late settle, audited");
    let leased: Vec<&str> = chain
        .iter()
        .filter(|c| c.event.kind == EventKind::Task && c.event.outcome == "leased")
        .filter_map(|c| c.event.reason.as_deref())
        .collect();
    let b_expires_at = took_over["expires_at"].as_u64().ok_or("no expiry")?;
    assert_eq!(
        leased,
        [
            format!("task `{TASK}` leased: `host-a` holds it with fence 1 until {expires_at}"),
            format!(
                "task `{TASK}` leased: `host-b` holds it with fence 2 until {b_expires_at} (taken over from `host-a`, fence 1)"
            ),
        ]
    );
    drop((a, b));
    Ok(())
}

fn parent_on(store: impl Store + Send + Sync + 'static) -> Result<Runtime, E> {
    Ok(Runtime::new(crate::fixture("shop")?, AdmitAll).with_store(store))
}

#[test]
fn a_host_stalled_past_its_lease_is_fenced_on_an_sqlite_file() -> R {
    let temp = Temp::new("sqlite")?;
    let db = temp.0.join("ledger.db");
    let parent = parent_on(permits_runtime::SqliteStore::open(&db)?)?;
    a_stalled_host_is_fenced(&db.to_string_lossy(), &parent, &temp)
}

#[cfg(feature = "postgres")]
#[test]
fn a_host_stalled_past_its_lease_is_fenced_on_postgres() -> R {
    let temp = Temp::new("postgres")?;
    let db = crate::postgres::Database::new("fencing")?;
    let parent = parent_on(permits_runtime::PostgresStore::with_config(db.config.clone())?)?;
    a_stalled_host_is_fenced(&db.url()?, &parent, &temp)
}
