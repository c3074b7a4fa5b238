//! The streamable-HTTP transport (MCP 2025-06-18, "Streamable HTTP"), the client's side, on blocking `ureq`
//! over plain HTTP:
//!
//! - every message is a `POST` of one JSON-RPC message to the endpoint, with `Accept: application/json,
//!   text/event-stream`; a request's answer is one `application/json` message, or a `text/event-stream` whose
//!   events carry the server's requests and notifications for that request and then its answer; a
//!   notification or a response is answered `202 Accepted`;
//! - the `Mcp-Session-Id` the server gives in its answer to `initialize` is sent with every later message,
//!   and so is `MCP-Protocol-Version` (the version agreed);
//! - a `GET` opens the session's own event stream, for what the server sends outside any request
//!   (`notifications/tools/list_changed`, its own requests); a server that offers none answers `405`. It is
//!   opened again when the server closes it;
//! - `404` to a request with the session's id: the session ended (as an exited server: every later request
//!   fails); `DELETE` ends the session when the upstream is stopped.
//!
//! Not supported: `https://` (no TLS stack in this crate), OAuth or any other authorization, resuming a
//! broken stream with `Last-Event-ID` (a stream that ends before the answer fails that request).

use std::io::BufReader;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::jsonrpc::{MAX_FRAME_BYTES, Message};
use crate::sse::SseReader;
use crate::upstream::{Core, Failure, UpstreamError};

/// How long a notification's or a response's `POST` may take, in seconds.
pub const MESSAGE_SECONDS: u64 = 30;

/// How long connecting to the server may take, in seconds.
pub const CONNECT_SECONDS: u64 = 10;

/// How many times in a row the session's event stream may fail to open before the gateway stops trying.
pub const LISTEN_TRIES: u32 = 5;

const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// A session with a streamable-HTTP endpoint.
pub(crate) struct Http {
    url: String,
    agent: ureq::Agent,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    /// Stopped by us ([`Http::end`]).
    stopped: AtomicBool,
    /// Ended by the server (a `404`).
    ended: AtomicBool,
}

fn log(message: &str) {
    eprintln!("permitc mcp: {message}");
}

