//! `permitc audit verify postgres://…` (feature `postgres`, issue #22) against the real PostgreSQL server
//! `PERMITS_TEST_POSTGRES` names (`.ci/postgres start` starts one): a ledger of a database of this test's
//! own verifies, to the head the runtime reports; a row of its `audit` table edited through SQL, and the
//! same chain checked against a later head, fail with exit 1; a database with no ledger and a server that is
//! not there are exit 2, the URL's password shown as `***`. Without
//! the variable the test fails, saying how to give it.

use permits_runtime::table::Table;
use permits_runtime::{
    AdmitAll, ApproveMode, Call, PostgresStore, PostgresTarget, ProposalRequest, RunOutcome, Runtime,
};
use serde_json::json;

use crate::holes::{BROKEN_HELP, CUT_HELP};
use crate::support::diagnostic_words;

/// The help of `permits::audit::unreadable` for a PostgreSQL ledger.
const POSTGRES_HELP: &str = "help: check the connection string (`sslmode`, `sslrootcert`), that the server is up, and \
                             that it names the database the hosts use";

type R = Result<(), Box<dyn std::error::Error>>;

fn permitc(args: &[&str]) -> Result<(i32, String, String), Box<dyn std::error::Error>> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_permitc")).args(args).env("NO_COLOR", "1").output()?;
    Ok((out.status.code().unwrap_or(-1), String::from_utf8(out.stdout)?, String::from_utf8(out.stderr)?))
}

/// `url` (the server's, naming any database) naming the database `name` instead.
fn with_database(url: &str, name: &str) -> Result<String, String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let at = base.find("://").map(|i| i + 3).ok_or("PERMITS_TEST_POSTGRES is not a postgres:// URL")?;
    let server = match base[at..].find('/') {
        Some(slash) => &base[..at + slash],
        None => base,
    };
    Ok(format!("{server}/{name}{query}"))
}

/// `postgres://user[:password]@host:port/dbname` as libpq's key-value form (the query's options ignored:
/// the test server's URL has none).
fn key_value(url: &str) -> Result<String, String> {
    let rest = url.split_once("://").map(|(_, r)| r).ok_or("not a URL")?;
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    let (user, rest) = rest.rsplit_once('@').ok_or("no user")?;
    let (user, password) = user.split_once(':').map_or((user, None), |(u, p)| (u, Some(p)));
    let (server, dbname) = rest.split_once('/').ok_or("no database")?;
    let (host, port) = server.rsplit_once(':').map_or((server, "5432"), |(h, p)| (h, p));
    let password = password.map(|p| format!(" password={p}")).unwrap_or_default();
    Ok(format!("host={host} port={port} user={user}{password} dbname={dbname}"))
}

