//! The shared store (issue #22, "Many hosts, one ledger"): the same records as [`crate::SqliteStore`] in a
//! PostgreSQL database, so hosts on many machines and the approval service behind a load balancer share
//! one transactional state.
//!
//! A [`PostgresStore`] owns one connection (the synchronous `postgres` client). Each [`Transaction`] is
//! `BEGIN; SELECT pg_advisory_xact_lock(…); … COMMIT`: the transaction-scoped advisory lock
//! [`PostgresStore::LOCK_KEY`] serializes every transaction of every store on the database, exactly as
//! SQLite's `BEGIN IMMEDIATE` does on one file. The trait promises serialized transactions
//! ([`Store::begin`]); under the lock each statement (`READ COMMITTED`) sees everything committed before
//! the lock was granted, so a budget check and its reservation, a grant's consumption at execution, a
//! supersession and a settlement are each one serial step, under any interleaving of hosts. The lock is
//! released by the server when the transaction ends — commit, rollback, or the connection dropping (a
//! host killed mid-transaction): nothing of an unfinished transaction is ever visible. A `begin` waits up
//! to ten seconds for the lock (`lock_timeout`), then fails with a [`StoreError`]. ARCHITECTURE.md says why
//! this lock and not row locks or `SERIALIZABLE` with retries, with the figures.
//!
//! # Connection loss
//!
//! A statement that fails because the connection is gone is a [`StoreError`] whose message starts with
//! [`PostgresStore::CONNECTION_LOST`]; the transaction was not committed (PostgreSQL rolls back a
//! transaction whose connection drops), so the operation is safe to retry. The next `begin` connects
//! again. A connection lost during `COMMIT` itself cannot say whether the commit happened: the message
//! says so, and either all of the transaction is there or none of it.
//!
//! # The schema (version 7, [`PostgresStore::SCHEMA_VERSION`])
//!
//! The tables of SQLite's version 7, with the same key columns and the records as the same JSON text (not
//! `jsonb`, which would reorder keys), in the connection's current schema (the first of its
//! `search_path`; `options=-csearch_path%3Dname` in the URL chooses another). The version is the one row
//! of `permits_schema`. Version numbers are shared with the SQLite store: version 7 here holds exactly the
//! records of an SQLite file at version 7. Versions 1 to 3 were never written to PostgreSQL.
//!
//! ```sql
//! CREATE TABLE permits_schema (version INTEGER NOT NULL);
//! CREATE TABLE sequences (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
//! CREATE TABLE proposals (slot BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE,
//!     operation_key TEXT NOT NULL, fingerprint TEXT NOT NULL, tool TEXT NOT NULL, subject TEXT,
//!     record TEXT NOT NULL,
//!     status TEXT, decider TEXT, requester TEXT, decided_by TEXT, agent TEXT, expires_at BIGINT);  -- version 6
//! -- version 6, as SQLite's: proposals_by_decider (status, decider, slot, requester, expires_at), proposals_by_task
//! -- (operation_key, slot), proposals_by_agent (agent, slot), proposals_by_requester (requester, slot),
//! -- proposals_by_decided_by (decided_by, slot)
//! CREATE INDEX proposals_by_fingerprint ON proposals (operation_key, fingerprint);
//! CREATE INDEX proposals_by_subject ON proposals (operation_key, tool, subject);
//! CREATE TABLE rules (slot BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE,
//!     record TEXT NOT NULL);
//! CREATE TABLE budgets (name TEXT PRIMARY KEY, installed_ceiling BIGINT NOT NULL, spent BIGINT NOT NULL);
//! CREATE TABLE reservations (holder TEXT PRIMARY KEY, budget TEXT NOT NULL, amount BIGINT NOT NULL,
//!     created_at BIGINT NOT NULL, task TEXT);        -- task: version 5, the operation key, or NULL
//! CREATE INDEX reservations_by_budget ON reservations (budget);
//! CREATE INDEX reservations_by_task ON reservations (budget, task);                    -- version 5
//! CREATE TABLE task_spent (budget TEXT NOT NULL, task TEXT NOT NULL, spent BIGINT NOT NULL,  -- version 5
//!     PRIMARY KEY (budget, task));
//! CREATE TABLE tasks (key TEXT PRIMARY KEY, record TEXT NOT NULL);
//! CREATE TABLE audit (seq BIGINT PRIMARY KEY, prev TEXT NOT NULL, hash TEXT NOT NULL, event TEXT NOT NULL);
//! CREATE TABLE installed_tables (seq BIGINT PRIMARY KEY, record TEXT NOT NULL);
//! CREATE TABLE runs (slot BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE,
//!     token TEXT NOT NULL UNIQUE, record TEXT NOT NULL);
//! CREATE TABLE leases (key TEXT PRIMARY KEY, record TEXT NOT NULL);                  -- version 7
//! ```
//!
//! # Versions and migrations
//!
//! Opening a store runs the migrations in one transaction under the same advisory lock (PostgreSQL's DDL is
//! transactional): a database without `permits_schema` (version 0) gets the schema above at version 7
//! (version 4's tables, then version 5's, 6's and 7's steps). Migration 4 → 5 (spec §6 "Per task") adds the `task` column
//! of `reservations`, its index and `task_spent`, and tags each reservation with the operation key of the
//! proposal or claimed alone run that holds it, exactly as SQLite's; what was spent before counts in the
//! budget's total, not in any task's. Migration 5 → 6 adds the proposals' list columns and their indexes
//! and fills the columns from each record, as SQLite's. Migration 6 → 7 adds the `leases` table (spec §5a
//! "Leases").
//! A failed migration is rolled back whole and the database keeps its version; a database at a newer
//! version than this runtime knows, or at a version this store never wrote, is refused and left
//! untouched. A later version adds its step to [`migrate`], after the ones before.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use postgres::config::SslMode;
use postgres::types::ToSql;
use postgres::{Client, Config, GenericClient, NoTls, Row, Statement};
use serde::de::DeserializeOwned;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::audit::{AuditHead, ChainedEvent};
use super::error::StoreError;
use super::record_text::{HasId, decode, encode};
use super::records::{BudgetRecord, Lease, Proposal, Reservation, Run, StandingRule, TableInstall, Task};
use super::store::{ProposalCount, ProposalPage, ProposalQuery, Store, Transaction};

