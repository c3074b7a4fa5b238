//! Budgets and spending (spec §6): the automatic allowance, reservations against the cumulative ceiling,
//! and settlement. Every function here runs inside the caller's store [`Transaction`], so a check and the
//! reservation it allows are one atomic step: two approvals racing for the last of a ceiling cannot both
//! succeed.
//!
//! The ledger of a budget is its **installed ceiling** (the ceiling the runtime first saw; a later table
//! can lower what applies but never raises it silently, see [`crate::Runtime::raise_ceiling`]),
//! what was **spent**, and the **reservations** held for granted, unsent spends (by holder: a proposal id,
//! or `A-n` for a call that ran alone). Amounts are whole numbers in the budget's minor unit (cents).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::StoreError;
use super::store::Transaction;
use crate::table::{BudgetInfo, Table, ToolInfo};

use super::records::{BudgetRecord, Reservation};

/// A budget as it stands now (spec §6), for a host or a person to read: the table's figures and the
/// ledger's. Amounts in the minor unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetStatus {
    /// The budget's name.
    pub name: String,
    /// The currency code (`USD`).
    pub currency: String,
    /// The minor unit (`cents`).
    pub unit: String,
    /// The ceiling in the current table.
    pub ceiling: u64,
    /// The ceiling the ledger installed (`None` before the budget was first used).
    pub installed_ceiling: Option<u64>,
    /// What applies: the smaller of the two.
    pub effective_ceiling: u64,
    /// The automatic allowance in the current table.
    pub alone_up_to: u64,
    /// `per_task` in the current table: the most one task may hold reserved and spent together; `None`
    /// (absent from the JSON) when the budget sets none. What one task holds: [`crate::Runtime::task_spending`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_task: Option<u64>,
    /// Spent so far.
    pub spent: u64,
    /// Held for granted, unsent spends.
    pub reserved: u64,
    /// What is left: `effective_ceiling - spent - reserved`, or 0 when the ceiling was lowered below what
    /// is held.
    pub room: u64,
}

/// What one task holds of a budget (spec §6 "Per task"): its spent and its reservations, against the
/// budget's `per_task` cap. Amounts in the budget's minor unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpending {
    /// The budget's name.
    pub budget: String,
    /// The task (operation key).
    pub task: String,
    /// The minor unit (`cents`).
    pub unit: String,
    /// The budget's `per_task` cap in the current table; `None` when it sets none (the task is then bound
    /// by the ceiling alone).
    pub per_task: Option<u64>,
    /// What the task spent (conclusive, accepted receipts).
    pub spent: u64,
    /// What the task holds for granted, unsent spends.
    pub reserved: u64,
    /// What is left under the cap: `per_task - spent - reserved` (0 when the cap was lowered below what is
    /// held); `None` without a cap.
    pub room: Option<u64>,
}

/// One call's spend: its budget (name and current figures) and the amount of its `money` argument.
pub(crate) type Spend<'t> = crate::table::SpendOf<'t>;

/// The spend of a call of `tool` with `arguments`, when the tool spends from a budget ([`Table::spend_of`]
/// with the reason in words).
///
/// Errors (the call is `never`): the table names no such budget, or the amount is missing, not an
/// integer, or negative.
pub(crate) fn spend_of<'t>(
    table: &'t Table,
    tool_name: &str,
    tool: &ToolInfo,
    arguments: &Value,
) -> Result<Option<Spend<'t>>, String> {
    let empty = serde_json::Map::new();
    let args = arguments.as_object().unwrap_or(&empty);
    table.spend_of(tool, args).map_err(|e| crate::table::Refused::budget(tool_name, tool, e).to_string())
}

/// The ledger record of a budget, installing it (with the current ceiling, nothing spent) on first use.
fn record(tx: &mut dyn Transaction, spend: &Spend<'_>) -> Result<BudgetRecord, StoreError> {
    if let Some(r) = tx.budget(spend.budget)? {
        return Ok(r);
    }
    let r = BudgetRecord { name: spend.budget.to_string(), installed_ceiling: spend.info.ceiling, spent: 0 };
    tx.put_budget(&r)?;
    Ok(r)
}

/// What a reservation (or the send-time check of one) found, once the store answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reserve {
    /// The amount is held for the holder.
    Held,
    /// It does not fit under the ceiling that applies: what a person reads, with the figures.
    NoRoom(String),
}

