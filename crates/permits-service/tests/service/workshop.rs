//! The bicycle workshop (`shared/cases/workshop.md`), outcomes 1–9, played over HTTP with the values of the
//! embedded test (`crates/permits-runtime/tests/runtime/workshop.rs`). The test is the workshop's host: it
//! keeps repair T-7, states its covered version and how its arguments read, checks its own permissions when
//! it claims an execution, and runs the tools itself.

use serde_json::{Value, json};

use super::{Client, R, Server};

/// The workshop's app: repair T-7, and who may do what in it.
struct Workshop {
    note: String,
    price: i64,
    revision: u64,
}

impl Workshop {
    fn new() -> Workshop {
        Workshop { note: String::new(), price: 0, revision: 1 }
    }

    fn version(&self) -> String {
        format!("r{}", self.revision)
    }

    /// Mechanics and managers may read and update repairs; only a manager or the Helper account (the
    /// estimator's) may set a price. `Err((principal, why))` when it refuses.
    fn admits(&self, agent: &str, person: &str, tool: &str) -> Result<(), (&'static str, String)> {
        let agent_role = match agent {
            "Estimator" => "Helper",
            other => return Err(("agent", format!("`{other}` has no account in the workshop"))),
        };
        let person_role = match person {
            "Noor" => "Manager",
            "Mia" => "Mechanic",
            other => return Err(("person", format!("`{other}` has no account in the workshop"))),
        };
        for (principal, role) in [("agent", agent_role), ("person", person_role)] {
            if tool == "SetPrice" && !matches!(role, "Manager" | "Helper") {
                return Err((principal, "only a manager may set a price".into()));
            }
        }
        Ok(())
    }

    fn run(&mut self, execution: &Value) -> Value {
        let args = &execution["arguments"];
        match execution["tool"].as_str().unwrap_or_default() {
            "NoteRepair" => {
                self.note = args["note"].as_str().unwrap_or_default().to_string();
                json!("noted")
            }
            "SetPrice" => {
                self.price = args["price"].as_i64().unwrap_or_default();
                json!({"price": self.price, "set_as": execution["runs_as"]})
            }
            _ => json!(["brake pads", "brake cable"]),
        }
    }
}

/// Runs an execution as a host does: claim (stating the covered version), check its own permissions,
/// confirm or refuse, run, report the receipt. Returns the last answer (the refusal's, or the receipt's).
fn execute(host: &Client, app: &mut Workshop, id: &str, token: &str) -> super::Answer {
    let claim = if id.starts_with("A-") {
        host.post(&format!("/v1/executions/{id}/claim"), &json!({"token": token}))
    } else {
        host.post(&format!("/v1/executions/{id}/claim"), &json!({"token": token, "covered_version": app.version()}))
    };
    if claim.status != 200 {
        return claim;
    }
    finish(host, app, id, token, &claim.body)
}

fn finish(host: &Client, app: &mut Workshop, id: &str, token: &str, claimed: &Value) -> super::Answer {
    let agent = claimed["accounts"][0].as_str().unwrap_or_default();
    let person = claimed["runs_as"].as_str().unwrap_or_default();
    if let Err((principal, reason)) = app.admits(agent, person, claimed["tool"].as_str().unwrap_or_default()) {
        let body = json!({"token": token, "principal": principal, "reason": reason});
        return host.post(&format!("/v1/executions/{id}/refuse"), &body);
    }
    let confirmed = host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": token}));
    if confirmed.status != 200 {
        return confirmed;
    }
    let receipt = app.run(&confirmed.body);
    host.post(&format!("/v1/executions/{id}/receipt"), &json!({"token": token, "outcome": "done", "receipt": receipt}))
}

const WHY: &str = "Pads, a cable and an hour of work.";

