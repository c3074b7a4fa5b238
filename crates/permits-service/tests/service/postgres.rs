//! `permitd serve --store postgres://…` (issue #22): the runtime's tables and the service's keys in one
//! PostgreSQL database, shared by several instances, and kept across restarts. The server is the one
//! `PERMITS_TEST_POSTGRES` names (`.ci/postgres start` starts one); each test makes its own database and
//! drops it. Without the variable these tests fail, saying how to give it.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use postgres::{Config, NoTls};
use serde_json::{Value, json};

use super::{Client, R, Server, Stop, Temp, fixture, permitd};

/// A database of its own on the test server, dropped at the end; `url` is its `postgres://` URL.
struct Database {
    admin: Config,
    name: String,
    url: String,
}

impl Database {
    fn new(test: &str) -> Result<Database, Box<dyn std::error::Error>> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let admin_url = std::env::var("PERMITS_TEST_POSTGRES").map_err(|_| {
            "the PostgreSQL tests need a server: set PERMITS_TEST_POSTGRES to a postgres:// URL whose user may \
             create databases, e.g. `eval \"$(.ci/postgres start)\"` at the repository's root"
        })?;
        let admin: Config = admin_url.parse()?;
        let name = format!("permitd_{}_{}_{test}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        admin.connect(NoTls)?.batch_execute(&format!("CREATE DATABASE {name}"))?;
        // The URL with its database replaced: `postgres://user@host:port/DB`.
        let base = admin_url.rsplit_once('/').map(|(base, _)| base).ok_or("PERMITS_TEST_POSTGRES has no database")?;
        Ok(Database { admin, name: name.clone(), url: format!("{base}/{name}") })
    }

