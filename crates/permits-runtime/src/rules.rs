//! Standing rules (spec §5 "Standing rules"): making, revoking and listing them.

use crate::*;

impl Runtime {
    /// Makes a standing rule, "from now on, alone" (spec §5 "Standing rules"): only over entries whose level
    /// is exactly `propose` (refused for `never`, `propose_every_time`, a tool outside the skill, and a rule
    /// for [`Scope::AnyArguments`] on a tool with a `shell` parameter, which spec §5 does not allow); for
    /// oneself by a person admitted by `widens_autonomy` (or `supervises`), for someone else or everybody
    /// only by `supervises`; on a routed triple only by a decider of the route who is not the person the
    /// work is for, or a supervisor ([`may_make_rule`]). It binds the tool's
    /// `definition_digest` and each covered entry's `entry_digest`.
    ///
    /// Errors: [`Refusal::Rule`] with the reason, [`RuntimeError::Store`].
    pub fn allow_alone(&self, rule: &NewRule) -> Result<StandingRule, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| self.make_rule(tx, events, &table, rule, now))
    }

    /// Revokes a standing rule (spec §5 `revoke_rule`): by its maker or a supervisor, with a reason. Revoking
    /// a revoked rule changes nothing.
    ///
    /// Errors: [`Refusal::ReasonRequired`], [`Refusal::NotDecider`], [`RuntimeError::UnknownRule`],
    /// [`RuntimeError::Store`].
    pub fn revoke_rule(&self, id: &str, by: &str, why: &str) -> Result<StandingRule, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            let Some(mut rule) = tx.rules()?.into_iter().find(|r| r.id == id) else {
                let message = format!("there is no standing rule `{id}`");
                self.refuse(events, by, About::Operation(id), Refusal::Rule, message);
                return Err(RuntimeError::UnknownRule(id.to_string()));
            };
            if rule.revoked.is_some() {
                return Ok(rule);
            }
            if let Err(message) = limits::check_text("the reason", why, limits::MAX_REASON_BYTES) {
                return Err(self.refuse(events, by, About::Rule(&rule), Refusal::TooLarge, message));
            }
            if !display::has_visible(why) {
                return Err(self.refuse(
                    events,
                    by,
                    About::Rule(&rule),
                    Refusal::ReasonRequired,
                    "revoking a standing rule needs a reason".into(),
                ));
            }
            if rule.by != by && !holds(&table, by, &table.authority.supervises) {
                let message = format!(
                    "only `{}`, who made standing rule `{}`, or a supervisor may revoke it, not `{by}`",
                    rule.by, rule.id
                );
                return Err(self.refuse(events, by, About::Rule(&rule), Refusal::NotDecider, message));
            }
            rule.revoked = Some(RuleRevocation { by: by.to_string(), why: why.to_string(), at: now });
            tx.put_rule(&rule)?;
            let mut e = self.rule_event(EventKind::RuleRevoked, by, &rule);
            e.reason = Some(why.to_string());
            events.push(e);
            Ok(rule)
        })
    }

    /// Every standing rule, revoked ones included, oldest first.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn rules(&self) -> Result<Vec<StandingRule>, RuntimeError> {
        self.transact(|tx, _| Ok(tx.rules()?))
    }

    pub(crate) fn make_rule(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        new: &NewRule,
        now: u64,
    ) -> Result<StandingRule, RuntimeError> {
        let rule = self.check_rule(events, table, new, now)?;
        self.record_rule(tx, events, rule)
    }

    /// Gives a checked rule its id and stores it, with its audit event.
    pub(crate) fn record_rule(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        mut rule: StandingRule,
    ) -> Result<StandingRule, RuntimeError> {
        rule.id = format!("R-{}", tx.next_number("rule")?);
        tx.put_rule(&rule)?;
        events.push(self.rule_event(EventKind::RuleCreated, &rule.by, &rule));
        Ok(rule)
    }

    /// Checks that `new` may be made on `table` now, writing nothing (so an approval can check its rule
    /// before it reserves, and fail whole): the rule as it would be stored, without an id yet.
    pub(crate) fn check_rule(
        &self,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        new: &NewRule,
        now: u64,
    ) -> Result<StandingRule, RuntimeError> {
        let (agent_name, tool_name) = (&new.agent, &new.tool);
        let Some(agent) = table.agents.get(agent_name) else {
            return Err(self.refuse(
                events,
                &new.by,
                About::NewRule(new),
                Refusal::Rule,
                format!("unknown agent `{agent_name}`"),
            ));
        };
        let Some(tool) = table.tools.get(tool_name) else {
            return Err(self.refuse(
                events,
                &new.by,
                About::NewRule(new),
                Refusal::Rule,
                format!("unknown tool `{tool_name}`"),
            ));
        };
        // Spec §5: a rule for any arguments is not allowed for a tool with a `shell` parameter: it would let
        // every command line that is proposed run alone. A rule for these exact arguments covers one line.
        if let (Ok(Some(param)) | Err(param), Scope::AnyArguments) = (tool.shell_param(), &new.scope) {
            return Err(self.refuse(
                events,
                &new.by,
                About::NewRule(new),
                Refusal::Rule,
                format!(
                    "`{tool_name}` takes the command line `{param}`: a standing rule for any arguments would let any command line that is proposed run alone; make one for these exact arguments, or approve each proposal"
                ),
            ));
        }
        let skills: Vec<String> = match &new.skill {
            Some(skill) => {
                if !table.skills.contains_key(skill) {
                    return Err(self.refuse(
                        events,
                        &new.by,
                        About::NewRule(new),
                        Refusal::Rule,
                        format!("unknown skill `{skill}`"),
                    ));
                }
                if !agent.skills.contains(skill) {
                    return Err(self.refuse(
                        events,
                        &new.by,
                        About::NewRule(new),
                        Refusal::Rule,
                        format!("`{skill}` is not one of the skills of `{agent_name}`"),
                    ));
                }
                vec![skill.clone()]
            }
            None => agent.skills.clone(),
        };
        if let Some(mode) = new.mode.as_ref().filter(|m| !table.modes.contains_key(*m)) {
            return Err(self.refuse(
                events,
                &new.by,
                About::NewRule(new),
                Refusal::Rule,
                format!("unknown mode `{mode}`"),
            ));
        }
        if !new.via.is_empty() && new.skill.is_none() {
            return Err(self.refuse(
                events,
                &new.by,
                About::NewRule(new),
                Refusal::Rule,
                "a standing rule for a delegated call names the skill the call is made in".to_string(),
            ));
        }
        let mut covered = BTreeMap::new();
        let mut routed = Vec::new();
        for skill in &skills {
            let Some(entry) = table.entry(agent_name, skill, tool_name) else {
                if new.skill.is_some() {
                    return Err(self.refuse(
                        events,
                        &new.by,
                        About::NewRule(new),
                        Refusal::Rule,
                        format!(
                            "`{tool_name}` is not one of the tools of skill `{skill}`: a standing rule cannot offer it"
                        ),
                    ));
                }
                continue;
            };
            // A conditional entry is covered: at each call the rule applies only when the computed level
            // is exactly `propose`.
            // In a mode, the mode's row is one more layer and its call digest stands for the entry's.
            let moded = new.mode.as_ref().and_then(|m| entry.modes.get(m));
            let stated = moded.map_or(entry.level, |m| m.level);
            let level = if stated.is_none() && !entry.reserved && tool.reserved.is_none() {
                Level::Propose
            } else {
                crate::decision::entry_level_in(entry, tool, moded)
            };
            let digest = moded.map_or(&entry.entry_digest, |m| &m.call_digest);
            // A delegated call (spec §3b): every link is a layer, the call digest covers the chain, and the
            // route nearest the root decides who may make the rule.
            let (level, digest, route) = if new.via.is_empty() {
                (level, digest.clone(), entry.route.clone())
            } else {
                let Some(links) = table.chain_links(agent_name, skill, tool_name, &new.via) else {
                    let chain = new.via.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(" via ");
                    return Err(self.refuse(
                        events,
                        &new.by,
                        About::NewRule(new),
                        Refusal::Rule,
                        format!("not a declared delegation: `{agent_name}.{skill}` via {chain}"),
                    ));
                };
                let level = links.iter().map(|l| l.level.unwrap_or(Level::Propose)).fold(level, Level::max);
                let route = links.iter().rev().find_map(|l| l.route.clone()).unwrap_or_else(|| entry.route.clone());
                (level, crate::table::chain_digest(digest, &new.via, &links), route)
            };
            match level {
                Level::Never => {
                    return Err(self.refuse(events, &new.by, About::NewRule(new), Refusal::Rule,
                        format!(
                            "`{agent_name}` never calls `{tool_name}` in `{skill}` ({}): no standing rule can make it alone",
                            reasons_for(&entry.because, Level::Never)
                        ),
                    ));
                }
                Level::ProposeEveryTime => {
                    return Err(self.refuse(events, &new.by, About::NewRule(new), Refusal::Rule,
                        format!(
                            "`{tool_name}` is `propose_every_time` for `{agent_name}` in `{skill}` ({}): it takes no standing rule",
                            reasons_for(&entry.because, Level::ProposeEveryTime)
                        ),
                    ));
                }
                Level::Alone => {}
                Level::Propose => {
                    covered.insert(skill.clone(), digest);
                    if route != Route::Requester {
                        routed.push((skill.clone(), route));
                    }
                }
            }
        }
        if covered.is_empty() {
            return Err(self.refuse(
                events,
                &new.by,
                About::NewRule(new),
                Refusal::Rule,
                format!(
                    "`{tool_name}` is not at `propose` for `{agent_name}` in any skill: there is nothing to make alone"
                ),
            ));
        }
        let by = &new.by;
        if let Some(at) = new.expires_at.filter(|at| *at <= now) {
            let message = format!("a standing rule that expires at {at} has already expired (it is {now} now)");
            return Err(self.refuse(events, by, About::NewRule(new), Refusal::Rule, message));
        }
        let routed: Vec<(&str, &Route)> = routed.iter().map(|(s, r)| (s.as_str(), r)).collect();
        if let Err(message) = may_make_rule(table, agent_name, tool_name, &new.work_for, by, &routed) {
            return Err(self.refuse(events, by, About::NewRule(new), Refusal::Rule, message));
        }
        Ok(StandingRule {
            id: String::new(),
            agent: agent_name.clone(),
            tool: tool_name.clone(),
            skill: new.skill.clone(),
            work_for: new.work_for.clone(),
            by: by.clone(),
            definition_digest: tool.definition_digest.clone(),
            covered,
            scope: new.scope.clone(),
            expires_at: new.expires_at,
            mode: new.mode.clone(),
            via: new.via.clone(),
            task: None,
            created_at: now,
            uses: 0,
            revoked: None,
        })
    }
}

