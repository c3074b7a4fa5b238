//! Differential testing: a deliberately simple reference evaluator, written straight from docs/language.md
//! §2–§3 over the generator's own in-memory structure (`tests/common/spec.rs`: naive reachability per
//! tool, no call graph, no components), must agree with the compiled table on the level of every
//! (agent, skill, tool) triple of every generated package, for a spread of arguments — with no mode, in
//! each of the package's modes (§3c: one more tightening layer), in a mode the package does not declare, and
//! through every declared delegation chain of one or two links and an undeclared one (§3b).
//!
//! 300 packages by default; `PROPTEST_CASES=5000 cargo test --release --test reference` runs more.

use crate::common::generator::{ARGS, Pkg, cases, compile_pkg, pkg};
use crate::common::level_in;
use crate::common::level_with as table_level;
use crate::common::spec::{chain_level, chains_to, mode_level, triple_level};
use permits_table::{CallRef, ChainLink, Level, Table};
use proptest::prelude::*;
use serde_json::json;

fn args(n: i64) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("n".into(), json!(n));
    m
}

/// The table's level of a delegated call, or `never` with the refusal's words.
fn via_level(
    table: &Table,
    agent: &str,
    skill: &str,
    tool: &str,
    args: &serde_json::Map<String, serde_json::Value>,
    via: &[ChainLink],
) -> (Level, String) {
    let arguments = serde_json::Value::Object(args.clone());
    match table.level_of(CallRef { agent, skill, tool, arguments: &arguments, requester: None, mode: None, via }) {
        Ok(of) => (of.level, String::new()),
        Err(why) => (Level::Never, why.to_string()),
    }
}

