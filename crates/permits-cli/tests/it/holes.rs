//! The holes of issue #14 that need the compiler or the real `permitc` (the others are in
//! `crates/permits-runtime/tests/runtime/holes.rs`), and the check that the runtime's compiled fixture is current.

use std::path::PathBuf;
use std::process::Command;

type R = Result<(), Box<dyn std::error::Error>>;

fn fixtures() -> PathBuf {
    crate::root().join("crates/permits-runtime/tests/fixtures")
}

/// Runs `permitc` with `args`; (exit code, stdout, stderr).
fn permitc(args: &[&str]) -> Result<(i32, String, String), Box<dyn std::error::Error>> {
    let out = Command::new(env!("CARGO_BIN_EXE_permitc")).args(args).env("NO_COLOR", "1").output()?;
    Ok((out.status.code().unwrap_or(-1), String::from_utf8(out.stdout)?, String::from_utf8(out.stderr)?))
}

#[test]
fn the_runtime_holes_fixture_is_current() -> R {
    let package = fixtures().join("holes");
    let (code, table, stderr) = permitc(&["compile", &package.to_string_lossy(), "-o", "-"])?;
    assert_eq!(code, 0, "{stderr}");
    let kept = std::fs::read_to_string(fixtures().join("holes.table.json"))?;
    assert!(
        kept == table,
        "crates/permits-runtime/tests/fixtures/holes.table.json is out of date: run `permitc compile crates/permits-runtime/tests/fixtures/holes -o crates/permits-runtime/tests/fixtures/holes.table.json`"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 1: a requester runs a routed triple unreviewed through a standing rule (`policies/coding-agent`).

mod coding_agent {
    use permits::runtime::{
        AdmitAll, ApproveMode, Call, NewRule, ProposalRequest, Refusal, Runtime, RuntimeError, Scope, Status,
        VersionQuery, Versions, WorkFor,
    };
    use permits::table::Level;
    use serde_json::json;

    use super::R;

    /// The branch's head is always `h1`.
    struct Heads;

    impl Versions for Heads {
        fn covered_version(&self, _: VersionQuery<'_>) -> Option<String> {
            Some("h1".into())
        }
    }

    fn runtime() -> Result<Runtime, Box<dyn std::error::Error>> {
        let table = permits::compile::compile_path(&crate::root().join("policies/coding-agent"))?;
        Ok(Runtime::new(table, AdmitAll).with_versions(Heads))
    }

    fn push(person: &str) -> Call {
        Call::new("Coder", "FixBug", "GitPush").with_arguments(json!({"branch": "fix-42"})).for_person(person)
    }

    fn refusal<T>(r: Result<T, RuntimeError>) -> Option<Refusal> {
        r.err().and_then(|e| e.refusal())
    }

    #[test]
    fn hole_1_a_requester_cannot_make_a_routed_triple_run_alone_for_themselves() -> R {
        let rt = runtime()?;
        let p = rt.propose(&ProposalRequest::new(push("Ben"), "bug-42", "the fix for #42"))?;
        // Routed to role Maintainer, which Ben holds: the other maintainer decides, not Ben.
        assert_eq!(p.decider.persons, ["Chloe"]);
        assert_eq!(refusal(rt.approve(&p.id, "Ben", &p.fingerprint, ApproveMode::Once)), Some(Refusal::NotDecider));
        // Nor may Ben make it run alone for himself with a standing rule.
        let bens = NewRule {
            agent: "Coder".into(),
            tool: "GitPush".into(),
            skill: Some("FixBug".into()),
            work_for: WorkFor::Person("Ben".into()),
            by: "Ben".into(),
            scope: Scope::AnyArguments,
            expires_at: None,
            mode: None,
            via: Vec::new(),
        };
        let err = rt.allow_alone(&bens).err().ok_or("Ben made a rule on a triple routed to his own role")?;
        assert_eq!(err.refusal(), Some(Refusal::Rule));
        assert!(err.to_string().contains("routes `GitPush` to role `Maintainer`"), "{err}");
        assert!(rt.rules()?.is_empty());
        assert_eq!(rt.decide(&push("Ben"))?.level, Level::Propose, "Ben's next push is still proposed");
        // "Always like this" makes the rule for the proposal's requester: Chloe may decide Ben's push, but a
        // rule for Ben's work is a rule for someone else, which only a supervisor makes; nothing changes.
        let err = rt.approve(&p.id, "Chloe", &p.fingerprint, ApproveMode::AlwaysLikeThis).err().ok_or("approved")?;
        assert_eq!(err.refusal(), Some(Refusal::Rule), "{err}");
        assert_eq!((rt.proposal(&p.id)?.status, rt.rules()?.len()), (Status::Waiting, 0));
        // Chloe approves once; Ada, who supervises, may make the rule.
        assert_eq!(rt.approve(&p.id, "Chloe", &p.fingerprint, ApproveMode::Once)?.status, Status::Granted);
        let adas = rt.allow_alone(&NewRule { by: "Ada".into(), ..bens })?;
        assert_eq!(adas.work_for, WorkFor::Person("Ben".into()));
        assert_eq!(rt.decide(&push("Ben"))?.level, Level::Alone);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------------------
// Hole 5: `permitc audit verify` checks a store and an export.

/// What a permitc built without the feature `postgres` says of a PostgreSQL ledger: the way out, exit 2.
#[cfg(not(feature = "postgres"))]
const NO_POSTGRES: &str = "permits::audit::no_postgres × this permitc was built without PostgreSQL help: build it \
                           with `cargo build --release -p permits-cli --features postgres`, or verify an export \
                           (`Runtime::export_audit`)";

/// A PostgreSQL ledger needs the feature `postgres` (`audit_postgres.rs` checks one with it): without, the
/// way out is named, exit 2.
#[cfg(not(feature = "postgres"))]
#[test]
fn permitc_audit_verify_of_a_postgres_url_without_the_feature_says_how_to_build_it() -> R {
    for url in ["postgres://permits@127.0.0.1:1/ledger", "postgresql://permits:hunter2@db.internal/ledger"] {
        let (code, stdout, stderr) = permitc(&["audit", "verify", url])?;
        assert_eq!((code, stdout.as_str()), (2, ""), "{url}");
        assert_eq!(crate::support::diagnostic_words(&stderr), NO_POSTGRES, "{url}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{stderr}");
    }
    Ok(())
}

/// libpq's key-value connection string is a PostgreSQL ledger too (`permits_runtime::is_postgres_target`),
/// never a file path: without the feature, the same way out, exit 2, the password not shown.
#[cfg(not(feature = "postgres"))]
#[test]
fn permitc_audit_verify_of_a_key_value_connection_string_without_the_feature_says_how_to_build_it() -> R {
    for conninfo in [
        "host=/tmp dbname=x user=y",
        "dbname=permits",
        "  user = permits host=/tmp password=hunter2",
        "host=db.internal dbname=permits sslmode=require sslrootcert=/etc/ca.pem",
    ] {
        let (code, stdout, stderr) = permitc(&["audit", "verify", conninfo])?;
        assert_eq!((code, stdout.as_str()), (2, ""), "{conninfo}");
        assert_eq!(crate::support::diagnostic_words(&stderr), NO_POSTGRES, "{conninfo}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{stderr}");
    }
    Ok(())
}

/// The ways `permitc audit verify` cannot read what it is given are miette diagnostics, exit 2: a file that
/// is not there, one that is neither an SQLite store nor an export, and a `--head` that is not `SEQ:HASH`.
#[test]
fn permitc_audit_verify_that_cannot_read_is_a_diagnostic_and_exit_2() -> R {
    let t = crate::support::Temp::new("audit-unreadable");
    let missing = t.path("missing.db");
    let (code, stdout, stderr) = permitc(&["audit", "verify", &missing.to_string_lossy()])?;
    assert_eq!((code, stdout.as_str()), (2, ""));
    let words = crate::support::diagnostic_words(&stderr);
    let start = format!("permits::audit::unreadable × cannot read `{}`: ", missing.display());
    assert!(words.starts_with(&start), "{stderr}");
    assert!(
        words.ends_with(
            "help: name an SQLite store, a JSON-lines export of its chain (`Runtime::export_audit`) or a \
             PostgreSQL ledger (`postgres://…` or `host=… dbname=…`)"
        ),
        "{stderr}"
    );
    let binary = t.write("binary.db", [0xffu8, 0xfe, 0x00, 0x01]);
    let (code, stdout, stderr) = permitc(&["audit", "verify", &binary.to_string_lossy()])?;
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        crate::support::diagnostic_words(&stderr),
        format!(
            "permits::audit::unreadable × `{}`: it is neither an SQLite store nor a JSON-lines export help: name an \
             SQLite store, a JSON-lines export of its chain (`Runtime::export_audit`) or a PostgreSQL ledger \
             (`postgres://…` or `host=… dbname=…`)",
            binary.display()
        )
    );
    let (code, stdout, stderr) = permitc(&["audit", "verify", &binary.to_string_lossy(), "--head", "12"])?;
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        crate::support::diagnostic_words(&stderr),
        "permits::usage::head × `--head 12` is not `SEQ:HASH` help: give the head as `ok:` printed it (or \
         `Runtime::audit_head` reports it): its place from 1 and its 64-digit hash, `--head 12:3fa9…`"
    );
    Ok(())
}

/// The help of `permits::audit::broken`: what to do about a chain that does not verify.
pub(crate) const BROKEN_HELP: &str = "help: the store was changed outside permits from that event on: compare it \
                                      with an earlier export (`Runtime::export_audit`) or a backup, and find who \
                                      can write the store";

/// The help of `permits::audit::broken` for a chain that ends before the head kept earlier.
pub(crate) const CUT_HELP: &str = "help: events were deleted from the end of the chain since that head was kept: \
                                   restore them from a backup or an export (`Runtime::export_audit`), and find who \
                                   can write the store";

#[test]
fn hole_5_permitc_audit_verify_checks_a_store_and_its_export() -> R {
    use permits::runtime::{AdmitAll, ApproveMode, Call, ProposalRequest, RunOutcome, Runtime, SqliteStore};
    use permits::table::Table;
    use serde_json::json;
    let dir = std::env::temp_dir().join(format!("permits-audit-verify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("ledger.db");
    let table = Table::load_path(&fixtures().join("holes.table.json"))?;
    let rt = Runtime::new(table, AdmitAll).with_store(SqliteStore::open(&db)?);
    let call = Call::new("Clerkbot", "ClearStock", "MarkDown").with_arguments(json!({"sku": "mint", "percent": 20}));
    let p = rt.propose(&ProposalRequest::new(call.for_person("Sam"), "clear-1", "slow seller"))?;
    rt.approve_and_run(&p.id, "Sam", &p.fingerprint, ApproveMode::Once, |_| RunOutcome::Done(json!("ok")))?;
    let head = rt.audit_head()?.ok_or("no head")?;
    let export = dir.join("audit.jsonl");
    let mut out = Vec::new();
    rt.export_audit(&mut out)?;
    std::fs::write(&export, &out)?;
    let head_arg = format!("{}:{}", head.seq, head.hash);
    for file in [&db, &export] {
        let (code, stdout, stderr) = permitc(&["audit", "verify", &file.to_string_lossy(), "--head", &head_arg])?;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.starts_with("ok: "), "{stdout}");
        assert!(stdout.contains(&format!("{} events, head {head_arg}", head.seq)), "{stdout}");
    }
    // An edited export, and a truncated one checked against the head, fail.
    let text = String::from_utf8(out)?;
    std::fs::write(&export, text.replacen("\"Sam\"", "\"Max\"", 1))?;
    let (code, stdout, stderr) = permitc(&["audit", "verify", &export.to_string_lossy()])?;
    assert_eq!((code, stdout.as_str()), (1, ""));
    let words = crate::support::diagnostic_words(&stderr);
    let broken = format!("permits::audit::broken × `{}`: ", export.display());
    assert!(words.starts_with(&format!("{broken}event ")), "{stderr}");
    assert!(
        words.contains(" was changed after it was written: its content does not match its hash help: "),
        "{stderr}"
    );
    assert!(words.ends_with(BROKEN_HELP), "{stderr}");
    let first_lines: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&export, first_lines)?;
    let (code, _, stderr) = permitc(&["audit", "verify", &export.to_string_lossy(), "--head", &head_arg])?;
    assert_eq!(code, 1);
    let words = crate::support::diagnostic_words(&stderr);
    assert_eq!(
        words,
        format!(
            "{broken}the chain ends at event 2, before the kept head (event {}): events were taken off its end {CUT_HELP}",
            head.seq
        )
    );
    // The store grown since the head was kept: it still reaches that head, and verifies.
    let call = Call::new("Clerkbot", "ClearStock", "MarkDown").with_arguments(json!({"sku": "vanilla", "percent": 10}));
    rt.propose(&ProposalRequest::new(call.for_person("Sam"), "clear-2", "another slow seller"))?;
    assert!(rt.audit_head()?.ok_or("no head")?.seq > head.seq);
    let (code, stdout, stderr) = permitc(&["audit", "verify", &db.to_string_lossy(), "--head", &head_arg])?;
    assert_eq!(code, 0, "a chain grown past the kept head verifies: {stderr}");
    assert!(stdout.starts_with("ok: "), "{stdout}");
    // A head of the right place but another hash: rewritten. A hash that is not 64 hex digits: usage, exit 2.
    let other = format!("{}:{}", head.seq, "0".repeat(64));
    let (code, _, stderr) = permitc(&["audit", "verify", &db.to_string_lossy(), "--head", &other])?;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        crate::support::diagnostic_words(&stderr).contains(&format!(
            "event {} has hash {}, not the kept head's {}: the chain was rewritten at or before it",
            head.seq,
            head.hash,
            "0".repeat(64)
        )),
        "{stderr}"
    );
    let (code, _, stderr) =
        permitc(&["audit", "verify", &db.to_string_lossy(), "--head", &format!("{}:xyz", head.seq)])?;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("permits::usage::head"), "{stderr}");
    drop(rt);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Hole 7: signed tables through `permitc`.

#[test]
fn hole_7_permitc_signs_tables_and_decide_trusts_only_its_keys() -> R {
    let dir = std::env::temp_dir().join(format!("permits-signing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let package = fixtures().join("holes").to_string_lossy().into_owned();
    // Two key pairs: the release key, and one the runtime does not trust.
    let (code, public, stderr) = permitc(&["keygen", "-o", &path("release.key")])?;
    assert_eq!(code, 0, "{stderr}");
    let public = public.trim().to_string();
    assert_eq!(std::fs::read_to_string(dir.join("release.key.pub"))?.trim(), public);
    assert_eq!(permitc(&["keygen", "-o", &path("release.key")])?.0, 2, "a key is never overwritten");
    assert_eq!(permitc(&["keygen", "-o", &path("other.key")])?.0, 0);
    // A serial of 0 is a usage error of `--serial` (not of the key file), and nothing is written.
    let (code, _, stderr) =
        permitc(&["compile", &package, "-o", &path("zero.json"), "--sign", &path("release.key"), "--serial", "0"])?;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--serial"), "{stderr}");
    assert!(!stderr.contains("release.key"), "the key file is not at fault: {stderr}");
    assert!(!dir.join("zero.json").exists() && !dir.join("zero.json.sig").exists());
    // A signed compile writes the same table bytes, and a signature beside them.
    let (code, _, stderr) =
        permitc(&["compile", &package, "-o", &path("table.json"), "--sign", &path("release.key"), "--serial", "7"])?;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("(serial 7, key "), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("table.json"))?,
        std::fs::read_to_string(fixtures().join("holes.table.json"))?
    );
    let sig: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("table.json.sig"))?)?;
    assert_eq!((sig["serial"].as_u64(), sig["key"].as_str()), (Some(7), Some(public.as_str())));
    let decide = |trust: &str, table: &str| {
        permitc(&[
            "decide",
            "--table",
            table,
            "--agent",
            "Clerkbot",
            "--skill",
            "Reorder",
            "--tool",
            "StockLevel",
            "--args",
            r#"{"sku": "mint"}"#,
            "--trust",
            trust,
        ])
    };
    let (code, out, stderr) = decide(&public, &path("table.json"))?;
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("\"level\": \"alone\""), "{out}");
    assert_eq!(decide(&path("release.key.pub"), &path("table.json"))?.0, 0, "a .pub file is a key too");
    // Signed by a key it does not trust, unsigned, or a signature for another table: nothing is decided.
    let (code, _, stderr) = decide(&path("other.key.pub"), &path("table.json"))?;
    assert_eq!(code, 2);
    assert!(stderr.contains("which this runtime does not trust"), "{stderr}");
    std::fs::copy(dir.join("table.json"), dir.join("unsigned.json"))?;
    let (code, _, stderr) = decide(&public, &path("unsigned.json"))?;
    assert_eq!(code, 2);
    assert!(stderr.contains("is not signed"), "{stderr}");
    let mut forged = sig.clone();
    forged["serial"] = serde_json::json!(8);
    std::fs::write(dir.join("table.json.sig"), forged.to_string())?;
    let (code, _, stderr) = decide(&public, &path("table.json"))?;
    assert_eq!(code, 2);
    assert!(stderr.contains("does not verify"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
