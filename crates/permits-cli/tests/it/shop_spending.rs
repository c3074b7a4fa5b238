//! Lucy's ice-cream shop (`shared/cases/shop-spending.md`): steps 1–9 in one run against the supplier, a
//! separate process on loopback with its own SQLite database, and every item under "Also required".
//!
//! The tables are compiled by the real `permitc` from `policies/shop` (and from copies of it with other
//! `alone_up_to` figures, as a recompiled policy); the ledger is an SQLite file; what reached the supplier
//! is counted by asking the supplier.

use crate::supplier_client;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};

use permits::runtime::{
    AdmitAll, ApproveMode, Basis, Call, ManualClock, MemoryStore, Proposal, ProposalRequest, Refusal, RunOutcome,
    Runtime, RuntimeError, SqliteStore, Status, Store, StoreError, Transaction,
};
use permits::table::Table;
use serde_json::{Value, json};

use crate::support::Temp;
use supplier_client::{Supplier, SupplierError, SupplierProcess, order_outcome};

type R = Result<(), Box<dyn std::error::Error>>;

const DAY: u64 = 24 * 60 * 60;
const WORK: &str = "restock-2026-11-30";
/// Authoritative prices in US cents: the host computes every amount, never the model.
const VANILLA: i64 = 250;
const STRAWBERRY: i64 = 275;

/// Compiles `policies/shop` with the budget's `alone_up_to` (and `ceiling`) replaced, with the real
/// `permitc`, and loads the table as a host would.
fn shop_table(dir: &Path, alone_up_to: u64, ceiling: u64) -> Result<Table, Box<dyn std::error::Error>> {
    shop_variant(dir, alone_up_to, ceiling, &[])
}

/// `policies/shop` with these figures and these text replacements, compiled by `permitc`.
fn shop_variant(
    dir: &Path,
    alone_up_to: u64,
    ceiling: u64,
    edits: &[(&str, &str)],
) -> Result<Table, Box<dyn std::error::Error>> {
    let src = crate::root().join("policies/shop");
    let pkg = dir.join(format!("shop-{alone_up_to}-{ceiling}-{}", edits.len()));
    std::fs::create_dir_all(&pkg)?;
    for entry in std::fs::read_dir(&src)? {
        let path = entry?.path();
        let mut text = std::fs::read_to_string(&path)?
            .replace("ceiling: 2500, alone_up_to: 0", &format!("ceiling: {ceiling}, alone_up_to: {alone_up_to}"));
        for (from, to) in edits {
            text = text.replace(from, to);
        }
        std::fs::write(pkg.join(path.file_name().ok_or("a file name")?), text)?;
    }
    let out = pkg.join("table.json");
    let run = Command::new(env!("CARGO_BIN_EXE_permitc")).arg("compile").arg(&pkg).arg("-o").arg(&out).output()?;
    assert!(run.status.success(), "permitc compile: {}", String::from_utf8_lossy(&run.stderr));
    Ok(Table::load_path(&out)?)
}

fn order(sku: &str, tubs: i64, price: i64) -> Call {
    Call::new("Restocker", "Reorder", "PlaceOrder")
        .with_arguments(json!({ "sku": sku, "quantity": tubs, "amount": tubs * price }))
        .for_person("Lucy")
}

fn request(call: Call, destination: &str) -> ProposalRequest {
    ProposalRequest::new(call, WORK, "the freezer runs low").with_destination(destination)
}

fn refusal<T: std::fmt::Debug>(result: Result<T, RuntimeError>) -> Option<Refusal> {
    match result {
        Err(e) => e.refusal(),
        Ok(v) => panic!("expected a refusal, got {v:?}"),
    }
}

fn figures(rt: &Runtime) -> Result<(u64, u64), RuntimeError> {
    let b = rt.budget("Supplies")?;
    Ok((b.reserved, b.spent))
}

fn supplier_orders(supplier: &Supplier) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    supplier.orders().map_err(|e| format!("{e:?}").into())
}

