//! Delegation through the service (spec §3b, issue #21) on the research desk (`research-desk.json`): a call
//! names its chain in `via` (links `{"agent", "skill"}`, nearest first, as proposals show them), the offer
//! takes `?via=Agent.Skill,…`, and a host key must hold every agent of the chain. The values are those of
//! the embedded tests (`crates/permits-cli/tests/it/delegation.rs`). Every answer is validated against the
//! OpenAPI document.

use serde_json::{Value, json};

use super::{Client, R, Server};

fn names(offer: &Value) -> Vec<&str> {
    offer["tools"].as_array().map_or_else(Vec::new, |t| t.iter().filter_map(|t| t["name"].as_str()).collect())
}

/// `{"agent": …, "skill": …}`: one link of a chain as the API takes and shows it.
fn link(agent: &str, skill: &str) -> Value {
    json!({"agent": agent, "skill": skill})
}

/// The Researcher's fetch of `url` for Ben, delegated along `via`.
fn fetch(url: &str, via: &[Value]) -> Value {
    json!({"agent": "Researcher", "skill": "Look", "tool": "WebFetch", "arguments": {"url": url},
           "requester": "Ben", "via": via})
}

/// `body` as a call under `key` with the claim token `token`.
fn call(body: &Value, key: &str, token: &str) -> Value {
    let mut body = body.clone();
    body["operation_key"] = json!(key);
    body["claim_token"] = json!(token);
    body["why"] = json!("look it up");
    body
}

fn approve(person: &Client, p: &Value, mode: &str) -> super::Answer {
    let id = p["id"].as_str().unwrap_or_default();
    person.post(&format!("/v1/proposals/{id}/approve"), &json!({"fingerprint": p["fingerprint"], "mode": mode}))
}

/// Outcome 1 over HTTP: the Researcher's WebFetch is alone directly and `propose` via Coder.FixBug (Coder's
/// `reaches_out: propose`), for Ben; the offer along the chain shows it so and hides SendMail (Coder's
/// `sends: never`). The delegated call is proposed with its chain, Ben approves it, the host claims it (both
/// agents' accounts to admit, run as Ben), confirms it and reports the receipt: done.
#[test]
fn a_delegated_call_is_proposed_approved_claimed_and_receipted() -> R {
    let server = Server::start("research-desk");
    let host = server.host("Coder,Researcher");
    let ben = server.person("Ben");
    let coder = [link("Coder", "FixBug")];

    let direct = host.get("/v1/agents/Researcher/skills/Look/tools").ok();
    assert_eq!(names(&direct), ["ReadFile", "WebFetch", "SendMail", "BuyCredits"]);
    let offer = host.get("/v1/agents/Researcher/skills/Look/tools?via=Coder.FixBug").ok();
    assert_eq!(names(&offer), ["ReadFile", "WebFetch", "BuyCredits"]);
    assert_eq!(offer["via"], json!(coder));
    assert_eq!(
        offer["levels"],
        json!([{"tool": "ReadFile", "level": "alone"}, {"tool": "WebFetch", "level": "propose"},
               {"tool": "SendMail", "level": "never"}, {"tool": "BuyCredits", "level": "propose"}])
    );
    assert_eq!(offer["tools"][1]["level"], "propose");

    assert_eq!(host.post("/v1/decide", &fetch("https://a.example/x", &[])).ok()["level"], "alone");
    let decided = host.post("/v1/decide", &fetch("https://a.example/x", &coder)).ok();
    assert_eq!((&decided["level"], &decided["via"]), (&json!("propose"), &json!(coder)));
    assert_eq!(decided["decider"], json!({"route": "requester", "persons": ["Ben"]}));
    let rules: Vec<&str> =
        decided["reasons"].as_array().map_or_else(Vec::new, |r| r.iter().filter_map(|r| r["rule"].as_str()).collect());
    assert!(rules.contains(&"reaches_out: propose"), "{rules:?}");

    let proposed = host.post("/v1/calls", &call(&fetch("https://a.example/x", &coder), "T1", "tok-1")).ok();
    assert_eq!(proposed["outcome"], "proposed");
    let p = &proposed["proposal"];
    assert_eq!((&p["status"], &p["via"], &p["level"]), (&json!("waiting"), &json!(coder), &json!("propose")));
    assert_eq!(p["decider"], json!({"route": "requester", "persons": ["Ben"]}));
    assert_eq!(host.get("/v1/tasks/T1").ok()["task"]["root_agent"], "Coder", "the chain's root is the task's");

    let granted = approve(&ben, p, "once").ok();
    assert_eq!((&granted["status"], &granted["via"]), (&json!("granted"), &json!(coder)));
    let id = p["id"].as_str().unwrap_or_default();
    let claimed = host.post(&format!("/v1/executions/{id}/claim"), &json!({"token": "run-1"})).ok();
    assert_eq!(
        (&claimed["status"], &claimed["accounts"], &claimed["runs_as"]),
        (&json!("granted"), &json!(["Researcher", "Coder"]), &json!("Ben"))
    );
    let confirmed = host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": "run-1"})).ok();
    assert_eq!(confirmed["status"], "sending");
    let receipt = json!({"status": 200, "bytes": 512});
    let done = host
        .post(
            &format!("/v1/executions/{id}/receipt"),
            &json!({"token": "run-1", "outcome": "done", "receipt": receipt}),
        )
        .ok();
    assert_eq!((&done["status"], &done["receipt"]), (&json!("done"), &receipt));
    let after = host.get(&format!("/v1/proposals/{id}")).ok();
    assert_eq!((&after["status"], &after["via"], &after["ran_as"]), (&json!("done"), &json!(coder), &json!("Ben")));

    // A delegated alone call (ReadFile via Coder) runs as an execution whose accounts are the chain's too.
    let read = json!({"agent": "Researcher", "skill": "Look", "tool": "ReadFile", "arguments": {"path": "a"},
                      "requester": "Ben", "via": coder});
    let alone = host.post("/v1/calls", &call(&read, "T1", "tok-2")).ok();
    assert_eq!(alone["outcome"], "alone");
    assert_eq!(alone["execution"]["accounts"], json!(["Researcher", "Coder"]));
    Ok(())
}