/// Reserves `spend.amount` for `holder` in `task` against the cumulative ceiling (spec §6: spent, reserved
/// and this amount together at most min(installed, current)) and, when the budget sets `per_task`, against
/// the task's cap (what the task spent, what it holds reserved and this amount together at most `per_task`),
/// in the same transaction. A holder that already has a reservation reserves nothing more (a re-grant).
///
/// A spend from a budget with `per_task` needs a task: with `task` `None` (an alone call that names no
/// operation key) nothing is reserved (spec §5a: every call carries its task; §6: a per-task cap cannot be
/// escaped).
///
/// Returns [`Reserve::NoRoom`] when it does not fit, with the figures.
pub(crate) fn reserve(
    tx: &mut dyn Transaction,
    holder: &str,
    task: Option<&str>,
    spend: &Spend<'_>,
    now: u64,
) -> Result<Reserve, StoreError> {
    if tx.reservation(holder)?.is_some() {
        return Ok(Reserve::Held);
    }
    let r = record(tx, spend)?;
    let reserved = tx.reserved_total(spend.budget)?;
    let ceiling = r.installed_ceiling.min(spend.info.ceiling);
    let held = r.spent.saturating_add(reserved);
    if held.saturating_add(spend.amount) > ceiling {
        return Ok(Reserve::NoRoom(no_room(spend, &r, reserved, ceiling)));
    }
    if let Some(cap) = spend.info.per_task {
        let Some(task) = task else { return Ok(Reserve::NoRoom(no_task(spend, cap))) };
        let (spent, reserved) = task_figures(tx, spend.budget, task)?;
        if spent.saturating_add(reserved).saturating_add(spend.amount) > cap {
            return Ok(Reserve::NoRoom(over_task_cap(spend, task, cap, spent, reserved)));
        }
    }
    tx.put_reservation(&Reservation {
        holder: holder.to_string(),
        budget: spend.budget.to_string(),
        amount: spend.amount,
        created_at: now,
        task: task.map(str::to_string),
    })?;
    Ok(Reserve::Held)
}

/// What `task` spent from `budget` and holds reserved there, in the minor unit.
fn task_figures(tx: &mut dyn Transaction, budget: &str, task: &str) -> Result<(u64, u64), StoreError> {
    Ok((tx.task_spent(budget, task)?, tx.reserved_for_task(budget, task)?))
}

/// The send-time recheck (spec §5 "Execute", §6): `holder`'s reservation is held (made now, in `task`, if
/// it is missing, e.g. for a record from before the ledger) and what is held fits the ceiling that applies
/// now (a ceiling lowered below what is held refuses new executions), and the task's `per_task` cap that
/// applies now (likewise).
pub(crate) fn check_held(
    tx: &mut dyn Transaction,
    holder: &str,
    task: Option<&str>,
    spend: &Spend<'_>,
    now: u64,
) -> Result<Reserve, StoreError> {
    let Some(held_now) = tx.reservation(holder)? else {
        return reserve(tx, holder, task, spend, now);
    };
    let r = record(tx, spend)?;
    let reserved = tx.reserved_total(spend.budget)?;
    let ceiling = r.installed_ceiling.min(spend.info.ceiling);
    if r.spent.saturating_add(reserved) > ceiling {
        return Ok(Reserve::NoRoom(format!(
            "budget `{}`: {} {unit} spent and {reserved} {unit} reserved are more than the ceiling of {ceiling} {unit} that applies now: nothing more is sent",
            spend.budget,
            r.spent,
            unit = spend.info.unit
        )));
    }
    if let Some(cap) = spend.info.per_task {
        let Some(task) = held_now.task.as_deref().or(task) else { return Ok(Reserve::NoRoom(no_task(spend, cap))) };
        let (spent, mut reserved) = task_figures(tx, spend.budget, task)?;
        if held_now.task.is_none() {
            // Held before reservations named their task: it counts toward this one.
            reserved = reserved.saturating_add(held_now.amount);
        }
        if spent.saturating_add(reserved) > cap {
            return Ok(Reserve::NoRoom(format!(
                "budget `{}`, task `{task}`: {spent} {unit} spent and {reserved} {unit} reserved in the task are more than the per-task cap of {cap} {unit} that applies now: nothing more is sent",
                spend.budget,
                unit = spend.info.unit
            )));
        }
    }
    Ok(Reserve::Held)
}

/// Releases `holder`'s reservation, if any (rejection, revocation, supersession, a failed send).
pub(crate) fn release(tx: &mut dyn Transaction, holder: &str) -> Result<(), StoreError> {
    if tx.reservation(holder)?.is_some() {
        tx.remove_reservation(holder)?;
    }
    Ok(())
}

