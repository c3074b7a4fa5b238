//! One module per subcommand.

use super::*;

mod audit;
mod check;
mod compile;
mod decide;
mod diff;
mod explain;
mod fmt;
mod graph;
mod keygen;
mod test;

pub(super) use audit::audit_verify;
pub(super) use check::check;
pub(super) use compile::compile_cmd;
pub(super) use decide::{TripleCall, decide};
pub(super) use diff::diff_cmd;
pub(super) use explain::explain;
pub(super) use fmt::fmt;
pub(super) use graph::graph;
pub(super) use keygen::keygen;
pub(super) use test::test;

/// Reads the `--via AGENT.SKILL` links of `decide` and `explain` (nearest first) against the names the package
/// declares: `agents` and `skills`. A link that is not `AGENT.SKILL`, or names an agent or a skill the package
/// does not declare, is a usage error (`permits::usage::via`, with the nearest name when there is one); a link
/// of declared names that is not a declared delegation is left to the decision, which is `never`.
pub(super) fn parse_via<'n>(
    via: &[String],
    agents: impl Iterator<Item = &'n str> + Clone,
    skills: impl Iterator<Item = &'n str> + Clone,
) -> Result<Vec<crate::table::ChainLink>, Diagnostic> {
    use crate::diagnostics::{Code, closest};
    let mut chain = Vec::with_capacity(via.len());
    for text in via {
        let Some(link) = crate::table::ChainLink::parse(text) else {
            return Err(Diagnostic::new(Code::UsageVia, format!("`--via {text}` is not `AGENT.SKILL`"))
                .help("name a delegating agent and the skill it works in, joined by one `.`: `--via Coder.FixBug`"));
        };
        for (kind, name, mut known) in [
            ("agent", link.agent.as_str(), agents.clone().collect::<Vec<_>>()),
            ("skill", link.skill.as_str(), skills.clone().collect::<Vec<_>>()),
        ] {
            if known.contains(&name) {
                continue;
            }
            known.sort_unstable();
            let d = Diagnostic::new(Code::UsageVia, format!("`--via {text}`: the package declares no {kind} `{name}`"));
            return Err(match closest(name, known.iter().copied()) {
                Some(near) => d.help(format!("did you mean `{near}`?")),
                None => d.help(format!("the package's {kind}s: {}", known.join(", "))),
            });
        }
        chain.push(link);
    }
    Ok(chain)
}

/// Prints a usage error as a miette diagnostic on stderr; the exit code of a usage error.
pub(super) fn usage_error(d: Diagnostic) -> u8 {
    err!("{}", render(&[d], &Sources::default(), colour()));
    2
}
