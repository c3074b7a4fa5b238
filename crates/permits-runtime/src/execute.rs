//! Execution of a granted proposal: the single authorization point (spec §5 "Execute").

use crate::claim::{ClaimStep, Runner};
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
    ///
    /// Without a claim token a retry after a lost answer is refused while the proposal is `sending` or
    /// `unknown`; a host that can lose an answer uses [`Runtime::execute_claimed`].
    pub fn execute(
        &self,
        id: &str,
        destination: Option<&str>,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        self.execute_with(None, id, destination, None, run)
    }

    /// [`Runtime::execute`] with the host's claim token (spec §5a "Idempotent execution"): the admission
    /// records `claim` on the proposal; a retry with the same token (an acknowledgement that was lost)
    /// returns the same claim or receipt, and runs nothing, whatever the proposal's status since (`sending`,
    /// `unknown`, `done`, `failed`, `revoked`); another token on a consumed grant is refused.
    ///
    /// Errors: those of [`Runtime::execute`], and [`Refusal::Claimed`] (the grant was consumed under another
    /// token).
    pub fn execute_claimed(
        &self,
        id: &str,
        destination: Option<&str>,
        claim: &str,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        self.execute_with(None, id, destination, Some(claim), run)
    }

    /// [`Runtime::execute`] and [`Runtime::execute_claimed`], presenting `acting` (a lease on the task,
    /// spec §5a "Leases", [`Holding`]).
    pub(crate) fn execute_with(
        &self,
        acting: Option<&Lease>,
        id: &str,
        destination: Option<&str>,
        claim: Option<&str>,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        // The execution protocol of a host that runs tools elsewhere (claim, confirm, outcome; `claim.rs`),
        // with the runtime's own authority in the host's place: claim and admission are one transaction.
        let admitted = self.transact(|tx, events| {
            match self.claim_proposal_in(tx, events, &table, id, claim, destination, now, Runner::Closure, acting)? {
                ClaimStep::Done(_) | ClaimStep::Again(_) => Ok(None),
                ClaimStep::Claimed(mut p, runs_as) => {
                    self.send_in(tx, events, &mut p, &runs_as)?;
                    Ok(Some(p))
                }
            }
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
        let proposal = self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            self.record_proposal_outcome_in(tx, events, &table, &mut p, &runs_as, outcome)?;
            Ok(p)
        })?;
        Ok(Execution { proposal, ran: true })
    }
}

/// How a proposal's execution was authorized: the person who approved it, or an automatic grant.
pub(crate) fn grant_authorization(p: &Proposal) -> Option<Authorization> {
    let grant = p.grant.as_ref()?;
    match (grant.basis, &grant.approver) {
        (Basis::Operator, Some(person)) => Some(Authorization::Person(person.clone())),
        (Basis::Automatic, _) => Some(Authorization::AutomaticGrant),
        _ => None,
    }
}