fn start_supplier(dir: &Path) -> Result<SupplierProcess, Box<dyn std::error::Error>> {
    let exe = match supplier_client::supplier_exe() {
        Some(exe) => exe,
        None => supplier_client::build_supplier()?,
    };
    Ok(SupplierProcess::start(&exe, &dir.join("supplier.db"))?)
}

#[test]
fn shop_spending_steps_1_to_9() -> R {
    let tmp = Temp::new("shop-steps");
    let ledger = tmp.0.join("ledger.db");
    let supplier = start_supplier(&tmp.0)?;
    let url = format!("{}/orders", supplier.url);
    let clock = ManualClock::at(1_800_000_000);
    let open = |table: Table| -> Result<Runtime, StoreError> {
        Ok(Runtime::new(table, AdmitAll).with_clock(clock.clone()).with_store(SqliteStore::open(&ledger)?))
    };
    let mut rt = open(shop_table(&tmp.0, 0, 2500)?)?;

    // 1. Propose vanilla × 6 → 1500, a draft; the same again is the same proposal.
    let six = rt.propose(&request(order("vanilla", 6, VANILLA), &url))?;
    assert_eq!((six.status, six.arguments["amount"].as_i64()), (Status::Waiting, Some(1500)));
    let again = rt.propose(&request(order("vanilla", 6, VANILLA), &url))?;
    assert_eq!((again.id.as_str(), again.status), (six.id.as_str(), Status::Waiting));
    assert_eq!(rt.proposals()?.len(), 1);

    // 2. A fingerprint other than the proposal's, and the agent's own account: refused. Lucy approves twice.
    let other = "0".repeat(64);
    assert_eq!(refusal(rt.approve(&six.id, "Lucy", &other, ApproveMode::Once)), Some(Refusal::WrongFingerprint));
    assert_eq!(
        refusal(rt.approve(&six.id, "Restocker", &six.fingerprint, ApproveMode::Once)),
        Some(Refusal::NotDecider)
    );
    let granted = rt.approve(&six.id, "Lucy", &six.fingerprint, ApproveMode::Once)?;
    assert_eq!(granted.grant.as_ref().map(|g| g.basis), Some(Basis::Operator));
    rt.approve(&six.id, "Lucy", &six.fingerprint, ApproveMode::Once)?;
    assert_eq!(figures(&rt)?, (1500, 0), "the second approval reserves nothing more");

    // 3. A sale leaves one tub: × 7 in the same work supersedes × 6 and releases its reservation.
    let seven = rt.propose(&request(order("vanilla", 7, VANILLA), &url))?;
    assert_ne!(seven.id, six.id);
    assert_eq!((seven.status, seven.arguments["amount"].as_i64()), (Status::Waiting, Some(1750)));
    assert_eq!(rt.proposal(&six.id)?.status, Status::Superseded);
    assert_eq!(figures(&rt)?, (0, 0));
    let six_again = rt.propose(&request(order("vanilla", 6, VANILLA), &url))?;
    assert_eq!(
        (six_again.id.as_str(), six_again.status),
        (six.id.as_str(), Status::Superseded),
        "it does not come back to life"
    );
    assert_eq!(figures(&rt)?, (0, 0));

    // 4. Recompiled with alone_up_to 2000: the retry of × 7 is granted automatically.
    rt.replace_table(shop_table(&tmp.0, 2000, 2500)?)?;
    let retry = rt.propose(&request(order("vanilla", 7, VANILLA), &url))?;
    assert_eq!(retry.id, seven.id, "a retry: the same proposal");
    assert_eq!((retry.status, retry.grant.as_ref().map(|g| g.basis)), (Status::Granted, Some(Basis::Automatic)));
    assert_eq!(retry.grant.as_ref().and_then(|g| g.approver.clone()), None, "no person was asked");
    assert_eq!(figures(&rt)?, (1750, 0));
    // Strawberry × 4 = 1100 fits the allowance but not the ceiling (1750 + 1100 > 2500).
    let straw = rt.propose(&request(order("strawberry", 4, STRAWBERRY), &url))?;
    assert_eq!((straw.status, straw.arguments["amount"].as_i64()), (Status::Waiting, Some(1100)));
    assert_eq!(refusal(rt.approve(&straw.id, "Lucy", &straw.fingerprint, ApproveMode::Once)), Some(Refusal::Budget));
    assert_eq!(rt.proposal(&straw.id)?.status, Status::Waiting);
    assert_eq!(figures(&rt)?, (1750, 0));

    // 5. Lucy revokes the strawberry proposal, twice (the second changes nothing).
    assert_eq!(rt.revoke(&straw.id, "Lucy", "one order at a time")?.status, Status::Revoked);
    assert_eq!(rt.revoke(&straw.id, "Lucy", "one order at a time")?.status, Status::Revoked);
    assert_eq!(figures(&rt)?, (1750, 0));

    // 6. Recompiled with alone_up_to 0 and the ledger closed and reopened: the automatic grant no longer
    //    fits the current allowance, so executing is refused and the proposal stays granted.
    drop(rt);
    rt = open(shop_table(&tmp.0, 0, 2500)?)?;
    // Spec §5a: the store has one current table; the restarted host installs its recompiled one first.
    rt.install_table()?;
    assert_eq!(figures(&rt)?, (1750, 0), "the reservation survives the restart");
    assert_eq!(
        refusal(rt.execute(&seven.id, Some(&url), |ctx| order_outcome(&supplier.supplier, ctx))),
        Some(Refusal::Basis)
    );
    assert_eq!(rt.proposal(&seven.id)?.status, Status::Granted);
    assert_eq!(supplier_orders(&supplier.supplier)?.len(), 0);
    assert_eq!(figures(&rt)?, (1750, 0));

    // 7. Lucy approves × 7 herself; her grant expires before the execution; she approves again; it runs.
    let mine = rt.approve(&seven.id, "Lucy", &seven.fingerprint, ApproveMode::Once)?;
    assert_eq!(mine.grant.as_ref().map(|g| g.basis), Some(Basis::Operator));
    assert_eq!(figures(&rt)?, (1750, 0));
    clock.advance(DAY + 1);
    assert_eq!(
        refusal(rt.execute(&seven.id, Some(&url), |ctx| order_outcome(&supplier.supplier, ctx))),
        Some(Refusal::GrantExpired)
    );
    assert_eq!(rt.proposal(&seven.id)?.status, Status::Granted);
    assert_eq!(supplier_orders(&supplier.supplier)?.len(), 0);
    rt.approve(&seven.id, "Lucy", &seven.fingerprint, ApproveMode::Once)?;
    let done = rt.execute(&seven.id, Some(&url), |ctx| order_outcome(&supplier.supplier, ctx))?;
    assert!(done.ran);
    assert_eq!(done.proposal.status, Status::Done);
    let orders = supplier_orders(&supplier.supplier)?;
    assert_eq!(orders.len(), 1);
    assert_eq!(
        (orders[0]["sku"].as_str(), orders[0]["quantity"].as_i64(), orders[0]["amount"].as_i64()),
        (Some("vanilla"), Some(7), Some(1750))
    );
    let repeat = rt.execute(&seven.id, Some(&url), |_| panic!("a done proposal runs nothing"))?;
    assert!(!repeat.ran);
    assert_eq!(repeat.proposal.receipt, done.proposal.receipt, "the stored receipt");
    assert_eq!(supplier_orders(&supplier.supplier)?.len(), 1);
    assert_eq!(figures(&rt)?, (0, 1750));

    // 8. The same proposal toward another address of the same supplier: refused before anything else.
    let elsewhere = url.replace("127.0.0.1", "localhost");
    assert_eq!(
        refusal(rt.execute(&seven.id, Some(&elsewhere), |ctx| order_outcome(&supplier.supplier, ctx))),
        Some(Refusal::Destination)
    );

    // 9. Only the one authorized send reached the supplier; strawberry never became a purchase.
    let orders = supplier_orders(&supplier.supplier)?;
    assert_eq!(orders.len(), 1);
    assert!(orders.iter().all(|o| o["sku"] != "strawberry"));
    assert_eq!(rt.proposal(&straw.id)?.status, Status::Revoked);
    assert_eq!(figures(&rt)?, (0, 1750));
    Ok(())
}

