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
    match super::parse_via(c.via, table.agents.keys().map(String::as_str), table.skills.keys().map(String::as_str)) {
        Ok(chain) => {
            for l in chain {
                call = call.delegated_by(l.agent, l.skill);
            }
        }
        Err(d) => return super::usage_error(d),
    }
    call.operation_key = c.task.map(str::to_string);
    let d = crate::runtime::decide_table(&table, &call);
    let automatic = automatic_grant(&table, &d, &call);
    let Some(task) = c.task else {
        match format {
            Format::Json => match &automatic {
                None => outln!("{}", d.to_json()),
                Some(a) => {
                    let mut value = serde_json::to_value(&d).unwrap_or(serde_json::Value::Null);
                    if let Some(object) = value.as_object_mut() {
                        object.insert("automatic_grant".into(), a.to_json());
                    }
                    outln!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
                }
            },
            Format::Human => outln!("{}", summary(&table, &d, automatic.as_ref())),
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
                if let Some(a) = &automatic {
                    object.insert("automatic_grant".into(), a.to_json());
                }
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
            let mut line = format!("{}; task `{task}`", summary(&table, &d, automatic.as_ref()));
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

/// A `propose` call the runtime grants by itself, nobody asked (spec §6 "Automatic grants"): it spends an
/// amount within its budget's `alone_up_to` that fits under the ceiling and, when the budget has one, the
/// per-task cap. `decide` keeps no ledger, so the budget and the task have spent nothing.
struct AutomaticGrant {
    budget: String,
    amount: u64,
    unit: String,
    alone_up_to: u64,
}

impl AutomaticGrant {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "budget": self.budget,
            "amount": self.amount,
            "unit": self.unit,
            "alone_up_to": self.alone_up_to,
        })
    }
}

/// Whether `d` would be granted automatically (see [`AutomaticGrant`]).
fn automatic_grant(
    table: &crate::table::Table,
    d: &crate::runtime::Decision,
    call: &crate::runtime::Call,
) -> Option<AutomaticGrant> {
    if d.level != crate::table::Level::Propose {
        return None;
    }
    let tool = table.tools.get(&call.tool)?;
    let spend = table.spend_of(tool, call.arguments.as_object()?).ok()??;
    let fits = !spend.over_allowance()
        && spend.amount <= spend.info.ceiling
        && spend.info.per_task.is_none_or(|cap| spend.amount <= cap);
    fits.then(|| AutomaticGrant {
        budget: spend.budget.to_string(),
        amount: spend.amount,
        unit: spend.info.unit.clone(),
        alone_up_to: spend.info.alone_up_to,
    })
}

/// The human line of a decision: the runtime's summary, with what it leaves out — for an automatic grant
/// that nobody is asked (instead of who it would wait on), and for a `never` that has no refusal, the rules
/// that make it `never`, as `explain` names them (the layer, the link of a chain, the rule and its place).
fn summary(table: &crate::table::Table, d: &crate::runtime::Decision, automatic: Option<&AutomaticGrant>) -> String {
    if let Some(a) = automatic {
        let mut shown = d.clone();
        shown.decider = None;
        return format!(
            "{}, granted automatically: nobody is asked ({} {} is within the `{}` allowance of {} {}; decide keeps no ledger, so nothing is spent yet)",
            shown.summary(),
            a.amount,
            a.unit,
            a.budget,
            a.alone_up_to,
            a.unit
        );
    }
    let line = d.summary();
    if d.level != crate::table::Level::Never || d.refusal.is_some() {
        return line;
    }
    // The link reasons come last in `d.reasons`, nearest link first, after the triple's own.
    let links = table.chain_links(&d.agent, &d.skill, &d.tool, &d.via).unwrap_or_default();
    let from_links: usize = links.iter().map(|l| l.because.len()).sum();
    let own = d.reasons.len().checked_sub(from_links).unwrap_or(d.reasons.len());
    let mut tagged: Vec<(Option<&crate::table::ChainLink>, &crate::table::Reason)> =
        d.reasons[..own].iter().map(|r| (None, r)).collect();
    for (link, entry) in d.via.iter().zip(&links) {
        tagged.extend(entry.because.iter().map(|r| (Some(link), r)));
    }
    let words: Vec<String> = tagged
        .into_iter()
        .filter(|(_, r)| r.level == crate::table::Level::Never)
        .map(|(link, r)| {
            let layer = match r.layer {
                Some(crate::table::Layer::Package) => "package-wide layer",
                Some(crate::table::Layer::Agent) => "agent layer",
                Some(crate::table::Layer::Skill) => "skill layer",
                Some(crate::table::Layer::Mode) => "mode layer",
                None => "reserved subject",
            };
            let of_link = link.map(|l| format!(" of link `{l}`")).unwrap_or_default();
            let at = r.at.as_ref().map(|at| format!(" at {at}")).unwrap_or_default();
            format!("{layer}{of_link}: {}{at}", r.rule)
        })
        .collect();
    if words.is_empty() { line } else { format!("{line} ({})", words.join("; ")) }
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
