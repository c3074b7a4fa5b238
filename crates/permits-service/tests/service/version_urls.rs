//! Version URLs over HTTP: the host registers, for SendReply, the URL of its ticket desk (a real HTTP server
//! started here on port 0, axum on its own tokio runtime); when a person approves, the service asks it for
//! ticket T-42's revision. A changed revision makes the approval `stale` before the yes; a URL that does
//! not answer leaves the approval made against the proposal's version, and the claim still catches the
//! change.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Client, R, Server};

/// The ticket desk's version endpoint: answers `{"version": REVISION}` at `/version`, and never answers
/// at `/silent` (it holds the connection open); every question it was asked is kept.
struct Desk {
    url: String,
    revision: Arc<Mutex<String>>,
    asked: Arc<Mutex<Vec<Value>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Desk {
    fn start(revision: &str) -> Desk {
        let revision = Arc::new(Mutex::new(revision.to_string()));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, url) = std::sync::mpsc::channel();
        let (r, a) = (revision.clone(), asked.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
            rt.block_on(async move {
                let answer = {
                    let (r, a) = (r.clone(), a.clone());
                    move |axum::Json(question): axum::Json<Value>| async move {
                        a.lock().unwrap_or_else(PoisonError::into_inner).push(question);
                        let version = r.lock().unwrap_or_else(PoisonError::into_inner).clone();
                        axum::Json(json!({"version": version}))
                    }
                };
                let silent = move |axum::Json(question): axum::Json<Value>| async move {
                    a.lock().unwrap_or_else(PoisonError::into_inner).push(question);
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    axum::Json(json!({}))
                };
                let app = axum::Router::new()
                    .route("/version", axum::routing::post(answer))
                    .route("/silent", axum::routing::post(silent));
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the desk");
                let addr = listener.local_addr().expect("the desk's address");
                let _ = ready.send(format!("http://{addr}"));
                let _ = axum::serve(listener, app).with_graceful_shutdown(async { drop(stopped.await) }).await;
            });
        });
        let url = url.recv_timeout(Duration::from_secs(10)).expect("the desk started");
        Desk { url, revision, asked, _stop: stop }
    }

    fn set(&self, revision: &str) {
        *self.revision.lock().unwrap_or_else(PoisonError::into_inner) = revision.to_string();
    }

    fn asked(&self) -> Vec<Value> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

fn reply(host: &Client, key: &str) -> Value {
    let call = json!({"agent": "Triage", "skill": "ExportFailures", "tool": "SendReply",
        "arguments": {"ticket": "T-42", "recipient": "customer-42", "text": "J-42 failed."}, "requester": "Sam",
        "operation_key": key, "claim_token": format!("{key}-call"), "covered_version": "7"});
    let answer = host.post("/v1/calls", &call).ok();
    assert_eq!(answer["outcome"], "proposed", "{answer}");
    answer["proposal"].clone()
}

fn approve(riley: &Client, p: &Value) -> super::Answer {
    riley.post(
        &format!("/v1/proposals/{}/approve", p["id"].as_str().unwrap_or("")),
        &json!({"fingerprint": p["fingerprint"]}),
    )
}

fn register(host: &Client, tool: &str, url: &str) -> super::Answer {
    host.post("/v1/version-urls", &json!({"agent": "Triage", "tool": tool, "url": url}))
}