/// A proposal made and granted by an operator on `rt`, for the tests below.
fn granted(rt: &Runtime, call: Call, url: &str) -> Result<Proposal, RuntimeError> {
    let p = rt.propose(&request(call, url))?;
    rt.approve(&p.id, "Lucy", &p.fingerprint, ApproveMode::Once)
}

#[test]
fn an_unknown_basis_never_sends_and_reapproval_reserves_nothing_twice() -> R {
    let tmp = Temp::new("shop-unknown-basis");
    let ledger = tmp.0.join("ledger.db");
    let url = "http://127.0.0.1:9/orders";
    // A version-1 ledger: the same tables, grants without a basis. One granted order, its 1500 reserved.
    {
        let conn = rusqlite::Connection::open(&ledger)?;
        conn.execute_batch(SqliteStore::SCHEMA_V1)?;
        let rt = Runtime::new(shop_table(&tmp.0, 0, 2500)?, AdmitAll).with_store(MemoryStore::new());
        let p = granted(&rt, order("vanilla", 6, VANILLA), url)?;
        let mut record = serde_json::to_value(&p)?;
        if let Some(grant) = record.get_mut("grant").and_then(Value::as_object_mut) {
            grant.remove("basis");
        }
        conn.execute(
            "INSERT INTO proposals (id, operation_key, fingerprint, tool, subject, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![p.id, p.operation_key, p.fingerprint, p.tool, p.subject, record.to_string()],
        )?;
        conn.execute("INSERT INTO sequences (name, value) VALUES ('proposal', 1)", [])?;
        conn.execute("INSERT INTO budgets (name, installed_ceiling, spent) VALUES ('Supplies', 2500, 0)", [])?;
        conn.execute(
            "INSERT INTO reservations (holder, budget, amount, created_at) VALUES (?1, 'Supplies', 1500, 0)",
            [&p.id],
        )?;
        conn.pragma_update(None, "user_version", 1)?;
    }
    let rt = Runtime::new(shop_table(&tmp.0, 0, 2500)?, AdmitAll).with_store(SqliteStore::open(&ledger)?);
    let p = rt.proposals()?.into_iter().next().ok_or("the migrated proposal")?;
    assert_eq!(p.grant.as_ref().map(|g| g.basis), Some(Basis::Unknown), "migrated with basis unknown");
    assert_eq!(figures(&rt)?, (1500, 0));
    let mut ran = false;
    assert_eq!(
        refusal(rt.execute(&p.id, Some(url), |_| {
            ran = true;
            RunOutcome::Done(json!({}))
        })),
        Some(Refusal::Basis)
    );
    assert!(!ran, "an unknown basis never authorizes a send");
    assert_eq!(rt.proposal(&p.id)?.status, Status::Granted);
    let again = rt.approve(&p.id, "Lucy", &p.fingerprint, ApproveMode::Once)?;
    assert_eq!(again.grant.as_ref().map(|g| g.basis), Some(Basis::Operator));
    assert_eq!(figures(&rt)?, (1500, 0), "reapproval sets the basis without reserving twice");
    Ok(())
}

