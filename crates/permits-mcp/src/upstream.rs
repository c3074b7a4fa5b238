//! The client side: an MCP server run as a child process (`CMD ARGS…`, spoken to on its stdin and stdout) or
//! reached at a URL over the streamable-HTTP transport ([`crate::http`]). Answers are routed to the waiting
//! requests; the server's own requests and notifications go to a [`Handler`]; requests may be sent from any
//! thread.

use std::collections::HashMap;
use std::io::BufReader;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http::Http;
use crate::jsonrpc::{Frame, FrameReader, MAX_FRAME_BYTES, Message, parse};
use crate::pipe::PipeWriter;

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
    /// The server at a URL could not be reached, or answered with an HTTP error or something that is not an
    /// MCP answer (streamable HTTP only).
    #[error("the upstream MCP server at {url}: {why}")]
    Http {
        /// The server's URL.
        url: String,
        /// What happened.
        why: String,
    },
    /// The server at a URL ended the session (it answered `404 Not Found` to the session's id): every later
    /// request is answered this way, as for an exited server.
    #[error("the upstream MCP server at {url} ended the session")]
    Ended {
        /// The server's URL.
        url: String,
    },
    /// The request was cancelled ([`Upstream::cancel`]) before its answer came.
    #[error("the request was cancelled")]
    Cancelled,
    /// The request never reached the server, so it cannot have acted on it: the server was gone before it
    /// was written, its pipe was closed, or no thread could post it. Said as its `cause` (one of the other
    /// errors: [`UpstreamError::Exited`], [`UpstreamError::Ended`], [`UpstreamError::Http`]).
    #[error("{cause}")]
    NotSent {
        /// Why it could not be sent.
        cause: Box<UpstreamError>,
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
    /// The server's output ended: it exited or closed it (or, over HTTP, ended the session). Every waiting
    /// request was answered [`UpstreamError::Exited`] (or [`UpstreamError::Ended`]).
    Closed,
}

/// Where the server is: a command to start, or a streamable-HTTP endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Server {
    /// `command args…`, spoken to on its stdin and stdout.
    Command {
        /// The command.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// The MCP endpoint's URL (`http://127.0.0.1:8000/mcp`), spoken to over streamable HTTP.
    Url(String),
}

impl Server {
    /// Starts or connects to the server and initializes it ([`Upstream::spawn`], [`Upstream::connect`]).
    ///
    /// Errors: theirs.
    pub fn start(&self, capabilities: Value, handler: Handler) -> Result<Upstream, UpstreamError> {
        match self {
            Server::Command { command, args } => Upstream::spawn(command, args, capabilities, handler),
            Server::Url(url) => Upstream::connect(url, capabilities, handler),
        }
    }
}

/// Called on the reader thread for everything the server sends that is not an answer.
pub type Handler = Arc<dyn Fn(Incoming) + Send + Sync>;

/// Why a request got no result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Failure {
    /// The server answered with this JSON-RPC error object.
    Rpc(Value),
    /// The server exited (or its output closed).
    Exited,
    /// The session at a URL ended.
    Ended,
    /// An HTTP failure, said in words.
    Http(String),
    /// Cancelled by us.
    Cancelled,
    /// No answer before its deadline ([`Upstream::request_then`]).
    TimedOut,
    /// Never sent, for this reason ([`UpstreamError::NotSent`]).
    NotSent(Box<Failure>),
}

/// A function given a request's outcome ([`Waiter::Then`]).
type Then = Box<dyn FnOnce(Result<Value, Failure>) + Send>;

/// What is done with a request's answer: sent to the thread that waits for it, or handed to a function
/// ([`Upstream::request_then`]) on the thread that has the answer.
enum Waiter {
    /// A thread waits in [`Upstream::request_noting`].
    Blocking(mpsc::Sender<Result<Value, Failure>>),
    /// Called once with the answer, or with [`Failure::TimedOut`] once `deadline` has passed.
    Then {
        /// The function.
        then: Then,
        /// When it is answered [`Failure::TimedOut`].
        deadline: Instant,
    },
}

impl Waiter {
    fn answer(self, outcome: Result<Value, Failure>) {
        match self {
            Waiter::Blocking(tx) => {
                let _ = tx.send(outcome);
            }
            Waiter::Then { then, .. } => then(outcome),
        }
    }
}

