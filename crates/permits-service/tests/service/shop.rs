//! Lucy's ice-cream shop (`shared/cases/shop-spending.md`), steps 1–9 over HTTP in one run, with the values
//! of the embedded test (`crates/permits-cli/tests/it/shop_spending.rs`). The supplier is the separate
//! process of that test (`examples/supplier`: its own SQLite database on loopback), and what reached it is
//! counted by asking it. The tables are compiled from `policies/shop` (with other `alone_up_to` figures, as
//! a recompiled policy) by the compiler `permitc` uses; the host is this test: it claims with the supplier's
//! address, confirms, sends the order with the operation id the service gives, and reports the receipt.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::supplier_client::{Supplier, SupplierError, SupplierProcess, build_supplier};
use super::{Answer, Client, R, Server, Stop, Temp};

const WORK: &str = "restock-2026-11-30";
/// Authoritative prices in US cents: the host computes every amount, never the model.
const VANILLA: i64 = 250;
const STRAWBERRY: i64 = 275;

/// `policies/shop` with the budget's `alone_up_to` replaced, compiled; written as `NAME.json` in `dir`
/// with the grant lifetime `grant_lifetime` seconds when given (the service's clock is the system's).
fn shop_table(
    dir: &Path,
    alone_up_to: u64,
    grant_lifetime: Option<u64>,
) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/shop");
    let pkg = dir.join(format!("shop-{alone_up_to}-{}", grant_lifetime.unwrap_or(0)));
    std::fs::create_dir_all(&pkg)?;
    for entry in std::fs::read_dir(&src)? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)?
            .replace("ceiling: 2500, alone_up_to: 0", &format!("ceiling: 2500, alone_up_to: {alone_up_to}"));
        std::fs::write(pkg.join(path.file_name().ok_or("a file name")?), text)?;
    }
    let mut table = permits_compiler::compile::compile_path(&pkg)?;
    if let Some(seconds) = grant_lifetime {
        table.package.grant_lifetime_seconds = seconds;
        table.seal();
    }
    let out = pkg.join("table.json");
    std::fs::write(&out, serde_json::to_vec(&table)?)?;
    Ok(out)
}

fn order(sku: &str, tubs: i64, price: i64, url: &str, token: &str) -> Value {
    json!({"agent": "Restocker", "skill": "Reorder", "tool": "PlaceOrder",
        "arguments": {"sku": sku, "quantity": tubs, "amount": tubs * price}, "requester": "Lucy",
        "operation_key": WORK, "why": "the freezer runs low", "destination": url, "claim_token": token})
}

fn proposed(host: &Client, sku: &str, tubs: i64, price: i64, url: &str) -> Value {
    let answer = host.post("/v1/calls", &order(sku, tubs, price, url, "unused")).ok();
    assert_eq!(answer["outcome"], "proposed", "{answer}");
    answer["proposal"].clone()
}

fn approve(person: &Client, p: &Value) -> Answer {
    person.post(
        &format!("/v1/proposals/{}/approve", p["id"].as_str().unwrap_or("")),
        &json!({"fingerprint": p["fingerprint"]}),
    )
}

fn figures(host: &Client) -> (Value, Value) {
    let b = host.get("/v1/budgets/Supplies").ok()["budget"].clone();
    (b["reserved"].clone(), b["spent"].clone())
}

fn status(host: &Client, id: &Value) -> Value {
    host.get(&format!("/v1/proposals/{}", id.as_str().unwrap_or(""))).ok()["status"].clone()
}

fn orders(supplier: &Supplier) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    supplier.orders().map_err(|e| e.to_string().into())
}

/// The host executes `id` toward `destination`: claim with `token`; if the service answers `granted`,
/// confirm, send the order to the supplier with the service's operation id, and report the receipt. Answers
/// the claim's refusal, the stored receipt of a done proposal, or the receipt's answer.
fn execute(host: &Client, supplier: &Supplier, id: &Value, destination: &str, token: &str) -> Answer {
    let id = id.as_str().unwrap_or("");
    let claim = host.post(&format!("/v1/executions/{id}/claim"), &json!({"token": token, "destination": destination}));
    if claim.status != 200 || claim.body["status"] != "granted" {
        return claim;
    }
    let sent = host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": token})).ok();
    let a = &sent["arguments"];
    let (sku, qty, amount) =
        (a["sku"].as_str().unwrap_or(""), a["quantity"].as_i64().unwrap_or(0), a["amount"].as_i64().unwrap_or(0));
    let report = match supplier.order(sent["operation"].as_str().unwrap_or(""), sku, qty, amount) {
        Ok(receipt) => json!({"token": token, "outcome": "done", "receipt": receipt}),
        Err(SupplierError::Refused(body)) => {
            json!({"token": token, "outcome": "failed", "reason": format!("the supplier refused: {body}")})
        }
        Err(other) => json!({"token": token, "outcome": "unknown", "reason": other.to_string()}),
    };
    host.post(&format!("/v1/executions/{id}/receipt"), &report)
}

