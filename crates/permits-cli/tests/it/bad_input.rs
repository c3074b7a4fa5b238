//! Bad input to the real `permitc` binary: each gives a clear diagnostic with the right code and exit
//! code, never a panic (spec §1 loading rules, §7 exit codes).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Run, Temp, permitc};

fn check(pkg: &Path) -> Run {
    permitc(&["check".as_ref(), pkg.as_os_str()])
}

/// `check --format json` on one package: the exit code and that package's JSON object.
fn check_json(pkg: &Path) -> (i32, Value) {
    let run = permitc(&["check".as_ref(), "--format".as_ref(), "json".as_ref(), pkg.as_os_str()]);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", run.stdout));
    (run.code, doc["packages"][0].clone())
}

fn codes(pkg: &Value) -> Vec<String> {
    pkg["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| d["code"].as_str().expect("code").to_string())
        .collect()
}

fn compile_bytes(pkg: &Path, out: &Path) -> Vec<u8> {
    let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::fs::read(out).expect("table")
}

// A small, clean package in three files; the agents refer to names in the other two.
const PEOPLE: &str = "role Manager\nperson Noor { roles [Manager] }\ndecides_proposals [Manager]\n";
const TOOLS: &str = r#"entity Repair { note, price, revision }

/// Writes the mechanic-facing note.
tool NoteRepair "Write a note" (repair: Repair, note: string) {
    write Repair.note
}

tool SetPrice "Set the price" (repair: Repair, price: money) {
    write Repair.price
    version repair.revision
}
"#;
const AGENTS: &str = r#"agent Estimator "You estimate repairs." {
    sponsor Noor
    may { alone [NoteRepair] }
    skills [Estimate]
}

skill Estimate "Estimate one repair." {
    tools [NoteRepair, SetPrice]
    route SetPrice to person Noor
}
"#;

fn good_package(t: &Temp, rel: &str) -> PathBuf {
    t.write(&format!("{rel}/people.permits"), PEOPLE);
    t.write(&format!("{rel}/tools.permits"), TOOLS);
    t.write(&format!("{rel}/agents.permits"), AGENTS);
    t.path(rel)
}

#[test]
fn the_small_package_is_clean() {
    let t = Temp::new("clean");
    let pkg = good_package(&t, "pkg");
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 0, "{p:#}");
    assert_eq!(p["errors"], Value::from(0));
    assert_eq!(p["warnings"], Value::from(0), "{p:#}");
    assert_eq!(p["decisions"], Value::from(2));
}

#[test]
fn empty_folder_is_load_empty() {
    let t = Temp::new("empty");
    let pkg = t.mkdir("nothing-here");
    let run = check(&pkg);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.lines().any(|l| l == "permits::load::empty"), "{}", run.stderr);
    assert!(run.stderr.contains(&format!("× no `.permits` files in `{}`", pkg.display())), "{}", run.stderr);
    assert!(run.stderr.contains("help: a package is a folder of `.permits` files"), "{}", run.stderr);
    assert!(
        run.stderr.lines().any(|l| l == format!("`{}` does not compile: 1 error", pkg.display())),
        "{}",
        run.stderr
    );
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 1);
    assert_eq!(codes(&p), ["permits::load::empty"]);
    assert_eq!(p["diagnostics"][0]["severity"], "error");
    // compile writes nothing.
    let out = t.path("table.json");
    let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("permits::load::empty"));
    assert!(!out.exists());
}

#[test]
fn folder_without_permits_files_is_load_empty() {
    let t = Temp::new("no_permits");
    t.write("pkg/README.md", "# notes\n");
    t.write("pkg/policy.permit", PEOPLE);
    t.write("pkg/policy.permits.bak", PEOPLE);
    t.write("pkg/policy.PERMITS.txt", PEOPLE);
    t.write("pkg/sub/notes.txt", "tool {{{\n");
    t.write("pkg/.hidden.permits", PEOPLE);
    let pkg = t.path("pkg");
    let run = check(&pkg);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains(&format!("× no `.permits` files in `{}`", pkg.display())), "{}", run.stderr);
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 1);
    assert_eq!(codes(&p), ["permits::load::empty"]);
}

#[test]
fn file_that_is_not_utf8_is_load_utf8_naming_the_file() {
    let t = Temp::new("utf8");
    let pkg = good_package(&t, "pkg");
    // Latin-1 in a comment of the tools file, which the agents depend on.
    let mut bytes = b"// caf\xe9 prices\n".to_vec();
    bytes.extend_from_slice(TOOLS.as_bytes());
    t.write("pkg/tools.permits", bytes);
    let run = check(&pkg);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.lines().any(|l| l == "permits::load::utf8"), "{}", run.stderr);
    // The message names the file with its package folder, so several packages' files are told apart.
    assert!(
        run.stderr.contains(&format!("× `{}/tools.permits` is not valid UTF-8 (byte 6)", pkg.display())),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("help: save the file as UTF-8"), "{}", run.stderr);
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 1);
    // One error: no cascade of unknown names from the files that use the bad file's tools.
    assert_eq!(codes(&p), ["permits::load::utf8"], "{p:#}");
    assert!(p["diagnostics"][0]["message"].as_str().expect("message").contains("tools.permits"));

    // A one-file package.
    let one = t.write("single/bad.permits", b"role \xff\n");
    let run = check(&one);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("single/bad.permits` is not valid UTF-8"), "{}", run.stderr);
}