/// The error a request's `failure` is, for `method` (`url`: the server's, over HTTP; `seconds`: how long
/// it was waited for).
fn error_of(failure: Failure, method: &str, url: &str, seconds: u64) -> UpstreamError {
    match failure {
        Failure::Rpc(error) => UpstreamError::Rpc { method: method.to_string(), error },
        Failure::Exited => UpstreamError::Exited,
        Failure::Ended => UpstreamError::Ended { url: url.to_string() },
        Failure::Http(why) => UpstreamError::Http { url: url.to_string(), why },
        Failure::Cancelled => UpstreamError::Cancelled,
        Failure::TimedOut => UpstreamError::Timeout { method: method.to_string(), seconds },
        Failure::NotSent(cause) => UpstreamError::NotSent { cause: Box::new(error_of(*cause, method, url, seconds)) },
    }
}

/// What both transports share: the waiting requests, whether the server is still there, and the handler.
pub(crate) struct Core {
    pending: Mutex<HashMap<u64, Waiter>>,
    alive: AtomicBool,
    handler: Handler,
    /// Whether the thread that times out [`Waiter::Then`] requests runs.
    watching: AtomicBool,
}

impl Core {
    fn new(handler: Handler) -> Core {
        Core {
            pending: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
            handler,
            watching: AtomicBool::new(false),
        }
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Whether request `id` still waits for its answer.
    pub(crate) fn is_waiting(&self, id: u64) -> bool {
        self.pending.lock().map(|p| p.contains_key(&id)).unwrap_or(false)
    }

    /// Answers the waiting request `id` with `outcome` (nothing when it no longer waits).
    pub(crate) fn settle(&self, id: u64, outcome: Result<Value, Failure>) {
        let waiting = self.pending.lock().ok().and_then(|mut p| p.remove(&id));
        if let Some(waiter) = waiting {
            waiter.answer(outcome);
        }
    }

    /// Answers [`Failure::TimedOut`] to every [`Waiter::Then`] whose deadline is past `now`.
    fn expire(&self, now: Instant) {
        let expired: Vec<Waiter> = match self.pending.lock() {
            Ok(mut p) => {
                let ids: Vec<u64> = p
                    .iter()
                    .filter(|(_, w)| matches!(w, Waiter::Then { deadline, .. } if *deadline <= now))
                    .map(|(id, _)| *id)
                    .collect();
                ids.iter().filter_map(|id| p.remove(id)).collect()
            }
            Err(_) => Vec::new(),
        };
        for waiter in expired {
            waiter.answer(Err(Failure::TimedOut));
        }
    }

    /// Starts the thread that times out the [`Waiter::Then`] requests (once; it checks every
    /// [`WATCH_MILLIS`] and ends with the server).
    fn watch(core: &Arc<Core>) {
        if core.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        let watched = Arc::clone(core);
        let started = std::thread::Builder::new().name("mcp-upstream-timeouts".into()).spawn(move || {
            while watched.is_alive() {
                std::thread::sleep(Duration::from_millis(WATCH_MILLIS));
                watched.expire(Instant::now());
            }
        });
        if started.is_err() {
            // Tried again by the next request.
            core.watching.store(false, Ordering::SeqCst);
        }
    }

    /// Routes one message's text from the server: an answer to its request, the rest to the handler.
    pub(crate) fn dispatch(&self, text: &str) {
        match parse(text) {
            Ok(Message::Response { id, outcome }) => {
                let waiting = id.as_u64().and_then(|n| self.pending.lock().ok().and_then(|mut p| p.remove(&n)));
                match waiting {
                    Some(waiter) => waiter.answer(outcome.map_err(Failure::Rpc)),
                    None => eprintln!("permitc mcp: the upstream server answered an unknown request id {id}"),
                }
            }
            Ok(Message::Request { id, method, params }) => (self.handler)(Incoming::Request { id, method, params }),
            Ok(Message::Notification { method, params }) => (self.handler)(Incoming::Notification { method, params }),
            Err(m) => eprintln!("permitc mcp: the upstream server sent a malformed message: {}", m.why),
        }
    }

    /// The server is gone: every waiting request is answered `failure`, and the handler told (once).
    pub(crate) fn close(&self, failure: Failure) {
        if self.shut(failure) {
            (self.handler)(Incoming::Closed);
        }
    }

    /// We stop: every waiting request is answered `failure`; the handler is not told. Whether the server was
    /// still there.
    fn shut(&self, failure: Failure) -> bool {
        let was = self.alive.swap(false, Ordering::SeqCst);
        // Answered outside the lock: a function may send another request (which fails: not alive).
        let waiting: Vec<Waiter> =
            self.pending.lock().map(|mut p| p.drain().map(|(_, w)| w).collect()).unwrap_or_default();
        for waiter in waiting {
            waiter.answer(Err(failure.clone()));
        }
        was
    }
}

/// What [`Upstream::request_then_now`] did with a request.
#[must_use = "a request left for later must be sent"]
pub enum Soon<'u> {
    /// Sent (over HTTP: handed to the thread that posts it).
    Sent,
    /// Registered, not sent: the pipe had no room for it whole now. [`Unsent::send`] it.
    Later(Unsent<'u>),
    /// Not sent, and never will be: the server is gone. Its function was answered with the failure.
    Failed,
}

/// A request registered but not sent yet ([`Soon::Later`]): its answer, when it comes, goes to the function
/// it was registered with.
#[must_use = "send it: its function waits for an answer that only comes once it is sent"]
pub struct Unsent<'u> {
    upstream: &'u Upstream,
    id: u64,
    message: Message,
    method: String,
    timeout: Duration,
}

