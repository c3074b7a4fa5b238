//! Runtime benchmarks (BENCHMARKS.md): one decision (an offered triple, a miss, a triple decided by a
//! condition, a five-part `shell` command line judged part by part), as a level alone (`Table::level_of`, the question an agent asks before every call) and
//! as a whole owned `Decision` (`decide_table`: reasons, decider, digests); a proposal fingerprint; and
//! loading + verifying a ~10 MB table.
//!
//! Run: `cargo bench --bench runtime`. The tables are compiled from `permits::generate` packages before
//! anything is timed.

// `criterion_group!` generates undocumented functions; the crate denies `missing_docs`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use permits::runtime::{AdmitAll, Call, Runtime, decide_table, fingerprint};
use permits::table::{Level, LevelIndex, Table};
use permits_testkit::generate::{Config, generate};
use serde_json::json;

/// An agent whose skill offers `T1` under a condition and `T2` without one, appended to every generated
/// package so that a conditional entry exists whatever the size (the generator's own conditions name
/// random tools, which at 10k tools rarely fall in the agent's skills).
const CONDITIONAL: &str = "
agent Bench {
    sponsor Owner
    may {
        alone [T1 when amount <= 10000]
    }
    skills [BenchSkill]
}
skill BenchSkill {
    tools [T1, T2]
}
";

/// An agent whose skill offers `Run`, whose `shell` parameter is judged part by part (spec §3a), appended
/// to a generated package of its own (so that the tables of the other benchmarks stay as they were).
const SHELL: &str = r#"
agent Shell {
    sponsor Owner
    may {
        alone [Run when command in ["cargo build", "cargo test"] or command matches "cargo test *"]
        never [Run when command matches "*curl *" or command matches "sudo *"]
    }
    skills [ShellSkill]
}
skill ShellSkill {
    tools [Run]
}
tool Run "Run a command" (command: shell) { reach sandbox }
"#;

/// A command line of five parts, each alone, so that every part is read and every condition evaluated.
const FIVE_PARTS: &str = "cargo build && cargo test --all 2>&1 | cargo test -q; cargo test --doc && cargo test 'a b'";

/// A mode that tightens every class the generated tools have (spec §3c), for `decide_level/in_mode`.
const MODE: &str = r#"
mode Plan "Look, change nothing." { may { changes: never  sends: never  spends: never  reaches_out: never } }
"#;

/// Compiles a generated package (plus [`CONDITIONAL`]); panics on any error.
fn compile(config: &Config) -> Table {
    compile_with(config, "")
}

/// Compiles a generated package plus [`CONDITIONAL`] and `extra`; panics on any error.
fn compile_with(config: &Config, extra: &str) -> Table {
    let mut sources = permits::syntax::Sources::default();
    let text = generate(config) + CONDITIONAL + extra;
    sources.add(permits::syntax::Source::new("gen.permits", text.into_bytes()));
    let out = permits::compile::compile_loaded(permits::syntax::parse_sources(sources));
    assert!(!out.has_errors(), "the generated package does not compile");
    out.table.expect("a table")
}

/// Arguments every generated tool takes: `(amount: money, to: string)`.
fn args() -> serde_json::Value {
    json!({ "amount": 500, "to": "ops@example.com" })
}

/// The calls to time, found in `table`: an offered unconditional triple, a tool the skill does not
/// offer, and a triple whose level a condition decides.
struct Calls {
    hit: Call,
    miss: Call,
    conditional: Call,
}

fn find_calls(table: &Table) -> Calls {
    let mut hit = None;
    let mut conditional = None;
    for (agent, skills) in &table.entries {
        for (skill, tools) in skills {
            for (tool, entry) in tools {
                let call = || Call::new(agent, skill, tool).with_arguments(args());
                if entry.level.is_some() && !entry.reserved && hit.is_none() {
                    hit = Some(call());
                }
                if entry.level.is_none() && conditional.is_none() {
                    conditional = Some(call());
                }
            }
        }
    }
    let hit: Call = hit.expect("an unconditional entry");
    let skill = &table.skills[&hit.skill];
    let other = table.tools.keys().find(|t| !skill.tools.contains(t)).expect("a tool outside the skill");
    let miss = Call::new(&hit.agent, &hit.skill, other).with_arguments(args());
    Calls { hit, miss, conditional: conditional.expect("an entry decided by a condition") }
}

