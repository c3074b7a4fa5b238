//! The approval service's tests, against the real `permitd` binary on loopback (port 0): each test starts
//! its own server on its own store, makes keys with `permitd keys add`, and talks HTTP. Every JSON answer
//! is validated against the checked-in OpenAPI document ([`openapi`]).

mod bad_input;
mod browser;
mod delegation;
mod durability;
mod inbox;
mod keys;
mod leases;
mod modes;
mod openapi;
mod postgres;
mod protocol;
mod reload;
mod shop;
mod sign_in;
mod support_triage;
mod version_urls;
// The supplier test peer's client (the shop's supplier: a separate process with its own database).
#[path = "../../../../examples/supplier/client.rs"]
mod supplier_client;
mod waiting;
mod webhooks;
mod workshop;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

type R = Result<(), Box<dyn std::error::Error>>;

/// A fixture table of the runtime's tests (`crates/permits-runtime/tests/fixtures/NAME.json`).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../permits-runtime/tests/fixtures").join(format!("{name}.json"))
}

/// A folder under the system's temp dir, removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("permitd-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Temp(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn permitd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_permitd"))
}

/// A running `permitd serve` on a store in its own folder. Dropping it kills the process.
struct Server {
    child: Child,
    url: String,
    store: PathBuf,
    table: PathBuf,
    _dir: Option<Temp>,
}

impl Server {
    /// A server on a copy of the fixture table `name`, in a new folder.
    fn start(name: &str) -> Server {
        let dir = Temp::new(name);
        let table = dir.path("table.json");
        std::fs::copy(fixture(name), &table).unwrap_or_else(|e| panic!("cannot copy the fixture {name}: {e}"));
        let store = dir.path("ledger.db");
        let mut server = Server::on(&table, &store);
        server._dir = Some(dir);
        server
    }

    /// A server on this table and store (the folder is the caller's).
    fn on(table: &Path, store: &Path) -> Server {
        Server::with(table, store, &[])
    }

    /// [`Server::on`] with more arguments of `permitd serve`.
    fn with(table: &Path, store: &Path, more: &[&str]) -> Server {
        Server::logged(table, store, more, None)
    }

    /// [`Server::with`], its stderr written to `log` when given (else the test's own).
    fn logged(table: &Path, store: &Path, more: &[&str], log: Option<&Path>) -> Server {
        let stderr = match log {
            Some(path) => Stdio::from(
                std::fs::File::create(path).unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display())),
            ),
            None => Stdio::inherit(),
        };
        Server::spawned(table, store, more, stderr, false)
    }

    /// A server on a copy of the fixture table `name` whose stderr is a pipe nobody reads: its reading end
    /// is closed before the server writes a line, so every write to stderr fails (EPIPE).
    fn deaf(name: &str) -> Server {
        let dir = Temp::new(name);
        let table = dir.path("table.json");
        std::fs::copy(fixture(name), &table).unwrap_or_else(|e| panic!("cannot copy the fixture {name}: {e}"));
        let mut server = Server::spawned(&table, &dir.path("ledger.db"), &[], Stdio::piped(), true);
        server._dir = Some(dir);
        server
    }

    fn spawned(table: &Path, store: &Path, more: &[&str], stderr: Stdio, close_stderr: bool) -> Server {
        let mut child = permitd()
            .args(["serve", "--listen", "127.0.0.1:0", "--table"])
            .arg(table)
            .arg("--store")
            .arg(store)
            .args(more)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start permitd: {e}"));
        if close_stderr {
            drop(child.stderr.take());
        }
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("permitd's stdout"));
        let (send, receive) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = send.send(line);
        });
        let line = receive.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let Some(url) = line.trim().strip_prefix("listening on ").map(str::to_string) else {
            let _ = child.kill();
            panic!("permitd's first line was `{}`", line.trim());
        };
        Server { child, url, store: store.to_path_buf(), table: table.to_path_buf(), _dir: None }
    }

    /// A new key (`permitd keys add --store … ARGS`): its token.
    fn key(&self, args: &[&str]) -> String {
        key(&self.store, args)
    }

    /// A host key for these agents.
    fn host(&self, agents: &str) -> Client {
        Client::new(&self.url, &self.key(&["--agents", agents]))
    }

    /// A person key for this person.
    fn person(&self, person: &str) -> Client {
        Client::new(&self.url, &self.key(&["--person", person]))
    }

    /// Sends `signal` (`TERM`, `HUP`, `KILL`) to the server's process, by its id.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{signal} failed");
    }

    /// Stops the server (SIGTERM) and waits for it; or kills it with SIGKILL (`hard`).
    fn stop(mut self, how: Stop) -> (PathBuf, PathBuf, Option<Temp>) {
        match how {
            Stop::Term => self.signal("TERM"),
            Stop::Kill => {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
        (self.table.clone(), self.store.clone(), self._dir.take())
    }
}

/// How a server is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// SIGTERM: it ends gracefully.
    Term,
    /// SIGKILL: it dies at once.
    Kill,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A new key in `store`: its token (`permitd keys add` prints it alone on stdout).
fn key(store: &Path, args: &[&str]) -> String {
    let out = permitd().args(["keys", "add", "--store"]).arg(store).args(args).output().expect("permitd keys add");
    assert!(out.status.success(), "keys add: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An answer: the status and the JSON body.
#[derive(Clone, Debug)]
struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    /// The error code of an error answer.
    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// The error message of an error answer.
    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }

    /// The body of a 200, or a panic naming the error.
    fn ok(self) -> Value {
        assert_eq!(self.status, 200, "{}", self.body);
        self.body
    }
}

/// A client with one key.
#[derive(Clone)]
struct Client {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Client {
    fn new(base: &str, token: &str) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(90)))
            .proxy(None)
            .build()
            .into();
        Client { base: base.to_string(), token: token.to_string(), agent }
    }

    /// A client without a key.
    fn anonymous(base: &str) -> Client {
        Client::new(base, "")
    }

    fn get(&self, path: &str) -> Answer {
        let mut request = self.agent.get(format!("{}{path}", self.base));
        if !self.token.is_empty() {
            request = request.header("authorization", format!("Bearer {}", self.token));
        }
        self.answer("get", path, request.call())
    }

    /// A text answer (`/metrics`): its body, unchecked.
    fn get_text(&self, path: &str) -> String {
        let mut response =
            self.agent.get(format!("{}{path}", self.base)).call().unwrap_or_else(|e| panic!("get {path}: {e}"));
        response.body_mut().read_to_string().unwrap_or_default()
    }

    fn post(&self, path: &str, body: &Value) -> Answer {
        self.post_raw(path, body.to_string().as_bytes())
    }

    fn post_raw(&self, path: &str, body: &[u8]) -> Answer {
        let mut request = self.agent.post(format!("{}{path}", self.base)).header("content-type", "application/json");
        if !self.token.is_empty() {
            request = request.header("authorization", format!("Bearer {}", self.token));
        }
        self.answer("post", path, request.send(body))
    }

    fn answer(
        &self,
        method: &str,
        path: &str,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Answer {
        let mut response = response.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_string()
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let body: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path} {status}: not JSON ({e}): {text}"));
        openapi::check(method, path, status, &body);
        Answer { status, body }
    }
}
