//! Canonical JSON for pins: object keys sorted (by their UTF-16-agnostic byte order, as Rust sorts `str`), no
//! insignificant whitespace, strings escaped as serde_json escapes them, numbers as serde_json prints them
//! (integers as integers, fractions in their shortest round-trip form). Unlike the table's canonical JSON,
//! fractions are allowed: a server's schema may hold `"minimum": 0.5`.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical JSON text of `value`.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value);
    out
}

fn write(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(k) {
                    write(out, v);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, v);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The pin of a tool object as the server sent it: `sha256:` and the hex SHA-256 of its canonical JSON (name,
/// title, description, input and output schemas, annotations, `_meta`: every member).
pub fn pin(tool: &Value) -> String {
    let digest = Sha256::digest(to_string(tool).as_bytes());
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_depth_and_spacing_does_not_matter() {
        let a: Value = serde_json::from_str(r#"{ "b": 1, "a": {"y": [1, 2.5, "x"], "x": null} }"#).unwrap_or_default();
        assert_eq!(to_string(&a), r#"{"a":{"x":null,"y":[1,2.5,"x"]},"b":1}"#);
        let b = json!({"a": {"x": null, "y": [1, 2.5, "x"]}, "b": 1});
        assert_eq!(pin(&a), pin(&b));
        assert!(pin(&a).starts_with("sha256:") && pin(&a).len() == 71);
        // A changed description is another pin.
        assert_ne!(pin(&json!({"name": "t", "description": "a"})), pin(&json!({"name": "t", "description": "b"})));
        // Escapes as serde_json writes them.
        assert_eq!(to_string(&json!({"q\"": "a\nb\u{1}é"})), "{\"q\\\"\":\"a\\nb\\u0001é\"}");
    }

    #[test]
    fn the_pin_of_a_known_tool_is_stable() {
        let tool = json!({"name": "read_note", "description": "Read a note", "inputSchema": {"type": "object"}});
        assert_eq!(
            to_string(&tool),
            r#"{"description":"Read a note","inputSchema":{"type":"object"},"name":"read_note"}"#
        );
        // `hashlib.sha256(text).hexdigest()` in Python, for the text above.
        assert_eq!(pin(&tool), "sha256:fd15e59f8b34e378131ed07216857462ea9e4ae253133f0c5178be7e31e50c71");
    }
}
