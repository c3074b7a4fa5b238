//! Signed tables (spec §5a "One current table per store, no silent rollback, signed tables").
//!
//! `permitc compile --sign KEY --serial N` writes, beside the table, a [`TableSignature`]: an Ed25519
//! signature over the canonical JSON of {`serial`, `table_digest`}. The table's own bytes and digest are
//! unchanged, so compiles stay byte-identical. A runtime given [`TrustedKeys`] refuses an unsigned table,
//! one signed by a key it does not trust, a signature that does not verify or names another table, and
//! any table whose serial is at or below the highest its store has installed (`rollback`), unless a
//! supervisor forces it.
//!
//! The check lives here, in the runtime, not in `permits-table`: the table crate is the format and the one
//! evaluator, which the compiler shares; what to trust, and the store's history of serials, are the
//! runtime's business (see ARCHITECTURE.md).

use std::fmt;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::table::{Table, canonical_value, hex};

/// The file beside a table that holds its signature: `table.json` → `table.json.sig`.
pub const SIGNATURE_SUFFIX: &str = ".sig";

/// A table's signature (spec §5a): who signed which table digest at which serial. Its JSON is the
/// `.sig` file `permitc compile --sign` writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSignature {
    /// The signed table's `table_digest`.
    pub table_digest: String,
    /// The serial: a positive integer that grows with each release of the policy (a CI build number).
    pub serial: u64,
    /// The signer's Ed25519 public key, 64 hex digits.
    pub key: String,
    /// The Ed25519 signature over the canonical JSON of {`serial`, `table_digest`}, 128 hex digits.
    pub signature: String,
}

/// Why a table is not installed (spec §5a). Each is a typed error the host can match.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableRefusal {
    /// The runtime trusts keys and the table has no signature.
    #[error("the table `{digest}` is not signed, and this runtime installs only tables signed by a key it trusts")]
    Unsigned {
        /// The table's digest.
        digest: String,
    },
    /// The signature names another table.
    #[error("the signature is for table `{signed}`, not for `{digest}`")]
    OtherTable {
        /// The table's digest.
        digest: String,
        /// The digest the signature names.
        signed: String,
    },
    /// The signing key is not one the runtime trusts.
    #[error("the table is signed by key `{key}`, which this runtime does not trust")]
    UntrustedKey {
        /// The key, in hex.
        key: String,
    },
    /// The signature does not verify (or is not a signature at all).
    #[error("the signature of table `{digest}` does not verify: {why}")]
    BadSignature {
        /// The table's digest.
        digest: String,
        /// Why.
        why: String,
    },
    /// The serial is at or below the highest the store has installed: an older table.
    #[error(
        "table `{digest}` has serial {serial}, but the store has installed serial {highest}: a rollback is refused unless a supervisor forces it"
    )]
    Rollback {
        /// The table's digest.
        digest: String,
        /// Its serial.
        serial: u64,
        /// The highest serial the store installed.
        highest: u64,
    },
    /// The runtime's table is not the store's current one: it changes nothing until it loads the current
    /// table or installs a newer one.
    #[error(
        "this runtime's table `{runtime}` is not the store's current table `{store}`: load the current table or install a newer one; nothing changes"
    )]
    NotCurrent {
        /// The runtime's table digest.
        runtime: String,
        /// The store's current table digest.
        store: String,
    },
    /// Forcing a table needs a supervisor (of the store's current table).
    #[error("only a supervisor forces a table, not `{by}`")]
    NotSupervisor {
        /// Who asked.
        by: String,
    },
}

/// The public keys a runtime trusts to sign its tables.
#[derive(Clone, Default)]
pub struct TrustedKeys(Vec<VerifyingKey>);

impl fmt::Debug for TrustedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter().map(|k| hex(k.as_bytes()))).finish()
    }
}

