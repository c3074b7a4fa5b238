//! The supplier test peer (`examples/supplier`) as the shop-spending tests rely on it: a separate process
//! with its own SQLite database that accepts each operation id once, replays its receipt for the same
//! content, refuses the id for other content, rejects malformed orders, and keeps its orders across a
//! restart. Every count here is read back from the peer over HTTP.
//!
//! The peer binary is found next to this test's binary (`target/<profile>/examples/supplier`) and built
//! with `cargo build --example supplier` when missing.

use crate::supplier_client;

use std::path::Path;

use serde_json::{Value, json};

use crate::support::Temp;
use supplier_client::{SupplierError, SupplierProcess, build_supplier};

fn start(db: &Path) -> SupplierProcess {
    let exe = build_supplier().expect("build the supplier example");
    let peer = SupplierProcess::start(&exe, db).expect("start the supplier");
    assert!(peer.url.starts_with("http://127.0.0.1:"), "unexpected url `{}`", peer.url);
    assert!(peer.supplier.health(), "the supplier is not healthy");
    peer
}

fn receipt(operation: &str, order: i64, sku: &str, quantity: i64, amount: i64) -> Value {
    json!({
        "operation": operation,
        "order": order,
        "sku": sku,
        "quantity": quantity,
        "amount": amount,
        "outcome": "accepted",
    })
}

#[test]
fn an_operation_is_accepted_once_replayed_and_kept_across_a_restart() {
    let temp = Temp::new("orders");
    let db = temp.0.join("supplier.db");
    let peer = start(&db);
    let supplier = &peer.supplier;
    assert_eq!(supplier.orders().expect("list"), Vec::<Value>::new());

    let first = supplier.order("work-1/place-order", "vanilla", 7, 1750).expect("new order");
    assert_eq!(first, receipt("work-1/place-order", 1, "vanilla", 7, 1750));

    let again = supplier.order("work-1/place-order", "vanilla", 7, 1750).expect("replayed order");
    assert_eq!(again, first);
    assert_eq!(supplier.orders().expect("list"), vec![first.clone()]);

    match supplier.order("work-1/place-order", "vanilla", 6, 1750) {
        Err(SupplierError::Refused(body)) => assert_eq!(
            body,
            json!({
                "operation": "work-1/place-order",
                "outcome": "refused",
                "error": "operation `work-1/place-order` was already used for other content",
            })
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(matches!(supplier.order("work-1/place-order", "strawberry", 7, 1750), Err(SupplierError::Refused(_))));
    assert_eq!(supplier.orders().expect("list").len(), 1, "a refusal inserts nothing");

    let second = supplier.order("work-2/place-order", "strawberry", 4, 1100).expect("second order");
    assert_eq!(second, receipt("work-2/place-order", 2, "strawberry", 4, 1100));
    assert_eq!(supplier.orders().expect("list"), vec![first.clone(), second.clone()]);

    // A restart on the same database: what was accepted is still there and still replays.
    drop(peer);
    let peer = start(&db);
    let supplier = &peer.supplier;
    assert_eq!(supplier.orders().expect("list after restart"), vec![first.clone(), second]);
    assert_eq!(supplier.order("work-1/place-order", "vanilla", 7, 1750).expect("replay after restart"), first);
    assert!(matches!(supplier.order("work-1/place-order", "vanilla", 8, 2000), Err(SupplierError::Refused(_))));
    assert_eq!(supplier.orders().expect("list").len(), 2);

    let status = peer.stop().expect("stop the supplier");
    assert!(status.success(), "`POST /shutdown` should exit 0, got {status}");
}

#[test]
fn malformed_orders_are_rejected_with_400_and_insert_nothing() {
    let temp = Temp::new("bad");
    let peer = start(&temp.0.join("supplier.db"));
    let supplier = &peer.supplier;

    let bodies = [
        ("not JSON", "{\"operation\": "),
        ("not an object", "[1, 2]"),
        ("missing operation", r#"{"sku": "vanilla", "quantity": 7, "amount": 1750}"#),
        ("missing amount", r#"{"operation": "op", "sku": "vanilla", "quantity": 7}"#),
        ("empty sku", r#"{"operation": "op", "sku": "", "quantity": 7, "amount": 1750}"#),
        ("fractional quantity", r#"{"operation": "op", "sku": "vanilla", "quantity": 1.5, "amount": 1750}"#),
        ("amount as text", r#"{"operation": "op", "sku": "vanilla", "quantity": 7, "amount": "1750"}"#),
        ("unknown field", r#"{"operation": "op", "sku": "vanilla", "quantity": 7, "amount": 1750, "x": 1}"#),
    ];
    for (what, body) in bodies {
        match supplier.post_raw("/orders", body) {
            Err(SupplierError::Http(400, text)) => {
                let error: Value = serde_json::from_str(&text).expect("a JSON error");
                assert!(error["error"].is_string(), "{what}: no error message in {text}");
            }
            other => panic!("{what}: expected a 400, got {other:?}"),
        }
    }
    assert!(matches!(supplier.order("op", "vanilla", 7, -1), Err(SupplierError::Http(400, _))));
    assert!(matches!(supplier.order("op", "vanilla", -7, 1750), Err(SupplierError::Http(400, _))));
    assert!(matches!(supplier.post_raw("/nowhere", "{}"), Err(SupplierError::Http(404, _))));
    assert_eq!(supplier.orders().expect("list"), Vec::<Value>::new());

    // The peer is still serving after all that.
    assert_eq!(supplier.order("op", "vanilla", 1, 250).expect("a good order"), receipt("op", 1, "vanilla", 1, 250));
}

#[test]
fn an_unreachable_supplier_is_reported_as_such() {
    let temp = Temp::new("gone");
    let peer = start(&temp.0.join("supplier.db"));
    let supplier = peer.supplier.clone();
    drop(peer);
    assert!(!supplier.health());
    assert!(matches!(supplier.order("op", "vanilla", 1, 250), Err(SupplierError::Unreachable(_))));
}