impl Unsent<'_> {
    /// Sends the request, waiting for room in the pipe as long as it takes; a request that cannot be sent
    /// has its function answered with the failure.
    pub fn send(self) {
        let _ = self.upstream.write_request(self.id, &self.message, &self.method, self.timeout);
    }

    /// Never sends it: its function is answered now, [`UpstreamError::Cancelled`], instead of at its
    /// deadline.
    pub fn abandon(self) {
        self.upstream.core.settle(self.id, Err(Failure::Cancelled));
    }
}

enum Link {
    Stdio { writer: PipeWriter, child: Mutex<Child> },
    Http(Arc<Http>),
}

/// A running MCP server, initialized.
pub struct Upstream {
    link: Link,
    core: Arc<Core>,
    next_id: AtomicU64,
    /// The server's answer to `initialize` (`protocolVersion`, `capabilities`, `serverInfo`, `instructions`).
    pub initialized: Value,
}

/// How long `initialize` may take, in seconds (a server started by `uvx` may download first).
pub const INITIALIZE_SECONDS: u64 = 60;

/// How long one readiness try waits for `tools/list` after `initialize`, in milliseconds.
pub const READY_TRY_MILLIS: u64 = 500;

/// How often the requests sent with [`Upstream::request_then`] are checked for their deadline, in
/// milliseconds.
pub const WATCH_MILLIS: u64 = 500;

/// How many readiness tries are made (with [`READY_TRY_MILLIS`]: 30 s).
pub const READY_TRIES: u64 = 60;

impl Upstream {
    /// Starts `command args…`, its stderr shared with ours, and initializes it (protocol
    /// [`crate::PROTOCOL_VERSION`], client `permitc`, the client `capabilities` given), then sends
    /// `notifications/initialized`.
    ///
    /// Errors: [`UpstreamError::Spawn`] when it cannot be started; the errors of [`Upstream::request`] for
    /// `initialize`.
    pub fn spawn(
        command: &str,
        args: &[String],
        capabilities: Value,
        handler: Handler,
    ) -> Result<Upstream, UpstreamError> {
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
        let core = Arc::new(Core::new(handler));
        {
            let core = Arc::clone(&core);
            std::thread::Builder::new()
                .name("mcp-upstream-reader".into())
                .spawn(move || read_loop(BufReader::new(stdout), &core))
                .map_err(|e| UpstreamError::Spawn { command: command.to_string(), reason: e.to_string() })?;
        }
        let mut upstream = Upstream {
            link: Link::Stdio { writer: PipeWriter::new(stdin), child: Mutex::new(child) },
            core,
            next_id: AtomicU64::new(1),
            initialized: Value::Null,
        };
        upstream.initialize(capabilities)?;
        upstream.wait_until_ready()?;
        Ok(upstream)
    }

