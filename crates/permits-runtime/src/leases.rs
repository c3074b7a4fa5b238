//! Task leases (spec §5a "Leases"): a host holds a task by a lease ([`Runtime::take_task`]), renewed while
//! it works ([`Runtime::renew_task`]); while the lease is held only its holder — presenting it, through
//! [`Runtime::holding`] — may propose, execute or settle under the key. A host that takes the task over after
//! the lease expired gets the next fence, and every later call that presents an older one is refused ("this
//! host no longer holds the task"), in the transaction of the act itself: a replaced worker cannot use
//! permission that no longer applies to it, even with a valid grant.
//!
//! The lease is checked at every admission — a proposal, an alone call, a claim, a confirmation, an
//! execution's admission — and at a settlement. The outcome of an execution admitted under the lease is
//! recorded even when the lease is lost while it runs (it ran: refusing the report would only lose that).
//!
//! One host alone may ignore leases: a key that was never leased, or whose lease expired or was released,
//! takes calls that present none.

use serde_json::Value;

use crate::*;

/// The longest a lease is taken or renewed for at once, in seconds (a day): a host that works longer renews.
pub const MAX_LEASE_SECONDS: u64 = 24 * 60 * 60;

impl Runtime {
    /// Takes the task `key` for `holder` for `seconds` (spec §5a "Leases"; 1 to [`MAX_LEASE_SECONDS`]). A
    /// key never leased gets fence 1; a key whose lease expired or was released gets the next fence — so
    /// every lease handed out before is fenced. A lease held now is not taken again, not even by its own
    /// holder (which renews it; taking it again would fence the holder's own handle out): a holder that wants
    /// a new fence releases the lease first. The task need not be bound yet (a worker takes it before its
    /// first call); taking binds nothing.
    ///
    /// Errors: [`Refusal::NotHolder`] (a lease is held: another holder's, "task `K` is held by `H` until T",
    /// or `holder`'s own, "… held by `H` already …: renew it"),
    /// [`Refusal::TooLarge`] (a key or holder over [`limits::MAX_KEY_BYTES`], or `seconds` over
    /// [`MAX_LEASE_SECONDS`]), [`Refusal::InvalidRequest`] (an empty key or holder, 0 seconds),
    /// [`RuntimeError::Store`].
    pub fn take_task(&self, key: &str, holder: &str, seconds: u64) -> Result<Lease, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            check_lease_input(self, events, key, holder, seconds)?;
            let previous = tx.lease(key)?;
            if let Some(held) = previous.as_ref().filter(|l| l.held_at(now)) {
                let message = if held.holder == holder {
                    format!(
                        "task `{key}` is held by `{holder}` already, with fence {} until {}: renew it to hold it \
                         longer (or release it and take it again for a new fence)",
                        held.fence, held.expires_at
                    )
                } else {
                    format!(
                        "task `{key}` is held by `{}` until {}: take it after that, or when `{}` releases it",
                        held.holder, held.expires_at, held.holder
                    )
                };
                return Err(self.refuse(events, holder, About::Operation(key), Refusal::NotHolder, message));
            }
            let lease = Lease {
                key: key.to_string(),
                holder: holder.to_string(),
                fence: previous.as_ref().map_or(1, |l| l.fence.saturating_add(1)),
                taken_at: now,
                expires_at: now.saturating_add(seconds),
            };
            tx.put_lease(&lease)?;
            let outcome = match &previous {
                Some(p) if p.holder != holder => format!(" (taken over from `{}`, fence {})", p.holder, p.fence),
                _ => String::new(),
            };
            events.push(self.lease_event(tx, &lease, "leased", outcome)?);
            Ok(lease)
        })
    }

    /// Renews a lease `lease.holder` holds for `seconds` from now (1 to [`MAX_LEASE_SECONDS`]), keeping its
    /// fence. A lease that expired and that nobody took since renews too (nothing acted under the key in
    /// between: a call presenting no lease is refused only while a lease is held, and one presenting an
    /// older fence always).
    ///
    /// Errors: [`Refusal::NotHolder`] ("this host no longer holds the task": another fence is current),
    /// [`Refusal::TooLarge`], [`Refusal::InvalidRequest`] (as [`Runtime::take_task`]), [`RuntimeError::Store`].
    pub fn renew_task(&self, lease: &Lease, seconds: u64) -> Result<Lease, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            check_lease_input(self, events, &lease.key, &lease.holder, seconds)?;
            let mut current = self.current_lease(tx, events, lease)?;
            current.expires_at = now.saturating_add(seconds);
            tx.put_lease(&current)?;
            events.push(self.lease_event(tx, &current, "renewed", String::new())?);
            Ok(current)
        })
    }

    /// Releases a lease before it expires: from now another host may take the task. Releasing a released
    /// or expired lease changes nothing.
    ///
    /// Errors: [`Refusal::NotHolder`] (another fence is current), [`RuntimeError::Store`].
    pub fn release_task(&self, lease: &Lease) -> Result<Lease, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut current = self.current_lease(tx, events, lease)?;
            if current.held_at(now) {
                current.expires_at = now;
                tx.put_lease(&current)?;
                events.push(self.lease_event(tx, &current, "released", String::new())?);
            }
            Ok(current)
        })
    }

    /// The lease on `key` as the store has it (expired and released ones included), or `None` when the key
    /// was never leased.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn lease(&self, key: &str) -> Result<Option<Lease>, RuntimeError> {
        self.transact(|tx, _| Ok(tx.lease(key)?))
    }

    /// This runtime acting as the holder of `lease` (spec §5a "Leases"): every call under `lease.key` made
    /// through the view presents the lease, and is refused unless it is the key's current lease and held
    /// now. Calls under other keys present none.
    pub fn holding<'a>(&'a self, lease: &'a Lease) -> Holding<'a> {
        Holding { runtime: self, lease }
    }

    /// The stored lease, if `lease` is still the key's current one (same holder and fence); else the
    /// refusal "this host no longer holds the task".
    fn current_lease(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        lease: &Lease,
    ) -> Result<Lease, RuntimeError> {
        match tx.lease(&lease.key)? {
            Some(current) if current.holder == lease.holder && current.fence == lease.fence => Ok(current),
            current => Err(self.fenced(events, &lease.key, lease, current.as_ref())),
        }
    }

    /// Spec §5a "Leases": may a call that presents `acting` (or none) act under `key` now? Checked in the
    /// transaction of the act, so a takeover that commits first fences it.
    pub(crate) fn check_holder(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        acting: Option<&Lease>,
        key: &str,
        who: &str,
    ) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let presented = acting.filter(|l| l.key == key);
        let stored = tx.lease(key)?;
        match (stored, presented) {
            (None, None) => Ok(()),
            (Some(s), None) if !s.held_at(now) => Ok(()),
            (Some(s), None) => {
                let message = format!(
                    "task `{key}` is held by `{}` until {}: only its holder acts under it (take the task, or wait)",
                    s.holder, s.expires_at
                );
                Err(self.refuse(events, who, About::Operation(key), Refusal::NotHolder, message))
            }
            (Some(s), Some(l)) if s.holder == l.holder && s.fence == l.fence => {
                if s.held_at(now) {
                    return Ok(());
                }
                let message = format!(
                    "the lease of `{}` on task `{key}` expired at {}: renew it before acting under the key",
                    s.holder, s.expires_at
                );
                Err(self.refuse(events, who, About::Operation(key), Refusal::NotHolder, message))
            }
            (stored, Some(l)) => Err(self.fenced(events, key, l, stored.as_ref())),
        }
    }

    /// The refusal of `presented`, a lease that is not the key's `current` one.
    fn fenced(
        &self,
        events: &mut Vec<AuditEvent>,
        key: &str,
        presented: &Lease,
        current: Option<&Lease>,
    ) -> RuntimeError {
        let holder = &presented.holder;
        let now_held = match current {
            // The same holder, an older (or forged) fence: the fence is stale, not the holder replaced.
            Some(c) if c.holder == *holder => {
                format!("fence {} is not the current fence {} of `{}`'s lease", presented.fence, c.fence, c.holder)
            }
            Some(c) => format!("`{}` holds it now (fence {})", c.holder, c.fence),
            None => "the store has no lease on it".to_string(),
        };
        let message =
            format!("this host no longer holds the task `{key}`: {now_held}; `{holder}` may not act under it");
        self.refuse(events, holder, About::Operation(key), Refusal::NotHolder, message)
    }

    fn lease_event(
        &self,
        tx: &mut dyn Transaction,
        lease: &Lease,
        outcome: &str,
        more: String,
    ) -> Result<AuditEvent, RuntimeError> {
        let task = tx.task(&lease.key)?;
        Ok(AuditEvent {
            at: self.clock.now(),
            kind: EventKind::Task,
            who: Some(lease.holder.clone()),
            agent: task.as_ref().map(|t| t.root_agent.clone()).unwrap_or_default(),
            skill: task.as_ref().map(|t| t.root_skill.clone()).unwrap_or_default(),
            tool: String::new(),
            proposal: None,
            fingerprint: None,
            rule: None,
            outcome: outcome.to_string(),
            reason: Some(format!(
                "task `{}` {outcome}: `{}` holds it with fence {} until {}{more}",
                lease.key, lease.holder, lease.fence, lease.expires_at
            )),
            authorized_by: None,
        })
    }
}

