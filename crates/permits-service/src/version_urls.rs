//! Version URLs (issue #16 "The execution protocol"): a host may register, per tool of its agents, a URL the
//! service calls when a person approves, so a subject that changed since the proposal is caught before the
//! yes (the approval answers `stale`), not only at the claim.
//!
//! - **Registration**: `POST /v1/version-urls` with a host key for the agent, for a tool the table offers
//!   that agent and that declares `version P.F` (nothing else has a version to check). One URL per
//!   (agent, tool); a new registration replaces the old. Kept in the table `service_version_urls` of the
//!   store's database file, so a restart keeps them; a registration whose key is revoked is ignored.
//! - **Where it may point**: `http://` only (no TLS client in the service), and only to loopback (`127.0.0.0/8`,
//!   `::1`, or a name that resolves only to loopback) unless the host name is one `--version-url-host` names.
//!   The check is made at registration (the URL's form) and again at every call (what the name resolves to
//!   then). Redirects are not followed.
//! - **The call**: `POST URL` with `{"agent", "tool", "proposal", "param", "entity", "id", "field"}`; the
//!   answer must be `200` with `{"version": "…"}` (a string), within the timeout (`--version-url-timeout-ms`,
//!   2000 by default, 10000 at most) and 16 KiB. The version answered is stated for the approval, and the
//!   runtime's recheck compares it with the proposal's: a difference is `stale`, final.
//! - **When it does not answer** (refused connection, timeout, another status, a body that is not that
//!   JSON): the approval is **not refused**; it is made against the version the proposal was made with, as
//!   without a URL, and its answer says so (`version_check.outcome` = `unanswered`, with why). The claim
//!   still rechecks the version the host states then, so a stale subject never runs. The URL is an early
//!   warning; the guarantee is the claim's. Refusing instead would make every approval depend on the host's
//!   uptime, and a person who answers while the host restarts would have to come back, for no safety gained.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The default time a version URL has to answer, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 2000;
/// The longest timeout `--version-url-timeout-ms` accepts, in milliseconds.
pub const MAX_TIMEOUT_MS: u64 = 10_000;
/// The most bytes of a version URL's answer that are read.
const MAX_ANSWER: usize = 16 * 1024;
/// The longest URL registered.
const MAX_URL: usize = 2048;

/// One registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Registration {
    /// The agent whose tool it is.
    pub(crate) agent: String,
    /// The tool.
    pub(crate) tool: String,
    /// The URL called at approval.
    pub(crate) url: String,
    /// The id of the host key that registered it (`K-2`).
    pub(crate) key: String,
    /// When, in seconds since the Unix epoch.
    pub(crate) registered_at: u64,
}

/// The registrations, in the store's database file, and where URLs may point.
#[derive(Debug)]
pub(crate) struct VersionUrls {
    /// `None` with a PostgreSQL store: registrations are not kept there yet, so none is taken.
    conn: Option<Mutex<Connection>>,
    /// Host names allowed besides loopback (`--version-url-host`).
    allowed_hosts: Vec<String>,
    /// How long a URL has to answer.
    pub(crate) timeout: Duration,
}

/// Why a registration is refused on a PostgreSQL store.
pub(crate) const UNAVAILABLE: &str = "version URLs are not kept in a PostgreSQL store yet: approvals are checked against the proposal's version, and the claim rechecks it";

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS service_version_urls (
    agent TEXT NOT NULL,
    tool TEXT NOT NULL,
    url TEXT NOT NULL,
    key_id TEXT NOT NULL,
    registered_at INTEGER NOT NULL,
    PRIMARY KEY (agent, tool)
)";

