//! The approval service's HTTP API as the gateway uses it: JSON in and out with a host key, every status
//! read (a 4xx is an answer, not a transport error).

use std::time::Duration;

use serde_json::Value;

/// The longest each phase of one request may take, in seconds (sending it, waiting for the answer, reading
/// it): a long poll (at most 60 s on the service) and a margin.
pub const REQUEST_SECONDS: u64 = 90;

/// The longest a connection to the service may take to open, in seconds.
pub const CONNECT_SECONDS: u64 = 10;

/// The largest answer read, in bytes (64 MiB).
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;

/// A transport failure: no answer that could be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// No connection, or the connection failed before an answer.
    #[error("the approval service at {url} cannot be reached: {reason}")]
    Unreachable {
        /// The service's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// An answer that is not JSON.
    #[error("the approval service answered {status} with something that is not JSON")]
    NotJson {
        /// The HTTP status.
        status: u16,
    },
}

/// An answer: the HTTP status and the JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The HTTP status (200, 4xx, 503).
    pub status: u16,
    /// The body.
    pub body: Value,
}

impl Answer {
    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// An error answer's `error.code` and `error.message` (`("", "")` parts when absent).
    pub fn error(&self) -> (String, String) {
        let get = |k: &str| self.body.pointer(&format!("/error/{k}")).and_then(Value::as_str).unwrap_or("").to_string();
        (get("code"), get("message"))
    }
}

/// A host's connection to the service at a base URL (`http://127.0.0.1:7878`) with a host key.
#[derive(Clone)]
pub struct Service {
    base: String,
    key: String,
    agent: ureq::Agent,
}

impl Service {
    /// A client of `base` with `key` (sent as `Authorization: Bearer KEY`). No proxy is used.
    pub fn new(base: &str, key: &str) -> Service {
        // Every phase bounded, none on the whole: with a global (or per-call) timeout ureq resolves the
        // host's name on a thread of its own for every request — a thread started and joined on the path
        // of every call (BENCHMARKS.md "The MCP gateway"). Without one an IP address is read at once and a
        // name is resolved within the system resolver's own timeouts.
        let phase = Some(Duration::from_secs(REQUEST_SECONDS));
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(CONNECT_SECONDS)))
            .timeout_send_request(phase)
            .timeout_send_body(phase)
            .timeout_recv_response(phase)
            .timeout_recv_body(phase)
            .proxy(None)
            .build()
            .into();
        Service { base: base.trim_end_matches('/').to_string(), key: key.to_string(), agent }
    }

    /// The base URL, without a trailing `/`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET base + path`.
    ///
    /// Errors: [`ServiceError`].
    pub fn get(&self, path: &str) -> Result<Answer, ServiceError> {
        let request =
            self.agent.get(format!("{}{path}", self.base)).header("authorization", format!("Bearer {}", self.key));
        self.answer(request.call())
    }

    /// `POST base + path` with a JSON body.
    ///
    /// Errors: [`ServiceError`].
    pub fn post(&self, path: &str, body: &Value) -> Result<Answer, ServiceError> {
        let request = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.key))
            .header("content-type", "application/json");
        self.answer(request.send(body.to_string().as_bytes()))
    }

    fn answer(&self, response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Answer, ServiceError> {
        let mut response =
            response.map_err(|e| ServiceError::Unreachable { url: self.base.clone(), reason: e.to_string() })?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(|e| ServiceError::Unreachable { url: self.base.clone(), reason: e.to_string() })?;
        let body = serde_json::from_str(&text).map_err(|_| ServiceError::NotJson { status })?;
        Ok(Answer { status, body })
    }
}

/// `s` with every character that is not unreserved in a URL path segment percent-encoded.
pub fn segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("P-1"), "P-1");
        assert_eq!(segment("a/b c?é"), "a%2Fb%20c%3F%C3%A9");
    }
}
