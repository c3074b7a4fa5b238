//! `permitc mcp import`: a server's tools as `.permits` declarations (spec §2): one `extern tool` per tool,
//! typed parameters from its `inputSchema`, the widest claim for the author to confirm (the server's
//! annotations beside it as a comment, never as the claim), and `pinned "sha256:…"` ([`crate::canonical::pin`]).
//! Re-imported over an existing file, a tool whose pin is unchanged keeps the claim its author confirmed, and
//! [`changes`] says what changed, field by field.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use permits_compiler::diagnostics::Severity;
use permits_compiler::syntax::ast::{DeclarationKind, ToolKind};
use permits_compiler::syntax::{RESERVED, Source, Sources, parse_sources};
use serde_json::Value;

use crate::canonical::pin;

/// The claim an imported tool gets until its author confirms a narrower one: every class but `reads`, which
/// each of them covers anyway as far as levels go.
pub const WIDEST_CLAIM: &str = "changes + sends + spends + reaches_out";

/// Why an import failed as a whole.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// A tool object without a string `name`.
    #[error("the server listed a tool without a name (tool {index} of the list)")]
    Unnamed {
        /// Its place in the list, from 0.
        index: usize,
    },
    /// Two tools of the server have the same name, or names that map to the same permits name.
    #[error("the server's tools `{first}` and `{second}` would both be `{name}` in the policy")]
    Collision {
        /// The first MCP name.
        first: String,
        /// The second MCP name.
        second: String,
        /// The permits name both map to.
        name: String,
    },
}

/// The permits name of an MCP tool: the name itself when it is a permits identifier (ASCII letter, then
/// letters, digits and `_`) and not reserved; otherwise every other character becomes `_`, a name that does not
/// start with a letter gets `t_` in front, and a reserved one `_tool` after. The proxy maps names the same way.
pub fn permits_name(mcp: &str) -> String {
    let mut name: String = mcp.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert_str(0, "t_");
    }
    if RESERVED.contains(&name.as_str()) {
        name.push_str("_tool");
    }
    name
}

/// A parameter's type word for a property's JSON Schema, and a note for the author (an enum's values, a
/// union read as `json`).
pub fn param_type(schema: &Value) -> (&'static str, Option<String>) {
    let enum_note = schema.get("enum").and_then(Value::as_array).map(|values| {
        let listed: Vec<String> = values.iter().map(Value::to_string).collect();
        format!("one of {}", listed.join(", "))
    });
    match schema.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "string" => ("string", enum_note),
            "integer" => ("int", enum_note),
            "number" => ("number", enum_note),
            "boolean" => ("bool", enum_note),
            "object" | "array" => ("json", None),
            other => ("json", Some(format!("type `{other}`: read as `json`"))),
        },
        Some(Value::Array(types)) => {
            let listed: Vec<String> = types.iter().map(Value::to_string).collect();
            ("json", Some(format!("any of the types {}: read as `json`", listed.join(", "))))
        }
        _ => {
            if let Some(values) = schema.get("enum").and_then(Value::as_array) {
                if !values.is_empty() && values.iter().all(Value::is_string) {
                    return ("string", enum_note);
                }
            }
            let union = ["anyOf", "oneOf", "allOf"].into_iter().find(|k| schema.get(*k).is_some());
            match union {
                Some(k) => ("json", Some(format!("`{k}` in its schema: read as `json`"))),
                None => ("json", None),
            }
        }
    }
}

/// One tool as imported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedTool {
    /// The name the server gives it.
    pub mcp_name: String,
    /// Its permits name ([`permits_name`]).
    pub name: String,
    /// `sha256:…` of the tool object as sent.
    pub pin: String,
    /// The label (title, or the description's first sentence, or the name).
    pub label: String,
    /// The description, the doc comment.
    pub doc: Option<String>,
    /// `(name, type word, optional)` in the schema's property order, sorted by name.
    pub params: Vec<(String, String, bool)>,
    /// The declaration's text (with its comments), or why the tool cannot be declared.
    pub declaration: Result<String, String>,
}

