//! Bounded request bodies and queries (spec §5a "Bounded input"): a body is at most [`MAX_BODY`] bytes (a
//! table upload [`MAX_TABLE_BODY`]) → else 413; its JSON nests at most [`MAX_DEPTH`] deep → else 400
//! `too_deep`; it must be JSON (`malformed_json`) and fit the route's type, which refuses unknown fields
//! (`unknown_field`) and values that do not fit, `null` included (`invalid_request`, naming the field).
//! Every refusal is JSON, and is decided before the runtime is called, so nothing is stored.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The largest body a route reads, in bytes: calls with their evidence, receipts.
pub(crate) const MAX_BODY: usize = 256 * 1024;
/// The largest table `POST /v1/admin/table` reads, in bytes.
pub(crate) const MAX_TABLE_BODY: usize = 32 * 1024 * 1024;
/// How deep a body's JSON may nest (arrays and objects), the outermost object counting as 1.
pub(crate) const MAX_DEPTH: usize = 32;

/// A JSON body of type `T`, bounded (see the module documentation).
pub(crate) struct Json<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Json<T>, ApiError> {
        let bytes = read_bounded(req, MAX_BODY).await?;
        parse(&bytes).map(Json)
    }
}

/// How much of a refused body is still read (and thrown away) past its limit, in bytes, so that a client
/// that sends its whole body before it reads the answer gets the 413 instead of a broken connection.
const DRAIN: usize = 1024 * 1024;
/// How long a refused body is drained at most.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads a body of at most `limit` bytes.
///
/// A body over the limit is refused (413) without being kept: up to [`DRAIN`] bytes past the limit (for at
/// most [`DRAIN_TIME`]) are read and thrown away first, so the sender is not cut off mid-write and reads the
/// answer; a body larger still, declared or sent, is answered at once and its connection closed.
pub(crate) async fn read_bounded(req: Request, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    use futures_util::StreamExt;
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > (limit + DRAIN) as u64) {
        return Err(too_large(limit));
    }
    let mut over = declared.is_some_and(|n| n > limit as u64);
    let mut stream = req.into_body().into_data_stream();
    let mut kept = Vec::new();
    let mut seen = 0usize;
    let mut deadline = over.then(|| tokio::time::Instant::now() + DRAIN_TIME);
    loop {
        let next = match deadline {
            None => stream.next().await,
            Some(deadline) => match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(next) => next,
                Err(_) => break,
            },
        };
        let Some(chunk) = next else { break };
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(_) if over => break,
            Err(e) => return Err(ApiError::bad_request("unreadable_body", format!("cannot read the body: {e}"))),
        };
        seen = seen.saturating_add(chunk.len());
        if !over && seen > limit {
            over = true;
            kept = Vec::new();
        }
        if over {
            deadline.get_or_insert_with(|| tokio::time::Instant::now() + DRAIN_TIME);
            if seen > limit + DRAIN {
                break;
            }
        } else {
            kept.extend_from_slice(&chunk);
        }
    }
    if over {
        return Err(too_large(limit));
    }
    Ok(axum::body::Bytes::from(kept))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the body is larger than {limit} bytes: nothing was done"),
    )
}

/// Parses a bounded body: depth first (so a deep value never reaches the parser), then the type.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("malformed_json", "the body is empty: a JSON object is expected"));
    }
    let depth = depth(bytes);
    if depth > MAX_DEPTH {
        return Err(ApiError::bad_request(
            "too_deep",
            format!("the body's JSON nests {depth} deep, more than {MAX_DEPTH}: nothing was done"),
        ));
    }
    // An object, as every route documents: serde would also read a struct from an array of its fields in
    // order.
    if let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace()).filter(|b| **b != b'{') {
        if let Err(syntax) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            return Err(ApiError::bad_request("malformed_json", format!("the body is not JSON: {syntax}")));
        }
        let kind = match first {
            b'[' => "an array",
            b'"' => "a string",
            b't' | b'f' => "a boolean",
            b'n' => "null",
            _ => "a number",
        };
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("the body does not fit: it must be a JSON object, not {kind}"),
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        // Only then, syntax on its own: serde_json reports some values of the wrong shape (`null` where an
        // enum is expected) as syntax errors, so only a body that is not JSON at all is `malformed_json`.
        if let Err(syntax) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            return ApiError::bad_request("malformed_json", format!("the body is not JSON: {syntax}"));
        }
        let field = e.path().to_string();
        let e = e.into_inner();
        let syntax = e.classify() == serde_json::error::Category::Syntax;
        let message = plain(&e.to_string());
        match (field.as_str(), message.strip_prefix("unknown field ")) {
            // The path ends with the unknown field itself: where it is, is its parent.
            (_, Some(_)) => match field.rsplit_once('.').map(|(parent, _)| parent).filter(|p| !p.is_empty()) {
                Some(parent) => {
                    ApiError::bad_request("unknown_field", format!("`{parent}` in the body has an {message}"))
                }
                None => ApiError::bad_request("unknown_field", format!("the body has an {message}")),
            },
            (".", None) => ApiError::bad_request("invalid_request", format!("the body does not fit: {message}")),
            _ if syntax => ApiError::bad_request(
                "invalid_request",
                format!("the body does not fit: `{field}` has a value of another kind ({message})"),
            ),
            _ => ApiError::bad_request("invalid_request", format!("the body does not fit: `{field}`: {message}")),
        }
    })?;
    // Nothing but whitespace after the value, as `serde_json::from_slice` requires.
    de.end().map_err(|e| ApiError::bad_request("malformed_json", format!("the body is not JSON: {e}")))?;
    Ok(value)
}

/// serde's words for a value that does not fit, in the caller's terms: the service's own type names
/// (`expected struct ChainLink`) are "an object", and the position (` at line 1 column 207`) is left out —
/// the field's path says where.
fn plain(message: &str) -> String {
    let mut message = match message.rfind(" at line ") {
        Some(i)
            if message[i + 9..].split(" column ").all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            message[..i].to_string()
        }
        _ => message.to_string(),
    };
    while let Some(i) = message.find("expected struct ") {
        let name = &message[i + 16..];
        let end = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(name.len());
        message.replace_range(i..i + 16 + end, "expected an object");
    }
    message
}

/// The deepest nesting of arrays and objects in `bytes`, strings skipped (a malformed text gives some
/// number; the parser then refuses it).
fn depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A query string of type `T` (which refuses unknown parameters), refused as JSON when it does not fit.
pub(crate) struct Query<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Query<T>, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        axum::extract::Query::<T>::try_from_uri(&parts.uri)
            .map(|q| Query(q.0))
            .map_err(|e| ApiError::bad_request("invalid_query", format!("the query `{query}` does not fit: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_skips_strings() {
        assert_eq!(depth(br#"{"a": [1, {"b": "[[[{{{"}]}"#), 3);
        assert_eq!(depth(br#"{"a": "\"[["}"#), 1);
        assert_eq!(depth(b"1"), 0);
    }
}
