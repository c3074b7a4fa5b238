//! `permitc mcp proxy`: an MCP server on stdio for the agent, an MCP client of the upstream server, and a
//! host of the approval service. Nothing reaches the upstream server's tools but through the service's
//! `/v1/calls` and the execution protocol, exactly as for any remote host; the proxy never touches the store
//! — but in the local mode, where it started the service on the store itself and runs the alone calls there
//! ([`crate::lane`]).
//!
//! - `tools/list` offers the upstream tools whose permits name ([`crate::import::permits_name`]) the skill
//!   offers the agent (so not `never`) and whose tool object still has the table's pin; any other is withheld
//!   (logged on stderr: the service's API records no audit event for a host). An upstream
//!   `notifications/tools/list_changed` re-checks and tells the agent.
//! - `tools/call`: `alone` → forwarded once; `propose` → a proposal, waited for up to `--wait` seconds, then
//!   forwarded exactly once when granted (the claim token is the proxy's), or a tool error with the reason, or
//!   a tool result saying it waits (the proposal's id and where to decide it; `isError`, as it did not run); the same call again in the same
//!   task attaches to the same proposal. `never`, withheld, unknown → a tool error with the reason.
//! - `ping` is answered by the proxy; progress passes through; `resources/*` and `prompts/*` only with
//!   `allow_resources` / `allow_prompts`. Malformed or oversized frames and unknown methods get JSON-RPC
//!   errors, an exited upstream server an error on every request; the proxy keeps serving until its input
//!   ends.
//! - The agent's `notifications/cancelled` names its own request id: a request forwarded upstream is
//!   cancelled there under the id the proxy sent it with (and a cancelled `tools/call`'s receipt is
//!   `unknown`: it may have acted); a call still waiting for a person stops waiting (its proposal stays in the
//!   inbox, and the same call again attaches to it); a call not yet sent is not sent. A cancelled request is
//!   not answered (MCP: the receiver should not answer it).
//! - The server's own requests (sampling, elicitation, roots) pass to the agent under the proxy's own ids and
//!   the agent's answers back, each logged; one the agent declared no capability for is answered with an
//!   error by the proxy. The upstream server is told the client can sample, elicit and list roots, as the
//!   agent may.
//!
//! Threads: the agent's frames are read on the thread that calls [`run`], and each request is answered on a
//! thread of its own — a call that waits for a person holds up nothing else. An alone call the local mode's
//! lane runs has no thread of its own: the reader decides and claims it and sends it upstream, and the
//! thread that reads the upstream server's answer finishes it (the claim durable, the answer, then the
//! receipt). The reader is held for the claim's commit, never for the call.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::canonical::pin;
use crate::import::permits_name;
use crate::jsonrpc::{
    self, Frame, FrameReader, INTERNAL_ERROR, INVALID_PARAMS, MAX_FRAME_BYTES, METHOD_NOT_FOUND, Message, Writer,
    error_object, error_response,
};
use crate::lane::{Lane, LaneOptions, Laned};
use crate::service::{Answer, Service, segment};
use crate::upstream::{Handler, Incoming, Server, Soon, Upstream, UpstreamError};
use permits_runtime::{AdmittedRead, Syncing};

/// How long a forwarded request may wait for the upstream server, in seconds.
pub const UPSTREAM_SECONDS: u64 = 300;

/// The most earlier results kept as evidence for a proposal (spec §5: what the agent saw before it asked).
pub const EVIDENCE_KEPT: usize = 5;

/// The longest answer kept as evidence, in bytes of its JSON; a longer one is kept as its first part.
pub const EVIDENCE_BYTES: usize = 4096;

/// How long one wait for a proposal's decision lasts before the proxy looks whether the agent cancelled the
/// call, in seconds.
pub const CANCEL_POLL_SECONDS: u64 = 2;

/// The capabilities the proxy declares to the upstream server as its client: what an agent may answer
/// (the proxy answers a request the agent declared no capability for with an error itself).
pub fn client_capabilities() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
}

/// What the proxy is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The approval service's base URL.
    pub service: String,
    /// The host key.
    pub key: String,
    /// The agent the calls are made as.
    pub agent: String,
    /// The skill it works in.
    pub skill: String,
    /// The person the work is for, if any.
    pub requester: Option<String>,
    /// How long a proposed call waits for the decision before the agent is told it waits, in seconds.
    pub wait: u64,
    /// The operation key of the task; `None` for a new one per run (`mcp-AGENT-RANDOM`).
    pub task: Option<String>,
    /// The mode the task runs in (spec §3c): the offer is the mode's and every call is made in it; `None`
    /// for no mode.
    pub mode: Option<String>,
    /// The delegation chain the agent works along (spec §3b): each delegating agent with the skill it was
    /// working in, nearest first, root last; empty for an agent working directly. The offer is the chain's
    /// (a tool a link makes `never` is not listed) and every call is made along it; the host key must hold
    /// every agent of it.
    pub via: Vec<(String, String)>,
    /// Pass `resources/*` through.
    pub allow_resources: bool,
    /// Pass `prompts/*` through.
    pub allow_prompts: bool,
    /// The upstream server: a command, or a streamable-HTTP URL.
    pub server: Server,
    /// The local mode's store, where the proxy runs the alone calls itself ([`crate::lane`]); `None`: every
    /// call goes through the service.
    pub lane: Option<LaneOptions>,
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The upstream server could not be started or initialized.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// No random bytes for the session's secret.
    #[error("no random bytes for the claim tokens: {0}")]
    Random(String),
    /// The approval service refused the host key for the work (HTTP 401 or 403 on the offer of the skill):
    /// every request would fail the same way.
    #[error("the approval service refuses the host key for {work} ({code}): {message}")]
    Key {
        /// The work, in words: the agent, the skill, the chain and the mode.
        work: String,
        /// The service's error code (`unauthorized`, `not_your_agent`, …).
        code: String,
        /// The service's message.
        message: String,
    },
}

/// Whether an upstream tool is offered, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Offer {
    Offered,
    Withheld(String),
}

#[derive(Default)]
struct Catalog {
    /// The upstream tools by MCP name, as sent, in the server's order.
    tools: Vec<(String, Value)>,
    /// Each tool's offer, by MCP name.
    offers: BTreeMap<String, Offer>,
    loaded: bool,
}

/// One request of the agent being answered: whether the agent cancelled it, and the id its forwarded request
/// has upstream while it is there.
#[derive(Default)]
struct Flight {
    cancelled: std::sync::atomic::AtomicBool,
    upstream: Mutex<Option<u64>>,
}

impl Flight {
    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Notes the id its forwarded request has upstream (`None` once answered): a cancellation names it.
    fn upstream_is(&self, id: Option<u64>) {
        if let Ok(mut f) = self.upstream.lock() {
            *f = id;
        }
    }
}

/// A request of the upstream server passed to the agent.
struct ServerRequest {
    /// The server's id for it.
    id: Value,
    /// Its method.
    method: String,
}

struct State {
    options: Options,
    service: Service,
    /// The local mode's lane for alone calls, when it opened.
    lane: Option<Lane>,
    agent_out: Writer,
    upstream: OnceLock<Upstream>,
    catalog: Mutex<Catalog>,
    /// The server's requests forwarded to the agent, by our id (as JSON text).
    server_requests: Mutex<HashMap<String, ServerRequest>>,
    /// The agent's requests being answered, by their id (as JSON text; an agent that reuses an id while
    /// its first request is answered has both under it, and a cancellation of that id cancels both).
    flights: Mutex<HashMap<String, Vec<Arc<Flight>>>>,
    /// The capabilities the agent declared in `initialize`.
    agent_capabilities: Mutex<Value>,
    next_id: AtomicU64,
    task: String,
    secret: [u8; 32],
    evidence: Mutex<VecDeque<Value>>,
    /// Protocol version agreed with the agent.
    protocol: Mutex<String>,
    /// Requests of the agent being answered.
    in_flight: AtomicU64,
    /// The executions this gateway is confirming, forwarding or recording right now. The service takes a
    /// second claim or confirmation with this run's token as a retry (as it must, for a host that lost an
    /// answer), so two identical calls at once must not both forward: the gateway runs an execution once.
    sending: Mutex<std::collections::HashSet<String>>,
    /// The agent's input ended and the proxy stops the upstream server itself: its end is not news.
    ending: std::sync::atomic::AtomicBool,
}