    fn store(&self) -> &Path {
        Path::new(&self.url)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Ok(mut client) = self.admin.connect(NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

fn order(sku: &str, amount: u64, key: &str) -> Value {
    json!({"agent": "Clerkbot", "skill": "Reorder", "tool": "PlaceOrder",
        "arguments": {"sku": sku, "quantity": 1, "amount": amount}, "requester": "Sam",
        "operation_key": key, "claim_token": format!("{key}-{sku}")})
}

fn serve(db: &Database, dir: &Temp, name: &str) -> Server {
    let audit = dir.path(&format!("{name}.audit.jsonl"));
    let audit = audit.to_str().unwrap_or_default().to_string();
    Server::with(&fixture("holes.table"), db.store(), &["--audit", &audit])
}

#[test]
fn postgres_store_propose_approve_claim_receipt_and_a_restart_keeps_everything() -> R {
    let db = Database::new("restart")?;
    let dir = Temp::new("pg-restart");
    let server = serve(&db, &dir, "one");
    let host = server.host("Clerkbot");
    let max = server.person("Max");
    let budget = |c: &Client| c.get("/v1/budgets/Supplies").ok()["budget"].clone();
    // Propose → approve → claim → confirm → receipt.
    let p1 = host.post("/v1/calls", &order("vanilla", 900, "order-1")).ok()["proposal"].clone();
    assert_eq!((&p1["id"], &p1["status"]), (&json!("P-1"), &json!("waiting")));
    max.post("/v1/proposals/P-1/approve", &json!({"fingerprint": p1["fingerprint"]})).ok();
    assert_eq!((&budget(&host)["reserved"], &budget(&host)["spent"]), (&json!(900), &json!(0)));
    let claimed = host.post("/v1/executions/P-1/claim", &json!({"token": "go-1"})).ok();
    assert_eq!((&claimed["runs_as"], &claimed["status"]), (&json!("Max"), &json!("granted")));
    host.post("/v1/executions/P-1/confirm", &json!({"token": "go-1"})).ok();
    let receipt = json!({"operation": "order-1:P-1", "amount": 900, "outcome": "accepted"});
    let done =
        host.post("/v1/executions/P-1/receipt", &json!({"token": "go-1", "outcome": "done", "receipt": receipt})).ok();
    assert_eq!(done["status"], "done");
    assert_eq!((&budget(&host)["reserved"], &budget(&host)["spent"]), (&json!(0), &json!(900)));
    // A second proposal waits across the restart.
    let p2 = host.post("/v1/calls", &order("mint", 800, "order-2")).ok()["proposal"].clone();
    let tokens = (host.token.clone(), max.token.clone());
    let (_, _, _) = server.stop(Stop::Term);

    // The records and the keys are in PostgreSQL, not beside the process.
    let rows: i64 = db.admin_query("SELECT count(*) FROM service_keys")?;
    assert_eq!(rows, 2, "the host's and Max's keys");
    let server = serve(&db, &dir, "two");
    let (host, max) = (Client::new(&server.url, &tokens.0), Client::new(&server.url, &tokens.1));
    let after = host.get("/v1/proposals/P-1").ok();
    assert_eq!((&after["status"], &after["receipt"]), (&json!("done"), &receipt));
    assert_eq!(host.get("/v1/proposals/P-2").ok()["status"], "waiting");
    assert_eq!((&budget(&host)["reserved"], &budget(&host)["spent"]), (&json!(0), &json!(900)));
    // The same grant never runs again; the waiting one goes on.
    assert_eq!(host.post("/v1/executions/P-1/claim", &json!({"token": "go-again"})).code(), "claimed");
    max.post("/v1/proposals/P-2/approve", &json!({"fingerprint": p2["fingerprint"]})).ok();
    assert_eq!((&budget(&host)["reserved"], &budget(&host)["spent"]), (&json!(800), &json!(900)));
    // The store's audit chain is whole across both runs of the service.
    let audit = max.get("/v1/audit/verify").ok();
    assert_eq!(audit["ok"], json!(true), "{audit}");
    // Version URLs are not kept in PostgreSQL yet: registering one is refused, and none is listed.
    let url = json!({"agent": "Clerkbot", "tool": "PlaceOrder", "url": "http://127.0.0.1:9/v"});
    let refused = host.post("/v1/version-urls", &url);
    assert_eq!((refused.status, refused.code()), (422, "unavailable"), "{}", refused.body);
    assert_eq!(host.get("/v1/version-urls").ok()["version_urls"], json!([]));
    Ok(())
}

#[test]
fn two_instances_on_one_database_share_keys_grants_and_one_run() -> R {
    let db = Database::new("two")?;
    let dir = Temp::new("pg-two");
    let (a, b) = (serve(&db, &dir, "a"), serve(&db, &dir, "b"));
    // A key made once serves on both instances: they read one table of keys.
    let host_token = a.key(&["--agents", "Clerkbot"]);
    let max_token = a.key(&["--person", "Max"]);
    let (host_a, host_b) = (Client::new(&a.url, &host_token), Client::new(&b.url, &host_token));
    let p = host_a.post("/v1/calls", &order("vanilla", 900, "order-1")).ok()["proposal"].clone();
    Client::new(&b.url, &max_token).post("/v1/proposals/P-1/approve", &json!({"fingerprint": p["fingerprint"]})).ok();
    // The grant approved through B is claimed through A; B's claim with another token is refused.
    assert_eq!(host_a.post("/v1/executions/P-1/claim", &json!({"token": "via-a"})).ok()["status"], "granted");
    let other = host_b.post("/v1/executions/P-1/claim", &json!({"token": "via-b"}));
    assert_eq!((other.status, other.code()), (409, "claimed"));
    // A revocation through the command line is seen by both.
    let out = permitd().args(["keys", "revoke", "--store", &db.url, "K-1"]).output()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(host_a.get("/v1/proposals/P-1").status, 401);
    assert_eq!(host_b.get("/v1/proposals/P-1").status, 401);
    Ok(())
}

#[test]
fn over_tls_the_store_and_the_keys_use_sslmode_require_and_a_missing_root_is_refused() -> R {
    let mut db = Database::new("tls")?;
    let ca = std::env::var("PERMITS_TEST_POSTGRES_CA").map_err(
        |_| "PERMITS_TEST_POSTGRES_CA (the test server's certificate) is not set: `.ci/postgres start` sets it",
    )?;
    let plain = db.url.clone();
    db.url = format!("{plain}?sslmode=require&sslrootcert={ca}");
    let dir = Temp::new("pg-tls");
    let server = serve(&db, &dir, "tls");
    let host = server.host("Clerkbot");
    let p = host.post("/v1/calls", &order("vanilla", 900, "order-1")).ok()["proposal"].clone();
    assert_eq!(p["status"], "waiting");
    // Every connection of the service to this database is encrypted: the runtime's and the keys'.
    let (tls, total): (i64, i64) = {
        let mut client = db.admin.clone();
        client.dbname(&db.name);
        let row = client.connect(NoTls)?.query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
                 WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()",
            &[],
        )?;
        (row.get(0), row.get(1))
    };
    assert!(total >= 2 && tls == total, "{tls} of {total} connections over TLS");
    drop(server);
    // A root certificate file that is not there: refused, saying why (a wrong root is the runtime's test).
    let out = permitd()
        .args([
            "keys",
            "add",
            "--store",
            &format!("{plain}?sslmode=require&sslrootcert={}", dir.path("none.crt").display()),
        ])
        .args(["--agents", "Clerkbot"])
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot read the root certificates"), "{stderr}");
    Ok(())
}

#[test]
fn a_postgres_store_needs_an_audit_path_and_a_reachable_server() -> R {
    let out = permitd()
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "postgres://nobody@127.0.0.1:1/none", "--table"])
        .arg(fixture("holes.table"))
        .output()?;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("with a PostgreSQL store, `--audit FILE` names this instance's audit log"), "{stderr}");
    let out = permitd()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "postgres://nobody@127.0.0.1:1/none",
            "--audit",
            "/dev/null",
        ])
        .arg("--table")
        .arg(fixture("holes.table"))
        .output()?;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("permitd: cannot connect to PostgreSQL: "), "{stderr}");
    Ok(())
}

