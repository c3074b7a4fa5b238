//! Budgets and settlement (spec §6): what a budget holds, raising its ceiling, settling a spend.

use crate::*;

impl Runtime {
    /// A budget as it stands now (spec §6): the current table's figures and the ledger's (installed
    /// ceiling, spent, reserved, room), in the budget's minor unit.
    ///
    /// Errors: [`RuntimeError::UnknownBudget`], [`RuntimeError::Store`].
    pub fn budget(&self, name: &str) -> Result<BudgetStatus, RuntimeError> {
        let table = self.table();
        let Some(info) = table.budgets.get(name) else { return Err(RuntimeError::UnknownBudget(name.to_string())) };
        self.transact(|tx, _| Ok(ledger::status(tx, name, info)?))
    }

    /// What one task holds of a budget now (spec §6 "Per task"): what it spent and what it holds reserved,
    /// against the budget's `per_task` cap in the current table, in the budget's minor unit. A task that
    /// never spent from the budget holds 0 of it.
    ///
    /// Errors: [`RuntimeError::UnknownBudget`], [`RuntimeError::Store`].
    pub fn task_spending(&self, budget: &str, task: &str) -> Result<TaskSpending, RuntimeError> {
        let table = self.table();
        let Some(info) = table.budgets.get(budget) else {
            return Err(RuntimeError::UnknownBudget(budget.to_string()));
        };
        self.transact(|tx, _| Ok(ledger::task_status(tx, budget, task, info)?))
    }

