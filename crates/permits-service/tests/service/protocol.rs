//! The execution protocol's guarantees over HTTP: one run per grant whoever races for it, the same answer
//! to a retried claim, nothing run again after the service is killed between claim and receipt, and
//! everything still there after a restart.

use std::sync::Barrier;

use serde_json::{Value, json};

use super::{Client, R, Server, Stop};

/// SendReply for Sam under `key`, approved by Riley: its id.
fn granted(host: &Client, riley: &Client, key: &str) -> String {
    let answer = host
        .post(
            "/v1/calls",
            &json!({"agent": "Triage", "skill": "ExportFailures", "tool": "SendReply",
            "arguments": {"ticket": "T-42", "recipient": "customer-42", "text": "J-42 failed."}, "requester": "Sam",
            "operation_key": key, "claim_token": format!("{key}-call"), "covered_version": "7"}),
        )
        .ok();
    let p = &answer["proposal"];
    let id = p["id"].as_str().unwrap_or_default().to_string();
    riley.post(&format!("/v1/proposals/{id}/approve"), &json!({"fingerprint": p["fingerprint"]})).ok();
    id
}

fn claim(host: &Client, id: &str, token: &str) -> super::Answer {
    host.post(&format!("/v1/executions/{id}/claim"), &json!({"token": token, "covered_version": "7"}))
}

