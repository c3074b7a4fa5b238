//! `permitc explain`: renders the compiler's `Explanation`.

use super::*;

pub(in crate::cli) fn explain(
    path: &Path,
    agent: &str,
    skill: &str,
    tool: &str,
    mode: Option<&str>,
    via: &[String],
    format: Format,
) -> u8 {
    /// Why there is no explanation: a usage error (a malformed `--via`) or an unknown mode.
    enum Refusal {
        Via(Diagnostic),
        Message(String),
    }
    let result = with_analysis(path, format, |a| {
        let chain = super::parse_via(via, a.model.agents.keys().copied(), a.model.skills.keys().copied())
            .map_err(Refusal::Via)?;
        if let Some(m) = mode.filter(|m| !a.model.modes.contains_key(m)) {
            let near = crate::diagnostics::closest(m, a.model.modes.keys().copied());
            return Err(Refusal::Message(match near {
                Some(n) => format!("unknown mode `{m}`; did you mean `{n}`?"),
                None => format!("unknown mode `{m}`: the package declares no such mode"),
            }));
        }
        let e = crate::explain::explain_via(a, agent, skill, tool, mode, &chain);
        // A call through a link that is not a declared delegation is a decision, `never`, as `decide` and
        // the runtime give it (asked of a triple that is offered; one that is not says so first).
        Ok(match (&e, crate::explain::undeclared_link(a, agent, skill, &chain)) {
            (Explanation::Offered(_), Some(refusal)) => Explanation::Undeclared(crate::explain::UndeclaredChain {
                agent: agent.to_string(),
                skill: skill.to_string(),
                tool: tool.to_string(),
                via: chain,
                level: Level::Never,
                refusal,
            }),
            _ => e,
        })
    });
    let explanation = match result {
        Ok(Ok(e)) => e,
        Ok(Err(Refusal::Via(d))) => return super::usage_error(d),
        Ok(Err(Refusal::Message(message))) => {
            errln!("error: {message}");
            return 2;
        }
        Err(code) => return code,
    };
    match format {
        // Through a `Value`, so keys come out sorted, as every JSON output of `permitc`.
        Format::Json => match serde_json::to_value(&explanation) {
            Ok(v) if matches!(explanation, Explanation::NotOffered(_) | Explanation::Undeclared(_)) => outln!("{v}"),
            Ok(v) => outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
            Err(e) => errln!("error: {e}"),
        },
        Format::Human => out!("{}", explain_text(&explanation)),
    }
    match &explanation {
        Explanation::NotOffered(n) if n.unknown.is_some() => {
            errln!("error: {}", n.unknown.as_deref().unwrap_or_default());
            1
        }
        _ => 0,
    }
}

/// The text form of an explanation.
fn explain_text(e: &Explanation) -> String {
    let d = match e {
        Explanation::NotOffered(n) => {
            return format!("({}, {}, {}): never\n  not offered: {}\n", n.agent, n.skill, n.tool, n.reason);
        }
        Explanation::Undeclared(u) => {
            let via: String = u.via.iter().map(|l| format!(" via {l}")).collect();
            return format!("({}, {}, {}){via}: never\n  refused: {}\n", u.agent, u.skill, u.tool, u.refusal);
        }
        Explanation::Offered(d) => d,
    };
    let shown = match d.level {
        Some(l) => l.to_string(),
        None => format!(
            "depends on the arguments: {}",
            d.possible.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(" or ")
        ),
    };
    let in_mode = d.mode.as_ref().map(|m| format!(" in mode {m}")).unwrap_or_default();
    let via: String = d.via.iter().map(|l| format!(" via {l}")).collect();
    let mut out = format!("({}, {}, {}){via}{in_mode}: {shown}\n", d.agent, d.skill, d.tool);
    let routed = d.possible.iter().any(|l| matches!(l, Level::Propose | Level::ProposeEveryTime));
    out.push_str(&format!(
        "  route: {}{}\n",
        d.route_words,
        if routed { "" } else { " (unused: nothing is proposed)" }
    ));
    out.push_str("  because:\n");
    for r in &d.reasons {
        let decisive = if r.decisive { "*" } else { " " };
        let inherited = match r.inherited_from() {
            Some(callee) => format!(" (inherited: `{}` calls `{callee}`)", d.tool),
            None => String::new(),
        };
        let layer = match &r.link {
            Some(link) => format!("{} of link `{link}`", r.layer_words()),
            None => r.layer_words().to_string(),
        };
        match (&r.at, &r.text) {
            (Some(place), Some(text)) => out.push_str(&format!(
                "  {decisive} {}: {} — {}{inherited} at {place}: `{text}`\n",
                layer, r.level, r.rule
            )),
            _ => out.push_str(&format!("  {decisive} {}: {} — {}\n", layer, r.level, r.rule)),
        }
    }
    if d.witnesses.is_empty() {
        out.push_str("  effects: none (it only computes)\n");
    } else {
        out.push_str("  effects:\n");
        for w in &d.witnesses {
            let note = if w.assumed { " (assumed: an extern tool's claim)" } else { "" };
            out.push_str(&format!("    {}: {} at {}{note}\n", w.effect, w.path, w.at));
        }
    }
    if let Some(claim) = &d.claim {
        out.push_str(&format!("  claim: {claim} (levels use the claim)\n"));
    }
    if let Some(b) = &d.budget {
        let per_task = b.per_task.map_or(String::new(), |cap| format!(", {cap} per task"));
        out.push_str(&format!(
            "  budget: spends from `{}` by `{}` ({} {}): ceiling {}, alone up to {}{per_task} (declared at {})\n",
            b.name, b.by, b.currency, b.unit, b.ceiling, b.alone_up_to, b.at
        ));
        out.push_str(&format!(
            "    every execution reserves `{}` against the ceiling; a call over {} is at least propose, whatever the level\n",
            b.by, b.alone_up_to
        ));
        if let Some(cap) = b.per_task {
            out.push_str(&format!(
                "    and against its task's cap: one task (one operation key, delegated calls included) holds at most {cap} {} reserved and spent; a call with no task cannot spend from it\n",
                b.unit
            ));
        }
    }
    if let Some(param) = &d.shell {
        out.push_str(&format!(
            "  shell: `{param}` is judged part by part: each command of the line as if it were the whole call, the strictest part decides, and a line that is not judgeable is never\n"
        ));
    }
    if d.level.is_some() {
        out.push_str("  (* marks the rules that decide the level)\n");
    } else {
        out.push_str("  (the strictest entry whose condition holds decides; the class level when none holds)\n");
    }
    out
}
