//! Adversarial inputs: each gives a clear error or a correct result, in bounded time and memory.
//!
//! Already held elsewhere (not repeated here): invalid UTF-8, NUL bytes, a symlink loop, BOM + CRLF
//! (`tests/bad_input.rs`), a deep call chain and a large cycle (`tests/deep.rs`), 100 000 nested
//! parentheses (`tests/conditions.rs`). Here: a very large policy file (5 MB, or 50 MB with
//! `PERMITS_FULL=1`), a 1 000 000-character identifier, confusable non-ASCII identifiers, one name
//! defined in two files, and a compiled table with every byte flipped in turn.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::level_with;
use permits::compile::compile_loaded;
use permits::syntax::{Source, Sources, parse_sources};
use permits::table::{Level, LoadError, Table};
use serde_json::Value;

use crate::support::Temp;

fn full() -> bool {
    std::env::var("PERMITS_FULL").is_ok_and(|v| v == "1")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// The child's peak resident memory in KiB, as last seen in `/proc` (0 where there is none).
    peak_kib: u64,
}

/// Runs the real `permitc` with a time limit, watching its peak memory (Linux `/proc`), and checks it
/// did not panic.
fn permitc(args: &[&std::ffi::OsStr], limit: Duration) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_permitc"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("permitc runs");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut v);
        v
    });
    let status_file = PathBuf::from(format!("/proc/{}/status", child.id()));
    let start = Instant::now();
    let mut peak_kib = 0;
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(&status_file) {
            if let Some(kib) = s
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
            {
                peak_kib = peak_kib.max(kib);
            }
        }
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("permitc did not finish in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&t_out.join().expect("stdout thread")).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().expect("stderr thread")).into_owned(),
        elapsed: start.elapsed(),
        peak_kib,
    };
    assert!(!run.stderr.contains("panicked"), "permitc panicked: {}", run.stderr);
    run
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

/// Compiles sources held in memory: the table, or the diagnostics' codes and the rendered text.
fn compile(files: &[(&str, &[u8])]) -> Result<Table, (Vec<String>, String)> {
    let mut sources = Sources::default();
    for (name, bytes) in files {
        sources.add(Source::new(*name, bytes.to_vec()));
    }
    let out = compile_loaded(parse_sources(sources));
    match out.table {
        Some(t) if !out.has_errors() => Ok(t),
        _ => Err((
            out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code.to_string()).collect(),
            permits::diagnostics::render_plain(&out.diagnostics, &out.sources),
        )),
    }
}

/// The triple's level for every argument set (spec §7, an expectation without arguments): `never` when it
/// is not offered; the test fails when the level depends on the arguments.
fn level(t: &Table, agent: &str, skill: &str, tool: &str) -> Level {
    match t.possible_levels(agent, skill, tool) {
        Err(_) => Level::Never,
        Ok(levels) => {
            assert_eq!(levels.len(), 1, "({agent}, {skill}, {tool}) depends on the arguments: {levels:?}");
            levels.into_iter().next().unwrap_or(Level::Never)
        }
    }
}

const PEOPLE: &str = "entity E { f }\nperson P0\n";

/// A policy file of `size` bytes: `tools` tools (even ones read, odd ones write), one agent with one
/// skill offering all of them, each tool with a doc comment, and the rest filled with ordinary comment
/// lines. Returns the text.
fn big_policy(size: usize, tools: usize) -> String {
    let mut s = String::with_capacity(size + 4096);
    s.push_str(PEOPLE);
    s.push_str("agent A \"Works with many tools.\" {\n    sponsor P0\n    skills [S]\n}\nskill S \"Everything.\" {\n    tools [");
    for i in 0..tools {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&format!("T{i}"));
    }
    s.push_str("]\n}\n");
    for i in 0..tools {
        let op = if i % 2 == 0 { "read E" } else { "write E.f" };
        s.push_str(&format!("/// Tool {i}.\ntool T{i} \"Tool {i}\" (n: int) {{ {op} }}\n"));
    }
    let line = format!("// {}\n", "padding that a reviewer scrolls past ".repeat(3));
    while s.len() + line.len() <= size {
        s.push_str(&line);
    }
    s
}

