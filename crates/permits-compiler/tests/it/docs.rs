//! The documentation says what the code does: the README's table of diagnostic codes is exactly
//! `Code::ALL` (name, severity, meaning), so a new code cannot go undocumented and a removed one cannot
//! linger.

use permits_compiler::diagnostics::Code;

/// The README's table of codes, as `Code::ALL` writes it.
fn code_table() -> String {
    let mut out = String::from("| code | severity | meaning |\n|---|---|---|\n");
    for code in Code::ALL {
        out.push_str(&format!("| `{}` | {} | {} |\n", code.as_str(), code.severity().as_str(), code.meaning()));
    }
    out
}

#[test]
fn the_readme_lists_every_diagnostic_code() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    let table = code_table();
    assert!(readme.contains(&table), "README.md's table of codes is not `Code::ALL`; it should read:\n\n{table}");
}