fn check_lease_input(
    rt: &Runtime,
    events: &mut Vec<AuditEvent>,
    key: &str,
    holder: &str,
    seconds: u64,
) -> Result<(), RuntimeError> {
    let checks = [
        limits::check_text("the operation key", key, limits::MAX_KEY_BYTES).map_err(|m| (Refusal::TooLarge, m)),
        limits::check_text("the lease's holder", holder, limits::MAX_KEY_BYTES).map_err(|m| (Refusal::TooLarge, m)),
        if key.is_empty() || holder.is_empty() {
            Err((
                Refusal::InvalidRequest,
                "a lease needs an operation key and a holder: neither may be empty".to_string(),
            ))
        } else {
            Ok(())
        },
        match seconds {
            0 => {
                Err((Refusal::InvalidRequest, format!("a lease is taken for 1 to {MAX_LEASE_SECONDS} seconds, not 0")))
            }
            1..=MAX_LEASE_SECONDS => Ok(()),
            _ => Err((
                Refusal::TooLarge,
                format!(
                    "a lease is taken for 1 to {MAX_LEASE_SECONDS} seconds, not {seconds}: renew it to hold it longer"
                ),
            )),
        },
    ];
    for check in checks {
        if let Err((refusal, message)) = check {
            return Err(rt.refuse(events, holder, About::Operation(key), refusal, message));
        }
    }
    Ok(())
}

