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