impl VersionUrls {
    /// Opens the registrations of the database at `path` (the table is created if missing).
    ///
    /// Errors: the file cannot be opened, or is not an SQLite database.
    pub(crate) fn open(path: &Path, allowed_hosts: Vec<String>, timeout: Duration) -> Result<VersionUrls, String> {
        let conn = Connection::open(path).map_err(|e| format!("cannot open the database `{}`: {e}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(|e| format!("cannot set the busy timeout: {e}"))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| format!("cannot create the table of version URLs in `{}`: {e}", path.display()))?;
        let allowed_hosts = allowed_hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect();
        Ok(VersionUrls { conn: Some(Mutex::new(conn)), allowed_hosts, timeout })
    }

    /// No registrations (a PostgreSQL store, issue #22): registering is refused with [`UNAVAILABLE`], and
    /// every approval is checked against the proposal's version, the claim rechecking it.
    pub(crate) fn unavailable(timeout: Duration) -> VersionUrls {
        VersionUrls { conn: None, allowed_hosts: Vec::new(), timeout }
    }

    /// Whether registrations are kept (not with a PostgreSQL store).
    pub(crate) fn available(&self) -> bool {
        self.conn.is_some()
    }

    /// Whether `url` may be registered: `http://HOST[:PORT][/PATH]`, HOST loopback or allowed.
    ///
    /// Errors: why not, in words.
    pub(crate) fn check_url(&self, url: &str) -> Result<(), String> {
        let target = Target::parse(url)?;
        if self.allowed(&target.host) || target.host == "localhost" {
            return Ok(());
        }
        match target.host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => Ok(()),
            _ => Err(format!(
                "the version URL `{url}` is not on loopback: only `127.0.0.1`, `[::1]` or `localhost` unless the service is started with `--version-url-host {}`",
                target.host
            )),
        }
    }

    fn allowed(&self, host: &str) -> bool {
        self.allowed_hosts.iter().any(|h| h == host)
    }

    /// Registers (or replaces) the URL of `agent`'s `tool`.
    ///
    /// Errors: the database failed.
    pub(crate) fn register(&self, r: &Registration) -> Result<(), String> {
        let Some(conn) = &self.conn else { return Err(UNAVAILABLE.into()) };
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.execute(
            "INSERT OR REPLACE INTO service_version_urls (agent, tool, url, key_id, registered_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![r.agent, r.tool, r.url, r.key, i64::try_from(r.registered_at).unwrap_or(i64::MAX)],
        )
        .map_err(|e| format!("cannot register the version URL: {e}"))?;
        Ok(())
    }

    /// Removes the URL of `agent`'s `tool`: whether there was one.
    ///
    /// Errors: the database failed.
    pub(crate) fn remove(&self, agent: &str, tool: &str) -> Result<bool, String> {
        let Some(conn) = &self.conn else { return Ok(false) };
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        let n = conn
            .execute("DELETE FROM service_version_urls WHERE agent = ?1 AND tool = ?2", params![agent, tool])
            .map_err(|e| format!("cannot remove the version URL: {e}"))?;
        Ok(n > 0)
    }

    /// Every registration of a key that is not revoked, by agent then tool.
    ///
    /// Errors: the database failed.
    pub(crate) fn list(&self) -> Result<Vec<Registration>, String> {
        let Some(conn) = &self.conn else { return Ok(Vec::new()) };
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        let mut stmt = conn
            .prepare(
                "SELECT v.agent, v.tool, v.url, v.key_id, v.registered_at FROM service_version_urls v
                 JOIN service_keys k ON k.id = v.key_id WHERE k.revoked_at IS NULL ORDER BY v.agent, v.tool",
            )
            .map_err(|e| format!("cannot read the version URLs: {e}"))?;
        let rows = stmt.query_map([], row).map_err(|e| format!("cannot read the version URLs: {e}"))?;
        rows.map(|r| r.map_err(|e| format!("cannot read the version URLs: {e}"))).collect()
    }

    /// The registration of `agent`'s `tool`, if any and its key is not revoked (a revoked host's URL is
    /// never asked again).
    ///
    /// Errors: the database failed.
    pub(crate) fn find(&self, agent: &str, tool: &str) -> Result<Option<Registration>, String> {
        let Some(conn) = &self.conn else { return Ok(None) };
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.prepare_cached(
            "SELECT v.agent, v.tool, v.url, v.key_id, v.registered_at FROM service_version_urls v
             JOIN service_keys k ON k.id = v.key_id WHERE v.agent = ?1 AND v.tool = ?2 AND k.revoked_at IS NULL",
        )
        .and_then(|mut stmt| stmt.query_row(params![agent, tool], row).optional())
        .map_err(|e| format!("cannot read the version URLs: {e}"))
    }

    /// Asks `url` for the covered version: `Ok(version)`, or why there is no answer.
    pub(crate) async fn ask(&self, url: &str, question: &Value) -> Result<String, String> {
        match tokio::time::timeout(self.timeout, self.ask_unbounded(url, question)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
        }
    }

    async fn ask_unbounded(&self, url: &str, question: &Value) -> Result<String, String> {
        let target = Target::parse(url)?;
        let host = target.host.trim_start_matches('[').trim_end_matches(']').to_string();
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), target.port))
            .await
            .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
            .collect();
        // Loopback only, unless the name is allowed: checked on what the name resolves to now.
        let addr = if self.allowed(&target.host) {
            addrs.first().copied()
        } else {
            if addrs.iter().any(|a| !a.ip().is_loopback()) {
                return Err(format!("`{host}` resolves to an address that is not loopback"));
            }
            addrs.first().copied()
        };
        let addr = addr.ok_or_else(|| format!("`{host}` resolves to no address"))?;
        let mut stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("cannot connect: {e}"))?;
        let body = question.to_string();
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            target.path,
            target.authority,
            body.len()
        );
        stream.write_all(request.as_bytes()).await.map_err(|e| format!("cannot send the question: {e}"))?;
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = stream.read(&mut chunk).await.map_err(|e| format!("the answer broke off: {e}"))?;
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&chunk[..n]);
            if answer.len() > MAX_ANSWER {
                return Err(format!("the answer is longer than {MAX_ANSWER} bytes"));
            }
        }
        version_of(&answer)
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Registration> {
    Ok(Registration {
        agent: r.get(0)?,
        tool: r.get(1)?,
        url: r.get(2)?,
        key: r.get(3)?,
        registered_at: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
    })
}

