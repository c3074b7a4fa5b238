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

/// ARCHITECTURE.md: the syntax tree and the model are never serialized. No file of `syntax/`, `model.rs`,
/// `check.rs`, `effects.rs` or `conditions.rs` derives or implements `Serialize`.
#[test]
fn the_syntax_tree_and_the_model_are_never_serialized() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![src.join("model.rs"), src.join("check.rs"), src.join("effects.rs"), src.join("conditions.rs")];
    for entry in std::fs::read_dir(src.join("syntax")).expect("syntax/") {
        files.push(entry.expect("entry").path());
    }
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        let code = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        assert!(!code.contains("Serialize"), "{} derives or implements `Serialize`", file.display());
    }
}