/// The scripted agent: one estimate for `person` in `skill` under `key`: the note alone (EstimateRepair
/// only), then SetPrice. Returns the answer to the SetPrice call.
fn estimate(host: &Client, app: &mut Workshop, person: &str, skill: &str, key: &str, price: i64, why: &str) -> Value {
    let mut evidence = Vec::new();
    if skill == "EstimateRepair" {
        let note = json!({"repair": "T-7", "note": "Pads and a cable."});
        let call = json!({"agent": "Estimator", "skill": skill, "tool": "NoteRepair", "arguments": note,
            "requester": person, "operation_key": key, "claim_token": format!("{key}-note"), "why": "note what is needed"});
        let answer = host.post("/v1/calls", &call).ok();
        assert_eq!(answer["outcome"], "alone", "{answer}");
        let id = answer["execution"]["id"].as_str().unwrap_or_default().to_string();
        let claimed = answer["execution"].clone();
        let done = finish(host, app, &id, &format!("{key}-note"), &claimed).ok();
        assert_eq!(done["status"], "done");
        evidence.push(json!({"tool": "NoteRepair", "arguments": note, "answer": done["receipt"]}));
    }
    let call = json!({"agent": "Estimator", "skill": skill, "tool": "SetPrice",
        "arguments": {"repair": "T-7", "price": price}, "requester": person, "operation_key": key,
        "claim_token": format!("{key}-price"), "why": why, "evidence": evidence,
        "covered_version": app.version(), "shown": {"repair": "Ticket T-7"}});
    let answer = host.post("/v1/calls", &call).ok();
    if answer["outcome"] == "alone" {
        let id = answer["execution"]["id"].as_str().unwrap_or_default().to_string();
        let claimed = answer["execution"].clone();
        let done = finish(host, app, &id, &format!("{key}-price"), &claimed).ok();
        assert_eq!(done["status"], "done");
    }
    answer
}

struct World {
    server: Server,
    host: Client,
    mia: Client,
    noor: Client,
    app: Workshop,
}

fn world() -> World {
    let server = Server::start("workshop");
    let host = server.host("Estimator");
    let (mia, noor) = (server.person("Mia"), server.person("Noor"));
    World { server, host, mia, noor, app: Workshop::new() }
}

fn proposed(answer: &Value) -> Value {
    assert_eq!(answer["outcome"], "proposed", "{answer}");
    answer["proposal"].clone()
}

fn approve(person: &Client, p: &Value, mode: &str) -> super::Answer {
    let id = p["id"].as_str().unwrap_or_default();
    person.post(&format!("/v1/proposals/{id}/approve"), &json!({"fingerprint": p["fingerprint"], "mode": mode}))
}

#[test]
fn outcome_1_the_table() -> R {
    let w = world();
    let offer = w.host.get("/v1/agents/Estimator/skills/EstimateRepair/tools").ok();
    let levels: Vec<(String, String)> = offer["levels"]
        .as_array()
        .ok_or("levels")?
        .iter()
        .map(|l| (l["tool"].as_str().unwrap_or_default().into(), l["level"].as_str().unwrap_or_default().into()))
        .collect();
    let expected = [("PartsFor", "alone"), ("NoteRepair", "alone"), ("SetPrice", "propose"), ("ScrapRepair", "never")];
    assert_eq!(levels, expected.map(|(t, l)| (t.to_string(), l.to_string())));
    let offered: Vec<&str> =
        offer["tools"].as_array().ok_or("tools")?.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(offered, ["PartsFor", "NoteRepair", "SetPrice"]);
    Ok(())
}

#[test]
fn outcome_2_mia_asks_for_an_estimate() -> R {
    let mut w = world();
    let p = proposed(&estimate(&w.host, &mut w.app, "Mia", "EstimateRepair", "mia-1", 45, WHY));
    assert_eq!(w.app.note, "Pads and a cable.");
    assert_eq!(p["status"], "waiting");
    assert_eq!(w.app.price, 0);
    assert_eq!(p["label"], "Set the price");
    assert_eq!(p["shown"], json!([{"name": "repair", "shown": "Ticket T-7"}, {"name": "price", "shown": "45"}]));
    assert_eq!(p["why"], WHY);
    assert_eq!(p["evidence"].as_array().map(Vec::len), Some(1));
    assert_eq!(p["evidence"][0]["tool"], "NoteRepair");
    assert_eq!(p["evidence"][0]["answer"], json!("noted"));
    assert_eq!(p["covered_version"], "r1");
    assert_eq!(p["requester"], "Mia");
    assert_eq!(p["decider"]["persons"], json!(["Mia"]));
    assert_eq!(p["fingerprint"].as_str().map(str::len), Some(64));
    Ok(())
}

#[test]
fn outcome_3_mia_approves_and_it_fails_as_hers() -> R {
    let mut w = world();
    let p = proposed(&estimate(&w.host, &mut w.app, "Mia", "EstimateRepair", "mia-1", 45, WHY));
    assert_eq!(approve(&w.mia, &p, "once").ok()["status"], "granted");
    let failed = execute(&w.host, &mut w.app, "P-1", "claim-1").ok();
    let expected = "`Estimator` runs `SetPrice` on behalf of `Mia`, who may not: only a manager may set a price";
    assert_eq!((failed["status"].as_str(), failed["reason"].as_str()), (Some("failed"), Some(expected)));
    let p = w.host.get("/v1/proposals/P-1").ok();
    assert_eq!(p["status"], "failed");
    assert_eq!(p["answer"], format!("failed: {expected}"));
    assert_eq!(w.app.price, 0);
    // Every step is in the audit: the refusal names Mia, the fingerprint, the triple and the reason.
    let audit = w.noor.get("/v1/audit?limit=1000").ok();
    let refused = audit["events"]
        .as_array()
        .ok_or("events")?
        .iter()
        .map(|e| &e["event"])
        .find(|e| e["outcome"] == "refused" && e["proposal"] == "P-1")
        .ok_or("no refusal")?
        .clone();
    assert_eq!(refused["who"], "Mia");
    assert_eq!(refused["fingerprint"], p["fingerprint"]);
    assert_eq!(
        (&refused["agent"], &refused["skill"], &refused["tool"]),
        (&json!("Estimator"), &json!("EstimateRepair"), &json!("SetPrice"))
    );
    assert!(refused["reason"].as_str().unwrap_or_default().contains("only a manager may set a price"));
    Ok(())
}

