//! Malformed JSON, oversized bodies, unknown fields, deep nesting, wrong types, bad queries: each a 4xx
//! with a clear JSON error, nothing stored, and the service still serving.

use serde_json::json;

use super::{Client, R, Server};

fn call() -> serde_json::Value {
    json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice",
        "arguments": {"repair": "T-7", "price": 45}, "requester": "Noor", "operation_key": "k",
        "claim_token": "t", "covered_version": "r1"})
}

fn nothing_stored(host: &Client) {
    assert_eq!(host.get("/v1/proposals").ok()["proposals"], json!([]));
    assert_eq!(Client::anonymous(&host.base).get("/healthz").ok()["ok"], true);
}

#[test]
fn bad_bodies_are_refused_clearly_and_nothing_is_stored() -> R {
    let server = Server::start("workshop");
    let host = server.host("Estimator");
    let text = call().to_string();
    let mut unknown = call();
    unknown["approved"] = json!(true);
    let mut wrong_type = call();
    wrong_type["operation_key"] = json!(7);
    let mut deep = call();
    let mut value = json!("bottom");
    for _ in 0..40 {
        value = json!([value]);
    }
    deep["arguments"]["price"] = value;
    let mut huge = call();
    huge["why"] = json!("x".repeat(300 * 1024));
    let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
        ("malformed", text.as_bytes()[..text.len() / 2].to_vec(), 400, "malformed_json", "the body is not JSON"),
        ("not JSON", b"agent=Estimator".to_vec(), 400, "malformed_json", "the body is not JSON"),
        ("empty", Vec::new(), 400, "malformed_json", "the body is empty"),
        ("unknown field", unknown.to_string().into_bytes(), 400, "unknown_field", "unknown field `approved`"),
        ("wrong type", wrong_type.to_string().into_bytes(), 400, "invalid_request", "invalid type"),
        ("deep", deep.to_string().into_bytes(), 400, "too_deep", "nests 42 deep, more than 32"),
        ("huge", huge.to_string().into_bytes(), 413, "body_too_large", "larger than 262144 bytes"),
    ];
    for (what, body, status, code, message) in cases {
        let answer = host.post_raw("/v1/calls", &body);
        assert_eq!((answer.status, answer.code()), (status, code), "{what}: {}", answer.body);
        assert!(answer.message().contains(message), "{what}: {}", answer.message());
        nothing_stored(&host);
    }
    // A body well over the limit, sent whole before the client reads (as most clients do): the client still
    // reads the 413, every time; the service drains what it refuses (bounded) instead of cutting the
    // connection under the sender.
    let mut larger = call();
    larger["why"] = json!("x".repeat(1024 * 1024));
    let larger = larger.to_string().into_bytes();
    for round in 0..20 {
        let answer = host.post_raw("/v1/calls", &larger);
        assert_eq!((answer.status, answer.code()), (413, "body_too_large"), "round {round}");
    }
    nothing_stored(&host);
    // A deep answer inside evidence is refused the same way, whatever the route.
    let mut mode = json!("once");
    for _ in 0..34 {
        mode = json!([mode]);
    }
    let approve = json!({"fingerprint": "f", "mode": mode});
    let noor = server.person("Noor");
    assert_eq!(noor.post("/v1/proposals/P-1/approve", &approve).code(), "too_deep");
    // The service still serves: the good call goes through.
    assert_eq!(host.post("/v1/calls", &call()).ok()["proposal"]["id"], "P-1");
    Ok(())
}

#[test]
fn bad_routes_methods_and_queries_are_json_errors() -> R {
    let server = Server::start("workshop");
    let host = server.host("Estimator");
    let missing = host.get("/v1/nothing");
    assert_eq!((missing.status, missing.code()), (404, "not_found"));
    let wrong = host.get("/v1/calls");
    assert_eq!((wrong.status, wrong.code()), (405, "method_not_allowed"));
    let query = host.get("/v1/proposals/P-1?wait=soon");
    assert_eq!((query.status, query.code()), (400, "invalid_query"));
    let query = host.get("/v1/proposals?colour=red");
    assert_eq!((query.status, query.code()), (400, "invalid_query"));
    let unknown = host.get("/v1/proposals/P-404");
    assert_eq!(
        (unknown.status, unknown.code(), unknown.message()),
        (404, "unknown_proposal", "there is no proposal `P-404`")
    );
    let unknown = host.get("/v1/executions/A-404");
    assert_eq!((unknown.status, unknown.code()), (404, "unknown_execution"));
    nothing_stored(&host);
    Ok(())
}

