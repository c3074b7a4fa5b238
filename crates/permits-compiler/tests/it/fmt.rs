//! `permitc fmt`: every policy and every corpus file formats idempotently, keeps every comment and doc
//! line in order, and compiles to the same decisions (levels, rows, routes, `entry_digest`) and the same
//! `definition_digest`s; a few exact outputs pin the layout; a file that does not parse is refused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use permits_compiler::compile::compile_package;
use permits_compiler::fmt::format_file;
use permits_compiler::syntax::{Source, Sources, parse_sources};
use permits_table::Table;

fn format(text: &str) -> String {
    match format_file(text) {
        Ok(s) => s,
        Err(diags) => panic!("does not parse: {diags:?}"),
    }
}

/// Every ordinary comment (trimmed at the end) and doc line of a file, in source order.
fn comments_and_docs(text: &str) -> Vec<String> {
    let mut sources = Sources::default();
    sources.add(Source::new("f.permits", text.as_bytes().to_vec()));
    let loaded = parse_sources(sources);
    let file = loaded.package.files.first().expect("parses");
    let mut all: Vec<(u32, String)> =
        file.comments.iter().map(|c| (c.span.start, format!("//{}", c.text.trim_end()))).collect();
    for d in &file.declarations {
        // Doc lines come before the declaration's keyword; order them by the declaration's start and
        // then by their index, which is their order.
        for (i, line) in d.docs.iter().enumerate() {
            all.push((d.span.start + u32::try_from(i).expect("few docs"), format!("///{line}")));
        }
    }
    // Comments among doc lines: a stable sort by position keeps them where they were relative to each
    // other, but a comment between two doc lines of one declaration is ordered by real position only
    // approximately; compare the sequences of each kind separately as well below.
    all.sort_by_key(|(p, _)| *p);
    all.into_iter().map(|(_, t)| t).collect()
}

fn only(prefix: &str, v: &[String]) -> Vec<String> {
    v.iter().filter(|t| t.starts_with(prefix) && (prefix == "///" || !t.starts_with("///"))).cloned().collect()
}

fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir =
        std::env::temp_dir().join(format!("permits-fmt-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn table(path: &Path) -> Table {
    let out = compile_package(path).expect("readable");
    let errors: Vec<_> = out.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    out.table.expect("a table")
}

/// The `.permits` files of a package folder (recursively), as (relative path, text).
fn package_files(root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "permits") {
                let text = std::fs::read_to_string(&path).expect("utf-8");
                out.push((path.strip_prefix(root).expect("under root").to_path_buf(), text));
            }
        }
    }
    out.sort();
    out
}