#[test]
fn registration_is_a_hosts_for_its_agents_versioned_tools_on_loopback() -> R {
    let server = Server::start("support-triage");
    let (host, other, riley) = (server.host("Triage"), server.host("Estimator"), server.person("Riley"));
    let url = "http://127.0.0.1:9/version";
    let made = register(&host, "SendReply", url).ok()["version_url"].clone();
    assert_eq!((&made["agent"], &made["tool"], &made["url"]), (&json!("Triage"), &json!("SendReply"), &json!(url)));
    assert_eq!(register(&riley, "SendReply", url).code(), "host_only");
    assert_eq!(
        other.post("/v1/version-urls", &json!({"agent": "Triage", "tool": "SendReply", "url": url})).code(),
        "not_your_agent"
    );
    let no_version = register(&host, "GetExportContext", url);
    assert_eq!((no_version.status, no_version.code()), (422, "no_version"));
    let not_offered = register(&host, "DeleteWorkspace", url);
    assert_eq!((not_offered.status, not_offered.code()), (422, "not_offered"));
    for bad in [
        "https://127.0.0.1/v",
        "http://example.com/v",
        "http://10.0.0.1:80/v",
        "ftp://127.0.0.1/",
        "http://u@127.0.0.1/",
    ] {
        let refused = register(&host, "SendReply", bad);
        assert_eq!((refused.status, refused.code()), (400, "bad_url"), "{bad}: {}", refused.body);
    }
    assert!(register(&host, "SendReply", "http://example.com/v").message().contains("--version-url-host example.com"));
    // A new registration replaces the old; the host sees its agents', a person sees all; removal.
    register(&host, "SendReply", "http://[::1]:9/v2").ok();
    let listed = host.get("/v1/version-urls").ok()["version_urls"].clone();
    assert_eq!((listed.as_array().map(Vec::len), &listed[0]["url"]), (Some(1), &json!("http://[::1]:9/v2")));
    assert_eq!(other.get("/v1/version-urls").ok()["version_urls"], json!([]));
    assert_eq!(riley.get("/v1/version-urls").ok()["version_urls"], listed);
    let removed = host.post("/v1/version-urls/remove", &json!({"agent": "Triage", "tool": "SendReply"})).ok();
    assert_eq!(removed["removed"], true);
    assert_eq!(
        host.post("/v1/version-urls/remove", &json!({"agent": "Triage", "tool": "SendReply"})).ok()["removed"],
        false
    );
    assert_eq!(riley.get("/v1/version-urls").ok()["version_urls"], json!([]));
    Ok(())
}

#[test]
fn a_changed_version_at_approval_answers_stale_before_the_yes() -> R {
    let desk = Desk::start("7");
    let server = Server::start("support-triage");
    let (host, riley) = (server.host("Triage"), server.person("Riley"));
    register(&host, "SendReply", &format!("{}/version", desk.url)).ok();
    // The same revision: approved, and the answer says the URL was asked.
    let first = reply(&host, "v-1");
    let granted = approve(&riley, &first).ok();
    assert_eq!(granted["status"], "granted");
    assert_eq!(
        granted["version_check"],
        json!({"url": format!("{}/version", desk.url), "outcome": "same", "version": "7"})
    );
    assert_eq!(
        desk.asked(),
        [json!({"agent": "Triage", "tool": "SendReply", "proposal": "P-1", "param": "ticket", "entity": "Ticket",
            "id": "T-42", "field": "revision"})]
    );
    // The ticket moves on to revision 8 before Riley says yes to the next reply: stale, final, nothing granted.
    let second = reply(&host, "v-2");
    desk.set("8");
    let refused = approve(&riley, &second);
    assert_eq!((refused.status, refused.code()), (409, "stale"), "{}", refused.body);
    assert!(refused.message().contains("the covered version is `8` instead of `7`"), "{}", refused.message());
    let now = host.get("/v1/proposals/P-2").ok();
    assert_eq!((&now["status"], &now["grant"]), (&json!("stale"), &json!(null)));
    let claim = host.post("/v1/executions/P-2/claim", &json!({"token": "t", "covered_version": "8"}));
    assert_eq!(claim.code(), "status", "{}", claim.body);
    let metrics = Client::anonymous(&server.url).get_text("/metrics");
    assert!(metrics.contains("permits_version_checks_total{outcome=\"changed\"} 1"), "{metrics}");
    assert!(metrics.contains("permits_version_checks_total{outcome=\"same\"} 1"), "{metrics}");
    // The host's key is revoked: its URL is never asked again.
    let key = riley.get("/v1/version-urls").ok()["version_urls"][0]["key"].as_str().unwrap_or("").to_string();
    let other_host = server.host("Triage");
    let third = reply(&other_host, "v-3");
    let revoked = super::permitd().args(["keys", "revoke", "--store"]).arg(&server.store).arg(&key).output()?;
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    assert_eq!(riley.get("/v1/version-urls").ok()["version_urls"], json!([]));
    let granted = approve(&riley, &third).ok();
    assert_eq!((&granted["status"], granted.get("version_check")), (&json!("granted"), None));
    assert_eq!(desk.asked().len(), 2, "the revoked host's URL was not asked");
    Ok(())
}

