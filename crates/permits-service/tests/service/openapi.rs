//! Every JSON answer of these tests is checked against the checked-in OpenAPI document
//! (`crates/permits-service/openapi.json`): its route and method must be documented, its status too, and
//! its body must validate against the documented schema (JSON Schema 2020-12, as OpenAPI 3.1 uses).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use serde_json::{Value, json};

use super::{Client, R, Server};

struct Spec {
    doc: Value,
    validators: Mutex<HashMap<String, std::sync::Arc<jsonschema::Validator>>>,
}

fn spec() -> &'static Spec {
    static SPEC: OnceLock<Spec> = OnceLock::new();
    SPEC.get_or_init(|| {
        let doc: Value = serde_json::from_str(permits_service::OPENAPI).expect("openapi.json is JSON");
        Spec { doc, validators: Mutex::new(HashMap::new()) }
    })
}

/// The documented path template `path` (without its query) matches, literal segments first.
fn template(doc: &Value, path: &str) -> Option<String> {
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    let mut best: Option<(usize, String)> = None;
    for candidate in doc["paths"].as_object()?.keys() {
        let parts: Vec<&str> = candidate.split('/').collect();
        if parts.len() != segments.len() {
            continue;
        }
        let mut literal = 0;
        let fits = parts.iter().zip(&segments).all(|(p, s)| {
            if p.starts_with('{') && p.ends_with('}') {
                !s.is_empty()
            } else {
                literal += 1;
                p == s
            }
        });
        if fits && best.as_ref().is_none_or(|(n, _)| literal > *n) {
            best = Some((literal, candidate.clone()));
        }
    }
    best.map(|(_, t)| t)
}

/// Panics unless `body`, answered with `status` to `method path`, is what the document says.
pub(super) fn check(method: &str, path: &str, status: u16, body: &Value) {
    let spec = spec();
    let Some(route) = template(&spec.doc, path) else {
        // An unknown route's 404 and a wrong method's 405 are the error shape.
        assert!(status == 404 || status == 405, "{method} {path}: not in openapi.json");
        return check_schema(&format!("error {status}"), &json!({"$ref": "#/components/schemas/Error"}), body);
    };
    let Some(operation) = spec.doc["paths"][&route].get(method) else {
        assert_eq!(status, 405, "{method} {route}: not in openapi.json");
        return check_schema("error 405", &json!({"$ref": "#/components/schemas/Error"}), body);
    };
    let responses = &operation["responses"];
    let response = responses.get(status.to_string()).or_else(|| responses.get("default"));
    let Some(mut response) = response else { panic!("{method} {route}: status {status} is not documented: {body}") };
    if let Some(name) = response["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/responses/")) {
        response = &spec.doc["components"]["responses"][name];
    }
    let schema = &response["content"]["application/json"]["schema"];
    assert!(!schema.is_null(), "{method} {route} {status}: no JSON schema documented");
    check_schema(&format!("{method} {route} {status}"), schema, body);
}

fn check_schema(key: &str, schema: &Value, body: &Value) {
    let spec = spec();
    let validator = {
        let mut validators = spec.validators.lock().unwrap_or_else(PoisonError::into_inner);
        validators
            .entry(key.to_string())
            .or_insert_with(|| {
                let root = json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "components": spec.doc["components"],
                    "allOf": [schema],
                });
                std::sync::Arc::new(
                    jsonschema::validator_for(&root)
                        .unwrap_or_else(|e| panic!("{key}: the schema does not compile: {e}")),
                )
            })
            .clone()
    };
    let errors: Vec<String> = validator.iter_errors(body).map(|e| format!("{e} at `{}`", e.instance_path())).collect();
    assert!(errors.is_empty(), "{key}: the answer does not fit openapi.json:\n{}\n{body}", errors.join("\n"));
}

#[test]
fn the_served_document_is_the_checked_in_one_and_documents_every_route() -> R {
    let server = Server::start("workshop");
    let served = Client::anonymous(&server.url).get("/v1/openapi.json").ok();
    let checked_in: Value = serde_json::from_str(permits_service::OPENAPI)?;
    assert_eq!(served, checked_in);
    assert_eq!(checked_in["openapi"], "3.1.0");
    let routes = [
        ("get", "/healthz"),
        ("get", "/metrics"),
        ("get", "/v1/openapi.json"),
        ("get", "/v1/table"),
        ("get", "/v1/agents/{agent}/skills/{skill}/tools"),
        ("post", "/v1/decide"),
        ("post", "/v1/calls"),
        ("get", "/v1/proposals"),
        ("get", "/v1/proposals/{id}"),
        ("get", "/v1/proposals/{id}/events"),
        ("post", "/v1/proposals/{id}/withdraw"),
        ("post", "/v1/proposals/{id}/approve"),
        ("post", "/v1/proposals/{id}/reject"),
        ("post", "/v1/proposals/{id}/revoke"),
        ("post", "/v1/proposals/{id}/resolve"),
        ("get", "/v1/executions/{id}"),
        ("post", "/v1/executions/{id}/claim"),
        ("post", "/v1/executions/{id}/confirm"),
        ("post", "/v1/executions/{id}/refuse"),
        ("post", "/v1/executions/{id}/receipt"),
        ("post", "/v1/settle"),
        ("get", "/v1/tasks/{key}"),
        ("post", "/v1/tasks/{key}/end"),
        ("get", "/v1/tasks/{key}/lease"),
        ("post", "/v1/tasks/{key}/lease"),
        ("post", "/v1/tasks/{key}/lease/renew"),
        ("post", "/v1/tasks/{key}/lease/release"),
        ("get", "/v1/rules"),
        ("post", "/v1/rules"),
        ("post", "/v1/rules/{id}/revoke"),
        ("get", "/v1/budgets"),
        ("get", "/v1/budgets/{name}"),
        ("post", "/v1/budgets/{name}/raise"),
        ("get", "/v1/version-urls"),
        ("post", "/v1/version-urls"),
        ("post", "/v1/version-urls/remove"),
        ("get", "/v1/audit"),
        ("get", "/v1/audit/verify"),
        ("post", "/v1/admin/table"),
    ];
    for (method, path) in routes {
        assert!(checked_in["paths"][path][method].is_object(), "{method} {path} is not documented");
    }
    assert_eq!(
        checked_in["paths"]
            .as_object()
            .map(|p| p.values().map(|o| o.as_object().map_or(0, |o| o.len())).sum::<usize>()),
        Some(routes.len()),
        "openapi.json documents a route the service does not have"
    );
    Ok(())
}

#[test]
fn the_validator_refuses_what_is_not_documented() {
    let wrong = std::panic::catch_unwind(|| check("get", "/healthz", 200, &json!({"ok": "yes"})));
    assert!(wrong.is_err(), "a wrong type must not validate");
    let undocumented = std::panic::catch_unwind(|| check("get", "/healthz", 418, &json!({})));
    assert!(undocumented.is_err(), "an undocumented status must not validate");
}