/// A 5 MB policy file (50 MB with `PERMITS_FULL=1`) compiles correctly through the real binary, within
/// a time limit and with peak memory a bounded multiple of the file's size.
#[test]
fn a_very_large_policy_file_compiles_correctly_in_bounded_time_and_memory() {
    let (size, tools) = if full() { (50 << 20, 20_000) } else { (5 << 20, 2_000) };
    let t = Temp::new("large");
    let text = big_policy(size, tools);
    assert!(text.len() > size - 200 && text.len() <= size, "{}", text.len());
    let pkg = t.write("big.permits", &text);
    let out = t.0.join("table.json");
    let run = permitc(
        &[os("compile"), pkg.as_os_str(), os("-o"), out.as_os_str()],
        Duration::from_secs(if full() { 600 } else { 120 }),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let table = Table::load_path(&out).expect("the table loads");
    assert_eq!(table.entries["A"]["S"].len(), tools);
    for i in [0, 1, tools / 2, tools - 2, tools - 1] {
        let expected = if i % 2 == 0 { Level::Alone } else { Level::Propose };
        assert_eq!(level(&table, "A", "S", &format!("T{i}")), expected, "T{i}");
    }
    // Memory: the file is held once as bytes and once as text, plus the tree; well under 40 times it.
    if run.peak_kib > 0 {
        assert!(run.peak_kib * 1024 < 40 * size as u64 + (64 << 20), "peak {} KiB for {} bytes", run.peak_kib, size);
    }
    eprintln!("{} bytes compiled in {:?}, peak {} KiB", text.len(), run.elapsed, run.peak_kib);
}

/// A 1 000 000-character identifier is an ordinary name: the package compiles, the table holds the
/// tool under its whole name at the right level, in bounded time.
#[test]
fn a_one_million_character_identifier_compiles_correctly() {
    let name = format!("T{}", "x".repeat(999_999));
    assert_eq!(name.len(), 1_000_000);
    let text = format!(
        "{PEOPLE}agent A \"a\" {{ sponsor P0 skills [S] may {{ never [{name}] }} }}\nskill S \"s\" {{ tools [{name}, Short] }}\ntool {name} \"Long\" () {{ read E }}\ntool Short \"Short\" () {{ call {name} }}\n"
    );
    let start = Instant::now();
    let table = compile(&[("long.permits", text.as_bytes())]).map_err(|(_, r)| r).expect("compiles");
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
    assert!(table.tools.contains_key(&name));
    assert_eq!(level(&table, "A", "S", &name), Level::Never);
    // The wrapper inherits the `never` of the long name.
    assert_eq!(level(&table, "A", "S", "Short"), Level::Never);
    // One character less is another (unknown) name.
    assert_eq!(level(&table, "A", "S", &name[..999_999]), Level::Never);
    assert_eq!(level_with(&table, "A", "S", &name[..999_999], &serde_json::Map::new()).1, "unknown tool");
}

/// Confusable non-ASCII identifiers (a Cyrillic `а` in a tool's name, a Greek `ο` in a reference, a
/// fullwidth letter) are refused with `permits::syntax::non_ascii` at the name, never compiled and never
/// reported as a mere unknown name.
#[test]
fn confusable_non_ascii_identifiers_are_a_clear_error() {
    let base = |tool_def: &str, listed: &str| {
        format!(
            "{PEOPLE}agent A \"a\" {{ sponsor P0 skills [S] }}\nskill S \"s\" {{ tools [{listed}] }}\ntool {tool_def} \"t\" () {{ read E }}\n"
        )
    };
    // The same text with ASCII names compiles: the refusals below are about the letters only.
    assert!(compile(&[("ok.permits", base("Read", "Read").as_bytes())]).is_ok());
    for (def, listed, bad) in [
        ("Re\u{430}d", "Re\u{430}d", "Re\u{430}d"), // Cyrillic а (U+0430) in both places
        ("Read", "Rea\u{3bf}d", "Rea\u{3bf}d"),     // Greek ο (U+03BF) where it is listed
        ("\u{ff32}ead", "Read", "\u{ff32}ead"),     // fullwidth Ｒ (U+FF32) where it is defined
    ] {
        let text = base(def, listed);
        let (codes, rendered) = compile(&[("confusable.permits", text.as_bytes())]).expect_err("refused");
        assert!(codes.iter().any(|c| c == "permits::syntax::non_ascii"), "{codes:?}\n{rendered}");
        // A confusable reference to an ASCII definition is also an unknown name (with "did you mean" the
        // real one); nothing else is reported.
        assert!(
            codes.iter().all(|c| c == "permits::syntax::non_ascii" || c == "permits::check::unknown"),
            "{codes:?}\n{rendered}"
        );
        assert!(rendered.contains(&format!("the name `{bad}` has a non-ASCII character")), "{rendered}");
        assert!(rendered.contains("confusable.permits:"), "{rendered}");
    }
}

/// The same name defined in two files is `permits::check::duplicate`, naming both places (file and
/// line), through the real binary.
#[test]
fn the_same_name_in_two_files_is_an_error_naming_both_places() {
    let t = Temp::new("duplicate");
    t.write("a_tools.permits", format!("{PEOPLE}\n\ntool Fetch \"Fetch\" () {{ read E }}\n"));
    t.write("nested/b_more.permits", "agent A \"a\" { sponsor P0 skills [S] }\nskill S \"s\" { tools [Fetch] }\ntool Fetch \"Fetch again\" () { send email }\n");
    let run = permitc(&[os("check"), t.0.as_os_str()], Duration::from_secs(60));
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(all.contains("permits::check::duplicate"), "{all}");
    assert!(all.contains("`Fetch` is defined twice"), "{all}");
    assert!(all.contains("a_tools.permits:5:6"), "{all}");
    assert!(all.contains("nested/b_more.permits:3:6"), "{all}");
    let json = permitc(&[os("check"), os("--format"), os("json"), t.0.as_os_str()], Duration::from_secs(60));
    let v: Value = serde_json::from_str(&json.stdout).expect("json");
    let text = v.to_string();
    assert!(text.contains("a_tools.permits") && text.contains("b_more.permits"), "{text}");
}

/// A small policy, compiled as `permitc compile` writes it.
fn small_table_bytes() -> Vec<u8> {
    let text = format!(
        "{PEOPLE}role Boss\nperson P1 {{ roles [Boss] }}\nsupervises [Boss]\n\
         agent A \"a\" {{ sponsor P0 may {{ never [Mail when n > 3] }} skills [S] }}\n\
         skill S \"s\" {{ tools [Look, Mail] route Mail to person P1 }}\n\
         tool Look \"Look\" (n: int) {{ read E }}\ntool Mail \"Mail\" (n: int) {{ send email }}\n"
    );
    compile(&[("small.permits", text.as_bytes())]).map_err(|(_, r)| r).expect("compiles").to_pretty_json().into_bytes()
}

/// The byte ranges of the header's informational fields (`compiler`, `source_digest`): their values,
/// quotes excluded. The runtime cannot check them (it has no sources), so a flip there may load.
fn informational_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let text = std::str::from_utf8(bytes).expect("utf8");
    ["\"compiler\": \"", "\"source_digest\": \""]
        .iter()
        .map(|key| {
            let start = text.find(key).expect("key") + key.len();
            let end = start + text[start..].find('"').expect("end quote");
            start..end
        })
        .collect()
}

