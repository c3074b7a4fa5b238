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
    /// `--task KEY`.
    pub(in crate::cli) task: Option<&'a str>,
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
        match crate::table::ChainLink::parse(link) {
            Some(l) => call = call.delegated_by(l.agent, l.skill),
            None => {
                errln!("error: `--via {link}` is not `AGENT.SKILL` (a delegating agent and the skill it works in)");
                return 2;
            }
        }
    }
    call.operation_key = c.task.map(str::to_string);
    let d = crate::runtime::decide_table(&table, &call);
    let Some(task) = c.task else {
        match format {
            Format::Json => outln!("{}", d.to_json()),
            Format::Human => outln!("{}", d.summary()),
        }
        return 0;
    };
    // Spec §6 "Per task", without a ledger: the task has nothing spent or reserved yet.
    let spend = (d.level != crate::table::Level::Never)
        .then(|| table.tools.get(c.tool))
        .flatten()
        .and_then(|tool| call.arguments.as_object().and_then(|args| table.spend_of(tool, args).ok().flatten()));
    match format {
        Format::Json => {
            let mut value = serde_json::to_value(&d).unwrap_or(serde_json::Value::Null);
            if let Some(object) = value.as_object_mut() {
                object.insert("task".into(), serde_json::Value::String(task.to_string()));
                if let Some(s) = &spend {
                    object.insert(
                        "spend".into(),
                        serde_json::json!({
                            "budget": s.budget,
                            "amount": s.amount,
                            "unit": s.info.unit,
                            "ceiling": s.info.ceiling,
                            "alone_up_to": s.info.alone_up_to,
                            "per_task": s.info.per_task,
                            "task_spent": 0,
                            "task_reserved": 0,
                            "task_room": s.info.per_task,
                            "fits_task": s.info.per_task.is_none_or(|cap| s.amount <= cap),
                        }),
                    );
                }
            }
            outln!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        }
        Format::Human => {
            let mut line = format!("{}; task `{task}`", d.summary());
            if let Some(s) = &spend {
                let unit = &s.info.unit;
                match s.info.per_task {
                    Some(cap) if s.amount > cap => line.push_str(&format!(
                        ": budget `{}`: {} {unit} is more than the {cap} {unit} one task may hold: refused at grant",
                        s.budget, s.amount
                    )),
                    Some(cap) => line.push_str(&format!(
                        ": budget `{}`: {} {unit} of the {cap} {unit} one task may hold ({} left after it; decide keeps no ledger, so the task has spent nothing)",
                        s.budget,
                        s.amount,
                        cap - s.amount
                    )),
                    None => line.push_str(&format!(": budget `{}` has no per-task cap", s.budget)),
                }
            }
            outln!("{line}");
        }
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
