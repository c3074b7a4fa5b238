//! `permitc audit verify`: the store's audit chain (spec §5a).

use super::*;

pub(in crate::cli) fn audit_verify(file: &Path, head: Option<&str>) -> u8 {
    use crate::runtime::{AuditHead, SqliteStore, read_export};
    let parsed = head.map(|h| h.split_once(':').and_then(|(seq, hash)| Some((seq.parse::<u64>().ok()?, hash))));
    let expected = match parsed {
        None => None,
        Some(Some((seq, hash))) => Some(AuditHead { seq, hash: hash.to_string() }),
        Some(None) => {
            errln!("error: `--head` is `SEQ:HASH`, e.g. `12:3fa9…`");
            return 2;
        }
    };
    let text = file.to_string_lossy();
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        return verify_postgres(&text, expected.as_ref());
    }
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            errln!("error: cannot read `{}`: {e}", file.display());
            return 2;
        }
    };
    let chain = if bytes.starts_with(b"SQLite format 3\0") {
        SqliteStore::read_audit_chain(file).map_err(|e| e.to_string())
    } else {
        match String::from_utf8(bytes) {
            Ok(text) => read_export(&text).map_err(|e| e.to_string()),
            Err(_) => Err("it is neither an SQLite store nor a JSON-lines export".to_string()),
        }
    };
    let chain = match chain {
        Ok(c) => c,
        Err(e) => {
            errln!("error: `{}`: {e}", file.display());
            return 2;
        }
    };
    report(&file.display().to_string(), &chain, expected.as_ref())
}

/// The chain verified, reported under `name`: exit 0 when it verifies, 1 when it does not.
fn report(name: &str, chain: &[crate::runtime::ChainedEvent], expected: Option<&crate::runtime::AuditHead>) -> u8 {
    match crate::runtime::verify_chain(chain, expected) {
        Ok(Some(h)) => {
            outln!("ok: `{name}`: {} events, head {}:{}", chain.len(), h.seq, h.hash);
            0
        }
        Ok(None) => {
            outln!("ok: `{name}`: no events");
            0
        }
        Err(e) => {
            errln!("error: `{name}`: {e}");
            1
        }
    }
}

/// A PostgreSQL ledger (`postgres://…`, with `sslmode` and `sslrootcert` as the hosts give them), read
/// without changing it; the URL is shown with its password as `***`.
#[cfg(feature = "postgres")]
fn verify_postgres(url: &str, expected: Option<&crate::runtime::AuditHead>) -> u8 {
    use crate::runtime::{PostgresStore, PostgresTarget};
    let name = PostgresTarget::redact(url);
    let chain = PostgresTarget::parse(url).and_then(|target| PostgresStore::read_audit_chain(&target));
    match chain {
        Ok(chain) => report(&name, &chain, expected),
        Err(e) => {
            errln!("error: `{name}`: {e}");
            2
        }
    }
}

#[cfg(not(feature = "postgres"))]
fn verify_postgres(_url: &str, _expected: Option<&crate::runtime::AuditHead>) -> u8 {
    errln!(
        "error: this permitc was built without PostgreSQL: build it with `cargo build -p permits-cli --features postgres`, or verify an export (`Runtime::export_audit`)"
    );
    2
}
