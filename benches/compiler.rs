//! Compiler benchmarks (BENCHMARKS.md): check + compile of generated packages of 1k, 10k and 100k tools
//! (ten call edges per tool), and `diff` of two compiled 100k-tool tables.
//!
//! Run: `cargo bench --bench compiler`. Generating the text is not timed; parsing, checking, effect
//! inference, levels, the table with its digests and the package's tests are. `stages_10k` times the
//! stages one by one, and the rendering of the warnings that `permitc check` adds.

// `criterion_group!` generates undocumented functions; the crate denies `missing_docs`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use permits::compile::{Output, compile_loaded};
use permits::syntax::{Source, Sources, parse_sources};
use permits::table::Table;
use permits_testkit::generate::{Config, generate};

/// What `permitc check` does after reading the file: parse, check, infer, decide, build the table.
fn check_compile(text: Vec<u8>) -> Output {
    let mut sources = Sources::default();
    sources.add(Source::new("gen.permits", text));
    compile_loaded(parse_sources(sources))
}

fn compiled(text: &str) -> Table {
    let out = check_compile(text.as_bytes().to_vec());
    assert!(!out.has_errors(), "the generated package does not compile");
    out.table.expect("a table")
}

fn check_and_compile(c: &mut Criterion) {
    let mut g = c.benchmark_group("check_compile");
    for tools in [1_000usize, 10_000, 100_000] {
        let text = generate(&Config::sized(tools));
        if tools >= 100_000 {
            // One run is tens of seconds here: criterion's minimum of ten samples, one iteration each.
            g.sample_size(10).measurement_time(Duration::from_secs(1)).warm_up_time(Duration::from_millis(1));
        } else if tools >= 10_000 {
            g.sample_size(10).measurement_time(Duration::from_secs(10)).warm_up_time(Duration::from_secs(1));
        } else {
            g.sample_size(20).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
        }
        g.bench_with_input(BenchmarkId::from_parameter(tools), &text, |b, text| {
            b.iter_batched(
                || text.clone().into_bytes(),
                |bytes| {
                    let out = check_compile(bytes);
                    assert!(!out.has_errors(), "the generated package does not compile");
                    out
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn diff_100k(c: &mut Criterion) {
    let text = generate(&Config::sized(100_000));
    let old = compiled(&text);
    // A small edit: the first agent loses `changes_alone` (its triples that change become `propose`).
    let edited = compiled(&text.replacen("        changes_alone\n", "", 1));
    // The new table against the old one is the other worst case: every triple added or removed.
    let small = permits::diff::diff(&old, &edited).len();
    let all = permits::diff::diff(&Table { entries: Default::default(), ..old.clone() }, &edited).len();
    eprintln!("diff_100k: {small} changes after the small edit, {all} against an empty table");
    assert!(small > 0 && all > small);
    let empty = Table { entries: Default::default(), ..old.clone() };
    let mut g = c.benchmark_group("diff_100k");
    g.sample_size(10).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    g.bench_function("small_edit", |b| b.iter(|| permits::diff::diff(black_box(&old), black_box(&edited))));
    g.bench_function("all_added", |b| b.iter(|| permits::diff::diff(black_box(&empty), black_box(&edited))));
    g.finish();
}

/// The stages of check + compile at 10k tools, each alone: where the time goes.
fn stages_10k(c: &mut Criterion) {
    let text = generate(&Config::sized(10_000)).into_bytes();
    let sources = || {
        let mut sources = Sources::default();
        sources.add(Source::new("gen.permits", text.clone()));
        sources
    };
    let loaded = parse_sources(sources());
    let (analysis, _) = permits::compile::analyze(&loaded.package, &loaded.sources);
    let analysis = analysis.expect("an analysis");
    let mut g = c.benchmark_group("stages_10k");
    g.sample_size(10).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_millis(1));
    g.bench_function("parse", |b| b.iter_batched(sources, parse_sources, BatchSize::PerIteration));
    g.bench_function("check_effects_levels", |b| {
        b.iter(|| permits::compile::analyze(black_box(&loaded.package), black_box(&loaded.sources)))
    });
    g.bench_function("build_table", |b| b.iter(|| permits::compile::build_table(black_box(&analysis))));
    // What `permitc check` adds after compiling: rendering the package's warnings (miette, no colour).
    let out = check_compile(text.clone());
    eprintln!("stages_10k: {} diagnostics to render", out.diagnostics.len());
    g.bench_function("render_diagnostics", |b| {
        b.iter(|| permits::diagnostics::render_plain(black_box(&out.diagnostics), black_box(&out.sources)))
    });
    g.finish();
}

criterion_group!(benches, check_and_compile, stages_10k, diff_100k);
criterion_main!(benches);
