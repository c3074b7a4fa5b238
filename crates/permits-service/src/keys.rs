//! API keys (issue #16 "Host keys"): a **host** key acts for the agents it lists and never as a person; a
//! **person** key acts only as its person (the runtime then checks what that person may decide); an
//! **admin** key installs tables. No host key can approve, reject for a person, revoke, resolve or make a
//! rule: those routes take a person key, whatever else a caller holds.
//!
//! A key is 32 bytes from the operating system's generator (`getrandom`), written as
//! `permits_<kind>_<64 hex digits>`, and shown once, when it is made. The service keeps only its SHA-256
//! digest, in the table `service_keys` of the store's database (beside the runtime's tables, in the
//! service's own schema): the SQLite file, or the PostgreSQL database of a `postgres://` store, so every
//! instance of the service on that database knows every key. A slow password hash (argon2, bcrypt) protects **low-entropy** secrets from
//! guessing; a 256-bit random token cannot be guessed, so its SHA-256 digest is as safe to keep, and
//! checking it costs a microsecond instead of the milliseconds a password hash spends on every request.
//! Keys are revoked, never deleted, so the audit's `who` stays explainable. The same database keeps the
//! inbox's password hashes and sessions ([`crate::people`]).

use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// What a key may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// A host of the listed agents: decide, call, claim and run executions, withdraw, settle, read.
    Host,
    /// A person: approve, reject, revoke, make and revoke standing rules, resolve — only as that person.
    Person,
    /// A supervisor's process: install a table.
    Admin,
}

impl KeyKind {
    /// The kind as written in keys and in the store: `host`, `person`, `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyKind::Host => "host",
            KeyKind::Person => "person",
            KeyKind::Admin => "admin",
        }
    }

    fn parse(text: &str) -> Option<KeyKind> {
        match text {
            "host" => Some(KeyKind::Host),
            "person" => Some(KeyKind::Person),
            "admin" => Some(KeyKind::Admin),
            _ => None,
        }
    }
}

/// A key as the service keeps it (never the token itself).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Key {
    /// Its id (`K-1`), for listing and revoking.
    pub id: String,
    /// What it may do.
    pub kind: KeyKind,
    /// The agents a host key acts for (empty for the other kinds).
    pub agents: Vec<String>,
    /// The person a person key acts as.
    pub person: Option<String>,
    /// A note for whoever lists the keys.
    pub label: Option<String>,
    /// When it was made, in seconds since the Unix epoch.
    pub created_at: u64,
    /// When it was revoked, if it was.
    pub revoked_at: Option<u64>,
}

/// What a new key is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NewKey {
    /// A host key for these agents (at least one).
    Host(Vec<String>),
    /// A person key for this person.
    Person(String),
    /// An admin key.
    Admin,
}

/// The keys, in the store's database (an SQLite file or a PostgreSQL database).
#[derive(Debug)]
pub struct KeyStore {
    pub(crate) db: Db,
}

/// The database of the keys (and of the inbox's passwords and sessions, [`crate::people`]).
#[derive(Debug)]
pub(crate) enum Db {
    Sqlite(Mutex<Connection>),
    Postgres(Box<PostgresKeys>),
}

/// The keys in a PostgreSQL store's database: the same table, one connection, connected again when lost.
pub(crate) struct PostgresKeys {
    /// Where and how to connect: the runtime's store's own parsing, so TLS (`sslmode=require`) is the same.
    target: permits_runtime::PostgresTarget,
    client: Mutex<Option<postgres::Client>>,
}

impl std::fmt::Debug for PostgresKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresKeys").field("dbname", &self.target.config().get_dbname()).finish_non_exhaustive()
    }
}

impl Drop for PostgresKeys {
    fn drop(&mut self) {
        // As for the runtime's store: the client's own async runtime cannot end the connection on a thread
        // of the service's, so it is dropped on a thread of its own.
        let client = self.client.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(client) = client {
            std::thread::scope(|scope| {
                let _ = std::thread::Builder::new().spawn_scoped(scope, move || drop(client));
            });
        }
    }
}