/// A host key must hold every agent of the chain (spec §3b): a delegated call spends its root's task, person
/// and per-task amounts. A key for the Researcher alone may not decide, call, or read the offer via
/// Coder.FixBug (403 `not_your_agent`, naming Coder, nothing made), nor claim or withdraw a proposal made via
/// Coder; the key for both may. The same key still makes the Researcher's direct calls.
#[test]
fn a_host_key_for_the_child_alone_is_refused_a_delegated_call() -> R {
    let server = Server::start("research-desk");
    let child = server.host("Researcher");
    let both = server.host("Coder,Researcher");
    let ben = server.person("Ben");
    let coder = [link("Coder", "FixBug")];

    let refused = child.post("/v1/decide", &fetch("https://a.example/x", &coder));
    assert_eq!((refused.status, refused.code()), (403, "not_your_agent"), "{}", refused.body);
    assert!(refused.message().contains("not for `Coder`"), "{}", refused.message());
    let refused = child.post("/v1/calls", &call(&fetch("https://a.example/x", &coder), "T1", "tok-1"));
    assert_eq!((refused.status, refused.code()), (403, "not_your_agent"), "{}", refused.body);
    assert_eq!(ben.get("/v1/proposals").ok()["proposals"], json!([]), "nothing was proposed");
    assert_eq!(ben.get("/v1/tasks/T1").status, 404, "no task was begun");
    let refused = child.get("/v1/agents/Researcher/skills/Look/tools?via=Coder.FixBug");
    assert_eq!((refused.status, refused.code()), (403, "not_your_agent"), "{}", refused.body);
    assert_eq!(child.post("/v1/decide", &fetch("https://a.example/x", &[])).ok()["level"], "alone");

    let p =
        both.post("/v1/calls", &call(&fetch("https://a.example/x", &coder), "T1", "tok-1")).ok()["proposal"].clone();
    approve(&ben, &p, "once").ok();
    let id = p["id"].as_str().unwrap_or_default();
    let refused = child.post(&format!("/v1/executions/{id}/claim"), &json!({"token": "run-1"}));
    assert_eq!((refused.status, refused.code()), (403, "not_your_agent"), "{}", refused.body);
    assert_eq!(both.get(&format!("/v1/executions/{id}")).ok()["status"], "granted", "not claimed");
    let waiting =
        both.post("/v1/calls", &call(&fetch("https://b.example/y", &coder), "T1", "tok-2")).ok()["proposal"].clone();
    let wid = waiting["id"].as_str().unwrap_or_default();
    let refused = child.post(&format!("/v1/proposals/{wid}/withdraw"), &json!({}));
    assert_eq!((refused.status, refused.code()), (403, "not_your_agent"), "{}", refused.body);
    assert_eq!(both.post(&format!("/v1/proposals/{wid}/withdraw"), &json!({})).ok()["status"], "withdrawn");
    assert_eq!(both.post(&format!("/v1/executions/{id}/claim"), &json!({"token": "run-1"})).ok()["status"], "granted");
    Ok(())
}

