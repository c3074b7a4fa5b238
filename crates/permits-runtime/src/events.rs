//! The audit events the runtime records (spec §5 "Audit"), and the one way a refusal is recorded.

use crate::*;

/// What a refused operation was about, for its audit event.
#[derive(Clone, Copy)]
pub(crate) enum About<'a> {
    /// A call, as decided.
    Call(&'a Call, &'a Decision),
    /// A proposal.
    Proposal(&'a Proposal),
    /// A standing rule.
    Rule(&'a StandingRule),
    /// A standing rule asked for.
    NewRule(&'a NewRule),
    /// An operation or record named by its id only (`A-3`, an unknown proposal id).
    Operation(&'a str),
}

impl Runtime {
    /// The head of the store's audit chain (its last event), if any: keep it to tell a truncated chain
    /// from a whole one later (spec §5a).
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn audit_head(&self) -> Result<Option<AuditHead>, RuntimeError> {
        let mut tx = self.store.begin()?;
        Ok(tx.audit_head()?)
    }

    /// Every event of the store's audit chain, oldest first.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn audit_chain(&self) -> Result<Vec<ChainedEvent>, RuntimeError> {
        let mut tx = self.store.begin()?;
        Ok(tx.audit_events()?)
    }

    /// Writes the audit chain as JSON lines (one [`ChainedEvent`] per line, oldest first) to `out`, the
    /// export `permitc audit verify` checks; returns how many events it wrote.
    ///
    /// Errors: [`RuntimeError::Store`], and an I/O error as a [`RuntimeError::Store`] naming the export.
    pub fn export_audit(&self, out: &mut dyn std::io::Write) -> Result<u64, RuntimeError> {
        let chain = self.audit_chain()?;
        for e in &chain {
            let line = serde_json::to_string(e).map_err(|e| StoreError(format!("cannot encode the export: {e}")))?;
            writeln!(out, "{line}").map_err(|e| StoreError(format!("cannot write the export: {e}")))?;
        }
        Ok(chain.len() as u64)
    }

    /// The one way a refusal is recorded: an audit event about `about` by `who`, with outcome `refused`
    /// and `message` as its reason, pushed to `events`; returns the error to hand back.
    pub(crate) fn refuse(
        &self,
        events: &mut Vec<AuditEvent>,
        who: &str,
        about: About<'_>,
        refusal: Refusal,
        message: String,
    ) -> RuntimeError {
        let mut e = match about {
            About::Call(call, decision) => self.call_event(EventKind::Refusal, Some(who), call, decision),
            About::Proposal(p) => self.proposal_event(EventKind::Refusal, Some(who), p),
            About::Rule(rule) => self.rule_event(EventKind::Refusal, who, rule),
            About::NewRule(new) => AuditEvent {
                at: self.clock.now(),
                kind: EventKind::Refusal,
                who: Some(who.to_string()),
                agent: new.agent.clone(),
                skill: new.skill.clone().unwrap_or_default(),
                tool: new.tool.clone(),
                proposal: None,
                fingerprint: None,
                rule: None,
                outcome: String::new(),
                reason: None,
                authorized_by: None,
            },
            About::Operation(id) => self.operation_event(EventKind::Refusal, who, id),
        };
        e.outcome = "refused".into();
        e.reason = Some(message.clone());
        events.push(e);
        RuntimeError::refused(refusal, message)
    }

    pub(crate) fn proposal_event(&self, kind: EventKind, who: Option<&str>, p: &Proposal) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind,
            who: who.map(str::to_string),
            agent: p.agent.clone(),
            skill: p.skill.clone(),
            tool: p.tool.clone(),
            proposal: Some(p.id.clone()),
            fingerprint: Some(p.fingerprint.clone()),
            rule: None,
            outcome: p.status.to_string(),
            reason: p.reason.clone(),
            authorized_by: None,
        }
    }

    pub(crate) fn call_event(
        &self,
        kind: EventKind,
        who: Option<&str>,
        call: &Call,
        decision: &Decision,
    ) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind,
            who: who.map(str::to_string),
            agent: call.agent.clone(),
            skill: call.skill.clone(),
            tool: call.tool.clone(),
            proposal: None,
            fingerprint: None,
            rule: decision.standing_rule.clone(),
            outcome: decision.level.to_string(),
            reason: Some(refusal_message(decision)),
            authorized_by: None,
        }
    }

    pub(crate) fn rule_event(&self, kind: EventKind, who: &str, rule: &StandingRule) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind,
            who: Some(who.to_string()),
            agent: rule.agent.clone(),
            skill: rule.skill.clone().unwrap_or_default(),
            tool: rule.tool.clone(),
            proposal: None,
            fingerprint: None,
            rule: Some(rule.id.clone()),
            outcome: if rule.revoked.is_some() { "revoked".into() } else { "in force".into() },
            // Spec §5: the audit says which calls the rule covers, and until when.
            reason: Some(match rule.expires_at {
                Some(at) => format!("{}; expires at {at}", rule.scope.words()),
                None => format!("{}; until revoked", rule.scope.words()),
            }),
            authorized_by: None,
        }
    }

    /// The proposal `id` for an operation by `who`; an unknown id is refused and audited (spec §5a).
    pub(crate) fn load_for(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        who: &str,
        id: &str,
    ) -> Result<Proposal, RuntimeError> {
        match tx.proposal(id)? {
            Some(p) => Ok(p),
            None => {
                self.refuse(events, who, About::Operation(id), Refusal::Status, format!("there is no proposal `{id}`"));
                Err(RuntimeError::UnknownProposal(id.to_string()))
            }
        }
    }

    /// An event about something named by its id only: an operation (`A-3`), a budget, an unknown id.
    pub(crate) fn operation_event(&self, kind: EventKind, who: &str, id: &str) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind,
            who: (!who.is_empty()).then(|| who.to_string()),
            agent: String::new(),
            skill: String::new(),
            tool: String::new(),
            proposal: Some(id.to_string()),
            fingerprint: None,
            rule: None,
            outcome: String::new(),
            reason: None,
            authorized_by: None,
        }
    }

    /// A task was bound or ended.
    pub(crate) fn task_event(&self, task: &Task) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind: EventKind::Task,
            who: task.person.clone(),
            agent: task.root_agent.clone(),
            skill: task.root_skill.clone(),
            tool: String::new(),
            proposal: None,
            fingerprint: None,
            rule: None,
            outcome: if task.ended_at.is_some() { "ended".into() } else { "bound".into() },
            reason: Some(format!("task `{}`", task.key)),
            authorized_by: None,
        }
    }
}
