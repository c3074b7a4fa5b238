//! The `permitc` command line, run as the real binary (spec §7): exit codes, `--format json`, `compile`
//! (determinism, atomic writes), `explain` on the workshop policy.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{Run, Temp, permitc};

fn root() -> &'static Path {
    crate::root()
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", run.stdout))
}

/// Every package under `policies/`, as `policies/NAME`, sorted.
fn packages() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("policies"))
        .expect("policies/")
        .map(|e| e.expect("entry"))
        .filter(|e| e.path().is_dir())
        .map(|e| format!("policies/{}", e.file_name().to_string_lossy()))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "expected at least the five packages of issue 2, found {names:?}");
    names
}

/// The 1-based number of the first line of `file` (relative to the crate root) that contains `needle`.
fn line_of(file: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(root().join(file)).expect("read policy");
    text.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("`{needle}` not in {file}")) + 1
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

// A small package with one error: the skill lists `SetPrise` (agents.permits line 12, column 24).
const PEOPLE: &str = "role Manager\nperson Noor { roles [Manager] }\ndecides_proposals [Manager]\n";
const TOOLS: &str = r#"entity Repair { note, price, revision }
tool NoteRepair "Write a note" (repair: Repair) {
    write Repair.note
}
tool SetPrice "Set the price" (repair: Repair, price: money) {
    write Repair.price
    version repair.revision
}
"#;
const AGENTS_TYPO: &str = r#"agent Estimator "You estimate repairs." {
    sponsor Noor
    skills [Estimate]
}






skill Estimate "Estimate one repair." {
    tools [NoteRepair, SetPrise]
}
"#;

fn bad_package(t: &Temp) -> PathBuf {
    t.write("pkg/people.permits", PEOPLE);
    t.write("pkg/tools.permits", TOOLS);
    t.write("pkg/agents.permits", AGENTS_TYPO);
    t.path("pkg")
}

// ---------------------------------------------------------------------------------------------------
// check

#[test]
fn check_all_policies_exits_0_with_one_summary_line_per_package() {
    let pkgs = packages();
    let run = permitc(&[&["check".to_string()][..], &pkgs[..]].concat());
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for p in &pkgs {
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("checked `{p}`: ")))
            .unwrap_or_else(|| panic!("no summary line for {p}:\n{}", run.stderr));
        let expected_end = if p == "policies/skill-grants" { ", 1 warning" } else { ", no problems" };
        assert!(line.ends_with(expected_end), "{line}");
    }
    assert!(
        run.stderr.lines().any(|l| l == "checked `policies/workshop`: 1 agent, 2 skills, 6 decisions, no problems"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("does not compile"), "{}", run.stderr);
    assert!(!run.stderr.contains('×'), "no errors expected:\n{}", run.stderr);
}

#[test]
fn check_json_describes_every_package() {
    let pkgs = packages();
    let run = permitc(&[&["check".to_string(), "--format".into(), "json".into()][..], &pkgs[..]].concat());
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc = json(&run);
    let list = doc["packages"].as_array().expect("packages array");
    assert_eq!(list.len(), pkgs.len());
    for (p, got) in pkgs.iter().zip(list) {
        assert_eq!(got["path"], Value::from(p.as_str()));
        assert_eq!(got["ok"], Value::Bool(true), "{p}: {got:#}");
        assert_eq!(got["errors"], Value::from(0), "{p}");
        let decisions = got["decisions"].as_u64().expect("decisions is a number");
        assert!(decisions > 0, "{p} compiles to no decisions");
        let diagnostics = got["diagnostics"].as_array().expect("diagnostics array");
        let expected_warnings = if p == "policies/skill-grants" { 1 } else { 0 };
        assert_eq!(got["warnings"], Value::from(expected_warnings), "{p}: {got:#}");
        assert_eq!(diagnostics.len(), expected_warnings, "{p}");
        for d in diagnostics {
            for key in ["code", "severity", "message"] {
                assert!(d[key].as_str().is_some_and(|s| !s.is_empty()), "{p}: {key} in {d:#}");
            }
            assert!(d.get("help").is_some(), "{p}: help in {d:#}");
            let labels = d["labels"].as_array().expect("labels array");
            assert!(!labels.is_empty());
            assert_eq!(labels.iter().filter(|l| l["primary"] == Value::Bool(true)).count(), 1, "{d:#}");
            for l in labels {
                assert!(l["file"].as_str().expect("file").starts_with(&format!("{p}/")), "{l:#}");
                assert!(l["line"].as_u64().expect("line") >= 1);
                assert!(l["column"].as_u64().expect("column") >= 1);
            }
        }
    }
    let workshop = list.iter().find(|x| x["path"] == "policies/workshop").expect("workshop");
    assert_eq!(workshop["decisions"], Value::from(6));
}

