//! Task leases over HTTP (spec §5a "Leases", issue #22), on the hardening shop (`holes.table.json`: orders
//! routed to a buyer, `StockLevel` alone): two hosts of one agent fenced by the real service, who may take
//! a lease, and bad lease bodies. The service's clock is the system's, so a lease expires by sleeping past
//! it (leases count whole seconds).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Answer, Client, R, Server};

fn order(key: &str, token: &str, lease: Option<&Value>) -> Value {
    let mut call = json!({"agent": "Clerkbot", "skill": "Reorder", "tool": "PlaceOrder",
        "arguments": {"sku": "vanilla", "quantity": 1, "amount": 900}, "requester": "Sam",
        "operation_key": key, "claim_token": token, "why": "the freezer runs low"});
    if let Some(lease) = lease {
        call["lease"] = lease.clone();
    }
    call
}

/// `{holder, fence}` of a lease the service answered.
fn presented(lease: &Value) -> Value {
    json!({"holder": lease["holder"], "fence": lease["fence"]})
}

fn take(host: &Client, key: &str, holder: &str, seconds: u64) -> Answer {
    host.post(&format!("/v1/tasks/{key}/lease"), &json!({"holder": holder, "seconds": seconds}))
}

fn refused_not_holder(answer: &Answer, message: &str) {
    assert_eq!((answer.status, answer.code(), answer.message()), (409, "not_holder", message), "{}", answer.body);
}