#[test]
fn lowering_the_ceiling_below_what_is_held_refuses_new_sends_and_keeps_what_was_spent() -> R {
    let tmp = Temp::new("shop-lower");
    let ledger = tmp.0.join("ledger.db");
    let url = "http://127.0.0.1:9/orders";
    let rt = Runtime::new(shop_table(&tmp.0, 0, 2500)?, AdmitAll).with_store(SqliteStore::open(&ledger)?);
    // One order spent (1000), another granted and held (750).
    let first = granted(&rt, order("vanilla", 4, VANILLA), url)?;
    let receipt = |op: &str, amount: i64| json!({ "operation": op, "amount": amount, "outcome": "accepted" });
    let done = rt.execute(&first.id, Some(url), |ctx| RunOutcome::Done(receipt(ctx.operation, 1000)))?;
    assert_eq!(done.proposal.status, Status::Done);
    let second = granted(&rt, order("strawberry", 3, 250), url)?;
    assert_eq!(figures(&rt)?, (750, 1000));
    // A new policy lowers the ceiling to 1500: 1000 spent + 750 held is over it.
    rt.replace_table(shop_table(&tmp.0, 0, 1500)?)?;
    let b = rt.budget("Supplies")?;
    assert_eq!((b.installed_ceiling, b.effective_ceiling, b.room), (Some(2500), 1500, 0));
    let mut ran = false;
    assert_eq!(
        refusal(rt.execute(&second.id, Some(url), |_| {
            ran = true;
            RunOutcome::Done(json!({}))
        })),
        Some(Refusal::Budget)
    );
    assert!(!ran);
    assert_eq!(rt.proposal(&second.id)?.status, Status::Granted);
    assert_eq!(figures(&rt)?, (750, 1000), "what was spent is not rewritten");
    // Raising it back in the policy does not raise the installed ceiling silently…
    rt.replace_table(shop_table(&tmp.0, 0, 5000)?)?;
    assert_eq!(rt.budget("Supplies")?.effective_ceiling, 2500);
    // …a supervisor does it on purpose.
    assert_eq!(refusal(rt.raise_ceiling("Supplies", "Restocker")), Some(Refusal::NotDecider));
    assert_eq!(rt.raise_ceiling("Supplies", "Lucy")?.effective_ceiling, 5000);
    Ok(())
}