/// Work queued for after a request's answer ([`AfterAnswer`]).
type Later = Vec<Box<dyn FnOnce()>>;

std::thread_local! {
    /// The work a request thread does after it has answered the agent ([`AfterAnswer`]); `None` on any
    /// other thread, where such work runs at once.
    static AFTER_ANSWER: std::cell::RefCell<Option<Later>> = const { std::cell::RefCell::new(None) };
}

/// Work a request thread does after its answer is written: recording an alone call's receipt, which the
/// agent need not wait for. The run is `sending` in the service until then, the state that never runs
/// again, so a receipt lost to a crash in between leaves it `sending` (outcome not recorded), never run
/// twice. [`AfterAnswer::later`] off a request thread runs the work at once.
struct AfterAnswer;

impl AfterAnswer {
    /// This thread's work after the answer starts here.
    fn begin() -> AfterAnswer {
        AFTER_ANSWER.with(|a| *a.borrow_mut() = Some(Vec::new()));
        AfterAnswer
    }

    /// Runs `work` after the answer on a request thread, or now on any other thread.
    fn later(work: Box<dyn FnOnce()>) {
        let work = AFTER_ANSWER.with(|a| match a.borrow_mut().as_mut() {
            Some(queue) => {
                queue.push(work);
                None
            }
            None => Some(work),
        });
        if let Some(work) = work {
            work();
        }
    }

    /// Runs the work queued since [`AfterAnswer::begin`], in order.
    fn run(self) {
        let queue = AFTER_ANSWER.with(|a| a.borrow_mut().take()).unwrap_or_default();
        for work in queue {
            work();
        }
    }
}

/// An execution marked as being sent by this gateway ([`State::sending`]), unmarked when dropped: on every
/// return, after its receipt is recorded.
struct Sending {
    state: Arc<State>,
    id: String,
}

impl Sending {
    /// Marks `id`; `None` when this gateway is sending it already.
    fn mark(state: &Arc<State>, id: &str) -> Option<Sending> {
        let mut set = state.sending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        set.insert(id.to_string()).then(|| Sending { state: Arc::clone(state), id: id.to_string() })
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        let mut set = self.state.sending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        set.remove(&self.id);
    }
}

/// One line on stderr, `permitc mcp proxy: MESSAGE`.
pub(crate) fn log(message: &str) {
    use std::io::Write as _;
    // One `write` for the whole line (stderr is unbuffered): the private `permitd` writes its own lines to
    // the same stderr, and they must not interleave within a line.
    let line = format!("permitc mcp proxy: {message}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs the proxy: starts the upstream server, then serves `input` (the agent's frames) until it ends,
/// writing to `output`; then answers the requests in flight and kills the upstream server.
///
/// Errors: [`ProxyError`] when the upstream server cannot be started or initialized, or no random bytes.
pub fn run(
    options: Options,
    input: impl BufRead,
    output: impl std::io::Write + Send + 'static,
) -> Result<(), ProxyError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| ProxyError::Random(e.to_string()))?;
    let task = options.task.clone().unwrap_or_else(|| format!("mcp-{}-{}", options.agent, hex(&secret[..6])));
    let lane = options.lane.as_ref().and_then(|l| match Lane::open(l) {
        Ok(lane) => Some(lane),
        Err(e) => {
            log(&format!("alone calls go through the approval service: the store cannot be opened here ({e})"));
            None
        }
    });
    let state = Arc::new(State {
        service: Service::new(&options.service, &options.key),
        lane,
        options,
        agent_out: Writer::new(output),
        upstream: OnceLock::new(),
        catalog: Mutex::new(Catalog::default()),
        server_requests: Mutex::new(HashMap::new()),
        flights: Mutex::new(HashMap::new()),
        agent_capabilities: Mutex::new(json!({})),
        next_id: AtomicU64::new(1),
        task,
        secret,
        evidence: Mutex::new(VecDeque::new()),
        protocol: Mutex::new(crate::PROTOCOL_VERSION.to_string()),
        in_flight: AtomicU64::new(0),
        sending: Mutex::new(std::collections::HashSet::new()),
        ending: std::sync::atomic::AtomicBool::new(false),
    });
    // A host key the service refuses for this work (unknown, revoked, or not for the agent or a link of its
    // chain) stops the proxy here, before the server is started, instead of failing every request. A
    // service that cannot be reached yet is asked again on the first request.
    if let Ok(answer) = state.service.get(&offer_path(&state.options)) {
        if answer.status == 401 || answer.status == 403 {
            let (code, message) = answer.error();
            return Err(ProxyError::Key { work: work_words(&state.options), code, message });
        }
    }
    let handler: Handler = {
        let state = Arc::clone(&state);
        Arc::new(move |incoming| on_upstream(&state, incoming))
    };
    let upstream = state.options.server.start(client_capabilities(), handler)?;
    let _ = state.upstream.set(upstream);
    log(&format!("serving {} (task `{}`) through {}", work_words(&state.options), state.task, state.service.base()));
    let mut frames = FrameReader::new(input, MAX_FRAME_BYTES);
    loop {
        let frame = match frames.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                log(&format!("reading the agent's input failed: {e}"));
                break;
            }
        };
        let text = match frame {
            Frame::Text(t) => t,
            Frame::TooLong(n) => {
                let why = format!("invalid request: a frame of {n} bytes is over the limit of {MAX_FRAME_BYTES}");
                send(&state, &error_response(Value::Null, jsonrpc::INVALID_REQUEST, why));
                continue;
            }
            Frame::NotUtf8 => {
                send(&state, &error_response(Value::Null, jsonrpc::PARSE_ERROR, "parse error: the frame is not UTF-8"));
                continue;
            }
        };
        match jsonrpc::parse(&text) {
            Ok(Message::Request { id, method, params }) => {
                // Each request on its own thread: a call that waits for a person must not hold up a ping.
                // But an alone call the lane runs, which waits for nothing but its claim's commit, is
                // claimed and sent from here and answered from the upstream's reader.
                let key = id.to_string();
                let flight = Arc::new(Flight::default());
                if let Ok(mut f) = state.flights.lock() {
                    f.entry(key.clone()).or_default().push(Arc::clone(&flight));
                }
                state.in_flight.fetch_add(1, Ordering::SeqCst);
                let mut service = None;
                if method == "tools/call" {
                    match call_from_the_reader(&state, &flight, &id, &key, params.as_ref()) {
                        Fast::Answer(answer) => {
                            conclude(&state, &key, &flight, id, &method, answer, AfterAnswer::begin());
                            continue;
                        }
                        Fast::Forwarded => continue,
                        Fast::Service(call) => service = Some(call),
                        Fast::Thread => {}
                    }
                }
                let spawned = std::thread::Builder::new().name("mcp-request".into()).spawn({
                    let (id, method, params) = (id.clone(), method.clone(), params.clone());
                    let (state, key) = (Arc::clone(&state), key.clone());
                    let flight = Arc::clone(&flight);
                    move || {
                        let after = AfterAnswer::begin();
                        let answer = match service {
                            // The lane found it is not alone: the service makes it, as prepared.
                            Some(call) => through_the_service(&state, &flight, &call),
                            None => handle_request(&state, &flight, &method, params),
                        };
                        conclude(&state, &key, &flight, id, &method, answer, after);
                    }
                });
                if spawned.is_err() {
                    land(&state, &key, &flight);
                    state.in_flight.fetch_sub(1, Ordering::SeqCst);
                    send(&state, &error_response(id, INTERNAL_ERROR, "the proxy could not start a thread"));
                }
            }
            Ok(Message::Notification { method, params }) => on_agent_notification(&state, &method, params),
            Ok(Message::Response { id, outcome }) => on_agent_response(&state, id, outcome),
            Err(m) => {
                if let Some(answer) = m.answer {
                    send(&state, &answer);
                }
            }
        }
    }
    // The agent's input ended: answer what is in flight (a call waiting for a person, at most `--wait` and
    // the upstream call after it), then stop the upstream server.
    let deadline = Instant::now() + Duration::from_secs(state.options.wait + UPSTREAM_SECONDS);
    while state.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    state.ending.store(true, Ordering::SeqCst);
    if let Some(u) = state.upstream.get() {
        u.kill();
    }
    Ok(())
}

