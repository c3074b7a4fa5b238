//! Hot reload: a new table file on SIGHUP, or a table posted with an admin key, is installed through the
//! runtime's checks; a bad one is refused and the old one stays.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Client, R, Server};

fn digest(server: &Server) -> String {
    Client::anonymous(&server.url).get("/healthz").ok()["table_digest"].as_str().unwrap_or_default().to_string()
}

fn digest_of(name: &str) -> Result<String, Box<dyn std::error::Error>> {
    Ok(permits_runtime::table::Table::load_path(&super::fixture(name))?.header.table_digest)
}

/// Waits up to 10 seconds for the service to report `want`.
fn wait_for(server: &Server, want: &str) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if digest(server) == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn sighup_installs_a_good_table_and_keeps_the_old_one_for_a_bad_one() -> R {
    let server = Server::start("workshop");
    let old = digest_of("workshop")?;
    assert_eq!(digest(&server), old);
    // A tampered table (its digest no longer matches): refused, the old one stays.
    let text = std::fs::read_to_string(super::fixture("workshop-never-setprice"))?;
    std::fs::write(&server.table, text.replace("\"ScrapRepair\"", "\"ScrapRepairs\""))?;
    server.signal("HUP");
    let metrics = || Client::anonymous(&server.url).get_text("/metrics");
    let end = Instant::now() + Duration::from_secs(10);
    while !metrics().contains("permits_table_reloads_total{outcome=\"refused\"} 1") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(metrics().contains("permits_table_reloads_total{outcome=\"refused\"} 1"), "{}", metrics());
    assert_eq!(digest(&server), old);
    // A good one: installed, and it decides from then on.
    std::fs::write(&server.table, text)?;
    server.signal("HUP");
    assert!(wait_for(&server, &digest_of("workshop-never-setprice")?));
    let host = server.host("Estimator");
    let d = host
        .post(
            "/v1/decide",
            &json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice",
        "arguments": {"repair": "T-7", "price": 45}}),
        )
        .ok();
    assert_eq!(d["level"], "never");
    Ok(())
}

#[test]
fn a_posted_table_needs_an_admin_key_and_a_bad_one_is_refused() -> R {
    let server = Server::start("workshop");
    let old = digest_of("workshop")?;
    let admin = Client::new(&server.url, &server.key(&["--admin"]));
    let host = server.host("Estimator");
    let good = std::fs::read(super::fixture("workshop-never-setprice"))?;
    let refused = host.post_raw("/v1/admin/table", &good);
    assert_eq!((refused.status, refused.code()), (403, "admin_only"));
    let mut bad = String::from_utf8(good.clone())?;
    bad = bad.replacen("\"format\": 1", "\"format\": 2", 1);
    let refused = admin.post_raw("/v1/admin/table", bad.as_bytes());
    assert_eq!((refused.status, refused.code()), (422, "table_refused"), "{}", refused.body);
    assert!(refused.message().starts_with("the table was refused, the one in force stays"));
    assert_eq!(digest(&server), old);
    let installed = admin.post_raw("/v1/admin/table", &good).ok();
    assert_eq!(installed["table_digest"], digest_of("workshop-never-setprice")?);
    assert_eq!(digest(&server), digest_of("workshop-never-setprice")?);
    Ok(())
}

#[test]
fn with_trusted_keys_an_older_looser_table_is_refused() -> R {
    use permits_runtime::signing::{public_key_of, sign};
    let dir = super::Temp::new("signed");
    let secret = "5e".repeat(32);
    let public = public_key_of(&secret)?;
    let strict = permits_runtime::table::Table::load_path(&super::fixture("workshop-never-setprice"))?;
    let loose = std::fs::read(super::fixture("workshop"))?;
    let loose_digest = digest_of("workshop")?;
    let table = dir.path("table.json");
    std::fs::copy(super::fixture("workshop-never-setprice"), &table)?;
    std::fs::write(
        dir.path("table.json.sig"),
        serde_json::to_string(&sign(&strict.header.table_digest, 2, &secret)?)?,
    )?;
    let server = Server::with(&table, &dir.path("ledger.db"), &["--trust", &public]);
    assert_eq!(digest(&server), strict.header.table_digest);
    let admin = Client::new(&server.url, &server.key(&["--admin"]));
    let loose_table: serde_json::Value = serde_json::from_slice(&loose)?;
    // The looser table, signed with an older serial: a rollback, refused.
    let older = json!({"table": loose_table, "signature": sign(&loose_digest, 1, &secret)?});
    let refused = admin.post("/v1/admin/table", &older);
    assert_eq!((refused.status, refused.code()), (422, "table_refused"), "{}", refused.body);
    assert!(refused.message().contains("serial"), "{}", refused.message());
    // Unsigned, or signed by a key the service does not trust: refused.
    assert_eq!(admin.post_raw("/v1/admin/table", &loose).code(), "table_refused");
    let other = json!({"table": loose_table, "signature": sign(&loose_digest, 3, &"77".repeat(32))?});
    assert_eq!(admin.post("/v1/admin/table", &other).code(), "table_refused");
    assert_eq!(digest(&server), strict.header.table_digest, "the table in force stays");
    // A newer serial from the trusted key is installed.
    let newer = json!({"table": loose_table, "signature": sign(&loose_digest, 3, &secret)?});
    assert_eq!(admin.post("/v1/admin/table", &newer).ok()["table_digest"], loose_digest);
    // The refusals and the install are in the store's audit chain, which verifies.
    let noor = server.person("Noor");
    let verified = noor.get("/v1/audit/verify").ok();
    assert_eq!(verified["ok"], true);
    let events = noor.get("/v1/audit?limit=1000").ok()["events"].clone();
    let installs: Vec<&str> = events
        .as_array()
        .ok_or("events")?
        .iter()
        .filter(|e| {
            e["event"]["kind"] == "table_installed" || e["event"]["reason"].as_str().unwrap_or("").contains("table")
        })
        .filter_map(|e| e["event"]["outcome"].as_str())
        .collect();
    assert!(installs.contains(&"refused"), "{installs:?}");
    assert_eq!(verified["events"], json!(events.as_array().map(Vec::len)));
    Ok(())
}

/// With its stderr a closed pipe (a supervisor that stopped reading its log), the service still starts,
/// serves and reloads: its log lines are dropped, not a panic. Two SIGHUPs with two different tables both
/// install (a panic in the reload task on the first log line would leave the second undone).
#[test]
fn a_closed_stderr_loses_log_lines_but_not_reloads() -> R {
    let server = Server::deaf("workshop");
    assert_eq!(digest(&server), digest_of("workshop")?);
    for name in ["workshop-never-setprice", "workshop-new-body"] {
        std::fs::copy(super::fixture(name), &server.table)?;
        server.signal("HUP");
        assert!(wait_for(&server, &digest_of(name)?), "{name} was not installed");
    }
    assert_eq!(Client::anonymous(&server.url).get("/healthz").ok()["ok"], true);
    Ok(())
}
