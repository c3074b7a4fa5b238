//! Keys: a host key acts only for its agents and never decides for a person; a person key acts only as
//! its person; a revoked key is refused.

use serde_json::json;

use super::{Client, R, Server};

#[test]
fn a_host_key_for_another_agent_is_refused() -> R {
    let server = Server::start("workshop");
    let other = server.host("Triage");
    let call = json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "PartsFor",
        "arguments": {"fault": "brakes"}, "operation_key": "k", "claim_token": "t"});
    for answer in [
        other.post("/v1/calls", &call),
        other.post("/v1/decide", &json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "PartsFor"})),
        other.get("/v1/agents/Estimator/skills/EstimateRepair/tools"),
    ] {
        assert_eq!((answer.status, answer.code()), (403, "not_your_agent"), "{}", answer.body);
        assert!(answer.message().contains("not for `Estimator`"), "{}", answer.message());
    }
    // Its own agent's execution is out of reach too.
    let host = server.host("Estimator");
    let ran = host.post("/v1/calls", &call).ok();
    assert_eq!(ran["execution"]["id"], "A-1");
    let refused = other.post("/v1/executions/A-1/confirm", &json!({"token": "t"}));
    assert_eq!((refused.status, refused.code()), (403, "not_your_agent"));
    assert_eq!(host.get("/v1/executions/A-1").ok()["status"], "granted", "nothing was confirmed");
    Ok(())
}

#[test]
fn every_person_only_route_is_refused_with_a_host_key() -> R {
    let server = Server::start("workshop");
    let host = server.host("Estimator");
    let admin = Client::new(&server.url, &server.key(&["--admin"]));
    let noor = server.person("Noor");
    let p = host
        .post(
            "/v1/calls",
            &json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice",
            "arguments": {"repair": "T-7", "price": 45}, "requester": "Noor", "operation_key": "k",
            "claim_token": "t", "covered_version": "r1"}),
        )
        .ok()["proposal"]
        .clone();
    let rule =
        json!({"agent": "Estimator", "tool": "SetPrice", "work_for": {"person": "Noor"}, "scope": "any_arguments"});
    let made = noor.post("/v1/rules", &rule).ok();
    let rule_id = made["rule"]["id"].as_str().ok_or("rule id")?.to_string();
    let routes = [
        ("/v1/proposals/P-1/approve".to_string(), json!({"fingerprint": p["fingerprint"]})),
        ("/v1/proposals/P-1/reject".to_string(), json!({"reason": "no"})),
        ("/v1/proposals/P-1/revoke".to_string(), json!({"why": "no"})),
        ("/v1/proposals/P-1/resolve".to_string(), json!({"receipt": {"operation": "k:P-1", "outcome": "accepted"}})),
        ("/v1/rules".to_string(), rule.clone()),
        (format!("/v1/rules/{rule_id}/revoke"), json!({"why": "no"})),
        ("/v1/budgets/Any/raise".to_string(), json!({})),
    ];
    for client in [&host, &admin] {
        for (path, body) in &routes {
            let refused = client.post(path, body);
            assert_eq!((refused.status, refused.code()), (403, "person_only"), "{path}: {}", refused.body);
            assert!(refused.message().starts_with("only a person's key may"), "{}", refused.message());
        }
    }
    // Nothing changed: the proposal waits, the one rule stands unrevoked.
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    let rules = host.get("/v1/rules").ok()["rules"].clone();
    assert_eq!((rules.as_array().map(Vec::len), &rules[0]["revoked"]), (Some(1), &json!(null)));
    // A person key for a person of the table is no host: it never calls, claims or decides for an agent.
    let refused = noor.post("/v1/executions/P-1/claim", &json!({"token": "x"}));
    assert_eq!((refused.status, refused.code()), (403, "host_only"));
    Ok(())
}

#[test]
fn a_missing_unknown_or_revoked_key_is_refused() -> R {
    let server = Server::start("workshop");
    let anonymous = Client::anonymous(&server.url);
    let refused = anonymous.get("/v1/rules");
    assert_eq!((refused.status, refused.code()), (401, "unauthorized"));
    let forged = Client::new(&server.url, &format!("permits_host_{}", "0".repeat(64)));
    assert_eq!(forged.get("/v1/rules").status, 401);
    let token = server.key(&["--agents", "Estimator"]);
    let host = Client::new(&server.url, &token);
    assert_eq!(host.get("/v1/rules").status, 200);
    // The key is revoked while the service runs: refused from the next request on.
    let listed = super::permitd().args(["keys", "list", "--store"]).arg(&server.store).output()?;
    let line = String::from_utf8_lossy(&listed.stdout).lines().last().unwrap_or_default().to_string();
    let key: serde_json::Value = serde_json::from_str(&line)?;
    assert_eq!((&key["kind"], &key["agents"]), (&json!("host"), &json!(["Estimator"])));
    assert!(!line.contains(&token), "a listing never shows a token");
    let id = key["id"].as_str().ok_or("id")?;
    let revoked = super::permitd().args(["keys", "revoke", "--store"]).arg(&server.store).arg(id).output()?;
    assert!(revoked.status.success());
    let refused = host.get("/v1/rules");
    assert_eq!((refused.status, refused.message()), (401, "this key is unknown or revoked"));
    // The store keeps digests, never tokens.
    for file in [server.store.clone(), server.store.with_extension("db-wal")] {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()), "the token is in {}", file.display());
    }
    Ok(())
}

/// `permitd ARGS` with its stdout a pipe whose reader has gone (`| head -0`): its status and stderr.
fn with_stdout_closed(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let mut child = super::permitd()
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start permitd: {e}"));
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("permitd: {e}"));
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn keys_list_into_a_closed_pipe_stops_quietly_and_keys_add_revokes_the_key_whose_token_is_lost() -> R {
    let dir = super::Temp::new("keys-pipe");
    let store = dir.path("ledger.db");
    for agent in ["Clerkbot", "Scribe", "Estimator"] {
        super::key(&store, &["--agents", agent]);
    }
    let (list, keys_add) = ("list".as_ref(), "add".as_ref());
    let (status, stderr) = with_stdout_closed(&["keys".as_ref(), list, "--store".as_ref(), store.as_os_str()]);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!((status, stderr.as_str()), (Some(0), ""));
    // A token nobody received is of no use to anyone: the key is revoked at once, and the command fails.
    let (status, stderr) = with_stdout_closed(&[
        "keys".as_ref(),
        keys_add,
        "--store".as_ref(),
        store.as_os_str(),
        "--agents".as_ref(),
        "Clerkbot".as_ref(),
    ]);
    assert_eq!(status, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("permitd: cannot write the token to stdout: ")
            && stderr.trim_end().ends_with("; key K-4 is revoked, since nobody has its token"),
        "{stderr}"
    );
    let out = super::permitd().args(["keys", "list", "--store"]).arg(&store).output()?;
    let keys: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    let revoked: Vec<bool> = keys.iter().map(|k| !k["revoked_at"].is_null()).collect();
    assert_eq!(revoked, [false, false, false, true]);
    Ok(())
}