/// The schema of version 4, created in a database at version 0.
const SCHEMA_V4: &str = "
CREATE TABLE sequences (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE proposals (
    slot BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    operation_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    tool TEXT NOT NULL,
    subject TEXT,
    record TEXT NOT NULL
);
CREATE INDEX proposals_by_fingerprint ON proposals (operation_key, fingerprint);
CREATE INDEX proposals_by_subject ON proposals (operation_key, tool, subject);
CREATE TABLE rules (slot BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE, record TEXT NOT NULL);
CREATE TABLE budgets (name TEXT PRIMARY KEY, installed_ceiling BIGINT NOT NULL, spent BIGINT NOT NULL);
CREATE TABLE reservations (
    holder TEXT PRIMARY KEY, budget TEXT NOT NULL, amount BIGINT NOT NULL, created_at BIGINT NOT NULL
);
CREATE INDEX reservations_by_budget ON reservations (budget);
CREATE TABLE tasks (key TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE audit (seq BIGINT PRIMARY KEY, prev TEXT NOT NULL, hash TEXT NOT NULL, event TEXT NOT NULL);
CREATE TABLE installed_tables (seq BIGINT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE runs (
    slot BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    token TEXT NOT NULL UNIQUE,
    record TEXT NOT NULL
);
CREATE TABLE permits_schema (version INTEGER NOT NULL);
INSERT INTO permits_schema (version) VALUES (4);
";

/// What version 5 adds to version 4 (spec §6 "Per task"): reservations tagged by task, what each task spent,
/// and the tagging of the reservations held before (the holder's operation key).
const SCHEMA_V5_ADDS: &str = "
ALTER TABLE reservations ADD COLUMN task TEXT;
CREATE INDEX reservations_by_task ON reservations (budget, task);
CREATE TABLE task_spent (budget TEXT NOT NULL, task TEXT NOT NULL, spent BIGINT NOT NULL, PRIMARY KEY (budget, task));
UPDATE reservations SET task = proposals.operation_key FROM proposals
    WHERE proposals.id = reservations.holder AND reservations.task IS NULL;
UPDATE reservations SET task = runs.record::json->>'operation_key' FROM runs
    WHERE runs.id = reservations.holder AND reservations.task IS NULL;
UPDATE permits_schema SET version = 5;
";

/// What version 6 adds to version 5: the proposals' list columns and their indexes, as SQLite's version 6
/// (the columns are filled from the records by [`fill_list_columns`] in the same migration).
const SCHEMA_V6_ADDS: &str = "
ALTER TABLE proposals ADD COLUMN status TEXT, ADD COLUMN decider TEXT, ADD COLUMN requester TEXT,
    ADD COLUMN decided_by TEXT, ADD COLUMN agent TEXT, ADD COLUMN expires_at BIGINT;
CREATE INDEX proposals_by_decider ON proposals (status, decider, slot, requester, expires_at);
CREATE INDEX proposals_by_task ON proposals (operation_key, slot);
CREATE INDEX proposals_by_agent ON proposals (agent, slot);
CREATE INDEX proposals_by_requester ON proposals (requester, slot);
CREATE INDEX proposals_by_decided_by ON proposals (decided_by, slot);
UPDATE permits_schema SET version = 6;
";

/// What version 7 adds to version 6: task leases (spec §5a "Leases"), as SQLite's version 7.
const SCHEMA_V7_ADDS: &str = "
CREATE TABLE leases (key TEXT PRIMARY KEY, record TEXT NOT NULL);
UPDATE permits_schema SET version = 7;
";

/// How long a `begin` waits for another transaction's lock before failing.
const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The shared store: a PostgreSQL database (issue #22). Every transaction of every store on one database
/// is serialized by a transaction-scoped advisory lock; the module documentation (`src/postgres.rs`) has the
/// schema, the migrations and what a lost connection means.
///
/// Like [`crate::SqliteStore`], a store holds one connection, and a transaction holds it for its whole
/// life: never begin a second transaction, or call [`PostgresStore::schema_version`], on a thread that holds
/// one. Several hosts (processes, machines) each open their own store on the same database.
pub struct PostgresStore {
    target: PostgresTarget,
    conn: Mutex<Option<Conn>>,
}

/// Where a [`PostgresStore`] connects, and how: a parsed connection string and, with `sslmode=require`
/// (or libpq's `verify-ca` / `verify-full`, which mean the same here), TLS by rustls that verifies the
/// server's certificate — its chain against the certificate authorities in the `sslrootcert` file (PEM), and
/// its name against the host connected to. Without `sslmode`, or with `disable`, `allow` or `prefer` (which
/// here never tries TLS), the connection is not encrypted (a Unix socket, loopback, a private network). The service's key table uses the same.
#[derive(Clone)]
pub struct PostgresTarget {
    config: Config,
    tls: Option<MakeRustlsConnect>,
}

impl std::fmt::Debug for PostgresTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The configuration may hold a password: only where it connects is shown.
        f.debug_struct("PostgresTarget")
            .field("hosts", &self.config.get_hosts())
            .field("dbname", &self.config.get_dbname())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl PostgresTarget {
    /// Whether a store string names a PostgreSQL database rather than a file: [`crate::is_postgres_target`],
    /// which a runtime built without the feature `postgres` has too.
    pub fn is_postgres(store: &str) -> bool {
        crate::is_postgres_target(store)
    }

    /// Parses `url` (`postgres://user:password@host:port/dbname?sslmode=require&sslrootcert=/etc/ca.pem`,
    /// or the key-value form `host=db.internal sslmode=require sslrootcert=/etc/ca.pem dbname=permits`).
    /// `sslrootcert` is read here (libpq's parameter; the client library does not know it).
    ///
    /// Errors: the string does not parse; `sslmode=require` without `sslrootcert`; a root certificate file
    /// that cannot be read or holds no certificate.
    pub fn parse(url: &str) -> Result<PostgresTarget, StoreError> {
        let (rest, root, mode) = split_tls_options(url);
        let mut config: Config = rest
            .parse()
            .map_err(|e| StoreError(format!("`{}` is not a PostgreSQL connection string: {e}", redact(url))))?;
        let tls = match mode.as_deref() {
            Some("require" | "verify-ca" | "verify-full") => {
                config.ssl_mode(SslMode::Require);
                let Some(root) = root else {
                    return Err(StoreError(
                        "`sslmode=require` needs `sslrootcert=PATH`: the certificate authority (PEM) the server's \
                         certificate is verified with"
                            .into(),
                    ));
                };
                Some(tls_connector(&root)?)
            }
            None | Some("disable" | "allow" | "prefer") => None,
            Some(other) => {
                return Err(StoreError(format!(
                    "`sslmode` is `disable`, `prefer`, `require`, `verify-ca` or `verify-full`, not `{other}`"
                )));
            }
        };
        Ok(PostgresTarget { config, tls })
    }

    /// A target without TLS for a parsed configuration.
    pub fn plain(config: Config) -> PostgresTarget {
        PostgresTarget { config, tls: None }
    }

    /// The parsed configuration (host, port, user, database).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `url` with its password, if it has one, shown as `***`: a connection string fit for a message.
    pub fn redact(url: &str) -> String {
        redact(url)
    }

    /// Whether it connects over TLS.
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A new connection.
    ///
    /// Errors: the server cannot be reached, refuses the login, or (TLS) presents a certificate that does
    /// not verify.
    pub fn connect(&self) -> Result<Client, StoreError> {
        let connected = match &self.tls {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(NoTls),
        };
        connected.map_err(|e| connect_error(&e))
    }
}

/// `url` without its `sslrootcert` and `sslmode` options (the latter mapped by [`PostgresTarget::parse`]
/// itself, since the client library knows neither `verify-ca` nor `verify-full`), and their values.
fn split_tls_options(url: &str) -> (String, Option<String>, Option<String>) {
    let (mut root, mut mode) = (None, None);
    let mut take = |key: &str, value: &str| match key {
        "sslrootcert" => {
            root = Some(value.to_string());
            false
        }
        "sslmode" => {
            mode = Some(value.to_string());
            false
        }
        _ => true,
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else { return (url.to_string(), None, None) };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                take(key, &percent_decode(value))
            })
            .collect();
        let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        (rest, root, mode)
    } else {
        let kept: Vec<&str> = url
            .split_whitespace()
            .filter(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                take(key.trim(), value.trim_matches('\''))
            })
            .collect();
        (kept.join(" "), root, mode)
    }
}

/// `%XX` sequences decoded (a path in a URL's query); anything else kept as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A rustls connector trusting the certificate authorities of the PEM file `root` (ring, TLS 1.2 and 1.3).
fn tls_connector(root: &str) -> Result<MakeRustlsConnect, StoreError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(root)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| StoreError(format!("cannot read the root certificates `{root}`: {e}")))?;
    if certificates.is_empty() {
        return Err(StoreError(format!("the root certificate file `{root}` holds no certificate")));
    }
    let mut roots = rustls::RootCertStore::empty();
    for certificate in certificates {
        roots
            .add(certificate)
            .map_err(|e| StoreError(format!("a certificate in `{root}` is not a usable root: {e}")))?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError(format!("cannot set up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The configuration may hold a password: only where it connects is shown.
        f.debug_struct("PostgresStore")
            .field("hosts", &self.target.config.get_hosts())
            .field("dbname", &self.target.config.get_dbname())
            .field("tls", &self.target.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// A connection and the statements prepared on it.
struct Conn {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl PostgresStore {
    /// The schema version this runtime writes and understands (the row of `permits_schema`); the same
    /// number means the same records as in an SQLite file ([`crate::SqliteStore::SCHEMA_VERSION`]).
    pub const SCHEMA_VERSION: u32 = 7;

    /// The key of the transaction-scoped advisory lock every transaction takes first (`"permits"` in
    /// ASCII). Advisory locks are per database: stores on different databases never wait for each other.
    pub const LOCK_KEY: i64 = 0x0070_6572_6d69_7473;

    /// How the message of a [`StoreError`] starts when the connection to the server was lost: the
    /// transaction was not committed (unless the loss happened during the commit, which the message says),
    /// and the operation is safe to retry; the next transaction connects again.
    pub const CONNECTION_LOST: &str = "the connection to PostgreSQL was lost";

    /// A client error of a statement run beside the store on a connection of its own (the service's keys)
    /// in the store's words: `doing` what could not be done (`read the keys`), and, when the connection is
    /// gone (`closed`: the client saw it close; or the server's SQLSTATE says it ends it), a message
    /// starting with [`PostgresStore::CONNECTION_LOST`], so a lost connection reads the same wherever it
    /// is found.
    pub fn client_error(doing: &str, e: &postgres::Error, closed: bool) -> StoreError {
        pg_error(doing, e, closed)
    }

    /// Connects to the database at `url` (`postgres://user:password@host:port/dbname`, or the key-value
    /// form `host=/tmp/dir port=5432 dbname=permits`; a host that is a directory is a Unix socket) and
    /// migrates it to [`PostgresStore::SCHEMA_VERSION`]. With `sslmode=require&sslrootcert=PATH` the
    /// connection is TLS, the server's certificate verified ([`PostgresTarget`]); otherwise it is not
    /// encrypted: use a Unix socket, loopback or a private network.
    ///
    /// Errors: the URL does not parse, or its TLS options do not ([`PostgresTarget::parse`]); the server
    /// cannot be reached, refuses the login or its certificate; the database is at a newer schema version
    /// than this runtime knows, or at one this store never wrote; the migration failed (it is rolled back,
    /// the database keeps its version).
    pub fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::with_target(PostgresTarget::parse(url)?)
    }

    /// [`PostgresStore::connect`] with a parsed configuration, without TLS.
    ///
    /// Errors: those of [`PostgresStore::connect`].
    pub fn with_config(config: Config) -> Result<PostgresStore, StoreError> {
        PostgresStore::with_target(PostgresTarget::plain(config))
    }

    /// [`PostgresStore::connect`] with a parsed target.
    ///
    /// Errors: those of [`PostgresStore::connect`].
    pub fn with_target(target: PostgresTarget) -> Result<PostgresStore, StoreError> {
        let mut conn = connect(&target)?;
        migrate(&mut conn.client)?;
        Ok(PostgresStore { target, conn: Mutex::new(Some(conn)) })
    }

    /// The schema version of the database (the row of `permits_schema`): [`PostgresStore::SCHEMA_VERSION`]
    /// once connected.
    ///
    /// Errors: the server's, or the connection was lost.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let mut guard = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let conn = self.connected(&mut guard)?;
        let version = schema_version(&mut conn.client);
        if conn.client.is_closed() {
            *guard = None;
        }
        version
    }

    /// The audit chain of the database `target` names, read without changing it (not migrated; under the
    /// store's lock, in a transaction that is rolled back): what `permitc audit verify postgres://…` checks.
    ///
    /// Errors: the server cannot be reached, refuses the login or its certificate; the database holds no
    /// permits ledger (no `permits_schema` table), or one at a schema version newer than this runtime knows;
    /// an event does not decode.
    pub fn read_audit_chain(target: &PostgresTarget) -> Result<Vec<ChainedEvent>, StoreError> {
        let mut conn = connect(target)?;
        match schema_version(&mut conn.client)? {
            0 => {
                return Err(StoreError(
                    "the database holds no permits ledger (it has no `permits_schema` table): name the database \
                     the hosts use"
                        .into(),
                ));
            }
            v if v > PostgresStore::SCHEMA_VERSION => {
                return Err(StoreError(format!(
                    "the database is at schema version {v}; this runtime knows up to {}",
                    PostgresStore::SCHEMA_VERSION
                )));
            }
            _ => {}
        }
        let store = PostgresStore { target: target.clone(), conn: Mutex::new(Some(conn)) };
        let mut tx = PostgresTransaction::begin(&store)?;
        tx.audit_events()
    }

    /// Every stored proposal, standing rule, task and lease whose record cannot be decoded, with why (as
    /// [`crate::SqliteStore::unreadable_records`]). Empty for a sound database.
    ///
    /// Errors: the server's, when the tables cannot be read at all.
    pub fn unreadable_records(&self) -> Result<Vec<String>, StoreError> {
        let mut tx = PostgresTransaction::begin(self)?;
        let mut out = Vec::new();
        for (kind, query) in [
            ("proposal", "SELECT id, record FROM proposals ORDER BY slot"),
            ("standing rule", "SELECT id, record FROM rules ORDER BY slot"),
            ("task", "SELECT key, record FROM tasks ORDER BY key"),
            ("lease", "SELECT key, record FROM leases ORDER BY key"),
        ] {
            for row in tx.query(query, &[], &format!("read the {kind}s"))? {
                let (id, text): (String, String) = (row.get(0), row.get(1));
                let decoded = match kind {
                    "proposal" => decode::<Proposal>(kind, &id, &text).map(|_| ()),
                    "standing rule" => decode::<StandingRule>(kind, &id, &text).map(|_| ()),
                    "lease" => decode::<Lease>(kind, &id, &text).map(|_| ()),
                    _ => decode::<Task>(kind, &id, &text).map(|_| ()),
                };
                if let Err(e) = decoded {
                    out.push(e.0);
                }
            }
        }
        Ok(out)
    }

    /// The connection, connecting again when there is none (it was lost).
    fn connected<'g>(&self, guard: &'g mut MutexGuard<'_, Option<Conn>>) -> Result<&'g mut Conn, StoreError> {
        if guard.as_ref().is_none_or(|c| c.client.is_closed()) {
            **guard = Some(connect(&self.target)?);
        }
        guard.as_mut().ok_or_else(|| StoreError("no connection".into()))
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // The client ends its connection on a small async runtime of its own, which cannot start on a
        // thread that drives another (a store dropped inside an async host, as `permitd` on shutdown):
        // it is dropped on a thread of its own.
        let conn = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(conn) = conn {
            std::thread::scope(|scope| {
                let _ =
                    std::thread::Builder::new().name("permits-pg-close".into()).spawn_scoped(scope, move || drop(conn));
            });
        }
    }
}

impl Store for PostgresStore {
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(PostgresTransaction::begin(self)?))
    }
}

/// A URL with its password (if any) replaced, for messages.
fn redact(url: &str) -> String {
    let url = redact_password_options(url);
    let url = url.as_str();
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let auth = &url[scheme + 3..at];
            match auth.find(':') {
                Some(colon) => format!("{}{}:***{}", &url[..scheme + 3], &auth[..colon], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// `text` with the value of every `password` option shown as `***`: libpq's key-value form
/// (`host=h password=secret`, `password = 'it''s'`), or a URL's query (`postgres://u@h/db?password=secret`).
fn redact_password_options(text: &str) -> String {
    let url = text.contains("://");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("password") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let boundary = out.chars().last().is_none_or(|c| c.is_whitespace() || c == '?' || c == '&');
        let after = &from["password".len()..];
        let value = after.trim_start();
        let Some(value) = value.strip_prefix('=').filter(|_| boundary) else {
            out.push_str("password");
            rest = after;
            continue;
        };
        let value = if url { value } else { value.trim_start() };
        let len = if url {
            value.find(['&', '#']).unwrap_or(value.len())
        } else if let Some(quoted) = value.strip_prefix('\'') {
            // Up to the closing quote; `\'` and `\\` inside are escapes.
            let mut end = quoted.len();
            let mut chars = quoted.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '\'' => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            1 + end
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        out.push_str(&from[..from.len() - value.len()]);
        out.push_str("***");
        rest = &value[len.min(value.len())..];
    }
    out.push_str(rest);
    out
}

fn connect(target: &PostgresTarget) -> Result<Conn, StoreError> {
    let mut client = target.connect()?;
    client
        .batch_execute(&format!("SET lock_timeout = '{}s'", LOCK_TIMEOUT.as_secs()))
        .map_err(|e| StoreError(format!("cannot set the lock timeout: {e}")))?;
    Ok(Conn { client, statements: HashMap::new() })
}

/// Why a connection could not be made, in the server's words and SQLSTATE or the socket's (the client's own
/// message alone is `db error` or `error connecting to server`). When the server is unreachable, shutting
/// down or starting up (no SQLSTATE, or class 08 or 57: a restart), the message says that nothing was done
/// and the operation is safe to retry; a refused login or an unknown database is not said to be.
fn connect_error(e: &postgres::Error) -> StoreError {
    let code = e.code().map(|c| c.code().to_string()).unwrap_or_default();
    let said = match (e.as_db_error(), std::error::Error::source(e)) {
        (Some(db), _) => format!("{} ({code})", db.message()),
        (None, Some(source)) => format!("{e}: {source}"),
        (None, None) => e.to_string(),
    };
    if e.as_db_error().is_none() || code.starts_with("08") || code.starts_with("57") {
        StoreError(format!(
            "cannot connect to PostgreSQL: {said}; nothing was done, and the operation is safe to retry"
        ))
    } else {
        StoreError(format!("cannot connect to PostgreSQL: {said}"))
    }
}

/// Maps a client error to a [`StoreError`] saying what could not be done, and whether the connection is
/// gone: the client saw it close, or the server said it ends it (SQLSTATE class 08, connection exception,
/// or 57, operator intervention: a shutdown, a terminated backend).
fn pg_error(doing: &str, e: &postgres::Error, closed: bool) -> StoreError {
    let code = e.code().map(|c| c.code().to_string()).unwrap_or_default();
    let said = match e.as_db_error() {
        Some(db) => format!("{} ({code})", db.message()),
        None => e.to_string(),
    };
    if closed || e.is_closed() || code.starts_with("08") || code.starts_with("57") {
        StoreError(format!(
            "{}: cannot {doing} ({said}); the transaction was not committed, and the operation is safe to retry",
            PostgresStore::CONNECTION_LOST
        ))
    } else {
        StoreError(format!("cannot {doing}: {said}"))
    }
}

fn schema_version(client: &mut impl GenericClient) -> Result<u32, StoreError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('permits_schema') IS NOT NULL", &[])
        .map_err(|e| pg_error("read the schema version", &e, false))?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let rows = client
        .query("SELECT version FROM permits_schema", &[])
        .map_err(|e| pg_error("read the schema version", &e, false))?;
    match rows.as_slice() {
        [row] => {
            let version: i32 = row.get(0);
            u32::try_from(version)
                .map_err(|_| StoreError(format!("the database's schema version {version} is not valid")))
        }
        _ => Err(StoreError(format!("the table `permits_schema` has {} rows instead of one", rows.len()))),
    }
}

/// Brings the database to [`PostgresStore::SCHEMA_VERSION`], in one transaction under the store's lock (two
/// hosts opening a new database at once: the second waits, then finds it migrated).
fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(|e| StoreError(format!("cannot begin the migration: {e}")))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PostgresStore::LOCK_KEY])
        .map_err(|e| StoreError(format!("cannot take the store's lock for the migration: {e}")))?;
    let mut version = schema_version(&mut tx)?;
    if version == 0 {
        tx.batch_execute(SCHEMA_V4).map_err(|e| {
            StoreError(format!("cannot create the schema (does the database hold another program's tables?): {e}"))
        })?;
        version = 4;
    }
    if version == 4 {
        tx.batch_execute(SCHEMA_V5_ADDS)
            .map_err(|e| StoreError(format!("cannot add the per-task ledger (schema version 5): {e}")))?;
        version = 5;
    }
    if version == 5 {
        tx.batch_execute(SCHEMA_V6_ADDS)
            .map_err(|e| StoreError(format!("cannot add the proposals' list columns (schema version 6): {e}")))?;
        fill_list_columns(&mut tx)?;
        version = 6;
    }
    if version == 6 {
        tx.batch_execute(SCHEMA_V7_ADDS)
            .map_err(|e| StoreError(format!("cannot add the task leases (schema version 7): {e}")))?;
        version = 7;
    }
    match version {
        PostgresStore::SCHEMA_VERSION => {}
        v if v > PostgresStore::SCHEMA_VERSION => {
            return Err(StoreError(format!(
                "the database is at schema version {v}; this runtime knows up to {}",
                PostgresStore::SCHEMA_VERSION
            )));
        }
        v => {
            return Err(StoreError(format!(
                "the database is at schema version {v}, which the PostgreSQL store never wrote (it starts at 4)"
            )));
        }
    }
    // Dropping `tx` on an error above rolls the migration back.
    tx.commit().map_err(|e| StoreError(format!("cannot commit the migration: {e}")))
}

