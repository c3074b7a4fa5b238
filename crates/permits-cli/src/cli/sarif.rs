//! `permitc check --format sarif`: SARIF 2.1.0 for code-scanning tools.

use super::*;

/// A relative path as a URI reference (percent-encoding what a URI cannot hold), an absolute one as a
/// `file://` URI.
pub(super) fn path_uri(path: &str) -> String {
    let mut out = String::new();
    if path.starts_with('/') {
        out.push_str("file://");
    }
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(char::from(b)),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub(super) fn sarif_location(l: &crate::diagnostics::Label, sources: &Sources) -> serde_json::Value {
    let src = sources.get(l.span.file);
    let (line, column) = src.line_col_chars(l.span.start);
    let (end_line, end_column) = src.line_col_chars(l.span.end);
    serde_json::json!({
        "physicalLocation": {
            "artifactLocation": { "uri": path_uri(&sources.display_name(l.span.file)) },
            "region": { "startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column.max(1) },
        },
    })
}

pub(super) fn sarif_result(d: &Diagnostic, sources: &Sources) -> serde_json::Value {
    let mut text = d.message.clone();
    if let Some(help) = &d.help {
        text.push_str(&format!(" (help: {help})"));
    }
    let mut result = serde_json::json!({
        "ruleId": d.code.as_str(),
        "level": if d.is_error() { "error" } else { "warning" },
        "message": { "text": text },
    });
    if let Some(p) = &d.primary {
        let mut loc = sarif_location(p, sources);
        if !p.message.is_empty() {
            loc["message"] = serde_json::json!({ "text": p.message });
        }
        result["locations"] = serde_json::json!([loc]);
    }
    if !d.secondary.is_empty() {
        let related: Vec<_> = d
            .secondary
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut loc = sarif_location(l, sources);
                loc["id"] = serde_json::json!(i + 1);
                loc["message"] =
                    serde_json::json!({ "text": if l.message.is_empty() { "related" } else { l.message.as_str() } });
                loc
            })
            .collect();
        result["relatedLocations"] = serde_json::json!(related);
    }
    result
}

pub(super) fn sarif_log(results: Vec<serde_json::Value>, failures: Vec<serde_json::Value>) -> serde_json::Value {
    let mut codes: Vec<&str> = results.iter().filter_map(|r| r["ruleId"].as_str()).collect();
    codes.sort_unstable();
    codes.dedup();
    let rules: Vec<_> = codes
        .iter()
        .map(|c| {
            let text = crate::diagnostics::Code::from_name(c)
                .map_or("a permits diagnostic", crate::diagnostics::Code::meaning);
            serde_json::json!({ "id": c, "shortDescription": { "text": text } })
        })
        .collect();
    serde_json::json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "permitc",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "invocations": [{ "executionSuccessful": failures.is_empty(), "toolExecutionNotifications": failures }],
            "results": results,
        }],
    })
}
