//! `permitc audit verify`: the store's audit chain (spec §5a).

use super::*;

pub(in crate::cli) fn audit_verify(file: &Path, head: Option<&str>) -> u8 {
    use crate::runtime::{AuditHead, SqliteStore, read_export, verify_chain};
    let parsed = head.map(|h| h.split_once(':').and_then(|(seq, hash)| Some((seq.parse::<u64>().ok()?, hash))));
    let expected = match parsed {
        None => None,
        Some(Some((seq, hash))) => Some(AuditHead { seq, hash: hash.to_string() }),
        Some(None) => {
            errln!("error: `--head` is `SEQ:HASH`, e.g. `12:3fa9…`");
            return 2;
        }
    };
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
    match verify_chain(&chain, expected.as_ref()) {
        Ok(Some(h)) => {
            outln!("ok: `{}`: {} events, head {}:{}", file.display(), chain.len(), h.seq, h.hash);
            0
        }
        Ok(None) => {
            outln!("ok: `{}`: no events", file.display());
            0
        }
        Err(e) => {
            errln!("error: `{}`: {e}", file.display());
            1
        }
    }
}
