//! Execution of a granted proposal: the single authorization point (spec §5 "Execute").

use crate::*;

impl Runtime {
    /// Executes a granted proposal: the single authorization point (spec §5 "Execute"). `destination` must
    /// be the approved one; a `done` proposal returns its stored receipt and runs nothing; then everything
    /// is rechecked now — the fingerprint on the current table and covered version (`stale`), the current
    /// level (`never` → `failed`), the grant (present, unexpired, basis `operator`), and the host's
    /// authority for the agent's account and the person it runs for (the approver; refused → `failed`,
    /// final). On admission the grant is consumed (`sending`), `run` runs outside any transaction, and the
    /// outcome is recorded (`done` with the receipt, `failed`, or `unknown`).
    ///
    /// Errors: [`Refusal::Destination`], [`Refusal::NotApproved`], [`Refusal::Stale`],
    /// [`Refusal::NowNever`], [`Refusal::GrantExpired`] and [`Refusal::Basis`] (the proposal stays
    /// `granted`, the reason recorded), [`Refusal::Authority`], [`Refusal::ProposalExpired`],
    /// [`Refusal::Status`], [`Refusal::UnknownVersion`], [`RuntimeError::UnknownProposal`],
    /// [`RuntimeError::Store`].
    pub fn execute(
        &self,
        id: &str,
        destination: Option<&str>,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        let admitted = self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            let agent = p.agent.clone();
            if destination != p.destination.as_deref() {
                let message = format!(
                    "the destination {} is not the approved one ({}): nothing runs",
                    words_of(destination),
                    words_of(p.destination.as_deref())
                );
                return Err(self.refuse(events, &agent, About::Proposal(&p), Refusal::Destination, message));
            }
            if p.status == Status::Done {
                events.push(self.proposal_event(EventKind::Execution, Some(&agent), &p));
                return Ok(None);
            }
            self.expire_if_due(tx, events, &mut p, now)?;
            if p.status == Status::Waiting {
                let message = format!(
                    "proposal `{}` is not approved: nothing runs until {} approves it",
                    p.id,
                    p.decider.waiting_on()
                );
                return Err(self.refuse(events, &agent, About::Proposal(&p), Refusal::NotApproved, message));
            }
            self.check_status(events, &agent, &p, "executed", &[Status::Granted])?;
            let Some(grant) = p.grant.clone() else {
                let message = format!("proposal `{}` has no grant: nothing runs", p.id);
                return Err(self.refuse(events, &agent, About::Proposal(&p), Refusal::NotApproved, message));
            };
            self.recheck(tx, events, &table, &mut p, &agent)?;
            let not_now = |tx: &mut dyn Transaction, events: &mut Vec<AuditEvent>, p: &mut Proposal, refusal, message: String| {
                p.reason = Some(message.clone());
                tx.put_proposal(p)?;
                Err::<(), _>(self.refuse(events, &agent, About::Proposal(p), refusal, message))
            };
            if now >= grant.expires_at {
                let message = format!(
                    "the grant of proposal `{}` expired at {}: nothing runs until it is approved again",
                    p.id, grant.expires_at
                );
                not_now(tx, events, &mut p, Refusal::GrantExpired, message)?;
            }
            let spend = match self.spend_for(&table, &p) {
                Ok(spend) => spend,
                Err(message) => return not_now(tx, events, &mut p, Refusal::Budget, message).map(|()| None),
            };
            let runs_as = match (grant.basis, &grant.approver) {
                // Spec §5a: the approver must still be a decider of the proposal on the current table.
                (Basis::Operator, Some(approver)) => match may_decide(&table, &p, approver) {
                    Ok(()) => approver.clone(),
                    Err(why) => {
                        let message = format!(
                            "the grant of proposal `{}` no longer authorizes it: {why}; it waits for a decider's approval",
                            p.id
                        );
                        return not_now(tx, events, &mut p, Refusal::NotDecider, message).map(|()| None);
                    }
                },
                // Spec §6: at execution an automatic grant must still fit the current allowance.
                (Basis::Automatic, _) if spend.is_some_and(|s| !s.over_allowance()) => {
                    let sponsor = table.agents.get(&p.agent).map(|a| a.sponsor.clone()).unwrap_or_default();
                    p.requester.clone().unwrap_or(sponsor)
                }
                (Basis::Automatic, _) => {
                    let message = match spend {
                        Some(s) => format!(
                            "the automatic grant of proposal `{}` no longer fits the allowance of budget `{}` ({} {unit} is over {} {unit}): it waits for a person's approval",
                            p.id,
                            s.budget,
                            s.amount,
                            s.info.alone_up_to,
                            unit = s.info.unit
                        ),
                        None => format!(
                            "the automatic grant of proposal `{}` is not covered by any budget's allowance now: it waits for a person's approval",
                            p.id
                        ),
                    };
                    return not_now(tx, events, &mut p, Refusal::Basis, message).map(|()| None);
                }
                _ => {
                    let message =
                        format!("the grant of proposal `{}` has no known basis: it waits for a person's approval", p.id);
                    return not_now(tx, events, &mut p, Refusal::Basis, message).map(|()| None);
                }
            };
            if let Some(spend) = spend {
                if let Reserve::NoRoom(message) = ledger::check_held(tx, &p.id, &spend, now)? {
                    return not_now(tx, events, &mut p, Refusal::Budget, message).map(|()| None);
                }
            }
            if let Err(message) = self.admit(&p.agent, &runs_as, &p.tool, &p.arguments) {
                p.status = Status::Failed;
                p.reason = Some(message.clone());
                ledger::release(tx, &p.id)?;
                tx.put_proposal(&p)?;
                return Err(self.refuse(events, &runs_as, About::Proposal(&p), Refusal::Authority, message));
            }
            p.status = Status::Sending;
            p.ran_as = Some(runs_as.clone());
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Execution, Some(&runs_as), &p));
            Ok(Some(p))
        })?;
        let Some(sending) = admitted else {
            return Ok(Execution { proposal: self.proposal(id)?, ran: false });
        };
        let runs_as = sending.ran_as.clone().unwrap_or_default();
        let operation = operation_id(&sending);
        let outcome = run(&RunContext {
            agent: &sending.agent,
            skill: &sending.skill,
            tool: &sending.tool,
            arguments: &sending.arguments,
            runs_as: &runs_as,
            proposal: Some(&sending),
            destination: sending.destination.as_deref(),
            operation: &operation,
        });
        let spend_amount = self.spend_for(&table, &sending).ok().flatten().map(|s| s.amount);
        let proposal = self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            let (status, receipt, reason) = match (outcome, spend_amount) {
                (RunOutcome::Done(receipt), None) => (Status::Done, Some(receipt), None),
                // Spec §6 "Settlement": only a conclusive receipt moves the reservation.
                (RunOutcome::Done(receipt), Some(amount)) => match conclusive(&receipt, &operation, amount) {
                    Some(true) => {
                        ledger::settle_spent(tx, &p.id)?;
                        (Status::Done, Some(receipt), None)
                    }
                    Some(false) => {
                        ledger::release(tx, &p.id)?;
                        (Status::Failed, Some(receipt), Some("the other side rejected the operation: nothing was spent".to_string()))
                    }
                    None => (
                        Status::Unknown,
                        Some(receipt),
                        Some(format!(
                            "the receipt does not name operation `{operation}` and amount {amount} with an outcome: not conclusive; the reservation stays until it is settled"
                        )),
                    ),
                },
                (RunOutcome::Failed(why), _) => {
                    ledger::release(tx, &p.id)?;
                    (Status::Failed, None, Some(why))
                }
                (RunOutcome::Unknown(why), _) => (Status::Unknown, None, Some(why)),
            };
            // A proposal revoked while sending stays revoked (the other side may have acted); its receipt
            // is still kept.
            if p.status == Status::Sending {
                p.status = status;
                p.reason = reason;
            }
            p.receipt = receipt;
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Execution, Some(&runs_as), &p));
            Ok(p)
        })?;
        Ok(Execution { proposal, ran: true })
    }
}
