//! Offer queries (spec §3, §5): the levels of a skill's tools and the tools to offer the model.

use crate::*;

impl Runtime {
    /// The table's level of each tool of `skill` for `agent`, in the skill's declared order (spec §3); empty
    /// when the skill is unknown. A tool the agent is not offered there is `never`; an entry whose level
    /// depends on arguments (a condition) shows its level without arguments, `never` when a condition needs
    /// one (see [`Runtime::decide`] for a real call).
    pub fn levels(&self, agent: &str, skill: &str) -> Vec<(String, Level)> {
        self.levels_in(agent, skill, None)
    }

    /// [`Runtime::levels`] for calls in `mode` (spec §3c): the mode's row is one more layer, so a tool that
    /// is `never` in the mode is `never` here; every tool is `never` in a mode the table does not declare.
    pub fn levels_in(&self, agent: &str, skill: &str, mode: Option<&str>) -> Vec<(String, Level)> {
        self.levels_via(agent, skill, mode, &[])
    }

    /// [`Runtime::levels_in`] for calls delegated along `via` (spec §3b; nearest first, root last; empty for
    /// direct calls): every link's two layers are more layers, so a tool is never looser than any link
    /// makes it, and every tool is `never` on a chain with a link that is not a declared delegation. A
    /// link whose level depends on the arguments shows its level without arguments (`never` when a condition
    /// needs one), as an entry does.
    pub fn levels_via(
        &self,
        agent: &str,
        skill: &str,
        mode: Option<&str>,
        via: &[crate::table::ChainLink],
    ) -> Vec<(String, Level)> {
        let table = self.table();
        let known_mode = mode.is_none_or(|m| table.modes.contains_key(m));
        let offered = table.agents.get(agent).is_some_and(|a| a.skills.iter().any(|s| s == skill));
        let Some(s) = table.skills.get(skill) else { return Vec::new() };
        s.tools
            .iter()
            .map(|t| {
                let level = match (offered && known_mode, table.entry(agent, skill, t), table.tools.get(t)) {
                    (true, Some(entry), Some(tool)) => {
                        crate::decision::entry_level_in(entry, tool, mode.and_then(|m| entry.modes.get(m)))
                    }
                    _ => Level::Never,
                };
                let level = match table.chain_links(agent, skill, t, via) {
                    None => Level::Never,
                    Some(links) => {
                        links.iter().fold(level, |level, link| level.max(link_level_without_arguments(link)))
                    }
                };
                (t.clone(), level)
            })
            .collect()
    }

    /// The tools to offer the model for `agent` in `skill`, in the skill's order: every tool that is not
    /// `never` for every call (a `never` tool is not offered at all; a tool whose level depends on a
    /// condition is offered, and each call is decided on its arguments).
    pub fn offered_tools(&self, agent: &str, skill: &str) -> Vec<OfferedTool> {
        self.offered_tools_in(agent, skill, None)
    }

    /// [`Runtime::offered_tools`] for calls in `mode` (spec §3c): a tool that is `never` in the mode is not
    /// offered to the model in it (nor listed by a gateway); a mode the table does not declare offers nothing.
    pub fn offered_tools_in(&self, agent: &str, skill: &str, mode: Option<&str>) -> Vec<OfferedTool> {
        self.offered_tools_via(agent, skill, mode, &[])
    }

    /// [`Runtime::offered_tools_in`] for calls delegated along `via` (spec §3b; nearest first, root last;
    /// empty for direct calls): a tool some link makes `never` is not offered, and a tool's `level` is the
    /// strictest of its entry's and every link's stated level (`None` when a condition of one of them
    /// decides). A chain with a link that is not a declared delegation offers nothing.
    pub fn offered_tools_via(
        &self,
        agent: &str,
        skill: &str,
        mode: Option<&str>,
        via: &[crate::table::ChainLink],
    ) -> Vec<OfferedTool> {
        let table = self.table();
        if !table.agents.get(agent).is_some_and(|a| a.skills.iter().any(|s| s == skill)) {
            return Vec::new();
        }
        if mode.is_some_and(|m| !table.modes.contains_key(m)) {
            return Vec::new();
        }
        let Some(s) = table.skills.get(skill) else { return Vec::new() };
        s.tools
            .iter()
            .filter_map(|name| {
                let tool = table.tools.get(name)?;
                let entry = table.entry(agent, skill, name)?;
                let moded = mode.and_then(|m| entry.modes.get(m));
                let level = moded.map_or(entry.level, |m| m.level);
                let links = table.chain_links(agent, skill, name, via)?;
                if links.iter().any(|l| l.level == Some(Level::Never)) {
                    return None;
                }
                // Stated only when the entry's and every link's level is.
                let level = level.and_then(|l| links.iter().try_fold(l, |acc, link| link.level.map(|x| x.max(acc))));
                if entry.reserved || tool.reserved.is_some() || level == Some(Level::Never) {
                    return None;
                }
                Some(OfferedTool {
                    name: name.clone(),
                    label: tool.label.clone(),
                    doc: tool.doc.clone(),
                    params: tool.params.clone(),
                    level,
                    pinned: tool.pinned.clone(),
                })
            })
            .collect()
    }
}

/// A link's level without arguments (spec §3b): stated, or its rows on no arguments; `never` when a condition
/// needs an argument.
fn link_level_without_arguments(link: &crate::table::LinkEntry) -> Level {
    let none = serde_json::Map::new();
    link.level_on(crate::table::Arguments::new(&none)).unwrap_or(Level::Never)
}
