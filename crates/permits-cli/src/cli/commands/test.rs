//! `permitc test`.

use super::*;

pub(in crate::cli) fn test(paths: &[PathBuf], format: Format) -> u8 {
    let (mut passed, mut failed, mut worst) = (0usize, 0usize, 0u8);
    let mut json = Vec::new();
    for path in paths {
        let out = match crate::compile::compile_package(path) {
            Ok(out) => out,
            Err(e) => {
                worst = worst.max(io_error(&e, format));
                continue;
            }
        };
        let other_errors: Vec<Diagnostic> =
            out.diagnostics.iter().filter(|d| d.is_error() && !d.code.is_test_failure()).cloned().collect();
        if !other_errors.is_empty() {
            if format == Format::Human {
                err!("{}", render(&other_errors, &out.sources, colour()));
                errln!("`{}` does not compile: its tests did not run", path.display());
            } else {
                json.push(TestedPackageJson { path: path.display().to_string(), compiled: false, tests: None });
            }
            worst = worst.max(1);
            continue;
        }
        for t in &out.tests {
            if t.failures.is_empty() {
                passed += 1;
            } else {
                failed += 1;
                worst = worst.max(1);
            }
            if format == Format::Human {
                outln!(
                    "test {} :: {} ... {}",
                    path.display(),
                    t.name,
                    if t.failures.is_empty() { "ok" } else { "FAILED" }
                );
                for f in &t.failures {
                    outln!("    {} is `{}`, expected `{}`: {}", f.triple, f.actual, f.expected, f.why);
                }
            }
        }
        if format == Format::Json {
            json.push(TestedPackageJson {
                path: path.display().to_string(),
                compiled: true,
                tests: Some(
                    out.tests
                        .iter()
                        .map(|t| TestBlockJson {
                            name: t.name.clone(),
                            expectations: t.expectations,
                            passed: t.failures.is_empty(),
                            failures: t
                                .failures
                                .iter()
                                .map(|f| TestFailureJson {
                                    triple: f.triple.clone(),
                                    expected: f.expected,
                                    actual: f.actual,
                                    why: f.why.clone(),
                                })
                                .collect(),
                        })
                        .collect(),
                ),
            });
        }
    }
    match format {
        Format::Human => outln!("{passed} passed, {failed} failed"),
        Format::Json => print_json(&TestJson { packages: json, passed, failed }),
    }
    worst
}
