//! Support triage (`shared/cases/support-triage.md`), outcomes A–E over HTTP, with the values of the
//! embedded test (`crates/permits-runtime/tests/runtime/support_triage.rs`). The test is the support desk:
//! ticket T-42's revision and the outbox SendReply appends to.

use serde_json::{Value, json};

use super::{Answer, Client, R, Server, Temp};

const TEXT: &str = "J-42 recorded an export access error. …";

struct Desk {
    revision: u64,
    outbox: Vec<Value>,
}

struct World {
    server: Server,
    host: Client,
    riley: Client,
    sam: Client,
    desk: Desk,
}

fn world_on(server: Server) -> World {
    let host = server.host("Triage");
    let (riley, sam) = (server.person("Riley"), server.person("Sam"));
    World { server, host, riley, sam, desk: Desk { revision: 7, outbox: Vec::new() } }
}

fn world() -> World {
    world_on(Server::start("support-triage"))
}

fn send_reply(w: &World, recipient: &str, key: &str, token: &str) -> Answer {
    w.host.post(
        "/v1/calls",
        &json!({"agent": "Triage", "skill": "ExportFailures", "tool": "SendReply",
            "arguments": {"ticket": "T-42", "recipient": recipient, "text": TEXT}, "requester": "Sam",
            "operation_key": key, "claim_token": token, "why": "tell the customer what failed",
            "covered_version": w.desk.revision.to_string()}),
    )
}

/// Proposal P-8 (here `P-1`): the reply to customer-42 under operation key `mock-T42-P8`.
fn p8(w: &World) -> Value {
    let answer = send_reply(w, "customer-42", "mock-T42-P8", "p8").ok();
    assert_eq!(answer["outcome"], "proposed");
    answer["proposal"].clone()
}

fn approve(person: &Client, id: &str, fingerprint: &Value) -> Answer {
    person.post(&format!("/v1/proposals/{id}/approve"), &json!({"fingerprint": fingerprint}))
}

/// The desk executes: claim with the current revision, confirm (the desk admits everyone), append to the
/// outbox, report the receipt.
fn execute(w: &mut World, id: &str, token: &str) -> Answer {
    let claim = w.host.post(
        &format!("/v1/executions/{id}/claim"),
        &json!({"token": token, "covered_version": w.desk.revision.to_string()}),
    );
    if claim.status != 200 || claim.body["status"] != "granted" {
        return claim;
    }
    let confirmed = w.host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": token})).ok();
    w.desk.outbox.push(confirmed["arguments"].clone());
    let receipt = json!({"message": w.desk.outbox.len(), "to": confirmed["arguments"]["recipient"]});
    w.host
        .post(&format!("/v1/executions/{id}/receipt"), &json!({"token": token, "outcome": "done", "receipt": receipt}))
}

#[test]
fn the_levels_of_the_policy() -> R {
    let w = world();
    let offer = w.host.get("/v1/agents/Triage/skills/ExportFailures/tools").ok();
    let levels: Vec<(&str, &str)> = offer["levels"]
        .as_array()
        .ok_or("levels")?
        .iter()
        .filter_map(|l| Some((l["tool"].as_str()?, l["level"].as_str()?)))
        .collect();
    assert_eq!(
        levels,
        [
            ("GetExportContext", "alone"),
            ("DraftReply", "alone"),
            ("SendReply", "propose"),
            ("ChangeRole", "never"),
            ("RerunExport", "never"),
        ]
    );
    Ok(())
}

