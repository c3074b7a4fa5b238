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
        let Some(info) = table.budgets.get(budget) else { return Err(RuntimeError::UnknownBudget(budget.to_string())) };
        if !holds(&table, by, &table.authority.supervises) {
            return Err(RuntimeError::refused(
                Refusal::NotDecider,
                format!("only a supervisor installs a new ceiling for budget `{budget}`, not `{by}`"),
            ));
        }
        self.transact(|tx, _| {
            ledger::install_ceiling(tx, budget, info)?;
            Ok(ledger::status(tx, budget, info)?)
        })
    }

    /// Settles a spend whose outcome was not confirmed (spec §6 "Settlement"): `holder` is a proposal id
    /// (status `unknown`, or `revoked` while sending) or the `A-n` operation of a call that ran alone, and
    /// `receipt` the other side's answer. A conclusive receipt — it names the operation
    /// ([`RunContext::operation`]) and the amount, with `"outcome": "accepted"` or `"rejected"` (see
    /// [`conclusive`]) — moves the reservation to spent or releases it; the proposal becomes `done` or
    /// `failed` (a revoked one stays revoked). Returns the budget afterwards.
    ///
    /// Errors: [`Refusal::NotConclusive`] (nothing changes), [`RuntimeError::UnknownProposal`] (no such
    /// holder), [`RuntimeError::Store`].
    pub fn settle(&self, holder: &str, receipt: &Value) -> Result<BudgetStatus, RuntimeError> {
        let table = self.table();
        self.transact(|tx, events| {
            let Some(reservation) = tx.reservation(holder)? else {
                return Err(RuntimeError::refused(
                    Refusal::NotConclusive,
                    format!("`{holder}` holds no reservation: there is nothing to settle"),
                ));
            };
            let mut proposal = tx.proposal(holder)?;
            let operation = proposal.as_ref().map_or_else(|| holder.to_string(), operation_id);
            let Some(accepted) = conclusive(receipt, &operation, reservation.amount) else {
                return Err(RuntimeError::refused(
                    Refusal::NotConclusive,
                    format!(
                        "the receipt does not name operation `{operation}` and amount {} with an outcome `accepted` or `rejected`: nothing changes",
                        reservation.amount
                    ),
                ));
            };
            if accepted {
                ledger::settle_spent(tx, holder)?;
            } else {
                ledger::release(tx, holder)?;
            }
            if let Some(p) = &mut proposal {
                if matches!(p.status, Status::Unknown | Status::Sending) {
                    p.status = if accepted { Status::Done } else { Status::Failed };
                    p.reason = (!accepted).then(|| "the other side rejected the operation: nothing was spent".to_string());
                }
                p.receipt = Some(receipt.clone());
                tx.put_proposal(p)?;
                events.push(self.proposal_event(EventKind::Execution, None, p));
            }
            let info = table.budgets.get(&reservation.budget).cloned().unwrap_or(crate::table::BudgetInfo {
                currency: String::new(),
                unit: String::new(),
                ceiling: 0,
                alone_up_to: 0,
                doc: None,
            });
            Ok(ledger::status(tx, &reservation.budget, &info)?)
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
