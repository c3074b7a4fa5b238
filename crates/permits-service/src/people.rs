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
//!
//! A person may add a second factor, a TOTP secret ([`totp`]), in `service_totp`. Unlike a password it
//! must be kept as it is (the service computes the codes from it): the database is inside the trust
//! boundary (spec §5a "Who may touch the store"), and the secret is never logged, audited or shown again
//! after enrolment.

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

/// TOTP (RFC 6238): HMAC-SHA-1, a 30-second step, 6 digits, as every authenticator app reads an
/// `otpauth://` URI. A code is accepted for the step now and the one before or after (clock drift), and at
/// most once: a code of a step at or before the last one used is refused (a replay).
pub mod totp {
    use hmac::{Hmac, KeyInit, Mac};
    use sha1::Sha1;

    /// The length of a step, in seconds.
    pub const STEP: u64 = 30;
    /// Digits in a code.
    pub const DIGITS: u32 = 6;

    /// The code of `secret` (raw bytes) for time step `step` (`unix time / 30`), as 6 digits.
    pub fn code(secret: &[u8], step: u64) -> String {
        let mut mac = match Hmac::<Sha1>::new_from_slice(secret) {
            Ok(mac) => mac,
            // HMAC takes a key of any length; this cannot happen.
            Err(_) => return String::new(),
        };
        mac.update(&step.to_be_bytes());
        let hash = mac.finalize().into_bytes();
        let offset = usize::from(hash[hash.len() - 1] & 0x0f);
        let bytes = [hash[offset] & 0x7f, hash[offset + 1], hash[offset + 2], hash[offset + 3]];
        let value = u32::from_be_bytes(bytes) % 10u32.pow(DIGITS);
        format!("{value:06}")
    }

    /// The step of `code` within one step of `now` (seconds since the Unix epoch), if it is one of them.
    pub fn matching_step(secret: &[u8], code: &str, now: u64) -> Option<u64> {
        let code = code.trim();
        if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let now = now / STEP;
        [now.saturating_sub(1), now, now + 1]
            .into_iter()
            .find(|step| super::same_text(&self::code(secret, *step), code))
    }

    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

    /// RFC 4648 base 32, without padding: how authenticator apps take a secret.
    pub fn base32(bytes: &[u8]) -> String {
        let mut out = String::new();
        for chunk in bytes.chunks(5) {
            let mut buf = [0u8; 5];
            buf[..chunk.len()].copy_from_slice(chunk);
            let n = u64::from_be_bytes([0, 0, 0, buf[0], buf[1], buf[2], buf[3], buf[4]]);
            let chars = (chunk.len() * 8).div_ceil(5);
            for i in 0..chars {
                out.push(char::from(ALPHABET[((n >> (35 - i * 5)) & 31) as usize]));
            }
        }
        out
    }

    /// Reads [`base32`] back (case and spaces ignored).
    pub fn from_base32(text: &str) -> Option<Vec<u8>> {
        let mut bits = 0u64;
        let mut n = 0u32;
        let mut out = Vec::new();
        for c in text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=') {
            let v = ALPHABET.iter().position(|a| *a == c.to_ascii_uppercase())? as u64;
            bits = (bits << 5) | v;
            n += 5;
            if n >= 8 {
                n -= 8;
                out.push((bits >> n) as u8);
                bits &= (1 << n) - 1;
            }
        }
        Some(out)
    }

    /// The `otpauth://` URI an authenticator app enrols from.
    pub fn uri(person: &str, secret: &[u8]) -> String {
        let label: String = person
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() { char::from(b).to_string() } else { format!("%{b:02X}") })
            .collect();
        format!(
            "otpauth://totp/permits:{label}?secret={}&issuer=permits&algorithm=SHA1&digits={DIGITS}&period={STEP}",
            base32(secret)
        )
    }
}

/// Compares two texts in time independent of where they differ.
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A person's second factor as the store keeps it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecondFactor {
    /// The TOTP secret (20 random bytes).
    pub secret: Vec<u8>,
    /// Whether the person confirmed it with a code (only then does sign-in ask for one).
    pub confirmed: bool,
    /// The last time step a code was accepted for (a code of this step or before is a replay).
    pub last_step: u64,
}

// No `Debug` with the secret in it.
impl std::fmt::Debug for SecondFactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecondFactor").field("confirmed", &self.confirmed).finish_non_exhaustive()
    }
}