/// A `null` (or any value of the wrong kind) in a field is JSON that does not fit, on every route: 400
/// `invalid_request` naming the field, never `malformed_json` ("the body is not JSON").
#[test]
fn null_values_are_invalid_requests_naming_the_field() -> R {
    let server = Server::start("workshop");
    let host = server.host("Estimator");
    let noor = server.person("Noor");
    let rule = json!({"agent": "Estimator", "tool": "ScrapRepair", "work_for": null, "scope": "any_arguments"});
    let mut call = call();
    call["operation_key"] = json!(null);
    let cases = [
        (&noor, "/v1/rules", rule, "`work_for`"),
        (
            &noor,
            "/v1/rules",
            json!({"agent": "Estimator", "tool": "ScrapRepair", "work_for": "nobody",
            "scope": ["any_arguments"]}),
            "`scope`",
        ),
        (&noor, "/v1/proposals/P-1/approve", json!({"fingerprint": "f", "mode": null}), "`mode`"),
        (&host, "/v1/calls", call, "`operation_key`"),
        // Arguments that are not an object do not fit the body: refused before anything is decided or recorded.
        (
            &host,
            "/v1/calls",
            {
                let mut c = self::call();
                c["arguments"] = json!(null);
                c
            },
            "`arguments`",
        ),
        (
            &host,
            "/v1/decide",
            json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice",
            "arguments": [1]}),
            "`arguments`",
        ),
    ];
    let events = || noor.get("/v1/audit?limit=1000").ok()["events"].as_array().map_or(0, Vec::len);
    let before = events();
    for (client, path, body, field) in cases {
        let answer = client.post(path, &body);
        assert_eq!((answer.status, answer.code()), (400, "invalid_request"), "{path} {body}: {}", answer.body);
        assert!(answer.message().starts_with("the body does not fit: "), "{path}: {}", answer.message());
        assert!(answer.message().contains(field), "{path}: {}", answer.message());
    }
    // Not JSON at all is still `malformed_json`.
    let answer = noor.post_raw("/v1/rules", br#"{"agent": "Estimator", "work_for": nul}"#);
    assert_eq!((answer.status, answer.code()), (400, "malformed_json"), "{}", answer.body);
    nothing_stored(&host);
    assert_eq!(noor.get("/v1/rules").ok()["rules"], json!([]));
    assert_eq!(events(), before, "no decision recorded for a body that does not fit");
    Ok(())
}

/// What a body that does not fit is told names the body's fields and plain JSON kinds, never the service's
/// own type names (`struct ChainLink`, `struct CallBody`), and an unknown field says where it is.
#[test]
fn errors_name_json_kinds_and_fields_not_internal_types() -> R {
    let server = Server::start("workshop");
    let host = server.host("Estimator");
    let mut link = call();
    link["via"] = json!(["Scheduler.Plan"]);
    let mut nested = call();
    nested["evidence"] = json!([{"tool": "SetPrice", "arguments": {}, "answer": 1, "seen": true}]);
    let cases = [
        (
            "/v1/calls",
            link,
            "invalid_request",
            "the body does not fit: `via[0]`: invalid type: string \"Scheduler.Plan\", expected an object",
        ),
        // An array of the fields in order is not an object, though serde would read one.
        (
            "/v1/calls",
            json!(["Estimator", "EstimateRepair", "SetPrice", {}, "Noor", null, [], "k", "t"]),
            "invalid_request",
            "the body does not fit: it must be a JSON object, not an array",
        ),
        ("/v1/calls", json!("x"), "invalid_request", "the body does not fit: it must be a JSON object, not a string"),
        (
            "/v1/calls",
            nested,
            "unknown_field",
            "`evidence[0]` in the body has an unknown field `seen`, expected one of `tool`, `arguments`, `answer`",
        ),
    ];
    for (path, body, code, message) in cases {
        let answer = host.post(path, &body);
        assert_eq!((answer.status, answer.code()), (400, code), "{body}: {}", answer.body);
        assert_eq!(answer.message(), message, "{body}");
    }
    nothing_stored(&host);
    Ok(())
}