fn decide(c: &mut Criterion) {
    // 10k tools: the table's maps are as deep as a large package's; entries are 20 × 5 × ≤ 20.
    let table = compile(&Config::sized(10_000));
    let calls = find_calls(&table);
    let d = decide_table(&table, &calls.hit);
    assert!(d.offered && d.refusal.is_none(), "{d:?}");
    let d = decide_table(&table, &calls.miss);
    assert!(!d.offered && d.level == Level::Never, "{d:?}");
    let d = decide_table(&table, &calls.conditional);
    assert!(d.offered && d.refusal.is_none(), "{d:?}");
    assert!(
        table
            .entry(&calls.conditional.agent, &calls.conditional.skill, &calls.conditional.tool)
            .is_some_and(|e| e.level.is_none())
    );

    // The level alone, borrowed from the table: the same checks as `decide_table` (offered, person,
    // arguments against the parameters, conditions) and the same level, no allocation. Through the
    // `LevelIndex` an embedding agent builds once per table; `table_hit` asks the table's `BTreeMap`s.
    let index = LevelIndex::new(&table);
    let level = |call: &Call| index.level_of(call.as_ref()).map(|l| l.level);
    let table_level = |call: &Call| table.level_of(call.as_ref()).map(|l| l.level);
    for call in [&calls.hit, &calls.miss, &calls.conditional] {
        assert_eq!(level(call).unwrap_or(Level::Never), decide_table(&table, call).level);
        assert_eq!(table_level(call), level(call));
    }
    // A five-part command line through the `LevelIndex` of a table of its own (1k tools: an index lookup
    // costs the same whatever the size).
    let shell_table = compile_with(&Config::sized(1_000), SHELL);
    let shell_index = LevelIndex::new(&shell_table);
    let shell = Call::new("Shell", "ShellSkill", "Run").with_arguments(json!({ "command": FIVE_PARTS }));
    let shell_level = |call: &Call| shell_index.level_of(call.as_ref()).map(|l| l.level);
    assert_eq!(permits::table::shell::split(FIVE_PARTS).map(|l| l.parts.len()), Ok(5));
    assert_eq!(shell_level(&shell), Ok(Level::Alone));
    assert_eq!(decide_table(&shell_table, &shell).level, Level::Alone);
    // A call in a mode that says something about its triple, through the `LevelIndex` of a table with a mode
    // (1k tools): the mode's row is one more lookup in the entry.
    let mode_table = compile_with(&Config::sized(1_000), MODE);
    let mode_index = LevelIndex::new(&mode_table);
    let moded = mode_table
        .entries
        .iter()
        .flat_map(|(a, skills)| skills.iter().map(move |(s, tools)| (a, s, tools)))
        .flat_map(|(a, s, tools)| tools.iter().map(move |(t, e)| (a, s, t, e)))
        .find(|(_, _, _, e)| e.modes.contains_key("Plan") && e.level.is_some())
        .map(|(a, s, t, _)| Call::new(a, s, t).with_arguments(args()).in_mode("Plan"))
        .expect("a triple the mode says something about");
    let mode_level = |call: &Call| mode_index.level_of(call.as_ref()).map(|l| l.level);
    assert_eq!(mode_level(&moded), Ok(Level::Never));
    assert_eq!(decide_table(&mode_table, &moded).level, Level::Never);
    // A delegated call (spec §3b) with a 3-link chain, in a mode, through the `LevelIndex` of a 1k-tool table
    // whose agents delegate in one chain (`Config::delegation`): each link is a check of its `delegates`
    // entry and a lookup of its rows, then the mode's row.
    let chain_table = compile_with(&Config { delegation: true, ..Config::sized(1_000) }, MODE);
    let chain_index = LevelIndex::new(&chain_table);
    let tool = chain_table.skills["A3S0"].tools.first().cloned().expect("A3S0 lists a tool");
    let chained = Call::new("A3", "A3S0", tool)
        .with_arguments(args())
        .in_mode("Plan")
        .delegated_by("A2", "A2S0")
        .delegated_by("A1", "A1S0")
        .delegated_by("A0", "A0S0");
    let chain_level = |call: &Call| chain_index.level_of(call.as_ref()).map(|l| l.level);
    assert!(chain_level(&chained).is_ok(), "the 3-link chain is declared: {:?}", chain_level(&chained));
    assert_eq!(decide_table(&chain_table, &chained).via.len(), 3);
    let mut g = c.benchmark_group("decide_level");
    g.bench_function("hit", |b| b.iter(|| level(black_box(&calls.hit))));
    g.bench_function("miss", |b| b.iter(|| level(black_box(&calls.miss))));
    g.bench_function("condition", |b| b.iter(|| level(black_box(&calls.conditional))));
    g.bench_function("table_hit", |b| b.iter(|| table_level(black_box(&calls.hit))));
    g.bench_function("shell_5_parts", |b| b.iter(|| shell_level(black_box(&shell))));
    g.bench_function("in_mode", |b| b.iter(|| mode_level(black_box(&moded))));
    g.bench_function("chain_3_in_mode", |b| b.iter(|| chain_level(black_box(&chained))));
    g.finish();

    // The whole owned `Decision`: reasons, decider, digests, the refusal in words.
    let mut g = c.benchmark_group("decide_table");
    g.bench_function("hit", |b| b.iter(|| decide_table(black_box(&table), black_box(&calls.hit))));
    g.bench_function("miss", |b| b.iter(|| decide_table(black_box(&table), black_box(&calls.miss))));
    g.bench_function("condition", |b| b.iter(|| decide_table(black_box(&table), black_box(&calls.conditional))));
    g.finish();

    // The same hit through the embedded runtime: a store transaction for the standing rules and an
    // audit event (to the default null sink).
    let runtime = Runtime::new(table.clone(), AdmitAll);
    let mut g = c.benchmark_group("runtime_decide");
    g.bench_function("hit", |b| b.iter(|| runtime.decide(black_box(&calls.hit)).expect("decide")));
    g.finish();
}