/// Ends the agent's request `id` (`key`, `flight`): answers it (unless the agent cancelled it), then runs
/// the work for after the answer (`after`: the receipts of the alone calls it ran, still counted in
/// flight, so that the proxy's end waits for them).
fn conclude(
    state: &State,
    key: &str,
    flight: &Arc<Flight>,
    id: Value,
    method: &str,
    answer: Result<Value, Value>,
    after: AfterAnswer,
) {
    land(state, key, flight);
    if flight.is_cancelled() {
        log(&format!("the agent cancelled its request {key} (`{method}`): not answered"));
    } else {
        send(state, &Message::Response { id, outcome: answer });
    }
    after.run();
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
}

/// The request `flight` under the agent's id `key` is answered (or was not started).
fn land(state: &State, key: &str, flight: &Arc<Flight>) {
    if let Ok(mut f) = state.flights.lock() {
        if let Some(list) = f.get_mut(key) {
            list.retain(|x| !Arc::ptr_eq(x, flight));
            if list.is_empty() {
                f.remove(key);
            }
        }
    }
}

fn send(state: &State, message: &Message) {
    if let Err(e) = state.agent_out.send(message) {
        log(&format!("writing to the agent failed: {e}"));
    }
}

fn upstream(state: &State) -> Result<&Upstream, Value> {
    state.upstream.get().ok_or_else(|| error_object(INTERNAL_ERROR, "the upstream MCP server is not started"))
}

/// A request that found no upstream server to send it to: never sent ([`UpstreamError::NotSent`]), said as
/// a server that exited.
fn never_started() -> UpstreamError {
    UpstreamError::NotSent { cause: Box::new(UpstreamError::Exited) }
}

fn upstream_error(e: &UpstreamError) -> Value {
    match e {
        UpstreamError::Rpc { error, .. } => error.clone(),
        other => error_object(INTERNAL_ERROR, other.to_string()),
    }
}

/// Forwards a request of the agent's (`flight`) to the upstream server as it is; the agent's cancellation
/// names the id it is sent with there.
fn forward(state: &State, flight: &Flight, method: &str, params: Option<Value>) -> Result<Value, UpstreamError> {
    let u = state.upstream.get().ok_or_else(never_started)?;
    if flight.is_cancelled() {
        return Err(UpstreamError::Cancelled);
    }
    let note = |uid| flight.upstream_is(Some(uid));
    let answer = u.request_noting(method, params, Duration::from_secs(UPSTREAM_SECONDS), note);
    flight.upstream_is(None);
    answer
}

fn handle_request(state: &Arc<State>, flight: &Flight, method: &str, params: Option<Value>) -> Result<Value, Value> {
    let forward = |m: &str, params| forward(state, flight, m, params).map_err(|e| upstream_error(&e));
    match method {
        "initialize" => Ok(initialize(state, params.as_ref())),
        "ping" => Ok(json!({})),
        "tools/list" => {
            refresh(state).map_err(|e| error_object(INTERNAL_ERROR, e))?;
            Ok(json!({"tools": offered(state)}))
        }
        "tools/call" => tools_call(state, flight, params.unwrap_or(Value::Null)),
        m if m.starts_with("resources/") && state.options.allow_resources => forward(m, params),
        m if m.starts_with("prompts/") && state.options.allow_prompts => forward(m, params),
        "completion/complete" | "logging/setLevel" => forward(method, params),
        m if m.starts_with("resources/") => Err(error_object(
            METHOD_NOT_FOUND,
            format!(
                "`{m}`: resources are not passed through (start the proxy with --allow-resources: reading one is a read the policy has not seen)"
            ),
        )),
        m if m.starts_with("prompts/") => Err(error_object(
            METHOD_NOT_FOUND,
            format!("`{m}`: prompts are not passed through (start the proxy with --allow-prompts)"),
        )),
        other => Err(error_object(METHOD_NOT_FOUND, format!("method not found: `{other}`"))),
    }
}

fn initialize(state: &State, params: Option<&Value>) -> Value {
    let asked = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str).unwrap_or("");
    let version = if crate::SUPPORTED_VERSIONS.contains(&asked) { asked } else { crate::PROTOCOL_VERSION };
    if let Ok(mut p) = state.protocol.lock() {
        *p = version.to_string();
    }
    if let Ok(mut c) = state.agent_capabilities.lock() {
        *c = params.and_then(|p| p.get("capabilities")).filter(|c| c.is_object()).cloned().unwrap_or(json!({}));
    }
    let upstream_init = state.upstream.get().map(|u| u.initialized.clone()).unwrap_or(Value::Null);
    let up_caps = upstream_init.get("capabilities").cloned().unwrap_or(json!({}));
    let mut caps = serde_json::Map::new();
    caps.insert("tools".into(), json!({"listChanged": true}));
    if state.options.allow_resources {
        if let Some(r) = up_caps.get("resources") {
            caps.insert("resources".into(), r.clone());
        }
    }
    if state.options.allow_prompts {
        if let Some(p) = up_caps.get("prompts") {
            caps.insert("prompts".into(), p.clone());
        }
    }
    if let Some(l) = up_caps.get("logging") {
        caps.insert("logging".into(), l.clone());
    }
    let mut answer = json!({
        "protocolVersion": version,
        "capabilities": Value::Object(caps),
        "serverInfo": {"name": "permitc-mcp-proxy", "version": env!("CARGO_PKG_VERSION")},
    });
    if let Some(i) = upstream_init.get("instructions").filter(|i| i.is_string()) {
        answer["instructions"] = i.clone();
    }
    answer
}

/// Reloads the upstream tools and the skill's offer, and decides each tool's offer. Logs every tool that is
/// withheld for another reason than before.
/// The service's path for the offer of the skill, in the mode and along the chain the proxy works in.
fn offer_path(options: &Options) -> String {
    let mut path = format!("/v1/agents/{}/skills/{}/tools", segment(&options.agent), segment(&options.skill));
    let mut query = Vec::new();
    if let Some(mode) = &options.mode {
        query.push(format!("mode={}", segment(mode)));
    }
    if !options.via.is_empty() {
        let links: Vec<String> =
            options.via.iter().map(|(agent, skill)| format!("{}.{}", segment(agent), segment(skill))).collect();
        query.push(format!("via={}", links.join(",")));
    }
    if !query.is_empty() {
        path.push_str(&format!("?{}", query.join("&")));
    }
    path
}

/// How the proxy's work is named in messages: "agent `Scribe` in skill `Notes`", with the chain (nearest
/// first) and the mode when there are.
fn work_words(options: &Options) -> String {
    let mut words = format!("agent `{}` in skill `{}`", options.agent, options.skill);
    if !options.via.is_empty() {
        let links: Vec<String> = options.via.iter().map(|(agent, skill)| format!("`{agent}.{skill}`")).collect();
        words.push_str(&format!(" via {}", links.join(", ")));
    }
    if let Some(mode) = &options.mode {
        words.push_str(&format!(" in mode `{mode}`"));
    }
    words
}

fn refresh(state: &State) -> Result<(), String> {
    let u = upstream(state).map_err(|e| e.to_string())?;
    let tools = u.list_tools(Duration::from_secs(UPSTREAM_SECONDS)).map_err(|e| e.to_string())?;
    let answer = state.service.get(&offer_path(&state.options)).map_err(|e| e.to_string())?;
    if !answer.ok() {
        let (code, message) = answer.error();
        return Err(format!("the approval service refused the offer of the skill ({code}): {message}"));
    }
    // The skill's offer: permits name → pin.
    let mut offer: BTreeMap<String, Option<String>> = BTreeMap::new();
    for t in answer.body.get("tools").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = t.get("name").and_then(Value::as_str) {
            offer.insert(name.to_string(), t.get("pinned").and_then(Value::as_str).map(str::to_string));
        }
    }
    let mut listed = Vec::new();
    let mut offers = BTreeMap::new();
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &tools {
        if let Some(mcp) = t.get("name").and_then(Value::as_str) {
            names.entry(permits_name(mcp)).or_default().push(mcp.to_string());
        }
    }
    for t in tools {
        let Some(mcp) = t.get("name").and_then(Value::as_str).map(str::to_string) else {
            log("the upstream server listed a tool without a name: ignored");
            continue;
        };
        let name = permits_name(&mcp);
        let decision = if names.get(&name).is_some_and(|n| n.len() > 1) {
            Offer::Withheld(format!("the upstream tools {:?} share the policy name `{name}`", names[&name]))
        } else {
            match offer.get(&name) {
                None => Offer::Withheld(format!(
                    "`{name}` is not offered to {} (the table does not have it, the skill does not offer it, or it is `never`)",
                    work_words(&state.options)
                )),
                Some(None) => Offer::Withheld(format!(
                    "`{name}` has no pin in the table: import it with `permitc mcp import` so that its definition is pinned"
                )),
                Some(Some(p)) => {
                    let now = pin(&t);
                    if &now == p {
                        Offer::Offered
                    } else {
                        Offer::Withheld(format!(
                            "the upstream definition of `{name}` changed since it was pinned ({p} → {now}): re-import it and confirm its claim"
                        ))
                    }
                }
            }
        };
        listed.push((mcp.clone(), t));
        offers.insert(mcp, decision);
    }
    let mut catalog = state.catalog.lock().map_err(|_| "the catalog's lock is poisoned".to_string())?;
    for (mcp, o) in &offers {
        if let Offer::Withheld(why) = o {
            if catalog.offers.get(mcp) != Some(o) {
                log(&format!("withheld `{mcp}`: {why}"));
            }
        }
    }
    catalog.tools = listed;
    catalog.offers = offers;
    catalog.loaded = true;
    Ok(())
}

