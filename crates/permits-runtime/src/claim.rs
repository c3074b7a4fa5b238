//! The execution protocol, for hosts that run a tool themselves (spec §5 "Execute", "Execution admission",
//! §5a "Idempotent execution"): the host **claims** an execution with its claim token and the runtime
//! rechecks everything and answers whom it runs as; the host checks its own permissions and **confirms**
//! (→ `sending`) or **refuses** (→ `failed`, final); then it reports the **outcome** (the receipt).
//!
//! [`Runtime::execute`] and [`Runtime::run_alone`] are this protocol with the runtime's own [`Authority`] in
//! the host's place and the host's closure as the run: one admission, one recheck, one way to record an
//! outcome, whoever runs the tool.

use serde::{Deserialize, Serialize};

use crate::execute::grant_authorization;
use crate::*;

/// Who runs an admitted tool, and so who answers for the host's permissions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Runner {
    /// The host's closure, in this process: the runtime asks its [`Authority`] during admission.
    Closure,
    /// A host elsewhere (the approval service's): it checks its own permissions and confirms or refuses.
    Host,
}

/// An execution as a host sees it (a granted proposal `P-n`, or an alone call `A-n`): what to run, for
/// whom, where, and how far it got. What [`Runtime::claim`], [`Runtime::claim_alone`], [`Runtime::confirm`],
/// [`Runtime::refuse_claim`], [`Runtime::record_outcome`] and [`Runtime::execution`] return.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimed {
    /// The execution's id: the proposal's (`P-3`) or the alone run's (`A-2`).
    pub id: String,
    /// The host's operation key (the task).
    pub operation_key: String,
    /// The agent.
    pub agent: String,
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// The checked arguments (a JSON object).
    pub arguments: Value,
    /// The person the work is for, if any.
    pub requester: Option<String>,
    /// The accounts the host's permissions must admit (spec §5 "Execution admission", §3b): the agent's
    /// account, then each delegating agent's of its chain, nearest first …
    pub accounts: Vec<String>,
    /// … and the person it runs as: the approver of an operator grant, else the person the work is for,
    /// else the agent's sponsor. Empty before a claim.
    pub runs_as: String,
    /// The approved destination, if any.
    pub destination: Option<String>,
    /// The operation id to send to the other side ([`RunContext::operation`]): `OPERATION_KEY:P-n` for a
    /// proposal, `A-n` for an alone run.
    pub operation: String,
    /// The status: `granted` while claimed and not confirmed, `sending` once confirmed, then `done`,
    /// `failed` or `unknown` (or whatever else a proposal became).
    pub status: Status,
    /// The claim token that holds it, once claimed.
    pub claim_token: Option<String>,
    /// Whether the host confirmed the claim (its permissions admitted both accounts).
    pub confirmed: bool,
    /// The stored receipt, once reported.
    pub receipt: Option<Value>,
    /// The latest reason (a failure's, a refusal's).
    pub reason: Option<String>,
}

impl Claimed {
    /// The view of a proposal.
    pub fn of_proposal(p: &Proposal) -> Claimed {
        Claimed {
            id: p.id.clone(),
            operation_key: p.operation_key.clone(),
            agent: p.agent.clone(),
            skill: p.skill.clone(),
            tool: p.tool.clone(),
            arguments: p.arguments.clone(),
            requester: p.requester.clone(),
            accounts: accounts(&p.agent, &p.via),
            runs_as: p.host_claim.as_ref().map(|c| c.runs_as.clone()).or_else(|| p.ran_as.clone()).unwrap_or_default(),
            destination: p.destination.clone(),
            operation: operation_id(p),
            status: p.status,
            claim_token: p.claim.clone(),
            // An execution of the runtime's own (`Runtime::execute`) is confirmed when it is admitted.
            confirmed: p.host_claim.as_ref().map_or(p.ran_as.is_some(), |c| c.confirmed_at.is_some()),
            receipt: p.receipt.clone(),
            reason: p.reason.clone(),
        }
    }

    /// The view of an alone run.
    pub fn of_run(r: &Run) -> Claimed {
        Claimed {
            id: r.id.clone(),
            operation_key: r.operation_key.clone(),
            agent: r.agent.clone(),
            skill: r.skill.clone(),
            tool: r.tool.clone(),
            arguments: r.arguments.clone(),
            requester: r.requester.clone(),
            accounts: accounts(&r.agent, &r.via),
            runs_as: r.host_claim.runs_as.clone(),
            destination: None,
            operation: r.id.clone(),
            status: r.status,
            claim_token: Some(r.token.clone()),
            confirmed: r.host_claim.confirmed_at.is_some(),
            receipt: r.receipt.clone(),
            reason: r.reason.clone(),
        }
    }
}

/// The agent's account, then each delegating agent's of its chain (nearest first).
fn accounts(agent: &str, via: &[crate::table::ChainLink]) -> Vec<String> {
    std::iter::once(agent).chain(via.iter().map(|l| l.agent.as_str())).map(String::from).collect()
}

/// What the host's permissions refused: the agent's account or the person it runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthorityRefusal {
    /// The agent's own account may not run the tool.
    Agent,
    /// The person it runs as may not.
    Person,
}

/// The message a refusal by the host's permissions gives (spec §5 "Execution admission"), the same whether
/// the runtime's [`Authority`] or a host elsewhere refused.
pub(crate) fn authority_message(
    agent: &str,
    runs_as: &str,
    tool: &str,
    refused: AuthorityRefusal,
    why: &str,
) -> String {
    match refused {
        AuthorityRefusal::Agent => format!("the agent's account `{agent}` may not run `{tool}`: {why}"),
        AuthorityRefusal::Person => format!("`{agent}` runs `{tool}` on behalf of `{runs_as}`, who may not: {why}"),
    }
}

/// What the claim step of a proposal found.
pub(crate) enum ClaimStep {
    /// Claimed now (by this token, if there is one), running as the person given.
    Claimed(Proposal, String),
    /// Already claimed by this token: the same answer, nothing rechecked or changed.
    Again(Proposal),
    /// `done`: the stored receipt is the answer; nothing runs.
    Done(Proposal),
}

/// How [`Runtime::decide_and_claim`] leaves an `alone` call's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claiming {
    /// Claimed (`granted`): the host checks its own permissions, then [`Runtime::confirm`] or
    /// [`Runtime::refuse_claim`] ([`Runtime::claim_alone`]).
    Claim,
    /// Claimed and confirmed (`sending`): for a host with no permissions of its own to check
    /// ([`Runtime::claim_alone_confirmed`]).
    ClaimAndConfirm,
}

/// What [`Runtime::decide_and_claim`] answers: the call's decision (spec §5 "Decide") and, for an `alone`
/// call, its claimed run.
#[derive(Clone, Debug, PartialEq)]
pub enum CallClaim {
    /// `alone`: the run (`A-n`) is claimed — and `sending` with [`Claiming::ClaimAndConfirm`].
    Alone {
        /// The decision.
        decision: Decision,
        /// The claimed run.
        execution: Box<Claimed>,
    },
    /// `propose` or `propose_every_time`: nothing is claimed; the host proposes the call
    /// ([`Runtime::propose`]).
    Propose(Decision),
    /// `never`: nothing is made; [`Decision::refusal_message`] says why.
    Never(Decision),
}

