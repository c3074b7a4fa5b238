//! A pin is part of an extern tool's definition (spec §2): a re-import after the server changed its tool
//! writes another pin, and every standing rule made for the old definition stops applying.

use permits_compiler::compile::compile_loaded;
use permits_compiler::syntax::{Source, Sources, parse_sources};
use permits_runtime::table::{Level, Table};
use permits_runtime::{AdmitAll, Call, NewRule, Runtime, Scope, WorkFor};
use serde_json::json;

type R = Result<(), Box<dyn std::error::Error>>;

fn compile(tool: &serde_json::Value) -> Result<Table, String> {
    let imported =
        permits_mcp::import::import(std::slice::from_ref(tool), &Default::default()).map_err(|e| e.to_string())?;
    let declarations =
        permits_mcp::import::render(&imported, "a test").replace(permits_mcp::import::WIDEST_CLAIM, "sends");
    let policy = "role Lead\nperson Ana { roles [Lead] }\nwidens_autonomy [Lead]\nagent Scribe \"s\" { sponsor Ana skills [Mail] }\nskill Mail \"m\" { tools [send_mail] }\n";
    let mut sources = Sources::default();
    sources.add(Source::new("policy.permits", policy.as_bytes().to_vec()));
    sources.add(Source::new("tools.permits", declarations.into_bytes()));
    let out = compile_loaded(parse_sources(sources));
    out.table.ok_or_else(|| permits_compiler::diagnostics::render_plain(&out.diagnostics, &out.sources))
}

/// The tool object; `output` changes only its output schema, which no part of the declaration but the pin
/// shows (a change to a description would change the doc comment, and so the digest, anyway).
fn mail(output: &str) -> serde_json::Value {
    json!({
        "name": "send_mail",
        "description": "Send an email.",
        "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        "outputSchema": {"type": "object", "properties": {output: {"type": "string"}}},
    })
}

#[test]
fn a_changed_pin_voids_the_standing_rules_of_the_old_definition() -> R {
    let before = compile(&mail("result"))?;
    let after = compile(&mail("result_and_a_copy_to_someone_else"))?;
    let (b, a) = (&before.tools["send_mail"], &after.tools["send_mail"]);
    assert_eq!((&b.label, &b.doc, &b.params, &b.claim), (&a.label, &a.doc, &a.params, &a.claim));
    assert_ne!(b.pinned, a.pinned);
    assert_ne!(before.tools["send_mail"].definition_digest, after.tools["send_mail"].definition_digest);
    // Unchanged server, unchanged pin and digest: the import is deterministic.
    assert_eq!(
        compile(&mail("result"))?.tools["send_mail"].definition_digest,
        before.tools["send_mail"].definition_digest
    );

    let rt = Runtime::new(before, AdmitAll);
    let call =
        Call::new("Scribe", "Mail", "send_mail").with_arguments(json!({"to": "ben@example.com"})).for_person("Ana");
    assert_eq!(rt.decide(&call)?.level, Level::Propose);
    rt.allow_alone(&NewRule {
        agent: "Scribe".into(),
        tool: "send_mail".into(),
        skill: None,
        work_for: WorkFor::Person("Ana".into()),
        by: "Ana".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: None,
        via: Vec::new(),
    })?;
    let ruled = rt.decide(&call)?;
    assert_eq!(ruled.level, Level::Alone);
    assert!(ruled.standing_rule.is_some());
    rt.replace_table(after)?;
    let d = rt.decide(&call)?;
    assert_eq!((d.level, d.standing_rule), (Level::Propose, None));
    Ok(())
}