fn offered(state: &State) -> Vec<Value> {
    let Ok(catalog) = state.catalog.lock() else { return Vec::new() };
    catalog
        .tools
        .iter()
        .filter(|(mcp, _)| catalog.offers.get(mcp) == Some(&Offer::Offered))
        .map(|(_, t)| t.clone())
        .collect()
}

/// A tool result the model reads: one text block, an error or not.
fn tool_result(text: impl Into<String>, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": is_error})
}

/// A `tools/call` made ready ([`prepare_call`]): what the lane and the service are asked, and what is
/// forwarded.
struct Prepared {
    /// The tool's permits name.
    name: String,
    arguments: Value,
    /// Why, from the call's `_meta` (`permits/why` or `why`); empty when it gives none.
    why: String,
    /// This call's claim token (random).
    token: String,
    /// The `tools/call` parameters to send upstream.
    forward_params: Value,
}

impl Prepared {
    /// The lane's claim of this call: its run and its sync.
    fn laned<'a>(&'a self, execution: &'a Value, syncing: Syncing) -> Claim<'a> {
        Claim {
            host: Host::Lane,
            syncing: Some(syncing),
            execution,
            token: &self.token,
            name: &self.name,
            forward_params: &self.forward_params,
        }
    }
}

/// Reads a `tools/call`'s parameters and finds its tool offered (loading the offer first when `load`).
///
/// Errors: the call's answer already — an error for parameters MCP does not allow, a refusal for a tool not
/// offered; `Ok(None)` when the offer is not loaded and `load` is false.
fn prepare_call(state: &State, params: &Value, load: bool) -> Result<Option<Prepared>, Result<Value, Value>> {
    // A server that is gone runs nothing: the call is not decided, claimed or proposed, so the ledger gets no
    // run that never reached a server (nothing `unknown` for a person to resolve).
    if let Some(gone) = state.upstream.get().and_then(Upstream::gone) {
        return Err(Err(upstream_error(&gone)));
    }
    let Some(mcp) = params.get("name").and_then(Value::as_str).map(str::to_string) else {
        return Err(Err(error_object(INVALID_PARAMS, "tools/call needs a `name`")));
    };
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => return Err(Err(error_object(INVALID_PARAMS, "tools/call's `arguments` must be an object"))),
    };
    let loaded = state.catalog.lock().map(|c| c.loaded).unwrap_or(false);
    if !loaded {
        if !load {
            return Ok(None);
        }
        refresh(state).map_err(|e| Err(error_object(INTERNAL_ERROR, e)))?;
    }
    let offer = state.catalog.lock().ok().and_then(|c| c.offers.get(&mcp).cloned());
    match offer {
        None => return Err(Ok(tool_result(format!("refused: the upstream server has no tool `{mcp}`"), true))),
        Some(Offer::Withheld(why)) => return Err(Ok(tool_result(format!("refused: {why}"), true))),
        Some(Offer::Offered) => {}
    }
    let name = permits_name(&mcp);
    let meta = params.get("_meta").cloned();
    let why = meta
        .as_ref()
        .and_then(|m| m.get("permits/why").or_else(|| m.get("why")))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut token = [0u8; 16];
    getrandom::fill(&mut token).map_err(|e| Err(error_object(INTERNAL_ERROR, format!("no random bytes: {e}"))))?;
    let token = hex(&token);
    let forward_params = {
        let mut p = json!({"name": mcp, "arguments": arguments});
        if let Some(m) = &meta {
            p["_meta"] = m.clone();
        }
        p
    };
    Ok(Some(Prepared { name, arguments, why, token, forward_params }))
}

/// What the lane made of a call ([`on_the_lane`]).
enum LaneStep<'s> {
    /// Alone: claimed and confirmed; its run (as the service would send it) and its claim's sync.
    Alone(Value, Syncing),
    /// Alone, a tool that only reads: admitted, the store's write lock held; send it, then claim it
    /// ([`send_admitted`], or [`LaneStep::claimed_now`] on a thread that waits for the answer anyway).
    Admitted(&'s Lane, Box<AdmittedRead<'s>>),
    /// The call's answer (a refusal, or an error).
    Answer(Result<Value, Value>),
    /// Not for the lane: the service makes the call.
    Service,
}

impl LaneStep<'_> {
    /// A read the lane admitted, claimed before it is sent (on a request thread, which waits for the
    /// answer anyway): as [`LaneStep::Alone`], or the withheld error when the claim failed.
    fn claimed_now(self, name: &str) -> Self {
        let LaneStep::Admitted(lane, admitted) = self else { return self };
        match lane.claim(admitted) {
            Ok((claimed, syncing)) => laned(lane, claimed, syncing),
            Err(why) => LaneStep::Answer(Err(withheld(name, "", &why))),
        }
    }
}

/// The lane's claimed run, as the service would send it, and its sync.
fn laned<'s>(lane: &Lane, claimed: permits_runtime::Claimed, syncing: Syncing) -> LaneStep<'s> {
    match serde_json::to_value(&claimed) {
        Ok(execution) => LaneStep::Alone(execution, syncing),
        Err(e) => {
            // Nothing was sent; the claim still becomes durable before the error is answered.
            let _ = lane.durable(syncing);
            LaneStep::Answer(Err(error_object(INTERNAL_ERROR, format!("the claimed run does not serialize: {e}"))))
        }
    }
}

/// The error answered for a call whose claim could not be made durable (its answer is withheld), logged.
fn withheld(name: &str, id: &str, why: &str) -> Value {
    let execution = if id.is_empty() { String::new() } else { format!(" (execution {id})") };
    log(&format!("the answer of `{name}`{execution} is withheld: {why}"));
    error_object(
        INTERNAL_ERROR,
        format!("the call's record could not be made durable, so its answer is withheld: {why}"),
    )
}

/// Asks the lane, when the proxy has one that is on, to claim the call if it is alone.
fn on_the_lane<'s>(state: &'s State, call: &Prepared) -> LaneStep<'s> {
    let Some(lane) = state.lane.as_ref().filter(|l| l.is_on()) else { return LaneStep::Service };
    let request = lane_request(state, &call.name, &call.arguments, &call.why);
    match lane.call(request, &call.token) {
        Laned::Admitted(admitted) => LaneStep::Admitted(lane, admitted),
        Laned::Alone(claimed, syncing) => laned(lane, *claimed, syncing),
        Laned::Refused { code, message } => {
            LaneStep::Answer(Ok(tool_result(format!("refused ({code}): {message}"), true)))
        }
        Laned::Service => LaneStep::Service,
    }
}

/// What the agent's reader did with a `tools/call` ([`call_from_the_reader`]).
enum Fast {
    /// Answered: send it.
    Answer(Result<Value, Value>),
    /// Sent upstream: answered when its answer comes ([`forward_then`]).
    Forwarded,
    /// Not alone, the lane says: a request thread makes the call, as prepared, through the service.
    Service(Prepared),
    /// Not for the reader (no lane, or the offer not loaded yet): a request thread answers it.
    Thread,
}

