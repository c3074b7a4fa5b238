//! The client side: an MCP server run as a child process (`CMD ARGS…`), spoken to on its stdin and stdout.
//! One reader thread routes the server's answers to the waiting requests and hands its own requests and
//! notifications to a [`Handler`]; requests may be sent from any thread.

use std::collections::HashMap;
use std::io::BufReader;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::jsonrpc::{Frame, FrameReader, MAX_FRAME_BYTES, Message, Writer, parse};

/// What went wrong talking to the upstream server.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum UpstreamError {
    /// The server could not be started.
    #[error("cannot start the MCP server `{command}`: {reason}")]
    Spawn {
        /// The command.
        command: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The server's process ended (or closed its output).
    #[error("the upstream MCP server exited")]
    Exited,
    /// No answer within the time allowed, in seconds.
    #[error("the upstream MCP server did not answer `{method}` within {seconds} s")]
    Timeout {
        /// The method asked.
        method: String,
        /// The time waited, in seconds.
        seconds: u64,
    },
    /// The server answered with a JSON-RPC error (the error object as sent).
    #[error("the upstream MCP server answered `{method}` with an error: {error}")]
    Rpc {
        /// The method asked.
        method: String,
        /// The error object.
        error: Value,
    },
    /// The server's answer does not have the shape MCP gives it.
    #[error("the upstream MCP server's answer to `{method}` is malformed: {why}")]
    Malformed {
        /// The method asked.
        method: String,
        /// What is wrong.
        why: String,
    },
}

/// A message the server sends of its own accord.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A notification (`notifications/tools/list_changed`, progress, log messages).
    Notification {
        /// The method.
        method: String,
        /// Its parameters.
        params: Option<Value>,
    },
    /// A request of the server to its client (sampling, elicitation, roots, ping): answer with
    /// [`Upstream::respond`].
    Request {
        /// The server's id for it.
        id: Value,
        /// The method.
        method: String,
        /// Its parameters.
        params: Option<Value>,
    },
    /// The server's output ended: it exited or closed it. Every waiting request was answered
    /// [`UpstreamError::Exited`].
    Closed,
}

/// Called on the reader thread for everything the server sends that is not an answer.
pub type Handler = Arc<dyn Fn(Incoming) + Send + Sync>;

type Pending = Arc<Mutex<HashMap<u64, mpsc::Sender<Result<Value, Value>>>>>;

/// A running MCP server, initialized.
pub struct Upstream {
    writer: Writer,
    pending: Pending,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
    child: Mutex<Child>,
    /// The server's answer to `initialize` (`protocolVersion`, `capabilities`, `serverInfo`, `instructions`).
    pub initialized: Value,
}

/// How long `initialize` may take, in seconds (a server started by `uvx` may download first).
pub const INITIALIZE_SECONDS: u64 = 60;

/// How long one readiness try waits for `tools/list` after `initialize`, in milliseconds.
pub const READY_TRY_MILLIS: u64 = 500;

/// How many readiness tries are made (with [`READY_TRY_MILLIS`]: 30 s).
pub const READY_TRIES: u64 = 60;