/// Formats every file of a package (a folder, or one file), checks idempotence and comments, writes the
/// result to a temporary folder and compares the two compiled tables.
fn check_package(path: &Path) {
    let files = if path.is_dir() {
        package_files(path)
    } else {
        vec![(PathBuf::from(path.file_name().expect("a file name")), std::fs::read_to_string(path).expect("utf-8"))]
    };
    let dir = temp_dir();
    for (rel, text) in &files {
        let once = format(text);
        let twice = format(&once);
        assert_eq!(twice, once, "{}/{}: formatting is not idempotent", path.display(), rel.display());
        let (before, after) = (comments_and_docs(text), comments_and_docs(&once));
        assert_eq!(only("//", &after), only("//", &before), "{}: comments lost or reordered", rel.display());
        assert_eq!(only("///", &after), only("///", &before), "{}: doc lines lost or reordered", rel.display());
        assert_eq!(after, before, "{}: comments and doc lines interleave differently", rel.display());
        assert!(
            !once.contains(" \n") && !once.contains('\t') && !once.contains('\r'),
            "{}: trailing spaces, tabs or CR",
            rel.display()
        );
        assert!(
            once.is_empty() || once.ends_with('\n') && !once.ends_with("\n\n"),
            "{}: one final newline",
            rel.display()
        );
        let target = dir.join(rel);
        std::fs::create_dir_all(target.parent().expect("a parent")).expect("folder");
        std::fs::write(&target, &once).expect("write");
    }
    let formatted_path = if path.is_dir() { dir.clone() } else { dir.join(&files[0].0) };
    let (original, formatted) = (table(path), table(&formatted_path));
    assert_eq!(formatted.tools.keys().collect::<Vec<_>>(), original.tools.keys().collect::<Vec<_>>());
    for (name, tool) in &original.tools {
        let other = &formatted.tools[name];
        assert_eq!(other.definition_digest, tool.definition_digest, "{}: `{name}` definition_digest", path.display());
        assert_eq!(other.doc, tool.doc, "{}: `{name}` doc", path.display());
    }
    let flat = |t: &Table| {
        let mut v = Vec::new();
        for (agent, skills) in &t.entries {
            for (skill, tools) in skills {
                for (tool, e) in tools {
                    v.push((
                        format!("{agent} {skill} {tool}"),
                        e.level,
                        e.rows.clone(),
                        e.route.clone(),
                        e.reserved,
                        e.entry_digest.clone(),
                    ));
                }
            }
        }
        v
    };
    assert_eq!(flat(&formatted), flat(&original), "{}: decisions changed", path.display());
    let _ = std::fs::remove_dir_all(&dir);
}

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn every_policy_formats_idempotently_and_compiles_to_the_same_decisions() {
    let mut packages: Vec<PathBuf> = std::fs::read_dir(root().join("policies"))
        .expect("policies")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    packages.sort();
    assert!(!packages.is_empty());
    for p in packages {
        check_package(&p);
    }
}

#[test]
fn every_corpus_file_formats_idempotently_and_compiles_to_the_same_decisions() {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/corpus/ok"))
            .expect("corpus")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "permits"))
            .collect();
    files.sort();
    assert!(!files.is_empty());
    for f in files {
        check_package(&f);
    }
}

#[test]
fn the_workshop_is_already_formatted() {
    for (rel, text) in package_files(&root().join("policies/workshop")) {
        assert_eq!(format(&text), text, "policies/workshop/{}", rel.display());
    }
}

#[test]
fn a_messy_file_gets_the_canonical_layout() {
    let messy = "\u{feff}// People first.\r\nrole   Mechanic\r\nrole Manager   // the boss\r\n\r\n\r\nperson Noor{roles[Manager]}\r\nperson Mia {\r\n  roles [ Mechanic , ]\r\n}\r\nsupervises [Manager]\r\ndecides_proposals[ Manager ]\r\n/// Writes a note.\r\n///\r\n///Plainly.\r\ntool   NoteRepair \"Write a \\\"note\\\"\\u{7}\"(repair:Repair,note:string):changes{write Repair.note // the note\r\n  version repair.revision}\r\nagent A \"a\" { sponsor Noor may { alone [NoteRepair when note matches \"*ok*\" and not not (repair == \"r1\" or repair == \"r2\"), SetPrice when price <= 10000 or price >= 20000 and urgent == true, Other] never [ScrapRepair] } // end of may\r\n  skills [S] }\r\n// The end.";
    let expected = "\
// People first.
role Mechanic
role Manager // the boss

person Noor { roles [Manager] }
person Mia  { roles [Mechanic] }

supervises        [Manager]
decides_proposals [Manager]

/// Writes a note.
///
/// Plainly.
tool NoteRepair \"Write a \\\"note\\\"\\u{7}\" (repair: Repair, note: string) : changes {
    write Repair.note // the note
    version repair.revision
}

agent A \"a\" {
    sponsor Noor
    may {
        alone [
            NoteRepair when note matches \"*ok*\" and (repair == \"r1\" or repair == \"r2\"),
            SetPrice when price <= 10000 or price >= 20000 and urgent == true,
            Other,
        ]
        never [ScrapRepair]
    } // end of may
    skills [S]
}
// The end.
";
    let out = format(messy);
    assert_eq!(out, expected, "got:\n{out}");
    assert_eq!(format(&out), out);
}

