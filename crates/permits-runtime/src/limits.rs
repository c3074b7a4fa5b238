//! Bounded input, durable output (spec §5a): every size and depth the runtime accepts has a limit, checked
//! at the API with a clear error ([`crate::Refusal::TooLarge`]) before anything is stored, so whatever the
//! store accepted it can read back (serde_json reads at most 128 levels; a record adds a few of its own).
//!
//! | what | limit |
//! |---|---|
//! | depth of any JSON value: arguments, each evidence item's arguments and answer, a receipt | [`MAX_DEPTH`] (32) |
//! | the arguments of a call, as canonical JSON | [`MAX_ARGUMENTS_BYTES`] (64 KiB) |
//! | why | [`MAX_WHY_BYTES`] (16 KiB) |
//! | evidence | [`MAX_EVIDENCE_ITEMS`] (64) items, [`MAX_EVIDENCE_BYTES`] (256 KiB) together |
//! | a receipt | [`MAX_RECEIPT_BYTES`] (256 KiB) |
//! | a reason: a rejection's, a revocation's, a failure's | [`MAX_REASON_BYTES`] (4 KiB) |
//! | an operation key, a destination, a claim token, an instruction version | [`MAX_KEY_BYTES`] (512 bytes) |
//!
//! What a host reports after a tool ran cannot be refused (it ran): a receipt over the limits is stored as
//! `{"receipt_not_stored": {"why", "bytes", "sha256"}}` (its settlement is judged on the real receipt
//! first), and a failure's reason over its limit is cut, saying so.

use serde_json::Value;

/// The deepest JSON value accepted anywhere (a scalar is depth 1, `[1]` depth 2).
pub const MAX_DEPTH: usize = 32;
/// The largest arguments object, as canonical JSON, in bytes.
pub const MAX_ARGUMENTS_BYTES: usize = 64 * 1024;
/// The longest `why`, in bytes of UTF-8.
pub const MAX_WHY_BYTES: usize = 16 * 1024;
/// The most evidence items in one proposal.
pub const MAX_EVIDENCE_ITEMS: usize = 64;
/// The largest evidence, all items together as canonical JSON, in bytes.
pub const MAX_EVIDENCE_BYTES: usize = 256 * 1024;
/// The largest receipt, as canonical JSON, in bytes.
pub const MAX_RECEIPT_BYTES: usize = 256 * 1024;
/// The longest reason (a rejection's, a revocation's, a failure's), in bytes of UTF-8.
pub const MAX_REASON_BYTES: usize = 4 * 1024;
/// The longest operation key, destination, claim token or instruction version, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 512;
/// How long a host's claim of a granted proposal binds the grant without a confirmation, in seconds (ten
/// minutes): after it, a claim with another token drops it (the host that claimed is presumed gone; a
/// confirmation with the old token is then refused) — so a host that died between its claim and its
/// confirmation cannot hold a grant, and its reservation, forever. A confirmed claim never expires.
pub const CLAIM_LIFETIME_SECONDS: u64 = 10 * 60;

/// The depth of a JSON value, counted without recursion, stopping as soon as it passes `limit`.
pub fn depth_of(value: &Value, limit: usize) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        if deepest > limit {
            return deepest;
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(members) => stack.extend(members.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Checks that `value` (named `what` in the message) is at most [`MAX_DEPTH`] deep and `max_bytes` long as
/// canonical JSON; returns its length.
///
/// Errors: the message a person reads ("the evidence is 126 levels deep: at most 32 are accepted").
pub fn check_value(what: &str, value: &Value, max_bytes: usize) -> Result<usize, String> {
    let depth = depth_of(value, MAX_DEPTH);
    if depth > MAX_DEPTH {
        return Err(format!("{what} is more than {MAX_DEPTH} levels deep: at most {MAX_DEPTH} are accepted"));
    }
    let bytes = crate::table::canonical_value(value).len();
    if bytes > max_bytes {
        return Err(format!("{what} is {bytes} bytes: at most {max_bytes} are accepted"));
    }
    Ok(bytes)
}

/// Checks a text's length in bytes.
///
/// Errors: the message a person reads.
pub fn check_text(what: &str, text: &str, max_bytes: usize) -> Result<(), String> {
    if text.len() > max_bytes {
        return Err(format!("{what} is {} bytes: at most {max_bytes} are accepted", text.len()));
    }
    Ok(())
}

/// A host's text that cannot be refused (a failure's reason after the run), cut to `max_bytes` at a
/// character boundary, saying so.
pub fn cut(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut: {} bytes in all)", &text[..end], text.len())
}

/// The receipt to store for what a host reported: the receipt itself within the limits, else a note that
/// says why it was not stored, its size and digest.
pub fn storable_receipt(receipt: Value) -> Value {
    match check_value("the receipt", &receipt, MAX_RECEIPT_BYTES) {
        Ok(_) => receipt,
        Err(why) => {
            let (bytes, sha256) = if depth_of(&receipt, MAX_DEPTH) > MAX_DEPTH {
                (Value::Null, Value::Null)
            } else {
                let text = crate::table::canonical_value(&receipt);
                (Value::from(text.len()), Value::from(crate::table::sha256_hex(text.as_bytes())))
            };
            serde_json::json!({"receipt_not_stored": {"why": why, "bytes": bytes, "sha256": sha256}})
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn depth_is_counted_without_recursion() {
        assert_eq!(depth_of(&json!(1), 32), 1);
        assert_eq!(depth_of(&json!({"a": [1, {"b": 2}]}), 32), 4);
        let mut deep = json!(1);
        for _ in 0..99 {
            deep = json!([deep]);
        }
        assert_eq!(depth_of(&deep, 200), 100);
        assert_eq!(depth_of(&deep, 32), 33, "stops once past the limit");
        assert!(check_value("the receipt", &deep, 1000).is_err());
        assert_eq!(cut("héllo".into(), 2), "h… (cut: 6 bytes in all)");
    }
}
