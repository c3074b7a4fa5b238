//! What every command shares: colour, diagnostics as JSON, summaries, I/O errors, the atomic write.

use super::*;

pub(super) fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

pub(super) fn count(out: &Output) -> (usize, usize) {
    let errors = out.diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
    (errors, out.diagnostics.len() - errors)
}

pub(super) fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

pub(super) fn summary(path: &Path, out: &Output) -> String {
    let (errors, warnings) = count(out);
    let mut problems = Vec::new();
    if errors > 0 {
        problems.push(plural(errors, "error"));
    }
    if warnings > 0 {
        problems.push(plural(warnings, "warning"));
    }
    match &out.table {
        Some(t) if errors == 0 => {
            let decisions = t.decision_count();
            format!(
                "checked `{}`: {}, {}, {}, {}",
                path.display(),
                plural(t.agents.len(), "agent"),
                plural(t.skills.len(), "skill"),
                plural(decisions, "decision"),
                if problems.is_empty() { "no problems".to_string() } else { problems.join(", ") }
            )
        }
        Some(_) if out.only_tests_failed() => {
            format!("`{}` compiles, but its tests fail: {}", path.display(), problems.join(", "))
        }
        _ => format!("`{}` does not compile: {}", path.display(), problems.join(", ")),
    }
}

pub(super) fn io_error(e: &syntax::ReadError, format: Format) -> u8 {
    if format == Format::Human {
        errln!("error[{}]: {e}", e.code());
    } else {
        match serde_json::to_value(LoadFailureJson { path: None, code: e.code().as_str(), error: e.to_string() }) {
            Ok(v) => outln!("{v}"),
            Err(e) => errln!("error: {e}"),
        }
    }
    2
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, then renames it over `path`: a reader sees
/// the old file or the new one, never a partial one.
///
/// Errors: any I/O error; the temporary file is removed on failure.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "table.json".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Loads and analyses a package for a command that needs a clean analysis; prints the diagnostics and
/// returns the exit code when there are errors.
pub(super) fn with_analysis<T>(path: &Path, format: Format, f: impl FnOnce(&Analysis<'_>) -> T) -> Result<T, u8> {
    let loaded = match syntax::load_package(path) {
        Ok(l) => l,
        Err(e) => return Err(io_error(&e, format)),
    };
    let mut all = loaded.diagnostics.clone();
    if !all.iter().any(Diagnostic::is_error) {
        let (analysis, mut diags) = compile::analyze(&loaded.package, &loaded.sources);
        all.append(&mut diags);
        if let Some(a) = analysis.filter(|_| !all.iter().any(Diagnostic::is_error)) {
            return Ok(f(&a));
        }
    }
    err!("{}", render(&all, &loaded.sources, colour()));
    errln!("`{}` does not compile; fix the errors first", path.display());
    Err(1)
}

/// A table from a compiled `.json` file, or compiled from a package. Prints why not, and returns the exit
/// code, when it cannot.
pub(super) fn table_from(path: &Path) -> Result<crate::table::Table, u8> {
    if path.is_file() && path.extension().is_some_and(|e| e == "json") {
        return crate::table::Table::load_path(path).map_err(|e| {
            errln!("error: `{}`: {e}", path.display());
            2
        });
    }
    let out = compile::compile_package(path).map_err(|e| io_error(&e, Format::Human))?;
    let only_tests_fail = out.only_tests_failed();
    let has_errors = out.has_errors();
    match out.table {
        Some(t) if only_tests_fail => {
            if has_errors {
                errln!(
                    "warning: `{}` compiles, but its tests fail (`permitc test {}`); diffing it anyway",
                    path.display(),
                    path.display()
                );
            }
            Ok(t)
        }
        _ => {
            err!("{}", render(&out.diagnostics, &out.sources, colour()));
            errln!("{}", summary(path, &out));
            Err(1)
        }
    }
}