/// A tool of an existing file, as far as a re-import compares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OldTool {
    /// The label.
    pub label: String,
    /// The doc comment's text.
    pub doc: Option<String>,
    /// `(name, type word, optional)` as written.
    pub params: Vec<(String, String, bool)>,
    /// The claim as written (`reads`, `changes + sends`), if any.
    pub claim: Option<String>,
    /// The pin, if any.
    pub pinned: Option<String>,
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn label_of(tool: &Value, mcp: &str) -> String {
    let title = tool.get("title").or_else(|| tool.pointer("/annotations/title")).and_then(Value::as_str);
    if let Some(t) = title.map(str::trim).filter(|t| !t.is_empty()) {
        return first_line(t);
    }
    if let Some(d) = tool.get("description").and_then(Value::as_str).map(str::trim).filter(|d| !d.is_empty()) {
        let line = first_line(d);
        let sentence = line.split_once(". ").map_or(line.as_str(), |(s, _)| s).trim_end_matches('.');
        return sentence.chars().take(100).collect();
    }
    mcp.replace(['_', '-'], " ")
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_string()
}

fn hints(tool: &Value) -> String {
    let Some(Value::Object(a)) = tool.get("annotations") else {
        return "the server gives no hints".into();
    };
    let listed: Vec<String> =
        a.iter().filter(|(k, _)| k.as_str() != "title").map(|(k, v)| format!("{k}: {v}")).collect();
    if listed.is_empty() {
        "the server gives no hints".into()
    } else {
        format!("the server's hints, never proof (spec §2): {}", listed.join(", "))
    }
}

/// Whether `text` (one declaration) parses and checks without an error; the first error's message otherwise.
fn checks(text: &str) -> Result<(), String> {
    let mut sources = Sources::default();
    sources.add(Source::new("import.permits", text.as_bytes().to_vec()));
    let loaded = parse_sources(sources);
    if let Some(d) = loaded.diagnostics.iter().find(|d| d.severity == Severity::Error) {
        return Err(d.message.clone());
    }
    let (_, diags) = permits_compiler::check::check(&loaded.package);
    match diags.iter().find(|d| d.severity == Severity::Error) {
        Some(d) => Err(d.message.clone()),
        None => Ok(()),
    }
}

