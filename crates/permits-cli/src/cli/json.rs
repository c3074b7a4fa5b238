//! The shapes of every `--format json` document, as types (`check`, `compile`, `test`, `diff`, load errors;
//! `explain` is the compiler's `Explanation`, `decide` the runtime's `Decision`). Each is printed through a
//! `serde_json::Value`, so keys come out sorted, as in every JSON `permitc` writes.

use serde::Serialize;

use super::*;

/// Prints a document as pretty JSON with sorted keys.
pub(super) fn print_json<T: Serialize>(doc: &T) {
    match serde_json::to_value(doc) {
        Ok(v) => outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
        Err(e) => errln!("error: {e}"),
    }
}

/// One diagnostic: its code, severity, message, help and labels.
#[derive(Serialize)]
pub(super) struct DiagnosticJson {
    pub(super) code: &'static str,
    pub(super) severity: &'static str,
    pub(super) message: String,
    pub(super) help: Option<String>,
    pub(super) labels: Vec<LabelJson>,
}

/// One label of a diagnostic, with its place (1-based lines and columns).
#[derive(Serialize)]
pub(super) struct LabelJson {
    pub(super) file: String,
    pub(super) line: u32,
    pub(super) column: u32,
    pub(super) end_line: u32,
    pub(super) end_column: u32,
    pub(super) message: String,
    pub(super) primary: bool,
}

impl DiagnosticJson {
    pub(super) fn new(d: &Diagnostic, sources: &Sources) -> DiagnosticJson {
        let label = |l: &crate::diagnostics::Label, primary: bool| {
            let src = sources.get(l.span.file);
            let (line, column) = src.line_col(l.span.start);
            let (end_line, end_column) = src.line_col(l.span.end);
            LabelJson {
                file: sources.display_name(l.span.file),
                line,
                column,
                end_line,
                end_column,
                message: l.message.clone(),
                primary,
            }
        };
        DiagnosticJson {
            code: d.code.as_str(),
            severity: d.severity.as_str(),
            message: d.message.clone(),
            help: d.help.clone(),
            labels: d
                .primary
                .iter()
                .map(|l| label(l, true))
                .chain(d.secondary.iter().map(|l| label(l, false)))
                .collect(),
        }
    }

    pub(super) fn all(out: &Output) -> Vec<DiagnosticJson> {
        out.diagnostics.iter().map(|d| DiagnosticJson::new(d, &out.sources)).collect()
    }
}

/// A path that could not be read: `{"code": "permits::load::io", "error": …}` (with the path in `check`).
#[derive(Serialize)]
pub(super) struct LoadFailureJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) path: Option<String>,
    pub(super) code: &'static str,
    pub(super) error: String,
}

/// `check --format json`: `{"packages": [...]}`.
#[derive(Serialize)]
pub(super) struct CheckJson {
    pub(super) packages: Vec<CheckedPackageJson>,
}

/// One package of `check`: checked, or not readable.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum CheckedPackageJson {
    Checked {
        path: String,
        ok: bool,
        errors: usize,
        warnings: usize,
        decisions: usize,
        diagnostics: Vec<DiagnosticJson>,
    },
    Unreadable(LoadFailureJson),
}

/// `compile --format json`.
#[derive(Serialize)]
pub(super) struct CompileJson {
    pub(super) path: String,
    pub(super) errors: usize,
    pub(super) warnings: usize,
    pub(super) diagnostics: Vec<DiagnosticJson>,
}

/// `test --format json`.
#[derive(Serialize)]
pub(super) struct TestJson {
    pub(super) packages: Vec<TestedPackageJson>,
    pub(super) passed: usize,
    pub(super) failed: usize,
}

/// One package of `test`.
#[derive(Serialize)]
pub(super) struct TestedPackageJson {
    pub(super) path: String,
    pub(super) compiled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tests: Option<Vec<TestBlockJson>>,
}

/// One `test` block and its failed expectations.
#[derive(Serialize)]
pub(super) struct TestBlockJson {
    pub(super) name: String,
    pub(super) expectations: usize,
    pub(super) passed: bool,
    pub(super) failures: Vec<TestFailureJson>,
}

/// One failed expectation.
#[derive(Serialize)]
pub(super) struct TestFailureJson {
    pub(super) triple: String,
    pub(super) expected: Level,
    pub(super) actual: Level,
    pub(super) why: String,
}

/// `diff --format json`.
#[derive(Serialize)]
pub(super) struct DiffJson<'a> {
    pub(super) old: String,
    pub(super) new: String,
    pub(super) widening: usize,
    pub(super) changes: &'a [crate::diff::Change],
}