/// A malformed chain is refused before the runtime (400: a link without its skill, a chain that is not a
/// list, `?via=` that is not `Agent.Skill`); an undeclared one is the runtime's answer, as `permitc decide
/// --via` gives it: `never` with the reason at `/v1/decide`, 403 `never` at `/v1/calls` with nothing made,
/// and an offer of nothing.
#[test]
fn a_malformed_chain_is_refused_and_an_undeclared_one_is_never() -> R {
    let server = Server::start("research-desk");
    let host = server.host("Coder,Researcher");
    let ben = server.person("Ben");

    let mut body = fetch("https://a.example/x", &[]);
    body["via"] = json!([{"agent": "Coder"}]);
    let refused = host.post("/v1/decide", &body);
    assert_eq!((refused.status, refused.code()), (400, "invalid_request"), "{}", refused.body);
    assert!(refused.message().contains("missing field `skill`"), "{}", refused.message());
    body["via"] = json!("Coder.FixBug");
    let refused = host.post("/v1/calls", &call(&body, "T1", "tok-1"));
    assert_eq!((refused.status, refused.code()), (400, "invalid_request"), "{}", refused.body);
    let refused = host.get("/v1/agents/Researcher/skills/Look/tools?via=Coder");
    assert_eq!((refused.status, refused.code()), (400, "invalid_query"), "{}", refused.body);
    assert!(refused.message().contains("the link `Coder` is not `Agent.Skill`"), "{}", refused.message());

    let read = json!({"agent": "Coder", "skill": "FixBug", "tool": "ReadFile", "arguments": {"path": "a"},
                      "requester": "Ben", "via": [link("Researcher", "Look")]});
    let decided = host.post("/v1/decide", &read).ok();
    assert_eq!(decided["level"], "never");
    assert_eq!(
        decided["refusal"], "not a declared delegation: `Researcher.Look` does not delegate to `Coder.FixBug`",
        "the words of `permitc decide --via Researcher.Look`"
    );
    let refused = host.post("/v1/calls", &call(&read, "T1", "tok-2"));
    assert_eq!((refused.status, refused.code()), (403, "never"), "{}", refused.body);
    assert!(refused.message().contains("not a declared delegation"), "{}", refused.message());
    assert_eq!(ben.get("/v1/proposals").ok()["proposals"], json!([]));
    let offer = host.get("/v1/agents/Coder/skills/FixBug/tools?via=Researcher.Look").ok();
    assert!(names(&offer).is_empty(), "{offer}");
    assert_eq!(
        offer["levels"],
        json!([{"tool": "ReadFile", "level": "never"}, {"tool": "EditFile", "level": "never"},
               {"tool": "GitPush", "level": "never"}])
    );
    Ok(())
}

/// Outcome 7 over HTTP: "always like this" on a delegated proposal (the Researcher's SendMail via
/// Reviewer.Review) makes a standing rule for that chain only: the same mail via Reviewer is alone, the same
/// tool called directly is still proposed. A rule made at `POST /v1/rules` for a chain carries it; one for an
/// undeclared chain is refused (403 `rule`, as any rule the runtime will not make), nothing made.
#[test]
fn an_always_rule_for_a_delegated_call_applies_to_its_chain_only() -> R {
    let server = Server::start("research-desk");
    let host = server.host("Researcher,Reviewer,Coder");
    let ben = server.person("Ben");
    let reviewer = [link("Reviewer", "Review")];
    let mail = |via: &[Value]| {
        json!({"agent": "Researcher", "skill": "Look", "tool": "SendMail", "arguments": {"to": "a@x.example"},
               "requester": "Ben", "via": via})
    };
    let p = host.post("/v1/calls", &call(&mail(&reviewer), "T7", "tok-1")).ok()["proposal"].clone();
    assert_eq!((&p["status"], &p["via"]), (&json!("waiting"), &json!(reviewer)));
    assert_eq!(approve(&ben, &p, "always_like_this").ok()["status"], "granted");
    let rules = host.get("/v1/rules").ok();
    let rule = &rules["rules"][0];
    assert_eq!(
        (&rule["via"], &rule["agent"], &rule["tool"]),
        (&json!(reviewer), &json!("Researcher"), &json!("SendMail"))
    );

    let again = host.post("/v1/decide", &mail(&reviewer)).ok();
    assert_eq!((&again["level"], &again["standing_rule"]), (&json!("alone"), &rule["id"]));
    let direct = host.post("/v1/decide", &mail(&[])).ok();
    assert_eq!((&direct["level"], &direct["standing_rule"]), (&json!("propose"), &Value::Null));

    let made = ben
        .post(
            "/v1/rules",
            &json!({"agent": "Researcher", "tool": "WebFetch", "skill": "Look", "work_for": {"person": "Ben"},
                    "scope": "any_arguments", "via": [link("Coder", "FixBug")]}),
        )
        .ok();
    assert_eq!(made["rule"]["via"], json!([link("Coder", "FixBug")]));
    let via_coder = host.post("/v1/decide", &fetch("https://c.example/", &[link("Coder", "FixBug")])).ok();
    assert_eq!((&via_coder["level"], &via_coder["standing_rule"]), (&json!("alone"), &made["rule"]["id"]));
    let via_reviewer = host.post("/v1/decide", &fetch("https://c.example/", &reviewer)).ok();
    assert_eq!(via_reviewer["level"], "propose", "another chain");

    let refused = ben.post(
        "/v1/rules",
        &json!({"agent": "Researcher", "tool": "WebFetch", "skill": "Look", "work_for": {"person": "Ben"},
                "scope": "any_arguments", "via": [link("Researcher", "Look")]}),
    );
    assert_eq!((refused.status, refused.code()), (403, "rule"), "{}", refused.body);
    assert!(refused.message().starts_with("not a declared delegation"), "{}", refused.message());
    assert_eq!(host.get("/v1/rules").ok()["rules"].as_array().map(Vec::len), Some(2), "nothing more was made");
    Ok(())
}