#[test]
fn long_conditions_and_headers_wrap() {
    let input = "agent Coder \"c\" {\n    may {\n        alone [RunCommand when command in [\"cargo build\", \"cargo test\", \"cargo fmt --check\", \"cargo clippy\"] or command matches \"cargo test *\"]\n        never [RunCommand when command matches \"*rm -rf*\" or command matches \"*curl *\" or command matches \"*sudo *\" and urgent == true]\n    }\n}\nextern tool PlaceOrder \"Order stock from the supplier\" (sku: string, quantity: int, amount: money) : spends + reaches_out { subject sku }\ntool AVeryLongToolNameThatGoesOnAndOn \"A label that is long enough to push the parameters over\" (first: string, second: string) { read X }\n";
    let expected = "\
agent Coder \"c\" {
    may {
        alone [
            RunCommand when command in [\"cargo build\", \"cargo test\", \"cargo fmt --check\", \"cargo clippy\"]
                or command matches \"cargo test *\",
        ]
        never [
            RunCommand when command matches \"*rm -rf*\"
                or command matches \"*curl *\"
                or command matches \"*sudo *\" and urgent == true,
        ]
    }
}

extern tool PlaceOrder \"Order stock from the supplier\" (sku: string, quantity: int, amount: money)
    : spends + reaches_out
{
    subject sku
}

tool AVeryLongToolNameThatGoesOnAndOn \"A label that is long enough to push the parameters over\" (
    first: string,
    second: string,
) {
    read X
}
";
    let out = format(input);
    assert_eq!(out, expected, "got:\n{out}");
    assert_eq!(format(&out), out);
}

#[test]
fn comments_in_odd_places_are_kept_and_stay_put() {
    let input = "tool T // after the name\n \"t\" (a: string, // first\n b: int) {\n    read X\n    // last in the body\n}\nagent A {\n    acts_as [ // helpers\n        H,\n        // and\n        K ]\n    route T // to whom\n        to requester\n    // before the brace\n}\nqueue Q { } // an empty queue\n\n// trailing\n// comments\n";
    let out = format(input);
    let expected = "\
// after the name
tool T \"t\" (
    a: string, // first
    b: int,
) {
    read X
    // last in the body
}

agent A {
    acts_as [ // helpers
        H,
        // and
        K,
    ]
    // to whom
    route T to requester
    // before the brace
}

queue Q {} // an empty queue

// trailing
// comments
";
    assert_eq!(out, expected, "got:\n{out}");
    assert_eq!(format(&out), out);
}

/// Formats `input`, checks the exact layout and that formatting the output changes nothing.
fn assert_formats_to(input: &str, expected: &str) {
    let once = format(input);
    assert_eq!(once, expected, "got:\n{once}");
    let twice = format(&once);
    assert_eq!(twice, once, "not idempotent, second pass:\n{twice}");
}

#[test]
fn comments_after_an_extern_tools_claim_stay_before_the_next_declaration() {
    // A one-class claim's span runs over the trivia after it (pest looked there for `+ class`): when the
    // parameters are written one per line, the comments after the claim went into the parameter list.
    let input = "\
extern tool WebSearch \"Search the web for the question that the user asked\" (query: string, limit?: number, filter?: json) : reaches_out
// a comment after the claim
// and another
tool Research \"Research a question\" (question: string) {
    call WebSearch
}
";
    let expected = "\
extern tool WebSearch \"Search the web for the question that the user asked\" (
    query: string,
    limit?: number,
    filter?: json,
) : reaches_out

// a comment after the claim
// and another
tool Research \"Research a question\" (question: string) {
    call WebSearch
}
";
    assert_formats_to(input, expected);
}

