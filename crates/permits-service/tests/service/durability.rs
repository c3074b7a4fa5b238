//! `permitd serve --sync`: how the ledger's commits reach the disk — a group commit (`GROUP`) unless asked
//! otherwise, or SQLite's `synchronous` as it reads it back (shown by `/healthz`); a bad value is a usage
//! error and nothing starts.

use serde_json::json;

use super::{Client, R, Server, Temp, fixture, permitd};

#[test]
fn every_commit_is_synced_unless_normal_is_asked_for() -> R {
    let server = Server::start("support-triage");
    let health = Client::anonymous(&server.url).get("/healthz").ok();
    assert_eq!(health["store"], json!({"journal_mode": "wal", "synchronous": "GROUP"}));
    let dir = Temp::new("sync-normal");
    let table = dir.path("table.json");
    std::fs::copy(fixture("support-triage"), &table)?;
    let full = Server::with(&table, &dir.path("full.db"), &["--sync", "full"]);
    let health = Client::anonymous(&full.url).get("/healthz").ok();
    assert_eq!(health["store"], json!({"journal_mode": "wal", "synchronous": "FULL"}));
    let normal = Server::with(&table, &dir.path("ledger.db"), &["--sync", "normal"]);
    let health = Client::anonymous(&normal.url).get("/healthz").ok();
    assert_eq!(health["store"], json!({"journal_mode": "wal", "synchronous": "NORMAL"}));
    let out = permitd()
        .args(["serve", "--listen", "127.0.0.1:0", "--sync", "off", "--table"])
        .arg(&table)
        .arg("--store")
        .arg(dir.path("other.db"))
        .output()?;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid value 'off' for '--sync <SYNC>'"), "{stderr}");
    assert!(!dir.path("other.db").exists(), "nothing was created");
    Ok(())
}