impl Database {
    /// One number from the test database.
    fn admin_query(&self, query: &str) -> Result<i64, Box<dyn std::error::Error>> {
        let mut config = self.admin.clone();
        config.dbname(&self.name);
        Ok(config.connect(NoTls)?.query_one(query, &[])?.get(0))
    }
}

#[test]
fn the_inbox_signs_in_on_a_postgresql_store_and_every_instance_knows_the_session() -> R {
    let db = Database::new("inbox")?;
    let dir = Temp::new("pg-inbox");
    let said = super::inbox::set_password(db.store(), "Noor", super::inbox::NOOR_PASSWORD);
    assert!(!said.contains(super::inbox::NOOR_PASSWORD));
    let start = |name: &str| {
        let audit = dir.path(&format!("{name}.audit.jsonl"));
        Server::with(&fixture("workshop"), db.store(), &["--audit", audit.to_str().unwrap_or_default()])
    };
    let (one, two) = (start("one"), start("two"));
    let mut web = super::inbox::Web::new(&one.url);
    assert_eq!(web.sign_in("Noor", "not her password").status, 401);
    let signed = web.sign_in("Noor", super::inbox::NOOR_PASSWORD);
    assert_eq!(signed.status, 303, "{}", signed.body);
    let session = web.cookies.get("permits_session").cloned().ok_or("no session")?;
    // The other instance on the same database knows the session; the database keeps only digests.
    let mut other = super::inbox::Web::new(&two.url);
    other.cookies.insert("permits_session".into(), session.clone());
    let page = other.get("/inbox/waiting");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Nothing waits for you."), "{}", page.body);
    let mut client = db.url.parse::<Config>()?.connect(NoTls)?;
    let phc: String = client.query_one("SELECT phc FROM service_passwords WHERE person = 'Noor'", &[])?.get(0);
    assert!(phc.starts_with("$argon2id$"), "{phc}");
    let digests: Vec<String> =
        client.query("SELECT digest FROM service_sessions", &[])?.iter().map(|r| r.get(0)).collect();
    assert_eq!(digests.len(), 1);
    assert_ne!(digests[0], session);
    // A new password ends the session, on every instance.
    super::inbox::set_password(db.store(), "Noor", "noor-new-password-333");
    assert_eq!(other.get("/inbox/waiting").status, 303);
    Ok(())
}