/// A store that fails while writing a supersession record: the revision's transaction must roll back.
struct FailOnSupersede(SqliteStore);

struct FailingTx<'a>(Box<dyn Transaction + 'a>);

impl Store for FailOnSupersede {
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(FailingTx(self.0.begin()?)))
    }
}

impl Transaction for FailingTx<'_> {
    fn next_number(&mut self, sequence: &str) -> Result<u64, StoreError> {
        self.0.next_number(sequence)
    }
    fn proposal(&mut self, id: &str) -> Result<Option<Proposal>, StoreError> {
        self.0.proposal(id)
    }
    fn proposal_by_fingerprint(&mut self, key: &str, fp: &str) -> Result<Option<Proposal>, StoreError> {
        self.0.proposal_by_fingerprint(key, fp)
    }
    fn proposals_for_subject(&mut self, key: &str, tool: &str, subject: &str) -> Result<Vec<Proposal>, StoreError> {
        self.0.proposals_for_subject(key, tool, subject)
    }
    fn proposals(&mut self) -> Result<Vec<Proposal>, StoreError> {
        self.0.proposals()
    }
    fn put_proposal(&mut self, proposal: &Proposal) -> Result<(), StoreError> {
        if proposal.status == Status::Superseded {
            return Err(StoreError("the disk is full".into()));
        }
        self.0.put_proposal(proposal)
    }
    fn rules(&mut self) -> Result<Vec<permits::runtime::StandingRule>, StoreError> {
        self.0.rules()
    }
    fn put_rule(&mut self, rule: &permits::runtime::StandingRule) -> Result<(), StoreError> {
        self.0.put_rule(rule)
    }
    fn budget(&mut self, name: &str) -> Result<Option<permits::runtime::BudgetRecord>, StoreError> {
        self.0.budget(name)
    }
    fn put_budget(&mut self, record: &permits::runtime::BudgetRecord) -> Result<(), StoreError> {
        self.0.put_budget(record)
    }
    fn reservation(&mut self, holder: &str) -> Result<Option<permits::runtime::Reservation>, StoreError> {
        self.0.reservation(holder)
    }
    fn put_reservation(&mut self, r: &permits::runtime::Reservation) -> Result<(), StoreError> {
        self.0.put_reservation(r)
    }
    fn remove_reservation(&mut self, holder: &str) -> Result<(), StoreError> {
        self.0.remove_reservation(holder)
    }
    fn reserved_total(&mut self, budget: &str) -> Result<u64, StoreError> {
        self.0.reserved_total(budget)
    }
    fn reserved_for_task(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        self.0.reserved_for_task(budget, task)
    }
    fn task_spent(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        self.0.task_spent(budget, task)
    }
    fn put_task_spent(&mut self, budget: &str, task: &str, spent: u64) -> Result<(), StoreError> {
        self.0.put_task_spent(budget, task, spent)
    }
    fn audit_head(&mut self) -> Result<Option<permits::runtime::AuditHead>, StoreError> {
        self.0.audit_head()
    }
    fn append_audit(&mut self, event: &permits::runtime::ChainedEvent) -> Result<(), StoreError> {
        self.0.append_audit(event)
    }
    fn audit_events(&mut self) -> Result<Vec<permits::runtime::ChainedEvent>, StoreError> {
        self.0.audit_events()
    }
    fn installed_tables(&mut self) -> Result<Vec<permits::runtime::TableInstall>, StoreError> {
        self.0.installed_tables()
    }
    fn current_table(&mut self) -> Result<Option<permits::runtime::TableInstall>, StoreError> {
        self.0.current_table()
    }
    fn put_installed_table(&mut self, install: &permits::runtime::TableInstall) -> Result<(), StoreError> {
        self.0.put_installed_table(install)
    }
    fn task(&mut self, key: &str) -> Result<Option<permits::runtime::Task>, StoreError> {
        self.0.task(key)
    }
    fn put_task(&mut self, task: &permits::runtime::Task) -> Result<(), StoreError> {
        self.0.put_task(task)
    }
    fn lease(&mut self, key: &str) -> Result<Option<permits::runtime::Lease>, StoreError> {
        self.0.lease(key)
    }
    fn put_lease(&mut self, lease: &permits::runtime::Lease) -> Result<(), StoreError> {
        self.0.put_lease(lease)
    }
    fn run(&mut self, id: &str) -> Result<Option<permits::runtime::Run>, StoreError> {
        self.0.run(id)
    }
    fn run_by_token(&mut self, token: &str) -> Result<Option<permits::runtime::Run>, StoreError> {
        self.0.run_by_token(token)
    }
    fn put_run(&mut self, run: &permits::runtime::Run) -> Result<(), StoreError> {
        self.0.put_run(run)
    }
    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        self.0.commit()
    }
}

