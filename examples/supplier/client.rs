//! The client of the supplier test peer (`examples/supplier/main.rs`), shared by the example host and the
//! integration tests, which include it with
//! `#[path = "../examples/supplier/client.rs"] mod supplier_client;`. It depends on nothing but `ureq`,
//! `serde_json`, `permits_runtime` (for [`order_outcome`]) and `std`, which every includer has (the
//! `permits` crate's examples, permits-runtime's tests and examples, permits-cli's and permits-service's
//! tests), so every includer can compile it as it is.
//!
//! [`Supplier`] speaks HTTP to a running peer; [`order_outcome`] is a host's run that sends the shop's order
//! to it; [`SupplierProcess`] starts one as a child process on its own database and kills it when dropped;
//! [`supplier_exe`] and [`build_supplier`] find (or build) the binary.

use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use permits_runtime::{RunContext, RunOutcome};
use serde_json::{Value, json};

/// How long one request may take, connection included, before the supplier counts as unreachable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a starting peer may take to print its `listening on` line.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A handle on a running supplier peer, addressed by its base URL (`http://127.0.0.1:PORT`).
#[derive(Clone, Debug)]
pub struct Supplier {
    base: String,
}

/// Why a call to the supplier did not return a receipt.
#[derive(Debug)]
#[allow(dead_code, reason = "an includer may match only some variants")]
pub enum SupplierError {
    /// The supplier answered 409: the operation id was already used for other content. The body is the
    /// supplier's refusal, `{"operation", "outcome": "refused", "error"}`, a conclusive answer.
    Refused(Value),
    /// No answer: the connection failed, timed out or broke. Whether the order arrived is unknown.
    Unreachable(String),
    /// Any other answer: the status and the raw body (a 400 for malformed input, a 404, a 500, or a 200
    /// whose body is not JSON).
    Http(u16, String),
}

impl fmt::Display for SupplierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SupplierError::Refused(body) => write!(f, "the supplier refused the order: {body}"),
            SupplierError::Unreachable(why) => write!(f, "the supplier is unreachable: {why}"),
            SupplierError::Http(status, body) => write!(f, "the supplier answered {status}: {body}"),
        }
    }
}

impl std::error::Error for SupplierError {}

#[allow(dead_code, reason = "an includer may use only some of the calls")]
impl Supplier {
    /// A handle on the supplier at `base_url` (`http://127.0.0.1:PORT`, with or without a final slash).
    pub fn new(base_url: impl Into<String>) -> Supplier {
        let mut base = base_url.into();
        while base.ends_with('/') {
            base.pop();
        }
        Supplier { base }
    }

    /// The base URL this handle talks to, without a final slash.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Places an order under `operation` (`POST /orders`). A 200 gives the receipt
    /// `{"operation", "order", "sku", "quantity", "amount", "outcome": "accepted"}`, also when the same
    /// operation and content were already accepted; a 409 gives [`SupplierError::Refused`].
    pub fn order(&self, operation: &str, sku: &str, quantity: i64, amount: i64) -> Result<Value, SupplierError> {
        let body = json!({ "operation": operation, "sku": sku, "quantity": quantity, "amount": amount });
        self.post_raw("/orders", &body.to_string())
    }

    /// Posts `body` as it is (JSON or not) to `path` and reads the answer as [`Supplier::order`] does; tests
    /// use it to send malformed orders.
    pub fn post_raw(&self, path: &str, body: &str) -> Result<Value, SupplierError> {
        let response =
            agent().post(format!("{}{path}", self.base)).header("Content-Type", "application/json").send(body);
        answer(response)
    }

    /// Every order the supplier accepted (`GET /orders`), as receipts in order-number order.
    pub fn orders(&self) -> Result<Vec<Value>, SupplierError> {
        let answer = answer(agent().get(format!("{}/orders", self.base)).call())?;
        match answer.get("orders") {
            Some(Value::Array(orders)) => Ok(orders.clone()),
            _ => Err(SupplierError::Http(200, answer.to_string())),
        }
    }

    /// Whether the supplier answers `GET /health` with `{"ok": true}`.
    pub fn health(&self) -> bool {
        answer(agent().get(format!("{}/health", self.base)).call())
            .is_ok_and(|body| body.get("ok") == Some(&Value::Bool(true)))
    }

    /// Asks the supplier to exit (`POST /shutdown`). Errors are ignored: a peer that is already gone is
    /// what was asked for.
    pub fn shutdown(&self) {
        let _ = agent().post(format!("{}/shutdown", self.base)).send("");
    }
}

/// A host's run of the shop's order (`PlaceOrder` with the arguments `sku`, `quantity` and `amount`): sends
/// it to `supplier` under the runtime's operation id and turns the answer into the run's outcome. A receipt
/// is [`RunOutcome::Done`]; the supplier's refusal, a conclusive answer, is [`RunOutcome::Failed`]; any other
/// answer or none is [`RunOutcome::Unknown`], since the order may have arrived.
#[allow(dead_code, reason = "an includer may send orders another way")]
pub fn order_outcome(supplier: &Supplier, ctx: &RunContext<'_>) -> RunOutcome {
    let a = ctx.arguments;
    let (Some(sku), Some(qty), Some(amount)) = (a["sku"].as_str(), a["quantity"].as_i64(), a["amount"].as_i64()) else {
        return RunOutcome::Failed("the order's arguments are incomplete".into());
    };
    match supplier.order(ctx.operation, sku, qty, amount) {
        Ok(receipt) => RunOutcome::Done(receipt),
        Err(SupplierError::Refused(body)) => RunOutcome::Failed(format!("the supplier refused: {body}")),
        Err(other) => RunOutcome::Unknown(format!("the supplier did not answer clearly: {other}")),
    }
}

