//! Levels and the checks that need them (spec §3, §6), as the table and the diagnostics record them: which
//! callee a wrapper inherits from, what a layer's row holds, which tool must bind a budget. Written against
//! the mutants of `compile/levels.rs` and `compile/lints.rs` that no corpus snapshot told apart
//! (docs/mutants.md).

use permits_table::{Layer, Level, ReasonKind, Table};

use crate::common::{codes, compile_text, table_of};

/// The inherited reasons of one triple: (layer, level, via).
fn inherited(table: &Table, agent: &str, skill: &str, tool: &str) -> Vec<(Option<Layer>, Level, Option<String>)> {
    let entry = table.entry(agent, skill, tool).expect("offered");
    entry
        .because
        .iter()
        .filter(|r| r.kind == ReasonKind::Inherited)
        .map(|r| (r.layer, r.level, r.via.clone()))
        .collect()
}

/// A wrapper of several restrictively named tools inherits the strictest level, from the first callee (in
/// name order) that has it; a callee the layer names `alone` sets no floor in that layer, even when another
/// layer names it restrictively.
#[test]
fn a_wrapper_inherits_the_strictest_callee_first_in_name_order() {
    let table = table_of(
        r#"entity Note { text }
may {
    propose [Sweep]
}
person Pat
agent Clerk "Keeps notes." {
    sponsor Pat
    may {
        everything
        propose [Archive]
        never [Burn, Crush]
        alone [Sweep]
    }
    skills [Notes]
}
skill Notes "Keep notes." {
    tools [Tidy, Clean]
}
tool Tidy "Tidy the notes" () {
    call Archive
    call Burn
    call Crush
}
tool Clean "Clean the notes" () { call Sweep }
tool Archive "Archive a note" () { write Note.text }
tool Burn "Burn a note" () { delete Note }
tool Crush "Crush a note" () { delete Note }
tool Sweep "Sweep the notes" () { delete Note }
"#,
    );
    assert_eq!(table.entry("Clerk", "Notes", "Tidy").and_then(|e| e.level), Some(Level::Never));
    assert_eq!(inherited(&table, "Clerk", "Notes", "Tidy"), [(Some(Layer::Agent), Level::Never, Some("Burn".into()))]);
    let clean = table.entry("Clerk", "Notes", "Clean").expect("offered");
    assert_eq!(clean.level, Some(Level::Propose));
    let rows: Vec<(Layer, Option<Level>)> = clean.rows.iter().map(|r| (r.layer, r.inherited)).collect();
    assert_eq!(rows, [(Layer::Package, Some(Level::Propose)), (Layer::Agent, None)]);
    assert_eq!(
        inherited(&table, "Clerk", "Notes", "Clean"),
        [(Some(Layer::Package), Level::Propose, Some("Sweep".into()))]
    );
}

const SPENDING: &str = r#"budget Supplies { currency: "USD", unit: cents, ceiling: 2500, alone_up_to: 0 }
person Pat
agent Buyer "Orders stock." {
    sponsor Pat
    skills [Ordering]
}
skill Ordering "Order stock." {
    tools [Checkout, Wrapper]
}
fn pay(amount: money) { spend Supplies by amount }
fn relay(amount: money) { call pay }
tool Checkout "Check out" (amount: money) {
    spend Supplies by amount
    call relay
}
tool Wrapper "Order the usual" () {
    call relay
}
"#;

/// Only a tool must say how much it spends (a function is not checked against a budget on its own), and
/// the evidence is the call through which the budget is reached, however deep the `spend` is.
#[test]
fn a_tool_that_spends_through_functions_must_bind_the_budget() {
    let out = compile_text(SPENDING);
    assert_eq!(codes(&out), ["permits::check::spend_unbound"]);
    let d = &out.diagnostics[0];
    assert_eq!(d.message, "`Wrapper` spends from the budget `Supplies` but says no amount of its own");
    let evidence: Vec<&str> = d.secondary.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(evidence, ["spends from `Supplies` through `relay`"]);
    assert_eq!(out.sources.line(d.secondary[0].span), 17);
}

/// The level warnings stay quiet where nothing is wrong: a tool named at a restrictive level that calls a
/// stricter one (only a named `alone` is laundering), and a skill entry or setting equal to its agent's
/// (it tightens nothing, but loosens nothing either).
#[test]
fn no_level_warning_for_an_entry_or_setting_that_loosens_nothing() {
    let out = compile_text(
        r#"entity Note { text }
person Pat
agent Clerk "Keeps notes." {
    sponsor Pat
    may {
        never [Burn]
        propose [Gather]
    }
    skills [Notes]
}
skill Notes "Keep notes." {
    may {
        changes: propose
        propose [Edit]
    }
    tools [Gather, Edit]
}
tool Gather "Gather the notes" () { call Burn }
tool Burn "Burn a note" () { delete Note }
tool Edit "Edit a note" () { write Note.text }
"#,
    );
    assert_eq!(codes(&out), Vec::<String>::new());
    let table = out.table.expect("compiles");
    assert_eq!(table.entry("Clerk", "Notes", "Gather").and_then(|e| e.level), Some(Level::Never));
    assert_eq!(table.entry("Clerk", "Notes", "Edit").and_then(|e| e.level), Some(Level::Propose));
}