    /// Connects to the MCP endpoint at `url` over streamable HTTP ([`crate::http`]) and initializes it as
    /// [`Upstream::spawn`] does; then listens on the session's own event stream (`GET`) for what the server
    /// sends outside any request, when it offers one.
    ///
    /// Errors: [`UpstreamError::Http`] for a URL that is not `http://` or a server that cannot be reached or
    /// does not answer as MCP says; the errors of [`Upstream::request`] for `initialize`.
    pub fn connect(url: &str, capabilities: Value, handler: Handler) -> Result<Upstream, UpstreamError> {
        let http = Arc::new(Http::new(url)?);
        let mut upstream = Upstream {
            link: Link::Http(Arc::clone(&http)),
            core: Arc::new(Core::new(handler)),
            next_id: AtomicU64::new(1),
            initialized: Value::Null,
        };
        upstream.initialize(capabilities)?;
        if let Some(v) = upstream.initialized.get("protocolVersion").and_then(Value::as_str) {
            http.set_protocol(v);
        }
        Http::listen(&http, &upstream.core);
        Ok(upstream)
    }

    fn initialize(&mut self, capabilities: Value) -> Result<(), UpstreamError> {
        let params = json!({
            "protocolVersion": crate::PROTOCOL_VERSION,
            "capabilities": capabilities,
            "clientInfo": {"name": "permitc", "version": env!("CARGO_PKG_VERSION")},
        });
        let answer = self.request("initialize", Some(params), Duration::from_secs(INITIALIZE_SECONDS))?;
        if !answer.is_object() {
            return Err(UpstreamError::Malformed { method: "initialize".into(), why: "not an object".into() });
        }
        self.initialized = answer;
        self.notify("notifications/initialized", None);
        Ok(())
    }

    /// Waits until the server answers `tools/list` (each try [`READY_TRY_MILLIS`], at most [`READY_TRIES`]
    /// tries). The Python SDK's server on stdio loses a request that arrives just after its `initialize`
    /// answer, so nothing else is sent before this idempotent one is answered. A server without tools (an
    /// error answer) is ready too.
    ///
    /// Errors: [`UpstreamError::Exited`] or [`UpstreamError::NotSent`]; [`UpstreamError::Timeout`] after the
    /// last try.
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

    /// What a request to a server that is gone is answered ([`UpstreamError::Exited`], or over HTTP
    /// [`UpstreamError::Ended`] once the session ended), or `None` while it is there
    /// ([`Upstream::is_alive`]).
    pub fn gone(&self) -> Option<UpstreamError> {
        (!self.is_alive()).then(|| error_of(self.gone_as(), "", &self.url(), 0))
    }

    /// How a server that is gone went: its session ended (over HTTP), else it exited.
    fn gone_as(&self) -> Failure {
        match &self.link {
            Link::Http(h) if h.is_ended() => Failure::Ended,
            _ => Failure::Exited,
        }
    }

    /// Whether the server is still there (its output open; over HTTP, its session not ended).
    pub fn is_alive(&self) -> bool {
        self.core.is_alive()
    }

    /// The URL of a server reached over HTTP, for messages.
    fn url(&self) -> String {
        match &self.link {
            Link::Http(h) => h.url().to_string(),
            Link::Stdio { .. } => String::new(),
        }
    }

    /// Sends a request and waits up to `timeout` for its answer (the `result`).
    ///
    /// Errors: [`UpstreamError::NotSent`] (the server gone before it was sent), [`UpstreamError::Exited`]
    /// (while waiting), [`UpstreamError::Timeout`], [`UpstreamError::Rpc`] for an error answer; over HTTP
    /// [`UpstreamError::Http`] and [`UpstreamError::Ended`].
    pub fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, UpstreamError> {
        self.request_noting(method, params, timeout, |_| {})
    }

