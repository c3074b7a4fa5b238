//! `permitc decide`.

use super::*;

/// The call `permitc decide` decides.
pub(in crate::cli) struct TripleCall<'a> {
    pub(in crate::cli) agent: &'a str,
    pub(in crate::cli) skill: &'a str,
    pub(in crate::cli) tool: &'a str,
    pub(in crate::cli) args: Option<&'a str>,
    pub(in crate::cli) requester: Option<&'a str>,
    pub(in crate::cli) mode: Option<&'a str>,
    /// `--via AGENT.SKILL`, nearest first.
    pub(in crate::cli) via: &'a [String],
}

pub(in crate::cli) fn decide(table_path: &Path, c: &TripleCall<'_>, trust: &[String], format: Format) -> u8 {
    let table = match crate::table::Table::load_path(table_path) {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return 2;
        }
    };
    if !trust.is_empty() {
        if let Err(e) = check_signature(table_path, &table, trust) {
            errln!("error: `{}`: {e}", table_path.display());
            return 2;
        }
    }
    // Arguments that are not JSON are a usage error; JSON that does not fit the tool's parameters is a
    // decision (`never`, with the reason).
    let arguments = match c.args.map(serde_json::from_str::<serde_json::Value>) {
        None => serde_json::Value::Object(serde_json::Map::new()),
        Some(Ok(value)) => value,
        Some(Err(e)) => {
            errln!("error: the arguments are not JSON: {e}");
            return 2;
        }
    };
    let mut call = crate::runtime::Call::new(c.agent, c.skill, c.tool).with_arguments(arguments);
    call.requester = c.requester.map(str::to_string);
    call.mode = c.mode.map(str::to_string);
    for link in c.via {
        match link.split_once('.') {
            Some((agent, skill)) if !agent.is_empty() && !skill.is_empty() && !skill.contains('.') => {
                call = call.delegated_by(agent, skill);
            }
            _ => {
                errln!("error: `--via {link}` is not `AGENT.SKILL` (a delegating agent and the skill it works in)");
                return 2;
            }
        }
    }
    let d = crate::runtime::decide_table(&table, &call);
    match format {
        Format::Json => outln!("{}", d.to_json()),
        Format::Human => outln!("{}", d.summary()),
    }
    0
}

/// Checks `TABLE.sig` against the trusted keys (each 64 hex digits, or a file holding them).
fn check_signature(table_path: &Path, table: &crate::table::Table, trust: &[String]) -> Result<(), String> {
    let mut keys = Vec::new();
    for t in trust {
        let path = Path::new(t);
        if path.is_file() {
            keys.push(std::fs::read_to_string(path).map_err(|e| format!("cannot read the key `{t}`: {e}"))?);
        } else {
            keys.push(t.clone());
        }
    }
    let trusted = crate::runtime::TrustedKeys::from_hex(keys.iter().map(String::as_str))?;
    let sig_path = super::compile::signature_path(table_path);
    let signature = match std::fs::read_to_string(&sig_path) {
        Ok(text) => Some(
            serde_json::from_str::<crate::runtime::TableSignature>(&text)
                .map_err(|e| format!("`{}` is not a table signature: {e}", sig_path.display()))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read `{}`: {e}", sig_path.display())),
    };
    trusted.verify(table, signature.as_ref()).map_err(|e| e.to_string())
}