/// The PostgreSQL form of [`SCHEMA`].
const POSTGRES_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS service_keys (
    id TEXT PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    agents TEXT NOT NULL,
    person TEXT,
    label TEXT,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE TABLE IF NOT EXISTS service_passwords (
    person TEXT PRIMARY KEY,
    phc TEXT NOT NULL,
    set_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS service_sessions (
    digest TEXT PRIMARY KEY,
    person TEXT NOT NULL,
    signed_in_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS service_totp (
    person TEXT PRIMARY KEY,
    secret TEXT NOT NULL,
    confirmed BIGINT NOT NULL,
    last_step BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS service_notified (
    proposal TEXT PRIMARY KEY,
    at BIGINT NOT NULL
)";

const POSTGRES_COLUMNS: &str = "SELECT id, kind, agents, person, label, created_at, revoked_at FROM service_keys";

impl PostgresKeys {
    fn open(url: &str) -> Result<PostgresKeys, String> {
        let target = permits_runtime::PostgresTarget::parse(url).map_err(|e| format!("`--store`: {e}"))?;
        let keys = PostgresKeys { target, client: Mutex::new(None) };
        keys.with(|client| {
            client
                .batch_execute(POSTGRES_SCHEMA)
                .map_err(|e| format!("cannot create the table of keys in PostgreSQL: {e}"))
        })?;
        Ok(keys)
    }

    /// Runs `f` on the connection, connecting first when there is none or it was lost. The synchronous
    /// client drives its own small async runtime, which cannot run on a thread of the service's: a key is
    /// looked up on an async worker (in the request's extractor), so it is moved off it first.
    pub(crate) fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, String> + Send,
    ) -> Result<T, String> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.with_here(f))
            }
            Ok(_) => std::thread::scope(|s| s.spawn(|| self.with_here(f)).join())
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => self.with_here(f),
        }
    }

    fn with_here<T>(&self, f: impl FnOnce(&mut postgres::Client) -> Result<T, String>) -> Result<T, String> {
        let mut guard = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.as_ref().is_none_or(postgres::Client::is_closed) {
            *guard = Some(self.target.connect().map_err(|e| e.0)?);
        }
        let Some(client) = guard.as_mut() else { return Err("no connection to PostgreSQL".into()) };
        let result = f(client);
        if client.is_closed() {
            *guard = None;
            // Lost: said in the store's words whatever `f` said, and the next use connects again.
            let lost = permits_runtime::PostgresStore::CONNECTION_LOST;
            return result.map_err(|e| {
                if e.starts_with(lost) {
                    e
                } else {
                    format!("{lost}: {e}; nothing was committed, and the operation is safe to retry")
                }
            });
        }
        result
    }

    fn add(&self, row: (&str, &str, &str, Option<&str>, Option<&str>, i64)) -> Result<String, String> {
        let (digest, kind, agents, person, label, now) = row;
        self.with(|client| {
            let mut tx = client.transaction().map_err(|e| lost_or("add a key", &e))?;
            // Numbering is read-then-write: serialize it with every other writer of the database.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&permits_runtime::PostgresStore::LOCK_KEY])
                .map_err(|e| lost_or("add a key", &e))?;
            let next: i64 = tx
                .query_one("SELECT COALESCE(MAX(CAST(substr(id, 3) AS BIGINT)), 0) + 1 FROM service_keys", &[])
                .map_err(|e| lost_or("number the key", &e))?
                .get(0);
            let id = format!("K-{next}");
            tx.execute(
                "INSERT INTO service_keys (id, digest, kind, agents, person, label, created_at, revoked_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)",
                &[&id, &digest, &kind, &agents, &person, &label, &now],
            )
            .map_err(|e| lost_or("add a key", &e))?;
            tx.commit().map_err(|e| lost_or("add a key", &e))?;
            Ok(id)
        })
    }

    fn rows(&self, query: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> Result<Vec<Row>, String> {
        self.with(|client| {
            let rows = client
                .query(query, params)
                .map_err(|e| permits_runtime::PostgresStore::client_error("read the keys", &e, client.is_closed()).0)?;
            rows.iter()
                .map(|r| {
                    Ok((
                        r.try_get(0).map_err(|e| e.to_string())?,
                        r.try_get(1).map_err(|e| e.to_string())?,
                        r.try_get(2).map_err(|e| e.to_string())?,
                        r.try_get(3).map_err(|e| e.to_string())?,
                        r.try_get(4).map_err(|e| e.to_string())?,
                        r.try_get(5).map_err(|e| e.to_string())?,
                        r.try_get(6).map_err(|e| e.to_string())?,
                    ))
                })
                .collect()
        })
    }
}

