//! permits vs Cedar vs Regorus: the same unconditional decisions of a generated 1k-tool package. First
//! asserts on a sample of calls (offered triples and misses) that the three engines agree, then times one
//! decision in each. Run: `cd benches/compare && cargo bench`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use permits_testkit::generate::{Config, generate};
use permits::runtime::{Call, decide_table};
use permits::table::{Level, LevelIndex, Table};
use permits_compare::{CedarModel, rego_decide, rego_engine, rego_input};
use serde_json::json;

fn table() -> Table {
    let mut sources = permits::syntax::Sources::default();
    sources.add(permits::syntax::Source::new("gen.permits", generate(&Config::sized(1_000)).into_bytes()));
    let out = permits::compile::compile_loaded(permits::syntax::parse_sources(sources));
    assert!(!out.has_errors());
    out.table.expect("a table")
}

fn compare(c: &mut Criterion) {
    let table = table();
    let cedar = CedarModel::new(&table);
    let mut rego = rego_engine(&table);
    let index = LevelIndex::new(&table);
    // The sample: every unconditional offered triple, and for each a tool its skill does not offer.
    let mut sample = Vec::new();
    for (agent, skills) in &table.entries {
        for (skill, tools) in skills {
            for (tool, e) in tools {
                if e.level.is_some() {
                    sample.push((agent.clone(), skill.clone(), tool.clone()));
                    if let Some(other) = table.tools.keys().find(|t| !tools.contains_key(*t)) {
                        sample.push((agent.clone(), skill.clone(), other.clone()));
                    }
                }
            }
        }
    }
    let args = json!({ "amount": 500, "to": "ops@example.com" });
    for (a, s, t) in &sample {
        let p = decide_table(&table, &Call::new(a, s, t).with_arguments(args.clone())).level;
        let quick = index
            .level_of(permits::table::CallRef { agent: a, skill: s, tool: t, arguments: &args, requester: None, mode: None, via: &[] })
            .map_or(Level::Never, |l| l.level);
        let ce = cedar.decide(&CedarModel::call(a, s, t));
        let re = rego_decide(&mut rego, &rego_input(a, s, t));
        assert!(p == quick && p == ce && p == re, "({a}, {s}, {t}): permits {p} ({quick}), cedar {ce}, rego {re}");
    }
    eprintln!("compare: the three engines agree on {} calls", sample.len());
    // Time a call whose level is `alone` (Cedar answers it with its first request), when there is one.
    let alone =
        |(a, s, t): &&(String, String, String)| table.entry(a, s, t).is_some_and(|e| e.level == Some(Level::Alone));
    let (a, s, t) = sample.iter().find(alone).or(sample.first()).expect("a call").clone();
    eprintln!("compare: timing ({a}, {s}, {t}) at {:?}", table.entry(&a, &s, &t).and_then(|e| e.level));
    let call = Call::new(&a, &s, &t).with_arguments(args);
    let cedar_call = CedarModel::call(&a, &s, &t);
    let input = rego_input(&a, &s, &t);
    let mut g = c.benchmark_group("one_decision");
    // The question the three engines answer: the level of the call. `decide_level` (through the
    // `LevelIndex` built once per table, as Cedar's entities and Rego's data are built once) answers it
    // with the same checks as `decide_table` (offered, arguments against the parameters); `decide_table`
    // also builds the owned `Decision` (reasons, decider, digests), which Cedar and Rego do not give.
    g.bench_function("permits", |b| b.iter(|| black_box(&index).level_of(black_box(&call).as_ref()).map(|l| l.level)));
    g.bench_function("permits_decide_table", |b| b.iter(|| decide_table(black_box(&table), black_box(&call)).level));
    g.bench_function("cedar", |b| b.iter(|| cedar.decide(black_box(&cedar_call))));
    g.bench_function("regorus", |b| b.iter(|| rego_decide(&mut rego, black_box(&input))));
    g.finish();
}

criterion_group!(benches, compare);
criterion_main!(benches);