fn without_header(t: &Table) -> Value {
    let mut v = serde_json::to_value(t).expect("value");
    if let Value::Object(m) = &mut v {
        m.remove("header");
    }
    v
}

/// Every single-bit flip (masks 0x01 and 0x20 in CI; all eight bits with `PERMITS_FULL=1`, on a larger
/// table) of every byte of a compiled table is refused (malformed JSON, unknown field, unknown format or
/// digest mismatch), except flips inside the header's informational fields, which then load and change
/// no decision.
#[test]
fn every_flipped_byte_of_a_table_is_refused_unless_informational() {
    let bytes = if full() {
        let t = permits::compile::compile_path(&crate::root().join("policies/workshop")).expect("workshop compiles");
        t.to_pretty_json().into_bytes()
    } else {
        small_table_bytes()
    };
    let original = Table::load(&bytes).expect("the table loads");
    let masks: &[u8] = if full() { &[1, 2, 4, 8, 16, 32, 64, 128] } else { &[0x01, 0x20] };
    let informational = informational_ranges(&bytes);
    let start = Instant::now();
    let (mut refused, mut accepted) = (0usize, 0usize);
    let mut kinds = std::collections::BTreeMap::new();
    for i in 0..bytes.len() {
        for mask in masks {
            let mut flipped = bytes.clone();
            flipped[i] ^= mask;
            match Table::load(&flipped) {
                Err(e) => {
                    refused += 1;
                    let kind = match e {
                        LoadError::Malformed(_) => "malformed",
                        LoadError::UnknownFormat { .. } => "format",
                        LoadError::DigestMismatch { .. } => "digest",
                        LoadError::Io { .. } => "io",
                    };
                    *kinds.entry(kind).or_insert(0) += 1;
                }
                Ok(t) => {
                    accepted += 1;
                    assert!(
                        informational.iter().any(|r| r.contains(&i)),
                        "a flip of byte {i} (mask {mask:#04x}) outside the informational fields loaded: {:?}",
                        String::from_utf8_lossy(&flipped[i.saturating_sub(30)..(i + 30).min(flipped.len())])
                    );
                    assert_eq!(without_header(&t), without_header(&original));
                    assert_eq!(t.header.table_digest, original.header.table_digest);
                    assert_eq!(t.header.format, original.header.format);
                }
            }
        }
    }
    // Each kind of refusal really happens, and the informational fields really are flippable.
    assert!(kinds.get("malformed").is_some_and(|n| *n > 0), "{kinds:?}");
    assert!(kinds.get("digest").is_some_and(|n| *n > 0), "{kinds:?}");
    assert!(kinds.get("format").is_some_and(|n| *n > 0), "{kinds:?}");
    assert!(accepted > 0);
    assert_eq!(refused + accepted, bytes.len() * masks.len());
    eprintln!(
        "{} bytes × {} masks: {refused} refused {kinds:?}, {accepted} informational, in {:?}",
        bytes.len(),
        masks.len(),
        start.elapsed()
    );
}