impl Runtime {
    /// Claims a granted proposal's execution for a host that runs it itself (spec §5 "Execute", §5a
    /// "Idempotent execution"): `destination` must be the approved one; a `done` proposal answers with its
    /// stored receipt and runs nothing; a retry with the same `token` answers as the first claim did; then
    /// everything is rechecked now — the fingerprint on the current table and covered version (`stale`), the
    /// current level (`never` → `failed`), the grant (present, unexpired, its basis and its approver still a
    /// decider), the budget — and the grant is bound to `token`: another token is refused. The answer says
    /// whom it runs as; the host checks its own permissions and calls [`Runtime::confirm`] or
    /// [`Runtime::refuse_claim`]. Nothing is `sending` before the confirmation.
    ///
    /// Errors: those of [`Runtime::execute`] but [`Refusal::Authority`], and [`Refusal::Claimed`] (another
    /// token holds it).
    pub fn claim(&self, id: &str, token: &str, destination: Option<&str>) -> Result<Claimed, RuntimeError> {
        self.claim_as(None, id, token, destination)
    }

    /// [`Runtime::claim`] presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn claim_as(
        &self,
        acting: Option<&Lease>,
        id: &str,
        token: &str,
        destination: Option<&str>,
    ) -> Result<Claimed, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            match self.claim_proposal_in(tx, events, &table, id, Some(token), destination, now, Runner::Host, acting)? {
                ClaimStep::Claimed(p, _) | ClaimStep::Again(p) | ClaimStep::Done(p) => Ok(Claimed::of_proposal(&p)),
            }
        })
    }

    /// Admits an `alone` call for a host that runs it itself (spec §5 "Execution admission"): decides it
    /// with the standing rules in force (it must be `alone`), reserves its amount when it spends, counts the
    /// standing rule's use, and records a run (`A-n`) claimed by `token`. A retry with the same token and the
    /// same call answers as the first did; the same token for another call is refused. The host checks its
    /// own permissions and calls [`Runtime::confirm`] or [`Runtime::refuse_claim`].
    ///
    /// Errors: [`Refusal::Never`], [`Refusal::MustPropose`], [`Refusal::Budget`], [`Refusal::Claimed`],
    /// [`RuntimeError::Store`].
    pub fn claim_alone(&self, request: &ProposalRequest, token: &str) -> Result<Claimed, RuntimeError> {
        self.claim_alone_as(None, request, token, false)
    }

    /// [`Runtime::claim_alone`] and [`Runtime::confirm`] in one store transaction, for a host that checked
    /// its own permissions before the call or has none to check (an MCP gateway: spec §5 "Execution
    /// admission"): the run (`A-n`) is `sending` when this returns, and the host runs it and reports its
    /// receipt. One commit instead of two; what is recorded is the same (the claim's event, then the
    /// confirmation's). A retry with the same token and call answers the same (`sending`, or the outcome
    /// recorded since).
    ///
    /// Errors: those of [`Runtime::claim_alone`].
    pub fn claim_alone_confirmed(&self, request: &ProposalRequest, token: &str) -> Result<Claimed, RuntimeError> {
        self.claim_alone_as(None, request, token, true)
    }

    /// [`Runtime::claim_alone`] (and, with `confirm`, [`Runtime::confirm`] in the same transaction)
    /// presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn claim_alone_as(
        &self,
        acting: Option<&Lease>,
        request: &ProposalRequest,
        token: &str,
        confirm: bool,
    ) -> Result<Claimed, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        let call = request.call.clone().in_task(request.operation_key.clone());
        let ask = ClaimAsk { table: &table, now, acting, request, call: &call, token, confirm };
        self.transact(|tx, events| self.claim_alone_in(tx, events, &ask, None))
    }

    /// Decides a host's call and, when it is `alone`, claims its run — in one store transaction (spec §5
    /// "Decide", "Execution admission"): what [`Runtime::decide`] then [`Runtime::claim_alone`] do (or
    /// [`Runtime::claim_alone_confirmed`] with [`Claiming::ClaimAndConfirm`]), with the same audit events
    /// (the decision, the claim, the confirmation), one commit instead of two. A `propose` or
    /// `propose_every_time` call is answered [`CallClaim::Propose`] and nothing else is made (the host
    /// proposes it, [`Runtime::propose`]); a `never` call [`CallClaim::Never`]. When only the decision is
    /// recorded the commit is a question's ([`Transaction::commit_lazily`]); a claim commits durably before
    /// this returns.
    ///
    /// Errors: those of [`Runtime::claim_alone`] but [`Refusal::Never`] and [`Refusal::MustPropose`]
    /// (answered as values).
    pub fn decide_and_claim(
        &self,
        request: &ProposalRequest,
        token: &str,
        claiming: Claiming,
    ) -> Result<CallClaim, RuntimeError> {
        self.decide_and_claim_as(None, request, token, claiming)
    }

    /// [`Runtime::decide_and_claim`] presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn decide_and_claim_as(
        &self,
        acting: Option<&Lease>,
        request: &ProposalRequest,
        token: &str,
        claiming: Claiming,
    ) -> Result<CallClaim, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        let call = request.call.clone().in_task(request.operation_key.clone());
        // A question's commit when only the decision is recorded (`propose`, `never`); the claim's events
        // make it a durable one (`Runtime::transact_as`).
        self.transact_question(|tx, events| {
            let decision = self.decide_in(tx, events, &table, &call, now)?;
            match decision.level {
                Level::Alone => {
                    let confirm = claiming == Claiming::ClaimAndConfirm;
                    let ask = ClaimAsk { table: &table, now, acting, request, call: &call, token, confirm };
                    let execution = self.claim_alone_in(tx, events, &ask, Some(decision.clone()))?;
                    Ok(CallClaim::Alone { decision, execution: Box::new(execution) })
                }
                Level::Propose | Level::ProposeEveryTime => Ok(CallClaim::Propose(decision)),
                Level::Never => Ok(CallClaim::Never(decision)),
            }
        })
    }

    /// [`Runtime::decide_and_claim`] for a host that makes every call that is not `alone` another way: an
    /// MCP gateway that runs the alone calls on the store itself and sends the others to the approval
    /// service on the same store (`permitc mcp proxy --store`; spec §5 "Decide", "Execution admission").
    /// An `alone` call is decided and claimed (and, with [`Claiming::ClaimAndConfirm`], confirmed) in one
    /// durable transaction exactly as there, and its run answered. Any other call is answered `None` and
    /// **nothing** is recorded — the transaction is rolled back, the decision's event with it — so that the
    /// call made the other way is recorded once.
    ///
    /// Errors: those of [`Runtime::decide_and_claim`] (a refusal of the claim is recorded, as there).
    pub fn claim_if_alone(
        &self,
        request: &ProposalRequest,
        token: &str,
        claiming: Claiming,
    ) -> Result<Option<Claimed>, RuntimeError> {
        let (claimed, syncing) = self.claim_if_alone_as(crate::Commit::Durable, request, token, claiming)?;
        syncing.wait()?;
        Ok(claimed)
    }

    /// [`Runtime::claim_if_alone`] for a gateway that holds the tool's answer until the claim is durable,
    /// so that a tool that only reads runs while the disk syncs: when the tool's effect set (proven and
    /// claimed) is `reads` alone and it spends from no budget, the claim commits without waiting for its
    /// sync, and the answer's [`Syncing`] is still running — the host may send the call at once, and must
    /// [`Syncing::wait`] before the tool's answer (or anything else about the call) leaves it; if the wait
    /// fails, the answer is withheld. A read whose answer never leaves has had no effect, so nothing is done
    /// that the ledger would not show. For any other tool (one that changes, sends, spends or reaches out)
    /// the claim is durable before this returns, exactly as [`Runtime::claim_if_alone`], and the
    /// [`Syncing`] is finished. `permitc mcp proxy --store` uses it (issue #19).
    ///
    /// Errors: those of [`Runtime::claim_if_alone`].
    pub fn claim_if_alone_syncing(
        &self,
        request: &ProposalRequest,
        token: &str,
        claiming: Claiming,
    ) -> Result<Option<(Claimed, Syncing)>, RuntimeError> {
        let commit =
            if reads_only(&self.table(), &request.call.tool) { crate::Commit::Syncing } else { crate::Commit::Durable };
        let (claimed, syncing) = self.claim_if_alone_as(commit, request, token, claiming)?;
        Ok(claimed.map(|c| (c, syncing)))
    }

    /// [`Runtime::claim_if_alone_syncing`] for a gateway that may send a read before its claim is even
    /// written (spec §5 "Execution admission", §5a "Audit"; issue #19's latency): for a tool that only
    /// reads (as there) and a new claim token, the call is decided and everything that could refuse its
    /// claim is checked — the task's lease and binding, the run's number — in a store transaction that is
    /// left **open**, holding the store's write lock, and answered [`AloneClaim::Admitted`]. The host sends the call then, and [`AdmittedRead::claim`] writes
    /// the run and its events and commits while the tool runs; the tool's answer waits for the claim's
    /// [`Syncing`] as with [`Runtime::claim_if_alone_syncing`]. Nothing else can change the store between
    /// the decision and the commit, so what is recorded is what the call was decided on; a read whose
    /// answer never leaves (the commit or its sync failed) has had no effect.
    ///
    /// Any other call is answered as [`Runtime::claim_if_alone_syncing`] would: [`AloneClaim::Claimed`] (a
    /// tool that does more than read is durable already; a retry with the same token finds its run) or
    /// [`AloneClaim::NotAlone`] (nothing recorded).
    ///
    /// Errors: those of [`Runtime::claim_if_alone`] (a refusal of the claim is recorded, as there).
    pub fn claim_if_alone_sending(
        &self,
        request: ProposalRequest,
        token: &str,
        claiming: Claiming,
    ) -> Result<AloneClaim<'_>, RuntimeError> {
        let table = self.table();
        if !reads_only(&table, &request.call.tool) {
            let (claimed, syncing) = self.claim_if_alone_as(crate::Commit::Durable, &request, token, claiming)?;
            return Ok(claimed.map_or(AloneClaim::NotAlone, |c| AloneClaim::Claimed(Box::new(c), syncing)));
        }
        let now = self.clock.now();
        let confirm = claiming == Claiming::ClaimAndConfirm;
        let call = request.call.clone().in_task(request.operation_key.clone());
        let mut tx = self.store.begin()?;
        let mut events = Vec::new();
        let admitted = match self.ensure_current(tx.as_mut(), &mut events) {
            Ok(()) => (|| {
                let decision = self.decide_in(tx.as_mut(), &mut events, &table, &call, now)?;
                if decision.level != Level::Alone {
                    return Ok(None);
                }
                let ask = ClaimAsk { table: &table, now, acting: None, request: &request, call: &call, token, confirm };
                self.admit_claim_in(tx.as_mut(), &mut events, &ask, Some(decision)).map(Some)
            })(),
            Err(e) => Err(e),
        };
        let result = match admitted {
            Ok(Some(ClaimAdmission::New(admitted))) => {
                return Ok(AloneClaim::Admitted(Box::new(AdmittedRead {
                    rt: self,
                    tx,
                    events,
                    table,
                    now,
                    request,
                    call,
                    token: token.to_string(),
                    confirm,
                    admitted,
                })));
            }
            Ok(Some(ClaimAdmission::Again(claimed))) => Ok(Kept::Commit(Some(claimed))),
            Ok(None) => Ok(Kept::RollBack(None)),
            Err(e) => Err(e),
        };
        let (claimed, syncing) = self.conclude(tx, events, result, crate::Commit::Syncing)?;
        Ok(claimed.map_or(AloneClaim::NotAlone, |c| AloneClaim::Claimed(Box::new(c), syncing)))
    }

    fn claim_if_alone_as(
        &self,
        commit: crate::Commit,
        request: &ProposalRequest,
        token: &str,
        claiming: Claiming,
    ) -> Result<(Option<Claimed>, Syncing), RuntimeError> {
        use crate::Kept;
        let table = self.table();
        let now = self.clock.now();
        let call = request.call.clone().in_task(request.operation_key.clone());
        self.transact_syncing(commit, |tx, events| {
            let decision = self.decide_in(tx, events, &table, &call, now)?;
            if decision.level != Level::Alone {
                return Ok(Kept::RollBack(None));
            }
            let confirm = claiming == Claiming::ClaimAndConfirm;
            let ask = ClaimAsk { table: &table, now, acting: None, request, call: &call, token, confirm };
            let execution = self.claim_alone_in(tx, events, &ask, Some(decision))?;
            Ok(Kept::Commit(Some(execution)))
        })
    }

    /// The body of [`Runtime::claim_alone_as`], inside the caller's transaction: [`Runtime::admit_claim_in`]
    /// then [`Runtime::write_claim_in`]. `decided`: the call's decision when the caller made it in this
    /// transaction already (it is not made twice).
    fn claim_alone_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        ask: &ClaimAsk<'_>,
        decided: Option<Decision>,
    ) -> Result<Claimed, RuntimeError> {
        match self.admit_claim_in(tx, events, ask, decided)? {
            ClaimAdmission::Again(claimed) => Ok(claimed),
            ClaimAdmission::New(admitted) => self.write_claim_in(tx, events, ask, admitted),
        }
    }

    /// Everything of an alone claim that may refuse it, inside the caller's transaction (spec §5
    /// "Execution admission"): the token's size, the task's lease, a retry with the same token (answered
    /// [`ClaimAdmission::Again`], confirmed when asked), the decision (`decided`, or made here) and its
    /// admission — the run's number, a reservation, the task's binding. What is left
    /// ([`Runtime::write_claim_in`]) writes the run and cannot refuse it.
    fn admit_claim_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        ask: &ClaimAsk<'_>,
        decided: Option<Decision>,
    ) -> Result<ClaimAdmission, RuntimeError> {
        let ClaimAsk { table, now, acting, request, token, confirm, .. } = *ask;
        let call = &request.call;
        if let Err(message) = limits::check_text("the claim token", token, limits::MAX_KEY_BYTES) {
            return Err(self.refuse(events, &call.agent, About::Operation(token), Refusal::TooLarge, message));
        }
        self.check_holder(tx, events, acting, &request.operation_key, &call.agent)?;
        if let Some(run) = tx.run_by_token(token)? {
            let same = run.agent == call.agent
                && run.skill == call.skill
                && run.tool == call.tool
                && run.requester == call.requester
                && run.operation_key == request.operation_key
                && crate::table::canonical_value(&run.arguments) == crate::table::canonical_value(&call.arguments);
            if same {
                let mut run = run;
                if confirm && run.status == Status::Granted {
                    self.confirm_run_in(tx, events, table, &mut run, token, now)?;
                }
                return Ok(ClaimAdmission::Again(Claimed::of_run(&run)));
            }
            let message = format!(
                "the claim token was used for another call (run `{}`): a new call needs a new claim token",
                run.id
            );
            return Err(self.refuse(events, &call.agent, About::Operation(&run.id), Refusal::Claimed, message));
        }
        let decision = match decided {
            Some(decision) => decision,
            None => self.decision_in(tx, events, table, ask.call, now)?,
        };
        let admitted = self.admit_alone_decided_in(tx, events, table, ask.call, now, Runner::Host, decision)?;
        Ok(ClaimAdmission::New(admitted))
    }

    /// The rest of an alone claim once [`Runtime::admit_claim_in`] admitted it: the run (`granted`, or
    /// `sending` when `ask.confirm`) and the claim's event (then the confirmation's).
    fn write_claim_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        ask: &ClaimAsk<'_>,
        admitted: AloneAdmission,
    ) -> Result<Claimed, RuntimeError> {
        let ClaimAsk { table, now, acting, request, call, token, confirm } = *ask;
        let Some((id, amount)) = admitted.holder else {
            return Err(RuntimeError::Store(StoreError("an alone run recorded for a host has no id".into())));
        };
        let mut run = Run {
            id,
            operation_key: request.operation_key.clone(),
            agent: call.agent.clone(),
            skill: call.skill.clone(),
            tool: call.tool.clone(),
            arguments: call.arguments.clone(),
            requester: call.requester.clone(),
            via: call.via.clone(),
            standing_rule: admitted.decision.standing_rule.clone(),
            amount,
            status: Status::Granted,
            token: token.to_string(),
            host_claim: HostClaim {
                runs_as: admitted.runs_as.clone(),
                claimed_at: now,
                confirmed_at: None,
                table_digest: table.header.table_digest.clone(),
                fence: acting.filter(|l| l.key == request.operation_key).map(|l| l.fence),
            },
            receipt: None,
            reason: None,
            created_at: now,
        };
        tx.put_run(&run)?;
        let mut e = self.call_event(EventKind::Execution, Some(&admitted.runs_as), call, &admitted.decision);
        e.proposal = Some(run.id.clone());
        e.outcome = "claimed".into();
        e.authorized_by = Some(crate::call::alone_authorization(&admitted.decision));
        events.push(e);
        if confirm {
            self.confirm_run_in(tx, events, table, &mut run, token, now)?;
        }
        Ok(Claimed::of_run(&run))
    }

    /// The host's permissions admitted the agent's account and the person of a claimed execution: it is
    /// `sending` now, and the host runs it. A retry with the same token answers the same. A claim checked
    /// on another table than the one in force is dropped (a proposal is claimed again; an alone run fails,
    /// and the host calls again).
    ///
    /// Errors: [`Refusal::Claimed`] (another token holds it), [`Refusal::NotClaimed`] (no claim by this
    /// token, or the table changed), [`Refusal::Status`] (the
    /// proposal was revoked meanwhile), [`RuntimeError::UnknownExecution`], [`RuntimeError::Store`].
    pub fn confirm(&self, id: &str, token: &str) -> Result<Claimed, RuntimeError> {
        self.confirm_as(None, id, token)
    }

    /// [`Runtime::confirm`] presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn confirm_as(&self, acting: Option<&Lease>, id: &str, token: &str) -> Result<Claimed, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| match tx.proposal(id)? {
            Some(mut p) => {
                self.check_holder(tx, events, acting, &p.operation_key, &p.agent)?;
                self.confirm_proposal_in(tx, events, &table, &mut p, token, now)?;
                Ok(Claimed::of_proposal(&p))
            }
            None => {
                let mut run = self.load_run(tx, id)?;
                self.check_holder(tx, events, acting, &run.operation_key, &run.agent)?;
                self.confirm_run_in(tx, events, &table, &mut run, token, now)?;
                Ok(Claimed::of_run(&run))
            }
        })
    }

    /// The host's permissions refused the execution (spec §5 "Execution admission"): `refused` says which
    /// account, `why` what the host said. → `failed`, final, with the reason a person reads ("`Estimator`
    /// runs `SetPrice` on behalf of `Mia`, who may not: only a manager may set a price"); a reservation is
    /// released. A retry with the same token answers the same.
    ///
    /// Errors: [`Refusal::Claimed`], [`Refusal::NotClaimed`] (no claim by this token, or it was confirmed
    /// already), [`Refusal::Status`],
    /// [`RuntimeError::UnknownExecution`], [`RuntimeError::Store`].
    pub fn refuse_claim(
        &self,
        id: &str,
        token: &str,
        refused: AuthorityRefusal,
        why: &str,
    ) -> Result<Claimed, RuntimeError> {
        self.refuse_claim_as(None, id, token, refused, why)
    }

    /// [`Runtime::refuse_claim`] presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn refuse_claim_as(
        &self,
        acting: Option<&Lease>,
        id: &str,
        token: &str,
        refused: AuthorityRefusal,
        why: &str,
    ) -> Result<Claimed, RuntimeError> {
        self.transact(|tx, events| match tx.proposal(id)? {
            Some(mut p) => {
                self.check_holder(tx, events, acting, &p.operation_key, &p.agent)?;
                if let Some(refused) = self.host_claim_holds(events, &p, token)? {
                    return Err(refused);
                }
                if p.status == Status::Failed {
                    return Ok(Claimed::of_proposal(&p));
                }
                let runs_as = p.host_claim.as_ref().map(|c| c.runs_as.clone()).unwrap_or_default();
                let message = authority_message(&p.agent, &runs_as, &p.tool, refused, why);
                self.fail_claimed_in(tx, events, &mut p, message)?;
                Ok(Claimed::of_proposal(&p))
            }
            None => {
                let mut run = self.load_run(tx, id)?;
                self.check_holder(tx, events, acting, &run.operation_key, &run.agent)?;
                if let Some(refused) = self.claim_token_holds(events, &run.agent, id, Some(&run.token), token)? {
                    return Err(refused);
                }
                if run.status == Status::Failed {
                    return Ok(Claimed::of_run(&run));
                }
                let message = authority_message(&run.agent, &run.host_claim.runs_as, &run.tool, refused, why);
                self.fail_run_in(tx, events, &mut run, message)?;
                Ok(Claimed::of_run(&run))
            }
        })
    }

    /// Records what the host reports after running a confirmed execution: `done` with the receipt (a spend
    /// is settled when the receipt is conclusive, spec §6), `failed` (a reservation is released) or
    /// `unknown`. A retry with the same token answers as the first report did and changes nothing.
    ///
    /// Errors: [`Refusal::Claimed`], [`Refusal::NotClaimed`] (no claim by this token, or not confirmed yet),
    /// [`RuntimeError::UnknownExecution`], [`RuntimeError::Store`].
    pub fn record_outcome(&self, id: &str, token: &str, outcome: RunOutcome) -> Result<Claimed, RuntimeError> {
        self.record_outcome_as(crate::Commit::Durable, id, token, outcome)
    }

    /// [`Runtime::record_outcome`] for a host that records the receipt *after* it has handed the tool's
    /// answer on, and tells no one that it was recorded: the commit may return before it is durable
    /// ([`crate::Lazily::Receipt`]: synced with the next durable commit, or once the store has been quiet for
    /// a moment). A receipt lost to a power loss leaves the execution `sending` (its outcome not recorded,
    /// never run again, a reservation still held), exactly what a crash between the answer and the receipt
    /// leaves; nothing the runtime promises rests on a receipt being durable. An MCP gateway's alone calls
    /// use it (`permitc mcp proxy --store`, issue #19), so that calls following one another pay one sync
    /// each, their claim's, instead of two.
    ///
    /// Errors: those of [`Runtime::record_outcome`].
    pub fn record_outcome_lazily(&self, id: &str, token: &str, outcome: RunOutcome) -> Result<Claimed, RuntimeError> {
        self.record_outcome_as(crate::Commit::Receipt, id, token, outcome)
    }

    fn record_outcome_as(
        &self,
        commit: crate::Commit,
        id: &str,
        token: &str,
        outcome: RunOutcome,
    ) -> Result<Claimed, RuntimeError> {
        let table = self.table();
        self.transact_as(commit, |tx, events| match tx.proposal(id)? {
            Some(mut p) => {
                if let Some(refused) = self.host_claim_holds(events, &p, token)? {
                    return Err(refused);
                }
                if p.host_claim.as_ref().is_none_or(|c| c.confirmed_at.is_none()) {
                    return Err(self.not_confirmed(events, &p.agent, id));
                }
                let runs_as = p.host_claim.as_ref().map(|c| c.runs_as.clone()).unwrap_or_default();
                self.record_proposal_outcome_in(tx, events, &table, &mut p, &runs_as, outcome)?;
                Ok(Claimed::of_proposal(&p))
            }
            None => {
                let mut run = self.load_run(tx, id)?;
                if let Some(refused) = self.claim_token_holds(events, &run.agent, id, Some(&run.token), token)? {
                    return Err(refused);
                }
                if run.host_claim.confirmed_at.is_none() {
                    return Err(self.not_confirmed(events, &run.agent, id));
                }
                self.record_run_outcome_in(tx, events, &mut run, outcome)?;
                Ok(Claimed::of_run(&run))
            }
        })
    }

    /// An execution as it is now: a proposal (`P-n`, expiring it when due) or an alone run (`A-n`).
    ///
    /// Errors: [`RuntimeError::UnknownExecution`], [`RuntimeError::Store`].
    pub fn execution(&self, id: &str) -> Result<Claimed, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| match tx.proposal(id)? {
            Some(mut p) => {
                self.expire_if_due(tx, events, &mut p, now)?;
                Ok(Claimed::of_proposal(&p))
            }
            None => Ok(Claimed::of_run(&self.load_run(tx, id)?)),
        })
    }

    fn load_run(&self, tx: &mut dyn Transaction, id: &str) -> Result<Run, RuntimeError> {
        tx.run(id)?.ok_or_else(|| RuntimeError::UnknownExecution(id.to_string()))
    }

    /// `Ok(None)` when `token` holds the claim; otherwise the refusal to return (recorded).
    fn claim_token_holds(
        &self,
        events: &mut Vec<AuditEvent>,
        agent: &str,
        id: &str,
        held: Option<&str>,
        token: &str,
    ) -> Result<Option<RuntimeError>, RuntimeError> {
        let (refusal, message) = match held {
            Some(held) if held == token => return Ok(None),
            Some(_) => {
                (Refusal::Claimed, format!("execution `{id}` is claimed with another claim token: nothing runs twice"))
            }
            None => (Refusal::NotClaimed, format!("execution `{id}` is not claimed: claim it first")),
        };
        Ok(Some(self.refuse(events, agent, About::Operation(id), refusal, message)))
    }

    /// [`Runtime::claim_token_holds`] for a proposal claimed by a host that runs the tool itself: the token
    /// must hold it, and the claim must be such a host's (an execution of the runtime's own is not
    /// confirmed, refused or reported through the protocol).
    fn host_claim_holds(
        &self,
        events: &mut Vec<AuditEvent>,
        p: &Proposal,
        token: &str,
    ) -> Result<Option<RuntimeError>, RuntimeError> {
        if let Some(refused) = self.claim_token_holds(events, &p.agent, &p.id, p.claim.as_deref(), token)? {
            return Ok(Some(refused));
        }
        if p.host_claim.is_none() {
            let message = format!("execution `{}` was executed by the runtime's host itself: nothing to confirm", p.id);
            return Ok(Some(self.refuse(events, &p.agent, About::Operation(&p.id), Refusal::NotClaimed, message)));
        }
        Ok(None)
    }

    fn not_confirmed(&self, events: &mut Vec<AuditEvent>, agent: &str, id: &str) -> RuntimeError {
        let message = format!(
            "execution `{id}` is claimed but not confirmed: confirm it (or refuse it) before it runs and reports"
        );
        self.refuse(events, agent, About::Operation(id), Refusal::NotClaimed, message)
    }

    /// The claim step of [`Runtime::execute`] and [`Runtime::claim`]: every check of spec §5 "Execute"; with
    /// [`Runner::Closure`] the runtime's [`Authority`] is asked too (a refusal → `failed`, final).
    #[expect(clippy::too_many_arguments, reason = "one transaction's context and the claim's own four")]
    pub(crate) fn claim_proposal_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        id: &str,
        token: Option<&str>,
        destination: Option<&str>,
        now: u64,
        runner: Runner,
        acting: Option<&Lease>,
    ) -> Result<ClaimStep, RuntimeError> {
        let mut p = self.load_for(tx, events, "", id)?;
        let agent = p.agent.clone();
        // Spec §5a "Leases": a host that no longer holds the task executes nothing, not even a retry.
        self.check_holder(tx, events, acting, &p.operation_key, &agent)?;
        let lease = acting.filter(|l| l.key == p.operation_key);
        self.drop_dead_claim(tx, events, &mut p, lease, token, now)?;
        if let Some(Err(message)) = token.map(|c| limits::check_text("the claim token", c, limits::MAX_KEY_BYTES)) {
            return Err(self.refuse(events, &agent, About::Proposal(&p), Refusal::TooLarge, message));
        }
        if destination != p.destination.as_deref() {
            let message = format!(
                "the destination {} is not the approved one ({}): nothing runs",
                words_of(destination),
                words_of(p.destination.as_deref())
            );
            return Err(self.refuse(events, &agent, About::Proposal(&p), Refusal::Destination, message));
        }
        if let (Some(token), Some(held)) = (token, p.claim.as_deref()) {
            if token == held {
                // A retry of the same claim: the claim or the receipt again, nothing runs.
                let mut e = self.proposal_event(EventKind::Execution, Some(&agent), &p);
                e.reason = Some(format!("a retry of claim `{token}`: nothing runs again"));
                events.push(e);
                return Ok(ClaimStep::Again(p));
            }
            let message =
                format!("proposal `{}` was executed under another claim: its grant is consumed; nothing runs", p.id);
            return Err(self.refuse(events, &agent, About::Proposal(&p), Refusal::Claimed, message));
        }
        if p.status == Status::Done {
            events.push(self.proposal_event(EventKind::Execution, Some(&agent), &p));
            return Ok(ClaimStep::Done(p));
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
        if p.claim.is_some() {
            // Claimed by a host that runs the tool itself, and not yet confirmed: the grant is bound to it.
            let message = format!(
                "proposal `{}` is claimed with another claim token: its grant is consumed, and it runs at most once",
                p.id
            );
            return Err(self.refuse(events, &agent, About::Proposal(&p), Refusal::Claimed, message));
        }
        let Some(grant) = p.grant.clone() else {
            let message = format!("proposal `{}` has no grant: nothing runs", p.id);
            return Err(self.refuse(events, &agent, About::Proposal(&p), Refusal::NotApproved, message));
        };
        self.recheck(tx, events, table, &mut p, &agent)?;
        let not_now =
            |tx: &mut dyn Transaction, events: &mut Vec<AuditEvent>, p: &mut Proposal, refusal, message: String| {
                p.reason = Some(message.clone());
                tx.put_proposal(p)?;
                Err::<ClaimStep, _>(self.refuse(events, &agent, About::Proposal(p), refusal, message))
            };
        if now >= grant.expires_at {
            let message = format!(
                "the grant of proposal `{}` expired at {}: nothing runs until it is approved again",
                p.id, grant.expires_at
            );
            return not_now(tx, events, &mut p, Refusal::GrantExpired, message);
        }
        let spend = match self.spend_for(table, &p) {
            Ok(spend) => spend,
            Err(message) => return not_now(tx, events, &mut p, Refusal::Budget, message),
        };
        let runs_as = match (grant.basis, &grant.approver) {
            // Spec §5a: the approver must still be a decider of the proposal on the current table.
            (Basis::Operator, Some(approver)) => match may_decide(table, &p, approver) {
                Ok(()) => approver.clone(),
                Err(why) => {
                    let message = format!(
                        "the grant of proposal `{}` no longer authorizes it: {why}; it waits for a decider's approval",
                        p.id
                    );
                    return not_now(tx, events, &mut p, Refusal::NotDecider, message);
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
                return not_now(tx, events, &mut p, Refusal::Basis, message);
            }
            _ => {
                let message =
                    format!("the grant of proposal `{}` has no known basis: it waits for a person's approval", p.id);
                return not_now(tx, events, &mut p, Refusal::Basis, message);
            }
        };
        if let Some(spend) = spend {
            if let Reserve::NoRoom(message) = ledger::check_held(tx, &p.id, Some(&p.operation_key), &spend, now)? {
                return not_now(tx, events, &mut p, Refusal::Budget, message);
            }
        }
        p.claim = token.map(str::to_string);
        if runner == Runner::Closure {
            if let Err(message) = self.admit(&p.agent, &p.via, &runs_as, &p.tool, &p.arguments) {
                p.status = Status::Failed;
                p.reason = Some(message.clone());
                p.claim = None;
                ledger::release(tx, &p.id)?;
                tx.put_proposal(&p)?;
                return Err(self.refuse(events, &runs_as, About::Proposal(&p), Refusal::Authority, message));
            }
            return Ok(ClaimStep::Claimed(p, runs_as));
        }
        p.host_claim = Some(HostClaim {
            runs_as: runs_as.clone(),
            claimed_at: now,
            confirmed_at: None,
            table_digest: table.header.table_digest.clone(),
            fence: lease.map(|l| l.fence),
        });
        tx.put_proposal(&p)?;
        let mut e = self.proposal_event(EventKind::Execution, Some(&runs_as), &p);
        e.outcome = "claimed".into();
        e.authorized_by = grant_authorization(&p);
        events.push(e);
        Ok(ClaimStep::Claimed(p, runs_as))
    }

    /// A claim that was never confirmed and whose host is gone is dropped (audited), so the grant can be
    /// claimed again: one made under an older fence than `lease` (the task's current one, checked; spec §5a
    /// "Leases"), or one older than [`limits::CLAIM_LIFETIME_SECONDS`] when another token claims (a host that
    /// died between its claim and its confirmation). A confirmed claim always stays: it may have run.
    fn drop_dead_claim(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        p: &mut Proposal,
        lease: Option<&Lease>,
        token: Option<&str>,
        now: u64,
    ) -> Result<(), RuntimeError> {
        let Some(claim) = &p.host_claim else { return Ok(()) };
        if claim.confirmed_at.is_some() {
            return Ok(());
        }
        let old = p.claim.clone().unwrap_or_default();
        let fenced = lease.filter(|l| claim.fence.is_none_or(|f| f < l.fence));
        let expired =
            now >= claim.claimed_at.saturating_add(limits::CLAIM_LIFETIME_SECONDS) && token.is_some_and(|t| t != old);
        let (who, why) = match (fenced, expired) {
            (Some(l), _) => (
                l.holder.clone(),
                format!(
                    "the unconfirmed claim `{old}` was made before `{}` took task `{}` (fence {}): it is dropped",
                    l.holder, l.key, l.fence
                ),
            ),
            (None, true) => (
                p.agent.clone(),
                format!(
                    "the claim `{old}` was not confirmed within {} s of {}: it is dropped, and the grant claimed anew",
                    limits::CLAIM_LIFETIME_SECONDS,
                    claim.claimed_at
                ),
            ),
            (None, false) => return Ok(()),
        };
        p.claim = None;
        p.host_claim = None;
        tx.put_proposal(p)?;
        let mut e = self.proposal_event(EventKind::Execution, Some(&who), p);
        e.outcome = "claim dropped".into();
        e.reason = Some(why);
        events.push(e);
        Ok(())
    }

    /// The admission: the grant is consumed (`sending`), running as `runs_as`.
    pub(crate) fn send_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        p: &mut Proposal,
        runs_as: &str,
    ) -> Result<(), RuntimeError> {
        p.status = Status::Sending;
        p.ran_as = Some(runs_as.to_string());
        tx.put_proposal(p)?;
        let mut e = self.proposal_event(EventKind::Execution, Some(runs_as), p);
        e.authorized_by = grant_authorization(p);
        events.push(e);
        Ok(())
    }

    /// The confirmation of a proposal's claim by its host: `sending`, the grant consumed.
    pub(crate) fn confirm_proposal_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        p: &mut Proposal,
        token: &str,
        now: u64,
    ) -> Result<(), RuntimeError> {
        let agent = p.agent.clone();
        if let Some(refused) = self.host_claim_holds(events, p, token)? {
            return Err(refused);
        }
        if p.host_claim.as_ref().is_some_and(|c| c.confirmed_at.is_some()) {
            return Ok(());
        }
        self.check_status(events, &agent, p, "confirmed", &[Status::Granted])?;
        let Some(claim) = p.host_claim.as_mut() else { return Ok(()) };
        if claim.table_digest != table.header.table_digest {
            // The recheck was on another table: it must be done again on this one.
            p.host_claim = None;
            p.claim = None;
            tx.put_proposal(p)?;
            let message = format!(
                "the table changed since proposal `{}` was claimed: claim it again, and it is rechecked on the table in force",
                p.id
            );
            return Err(self.refuse(events, &agent, About::Proposal(p), Refusal::NotClaimed, message));
        }
        claim.confirmed_at = Some(now);
        let runs_as = claim.runs_as.clone();
        self.send_in(tx, events, p, &runs_as)
    }

    /// A claimed proposal the host's permissions refused: `failed`, final, its reservation released.
    pub(crate) fn fail_claimed_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        p: &mut Proposal,
        message: String,
    ) -> Result<(), RuntimeError> {
        if p.host_claim.as_ref().is_some_and(|c| c.confirmed_at.is_some()) {
            let message = format!("execution `{}` was confirmed: it ran or runs; report its outcome instead", p.id);
            return Err(self.refuse(events, &p.agent.clone(), About::Proposal(p), Refusal::NotClaimed, message));
        }
        let agent = p.agent.clone();
        self.check_status(events, &agent, p, "refused", &[Status::Granted])?;
        let runs_as = p.host_claim.as_ref().map(|c| c.runs_as.clone()).unwrap_or_default();
        p.status = Status::Failed;
        p.reason = Some(message.clone());
        ledger::release(tx, &p.id)?;
        tx.put_proposal(p)?;
        let _ = self.refuse(events, &runs_as, About::Proposal(p), Refusal::Authority, message);
        Ok(())
    }

    /// Records the outcome of a `sending` proposal (a revoked one keeps its status and gains the receipt);
    /// an outcome already recorded stays as it is.
    pub(crate) fn record_proposal_outcome_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        p: &mut Proposal,
        runs_as: &str,
        outcome: RunOutcome,
    ) -> Result<(), RuntimeError> {
        let revoked_while_sending = p.status == Status::Revoked && p.receipt.is_none();
        if p.status != Status::Sending && !revoked_while_sending {
            return Ok(());
        }
        let operation = operation_id(p);
        let spend_amount = self.spend_for(table, p).ok().flatten().map(|s| s.amount);
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
                    (
                        Status::Failed,
                        Some(receipt),
                        Some("the other side rejected the operation: nothing was spent".to_string()),
                    )
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
        // A proposal revoked while sending stays revoked (the other side may have acted); its receipt is
        // still kept.
        // Spec §5a "Bounded input, durable output": what the host reported is stored within the limits (the
        // settlement above was judged on the receipt itself), so the record always reads back.
        if p.status == Status::Sending {
            p.status = status;
            p.reason = reason.map(|r| limits::cut(r, limits::MAX_REASON_BYTES));
        }
        p.receipt = receipt.map(limits::storable_receipt);
        tx.put_proposal(p)?;
        let mut e = self.proposal_event(EventKind::Execution, Some(runs_as), p);
        e.authorized_by = grant_authorization(p);
        events.push(e);
        Ok(())
    }

    /// Admission of an alone call (spec §5 "Execution admission", §6): decided with the standing rules in
    /// force, it must be `alone`; with [`Runner::Closure`] the runtime's [`Authority`] admits the agent's
    /// account and the person; a spend is reserved (holder `A-n`); the standing rule that made it alone
    /// counts a use. A run kept for a host ([`Runner::Host`]) always gets its `A-n`.
    pub(crate) fn admit_alone_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        call: &Call,
        now: u64,
        runner: Runner,
    ) -> Result<AloneAdmission, RuntimeError> {
        let decision = self.decision_in(tx, events, table, call, now)?;
        self.admit_alone_decided_in(tx, events, table, call, now, runner, decision)
    }

    /// [`Runtime::admit_alone_in`] with the call's `decision` made already in this transaction
    /// ([`Runtime::decision_in`]; nothing written between that could change it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn admit_alone_decided_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        call: &Call,
        now: u64,
        runner: Runner,
        decision: Decision,
    ) -> Result<AloneAdmission, RuntimeError> {
        match decision.level {
            Level::Alone => {}
            Level::Never => {
                let message = refusal_message(&decision);
                return Err(self.refuse(events, &call.agent, About::Call(call, &decision), Refusal::Never, message));
            }
            Level::Propose | Level::ProposeEveryTime => {
                let message = refusal_message(&decision);
                return Err(self.refuse(
                    events,
                    &call.agent,
                    About::Call(call, &decision),
                    Refusal::MustPropose,
                    message,
                ));
            }
        }
        let sponsor = table.agents.get(&call.agent).map(|a| a.sponsor.clone()).unwrap_or_default();
        let runs_as = call.requester.clone().unwrap_or(sponsor);
        if runner == Runner::Closure {
            if let Err(message) = self.admit(&call.agent, &call.via, &runs_as, &call.tool, &call.arguments) {
                return Err(self.refuse(
                    events,
                    &call.agent,
                    About::Call(call, &decision),
                    Refusal::Authority,
                    message,
                ));
            }
        }
        // Spec §6: the amount of an alone spend is reserved at execution admission.
        let spend = match table.tools.get(&call.tool) {
            Some(tool) => ledger::spend_of(table, &call.tool, tool, &call.arguments).ok().flatten(),
            None => None,
        };
        let mut holder = None;
        if spend.is_some() || runner == Runner::Host {
            holder = Some((format!("A-{}", tx.next_number("run")?), None));
        }
        if let (Some(spend), Some((id, amount))) = (spend, holder.as_mut()) {
            if let Reserve::NoRoom(message) = ledger::reserve(tx, id, call.operation_key.as_deref(), &spend, now)? {
                return Err(self.refuse(events, &call.agent, About::Call(call, &decision), Refusal::Budget, message));
            }
            *amount = Some(spend.amount);
        }
        if let Some(rule_id) = &decision.standing_rule {
            if let Some(mut rule) = tx.rules()?.into_iter().find(|r| &r.id == rule_id) {
                rule.uses += 1;
                tx.put_rule(&rule)?;
            }
        }
        // Spec §5a: the first call under a key binds the task (the check above found no other).
        if let Some(key) = &call.operation_key {
            self.check_task(tx, events, key, call, Binding::Bind)?;
        }
        Ok(AloneAdmission { decision, runs_as, holder })
    }

    fn confirm_run_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        run: &mut Run,
        token: &str,
        now: u64,
    ) -> Result<(), RuntimeError> {
        if let Some(refused) = self.claim_token_holds(events, &run.agent, &run.id, Some(&run.token), token)? {
            return Err(refused);
        }
        if run.host_claim.confirmed_at.is_some() {
            return Ok(());
        }
        if run.status != Status::Granted {
            let message = format!("run `{}` is `{}`: it cannot be confirmed", run.id, run.status);
            return Err(self.refuse(events, &run.agent, About::Operation(&run.id), Refusal::Status, message));
        }
        if run.host_claim.table_digest != table.header.table_digest {
            let message = format!(
                "the table changed since run `{}` was admitted: it does not run; call again, and the call is decided on the table in force",
                run.id
            );
            self.fail_run_in(tx, events, run, message.clone())?;
            return Err(RuntimeError::refused(Refusal::NotClaimed, message));
        }
        run.host_claim.confirmed_at = Some(now);
        run.status = Status::Sending;
        tx.put_run(run)?;
        events.push(self.run_event(run));
        Ok(())
    }

    fn fail_run_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        run: &mut Run,
        message: String,
    ) -> Result<(), RuntimeError> {
        if run.host_claim.confirmed_at.is_some() {
            let message = format!("run `{}` was confirmed: it ran or runs; report its outcome instead", run.id);
            return Err(self.refuse(events, &run.agent, About::Operation(&run.id), Refusal::NotClaimed, message));
        }
        run.status = Status::Failed;
        run.reason = Some(message.clone());
        ledger::release(tx, &run.id)?;
        tx.put_run(run)?;
        let mut e = self.run_event(run);
        e.outcome = "refused".into();
        events.push(e);
        Ok(())
    }

    fn record_run_outcome_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        run: &mut Run,
        outcome: RunOutcome,
    ) -> Result<(), RuntimeError> {
        if run.status != Status::Sending {
            return Ok(());
        }
        let (status, receipt, reason) = match (outcome, run.amount) {
            (RunOutcome::Done(receipt), None) => (Status::Done, Some(receipt), None),
            (RunOutcome::Done(receipt), Some(amount)) => match conclusive(&receipt, &run.id, amount) {
                Some(true) => {
                    ledger::settle_spent(tx, &run.id)?;
                    (Status::Done, Some(receipt), None)
                }
                Some(false) => {
                    ledger::release(tx, &run.id)?;
                    (
                        Status::Failed,
                        Some(receipt),
                        Some("the other side rejected the operation: nothing was spent".into()),
                    )
                }
                None => (
                    Status::Unknown,
                    Some(receipt),
                    Some(format!(
                        "the receipt does not name operation `{}` and amount {amount} with an outcome: not conclusive; the reservation stays until it is settled",
                        run.id
                    )),
                ),
            },
            (RunOutcome::Failed(why), _) => {
                ledger::release(tx, &run.id)?;
                (Status::Failed, None, Some(why))
            }
            (RunOutcome::Unknown(why), _) => (Status::Unknown, None, Some(why)),
        };
        run.status = status;
        run.receipt = receipt;
        run.reason = reason;
        tx.put_run(run)?;
        events.push(self.run_event(run));
        Ok(())
    }

    fn run_event(&self, run: &Run) -> AuditEvent {
        AuditEvent {
            at: self.clock.now(),
            kind: EventKind::Execution,
            who: Some(run.host_claim.runs_as.clone()),
            agent: run.agent.clone(),
            skill: run.skill.clone(),
            tool: run.tool.clone(),
            proposal: Some(run.id.clone()),
            fingerprint: None,
            rule: run.standing_rule.clone(),
            outcome: run.status.to_string(),
            reason: run.reason.clone(),
            authorized_by: Some(match &run.standing_rule {
                Some(rule) => Authorization::StandingRule(rule.clone()),
                None => Authorization::PolicyAlone,
            }),
        }
    }
}

