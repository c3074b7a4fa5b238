//! The laws of the language, as property tests on generated packages (`tests/common/generator.rs`): effect
//! inference is sound and tight, layers are monotone, standing rules never lift `never` or
//! `propose_every_time`, unknown names decide `never`, compiling is deterministic, fingerprints bind
//! everything a yes covers, and canonical JSON ignores key order and whitespace.
//!
//! 64 cases per law by default (the file runs in seconds in debug); `PROPTEST_CASES=2000` runs more.
//!
//! A note on monotonicity: within one layer a named entry decides instead of the layer's class level
//! (spec §3 step 2: "named level …; otherwise class level"), so adding or unconditioning an entry whose
//! level is *below* that layer's own class level for the tool can lower the layer (that is how an agent
//! writes "changes: propose, but alone [NoteRepair]"). The laws below are therefore stated for entries
//! at least as strict as the layer's class level for the tool (always the case for `never`), and
//! `a_named_entry_decides_instead_of_its_own_layers_class_level` pins the exception.

use std::collections::BTreeMap;

use crate::common::generator::{
    ARGS, CLASSES, Cond, EntryG, MayG, ModeG, NodeRef, Pkg, Preset, RESERVED, cases, compile_files, compile_pkg,
    compile_text, cond, mode, pkg,
};
use crate::common::level_in;
use crate::common::level_with as table_level;
use crate::common::spec::{self, LayerKind};
use permits::runtime::{AdmitAll, ApproveMode, Call, NewRule, ProposalRequest, Runtime, Scope, WorkFor, fingerprint};
use permits::table::{CallRef, ChainLink, EffectClass, HopKind, Level, Table, canonical_json, canonical_value};
use proptest::prelude::*;
use serde_json::{Value, json};

type Levels = BTreeMap<(String, String, String), Vec<Level>>;

fn args(n: i64) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("n".into(), json!(n));
    m
}

/// The level of every offered triple for every argument in [`ARGS`], read from the table as the runtime
/// would.
fn levels(p: &Pkg, table: &Table) -> Levels {
    let mut out = Levels::new();
    for (a, s, t) in p.triples() {
        let key = (format!("A{a}"), format!("S{s}"), format!("T{t}"));
        let ls = ARGS.iter().map(|n| table_level(table, &key.0, &key.1, &key.2, &args(*n)).0).collect();
        out.insert(key, ls);
    }
    out
}

/// Every triple and argument where `after` is less strict than `before`.
fn loosened(before: &Levels, after: &Levels) -> Vec<String> {
    let mut out = Vec::new();
    for (key, b) in before {
        let Some(a) = after.get(key) else {
            out.push(format!("{key:?} disappeared"));
            continue;
        };
        for ((lb, la), n) in b.iter().zip(a).zip(ARGS) {
            if la < lb {
                out.push(format!("{key:?} with n = {n}: `{lb}` became `{la}`"));
            }
        }
    }
    out
}

/// Which layer a mutation touches.
#[derive(Clone, Copy, Debug)]
enum Sel {
    Package,
    Agent(usize),
    Skill(usize),
}

impl Sel {
    fn pick(p: &Pkg, k: usize) -> Sel {
        let n = 1 + p.agents.len() + p.skills.len();
        match k % n {
            0 => Sel::Package,
            i if i <= p.agents.len() => Sel::Agent(i - 1),
            i => Sel::Skill(i - 1 - p.agents.len()),
        }
    }
    fn all(p: &Pkg) -> Vec<Sel> {
        (0..1 + p.agents.len() + p.skills.len()).map(|k| Sel::pick(p, k)).collect()
    }
    fn pick_tightening(p: &Pkg, k: usize) -> Sel {
        match k % (1 + p.skills.len()) {
            0 => Sel::Package,
            i => Sel::Skill(i - 1),
        }
    }
    fn kind(self) -> LayerKind {
        match self {
            Sel::Package => LayerKind::Package,
            Sel::Agent(_) => LayerKind::Agent,
            Sel::Skill(_) => LayerKind::Skill,
        }
    }
    fn get(self, p: &mut Pkg) -> &mut Option<MayG> {
        match self {
            Sel::Package => &mut p.package_may,
            Sel::Agent(i) => &mut p.agents[i].may,
            Sel::Skill(i) => &mut p.skills[i].may,
        }
    }
}

const LEVELS: [Level; 4] = Level::ALL;

/// Random choices for one mutation, interpreted modulo what the package holds.
#[derive(Clone, Debug)]
struct Pick {
    layer: usize,
    what: usize,
    tool: usize,
    level: usize,
    class: usize,
    when: Option<Cond>,
}

fn picks() -> impl Strategy<Value = Pick> {
    (any::<usize>(), any::<usize>(), any::<usize>(), any::<usize>(), any::<usize>(), proptest::option::of(cond()))
        .prop_map(|(layer, what, tool, level, class, when)| Pick { layer, what, tool, level, class, when })
}