/// An alone call the lane runs, on the agent's reader thread, with no thread of its own (issue #19's
/// latency: a thread started, and one woken for the upstream's answer, were a fifth of what the proxy
/// added): decided and claimed here, sent upstream, and answered on the upstream reader's thread once its
/// answer comes ([`forward_then`]). The reader is held for the claim's commit, not for the call. Anything
/// else — no lane, the offer not loaded yet, a call not alone — is left to a request thread.
fn call_from_the_reader(
    state: &Arc<State>,
    flight: &Arc<Flight>,
    id: &Value,
    key: &str,
    params: Option<&Value>,
) -> Fast {
    if !state.lane.as_ref().is_some_and(Lane::is_on) {
        return Fast::Thread;
    }
    let Some(params) = params else { return Fast::Thread };
    let call = match prepare_call(state, params, false) {
        Ok(Some(call)) => call,
        Ok(None) => return Fast::Thread,
        Err(answer) => return Fast::Answer(answer),
    };
    match on_the_lane(state, &call) {
        LaneStep::Admitted(lane, admitted) => {
            send_admitted(state, flight, id.clone(), key.to_string(), call, lane, admitted);
            Fast::Forwarded
        }
        LaneStep::Alone(execution, syncing) => match start_run(state, flight, call.laned(&execution, syncing)) {
            Started::Answer(answer) => Fast::Answer(answer),
            Started::Forward(run) => {
                forward_then(state, flight, id.clone(), key.to_string(), run);
                Fast::Forwarded
            }
        },
        LaneStep::Answer(answer) => Fast::Answer(answer),
        LaneStep::Service => Fast::Service(call),
    }
}

/// Forwards a run the agent's reader started ([`call_from_the_reader`]) without waiting: its end
/// ([`finish_run`]) and the agent's answer come on the thread that has the upstream's answer.
fn forward_then(state: &Arc<State>, flight: &Arc<Flight>, id: Value, key: String, run: Run) {
    let params = run.params.clone();
    let then = {
        let (state, flight) = (Arc::clone(state), Arc::clone(flight));
        move |outcome: Result<Value, UpstreamError>| {
            flight.upstream_is(None);
            let after = AfterAnswer::begin();
            let answer = finish_run(&state, &flight, run, outcome);
            conclude(&state, &key, &flight, id, "tools/call", answer, after);
        }
    };
    let Some(u) = state.upstream.get() else {
        then(Err(never_started()));
        return;
    };
    let note = |uid| flight.upstream_is(Some(uid));
    u.request_then("tools/call", Some(params), Duration::from_secs(UPSTREAM_SECONDS), note, then);
}

/// A read the lane admitted ([`LaneStep::Admitted`]), from the agent's reader: sent while the store's write
/// lock is held if the pipe takes it whole at once (else right after the claim), claimed at once, and
/// answered by [`meet`] once both its claim and the server's answer are there — on the thread that has
/// the second, the upstream reader's as a rule. Its answer waits for the claim's sync ([`finish_run`]);
/// a claim that fails withholds it.
fn send_admitted(
    state: &Arc<State>,
    flight: &Arc<Flight>,
    id: Value,
    key: String,
    call: Prepared,
    lane: &Lane,
    admitted: Box<AdmittedRead<'_>>,
) {
    let meeting = Arc::new(Mutex::new(Meeting { id, key, claim: None, outcome: None }));
    let Some(u) = state.upstream.get() else {
        drop(admitted);
        meet(state, flight, &meeting, |m| {
            m.claim = Some(Half::NotSent);
            m.outcome = Some(Err(never_started()));
        });
        return;
    };
    let then = {
        let (state, flight, meeting) = (Arc::clone(state), Arc::clone(flight), Arc::clone(&meeting));
        move |outcome: Result<Value, UpstreamError>| {
            flight.upstream_is(None);
            meet(&state, &flight, &meeting, |m| m.outcome = Some(outcome));
        }
    };
    let note = |uid| flight.upstream_is(Some(uid));
    let Prepared { name, token, forward_params, .. } = call;
    let soon = u.request_then_now(
        "tools/call",
        Some(forward_params.clone()),
        Duration::from_secs(UPSTREAM_SECONDS),
        note,
        then,
    );
    let half = if matches!(soon, Soon::Failed) {
        // Not sent: nothing is recorded, the decision included; the agent gets the server's failure.
        drop(admitted);
        Half::NotSent
    } else {
        match lane.claim(admitted) {
            Ok((claimed, syncing)) => match Sending::mark(state, &claimed.id) {
                Some(marked) => Half::Claimed(Run {
                    host: Host::Lane,
                    syncing: Some(syncing),
                    id: claimed.id,
                    token,
                    name,
                    params: forward_params,
                    _sending: marked,
                }),
                None => Half::Withheld(withheld(&name, &claimed.id, "this gateway is sending the execution already")),
            },
            Err(why) => Half::Withheld(withheld(&name, "", &why)),
        }
    };
    let send = matches!(half, Half::Claimed(_));
    meet(state, flight, &meeting, |m| m.claim = Some(half));
    if let Soon::Later(unsent) = soon {
        if send {
            unsent.send();
        } else {
            // Its claim failed: never sent, and its function answered now, not at its deadline.
            unsent.abandon();
        }
    }
}

/// The two halves of a read sent before its claim was written ([`send_admitted`]): the claim, from the
/// agent's reader, and the server's answer, from whichever thread has it.
struct Meeting {
    id: Value,
    key: String,
    claim: Option<Half>,
    outcome: Option<Result<Value, UpstreamError>>,
}

/// The claim's half of a [`Meeting`].
enum Half {
    /// Claimed: the run, to finish.
    Claimed(Run),
    /// The claim failed: the answer is withheld, with this error.
    Withheld(Value),
    /// Not sent (the server is gone): nothing recorded; the server's failure is the answer.
    NotSent,
}

/// Adds a half to `meeting` (`arrive`); the thread that brings the second ends the call: finishes the
/// run ([`finish_run`]: the wait for the claim's sync, then the receipt after the answer) and answers.
fn meet(state: &Arc<State>, flight: &Arc<Flight>, meeting: &Mutex<Meeting>, arrive: impl FnOnce(&mut Meeting)) {
    let both = {
        let mut m = meeting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        arrive(&mut m);
        match (m.claim.is_some(), m.outcome.is_some()) {
            (true, true) => Some((m.claim.take(), m.outcome.take(), m.id.take(), std::mem::take(&mut m.key))),
            _ => None,
        }
    };
    let Some((Some(half), Some(outcome), id, key)) = both else { return };
    let after = AfterAnswer::begin();
    let answer = match half {
        Half::Claimed(run) => finish_run(state, flight, run, outcome),
        Half::Withheld(error) => Err(error),
        Half::NotSent => outcome.map_err(|e| upstream_error(&e)),
    };
    conclude(state, &key, flight, id, "tools/call", answer, after);
}

fn tools_call(state: &Arc<State>, flight: &Flight, params: Value) -> Result<Value, Value> {
    let call = match prepare_call(state, &params, true) {
        Ok(Some(call)) => call,
        Ok(None) => return Err(error_object(INTERNAL_ERROR, "the offer is not loaded")),
        Err(answer) => return answer,
    };
    match on_the_lane(state, &call).claimed_now(&call.name) {
        LaneStep::Alone(execution, syncing) => run_execution(state, flight, call.laned(&execution, syncing)),
        LaneStep::Answer(answer) => answer,
        LaneStep::Service | LaneStep::Admitted(..) => through_the_service(state, flight, &call),
    }
}

/// A call made through the approval service (`POST /v1/calls`): an alone call's run it claims, or a
/// proposal waited for.
fn through_the_service(state: &Arc<State>, flight: &Flight, call: &Prepared) -> Result<Value, Value> {
    let Prepared { name, arguments, why, token, forward_params } = call;
    // The earlier results of this session (spec §5), for a proposal (an alone call's claim records none).
    let evidence: Vec<Value> = state.evidence.lock().map(|e| e.iter().cloned().collect()).unwrap_or_default();
    let body = json!({
        "agent": state.options.agent,
        "skill": state.options.skill,
        "tool": name,
        "arguments": arguments,
        "requester": state.options.requester,
        "operation_key": state.task,
        "mode": state.options.mode,
        "via": state.options.via.iter().map(|(agent, skill)| json!({"agent": agent, "skill": skill})).collect::<Vec<_>>(),
        "claim_token": token,
        // The gateway has no permissions of its own to check: an alone call is confirmed with its claim,
        // one transaction instead of two (`Runtime::claim_alone_confirmed`).
        "confirm": true,
        "why": why,
        "evidence": evidence,
    });
    let answer = service_call(state, "/v1/calls", &body)?;
    if !answer.ok() {
        let (code, message) = answer.error();
        return Ok(tool_result(format!("refused ({code}): {message}"), true));
    }
    match answer.body.get("outcome").and_then(Value::as_str) {
        Some("alone") => {
            let execution = answer.body.get("execution").cloned().unwrap_or(Value::Null);
            let claim =
                Claim { host: Host::AloneService, syncing: None, execution: &execution, token, name, forward_params };
            run_execution(state, flight, claim)
        }
        Some("proposed") => {
            let proposal = answer.body.get("proposal").cloned().unwrap_or(Value::Null);
            proposed(state, flight, proposal, name, forward_params)
        }
        _ => Err(error_object(INTERNAL_ERROR, "the approval service's answer to the call has no outcome")),
    }
}