impl KeyStore {
    /// `person`'s second factor, if they started enrolling one.
    ///
    /// Errors: the database failed, or the record is corrupt.
    pub fn second_factor(&self, person: &str) -> Result<Option<SecondFactor>, String> {
        let found: Option<(String, i64, i64)> = match &self.db {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .query_row("SELECT secret, confirmed, last_step FROM service_totp WHERE person = ?1", [person], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()
                .map_err(|e| format!("cannot read the second factor: {e}"))?,
            Db::Postgres(pg) => pg.with(|client| {
                let row = client
                    .query_opt("SELECT secret, confirmed, last_step FROM service_totp WHERE person = $1", &[&person])
                    .map_err(|e| format!("cannot read the second factor: {e}"))?;
                row.map(|r| {
                    Ok((
                        r.try_get(0).map_err(|e| e.to_string())?,
                        r.try_get(1).map_err(|e| e.to_string())?,
                        r.try_get(2).map_err(|e| e.to_string())?,
                    ))
                })
                .transpose()
            })?,
        };
        found
            .map(|(secret, confirmed, last_step)| {
                let corrupt = || format!("the stored second factor of `{person}` is corrupt");
                Ok(SecondFactor {
                    secret: totp::from_base32(&secret).ok_or_else(corrupt)?,
                    confirmed: confirmed != 0,
                    last_step: u64::try_from(last_step).map_err(|_| corrupt())?,
                })
            })
            .transpose()
    }

    /// Starts enrolling a new, unconfirmed TOTP secret for `person` (replacing an unconfirmed one). A
    /// confirmed one is kept: this answers `None`.
    ///
    /// Errors: the random generator or the database failed.
    pub fn begin_second_factor(&self, person: &str) -> Result<Option<Vec<u8>>, String> {
        if self.second_factor(person)?.is_some_and(|f| f.confirmed) {
            return Ok(None);
        }
        let mut secret = vec![0u8; 20];
        getrandom::fill(&mut secret).map_err(|e| format!("the operating system's random generator failed: {e}"))?;
        let text = totp::base32(&secret);
        let sql_sqlite = "INSERT INTO service_totp (person, secret, confirmed, last_step) VALUES (?1, ?2, 0, 0)
             ON CONFLICT (person) DO UPDATE SET secret = excluded.secret, confirmed = 0, last_step = 0
             WHERE service_totp.confirmed = 0";
        match &self.db {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .execute(sql_sqlite, params![person, text])
                .map(drop)
                .map_err(|e| format!("cannot store the second factor: {e}"))?,
            Db::Postgres(pg) => pg.with(|client| {
                client
                    .execute(
                        "INSERT INTO service_totp (person, secret, confirmed, last_step) VALUES ($1, $2, 0, 0)
                         ON CONFLICT (person) DO UPDATE SET secret = excluded.secret, confirmed = 0, last_step = 0
                         WHERE service_totp.confirmed = 0",
                        &[&person, &text],
                    )
                    .map(drop)
                    .map_err(|e| format!("cannot store the second factor: {e}"))
            })?,
        }
        Ok(Some(secret))
    }

    /// Records that a code of `step` was accepted for `person` (and confirms the factor), if `step` is
    /// after the last one used: `false` for a replay.
    ///
    /// Errors: the database failed.
    pub fn use_second_factor(&self, person: &str, step: u64) -> Result<bool, String> {
        let step = signed(step);
        let changed = match &self.db {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .execute(
                    "UPDATE service_totp SET confirmed = 1, last_step = ?2 WHERE person = ?1 AND last_step < ?2",
                    params![person, step],
                )
                .map_err(|e| format!("cannot record the second factor: {e}"))?,
            Db::Postgres(pg) => pg.with(|client| {
                client
                    .execute(
                        "UPDATE service_totp SET confirmed = 1, last_step = $2 WHERE person = $1 AND last_step < $2",
                        &[&person, &step],
                    )
                    .map(|n| n as usize)
                    .map_err(|e| format!("cannot record the second factor: {e}"))
            })?,
        };
        Ok(changed == 1)
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

    #[test]
    fn totp_codes_are_rfc_6238_s() {
        // RFC 6238 appendix B, SHA-1: the secret "12345678901234567890"; the last 6 of its 8 digits.
        let secret = b"12345678901234567890";
        for (time, code) in
            [(59, "287082"), (1_111_111_109, "081804"), (1_234_567_890, "005924"), (2_000_000_000, "279037")]
        {
            assert_eq!(totp::code(secret, time / totp::STEP), code, "at {time}");
        }
        assert_eq!(totp::matching_step(secret, "287082", 59), Some(1));
        assert_eq!(totp::matching_step(secret, "287082", 59 + 30), Some(1), "one step of drift");
        assert_eq!(totp::matching_step(secret, "287082", 59 + 60), None);
        assert_eq!(totp::matching_step(secret, "28708", 59), None);
        assert_eq!(totp::base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(totp::from_base32("mzxw 6ytb oi").as_deref(), Some(&b"foobar"[..]));
        assert_eq!(totp::from_base32(&totp::base32(secret)).as_deref(), Some(&secret[..]));
        assert!(
            totp::uri("Noor", secret)
                .starts_with("otpauth://totp/permits:Noor?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&")
        );
    }
}