impl Http {
    /// A client of the endpoint `url`.
    ///
    /// Errors: [`UpstreamError::Http`] for a URL that is not `http://HOST…`.
    pub(crate) fn new(url: &str) -> Result<Http, UpstreamError> {
        let bad = |why: &str| UpstreamError::Http { url: url.to_string(), why: why.to_string() };
        if url.starts_with("https://") {
            return Err(bad("https is not supported (no TLS in the gateway): put it behind a local http endpoint"));
        }
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(bad("the URL must start with http://"));
        };
        if rest.is_empty() || rest.starts_with('/') {
            return Err(bad("the URL names no host"));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(CONNECT_SECONDS)))
            .max_redirects(0)
            .proxy(None)
            .build()
            .into();
        Ok(Http {
            url: url.to_string(),
            agent,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
            stopped: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Whether the server ended the session.
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// The protocol version agreed, sent as `MCP-Protocol-Version` from now on.
    pub(crate) fn set_protocol(&self, version: &str) {
        if let Ok(mut p) = self.protocol.lock() {
            *p = Some(version.to_string());
        }
    }

    fn session(&self) -> Option<String> {
        self.session.lock().ok().and_then(|s| s.clone())
    }

    fn with_headers<B>(&self, mut request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        if let Some(s) = self.session() {
            request = request.header(SESSION_HEADER, s);
        }
        if let Some(p) = self.protocol.lock().ok().and_then(|p| p.clone()) {
            request = request.header(PROTOCOL_HEADER, p);
        }
        request
    }

    fn post(&self, message: &Message, timeout: Duration) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let request = self
            .agent
            .post(&self.url)
            .config()
            // Each phase bounded, not the whole: a global timeout makes ureq resolve the host on a thread
            // of its own for every request (`Service::new` says more).
            .timeout_send_request(Some(timeout))
            .timeout_send_body(Some(timeout))
            .timeout_recv_response(Some(timeout))
            .timeout_recv_body(Some(timeout))
            .build()
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        self.with_headers(request).send(message.to_value().to_string().as_bytes())
    }

    /// Posts request `id` and routes what comes back (run on its own thread: an event stream lasts as long
    /// as the request). Every way it can fail answers the waiting request.
    pub(crate) fn post_request(&self, core: &Core, id: u64, message: &Message, timeout: Duration) {
        match self.post(message, timeout) {
            Ok(response) => self.take_answer(core, Some(id), response),
            Err(e) => core.settle(id, Err(Failure::Http(format!("cannot be reached: {e}")))),
        }
    }

    /// Posts a notification or a response (`202` expected); a failure is logged.
    pub(crate) fn post_message(&self, core: &Core, message: &Message) {
        match self.post(message, Duration::from_secs(MESSAGE_SECONDS)) {
            Ok(response) => self.take_answer(core, None, response),
            Err(e) => log(&format!("the upstream MCP server at {} cannot be reached: {e}", self.url)),
        }
    }

    /// Reads an answer: the session's id, the status, and the message or the stream of messages.
    fn take_answer(&self, core: &Core, id: Option<u64>, mut response: ureq::http::Response<ureq::Body>) {
        let fail = |why: String| match id {
            Some(id) => core.settle(id, Err(Failure::Http(why))),
            None => log(&format!("the upstream MCP server at {}: {why}", self.url)),
        };
        let status = response.status().as_u16();
        if let Some(s) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
            if let Ok(mut session) = self.session.lock() {
                if session.is_none() {
                    *session = Some(s.to_string());
                }
            }
        }
        if status == 404 && self.session().is_some() {
            self.ended.store(true, Ordering::SeqCst);
            log(&format!("the upstream MCP server at {} ended the session (HTTP 404)", self.url));
            core.close(Failure::Ended);
            return;
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
            .unwrap_or_default();
        if !(200..300).contains(&status) {
            let text = response.body_mut().with_config().limit(64 * 1024).read_to_string().unwrap_or_default();
            let said = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_else(|| text.chars().take(200).collect());
            return fail(format!("HTTP {status}: {said}"));
        }
        match content_type.as_str() {
            "text/event-stream" => {
                let reader = BufReader::new(response.into_body().into_with_config().limit(u64::MAX).reader());
                let mut events = SseReader::new(reader, MAX_FRAME_BYTES);
                loop {
                    match events.next_event() {
                        Ok(Some(event)) if event.is_message() => core.dispatch(&event.data),
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => {
                            log(&format!("the upstream MCP server's event stream at {} broke: {e}", self.url));
                            break;
                        }
                    }
                }
                if let Some(id) = id.filter(|id| core.is_waiting(*id)) {
                    core.settle(id, Err(Failure::Http("the event stream ended before the answer".into())));
                }
            }
            "application/json" => {
                match response.body_mut().with_config().limit(MAX_FRAME_BYTES as u64).read_to_string() {
                    // A `202` may come with this content type and no body.
                    Ok(text) if text.trim().is_empty() => {}
                    Ok(text) => core.dispatch(&text),
                    Err(e) => return fail(format!("the answer could not be read: {e}")),
                }
                if let Some(id) = id.filter(|id| core.is_waiting(*id)) {
                    core.settle(id, Err(Failure::Http("the answer is not the request's".into())));
                }
            }
            _ if id.is_none() => {}
            other => fail(format!("HTTP {status} with no answer (content type `{other}`)")),
        }
    }

    /// Opens the session's own event stream on a thread, and again whenever the server closes it, until the
    /// upstream is stopped or the session ends; a server that answers `405` offers none.
    pub(crate) fn listen(http: &Arc<Http>, core: &Arc<Core>) {
        let (http, core) = (Arc::clone(http), Arc::clone(core));
        let spawned = std::thread::Builder::new().name("mcp-upstream-events".into()).spawn(move || {
            let mut failures = 0u32;
            while !http.stopped.load(Ordering::SeqCst) && core.is_alive() && failures < LISTEN_TRIES {
                let request = http.agent.get(&http.url).header("accept", "text/event-stream");
                match http.with_headers(request).call() {
                    Err(e) => {
                        failures += 1;
                        if failures == LISTEN_TRIES {
                            log(&format!(
                                "the upstream MCP server's event stream at {} cannot be opened: {e}",
                                http.url
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(500));
                    }
                    Ok(response) if response.status().as_u16() == 405 => return,
                    Ok(response) if response.status().is_success() => {
                        failures = 0;
                        http.take_answer(&core, None, response);
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Ok(response) => {
                        let status = response.status().as_u16();
                        http.take_answer(&core, None, response);
                        if status != 404 {
                            log(&format!("the upstream MCP server's event stream at {}: HTTP {status}", http.url));
                        }
                        return;
                    }
                }
            }
        });
        if let Err(e) = spawned {
            log(&format!("no thread for the upstream MCP server's event stream: {e}"));
        }
    }

    /// Ends the session (`DELETE` with its id, at most [`CONNECT_SECONDS`]); the event stream is not opened
    /// again.
    pub(crate) fn end(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) || self.is_ended() {
            return;
        }
        if self.session().is_some() {
            let request = self
                .agent
                .delete(&self.url)
                .config()
                .timeout_send_request(Some(Duration::from_secs(CONNECT_SECONDS)))
                .timeout_recv_response(Some(Duration::from_secs(CONNECT_SECONDS)))
                .timeout_recv_body(Some(Duration::from_secs(CONNECT_SECONDS)))
                .build();
            let _ = self.with_headers(request).call();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(url: &str) -> String {
        match Http::new(url) {
            Ok(_) => "ok".into(),
            Err(UpstreamError::Http { why, .. }) => why,
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn only_plain_http_urls_with_a_host_are_taken() {
        assert_eq!(why("http://127.0.0.1:8000/mcp"), "ok");
        assert_eq!(why("http://localhost"), "ok");
        assert!(why("https://mcp.example/mcp").starts_with("https is not supported"));
        assert_eq!(why("ftp://mcp.example/mcp"), "the URL must start with http://");
        assert_eq!(why("127.0.0.1:8000/mcp"), "the URL must start with http://");
        assert_eq!(why("http://"), "the URL names no host");
        assert_eq!(why("http:///mcp"), "the URL names no host");
    }
}