/// An `http://` URL, taken apart.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// `HOST[:PORT]` as written.
    pub(crate) authority: String,
    /// The host, lower case (an IPv6 address keeps its brackets).
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The path and query, `/` at least.
    pub(crate) path: String,
}

impl Target {
    pub(crate) fn parse(url: &str) -> Result<Target, String> {
        let bad = |why: &str| format!("the version URL `{url}` {why}");
        if url.len() > MAX_URL {
            return Err(bad(&format!("is longer than {MAX_URL} bytes")));
        }
        if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(bad("contains spaces or control characters"));
        }
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(bad("is not `http://…`: the service calls plain HTTP on loopback only"));
        };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if path.contains('#') {
            return Err(bad("has a fragment"));
        }
        let path = if path.starts_with('?') { format!("/{path}") } else { path.to_string() };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad("has no host, or has a user name"));
        }
        let (host, port) = if let Some(end) = authority.strip_prefix('[').and_then(|a| a.find(']')) {
            let host = &authority[..end + 2];
            match &authority[end + 2..] {
                "" => (host, 80),
                p => (host, port_of(p.strip_prefix(':').unwrap_or("x")).ok_or_else(|| bad("has a bad port"))?),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, port_of(p).ok_or_else(|| bad("has a bad port"))?),
                None => (authority, 80),
            }
        };
        if host.is_empty() {
            return Err(bad("has no host"));
        }
        Ok(Target { authority: authority.to_string(), host: host.to_ascii_lowercase(), port, path })
    }
}

fn port_of(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// The version in an HTTP answer: `200` with `{"version": "…"}`.
fn version_of(answer: &[u8]) -> Result<String, String> {
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or("the answer is not HTTP")?;
    let head = std::str::from_utf8(&answer[..end]).map_err(|_| "the answer's head is not text")?;
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).ok_or("the answer has no status")?;
    if status != "200" {
        return Err(format!("the answer's status is {status}, not 200"));
    }
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if name == "content-length" {
            length = Some(value.parse::<usize>().map_err(|_| "the answer's length is not a number")?);
        }
    }
    let rest = &answer[end + 4..];
    let body = if chunked {
        dechunk(rest).ok_or("the answer's chunks are broken")?
    } else if let Some(n) = length {
        rest.get(..n).ok_or("the answer is shorter than its length")?.to_vec()
    } else {
        rest.to_vec()
    };
    let value: Value = serde_json::from_slice(&body).map_err(|_| "the answer is not JSON")?;
    match value.get("version") {
        Some(Value::String(v)) => Ok(v.clone()),
        _ => Err("the answer is not `{\"version\": \"…\"}` with a string".to_string()),
    }
}

/// A chunked body, decoded.
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart_and_bad_ones_refused() {
        let t = Target::parse("http://127.0.0.1:8080/v?x=1").ok();
        assert_eq!(
            t,
            Some(Target {
                authority: "127.0.0.1:8080".into(),
                host: "127.0.0.1".into(),
                port: 8080,
                path: "/v?x=1".into()
            })
        );
        let t = Target::parse("http://[::1]:9/").ok().map(|t| (t.host, t.port));
        assert_eq!(t, Some(("[::1]".to_string(), 9)));
        assert_eq!(
            Target::parse("http://LOCALHOST").ok().map(|t| (t.host, t.port, t.path)),
            Some(("localhost".into(), 80, "/".into()))
        );
        for bad in [
            "https://127.0.0.1/",
            "http://",
            "http://u@127.0.0.1/",
            "http://127.0.0.1:0/",
            "http://127.0.0.1:x/",
            "http://a b/",
            "ftp://x",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_are_read_plain_or_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 17\r\n\r\n{\"version\": \"r2\"}";
        assert_eq!(version_of(plain), Ok("r2".to_string()));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"ver\r\nc\r\nsion\": \"r3\"}\r\n0\r\n\r\n";
        assert_eq!(version_of(chunked), Ok("r3".to_string()));
        assert!(version_of(b"HTTP/1.1 500 Oops\r\n\r\n{\"version\": \"r2\"}").is_err());
        assert!(version_of(b"HTTP/1.1 200 OK\r\n\r\n{\"version\": 2}").is_err());
        assert!(version_of(b"garbage").is_err());
    }
}
