//! Arbitrary bytes as one `.permits` file, through the whole compiler: parse, check, effects, levels,
//! tests, the table. Every diagnostic is rendered as `permitc` renders it, and a table, when one is built,
//! must survive the trip through its JSON and `Table::load`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use permits::syntax::{Source, Sources, parse_sources};
use permits::table::Table;

fuzz_target!(|data: &[u8]| {
    let mut sources = Sources::default();
    sources.add(Source::new("fuzz.permits", data.to_vec()));
    let out = permits::compile::compile_loaded(parse_sources(sources));
    let rendered = permits::diagnostics::render_plain(&out.diagnostics, &out.sources);
    assert_eq!(out.diagnostics.is_empty(), rendered.is_empty(), "every diagnostic renders to some text");
    if let Some(table) = &out.table {
        let json = table.to_pretty_json();
        let loaded = Table::load(json.as_bytes()).unwrap_or_else(|e| panic!("a compiled table does not load: {e}"));
        assert_eq!(&loaded, table, "a compiled table changes through its JSON");
    }
});
