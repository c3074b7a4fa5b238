//! Lucy's ice-cream shop (`shared/cases/shop-spending.md`), steps 1–9 on a PostgreSQL ledger (issue #22),
//! against the supplier: a separate process on loopback with its own database (`examples/supplier`), asked
//! at each step what reached it. The same steps and values as permitc's `shop_spending_steps_1_to_9` on an
//! SQLite file; the tables are the fixtures `shop` and `shop-alone-2000` (the recompiled policy of step 4),
//! compiled from `policies/shop`.

use crate::supplier_client;

use permits_runtime::{
    AdmitAll, ApproveMode, Basis, Call, ManualClock, PostgresStore, ProposalRequest, Refusal, Runtime, RuntimeError,
    Status, table::Table,
};
use serde_json::{Value, json};
use supplier_client::{Supplier, SupplierProcess, order_outcome};

use crate::postgres::Database;

type R = Result<(), Box<dyn std::error::Error>>;

const DAY: u64 = 24 * 60 * 60;
const WORK: &str = "restock-2026-11-30";
/// Authoritative prices in US cents: the host computes every amount, never the model.
const VANILLA: i64 = 250;
const STRAWBERRY: i64 = 275;

fn table(name: &str) -> Result<Table, Box<dyn std::error::Error>> {
    Ok(crate::fixture(name)?)
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

fn orders(supplier: &Supplier) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    supplier.orders().map_err(|e| format!("{e:?}").into())
}

#[test]
fn postgres_shop_spending_steps_1_to_9_against_the_supplier() -> R {
    let db = Database::new("shop")?;
    let dir = std::env::temp_dir().join(format!("permits-shop-pg-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let exe = match supplier_client::supplier_exe() {
        Some(exe) => exe,
        None => supplier_client::build_supplier()?,
    };
    let supplier = SupplierProcess::start(&exe, &dir.join("supplier.db"))?;
    let url = format!("{}/orders", supplier.url);
    let clock = ManualClock::at(1_800_000_000);
    let open = |table: Table| -> Result<Runtime, Box<dyn std::error::Error>> {
        Ok(Runtime::new(table, AdmitAll)
            .with_clock(clock.clone())
            .with_store(PostgresStore::with_config(db.config.clone())?))
    };
    let mut rt = open(table("shop")?)?;

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
    rt.replace_table(table("shop-alone-2000")?)?;
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

    // 6. Recompiled with alone_up_to 0 and the host restarted on the same database: the automatic grant no
    //    longer fits the current allowance, so executing is refused and the proposal stays granted.
    drop(rt);
    rt = open(table("shop")?)?;
    // Spec §5a: the store has one current table; the restarted host installs its recompiled one first.
    rt.install_table()?;
    assert_eq!(figures(&rt)?, (1750, 0), "the reservation survives the restart");
    assert_eq!(
        refusal(rt.execute(&seven.id, Some(&url), |ctx| order_outcome(&supplier.supplier, ctx))),
        Some(Refusal::Basis)
    );
    assert_eq!(rt.proposal(&seven.id)?.status, Status::Granted);
    assert_eq!(orders(&supplier.supplier)?.len(), 0);
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
    assert_eq!(orders(&supplier.supplier)?.len(), 0);
    rt.approve(&seven.id, "Lucy", &seven.fingerprint, ApproveMode::Once)?;
    let done = rt.execute(&seven.id, Some(&url), |ctx| order_outcome(&supplier.supplier, ctx))?;
    assert!(done.ran);
    assert_eq!(done.proposal.status, Status::Done);
    let placed = orders(&supplier.supplier)?;
    assert_eq!(placed.len(), 1);
    assert_eq!(
        (placed[0]["sku"].as_str(), placed[0]["quantity"].as_i64(), placed[0]["amount"].as_i64()),
        (Some("vanilla"), Some(7), Some(1750))
    );
    assert_eq!(placed[0]["operation"].as_str(), Some(format!("{WORK}:{}", seven.id).as_str()));
    let repeat = rt.execute(&seven.id, Some(&url), |_| panic!("a done proposal runs nothing"))?;
    assert!(!repeat.ran);
    assert_eq!(repeat.proposal.receipt, done.proposal.receipt, "the stored receipt");
    assert_eq!(orders(&supplier.supplier)?.len(), 1);
    assert_eq!(figures(&rt)?, (0, 1750));

    // 8. The same proposal toward another address of the same supplier: refused before anything else.
    let elsewhere = url.replace("127.0.0.1", "localhost");
    assert_eq!(
        refusal(rt.execute(&seven.id, Some(&elsewhere), |ctx| order_outcome(&supplier.supplier, ctx))),
        Some(Refusal::Destination)
    );

    // 9. Only the one authorized send reached the supplier; strawberry never became a purchase.
    let placed = orders(&supplier.supplier)?;
    assert_eq!(placed.len(), 1);
    assert!(placed.iter().all(|o| o["sku"] != "strawberry"));
    assert_eq!(rt.proposal(&straw.id)?.status, Status::Revoked);
    assert_eq!(figures(&rt)?, (0, 1750));
    // The ledger's chain, in PostgreSQL, verifies.
    let chain = rt.audit_chain()?;
    assert_eq!(permits_runtime::verify_chain(&chain, rt.audit_head()?.as_ref())?, rt.audit_head()?);
    drop(supplier);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
