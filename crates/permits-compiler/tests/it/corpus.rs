//! The corpus: small `.permits` files, each a one-file package whose opening `//` comment says what it tests
//! and what the outcome must be.
//!
//! - `tests/corpus/ok/*.permits` compile without errors; the snapshot is the warnings (rendered as on a
//!   terminal, without colour), if any, then the decision table as pretty JSON.
//! - `tests/corpus/err/*.permits` fail with at least one error and produce no table (unless the only errors
//!   are failed `test` expectations); the snapshot is every diagnostic, rendered the same way.
//!
//! Besides the snapshots, the opening comment is checked mechanically, so that accepting a wrong snapshot
//! does not make a wrong outcome pass:
//! - every diagnostic code it names (`permits::effects::understated`) must be among the diagnostics, except
//!   the codes named on a `// known bug: …` line, which must be absent (the line records a compiler bug,
//!   reported, whose fix will change the snapshot: remove the line then);
//! - "compiles clean" means no diagnostic at all;
//! - `// level: AGENT SKILL TOOL = LEVEL` (or `= not offered`) and `// route: AGENT SKILL TOOL = ROUTE`
//!   lines (ok files) must match the table.
//!
//! Snapshots live in `tests/snapshots/`. After a deliberate change, run
//! `INSTA_UPDATE=always cargo test --test corpus` and read every changed `.snap` against the file's opening
//! comment: a snapshot records what the compiler does, the comment says what the spec wants.

use std::path::Path;

use permits_compiler::compile::{Output, compile_package};
use permits_compiler::diagnostics::Diagnostic;
use permits_compiler::diagnostics::render_plain;
use permits_table::Table;

/// Compiles one corpus file. Diagnostics show the path as given, so it is given relative to the crate root
/// (cargo runs integration tests there): the snapshots then hold no machine-specific absolute path.
fn compile(path: &Path) -> Output {
    let relative = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).ok().filter(|r| r.exists()).unwrap_or(path);
    compile_package(relative).unwrap_or_else(|e| panic!("`{}` cannot be read: {e}", path.display()))
}

/// The lines of the file's opening comment (before the first line that is not a `//` comment), without `//`.
fn header(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("`{}`: {e}", path.display()));
    let lines: Vec<String> = text
        .trim_start_matches('\u{feff}')
        .lines()
        .take_while(|l| l.starts_with("//") && !l.starts_with("///"))
        .map(|l| l.trim_start_matches("//").trim().to_string())
        .collect();
    assert!(!lines.is_empty(), "`{}` must start with a `//` comment saying what it tests and expects", path.display());
    lines
}