/// What [`Runtime::claim_if_alone_sending`] made of a call.
#[derive(Debug)]
pub enum AloneClaim<'r> {
    /// Not alone: nothing was recorded; the host makes the call another way (it proposes it).
    NotAlone,
    /// Claimed and committed: run it, and wait for the [`Syncing`] before its answer leaves the host
    /// (finished already for a tool that does more than read).
    Claimed(Box<Claimed>, Syncing),
    /// A read decided alone and admitted, its transaction still open: send the call, then
    /// [`AdmittedRead::claim`].
    Admitted(Box<AdmittedRead<'r>>),
}

/// An alone call of a tool that only reads, decided and admitted in a store transaction still open — the
/// store's write lock held ([`Runtime::claim_if_alone_sending`]). The host sends the call, then
/// [`AdmittedRead::claim`]s it at once: until then no other writer of the store gets in. Dropped without
/// being claimed, the transaction is rolled back and nothing is recorded, the decision included: drop it
/// only when the call was not sent.
pub struct AdmittedRead<'r> {
    rt: &'r Runtime,
    tx: Box<dyn Transaction + 'r>,
    events: Vec<AuditEvent>,
    table: std::sync::Arc<Table>,
    now: u64,
    request: ProposalRequest,
    /// The request's call in its task.
    call: Call,
    token: String,
    confirm: bool,
    admitted: AloneAdmission,
}