/// A client error in the runtime store's words ([`permits_runtime::PostgresStore::client_error`]): a lost
/// connection starts with [`permits_runtime::PostgresStore::CONNECTION_LOST`]. (Inside a transaction the
/// client is borrowed; a loss the error itself does not show is caught by [`PostgresKeys::with`].)
fn lost_or(doing: &str, e: &postgres::Error) -> String {
    permits_runtime::PostgresStore::client_error(doing, e, false).0
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS service_keys (
    id TEXT PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    agents TEXT NOT NULL,
    person TEXT,
    label TEXT,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE IF NOT EXISTS service_passwords (
    person TEXT PRIMARY KEY,
    phc TEXT NOT NULL,
    set_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS service_sessions (
    digest TEXT PRIMARY KEY,
    person TEXT NOT NULL,
    signed_in_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS service_totp (
    person TEXT PRIMARY KEY,
    secret TEXT NOT NULL,
    confirmed INTEGER NOT NULL,
    last_step INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS service_notified (
    proposal TEXT PRIMARY KEY,
    at INTEGER NOT NULL
)";

impl KeyStore {
    /// Opens the keys of the store `path` names (created if there are none): an SQLite file, or a
    /// PostgreSQL database when it is a `postgres://` URL or a key-value connection string
    /// ([`crate::store::location`]).
    ///
    /// Errors: the file cannot be opened, or is not an SQLite database; the PostgreSQL server cannot be
    /// reached, or the table cannot be created.
    pub fn open(path: &Path) -> Result<KeyStore, String> {
        if let crate::store::Location::Postgres(url) = crate::store::location(path) {
            return Ok(KeyStore { db: Db::Postgres(Box::new(PostgresKeys::open(url)?)) });
        }
        let conn = Connection::open(path).map_err(|e| format!("cannot open the database `{}`: {e}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(|e| format!("cannot set the busy timeout: {e}"))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| format!("cannot create the table of keys in `{}`: {e}", path.display()))?;
        Ok(KeyStore { db: Db::Sqlite(Mutex::new(conn)) })
    }

    /// Makes a key and returns it with its token, which is shown only now.
    ///
    /// Errors: a host key without agents, a blank name, the operating system's generator failed, or the
    /// database failed.
    pub fn add(&self, new: &NewKey, label: Option<&str>, now: u64) -> Result<(Key, String), String> {
        let (kind, agents, person) = match new {
            NewKey::Host(agents) => {
                if agents.is_empty() || agents.iter().any(|a| a.trim().is_empty()) {
                    return Err("a host key needs at least one agent, none blank (`--agents A,B`)".into());
                }
                (KeyKind::Host, agents.clone(), None)
            }
            NewKey::Person(person) if person.trim().is_empty() => return Err("a person key needs a person".into()),
            NewKey::Person(person) => (KeyKind::Person, Vec::new(), Some(person.clone())),
            NewKey::Admin => (KeyKind::Admin, Vec::new(), None),
        };
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| format!("the operating system's random generator failed: {e}"))?;
        let token = format!("permits_{}_{}", kind.as_str(), hex(&secret));
        let agents_json = serde_json::to_string(&agents).map_err(|e| e.to_string())?;
        let conn = match &self.db {
            Db::Sqlite(conn) => conn,
            Db::Postgres(pg) => {
                let row = (
                    digest(&token),
                    kind.as_str(),
                    agents_json.as_str(),
                    person.as_deref(),
                    label,
                    i64::try_from(now).unwrap_or(i64::MAX),
                );
                let id = pg.add((&row.0, row.1, row.2, row.3, row.4, row.5))?;
                let key = Key {
                    id,
                    kind,
                    agents,
                    person,
                    label: label.map(str::to_string),
                    created_at: now,
                    revoked_at: None,
                };
                return Ok((key, token));
            }
        };
        let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| format!("cannot add a key: {e}"))?;
        let next: i64 = tx
            .query_row("SELECT COALESCE(MAX(CAST(substr(id, 3) AS INTEGER)), 0) + 1 FROM service_keys", [], |r| {
                r.get(0)
            })
            .map_err(|e| format!("cannot number the key: {e}"))?;
        let id = format!("K-{next}");
        tx.execute(
            "INSERT INTO service_keys (id, digest, kind, agents, person, label, created_at, revoked_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL)",
            params![
                id,
                digest(&token),
                kind.as_str(),
                agents_json,
                person,
                label,
                i64::try_from(now).unwrap_or(i64::MAX)
            ],
        )
        .map_err(|e| format!("cannot add a key: {e}"))?;
        tx.commit().map_err(|e| format!("cannot add a key: {e}"))?;
        let key = Key { id, kind, agents, person, label: label.map(str::to_string), created_at: now, revoked_at: None };
        Ok((key, token))
    }

    /// Every key, oldest first, revoked ones included.
    ///
    /// Errors: the database failed, or a record is corrupt.
    pub fn list(&self) -> Result<Vec<Key>, String> {
        let conn = match &self.db {
            Db::Sqlite(conn) => conn,
            Db::Postgres(pg) => {
                let rows =
                    pg.rows(&format!("{POSTGRES_COLUMNS} ORDER BY created_at, CAST(substr(id, 3) AS BIGINT)"), &[])?;
                return rows.into_iter().map(decode).collect();
            }
        };
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        let mut stmt = conn
            .prepare("SELECT id, kind, agents, person, label, created_at, revoked_at FROM service_keys ORDER BY created_at, CAST(substr(id, 3) AS INTEGER)")
            .map_err(|e| format!("cannot read the keys: {e}"))?;
        let rows = stmt.query_map([], row).map_err(|e| format!("cannot read the keys: {e}"))?;
        let mut keys = Vec::new();
        for r in rows {
            keys.push(decode(r.map_err(|e| format!("cannot read the keys: {e}"))?)?);
        }
        Ok(keys)
    }

    /// Revokes a key: from now on it is refused (401). Revoking a revoked key changes nothing.
    ///
    /// Errors: no key has this id, or the database failed.
    pub fn revoke(&self, id: &str, now: u64) -> Result<Key, String> {
        let conn = match &self.db {
            Db::Sqlite(conn) => conn,
            Db::Postgres(pg) => {
                let now = i64::try_from(now).unwrap_or(i64::MAX);
                pg.with(|client| {
                    client
                        .execute(
                            "UPDATE service_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                            &[&id, &now],
                        )
                        .map_err(|e| format!("cannot revoke the key `{id}`: {e}"))
                })?;
                let found = pg.rows(&format!("{POSTGRES_COLUMNS} WHERE id = $1"), &[&id])?.into_iter().next();
                return decode(found.ok_or_else(|| format!("there is no key `{id}`"))?);
            }
        };
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.execute(
            "UPDATE service_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            params![id, i64::try_from(now).unwrap_or(i64::MAX)],
        )
        .map_err(|e| format!("cannot revoke the key `{id}`: {e}"))?;
        let found = conn
            .query_row(
                "SELECT id, kind, agents, person, label, created_at, revoked_at FROM service_keys WHERE id = ?1",
                [id],
                row,
            )
            .optional()
            .map_err(|e| format!("cannot read the key `{id}`: {e}"))?;
        decode(found.ok_or_else(|| format!("there is no key `{id}`"))?)
    }

    /// The key whose token this is, if it exists and is not revoked.
    ///
    /// Errors: the database failed, or the record is corrupt.
    pub fn find(&self, token: &str) -> Result<Option<Key>, String> {
        let conn = match &self.db {
            Db::Sqlite(conn) => conn,
            Db::Postgres(pg) => {
                let rows = pg
                    .rows(&format!("{POSTGRES_COLUMNS} WHERE digest = $1 AND revoked_at IS NULL"), &[&digest(token)])?;
                return rows.into_iter().next().map(decode).transpose();
            }
        };
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        let found = conn
            .prepare_cached(
                "SELECT id, kind, agents, person, label, created_at, revoked_at FROM service_keys
                 WHERE digest = ?1 AND revoked_at IS NULL",
            )
            .and_then(|mut stmt| stmt.query_row([digest(token)], row).optional())
            .map_err(|e| format!("cannot read the keys: {e}"))?;
        found.map(decode).transpose()
    }
}

type Row = (String, String, String, Option<String>, Option<String>, i64, Option<i64>);

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
}

fn decode((id, kind, agents, person, label, created_at, revoked_at): Row) -> Result<Key, String> {
    let corrupt = |what: &str| format!("the stored key `{id}` is corrupt: {what}");
    let kind = KeyKind::parse(&kind).ok_or_else(|| corrupt("its kind"))?;
    let agents: Vec<String> = serde_json::from_str(&agents).map_err(|_| corrupt("its agents"))?;
    let created_at = u64::try_from(created_at).map_err(|_| corrupt("its time"))?;
    let revoked_at = revoked_at.map(u64::try_from).transpose().map_err(|_| corrupt("its revocation"))?;
    Ok(Key { id, kind, agents, person, label, created_at, revoked_at })
}

/// SHA-256 of a token, in hex: what the store keeps.
pub(crate) fn digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