/// The call as the runtime takes it, for the lane: what `POST /v1/calls` would be sent, but the evidence,
/// which only a proposal records (the lane claims alone calls; any other goes to the service).
fn lane_request(state: &State, tool: &str, arguments: &Value, why: &str) -> permits_runtime::ProposalRequest {
    use permits_runtime::table::ChainLink;
    let mut call =
        permits_runtime::Call::new(&state.options.agent, &state.options.skill, tool).with_arguments(arguments.clone());
    call.requester = state.options.requester.clone();
    call.mode = state.options.mode.clone();
    call.via = state
        .options
        .via
        .iter()
        .map(|(agent, skill)| ChainLink { agent: agent.clone(), skill: skill.clone() })
        .collect();
    permits_runtime::ProposalRequest::new(call, state.task.clone(), why)
}

/// Who a run's steps go to: the service (a proposal's run, or an alone call's it claimed), or the lane
/// (an alone call's it claimed).
#[derive(Clone, Copy)]
enum Host {
    /// A granted proposal's run, claimed through the service: confirmed, then its receipt recorded, there.
    Proposal,
    /// An alone call's run the service claimed and confirmed.
    AloneService,
    /// An alone call's run the lane claimed and confirmed (the state's lane).
    Lane,
}

impl Host {
    fn alone(self) -> bool {
        !matches!(self, Host::Proposal)
    }
}

/// Records a run's outcome where it was claimed, logging what fails (the run stays `sending`: never run
/// again).
fn record_receipt(state: &State, host: Host, id: &str, token: &str, outcome: permits_runtime::RunOutcome) {
    use permits_runtime::RunOutcome;
    if let Host::Lane = host {
        let recorded = match state.lane.as_ref() {
            Some(lane) => lane.receipt(id, token, outcome),
            None => Err("the proxy has no lane".into()),
        };
        if let Err(e) = recorded {
            log(&format!("the receipt of {id} could not be recorded: {e}"));
        }
        return;
    }
    let body = match outcome {
        RunOutcome::Done(result) => json!({"token": token, "outcome": "done", "receipt": result}),
        RunOutcome::Failed(reason) => json!({"token": token, "outcome": "failed", "reason": reason}),
        RunOutcome::Unknown(reason) => json!({"token": token, "outcome": "unknown", "reason": reason}),
    };
    match service_call(state, &format!("/v1/executions/{}/receipt", segment(id)), &body) {
        Ok(a) if a.ok() => {}
        Ok(a) => log(&format!("the receipt of {id} was refused: {:?}", a.error())),
        Err(e) => log(&format!("the receipt of {id} could not be sent: {e}")),
    }
}

fn service_call(state: &State, path: &str, body: &Value) -> Result<Answer, Value> {
    state.service.post(path, body).map_err(|e| error_object(INTERNAL_ERROR, e.to_string()))
}

fn text_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The claim token of a proposal's execution: the same for every attempt of this run of the proxy.
fn claim_token(state: &State, execution: &str) -> String {
    let mut h = Sha256::new();
    h.update(state.secret);
    h.update(b"claim:");
    h.update(execution.as_bytes());
    hex(&h.finalize()[..16])
}

fn proposed(
    state: &Arc<State>,
    flight: &Flight,
    mut proposal: Value,
    name: &str,
    forward_params: &Value,
) -> Result<Value, Value> {
    let id = text_of(&proposal, "id");
    let deadline = Instant::now() + Duration::from_secs(state.options.wait);
    while text_of(&proposal, "status") == "waiting" {
        if flight.is_cancelled() {
            log(&format!(
                "the agent cancelled its call of `{name}` waiting on proposal {id}: it stays in the inbox, and the same call again attaches to it"
            ));
            return Err(error_object(INTERNAL_ERROR, "cancelled"));
        }
        // Whole seconds, rounded up: `--wait 1` waits a second, not none.
        let left = deadline.saturating_duration_since(Instant::now()).as_millis().div_ceil(1000);
        if left == 0 {
            break;
        }
        let path = format!("/v1/proposals/{}?wait={}", segment(&id), left.min(u128::from(CANCEL_POLL_SECONDS)));
        let answer = state.service.get(&path).map_err(|e| error_object(INTERNAL_ERROR, e.to_string()))?;
        if !answer.ok() {
            let (code, message) = answer.error();
            return Ok(tool_result(format!("refused ({code}): {message}"), true));
        }
        proposal = answer.body;
    }
    let status = text_of(&proposal, "status");
    match status.as_str() {
        "waiting" => {
            // The runtime's own words for the agent: "proposed `send_mail`: waiting on a decision from Ana".
            let answer = text_of(&proposal, "answer");
            let said = if answer.is_empty() { format!("proposed `{name}`: waiting on a decision") } else { answer };
            Ok(tool_result(
                format!(
                    "{said} (proposal {id}). It has not run. It is decided at {}/inbox/proposals/{id} (the inbox); the same call again attaches to this proposal.",
                    state.service.base()
                ),
                // An error result: the tool did not run (and a client that checks a tool's output schema
                // must not take this text for its output).
                true,
            ))
        }
        "granted" => {
            let token = claim_token(state, &id);
            let claim =
                service_call(state, &format!("/v1/executions/{}/claim", segment(&id)), &json!({"token": token}))?;
            if !claim.ok() {
                let (code, message) = claim.error();
                return Ok(tool_result(format!("refused at the claim ({code}): {message}"), true));
            }
            let claimed = Claim {
                host: Host::Proposal,
                syncing: None,
                execution: &claim.body,
                token: &token,
                name,
                forward_params,
            };
            run_execution(state, flight, claimed)
        }
        "done" => Ok(done_result(&proposal)),
        "sending" | "unknown" => Ok(tool_result(
            format!("proposal {id} was sent before and its outcome is `{status}`: it is not sent again"),
            true,
        )),
        other => {
            let reason = proposal.get("reason").and_then(Value::as_str).map(str::to_string);
            let by = proposal.get("decided_by").and_then(Value::as_str).map(|b| format!(" by {b}")).unwrap_or_default();
            let answer = text_of(&proposal, "answer");
            let text = match reason {
                Some(r) => format!("proposal {id} for `{name}` was {other}{by}: {r}"),
                None if !answer.is_empty() => format!("proposal {id} for `{name}` was {other}{by}: {answer}"),
                None => format!("proposal {id} for `{name}` was {other}{by}"),
            };
            Ok(tool_result(text, true))
        }
    }
}

/// A done execution's stored receipt as the tool's result: the upstream result as it was sent.
fn done_result(record: &Value) -> Value {
    match record.get("receipt") {
        Some(r) if r.get("content").is_some() => r.clone(),
        Some(r) => tool_result(r.to_string(), false),
        None => tool_result("done", false),
    }
}

/// Runs a claimed execution (`status` granted, not confirmed): confirm, forward once, receipt. An alone
/// call's run ([`Host::alone`]) comes confirmed (`sending`) with its claim, from the service or the lane.
/// The lane's claim comes with its [`Syncing`], waited for before anything of the call leaves the proxy
/// (still running for a tool that only reads, which runs while the claim syncs:
/// `Runtime::claim_if_alone_syncing`).
fn run_execution(state: &Arc<State>, flight: &Flight, claim: Claim<'_>) -> Result<Value, Value> {
    match start_run(state, flight, claim) {
        Started::Answer(answer) => answer,
        Started::Forward(run) => {
            let outcome = forward(state, flight, "tools/call", Some(run.params.clone()));
            finish_run(state, flight, run, outcome)
        }
    }
}

