//! Persons signing in to the inbox (issue #17): passwords hashed with Argon2id, and sessions.
//!
//! A password is a low-entropy secret, so unlike a key ([`crate::keys`]) it is kept as an **Argon2id** hash
//! (the `argon2` crate's defaults: 19 MiB, 2 passes, 1 lane; a random 16-byte salt), in the PHC string form,
//! in the table `service_passwords` of the store's database (SQLite or PostgreSQL, beside `service_keys`).
//! Setting a password ends every session of that person.
//!
//! A session is 32 bytes from the operating system's generator, sent to the browser once as the cookie's
//! value (64 hex digits) and kept only as its SHA-256 digest, with the person, when they signed in, and when
//! it ends ([`SESSION_LIFETIME`]); `service_sessions`. Whoever reads the database learns no session id.

use std::sync::PoisonError;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use rusqlite::{OptionalExtension, params};

use crate::keys::{Db, KeyStore, digest, hex};

/// How long a session lasts after its sign-in, in seconds (12 hours): then the person signs in again.
pub const SESSION_LIFETIME: u64 = 12 * 60 * 60;

/// The shortest password accepted, in characters.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// The longest password accepted, in bytes (a longer one is refused, not cut).
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// A signed-in person's session as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// Who signed in.
    pub person: String,
    /// When they signed in, in seconds since the Unix epoch.
    pub signed_in_at: u64,
}

/// The Argon2id hash of `password`, as a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`).
///
/// Errors: the password is shorter than [`MIN_PASSWORD_CHARS`] or longer than [`MAX_PASSWORD_BYTES`], or
/// the operating system's random generator failed.
pub fn hash_password(password: &str) -> Result<String, String> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(format!("a password has at least {MIN_PASSWORD_CHARS} characters"));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(format!("a password has at most {MAX_PASSWORD_BYTES} bytes"));
    }
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| format!("the operating system's random generator failed: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| format!("cannot encode the salt: {e}"))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash the password: {e}"))
}

/// Whether `password` matches the PHC hash `phc`. A corrupt hash matches nothing.
pub fn verify_password(phc: &str, password: &str) -> bool {
    if password.len() > MAX_PASSWORD_BYTES {
        return false;
    }
    PasswordHash::new(phc).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

/// A hash of no password, verified against when the person has none, so that a sign-in of an unknown
/// person costs the same time as a wrong password.
pub(crate) fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("a password nobody has, for timing").unwrap_or_default())
}