#[test]
fn a_revision_interrupted_inside_its_transaction_changes_nothing() -> R {
    let tmp = Temp::new("shop-interrupted");
    let ledger = tmp.0.join("ledger.db");
    let url = "http://127.0.0.1:9/orders";
    let table = shop_table(&tmp.0, 0, 2500)?;
    let six = {
        let rt = Runtime::new(table.clone(), AdmitAll).with_store(SqliteStore::open(&ledger)?);
        granted(&rt, order("vanilla", 6, VANILLA), url)?
    };
    let rt = Runtime::new(table.clone(), AdmitAll).with_store(FailOnSupersede(SqliteStore::open(&ledger)?));
    let revision = rt.propose(&request(order("vanilla", 7, VANILLA), url));
    assert!(matches!(revision, Err(RuntimeError::Store(_))), "{revision:?}");
    drop(rt);
    // Read back through an ordinary store: the old proposal is still approved, its 1500 held, no replacement.
    let rt = Runtime::new(table, AdmitAll).with_store(SqliteStore::open(&ledger)?);
    let all = rt.proposals()?;
    assert_eq!(all.len(), 1, "no replacement was recorded");
    assert_eq!((all[0].id.as_str(), all[0].status), (six.id.as_str(), Status::Granted));
    assert_eq!(figures(&rt)?, (1500, 0));
    Ok(())
}