#[test]
fn shop_spending_steps_1_to_9_over_http() -> R {
    let dir = Temp::new("shop");
    let store = dir.path("ledger.db");
    let peer = SupplierProcess::start(&build_supplier()?, &dir.path("supplier.db"))?;
    let supplier = peer.supplier.clone();
    let url = format!("{}/orders", peer.url);
    let server = Server::on(&shop_table(&dir.0, 0, None)?, &store);
    let host = server.host("Restocker");
    let lucy = server.person("Lucy");
    let admin = Client::new(&server.url, &server.key(&["--admin"]));

    // 1. Propose vanilla × 6 → 1500, a draft; the same again is the same proposal.
    let six = proposed(&host, "vanilla", 6, VANILLA, &url);
    assert_eq!((&six["status"], &six["arguments"]["amount"]), (&json!("waiting"), &json!(1500)));
    let again = proposed(&host, "vanilla", 6, VANILLA, &url);
    assert_eq!((&again["id"], &again["status"]), (&six["id"], &json!("waiting")));
    assert_eq!(host.get("/v1/proposals").ok()["proposals"].as_array().map(Vec::len), Some(1));

    // 2. A fingerprint other than the proposal's, the agent's own account, and the agent's host: refused.
    //    Lucy approves twice: 1500 reserved once.
    let id = six["id"].as_str().unwrap_or("");
    let wrong = lucy.post(&format!("/v1/proposals/{id}/approve"), &json!({"fingerprint": "0".repeat(64)}));
    assert_eq!((wrong.status, wrong.code()), (409, "wrong_fingerprint"));
    let agent = approve(&server.person("Restocker"), &six);
    assert_eq!((agent.status, agent.code()), (403, "not_decider"));
    assert!(agent.message().contains("only a person decides"), "{}", agent.message());
    assert_eq!(approve(&host, &six).code(), "person_only");
    let granted = approve(&lucy, &six).ok();
    assert_eq!((&granted["status"], &granted["grant"]["basis"]), (&json!("granted"), &json!("operator")));
    approve(&lucy, &six).ok();
    assert_eq!(figures(&host), (json!(1500), json!(0)), "the second approval reserves nothing more");

    // 3. A sale leaves one tub: × 7 in the same work supersedes × 6 and releases its reservation.
    let seven = proposed(&host, "vanilla", 7, VANILLA, &url);
    assert_ne!(seven["id"], six["id"]);
    assert_eq!((&seven["status"], &seven["arguments"]["amount"]), (&json!("waiting"), &json!(1750)));
    assert_eq!(status(&host, &six["id"]), "superseded");
    assert_eq!(figures(&host), (json!(0), json!(0)));
    let six_again = host.post("/v1/calls", &order("vanilla", 6, VANILLA, &url, "unused")).ok()["proposal"].clone();
    assert_eq!((&six_again["id"], &six_again["status"]), (&six["id"], &json!("superseded")), "it does not come back");
    assert_eq!(figures(&host), (json!(0), json!(0)));

    // 4. Recompiled with alone_up_to 2000 (posted by a supervisor): the retry of × 7 is granted automatically.
    admin.post_raw("/v1/admin/table", &std::fs::read(shop_table(&dir.0, 2000, None)?)?).ok();
    let retry = proposed(&host, "vanilla", 7, VANILLA, &url);
    assert_eq!(retry["id"], seven["id"], "a retry: the same proposal");
    assert_eq!((&retry["status"], &retry["grant"]["basis"]), (&json!("granted"), &json!("automatic")));
    assert_eq!(retry["grant"]["approver"], json!(null), "no person was asked");
    assert_eq!(figures(&host), (json!(1750), json!(0)));
    // Strawberry × 4 = 1100 fits the allowance but not the ceiling (1750 + 1100 > 2500).
    let straw = proposed(&host, "strawberry", 4, STRAWBERRY, &url);
    assert_eq!((&straw["status"], &straw["arguments"]["amount"]), (&json!("waiting"), &json!(1100)));
    let refused = approve(&lucy, &straw);
    assert_eq!((refused.status, refused.code()), (409, "budget"), "{}", refused.body);
    assert_eq!(status(&host, &straw["id"]), "waiting");
    assert_eq!(figures(&host), (json!(1750), json!(0)));

    // 5. Lucy revokes the strawberry proposal, twice (the second changes nothing).
    let sid = straw["id"].as_str().unwrap_or("");
    let why = json!({"why": "one order at a time"});
    assert_eq!(lucy.post(&format!("/v1/proposals/{sid}/revoke"), &why).ok()["status"], "revoked");
    assert_eq!(lucy.post(&format!("/v1/proposals/{sid}/revoke"), &why).ok()["status"], "revoked");
    assert_eq!(figures(&host), (json!(1750), json!(0)));

    // 6. Recompiled with alone_up_to 0, and the service restarted on it (its grants last 2 s, for step 7):
    //    the automatic grant no longer fits the current allowance, so the claim is refused; still granted.
    let tokens = (host.token.clone(), lucy.token.clone());
    let (_, store, _) = server.stop(Stop::Term);
    let server = Server::on(&shop_table(&dir.0, 0, Some(2))?, &store);
    let (host, lucy) = (Client::new(&server.url, &tokens.0), Client::new(&server.url, &tokens.1));
    assert_eq!(figures(&host), (json!(1750), json!(0)), "the reservation survives the restart");
    let refused = execute(&host, &supplier, &seven["id"], &url, "send-1");
    assert_eq!((refused.status, refused.code()), (409, "basis"), "{}", refused.body);
    assert_eq!(status(&host, &seven["id"]), "granted");
    assert_eq!(orders(&supplier)?.len(), 0);
    assert_eq!(figures(&host), (json!(1750), json!(0)));

    // 7. Lucy approves × 7 herself; her grant expires before the execution; she approves again; it runs.
    let mine = approve(&lucy, &seven).ok();
    assert_eq!(mine["grant"]["basis"], "operator");
    assert_eq!(figures(&host), (json!(1750), json!(0)));
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let refused = execute(&host, &supplier, &seven["id"], &url, "send-2");
    assert_eq!((refused.status, refused.code()), (409, "grant_expired"), "{}", refused.body);
    assert_eq!(status(&host, &seven["id"]), "granted");
    assert_eq!(orders(&supplier)?.len(), 0);
    approve(&lucy, &seven).ok();
    let done = execute(&host, &supplier, &seven["id"], &url, "send-3").ok();
    assert_eq!(done["status"], "done");
    let sent = orders(&supplier)?;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (&sent[0]["sku"], &sent[0]["quantity"], &sent[0]["amount"], &sent[0]["operation"]),
        (&json!("vanilla"), &json!(7), &json!(1750), &json!(format!("{WORK}:{}", seven["id"].as_str().unwrap_or(""))))
    );
    // Executing again (the same token, as after a lost answer) returns the stored receipt; nothing is sent.
    let repeat = execute(&host, &supplier, &seven["id"], &url, "send-3").ok();
    assert_eq!((&repeat["status"], &repeat["receipt"]), (&json!("done"), &done["receipt"]), "the stored receipt");
    assert_eq!(orders(&supplier)?.len(), 1);
    assert_eq!(figures(&host), (json!(0), json!(1750)));

    // 8. The same proposal toward another address of the same supplier: refused before anything else.
    let elsewhere = url.replace("127.0.0.1", "localhost");
    let refused = execute(&host, &supplier, &seven["id"], &elsewhere, "send-4");
    assert_eq!((refused.status, refused.code()), (409, "destination"), "{}", refused.body);

    // 9. Only the one authorized send reached the supplier; strawberry never became a purchase.
    let sent = orders(&supplier)?;
    assert_eq!(sent.len(), 1);
    assert!(sent.iter().all(|o| o["sku"] != "strawberry"));
    assert_eq!(status(&host, &straw["id"]), "revoked");
    assert_eq!(figures(&host), (json!(0), json!(1750)));
    Ok(())
}