#[test]
fn file_with_a_nul_byte_is_syntax_nul_at_its_place() {
    let t = Temp::new("nul");
    let pkg = good_package(&t, "pkg");
    t.write("pkg/people.permits", format!("{PEOPLE}role Mech\0anic\n"));
    let run = check(&pkg);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.lines().any(|l| l == "permits::syntax::nul"), "{}", run.stderr);
    assert!(run.stderr.contains("× a NUL byte in a source file"), "{}", run.stderr);
    assert!(run.stderr.contains(&format!("╭─[{}/people.permits:4:10]", pkg.display())), "{}", run.stderr);
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 1);
    assert_eq!(codes(&p), ["permits::syntax::nul"], "{p:#}");
    let l = &p["diagnostics"][0]["labels"][0];
    assert_eq!(l["file"], Value::from(format!("{}/people.permits", pkg.display())));
    assert_eq!((l["line"].as_u64(), l["column"].as_u64()), (Some(4), Some(10)));
}

#[test]
fn missing_path_exits_2_naming_it() {
    let t = Temp::new("missing");
    let missing = t.path("not/there");
    let run = check(&missing);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with(&format!("error[permits::load::io]: cannot read `{}`: ", missing.display()))),
        "{}",
        run.stderr
    );
    let (code, p) = check_json(&missing);
    assert_eq!(code, 2);
    assert!(p["error"].as_str().expect("error").contains(&missing.display().to_string()), "{p:#}");
}

#[test]
fn syntax_error_in_one_of_several_files_reports_only_that_file() {
    let t = Temp::new("syntax");
    let pkg = good_package(&t, "pkg");
    // Line 5 of tools.permits: a stray `]` after `write Repair.note`.
    t.write("pkg/tools.permits", TOOLS.replace("write Repair.note", "write Repair.note ]"));
    let run = check(&pkg);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.lines().any(|l| l == "permits::syntax::parse"), "{}", run.stderr);
    assert!(run.stderr.contains(&format!("╭─[{}/tools.permits:5:", pkg.display())), "{}", run.stderr);
    assert!(!run.stderr.contains("permits::check::unknown"), "cascade of unknown names:\n{}", run.stderr);
    assert!(
        run.stderr.lines().any(|l| l == format!("`{}` does not compile: 1 error", pkg.display())),
        "{}",
        run.stderr
    );
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 1);
    assert_eq!(codes(&p), ["permits::syntax::parse"], "{p:#}");
    let l = &p["diagnostics"][0]["labels"][0];
    assert_eq!(l["file"], Value::from(format!("{}/tools.permits", pkg.display())));
    assert_eq!(l["line"], Value::from(5));

    // The same in the file that uses the others' names.
    let pkg2 = good_package(&t, "pkg2");
    t.write("pkg2/agents.permits", AGENTS.replace("skills [Estimate]", "skills [Estimate"));
    let (code, p) = check_json(&pkg2);
    assert_eq!(code, 1);
    assert_eq!(codes(&p), ["permits::syntax::parse"], "{p:#}");
    assert_eq!(p["diagnostics"][0]["labels"][0]["file"], Value::from(format!("{}/agents.permits", pkg2.display())));

    // Two bad files: both are reported (parsing does not stop at the first bad file), nothing else.
    let pkg3 = good_package(&t, "pkg3");
    t.write("pkg3/tools.permits", TOOLS.replace("write Repair.note", "write Repair.note ]"));
    t.write("pkg3/people.permits", PEOPLE.replace("roles [Manager]", "roles [Manager,,]"));
    let (code, p) = check_json(&pkg3);
    assert_eq!(code, 1);
    assert_eq!(codes(&p), ["permits::syntax::parse", "permits::syntax::parse"], "{p:#}");
    let files: Vec<&str> = p["diagnostics"]
        .as_array()
        .expect("d")
        .iter()
        .map(|d| d["labels"][0]["file"].as_str().expect("file"))
        .collect();
    assert_eq!(
        files,
        [format!("{}/people.permits", pkg3.display()), format!("{}/tools.permits", pkg3.display())],
        "in sorted file order"
    );
}