fn proposal_fingerprint(c: &mut Criterion) {
    let table = compile(&Config::sized(1_000));
    let calls = find_calls(&table);
    let entry = table.entry(&calls.hit.agent, &calls.hit.skill, &calls.hit.tool).expect("entry");
    c.bench_function("fingerprint", |b| {
        b.iter(|| {
            fingerprint(
                black_box(&calls.hit),
                black_box(&entry.entry_digest),
                black_box(Some("v3")),
                black_box(Some("https://supplier.example/orders")),
            )
        })
    });
}

fn load_verify(c: &mut Criterion) {
    // A generated package whose table is about 10 MB of pretty JSON (the size is printed).
    let table = compile(&Config::sized(6_000));
    let bytes = table.to_pretty_json().into_bytes();
    eprintln!("load_verify: table of {} bytes ({:.1} MB)", bytes.len(), bytes.len() as f64 / 1e6);
    assert!(Table::load(&bytes).is_ok());
    let mut g = c.benchmark_group("table");
    g.sample_size(10).measurement_time(Duration::from_secs(10)).throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("load_verify", |b| b.iter(|| Table::load(black_box(&bytes)).expect("load")));
    g.bench_function("digest", |b| b.iter(|| black_box(&table).compute_digest()));
    g.bench_function("to_pretty_json", |b| b.iter(|| black_box(&table).to_pretty_json()));
    g.finish();
}

criterion_group!(benches, decide, proposal_fingerprint, load_verify);
criterion_main!(benches);