    /// Every budget of the current table as it stands now, by name.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn budgets(&self) -> Result<Vec<BudgetStatus>, RuntimeError> {
        let table = self.table();
        self.transact(|tx, _| {
            let mut all = Vec::new();
            for (name, info) in &table.budgets {
                all.push(ledger::status(tx, name, info)?);
            }
            Ok(all)
        })
    }

    /// Installs the current table's ceiling of `budget` as the ledger's installed ceiling (spec §6: a new
    /// policy never raises the installed ceiling silently; a supervisor does it here, on purpose). Spent and
    /// reserved stay.
    ///
    /// Errors: [`Refusal::NotDecider`] (not a supervisor), [`RuntimeError::UnknownBudget`],
    /// [`RuntimeError::Store`].
    pub fn raise_ceiling(&self, budget: &str, by: &str) -> Result<BudgetStatus, RuntimeError> {
        let table = self.table();
        self.transact(|tx, events| {
            let Some(info) = table.budgets.get(budget) else {
                let message = format!("there is no budget `{budget}`");
                self.refuse(events, by, About::Operation(budget), Refusal::NotConclusive, message);
                return Err(RuntimeError::UnknownBudget(budget.to_string()));
            };
            if !holds(&table, by, &table.authority.supervises) {
                let message = format!("only a supervisor installs a new ceiling for budget `{budget}`, not `{by}`");
                return Err(self.refuse(events, by, About::Operation(budget), Refusal::NotDecider, message));
            }
            let before = tx.budget(budget)?.map(|r| r.installed_ceiling);
            ledger::install_ceiling(tx, budget, info)?;
            let mut e = self.operation_event(EventKind::Ceiling, by, budget);
            e.outcome = "installed".into();
            e.reason = Some(format!(
                "budget `{budget}`: the installed ceiling is {} {unit} (it was {})",
                info.ceiling,
                before.map_or("none".to_string(), |b| format!("{b} {}", info.unit)),
                unit = info.unit
            ));
            events.push(e);
            Ok(ledger::status(tx, budget, info)?)
        })
    }

    /// Settles a spend whose execution was admitted (spec §6 "Settlement", §5a "Settlement follows a
    /// send"): `holder` is a proposal id whose execution was admitted (`sending`, `unknown`, `done` with its
    /// reservation still held, or `revoked` after it was sent) or the `A-n` operation of a call that ran
    /// alone, and `receipt` the other side's answer. A conclusive receipt — it names the operation
    /// ([`RunContext::operation`]) and the amount, with `"outcome": "accepted"` or `"rejected"` (see
    /// [`conclusive`]) — moves the reservation to spent or releases it; the proposal becomes `done` or
    /// `failed` (a revoked one stays revoked). Returns the budget afterwards. Every refusal is audited.
    ///
    /// Errors: [`Refusal::NotSent`] (a proposal never sent: nothing changes), [`Refusal::NotConclusive`]
    /// (nothing held, or a receipt that does not name the operation: nothing changes),
    /// [`RuntimeError::Store`].
    pub fn settle(&self, holder: &str, receipt: &Value) -> Result<BudgetStatus, RuntimeError> {
        self.settle_as(None, holder, receipt)
    }

    /// [`Runtime::settle`] presenting `acting`, a lease on the task (spec §5a "Leases", [`Holding`]).
    pub(crate) fn settle_as(
        &self,
        acting: Option<&Lease>,
        holder: &str,
        receipt: &Value,
    ) -> Result<BudgetStatus, RuntimeError> {
        let table = self.table();
        self.transact(|tx, events| {
            let mut proposal = tx.proposal(holder)?;
            let mut run = if proposal.is_none() { tx.run(holder)? } else { None };
            let task = proposal.as_ref().map(|p| (p.operation_key.clone(), p.agent.clone()));
            if let Some((key, agent)) = task.or_else(|| run.as_ref().map(|r| (r.operation_key.clone(), r.agent.clone()))) {
                self.check_holder(tx, events, acting, &key, &agent)?;
            }
            let who = proposal.as_ref().map(|p| p.agent.clone()).or_else(|| run.as_ref().map(|r| r.agent.clone()));
            let who = who.unwrap_or_default();
            if let Err(message) = limits::check_value("the receipt", receipt, limits::MAX_RECEIPT_BYTES) {
                return Err(self.refuse(events, &who, About::Operation(holder), Refusal::TooLarge, message));
            }
            if let Some(r) = &run {
                if r.host_claim.confirmed_at.is_none() {
                    let message = format!(
                        "run `{}` is `{}` and was never sent: only what was sent is settled; nothing changes",
                        r.id, r.status
                    );
                    return Err(self.refuse(events, &who, About::Operation(holder), Refusal::NotSent, message));
                }
            }
            if let Some(p) = &proposal {
                let admitted = p.ran_as.is_some()
                    && matches!(p.status, Status::Sending | Status::Unknown | Status::Done | Status::Revoked);
                if !admitted {
                    let message = format!(
                        "proposal `{}` is `{}` and was never sent: only what was sent is settled; nothing changes",
                        p.id, p.status
                    );
                    return Err(self.refuse(events, &who, About::Proposal(p), Refusal::NotSent, message));
                }
            }
            let Some(reservation) = tx.reservation(holder)? else {
                let message = format!("`{holder}` holds no reservation: there is nothing to settle");
                let refused = match &proposal {
                    Some(p) => self.refuse(events, &who, About::Proposal(p), Refusal::NotConclusive, message),
                    None => self.refuse(events, &who, About::Operation(holder), Refusal::NotConclusive, message),
                };
                return Err(refused);
            };
            let operation = proposal.as_ref().map_or_else(|| holder.to_string(), operation_id);
            let Some(accepted) = conclusive(receipt, &operation, reservation.amount) else {
                let message = format!(
                    "the receipt does not name operation `{operation}` and amount {} with an outcome `accepted` or `rejected`: nothing changes",
                    reservation.amount
                );
                let refused = match &proposal {
                    Some(p) => self.refuse(events, &who, About::Proposal(p), Refusal::NotConclusive, message),
                    None => self.refuse(events, &who, About::Operation(holder), Refusal::NotConclusive, message),
                };
                return Err(refused);
            };
            if accepted {
                ledger::settle_spent(tx, holder)?;
            } else {
                ledger::release(tx, holder)?;
            }
            let word = if accepted { "spent" } else { "released" };
            let mut e = match &proposal {
                Some(p) => self.proposal_event(EventKind::Settlement, Some(&who), p),
                None => self.operation_event(EventKind::Settlement, &who, holder),
            };
            e.outcome = word.into();
            e.reason = Some(format!("`{holder}`: {} {word} from budget `{}`", reservation.amount, reservation.budget));
            events.push(e);
            if let Some(p) = &mut proposal {
                if matches!(p.status, Status::Unknown | Status::Sending) {
                    p.status = if accepted { Status::Done } else { Status::Failed };
                    p.reason = (!accepted).then(|| "the other side rejected the operation: nothing was spent".to_string());
                }
                p.receipt = Some(receipt.clone());
                tx.put_proposal(p)?;
                events.push(self.proposal_event(EventKind::Execution, None, p));
            }
            if let Some(r) = &mut run {
                if matches!(r.status, Status::Unknown | Status::Sending) {
                    r.status = if accepted { Status::Done } else { Status::Failed };
                    r.reason = (!accepted).then(|| "the other side rejected the operation: nothing was spent".to_string());
                }
                r.receipt = Some(receipt.clone());
                tx.put_run(r)?;
            }
            let info = table.budgets.get(&reservation.budget).cloned().unwrap_or(crate::table::BudgetInfo {
                currency: String::new(),
                unit: String::new(),
                ceiling: 0,
                alone_up_to: 0,
                doc: None,
                per_task: None,
            });
            Ok(ledger::status(tx, &reservation.budget, &info)?)
        })
    }

    /// A supervisor resolves a `sending` or `unknown` proposal that spends nothing (spec §5a "Settlement
    /// follows a send"), with a conclusive receipt: a JSON object naming the operation
    /// ([`operation_id`]) with `"outcome": "accepted"` (→ `done`, the receipt stored) or `"rejected"`
    /// (→ `failed`). A spend is settled with [`Runtime::settle`] instead.
    ///
    /// Errors: [`Refusal::NotDecider`] (not a supervisor), [`Refusal::NotSent`] (any other status),
    /// [`Refusal::NotConclusive`] (a spend, or a receipt that does not name the operation with an outcome),
    /// [`RuntimeError::UnknownProposal`], [`RuntimeError::Store`].
    pub fn resolve(&self, id: &str, by: &str, receipt: &Value) -> Result<Proposal, RuntimeError> {
        let table = self.table();
        self.transact(|tx, events| {
            let mut p = self.load_for(tx, events, by, id)?;
            if let Err(message) = limits::check_value("the receipt", receipt, limits::MAX_RECEIPT_BYTES) {
                return Err(self.refuse(events, by, About::Proposal(&p), Refusal::TooLarge, message));
            }
            if !holds(&table, by, &table.authority.supervises) {
                let message = format!("only a supervisor resolves proposal `{}`, not `{by}`", p.id);
                return Err(self.refuse(events, by, About::Proposal(&p), Refusal::NotDecider, message));
            }
            if !matches!(p.status, Status::Sending | Status::Unknown) {
                let message =
                    format!("proposal `{}` is `{}`: only a `sending` or `unknown` one is resolved", p.id, p.status);
                return Err(self.refuse(events, by, About::Proposal(&p), Refusal::NotSent, message));
            }
            if self.spend_for(&table, &p).map_or(true, |s| s.is_some()) || tx.reservation(&p.id)?.is_some() {
                let message =
                    format!("proposal `{}` spends from a budget: it is settled with a receipt, not resolved", p.id);
                return Err(self.refuse(events, by, About::Proposal(&p), Refusal::NotConclusive, message));
            }
            let operation = operation_id(&p);
            let names_it = receipt.get("operation").and_then(Value::as_str) == Some(operation.as_str());
            let accepted = match receipt.get("outcome").and_then(Value::as_str) {
                Some("accepted") if names_it => true,
                Some("rejected") if names_it => false,
                _ => {
                    let message = format!(
                        "the receipt does not name operation `{operation}` with an outcome `accepted` or `rejected`: nothing changes"
                    );
                    return Err(self.refuse(events, by, About::Proposal(&p), Refusal::NotConclusive, message));
                }
            };
            p.status = if accepted { Status::Done } else { Status::Failed };
            p.reason = Some(format!("resolved by `{by}`"));
            p.receipt = Some(receipt.clone());
            tx.put_proposal(&p)?;
            events.push(self.proposal_event(EventKind::Execution, Some(by), &p));
            Ok(p)
        })
    }

    /// The spend of a proposal on the current table, if its tool spends from a budget.
    pub(crate) fn spend_for<'t>(&self, table: &'t Table, p: &Proposal) -> Result<Option<ledger::Spend<'t>>, String> {
        match table.tools.get(&p.tool) {
            Some(tool) => ledger::spend_of(table, &p.tool, tool, &p.arguments),
            None => Ok(None),
        }
    }
}
