//! The decision lifecycle of a proposal (spec §5 "Who decides" … "Expiry"): approve, reject, withdraw, revoke, the recheck and expiry.

use crate::*;

impl Runtime {
    /// A person approves a proposal (spec §5 "Approve"), passing the fingerprint they were shown. The
    /// fingerprint is re-derived from the current table entry, covered version and destination (any
    /// difference → `stale`, final); the call is re-decided on the current table (`never` now → `failed`,
    /// final); then a grant is recorded (basis `operator`, expiring after the package's grant lifetime) →
    /// `granted`. Approving a `granted` proposal again refreshes its grant. With
    /// [`ApproveMode::AlwaysLikeThis`] a standing rule for the approver is made in the same transaction
    /// (if it cannot be made, nothing is approved).
    ///
    /// Errors: [`Refusal::NotDecider`] (naming who decides and why), [`Refusal::WrongFingerprint`],
    /// [`Refusal::Stale`], [`Refusal::NowNever`], [`Refusal::ProposalExpired`], [`Refusal::Status`],
    /// [`Refusal::UnknownVersion`], [`Refusal::Rule`], [`RuntimeError::UnknownProposal`],
    /// [`RuntimeError::Store`].
    pub fn approve(
        &self,
        id: &str,
        person: &str,
        fingerprint: &str,
        mode: ApproveMode,
    ) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = self.load_for(tx, events, person, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            self.check_status(events, person, &p, "approved", &[Status::Waiting, Status::Granted])?;
            if let Err(message) = may_decide(&table, &p, person) {
                return Err(self.refuse(events, person, About::Proposal(&p), Refusal::NotDecider, message));
            }
            if fingerprint != p.fingerprint {
                let message = format!(
                    "the fingerprint `{fingerprint}` is not the one of proposal `{}`: approve exactly what you were shown",
                    p.id
                );
                return Err(self.refuse(events, person, About::Proposal(&p), Refusal::WrongFingerprint, message));
            }
            self.recheck(tx, events, &table, &mut p, person)?;
            // Spec §5a "Atomic decisions": the standing rule of "always like this" is checked before
            // anything is reserved, and stored only once the grant is certain, so a refused rule leaves no
            // grant, no reservation and no rule.
            let scope = match mode {
                ApproveMode::Once => None,
                ApproveMode::AlwaysLikeThis | ApproveMode::ForThisTask { any_arguments: true } => {
                    Some(Scope::AnyArguments)
                }
                ApproveMode::AlwaysTheseArguments | ApproveMode::ForThisTask { any_arguments: false } => {
                    Some(Scope::these(&p.arguments))
                }
            };
            let for_task = matches!(mode, ApproveMode::ForThisTask { .. });
            let rule = match scope {
                None => None,
                Some(scope) => {
                    let new = NewRule {
                        agent: p.agent.clone(),
                        tool: p.tool.clone(),
                        skill: Some(p.skill.clone()),
                        // Spec §5: "always like this" makes the rule for the proposal's requester.
                        work_for: p.requester.clone().map_or(WorkFor::Nobody, WorkFor::Person),
                        by: person.to_string(),
                        scope,
                        // Spec §5a: a task rule ends with the task or the grant lifetime.
                        expires_at: for_task.then(|| now.saturating_add(table.package.grant_lifetime_seconds)),
                        mode: p.mode.clone(),
                        via: p.via.clone(),
                    };
                    let mut rule = self.check_rule(events, &table, &new, now)?;
                    if for_task {
                        rule.task = Some(p.operation_key.clone());
                    }
                    Some(rule)
                }
            };
            // Spec §6: the ceiling is checked and the amount reserved at grant time (a re-grant reserves
            // nothing more).
            match self.spend_for(&table, &p) {
                Err(message) => return Err(self.refuse(events, person, About::Proposal(&p), Refusal::Budget, message)),
                Ok(Some(spend)) => {
                    if let Reserve::NoRoom(message) = ledger::reserve(tx, &p.id, Some(&p.operation_key), &spend, now)? {
                        p.reason = Some(message.clone());
                        tx.put_proposal(&p)?;
                        return Err(self.refuse(events, person, About::Proposal(&p), Refusal::Budget, message));
                    }
                }
                Ok(None) => {}
            }
            if let Some(rule) = rule {
                self.record_rule(tx, events, rule)?;
            }
            p.grant = Some(Grant {
                approver: Some(person.to_string()),
                basis: Basis::Operator,
                granted_at: now,
                expires_at: now.saturating_add(table.package.grant_lifetime_seconds),
            });
            p.status = Status::Granted;
            p.decided_by = Some(person.to_string());
            p.reason = None;
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Grant, Some(person), &p));
            Ok(p)
        })
    }

    /// "Approve and run now" (the agents kit's behaviour): [`Runtime::approve`] then [`Runtime::execute`]
    /// toward the proposal's own destination.
    ///
    /// Errors: those of both.
    pub fn approve_and_run(
        &self,
        id: &str,
        person: &str,
        fingerprint: &str,
        mode: ApproveMode,
        run: impl FnOnce(&RunContext<'_>) -> RunOutcome,
    ) -> Result<Execution, RuntimeError> {
        let approved = self.approve(id, person, fingerprint, mode)?;
        self.execute(id, approved.destination.as_deref(), run)
    }

    /// A person says no (spec §5 "Reject"): `reason` must not be blank; it is stored and given back to the
    /// agent as the tool's answer ([`Proposal::answer_for_agent`]) → `rejected`, final.
    ///
    /// Errors: [`Refusal::ReasonRequired`], [`Refusal::NotDecider`], [`Refusal::Status`],
    /// [`Refusal::ProposalExpired`], [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn reject(&self, id: &str, person: &str, reason: &str) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = self.load_for(tx, events, person, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            if let Err(message) = limits::check_text("the reason", reason, limits::MAX_REASON_BYTES) {
                return Err(self.refuse(events, person, About::Proposal(&p), Refusal::TooLarge, message));
            }
            if !display::has_visible(reason) {
                let message = "a rejection needs a reason: the agent is told it".to_string();
                return Err(self.refuse(events, person, About::Proposal(&p), Refusal::ReasonRequired, message));
            }
            self.check_status(events, person, &p, "rejected", &[Status::Waiting, Status::Granted])?;
            if let Err(message) = may_decide(&table, &p, person) {
                return Err(self.refuse(events, person, About::Proposal(&p), Refusal::NotDecider, message));
            }
            p.status = Status::Rejected;
            p.reason = Some(reason.to_string());
            p.decided_by = Some(person.to_string());
            ledger::release(tx, &p.id)?;
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Rejection, Some(person), &p));
            Ok(p)
        })
    }

    /// The requester (a person) or the agent withdraws a `waiting` proposal (spec §5) → `withdrawn`.
    ///
    /// Errors: [`Refusal::NotDecider`] (someone else), [`Refusal::Status`] (not `waiting`),
    /// [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn withdraw(&self, id: &str, by: Principal<'_>) -> Result<Proposal, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = self.load_for(tx, events, by.name(), id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            let allowed = match by {
                Principal::Agent(a) => a == p.agent,
                Principal::Person(person) => p.requester.as_deref() == Some(person),
            };
            if !allowed {
                let message = format!(
                    "only the requester or the agent `{}` may withdraw proposal `{}`, not `{}`",
                    p.agent,
                    p.id,
                    by.name()
                );
                return Err(self.refuse(events, by.name(), About::Proposal(&p), Refusal::NotDecider, message));
            }
            self.check_status(events, by.name(), &p, "withdrawn", &[Status::Waiting])?;
            p.status = Status::Withdrawn;
            // Spec §5a: a proposal that ends without a send holds no money.
            ledger::release(tx, &p.id)?;
            p.decided_by = Some(by.name().to_string());
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Withdrawal, Some(by.name()), &p));
            Ok(p)
        })
    }

    /// Whoever may decide a proposal, or a supervisor, revokes it (spec §5 "Revoke"): a `waiting` or
    /// `granted` one → `revoked`; a `sending` or `unknown` one is marked `revoked` too (the other side may
    /// have acted). Revoking a `revoked` proposal again changes nothing.
    ///
    /// Errors: [`Refusal::NotDecider`], [`Refusal::Status`] (any other status),
    /// [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn revoke(&self, id: &str, person: &str, why: &str) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = self.load_for(tx, events, person, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            if p.status == Status::Revoked {
                return Ok(p);
            }
            if let Err(message) = limits::check_text("the reason", why, limits::MAX_REASON_BYTES) {
                return Err(self.refuse(events, person, About::Proposal(&p), Refusal::TooLarge, message));
            }
            if !holds(&table, person, &table.authority.supervises) {
                if let Err(message) = may_decide(&table, &p, person) {
                    return Err(self.refuse(events, person, About::Proposal(&p), Refusal::NotDecider, message));
                }
            }
            self.check_status(
                events,
                person,
                &p,
                "revoked",
                &[Status::Waiting, Status::Granted, Status::Sending, Status::Unknown],
            )?;
            if matches!(p.status, Status::Waiting | Status::Granted) {
                ledger::release(tx, &p.id)?; // a sending or unknown one keeps it: the other side may have acted
            }
            p.status = Status::Revoked;
            p.reason =
                Some(if !display::has_visible(why) { format!("revoked by `{person}`") } else { why.to_string() });
            p.decided_by = Some(person.to_string());
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Revocation, Some(person), &p));
            Ok(p)
        })
    }

    /// The proposal with this id, as it is now (a `waiting` one past its expiry becomes `expired`).
    ///
    /// Errors: [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn proposal(&self, id: &str) -> Result<Proposal, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut p = load(tx, id)?;
            self.expire_if_due(tx, events, &mut p, now)?;
            Ok(p)
        })
    }

    /// Whether `person` may decide proposal `p` now under the current table (spec §5 "Who decides"):
    /// `Err` with the message naming who decides and why, as [`Runtime::approve`] would refuse it. Reads
    /// nothing from the store and records nothing: for a transport that must check before it does more
    /// (the approval service asks a host's version URL only for a person who may decide).
    pub fn may_decide(&self, p: &Proposal, person: &str) -> Result<(), String> {
        may_decide(&self.table(), p, person)
    }

    /// Whether `person` may turn proposal `p` into a task rule or a standing rule for its requester (spec
    /// §5 "Who may widen"): `Err` with the reason, as [`Runtime::approve`] with
    /// [`ApproveMode::ForThisTask`] or [`ApproveMode::AlwaysLikeThis`] would refuse it for want of
    /// authority. Records nothing: for a screen that offers those choices only to a person who may make them.
    pub fn may_make_rule_from(&self, p: &Proposal, person: &str) -> Result<(), String> {
        let table = self.table();
        let work_for = p.requester.clone().map_or(WorkFor::Nobody, WorkFor::Person);
        let routed = [(p.skill.as_str(), &p.decider.route)];
        let routed = if p.decider.route == Route::Requester { &routed[..0] } else { &routed[..] };
        crate::rules::may_make_rule(&table, &p.agent, &p.tool, &work_for, person, routed)
    }

    /// Every proposal, oldest first, as they are now (expiring what is due).
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn proposals(&self) -> Result<Vec<Proposal>, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut all = tx.proposals()?;
            for p in &mut all {
                self.expire_if_due(tx, events, p, now)?;
            }
            Ok(all)
        })
    }

    /// The `waiting` proposals `person` may decide now (spec §5 "Who decides"), oldest first: a person's
    /// queue of approvals.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn waiting_for(&self, person: &str) -> Result<Vec<Proposal>, RuntimeError> {
        let table = self.table();
        Ok(self.waiting()?.into_iter().filter(|p| may_decide(&table, p, person).is_ok()).collect())
    }

    /// One page of what waits for `person`, **newest first**, read through the store's indexes
    /// ([`Transaction::proposal_page`]): the `waiting` proposals still open that they may decide now (spec
    /// §5 "Who decides": routed to them, to a role they hold or a queue they are in — minus their own
    /// requests — the work for them, an agent they sponsor's work for nobody, or every one for a person
    /// who `decides_proposals`), and with `own_requests` also their own requests decided by others; at
    /// most `limit` after skipping `offset`, with the total and the counts by decider
    /// ([`ProposalCount`]). A person not in the table has nothing waiting.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn waiting_page_for(
        &self,
        person: &str,
        own_requests: bool,
        offset: usize,
        limit: usize,
    ) -> Result<(ProposalPage, Vec<ProposalCount>), RuntimeError> {
        let table = self.table();
        let Some(query) = waiting_query(&table, person, own_requests, self.clock.now()) else {
            return Ok((ProposalPage::default(), Vec::new()));
        };
        let (mut page, counts) = self.transact(|tx, _| {
            let page = tx.proposal_page(&query, offset, limit)?;
            let counts = tx.proposal_counts(&query)?;
            Ok((page, counts))
        })?;
        // The query is `may_decide` on the indexed columns; this is the same check on the records.
        page.proposals.retain(|p| {
            may_decide(&table, p, person).is_ok() || (own_requests && p.requester.as_deref() == Some(person))
        });
        Ok((page, counts))
    }

    /// One page of the proposals that match `query`, **newest first** ([`Transaction::proposal_page`]):
    /// at most `limit` after skipping `offset`, with how many match in all. A proposal on the page past its
    /// expiry is expired as it is read (and then left out if the query no longer matches it).
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn proposal_page(
        &self,
        query: &ProposalQuery,
        offset: usize,
        limit: usize,
    ) -> Result<ProposalPage, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut page = tx.proposal_page(query, offset, limit)?;
            for p in &mut page.proposals {
                self.expire_if_due(tx, events, p, now)?;
            }
            page.proposals.retain(|p| query.matches(p));
            Ok(page)
        })
    }

    /// Every `waiting` proposal, oldest first, as they are now (one past its expiry becomes `expired` and is
    /// not listed). Reads only the waiting ones where the store has an index on the status (SQLite).
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn waiting(&self) -> Result<Vec<Proposal>, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut waiting = tx.proposals_in_status(Status::Waiting)?;
            for p in &mut waiting {
                self.expire_if_due(tx, events, p, now)?;
            }
            waiting.retain(|p| p.status == Status::Waiting);
            Ok(waiting)
        })
    }

    /// Marks every `waiting` proposal past its expiry `expired` (spec §5 "Expiry": silence is never
    /// consent) and returns their ids.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn expire_due(&self) -> Result<Vec<String>, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let mut expired = Vec::new();
            for mut p in tx.proposals()? {
                if self.expire_if_due(tx, events, &mut p, now)? {
                    expired.push(p.id);
                }
            }
            Ok(expired)
        })
    }

    /// Re-derives the fingerprint on the current table and covered version, and re-decides: a difference
    /// makes the proposal `stale`, `never` now makes it `failed`; both final and recorded.
    pub(crate) fn recheck(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        table: &Table,
        p: &mut Proposal,
        who: &str,
    ) -> Result<(), RuntimeError> {
        let call = proposal_call(p);
        let decision = decide_with(table, &call, &[], 0);
        let version = match self.covered_version(table, &call) {
            Ok(v) => v,
            Err(message) => return Err(self.refuse(events, who, About::Proposal(p), Refusal::UnknownVersion, message)),
        };
        let instructions = self.versions.instruction_version(&p.agent);
        let current = decision.entry_digest.as_deref().map(|digest| {
            fingerprint_with(&call, digest, version.as_deref(), p.destination.as_deref(), instructions.as_deref())
        });
        let same_tool = decision.definition_digest.as_deref() == Some(p.definition_digest.as_str());
        let same_format = p.fingerprint_format == FINGERPRINT_FORMAT;
        if current.as_deref() != Some(p.fingerprint.as_str()) || !same_tool || !same_format {
            let mut changed = Vec::new();
            if !same_format {
                changed.push(format!(
                    "it was made under fingerprint format {}, and this runtime writes format {FINGERPRINT_FORMAT}",
                    p.fingerprint_format
                ));
            }
            if instructions != p.instruction_version {
                changed.push(format!(
                    "the instructions are {} instead of {}",
                    words_of(instructions.as_deref()),
                    words_of(p.instruction_version.as_deref())
                ));
            }
            if !decision.offered {
                changed.push("the triple is no longer offered".to_string());
            } else if decision.entry_digest.as_deref() != Some(p.entry_digest.as_str()) || !same_tool {
                changed.push("the rules or the tool changed".to_string());
            }
            if version != p.covered_version {
                changed.push(format!(
                    "the covered version is {} instead of {}",
                    words_of(version.as_deref()),
                    words_of(p.covered_version.as_deref())
                ));
            }
            let message = format!(
                "proposal `{}` is stale ({}): nothing runs; the agent must look again",
                p.id,
                if changed.is_empty() { "what it covers changed".to_string() } else { changed.join(", ") }
            );
            p.status = Status::Stale;
            // Spec §5a: a proposal that ends without a send holds no money.
            ledger::release(tx, &p.id)?;
            p.reason = Some(message.clone());
            tx.put_proposal(p)?;
            return Err(self.refuse(events, who, About::Proposal(p), Refusal::Stale, message));
        }
        if decision.level == Level::Never {
            let message = format!("on the current table, {}", refusal_message(&decision));
            p.status = Status::Failed;
            // Spec §5a: a proposal that ends without a send holds no money.
            ledger::release(tx, &p.id)?;
            p.reason = Some(message.clone());
            tx.put_proposal(p)?;
            return Err(self.refuse(events, who, About::Proposal(p), Refusal::NowNever, message));
        }
        Ok(())
    }

    pub(crate) fn check_status(
        &self,
        events: &mut Vec<AuditEvent>,
        who: &str,
        p: &Proposal,
        verb: &str,
        allowed: &[Status],
    ) -> Result<(), RuntimeError> {
        if allowed.contains(&p.status) {
            return Ok(());
        }
        let refusal = if p.status == Status::Expired { Refusal::ProposalExpired } else { Refusal::Status };
        let message = if p.status == Status::Expired {
            format!("proposal `{}` expired undecided: it cannot be {verb}; nothing runs", p.id)
        } else {
            format!("proposal `{}` is `{}`: it cannot be {verb}", p.id, p.status)
        };
        Err(self.refuse(events, who, About::Proposal(p), refusal, message))
    }

    pub(crate) fn expire_if_due(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        p: &mut Proposal,
        now: u64,
    ) -> Result<bool, RuntimeError> {
        if p.status != Status::Waiting || now < p.expires_at {
            return Ok(false);
        }
        p.status = Status::Expired;
        // Spec §5a: a proposal that ends without a send holds no money.
        ledger::release(tx, &p.id)?;
        p.reason = Some("nobody decided before it expired: silence is not consent".into());
        tx.put_proposal(p)?;
        events.push(self.proposal_event(EventKind::Expiry, None, p));
        Ok(true)
    }
}