#[test]
fn two_hosts_racing_to_claim_one_grant_500_times_run_it_once_each_time() -> R {
    let server = Server::start("support-triage");
    let riley = server.person("Riley");
    let hosts = [server.host("Triage"), server.host("Triage")];
    let rounds = 500;
    for round in 0..rounds {
        let id = granted(&hosts[0], &riley, &format!("race-{round}"));
        let start = Barrier::new(2);
        // Both hosts claim at once, each with its own token; whoever wins confirms and reports.
        let ran: Vec<bool> = std::thread::scope(|scope| {
            let racers: Vec<_> = hosts
                .iter()
                .enumerate()
                .map(|(n, host)| {
                    let (id, start) = (&id, &start);
                    scope.spawn(move || {
                        let token = format!("host-{n}-round-{round}");
                        start.wait();
                        let answer = claim(host, id, &token);
                        match answer.status {
                            // The other host was quicker and it is done: the stored receipt, nothing to run.
                            200 if answer.body["status"] == "done" => {
                                assert_ne!(answer.body["claim_token"], json!(token));
                                false
                            }
                            200 => {
                                assert_eq!(
                                    (&answer.body["status"], &answer.body["claim_token"]),
                                    (&json!("granted"), &json!(token))
                                );
                                let confirmed =
                                    host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": token}));
                                assert_eq!(confirmed.status, 200, "{}", confirmed.body);
                                let receipt = json!({"token": token, "outcome": "done", "receipt": {"sent_by": n}});
                                host.post(&format!("/v1/executions/{id}/receipt"), &receipt).ok();
                                true
                            }
                            // Claimed by the other token, or already sent by it.
                            409 if answer.code() == "claimed" => {
                                let refused =
                                    host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": token}));
                                assert_eq!(refused.code(), "claimed", "the loser cannot confirm: {}", refused.body);
                                false
                            }
                            other => panic!("claim answered {other}: {}", answer.body),
                        }
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        });
        assert!(ran[0] ^ ran[1], "round {round}: the runs were {ran:?}");
    }
    let done: Vec<Value> =
        hosts[0].get("/v1/proposals?status=done").ok()["proposals"].as_array().cloned().unwrap_or_default();
    assert_eq!(done.len(), rounds, "every grant ran, once");
    assert!(done.iter().all(|p| p["receipt"]["sent_by"].is_u64()));
    Ok(())
}

#[test]
fn a_retried_claim_with_the_same_token_gets_the_same_answer() -> R {
    let server = Server::start("support-triage");
    let (host, riley) = (server.host("Triage"), server.person("Riley"));
    let id = granted(&host, &riley, "retry-1");
    let first = claim(&host, &id, "lost-ack").ok();
    let again = claim(&host, &id, "lost-ack").ok();
    assert_eq!(again, first);
    assert_eq!(
        (&first["runs_as"], &first["claim_token"], &first["status"]),
        (&json!("Riley"), &json!("lost-ack"), &json!("granted"))
    );
    let other = claim(&host, &id, "another");
    assert_eq!((other.status, other.code()), (409, "claimed"));
    let confirmed = host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": "lost-ack"})).ok();
    assert_eq!(host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": "lost-ack"})).ok(), confirmed);
    let receipt = json!({"token": "lost-ack", "outcome": "done", "receipt": {"message": 1}});
    let done = host.post(&format!("/v1/executions/{id}/receipt"), &receipt).ok();
    assert_eq!(host.post(&format!("/v1/executions/{id}/receipt"), &receipt).ok(), done);
    assert_eq!(done["status"], "done");
    // An alone call's lost answer: the same call with the same token is the same run.
    let call = json!({"agent": "Triage", "skill": "ExportFailures", "tool": "GetExportContext",
        "arguments": {"job_id": "J-42"}, "requester": "Sam", "operation_key": "retry-1", "claim_token": "alone-1"});
    let first = host.post("/v1/calls", &call).ok();
    assert_eq!(first["execution"]["id"], "A-1");
    assert_eq!(host.post("/v1/calls", &call).ok(), first);
    Ok(())
}

/// `"confirm": true` on an alone call: claimed and confirmed in one transaction, answered `sending`; the
/// receipt follows with no confirmation request; a retry answers the run as it is now.
#[test]
fn an_alone_call_confirmed_with_its_claim_is_sending_at_once() -> R {
    let server = Server::start("support-triage");
    let host = server.host("Triage");
    let call = json!({"agent": "Triage", "skill": "ExportFailures", "tool": "GetExportContext",
        "arguments": {"job_id": "J-42"}, "requester": "Sam", "operation_key": "at-once", "claim_token": "alone-c",
        "confirm": true});
    let first = host.post("/v1/calls", &call).ok();
    assert_eq!(
        (&first["outcome"], &first["execution"]["id"], &first["execution"]["status"], &first["execution"]["confirmed"]),
        (&json!("alone"), &json!("A-1"), &json!("sending"), &json!(true))
    );
    assert_eq!(host.post("/v1/calls", &call).ok(), first);
    let receipt = json!({"token": "alone-c", "outcome": "done", "receipt": {"rows": 3}});
    let done = host.post("/v1/executions/A-1/receipt", &receipt).ok();
    assert_eq!((&done["status"], &done["receipt"]), (&json!("done"), &json!({"rows": 3})));
    let again = host.post("/v1/calls", &call).ok();
    assert_eq!((&again["execution"]["id"], &again["execution"]["status"]), (&json!("A-1"), &json!("done")));
    Ok(())
}

#[test]
fn killed_between_claim_and_receipt_it_never_runs_again() -> R {
    let server = Server::start("support-triage");
    let (host, riley) = (server.host("Triage"), server.person("Riley"));
    let sent = granted(&host, &riley, "kill-1");
    claim(&host, &sent, "tok-sent").ok();
    host.post(&format!("/v1/executions/{sent}/confirm"), &json!({"token": "tok-sent"})).ok();
    let claimed = granted(&host, &riley, "kill-2");
    claim(&host, &claimed, "tok-claimed").ok();
    let host_token = host.token.clone();
    let riley_token = riley.token.clone();
    let (table, store, dir) = server.stop(Stop::Kill);
    let server = Server::on(&table, &store);
    let (host, riley) = (Client::new(&server.url, &host_token), Client::new(&server.url, &riley_token));
    // Confirmed, then killed: `sending`; no other token, and no approval, makes it run again.
    let after = host.get(&format!("/v1/executions/{sent}")).ok();
    assert_eq!((&after["status"], &after["confirmed"]), (&json!("sending"), &json!(true)));
    assert_eq!(claim(&host, &sent, "tok-new").code(), "claimed");
    assert_eq!(host.post(&format!("/v1/executions/{sent}/confirm"), &json!({"token": "tok-new"})).code(), "claimed");
    let fingerprint = host.get(&format!("/v1/proposals/{sent}")).ok()["fingerprint"].clone();
    assert_eq!(
        riley.post(&format!("/v1/proposals/{sent}/approve"), &json!({"fingerprint": fingerprint})).code(),
        "status"
    );
    // Claimed, not confirmed, then killed: still bound to its token.
    assert_eq!(host.get(&format!("/v1/executions/{claimed}")).ok()["status"], "granted");
    assert_eq!(claim(&host, &claimed, "tok-new").code(), "claimed");
    // The host that held the claim reports what it knows.
    let receipt = json!({"token": "tok-sent", "outcome": "unknown", "reason": "the service died before the receipt"});
    assert_eq!(host.post(&format!("/v1/executions/{sent}/receipt"), &receipt).ok()["status"], "unknown");
    drop(dir);
    Ok(())
}

#[test]
fn a_restart_keeps_waiting_proposals_grants_reservations_rules_and_runs() -> R {
    let server = Server::start("holes.table");
    let host = server.host("Clerkbot");
    let (max, lucy) = (server.person("Max"), server.person("Lucy"));
    let order = |sku: &str, amount: u64, key: &str| {
        json!({"agent": "Clerkbot", "skill": "Reorder", "tool": "PlaceOrder",
            "arguments": {"sku": sku, "quantity": 1, "amount": amount}, "requester": "Sam",
            "operation_key": key, "claim_token": format!("{key}-{sku}")})
    };
    let waiting = host.post("/v1/calls", &order("vanilla", 900, "order-1")).ok()["proposal"].clone();
    let granted = host.post("/v1/calls", &order("mint", 800, "order-2")).ok()["proposal"].clone();
    max.post("/v1/proposals/P-2/approve", &json!({"fingerprint": granted["fingerprint"]})).ok();
    let rule = json!({"agent": "Clerkbot", "tool": "PlaceOrder", "skill": "Reorder", "work_for": {"person": "Sam"},
        "scope": "any_arguments"});
    lucy.post("/v1/rules", &rule).ok();
    let alone = host.post("/v1/calls", &order("lemon", 300, "order-3")).ok();
    assert_eq!((&alone["outcome"], &alone["execution"]["id"]), (&json!("alone"), &json!("A-1")));
    let budget = |c: &Client| c.get("/v1/budgets/Supplies").ok()["budget"].clone();
    assert_eq!((&budget(&host)["reserved"], &budget(&host)["spent"]), (&json!(1100), &json!(0)));
    let tokens = (host.token.clone(), max.token.clone());
    let (table, store, dir) = server.stop(Stop::Term);

    let server = Server::on(&table, &store);
    let (host, max) = (Client::new(&server.url, &tokens.0), Client::new(&server.url, &tokens.1));
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    assert_eq!(host.get("/v1/proposals/P-1").ok()["fingerprint"], waiting["fingerprint"]);
    let p2 = host.get("/v1/proposals/P-2").ok();
    assert_eq!((&p2["status"], &p2["grant"]["approver"]), (&json!("granted"), &json!("Max")));
    let rules = host.get("/v1/rules").ok()["rules"].clone();
    assert_eq!((rules.as_array().map(Vec::len), &rules[0]["work_for"]), (Some(1), &json!({"person": "Sam"})));
    assert_eq!(host.get("/v1/executions/A-1").ok()["status"], "granted");
    assert_eq!((&budget(&host)["reserved"], &budget(&host)["spent"]), (&json!(1100), &json!(0)));
    // And they go on: the waiting one is approved and sent, the run confirmed and settled.
    max.post("/v1/proposals/P-1/approve", &json!({"fingerprint": waiting["fingerprint"]})).ok();
    assert_eq!(claim(&host, "P-1", "go").ok()["runs_as"], "Max");
    host.post("/v1/executions/A-1/confirm", &json!({"token": "order-3-lemon"})).ok();
    let receipt = json!({"operation": "A-1", "amount": 300, "outcome": "accepted"});
    let done = host
        .post("/v1/executions/A-1/receipt", &json!({"token": "order-3-lemon", "outcome": "done", "receipt": receipt}))
        .ok();
    assert_eq!(done["status"], "done");
    assert_eq!((&budget(&host)["reserved"], &budget(&host)["spent"]), (&json!(1700), &json!(300)));
    drop(dir);
    Ok(())
}

#[test]
fn no_answer_shows_a_claim_token_to_anyone_but_its_holder() -> R {
    let server = Server::start("support-triage");
    let (host, other, riley) = (server.host("Triage"), server.host("Triage"), server.person("Riley"));
    let id = granted(&host, &riley, "secret-1");
    claim(&host, &id, "tok-secret").ok();
    // Claimed, not yet confirmed: whoever reads it does not learn the token that would confirm it.
    assert_eq!(host.get(&format!("/v1/executions/{id}")).ok()["claim_token"], json!(null));
    let p = other.get(&format!("/v1/proposals/{id}")).ok();
    assert_eq!(p["host_claim"]["runs_as"], "Riley");
    assert_eq!(p.get("claim"), None);
    assert!(!p.to_string().contains("tok-secret"), "{p}");
    host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": "tok-secret"})).ok();
    let receipt = json!({"token": "tok-secret", "outcome": "done", "receipt": {"message": 1}});
    host.post(&format!("/v1/executions/{id}/receipt"), &receipt).ok();
    // Done: another host's claim is refused, and is not told the token that ran it; the holder's retry
    // gets the stored receipt.
    let refused = claim(&other, &id, "tok-other");
    assert_eq!((refused.status, refused.code()), (409, "claimed"));
    assert!(!refused.body.to_string().contains("tok-secret"), "{}", refused.body);
    let done = claim(&host, &id, "tok-secret").ok();
    assert_eq!(
        (&done["status"], &done["receipt"], &done["claim_token"]),
        (&json!("done"), &json!({"message": 1}), &json!("tok-secret"))
    );
    let everything = other.get(&format!("/v1/proposals/{id}")).ok();
    assert!(!everything.to_string().contains("tok-secret"), "{everything}");
    Ok(())
}

#[test]
fn an_operation_key_is_one_persons_task_over_http_and_its_host_ends_it() -> R {
    let server = Server::start("support-triage");
    let (host, other) = (server.host("Triage"), server.host("Estimator"));
    let reply = |person: &str| {
        json!({"agent": "Triage", "skill": "ExportFailures", "tool": "SendReply",
            "arguments": {"ticket": "T-42", "recipient": "customer-42", "text": "J-42 failed."}, "requester": person,
            "operation_key": "task-1", "claim_token": format!("t-{person}"), "covered_version": "7"})
    };
    assert_eq!(host.post("/v1/calls", &reply("Sam")).ok()["outcome"], "proposed");
    let task = host.get("/v1/tasks/task-1").ok()["task"].clone();
    assert_eq!(
        (&task["root_agent"], &task["person"], &task["ended_at"]),
        (&json!("Triage"), &json!("Sam"), &json!(null))
    );
    // The same key for another person is not this task: refused, nothing proposed.
    let refused = host.post("/v1/calls", &reply("Riley"));
    assert_eq!((refused.status, refused.code()), (403, "never"));
    assert!(refused.message().contains("not this task's person"), "{}", refused.message());
    assert_eq!(host.get("/v1/proposals").ok()["proposals"].as_array().map(Vec::len), Some(1));
    // Only the host of the task's root agent reads or ends it.
    assert_eq!(other.get("/v1/tasks/task-1").code(), "not_your_agent");
    assert_eq!(other.post("/v1/tasks/task-1/end", &json!({})).code(), "not_your_agent");
    let ended = host.post("/v1/tasks/task-1/end", &json!({})).ok()["task"].clone();
    assert!(ended["ended_at"].is_u64(), "{ended}");
    assert_eq!(host.get("/v1/tasks/no-such-key").code(), "not_found");
    Ok(())
}

#[test]
fn a_person_lists_their_queue_and_asked_for_a_status_every_proposal_with_it() -> R {
    let server = Server::start("support-triage");
    let (host, riley) = (server.host("Triage"), server.person("Riley"));
    let granted_id = granted(&host, &riley, "listed-1");
    let waiting = host
        .post(
            "/v1/calls",
            &json!({"agent": "Triage", "skill": "ExportFailures", "tool": "SendReply",
            "arguments": {"ticket": "T-43", "recipient": "customer-43", "text": "J-43 failed."}, "requester": "Sam",
            "operation_key": "listed-2", "claim_token": "listed-2-call", "covered_version": "7"}),
        )
        .ok();
    let waiting_id = waiting["proposal"]["id"].as_str().ok_or("a proposal")?.to_string();
    let ids = |path: &str| -> Vec<String> {
        riley.get(path).ok()["proposals"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p["id"].as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    // The queue: what waits for Riley to decide, with or without `status=waiting`.
    assert_eq!(ids("/v1/proposals"), vec![waiting_id.clone()]);
    assert_eq!(ids("/v1/proposals?status=waiting"), vec![waiting_id]);
    // Another status: every proposal with it (a person may read any proposal by its id too).
    assert_eq!(ids("/v1/proposals?status=granted"), vec![granted_id.clone()]);
    assert_eq!(ids("/v1/proposals?status=rejected"), Vec::<String>::new());
    assert_eq!(riley.get(&format!("/v1/proposals/{granted_id}")).ok()["status"], "granted");
    Ok(())
}