/// Migration 5 → 6: the list columns of every proposal, from its record; a record that does not decode
/// keeps them empty (listed nowhere, as before).
fn fill_list_columns(tx: &mut postgres::Transaction<'_>) -> Result<(), StoreError> {
    let rows = tx
        .query("SELECT id, record FROM proposals ORDER BY slot", &[])
        .map_err(|e| StoreError(format!("cannot read the proposals to migrate them: {e}")))?;
    for row in rows {
        let (id, text): (String, String) = (row.get(0), row.get(1));
        let Ok(p) = decode::<Proposal>("proposal", &id, &text) else { continue };
        let expires_at = to_pg(p.expires_at, || format!("the expiry of proposal `{id}`"))?;
        tx.execute(
            "UPDATE proposals SET status = $2, decider = $3, requester = $4, decided_by = $5, agent = $6,
                 expires_at = $7 WHERE id = $1",
            &[
                &id,
                &p.status.as_str(),
                &crate::store::decider_key(&p),
                &p.requester,
                &p.decided_by,
                &p.agent,
                &expires_at,
            ],
        )
        .map_err(|e| StoreError(format!("cannot migrate the proposal `{id}`: {e}")))?;
    }
    Ok(())
}

/// An open transaction holding the store's connection and its advisory lock.
struct PostgresTransaction<'a> {
    guard: MutexGuard<'a, Option<Conn>>,
    committed: bool,
    /// A statement failed: PostgreSQL has aborted the transaction, and a `COMMIT` would roll it back while
    /// reporting success, so [`Transaction::commit`] refuses.
    failed: bool,
}

