//! How the runtime says things to a person: refusal messages, reasons, routes.

use crate::*;

pub(crate) fn words_of(value: Option<&str>) -> String {
    match value {
        Some(v) => format!("`{v}`"),
        None => "none".to_string(),
    }
}

pub(crate) fn outcome_words(outcome: &RunOutcome) -> (&'static str, Option<String>) {
    match outcome {
        RunOutcome::Done(_) => ("done", None),
        RunOutcome::Failed(why) => ("failed", Some(why.clone())),
        RunOutcome::Unknown(why) => ("unknown", Some(why.clone())),
    }
}

/// A route with its name in backticks: "person `Noor`", "role `SupportReviewer`".
pub(crate) fn route_words(route: &Route) -> String {
    match route {
        Route::Requester => "the requester".to_string(),
        Route::Person(p) => format!("person `{p}`"),
        Route::Role(r) => format!("role `{r}`"),
        Route::Queue(q) => format!("queue `{q}`"),
    }
}

pub(crate) fn reasons_for(reasons: &[Reason], level: Level) -> String {
    let texts: Vec<String> = reasons.iter().filter(|r| r.level == level).map(describe_reason).collect();
    if texts.is_empty() { "the table says so".to_string() } else { texts.join("; ") }
}

pub(crate) fn describe_reason(r: &Reason) -> String {
    let mut out = String::new();
    if let Some(layer) = r.layer {
        out.push_str(&format!("{layer} layer: "));
    }
    out.push_str(&r.rule);
    if let Some(via) = &r.via {
        out.push_str(&format!(" via `{via}`"));
    }
    if let Some(at) = &r.at {
        out.push_str(&format!(" at {at}"));
    }
    out
}

/// The message a refused call gets: the triple, and the reason or the rules behind the level (layer, rule,
/// callee, file:line).
pub(crate) fn refusal_message(d: &Decision) -> String {
    if let Some(refusal) = &d.refusal {
        return format!("`{}` may not call `{}` in `{}`: {refusal}", d.agent, d.tool, d.skill);
    }
    let rules = reasons_for(&d.reasons, d.table_level.unwrap_or(d.level));
    match d.level {
        Level::Never => format!("`{}` never calls `{}` in `{}`: {rules}", d.agent, d.tool, d.skill),
        Level::Alone => format!("`{}` calls `{}` in `{}` alone: {rules}", d.agent, d.tool, d.skill),
        level => format!("`{}` must propose `{}` in `{}` ({level}): {rules}", d.agent, d.tool, d.skill),
    }
}
