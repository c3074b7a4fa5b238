//! Waiting for a decision: a long poll that answers when the status changes (or when its bounded wait
//! ends), and a stream of server-sent events that ends when the proposal is done.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Client, R, Server};

fn propose(host: &Client) -> Value {
    host.post(
        "/v1/calls",
        &json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice",
        "arguments": {"repair": "T-7", "price": 45}, "requester": "Noor", "operation_key": "k",
        "claim_token": "t", "covered_version": "r1"}),
    )
    .ok()["proposal"]
        .clone()
}

#[test]
fn a_long_poll_answers_when_the_status_changes_or_its_wait_ends() -> R {
    let server = Server::start("workshop");
    let (host, noor) = (server.host("Estimator"), server.person("Noor"));
    let p = propose(&host);
    let started = Instant::now();
    let unchanged = host.get("/v1/proposals/P-1?wait=1").ok();
    assert_eq!(unchanged["status"], "waiting");
    assert!(started.elapsed() >= Duration::from_millis(900), "it waited {:?}", started.elapsed());
    let approver = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        noor.post("/v1/proposals/P-1/approve", &json!({"fingerprint": p["fingerprint"]})).ok()
    });
    let started = Instant::now();
    let changed = host.get("/v1/proposals/P-1?wait=30").ok();
    assert_eq!(changed["status"], "granted");
    assert!(started.elapsed() < Duration::from_secs(10), "it took {:?}", started.elapsed());
    approver.join().map_err(|_| "the approver panicked")?;
    // A status other than the one the caller knows answers at once.
    let started = Instant::now();
    assert_eq!(host.get("/v1/proposals/P-1?wait=30&status=waiting").ok()["status"], "granted");
    assert!(started.elapsed() < Duration::from_secs(5));
    Ok(())
}

#[test]
fn an_event_stream_follows_a_proposal_until_it_is_done() -> R {
    let server = Server::start("workshop");
    let (host, noor) = (server.host("Estimator"), server.person("Noor"));
    let p = propose(&host);
    let response = ureq::get(format!("{}/v1/proposals/P-1/events", server.url))
        .header("authorization", format!("Bearer {}", host.token))
        .call()?;
    assert_eq!(response.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("text/event-stream"));
    let mut lines = BufReader::new(response.into_body().into_reader()).lines();
    let mut next_status = move || -> Option<String> {
        for line in lines.by_ref() {
            let line = line.ok()?;
            if let Some(data) = line.strip_prefix("data: ") {
                let v: Value = serde_json::from_str(data).ok()?;
                return v["status"].as_str().map(str::to_string);
            }
        }
        None
    };
    assert_eq!(next_status().as_deref(), Some("waiting"));
    noor.post("/v1/proposals/P-1/approve", &json!({"fingerprint": p["fingerprint"]})).ok();
    assert_eq!(next_status().as_deref(), Some("granted"));
    host.post("/v1/executions/P-1/claim", &json!({"token": "c", "covered_version": "r1"})).ok();
    host.post("/v1/executions/P-1/confirm", &json!({"token": "c"})).ok();
    assert_eq!(next_status().as_deref(), Some("sending"));
    host.post("/v1/executions/P-1/receipt", &json!({"token": "c", "outcome": "done", "receipt": "ok"})).ok();
    assert_eq!(next_status().as_deref(), Some("done"));
    assert_eq!(next_status(), None, "the stream ends with the proposal done");
    Ok(())
}