impl<'a> PostgresTransaction<'a> {
    fn begin(store: &'a PostgresStore) -> Result<PostgresTransaction<'a>, StoreError> {
        let mut guard = store.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let conn = store.connected(&mut guard)?;
        // One round trip: the simple query protocol runs both statements in order.
        let begun =
            conn.client.batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock({})", PostgresStore::LOCK_KEY));
        if let Err(e) = begun {
            let closed = conn.client.is_closed();
            // A failed lock leaves the server in an aborted transaction: end it, or drop the connection.
            if closed || conn.client.batch_execute("ROLLBACK").is_err() {
                *guard = None;
            }
            return Err(pg_error("begin a transaction (wait for the store's lock)", &e, closed));
        }
        Ok(PostgresTransaction { guard, committed: false, failed: false })
    }

    fn conn(&mut self) -> Result<&mut Conn, StoreError> {
        self.guard
            .as_mut()
            .ok_or_else(|| StoreError(format!("{}: the transaction was not committed", PostgresStore::CONNECTION_LOST)))
    }

    fn statement(&mut self, query: &'static str, doing: &str) -> Result<(&mut Client, Statement), StoreError> {
        if self.failed {
            return Err(StoreError(format!(
                "cannot {doing}: an earlier statement of the transaction failed, and it is rolled back"
            )));
        }
        // Marked failed until the statement succeeds (cleared by the caller).
        self.failed = true;
        let conn = self.conn()?;
        let statement = match conn.statements.get(query) {
            Some(s) => s.clone(),
            None => {
                let s = conn.client.prepare(query).map_err(|e| pg_error(doing, &e, conn.client.is_closed()))?;
                conn.statements.insert(query, s.clone());
                s
            }
        };
        Ok((&mut conn.client, statement))
    }

    fn query(
        &mut self,
        query: &'static str,
        params: &[&(dyn ToSql + Sync)],
        doing: &str,
    ) -> Result<Vec<Row>, StoreError> {
        let (client, statement) = self.statement(query, doing)?;
        let rows = client.query(&statement, params).map_err(|e| pg_error(doing, &e, client.is_closed()))?;
        self.failed = false;
        Ok(rows)
    }

    fn execute(&mut self, query: &'static str, params: &[&(dyn ToSql + Sync)], doing: &str) -> Result<u64, StoreError> {
        let (client, statement) = self.statement(query, doing)?;
        let count = client.execute(&statement, params).map_err(|e| pg_error(doing, &e, client.is_closed()))?;
        self.failed = false;
        Ok(count)
    }

    /// The records (`id`, `record` columns) a query returns, decoded, in order.
    fn records<T: DeserializeOwned + HasId>(
        &mut self,
        kind: &str,
        query: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.query(query, params, &format!("read the {kind}s"))?;
        rows.iter().map(|row| decode(kind, &row.get::<_, String>(0), &row.get::<_, String>(1))).collect()
    }

    /// The records a list query returns that decode: one record that does not decode affects only itself
    /// (spec §5a), and [`PostgresStore::unreadable_records`] reports it.
    fn readable_records<T: DeserializeOwned + HasId>(
        &mut self,
        kind: &str,
        query: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.query(query, params, &format!("read the {kind}s"))?;
        Ok(rows
            .iter()
            .filter_map(|row| decode(kind, &row.get::<_, String>(0), &row.get::<_, String>(1)).ok())
            .collect())
    }

    fn record<T: DeserializeOwned + HasId>(
        &mut self,
        kind: &str,
        query: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<T>, StoreError> {
        Ok(self.records(kind, query, params)?.into_iter().next())
    }

    /// The table installs a query (`seq`, `record` columns) returns; one that does not decode is an error.
    fn table_installs(&mut self, query: &'static str) -> Result<Vec<TableInstall>, StoreError> {
        let rows = self.query(query, &[], "read the installed tables")?;
        rows.iter()
            .map(|row| {
                let (seq, text): (i64, String) = (row.get(0), row.get(1));
                serde_json::from_str(&text)
                    .map_err(|e| StoreError(format!("the stored table install {seq} is corrupt: {e}")))
            })
            .collect()
    }
}

impl Drop for PostgresTransaction<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        if let Some(conn) = self.guard.as_mut()
            && (conn.client.is_closed() || conn.client.batch_execute("ROLLBACK").is_err())
        {
            // The server rolls back a transaction whose connection ends; the next `begin` connects again.
            *self.guard = None;
        }
    }
}

/// An unsigned value as PostgreSQL's `BIGINT` holds it.
/// The `WHERE` clause of a [`ProposalQuery`] on the list columns (`$1`, `$2`, … in order), with its values:
/// what [`ProposalQuery::matches`] says, through the indexes of schema version 6.
fn page_filter(query: &ProposalQuery) -> Result<(String, Vec<Box<dyn ToSql + Sync>>), StoreError> {
    // Every record that decodes has its columns (a corrupt one keeps them empty, and is no proposal).
    let mut clauses = vec!["status IS NOT NULL".to_string()];
    let mut values: Vec<Box<dyn ToSql + Sync>> = Vec::new();
    let next = |values: &mut Vec<Box<dyn ToSql + Sync>>, v: Box<dyn ToSql + Sync>| {
        values.push(v);
        format!("${}", values.len())
    };
    if let Some(status) = query.status {
        let m = next(&mut values, Box::new(status.as_str().to_string()));
        clauses.push(format!("status = {m}"));
    }
    if let Some(key) = &query.operation_key {
        let m = next(&mut values, Box::new(key.clone()));
        clauses.push(format!("operation_key = {m}"));
    }
    if let Some(agents) = &query.agents {
        let m = next(&mut values, Box::new(agents.clone()));
        clauses.push(format!("agent = ANY({m})"));
    }
    if let Some(d) = &query.deciders {
        let direct = next(&mut values, Box::new(d.direct.clone()));
        let shared = next(&mut values, Box::new(d.shared.clone()));
        let me = next(&mut values, Box::new(d.person.clone()));
        let own = next(&mut values, Box::new(d.own_requests));
        clauses.push(format!(
            "(decider = ANY({direct}) OR (decider = ANY({shared}) AND (requester IS NULL OR requester <> {me})) OR ({own} AND requester = {me}))"
        ));
    }
    if let Some(person) = &query.involving {
        let m = next(&mut values, Box::new(person.clone()));
        clauses.push(format!("(requester = {m} OR decided_by = {m})"));
    }
    if let Some(t) = query.open_at {
        let m = next(&mut values, Box::new(to_pg(t, || "the time of a list".to_string())?));
        clauses.push(format!("expires_at > {m}"));
    }
    Ok((clauses.join(" AND "), values))
}

fn to_pg(value: u64, what: impl FnOnce() -> String) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError(format!("{} is {value}: too large to store", what())))
}

/// An unsigned value read back from a `BIGINT`.
fn from_pg(value: i64, what: impl FnOnce() -> String) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError(format!("{} is corrupt: it is {value}", what())))
}