/// A claimed execution to run ([`run_execution`]).
struct Claim<'a> {
    /// Where it was claimed.
    host: Host,
    /// The lane's claim, while it syncs.
    syncing: Option<Syncing>,
    /// The run as the service or the lane answered it (`id`, `status`, `confirmed`, …).
    execution: &'a Value,
    /// Its claim token.
    token: &'a str,
    /// The tool's permits name.
    name: &'a str,
    /// The `tools/call` parameters to send upstream.
    forward_params: &'a Value,
}

/// A claimed run about to be forwarded ([`start_run`]), with what its end needs ([`finish_run`]).
struct Run {
    host: Host,
    /// The lane's claim, while it syncs.
    syncing: Option<Syncing>,
    id: String,
    token: String,
    /// The tool's permits name.
    name: String,
    /// The `tools/call` parameters sent upstream.
    params: Value,
    /// Marked as being sent by this gateway until the run ends.
    _sending: Sending,
}

/// What [`start_run`] found: the call's answer already (the run is not sent), or the run to forward.
enum Started {
    Answer(Result<Value, Value>),
    Forward(Run),
}

/// A claimed run up to its forward ([`run_execution`]): checks its status, marks it as being sent, and
/// confirms it with the service when it is not confirmed yet. An answer given here waits for the lane's
/// claim to be durable first.
fn start_run(state: &Arc<State>, flight: &Flight, claim: Claim<'_>) -> Started {
    let Claim { host, syncing, execution, token, name, forward_params } = claim;
    let alone = host.alone();
    let id = text_of(execution, "id");
    let answered = |answer: Result<Value, Value>, syncing: Option<Syncing>| match durable(state, syncing, name, &id) {
        Ok(()) => Started::Answer(answer),
        Err(withheld) => Started::Answer(Err(withheld)),
    };
    let status = text_of(execution, "status");
    let confirmed = execution.get("confirmed").and_then(Value::as_bool).unwrap_or(false);
    if status == "done" {
        return answered(Ok(done_result(execution)), syncing);
    }
    // An alone call's run comes confirmed with its claim (`"confirm": true`, or the lane's): `sending`.
    let sending = alone && status == "sending" && confirmed;
    if !sending && (status != "granted" || confirmed) {
        let reason = execution.get("reason").and_then(Value::as_str).unwrap_or("");
        let text = format!(
            "execution {id} is `{status}`{}: not run",
            if reason.is_empty() { String::new() } else { format!(" ({reason})") }
        );
        return answered(Ok(tool_result(text, true)), syncing);
    }
    let Some(marked) = Sending::mark(state, &id) else {
        let text = format!("execution {id} of `{name}` is being sent by this gateway now: it is not sent again");
        return answered(Ok(tool_result(text, true)), syncing);
    };
    if flight.is_cancelled() && !alone {
        // Not confirmed, not sent: a granted proposal stays granted (the same call again runs it). An alone
        // execution is confirmed and recorded failed below, so that it does not stay open.
        log(&format!("the agent cancelled its call of `{name}` (execution {id}) before it was sent: not sent"));
        return Started::Answer(Err(error_object(INTERNAL_ERROR, "cancelled")));
    }
    if !sending {
        let path = format!("/v1/executions/{}/confirm", segment(&id));
        let confirm = match service_call(state, &path, &json!({"token": token})) {
            Ok(c) => c,
            Err(e) => return Started::Answer(Err(e)),
        };
        if !confirm.ok() || text_of(&confirm.body, "status") != "sending" {
            let (code, message) = confirm.error();
            return Started::Answer(Ok(tool_result(format!("refused at the confirmation ({code}): {message}"), true)));
        }
    }
    if flight.is_cancelled() {
        // Cancelled before the send (an alone call, or between the confirmation and the send): nothing was
        // sent, so it certainly did not act.
        use permits_runtime::RunOutcome;
        let reason = "the agent cancelled the call before it was sent: not sent";
        if let Err(withheld) = durable(state, syncing, name, &id) {
            return Started::Answer(Err(withheld));
        }
        record_receipt(state, host, &id, token, RunOutcome::Failed(reason.into()));
        log(&format!("the agent cancelled its call of `{name}` (execution {id}) before it was sent: not sent"));
        return Started::Answer(Err(error_object(INTERNAL_ERROR, "cancelled")));
    }
    Started::Forward(Run {
        host,
        syncing,
        id,
        token: token.to_string(),
        name: name.to_string(),
        params: forward_params.clone(),
        _sending: marked,
    })
}

/// Whether a JSON-RPC error object says the request was not taken: parse error, invalid request, method
/// not found, invalid params (JSON-RPC 2.0 §5.1). Any other code — an internal error, a server error
/// (`-32000` to `-32099`), a code of the server's own — says the request failed, not that nothing happened.
fn not_taken(error: &Value) -> bool {
    use jsonrpc::{INVALID_REQUEST, PARSE_ERROR};
    matches!(
        error.get("code").and_then(Value::as_i64),
        Some(PARSE_ERROR | INVALID_REQUEST | METHOD_NOT_FOUND | INVALID_PARAMS)
    )
}

/// The receipt of a run the upstream server was sent (`cancelled`: the agent cancelled the call): `done` with
/// the result; `failed` when nothing took effect (the server says it did not take the request, or it never
/// reached the server); `unknown` when the tool may have acted.
fn receipt_of(outcome: &Result<Value, UpstreamError>, cancelled: bool) -> permits_runtime::RunOutcome {
    use permits_runtime::RunOutcome;
    match outcome {
        Ok(result) => RunOutcome::Done(result.clone()),
        Err(UpstreamError::Cancelled) => RunOutcome::Unknown(
            "the agent cancelled the call while the upstream server ran it: it may have acted".into(),
        ),
        Err(UpstreamError::Rpc { error, .. }) if !cancelled && not_taken(error) => {
            // The server says it did not take the request (it could not read it, or refused its method or
            // its parameters): nothing took effect.
            RunOutcome::Failed(format!("the upstream server refused the request: {error}"))
        }
        Err(UpstreamError::Rpc { error, .. }) if !cancelled => {
            // Any other error (an internal or a server error) may come after the tool acted: a run taken for
            // undone releases what it reserved and may be made again.
            RunOutcome::Unknown(format!(
                "the upstream server answered an error that does not say the tool did not act: {error}"
            ))
        }
        // It never reached the server (gone before it was written, or its pipe closed): nothing took effect.
        Err(UpstreamError::NotSent { cause }) => {
            RunOutcome::Failed(format!("never sent to the upstream server: {cause}"))
        }
        Err(e) => RunOutcome::Unknown(format!("no answer from the upstream server: {e}")),
    }
}

/// Waits for the lane's claim to be durable (`syncing`), if there is one: nothing about the call leaves
/// the proxy before. The error answered when its sync failed (the answer is withheld).
fn durable(state: &State, syncing: Option<Syncing>, name: &str, id: &str) -> Result<(), Value> {
    let (Some(lane), Some(syncing)) = (state.lane.as_ref(), syncing) else { return Ok(()) };
    lane.durable(syncing).map_err(|why| withheld(name, id, &why))
}

/// A forwarded run's end ([`run_execution`]): once its claim is durable, its receipt (after the answer
/// for an alone call's run, [`AfterAnswer`]), its result kept as evidence, and its answer.
fn finish_run(
    state: &Arc<State>,
    flight: &Flight,
    run: Run,
    outcome: Result<Value, UpstreamError>,
) -> Result<Value, Value> {
    let Run { host, syncing, id, token, name, params, _sending } = run;
    // Nothing about the call — its answer, its receipt, its result as evidence — before its claim is durable.
    durable(state, syncing, &name, &id)?;
    let receipt = receipt_of(&outcome, flight.is_cancelled());
    if host.alone() && outcome.is_ok() {
        // An alone call's result goes to the agent first: its run is `sending` (never run again) until the
        // receipt is recorded. A proposal's receipt is recorded before the answer, with the run still
        // marked as being sent by this gateway (`_sending`, kept until the receipt is recorded).
        let state = Arc::clone(state);
        AfterAnswer::later(Box::new(move || {
            record_receipt(&state, host, &id, &token, receipt);
            drop(_sending);
        }));
    } else {
        record_receipt(state, host, &id, &token, receipt);
    }
    if let Ok(result) = &outcome {
        remember(state, &name, params.get("arguments").cloned().unwrap_or(Value::Null), result);
    }
    outcome.map_err(|e| upstream_error(&e))
}