impl AdmittedRead<'_> {
    /// Writes the run (`sending` when claimed with [`Claiming::ClaimAndConfirm`], else `granted`) and its
    /// events — the decision's, the claim's, the confirmation's — and commits without waiting for the
    /// sync: the call's answer must wait for the [`Syncing`] before it leaves the host.
    ///
    /// Errors: [`RuntimeError::Store`] (nothing is recorded; the answer must be withheld). Nothing else: all
    /// that may refuse the claim was checked before it was answered [`AloneClaim::Admitted`].
    pub fn claim(self: Box<Self>) -> Result<(Claimed, Syncing), RuntimeError> {
        let mut this = *self;
        let ask = ClaimAsk {
            table: &this.table,
            now: this.now,
            acting: None,
            request: &this.request,
            call: &this.call,
            token: &this.token,
            confirm: this.confirm,
        };
        let written = this.rt.write_claim_in(this.tx.as_mut(), &mut this.events, &ask, this.admitted);
        this.rt.conclude(this.tx, this.events, written.map(Kept::Commit), crate::Commit::Syncing)
    }
}

impl std::fmt::Debug for AdmittedRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmittedRead").field("tool", &self.request.call.tool).field("token", &self.token).finish()
    }
}

/// What an alone claim asks ([`Runtime::claim_alone_in`]): on `table` at `now` (seconds since the Unix
/// epoch), presenting `acting` (a lease on the task), the request and its call in its task (made once by
/// the caller), its claim token, and whether the claim is confirmed in the same transaction.
#[derive(Clone, Copy)]
struct ClaimAsk<'a> {
    table: &'a Table,
    now: u64,
    acting: Option<&'a Lease>,
    request: &'a ProposalRequest,
    call: &'a Call,
    token: &'a str,
    confirm: bool,
}

/// What [`Runtime::admit_claim_in`] found.
enum ClaimAdmission {
    /// A retry with the same token and call: the run as it is (confirmed when asked).
    Again(Claimed),
    /// A new run, admitted: [`Runtime::write_claim_in`] writes it.
    New(AloneAdmission),
}

/// What an alone admission decided: the decision, the person it runs as, and the run's id with the amount
/// it reserved (an embedded run that spends nothing has no id).
pub(crate) struct AloneAdmission {
    pub(crate) decision: Decision,
    pub(crate) runs_as: String,
    pub(crate) holder: Option<(String, Option<u64>)>,
}

/// Whether `tool`'s effect set, proven and claimed, is `reads` alone, and it spends from no budget
/// ([`Runtime::claim_if_alone_syncing`]).
fn reads_only(table: &Table, tool: &str) -> bool {
    table.tools.get(tool).is_some_and(|tool| {
        tool.spends.is_none()
            && tool.reserved.is_none()
            && tool.effects.keys().chain(tool.claim.iter().flatten()).all(|c| *c == crate::table::EffectClass::Reads)
    })
}