/// Adds one thing to a package-wide or skill layer: a class setting for an unset class, a preset when
/// there is none, or a list entry at least as strict as the layer's class level for its tool.
fn add_to_tightening_layer(p: &Pkg, k: &Pick) -> Pkg {
    let mut q = p.clone();
    let sel = Sel::pick_tightening(p, k.layer);
    let tool = k.tool % p.tools.len();
    let floor = layer_floor(p, sel, tool);
    let may = sel.get(&mut q).get_or_insert_with(MayG::default);
    match k.what % 3 {
        0 if may.settings.iter().any(Option::is_none) => {
            let unset: Vec<usize> = (0..4).filter(|c| may.settings[*c].is_none()).collect();
            may.settings[unset[k.class % unset.len()]] = Some(LEVELS[k.level % 4]);
        }
        1 if may.preset.is_none() => {
            may.preset = Some(if k.class % 2 == 0 { Preset::Everything } else { Preset::ChangesAlone });
        }
        _ => {
            let level = LEVELS[k.level % 4].max(floor);
            may.lists.push((level, vec![EntryG { tool, when: k.when.clone() }]));
        }
    }
    q
}

/// A layer's class level for a tool (`alone` when it says nothing), by the reference reading.
fn layer_floor(p: &Pkg, sel: Sel, tool: usize) -> Level {
    let mut q = p.clone();
    let may = sel.get(&mut q).clone().unwrap_or_default();
    spec::class_level(p, &may, sel.kind(), tool).unwrap_or(Level::Alone)
}