#[test]
fn permitc_audit_verify_checks_a_postgres_ledger_and_finds_an_edited_row() -> R {
    let server = std::env::var("PERMITS_TEST_POSTGRES").map_err(|_| {
        "this test needs a PostgreSQL server: set PERMITS_TEST_POSTGRES to a URL whose user may create databases, \
         e.g. `eval \"$(.ci/postgres start)\"` at the repository's root"
    })?;
    let name = format!("permits_cli_audit_{}", std::process::id());
    let empty = format!("{name}_empty");
    let mut admin = PostgresTarget::parse(&server)?.connect()?;
    for db in [&name, &empty] {
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db}"))?;
        admin.batch_execute(&format!("CREATE DATABASE {db}"))?;
    }
    let url = with_database(&server, &name)?;

    // A host's ledger: a markdown proposed, approved and run.
    let table = Table::load_path(&crate::root().join("crates/permits-runtime/tests/fixtures/holes.table.json"))?;
    let rt = Runtime::new(table, AdmitAll).with_store(PostgresStore::connect(&url)?);
    let call = Call::new("Clerkbot", "ClearStock", "MarkDown").with_arguments(json!({"sku": "mint", "percent": 20}));
    let p = rt.propose(&ProposalRequest::new(call.for_person("Sam"), "clear-1", "slow seller"))?;
    rt.approve_and_run(&p.id, "Sam", &p.fingerprint, ApproveMode::Once, |_| RunOutcome::Done(json!("ok")))?;
    let head = rt.audit_head()?.ok_or("no head")?;
    let head_arg = format!("{}:{}", head.seq, head.hash);
    let chain = rt.audit_chain()?;
    let events = chain.len();
    assert!(events >= 3, "a proposal, its approval and its run: {events} events");

    // It verifies, to the runtime's head.
    let (code, stdout, stderr) = permitc(&["audit", "verify", &url, "--head", &head_arg])?;
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(stdout, format!("ok: `{url}`: {events} events, head {head_arg}\n"));

    // A row edited through SQL: the event no longer matches its hash.
    let mut db = PostgresTarget::parse(&url)?.connect()?;
    let changed = db.execute("UPDATE audit SET event = replace(event, '\"Sam\"', '\"Max\"') WHERE seq = 2", &[])?;
    assert_eq!(changed, 1);
    let (code, stdout, stderr) = permitc(&["audit", "verify", &url])?;
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        diagnostic_words(&stderr),
        format!(
            "permits::audit::broken × `{url}`: event 2 was changed after it was written: its content does not match \
             its hash {BROKEN_HELP}"
        )
    );

    // The last row deleted: the chain still links, but not to the head it had.
    db.batch_execute("UPDATE audit SET event = replace(event, '\"Max\"', '\"Sam\"') WHERE seq = 2")?;
    let (code, _, _) = permitc(&["audit", "verify", &url, "--head", &head_arg])?;
    assert_eq!(code, 0, "the row put back verifies again");
    db.execute("DELETE FROM audit WHERE seq = $1", &[&i64::try_from(head.seq)?])?;
    let (code, stdout, stderr) = permitc(&["audit", "verify", &url, "--head", &head_arg])?;
    assert_eq!((code, stdout.as_str()), (1, ""));
    let last = chain.get(events - 2).ok_or("no event before the head")?;
    assert_eq!(
        diagnostic_words(&stderr),
        format!(
            "permits::audit::broken × `{url}`: the chain ends at event {}, before the kept head (event {}): events \
             were taken off its end {CUT_HELP}",
            last.seq, head.seq
        )
    );

    // A database with no ledger, and a server that is not there: exit 2.
    let no_ledger = with_database(&server, &empty)?;
    let (code, stdout, stderr) = permitc(&["audit", "verify", &no_ledger])?;
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        diagnostic_words(&stderr),
        format!(
            "permits::audit::unreadable × `{no_ledger}`: the database holds no permits ledger (it has no \
             `permits_schema` table): name the database the hosts use {POSTGRES_HELP}"
        )
    );

    // A server that is not there: exit 2, and the password is not shown.
    let (code, stdout, stderr) = permitc(&["audit", "verify", "postgres://permits:hunter2@127.0.0.1:1/ledger"])?;
    assert_eq!((code, stdout.as_str()), (2, ""));
    let words = diagnostic_words(&stderr);
    assert!(
        words.starts_with("permits::audit::unreadable × `postgres://permits:***@127.0.0.1:1/ledger`: "),
        "{stderr}"
    );
    assert!(words.ends_with(POSTGRES_HELP), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");

    // The key-value form is a PostgreSQL ledger too, not a file: it verifies as its URL does, and a server
    // that is not there is exit 2 with the password not shown.
    let conninfo = key_value(&url)?;
    let (code, stdout, stderr) = permitc(&["audit", "verify", &conninfo])?;
    assert_eq!((code, stderr.as_str()), (0, ""));
    let shown = PostgresTarget::redact(&conninfo);
    assert_eq!(stdout, format!("ok: `{shown}`: {} events, head {}:{}\n", events - 1, last.seq, last.hash));
    let (code, stdout, stderr) = permitc(&["audit", "verify", &conninfo, "--head", &head_arg])?;
    assert_eq!((code, stdout.as_str()), (1, ""), "the last row is still deleted: {stderr}");
    assert!(diagnostic_words(&stderr).starts_with(&format!("permits::audit::broken × `{shown}`: ")), "{stderr}");
    let (code, stdout, stderr) =
        permitc(&["audit", "verify", "host=127.0.0.1 port=1 user=permits password=hunter2 dbname=x"])?;
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(diagnostic_words(&stderr).starts_with("permits::audit::unreadable × `"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");

    drop((rt, db));
    for db in [&name, &empty] {
        admin.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))?;
    }
    Ok(())
}