impl Transaction for PostgresTransaction<'_> {
    fn next_number(&mut self, sequence: &str) -> Result<u64, StoreError> {
        let rows = self.query(
            "INSERT INTO sequences (name, value) VALUES ($1, 1)
             ON CONFLICT (name) DO UPDATE SET value = sequences.value + 1 RETURNING value",
            &[&sequence],
            &format!("advance the sequence `{sequence}`"),
        )?;
        let value: i64 = rows.first().map(|r| r.get(0)).unwrap_or(0);
        from_pg(value, || format!("the stored sequence `{sequence}`"))
    }

    fn proposal(&mut self, id: &str) -> Result<Option<Proposal>, StoreError> {
        self.record("proposal", "SELECT id, record FROM proposals WHERE id = $1", &[&id])
    }

    fn proposal_by_fingerprint(
        &mut self,
        operation_key: &str,
        fingerprint: &str,
    ) -> Result<Option<Proposal>, StoreError> {
        self.record(
            "proposal",
            "SELECT id, record FROM proposals WHERE operation_key = $1 AND fingerprint = $2 ORDER BY slot LIMIT 1",
            &[&operation_key, &fingerprint],
        )
    }

    fn proposals_for_subject(
        &mut self,
        operation_key: &str,
        tool: &str,
        subject: &str,
    ) -> Result<Vec<Proposal>, StoreError> {
        self.readable_records(
            "proposal",
            "SELECT id, record FROM proposals WHERE operation_key = $1 AND tool = $2 AND subject = $3 ORDER BY slot",
            &[&operation_key, &tool, &subject],
        )
    }

    fn proposals(&mut self) -> Result<Vec<Proposal>, StoreError> {
        self.readable_records("proposal", "SELECT id, record FROM proposals ORDER BY slot", &[])
    }

    fn proposal_page(
        &mut self,
        query: &ProposalQuery,
        offset: usize,
        limit: usize,
    ) -> Result<ProposalPage, StoreError> {
        let (filter, values) = page_filter(query)?;
        let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect();
        let n = params.len();
        let count_sql = format!("SELECT count(*) FROM proposals WHERE {filter}");
        let page_sql = format!(
            "SELECT id, record FROM proposals WHERE slot IN (SELECT slot FROM proposals WHERE {filter} ORDER BY slot DESC LIMIT ${} OFFSET ${}) ORDER BY slot DESC",
            n + 1,
            n + 2
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let mut page_params = params.clone();
        page_params.push(&limit);
        page_params.push(&offset);
        if self.failed {
            return Err(StoreError(
                "cannot read a page of proposals: an earlier statement of the transaction failed, and it is rolled back"
                    .into(),
            ));
        }
        self.failed = true;
        let conn = self.conn()?;
        let doing = "read a page of proposals";
        let total: i64 = conn
            .client
            .query_one(count_sql.as_str(), &params)
            .map_err(|e| pg_error(doing, &e, conn.client.is_closed()))?
            .get(0);
        let rows = conn
            .client
            .query(page_sql.as_str(), &page_params)
            .map_err(|e| pg_error(doing, &e, conn.client.is_closed()))?;
        self.failed = false;
        let proposals = rows
            .iter()
            .filter_map(|row| decode::<Proposal>("proposal", &row.get::<_, String>(0), &row.get::<_, String>(1)).ok())
            // The record decides, not the columns.
            .filter(|p| query.matches(p))
            .collect();
        Ok(ProposalPage { proposals, total: usize::try_from(total).unwrap_or(0) })
    }

    fn proposal_counts(&mut self, query: &ProposalQuery) -> Result<Vec<ProposalCount>, StoreError> {
        let (filter, mut values) = page_filter(query)?;
        let person = query.deciders.as_ref().map_or(String::new(), |d| d.person.clone());
        values.push(Box::new(query.deciders.is_some()));
        values.push(Box::new(person));
        let n = values.len();
        let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect();
        let count_sql = format!(
            "SELECT decider, coalesce(${} AND requester = ${}, false), count(*) FROM proposals WHERE {filter} GROUP BY 1, 2 ORDER BY 1, 2",
            n - 1,
            n
        );
        if self.failed {
            return Err(StoreError(
                "cannot count the proposals: an earlier statement of the transaction failed, and it is rolled back"
                    .into(),
            ));
        }
        self.failed = true;
        let conn = self.conn()?;
        let rows = conn
            .client
            .query(count_sql.as_str(), &params)
            .map_err(|e| pg_error("count the proposals", &e, conn.client.is_closed()))?;
        self.failed = false;
        Ok(rows
            .iter()
            .map(|row| ProposalCount {
                decider: row.get(0),
                own: row.get(1),
                count: usize::try_from(row.get::<_, i64>(2)).unwrap_or(0),
            })
            .collect())
    }

    fn put_proposal(&mut self, proposal: &Proposal) -> Result<(), StoreError> {
        let record = encode("proposal", &proposal.id, proposal)?;
        let expires_at = to_pg(proposal.expires_at, || format!("the expiry of proposal `{}`", proposal.id))?;
        self.execute(
            "INSERT INTO proposals (id, operation_key, fingerprint, tool, subject, record, status, decider,
                 requester, decided_by, agent, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             ON CONFLICT (id) DO UPDATE SET operation_key = EXCLUDED.operation_key,
                 fingerprint = EXCLUDED.fingerprint, tool = EXCLUDED.tool, subject = EXCLUDED.subject,
                 record = EXCLUDED.record, status = EXCLUDED.status, decider = EXCLUDED.decider,
                 requester = EXCLUDED.requester, decided_by = EXCLUDED.decided_by, agent = EXCLUDED.agent,
                 expires_at = EXCLUDED.expires_at",
            &[
                &proposal.id,
                &proposal.operation_key,
                &proposal.fingerprint,
                &proposal.tool,
                &proposal.subject,
                &record,
                &proposal.status.as_str(),
                &crate::store::decider_key(proposal),
                &proposal.requester,
                &proposal.decided_by,
                &proposal.agent,
                &expires_at,
            ],
            &format!("store the proposal `{}`", proposal.id),
        )?;
        Ok(())
    }

    fn rules(&mut self) -> Result<Vec<StandingRule>, StoreError> {
        self.readable_records("standing rule", "SELECT id, record FROM rules ORDER BY slot", &[])
    }

    fn put_rule(&mut self, rule: &StandingRule) -> Result<(), StoreError> {
        let record = encode("standing rule", &rule.id, rule)?;
        self.execute(
            "INSERT INTO rules (id, record) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
            &[&rule.id, &record],
            &format!("store the standing rule `{}`", rule.id),
        )?;
        Ok(())
    }

    fn budget(&mut self, name: &str) -> Result<Option<BudgetRecord>, StoreError> {
        let rows = self.query(
            "SELECT installed_ceiling, spent FROM budgets WHERE name = $1",
            &[&name],
            &format!("read the budget `{name}`"),
        )?;
        let Some(row) = rows.first() else { return Ok(None) };
        let (installed_ceiling, spent): (i64, i64) = (row.get(0), row.get(1));
        Ok(Some(BudgetRecord {
            name: name.to_string(),
            installed_ceiling: from_pg(installed_ceiling, || format!("the installed ceiling of the budget `{name}`"))?,
            spent: from_pg(spent, || format!("the spending of the budget `{name}`"))?,
        }))
    }

    fn put_budget(&mut self, record: &BudgetRecord) -> Result<(), StoreError> {
        let name = &record.name;
        let installed_ceiling =
            to_pg(record.installed_ceiling, || format!("the installed ceiling of the budget `{name}`"))?;
        let spent = to_pg(record.spent, || format!("the spending of the budget `{name}`"))?;
        self.execute(
            "INSERT INTO budgets (name, installed_ceiling, spent) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET installed_ceiling = EXCLUDED.installed_ceiling, spent = EXCLUDED.spent",
            &[name, &installed_ceiling, &spent],
            &format!("store the budget `{name}`"),
        )?;
        Ok(())
    }

    fn reservation(&mut self, holder: &str) -> Result<Option<Reservation>, StoreError> {
        let rows = self.query(
            "SELECT budget, amount, created_at, task FROM reservations WHERE holder = $1",
            &[&holder],
            &format!("read the reservation of `{holder}`"),
        )?;
        let Some(row) = rows.first() else { return Ok(None) };
        let (budget, amount, created_at, task): (String, i64, i64, Option<String>) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        Ok(Some(Reservation {
            holder: holder.to_string(),
            budget,
            amount: from_pg(amount, || format!("the amount of the reservation of `{holder}`"))?,
            created_at: from_pg(created_at, || format!("the time of the reservation of `{holder}`"))?,
            task,
        }))
    }

    fn put_reservation(&mut self, reservation: &Reservation) -> Result<(), StoreError> {
        let holder = &reservation.holder;
        let amount = to_pg(reservation.amount, || format!("the amount of the reservation of `{holder}`"))?;
        let created_at = to_pg(reservation.created_at, || format!("the time of the reservation of `{holder}`"))?;
        self.execute(
            "INSERT INTO reservations (holder, budget, amount, created_at, task) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (holder) DO UPDATE SET budget = EXCLUDED.budget, amount = EXCLUDED.amount,
                 created_at = EXCLUDED.created_at, task = EXCLUDED.task",
            &[holder, &reservation.budget, &amount, &created_at, &reservation.task],
            &format!("store the reservation of `{holder}`"),
        )?;
        Ok(())
    }

    fn remove_reservation(&mut self, holder: &str) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM reservations WHERE holder = $1",
            &[&holder],
            &format!("remove the reservation of `{holder}`"),
        )?;
        Ok(())
    }

    fn reserved_total(&mut self, budget: &str) -> Result<u64, StoreError> {
        // SUM of BIGINT is NUMERIC in PostgreSQL: cast back, an overflow being the server's error.
        let rows = self.query(
            "SELECT COALESCE(SUM(amount), 0)::BIGINT FROM reservations WHERE budget = $1",
            &[&budget],
            &format!("sum the reservations of the budget `{budget}`"),
        )?;
        let total: i64 = rows.first().map(|r| r.get(0)).unwrap_or(0);
        from_pg(total, || format!("the sum of the reservations of the budget `{budget}`"))
    }

    fn reserved_for_task(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        let rows = self.query(
            "SELECT COALESCE(SUM(amount), 0)::BIGINT FROM reservations WHERE budget = $1 AND task = $2",
            &[&budget, &task],
            &format!("sum the reservations of task `{task}` in the budget `{budget}`"),
        )?;
        let total: i64 = rows.first().map(|r| r.get(0)).unwrap_or(0);
        from_pg(total, || format!("the sum of the reservations of task `{task}` in the budget `{budget}`"))
    }

    fn task_spent(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        let rows = self.query(
            "SELECT spent FROM task_spent WHERE budget = $1 AND task = $2",
            &[&budget, &task],
            &format!("read what task `{task}` spent from the budget `{budget}`"),
        )?;
        let Some(row) = rows.first() else { return Ok(0) };
        from_pg(row.get(0), || format!("what task `{task}` spent from the budget `{budget}`"))
    }

    fn put_task_spent(&mut self, budget: &str, task: &str, spent: u64) -> Result<(), StoreError> {
        let value = to_pg(spent, || format!("what task `{task}` spent from the budget `{budget}`"))?;
        self.execute(
            "INSERT INTO task_spent (budget, task, spent) VALUES ($1, $2, $3)
             ON CONFLICT (budget, task) DO UPDATE SET spent = EXCLUDED.spent",
            &[&budget, &task, &value],
            &format!("store what task `{task}` spent from the budget `{budget}`"),
        )?;
        Ok(())
    }

    fn run(&mut self, id: &str) -> Result<Option<Run>, StoreError> {
        self.record("run", "SELECT id, record FROM runs WHERE id = $1", &[&id])
    }

    fn run_by_token(&mut self, token: &str) -> Result<Option<Run>, StoreError> {
        self.record("run", "SELECT id, record FROM runs WHERE token = $1", &[&token])
    }

    fn put_run(&mut self, run: &Run) -> Result<(), StoreError> {
        let record = encode("run", &run.id, run)?;
        self.execute(
            "INSERT INTO runs (id, token, record) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token, record = EXCLUDED.record",
            &[&run.id, &run.token, &record],
            &format!("store the run `{}`", run.id),
        )?;
        Ok(())
    }

    fn audit_head(&mut self) -> Result<Option<AuditHead>, StoreError> {
        let rows = self.query(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            &[],
            "read the head of the audit chain",
        )?;
        let Some(row) = rows.first() else { return Ok(None) };
        let (seq, hash): (i64, String) = (row.get(0), row.get(1));
        Ok(Some(AuditHead { seq: from_pg(seq, || "the head of the audit chain".to_string())?, hash }))
    }

    fn append_audit(&mut self, event: &ChainedEvent) -> Result<(), StoreError> {
        let seq = to_pg(event.seq, || "the place of an audit event".to_string())?;
        let text = serde_json::to_string(&event.event)
            .map_err(|e| StoreError(format!("cannot encode audit event {}: {e}", event.seq)))?;
        self.execute(
            "INSERT INTO audit (seq, prev, hash, event) VALUES ($1, $2, $3, $4)",
            &[&seq, &event.prev, &event.hash, &text],
            &format!("store audit event {}", event.seq),
        )?;
        Ok(())
    }

    fn audit_events(&mut self) -> Result<Vec<ChainedEvent>, StoreError> {
        let rows = self.query("SELECT seq, prev, hash, event FROM audit ORDER BY seq", &[], "read the audit chain")?;
        rows.iter()
            .map(|row| {
                let (seq, prev, hash, text): (i64, String, String, String) =
                    (row.get(0), row.get(1), row.get(2), row.get(3));
                let seq = from_pg(seq, || "the place of an audit event".to_string())?;
                let event = serde_json::from_str(&text)
                    .map_err(|e| StoreError(format!("the stored audit event {seq} is corrupt: {e}")))?;
                Ok(ChainedEvent { seq, prev, hash, event })
            })
            .collect()
    }

    fn installed_tables(&mut self) -> Result<Vec<TableInstall>, StoreError> {
        self.table_installs("SELECT seq, record FROM installed_tables ORDER BY seq")
    }

    fn current_table(&mut self) -> Result<Option<TableInstall>, StoreError> {
        Ok(self.table_installs("SELECT seq, record FROM installed_tables ORDER BY seq DESC LIMIT 1")?.pop())
    }

    fn put_installed_table(&mut self, install: &TableInstall) -> Result<(), StoreError> {
        let seq = to_pg(install.seq, || "the place of a table install".to_string())?;
        let record = encode("table install", &install.table_digest, install)?;
        self.execute(
            "INSERT INTO installed_tables (seq, record) VALUES ($1, $2)",
            &[&seq, &record],
            &format!("record the install of table `{}`", install.table_digest),
        )?;
        Ok(())
    }

    fn task(&mut self, key: &str) -> Result<Option<Task>, StoreError> {
        self.record("task", "SELECT key, record FROM tasks WHERE key = $1", &[&key])
    }

    fn put_task(&mut self, task: &Task) -> Result<(), StoreError> {
        let record = encode("task", &task.key, task)?;
        self.execute(
            "INSERT INTO tasks (key, record) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record",
            &[&task.key, &record],
            &format!("store the task `{}`", task.key),
        )?;
        Ok(())
    }

    fn lease(&mut self, key: &str) -> Result<Option<Lease>, StoreError> {
        self.record("lease", "SELECT key, record FROM leases WHERE key = $1", &[&key])
    }

    fn put_lease(&mut self, lease: &Lease) -> Result<(), StoreError> {
        let record = encode("lease", &lease.key, lease)?;
        self.execute(
            "INSERT INTO leases (key, record) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record",
            &[&lease.key, &record],
            &format!("store the lease on task `{}`", lease.key),
        )?;
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.finish(false)
    }

    fn commit_lazily(mut self: Box<Self>, _when: crate::Lazily) -> Result<(), StoreError> {
        // The server's WAL writer flushes it within `wal_writer_delay`, for both kinds.
        self.finish(true)
    }
}