/// Whether `by` may make (or, at each call, still hold) a standing rule for `work_for` on `tool` of `agent`
/// (spec §5 "Standing rules", §5a "Authority is rechecked"): `by` is a person; for oneself they are
/// admitted by `widens_autonomy` (or `supervises`); for someone else, for everybody or for work done for
/// nobody only by `supervises`; and on each routed triple (`routed`: skill and route) only a decider of the
/// route who is not the person the work is for, or a supervisor.
///
/// Errors: why not, naming who and the rule that refuses.
pub(crate) fn may_make_rule(
    table: &Table,
    agent: &str,
    tool: &str,
    work_for: &WorkFor,
    by: &str,
    routed: &[(&str, &Route)],
) -> Result<(), String> {
    if !table.persons.contains_key(by) {
        return Err(format!("`{by}` is not a person of the table: only a person makes a standing rule"));
    }
    if holds(table, by, &table.authority.supervises) {
        return Ok(());
    }
    let person = match work_for {
        WorkFor::Person(p) if p == by => {
            if !holds(table, by, &table.authority.widens_autonomy) {
                return Err(format!("`{by}` may not widen an agent's autonomy: `widens_autonomy` does not admit them"));
            }
            p.as_str()
        }
        WorkFor::Person(p) if !table.persons.contains_key(p) => return Err(format!("unknown person `{p}`")),
        WorkFor::Person(p) => {
            return Err(format!("only a supervisor makes a standing rule for someone else (`{p}`), not `{by}`"));
        }
        WorkFor::Nobody => {
            return Err(format!("only a supervisor makes a standing rule for work done for nobody, not `{by}`"));
        }
        WorkFor::Everybody => return Err(format!("only a supervisor makes a standing rule for everybody, not `{by}`")),
    };
    let sponsor = table.agents.get(agent).map(|a| a.sponsor.as_str()).unwrap_or_default();
    for (skill, route) in routed {
        let source = route_source(table, agent, skill, tool, route);
        let deciders = resolve_decider(table, route, Some(person), sponsor);
        if !deciders.persons.iter().any(|d| d == by) {
            return Err(format!(
                "{source}: only a decider of that route other than the person the work is for (`{person}`), or a supervisor, makes a standing rule for it, not `{by}`"
            ));
        }
    }
    Ok(())
}