#[test]
fn bom_and_crlf_compile_to_the_same_decisions() {
    let t = Temp::new("bom_crlf");
    let lf = good_package(&t, "lf");
    for (name, text) in [("people.permits", PEOPLE), ("tools.permits", TOOLS), ("agents.permits", AGENTS)] {
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend_from_slice(text.replace('\n', "\r\n").as_bytes());
        t.write(&format!("crlf/{name}"), bytes);
    }
    let crlf = t.path("crlf");
    let (code, p) = check_json(&crlf);
    assert_eq!(code, 0, "{p:#}");
    assert_eq!(p["warnings"], Value::from(0));
    let a = compile_bytes(&lf, &t.path("lf.json"));
    let b = compile_bytes(&crlf, &t.path("crlf.json"));
    let ta = permits::table::Table::load(&a).expect("lf table");
    let tb = permits::table::Table::load(&b).expect("crlf table");
    assert_ne!(ta.header.source_digest, tb.header.source_digest, "the sources' bytes differ");
    assert_eq!(ta.entries, tb.entries, "BOM + CRLF changed the decisions");
    // Docs, lines and digests carry no `\r` either: everything but the header is the same.
    assert_eq!(ta.tools, tb.tools);
    assert_eq!(ta.header.table_digest, tb.header.table_digest);
}

#[test]
fn symlink_loop_terminates_and_reads_each_file_once() {
    let t = Temp::new("symlink_loop");
    t.write("pkg/people.permits", PEOPLE);
    t.write("pkg/agents.permits", AGENTS);
    t.write("pkg/sub/tools.permits", TOOLS);
    std::os::unix::fs::symlink("..", t.path("pkg/sub/up")).expect("symlink");
    std::os::unix::fs::symlink("../sub", t.path("pkg/sub/again")).expect("symlink");
    std::os::unix::fs::symlink(".", t.path("pkg/sub/here")).expect("symlink");
    let pkg = t.path("pkg");
    // Any file read twice would define its names twice (permits::check::duplicate).
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 0, "{p:#}");
    assert_eq!(codes(&p), Vec::<String>::new());
    assert_eq!(p["decisions"], Value::from(2));
    let table = permits::table::Table::load(&compile_bytes(&pkg, &t.path("table.json"))).expect("table");
    let v = serde_json::to_value(&table.tools["SetPrice"]).expect("json");
    assert_eq!(v["effects"]["changes"]["witness"]["at"]["file"], "sub/tools.permits");
}

#[test]
fn folder_symlinked_under_two_names_is_read_under_one_name_whatever_the_directory_order() {
    // The same folder reachable as `realN/` and through the symlink `linkN/`: it is read once (else
    // duplicate definitions), and which name the table records must not depend on the order the file
    // system lists the entries (spec §1: nothing depends on the file system's order). With twelve
    // packages the directory order differs between them; the rule that picks the name must not.
    let t = Temp::new("symlink_alias");
    let mut chosen = Vec::new();
    for i in 0..12 {
        let pkg = t.path(&format!("p{i}"));
        t.write(&format!("p{i}/people.permits"), PEOPLE);
        t.write(&format!("p{i}/agents.permits"), AGENTS);
        t.write(&format!("p{i}/real{i}/tools.permits"), TOOLS);
        std::os::unix::fs::symlink(format!("real{i}"), pkg.join(format!("link{i}"))).expect("symlink");
        let table = permits::table::Table::load(&compile_bytes(&pkg, &t.path(&format!("p{i}.json")))).expect("table");
        let v = serde_json::to_value(&table.tools["SetPrice"]).expect("json");
        let file = v["effects"]["changes"]["witness"]["at"]["file"].as_str().expect("file").to_string();
        let kind = if file == format!("real{i}/tools.permits") {
            "real"
        } else if file == format!("link{i}/tools.permits") {
            "link"
        } else {
            panic!("unexpected source name {file}")
        };
        chosen.push(kind);
    }
    assert!(chosen.iter().all(|k| *k == chosen[0]), "the name depends on the directory order: {chosen:?}");
}

#[test]
fn hidden_folders_and_files_are_ignored() {
    let t = Temp::new("hidden");
    let pkg = good_package(&t, "pkg");
    t.write("pkg/.git/broken.permits", b"tool {{{ \0 \xff");
    t.write("pkg/.git/objects/x.permits", "tool {{{");
    t.write("pkg/.draft.permits", PEOPLE); // would define everything twice
    t.write("pkg/sub/.old/tools.permits", TOOLS);
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 0, "{p:#}");
    assert_eq!(codes(&p), Vec::<String>::new());
    assert_eq!(p["decisions"], Value::from(2));
    let a = compile_bytes(&pkg, &t.path("a.json"));
    let clean = good_package(&t, "clean");
    let b = compile_bytes(&clean, &t.path("b.json"));
    assert!(a == b, "hidden entries changed the table");
}

#[test]
fn a_package_given_as_a_hidden_folder_is_still_read() {
    // Hidden entries are skipped inside a package; the package path itself is what the user asked for.
    let t = Temp::new("hidden_root");
    let pkg = good_package(&t, ".policies");
    let (code, p) = check_json(&pkg);
    assert_eq!(code, 0, "{p:#}");
    assert_eq!(p["decisions"], Value::from(2));
}