impl Upstream {
    /// Starts `command args…`, its stderr shared with ours, and initializes it (protocol
    /// [`crate::PROTOCOL_VERSION`], client `permitc`), then sends `notifications/initialized`.
    ///
    /// Errors: [`UpstreamError::Spawn`] when it cannot be started; the errors of [`Upstream::request`] for
    /// `initialize`.
    pub fn spawn(command: &str, args: &[String], handler: Handler) -> Result<Upstream, UpstreamError> {
        let mut child = Command::new(command)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| UpstreamError::Spawn { command: command.to_string(), reason: e.to_string() })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(UpstreamError::Spawn { command: command.to_string(), reason: "no pipes".into() });
        };
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        {
            let pending = Arc::clone(&pending);
            let alive = Arc::clone(&alive);
            std::thread::Builder::new()
                .name("mcp-upstream-reader".into())
                .spawn(move || read_loop(BufReader::new(stdout), &pending, &alive, &handler))
                .map_err(|e| UpstreamError::Spawn { command: command.to_string(), reason: e.to_string() })?;
        }
        let mut upstream = Upstream {
            writer: Writer::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
            alive,
            child: Mutex::new(child),
            initialized: Value::Null,
        };
        let params = json!({
            "protocolVersion": crate::PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "permitc", "version": env!("CARGO_PKG_VERSION")},
        });
        let answer = upstream.request("initialize", Some(params), Duration::from_secs(INITIALIZE_SECONDS))?;
        if !answer.is_object() {
            return Err(UpstreamError::Malformed { method: "initialize".into(), why: "not an object".into() });
        }
        upstream.initialized = answer;
        upstream.notify("notifications/initialized", None);
        upstream.wait_until_ready()?;
        Ok(upstream)
    }

    /// Waits until the server answers `tools/list` (each try [`READY_TRY_MILLIS`], at most [`READY_TRIES`]
    /// tries). The Python SDK's server loses a request that arrives just after its `initialize` answer, so
    /// nothing else is sent before this idempotent one is answered. A server without tools (an error answer)
    /// is ready too.
    ///
    /// Errors: [`UpstreamError::Exited`]; [`UpstreamError::Timeout`] after the last try.
    fn wait_until_ready(&self) -> Result<(), UpstreamError> {
        for _ in 0..READY_TRIES {
            match self.request("tools/list", Some(json!({})), Duration::from_millis(READY_TRY_MILLIS)) {
                Ok(_) | Err(UpstreamError::Rpc { .. }) => return Ok(()),
                Err(UpstreamError::Timeout { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(UpstreamError::Timeout { method: "tools/list".into(), seconds: READY_TRIES * READY_TRY_MILLIS / 1000 })
    }

    /// Whether the server's output is still open.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Sends a request and waits up to `timeout` for its answer (the `result`).
    ///
    /// Errors: [`UpstreamError::Exited`] (before or while waiting), [`UpstreamError::Timeout`],
    /// [`UpstreamError::Rpc`] for an error answer.
    pub fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, UpstreamError> {
        if !self.is_alive() {
            return Err(UpstreamError::Exited);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id, tx);
        }
        // The reader drains the waiting requests when the server exits: one inserted after that would wait
        // for nothing.
        if !self.is_alive() {
            self.forget(id);
            return Err(UpstreamError::Exited);
        }
        // `params` always an object: the Python SDK's server drops a request without one unanswered.
        let params = Some(params.unwrap_or_else(|| json!({})));
        let message = Message::Request { id: json!(id), method: method.to_string(), params };
        if self.writer.send(&message).is_err() {
            self.forget(id);
            return Err(UpstreamError::Exited);
        }
        match rx.recv_timeout(timeout) {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) if error == exited_marker() => Err(UpstreamError::Exited),
            Ok(Err(error)) => Err(UpstreamError::Rpc { method: method.to_string(), error }),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.forget(id);
                Err(UpstreamError::Timeout { method: method.to_string(), seconds: timeout.as_secs() })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(UpstreamError::Exited),
        }
    }

    fn forget(&self, id: u64) {
        if let Ok(mut p) = self.pending.lock() {
            p.remove(&id);
        }
    }

    /// Sends a notification (nothing is answered). A closed pipe is ignored: the reader sees the exit.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        let _ = self.writer.send(&Message::Notification { method: method.to_string(), params });
    }

    /// Answers a request the server made ([`Incoming::Request`]).
    pub fn respond(&self, id: Value, outcome: Result<Value, Value>) {
        let _ = self.writer.send(&Message::Response { id, outcome });
    }

    /// Every tool the server lists, following `nextCursor` (at most 1,000 pages), each as the object sent.
    ///
    /// Errors: [`Upstream::request`]'s, and [`UpstreamError::Malformed`] for an answer without a `tools` list.
    pub fn list_tools(&self, timeout: Duration) -> Result<Vec<Value>, UpstreamError> {
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..1000 {
            // Always an object: the Python SDK's server drops a `tools/list` without `params` unanswered.
            let params = cursor.take().map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let answer = self.request("tools/list", Some(params), timeout)?;
            let Some(page) = answer.get("tools").and_then(Value::as_array) else {
                return Err(UpstreamError::Malformed { method: "tools/list".into(), why: "no `tools` list".into() });
            };
            tools.extend(page.iter().cloned());
            match answer.get("nextCursor") {
                Some(c @ Value::String(_)) => cursor = Some(c.clone()),
                _ => return Ok(tools),
            }
        }
        Err(UpstreamError::Malformed { method: "tools/list".into(), why: "more than 1,000 pages".into() })
    }

    /// Stops the server: closes nothing gracefully, kills the process and reaps it.
    pub fn kill(&self) {
        if let Ok(mut c) = self.child.lock() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The error value the reader gives waiting requests when the server exits (never a server's own: it has a
/// key no JSON-RPC error object has).
fn exited_marker() -> Value {
    json!({"permits_upstream_exited": true})
}

fn read_loop(reader: BufReader<std::process::ChildStdout>, pending: &Pending, alive: &AtomicBool, handler: &Handler) {
    let mut frames = FrameReader::new(reader, MAX_FRAME_BYTES);
    while let Ok(Some(frame)) = frames.next_frame() {
        let text = match frame {
            Frame::Text(t) => t,
            Frame::TooLong(n) => {
                eprintln!("permitc mcp: the upstream server sent a frame of {n} bytes: skipped");
                continue;
            }
            Frame::NotUtf8 => {
                eprintln!("permitc mcp: the upstream server sent a frame that is not UTF-8: skipped");
                continue;
            }
        };
        match parse(&text) {
            Ok(Message::Response { id, outcome }) => {
                let waiting = id.as_u64().and_then(|n| pending.lock().ok().and_then(|mut p| p.remove(&n)));
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(outcome);
                    }
                    None => eprintln!("permitc mcp: the upstream server answered an unknown request id {id}"),
                }
            }
            Ok(Message::Request { id, method, params }) => handler(Incoming::Request { id, method, params }),
            Ok(Message::Notification { method, params }) => handler(Incoming::Notification { method, params }),
            Err(m) => eprintln!("permitc mcp: the upstream server sent a malformed frame: {}", m.why),
        }
    }
    alive.store(false, Ordering::SeqCst);
    if let Ok(mut p) = pending.lock() {
        for (_, tx) in p.drain() {
            let _ = tx.send(Err(exited_marker()));
        }
    }
    handler(Incoming::Closed);
}
