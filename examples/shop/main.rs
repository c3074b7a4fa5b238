//! The example host of Lucy's ice-cream shop (`shared/cases/shop-spending.md`): the restocking agent's
//! side of the runtime, with its ledger in an SQLite file and orders sent to the supplier (the `supplier`
//! example, a separate process).
//!
//! ```text
//! cargo run --example shop -- --table shop.json --ledger ledger.db --supplier http://127.0.0.1:PORT COMMAND
//!
//!   propose SKU TUBS     the agent proposes an order (the host computes the amount from its prices)
//!   approve ID           Lucy approves the proposal, with the fingerprint she is shown
//!   execute ID           the host sends a granted order to the supplier (the single authorization point)
//!   revoke ID            Lucy revokes a waiting or granted proposal
//!   ledger               the budget (installed ceiling, spent, reserved, room) and every proposal
//!   orders               what the supplier itself recorded
//! ```
//!
//! Every command opens the ledger, does one thing and closes it, so each run is a restart: what survives
//! is what the ledger holds. The work item (operation key) is `restock` unless `--work KEY` says otherwise.

#[path = "../supplier/client.rs"]
mod supplier_client;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Prints a line to stdout; a closed pipe (`| head`) ends the output quietly instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

const USAGE: &str = "usage: shop --table FILE --ledger FILE [--supplier URL] [--work KEY] COMMAND
commands:
  propose SKU TUBS   the agent proposes an order (the host computes the amount: vanilla 250, strawberry 275, chocolate 300 cents a tub)
  approve ID         Lucy approves the proposal, with the fingerprint she is shown
  execute ID         send a granted order to the supplier (the single authorization point)
  revoke ID          Lucy revokes a waiting or granted proposal
  ledger             the budget and every proposal
  orders             what the supplier itself recorded";

use permits::runtime::{AdmitAll, ApproveMode, Call, Proposal, ProposalRequest, Runtime, SqliteStore};
use permits::table::Table;
use serde_json::json;
use supplier_client::{Supplier, order_outcome};

/// The shop's authoritative prices, in US cents per tub: the model never computes an amount.
const PRICES: [(&str, i64); 3] = [("vanilla", 250), ("strawberry", 275), ("chocolate", 300)];

struct Options {
    table: PathBuf,
    ledger: PathBuf,
    supplier: String,
    work: String,
    command: Vec<String>,
}

fn options() -> Result<Options, String> {
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        out!("{USAGE}");
        std::process::exit(0);
    }
    let mut args = std::env::args().skip(1);
    let (mut table, mut ledger, mut supplier, mut work) = (None, None, None, "restock".to_string());
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("`{name}` needs a value"));
        match arg.as_str() {
            "--table" => table = Some(PathBuf::from(value("--table")?)),
            "--ledger" => ledger = Some(PathBuf::from(value("--ledger")?)),
            "--supplier" => supplier = Some(value("--supplier")?),
            "--work" => work = value("--work")?,
            _ => command.push(arg),
        }
    }
    Ok(Options {
        table: table.ok_or("`--table FILE` is required (written by `permitc compile policies/shop -o FILE`)")?,
        ledger: ledger.ok_or("`--ledger FILE` is required (an SQLite file; created when missing)")?,
        supplier: supplier.unwrap_or_else(|| "http://127.0.0.1:8088".to_string()),
        work,
        command,
    })
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let o = options()?;
    let table = Table::load_path(&o.table).map_err(|e| e.to_string())?;
    let store = SqliteStore::open(&o.ledger).map_err(|e| e.to_string())?;
    let rt = Runtime::new(table, AdmitAll).with_store(store);
    let supplier = Supplier::new(&o.supplier);
    let destination = format!("{}/orders", o.supplier.trim_end_matches('/'));
    let words: Vec<&str> = o.command.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["propose", sku, tubs] => {
            let tubs: i64 = tubs.parse().map_err(|_| format!("`{tubs}` is not a number of tubs"))?;
            let price =
                PRICES.iter().find(|(s, _)| s == sku).map(|(_, p)| *p).ok_or(format!("no price for `{sku}`"))?;
            let call = Call::new("Restocker", "Reorder", "PlaceOrder")
                .with_arguments(json!({ "sku": sku, "quantity": tubs, "amount": tubs * price }))
                .for_person("Lucy");
            let request = ProposalRequest::new(call, &o.work, format!("{sku} runs low")).with_destination(&destination);
            let p = rt.propose(&request).map_err(|e| e.to_string())?;
            show(&p);
            out!("{}", p.answer_for_agent());
            budget_line(&rt)?;
        }
        ["approve", id] => {
            // The approval screen shows Lucy the proposal; she approves exactly what she saw.
            let shown = rt.proposal(id).map_err(|e| e.to_string())?;
            let p = rt.approve(id, "Lucy", &shown.fingerprint, ApproveMode::Once).map_err(|e| e.to_string())?;
            show(&p);
            budget_line(&rt)?;
        }
        ["execute", id] => {
            let done = rt
                .execute(id, Some(&destination), |ctx| {
                    out!("sending operation `{}` to {destination}", ctx.operation);
                    order_outcome(&supplier, ctx)
                })
                .map_err(|e| e.to_string())?;
            show(&done.proposal);
            if !done.ran {
                out!("already done: the stored receipt, nothing sent again");
            }
            budget_line(&rt)?;
        }
        ["revoke", id] => {
            let p = rt.revoke(id, "Lucy", "revoked from the shop's console").map_err(|e| e.to_string())?;
            show(&p);
            budget_line(&rt)?;
        }
        ["ledger"] => {
            for b in rt.budgets().map_err(|e| e.to_string())? {
                out!(
                    "budget {} ({} {}): ceiling {} (installed {}), alone up to {}, spent {}, reserved {}, room {}",
                    b.name,
                    b.currency,
                    b.unit,
                    b.effective_ceiling,
                    b.installed_ceiling.map_or("not yet".to_string(), |c| c.to_string()),
                    b.alone_up_to,
                    b.spent,
                    b.reserved,
                    b.room
                );
            }
            for p in rt.proposals().map_err(|e| e.to_string())? {
                show(&p);
            }
        }
        ["orders"] => {
            let orders = supplier.orders().map_err(|e| format!("the supplier: {e:?}"))?;
            out!("the supplier has {} order(s)", orders.len());
            for o in orders {
                out!("  {o}");
            }
        }
        _ => return Err("a command: propose SKU TUBS | approve ID | execute ID | revoke ID | ledger | orders".into()),
    }
    Ok(())
}

/// The budget's reserved and spent figures, after a command.
fn budget_line(rt: &Runtime) -> Result<(), String> {
    for b in rt.budgets().map_err(|e| e.to_string())? {
        out!("  budget {}: reserved {}, spent {}, room {} {}", b.name, b.reserved, b.spent, b.room, b.unit);
    }
    Ok(())
}

/// One line per proposal: id, status (with the grant's basis), the order, the fingerprint's start.
fn show(p: &Proposal) {
    let basis = p.grant.as_ref().map(|g| format!(" ({:?} grant)", g.basis).to_lowercase()).unwrap_or_default();
    let shown: Vec<String> = p.shown.iter().map(|a| format!("{}={}", a.name, a.shown)).collect();
    out!(
        "{} {}{basis}: {} [{}] fingerprint {}…{}",
        p.id,
        p.status,
        p.label,
        shown.join(", "),
        &p.fingerprint[..12.min(p.fingerprint.len())],
        p.reason.as_ref().map(|r| format!(" — {r}")).unwrap_or_default()
    );
}
