//! Proposals (spec §5 "Proposals", §6 "Automatic grants", "Supersession").

use crate::*;

impl Runtime {
    /// Makes a proposal of the exact call (spec §5 "Proposals"): checks the call (a `never` call is refused
    /// and makes no proposal), asks the host for the covered version, computes the fingerprint, and in one
    /// transaction returns the existing proposal for the same fingerprint and operation key (a retry; in
    /// whatever status it is), or supersedes earlier `waiting`/`granted` proposals for the same subject
    /// (spec §6) and records a new `waiting` one whose decider comes from the route.
    ///
    /// Errors: [`Refusal::Never`], [`Refusal::UnknownVersion`], [`Refusal::Unresolved`] (an earlier
    /// proposal for the same subject is `sending`, `unknown` or `done`), [`RuntimeError::Store`].
    pub fn propose(&self, request: &ProposalRequest) -> Result<Proposal, RuntimeError> {
        self.propose_as(None, request)
    }

    /// [`Runtime::propose`] presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn propose_as(
        &self,
        acting: Option<&Lease>,
        request: &ProposalRequest,
    ) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        let call = &request.call;
        self.transact(|tx, events| {
            let decision = decide_with(&table, call, &[], 0);
            if let Err(message) = check_request(request) {
                return Err(self.refuse(events, &call.agent, About::Call(call, &decision), Refusal::TooLarge, message));
            }
            // The route's decider, whatever the level (a decision names one only for a proposed level).
            let decider = table.offered(&call.agent, &call.skill, &call.tool).ok().zip(table.agents.get(&call.agent)).map(
                |(entry, agent)| resolve_decider(&table, &entry.route, call.requester.as_deref(), &agent.sponsor),
            );
            let (Some(tool), Some(entry_digest), Some(decider), true) =
                (table.tools.get(&call.tool), decision.entry_digest.clone(), decider, decision.level != Level::Never)
            else {
                return Err(self.refuse(events, &call.agent, About::Call(call, &decision), Refusal::Never, refusal_message(&decision)));
            };
            // Spec §5a "Leases": while the task is leased, only its holder proposes under the key.
            self.check_holder(tx, events, acting, &request.operation_key, &call.agent)?;
            // Spec §5a "Tasks": the key binds its root, person and mode on first use; another's is `never`.
            if let Some(why) = self.check_task(tx, events, &request.operation_key, call, Binding::Bind)? {
                let message = format!("`{}` may not call `{}` in `{}`: {why}", call.agent, call.tool, call.skill);
                return Err(self.refuse(events, &call.agent, About::Call(call, &decision), Refusal::Never, message));
            }
            let covered_version = match self.covered_version(&table, call) {
                Ok(v) => v,
                Err(message) => return Err(self.refuse(events, &call.agent, About::Call(call, &decision), Refusal::UnknownVersion, message)),
            };
            let instruction_version = self.versions.instruction_version(&call.agent);
            let fp = fingerprint_with(
                call,
                &entry_digest,
                covered_version.as_deref(),
                request.destination.as_deref(),
                instruction_version.as_deref(),
            );
            if let Some(mut existing) = tx.proposal_by_fingerprint(&request.operation_key, &fp)? {
                self.expire_if_due(tx, events, &mut existing, now)?;
                self.grant_automatically(tx, events, &table, decision.level, &mut existing, now)?;
                let mut e = self.proposal_event(EventKind::Proposal, Some(&call.agent), &existing);
                e.reason = Some("a retry: the same call under the same operation key".into());
                events.push(e);
                return Ok(existing);
            }
            let subject = tool.subject.as_ref().and_then(|p| call.arguments.get(p)).map(crate::table::canonical_value);
            let mut earlier = Vec::new();
            if let Some(subject) = &subject {
                // Spec §6: supersession is keyed by the operation key (so the task's person, mode and root),
                // the chain — the calling agent and skill and every link to the root — the tool and the
                // subject: two chains to one root are two lines of work in one task. The person is compared
                // too, for records bound before tasks existed.
                for mut old in tx.proposals_for_subject(&request.operation_key, &call.tool, subject)? {
                    let same_chain = old.agent == call.agent && old.skill == call.skill && old.via == call.via;
                    if old.requester != call.requester || !same_chain {
                        continue;
                    }
                    self.expire_if_due(tx, events, &mut old, now)?;
                    match old.status {
                        Status::Sending | Status::Unknown | Status::Done => {
                            let message = format!(
                                "proposal `{}` for the same subject in this work is `{}`: resolve it first, or use a new operation key",
                                old.id, old.status
                            );
                            return Err(self.refuse(events, &call.agent, About::Call(call, &decision), Refusal::Unresolved, message));
                        }
                        Status::Waiting | Status::Granted => earlier.push(old),
                        _ => {}
                    }
                }
            }
            let id = format!("P-{}", tx.next_number("proposal")?);
            for mut old in earlier {
                old.status = Status::Superseded;
                old.reason = Some(format!("superseded by `{id}`"));
                ledger::release(tx, &old.id)?;
                tx.put_proposal(&old)?;
                events.push(self.proposal_event(EventKind::Supersession, Some(&call.agent), &old));
            }
            let lifetime = request
                .lifetime_seconds
                .map_or(table.package.proposal_lifetime_seconds, |s| s.min(table.package.proposal_lifetime_seconds));
            let shown = tool
                .params
                .iter()
                .map(|p| ShownArgument {
                    name: p.name.clone(),
                    shown: call.arguments.get(&p.name).map(|v| display::visible(&self.naming.show(&call.tool, p, v))).unwrap_or_default(),
                })
                .collect();
            let proposal = Proposal {
                id,
                operation_key: request.operation_key.clone(),
                agent: call.agent.clone(),
                skill: call.skill.clone(),
                tool: call.tool.clone(),
                label: display::visible(&tool.label),
                arguments: call.arguments.clone(),
                shown,
                covered_version,
                destination: request.destination.clone(),
                why: request.why.clone(),
                evidence: request.evidence.clone(),
                requester: call.requester.clone(),
                decider,
                level: decision.level,
                entry_digest,
                mode: call.mode.clone(),
                via: call.via.clone(),
                definition_digest: tool.definition_digest.clone(),
                subject,
                fingerprint: fp,
                fingerprint_format: FINGERPRINT_FORMAT,
                instruction_version,
                created_at: now,
                expires_at: now.saturating_add(lifetime),
                status: Status::Waiting,
                grant: None,
                claim: None,
                ran_as: None,
                receipt: None,
                reason: None,
                decided_by: None,
                host_claim: None,
            };
            let mut proposal = proposal;
            tx.put_proposal(&proposal)?;
            events.push(self.proposal_event(EventKind::Proposal, Some(&call.agent), &proposal));
            self.grant_automatically(tx, events, &table, decision.level, &mut proposal, now)?;
            Ok(proposal)
        })
    }

    /// Spec §6 "Automatic grants": on every propose (a retry included), a `waiting` proposal whose level is
    /// `propose` (not `propose_every_time`), whose amount is within the budget's allowance and fits under
    /// the ceiling is granted with basis `automatic`, no person asked; the amount is reserved. When the
    /// ceiling has no room it stays `waiting`, the reason recorded.
    pub(crate) fn grant_automatically(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        level: Level,
        p: &mut Proposal,
        now: u64,
    ) -> Result<(), RuntimeError> {
        if p.status != Status::Waiting || level != Level::Propose {
            return Ok(());
        }
        let Ok(Some(spend)) = self.spend_for(table, p) else { return Ok(()) };
        if spend.over_allowance() {
            return Ok(());
        }
        match ledger::reserve(tx, &p.id, Some(&p.operation_key), &spend, now)? {
            Reserve::NoRoom(message) => {
                p.reason = Some(format!("not granted automatically: {message}"));
                tx.put_proposal(p)?;
            }
            Reserve::Held => {
                p.grant = Some(Grant {
                    approver: None,
                    basis: Basis::Automatic,
                    granted_at: now,
                    expires_at: now.saturating_add(table.package.grant_lifetime_seconds),
                });
                p.status = Status::Granted;
                p.reason = None;
                tx.put_proposal(p)?;
                events.push(self.proposal_event(EventKind::Grant, None, p));
            }
        }
        Ok(())
    }
}