/// Host A takes `order-1` for a second, proposes an order of 900, Max approves it, A claims it and stalls
/// past its lease; B takes the task over. A's confirmation, its settlement, a new proposal and B's calls
/// without the lease are refused; B claims the grant A never confirmed, runs it once and settles it.
#[test]
fn a_host_that_lost_its_lease_can_neither_execute_nor_settle() -> R {
    let server = Server::start("holes.table");
    let (a, b, max) = (server.host("Clerkbot"), server.host("Clerkbot"), server.person("Max"));
    let mut runs = 0;
    let lease_a = take(&a, "order-1", "host-a", 1).ok()["lease"].clone();
    assert_eq!(
        (&lease_a["key"], &lease_a["holder"], &lease_a["fence"]),
        (&json!("order-1"), &json!("host-a"), &json!(1))
    );
    assert_eq!(lease_a["expires_at"].as_u64(), lease_a["taken_at"].as_u64().map(|t| t + 1));
    let held_by_a = format!(
        "task `order-1` is held by `host-a` until {}: take it after that, or when `host-a` releases it",
        lease_a["expires_at"]
    );
    refused_not_holder(&take(&b, "order-1", "host-b", 30), &held_by_a);
    let proposed = a.post("/v1/calls", &order("order-1", "call-a", Some(&presented(&lease_a)))).ok();
    let p = &proposed["proposal"];
    assert_eq!((&p["id"], &p["status"]), (&json!("P-1"), &json!("waiting")));
    max.post("/v1/proposals/P-1/approve", &json!({"fingerprint": p["fingerprint"]})).ok();
    let claim = json!({"token": "tok-a", "lease": presented(&lease_a)});
    assert_eq!(a.post("/v1/executions/P-1/claim", &claim).ok()["status"], "granted");
    assert_eq!(a.get("/v1/proposals/P-1").ok()["host_claim"]["fence"], 1);
    // A stalls past its lease; B takes the task over and gets the next fence.
    std::thread::sleep(Duration::from_millis(1200));
    let lease_b = take(&b, "order-1", "host-b", 60).ok()["lease"].clone();
    assert_eq!((&lease_b["holder"], &lease_b["fence"]), (&json!("host-b"), &json!(2)));
    assert_eq!(b.get("/v1/tasks/order-1/lease").ok()["lease"], lease_b);
    let fenced =
        "this host no longer holds the task `order-1`: `host-b` holds it now (fence 2); `host-a` may not act under it";
    // A wakes up: with its valid claim and grant it can neither confirm, nor propose again, nor renew.
    refused_not_holder(
        &a.post("/v1/executions/P-1/confirm", &json!({"token": "tok-a", "lease": presented(&lease_a)})),
        fenced,
    );
    refused_not_holder(&a.post("/v1/calls", &order("order-1", "call-a2", Some(&presented(&lease_a)))), fenced);
    let renew = json!({"holder": "host-a", "fence": 1, "seconds": 30});
    refused_not_holder(&a.post("/v1/tasks/order-1/lease/renew", &renew), fenced);
    refused_not_holder(
        &a.post(
            "/v1/executions/P-1/refuse",
            &json!({"token": "tok-a", "principal": "agent", "reason": "late",
            "lease": presented(&lease_a)}),
        ),
        fenced,
    );
    // Without a lease at all, while B holds it: refused too.
    let held_by_b = format!(
        "task `order-1` is held by `host-b` until {}: only its holder acts under it (take the task, or wait)",
        lease_b["expires_at"]
    );
    refused_not_holder(&a.post("/v1/executions/P-1/claim", &json!({"token": "tok-c"})), &held_by_b);
    // B claims the grant A never confirmed (A's claim is dropped), confirms, runs it once, reports.
    let claimed = b.post("/v1/executions/P-1/claim", &json!({"token": "tok-b", "lease": presented(&lease_b)})).ok();
    assert_eq!((&claimed["status"], &claimed["claim_token"]), (&json!("granted"), &json!("tok-b")));
    let sending = b.post("/v1/executions/P-1/confirm", &json!({"token": "tok-b", "lease": presented(&lease_b)})).ok();
    assert_eq!(sending["status"], "sending");
    runs += 1;
    let receipt = json!({"operation": "order-1:P-1", "amount": 900, "outcome": "accepted"});
    let reported =
        b.post("/v1/executions/P-1/receipt", &json!({"token": "tok-b", "outcome": "done", "receipt": receipt})).ok();
    assert_eq!(reported["status"], "done");
    // A's old token holds nothing now; its settlement is refused; B's is the task's.
    let old = a.post("/v1/executions/P-1/receipt", &json!({"token": "tok-a", "outcome": "done", "receipt": {}}));
    assert_eq!((old.status, old.code()), (409, "claimed"), "{}", old.body);
    refused_not_holder(
        &a.post("/v1/settle", &json!({"holder": "P-1", "receipt": receipt, "lease": presented(&lease_a)})),
        fenced,
    );
    let budget = a.get("/v1/budgets/Supplies").ok()["budget"].clone();
    assert_eq!((&budget["reserved"], &budget["spent"]), (&json!(0), &json!(900)), "one order, spent once");
    assert_eq!(runs, 1, "the tool ran once, for the host that held the task");
    // B releases; the task takes calls without a lease again.
    let released = b.post("/v1/tasks/order-1/lease/release", &presented(&lease_b)).ok()["lease"].clone();
    assert_eq!(released["fence"], 2);
    assert!(released["expires_at"].as_u64() < lease_b["expires_at"].as_u64(), "{released}");
    let again = b.post("/v1/tasks/order-1/lease/release", &presented(&lease_b)).ok()["lease"].clone();
    assert_eq!(again, released, "releasing again changes nothing");
    let stock = json!({"agent": "Clerkbot", "skill": "Reorder", "tool": "StockLevel", "arguments": {"sku": "vanilla"},
        "requester": "Sam", "operation_key": "order-1", "claim_token": "stock-1"});
    assert_eq!(a.post("/v1/calls", &stock).ok()["outcome"], "alone");
    // Every lease step is in the audit.
    let audit = max.get("/v1/audit?limit=1000").ok();
    let reasons: Vec<&str> = audit["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|e| e["event"]["kind"] == "task")
                .filter_map(|e| e["event"]["reason"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        reasons,
        [
            format!("task `order-1` leased: `host-a` holds it with fence 1 until {}", lease_a["expires_at"]),
            "task `order-1`".to_string(),
            format!(
                "task `order-1` leased: `host-b` holds it with fence 2 until {} (taken over from `host-a`, fence 1)",
                lease_b["expires_at"]
            ),
            format!("task `order-1` released: `host-b` holds it with fence 2 until {}", released["expires_at"]),
        ]
    );
    Ok(())
}

/// An alone call of a leased task: the holder's runs, another host's is refused, and under another key
/// nothing is held.
#[test]
fn an_alone_call_of_a_leased_task_needs_the_lease() -> R {
    let server = Server::start("holes.table");
    let (a, b) = (server.host("Clerkbot"), server.host("Clerkbot"));
    let lease = take(&a, "order-1", "host-a", 60).ok()["lease"].clone();
    let stock = |key: &str, token: &str, lease: Option<&Value>| {
        let mut call = json!({"agent": "Clerkbot", "skill": "Reorder", "tool": "StockLevel",
            "arguments": {"sku": "vanilla"}, "requester": "Sam", "operation_key": key, "claim_token": token});
        if let Some(lease) = lease {
            call["lease"] = presented(lease);
        }
        call
    };
    let refused = b.post("/v1/calls", &stock("order-1", "tok-b", None));
    assert_eq!((refused.status, refused.code()), (409, "not_holder"), "{}", refused.body);
    let forged = json!({"holder": "host-a", "fence": 2});
    let mut call = stock("order-1", "tok-b", None);
    call["lease"] = forged;
    refused_not_holder(
        &b.post("/v1/calls", &call),
        "this host no longer holds the task `order-1`: fence 2 is not the current fence 1 of `host-a`'s lease; \
         `host-a` may not act under it",
    );
    let ran = a.post("/v1/calls", &stock("order-1", "tok-a", Some(&lease))).ok();
    assert_eq!((&ran["outcome"], &ran["execution"]["id"]), (&json!("alone"), &json!("A-1")));
    let confirmed = a.post("/v1/executions/A-1/confirm", &json!({"token": "tok-a", "lease": presented(&lease)})).ok();
    assert_eq!(confirmed["status"], "sending");
    assert_eq!(b.post("/v1/calls", &stock("order-2", "tok-2", None)).ok()["execution"]["id"], "A-2");
    Ok(())
}

/// Only a host key takes a lease: a person's or an admin's is refused; for a bound task, a host key for
/// its root agent only; for a key no call bound, any host key. Nothing is stored by a refusal.
#[test]
fn only_a_host_key_for_the_root_agent_takes_a_bound_tasks_lease() -> R {
    let server = Server::start("holes.table");
    let (host, other, max) = (server.host("Clerkbot"), server.host("Shelfbot"), server.person("Max"));
    let admin = Client::new(&server.url, &server.key(&["--admin"]));
    host.post("/v1/calls", &order("order-1", "call-1", None)).ok();
    let refused = take(&other, "order-1", "host-z", 30);
    assert_eq!((refused.status, refused.code()), (403, "not_your_agent"), "{}", refused.body);
    assert!(refused.message().contains("not for `Clerkbot`"), "{}", refused.message());
    let refused = other.post("/v1/tasks/order-1/lease/release", &json!({"holder": "host-z", "fence": 1}));
    assert_eq!((refused.status, refused.code()), (403, "not_your_agent"));
    for who in [&max, &admin] {
        let refused = take(who, "order-1", "max", 30);
        assert_eq!((refused.status, refused.code()), (403, "host_only"), "{}", refused.body);
        let refused = take(who, "order-9", "max", 30);
        assert_eq!((refused.status, refused.code()), (403, "host_only"), "{}", refused.body);
        assert!(refused.message().starts_with("only a host key may take, renew or release a task's lease"));
    }
    assert_eq!(host.get("/v1/tasks/order-1/lease").ok()["lease"], Value::Null);
    assert_eq!(other.get("/v1/tasks/order-9/lease").ok()["lease"], Value::Null);
    // A host key for another agent reads neither the bound task nor its lease.
    assert_eq!(other.get("/v1/tasks/order-1/lease").code(), "not_your_agent");
    // An unbound key: any host key takes it (a worker takes the task before its first call).
    assert_eq!(take(&other, "order-9", "shelf-1", 30).ok()["lease"]["fence"], 1);
    assert_eq!(take(&host, "order-1", "host-a", 30).ok()["lease"]["fence"], 1);
    assert_eq!(max.get("/v1/tasks/order-1/lease").ok()["lease"]["holder"], "host-a", "a person reads it");
    Ok(())
}

/// Bad lease bodies: each a 4xx with a clear JSON error, and no lease stored.
#[test]
fn bad_lease_bodies_are_refused_and_store_nothing() -> R {
    let server = Server::start("holes.table");
    let host = server.host("Clerkbot");
    let long = "k".repeat(600);
    let cases: Vec<(String, Value, u16, &str, &str)> = vec![
        (
            "/v1/tasks/order-1/lease".into(),
            json!({"holder": "host-a"}),
            400,
            "invalid_request",
            "missing field `seconds`",
        ),
        (
            "/v1/tasks/order-1/lease".into(),
            json!({"holder": "host-a", "seconds": 30, "fence": 3}),
            400,
            "unknown_field",
            "unknown field `fence`",
        ),
        (
            "/v1/tasks/order-1/lease".into(),
            json!({"holder": "host-a", "seconds": -1}),
            400,
            "invalid_request",
            "invalid value",
        ),
        ("/v1/tasks/order-1/lease".into(), json!({"holder": 7, "seconds": 30}), 400, "invalid_request", "invalid type"),
        (
            "/v1/tasks/order-1/lease".into(),
            json!({"holder": "host-a", "seconds": 0}),
            400,
            "invalid_request",
            "a lease is taken for 1 to 86400 seconds, not 0",
        ),
        (
            "/v1/tasks/order-1/lease".into(),
            json!({"holder": "host-a", "seconds": 86401}),
            413,
            "too_large",
            "a lease is taken for 1 to 86400 seconds, not 86401",
        ),
        (
            "/v1/tasks/order-1/lease".into(),
            json!({"holder": "", "seconds": 30}),
            400,
            "invalid_request",
            "a lease needs an operation key and a holder: neither may be empty",
        ),
        (
            format!("/v1/tasks/{long}/lease"),
            json!({"holder": "host-a", "seconds": 30}),
            413,
            "too_large",
            "the operation key is 600 bytes",
        ),
        (
            "/v1/tasks/order-1/lease/renew".into(),
            json!({"holder": "host-a", "seconds": 30}),
            400,
            "invalid_request",
            "missing field `fence`",
        ),
        (
            "/v1/tasks/order-1/lease/release".into(),
            json!({"holder": "host-a", "fence": 1, "seconds": 3}),
            400,
            "unknown_field",
            "unknown field `seconds`",
        ),
        (
            "/v1/tasks/order-1/lease/release".into(),
            json!({"holder": "host-a", "fence": 1}),
            409,
            "not_holder",
            "this host no longer holds the task `order-1`: the store has no lease on it; `host-a` may not act under it",
        ),
    ];
    for (path, body, status, code, message) in cases {
        let answer = host.post(&path, &body);
        assert_eq!((answer.status, answer.code()), (status, code), "{path} {body}: {}", answer.body);
        assert!(answer.message().contains(message), "{path} {body}: {}", answer.message());
        assert_eq!(host.get("/v1/tasks/order-1/lease").ok()["lease"], Value::Null);
    }
    // A lease in an acting body: `{holder, fence}` exactly.
    for lease in
        [json!({"holder": "host-a"}), json!({"holder": "host-a", "fence": 1, "expires_at": 9}), json!("host-a")]
    {
        let answer = host.post("/v1/calls", &order("order-1", "call-1", Some(&lease)));
        assert_eq!(answer.status, 400, "{lease}: {}", answer.body);
        assert!(["invalid_request", "unknown_field"].contains(&answer.code()), "{}", answer.body);
    }
    // The receipt takes no lease: what ran is recorded whoever holds the task.
    let answer = host.post(
        "/v1/executions/P-1/receipt",
        &json!({"token": "t", "outcome": "done", "lease": {"holder": "h", "fence": 1}}),
    );
    assert_eq!((answer.status, answer.code()), (400, "unknown_field"), "{}", answer.body);
    assert_eq!(host.get("/v1/proposals").ok()["proposals"], json!([]));
    Ok(())
}

/// A lease of 0 seconds is a request that does not fit (400 `invalid_request`, no "renew it" help), taken or
/// renewed; too long a lease stays `too_large` with the help to renew it.
#[test]
fn a_lease_of_zero_seconds_is_an_invalid_request_and_too_long_one_too_large() -> R {
    let server = Server::start("holes.table");
    let host = server.host("Clerkbot");
    let zero = take(&host, "order-1", "host-a", 0);
    assert_eq!(
        (zero.status, zero.code(), zero.message()),
        (400, "invalid_request", "a lease is taken for 1 to 86400 seconds, not 0"),
        "{}",
        zero.body
    );
    let long = take(&host, "order-1", "host-a", 86401);
    assert_eq!(
        (long.status, long.code(), long.message()),
        (413, "too_large", "a lease is taken for 1 to 86400 seconds, not 86401: renew it to hold it longer")
    );
    let lease = take(&host, "order-1", "host-a", 60).ok()["lease"].clone();
    let mut renew = presented(&lease);
    renew["seconds"] = json!(0);
    let zero = host.post("/v1/tasks/order-1/lease/renew", &renew);
    assert_eq!(
        (zero.status, zero.code(), zero.message()),
        (400, "invalid_request", "a lease is taken for 1 to 86400 seconds, not 0")
    );
    assert_eq!(host.get("/v1/tasks/order-1/lease").ok()["lease"], lease, "nothing changed");
    Ok(())
}

/// An empty holder is a request that does not fit (400 `invalid_request`), not one too large: taken or
/// renewed, refused before the runtime is asked, and nothing changes.
#[test]
fn an_empty_holder_is_an_invalid_request_not_too_large() -> R {
    let server = Server::start("holes.table");
    let host = server.host("Clerkbot");
    let empty = take(&host, "order-1", "", 5);
    assert_eq!(
        (empty.status, empty.code(), empty.message()),
        (400, "invalid_request", "a lease needs an operation key and a holder: neither may be empty"),
        "{}",
        empty.body
    );
    assert_eq!(host.get("/v1/tasks/order-1/lease").ok()["lease"], Value::Null, "nothing was taken");
    let lease = take(&host, "order-1", "host-a", 60).ok()["lease"].clone();
    let empty = host.post("/v1/tasks/order-1/lease/renew", &json!({"holder": "", "fence": 1, "seconds": 30}));
    assert_eq!(
        (empty.status, empty.code(), empty.message()),
        (400, "invalid_request", "a lease needs an operation key and a holder: neither may be empty"),
        "{}",
        empty.body
    );
    assert_eq!(host.get("/v1/tasks/order-1/lease").ok()["lease"], lease, "nothing changed");
    Ok(())
}

/// The holder of a live lease that takes it again is refused (it renews instead: a new fence would fence
/// its own handle out); released and taken again it has a new fence, and its old one is told it is stale.
#[test]
fn the_holder_renews_its_live_lease_instead_of_taking_it_again() -> R {
    let server = Server::start("holes.table");
    let host = server.host("Clerkbot");
    let first = take(&host, "order-1", "host-a", 600).ok()["lease"].clone();
    assert_eq!(first["fence"], 1);
    refused_not_holder(
        &take(&host, "order-1", "host-a", 30),
        &format!(
            "task `order-1` is held by `host-a` already, with fence 1 until {}: renew it to hold it longer (or \
             release it and take it again for a new fence)",
            first["expires_at"]
        ),
    );
    assert_eq!(host.get("/v1/tasks/order-1/lease").ok()["lease"], first, "the refused take changed nothing");
    let mut renew = presented(&first);
    renew["seconds"] = json!(900);
    let renewed = host.post("/v1/tasks/order-1/lease/renew", &renew).ok()["lease"].clone();
    assert_eq!(renewed["fence"], 1);
    host.post("/v1/tasks/order-1/lease/release", &presented(&first)).ok();
    let second = take(&host, "order-1", "host-a", 60).ok()["lease"].clone();
    assert_eq!(second["fence"], 2);
    refused_not_holder(
        &host.post("/v1/calls", &order("order-1", "call-1", Some(&presented(&first)))),
        "this host no longer holds the task `order-1`: fence 1 is not the current fence 2 of `host-a`'s lease; \
         `host-a` may not act under it",
    );
    Ok(())
}