fn remember(state: &State, name: &str, arguments: Value, result: &Value) {
    let text = result.to_string();
    let answer = if text.len() <= EVIDENCE_BYTES {
        result.clone()
    } else {
        let cut: String = text.chars().take(EVIDENCE_BYTES).collect();
        json!({"truncated": cut})
    };
    if let Ok(mut e) = state.evidence.lock() {
        e.push_back(json!({"tool": name, "arguments": arguments, "answer": answer}));
        while e.len() > EVIDENCE_KEPT {
            e.pop_front();
        }
    }
}

fn on_agent_notification(state: &Arc<State>, method: &str, params: Option<Value>) {
    match method {
        // The proxy initialized the upstream server itself.
        "notifications/initialized" => {}
        "notifications/cancelled" => cancel(state, params.as_ref()),
        "notifications/progress" | "notifications/roots/list_changed" => {
            if let Some(u) = state.upstream.get() {
                u.notify(method, params);
            }
        }
        other => log(&format!("ignored the agent's notification `{other}`")),
    }
}

/// The agent cancels one of its requests (`requestId`, its own id): marked cancelled (so it is not answered,
/// and not sent upstream if it was not yet), and cancelled upstream under the id it was sent with there.
fn cancel(state: &State, params: Option<&Value>) {
    let Some(request) = params.and_then(|p| p.get("requestId")).filter(|r| r.is_string() || r.is_number()) else {
        log("the agent sent notifications/cancelled without a requestId: ignored");
        return;
    };
    let key = request.to_string();
    let flights = state.flights.lock().ok().and_then(|f| f.get(&key).cloned()).unwrap_or_default();
    if flights.is_empty() {
        log(&format!("the agent cancelled request {key}, which is not being answered: ignored"));
    }
    for flight in flights {
        flight.cancelled.store(true, Ordering::SeqCst);
        let upstream_id = flight.upstream.lock().ok().and_then(|u| *u);
        match (upstream_id, state.upstream.get()) {
            (Some(uid), Some(u)) => {
                let reason = params.and_then(|p| p.get("reason")).and_then(Value::as_str);
                log(&format!("the agent cancelled request {key}: cancelled upstream as request {uid}"));
                u.cancel(uid, reason);
            }
            _ => log(&format!("the agent cancelled request {key} before it reached the upstream server")),
        }
    }
}

fn on_agent_response(state: &State, id: Value, outcome: Result<Value, Value>) {
    let key = id.to_string();
    let asked = state.server_requests.lock().ok().and_then(|mut m| m.remove(&key));
    match (asked, state.upstream.get()) {
        (Some(asked), Some(u)) => {
            let said = match &outcome {
                Ok(_) => "a result".to_string(),
                Err(e) => format!("an error ({})", e.get("message").and_then(Value::as_str).unwrap_or("")),
            };
            log(&format!(
                "the agent answered the upstream server's `{}` ({key}) with {said}: passed back",
                asked.method
            ));
            u.respond(asked.id, outcome);
        }
        _ => log(&format!("the agent answered an unknown request id {key}")),
    }
}

/// The capability the agent must have declared to be asked `method`, if any.
fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

fn on_upstream(state: &Arc<State>, incoming: Incoming) {
    match incoming {
        Incoming::Notification { method, params } if method == "notifications/cancelled" => {
            // The server cancels one of its requests to the agent: the agent knows it by the proxy's id.
            let theirs = params.as_ref().and_then(|p| p.get("requestId")).cloned();
            let ours = state.server_requests.lock().ok().and_then(|mut m| {
                let key = m.iter().find(|(_, r)| Some(&r.id) == theirs.as_ref()).map(|(k, _)| k.clone())?;
                m.remove(&key);
                serde_json::from_str::<Value>(&key).ok()
            });
            match ours {
                Some(ours) => {
                    log(&format!("the upstream server cancelled its request, passed to the agent as {ours}"));
                    let mut params = params.unwrap_or_else(|| json!({}));
                    params["requestId"] = ours;
                    send(state, &Message::Notification { method, params: Some(params) });
                }
                None => log("the upstream server cancelled a request the agent was not asked: ignored"),
            }
        }
        Incoming::Notification { method, params } => match method.as_str() {
            "notifications/tools/list_changed" => {
                // The re-check asks the upstream server, so it cannot run on its reader thread.
                let state = Arc::clone(state);
                let _ = std::thread::Builder::new().name("mcp-list-changed".into()).spawn(move || {
                    if let Err(e) = refresh(&state) {
                        log(&format!("re-checking the tools after list_changed failed: {e}"));
                    }
                    send(
                        &state,
                        &Message::Notification { method: "notifications/tools/list_changed".into(), params: None },
                    );
                });
            }
            m if m.starts_with("notifications/resources/") && !state.options.allow_resources => {}
            m if m.starts_with("notifications/prompts/") && !state.options.allow_prompts => {}
            _ => send(state, &Message::Notification { method, params }),
        },
        Incoming::Request { id, method, params } => {
            if method == "ping" {
                if let Some(u) = state.upstream.get() {
                    u.respond(id, Ok(json!({})));
                }
                return;
            }
            if let Some(cap) = capability_for(&method) {
                let declared = state.agent_capabilities.lock().map(|c| c.get(cap).is_some()).unwrap_or(false);
                if !declared {
                    log(&format!(
                        "the upstream server asks the agent `{method}`, but the agent declared no `{cap}` capability: answered with an error"
                    ));
                    if let Some(u) = state.upstream.get() {
                        let why = format!(
                            "the client behind permitc mcp proxy does not support `{method}` (no `{cap}` capability)"
                        );
                        u.respond(id, Err(error_object(METHOD_NOT_FOUND, why)));
                    }
                    return;
                }
            }
            let ours = format!("permits-{}", state.next_id.fetch_add(1, Ordering::SeqCst));
            log(&format!("the upstream server asks the agent `{method}`: passed through as \"{ours}\""));
            if let Ok(mut m) = state.server_requests.lock() {
                m.insert(Value::String(ours.clone()).to_string(), ServerRequest { id, method: method.clone() });
            }
            send(state, &Message::Request { id: Value::String(ours), method, params });
        }
        Incoming::Closed if state.ending.load(Ordering::SeqCst) => {}
        Incoming::Closed => {
            log("the upstream MCP server exited: every request that needs it is answered with an error")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use permits_runtime::RunOutcome;

    #[test]
    fn a_run_is_failed_only_when_nothing_took_effect_and_unknown_when_the_tool_may_have_acted() {
        let exited = UpstreamError::Exited;
        let not_sent = UpstreamError::NotSent { cause: Box::new(UpstreamError::Exited) };
        let refused = |code: i64| UpstreamError::Rpc {
            method: "tools/call".into(),
            error: json!({"code": code, "message": "no"}),
        };
        let failed = |why: &str| RunOutcome::Failed(why.into());
        assert_eq!(receipt_of(&Ok(json!({"content": []})), false), RunOutcome::Done(json!({"content": []})));
        // Never written to the server: it cannot have acted, cancelled or not.
        let never = "never sent to the upstream server: the upstream MCP server exited";
        assert_eq!(receipt_of(&Err(not_sent.clone()), false), failed(never));
        assert_eq!(receipt_of(&Err(not_sent), true), failed(never));
        // Sent, then the server exited before it answered: it may have acted.
        assert_eq!(
            receipt_of(&Err(exited), false),
            RunOutcome::Unknown("no answer from the upstream server: the upstream MCP server exited".into())
        );
        // The server says it did not take the request, unless the agent had cancelled it.
        let refusal = r#"the upstream server refused the request: {"code":-32602,"message":"no"}"#;
        assert_eq!(receipt_of(&Err(refused(INVALID_PARAMS)), false), failed(refusal));
        assert!(matches!(receipt_of(&Err(refused(INVALID_PARAMS)), true), RunOutcome::Unknown(_)));
        assert!(matches!(receipt_of(&Err(refused(INTERNAL_ERROR)), false), RunOutcome::Unknown(_)));
        assert!(matches!(receipt_of(&Err(UpstreamError::Cancelled), false), RunOutcome::Unknown(_)));
    }
}