/// Moves `holder`'s reservation to spent (a conclusive, accepted receipt). Nothing held, nothing moves.
pub(crate) fn settle_spent(tx: &mut dyn Transaction, holder: &str) -> Result<(), StoreError> {
    let Some(res) = tx.reservation(holder)? else { return Ok(()) };
    let mut r = match tx.budget(&res.budget)? {
        Some(r) => r,
        None => BudgetRecord { name: res.budget.clone(), installed_ceiling: 0, spent: 0 },
    };
    r.spent = r.spent.saturating_add(res.amount);
    tx.put_budget(&r)?;
    if let Some(task) = &res.task {
        let spent = tx.task_spent(&res.budget, task)?;
        tx.put_task_spent(&res.budget, task, spent.saturating_add(res.amount))?;
    }
    tx.remove_reservation(holder)
}

/// Whether a receipt is conclusive for an operation (spec §6 "Settlement"): a JSON object that names the
/// operation (`"operation"`), the amount (`"amount"`), and an `"outcome"` of `"accepted"` or
/// `"rejected"`. `Some(true)` accepted, `Some(false)` rejected, `None` not conclusive.
pub fn conclusive(receipt: &Value, operation: &str, amount: u64) -> Option<bool> {
    let names_it = receipt.get("operation").and_then(Value::as_str) == Some(operation)
        && receipt.get("amount").and_then(Value::as_u64) == Some(amount);
    if !names_it {
        return None;
    }
    match receipt.get("outcome").and_then(Value::as_str) {
        Some("accepted") => Some(true),
        Some("rejected") => Some(false),
        _ => None,
    }
}

/// The status of a budget now.
pub(crate) fn status(tx: &mut dyn Transaction, name: &str, info: &BudgetInfo) -> Result<BudgetStatus, StoreError> {
    let r = tx.budget(name)?;
    let reserved = tx.reserved_total(name)?;
    let spent = r.as_ref().map_or(0, |r| r.spent);
    let installed = r.as_ref().map(|r| r.installed_ceiling);
    let effective = installed.map_or(info.ceiling, |i| i.min(info.ceiling));
    Ok(BudgetStatus {
        name: name.to_string(),
        currency: info.currency.clone(),
        unit: info.unit.clone(),
        ceiling: info.ceiling,
        installed_ceiling: installed,
        effective_ceiling: effective,
        alone_up_to: info.alone_up_to,
        per_task: info.per_task,
        spent,
        reserved,
        room: effective.saturating_sub(spent.saturating_add(reserved)),
    })
}

/// What one task holds of a budget now (spec §6 "Per task").
pub(crate) fn task_status(
    tx: &mut dyn Transaction,
    name: &str,
    task: &str,
    info: &BudgetInfo,
) -> Result<TaskSpending, StoreError> {
    let (spent, reserved) = task_figures(tx, name, task)?;
    Ok(TaskSpending {
        budget: name.to_string(),
        task: task.to_string(),
        unit: info.unit.clone(),
        per_task: info.per_task,
        spent,
        reserved,
        room: info.per_task.map(|cap| cap.saturating_sub(spent.saturating_add(reserved))),
    })
}

/// Installs the current table's ceiling as the budget's installed ceiling (an explicit raise or lower).
pub(crate) fn install_ceiling(
    tx: &mut dyn Transaction,
    name: &str,
    info: &BudgetInfo,
) -> Result<BudgetRecord, StoreError> {
    let mut r =
        tx.budget(name)?.unwrap_or(BudgetRecord { name: name.to_string(), installed_ceiling: info.ceiling, spent: 0 });
    r.installed_ceiling = info.ceiling;
    tx.put_budget(&r)?;
    Ok(r)
}

/// A spend from a budget with `per_task` in a call that names no task.
fn no_task(spend: &Spend<'_>, cap: u64) -> String {
    format!(
        "budget `{}` caps what each task holds ({cap} {unit} per task): a spend from it needs the task's operation key, and this call names none",
        spend.budget,
        unit = spend.info.unit
    )
}

/// A spend that would take a task over its `per_task` cap.
fn over_task_cap(spend: &Spend<'_>, task: &str, cap: u64, spent: u64, reserved: u64) -> String {
    let held = spent.saturating_add(reserved);
    format!(
        "budget `{}`, task `{task}`: per task: {held} of {cap} {unit} held ({spent} spent, {reserved} reserved); {} {unit} more would exceed it ({} left)",
        spend.budget,
        spend.amount,
        cap.saturating_sub(held),
        unit = spend.info.unit
    )
}

fn no_room(spend: &Spend<'_>, r: &BudgetRecord, reserved: u64, ceiling: u64) -> String {
    let held = r.spent.saturating_add(reserved);
    format!(
        "budget `{}`: {} {unit} does not fit under the ceiling of {ceiling} {unit} ({} spent, {reserved} reserved, {} left)",
        spend.budget,
        spend.amount,
        r.spent,
        ceiling.saturating_sub(held),
        unit = spend.info.unit
    )
}