/// A new random secret: 32 bytes, in hex.
pub(crate) fn secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("the operating system's random generator failed: {e}"))?;
    Ok(hex(&bytes))
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl KeyStore {
    /// Sets (or replaces) `person`'s password hash, and ends every session of theirs.
    ///
    /// Errors: a blank person, or the database failed.
    pub fn set_password(&self, person: &str, phc: &str, now: u64) -> Result<(), String> {
        if person.trim().is_empty() {
            return Err("a password needs a person".into());
        }
        let now = signed(now);
        match &self.db {
            Db::Sqlite(conn) => {
                let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
                let tx = conn.transaction().map_err(|e| format!("cannot set the password: {e}"))?;
                tx.execute(
                    "INSERT INTO service_passwords (person, phc, set_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (person) DO UPDATE SET phc = excluded.phc, set_at = excluded.set_at",
                    params![person, phc, now],
                )
                .map_err(|e| format!("cannot set the password: {e}"))?;
                tx.execute("DELETE FROM service_sessions WHERE person = ?1", [person])
                    .map_err(|e| format!("cannot end the sessions: {e}"))?;
                tx.commit().map_err(|e| format!("cannot set the password: {e}"))
            }
            Db::Postgres(pg) => pg.with(|client| {
                let mut tx = client.transaction().map_err(|e| format!("cannot set the password: {e}"))?;
                tx.execute(
                    "INSERT INTO service_passwords (person, phc, set_at) VALUES ($1, $2, $3)
                     ON CONFLICT (person) DO UPDATE SET phc = excluded.phc, set_at = excluded.set_at",
                    &[&person, &phc, &now],
                )
                .map_err(|e| format!("cannot set the password: {e}"))?;
                tx.execute("DELETE FROM service_sessions WHERE person = $1", &[&person])
                    .map_err(|e| format!("cannot end the sessions: {e}"))?;
                tx.commit().map_err(|e| format!("cannot set the password: {e}"))
            }),
        }
    }

    /// `person`'s password hash, if they have one.
    ///
    /// Errors: the database failed.
    pub fn password_hash(&self, person: &str) -> Result<Option<String>, String> {
        match &self.db {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .query_row("SELECT phc FROM service_passwords WHERE person = ?1", [person], |r| r.get(0))
                .optional()
                .map_err(|e| format!("cannot read the password: {e}")),
            Db::Postgres(pg) => pg.with(|client| {
                let row = client
                    .query_opt("SELECT phc FROM service_passwords WHERE person = $1", &[&person])
                    .map_err(|e| format!("cannot read the password: {e}"))?;
                row.map(|r| r.try_get(0).map_err(|e| e.to_string())).transpose()
            }),
        }
    }

    /// Starts a session for `person`: returns its id (the cookie's value), which is kept only as a digest.
    ///
    /// Errors: the random generator or the database failed.
    pub fn start_session(&self, person: &str, now: u64) -> Result<String, String> {
        let id = secret()?;
        let (digest, at, ends) = (digest(&id), signed(now), signed(now.saturating_add(SESSION_LIFETIME)));
        match &self.db {
            Db::Sqlite(conn) => {
                let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
                conn.execute("DELETE FROM service_sessions WHERE expires_at <= ?1", [at])
                    .map_err(|e| format!("cannot end old sessions: {e}"))?;
                conn.execute(
                    "INSERT INTO service_sessions (digest, person, signed_in_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
                    params![digest, person, at, ends],
                )
                .map_err(|e| format!("cannot start the session: {e}"))?;
            }
            Db::Postgres(pg) => pg.with(|client| {
                client
                    .execute("DELETE FROM service_sessions WHERE expires_at <= $1", &[&at])
                    .map_err(|e| format!("cannot end old sessions: {e}"))?;
                client
                    .execute(
                        "INSERT INTO service_sessions (digest, person, signed_in_at, expires_at) VALUES ($1, $2, $3, $4)",
                        &[&digest, &person, &at, &ends],
                    )
                    .map(drop)
                    .map_err(|e| format!("cannot start the session: {e}"))
            })?,
        }
        Ok(id)
    }

    /// The session whose id this is, if it exists and has not ended at `now`.
    ///
    /// Errors: the database failed, or the record is corrupt.
    pub fn session(&self, id: &str, now: u64) -> Result<Option<Session>, String> {
        let (digest, now) = (digest(id), signed(now));
        let found: Option<(String, i64)> = match &self.db {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .prepare_cached(
                    "SELECT person, signed_in_at FROM service_sessions WHERE digest = ?1 AND expires_at > ?2",
                )
                .and_then(|mut stmt| stmt.query_row(params![digest, now], |r| Ok((r.get(0)?, r.get(1)?))).optional())
                .map_err(|e| format!("cannot read the session: {e}"))?,
            Db::Postgres(pg) => pg.with(|client| {
                let row = client
                    .query_opt(
                        "SELECT person, signed_in_at FROM service_sessions WHERE digest = $1 AND expires_at > $2",
                        &[&digest, &now],
                    )
                    .map_err(|e| format!("cannot read the session: {e}"))?;
                row.map(|r| Ok((r.try_get(0).map_err(|e| e.to_string())?, r.try_get(1).map_err(|e| e.to_string())?)))
                    .transpose()
            })?,
        };
        found
            .map(|(person, at)| {
                let signed_in_at =
                    u64::try_from(at).map_err(|_| "a stored session is corrupt: its time".to_string())?;
                Ok(Session { person, signed_in_at })
            })
            .transpose()
    }

    /// Ends the session whose id this is (signing out). Ending an unknown session changes nothing.
    ///
    /// Errors: the database failed.
    pub fn end_session(&self, id: &str) -> Result<(), String> {
        let digest = digest(id);
        match &self.db {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .execute("DELETE FROM service_sessions WHERE digest = ?1", [digest])
                .map(drop)
                .map_err(|e| format!("cannot end the session: {e}")),
            Db::Postgres(pg) => pg.with(|client| {
                client
                    .execute("DELETE FROM service_sessions WHERE digest = $1", &[&digest])
                    .map(drop)
                    .map_err(|e| format!("cannot end the session: {e}"))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_kept_as_an_argon2id_hash_and_verified() -> Result<(), String> {
        let phc = hash_password("correct horse battery")?;
        assert!(phc.starts_with("$argon2id$v=19$"), "{phc}");
        assert!(!phc.contains("correct horse"));
        assert!(verify_password(&phc, "correct horse battery"));
        assert!(!verify_password(&phc, "correct horse batterY"));
        assert!(!verify_password("not a hash", "correct horse battery"));
        assert!(hash_password("short").is_err());
        assert!(hash_password(&"x".repeat(MAX_PASSWORD_BYTES + 1)).is_err());
        Ok(())
    }
}