#[test]
fn skill_grants_has_exactly_one_skill_loosens_warning_and_fails_with_deny_warnings() {
    let run = permitc(&["check", "--format", "json", "policies/skill-grants"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let doc = json(&run);
    let pkg = &doc["packages"][0];
    assert_eq!(pkg["warnings"], Value::from(1));
    assert_eq!(pkg["errors"], Value::from(0));
    let d = &pkg["diagnostics"][0];
    assert_eq!(d["code"], "permits::levels::skill_loosens");
    assert_eq!(d["severity"], "warning");
    assert!(d["help"].as_str().is_some_and(|h| !h.is_empty()), "{d:#}");
    let primary =
        d["labels"].as_array().expect("labels").iter().find(|l| l["primary"] == Value::Bool(true)).expect("primary");
    let place = format!(
        "[{}:{}:{}]",
        primary["file"].as_str().expect("file"),
        primary["line"].as_u64().expect("line"),
        primary["column"].as_u64().expect("column")
    );

    // Human output: the same warning, at the same place, and a summary; exit 0.
    let human = permitc(&["check", "policies/skill-grants"]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.is_empty(), "human output goes to stderr: {}", human.stdout);
    assert!(human.stderr.lines().any(|l| l == "permits::levels::skill_loosens"), "{}", human.stderr);
    assert!(human.stderr.contains(&place), "expected `{place}` in:\n{}", human.stderr);
    assert!(human.stderr.contains(&format!("⚠ {}", d["message"].as_str().expect("message"))), "{}", human.stderr);
    assert!(
        human.stderr.lines().any(|l| l == "checked `policies/skill-grants`: 1 agent, 2 skills, 6 decisions, 1 warning"),
        "{}",
        human.stderr
    );

    let denied = permitc(&["check", "--deny-warnings", "policies/skill-grants"]);
    assert_eq!(denied.code, 1, "{}", denied.stderr);
    assert!(denied.stderr.contains("permits::levels::skill_loosens"));
    let denied_json = permitc(&["check", "--deny-warnings", "--format", "json", "policies/skill-grants"]);
    assert_eq!(denied_json.code, 1);
    assert_eq!(json(&denied_json)["packages"][0]["warnings"], Value::from(1));
    // The other packages are clean, so --deny-warnings does not fail them.
    assert_eq!(permitc(&["check", "--deny-warnings", "policies/workshop"]).code, 0);
}

#[test]
fn package_with_an_error_exits_1_naming_code_file_and_line() {
    let t = Temp::new("error_package");
    let pkg = bad_package(&t);
    let shown = pkg.display().to_string();

    let run = permitc(&["check".as_ref(), pkg.as_os_str()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let e = &run.stderr;
    assert!(e.lines().any(|l| l == "permits::check::unknown"), "{e}");
    assert!(e.contains("× unknown tool `SetPrise`"), "{e}");
    assert!(
        e.contains(&format!("╭─[{shown}/agents.permits:12:24]")),
        "file path with the package folder, line and column:\n{e}"
    );
    assert!(e.contains("help: did you mean `SetPrice`?"), "{e}");
    assert!(e.lines().any(|l| l == format!("`{shown}` does not compile: 1 error")), "{e}");

    let run = permitc(&["check".as_ref(), "--format".as_ref(), "json".as_ref(), pkg.as_os_str()]);
    assert_eq!(run.code, 1);
    let doc = json(&run);
    let p = &doc["packages"][0];
    assert_eq!(p["ok"], Value::Bool(false));
    assert_eq!(p["errors"], Value::from(1));
    assert_eq!(p["decisions"], Value::from(0));
    let d = &p["diagnostics"][0];
    assert_eq!(d["code"], "permits::check::unknown");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["message"], "unknown tool `SetPrise`");
    assert_eq!(d["help"], "did you mean `SetPrice`?");
    let l = &d["labels"][0];
    assert_eq!(l["file"], Value::from(format!("{shown}/agents.permits")));
    assert_eq!(l["line"], Value::from(12));
    assert_eq!(l["column"], Value::from(24));
    assert_eq!(l["primary"], Value::Bool(true));
}

#[test]
fn check_exit_code_is_the_worst_over_all_packages() {
    let t = Temp::new("worst");
    let pkg = bad_package(&t);
    let missing = t.path("missing");
    // clean + error → 1, and the clean package is still reported.
    let run = permitc(&["check".as_ref(), "policies/workshop".as_ref(), pkg.as_os_str()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("checked `policies/workshop`: "), "{}", run.stderr);
    // clean + error + missing → 2; every package is still checked.
    let run = permitc(&["check".as_ref(), "policies/workshop".as_ref(), pkg.as_os_str(), missing.as_os_str()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("checked `policies/workshop`: "), "{}", run.stderr);
    assert!(run.stderr.contains("permits::check::unknown"), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("error[permits::load::io]: cannot read `{}`", missing.display())),
        "{}",
        run.stderr
    );
}

#[test]
fn missing_path_exits_2_naming_the_path() {
    let t = Temp::new("missing");
    let missing = t.path("no-such-package");
    let m = missing.display().to_string();
    let message = format!("error[permits::load::io]: cannot read `{m}`: ");

    let run = permitc(&["check", &m]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.lines().any(|l| l.starts_with(&message)), "{}", run.stderr);

    let run = permitc(&["check", "--format", "json", &m]);
    assert_eq!(run.code, 2);
    let doc = json(&run);
    assert_eq!(doc["packages"][0]["path"], Value::from(m.as_str()));
    assert!(doc["packages"][0]["error"].as_str().expect("error").starts_with(&format!("cannot read `{m}`")), "{doc:#}");
    assert_eq!(doc["packages"][0]["code"], Value::from("permits::load::io"));

    let out = t.path("out.json");
    let run = permitc(&["compile".as_ref(), missing.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.lines().any(|l| l.starts_with(&message)), "{}", run.stderr);
    assert!(!out.exists());

    let run = permitc(&["explain", "--agent", "Estimator", "--skill", "EstimateRepair", "--tool", "SetPrice", &m]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.lines().any(|l| l.starts_with(&message)), "{}", run.stderr);
}

#[test]
fn usage_errors_exit_2() {
    let cases: &[&[&str]] = &[
        &["frobnicate", "policies/workshop"],
        &[],
        &["check"],
        &["compile", "policies/workshop"],
        &["compile", "-o", "-"],
        &["explain", "--skill", "EstimateRepair", "--tool", "SetPrice", "policies/workshop"],
        &["explain", "--agent", "Estimator", "--skill", "EstimateRepair", "--tool", "SetPrice"],
        &["check", "--format", "xml", "policies/workshop"],
        &["check", "--no-such-flag", "policies/workshop"],
    ];
    for args in cases {
        let run = permitc(args);
        assert_eq!(run.code, 2, "permitc {}: {}", args.join(" "), run.stderr);
        let told =
            if args.is_empty() { run.stderr.contains("Usage: permitc") } else { run.stderr.starts_with("error: ") };
        assert!(told, "permitc {}: {}", args.join(" "), run.stderr);
        assert!(run.stdout.is_empty(), "permitc {}: {}", args.join(" "), run.stdout);
    }
    let run = permitc(&["frobnicate"]);
    assert!(run.stderr.contains("unrecognized subcommand 'frobnicate'"), "{}", run.stderr);
    let run = permitc(&["check"]);
    assert!(run.stderr.contains("<PATHS>"), "{}", run.stderr);
}

#[test]
fn version_and_help_exit_0() {
    let run = permitc(&["--version"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout.trim_end(), format!("permitc {}", env!("CARGO_PKG_VERSION")));
    for args in [&["--help"][..], &["help"], &["check", "--help"], &["compile", "--help"], &["explain", "--help"]] {
        let run = permitc(args);
        assert_eq!(run.code, 0, "{args:?}");
        assert!(run.stdout.contains("Usage: permitc"), "{args:?}: {}", run.stdout);
    }
    let help = permitc(&["--help"]).stdout;
    for cmd in ["check", "compile", "explain"] {
        assert!(help.lines().any(|l| l.trim_start().starts_with(cmd)), "`{cmd}` missing from --help:\n{help}");
    }
}

#[test]
fn check_json_into_a_closed_pipe_does_not_panic() {
    // `permitc check --format json policies/* | head -1`: the reader goes away before permitc writes.
    let mut child = Command::new(env!("CARGO_BIN_EXE_permitc"))
        .args(["check", "--format", "json"])
        .args(packages())
        .current_dir(root())
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "permitc panicked writing to a closed pipe:\n{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}

// ---------------------------------------------------------------------------------------------------
// compile

#[test]
fn compile_workshop_twice_gives_identical_bytes_that_load() {
    let t = Temp::new("compile_twice");
    let (a, b) = (t.path("a.json"), t.path("b.json"));
    let ra = permitc(&["compile".as_ref(), "policies/workshop".as_ref(), "-o".as_ref(), a.as_os_str()]);
    let rb = permitc(&["compile".as_ref(), "policies/workshop".as_ref(), "--output".as_ref(), b.as_os_str()]);
    assert_eq!((ra.code, rb.code), (0, 0), "{}{}", ra.stderr, rb.stderr);
    let (ba, bb) = (std::fs::read(&a).expect("a"), std::fs::read(&b).expect("b"));
    assert!(!ba.is_empty());
    assert!(ba == bb, "two compiles of policies/workshop differ");
    assert!(ba.ends_with(b"\n"));
    let table = permits::table::Table::load(&ba).expect("the table loads and its digest verifies");
    assert_eq!(table.agents.keys().collect::<Vec<_>>(), ["Estimator"]);
    assert_eq!(table.skills.keys().collect::<Vec<_>>(), ["EstimateRepair", "PriceFleetRepair"]);
    assert_eq!(
        ra.stderr.trim_end(),
        format!("wrote `{}` (table digest {})", a.display(), table.header.table_digest),
        "{}",
        ra.stderr
    );
    // Source places in the table are relative to the package.
    let v: Value = serde_json::from_slice(&ba).expect("json");
    let at = &v["tools"]["SetPrice"]["effects"]["changes"]["witness"]["at"];
    assert_eq!(at["file"], "tools.permits");
    assert_eq!(at["line"], Value::from(line_of("policies/workshop/tools.permits", "write Repair.price")));
    // The atomic write leaves nothing else behind.
    assert_eq!(names_in(&t.0), ["a.json", "b.json"]);
}

#[test]
fn compile_to_stdout_writes_the_same_table() {
    let t = Temp::new("compile_stdout");
    let file = t.path("table.json");
    let run = permitc(&["compile".as_ref(), "policies/workshop".as_ref(), "-o".as_ref(), file.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = permitc(&["compile", "policies/workshop", "-o", "-"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.raw_stdout == std::fs::read(&file).expect("table"), "`-o -` differs from the file");
    permits::table::Table::load(&run.raw_stdout).expect("stdout table loads");
    assert!(!root().join("-").exists(), "`-o -` must not create a file named `-`");
}

#[test]
fn failing_compile_writes_no_table_and_leaves_an_existing_one() {
    let t = Temp::new("compile_fail");
    let pkg = bad_package(&t);
    let out_dir = t.path("out");
    std::fs::create_dir_all(&out_dir).expect("out dir");

    // No output file is created.
    let out = out_dir.join("table.json");
    let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("permits::check::unknown"), "{}", run.stderr);
    assert!(
        run.stderr.lines().any(|l| l == format!("`{}` does not compile: 1 error; no table written", pkg.display())),
        "{}",
        run.stderr
    );
    assert!(!out.exists(), "a failing compile created {}", out.display());
    assert!(names_in(&out_dir).is_empty(), "litter: {:?}", names_in(&out_dir));

    // An existing output file is left untouched.
    std::fs::write(&out, "the previous table\n").expect("write old");
    let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(run.code, 1);
    assert_eq!(std::fs::read_to_string(&out).expect("old"), "the previous table\n");
    assert_eq!(names_in(&out_dir), ["table.json"]);

    // Warnings with --deny-warnings fail the same way.
    let run = permitc(&[
        "compile".as_ref(),
        "--deny-warnings".as_ref(),
        "policies/skill-grants".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("permits::levels::skill_loosens"));
    assert_eq!(std::fs::read_to_string(&out).expect("old"), "the previous table\n");
    assert_eq!(names_in(&out_dir), ["table.json"]);

    // Nothing goes to stdout with `-o -` either.
    let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), "-".as_ref()]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.is_empty(), "{}", run.stdout);

    // A successful compile replaces the old file, and leaves no temporary file.
    let run = permitc(&["compile".as_ref(), "policies/workshop".as_ref(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    permits::table::Table::load_path(&out).expect("new table");
    assert_eq!(names_in(&out_dir), ["table.json"]);
}

#[test]
fn compile_into_a_missing_folder_exits_2_without_litter() {
    let t = Temp::new("compile_nodir");
    let out = t.path("no/such/dir/table.json");
    let run = permitc(&["compile".as_ref(), "policies/workshop".as_ref(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains(&format!("error: cannot write `{}`", out.display())), "{}", run.stderr);
    assert!(names_in(&t.0).is_empty());
}

#[test]
fn compile_does_not_depend_on_file_order_folder_name_or_location() {
    let t = Temp::new("compile_order");
    let src = root().join("policies/workshop");
    let mut files = names_in(&src);
    files.retain(|f| f.ends_with(".permits"));
    assert!(files.len() >= 3);
    // Copy 1: created in sorted order, in a folder with another name.
    for f in &files {
        let text = std::fs::read_to_string(src.join(f)).expect("read");
        t.write(&format!("one/workshop-copy/{f}"), &text);
    }
    // Copy 2: created in reverse order, deeper, under another name.
    for f in files.iter().rev() {
        let text = std::fs::read_to_string(src.join(f)).expect("read");
        t.write(&format!("two/a/b/c/renamed/{f}"), &text);
    }
    let compile = |pkg: &Path, out: &str| {
        let out = t.path(out);
        let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), out.as_os_str()]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        std::fs::read(&out).expect("table")
    };
    let original = compile(Path::new("policies/workshop"), "original.json");
    let absolute = compile(&src, "absolute.json");
    let with_slash = compile(Path::new("policies/workshop/"), "slash.json");
    let one = compile(&t.path("one/workshop-copy"), "one.json");
    let two = compile(&t.path("two/a/b/c/renamed"), "two.json");
    assert!(original == absolute, "a relative and an absolute path give different tables");
    assert!(original == with_slash, "a trailing slash changes the table");
    assert!(original == one, "a renamed copy gives a different table");
    assert!(original == two, "a copy made in another order, elsewhere, gives a different table");
}

// ---------------------------------------------------------------------------------------------------
// explain

fn explain(skill: &str, tool: &str, json_format: bool) -> Run {
    let mut args = vec!["explain", "--agent", "Estimator", "--skill", skill, "--tool", tool, "policies/workshop"];
    if json_format {
        args.extend(["--format", "json"]);
    }
    let run = permitc(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

const REQUESTER: &str = "requester (the person the work is for; the sponsor `Noor` when it is for nobody)";

#[test]
fn explain_set_price_is_propose_to_the_requester() {
    let run = explain("EstimateRepair", "SetPrice", false);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let write = line_of("policies/workshop/tools.permits", "write Repair.price");
    assert_eq!(lines[0], "(Estimator, EstimateRepair, SetPrice): propose", "{}", run.stdout);
    assert_eq!(lines[1], format!("  route: {REQUESTER}"));
    assert!(lines.contains(&"  because:"), "{}", run.stdout);
    assert!(
        lines.contains(&"  * agent layer: propose — default: changes -> propose (agent Estimator)"),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(
            &format!("    changes: SetPrice → write Repair.price at policies/workshop/tools.permits:{write}").as_str()
        ),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("never"), "{}", run.stdout);
}

#[test]
fn explain_scrap_repair_is_never_by_the_agents_list() {
    let run = explain("EstimateRepair", "ScrapRepair", false);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let never = line_of("policies/workshop/agents.permits", "never [ScrapRepair]");
    let write = line_of("policies/workshop/tools.permits", "write Repair.scrapped");
    assert_eq!(lines[0], "(Estimator, EstimateRepair, ScrapRepair): never", "{}", run.stdout);
    assert_eq!(lines[1], format!("  route: {REQUESTER} (unused: nothing is proposed)"));
    let expected = format!(
        "  * agent layer: never — never [ScrapRepair] at policies/workshop/agents.permits:{never}: `never [ScrapRepair]`"
    );
    assert!(lines.contains(&expected.as_str()), "expected `{expected}` in:\n{}", run.stdout);
    assert!(
        lines.contains(
            &format!("    changes: ScrapRepair → write Repair.scrapped at policies/workshop/tools.permits:{write}")
                .as_str()
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn explain_fleet_set_price_routes_to_noor() {
    let run = explain("PriceFleetRepair", "SetPrice", false);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let write = line_of("policies/workshop/tools.permits", "write Repair.price");
    assert_eq!(lines[0], "(Estimator, PriceFleetRepair, SetPrice): propose", "{}", run.stdout);
    assert_eq!(lines[1], "  route: person Noor");
    assert!(
        lines.contains(&"  * agent layer: propose — default: changes -> propose (agent Estimator)"),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(
            &format!("    changes: SetPrice → write Repair.price at policies/workshop/tools.permits:{write}").as_str()
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn explain_json_gives_level_route_reasons_and_witnesses() {
    let write_price = line_of("policies/workshop/tools.permits", "write Repair.price");
    let write_scrapped = line_of("policies/workshop/tools.permits", "write Repair.scrapped");
    let never = line_of("policies/workshop/agents.permits", "never [ScrapRepair]");

    let v = json(&explain("EstimateRepair", "SetPrice", true));
    assert_eq!(v["agent"], "Estimator");
    assert_eq!(v["skill"], "EstimateRepair");
    assert_eq!(v["tool"], "SetPrice");
    assert_eq!(v["offered"], Value::Bool(true));
    assert_eq!(v["level"], "propose");
    assert_eq!(v["route"], "requester");
    let reasons = v["reasons"].as_array().expect("reasons");
    assert_eq!(reasons.len(), 1, "{v:#}");
    assert_eq!(reasons[0]["rule"], "default: changes -> propose (agent Estimator)");
    assert_eq!(reasons[0]["level"], "propose");
    assert_eq!(reasons[0]["layer"], "agent");
    let w = v["witnesses"].as_array().expect("witnesses");
    assert_eq!(w.len(), 1, "{v:#}");
    assert_eq!(w[0]["effect"], "changes");
    assert_eq!(w[0]["path"], "SetPrice → write Repair.price");
    assert_eq!(w[0]["at"], Value::from(format!("policies/workshop/tools.permits:{write_price}")));
    assert_eq!(w[0]["assumed"], Value::Bool(false));

    let v = json(&explain("EstimateRepair", "ScrapRepair", true));
    assert_eq!(v["level"], "never");
    let reason = v["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .find(|r| r["level"] == "never")
        .unwrap_or_else(|| panic!("no `never` reason: {v:#}"));
    assert_eq!(reason["rule"], "never [ScrapRepair]");
    assert_eq!(reason["text"], "never [ScrapRepair]");
    // The place of the rule: file and line (the table's places are relative to the package).
    let at = reason["at"].as_str().expect("at");
    assert!(at.ends_with(&format!("agents.permits:{never}")), "{at}");
    assert_eq!(v["witnesses"][0]["path"], "ScrapRepair → write Repair.scrapped");
    assert_eq!(v["witnesses"][0]["at"], Value::from(format!("policies/workshop/tools.permits:{write_scrapped}")));

    let v = json(&explain("PriceFleetRepair", "SetPrice", true));
    assert_eq!(v["level"], "propose");
    assert_eq!(v["route"], serde_json::json!({ "person": "Noor" }));
}

#[test]
fn explain_a_triple_not_offered_is_never_with_the_reason() {
    let run = explain("PriceFleetRepair", "NoteRepair", false);
    assert_eq!(
        run.stdout,
        "(Estimator, PriceFleetRepair, NoteRepair): never\n  not offered: not one of the skill's tools\n"
    );
    let v = json(&explain("PriceFleetRepair", "NoteRepair", true));
    assert_eq!(v["level"], "never");
    assert_eq!(v["offered"], Value::Bool(false));
    assert_eq!(v["reason"], "not one of the skill's tools");

    let run = permitc(&[
        "explain",
        "--agent",
        "Estimater",
        "--skill",
        "EstimateRepair",
        "--tool",
        "SetPrice",
        "policies/workshop",
    ]);
    assert_eq!(
        run.stdout, "(Estimater, EstimateRepair, SetPrice): never\n  not offered: unknown agent\n",
        "{}",
        run.stderr
    );
    let run = permitc(&[
        "explain",
        "--format",
        "json",
        "--agent",
        "Estimater",
        "--skill",
        "EstimateRepair",
        "--tool",
        "SetPrice",
        "policies/workshop",
    ]);
    let v = json(&run);
    assert_eq!(v["offered"], Value::Bool(false));
    assert_eq!(v["reason"], "unknown agent");

    for (skill, tool, why) in
        [("NoSuchSkill", "SetPrice", "unknown skill"), ("EstimateRepair", "NoSuchTool", "unknown tool")]
    {
        let run = permitc(&["explain", "--agent", "Estimator", "--skill", skill, "--tool", tool, "policies/workshop"]);
        assert_eq!(
            run.stdout,
            format!("(Estimator, {skill}, {tool}): never\n  not offered: {why}\n"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn explain_a_package_with_errors_exits_1() {
    let t = Temp::new("explain_error");
    let pkg = bad_package(&t);
    let run = permitc(&[
        "explain".as_ref(),
        "--agent".as_ref(),
        "Estimator".as_ref(),
        "--skill".as_ref(),
        "Estimate".as_ref(),
        "--tool".as_ref(),
        "NoteRepair".as_ref(),
        pkg.as_os_str(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(run.stderr.contains("permits::check::unknown"), "{}", run.stderr);
    assert!(
        run.stderr.lines().any(|l| l.starts_with(&format!("`{}` does not compile", pkg.display()))),
        "{}",
        run.stderr
    );
}

#[test]
fn explain_shows_the_budget_a_tool_spends_from() {
    let args = ["explain", "--agent", "Restocker", "--skill", "Reorder", "--tool", "PlaceOrder", "policies/shop"];
    let run = permitc(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let budget = line_of("policies/shop/tools.permits", "budget Supplies");
    let expected = format!(
        "  budget: spends from `Supplies` by `amount` (USD cents): ceiling 2500, alone up to 0 (declared at policies/shop/tools.permits:{budget})"
    );
    assert!(run.stdout.lines().any(|l| l == expected), "{}", run.stdout);
    let json = permitc(&[&args[..], &["--format", "json"]].concat());
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(v["budget"]["name"], "Supplies");
    assert_eq!(v["budget"]["by"], "amount");
    assert_eq!((v["budget"]["ceiling"].as_u64(), v["budget"]["alone_up_to"].as_u64()), (Some(2500), Some(0)));
    // A tool that spends from nothing has no budget.
    let stock = permitc(&[
        "explain",
        "--agent",
        "Restocker",
        "--skill",
        "Reorder",
        "--tool",
        "StockLevel",
        "policies/shop",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stock.stdout).expect("JSON");
    assert!(v["budget"].is_null());
}

// ---------------------------------------------------------------------------------------------------
// decide

/// A refund desk: small refunds alone by a condition, others proposed by the default, routed to Noor.
const REFUNDS: &str = r#"entity Order { total }
role Manager
person Noor { roles [Manager] }
person Mia
agent Clerk "Refunds orders." {
    sponsor Noor
    may {
        alone [Refund when amount <= 1000]
        never [Refund when reason == "goodwill" and amount > 5000]
    }
    route Refund to person Noor
    skills [Desk]
}
skill Desk "Refund orders." {
    tools [Refund]
}
tool Refund "Refund an order" (order: Order, amount: money, reason: string) { write Order.total }
"#;

fn decide_refund(t: &Temp, table: &Path, args: &str) -> Value {
    let _ = t;
    let run = permitc(&[
        "decide".as_ref(),
        "--table".as_ref(),
        table.as_os_str(),
        "--agent".as_ref(),
        "Clerk".as_ref(),
        "--skill".as_ref(),
        "Desk".as_ref(),
        "--tool".as_ref(),
        "Refund".as_ref(),
        "--args".as_ref(),
        std::ffi::OsStr::new(args),
        "--requester".as_ref(),
        "Mia".as_ref(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    json(&run)
}

/// The rules of a decision's reasons, in order.
fn rules(d: &Value) -> Vec<String> {
    d["reasons"].as_array().expect("reasons").iter().map(|r| r["rule"].as_str().unwrap_or("").to_string()).collect()
}

/// Issue #15: `permitc decide` said the same reasons for `alone` and `propose` of one conditional entry, and
/// named a decider for an `alone` call. Now the reasons are the rules that decide these arguments, and only a
/// proposed call has a decider.
#[test]
fn decide_names_the_entry_whose_condition_held_and_no_decider_when_alone() {
    let t = Temp::new("decide-reasons");
    let pkg = t.write("refunds.permits", REFUNDS);
    let table = t.path("refunds.json");
    let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), table.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let alone = decide_refund(&t, &table, r#"{"order": "O-1", "amount": 500, "reason": "damaged"}"#);
    assert_eq!(alone["level"], "alone");
    assert_eq!(rules(&alone), ["alone [Refund when amount <= 1000]"]);
    assert!(alone["decider"].is_null(), "an alone call has no decider: {alone:#}");

    let proposed = decide_refund(&t, &table, r#"{"order": "O-1", "amount": 2500, "reason": "damaged"}"#);
    assert_eq!(proposed["level"], "propose");
    assert_eq!(rules(&proposed), ["default: changes -> propose (agent Clerk)"]);
    assert_eq!(proposed["decider"]["persons"], serde_json::json!(["Noor"]));

    let never = decide_refund(&t, &table, r#"{"order": "O-1", "amount": 9000, "reason": "goodwill"}"#);
    assert_eq!(never["level"], "never");
    assert_eq!(rules(&never), [r#"never [Refund when reason == "goodwill" and amount > 5000]"#]);
    assert!(never["decider"].is_null());
    // A shell-free decision has no `parts`.
    assert!(never.get("parts").is_none());
}

/// Issue #15: an entity id given as the number `5` was "an integer out of range".
#[test]
fn decide_says_an_entity_id_given_as_a_number_is_an_integer() {
    let t = Temp::new("decide-entity-number");
    let pkg = t.write("refunds.permits", REFUNDS);
    let table = t.path("refunds.json");
    let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), table.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let d = decide_refund(&t, &table, r#"{"order": 5, "amount": 500, "reason": "damaged"}"#);
    assert_eq!(d["level"], "never");
    assert_eq!(d["refusal"], "argument `order` of `Refund` must be the id of a `Order` (a string), found an integer");
}

/// A `shell` decision lists each part with its level, and the human summary shows them visibly.
#[test]
fn decide_lists_the_parts_of_a_command_line() {
    let t = Temp::new("decide-shell-parts");
    let table = t.path("coding-agent.json");
    let run = permitc(&["compile".as_ref(), "policies/coding-agent".as_ref(), "-o".as_ref(), table.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let args = serde_json::json!({ "command": "cargo test --all && npm install 'x\u{202e}'" }).to_string();
    let decide = |format: &str| {
        permitc(&[
            "decide",
            "--table",
            &table.to_string_lossy(),
            "--agent",
            "Coder",
            "--skill",
            "FixBug",
            "--tool",
            "RunCommand",
            "--args",
            &args,
            "--format",
            format,
        ])
    };
    let d = json(&decide("json"));
    assert_eq!(d["level"], "propose");
    assert_eq!(
        d["parts"],
        serde_json::json!([
            { "text": "cargo test --all", "level": "alone" },
            { "text": "npm install x\u{202e}", "level": "propose" },
        ])
    );
    assert_eq!(rules(&d), ["changes_alone: reaches_out -> propose"]);
    let human = decide("human");
    assert_eq!(
        human.stdout.trim_end(),
        "`Coder` / `FixBug` / `RunCommand`: propose (waits on a decision from Ada); parts: `cargo test --all` alone, `npm install x\\u{202e}` propose"
    );
}

/// `permitc keygen -o FILE` writes nothing when `FILE.pub` exists already (as when `FILE` does): the
/// public key beside another secret key is never overwritten, and no secret key is left without it.
#[test]
fn keygen_never_overwrites_an_existing_public_key() {
    let t = Temp::new("keygen-pub");
    let secret = t.path("release.key");
    let public = t.write("release.key.pub", "the old public key\n");
    let run = permitc(&["keygen", "-o", &secret.to_string_lossy()]);
    assert_eq!((run.code, run.stdout.as_str()), (2, ""), "{}", run.stderr);
    assert_eq!(run.stderr.trim_end(), format!("error: `{}` exists: a key is never overwritten", public.display()));
    assert!(!secret.exists(), "no secret key was written");
    assert_eq!(std::fs::read_to_string(&public).expect("read"), "the old public key\n");
    // Neither existing: both are written, the public key also on stdout.
    std::fs::remove_file(&public).expect("remove");
    let run = permitc(&["keygen", "-o", &secret.to_string_lossy()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&public).expect("read"), run.stdout);
    assert_eq!(std::fs::read_to_string(&secret).expect("read").trim().len(), 64);
}

/// `permitc keygen -o -` is a usage error (exit 2): a secret key is never written to stdout, and no file
/// named `-` (or `-.pub`) is written either.
#[test]
fn keygen_refuses_stdout_for_the_secret_key() {
    let t = Temp::new("keygen-stdout");
    let out = Command::new(env!("CARGO_BIN_EXE_permitc"))
        .args(["keygen", "-o", "-"])
        .current_dir(&t.0)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("permitc runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), out.stdout.as_slice()), (Some(2), &b""[..]), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "error: `-o -` would write the secret key to stdout, and a secret key is never written there: give \
         `-o FILE` (the public key goes to `FILE.pub`)"
    );
    let left: Vec<_> = std::fs::read_dir(&t.0).expect("read dir").map(|e| e.expect("entry").file_name()).collect();
    assert!(left.is_empty(), "nothing written: {left:?}");
}