/// A [`Runtime`] acting as the holder of a lease ([`Runtime::holding`]; spec §5a "Leases"): the same
/// operations as the runtime's own, each presenting the lease for calls under its key. Each is refused with
/// [`Refusal::NotHolder`] when the lease is no longer the key's current one (taken over: "this host no longer
/// holds the task") or has expired (renew it), besides the errors of the runtime's operation of that name.
#[derive(Clone, Copy, Debug)]
pub struct Holding<'a> {
    runtime: &'a Runtime,
    lease: &'a Lease,
}

impl Holding<'_> {
    /// The lease this view presents.
    pub fn lease(&self) -> &Lease {
        self.lease
    }

    /// [`Runtime::propose`], presenting the lease.
    pub fn propose(&self, request: &ProposalRequest) -> Result<Proposal, RuntimeError> {
        self.runtime.propose_as(Some(self.lease), request)
    }

    /// [`Runtime::call`], presenting the lease.
    pub fn call(
        &self,
        request: &ProposalRequest,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Handled, RuntimeError> {
        self.runtime.call_as(Some(self.lease), request, run)
    }

    /// [`Runtime::run_alone`], presenting the lease (the call's operation key must be the lease's).
    pub fn run_alone(&self, call: &Call, run: impl FnOnce(&RunContext<'_>) -> RunOutcome) -> Result<Ran, RuntimeError> {
        self.runtime.run_alone_as(Some(self.lease), call, run)
    }

    /// [`Runtime::execute`], presenting the lease.
    pub fn execute(
        &self,
        id: &str,
        destination: Option<&str>,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        self.runtime.execute_with(Some(self.lease), id, destination, None, run)
    }

    /// [`Runtime::execute_claimed`], presenting the lease.
    pub fn execute_claimed(
        &self,
        id: &str,
        destination: Option<&str>,
        claim: &str,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        self.runtime.execute_with(Some(self.lease), id, destination, Some(claim), run)
    }

    /// [`Runtime::claim`], presenting the lease.
    pub fn claim(&self, id: &str, token: &str, destination: Option<&str>) -> Result<Claimed, RuntimeError> {
        self.runtime.claim_as(Some(self.lease), id, token, destination)
    }

    /// [`Runtime::claim_alone`], presenting the lease.
    pub fn claim_alone(&self, request: &ProposalRequest, token: &str) -> Result<Claimed, RuntimeError> {
        self.runtime.claim_alone_as(Some(self.lease), request, token, false)
    }

    /// [`Runtime::claim_alone_confirmed`], presenting the lease.
    pub fn claim_alone_confirmed(&self, request: &ProposalRequest, token: &str) -> Result<Claimed, RuntimeError> {
        self.runtime.claim_alone_as(Some(self.lease), request, token, true)
    }

    /// [`Runtime::decide_and_claim`], presenting the lease.
    pub fn decide_and_claim(
        &self,
        request: &ProposalRequest,
        token: &str,
        claiming: Claiming,
    ) -> Result<CallClaim, RuntimeError> {
        self.runtime.decide_and_claim_as(Some(self.lease), request, token, claiming)
    }

    /// [`Runtime::confirm`], presenting the lease.
    pub fn confirm(&self, id: &str, token: &str) -> Result<Claimed, RuntimeError> {
        self.runtime.confirm_as(Some(self.lease), id, token)
    }

    /// [`Runtime::refuse_claim`], presenting the lease.
    pub fn refuse_claim(
        &self,
        id: &str,
        token: &str,
        refused: AuthorityRefusal,
        why: &str,
    ) -> Result<Claimed, RuntimeError> {
        self.runtime.refuse_claim_as(Some(self.lease), id, token, refused, why)
    }

    /// [`Runtime::record_outcome`]: what ran is recorded whoever holds the task now (an execution admitted
    /// under the lease ran; refusing its report would only lose what happened). Settling it later with
    /// [`Holding::settle`] needs the lease.
    pub fn record_outcome(&self, id: &str, token: &str, outcome: RunOutcome) -> Result<Claimed, RuntimeError> {
        self.runtime.record_outcome(id, token, outcome)
    }

    /// [`Runtime::settle`], presenting the lease.
    pub fn settle(&self, holder: &str, receipt: &Value) -> Result<BudgetStatus, RuntimeError> {
        self.runtime.settle_as(Some(self.lease), holder, receipt)
    }
}
