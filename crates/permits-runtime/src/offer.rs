//! Offer queries (spec §3, §5): the levels of a skill's tools and the tools to offer the model.

use crate::*;

impl Runtime {
    /// The table's level of each tool of `skill` for `agent`, in the skill's declared order (spec §3); empty
    /// when the skill is unknown. A tool the agent is not offered there is `never`; an entry whose level
    /// depends on arguments (a condition) shows its level without arguments, `never` when a condition needs
    /// one (see [`Runtime::decide`] for a real call).
    pub fn levels(&self, agent: &str, skill: &str) -> Vec<(String, Level)> {
        let table = self.table();
        let offered = table.agents.get(agent).is_some_and(|a| a.skills.iter().any(|s| s == skill));
        let Some(s) = table.skills.get(skill) else { return Vec::new() };
        s.tools
            .iter()
            .map(|t| {
                let level = match (offered, table.entry(agent, skill, t), table.tools.get(t)) {
                    (true, Some(entry), Some(tool)) => entry_level(entry, tool),
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
        let table = self.table();
        if !table.agents.get(agent).is_some_and(|a| a.skills.iter().any(|s| s == skill)) {
            return Vec::new();
        }
        let Some(s) = table.skills.get(skill) else { return Vec::new() };
        s.tools
            .iter()
            .filter_map(|name| {
                let tool = table.tools.get(name)?;
                let entry = table.entry(agent, skill, name)?;
                if entry.reserved || tool.reserved.is_some() || entry.level == Some(Level::Never) {
                    return None;
                }
                Some(OfferedTool {
                    name: name.clone(),
                    label: tool.label.clone(),
                    doc: tool.doc.clone(),
                    params: tool.params.clone(),
                    level: entry.level,
                })
            })
            .collect()
    }
}
