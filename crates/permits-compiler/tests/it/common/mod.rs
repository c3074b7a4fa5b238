//! Shared support of the property, differential and adversarial tests: a generator of small random
//! packages ([`generator`]) and a naive reading of the spec over the generator's own structure ([`spec`]).
#![allow(dead_code, reason = "each test file uses a different part of the support")]

pub mod generator;
pub mod spec;

use permits_table::{CallRef, Level, Table};

/// The level the one evaluator gives a call with these arguments and no person (`Table::level_of`), with
/// the refusal's words when it refuses: what a `test` expectation with arguments states.
pub fn level_with(
    table: &Table,
    agent: &str,
    skill: &str,
    tool: &str,
    args: &serde_json::Map<String, serde_json::Value>,
) -> (Level, String) {
    level_in(table, None, agent, skill, tool, args)
}

/// [`level_with`] for a call made in `mode` (spec §3c; `None` for no mode).
pub fn level_in(
    table: &Table,
    mode: Option<&str>,
    agent: &str,
    skill: &str,
    tool: &str,
    args: &serde_json::Map<String, serde_json::Value>,
) -> (Level, String) {
    let arguments = serde_json::Value::Object(args.clone());
    match table.level_of(CallRef { agent, skill, tool, arguments: &arguments, requester: None, mode, via: &[] }) {
        Ok(of) => (of.level, String::new()),
        Err(why) => (Level::Never, why.to_string()),
    }
}

/// Compiles one source text as a one-file package `p.permits`: the table, the tests' outcomes and every
/// diagnostic.
pub fn compile_text(text: &str) -> permits_compiler::compile::Output {
    let mut sources = permits_compiler::syntax::Sources::default();
    sources.add(permits_compiler::syntax::Source::new("p.permits", text.as_bytes().to_vec()));
    permits_compiler::compile::compile_loaded(permits_compiler::syntax::parse_sources(sources))
}

/// The table of a source text that compiles (warnings allowed); panics with the diagnostics otherwise.
pub fn table_of(text: &str) -> Table {
    let out = compile_text(text);
    match out.table {
        Some(table) if !out.has_errors() => table,
        _ => {
            panic!("does not compile:\n{}", permits_compiler::diagnostics::render_plain(&out.diagnostics, &out.sources))
        }
    }
}

/// The codes of a compiled text's diagnostics, in order (`permits::levels::route_unused`).
pub fn codes(out: &permits_compiler::compile::Output) -> Vec<String> {
    out.diagnostics.iter().map(|d| d.code.as_str().to_string()).collect()
}
