//! `permitc audit verify`: the store's audit chain (spec §5a). Exit 0 when it verifies, 1 when it does not
//! (`permits::audit::broken`), 2 when it cannot be read (`permits::audit::unreadable`,
//! `permits::audit::no_postgres`, `permits::usage::head`); every failure is a miette diagnostic on stderr.

use super::*;
use crate::diagnostics::Code;

/// The way out when a store or an export cannot be read.
const UNREADABLE_HELP: &str = "name an SQLite store, a JSON-lines export of its chain (`Runtime::export_audit`) or a \
                               PostgreSQL ledger (`postgres://…` or `host=… dbname=…`)";

/// The way out when a chain does not verify.
const BROKEN_HELP: &str = "the store was changed outside permits from that event on: compare it with an earlier \
                           export (`Runtime::export_audit`) or a backup, and find who can write the store";

/// The way out when a chain ends before the head kept earlier.
const CUT_HELP: &str = "events were deleted from the end of the chain since that head was kept: restore them from \
                        a backup or an export (`Runtime::export_audit`), and find who can write the store";

/// Prints `d` as a miette diagnostic on stderr, as `check` and `compile` do; returns `exit`.
fn fail(d: Diagnostic, exit: u8) -> u8 {
    err!("{}", render(&[d], &Sources::default(), colour()));
    exit
}

pub(in crate::cli) fn audit_verify(file: &Path, head: Option<&str>) -> u8 {
    use crate::runtime::{AuditHead, SqliteStore, read_export};
    let expected = match head {
        None => None,
        Some(h) => match h.split_once(':').and_then(|(seq, hash)| Some((seq.parse::<u64>().ok()?, hash))) {
            // A place from 1 and a SHA-256 in hex, as `ok:` prints it.
            Some((seq, hash)) if seq > 0 && hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Some(AuditHead { seq, hash: hash.to_ascii_lowercase() })
            }
            _ => {
                let help = "give the head as `ok:` printed it (or `Runtime::audit_head` reports it): its place from 1 \
                            and its 64-digit hash, `--head 12:3fa9…`";
                return fail(Diagnostic::new(Code::UsageHead, format!("`--head {h}` is not `SEQ:HASH`")).help(help), 2);
            }
        },
    };
    let text = file.to_string_lossy();
    if crate::runtime::is_postgres_target(&text) {
        return verify_postgres(&text, expected.as_ref());
    }
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            let message = format!("cannot read `{}`: {e}", file.display());
            return fail(Diagnostic::new(Code::AuditUnreadable, message).help(UNREADABLE_HELP), 2);
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
            let message = format!("`{}`: {e}", file.display());
            return fail(Diagnostic::new(Code::AuditUnreadable, message).help(UNREADABLE_HELP), 2);
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
            let help = match e {
                crate::runtime::ChainError::Head { .. } => CUT_HELP,
                _ => BROKEN_HELP,
            };
            fail(Diagnostic::new(Code::AuditBroken, format!("`{name}`: {e}")).help(help), 1)
        }
    }
}

/// A PostgreSQL ledger (`postgres://…` or libpq's key-value form, with `sslmode` and `sslrootcert` as the
/// hosts give them), read without changing it; the connection string is shown with its password as `***`.
#[cfg(feature = "postgres")]
fn verify_postgres(url: &str, expected: Option<&crate::runtime::AuditHead>) -> u8 {
    use crate::runtime::{PostgresStore, PostgresTarget};
    let name = PostgresTarget::redact(url);
    let chain = PostgresTarget::parse(url).and_then(|target| PostgresStore::read_audit_chain(&target));
    match chain {
        Ok(chain) => report(&name, &chain, expected),
        Err(e) => {
            let help = "check the connection string (`sslmode`, `sslrootcert`), that the server is up, and that it \
                        names the database the hosts use";
            fail(Diagnostic::new(Code::AuditUnreadable, format!("`{name}`: {e}")).help(help), 2)
        }
    }
}

/// Without the feature `postgres` there is no PostgreSQL client: the way out is named (the connection string
/// is not shown: it may hold a password, and this build cannot tell where).
#[cfg(not(feature = "postgres"))]
fn verify_postgres(_url: &str, _expected: Option<&crate::runtime::AuditHead>) -> u8 {
    let help = "build it with `cargo build --release -p permits-cli --features postgres`, or verify an export (`Runtime::export_audit`)";
    fail(Diagnostic::new(Code::AuditNoPostgres, "this permitc was built without PostgreSQL").help(help), 2)
}