/// The prose of the opening comment (without the `level:` / `route:` lines), for the snapshot's description.
fn intent(header: &[String]) -> String {
    header
        .iter()
        .filter(|l| !l.starts_with("level:") && !l.starts_with("route:"))
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `known bug:` lines of the opening comment.
fn known_bugs(header: &[String]) -> String {
    header.iter().filter(|l| l.starts_with("known bug:")).cloned().collect::<Vec<_>>().join(" ")
}

/// Every diagnostic code the prose names, like `permits::check::unknown`.
fn named_codes(prose: &str) -> Vec<String> {
    let mut codes = Vec::new();
    let mut rest = prose;
    while let Some(i) = rest.find("permits::") {
        let code: String = rest[i..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_' || *c == ':').collect();
        let code = code.trim_end_matches(':').to_string();
        if code.matches("::").count() == 2 && !codes.contains(&code) {
            codes.push(code);
        }
        rest = &rest[i + "permits::".len()..];
    }
    codes
}

fn assert_named_codes(path: &Path, header: &[String], diagnostics: &[Diagnostic], rendered: &str) {
    let bugs = named_codes(&known_bugs(header));
    for code in &bugs {
        assert!(
            !diagnostics.iter().any(|d| d.code.as_str() == *code),
            "`{}`: the known bug about {code} looks fixed; check the snapshot and remove the `known bug:` line:\n{rendered}",
            path.display()
        );
    }
    for code in named_codes(&intent(header)).into_iter().filter(|c| !bugs.contains(c)) {
        assert!(
            diagnostics.iter().any(|d| d.code.as_str() == code),
            "`{}` expects {code}, which is not among the diagnostics:\n{rendered}",
            path.display()
        );
    }
}

/// `AGENT SKILL TOOL = VALUE` from a `level:` or `route:` line.
fn triple_line<'a>(path: &Path, line: &'a str) -> ([&'a str; 3], &'a str) {
    let (triple, value) = line.split_once('=').unwrap_or_else(|| panic!("`{}`: `{line}` has no `=`", path.display()));
    let parts: Vec<&str> = triple.split_whitespace().collect();
    let [agent, skill, tool] = parts[..] else {
        panic!("`{}`: `{line}` does not name AGENT SKILL TOOL", path.display())
    };
    ([agent, skill, tool], value.trim())
}

fn assert_table_lines(path: &Path, header: &[String], table: &Table) {
    for line in header {
        if let Some(rest) = line.strip_prefix("level:") {
            let ([agent, skill, tool], want) = triple_line(path, rest);
            let got = match table.entry(agent, skill, tool) {
                None => "not offered".to_string(),
                Some(e) => e.level.map_or_else(|| "conditional".to_string(), |l| l.to_string()),
            };
            assert_eq!(got, want, "`{}`: level of ({agent}, {skill}, {tool})", path.display());
        } else if let Some(rest) = line.strip_prefix("route:") {
            let ([agent, skill, tool], want) = triple_line(path, rest);
            let entry = table
                .entry(agent, skill, tool)
                .unwrap_or_else(|| panic!("`{}`: ({agent}, {skill}, {tool}) is not offered", path.display()));
            assert_eq!(entry.route.to_string(), want, "`{}`: route of ({agent}, {skill}, {tool})", path.display());
        }
    }
}

/// Every `ok/` file compiles with no errors; its warnings and table are snapshotted.
#[test]
fn ok() {
    insta::glob!("corpus/ok/*.permits", |path| {
        let header = header(path);
        let prose = intent(&header);
        let out = compile(path);
        let rendered = render_plain(&out.diagnostics, &out.sources);
        assert!(!out.has_errors(), "`{}` should compile without errors:\n{rendered}", path.display());
        let table = out.table.as_ref().unwrap_or_else(|| panic!("`{}` compiled to no table", path.display()));
        if prose.contains("compiles clean") {
            assert!(out.diagnostics.is_empty(), "`{}` should compile clean, but:\n{rendered}", path.display());
        }
        assert_named_codes(path, &header, &out.diagnostics, &rendered);
        assert_table_lines(path, &header, table);
        let warnings: Vec<Diagnostic> = out.diagnostics.iter().filter(|d| !d.is_error()).cloned().collect();
        let mut snap = String::new();
        if warnings.is_empty() {
            snap.push_str("=== warnings: none\n\n");
        } else {
            snap.push_str("=== warnings\n");
            snap.push_str(&render_plain(&warnings, &out.sources));
        }
        snap.push_str("=== table\n");
        snap.push_str(&table.to_pretty_json());
        insta::with_settings!({ description => prose, omit_expression => true }, {
            insta::assert_snapshot!(snap);
        });
    });
}

/// Every `err/` file fails with at least one error and no table; its diagnostics are snapshotted.
#[test]
fn err() {
    insta::glob!("corpus/err/*.permits", |path| {
        let header = header(path);
        let prose = intent(&header);
        let out = compile(path);
        let rendered = render_plain(&out.diagnostics, &out.sources);
        assert!(out.has_errors(), "`{}` should fail with an error, but compiled:\n{rendered}", path.display());
        // A package whose only errors are failed `test` expectations still compiles to a table (for
        // `permitc test`); any other error must leave none.
        assert!(out.only_tests_failed() || out.table.is_none(), "`{}` has errors but produced a table", path.display());
        assert_named_codes(path, &header, &out.diagnostics, &rendered);
        insta::with_settings!({ description => prose, omit_expression => true }, {
            insta::assert_snapshot!(rendered);
        });
    });
}
