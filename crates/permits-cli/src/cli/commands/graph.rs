//! `permitc graph`.

use super::*;

pub(in crate::cli) fn graph(paths: &[PathBuf], agent: Option<&str>) -> u8 {
    let mut worst = 0;
    for path in paths {
        let name = path.display().to_string();
        match with_analysis(path, Format::Human, |a| {
            if let Some(agent) = agent {
                if !a.model.agents.contains_key(agent) {
                    return Err(format!("unknown agent `{agent}` in `{name}`"));
                }
            }
            Ok(crate::graph::dot(a, &name, agent))
        }) {
            Ok(Ok(dot)) => out!("{dot}"),
            Ok(Err(msg)) => {
                errln!("error: {msg}");
                worst = worst.max(1);
            }
            Err(code) => worst = worst.max(code),
        }
    }
    worst
}