#[test]
fn a_silent_version_url_leaves_the_approval_to_the_claims_recheck() -> R {
    let desk = Desk::start("7");
    let dir = super::Temp::new("silent-version");
    let table = dir.path("table.json");
    std::fs::copy(super::fixture("support-triage"), &table)?;
    let server = Server::with(&table, &dir.path("ledger.db"), &["--version-url-timeout-ms", "300"]);
    let (host, riley) = (server.host("Triage"), server.person("Riley"));
    register(&host, "SendReply", &format!("{}/silent", desk.url)).ok();
    let p = reply(&host, "s-1");
    let started = Instant::now();
    let granted = approve(&riley, &p).ok();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5), "the approval took {took:?}");
    assert_eq!((&granted["status"], &granted["grant"]["approver"]), (&json!("granted"), &json!("Riley")));
    let check = &granted["version_check"];
    assert_eq!((&check["outcome"], &check["version"]), (&json!("unanswered"), &json!("7")));
    assert!(check["message"].as_str().unwrap_or("").contains("no answer within 300 ms"), "{check}");
    assert_eq!(desk.asked().len(), 1, "the URL was asked");
    // A URL on a closed port is unanswered too.
    register(&host, "SendReply", "http://127.0.0.1:9/version").ok();
    let q = reply(&host, "s-2");
    let check = approve(&riley, &q).ok()["version_check"].clone();
    assert_eq!(check["outcome"], "unanswered");
    assert!(check["message"].as_str().unwrap_or("").contains("cannot connect"), "{check}");
    // The ticket had moved on: the claim, where the host states the revision it is about to act on, says stale.
    let claim = host.post("/v1/executions/P-1/claim", &json!({"token": "t", "covered_version": "8"}));
    assert_eq!((claim.status, claim.code()), (409, "stale"), "{}", claim.body);
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "stale");
    let metrics = Client::anonymous(&server.url).get_text("/metrics");
    assert!(metrics.contains("permits_version_checks_total{outcome=\"unanswered\"} 2"), "{metrics}");
    Ok(())
}

/// The URL is asked only for an approval that could be made: a person who may not decide (the requester
/// of a routed reply) and a wrong fingerprint are refused without a question to the host.
#[test]
fn a_version_url_is_asked_only_for_an_approval_that_could_be_made() -> R {
    let desk = Desk::start("7");
    let server = Server::start("support-triage");
    let (host, riley, sam) = (server.host("Triage"), server.person("Riley"), server.person("Sam"));
    register(&host, "SendReply", &format!("{}/version", desk.url)).ok();
    let p = reply(&host, "v-1");
    let by_requester = approve(&sam, &p);
    assert_eq!((by_requester.status, by_requester.code()), (403, "not_decider"), "{}", by_requester.body);
    let wrong = riley.post(
        &format!("/v1/proposals/{}/approve", p["id"].as_str().unwrap_or("")),
        &json!({"fingerprint": "sha256:0000"}),
    );
    assert_eq!(wrong.code(), "wrong_fingerprint", "{}", wrong.body);
    assert_eq!(desk.asked(), Vec::<Value>::new(), "nobody who could not approve made the service ask");
    assert_eq!(approve(&riley, &p).ok()["status"], "granted");
    assert_eq!(desk.asked().len(), 1);
    Ok(())
}
