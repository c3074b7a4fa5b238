//! `permitc check`.

use super::*;

pub(in crate::cli) fn check(paths: &[PathBuf], format: CheckFormat, deny_warnings: bool) -> u8 {
    let mut worst = 0u8;
    let mut json = Vec::new();
    let mut sarif_results = Vec::new();
    let mut sarif_failures = Vec::new();
    let colour = colour();
    for path in paths {
        let out = match crate::compile::compile_package(path) {
            Ok(out) => out,
            Err(e) => {
                match format {
                    CheckFormat::Human => errln!("error[{}]: {e}", e.code()),
                    CheckFormat::Json => json.push(CheckedPackageJson::Unreadable(LoadFailureJson {
                        path: Some(path.display().to_string()),
                        code: e.code().as_str(),
                        error: e.to_string(),
                    })),
                    CheckFormat::Sarif => sarif_failures.push(serde_json::json!({
                        "level": "error", "message": { "text": format!("{e} [{}]", e.code()) },
                    })),
                }
                worst = 2;
                continue;
            }
        };
        let (errors, warnings) = count(&out);
        if errors > 0 || (deny_warnings && warnings > 0) {
            worst = worst.max(1);
        }
        match format {
            CheckFormat::Human => {
                err!("{}", render(&out.diagnostics, &out.sources, colour));
                errln!("{}", summary(path, &out));
            }
            CheckFormat::Json => json.push(CheckedPackageJson::Checked {
                path: path.display().to_string(),
                ok: errors == 0,
                errors,
                warnings,
                decisions: out.table.as_ref().map_or(0, |t| t.decision_count()),
                diagnostics: DiagnosticJson::all(&out),
            }),
            CheckFormat::Sarif => sarif_results.extend(out.diagnostics.iter().map(|d| sarif_result(d, &out.sources))),
        }
    }
    match format {
        CheckFormat::Human => {}
        CheckFormat::Json => print_json(&CheckJson { packages: json }),
        CheckFormat::Sarif => {
            outln!("{}", serde_json::to_string_pretty(&sarif_log(sarif_results, sarif_failures)).unwrap_or_default())
        }
    }
    worst
}