    /// [`Upstream::request`], telling `note` the id the request is sent with before it is sent (a
    /// cancellation names it: `notifications/cancelled`).
    ///
    /// Errors: [`Upstream::request`]'s.
    pub fn request_noting(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        note: impl FnOnce(u64),
    ) -> Result<Value, UpstreamError> {
        let (tx, rx) = mpsc::channel();
        let id = self.send_request(method, params, timeout, note, Waiter::Blocking(tx))?;
        match rx.recv_timeout(timeout) {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(failure)) => Err(error_of(failure, method, &self.url(), timeout.as_secs())),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(UpstreamError::Exited),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.forget(id);
                Err(UpstreamError::Timeout { method: method.to_string(), seconds: timeout.as_secs() })
            }
        }
    }

    /// [`Upstream::request_noting`] without a thread waiting: `then` is called once with the outcome, on the
    /// thread that has it — the reader's for an answer (so it must not wait for another answer of this
    /// server), the caller's for a request that could not be sent, the one that cancels
    /// ([`Upstream::cancel`]), or the one that times requests out ([`WATCH_MILLIS`]) once `timeout` has
    /// passed.
    ///
    /// `then`'s errors: [`Upstream::request`]'s.
    pub fn request_then(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        note: impl FnOnce(u64),
        then: impl FnOnce(Result<Value, UpstreamError>) + Send + 'static,
    ) {
        let waiter = self.then_waiter(method, timeout, then);
        // A request that cannot be sent has its waiter answered with the failure.
        let _ = self.send_request(method, params, timeout, note, waiter);
    }

    /// The waiter of [`Upstream::request_then`]: `then` gets the outcome said as the error of `method`,
    /// once, before `timeout` has passed (the timeouts' thread started if it is not yet).
    fn then_waiter(
        &self,
        method: &str,
        timeout: Duration,
        then: impl FnOnce(Result<Value, UpstreamError>) + Send + 'static,
    ) -> Waiter {
        let (asked, url, seconds) = (method.to_string(), self.url(), timeout.as_secs());
        Core::watch(&self.core);
        Waiter::Then {
            then: Box::new(move |outcome| then(outcome.map_err(|f| error_of(f, &asked, &url, seconds)))),
            deadline: Instant::now() + timeout,
        }
    }

    /// [`Upstream::request_then`] for a caller that must not wait to send: the request is written now if the
    /// pipe to the server takes it whole at once ([`Soon::Sent`]; over HTTP it is always handed to a thread
    /// that posts it), else it is registered and left for the caller to [`Unsent::send`] once it may wait
    /// ([`Soon::Later`]). The local mode's lane sends a read this way while it holds the store's write lock
    /// (`Runtime::claim_if_alone_sending`).
    ///
    /// `then`'s errors: [`Upstream::request`]'s. A request that cannot be sent (the server is gone) has
    /// `then` called with the failure before this returns: [`Soon::Failed`].
    pub fn request_then_now(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        note: impl FnOnce(u64),
        then: impl FnOnce(Result<Value, UpstreamError>) + Send + 'static,
    ) -> Soon<'_> {
        let waiter = self.then_waiter(method, timeout, then);
        let Ok((id, message)) = self.register(method, params, timeout, note, waiter) else { return Soon::Failed };
        if let Link::Stdio { writer, .. } = &self.link {
            return match writer.try_send(&message) {
                Ok(true) => Soon::Sent,
                Ok(false) => Soon::Later(Unsent { upstream: self, id, message, method: method.to_string(), timeout }),
                Err(_) => {
                    self.unsent(id, Failure::Exited, method, timeout);
                    Soon::Failed
                }
            };
        }
        match self.write_request(id, &message, method, timeout) {
            Ok(()) => Soon::Sent,
            Err(_) => Soon::Failed,
        }
    }

    /// Registers `waiter` under a new id, tells `note` the id, and sends the request; the id. A request that
    /// cannot be sent has its waiter answered with the failure (unless the server's end answered it first).
    ///
    /// Errors: [`UpstreamError::NotSent`] when the server is gone ([`UpstreamError::Exited`] or
    /// [`UpstreamError::Ended`]) or no thread can post it ([`UpstreamError::Http`]).
    fn send_request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        note: impl FnOnce(u64),
        waiter: Waiter,
    ) -> Result<u64, UpstreamError> {
        let (id, message) = self.register(method, params, timeout, note, waiter)?;
        self.write_request(id, &message, method, timeout)?;
        Ok(id)
    }

    /// The first half of [`Upstream::send_request`]: registers `waiter` under a new id, tells `note` the id,
    /// and answers the id with the request to send. A server that is gone has the waiter answered with the
    /// failure here.
    ///
    /// Errors: [`UpstreamError::NotSent`] when the server is gone ([`UpstreamError::Exited`] or
    /// [`UpstreamError::Ended`]).
    fn register(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        note: impl FnOnce(u64),
        waiter: Waiter,
    ) -> Result<(u64, Message), UpstreamError> {
        if !self.is_alive() {
            let failure = Failure::NotSent(Box::new(self.gone_as()));
            let e = error_of(failure.clone(), method, &self.url(), timeout.as_secs());
            waiter.answer(Err(failure));
            return Err(e);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut p) = self.core.pending.lock() {
            p.insert(id, waiter);
        }
        // The server's end drains the waiting requests: one inserted after that would wait for nothing.
        if !self.is_alive() {
            return Err(self.unsent(id, self.gone_as(), method, timeout));
        }
        note(id);
        // `params` always an object: the Python SDK's server drops a request without one unanswered.
        let params = Some(params.unwrap_or_else(|| json!({})));
        Ok((id, Message::Request { id: json!(id), method: method.to_string(), params }))
    }

    /// The second half of [`Upstream::send_request`]: writes request `id` (waiting for room in the pipe), or
    /// over HTTP hands it to a thread that posts it. A request that cannot be sent has its waiter answered
    /// with the failure.
    ///
    /// Errors: [`UpstreamError::NotSent`] for a closed pipe ([`UpstreamError::Exited`]) or when no thread can
    /// post it ([`UpstreamError::Http`]).
    fn write_request(&self, id: u64, message: &Message, method: &str, timeout: Duration) -> Result<(), UpstreamError> {
        match &self.link {
            Link::Stdio { writer, .. } => {
                if writer.send(message).is_err() {
                    return Err(self.unsent(id, Failure::Exited, method, timeout));
                }
            }
            Link::Http(h) => {
                let (h, core, message) = (Arc::clone(h), Arc::clone(&self.core), message.clone());
                let posted = std::thread::Builder::new()
                    .name("mcp-upstream-post".into())
                    .spawn(move || h.post_request(&core, id, &message, timeout));
                if let Err(e) = posted {
                    return Err(self.unsent(
                        id,
                        Failure::Http(format!("no thread for the request: {e}")),
                        method,
                        timeout,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Request `id` could not be sent: its waiter is answered that it was not, for `failure`
    /// ([`UpstreamError::NotSent`]; unless it was answered already); the error to say.
    fn unsent(&self, id: u64, failure: Failure, method: &str, timeout: Duration) -> UpstreamError {
        let failure = Failure::NotSent(Box::new(failure));
        let e = error_of(failure.clone(), method, &self.url(), timeout.as_secs());
        self.core.settle(id, Err(failure));
        e
    }

    fn forget(&self, id: u64) {
        if let Ok(mut p) = self.core.pending.lock() {
            p.remove(&id);
        }
    }

    fn send_message(&self, message: &Message) {
        match &self.link {
            // A closed pipe is ignored: the reader sees the exit.
            Link::Stdio { writer, .. } => {
                let _ = writer.send(message);
            }
            Link::Http(h) => h.post_message(&self.core, message),
        }
    }

    /// Sends a notification (nothing is answered). A closed pipe is ignored (the reader sees the exit); over
    /// HTTP it is posted before this returns, and a failure is logged.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        self.send_message(&Message::Notification { method: method.to_string(), params });
    }

    /// Answers a request the server made ([`Incoming::Request`]), as [`Upstream::notify`] sends.
    pub fn respond(&self, id: Value, outcome: Result<Value, Value>) {
        self.send_message(&Message::Response { id, outcome });
    }

    /// Cancels request `id` (as [`Upstream::request_noting`] told it): `notifications/cancelled` with the
    /// `reason`, if any, and the request stops waiting, answered [`UpstreamError::Cancelled`] (the server
    /// need not answer a cancelled request).
    pub fn cancel(&self, id: u64, reason: Option<&str>) {
        let mut params = json!({"requestId": id});
        if let Some(r) = reason {
            params["reason"] = json!(r);
        }
        self.notify("notifications/cancelled", Some(params));
        self.core.settle(id, Err(Failure::Cancelled));
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

    /// Stops the server: a child process is killed and reaped; an HTTP session is ended (`DELETE`, at most a
    /// few seconds) and every waiting request answered [`UpstreamError::Exited`].
    pub fn kill(&self) {
        match &self.link {
            Link::Stdio { child, .. } => {
                if let Ok(mut c) = child.lock() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            Link::Http(h) => {
                h.end();
                self.core.shut(Failure::Exited);
            }
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.kill();
    }
}

fn read_loop(reader: BufReader<std::process::ChildStdout>, core: &Core) {
    let mut frames = FrameReader::new(reader, MAX_FRAME_BYTES);
    while let Ok(Some(frame)) = frames.next_frame() {
        match frame {
            Frame::Text(t) => core.dispatch(&t),
            Frame::TooLong(n) => eprintln!("permitc mcp: the upstream server sent a frame of {n} bytes: skipped"),
            Frame::NotUtf8 => eprintln!("permitc mcp: the upstream server sent a frame that is not UTF-8: skipped"),
        }
    }
    core.close(Failure::Exited);
}

#[cfg(test)]
mod tests {
    use super::*;

    type Got = Arc<Mutex<Vec<(u64, Result<Value, Failure>)>>>;

    /// What functions given to `request_then_now` were answered, under the number each was given.
    type Outcomes = Arc<Mutex<Vec<(u64, Result<Value, UpstreamError>)>>>;

    /// A waiter that records what it is answered, under `id`.
    fn then(got: &Got, id: u64, deadline: Instant) -> Waiter {
        let got = Arc::clone(got);
        Waiter::Then {
            then: Box::new(move |outcome| {
                got.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((id, outcome))
            }),
            deadline,
        }
    }

    #[test]
    fn a_request_handed_to_a_function_is_answered_once_or_timed_out_after_its_deadline() {
        let core = Core::new(Arc::new(|_| {}));
        let got: Got = Arc::default();
        let now = Instant::now();
        if let Ok(mut p) = core.pending.lock() {
            p.insert(1, then(&got, 1, now - Duration::from_secs(1)));
            p.insert(2, then(&got, 2, now + Duration::from_secs(60)));
            p.insert(3, then(&got, 3, now + Duration::from_secs(60)));
        }
        core.expire(now);
        core.dispatch(r#"{"jsonrpc":"2.0","id":2,"result":{"ok":true}}"#);
        // An answer for a request answered already is not passed on again.
        core.dispatch(r#"{"jsonrpc":"2.0","id":2,"result":{"ok":"twice"}}"#);
        core.dispatch(r#"{"jsonrpc":"2.0","id":1,"result":{"ok":"late"}}"#);
        // The server's end answers the one still waiting, once.
        core.close(Failure::Exited);
        core.close(Failure::Exited);
        let got = got.lock().map(|g| g.clone()).unwrap_or_default();
        assert_eq!(got, vec![(1, Err(Failure::TimedOut)), (2, Ok(json!({"ok": true}))), (3, Err(Failure::Exited))]);
        assert!(!core.is_alive());
    }

    #[test]
    fn a_request_handed_to_a_function_that_cannot_be_sent_is_answered_once_that_it_was_never_sent()
    -> Result<(), Box<dyn std::error::Error>> {
        // A server's input whose reader is gone: every write fails, as the pipe of a server that exited.
        let mut child = Command::new("true").stdin(Stdio::piped()).spawn()?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        child.wait()?;
        // A child another test spawns at the same moment may hold the pipe's other end until its `exec`:
        // wait until no reader is left (a write fails).
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::io::Write::write(&mut stdin, b"\n").is_ok() {
            assert!(Instant::now() < deadline, "the pipe still has a reader");
            std::thread::sleep(Duration::from_millis(5));
        }
        let upstream = Upstream {
            link: Link::Stdio { writer: PipeWriter::new(stdin), child: Mutex::new(child) },
            core: Arc::new(Core::new(Arc::new(|_| {}))),
            next_id: AtomicU64::new(1),
            initialized: Value::Null,
        };
        let got: Arc<Mutex<Vec<Result<Value, UpstreamError>>>> = Arc::default();
        let record = || {
            let got = Arc::clone(&got);
            move |outcome| got.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(outcome)
        };
        let noted = Mutex::new(Vec::new());
        let note = |id| noted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(id);
        // The write fails: answered `Exited`, and no longer waiting.
        upstream.request_then("tools/call", None, Duration::from_secs(60), note, record());
        assert!(!upstream.core.is_waiting(1));
        // The same sent now: `Failed`, its function answered before it returns.
        let soon = upstream.request_then_now("tools/call", None, Duration::from_secs(60), |_| {}, record());
        assert!(matches!(soon, Soon::Failed));
        assert!(!upstream.core.is_waiting(2));
        // The server is gone: answered at once, never registered.
        upstream.core.close(Failure::Exited);
        upstream.request_then("tools/call", None, Duration::from_secs(60), |_| {}, record());
        let got = got.lock().map(|g| g.clone()).unwrap_or_default();
        // None of the three reached the server: each says so, not only that the server is gone.
        assert_eq!(got, vec![Err(UpstreamError::NotSent { cause: Box::new(UpstreamError::Exited) }); 3]);
        assert_eq!(got[0].as_ref().err().map(ToString::to_string).as_deref(), Some("the upstream MCP server exited"));
        assert_eq!(noted.lock().map(|n| n.clone()).unwrap_or_default(), vec![1]);
        Ok(())
    }

    #[test]
    fn a_request_sent_now_goes_whole_or_is_left_for_later_and_one_abandoned_is_answered_at_once()
    -> Result<(), Box<dyn std::error::Error>> {
        // A server that reads nothing for a second: its input fills up.
        let mut child = Command::new("sh").args(["-c", "sleep 1; cat > /dev/null"]).stdin(Stdio::piped()).spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let upstream = Upstream {
            link: Link::Stdio { writer: PipeWriter::new(stdin), child: Mutex::new(child) },
            core: Arc::new(Core::new(Arc::new(|_| {}))),
            next_id: AtomicU64::new(1),
            initialized: Value::Null,
        };
        let got: Outcomes = Arc::default();
        let record = |n: u64| {
            let got = Arc::clone(&got);
            move |outcome| got.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((n, outcome))
        };
        let padding = json!({"padding": "x".repeat(1000)});
        let mut sent = 0;
        let later = loop {
            match upstream.request_then_now(
                "tools/call",
                Some(padding.clone()),
                Duration::from_secs(60),
                |_| {},
                record(sent + 1),
            ) {
                Soon::Sent => sent += 1,
                Soon::Later(unsent) => break unsent,
                Soon::Failed => return Err("the server is there".into()),
            }
            assert!(sent < 10_000, "a pipe holds less than 10 MB");
        };
        assert!(sent >= 4, "a pipe holds a few requests: {sent}");
        // Each one sent and the one left for later wait for their answers; none was answered.
        assert!((1..=sent + 1).all(|id| upstream.core.is_waiting(id)));
        assert!(got.lock().map(|g| g.is_empty()).unwrap_or(false));
        // Abandoned: answered at once (not at its deadline), and no longer waiting.
        later.abandon();
        assert!(!upstream.core.is_waiting(sent + 1));
        // Left for later and sent: written once the server reads (after its `sleep`), waiting for its answer.
        match upstream.request_then_now("tools/call", Some(padding), Duration::from_secs(60), |_| {}, record(sent + 2))
        {
            Soon::Later(unsent) => unsent.send(),
            Soon::Sent => {}
            Soon::Failed => return Err("the server is there".into()),
        }
        assert!(upstream.core.is_waiting(sent + 2));
        let got = got.lock().map(|g| g.clone()).unwrap_or_default();
        assert_eq!(got, vec![(sent + 1, Err(UpstreamError::Cancelled))]);
        upstream.kill();
        Ok(())
    }

    #[test]
    fn each_failure_is_said_as_the_error_of_its_method() {
        let said = |f| error_of(f, "tools/call", "http://127.0.0.1:9/mcp", 300).to_string();
        assert_eq!(said(Failure::TimedOut), "the upstream MCP server did not answer `tools/call` within 300 s");
        assert_eq!(said(Failure::Exited), "the upstream MCP server exited");
        assert_eq!(said(Failure::NotSent(Box::new(Failure::Exited))), "the upstream MCP server exited");
        assert_eq!(said(Failure::Cancelled), "the request was cancelled");
        assert_eq!(said(Failure::Ended), "the upstream MCP server at http://127.0.0.1:9/mcp ended the session");
        assert_eq!(
            said(Failure::Rpc(json!({"code": -32602, "message": "no"}))),
            r#"the upstream MCP server answered `tools/call` with an error: {"code":-32602,"message":"no"}"#
        );
    }
}