impl TrustedKeys {
    /// Keys from their hex forms (64 hex digits each, as `permitc keygen` writes them; whitespace around
    /// them is ignored).
    ///
    /// Errors: which key is not an Ed25519 public key.
    pub fn from_hex<'k>(keys: impl IntoIterator<Item = &'k str>) -> Result<TrustedKeys, String> {
        let mut out = Vec::new();
        for key in keys {
            out.push(public_key(key.trim())?);
        }
        Ok(TrustedKeys(out))
    }

    /// Whether no key is trusted (then unsigned tables are accepted).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Verifies `signature` for `table`: it names the table's digest, its key is trusted, and it verifies.
    ///
    /// Errors: [`TableRefusal::Unsigned`] (no signature), [`TableRefusal::OtherTable`],
    /// [`TableRefusal::UntrustedKey`], [`TableRefusal::BadSignature`].
    pub fn verify(&self, table: &Table, signature: Option<&TableSignature>) -> Result<(), TableRefusal> {
        let digest = &table.header.table_digest;
        let Some(sig) = signature else { return Err(TableRefusal::Unsigned { digest: digest.clone() }) };
        if &sig.table_digest != digest {
            return Err(TableRefusal::OtherTable { digest: digest.clone(), signed: sig.table_digest.clone() });
        }
        let bad = |why: String| TableRefusal::BadSignature { digest: digest.clone(), why };
        let key = public_key(&sig.key).map_err(bad)?;
        if !self.0.contains(&key) {
            return Err(TableRefusal::UntrustedKey { key: sig.key.clone() });
        }
        let bytes = bytes_of::<64>(&sig.signature).map_err(|why| bad(format!("the signature {why}")))?;
        key.verify(&signed_message(&sig.table_digest, sig.serial), &Signature::from_bytes(&bytes))
            .map_err(|e| bad(e.to_string()))
    }
}

/// The bytes an Ed25519 table signature covers: the canonical JSON of {`serial`, `table_digest`}.
pub fn signed_message(table_digest: &str, serial: u64) -> Vec<u8> {
    canonical_value(&serde_json::json!({"serial": serial, "table_digest": table_digest})).into_bytes()
}

/// Signs `table_digest` at `serial` with the secret key `secret` (64 hex digits: the 32-byte seed
/// `permitc keygen` writes).
///
/// Errors: the secret key is not 64 hex digits; the serial is 0 (it must be positive).
pub fn sign(table_digest: &str, serial: u64, secret: &str) -> Result<TableSignature, String> {
    if serial == 0 {
        return Err("the serial must be a positive integer".to_string());
    }
    let seed = bytes_of::<32>(secret.trim()).map_err(|why| format!("the secret key {why}"))?;
    let key = SigningKey::from_bytes(&seed);
    let signature = key.sign(&signed_message(table_digest, serial));
    Ok(TableSignature {
        table_digest: table_digest.to_string(),
        serial,
        key: hex(key.verifying_key().as_bytes()),
        signature: hex(&signature.to_bytes()),
    })
}

/// The public key (64 hex digits) of the secret key `secret` (64 hex digits).
///
/// Errors: the secret key is not 64 hex digits.
pub fn public_key_of(secret: &str) -> Result<String, String> {
    let seed = bytes_of::<32>(secret.trim()).map_err(|why| format!("the secret key {why}"))?;
    Ok(hex(SigningKey::from_bytes(&seed).verifying_key().as_bytes()))
}

fn public_key(text: &str) -> Result<VerifyingKey, String> {
    let bytes = bytes_of::<32>(text).map_err(|why| format!("the key `{text}` {why}"))?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("the key `{text}` is not an Ed25519 public key: {e}"))
}

/// `N` bytes from `2N` hex digits.
fn bytes_of<const N: usize>(text: &str) -> Result<[u8; N], String> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return Err(format!("is not {} hex digits", 2 * N));
    }
    let mut out = [0u8; N];
    for (i, pair) in digits.chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16);
        let lo = (pair[1] as char).to_digit(16);
        match (hi, lo) {
            (Some(h), Some(l)) => out[i] = (h * 16 + l) as u8,
            _ => return Err(format!("is not {} hex digits", 2 * N)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_for_its_key_and_table_only() {
        let secret = "11".repeat(32);
        let sig = sign(&"ab".repeat(32), 7, &secret).expect("sign");
        assert_eq!(sig.key, public_key_of(&secret).expect("public"));
        let message = signed_message(&sig.table_digest, 7);
        assert_eq!(
            String::from_utf8(message).expect("utf8"),
            format!("{{\"serial\":7,\"table_digest\":\"{}\"}}", "ab".repeat(32))
        );
        assert!(sign("x", 0, &secret).is_err());
        assert!(bytes_of::<2>("zz00").is_err());
        assert_eq!(bytes_of::<2>("0aFf"), Ok([10, 255]));
    }
}
