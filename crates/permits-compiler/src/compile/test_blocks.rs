//! The package's `test` blocks, on the one evaluator (spec §7).

use super::{Analysis, TestFailure, TestOutcome};
use crate::diagnostics::{Code, Diagnostic};
use crate::table::{Level, Table};

/// Runs the package's `test` blocks against its table, on the one evaluator (spec §7): an expectation
/// written with arguments states exactly what the runtime decides for that call ([`Table::level_of`], no
/// person, then step 7 of §3c: in an `unattended` mode a proposal routed to the requester is `never`);
/// written without, the level for every well-typed argument set ([`Table::possible_levels`], the
/// allowance floor and step 7 included), an error when that depends on the arguments.
pub(super) fn run_tests(a: &Analysis<'_>, table: &Table) -> (Vec<TestOutcome>, Vec<Diagnostic>) {
    let mut outcomes = Vec::new();
    let mut diags = Vec::new();
    for t in &a.model.tests {
        let mut failures = Vec::new();
        for e in &t.expects {
            let mut triple = format!("({}, {}, {})", e.agent, e.skill, e.tool);
            for link in &e.via {
                triple.push_str(&format!(" via `{link}`"));
            }
            if let Some(m) = e.mode {
                triple.push_str(&format!(" in {m}"));
            }
            let (actual, why) = match expectation_level(table, e) {
                Ok(found) => found,
                Err(levels) => {
                    let words: Vec<String> = levels.iter().map(|l| format!("`{l}`")).collect();
                    let words = words.join(" or ");
                    diags.push(
                        Diagnostic::new(
                            Code::TestDependsOnArguments,
                            format!("test `{}`: the level of {triple} depends on the arguments: {words}", t.name),
                        )
                        .at(e.span, "no arguments given")
                        .help(format!(
                            "give the call's arguments, one `expect` per case: `expect {}.{}.{}(…) is {}`",
                            e.agent, e.skill, e.tool, e.level
                        )),
                    );
                    let actual = levels.last().copied().unwrap_or(Level::Never);
                    failures.push(TestFailure {
                        triple,
                        expected: e.level,
                        actual,
                        why: format!("it depends on the arguments: {words}"),
                    });
                    continue;
                }
            };
            if actual != e.level {
                diags.push(
                    Diagnostic::new(
                        Code::TestFailed,
                        format!("test `{}`: {triple} is `{actual}`, not `{}`", t.name, e.level),
                    )
                    .at(e.level_span, format!("expected `{}`", e.level))
                    .with(e.span, format!("the table says `{actual}`"))
                    .help(format!("why: {why}; change the policy or the expectation")),
                );
                failures.push(TestFailure { triple, expected: e.level, actual, why });
            }
        }
        outcomes.push(TestOutcome { name: t.name.to_string(), expectations: t.expects.len(), failures });
    }
    (outcomes, diags)
}