impl PostgresTransaction<'_> {
    /// `COMMIT`; with `lazy`, after `SET LOCAL synchronous_commit = off` ([`Transaction::commit_lazily`]):
    /// the server answers before its WAL record is flushed.
    fn finish(&mut self, lazy: bool) -> Result<(), StoreError> {
        if self.failed {
            return Err(StoreError(
                "cannot commit: a statement of the transaction failed, and it is rolled back".into(),
            ));
        }
        let conn = self.conn()?;
        let commit = if lazy { "SET LOCAL synchronous_commit = off; COMMIT" } else { "COMMIT" };
        match conn.client.batch_execute(commit) {
            Ok(()) => {
                self.committed = true;
                Ok(())
            }
            Err(e) if conn.client.is_closed() || e.is_closed() => {
                // Dropping `self` forgets the connection; the next `begin` connects again.
                Err(StoreError(format!(
                    "{} during the commit ({e}): the transaction was committed whole or not at all; read the \
                     record again before retrying",
                    PostgresStore::CONNECTION_LOST
                )))
            }
            // A commit the server refused (a deferred constraint): the transaction is rolled back.
            Err(e) => Err(StoreError(format!("cannot commit the transaction: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    //! What only the PostgreSQL store has: its schema version in a table, a database holding another
    //! program's tables, lost connections, a failed statement, values a `BIGINT` cannot hold. Everything every
    //! store does is in the conformance suite (`src/conformance.rs`), run on this store too.

    use std::time::Instant;

    use super::*;
    use crate::conformance::{TestDatabase, budget, proposal, reservation, run};

    fn admin(db: &TestDatabase) -> Client {
        let mut config = db.admin.clone();
        config.dbname(&db.name);
        config.connect(NoTls).expect("connect to the test database")
    }

    /// The test database's URL with `options` appended, and the test server's certificate (`.ci/postgres`
    /// prints `PERMITS_TEST_POSTGRES_CA`).
    fn tls_url(db: &TestDatabase, options: &str) -> (String, String) {
        let base = std::env::var(crate::conformance::POSTGRES_VARIABLE).expect("the test server's URL");
        let ca = std::env::var("PERMITS_TEST_POSTGRES_CA").unwrap_or_else(|_| {
            panic!("the TLS tests need PERMITS_TEST_POSTGRES_CA, the test server's certificate: `eval \"$(.ci/postgres start)\"` sets it")
        });
        let server = base.rsplit_once('/').map_or(base.as_str(), |(server, _)| server);
        (format!("{server}/{}{}", db.name, options.replace("{ca}", &ca)), ca)
    }

    #[test]
    fn passwords_are_redacted_in_urls_and_key_value_strings() {
        for (given, shown) in [
            ("postgres://permits:hunter2@h:5432/db", "postgres://permits:***@h:5432/db"),
            (
                "postgres://permits@h/db?password=hunter2&sslmode=require",
                "postgres://permits@h/db?password=***&sslmode=require",
            ),
            ("host=h user=permits password=hunter2 dbname=x", "host=h user=permits password=*** dbname=x"),
            ("password = hunter2 host=h", "password = *** host=h"),
            ("host=h password='hunter 2\\'s' dbname=x", "host=h password=*** dbname=x"),
            ("host=h password=hunter2", "host=h password=***"),
            ("host=h dbname=passwords", "host=h dbname=passwords"),
            ("host=h dbname=x", "host=h dbname=x"),
        ] {
            assert_eq!(redact(given), shown, "{given}");
        }
    }

    fn connection_uses_tls(client: &mut Client) -> bool {
        client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).expect("pg_stat_ssl").get(0)
    }

    #[test]
    fn sslmode_require_connects_over_tls_and_verifies_the_server() {
        let db = TestDatabase::new("tls");
        let (url, _) = tls_url(&db, "?sslmode=require&sslrootcert={ca}");
        let target = PostgresTarget::parse(&url).expect("parse");
        assert!(target.uses_tls());
        assert!(connection_uses_tls(&mut target.connect().expect("a TLS connection")));
        // The store itself, over TLS: migrated, and a transaction commits.
        let store = PostgresStore::connect(&url).expect("the store over TLS");
        assert_eq!(store.schema_version().expect("version"), PostgresStore::SCHEMA_VERSION);
        let mut tx = store.begin().expect("begin");
        assert_eq!(tx.next_number("proposal").expect("next"), 1);
        tx.commit().expect("commit");
        // libpq's stricter names mean the same here (the name is always verified), and so does the key-value
        // form.
        let (verify_full, _) = tls_url(&db, "?sslmode=verify-full&sslrootcert={ca}&application_name=permits");
        assert!(connection_uses_tls(&mut PostgresTarget::parse(&verify_full).expect("parse").connect().expect("tls")));
        // Without sslmode the connection is plain, as before.
        let (plain, _) = tls_url(&db, "");
        let target = PostgresTarget::parse(&plain).expect("parse");
        assert!(!target.uses_tls());
        assert!(!connection_uses_tls(&mut target.connect().expect("a plain connection")));
    }

    #[test]
    fn a_server_certificate_that_does_not_verify_is_refused() {
        let db = TestDatabase::new("tls-wrong-ca");
        // Another self-signed certificate for the same names: not the server's.
        let dir = std::env::temp_dir().join(format!("permits-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let other = dir.join("other.crt");
        let made = std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
            .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
            .arg(dir.join("other.key"))
            .arg("-out")
            .arg(&other)
            .output()
            .expect("the `openssl` command");
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let (url, _) = tls_url(&db, &format!("?sslmode=require&sslrootcert={}", other.display()));
        let err = PostgresStore::connect(&url).expect_err("an unknown issuer");
        assert!(err.0.starts_with("cannot connect to PostgreSQL: "), "{err}");
        assert!(err.0.contains("UnknownIssuer") || err.0.contains("certificate"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tls_options_that_cannot_work_are_clear_errors() {
        let err = PostgresTarget::parse("postgres://permits@127.0.0.1:1/db?sslmode=require").expect_err("no root");
        assert_eq!(
            err.0,
            "`sslmode=require` needs `sslrootcert=PATH`: the certificate authority (PEM) the server's certificate is verified with"
        );
        let err = PostgresTarget::parse("postgres://permits@127.0.0.1:1/db?sslmode=require&sslrootcert=/no/such.pem")
            .expect_err("no file");
        assert!(err.0.starts_with("cannot read the root certificates `/no/such.pem`: "), "{err}");
        let empty = std::env::temp_dir().join(format!("permits-empty-{}.pem", std::process::id()));
        std::fs::write(&empty, "no certificate here\n").expect("write");
        let err = PostgresTarget::parse(&format!("host=127.0.0.1 sslmode=verify-ca sslrootcert={}", empty.display()))
            .expect_err("nothing in it");
        assert_eq!(err.0, format!("the root certificate file `{}` holds no certificate", empty.display()));
        let _ = std::fs::remove_file(&empty);
        let err = PostgresTarget::parse("postgres://u:secret@h/db?sslmode=sometimes").expect_err("a bad mode");
        assert_eq!(err.0, "`sslmode` is `disable`, `prefer`, `require`, `verify-ca` or `verify-full`, not `sometimes`");
        let err = PostgresTarget::parse("postgres://u:secret@h/db?sslmod=require").expect_err("a misspelled option");
        assert!(
            err.0.starts_with("`postgres://u:***@h/db?sslmod=require` is not a PostgreSQL connection string"),
            "{err}"
        );
    }

    #[test]
    fn the_tls_options_are_taken_out_of_both_forms() {
        let (rest, root, mode) =
            split_tls_options("postgres://u@h:5/db?application_name=x&sslmode=require&sslrootcert=%2Fetc%2Fca.pem");
        assert_eq!(
            (rest.as_str(), root.as_deref(), mode.as_deref()),
            ("postgres://u@h:5/db?application_name=x", Some("/etc/ca.pem"), Some("require"))
        );
        let (rest, root, mode) = split_tls_options("postgres://u@h/db?sslrootcert=/ca.pem");
        assert_eq!((rest.as_str(), root.as_deref(), mode), ("postgres://u@h/db", Some("/ca.pem"), None));
        let (rest, root, mode) = split_tls_options("host=h sslmode=verify-full sslrootcert='/ca.pem' dbname=p");
        assert_eq!(
            (rest.as_str(), root.as_deref(), mode.as_deref()),
            ("host=h dbname=p", Some("/ca.pem"), Some("verify-full"))
        );
        assert_eq!(split_tls_options("postgres://u@h/db"), ("postgres://u@h/db".to_string(), None, None));
    }

    /// Ends every other connection to the test database, as a server restart or a network cut does.
    fn cut_connections(db: &TestDatabase) -> u64 {
        let mut client = admin(db);
        let rows = client
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&db.name],
            )
            .expect("terminate");
        rows.len() as u64
    }

    #[test]
    fn a_new_database_gets_the_current_schema() {
        let db = TestDatabase::new("schema");
        let store = PostgresStore::with_config(db.config.clone()).expect("connect");
        assert_eq!(store.schema_version().expect("version"), PostgresStore::SCHEMA_VERSION);
        // Connecting again does not migrate again: the one row stays.
        drop(PostgresStore::with_config(db.config.clone()).expect("connect again"));
        let rows = admin(&db).query("SELECT version FROM permits_schema", &[]).expect("read");
        assert_eq!(rows.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>(), [7]);
        assert!(store.unreadable_records().expect("scan").is_empty());
    }

    #[test]
    fn hosts_connecting_to_a_new_database_at_once_migrate_it_once() {
        let db = TestDatabase::new("migrate-race");
        let stores: Vec<Result<PostgresStore, StoreError>> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                (0..4).map(|_| scope.spawn(|| PostgresStore::with_config(db.config.clone()))).collect();
            handles.into_iter().map(|h| h.join().expect("joined")).collect()
        });
        for store in &stores {
            assert_eq!(
                store.as_ref().map(|s| s.schema_version().ok()).ok().flatten(),
                Some(PostgresStore::SCHEMA_VERSION),
                "{store:?}"
            );
        }
    }

    #[test]
    fn a_newer_or_unknown_version_is_refused_and_left_untouched() {
        let db = TestDatabase::new("too-new");
        admin(&db)
            .batch_execute(
                "CREATE TABLE permits_schema (version INTEGER NOT NULL); INSERT INTO permits_schema VALUES (8)",
            )
            .expect("version 8");
        let err = PostgresStore::with_config(db.config.clone()).expect_err("refused");
        assert_eq!(err.0, "the database is at schema version 8; this runtime knows up to 7");
        admin(&db).batch_execute("UPDATE permits_schema SET version = 2").expect("version 2");
        let err = PostgresStore::with_config(db.config.clone()).expect_err("refused");
        assert_eq!(
            err.0,
            "the database is at schema version 2, which the PostgreSQL store never wrote (it starts at 4)"
        );
        let mut client = admin(&db);
        let version: i32 = client.query_one("SELECT version FROM permits_schema", &[]).expect("read").get(0);
        assert_eq!(version, 2);
        let tables: bool = client.query_one("SELECT to_regclass('proposals') IS NULL", &[]).expect("read").get(0);
        assert!(tables, "nothing was created");
    }

    /// Migration 4 → 5 (spec §6 "Per task"), as SQLite's: the reservations held before are tagged with their
    /// holder's operation key; one with no record to trace stays untagged; no task has spent anything yet.
    #[test]
    fn a_version_4_database_gains_reservations_by_task() {
        let db = TestDatabase::new("migrate-4-5");
        let p = proposal(1, None, None);
        let mut r = run(1, "tok-1");
        r.operation_key = "order-7".into();
        {
            let mut client = admin(&db);
            client.batch_execute(SCHEMA_V4).expect("the version-4 schema");
            let record = serde_json::to_string(&p).expect("encode");
            client
                .execute(
                    "INSERT INTO proposals (id, operation_key, fingerprint, tool, subject, record) VALUES ($1, $2, $3, $4, $5, $6)",
                    &[&p.id, &p.operation_key, &p.fingerprint, &p.tool, &p.subject, &record],
                )
                .expect("a proposal");
            let record = serde_json::to_string(&r).expect("encode");
            client
                .execute("INSERT INTO runs (id, token, record) VALUES ('A-1', 'tok-1', $1)", &[&record])
                .expect("a run");
            client
                .batch_execute(
                    "INSERT INTO budgets VALUES ('Purchases', 100000, 2500);
                     INSERT INTO reservations VALUES ('P-1', 'Purchases', 700, 1700000200);
                     INSERT INTO reservations VALUES ('A-1', 'Purchases', 200, 1700000200);
                     INSERT INTO reservations VALUES ('A-2', 'Purchases', 100, 1700000200);",
                )
                .expect("reservations of version 4");
        }
        let store = PostgresStore::with_config(db.config.clone()).expect("connect and migrate");
        assert_eq!(store.schema_version().expect("version"), PostgresStore::SCHEMA_VERSION);
        let mut tx = store.begin().expect("begin");
        // Migration 5 → 6 filled the list columns from the record: the proposal is on its requester's list.
        let query = ProposalQuery {
            status: Some(crate::Status::Waiting),
            deciders: Some(crate::store::DeciderQuery {
                direct: vec!["requester:Mia".into()],
                shared: vec![],
                person: "Mia".into(),
                own_requests: false,
            }),
            ..ProposalQuery::default()
        };
        let page = tx.proposal_page(&query, 0, 10).expect("a page");
        assert_eq!((page.total, page.proposals.len()), (1, 1));
        assert_eq!(tx.reservation("P-1").expect("read").and_then(|r| r.task).as_deref(), Some("order-1"));
        assert_eq!(tx.reservation("A-1").expect("read").and_then(|r| r.task).as_deref(), Some("order-7"));
        assert_eq!(tx.reservation("A-2").expect("read").map(|r| r.task), Some(None), "nothing to trace it to");
        assert_eq!(tx.reserved_for_task("Purchases", "order-1").expect("sum"), 700);
        assert_eq!(tx.reserved_total("Purchases").expect("sum"), 1_000);
        assert_eq!(tx.task_spent("Purchases", "order-1").expect("read"), 0);
        assert_eq!(tx.budget("Purchases").expect("read"), Some(budget()));
    }

    #[test]
    fn another_programs_tables_stop_the_migration_and_nothing_is_created() {
        let db = TestDatabase::new("other-program");
        admin(&db)
            .batch_execute("CREATE TABLE rules (name TEXT); INSERT INTO rules VALUES ('theirs')")
            .expect("another program's table");
        let err = PostgresStore::with_config(db.config.clone()).expect_err("refused");
        assert!(
            err.0.starts_with("cannot create the schema (does the database hold another program's tables?)"),
            "{err}"
        );
        let mut client = admin(&db);
        let row = client
            .query_one("SELECT to_regclass('permits_schema') IS NULL, to_regclass('proposals') IS NULL", &[])
            .expect("read");
        assert_eq!((row.get::<_, bool>(0), row.get::<_, bool>(1)), (true, true), "the migration was rolled back whole");
        let theirs: String = client.query_one("SELECT name FROM rules", &[]).expect("read").get(0);
        assert_eq!(theirs, "theirs");
    }

    #[test]
    fn a_bad_url_or_an_unreachable_server_is_an_error() {
        let err = PostgresStore::connect("postgres://someone:secret@[::1").expect_err("refused");
        assert!(err.0.starts_with("`postgres://someone:***@[::1` is not a PostgreSQL connection string"), "{err}");
        let err = PostgresStore::connect("host=127.0.0.1 port=1 user=nobody connect_timeout=2").expect_err("refused");
        assert!(err.0.starts_with("cannot connect to PostgreSQL: "), "{err}");
        // Why, in the socket's words (the client's own message is only `error connecting to server`).
        assert!(err.0.contains("Connection refused"), "{err}");
        assert!(err.0.ends_with("nothing was done, and the operation is safe to retry"), "{err}");
    }

    #[test]
    fn a_lost_connection_is_a_typed_error_nothing_is_written_and_a_retry_works() {
        let db = TestDatabase::new("lost");
        let store = PostgresStore::with_config(db.config.clone()).expect("connect");
        let mut tx = store.begin().expect("begin");
        tx.put_proposal(&proposal(1, None, None)).expect("put");
        tx.put_budget(&budget()).expect("put");
        assert!(cut_connections(&db) >= 1, "the store's connection was cut");
        let err = tx.put_reservation(&reservation("P-1", 5)).expect_err("the connection is gone");
        assert!(err.0.starts_with(PostgresStore::CONNECTION_LOST), "{err}");
        assert!(err.0.contains("not committed") && err.0.contains("safe to retry"), "{err}");
        let err = tx.commit().expect_err("nothing to commit on");
        assert!(err.0.contains("rolled back") || err.0.starts_with(PostgresStore::CONNECTION_LOST), "{err}");
        // The next transaction connects again, and sees nothing of the lost one.
        let mut tx = store.begin().expect("connects again");
        assert_eq!(tx.proposal("P-1").expect("read"), None);
        assert_eq!(tx.budget("Purchases").expect("read"), None);
        tx.put_proposal(&proposal(1, None, None)).expect("retry");
        tx.commit().expect("commit");
        let mut tx = store.begin().expect("begin");
        assert_eq!(tx.proposal("P-1").expect("read"), Some(proposal(1, None, None)));
    }

    #[test]
    fn a_host_cut_off_mid_transaction_releases_the_lock_and_writes_nothing() {
        let db = TestDatabase::new("cut-holder");
        let holder = PostgresStore::with_config(db.config.clone()).expect("connect");
        let other = PostgresStore::with_config(db.config.clone()).expect("connect");
        let mut tx = holder.begin().expect("begin");
        tx.put_proposal(&proposal(1, None, None)).expect("put");
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                let started = Instant::now();
                let mut tx = other.begin().expect("the other begins once the holder is gone");
                (started.elapsed(), tx.proposal("P-1").expect("read"))
            });
            std::thread::sleep(Duration::from_millis(300));
            assert!(!waiter.is_finished(), "the other waits for the holder's lock");
            // The holder's process dies: its connection ends (only the holder's is cut: the waiter's own
            // connection is the other backend waiting on the lock, so cut the holder's by its pid).
            let mut client = admin(&db);
            client
                .batch_execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()
                     AND pid <> pg_backend_pid() AND wait_event_type IS DISTINCT FROM 'Lock'",
                )
                .expect("cut the holder");
            let (waited, seen) = waiter.join().expect("joined");
            assert!(waited >= Duration::from_millis(300), "{waited:?}");
            assert_eq!(seen, None, "nothing of the cut transaction is visible");
        });
        drop(tx);
    }

    #[test]
    fn a_failed_statement_makes_the_commit_fail_and_nothing_is_written() {
        let db = TestDatabase::new("failed-statement");
        let store = PostgresStore::with_config(db.config.clone()).expect("connect");
        let mut tx = store.begin().expect("begin");
        tx.put_run(&run(1, "tok-1")).expect("put");
        tx.commit().expect("commit");
        let mut tx = store.begin().expect("begin");
        tx.put_proposal(&proposal(1, None, None)).expect("put");
        let err = tx.put_run(&run(2, "tok-1")).expect_err("a token used twice");
        assert!(err.0.starts_with("cannot store the run `A-2`"), "{err}");
        let err = tx.proposal("P-1").expect_err("the transaction is aborted");
        assert!(err.0.contains("an earlier statement of the transaction failed"), "{err}");
        let err = tx.commit().expect_err("a commit would silently roll back");
        assert_eq!(err.0, "cannot commit: a statement of the transaction failed, and it is rolled back");
        let mut tx = store.begin().expect("the connection is usable again");
        assert_eq!(tx.proposal("P-1").expect("read"), None);
        assert_eq!(tx.run("A-2").expect("read"), None);
        assert_eq!(tx.run("A-1").expect("read"), Some(run(1, "tok-1")));
    }

    #[test]
    fn values_a_bigint_cannot_hold_are_refused_and_corrupt_rows_are_errors() {
        let db = TestDatabase::new("values");
        let store = PostgresStore::with_config(db.config.clone()).expect("connect");
        let mut tx = store.begin().expect("begin");
        let err = tx.put_budget(&BudgetRecord { spent: u64::MAX, ..budget() }).expect_err("too large");
        assert_eq!(err.0, format!("the spending of the budget `Purchases` is {}: too large to store", u64::MAX));
        drop(tx);
        let mut client = admin(&db);
        client
            .batch_execute(
                "INSERT INTO budgets VALUES ('Purchases', 100, -1);
                 INSERT INTO proposals (id, operation_key, fingerprint, tool, record) VALUES ('P-1', 'k', 'f', 't', '{oops');",
            )
            .expect("corrupt rows");
        let mut tx = store.begin().expect("begin");
        let err = tx.budget("Purchases").expect_err("corrupt");
        assert_eq!(err.0, "the spending of the budget `Purchases` is corrupt: it is -1");
        let err = tx.proposal("P-1").expect_err("corrupt");
        assert!(err.0.starts_with("the stored proposal `P-1` is corrupt: "), "{err}");
        assert!(tx.proposals().expect("the list skips it").is_empty());
        drop(tx);
        let unreadable = store.unreadable_records().expect("scan");
        assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    }

    #[test]
    fn the_debug_form_shows_no_password() {
        let config: Config = "postgres://someone:secret@127.0.0.1:1/db".parse().expect("parse");
        let store = PostgresStore { target: PostgresTarget::plain(config), conn: Mutex::new(None) };
        let shown = format!("{store:?}");
        assert!(!shown.contains("secret") && shown.contains("db"), "{shown}");
    }
}
