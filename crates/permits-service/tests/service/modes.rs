//! Modes through the service (spec §3c, issue #20) on the research desk (`research-desk.json`): a call names
//! its mode in the request, the task binds it, the tools offered to the model are those of the mode, and a
//! rule made through the service is made for a mode. Every answer is validated against the OpenAPI document.

use serde_json::{Value, json};

use super::{R, Server};

fn names(offer: &Value) -> Vec<&str> {
    offer["tools"].as_array().map_or_else(Vec::new, |t| t.iter().filter_map(|t| t["name"].as_str()).collect())
}

/// Outcome 4 of `delegation-modes.md` over HTTP: in mode Plan only ReadFile is offered, EditFile is `never`,
/// a call in Plan binds its task to Plan, and a later call of the task in no mode is `never` ("not this
/// task's mode"), with nothing made.
#[test]
fn a_call_names_its_mode_and_its_task_keeps_it() -> R {
    let server = Server::start("research-desk");
    let host = server.host("Coder,Researcher");
    let plan = host.get("/v1/agents/Coder/skills/FixBug/tools?mode=Plan").ok();
    assert_eq!(names(&plan), ["ReadFile"]);
    assert_eq!(plan["mode"], "Plan");
    assert_eq!(
        plan["levels"],
        json!([{"tool": "ReadFile", "level": "alone"}, {"tool": "EditFile", "level": "never"},
               {"tool": "GitPush", "level": "never"}])
    );
    let everything = host.get("/v1/agents/Coder/skills/FixBug/tools").ok();
    assert_eq!(names(&everything), ["ReadFile", "EditFile", "GitPush"]);
    assert_eq!(everything.get("mode"), None);
    assert!(
        names(&host.get("/v1/agents/Coder/skills/FixBug/tools?mode=Plam").ok()).is_empty(),
        "an unknown mode offers nothing"
    );

    let edit = json!({"agent": "Coder", "skill": "FixBug", "tool": "EditFile",
                      "arguments": {"path": "src/lib.rs", "text": "fix"}, "requester": "Ben"});
    let mut in_plan = edit.clone();
    in_plan["mode"] = json!("Plan");
    let decided = host.post("/v1/decide", &in_plan).ok();
    assert_eq!((&decided["level"], &decided["mode"]), (&json!("never"), &json!("Plan")));
    assert_eq!(host.post("/v1/decide", &edit).ok()["level"], "alone", "in no mode Coder edits alone");

    let read = |mode: Option<&str>, token: &str| {
        let mut body = json!({"agent": "Coder", "skill": "FixBug", "tool": "ReadFile",
                              "arguments": {"path": "src/lib.rs"}, "requester": "Ben",
                              "operation_key": "T-plan", "claim_token": token});
        if let Some(mode) = mode {
            body["mode"] = json!(mode);
        }
        host.post("/v1/calls", &body)
    };
    let first = read(Some("Plan"), "tok-1").ok();
    assert_eq!((&first["outcome"], &first["decision"]["mode"]), (&json!("alone"), &json!("Plan")));
    assert_eq!(host.get("/v1/tasks/T-plan").ok()["task"]["mode"], "Plan");
    let refused = read(None, "tok-2");
    assert_eq!((refused.status, refused.code()), (403, "never"), "{}", refused.body);
    assert!(
        refused.message().contains("not this task's mode (`T-plan` runs in mode `Plan`, not no mode)"),
        "{}",
        refused.message()
    );
    let other = read(Some("Unattended"), "tok-3");
    assert_eq!(other.status, 403, "{}", other.body);
    Ok(())
}

/// A standing rule made through the service carries its mode (spec §3c step 5: a rule applies only in the
/// mode it was made in): Ben's rule for the Researcher's SendMail in Unattended makes it alone there, and
/// not in no mode.
#[test]
fn a_rule_made_through_the_service_is_for_its_mode() -> R {
    let server = Server::start("research-desk");
    let host = server.host("Researcher");
    let ben = server.person("Ben");
    let made = ben
        .post(
            "/v1/rules",
            &json!({"agent": "Researcher", "tool": "SendMail", "skill": "Look", "work_for": {"person": "Ben"},
                    "scope": "any_arguments", "mode": "Unattended"}),
        )
        .ok();
    assert_eq!(made["rule"]["mode"], "Unattended");
    let mail = |mode: Option<&str>| {
        let mut body = json!({"agent": "Researcher", "skill": "Look", "tool": "SendMail",
                              "arguments": {"to": "a@x.example"}, "requester": "Ben"});
        if let Some(mode) = mode {
            body["mode"] = json!(mode);
        }
        host.post("/v1/decide", &body).ok()
    };
    let unattended = mail(Some("Unattended"));
    assert_eq!((&unattended["level"], &unattended["standing_rule"]), (&json!("alone"), &made["rule"]["id"]));
    let plain = mail(None);
    assert_eq!((&plain["level"], &plain["standing_rule"]), (&json!("propose"), &Value::Null));
    let rules = host.get("/v1/rules").ok();
    assert_eq!(rules["rules"][0]["mode"], "Unattended");
    Ok(())
}

/// The budget of a per-task package over HTTP shows its `per_task` (spec §6), and the Researcher's buy in a
/// task spends from it; a second buy over the task's cap is refused at approval with the figures.
#[test]
fn a_per_task_budget_over_http() -> R {
    let server = Server::start("research-desk");
    let host = server.host("Researcher");
    let ben = server.person("Ben");
    let budget = host.get("/v1/budgets/Research").ok();
    assert_eq!((&budget["budget"]["per_task"], &budget["budget"]["spent"]), (&json!(2000), &json!(0)));
    let buy = |amount: u64, key: &str, token: &str| {
        host.post(
            "/v1/calls",
            &json!({"agent": "Researcher", "skill": "Look", "tool": "BuyCredits", "arguments": {"amount": amount},
                    "requester": "Ben", "operation_key": key, "claim_token": token, "why": "credits"}),
        )
        .ok()
    };
    let approve = |p: &Value| {
        ben.post(
            &format!("/v1/proposals/{}/approve", p["id"].as_str().unwrap_or_default()),
            &json!({"fingerprint": p["fingerprint"]}),
        )
    };
    let first = buy(1500, "T3", "tok-1");
    assert_eq!(first["outcome"], "proposed");
    assert_eq!(approve(&first["proposal"]).ok()["status"], "granted");
    let second = buy(800, "T3", "tok-2");
    let refused = approve(&second["proposal"]);
    assert_eq!((refused.status, refused.code()), (409, "budget"), "{}", refused.body);
    assert_eq!(
        refused.message(),
        "budget `Research`, task `T3`: per task: 1500 of 2000 cents held (0 spent, 1500 reserved); 800 cents more would exceed it (500 left)"
    );
    let elsewhere = buy(800, "T4", "tok-3");
    assert_eq!(approve(&elsewhere["proposal"]).ok()["status"], "granted");
    assert_eq!(host.get("/v1/budgets/Research").ok()["budget"]["reserved"], 2300);
    Ok(())
}
