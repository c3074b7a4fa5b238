//! The canonical writer (`permits_table::canonical_json`, `Table::to_pretty_json`, `Table::compute_digest`)
//! gives exactly what the slow `Value`-tree reference gives, compact and pretty, on every real policy and a
//! generated package with conditions; each table loads back as itself.

use std::path::Path;

use permits_compiler::compile::{compile_loaded, compile_path};
use permits_compiler::syntax::{Source, Sources, parse_sources};
use permits_table::{Table, canonical_json, reference_canonical, reference_pretty, sha256_hex};

#[test]
fn canonical_writer_matches_the_value_reference_on_real_tables() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut tables: Vec<Table> = ["workshop", "support-triage", "shop", "skill-grants", "coding-agent"]
        .iter()
        .map(|p| compile_path(&root.join("policies").join(p)).expect("compiles"))
        .collect();
    let mut sources = Sources::default();
    let text = permits_testkit::generate::generate(&permits_testkit::generate::Config::sized(300));
    sources.add(Source::new("gen.permits", text.into_bytes()));
    let out = compile_loaded(parse_sources(sources));
    tables.push(out.table.expect("the generated package compiles"));
    for table in &tables {
        let value = serde_json::to_value(table).expect("value");
        assert_eq!(canonical_json(table).expect("canonical"), reference_canonical(&value));
        let mut pretty = reference_pretty(&value);
        pretty.push('\n');
        assert_eq!(table.to_pretty_json(), pretty);
        let mut without_header = value.clone();
        if let serde_json::Value::Object(map) = &mut without_header {
            map.remove("header");
        }
        assert_eq!(table.compute_digest(), sha256_hex(reference_canonical(&without_header).as_bytes()));
        assert_eq!(Table::load(table.to_pretty_json().as_bytes()).expect("loads"), *table);
    }
}