#[test]
fn comments_after_claims_pins_parameter_lists_and_rules_stay_put() {
    let pin = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let input = format!(
        "\
extern tool Fetch \"Fetch a page from the web, following redirects, and return its text\" (url: string, depth?: number) : reaches_out // trailing the claim
// after the trailing one

extern tool Pinned \"Search the web for the question that the user asked\" (query: string, limit?: number) : reaches_out pinned \"{pin}\"
// after the pin
extern tool Short \"Search\" (query: string) : reads
// after a short claim
tool Research \"Research a question\" (question: string) // after the parameter list
{{
    call Fetch
    // between rules
    call Pinned
    call Short // trailing a rule
}}
// after the body
extern tool Last \"The last one, with a label long enough to wrap its parameters\" (query: string, limit?: number) : sends
// at the end of the file
"
    );
    let expected = format!(
        "\
extern tool Fetch \"Fetch a page from the web, following redirects, and return its text\" (
    url: string,
    depth?: number,
) : reaches_out // trailing the claim

// after the trailing one

extern tool Pinned \"Search the web for the question that the user asked\" (
    query: string,
    limit?: number,
) : reaches_out pinned \"{pin}\"

// after the pin
extern tool Short \"Search\" (query: string) : reads

// after a short claim
// after the parameter list
tool Research \"Research a question\" (question: string) {{
    call Fetch
    // between rules
    call Pinned
    call Short // trailing a rule
}}

// after the body
extern tool Last \"The last one, with a label long enough to wrap its parameters\" (
    query: string,
    limit?: number,
) : sends
// at the end of the file
"
    );
    assert_formats_to(&input, &expected);
}

#[test]
fn comments_between_the_parameters_the_claim_and_the_pin_stay_between_them() {
    // A comment after a wrapped header's `)`, or between the claim and `pinned`, went into the parameter
    // list (the closing line `) : sends pinned "…"` took every comment before its end). A comment there
    // now puts the claim on a line of its own, and the pin too when the comment is before it.
    let pin = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let input = format!(
        "\
extern tool WebSearch \"Search the web for the question that the user asked of us today\" (query: string, limit?: number)
// between the parenthesis and the claim
: sends
    // between the claim and the pin
    pinned \"{pin}\"
// after the pin
extern tool Short \"Search\" (query: string) // after the parenthesis
    : sends // after the claim
    pinned \"{pin}\"
tool Note \"Write a note\" (note: string)
// before the claim
: changes {{ write Repair.note }}
fn notify(to: string)
    // before a function's claim
    : sends {{ send \"mail\" }}
"
    );
    let expected = format!(
        "\
extern tool WebSearch \"Search the web for the question that the user asked of us today\" (
    query: string,
    limit?: number,
)
    // between the parenthesis and the claim
    : sends
    // between the claim and the pin
    pinned \"{pin}\"

// after the pin
extern tool Short \"Search\" (query: string) // after the parenthesis
    : sends // after the claim
    pinned \"{pin}\"

tool Note \"Write a note\" (note: string)
    // before the claim
    : changes
{{
    write Repair.note
}}

fn notify(to: string)
    // before a function's claim
    : sends
{{
    send \"mail\"
}}
"
    );
    assert_formats_to(&input, &expected);
}

#[test]
fn a_file_with_a_syntax_error_is_refused_unchanged() {
    let text = "role A\ntool T \"x\" () { wirte Repair }\n";
    let diags = format_file(text).expect_err("does not parse");
    assert!(diags.iter().any(|d| d.is_error()));
    assert_eq!(diags[0].message, "unexpected `wirte`");
    // A lexical error (a bad escape) also refuses: the decoded value would be incomplete.
    assert!(format_file("agent A \"\\q\" {}\n").is_err());
}

/// A comment between every two tokens: `// cN` at the end of the line (`Place::Trailing`) or on a line
/// of its own (`Place::OwnLine`). Strings, comments and doc lines are copied as they are.
#[derive(Clone, Copy)]
enum Place {
    Trailing,
    OwnLine,
}

fn comment_everywhere(text: &str, place: Place) -> String {
    let b = text.as_bytes();
    let mut out = String::new();
    let (mut i, mut n, mut after_comment) = (0, 0, false);
    while i < b.len() {
        let start = i;
        if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            after_comment = false;
        } else if text[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            after_comment = true;
        } else if b[i].is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            n += 1;
            match place {
                Place::Trailing if !after_comment => out.push_str(&format!(" // c{n}\n")),
                _ => out.push_str(&format!("\n// c{n}\n")),
            }
            after_comment = false;
            continue;
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            after_comment = false;
        }
        out.push_str(&text[start..i.min(b.len())]);
    }
    out
}