/// Every disagreement between the table and the reference, as readable lines.
fn disagreements(p: &Pkg, table: &Table) -> Vec<String> {
    let mut out = Vec::new();
    // Offered triples: exactly the reference's.
    let mut expected = std::collections::BTreeSet::new();
    for (a, s, t) in p.triples() {
        expected.insert((format!("A{a}"), format!("S{s}"), format!("T{t}")));
    }
    let mut offered = std::collections::BTreeSet::new();
    for (a, skills) in &table.entries {
        for (s, tools) in skills {
            for t in tools.keys() {
                offered.insert((a.clone(), s.clone(), t.clone()));
            }
        }
    }
    if expected != offered {
        out.push(format!("offered triples differ: reference {expected:?}, table {offered:?}"));
    }
    // Every (agent, skill, tool) by name, offered or not, on every argument.
    for a in 0..p.agents.len() {
        for s in 0..p.skills.len() {
            for t in 0..p.tools.len() {
                let (an, sn, tn) = (format!("A{a}"), format!("S{s}"), format!("T{t}"));
                let mut levels = std::collections::BTreeSet::new();
                for n in ARGS {
                    let reference = triple_level(p, a, s, t, n).unwrap_or(Level::Never);
                    let (compiled, why) = table_level(table, &an, &sn, &tn, &args(n));
                    levels.insert(reference);
                    if reference != compiled {
                        out.push(format!(
                            "({an}, {sn}, {tn}) with n = {n}: reference `{reference}`, table `{compiled}` ({why})"
                        ));
                    }
                }
                // In every mode of the package, and in one it does not declare (index past the end).
                for m in 0..=p.modes.len() {
                    let mode = format!("M{m}");
                    for n in ARGS {
                        let reference = mode_level(p, m, a, s, t, n).unwrap_or(Level::Never);
                        let (compiled, why) = level_in(table, Some(&mode), &an, &sn, &tn, &args(n));
                        if reference != compiled {
                            out.push(format!(
                                "({an}, {sn}, {tn}) in {mode} with n = {n}: reference `{reference}`, table `{compiled}` ({why})"
                            ));
                        }
                    }
                }
                // Through every declared chain of one or two links, and one undeclared link (the acting
                // pair itself, which never delegates to itself: delegation is acyclic).
                let mut chains = chains_to(p, a, s);
                chains.push(vec![(a, s)]);
                for chain in &chains {
                    let via: Vec<ChainLink> =
                        chain.iter().map(|(la, ls)| ChainLink::new(format!("A{la}"), format!("S{ls}"))).collect();
                    let words = via.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(" via ");
                    for n in ARGS {
                        let reference = chain_level(p, a, s, t, n, chain).unwrap_or(Level::Never);
                        let compiled = via_level(table, &an, &sn, &tn, &args(n), &via);
                        if reference != compiled.0 {
                            out.push(format!(
                                "({an}, {sn}, {tn}) via {words} with n = {n}: reference `{reference}`, table `{}` ({})",
                                compiled.0, compiled.1
                            ));
                        }
                    }
                }
                // An entry that states one level must not depend on the argument.
                if let Some(entry) = table.entry(&an, &sn, &tn) {
                    if let Some(l) = entry.level {
                        if levels != std::collections::BTreeSet::from([l]) {
                            out.push(format!("({an}, {sn}, {tn}) states `{l}`, the reference gives {levels:?}"));
                        }
                    }
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(300), ..ProptestConfig::default() })]

    /// The compiled table and the reference evaluator agree on every triple and argument.
    #[test]
    fn compiled_levels_agree_with_the_reference(p in pkg()) {
        let table = compile_pkg(&p);
        let found = disagreements(&p, &table);
        prop_assert!(found.is_empty(), "{}\n--- source ---\n{}", found.join("\n"), p.render());
    }
}

/// The reference is not vacuous: on a fixed package it gives the levels the spec's own example states.
#[test]
fn the_reference_reads_the_spec_on_a_known_package() {
    use crate::common::generator::{AgentG, Cond, EntryG, MayG, NodeRef, Op, SkillG, ToolG};
    let tool = |ops| ToolG { external: false, claim: None, ops };
    let p = Pkg {
        // T0 sends; T1 wraps T0; T2 reads; T3 writes permits.
        tools: vec![
            tool(vec![Op::Send]),
            tool(vec![Op::Call(NodeRef::Tool(0))]),
            tool(vec![Op::Read]),
            tool(vec![Op::WritePermits]),
        ],
        fns: vec![],
        agents: vec![AgentG {
            skills: vec![0],
            may: Some(MayG {
                preset: None,
                settings: [None; 4],
                lists: vec![
                    (Level::Never, vec![EntryG { tool: 0, when: Some(Cond::Cmp(">", 4)) }]),
                    (Level::Alone, vec![EntryG { tool: 3, when: None }]),
                ],
            }),
        }],
        skills: vec![SkillG { tools: vec![0, 1, 2, 3], may: None, delegates: vec![] }],
        package_may: None,
        modes: vec![],
    };
    let table = compile_pkg(&p);
    assert!(disagreements(&p, &table).is_empty(), "{:?}", disagreements(&p, &table));
    // T0: `never` when n > 4, else the agent default for sends.
    assert_eq!(triple_level(&p, 0, 0, 0, 5), Some(Level::Never));
    assert_eq!(triple_level(&p, 0, 0, 0, 1), Some(Level::Propose));
    // T1 inherits T0's conditional `never` unconditionally.
    assert_eq!(triple_level(&p, 0, 0, 1, 1), Some(Level::Never));
    assert_eq!(triple_level(&p, 0, 0, 2, 1), Some(Level::Alone));
    // The reserved subject beats `alone [T3]`.
    assert_eq!(triple_level(&p, 0, 0, 3, 1), Some(Level::Never));
    // Not offered.
    assert_eq!(triple_level(&p, 0, 1, 0, 1), None);
}

/// The reference reads §3c on a known package: in `M0` (`sends: never`, `propose [T2]`) the sending tool
/// and its wrapper are `never` (the wrapper through its callee's class, not by inheritance: a class setting
/// is not inherited), the reading tool is proposed; `M1` is only `unattended` and changes no level; an
/// undeclared mode is `never` for every call.
#[test]
fn the_reference_reads_modes_on_a_known_package() {
    use crate::common::generator::{AgentG, MayG, ModeG, NodeRef, Op, SkillG, ToolG};
    let tool = |ops| ToolG { external: false, claim: None, ops };
    let p = Pkg {
        // T0 sends; T1 wraps T0; T2 reads.
        tools: vec![tool(vec![Op::Send]), tool(vec![Op::Call(NodeRef::Tool(0))]), tool(vec![Op::Read])],
        fns: vec![],
        agents: vec![AgentG {
            skills: vec![0],
            may: Some(MayG { preset: Some(crate::common::generator::Preset::Everything), ..MayG::default() }),
        }],
        skills: vec![SkillG { tools: vec![0, 1, 2], may: None, delegates: vec![] }],
        package_may: None,
        modes: vec![
            ModeG {
                may: Some(MayG {
                    preset: None,
                    settings: [None, Some(Level::Never), None, None],
                    lists: vec![(Level::Propose, vec![crate::common::generator::EntryG { tool: 2, when: None }])],
                }),
                unattended: false,
            },
            ModeG { may: None, unattended: true },
        ],
    };
    let table = compile_pkg(&p);
    assert!(disagreements(&p, &table).is_empty(), "{:?}", disagreements(&p, &table));
    use crate::common::spec::mode_level;
    // No mode: the agent's `everything`.
    assert_eq!(triple_level(&p, 0, 0, 0, 1), Some(Level::Alone));
    assert_eq!(mode_level(&p, 0, 0, 0, 0, 1), Some(Level::Never));
    assert_eq!(mode_level(&p, 0, 0, 0, 1, 1), Some(Level::Never));
    assert_eq!(mode_level(&p, 0, 0, 0, 2, 1), Some(Level::Propose));
    for t in 0..3 {
        assert_eq!(mode_level(&p, 1, 0, 0, t, 1), Some(Level::Alone), "M1 changes no level of T{t}");
        assert_eq!(mode_level(&p, 2, 0, 0, t, 1), Some(Level::Never), "an undeclared mode, T{t}");
    }
    assert_eq!(level_in(&table, Some("M0"), "A0", "S0", "T2", &args(1)).0, Level::Propose);
}

/// Found by the differential test (shrunk): a tool that calls itself inherits its own conditional
/// restrictive entry unconditionally, like any caller (spec §3 step 2: "if T calls, transitively, a tool
/// C that L names in `propose` … (with or without a condition)"; a recursive call's arguments are not
/// checked). Before the fix the compiler left the tool itself out of its own reach, so `T0(n = -3)` was
/// `alone` although `T0` can call `T0(n = 0)`, which must be proposed.
#[test]
fn a_recursive_tool_inherits_its_own_conditional_entry() {
    let text = "entity E { f }\nperson P0\nmay {\n    propose [T0 when n >= 0]\n}\ntool T0 \"Tool 0\" (n: int) {\n    call T0\n}\n\
                tool T1 \"Tool 1\" (n: int) {\n    read E\n}\n\
                agent A0 \"Agent 0\" {\n    sponsor P0\n    may { never [T1 when n > 3] }\n    skills [S0]\n}\nskill S0 \"Skill 0\" {\n    tools [T0, T1]\n}\n";
    let table = crate::common::generator::compile_text(text);
    for n in [-3, 0, 5] {
        assert_eq!(table_level(&table, "A0", "S0", "T0", &args(n)).0, Level::Propose, "n = {n}");
    }
    // Not recursive: the condition decides.
    assert_eq!(table_level(&table, "A0", "S0", "T1", &args(1)).0, Level::Alone);
    assert_eq!(table_level(&table, "A0", "S0", "T1", &args(4)).0, Level::Never);
    // The reason names the inherited rule.
    let entry = table.entry("A0", "S0", "T0").expect("offered");
    assert!(
        entry.because.iter().any(|r| r.rule == "propose [T0 when n >= 0]" && r.via.as_deref() == Some("T0")),
        "{:?}",
        entry.because
    );
}

/// A package with a decimal literal declares `n: number`; the table compares the whole-number arguments
/// with the decimal exactly, and whole-number literals on the `number` parameter too (spec §2). Also with
/// arguments the reference never sends: `3.5` itself, and the JSON forms `4.0` and `4e0` of 4.
#[test]
fn a_decimal_literal_makes_the_parameter_a_number() {
    use crate::common::generator::{AgentG, Cond, EntryG, MayG, Op, SkillG, ToolG};
    let p = Pkg {
        tools: vec![ToolG { external: false, claim: None, ops: vec![Op::Read] }],
        fns: vec![],
        agents: vec![AgentG {
            skills: vec![0],
            may: Some(MayG {
                preset: None,
                settings: [None; 4],
                lists: vec![(
                    Level::Never,
                    vec![EntryG {
                        tool: 0,
                        when: Some(Cond::Or(Box::new(Cond::Half(">", 7)), Box::new(Cond::Cmp("<", -2)))),
                    }],
                )],
            }),
        }],
        skills: vec![SkillG { tools: vec![0], may: None, delegates: vec![] }],
        package_may: None,
        modes: vec![],
    };
    let text = p.render();
    assert!(text.contains("(n: number)") && text.contains("never [T0 when (n > 3.5 or n < -2)]"), "{text}");
    let table = compile_pkg(&p);
    assert!(disagreements(&p, &table).is_empty(), "{:?}", disagreements(&p, &table));
    assert_eq!(triple_level(&p, 0, 0, 0, 4), Some(Level::Never));
    assert_eq!(triple_level(&p, 0, 0, 0, 3), Some(Level::Alone));
    assert_eq!(triple_level(&p, 0, 0, 0, -3), Some(Level::Never));
    let with = |v: &str| {
        let m: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&format!(r#"{{"n": {v}}}"#)).expect("json");
        table_level(&table, "A0", "S0", "T0", &m).0
    };
    assert_eq!(with("3.5"), Level::Alone);
    assert_eq!(with("3.5000001"), Level::Never);
    assert_eq!(with("4.0"), Level::Never);
    assert_eq!(with("4e0"), Level::Never);
    assert_eq!(with("-2.0"), Level::Alone);
    assert_eq!(with("-2.5"), Level::Never);
    assert_eq!(with(r#""4""#), Level::Never, "a string cannot be compared: never");
}