/// The query of what waits for `person` ([`Runtime::waiting_page_for`]): [`may_decide`] on the store's
/// list columns. `None` for someone who is not a person of the table.
pub(crate) fn waiting_query(table: &Table, person: &str, own_requests: bool, now: u64) -> Option<ProposalQuery> {
    let info = table.persons.get(person)?;
    let deciders = if holds(table, person, &table.authority.decides_proposals) {
        // Every waiting proposal is theirs to decide, their own requests included.
        None
    } else {
        let mut direct = vec![format!("person:{person}"), format!("requester:{person}")];
        direct.extend(table.agents.iter().filter(|(_, a)| a.sponsor == person).map(|(n, _)| format!("sponsored:{n}")));
        let mut shared: Vec<String> = info.roles.iter().map(|r| format!("role:{r}")).collect();
        shared.extend(
            table.queues.iter().filter(|(_, q)| holds(table, person, &q.decided_by)).map(|(n, _)| format!("queue:{n}")),
        );
        Some(DeciderQuery { direct, shared, person: person.to_string(), own_requests })
    };
    Some(ProposalQuery { status: Some(Status::Waiting), deciders, open_at: Some(now), ..ProposalQuery::default() })
}

/// Who may decide a proposal now (spec §5 "Who decides"): a person admitted by `decides_proposals`, or a
/// decider of the route — the requester for the default route; the named person for a person route (the
/// requester too, when the policy names them); for a role or a queue, its holders or members other than
/// the person the work is for. A refusal names who decides and why.
pub(crate) fn may_decide(table: &Table, p: &Proposal, person: &str) -> Result<(), String> {
    if !table.persons.contains_key(person) {
        return Err(format!("`{person}` is not a person of the table: only a person decides a proposal"));
    }
    if holds(table, person, &table.authority.decides_proposals) {
        return Ok(());
    }
    let sponsor = table.agents.get(&p.agent).map(|a| a.sponsor.as_str()).unwrap_or_default();
    let route = &p.decider.route;
    let decider = resolve_decider(table, route, p.requester.as_deref(), sponsor);
    if decider.persons.iter().any(|d| d == person) {
        return Ok(());
    }
    let names = |persons: &[String]| persons.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    let source = route_source(table, &p.agent, &p.skill, &p.tool, route);
    let refused = format!("`{person}` may not decide proposal `{}`", p.id);
    Err(match route {
        Route::Requester => {
            format!("{refused}: the decision is {}'s, the person the work is for", names(&decider.persons))
        }
        Route::Person(named) => {
            let mut message = format!("{refused}: the decision is `{named}`'s because {source}");
            if p.requester.as_deref() == Some(person) {
                message.push_str(&format!("; the work is for `{person}`, but the decision is not theirs"));
            }
            message
        }
        Route::Role(_) | Route::Queue(_) => {
            let others = if decider.persons.is_empty() {
                "nobody else can decide it: only a person admitted by `decides_proposals`".to_string()
            } else {
                format!("the decision is {}'s", names(&decider.persons))
            };
            if p.requester.as_deref() == Some(person) {
                format!(
                    "{refused}: the work is for `{person}`, and {source}, so the decision is someone else's; {others}"
                )
            } else {
                format!("{refused}: {source}; {others}")
            }
        }
    })
}

/// Where a route comes from, in words: "skill `FixBug` routes `GitPush` to role `Maintainer`" (a skill's
/// route wins over its agent's).
pub(crate) fn route_source(table: &Table, agent: &str, skill: &str, tool: &str, route: &Route) -> String {
    let source = match table.skills.get(skill).and_then(|s| s.routes.get(tool)) {
        Some(r) if r == route => format!("skill `{skill}`"),
        _ => format!("agent `{agent}`"),
    };
    format!("{source} routes `{tool}` to {}", route_words(route))
}