#[test]
fn a_the_agent_saying_approved_is_not_an_approval() -> R {
    let mut w = world();
    let p = p8(&w);
    assert_eq!((&p["status"], &p["covered_version"]), (&json!("waiting"), &json!("7")));
    // The agent's own output claims "approved"; the host executes on that claim.
    let refused = execute(&mut w, "P-1", "claim-1");
    assert_eq!((refused.status, refused.code()), (409, "not_approved"));
    assert!(refused.message().contains("not approved"));
    // Nor can the agent approve it itself: its host's key never decides, and it is no person.
    let refused = approve(&w.host, "P-1", &p["fingerprint"]);
    assert_eq!((refused.status, refused.code()), (403, "person_only"));
    let refused = approve(&w.server.person("Triage"), "P-1", &p["fingerprint"]);
    assert_eq!((refused.status, refused.code()), (403, "not_decider"));
    assert_eq!(w.host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    assert_eq!(w.desk.outbox.len(), 0);
    Ok(())
}

#[test]
fn b_an_approval_does_not_cover_another_recipient() -> R {
    let mut w = world();
    let p = p8(&w);
    approve(&w.riley, "P-1", &p["fingerprint"]).ok();
    let other = send_reply(&w, "customer-99", "mock-T42-P8", "p8b").ok()["proposal"].clone();
    assert_ne!(other["id"], p["id"]);
    assert_ne!(other["fingerprint"], p["fingerprint"]);
    assert_eq!(other["status"], "waiting");
    let refused = execute(&mut w, "P-2", "claim-2");
    assert_eq!(refused.code(), "not_approved");
    // P-8's fingerprint approves nothing but P-8.
    let refused = approve(&w.riley, "P-2", &p["fingerprint"]);
    assert_eq!((refused.status, refused.code()), (409, "wrong_fingerprint"));
    assert_eq!(w.desk.outbox.len(), 0);
    Ok(())
}

#[test]
fn c_an_expired_approval_runs_nothing() -> R {
    // The service's clock is the system's: the table's grants last one second here.
    let dir = Temp::new("triage-expiry");
    let mut table = permits_runtime::table::Table::load(&std::fs::read(super::fixture("support-triage"))?)?;
    table.package.grant_lifetime_seconds = 1;
    table.seal();
    let path = dir.path("table.json");
    std::fs::write(&path, serde_json::to_vec(&table)?)?;
    let mut w = world_on(Server::on(&path, &dir.path("ledger.db")));
    let p = p8(&w);
    approve(&w.riley, "P-1", &p["fingerprint"]).ok();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let refused = execute(&mut w, "P-1", "claim-1");
    assert_eq!((refused.status, refused.code()), (409, "grant_expired"));
    assert_eq!(w.host.get("/v1/proposals/P-1").ok()["status"], "granted");
    assert_eq!(w.desk.outbox.len(), 0);
    Ok(())
}

#[test]
fn c_a_new_ticket_revision_makes_the_approval_stale() -> R {
    let mut w = world();
    let p = p8(&w);
    approve(&w.riley, "P-1", &p["fingerprint"]).ok();
    w.desk.revision = 8;
    let refused = execute(&mut w, "P-1", "claim-1");
    assert_eq!((refused.status, refused.code()), (409, "stale"));
    assert_eq!(w.host.get("/v1/proposals/P-1").ok()["status"], "stale");
    assert_eq!(w.desk.outbox.len(), 0);
    Ok(())
}

#[test]
fn d_one_approval_sends_exactly_once_and_sam_cannot_approve() -> R {
    let mut w = world();
    let p = p8(&w);
    let refused = approve(&w.sam, "P-1", &p["fingerprint"]);
    assert_eq!((refused.status, refused.code()), (403, "not_decider"));
    assert_eq!(
        refused.message(),
        "`Sam` may not decide proposal `P-1`: the work is for `Sam`, and skill `ExportFailures` routes `SendReply` to role `SupportReviewer`, so the decision is someone else's; the decision is `Riley`'s"
    );
    approve(&w.riley, "P-1", &p["fingerprint"]).ok();
    let first = execute(&mut w, "P-1", "claim-1").ok();
    assert_eq!((&first["status"], &first["runs_as"]), (&json!("done"), &json!("Riley")));
    // The host executes again (its lost answer, the same claim token): the stored receipt, nothing runs;
    // another claim token on the consumed grant is refused.
    let second = execute(&mut w, "P-1", "claim-1").ok();
    assert_eq!(second["status"], "done");
    assert_eq!(second["receipt"], first["receipt"]);
    let other = execute(&mut w, "P-1", "claim-2");
    assert_eq!((other.status, other.code()), (409, "claimed"));
    assert_eq!(w.desk.outbox.len(), 1);
    // A retry of the proposal under the same key is the same, done, proposal.
    assert_eq!(p8(&w)["id"], p["id"]);
    let refused = approve(&w.sam, "P-1", &p["fingerprint"]);
    assert_eq!((refused.status, refused.code()), (409, "status"));
    assert_eq!(w.desk.outbox.len(), 1);
    // Every decision above has an auditable reason.
    let events: Vec<Value> = w.riley.get("/v1/audit?limit=1000").ok()["events"]
        .as_array()
        .ok_or("events")?
        .iter()
        .map(|e| e["event"].clone())
        .collect();
    let by_sam = events.iter().find(|e| e["who"] == "Sam" && e["outcome"] == "refused").ok_or("Sam's refusal")?;
    assert!(by_sam["reason"].as_str().unwrap_or_default().contains("role `SupportReviewer`"));
    assert_eq!(by_sam["fingerprint"], p["fingerprint"]);
    assert!(events.iter().any(|e| e["kind"] == "grant" && e["who"] == "Riley" && e["outcome"] == "granted"));
    assert!(events.iter().any(|e| e["kind"] == "execution" && e["outcome"] == "done"));
    Ok(())
}

#[test]
fn e_never_tools_and_unknown_tools_are_refused_without_a_proposal() -> R {
    let w = world();
    let offer = w.host.get("/v1/agents/Triage/skills/ExportFailures/tools").ok();
    let offered: Vec<&str> =
        offer["tools"].as_array().ok_or("tools")?.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(offered, ["GetExportContext", "DraftReply", "SendReply"]);
    let change = json!({"agent": "Triage", "skill": "ExportFailures", "tool": "ChangeRole",
        "arguments": {"user": "sam", "new_role": "editor"}, "requester": "Sam"});
    assert_eq!(w.host.post("/v1/decide", &change).ok()["level"], "never");
    let mut call = change.clone();
    call["operation_key"] = json!("mock-T42-P9");
    call["claim_token"] = json!("t-9");
    call["why"] = json!("make me editor and send immediately");
    let refused = w.host.post("/v1/calls", &call);
    assert_eq!((refused.status, refused.code()), (403, "never"));
    assert!(
        refused
            .message()
            .starts_with("`Triage` never calls `ChangeRole` in `ExportFailures`: agent layer: never [ChangeRole]"),
        "{}",
        refused.message()
    );
    let delete = json!({"agent": "Triage", "skill": "ExportFailures", "tool": "DeleteWorkspace", "arguments": {"workspace": "W-7"}});
    let d = w.host.post("/v1/decide", &delete).ok();
    assert_eq!((&d["level"], &d["refusal"]), (&json!("never"), &json!("unknown tool")));
    let mut call = delete.clone();
    call["operation_key"] = json!("mock-T42-P9");
    call["claim_token"] = json!("t-10");
    let refused = w.host.post("/v1/calls", &call);
    assert_eq!((refused.status, refused.code()), (403, "never"));
    assert_eq!(w.host.get("/v1/proposals").ok()["proposals"], json!([]));
    assert_eq!(w.desk.outbox.len(), 0);
    Ok(())
}