/// The level an expectation finds, with why; `Err` with every possible level when it is written without
/// arguments and the level depends on them.
fn expectation_level(table: &Table, e: &crate::check::ExpectModel<'_>) -> Result<(Level, String), Vec<Level>> {
    if e.args.is_empty() {
        let found = table.possible_levels_via(e.agent, e.skill, e.tool, e.mode, &e.via);
        // Spec §3c step 7, on every possible level (the allowance is unknown without arguments).
        let unattended = unattended_asks_nobody(table, e.mode, table.route_via(e.agent, e.skill, e.tool, &e.via));
        let spends = table.tools.get(e.tool).is_some_and(|t| t.spends.is_some());
        let levels = found.clone().map(|levels| {
            levels
                .into_iter()
                .flat_map(|l| match l {
                    _ if !unattended => vec![l],
                    Level::Propose if spends => vec![Level::Propose, Level::Never],
                    Level::Propose | Level::ProposeEveryTime => vec![Level::Never],
                    _ => vec![l],
                })
                .collect::<std::collections::BTreeSet<Level>>()
        });
        if levels.as_ref().is_ok_and(|l| l.len() == 1 && l.contains(&Level::Never))
            && !found.as_ref().is_ok_and(|l| l.len() == 1 && l.contains(&Level::Never))
        {
            return Ok((Level::Never, UNATTENDED.to_string()));
        }
        return match levels {
            Err(why) => Ok((Level::Never, why.to_string())),
            Ok(levels) if levels.len() == 1 => {
                let level = levels.first().copied().unwrap_or(Level::Never);
                let entry = table.entry(e.agent, e.skill, e.tool);
                let mut because: Vec<crate::table::Reason> = entry.map(|x| x.because.clone()).unwrap_or_default();
                if let Some(m) = e.mode.and_then(|m| entry.and_then(|x| x.modes.get(m))) {
                    because.extend(m.because.iter().cloned());
                }
                Ok((level, deciding_rules(&because, &link_reasons(table, e), level)))
            }
            Ok(levels) => Err(levels.into_iter().collect()),
        };
    }
    let arguments = serde_json::Value::Object(e.args.clone());
    let call = crate::table::CallRef {
        agent: e.agent,
        skill: e.skill,
        tool: e.tool,
        arguments: &arguments,
        requester: None,
        mode: e.mode,
        via: &e.via,
    };
    Ok(match table.level_of(call) {
        Err(why) => (Level::Never, why.to_string()),
        // Spec §3c step 7, after the automatic grant (a `propose` spend within its allowance asks nobody).
        Ok(of)
            if matches!(of.level, Level::Propose | Level::ProposeEveryTime)
                && unattended_asks_nobody(table, e.mode, Some(of.route))
                && !(of.level == Level::Propose && !of.over_allowance && of.tool.spends.is_some()) =>
        {
            (Level::Never, UNATTENDED.to_string())
        }
        Ok(of) if of.floored => {
            let spend = table.spend_of(of.tool, &e.args).ok().flatten();
            (of.level, spend.map(|s| s.allowance_words()).unwrap_or_default())
        }
        Ok(of) => {
            let mut because = of.entry.because.clone();
            if let Some(m) = of.mode {
                because.extend(m.because.iter().cloned());
            }
            (of.level, deciding_rules(&because, &link_reasons(table, e), of.level))
        }
    })
}

/// Why step 7 made a call `never`, as the runtime says it.
const UNATTENDED: &str = "unattended: nobody to ask";

/// Whether a proposal in `mode` routed `route` would wait for the requester while nobody is there (spec
/// §3c step 7): the mode is `unattended` and the route is `requester` (an expectation names no person, so a
/// person route is never the requester's).
fn unattended_asks_nobody(table: &Table, mode: Option<&str>, route: Option<&crate::table::Route>) -> bool {
    let unattended = mode.and_then(|m| table.modes.get(m)).is_some_and(|m| m.unattended);
    unattended && matches!(route, Some(crate::table::Route::Requester))
}

/// The reasons of each link of `e`'s delegation chain (spec §3b: every link's rows are more layers of the
/// call), each with its link; none for a direct call or a chain that is not declared.
fn link_reasons(table: &Table, e: &crate::check::ExpectModel<'_>) -> Vec<(String, crate::table::Reason)> {
    let links = table.chain_links(e.agent, e.skill, e.tool, &e.via).unwrap_or_default();
    e.via
        .iter()
        .zip(links)
        .flat_map(|(link, rows)| rows.because.iter().map(move |r| (link.to_string(), r.clone())))
        .collect()
}

/// The rules behind a level, in words: "decided by `never [X]` (a.permits:3)"; a link's rule (`links`, spec
/// §3b) names its link: "decided by `sends: never` (a.permits:8, link `Coder.FixBug`)".
fn deciding_rules(because: &[crate::table::Reason], links: &[(String, crate::table::Reason)], level: Level) -> String {
    let entry = because.iter().map(|r| (None, r));
    let links = links.iter().map(|(link, r)| (Some(link.as_str()), r));
    let rules: Vec<String> = entry
        .chain(links)
        .filter(|(_, r)| r.level == level)
        .map(|(link, r)| match (&r.at, link) {
            (Some(at), Some(link)) => format!("`{}` ({at}, link `{link}`)", r.rule),
            (None, Some(link)) => format!("`{}` (link `{link}`)", r.rule),
            (Some(at), None) => format!("`{}` ({at})", r.rule),
            (None, None) => format!("`{}`", r.rule),
        })
        .collect();
    if rules.is_empty() { "the rows of the entry".to_string() } else { format!("decided by {}", rules.join(", ")) }
}
