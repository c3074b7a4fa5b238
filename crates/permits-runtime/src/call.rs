//! One call of the agent (spec §5 "Decide", "Execution admission"): decide it, run it alone, or hand it to `propose`.

use crate::claim::Runner;
use crate::*;

impl Runtime {
    /// Decides a call on the current table with the standing rules in force (spec §5 "Decide"). Recorded
    /// as an audit event, committed with [`Transaction::commit_lazily`]: a question changes nothing else, so
    /// its answer does not wait for the store's sync (what it read is durable before it answers).
    ///
    /// Errors: [`RuntimeError::Store`] only; an unknown name or bad arguments give a `never` decision.
    pub fn decide(&self, call: &Call) -> Result<Decision, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact_question(|tx, events| self.decide_in(tx, events, &table, call, now))
    }

    /// The body of [`Runtime::decide`], inside the caller's transaction: [`Runtime::decision_in`], recorded
    /// as a decision event.
    pub(crate) fn decide_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        call: &Call,
        now: u64,
    ) -> Result<Decision, RuntimeError> {
        let decision = self.decision_in(tx, events, table, call, now)?;
        events.push(self.call_event(EventKind::Decision, Some(&call.agent), call, &decision));
        Ok(decision)
    }

    /// A call's decision inside the caller's transaction: on `table` with the standing rules in force at
    /// `now` (seconds since the Unix epoch), and `never` when the task under its operation key is bound to
    /// another agent or person (spec §5a "Tasks").
    pub(crate) fn decision_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        call: &Call,
        now: u64,
    ) -> Result<Decision, RuntimeError> {
        let mut decision = decide_with(table, call, &tx.rules()?, now);
        if let Some(key) = &call.operation_key {
            if let Some(why) = self.check_task(tx, events, key, call, Binding::CheckOnly)? {
                not_this_task(&mut decision, why);
            }
        }
        Ok(decision)
    }

    /// Handles one tool call of the agent (spec §5): an `alone` call runs now through `run` (see
    /// [`Runtime::run_alone`]); a `propose` or `propose_every_time` call becomes a proposal (see
    /// [`Runtime::propose`]); a `never` call is refused.
    ///
    /// Errors: [`Refusal::Never`], and those of [`Runtime::run_alone`] and [`Runtime::propose`].
    pub fn call(
        &self,
        request: &ProposalRequest,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Handled, RuntimeError> {
        self.call_as(None, request, run)
    }

    /// [`Runtime::call`] presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn call_as(
        &self,
        acting: Option<&Lease>,
        request: &ProposalRequest,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Handled, RuntimeError> {
        let call = request.call.clone().in_task(request.operation_key.clone());
        let decision = self.decide(&call)?;
        match decision.level {
            Level::Alone => self.run_alone_as(acting, &call, run).map(|r| Handled::Ran(Box::new(r))),
            Level::Never => Err(RuntimeError::refused(Refusal::Never, refusal_message(&decision))),
            Level::Propose | Level::ProposeEveryTime => {
                self.propose_as(acting, request).map(|p| Handled::Proposed(Box::new(p)))
            }
        }
    }

    /// Runs an `alone` call (spec §5 "Execution admission"): decides it with the standing rules in force;
    /// the host's authority must admit the agent's account and the person the work is for (or the sponsor);
    /// a standing rule that made it alone counts a use; then `run` runs it, outside any transaction.
    ///
    /// Errors: [`Refusal::Never`] (with the rules or the reason), [`Refusal::MustPropose`] when the level is
    /// not `alone`, [`Refusal::Authority`], [`RuntimeError::Store`].
    pub fn run_alone(&self, call: &Call, run: impl FnOnce(&RunContext<'_>) -> RunOutcome) -> Result<Ran, RuntimeError> {
        self.run_alone_as(None, call, run)
    }

    /// [`Runtime::run_alone`] presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn run_alone_as(
        &self,
        acting: Option<&Lease>,
        call: &Call,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Ran, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        let admitted = self.transact(|tx, events| {
            // Spec §5a "Leases": while the task is leased, only its holder runs calls under the key.
            if let Some(key) = &call.operation_key {
                self.check_holder(tx, events, acting, key, &call.agent)?;
            }
            let admitted = self.admit_alone_in(tx, events, &table, call, now, Runner::Closure)?;
            let mut e = self.call_event(EventKind::Execution, Some(&admitted.runs_as), call, &admitted.decision);
            e.outcome = "admitted".into();
            e.authorized_by = Some(alone_authorization(&admitted.decision));
            events.push(e);
            let holder = admitted.holder.and_then(|(id, amount)| amount.map(|a| (id, a)));
            Ok((admitted.decision, admitted.runs_as, holder))
        })?;
        let (decision, runs_as, holder) = admitted;
        let operation = holder.as_ref().map_or("", |(id, _)| id.as_str());
        let outcome = run(&RunContext {
            agent: &call.agent,
            skill: &call.skill,
            tool: &call.tool,
            arguments: &call.arguments,
            runs_as: &runs_as,
            proposal: None,
            destination: None,
            operation,
        });
        // The outcome, and the settlement of an alone spend, are recorded in one transaction: a conclusive
        // accepted receipt spends, a failure releases, anything else keeps the reservation until
        // [`Runtime::settle`].
        self.transact(|tx, events| {
            if let Some((id, amount)) = &holder {
                let settled = match &outcome {
                    RunOutcome::Done(receipt) => match conclusive(receipt, id, *amount) {
                        Some(true) => Some(ledger::settle_spent(tx, id).map(|()| "spent")?),
                        Some(false) => Some(ledger::release(tx, id).map(|()| "released")?),
                        None => None,
                    },
                    RunOutcome::Failed(_) => Some(ledger::release(tx, id).map(|()| "released")?),
                    RunOutcome::Unknown(_) => None,
                };
                if let Some(word) = settled {
                    let mut e = self.call_event(EventKind::Settlement, Some(&runs_as), call, &decision);
                    e.outcome = word.into();
                    e.proposal = Some(id.clone());
                    e.reason = Some(format!("alone spend `{id}` of {amount}: {word}"));
                    events.push(e);
                }
            }
            let mut e = self.call_event(EventKind::Execution, Some(&runs_as), call, &decision);
            let (word, reason) = outcome_words(&outcome);
            e.outcome = word.into();
            e.reason = reason.map(|r| limits::cut(r, limits::MAX_REASON_BYTES));
            e.authorized_by = Some(alone_authorization(&decision));
            events.push(e);
            Ok(())
        })?;
        Ok(Ran { decision, runs_as, outcome })
    }
}

/// How an alone call was authorized: by a standing rule, or by the policy.
pub(crate) fn alone_authorization(decision: &Decision) -> Authorization {
    match &decision.standing_rule {
        Some(rule) if decision.task_rule => Authorization::TaskRule(rule.clone()),
        Some(rule) => Authorization::StandingRule(rule.clone()),
        None => Authorization::PolicyAlone,
    }
}