fn rounds() -> usize {
    std::env::var("PERMITS_RACE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

#[test]
fn approvals_racing_for_the_last_of_the_ceiling_never_exceed_it() -> R {
    let tmp = Temp::new("shop-race");
    let ledger = tmp.0.join("ledger.db");
    let url = "http://127.0.0.1:9/orders";
    let table = shop_table(&tmp.0, 0, 2500)?;
    // Two runtimes (as two processes would), each with its own connection to the one ledger file.
    let a = Arc::new(Runtime::new(table.clone(), AdmitAll).with_store(SqliteStore::open(&ledger)?));
    let b = Arc::new(Runtime::new(table, AdmitAll).with_store(SqliteStore::open(&ledger)?));
    // 1000 held by a standing order: 1500 of room, and each racer wants 1000.
    granted(&a, order("chocolate", 4, VANILLA), url)?;
    for round in 0..rounds() {
        let key = format!("race-{round}");
        let p1 =
            a.propose(&ProposalRequest::new(order("vanilla", 4, VANILLA), key.clone(), "race").with_destination(url))?;
        let p2 =
            b.propose(&ProposalRequest::new(order("strawberry", 4, VANILLA), key, "race").with_destination(url))?;
        let barrier = Arc::new(Barrier::new(2));
        let racer = |rt: Arc<Runtime>, p: Proposal, barrier: Arc<Barrier>| {
            std::thread::spawn(move || {
                barrier.wait();
                rt.approve(&p.id, "Lucy", &p.fingerprint, ApproveMode::Once)
            })
        };
        let t1 = racer(a.clone(), p1.clone(), barrier.clone());
        let t2 = racer(b.clone(), p2.clone(), barrier);
        let results = [t1.join().map_err(|_| "a racer panicked")?, t2.join().map_err(|_| "a racer panicked")?];
        let won: Vec<&Proposal> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "round {round}: exactly one approval fits: {results:?}");
        for r in &results {
            if let Err(e) = r {
                assert_eq!(e.refusal(), Some(Refusal::Budget), "round {round}: {e}");
            }
        }
        let budget = a.budget("Supplies")?;
        assert_eq!((budget.reserved, budget.spent), (2000, 0), "round {round}");
        assert!(budget.reserved + budget.spent <= budget.effective_ceiling);
        // Free the room for the next round.
        a.revoke(&won[0].id, "Lucy", "next round")?;
        let loser = if won[0].id == p1.id { &p2 } else { &p1 };
        a.revoke(&loser.id, "Lucy", "next round")?;
    }
    assert_eq!(figures(&a)?, (1000, 0));
    Ok(())
}

#[test]
fn a_non_conclusive_receipt_keeps_the_reservation_until_settled() -> R {
    let tmp = Temp::new("shop-settle");
    let url = "http://127.0.0.1:9/orders";
    let rt = Runtime::new(shop_table(&tmp.0, 0, 2500)?, AdmitAll).with_store(SqliteStore::open(&tmp.0.join("l.db"))?);
    let p = granted(&rt, order("vanilla", 2, VANILLA), url)?;
    // The host got an answer it cannot read as this operation's: not conclusive.
    let run = rt.execute(&p.id, Some(url), |_| RunOutcome::Done(json!({ "ok": true })))?;
    assert_eq!(run.proposal.status, Status::Unknown);
    assert_eq!(figures(&rt)?, (500, 0));
    let op = permits::runtime::operation_id(&run.proposal);
    assert_eq!(op, format!("{WORK}:{}", p.id));
    // A receipt for another amount is not conclusive either: nothing changes.
    let wrong = json!({ "operation": op, "amount": 499, "outcome": "accepted" });
    assert_eq!(refusal(rt.settle(&p.id, &wrong)), Some(Refusal::NotConclusive));
    assert_eq!(figures(&rt)?, (500, 0));
    let right = json!({ "operation": op, "amount": 500, "outcome": "accepted" });
    let b = rt.settle(&p.id, &right)?;
    assert_eq!((b.reserved, b.spent), (0, 500));
    assert_eq!(rt.proposal(&p.id)?.status, Status::Done);
    Ok(())
}

#[test]
fn an_alone_spend_within_the_allowance_runs_reserves_and_spends() -> R {
    let tmp = Temp::new("shop-alone");
    // A variant of the shop where the restocker may order alone: the allowance still bounds each call.
    let table = shop_variant(
        &tmp.0,
        600,
        2500,
        &[("alone [MarkDown when", "alone [PlaceOrder]\n        alone [MarkDown when")],
    )?;
    assert_eq!(
        table.entry("Restocker", "Reorder", "PlaceOrder").and_then(|e| e.level),
        Some(permits::table::Level::Alone)
    );
    let rt = Runtime::new(table, AdmitAll).with_store(SqliteStore::open(&tmp.0.join("l.db"))?);
    // 500 ≤ 600: alone; the host's receipt names the run's operation id.
    let small = rt.run_alone(&order("vanilla", 2, VANILLA), |ctx| {
        RunOutcome::Done(json!({ "operation": ctx.operation, "amount": 500, "outcome": "accepted" }))
    })?;
    assert!(matches!(small.outcome, RunOutcome::Done(_)));
    assert_eq!(figures(&rt)?, (0, 500));
    // 750 > 600: treated as propose, with the budget named in the reasons.
    let d = rt.decide(&order("vanilla", 3, VANILLA))?;
    assert_eq!(d.level, permits::table::Level::Propose);
    assert!(d.reasons.iter().any(|r| r.rule.contains("over the automatic allowance of 600")), "{:?}", d.reasons);
    assert_eq!(
        refusal(rt.run_alone(&order("vanilla", 3, VANILLA), |_| RunOutcome::Done(json!({})))),
        Some(Refusal::MustPropose)
    );
    // A negative amount is never.
    let neg = Call::new("Restocker", "Reorder", "PlaceOrder")
        .with_arguments(json!({ "sku": "vanilla", "quantity": 1, "amount": -5 }))
        .for_person("Lucy");
    assert_eq!(rt.decide(&neg)?.level, permits::table::Level::Never);
    // The allocation-free fast path gives the same answers.
    let t = rt.table();
    let level = |amount: i64| {
        let args = json!({ "sku": "vanilla", "quantity": 1, "amount": amount });
        let call = permits::table::CallRef {
            agent: "Restocker",
            skill: "Reorder",
            tool: "PlaceOrder",
            arguments: &args,
            requester: Some("Lucy"),
            mode: None,
            via: &[],
        };
        t.level_of(call).map(|l| l.level)
    };
    assert_eq!(level(500).ok(), Some(permits::table::Level::Alone));
    assert_eq!(level(750).ok(), Some(permits::table::Level::Propose));
    assert!(matches!(
        level(-5),
        Err(permits::table::Refused::Arguments(e)) if matches!(*e, permits::table::ArgumentError::NegativeMoney { amount: -5, .. })
    ));
    Ok(())
}

#[test]
fn the_supplier_refuses_the_same_operation_with_other_content() -> R {
    let tmp = Temp::new("shop-supplier-op");
    let supplier = start_supplier(&tmp.0)?;
    let first = supplier.supplier.order("w:P-1", "vanilla", 7, 1750).map_err(|e| format!("{e:?}"))?;
    let again = supplier.supplier.order("w:P-1", "vanilla", 7, 1750).map_err(|e| format!("{e:?}"))?;
    assert_eq!(first, again);
    assert!(matches!(supplier.supplier.order("w:P-1", "vanilla", 8, 2000), Err(SupplierError::Refused(_))));
    assert_eq!(supplier_orders(&supplier.supplier)?.len(), 1);
    Ok(())
}
