//! `permitc`, the command line (spec §7): `check`, `compile`, `explain`, `decide`.
//!
//! Exit codes: 0 clean, 1 errors (or warnings with `--deny-warnings`), 2 usage or I/O. Human output goes
//! to stderr as miette diagnostics (graphical with colour on a terminal; without colour when stderr is
//! not a terminal or `NO_COLOR` is set); `--format json` writes one JSON document to stdout.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::compile::{self, Analysis, Output};
use crate::diagnostics::{Diagnostic, Severity, render};
use crate::effects::{self, Hop};
use crate::syntax::{self, Sources};
use crate::table::{EffectClass, Level, ParamType, Route};

/// The permits compiler: check `.permits` packages, compile them to a decision table, explain a decision.
#[derive(Debug, Parser)]
#[command(name = "permitc", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check packages: each PATH is one package (a folder of `.permits` files, or one file).
    Check {
        /// The packages.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format: `sarif` is SARIF 2.1.0 for code-scanning tools.
        #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
        format: CheckFormat,
        /// Fail (exit 1) on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Compile one package to a decision table (written atomically).
    Compile {
        /// The package.
        path: PathBuf,
        /// Where to write the table (`-` for stdout).
        #[arg(short, long)]
        output: PathBuf,
        /// Output format of diagnostics.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Fail (exit 1, no table written) on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Explain the decision for one (agent, skill, tool): level, route, every reason, witness paths.
    Explain {
        /// The agent.
        #[arg(long)]
        agent: String,
        /// The skill.
        #[arg(long)]
        skill: String,
        /// The tool.
        #[arg(long)]
        tool: String,
        /// The package.
        path: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Every triple whose decision changed from OLD to NEW (each a package or a compiled table),
    /// widenings marked.
    Diff {
        /// The old package (a folder or `.permits` file) or compiled table (`.json`).
        old: PathBuf,
        /// The new package or compiled table.
        new: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Exit 1 when anything widens.
        #[arg(long)]
        fail_on_widen: bool,
    },
    /// Run the packages' `test` blocks: each expectation of a level for a triple.
    Test {
        /// The packages.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Decide one call against a compiled table, as the runtime would; the decision as JSON.
    Decide {
        /// The compiled table (`permitc compile`).
        #[arg(long)]
        table: PathBuf,
        /// The agent.
        #[arg(long)]
        agent: String,
        /// The skill.
        #[arg(long)]
        skill: String,
        /// The tool.
        #[arg(long)]
        tool: String,
        /// The call's arguments as a JSON object, e.g. `{"repair": "T-7", "price": 45}`.
        #[arg(long)]
        args: Option<String>,
        /// The person the work is for (default: nobody, so the agent's sponsor).
        #[arg(long)]
        requester: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
    },
    /// Rewrite `.permits` files in the canonical layout (comments kept; decisions unchanged).
    Fmt {
        /// Files or package folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Write nothing; list the files that would change and exit 1 if any would.
        #[arg(long)]
        check: bool,
    },
    /// Print the call graph, each node with its effect set, as Graphviz DOT (one `digraph` per package).
    Graph {
        /// The packages.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Only what this agent is offered, and what it calls, with the level in each skill.
        #[arg(long)]
        agent: Option<String>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CheckFormat {
    /// Diagnostics for people.
    Human,
    /// One JSON document on stdout.
    Json,
    /// SARIF 2.1.0 on stdout.
    Sarif,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Diagnostics for people.
    Human,
    /// One JSON document on stdout.
    Json,
}

/// `println!` that ignores a closed pipe (`permitc check | head` must not panic).
macro_rules! outln {
    ($($t:tt)*) => {{ let _ = writeln!(std::io::stdout(), $($t)*); }};
}
/// `print!` that ignores a closed pipe.
macro_rules! out {
    ($($t:tt)*) => {{ let _ = write!(std::io::stdout(), $($t)*); }};
}
/// `eprintln!` that ignores a closed stderr.
macro_rules! errln {
    ($($t:tt)*) => {{ let _ = writeln!(std::io::stderr(), $($t)*); }};
}
/// `eprint!` that ignores a closed stderr.
macro_rules! err {
    ($($t:tt)*) => {{ let _ = write!(std::io::stderr(), $($t)*); }};
}

/// Runs `permitc` with the process's arguments and returns its exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let code = match cli.command {
        Command::Check { paths, format, deny_warnings } => check(&paths, format, deny_warnings),
        Command::Compile { path, output, format, deny_warnings } => compile_cmd(&path, &output, format, deny_warnings),
        Command::Explain { agent, skill, tool, path, format } => explain(&path, &agent, &skill, &tool, format),
        Command::Graph { paths, agent } => graph(&paths, agent.as_deref()),
        Command::Test { paths, format } => test(&paths, format),
        Command::Decide { table, agent, skill, tool, args, requester, format } => {
            decide(&table, &agent, &skill, &tool, args.as_deref(), requester.as_deref(), format)
        }
        Command::Fmt { paths, check } => fmt(&paths, check),
        Command::Diff { old, new, format, fail_on_widen } => diff_cmd(&old, &new, format, fail_on_widen),
    };
    ExitCode::from(code)
}

fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn diagnostic_json(d: &Diagnostic, sources: &Sources) -> serde_json::Value {
    let label = |l: &crate::diagnostics::Label, primary: bool| {
        let src = sources.get(l.span.file);
        let (line, column) = src.line_col(l.span.start);
        let (end_line, end_column) = src.line_col(l.span.end);
        serde_json::json!({
            "file": sources.display_name(l.span.file), "line": line, "column": column, "end_line": end_line, "end_column": end_column,
            "message": l.message, "primary": primary,
        })
    };
    let labels: Vec<_> =
        d.primary.iter().map(|l| label(l, true)).chain(d.secondary.iter().map(|l| label(l, false))).collect();
    serde_json::json!({
        "code": d.code.as_str(), "severity": d.severity.as_str(), "message": d.message, "help": d.help, "labels": labels,
    })
}

fn count(out: &Output) -> (usize, usize) {
    let errors = out.diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
    (errors, out.diagnostics.len() - errors)
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

fn summary(path: &Path, out: &Output) -> String {
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
            let decisions: usize = t.entries.values().flat_map(|s| s.values()).map(|m| m.len()).sum();
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

fn io_error(e: &syntax::LoadError, format: Format) -> u8 {
    if format == Format::Human {
        errln!("error[{}]: {e}", e.code());
    } else {
        outln!("{}", serde_json::json!({ "code": e.code().as_str(), "error": e.to_string() }));
    }
    2
}

fn check(paths: &[PathBuf], format: CheckFormat, deny_warnings: bool) -> u8 {
    let mut worst = 0u8;
    let mut json = Vec::new();
    let mut sarif_results = Vec::new();
    let mut sarif_failures = Vec::new();
    let colour = colour();
    for path in paths {
        let out = match compile::compile_package(path) {
            Ok(out) => out,
            Err(e) => {
                match format {
                    CheckFormat::Human => errln!("error[{}]: {e}", e.code()),
                    CheckFormat::Json => json.push(serde_json::json!({
                        "path": path.display().to_string(), "code": e.code().as_str(), "error": e.to_string(),
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
            CheckFormat::Json => {
                let decisions: usize = out
                    .table
                    .as_ref()
                    .map(|t| t.entries.values().flat_map(|s| s.values()).map(|m| m.len()).sum())
                    .unwrap_or(0);
                json.push(serde_json::json!({
                    "path": path.display().to_string(),
                    "ok": errors == 0,
                    "errors": errors,
                    "warnings": warnings,
                    "decisions": decisions,
                    "diagnostics": out.diagnostics.iter().map(|d| diagnostic_json(d, &out.sources)).collect::<Vec<_>>(),
                }));
            }
            CheckFormat::Sarif => sarif_results.extend(out.diagnostics.iter().map(|d| sarif_result(d, &out.sources))),
        }
    }
    match format {
        CheckFormat::Human => {}
        CheckFormat::Json => {
            outln!("{}", serde_json::to_string_pretty(&serde_json::json!({ "packages": json })).unwrap_or_default())
        }
        CheckFormat::Sarif => {
            outln!("{}", serde_json::to_string_pretty(&sarif_log(sarif_results, sarif_failures)).unwrap_or_default())
        }
    }
    worst
}

/// A relative path as a URI reference (percent-encoding what a URI cannot hold), an absolute one as a
/// `file://` URI.
fn path_uri(path: &str) -> String {
    let mut out = String::new();
    if path.starts_with('/') {
        out.push_str("file://");
    }
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(char::from(b)),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn sarif_location(l: &crate::diagnostics::Label, sources: &Sources) -> serde_json::Value {
    let src = sources.get(l.span.file);
    let (line, column) = src.line_col_chars(l.span.start);
    let (end_line, end_column) = src.line_col_chars(l.span.end);
    serde_json::json!({
        "physicalLocation": {
            "artifactLocation": { "uri": path_uri(&sources.display_name(l.span.file)) },
            "region": { "startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column.max(1) },
        },
    })
}

fn sarif_result(d: &Diagnostic, sources: &Sources) -> serde_json::Value {
    let mut text = d.message.clone();
    if let Some(help) = &d.help {
        text.push_str(&format!(" (help: {help})"));
    }
    let mut result = serde_json::json!({
        "ruleId": d.code.as_str(),
        "level": if d.is_error() { "error" } else { "warning" },
        "message": { "text": text },
    });
    if let Some(p) = &d.primary {
        let mut loc = sarif_location(p, sources);
        if !p.message.is_empty() {
            loc["message"] = serde_json::json!({ "text": p.message });
        }
        result["locations"] = serde_json::json!([loc]);
    }
    if !d.secondary.is_empty() {
        let related: Vec<_> = d
            .secondary
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut loc = sarif_location(l, sources);
                loc["id"] = serde_json::json!(i + 1);
                loc["message"] =
                    serde_json::json!({ "text": if l.message.is_empty() { "related" } else { l.message.as_str() } });
                loc
            })
            .collect();
        result["relatedLocations"] = serde_json::json!(related);
    }
    result
}

fn sarif_log(results: Vec<serde_json::Value>, failures: Vec<serde_json::Value>) -> serde_json::Value {
    let mut codes: Vec<&str> = results.iter().filter_map(|r| r["ruleId"].as_str()).collect();
    codes.sort_unstable();
    codes.dedup();
    let rules: Vec<_> = codes
        .iter()
        .map(|c| {
            let text = crate::diagnostics::Code::from_name(c)
                .map_or("a permits diagnostic", crate::diagnostics::Code::meaning);
            serde_json::json!({ "id": c, "shortDescription": { "text": text } })
        })
        .collect();
    serde_json::json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "permitc",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "invocations": [{ "executionSuccessful": failures.is_empty(), "toolExecutionNotifications": failures }],
            "results": results,
        }],
    })
}

fn compile_cmd(path: &Path, output: &Path, format: Format, deny_warnings: bool) -> u8 {
    let out = match compile::compile_package(path) {
        Ok(out) => out,
        Err(e) => return io_error(&e, format),
    };
    let (errors, warnings) = count(&out);
    match format {
        Format::Human => err!("{}", render(&out.diagnostics, &out.sources, colour())),
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "path": path.display().to_string(), "errors": errors, "warnings": warnings,
                "diagnostics": out.diagnostics.iter().map(|d| diagnostic_json(d, &out.sources)).collect::<Vec<_>>(),
            }))
            .unwrap_or_default()
        ),
    }
    let table = match out.table {
        Some(t) if errors == 0 && !(deny_warnings && warnings > 0) => t,
        _ => {
            if format == Format::Human {
                errln!("{}; no table written", summary(path, &Output { table: None, ..out }));
            }
            return 1;
        }
    };
    let bytes = table.to_pretty_json();
    if output == Path::new("-") {
        out!("{bytes}");
        return 0;
    }
    match write_atomically(output, bytes.as_bytes()) {
        Ok(()) => {
            if format == Format::Human {
                errln!("wrote `{}` (table digest {})", output.display(), &table.header.table_digest);
            }
            0
        }
        Err(e) => {
            errln!("error: cannot write `{}`: {e}", output.display());
            2
        }
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, then renames it over `path`: a reader sees
/// the old file or the new one, never a partial one.
///
/// Errors: any I/O error; the temporary file is removed on failure.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
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
fn with_analysis<T>(path: &Path, format: Format, f: impl FnOnce(&Analysis<'_>) -> T) -> Result<T, u8> {
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
fn table_from(path: &Path) -> Result<crate::table::Table, u8> {
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

fn diff_cmd(old: &Path, new: &Path, format: Format, fail_on_widen: bool) -> u8 {
    let old_table = match table_from(old) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let new_table = match table_from(new) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let changes = crate::diff::diff(&old_table, &new_table);
    let widening = changes.iter().any(|c| c.direction == crate::diff::Direction::Widening);
    match format {
        Format::Human => out!("{}", crate::diff::render_human(&changes)),
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "old": old.display().to_string(), "new": new.display().to_string(),
                "widening": changes.iter().filter(|c| c.direction == crate::diff::Direction::Widening).count(),
                "changes": changes,
            }))
            .unwrap_or_default()
        ),
    }
    if fail_on_widen && widening { 1 } else { 0 }
}

fn decide(
    table: &Path,
    agent: &str,
    skill: &str,
    tool: &str,
    args: Option<&str>,
    requester: Option<&str>,
    format: Format,
) -> u8 {
    let table = match crate::table::Table::load_path(table) {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return 2;
        }
    };
    // Arguments that are not JSON are a usage error; JSON that does not fit the tool's parameters is a
    // decision (`never`, with the reason).
    let arguments = match args.map(serde_json::from_str::<serde_json::Value>) {
        None => serde_json::Value::Object(serde_json::Map::new()),
        Some(Ok(value)) => value,
        Some(Err(e)) => {
            errln!("error: the arguments are not JSON: {e}");
            return 2;
        }
    };
    let mut call = crate::runtime::Call::new(agent, skill, tool).with_arguments(arguments);
    call.requester = requester.map(str::to_string);
    let d = crate::runtime::decide_table(&table, &call);
    match format {
        Format::Json => outln!("{}", d.to_json()),
        Format::Human => outln!("{}", d.summary()),
    }
    0
}

fn fmt(paths: &[PathBuf], check: bool) -> u8 {
    let mut worst = 0u8;
    let mut changed = 0usize;
    for path in paths {
        let files = if path.is_dir() {
            match syntax::package_files(path) {
                Ok(files) => files.into_iter().map(|(_, p)| p).collect(),
                Err(e) => {
                    errln!("error: {e}");
                    worst = 2;
                    continue;
                }
            }
        } else {
            vec![path.clone()]
        };
        for file in files {
            let bytes = match std::fs::read(&file) {
                Ok(b) => b,
                Err(e) => {
                    errln!("error: cannot read `{}`: {e}", file.display());
                    worst = 2;
                    continue;
                }
            };
            let name = file.display().to_string();
            let Ok(text) = std::str::from_utf8(&bytes) else {
                errln!("error: `{name}` is not valid UTF-8; not formatted");
                worst = worst.max(1);
                continue;
            };
            match crate::fmt::format_file(text) {
                Err(diags) => {
                    let mut sources = Sources::default();
                    sources.add(crate::syntax::Source::new(name.clone(), bytes.clone()));
                    err!("{}", render(&diags, &sources, colour()));
                    errln!("`{name}` does not parse; not formatted");
                    worst = worst.max(1);
                }
                Ok(formatted) if formatted.as_bytes() == bytes.as_slice() => {}
                Ok(formatted) => {
                    changed += 1;
                    if check {
                        outln!("{name}");
                        worst = worst.max(1);
                    } else if let Err(e) = write_atomically(&file, formatted.as_bytes()) {
                        errln!("error: cannot write `{name}`: {e}");
                        worst = 2;
                    } else {
                        outln!("formatted {name}");
                    }
                }
            }
        }
    }
    if check && changed > 0 {
        errln!(
            "{} would be reformatted; run `permitc fmt` on {}",
            plural(changed, "file"),
            if changed == 1 { "it" } else { "them" }
        );
    }
    worst
}

fn test(paths: &[PathBuf], format: Format) -> u8 {
    let (mut passed, mut failed, mut worst) = (0usize, 0usize, 0u8);
    let mut json = Vec::new();
    for path in paths {
        let out = match compile::compile_package(path) {
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
                json.push(serde_json::json!({ "path": path.display().to_string(), "compiled": false }));
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
            json.push(serde_json::json!({
                "path": path.display().to_string(),
                "compiled": true,
                "tests": out.tests.iter().map(|t| serde_json::json!({
                    "name": t.name, "expectations": t.expectations, "passed": t.failures.is_empty(),
                    "failures": t.failures.iter().map(|f| serde_json::json!({
                        "triple": f.triple, "expected": f.expected, "actual": f.actual, "why": f.why,
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            }));
        }
    }
    match format {
        Format::Human => outln!("{passed} passed, {failed} failed"),
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "packages": json, "passed": passed, "failed": failed }))
                .unwrap_or_default()
        ),
    }
    worst
}

fn graph(paths: &[PathBuf], agent: Option<&str>) -> u8 {
    let mut worst = 0;
    for path in paths {
        let name = path.display().to_string();
        match with_analysis(path, Format::Human, |a| {
            if let Some(agent) = agent {
                if !a.model.agents.contains_key(agent) {
                    return Err(format!("unknown agent `{agent}` in `{name}`"));
                }
            }
            Ok(crate::graph::dot(a, &name, agent))
        }) {
            Ok(Ok(dot)) => out!("{dot}"),
            Ok(Err(msg)) => {
                errln!("error: {msg}");
                worst = worst.max(1);
            }
            Err(code) => worst = worst.max(code),
        }
    }
    worst
}

fn explain(path: &Path, agent: &str, skill: &str, tool: &str, format: Format) -> u8 {
    let result = with_analysis(path, format, |a| {
        // A misspelt name is most likely a typo, not a question: answer `never` as the runtime would, and
        // say which name is unknown, with the nearest one.
        let m = &a.model;
        let unknown = [
            ("agent", agent, m.agents.keys().copied().collect::<Vec<_>>()),
            ("skill", skill, m.skills.keys().copied().collect()),
            ("tool", tool, m.nodes.iter().filter(|n| n.is_tool()).map(|n| n.name).collect()),
        ]
        .into_iter()
        .find(|(_, name, names)| !names.contains(name))
        .map(|(what, name, names)| match crate::diagnostics::closest(name, names.iter().copied()) {
            Some(near) => format!("unknown {what} `{name}`; did you mean `{near}`?"),
            None => format!("unknown {what} `{name}`"),
        });
        (explain_text(a, agent, skill, tool, format), unknown)
    });
    match result {
        Ok((text, unknown)) => {
            out!("{text}");
            match unknown {
                Some(msg) => {
                    errln!("error: {msg}");
                    1
                }
                None => 0,
            }
        }
        Err(code) => code,
    }
}

/// A line without its `//` comment (a `//` inside a string is not a comment).
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut escaped = false;
    let bytes = line.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Why a triple is not offered, in the runtime's words (spec §3 step 1).
fn not_offered(a: &Analysis<'_>, agent: &str, skill: &str, tool: &str) -> Option<&'static str> {
    let m = &a.model;
    let Some(ag) = m.agents.get(agent) else { return Some("unknown agent") };
    let Some(sk) = m.skills.get(skill) else { return Some("unknown skill") };
    if !ag.skills.contains(&skill) {
        return Some("not one of the agent's skills");
    }
    let Some(&id) = m.node_of.get(tool).filter(|id| m.nodes[**id].is_tool()) else { return Some("unknown tool") };
    if !sk.tools.contains(&id) {
        return Some("not one of the skill's tools");
    }
    None
}

fn route_text(route: &Route, a: &Analysis<'_>, agent: &str) -> String {
    match route {
        Route::Requester => {
            let sponsor = a.model.agents.get(agent).and_then(|x| x.sponsor).unwrap_or("?");
            format!("requester (the person the work is for; the sponsor `{sponsor}` when it is for nobody)")
        }
        other => other.to_string(),
    }
}

fn explain_text(a: &Analysis<'_>, agent: &str, skill: &str, tool: &str, format: Format) -> String {
    let triple = format!("({agent}, {skill}, {tool})");
    if let Some(why) = not_offered(a, agent, skill, tool) {
        return match format {
            Format::Human => format!("{triple}: never\n  not offered: {why}\n"),
            Format::Json => format!(
                "{}\n",
                serde_json::json!({ "agent": agent, "skill": skill, "tool": tool, "level": Level::Never, "offered": false, "reason": why })
            ),
        };
    }
    let Some(d) =
        a.decisions.iter().find(|d| d.agent == agent && d.skill == skill && a.model.nodes[d.tool].name == tool)
    else {
        return format!("{triple}: never\n  not offered\n");
    };
    let line_text = |span: crate::syntax::Span| {
        let src = a.sources.get(span.file);
        let (line, col) = src.line_col(span.start);
        // The rule as written, from the start of its first line to its end, whitespace collapsed (a
        // condition written over several lines is quoted whole).
        let start = (span.start - (col - 1)) as usize;
        let first_line_end = src.text[start..].find('\n').map_or(src.text.len(), |i| start + i);
        let end = (span.end as usize).max(first_line_end).min(src.text.len());
        let raw = src.text.get(start..end).unwrap_or("");
        let raw = raw.lines().map(strip_comment).collect::<Vec<_>>().join(" ");
        let text = raw.split_whitespace().collect::<Vec<_>>().join(" ");
        (format!("{}:{}", a.sources.display_name(span.file), line), text)
    };
    // Witness paths of each effect (and of the reserved subject).
    let mut witnesses = Vec::new();
    for s in 0..effects::SLOTS {
        if !a.effects.sets[d.tool].has_slot(s) {
            continue;
        }
        let mut hops = vec![tool.to_string()];
        let mut end = String::new();
        for (at, hop) in a.effects.witness_path(d.tool, s) {
            match hop {
                Hop::Call(c, _) => hops.push(a.model.nodes[c].name.to_string()),
                Hop::Operation(i) => {
                    let op = &a.model.nodes[at].operations[i];
                    let (place, _) = line_text(op.span);
                    hops.push(op.text.clone());
                    end = place;
                }
                Hop::Claim(span) => {
                    let (place, _) = line_text(span);
                    hops.push("claim (assumed)".to_string());
                    end = place;
                }
            }
        }
        let class = effects::slot_name(s);
        let assumed = s < effects::RESERVED_SLOT && !a.effects.real[d.tool].has_slot(s);
        witnesses.push((class, hops.join(" → "), end, assumed));
    }
    // The budget the tool spends from (spec §6), with its figures.
    let budget = a.model.nodes[d.tool].spend.and_then(|sp| {
        let b = a.model.budgets.get(sp.budget)?;
        let (place, _) = line_text(b.name_span);
        Some((sp, b, place))
    });
    match format {
        Format::Json => {
            let reasons: Vec<_> = d
                .because
                .iter()
                .map(|(r, span)| {
                    let text = span.map(|s| line_text(s).1);
                    let at = span.map(|s| line_text(s).0);
                    serde_json::json!({ "layer": r.layer, "kind": r.kind, "level": r.level, "rule": r.rule, "via": r.via, "at": at, "text": text })
                })
                .collect();
            let w: Vec<_> = witnesses
                .iter()
                .map(|(c, p, at, assumed)| serde_json::json!({ "effect": c, "path": p, "at": at, "assumed": assumed }))
                .collect();
            format!(
                "{}\n",
                serde_json::to_string_pretty(&serde_json::json!({
                    "agent": agent, "skill": skill, "tool": tool, "level": d.level, "possible": d.possible, "offered": true,
                    "route": d.route, "reasons": reasons, "witnesses": w, "rows": d.rows,
                    "budget": budget.map(|(sp, b, at)| serde_json::json!({
                        "name": sp.budget, "by": sp.param, "currency": b.currency, "unit": b.unit,
                        "ceiling": b.ceiling, "alone_up_to": b.alone_up_to, "at": at,
                    })),
                }))
                .unwrap_or_default()
            )
        }
        Format::Human => {
            let shown = match d.level {
                Some(l) => l.to_string(),
                None => format!(
                    "depends on the arguments: {}",
                    d.possible.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(" or ")
                ),
            };
            let mut out = format!("{triple}: {shown}\n");
            let routed = d.possible.iter().any(|l| matches!(l, Level::Propose | Level::ProposeEveryTime));
            let strictest = d.possible.iter().max().copied().unwrap_or(Level::Never);
            out.push_str(&format!(
                "  route: {}{}\n",
                route_text(&d.route, a, agent),
                if routed { "" } else { " (unused: nothing is proposed)" }
            ));
            out.push_str("  because:\n");
            for (r, span) in &d.because {
                let layer = match r.layer {
                    Some(crate::table::Layer::Package) => "package-wide layer".to_string(),
                    Some(l) => format!("{l} layer"),
                    None => "reserved subject".to_string(),
                };
                let decisive = if d.level.is_none_or(|l| l == r.level) || r.level == strictest { "*" } else { " " };
                let inherited = match (r.kind, &r.via) {
                    (crate::table::ReasonKind::Inherited, Some(callee)) => {
                        format!(" (inherited: `{tool}` calls `{callee}`)")
                    }
                    _ => String::new(),
                };
                match span {
                    Some(s) => {
                        let (place, text) = line_text(*s);
                        out.push_str(&format!(
                            "  {decisive} {layer}: {} — {}{inherited} at {place}: `{text}`\n",
                            r.level, r.rule
                        ));
                    }
                    None => out.push_str(&format!("  {decisive} {layer}: {} — {}\n", r.level, r.rule)),
                }
            }
            if witnesses.is_empty() {
                out.push_str("  effects: none (it only computes)\n");
            } else {
                out.push_str("  effects:\n");
                for (class, path, at, assumed) in &witnesses {
                    let note = if *assumed { " (assumed: an extern tool's claim)" } else { "" };
                    out.push_str(&format!("    {class}: {path} at {at}{note}\n"));
                }
            }
            if let Some((claim, _)) = a.model.nodes[d.tool].claim {
                out.push_str(&format!("  claim: {} (levels use the claim)\n", claim.describe()));
            }
            if let Some((sp, b, at)) = &budget {
                out.push_str(&format!(
                    "  budget: spends from `{}` by `{}` ({} {}): ceiling {}, alone up to {} (declared at {at})\n",
                    sp.budget, sp.param, b.currency, b.unit, b.ceiling, b.alone_up_to
                ));
                out.push_str(&format!(
                    "    every execution reserves `{}` against the ceiling; a call over {} is at least propose, whatever the level\n",
                    sp.param, b.alone_up_to
                ));
            }
            if let Some((param, _)) = a.model.nodes[d.tool].params.iter().find(|(_, ty)| *ty == ParamType::Shell) {
                out.push_str(&format!(
                    "  shell: `{param}` is judged part by part: each command of the line as if it were the whole call, the strictest part decides, and a line that is not judgeable is never\n"
                ));
            }
            let _ = EffectClass::Reads;
            if d.level.is_some() {
                out.push_str("  (* marks the rules that decide the level)\n");
            } else {
                out.push_str(
                    "  (the strictest entry whose condition holds decides; the class level when none holds)\n",
                );
            }
            out
        }
    }
}