/// Imports every tool of the list. `old` is an existing file's tools by permits name: a tool whose pin is
/// unchanged keeps its written claim.
///
/// Errors: [`ImportError`] for a tool without a name or two tools with one permits name.
pub fn import(tools: &[Value], old: &BTreeMap<String, OldTool>) -> Result<Vec<ImportedTool>, ImportError> {
    let mut out: Vec<ImportedTool> = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (index, tool) in tools.iter().enumerate() {
        let Some(mcp) = tool.get("name").and_then(Value::as_str) else {
            return Err(ImportError::Unnamed { index });
        };
        let name = permits_name(mcp);
        if let Some(first) = seen.insert(name.clone(), mcp.to_string()) {
            return Err(ImportError::Collision { first, second: mcp.to_string(), name });
        }
        out.push(import_one(tool, mcp, name, old));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn import_one(tool: &Value, mcp: &str, name: String, old: &BTreeMap<String, OldTool>) -> ImportedTool {
    let pin = pin(tool);
    let label = label_of(tool, mcp);
    let doc = tool.get("description").and_then(Value::as_str).map(str::trim).filter(|d| !d.is_empty());
    let doc = doc.map(|d| d.lines().map(str::trim_end).collect::<Vec<_>>().join("\n"));
    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut params = Vec::new();
    let mut notes = Vec::new();
    if let Some(Value::Object(props)) = schema.get("properties") {
        let mut names: Vec<&String> = props.keys().collect();
        names.sort_unstable();
        for p in names {
            let (ty, note) = props.get(p).map_or(("json", None), param_type);
            let optional = !required.contains(&p.as_str());
            if let Some(n) = note {
                notes.push(format!("`{p}`: {n}"));
            }
            params.push((p.clone(), ty.to_string(), optional));
        }
    }
    let mut text = String::new();
    let _ = writeln!(text, "// `{mcp}`: {}.", hints(tool));
    for n in &notes {
        let _ = writeln!(text, "// {n}");
    }
    let kept = old.get(&name).filter(|o| o.pinned.as_deref() == Some(pin.as_str())).and_then(|o| o.claim.clone());
    // A claim kept as it was imported (still the widest: never confirmed) keeps its reminder too.
    let widest = |c: &String| c.split_whitespace().collect::<Vec<_>>().join(" ") == WIDEST_CLAIM;
    if kept.as_ref().is_none_or(widest) {
        let _ = writeln!(text, "// The claim is the widest: narrow it to what the tool does once you have checked.");
    }
    if let Some(d) = &doc {
        for line in d.lines() {
            if line.is_empty() {
                text.push_str("///\n");
            } else {
                let _ = writeln!(text, "/// {line}");
            }
        }
    }
    let list: Vec<String> =
        params.iter().map(|(p, ty, opt)| format!("{p}{}: {ty}", if *opt { "?" } else { "" })).collect();
    let claim = kept.unwrap_or_else(|| WIDEST_CLAIM.to_string());
    let _ =
        writeln!(text, "extern tool {name} {} ({}) : {claim} pinned {}", quote(&label), list.join(", "), quote(&pin));
    let declaration = match checks(&text) {
        Ok(()) => Ok(text),
        Err(why) => Err(why),
    };
    ImportedTool { mcp_name: mcp.to_string(), name, pin, label, doc, params, declaration }
}

/// The whole file: a header naming the server, then each tool's declaration (or a comment saying why it was
/// not imported), formatted as `permitc fmt` formats it.
pub fn render(tools: &[ImportedTool], server: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "// Imported by `permitc mcp import` from {server}.");
    text.push_str(
        "// Each claim is the widest until you confirm it: narrow it to what the tool does. The pins are the\n",
    );
    text.push_str(
        "// digests of the tool objects as the server sent them: `permitc mcp proxy` withholds a tool whose\n",
    );
    text.push_str("// definition changed until it is imported again.\n");
    for t in tools {
        text.push('\n');
        match &t.declaration {
            Ok(d) => text.push_str(d),
            Err(why) => {
                let _ = writeln!(text, "// Not imported: `{}`: {why}.", t.mcp_name);
            }
        }
    }
    permits_compiler::fmt::format_file(&text).unwrap_or(text)
}

/// The extern tools of an existing file, by name, as [`OldTool`]s. A file that does not parse gives none
/// (the caller reports that it could not compare).
///
/// Errors: the first syntax error's message.
pub fn read_existing(text: &str) -> Result<BTreeMap<String, OldTool>, String> {
    let mut sources = Sources::default();
    sources.add(Source::new("existing.permits", text.as_bytes().to_vec()));
    let loaded = parse_sources(sources);
    if let Some(d) = loaded.diagnostics.iter().find(|d| d.severity == Severity::Error) {
        return Err(d.message.clone());
    }
    let mut out = BTreeMap::new();
    for decl in loaded.package.declarations() {
        let DeclarationKind::Tool(t) = &decl.kind else { continue };
        if t.kind != ToolKind::Extern {
            continue;
        }
        out.insert(
            t.name.name.clone(),
            OldTool {
                label: t.label.as_ref().map(|l| l.value.clone()).unwrap_or_default(),
                doc: decl.doc_text(),
                params: t.params.iter().map(|p| (p.name.name.clone(), p.ty.name.clone(), p.optional)).collect(),
                claim: t
                    .claim
                    .as_ref()
                    .map(|c| c.classes.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(" + ")),
                pinned: t.pinned.as_ref().map(|p| p.value.clone()),
            },
        );
    }
    Ok(out)
}

fn short(pin: Option<&str>) -> String {
    pin.map_or_else(|| "none".to_string(), |p| p.chars().take(19).collect::<String>() + "…")
}

/// What changed from an existing file to this import, one line per field, tools by name.
pub fn changes(old: &BTreeMap<String, OldTool>, new: &[ImportedTool]) -> Vec<String> {
    let mut out = Vec::new();
    for t in new {
        let Some(o) = old.get(&t.name) else {
            out.push(format!("+ {}: new", t.name));
            continue;
        };
        if o.pinned.as_deref() == Some(t.pin.as_str()) {
            continue;
        }
        if o.label != t.label {
            out.push(format!("~ {}: label {} → {}", t.name, quote(&o.label), quote(&t.label)));
        }
        if o.doc != t.doc {
            let show = |d: &Option<String>| d.as_deref().map_or_else(|| "none".to_string(), quote);
            out.push(format!("~ {}: description {} → {}", t.name, show(&o.doc), show(&t.doc)));
        }
        let olds: BTreeMap<&str, (&str, bool)> =
            o.params.iter().map(|(n, ty, opt)| (n.as_str(), (ty.as_str(), *opt))).collect();
        let news: BTreeMap<&str, (&str, bool)> =
            t.params.iter().map(|(n, ty, opt)| (n.as_str(), (ty.as_str(), *opt))).collect();
        let word = |opt: bool| if opt { "optional" } else { "required" };
        for (n, (ty, opt)) in &news {
            match olds.get(n) {
                None => out.push(format!("~ {}: parameter `{n}` added ({ty}, {})", t.name, word(*opt))),
                Some((oty, oopt)) => {
                    if oty != ty {
                        out.push(format!("~ {}: parameter `{n}` {oty} → {ty}", t.name));
                    }
                    if oopt != opt {
                        out.push(format!("~ {}: parameter `{n}` {} → {}", t.name, word(*oopt), word(*opt)));
                    }
                }
            }
        }
        for n in olds.keys().filter(|n| !news.contains_key(*n)) {
            out.push(format!("~ {}: parameter `{n}` removed", t.name));
        }
        out.push(format!(
            "~ {}: pin {} → {} (the tool object changed: its claim is the widest again; confirm it)",
            t.name,
            short(o.pinned.as_deref()),
            short(Some(&t.pin))
        ));
    }
    for name in old.keys().filter(|n| !new.iter().any(|t| &t.name == *n)) {
        out.push(format!("- {name}: the server no longer lists it (its declaration is dropped)"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_types_map_to_parameter_types() {
        assert_eq!(param_type(&json!({"type": "string"})), ("string", None));
        assert_eq!(param_type(&json!({"type": "integer"})), ("int", None));
        assert_eq!(param_type(&json!({"type": "number"})), ("number", None));
        assert_eq!(param_type(&json!({"type": "boolean"})), ("bool", None));
        assert_eq!(param_type(&json!({"type": "object", "properties": {}})), ("json", None));
        assert_eq!(param_type(&json!({"type": "array", "items": {"type": "string"}})), ("json", None));
        assert_eq!(
            param_type(&json!({"type": "string", "enum": ["formal", "casual"]})),
            ("string", Some("one of \"formal\", \"casual\"".into()))
        );
        assert_eq!(param_type(&json!({"enum": ["a", "b"]})), ("string", Some("one of \"a\", \"b\"".into())));
        assert_eq!(
            param_type(&json!({"anyOf": [{"type": "string"}, {"type": "null"}]})),
            ("json", Some("`anyOf` in its schema: read as `json`".into()))
        );
        assert_eq!(
            param_type(&json!({"type": ["string", "null"]})),
            ("json", Some("any of the types \"string\", \"null\": read as `json`".into()))
        );
        assert_eq!(param_type(&json!({})), ("json", None));
        assert_eq!(param_type(&json!({"type": "null"})), ("json", Some("type `null`: read as `json`".into())));
    }

    #[test]
    fn names_become_permits_names() {
        assert_eq!(permits_name("read_note"), "read_note");
        assert_eq!(permits_name("ReadNote"), "ReadNote");
        assert_eq!(permits_name("git.log-all"), "git_log_all");
        assert_eq!(permits_name("2fa"), "t_2fa");
        assert_eq!(permits_name("_x"), "t__x");
        assert_eq!(permits_name("send"), "send_tool");
        assert_eq!(permits_name("héllo"), "h_llo");
    }

    fn tool() -> Value {
        json!({
            "name": "send_mail",
            "description": "Send an email. It goes out at once.",
            "inputSchema": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "body": {"type": "string"}, "cc": {"type": "array"},
                               "tone": {"type": "string", "enum": ["formal", "casual"]}},
                "required": ["to", "body"]
            },
            "annotations": {"readOnlyHint": true}
        })
    }

    #[test]
    fn a_tool_becomes_a_pinned_extern_tool_with_the_widest_claim() {
        let tools = import(&[tool()], &BTreeMap::new()).unwrap_or_default();
        assert_eq!(tools.len(), 1);
        let t = &tools[0];
        assert_eq!(t.label, "Send an email");
        assert_eq!(
            t.params,
            vec![
                ("body".to_string(), "string".to_string(), false),
                ("cc".to_string(), "json".to_string(), true),
                ("to".to_string(), "string".to_string(), false),
                ("tone".to_string(), "string".to_string(), true),
            ]
        );
        let text = render(&tools, "`test`");
        assert!(text.contains(&format!(
            "extern tool send_mail \"Send an email\" (body: string, cc?: json, to: string, tone?: string)\n    : changes + sends + spends + reaches_out pinned \"{}\"",
            t.pin
        )), "{text}");
        assert!(
            text.contains("// `send_mail`: the server's hints, never proof (spec §2): readOnlyHint: true."),
            "{text}"
        );
        assert!(text.contains("// `tone`: one of \"formal\", \"casual\""), "{text}");
        assert!(text.contains("/// Send an email. It goes out at once.\n"), "{text}");
        // What `permitc fmt` writes: formatting it again changes nothing.
        assert_eq!(permits_compiler::fmt::format_file(&text).ok().as_deref(), Some(text.as_str()));
    }

    #[test]
    fn a_reimport_keeps_confirmed_claims_and_says_what_changed() {
        let first = import(&[tool()], &BTreeMap::new()).unwrap_or_default();
        let confirmed = render(&first, "`test`").replace(WIDEST_CLAIM, "sends");
        let old = read_existing(&confirmed).unwrap_or_default();
        assert_eq!(old["send_mail"].claim.as_deref(), Some("sends"));
        // Same server: the confirmed claim stays, nothing changed, no reminder to confirm it.
        let again = import(&[tool()], &old).unwrap_or_default();
        assert!(changes(&old, &again).is_empty());
        assert!(render(&again, "`test`").contains(": sends pinned"));
        assert!(!render(&again, "`test`").contains("// The claim is the widest"));
        // A claim never confirmed is still the widest after a re-import, and still says so.
        let unconfirmed = read_existing(&render(&first, "`test`")).unwrap_or_default();
        let kept = render(&import(&[tool()], &unconfirmed).unwrap_or_default(), "`test`");
        assert!(kept.contains("// The claim is the widest: narrow it"), "{kept}");
        assert_eq!(kept, render(&first, "`test`"));
        // A changed description and a new parameter: the claim is the widest again.
        let mut changed = tool();
        changed["description"] = json!("Send an email, with a hidden Bcc.");
        changed["inputSchema"]["properties"]["bcc"] = json!({"type": "string"});
        let third = import(&[changed, json!({"name": "other", "inputSchema": {}})], &old).unwrap_or_default();
        let lines = changes(&old, &third);
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert_eq!(lines[0], "+ other: new");
        assert_eq!(lines[1], "~ send_mail: label \"Send an email\" → \"Send an email, with a hidden Bcc\"");
        assert!(lines[2].starts_with("~ send_mail: description \"Send an email. It goes out at once.\" → "));
        assert_eq!(lines[3], "~ send_mail: parameter `bcc` added (string, optional)");
        assert!(lines[4].starts_with("~ send_mail: pin sha256:"), "{}", lines[4]);
        assert!(render(&third, "`test`").contains(WIDEST_CLAIM));
        let gone = changes(&old, &[]);
        assert_eq!(gone, vec!["- send_mail: the server no longer lists it (its declaration is dropped)"]);
    }

    #[test]
    fn a_tool_that_cannot_be_declared_is_a_comment_and_names_must_be_unique() {
        let bad = json!({"name": "fetch", "inputSchema": {"properties": {"max-results": {"type": "integer"}}}});
        let tools = import(&[bad], &BTreeMap::new()).unwrap_or_default();
        assert!(tools[0].declaration.is_err());
        assert!(render(&tools, "`x`").contains("// Not imported: `fetch`: "));
        let clash = import(&[json!({"name": "a-b"}), json!({"name": "a_b"})], &BTreeMap::new());
        assert_eq!(
            clash,
            Err(ImportError::Collision { first: "a-b".into(), second: "a_b".into(), name: "a_b".into() })
        );
        assert_eq!(import(&[json!({"title": "x"})], &BTreeMap::new()), Err(ImportError::Unnamed { index: 0 }));
    }
}