#[test]
fn a_comment_between_every_two_tokens_is_kept_and_changes_nothing() {
    let mut packages: Vec<PathBuf> = std::fs::read_dir(root().join("policies"))
        .expect("policies")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    packages.sort();
    // Each corpus file is a package of its own: copy it into a folder.
    let mut corpus: Vec<PathBuf> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/corpus/ok"))
            .expect("corpus")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "permits"))
            .collect();
    corpus.sort();
    for f in corpus {
        let dir = temp_dir();
        std::fs::copy(&f, dir.join(f.file_name().expect("a name"))).expect("copy");
        packages.push(dir);
    }
    for place in [Place::Trailing, Place::OwnLine] {
        for pkg in &packages {
            let dir = temp_dir();
            for (rel, text) in package_files(pkg) {
                let target = dir.join(&rel);
                std::fs::create_dir_all(target.parent().expect("a parent")).expect("folder");
                let commented = comment_everywhere(&text, place);
                assert!(comments_and_docs(&commented).len() > comments_and_docs(&text).len() + 2, "{}", rel.display());
                std::fs::write(&target, commented).expect("write");
            }
            check_package(&dir);
            // The commented package decides as the original does, so the formatted one does too.
            let (original, commented) = (table(pkg), table(&dir));
            assert_eq!(
                commented
                    .entries
                    .values()
                    .flat_map(|s| s.values().flat_map(|t| t.values().map(|e| e.entry_digest.clone())))
                    .collect::<Vec<_>>(),
                original
                    .entries
                    .values()
                    .flat_map(|s| s.values().flat_map(|t| t.values().map(|e| e.entry_digest.clone())))
                    .collect::<Vec<_>>(),
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[test]
fn the_other_declarations_have_their_layout_too() {
    let input = "proposal_lifetime 7d\ngrant_lifetime 24h\nqueue Desk{decided_by[A,B]}\nqueue LongerDesk { }\nentity E{a,b}\nentity Longer{ }\nfn  notify ( to : string ) : sends { send \"mail\\tbox\" reach api }\ntool D \"d\" () { call any [notify, Other,] call dynamic spend Budget by amount delete E.a create E subject to }\nskill S { route D to queue Desk route D to requester may {} tools [D] }\ntest \"a \\\"quoted\\\" name\" { expect A.S.D is never expect A.S.D(amount: -5, to: \"x\", ok: true,) is alone }\n";
    let expected = "\
proposal_lifetime 7d
grant_lifetime    24h

queue Desk       { decided_by [A, B] }
queue LongerDesk {}

entity E      { a, b }
entity Longer {}

fn notify(to: string) : sends {
    send \"mail\\tbox\"
    reach api
}

tool D \"d\" () {
    call any [notify, Other]
    call dynamic
    spend Budget by amount
    delete E.a
    create E
    subject to
}

skill S {
    route D to queue Desk
    route D to requester
    may {}
    tools [D]
}

test \"a \\\"quoted\\\" name\" {
    expect A.S.D is never
    expect A.S.D(amount: -5, to: \"x\", ok: true) is alone
}
";
    let out = format(input);
    assert_eq!(out, expected, "got:\n{out}");
    assert_eq!(format(&out), out);
}

#[test]
fn a_large_file_formats_in_linear_time() {
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!("role R{i} // role {i}\nperson P{i} {{ roles [R{i}] }}\n"));
    }
    let started = std::time::Instant::now();
    let out = format(&text);
    // Roles and persons alternate, so each is its own group with a blank line between.
    assert_eq!(out.lines().count(), 40_000 + 39_999);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
}