/// An agent that hands back every status with its body, bypasses any proxy from the environment (the peer
/// is on loopback) and gives up after [`REQUEST_TIMEOUT`].
#[allow(dead_code, reason = "used only by calls an includer may not make")]
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(REQUEST_TIMEOUT))
        .proxy(None)
        .build()
        .into()
}

#[allow(dead_code, reason = "used only by calls an includer may not make")]
fn answer(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Value, SupplierError> {
    let mut response = response.map_err(|e| SupplierError::Unreachable(e.to_string()))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().map_err(|e| SupplierError::Unreachable(e.to_string()))?;
    match (status, serde_json::from_str::<Value>(&text)) {
        (200, Ok(body)) => Ok(body),
        (409, Ok(body)) => Err(SupplierError::Refused(body)),
        _ => Err(SupplierError::Http(status, text)),
    }
}

/// A supplier peer running as a child process on its own database. Dropping it kills the child and waits
/// for it, so no peer outlives its test.
#[derive(Debug)]
#[allow(dead_code, reason = "the shop example talks to a running supplier and never starts one")]
pub struct SupplierProcess {
    child: Child,
    /// The peer's base URL, `http://127.0.0.1:PORT`, read from its first line of output.
    pub url: String,
    /// A client for [`SupplierProcess::url`].
    pub supplier: Supplier,
}

#[allow(dead_code, reason = "an includer may use only some of the calls")]
impl SupplierProcess {
    /// Starts the peer binary `exe` on the database `db` (created if missing) on any free loopback port,
    /// and waits up to 30 seconds for its `listening on http://127.0.0.1:PORT` line.
    pub fn start(exe: &Path, db: &Path) -> std::io::Result<SupplierProcess> {
        let mut child = Command::new(exe)
            .arg("--db")
            .arg(db)
            .args(["--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let Some(stdout) = child.stdout.take() else {
            kill(&mut child);
            return Err(std::io::Error::other("the supplier's stdout was not captured"));
        };
        // The line is read on a thread so that a peer that never prints cannot hang the caller.
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = sender.send(read);
        });
        let line = match receiver.recv_timeout(START_TIMEOUT) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => {
                kill(&mut child);
                return Err(e);
            }
            Err(_) => {
                kill(&mut child);
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the supplier printed no `listening on` line within {START_TIMEOUT:?}"),
                ));
            }
        };
        let Some(url) = line.trim().strip_prefix("listening on ").map(str::to_owned) else {
            kill(&mut child);
            return Err(std::io::Error::other(format!("the supplier's first line was `{}`", line.trim())));
        };
        let supplier = Supplier::new(url.clone());
        Ok(SupplierProcess { child, url, supplier })
    }

    /// Asks the peer to exit (`POST /shutdown`) and waits up to 10 seconds for it; a peer that does not
    /// exit by then is killed. Returns how it exited.
    pub fn stop(mut self) -> std::io::Result<ExitStatus> {
        self.supplier.shutdown();
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.kill()?;
        self.child.wait()
    }
}

impl Drop for SupplierProcess {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

fn kill(child: &mut Child) {
    // The child may have exited already (after `stop`); killing it again is harmless.
    let _ = child.kill();
    let _ = child.wait();
}

/// The built `supplier` example next to the running binary, if it exists: a test runs from
/// `target/<profile>/deps/NAME-HASH` and an example from `target/<profile>/examples/NAME`; the peer is
/// `target/<profile>/examples/supplier`.
#[allow(dead_code, reason = "an includer may build the peer another way")]
pub fn supplier_exe() -> Option<PathBuf> {
    let exe = expected_supplier_exe()?;
    exe.is_file().then_some(exe)
}

/// The supplier binary, built with `cargo build --example supplier` when [`supplier_exe`] finds none (with
/// the running binary's profile; cargo inherits the environment, `CARGO_TARGET_DIR` included). A binary
/// that already exists is used as it is, so after editing the peer, rebuild it.
#[allow(dead_code, reason = "an includer may build the peer another way")]
pub fn build_supplier() -> std::io::Result<PathBuf> {
    // Tests run in parallel threads; one build per process is enough, and the others wait for it.
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| build_supplier_once().map_err(|e| e.to_string())).clone().map_err(std::io::Error::other)
}

#[allow(dead_code, reason = "used only by calls an includer may not make")]
fn build_supplier_once() -> std::io::Result<PathBuf> {
    if let Some(exe) = supplier_exe() {
        return Ok(exe);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["build", "-p", "permits", "--example", "supplier"]).current_dir(env!("CARGO_MANIFEST_DIR"));
    match profile_dir().as_ref().and_then(|dir| dir.file_name()).and_then(|name| name.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            command.arg("--release");
        }
        Some(profile) => {
            command.args(["--profile", profile]);
        }
    }
    let status = command.status()?;
    if !status.success() {
        return Err(std::io::Error::other(format!("`cargo build --example supplier` failed: {status}")));
    }
    supplier_exe().ok_or_else(|| {
        let expected = expected_supplier_exe().unwrap_or_default();
        std::io::Error::other(format!("cargo built the supplier, but not at `{}`", expected.display()))
    })
}

/// `target/<profile>`: the folder of the running binary, or its parent when that is `deps` or `examples`.
#[allow(dead_code, reason = "used only by calls an includer may not make")]
fn profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    match dir.file_name().and_then(|name| name.to_str()) {
        Some("deps" | "examples") => dir.parent().map(Path::to_path_buf),
        _ => Some(dir.to_path_buf()),
    }
}

#[allow(dead_code, reason = "used only by calls an includer may not make")]
fn expected_supplier_exe() -> Option<PathBuf> {
    Some(profile_dir()?.join("examples").join(format!("supplier{}", std::env::consts::EXE_SUFFIX)))
}