impl Database {
    /// The database as libpq's key-value connection string (`host=… port=… user=… dbname=…`), the form
    /// README's TLS paragraph shows.
    fn conninfo(&self) -> Result<String, Box<dyn std::error::Error>> {
        let config: Config = self.url.parse()?;
        let mut words = Vec::new();
        for host in config.get_hosts() {
            match host {
                postgres::config::Host::Tcp(name) => words.push(format!("host={name}")),
                postgres::config::Host::Unix(dir) => words.push(format!("host={}", dir.display())),
            }
        }
        words.extend(config.get_ports().iter().map(|port| format!("port={port}")));
        words.extend(config.get_user().map(|user| format!("user={user}")));
        if let Some(password) = config.get_password() {
            words.push(format!("password={}", String::from_utf8_lossy(password)));
        }
        words.push(format!("dbname={}", self.name));
        Ok(words.join(" "))
    }
}

#[test]
fn the_key_value_connection_string_is_postgresql_for_keys_and_serve_and_never_a_file() -> R {
    let db = Database::new("conninfo")?;
    let conninfo = db.conninfo()?;
    let dir = Temp::new("pg-conninfo");
    // `permitd keys add` run in an empty folder: the key is in the database, and no file is made.
    let out =
        permitd().current_dir(&dir.0).args(["keys", "add", "--store", &conninfo, "--agents", "Clerkbot"]).output()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let host_token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(host_token.starts_with("permits_host_"), "{host_token}");
    assert_eq!(db.admin_query("SELECT count(*) FROM service_keys")?, 1);
    let made: Vec<_> = std::fs::read_dir(&dir.0)?.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>()?;
    assert!(made.is_empty(), "files made beside the command: {made:?}");
    let listed = permitd().current_dir(&dir.0).args(["keys", "list", "--store", &conninfo]).output()?;
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("\"id\":\"K-1\"") && listed.contains("Clerkbot"), "{listed}");
    // `permitd serve` on it: the proposal is a row of the database's `proposals`, the key the one above.
    let audit = dir.path("serve.audit.jsonl");
    let server = Server::with(&fixture("holes.table"), Path::new(&conninfo), &["--audit", &audit.to_string_lossy()]);
    let host = Client::new(&server.url, &host_token);
    let p = host.post("/v1/calls", &order("vanilla", 900, "order-1")).ok()["proposal"].clone();
    assert_eq!((&p["id"], &p["status"]), (&json!("P-1"), &json!("waiting")));
    assert_eq!(db.admin_query("SELECT count(*) FROM proposals")?, 1);
    Ok(())
}

#[test]
fn a_lost_connection_of_the_keys_reads_as_the_stores_and_each_connection_reconnects_on_its_next_use() -> R {
    let db = Database::new("lost")?;
    let dir = Temp::new("pg-lost");
    let server = serve(&db, &dir, "lost");
    let host = server.host("Clerkbot");
    assert_eq!(host.get("/v1/budgets/Supplies").status, 200);
    // Every connection of the service to the database ends (as a restart of the server ends them).
    let ended = db.admin_query(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()) AS t",
    )?;
    assert!(ended >= 2, "the store's and the keys' connections: {ended}");
    let lost = permits_runtime::PostgresStore::CONNECTION_LOST;
    // The keys' connection is used first (the request's key), then the store's: each fails once, in the same
    // words, and connects again on its next use.
    let first = host.get("/v1/budgets/Supplies");
    assert_eq!(first.code(), "store", "{}", first.body);
    let keys_lost = format!("the store failed: {lost}: cannot read the keys");
    assert_eq!((first.status, first.message().starts_with(&keys_lost)), (503, true), "{}", first.body);
    let second = host.get("/v1/budgets/Supplies");
    assert_eq!(second.code(), "store", "{}", second.body);
    let store_lost = format!("the store failed: {lost}: ");
    assert_eq!((second.status, second.message().starts_with(&store_lost)), (503, true), "{}", second.body);
    assert!(!second.message().contains("the keys"), "{}", second.body);
    assert_eq!(host.get("/v1/budgets/Supplies").status, 200);
    Ok(())
}