fn effect_bit(c: EffectClass) -> u8 {
    match c {
        EffectClass::Reads => 1,
        EffectClass::Changes => 2,
        EffectClass::Sends => 4,
        EffectClass::Spends => 8,
        EffectClass::ReachesOut => 16,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    /// Inference is sound and tight: a tool's effects in the table are exactly the classes of every
    /// operation reachable from it; `assumed` exactly when only an extern claim proves it; each
    /// witness's first hop really proves the effect (an own operation, a callee that has it, or the
    /// extern's own claim); the reserved subject exactly when `write permits` or `call dynamic` is
    /// reachable.
    #[test]
    fn inference_is_sound_and_tight(p in pkg()) {
        let table = compile_pkg(&p);
        for (i, t) in p.tools.iter().enumerate() {
            let me = NodeRef::Tool(i);
            let info = &table.tools[&format!("T{i}")];
            let proven = spec::proven(&p, me);
            let real = spec::real(&p, me);
            let got: u8 = info.effects.keys().map(|c| effect_bit(*c)).sum();
            prop_assert_eq!(got, proven & CLASSES, "effects of T{}\n{}", i, p.render());
            prop_assert_eq!(info.reserved.is_some(), proven & RESERVED != 0, "reserved of T{}", i);
            prop_assert_eq!(info.external, t.external);
            for (class, e) in &info.effects {
                let bit = effect_bit(*class);
                prop_assert_eq!(e.assumed, real & bit == 0, "assumed {} of T{}\n{}", class, i, p.render());
                let hop = &e.witness;
                match hop.kind {
                    HopKind::Operation => {
                        prop_assert!(!t.external);
                        prop_assert!(spec::own_ops(&p, me) & bit != 0, "T{} has no own operation proving {}", i, class);
                        prop_assert!(t.ops.iter().any(|op| {
                            let mut one = p.clone();
                            one.tools[i].ops = vec![op.clone()];
                            spec::own_ops(&one, me) & bit != 0 && permits_text(op) == hop.text
                        }), "the witness `{}` of {} in T{} is not one of its operations proving it", hop.text, class, i);
                    }
                    HopKind::Call => {
                        let callee = spec::callees(&p, me).into_iter().find(|c| crate::common::generator::node_name(*c) == hop.text);
                        prop_assert!(callee.is_some(), "T{} does not call `{}`", i, hop.text);
                        let callee = callee.unwrap_or(me);
                        let has = if e.assumed { spec::proven(&p, callee) } else { spec::real(&p, callee) };
                        prop_assert!(has & bit != 0, "the callee `{}` of T{} does not have {}", hop.text, i, class);
                    }
                    HopKind::Claim => {
                        prop_assert!(t.external && t.claim.unwrap_or(0) & bit != 0, "T{} has no claim of {}", i, class);
                    }
                }
            }
        }
    }

    /// Adding a class setting, a preset or a list entry (at least as strict as the layer's class level
    /// for the tool) to the package-wide or a skill layer never loosens any level.
    #[test]
    fn adding_to_a_tightening_layer_never_loosens(p in pkg(), k in picks()) {
        let q = add_to_tightening_layer(&p, &k);
        let found = loosened(&levels(&p, &compile_pkg(&p)), &levels(&q, &compile_pkg(&q)));
        prop_assert!(found.is_empty(), "{}\n--- before ---\n{}\n--- after ---\n{}", found.join("\n"), p.render(), q.render());
    }

    /// Adding a `never` entry (with or without a condition) to any layer never loosens.
    #[test]
    fn adding_a_never_entry_anywhere_never_loosens(p in pkg(), k in picks()) {
        let mut q = p.clone();
        let sel = Sel::pick(&p, k.layer);
        sel.get(&mut q).get_or_insert_with(MayG::default).lists.push((Level::Never, vec![EntryG { tool: k.tool % p.tools.len(), when: k.when.clone() }]));
        let found = loosened(&levels(&p, &compile_pkg(&p)), &levels(&q, &compile_pkg(&q)));
        prop_assert!(found.is_empty(), "{}\n--- after ---\n{}", found.join("\n"), q.render());
    }

    /// Raising a class setting (in any layer) never loosens.
    #[test]
    fn raising_a_class_setting_never_loosens(p in pkg(), k in picks()) {
        let sel = Sel::pick(&p, k.layer);
        let class = k.class % 4;
        let low = LEVELS[k.level % 3];
        let high = LEVELS[(k.level % 3) + 1 + (k.what % (3 - k.level % 3))];
        let mut before = p.clone();
        sel.get(&mut before).get_or_insert_with(MayG::default).settings[class] = Some(low);
        let mut after = p.clone();
        sel.get(&mut after).get_or_insert_with(MayG::default).settings[class] = Some(high);
        prop_assert!(high > low);
        let found = loosened(&levels(&before, &compile_pkg(&before)), &levels(&after, &compile_pkg(&after)));
        prop_assert!(found.is_empty(), "{}\n--- before ---\n{}\n--- after ---\n{}", found.join("\n"), before.render(), after.render());
    }

    /// Moving a named tool to a stricter list (in any layer, keeping its condition) never loosens.
    #[test]
    fn moving_a_tool_to_a_stricter_list_never_loosens(p in pkg(), k in picks()) {
        // Every entry of every layer that is not already `never`; pick one.
        let mut all: Vec<(Sel, usize, usize)> = Vec::new();
        for sel in Sel::all(&p) {
            let mut q = p.clone();
            for (li, (l, es)) in sel.get(&mut q).clone().unwrap_or_default().lists.iter().enumerate() {
                if *l < Level::Never {
                    all.extend((0..es.len()).map(|ei| (sel, li, ei)));
                }
            }
        }
        if all.is_empty() { return Ok(()); }
        let (sel, li, ei) = all[k.tool % all.len()];
        let mut q = p.clone();
        let Some(may) = sel.get(&mut q).as_mut() else { return Err(TestCaseError::fail("no layer")) };
        let from = may.lists[li].0;
        let stricter: Vec<Level> = LEVELS.into_iter().filter(|l| *l > from).collect();
        let to = stricter[k.level % stricter.len()];
        let entry = may.lists[li].1.remove(ei);
        if may.lists[li].1.is_empty() { may.lists.remove(li); }
        may.lists.push((to, vec![entry]));
        let found = loosened(&levels(&p, &compile_pkg(&p)), &levels(&q, &compile_pkg(&q)));
        prop_assert!(found.is_empty(), "{}\n--- before ---\n{}\n--- after ---\n{}", found.join("\n"), p.render(), q.render());
    }

    /// Removing the condition from a restrictive entry (`propose`, `propose_every_time`, `never`) at least
    /// as strict as its layer's class level for the tool never loosens.
    #[test]
    fn removing_the_condition_from_a_restrictive_entry_never_loosens(p in pkg(), k in picks()) {
        // Every such entry of every layer; pick one.
        let mut candidates: Vec<(Sel, usize, usize)> = Vec::new();
        for sel in Sel::all(&p) {
            let mut q = p.clone();
            for (li, (l, es)) in sel.get(&mut q).clone().unwrap_or_default().lists.iter().enumerate() {
                for (ei, e) in es.iter().enumerate() {
                    if e.when.is_some() && *l >= Level::Propose && *l >= layer_floor(&p, sel, e.tool) {
                        candidates.push((sel, li, ei));
                    }
                }
            }
        }
        if candidates.is_empty() { return Ok(()); }
        let (sel, li, ei) = candidates[k.tool % candidates.len()];
        let mut q = p.clone();
        if let Some(m) = sel.get(&mut q).as_mut() { m.lists[li].1[ei].when = None; }
        let found = loosened(&levels(&p, &compile_pkg(&p)), &levels(&q, &compile_pkg(&q)));
        prop_assert!(found.is_empty(), "{}\n--- before ---\n{}\n--- after ---\n{}", found.join("\n"), p.render(), q.render());
    }

    /// A skill never loosens its agent: every triple is at least as strict as without any skill's
    /// `may`, and a package-wide layer never loosens either.
    #[test]
    fn a_skill_never_loosens_its_agent(p in pkg()) {
        let mut bare = p.clone();
        for s in &mut bare.skills { s.may = None; }
        let found = loosened(&levels(&bare, &compile_pkg(&bare)), &levels(&p, &compile_pkg(&p)));
        prop_assert!(found.is_empty(), "{}\n{}", found.join("\n"), p.render());
        bare.package_may = None;
        let found = loosened(&levels(&bare, &compile_pkg(&bare)), &levels(&p, &compile_pkg(&p)));
        prop_assert!(found.is_empty(), "{}\n{}", found.join("\n"), p.render());
    }

    /// An empty layer (`may {}`) changes nothing: not the package-wide one, not an agent's (an agent
    /// without a `may` has an empty one), not a skill's. Levels and rows are equal.
    #[test]
    fn an_empty_layer_changes_nothing(p in pkg(), k in picks()) {
        let sel = Sel::pick(&p, k.layer);
        let mut without = p.clone();
        *sel.get(&mut without) = None;
        let mut empty = p.clone();
        *sel.get(&mut empty) = Some(MayG::default());
        let (a, b) = (compile_pkg(&without), compile_pkg(&empty));
        prop_assert_eq!(levels(&without, &a), levels(&empty, &b));
        for (ag, skills) in &a.entries {
            for (sk, tools) in skills {
                for (tool, e) in tools {
                    prop_assert_eq!(&e.rows, &b.entries[ag][sk][tool].rows);
                    prop_assert_eq!(e.level, b.entries[ag][sk][tool].level);
                }
            }
        }
    }

    /// A standing rule never lifts `never` or `propose_every_time`: for every triple, a rule for `P0` is
    /// made exactly when the entry can be `propose`; then a call for `P0` is `alone` exactly where the
    /// table says `propose`, and keeps the table's level everywhere else; a call for `P1` is unchanged.
    #[test]
    fn a_standing_rule_never_lifts_never_or_propose_every_time(p in pkg()) {
        let table = compile_pkg(&p);
        let rt = Runtime::new(table.clone(), AdmitAll);
        for (a, s, t) in p.triples() {
            let (an, sn, tn) = (format!("A{a}"), format!("S{s}"), format!("T{t}"));
            let entry = &table.entries[&an][&sn][&tn];
            let made = rt.allow_alone(&NewRule { agent: an.clone(), tool: tn.clone(), skill: Some(sn.clone()), work_for: WorkFor::Person("P0".into()), by: "P0".into(), scope: Scope::AnyArguments, expires_at: None, mode: None, via: Vec::new() });
            match entry.level {
                Some(Level::Propose) | None => prop_assert!(made.is_ok(), "no rule for ({}, {}, {}): {:?}", an, sn, tn, made.err()),
                Some(l) => prop_assert!(made.is_err(), "a rule was made for ({}, {}, {}) at `{}`", an, sn, tn, l),
            }
            for n in ARGS {
                let level = table_level(&table, &an, &sn, &tn, &args(n)).0;
                let call = Call::new(an.clone(), sn.clone(), tn.clone()).with_arguments(json!({ "n": n }));
                let for_p0 = rt.decide(&call.clone().for_person("P0")).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let expected = if level == Level::Propose { Level::Alone } else { level };
                prop_assert_eq!(for_p0.level, expected, "({}, {}, {}) n = {}", an, sn, tn, n);
                let for_p1 = rt.decide(&call.for_person("P1")).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(for_p1.level, level);
            }
        }
    }

    /// Unknown names and triples that are not offered always decide `never`, with a reason.
    #[test]
    fn unknown_names_always_decide_never(p in pkg(), name in "[A-Za-z][A-Za-z0-9_]{0,8}") {
        let table = compile_pkg(&p);
        let rt = Runtime::new(table.clone(), AdmitAll);
        let agents: Vec<String> = (0..p.agents.len()).map(|i| format!("A{i}")).chain([name.clone(), String::new()]).collect();
        let skills: Vec<String> = (0..p.skills.len()).map(|i| format!("S{i}")).chain([name.clone(), "S99".into()]).collect();
        let tools: Vec<String> = (0..p.tools.len()).map(|i| format!("T{i}")).chain([name.clone(), "f0".into(), "T99".into()]).collect();
        for an in &agents {
            for sn in &skills {
                for tn in &tools {
                    if table.entry(an, sn, tn).is_some() { continue; }
                    let d = rt.decide(&Call::new(an.clone(), sn.clone(), tn.clone()).with_arguments(json!({ "n": 1 })))
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(d.level, Level::Never, "({}, {}, {})", an, sn, tn);
                    prop_assert!(!d.offered);
                    prop_assert!(d.refusal.is_some());
                    prop_assert_eq!(table_level(&table, an, sn, tn, &args(1)).0, Level::Never);
                }
            }
        }
    }

    /// Compiling the same sources twice gives byte-identical tables, as written by `permitc compile`.
    #[test]
    fn compiling_twice_is_byte_identical(p in pkg()) {
        let text = p.render();
        prop_assert_eq!(compile_text(&text).to_pretty_json(), compile_text(&text).to_pretty_json());
    }

    /// Splitting the package into several files, naming them differently and handing them over in any
    /// order changes no decision. Compared: the whole table except `header.source_digest` (which covers
    /// file names by design, spec §4), `header.table_digest` (which covers the reasons' places) and the
    /// places (`at`: file and line) themselves. Entry and definition digests are compared: they hold no
    /// file or line.
    #[test]
    fn splitting_renaming_and_reordering_files_changes_no_decision(
        p in pkg(),
        split in proptest::collection::vec(0usize..4, 64),
        names in proptest::collection::vec("[a-z]{1,6}(/[a-z]{1,4})?", 4),
        order in any::<u64>(),
    ) {
        let decls = p.declarations();
        let mut files: Vec<(String, String)> = names.iter().enumerate().map(|(i, n)| (format!("{n}{i}.permits"), String::new())).collect();
        for (i, d) in decls.iter().enumerate() {
            files[split[i % split.len()]].1.push_str(d);
            files[split[i % split.len()]].1.push('\n');
        }
        // Hand them over in a scrambled order.
        let len = files.len();
        files.rotate_left((order as usize) % len);
        if order & 1 == 1 { files.reverse(); }
        let out = compile_files(&files);
        prop_assert!(!out.has_errors(), "{}", permits::diagnostics::render_plain(&out.diagnostics, &out.sources));
        let split_table = out.table.ok_or_else(|| TestCaseError::fail("no table"))?;
        let whole = compile_pkg(&p);
        prop_assert_eq!(decisions(&whole), decisions(&split_table));
    }

    /// Any change to what a yes covers (agent, skill, tool, arguments, covered version, destination,
    /// entry digest) changes the fingerprint; the arguments' key order does not.
    #[test]
    fn any_change_to_a_proposal_changes_its_fingerprint(
        parts in proptest::collection::vec("[a-zA-Z0-9 ._-]{0,6}", 7),
        values in proptest::collection::vec(any::<i64>(), 3),
        which in 0usize..8,
        other in "[a-zA-Z0-9]{1,6}",
    ) {
        let call = |p: &[String], v: &[i64]| Call::new(p[0].clone(), p[1].clone(), p[2].clone())
            .with_arguments(json!({ "subject": p[3].clone(), "amount": v[0], "k": v[1], "z": v[2] }));
        let fp = |p: &[String], v: &[i64]| fingerprint(&call(p, v), &p[4], Some(p[5].as_str()), Some(p[6].as_str()));
        let base = fp(&parts, &values);
        prop_assert_eq!(&base, &fp(&parts, &values));
        // The same arguments in another key order.
        let reordered = Call::new(parts[0].clone(), parts[1].clone(), parts[2].clone())
            .with_arguments(serde_json::from_str(&format!(
                r#"{{"z": {}, "k": {}, "amount": {}, "subject": {}}}"#, values[2], values[1], values[0], json!(parts[3]))).map_err(|e| TestCaseError::fail(e.to_string()))?);
        prop_assert_eq!(&base, &fingerprint(&reordered, &parts[4], Some(parts[5].as_str()), Some(parts[6].as_str())));
        let mut p2 = parts.clone();
        let mut v2 = values.clone();
        if which < 7 {
            p2[which] = format!("{}{other}", p2[which]);
        } else {
            v2[0] = v2[0].wrapping_add(1);
        }
        prop_assert_ne!(&base, &fp(&p2, &v2), "changing part {} kept the fingerprint", which);
        // No covered version or destination is not the empty one.
        prop_assert_ne!(
            fingerprint(&call(&parts, &values), &parts[4], None, Some(parts[6].as_str())),
            fingerprint(&call(&parts, &values), &parts[4], Some(""), Some(parts[6].as_str()))
        );
    }

    /// Canonical JSON ignores key order and whitespace: a value written with its keys in any order and
    /// any spacing has one canonical form, equal to a from-scratch writer's (keys sorted, no spaces);
    /// different values have different forms.
    #[test]
    fn canonical_json_ignores_key_order_and_whitespace(v in json_value(), w in json_value(), seed in any::<u64>()) {
        let text = scrambled(&v, seed);
        let parsed: Value = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert_eq!(canonical_value(&parsed), reference_canonical(&v), "{}", text);
        prop_assert_eq!(canonical_json(&v).map_err(|e| TestCaseError::fail(e.to_string()))?, reference_canonical(&v));
        if v != w {
            prop_assert_ne!(canonical_value(&v), canonical_value(&w));
        }
    }
}

/// A generated package with at least one mode (a generated one is added when it has none).
fn pkg_with_modes() -> impl Strategy<Value = Pkg> {
    pkg()
        .prop_flat_map(|p| {
            let nt = p.tools.len();
            (Just(p), mode(nt))
        })
        .prop_map(|(mut p, m): (Pkg, ModeG)| {
            if p.modes.is_empty() {
                p.modes.push(m);
            }
            p
        })
}

/// The level the runtime's pipeline (spec §3c) gives a call for `P0` in a mode whose table level is
/// `level`: a standing rule that applies lifts `propose` to `alone` (step 5); then, in an `unattended` mode,
/// a proposal left waiting for the requester (the generated packages route nothing, so every proposal
/// waits for the requester) is `never` (step 7).
fn pipeline(level: Level, rule_applies: bool, unattended: bool) -> Level {
    match level {
        Level::Propose if rule_applies => Level::Alone,
        Level::Propose | Level::ProposeEveryTime if unattended => Level::Never,
        other => other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// Choosing a mode never loosens any call (spec §3c: modes only tighten): for every triple, argument
    /// and mode of the package, the level in the mode is at least the level in no mode.
    #[test]
    fn choosing_a_mode_never_loosens_any_call(p in pkg_with_modes()) {
        let table = compile_pkg(&p);
        for (a, s, t) in p.triples() {
            let (an, sn, tn) = (format!("A{a}"), format!("S{s}"), format!("T{t}"));
            for n in ARGS {
                let plain = table_level(&table, &an, &sn, &tn, &args(n)).0;
                for m in 0..p.modes.len() {
                    let moded = level_in(&table, Some(&format!("M{m}")), &an, &sn, &tn, &args(n)).0;
                    prop_assert!(moded >= plain, "({}, {}, {}) n = {}: `{}` in no mode, `{}` in M{}", an, sn, tn, n, plain, moded, m);
                }
            }
        }
    }

    /// A rule applies only in its own mode (spec §3c step 5: "a rule applies only in exactly the mode it was
    /// made in; none = none"): a standing rule for `P0` made in `M0` lifts `propose` to `alone` in `M0` only;
    /// in no mode and in every other mode each call keeps the pipeline's level without the rule.
    #[test]
    fn a_rule_applies_only_in_its_own_mode(p in pkg_with_modes()) {
        let table = compile_pkg(&p);
        let rt = Runtime::new(table.clone(), AdmitAll);
        for (a, s, t) in p.triples() {
            let (an, sn, tn) = (format!("A{a}"), format!("S{s}"), format!("T{t}"));
            let made = rt.allow_alone(&NewRule { agent: an.clone(), tool: tn.clone(), skill: Some(sn.clone()), work_for: WorkFor::Person("P0".into()), by: "P0".into(), scope: Scope::AnyArguments, expires_at: None, mode: Some("M0".into()), via: Vec::new() });
            for n in ARGS {
                let call = Call::new(an.clone(), sn.clone(), tn.clone()).with_arguments(json!({ "n": n })).for_person("P0");
                let plain = table_level(&table, &an, &sn, &tn, &args(n)).0;
                let d = rt.decide(&call).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(d.level, plain, "({}, {}, {}) n = {} in no mode", an, sn, tn, n);
                for (m, spec) in p.modes.iter().enumerate() {
                    let name = format!("M{m}");
                    let level = level_in(&table, Some(&name), &an, &sn, &tn, &args(n)).0;
                    let applies = m == 0 && made.is_ok();
                    let d = rt.decide(&call.clone().in_mode(name.clone())).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(d.level, pipeline(level, applies, spec.unattended), "({}, {}, {}) n = {} in {}", an, sn, tn, n, name);
                    if m == 0 && level == Level::Propose {
                        prop_assert!(made.is_ok(), "no rule in M0 for ({}, {}, {}) though it proposes there: {:?}", an, sn, tn, made.as_ref().err());
                    }
                }
            }
        }
    }

    /// A task rule never outlives its task (spec §5a "Task-scoped approval"): a proposal in task `K1`
    /// approved *for this task* makes the same call `alone` in `K1` and nowhere else, and after
    /// `end_task(K1)` the call is back at the table's level in `K1` too.
    #[test]
    fn a_task_rule_never_outlives_its_task(p in pkg()) {
        let table = compile_pkg(&p);
        let rt = Runtime::new(table.clone(), AdmitAll);
        for (k, (a, s, t)) in p.triples().into_iter().enumerate() {
            let (an, sn, tn) = (format!("A{a}"), format!("S{s}"), format!("T{t}"));
            for n in ARGS {
                if table_level(&table, &an, &sn, &tn, &args(n)).0 != Level::Propose {
                    continue;
                }
                let (k1, k2) = (format!("K{k}-{n}"), format!("K{k}-{n}-other"));
                let call = Call::new(an.clone(), sn.clone(), tn.clone()).with_arguments(json!({ "n": n })).for_person("P0");
                let proposal = rt.propose(&ProposalRequest::new(call.clone().in_task(k1.clone()), k1.clone(), "law"))
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                rt.approve(&proposal.id, "P0", &proposal.fingerprint, ApproveMode::ForThisTask { any_arguments: false })
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let level = |task: &str| rt.decide(&call.clone().in_task(task.to_string())).map(|d| d.level);
                prop_assert_eq!(level(&k1).map_err(|e| TestCaseError::fail(e.to_string()))?, Level::Alone, "({}, {}, {}) n = {} in its task", an, sn, tn, n);
                prop_assert_eq!(level(&k2).map_err(|e| TestCaseError::fail(e.to_string()))?, Level::Propose, "({}, {}, {}) n = {} in another task", an, sn, tn, n);
                rt.end_task(&k1).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(level(&k1).map_err(|e| TestCaseError::fail(e.to_string()))?, Level::Propose, "({}, {}, {}) n = {} after its task ended", an, sn, tn, n);
            }
        }
    }
}

/// The table's level of a call of (agent, skill, tool) by index for `n`, delegated through `chain`.
fn chain_table_level(table: &Table, (a, s, t): (usize, usize, usize), n: i64, chain: &[(usize, usize)]) -> Level {
    let via: Vec<ChainLink> = chain.iter().map(|(la, ls)| ChainLink::new(format!("A{la}"), format!("S{ls}"))).collect();
    let arguments = json!({ "n": n });
    let (agent, skill, tool) = (format!("A{a}"), format!("S{s}"), format!("T{t}"));
    let call = CallRef {
        agent: &agent,
        skill: &skill,
        tool: &tool,
        arguments: &arguments,
        requester: None,
        mode: None,
        via: &via,
    };
    table.level_of(call).map_or(Level::Never, |of| of.level)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// Adding a `delegates` entry never loosens any existing call (spec §3b): every direct call and every
    /// chain declared before keeps at least its level.
    #[test]
    fn adding_a_delegates_entry_never_loosens_any_existing_call(p in pkg(), pick in any::<(usize, usize, usize)>()) {
        let before = compile_pkg(&p);
        let mut q = p.clone();
        let from = pick.0 % q.skills.len();
        let candidates: Vec<(usize, usize)> = (0..q.agents.len())
            .flat_map(|a| q.agents[a].skills.iter().map(move |&s| (a, s)))
            .filter(|&(_, s)| s > from)
            .filter(|e| !q.skills[from].delegates.contains(e))
            .collect();
        prop_assume!(!candidates.is_empty());
        q.skills[from].delegates.push(candidates[pick.1 % candidates.len()]);
        let after = compile_pkg(&q);
        let found = loosened(&levels(&p, &before), &levels(&q, &after));
        prop_assert!(found.is_empty(), "{}\n--- source ---\n{}", found.join("\n"), q.render());
        for (a, s, t) in p.triples() {
            for chain in spec::chains_to(&p, a, s) {
                for n in ARGS {
                    let (b, l) = (chain_table_level(&before, (a, s, t), n, &chain), chain_table_level(&after, (a, s, t), n, &chain));
                    prop_assert!(l >= b, "(A{}, S{}, T{}) via {:?} n = {}: `{}` became `{}`", a, s, t, chain, n, b, l);
                }
            }
        }
    }

    /// A delegated call is never looser than the same tool decided in any link's layers (spec §3b): through
    /// every declared chain, the level is at least the acting triple's direct level and, where a link's agent
    /// is offered the tool in the link's skill, that triple's level.
    #[test]
    fn a_delegated_call_is_never_looser_than_its_links(p in pkg()) {
        let table = compile_pkg(&p);
        for (a, s, t) in p.triples() {
            for chain in spec::chains_to(&p, a, s) {
                for n in ARGS {
                    let via = chain_table_level(&table, (a, s, t), n, &chain);
                    let direct = chain_table_level(&table, (a, s, t), n, &[]);
                    prop_assert!(via >= direct, "(A{}, S{}, T{}) via {:?} n = {}: `{}` < direct `{}`", a, s, t, chain, n, via, direct);
                    for &(la, ls) in &chain {
                        if p.skills[ls].tools.contains(&t) {
                            let link = chain_table_level(&table, (la, ls, t), n, &[]);
                            prop_assert!(via >= link, "(A{}, S{}, T{}) via {:?} n = {}: `{}` < the link (A{}, S{})'s `{}`", a, s, t, chain, n, via, la, ls, link);
                        }
                    }
                }
            }
        }
    }

    /// A chain-bound rule never applies to another chain (spec §3b, §5): a standing rule for `P0` made for
    /// one declared chain lifts `propose` to `alone` through that chain only; the direct call and every
    /// other chain keep their levels.
    #[test]
    fn a_chain_bound_rule_never_applies_to_another_chain(p in pkg()) {
        let table = compile_pkg(&p);
        for (a, s, t) in p.triples() {
            let chains = spec::chains_to(&p, a, s);
            let Some(bound) = chains.first() else { continue };
            let rt = Runtime::new(table.clone(), AdmitAll);
            let via: Vec<ChainLink> = bound.iter().map(|(la, ls)| ChainLink::new(format!("A{la}"), format!("S{ls}"))).collect();
            let made = rt.allow_alone(&NewRule { agent: format!("A{a}"), tool: format!("T{t}"), skill: Some(format!("S{s}")), work_for: WorkFor::Person("P0".into()), by: "P0".into(), scope: Scope::AnyArguments, expires_at: None, mode: None, via: via.clone() });
            let mut others: Vec<Vec<(usize, usize)>> = chains.iter().skip(1).cloned().collect();
            others.push(Vec::new());
            for n in ARGS {
                let level = chain_table_level(&table, (a, s, t), n, bound);
                let mut call = Call::new(format!("A{a}"), format!("S{s}"), format!("T{t}")).with_arguments(json!({ "n": n })).for_person("P0");
                call.via = via.clone();
                let d = rt.decide(&call).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let expected = if level == Level::Propose && made.is_ok() { Level::Alone } else { level };
                prop_assert_eq!(d.level, expected, "(A{}, S{}, T{}) via {:?} n = {}", a, s, t, bound, n);
                for other in &others {
                    let mut call = call.clone();
                    call.via = other.iter().map(|(la, ls)| ChainLink::new(format!("A{la}"), format!("S{ls}"))).collect();
                    let d = rt.decide(&call).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(d.level, chain_table_level(&table, (a, s, t), n, other), "(A{}, S{}, T{}) via {:?} n = {} (rule via {:?})", a, s, t, other, n, bound);
                }
            }
        }
    }
}

/// The table without what legitimately depends on file names: `header.source_digest`,
/// `header.table_digest` and every place (`at`).
fn decisions(t: &Table) -> String {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("at");
                for x in m.values_mut() {
                    strip(x);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(h) = v.get_mut("header").and_then(Value::as_object_mut) {
        h.remove("source_digest");
        h.remove("table_digest");
    }
    strip(&mut v);
    canonical_value(&v)
}

/// The canonical text of an operation, as the table quotes it.
fn permits_text(op: &crate::common::generator::Op) -> String {
    use crate::common::generator::Op;
    match op {
        Op::Read => "read E".into(),
        Op::Write => "write E.f".into(),
        Op::Create => "create E".into(),
        Op::Send => "send email".into(),
        Op::Reach => "reach \"api.example.com\"".into(),
        Op::WritePermits => "write permits".into(),
        Op::Dynamic => "call dynamic".into(),
        Op::Call(n) => format!("call {}", crate::common::generator::node_name(*n)),
        Op::CallAny(_) => "call any".into(),
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z \"\\\\\u{e9}\n]{0,5}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-e]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The value written with its object keys in a seed-dependent order and seed-dependent whitespace.
fn scrambled(v: &Value, seed: u64) -> String {
    let ws = [" ", "\n", "\t", "  ", "", "\r\n"];
    let pad = |i: u64| ws[(seed.rotate_left((i % 64) as u32) % ws.len() as u64) as usize];
    let mut counter = 0u64;
    fn go(v: &Value, seed: u64, counter: &mut u64, pad: &dyn Fn(u64) -> &'static str, out: &mut String) {
        *counter += 1;
        out.push_str(pad(*counter));
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                let len = keys.len().max(1);
                keys.rotate_left((seed as usize) % len);
                if seed & 2 == 2 {
                    keys.reverse();
                }
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(pad(*counter + i as u64));
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push_str(pad(*counter + 7));
                    out.push(':');
                    go(&m[*k], seed, counter, pad, out);
                }
                out.push_str(pad(*counter + 3));
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    go(x, seed, counter, pad, out);
                }
                out.push(']');
            }
            other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
        }
        out.push_str(pad(*counter + 1));
    }
    let mut out = String::new();
    go(v, seed, &mut counter, &pad, &mut out);
    out
}

/// A from-scratch canonical writer: keys sorted by their bytes, no whitespace.
fn reference_canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", serde_json::to_string(k).unwrap_or_default(), reference_canonical(&m[*k])))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(reference_canonical).collect::<Vec<_>>().join(",")),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The exception the monotonicity laws are stated around (spec §3 step 2): inside one layer a named
/// entry decides instead of that layer's class level, in the package-wide layer too. `Mail` sends; the
/// package-wide `sends: never` makes it `never`, but the same layer's `propose [Mail]` names it, so that
/// layer says `propose` and the agent's default `propose` decides.
#[test]
fn a_named_entry_decides_instead_of_its_own_layers_class_level() {
    let text = |extra: &str| {
        format!(
            "person P0\nmay {{\n    sends: never\n    {extra}\n}}\nagent A \"a\" {{ sponsor P0 skills [S] }}\nskill S \"s\" {{ tools [Mail] }}\ntool Mail \"Mail\" () {{ send email }}\n"
        )
    };
    let level = |t: &Table| table_level(t, "A", "S", "Mail", &serde_json::Map::new()).0;
    assert_eq!(level(&compile_text(&text(""))), Level::Never);
    assert_eq!(level(&compile_text(&text("propose [Mail]"))), Level::Propose);
    assert_eq!(level(&compile_text(&text("never [Mail]"))), Level::Never);
    // The same holds for a named `alone` (the warning `permits::levels::alone_ignored` says it "says
    // nothing", yet by §3 it is the layer's named level and the class setting is not consulted).
    assert_eq!(level(&compile_text(&text("alone [Mail]"))), Level::Propose);
}

/// Compiling from disk is byte-identical whatever order the files were created in (the directory order
/// the file system reports), `source_digest` included: the names and bytes are the same.
#[test]
fn files_written_in_another_order_compile_to_the_same_bytes() {
    use crate::common::generator::{AgentG, Op, SkillG, ToolG};
    let p = Pkg {
        tools: vec![
            ToolG { external: false, claim: None, ops: vec![Op::Send, Op::Call(NodeRef::Tool(1))] },
            ToolG { external: false, claim: Some(4), ops: vec![Op::Write, Op::Call(NodeRef::Tool(0))] },
            ToolG { external: true, claim: Some(16), ops: vec![] },
        ],
        fns: vec![],
        agents: vec![AgentG { skills: vec![0], may: None }],
        skills: vec![SkillG {
            tools: vec![0, 1, 2],
            may: Some(MayG { preset: None, settings: [None, Some(Level::Never), None, None], lists: vec![] }),
            delegates: vec![],
        }],
        package_may: None,
        modes: vec![],
    };
    let decls = p.declarations();
    let base = std::env::temp_dir().join(format!("permits-laws-order-{}", std::process::id()));
    let mut bytes = Vec::new();
    for (run, dir) in ["first", "second"].iter().enumerate() {
        let dir = base.join(dir);
        std::fs::create_dir_all(dir.join("sub")).expect("temp dir");
        let mut order: Vec<usize> = (0..decls.len()).collect();
        if run == 1 {
            order.reverse();
        }
        for i in order {
            let name = if i % 2 == 0 { format!("sub/d{i:02}.permits") } else { format!("d{i:02}.permits") };
            std::fs::write(dir.join(name), &decls[i]).expect("write");
        }
        let out = permits::compile::compile_package(&dir).expect("load");
        assert!(!out.has_errors(), "{}", permits::diagnostics::render_plain(&out.diagnostics, &out.sources));
        bytes.push(out.table.expect("table").to_pretty_json());
    }
    let _ = std::fs::remove_dir_all(&base);
    assert_eq!(bytes[0], bytes[1]);
    assert!(bytes[0].contains("\"source_digest\""));
}
