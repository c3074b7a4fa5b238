//! `permitc check --format sarif` writes SARIF 2.1.0 that validates against the official schema
//! (vendored in `tests/data/`), with one result per diagnostic and its related locations.

use std::path::Path;
use std::process::Command;

fn sarif(args: &[&str]) -> (serde_json::Value, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_permitc"))
        .current_dir(crate::root())
        .env("NO_COLOR", "1")
        .arg("check")
        .arg("--format")
        .arg("sarif")
        .args(args)
        .output()
        .expect("permitc runs");
    let value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("SARIF is JSON: {e}\n{}", String::from_utf8_lossy(&out.stdout)));
    (value, out.status.code().unwrap_or(-1))
}

fn validator() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data/sarif-schema-2.1.0.json");
    let text = std::fs::read_to_string(path).expect("the schema is vendored");
    // The official schema's `run.language` pattern has a stray `]` (`…{2}]?$`) that a strict ECMA regex
    // check refuses; escaping it keeps its meaning (a literal `]`) and lets the schema compile.
    let text = text.replace(r#"^[a-zA-Z]{2}-[a-zA-Z]{2}]?$"#, r#"^[a-zA-Z]{2}-[a-zA-Z]{2}\\]?$"#);
    let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

fn assert_valid(v: &serde_json::Value) {
    let validator = validator();
    let errors: Vec<String> = validator.iter_errors(v).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "SARIF does not validate:\n{}", errors.join("\n"));
}

#[test]
fn clean_policies_give_valid_sarif_with_only_the_expected_warning() {
    let (v, code) = sarif(&["policies/workshop", "policies/skill-grants", "policies/coding-agent"]);
    assert_eq!(code, 0);
    assert_valid(&v);
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0]["ruleId"], "permits::levels::skill_loosens");
    assert_eq!(results[0]["level"], "warning");
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "policies/skill-grants/agents.permits");
    assert_eq!(loc["region"]["startLine"], 19);
    assert_eq!(v["runs"][0]["tool"]["driver"]["rules"][0]["id"], "permits::levels::skill_loosens");
}

#[test]
fn errors_with_witness_paths_give_valid_sarif_with_related_locations() {
    let dir = std::env::temp_dir().join(format!("permits-sarif-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("a.permits"),
        "entity E { f }\nperson P\ntool Look \"look\" () : reads {\n    call Save\n}\ntool Save \"save\" () {\n    write E.f\n}\nagent A { sponsor P skills [S] }\nskill S { tools [Look, Sav] }\n",
    )
    .expect("write");
    let path = dir.to_string_lossy().into_owned();
    let (v, code) = sarif(&[&path, "/nonexistent/permits/path"]);
    assert_eq!(code, 2, "a missing path is an I/O failure");
    assert_valid(&v);
    let results = v["runs"][0]["results"].as_array().expect("results");
    let ids: Vec<&str> = results.iter().filter_map(|r| r["ruleId"].as_str()).collect();
    assert!(ids.contains(&"permits::check::unknown"), "{ids:?}");
    assert!(ids.contains(&"permits::effects::understated"), "{ids:?}");
    let understated = results.iter().find(|r| r["ruleId"] == "permits::effects::understated").expect("understated");
    let related = understated["relatedLocations"].as_array().expect("the witness path");
    assert_eq!(related.len(), 2, "a call and the write: {related:#?}");
    assert!(related[0]["message"]["text"].as_str().unwrap_or("").contains("calls `Save`"));
    assert!(related[1]["message"]["text"].as_str().unwrap_or("").contains("write E.f"));
    let notes = v["runs"][0]["invocations"][0]["toolExecutionNotifications"].as_array().expect("notifications");
    assert_eq!(notes.len(), 1);
    assert_eq!(v["runs"][0]["invocations"][0]["executionSuccessful"], false);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_validator_refuses_what_is_not_sarif() {
    let (mut v, _) = sarif(&["policies/workshop"]);
    let validator = validator();
    assert!(validator.is_valid(&v));
    v["version"] = serde_json::json!("9.9.9");
    assert!(!validator.is_valid(&v), "a wrong version must not validate");
    let (mut v, _) = sarif(&["policies/skill-grants"]);
    v["runs"][0]["results"][0]["level"] = serde_json::json!("fatal");
    assert!(!validator.is_valid(&v), "an unknown level must not validate");
}
