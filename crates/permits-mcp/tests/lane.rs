//! The local mode's lane (`permits_mcp::lane`): alone calls run on the store itself, recorded as the
//! service records them; any other call leaves the store untouched and goes to the service; a table the
//! store no longer has as its current one turns the lane off.

use std::path::{Path, PathBuf};

use permits_compiler::compile::compile_loaded;
use permits_compiler::syntax::{Source, Sources, parse_sources};
use permits_mcp::lane::{Lane, LaneOptions, Laned};
use permits_runtime::table::Table;
use permits_runtime::{AdmitAll, Call, ProposalRequest, RunOutcome, Runtime, SqliteStore, Status};
use serde_json::json;

type R = Result<(), Box<dyn std::error::Error>>;

/// Ana's Scribe reads notes alone and proposes every mail; `extra` is appended (another table).
fn table(extra: &str) -> Result<Table, String> {
    let policy = format!(
        "person Ana\nagent Scribe \"s\" {{ sponsor Ana skills [Notes] }}\nskill Notes \"n\" {{ tools [read_note, send_mail] }}\n\
         extern tool read_note \"Read a note\" (title: string) : reads\nextern tool send_mail \"Send a mail\" (to: string) : sends\n{extra}"
    );
    let mut sources = Sources::default();
    sources.add(Source::new("policy.permits", policy.into_bytes()));
    let out = compile_loaded(parse_sources(sources));
    out.table.ok_or_else(|| permits_compiler::diagnostics::render_plain(&out.diagnostics, &out.sources))
}

fn folder(name: &str) -> Result<PathBuf, std::io::Error> {
    let dir = std::env::temp_dir().join(format!("permits-lane-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The table written where `permitd serve --table` reads it, and installed on the store as `permitd` does.
fn serve(dir: &Path, t: &Table) -> Result<LaneOptions, Box<dyn std::error::Error>> {
    let path = dir.join("table.json");
    std::fs::write(&path, t.to_pretty_json())?;
    let store = dir.join("ledger.db");
    Runtime::new(t.clone(), AdmitAll).with_store(SqliteStore::open(&store)?).install_table()?;
    Ok(LaneOptions::beside(&path, &store))
}

fn request(tool: &str, arguments: serde_json::Value) -> ProposalRequest {
    ProposalRequest::new(Call::new("Scribe", "Notes", tool).with_arguments(arguments).for_person("Ana"), "task-1", "")
}

fn kinds(store: &Path) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
    Ok(SqliteStore::read_audit_chain(store)?
        .into_iter()
        .map(|e| (format!("{:?}", e.event.kind), e.event.outcome))
        .collect())
}

#[test]
fn alone_calls_run_in_the_lane_and_the_rest_leave_the_store_untouched() -> R {
    let dir = folder("alone")?;
    let options = serve(&dir, &table("")?)?;
    let lane = Lane::open(&options)?;
    let installed = kinds(&options.store)?.len();
    // Reading a note only reads: admitted with the store's write lock held (the gateway sends it then), and
    // claimed after.
    let Laned::Admitted(admitted) = lane.call(request("read_note", json!({"title": "groceries"})), "tok-1") else {
        return Err("reading a note is alone".into());
    };
    assert_eq!(kinds(&options.store)?.len(), installed, "nothing is committed before the claim");
    let (run, syncing) = lane.claim(admitted)?;
    lane.durable(syncing)?;
    assert_eq!((run.id.as_str(), run.status, run.confirmed), ("A-1", Status::Sending, true));
    lane.receipt(&run.id, "tok-1", RunOutcome::Done(json!({"content": []})))?;
    let steps = kinds(&options.store)?;
    let tail: Vec<(&str, &str)> = steps[installed..].iter().map(|(k, o)| (k.as_str(), o.as_str())).collect();
    assert_eq!(
        tail,
        [
            ("Decision", "alone"),
            ("Task", "bound"),
            ("Execution", "claimed"),
            ("Execution", "sending"),
            ("Execution", "done")
        ]
    );
    // The same events in the service's audit copy, a line each.
    let copy = std::fs::read_to_string(&options.audit)?;
    assert_eq!(copy.lines().count(), 5, "{copy}");
    assert!(copy.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()), "{copy}");
    // A mail is proposed: not the lane's, and nothing is recorded (the service records it once).
    let before = kinds(&options.store)?;
    assert!(matches!(lane.call(request("send_mail", json!({"to": "ben@example.com"})), "tok-2"), Laned::Service));
    assert!(matches!(lane.call(request("shred", json!({})), "tok-3"), Laned::Service));
    assert_eq!(kinds(&options.store)?, before);
    // A claim token used for another call is refused and recorded, as the service does.
    match lane.call(request("read_note", json!({"title": "other"})), "tok-1") {
        Laned::Refused { code, message } => {
            assert_eq!(code, "claimed");
            assert!(message.contains("a new call needs a new claim token"), "{message}");
        }
        other => return Err(format!("expected a refusal, got {other:?}").into()),
    }
    assert!(lane.is_on());
    Ok(())
}

#[test]
fn a_table_the_store_no_longer_has_turns_the_lane_off() -> R {
    let dir = folder("stale")?;
    let options = serve(&dir, &table("")?)?;
    let lane = Lane::open(&options)?;
    // The person reloads the service with a new table: the store's current one is not the lane's.
    let service = Runtime::new(table("")?, AdmitAll).with_store(SqliteStore::open(&options.store)?);
    service.replace_table(table("person Ben\n")?)?;
    let before = SqliteStore::read_audit_chain(&options.store)?.len();
    assert!(matches!(lane.call(request("read_note", json!({"title": "groceries"})), "tok-1"), Laned::Service));
    assert!(!lane.is_on());
    // Nothing was claimed (the refusal of the stale table is audited), and the lane stays off.
    let chain = SqliteStore::read_audit_chain(&options.store)?;
    assert_eq!(chain.len(), before + 1);
    assert_eq!(chain[before].event.outcome, "refused");
    assert!(matches!(lane.call(request("read_note", json!({"title": "groceries"})), "tok-2"), Laned::Service));
    assert_eq!(SqliteStore::read_audit_chain(&options.store)?.len(), before + 1);
    Ok(())
}

#[test]
fn a_claim_is_waited_for_with_sync_group_and_durable_at_once_with_sync_normal() -> R {
    use permits_runtime::Synchronous;
    for (sync, said) in [(Synchronous::Group, "Syncing(pending)"), (Synchronous::Normal, "Syncing(durable)")] {
        let dir = folder(&format!("sync-{}", sync.as_str()))?;
        let mut options = serve(&dir, &table("")?)?;
        options.sync = sync;
        let lane = Lane::open(&options)?;
        let Laned::Admitted(admitted) = lane.call(request("read_note", json!({"title": "groceries"})), "tok-1") else {
            return Err("a read was not admitted".into());
        };
        let (run, syncing) = lane.claim(admitted)?;
        // `--sync normal`: the answer waits for no sync (the run survives the proxy's crash, not a power loss).
        assert_eq!(format!("{syncing:?}"), said, "{sync:?}");
        lane.durable(syncing)?;
        assert_eq!(run.status, Status::Sending);
        drop(lane);
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