#[test]
fn outcome_4_noor_approves_and_it_runs_as_her() -> R {
    let mut w = world();
    let first = proposed(&estimate(&w.host, &mut w.app, "Mia", "EstimateRepair", "mia-1", 45, WHY));
    approve(&w.mia, &first, "once").ok();
    execute(&w.host, &mut w.app, "P-1", "claim-1").ok();
    let p = proposed(&estimate(&w.host, &mut w.app, "Mia", "EstimateRepair", "mia-2", 45, WHY));
    assert_ne!(p["id"], first["id"]);
    approve(&w.noor, &p, "once").ok();
    let id = p["id"].as_str().ok_or("id")?;
    let done = execute(&w.host, &mut w.app, id, "claim-2").ok();
    assert_eq!(done["status"], "done");
    assert_eq!(w.app.price, 45);
    let p = w.host.get(&format!("/v1/proposals/{id}")).ok();
    assert_eq!(p["grant"]["approver"], "Noor");
    assert_eq!(p["tool"], "SetPrice");
    assert_eq!(p["ran_as"], "Noor");
    assert_eq!(p["receipt"], json!({"price": 45, "set_as": "Noor"}));
    Ok(())
}

#[test]
fn outcome_5_a_no_gives_the_reason() -> R {
    let mut w = world();
    proposed(&estimate(&w.host, &mut w.app, "Mia", "EstimateRepair", "mia-1", 45, WHY));
    let blank = w.noor.post("/v1/proposals/P-1/reject", &json!({"reason": ""}));
    assert_eq!((blank.status, blank.code()), (422, "reason_required"));
    assert_eq!(blank.message(), "a rejection needs a reason: the agent is told it");
    // No `reason` at all is the same refusal as a blank one (the README's 422), not a body that does not fit.
    let missing = w.noor.post("/v1/proposals/P-1/reject", &json!({}));
    assert_eq!(
        (missing.status, missing.code(), missing.message()),
        (422, "reason_required", "a rejection needs a reason: the agent is told it"),
        "{}",
        missing.body
    );
    assert_eq!(w.host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    let p = w.noor.post("/v1/proposals/P-1/reject", &json!({"reason": "Quote the cable separately."})).ok();
    assert_eq!(p["status"], "rejected");
    assert_eq!(p["reason"], "Quote the cable separately.");
    assert_eq!(p["answer"], "rejected: Quote the cable separately.");
    assert_eq!(w.app.price, 0);
    Ok(())
}

#[test]
fn outcome_6_a_yes_does_not_cover_what_changed() -> R {
    let mut w = world();
    let p = proposed(&estimate(&w.host, &mut w.app, "Mia", "EstimateRepair", "mia-1", 45, WHY));
    // Someone rewrites the repair's fault: its revision moves.
    w.app.revision = 2;
    // The person approves what they were shown; the host states the new version at the claim: stale.
    approve(&w.noor, &p, "once").ok();
    let stale = execute(&w.host, &mut w.app, "P-1", "claim-1");
    assert_eq!((stale.status, stale.code()), (409, "stale"));
    assert!(stale.message().contains("the covered version is `r2` instead of `r1`"), "{}", stale.message());
    let p = w.host.get("/v1/proposals/P-1").ok();
    assert_eq!(p["status"], "stale");
    assert!(p["answer"].as_str().unwrap_or_default().contains("look again"));
    assert_eq!(w.app.price, 0);
    Ok(())
}

/// Task-scoped approval over HTTP (spec §5a): `for_this_task` makes a task rule — the same call in the task
/// runs alone, in another task it is proposed again — and `end_task` ends it.
#[test]
fn approved_for_this_task_the_same_call_runs_alone_in_the_task_only() -> R {
    let mut w = world();
    let p = proposed(&estimate(&w.host, &mut w.app, "Noor", "EstimateRepair", "task-1", 45, WHY));
    approve(&w.noor, &p, "for_this_task").ok();
    assert_eq!(execute(&w.host, &mut w.app, "P-1", "claim-1").ok()["status"], "done");
    let rule = w.host.get("/v1/rules").ok()["rules"][0].clone();
    assert_eq!(rule["task"], "task-1");
    let again = estimate(&w.host, &mut w.app, "Noor", "EstimateRepair", "task-1", 45, WHY);
    assert_eq!(again["outcome"], "alone", "{again}");
    assert_eq!(again["decision"]["task_rule"], true);
    let elsewhere = estimate(&w.host, &mut w.app, "Noor", "EstimateRepair", "task-2", 45, WHY);
    assert_eq!(elsewhere["outcome"], "proposed", "{elsewhere}");
    Ok(())
}

#[test]
fn outcome_7_from_now_on_alone() -> R {
    let mut w = world();
    let p = proposed(&estimate(&w.host, &mut w.app, "Noor", "EstimateRepair", "noor-1", 45, WHY));
    approve(&w.noor, &p, "always_like_this").ok();
    assert_eq!(execute(&w.host, &mut w.app, "P-1", "claim-1").ok()["status"], "done");
    let rules = w.host.get("/v1/rules").ok()["rules"].clone();
    assert_eq!(rules.as_array().map(Vec::len), Some(1));
    let rule = &rules[0];
    assert_eq!((&rule["agent"], &rule["tool"]), (&json!("Estimator"), &json!("SetPrice")));
    assert_eq!(rule["work_for"], json!({"person": "Noor"}));

    let ran = estimate(&w.host, &mut w.app, "Noor", "EstimateRepair", "noor-2", 50, WHY);
    assert_eq!(ran["outcome"], "alone", "{ran}");
    assert_eq!(ran["decision"]["standing_rule"], rule["id"]);
    assert_eq!(w.app.price, 50);
    assert_eq!(w.host.get("/v1/proposals").ok()["proposals"].as_array().map(Vec::len), Some(1));
    assert_eq!(w.host.get("/v1/rules").ok()["rules"][0]["uses"], 1);

    let id = rule["id"].as_str().ok_or("rule id")?;
    let revoked = w.noor.post(&format!("/v1/rules/{id}/revoke"), &json!({"why": "Prices are mine again."})).ok();
    assert_eq!(revoked["rule"]["revoked"]["why"], "Prices are mine again.");
    let p = proposed(&estimate(&w.host, &mut w.app, "Noor", "EstimateRepair", "noor-3", 55, WHY));
    assert_eq!(p["status"], "waiting");
    assert_eq!(w.app.price, 50);
    assert_eq!(w.host.get("/v1/proposals").ok()["proposals"].as_array().map(Vec::len), Some(2));
    Ok(())
}

#[test]
fn outcome_8_what_it_never_does_takes_no_rule() -> R {
    let w = world();
    let refused = w.noor.post(
        "/v1/rules",
        &json!({"agent": "Estimator", "tool": "ScrapRepair", "work_for": "everybody", "scope": "any_arguments"}),
    );
    assert_eq!((refused.status, refused.code()), (403, "rule"));
    assert!(
        refused.message().starts_with("`Estimator` never calls `ScrapRepair` in `EstimateRepair`"),
        "{}",
        refused.message()
    );
    assert!(refused.message().contains("never [ScrapRepair]"));
    assert_eq!(w.host.get("/v1/rules").ok()["rules"], json!([]));
    drop(w.server);
    Ok(())
}

#[test]
fn outcome_9_a_routed_decision_is_not_the_requesters() -> R {
    let mut w = world();
    let p = proposed(&estimate(
        &w.host,
        &mut w.app,
        "Mia",
        "PriceFleetRepair",
        "fleet-1",
        38,
        "A fleet rate: pads, a cable and an hour.",
    ));
    assert_eq!(p["decider"]["persons"], json!(["Noor"]));
    assert_eq!(p["answer"], "proposed `SetPrice`: waiting on a decision from Noor");
    let refused = approve(&w.mia, &p, "once");
    assert_eq!((refused.status, refused.code()), (403, "not_decider"));
    assert_eq!(
        refused.message(),
        "`Mia` may not decide proposal `P-1`: the decision is `Noor`'s because skill `PriceFleetRepair` routes `SetPrice` to person `Noor`; the work is for `Mia`, but the decision is not theirs"
    );
    assert_eq!(w.app.price, 0);
    approve(&w.noor, &p, "once").ok();
    assert_eq!(execute(&w.host, &mut w.app, "P-1", "claim-1").ok()["status"], "done");
    assert_eq!(w.app.price, 38);
    Ok(())
}
