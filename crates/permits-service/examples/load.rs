//! The service's load generator (BENCHMARKS.md "The approval service"): starts `permitd` on loopback (port
//! 0) on a fresh store with the support-triage table, then measures
//!
//! 1. **decide** over HTTP, one keep-alive connection, one request at a time: p50, p99, p99.9, max;
//! 2. **full cycles** — call (→ a proposal) → approve → claim → confirm → receipt — from several clients at
//!    once: cycles per second, every state change committed to the SQLite ledger.
//!
//! Bounded in count and time: `--decides N` (20000) and `--cycles N` (5000) at most, each phase stops after
//! `--seconds S` (20) whatever the count; `--clients N` (4) for the cycles; `--sync group|full|normal` is passed
//! to `permitd serve` (its default, `group`, when not given). Loopback only. Build and run:
//!
//! ```text
//! cargo build --release -p permits-service --bins --examples
//! target/release/examples/load
//! ```

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Args {
    decides: usize,
    cycles: usize,
    seconds: u64,
    clients: usize,
    permitd: PathBuf,
    sync: Option<String>,
}

fn args() -> Result<Args, String> {
    let here = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/release/examples/load → target/release/permitd
    let beside = here.parent().and_then(Path::parent).map(|d| d.join("permitd")).unwrap_or_default();
    let mut a = Args { decides: 20_000, cycles: 5_000, seconds: 20, clients: 4, permitd: beside, sync: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
        let number = || value.parse::<usize>().map_err(|_| format!("`{value}` is not a number"));
        match flag.as_str() {
            "--decides" => a.decides = number()?,
            "--cycles" => a.cycles = number()?,
            "--seconds" => a.seconds = number()? as u64,
            "--clients" => a.clients = number()?.clamp(1, 64),
            "--permitd" => a.permitd = PathBuf::from(&value),
            "--sync" if ["group", "full", "normal"].contains(&value.as_str()) => a.sync = Some(value),
            "--sync" => return Err(format!("`--sync` is `group`, `full` or `normal`, not `{value}`")),
            other => return Err(format!("unknown flag `{other}`")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("load: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The server, killed (by its process id) when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run() -> Result<(), String> {
    let a = args()?;
    if !a.permitd.is_file() {
        return Err(format!(
            "no permitd at `{}`: run `cargo build --release -p permits-service --bins --examples` first, or pass --permitd",
            a.permitd.display()
        ));
    }
    let dir = std::env::temp_dir().join(format!("permitd-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("../permits-runtime/tests/fixtures/support-triage.json");
    let store = dir.join("ledger.db");
    let key = |args: &[&str]| -> Result<String, String> {
        let out = Command::new(&a.permitd)
            .args(["keys", "add", "--store"])
            .arg(&store)
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let host_key = key(&["--agents", "Triage"])?;
    let riley_key = key(&["--person", "Riley"])?;
    let mut child = Command::new(&a.permitd)
        .args(["serve", "--listen", "127.0.0.1:0", "--table"])
        .arg(&table)
        .arg("--store")
        .arg(&store)
        .args(a.sync.iter().flat_map(|s| ["--sync", s.as_str()]))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
    let base = line.trim().strip_prefix("listening on ").ok_or_else(|| format!("permitd said `{line}`"))?.to_string();

    // How the ledger commits, as permitd read it back from SQLite.
    let (_, health) = Client::new(&base, "").get("/healthz")?;
    println!(
        "permitd {base}, store {} (journal_mode={}, synchronous={})",
        store.display(),
        health["store"]["journal_mode"].as_str().unwrap_or("?"),
        health["store"]["synchronous"].as_str().unwrap_or("?")
    );
    println!("load before: {}", uptime());

    let limit = Duration::from_secs(a.seconds);
    // 1. decide, one client, one request at a time.
    let host = Client::new(&base, &host_key);
    let decide = json!({"agent": "Triage", "skill": "ExportFailures", "tool": "SendReply",
        "arguments": {"ticket": "T-42", "recipient": "customer-42", "text": "J-42 failed."}, "requester": "Sam"});
    for _ in 0..500 {
        host.post("/v1/decide", &decide)?;
    }
    let mut took = Vec::with_capacity(a.decides);
    let started = Instant::now();
    while took.len() < a.decides && started.elapsed() < limit {
        let t = Instant::now();
        let (status, _) = host.post("/v1/decide", &decide)?;
        took.push(t.elapsed());
        if status != 200 {
            return Err(format!("decide answered {status}"));
        }
    }
    let elapsed = started.elapsed();
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "decide over HTTP: {} requests in {:.2} s ({:.0}/s), p50 {:?}, p99 {:?}, p99.9 {:?}, max {:?}",
        took.len(),
        elapsed.as_secs_f64(),
        took.len() as f64 / elapsed.as_secs_f64(),
        at(0.50),
        at(0.99),
        at(0.999),
        took[took.len() - 1]
    );

    // 2. full cycles, several clients at once.
    let started = Instant::now();
    let per_client = a.cycles.div_ceil(a.clients);
    let results: Vec<Result<(usize, Vec<Duration>), String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..a.clients)
            .map(|c| {
                let (host, riley) = (Client::new(&base, &host_key), Client::new(&base, &riley_key));
                scope.spawn(move || -> Result<(usize, Vec<Duration>), String> {
                    let mut cycles = Vec::new();
                    for n in 0..per_client {
                        if started.elapsed() >= limit {
                            break;
                        }
                        let t = Instant::now();
                        cycle(&host, &riley, &format!("load-{c}-{n}"))?;
                        cycles.push(t.elapsed());
                    }
                    Ok((cycles.len(), cycles))
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or_else(|_| Err("a client panicked".into()))).collect()
    });
    let elapsed = started.elapsed();
    let mut done = 0;
    let mut all = Vec::new();
    for r in results {
        let (n, times) = r?;
        done += n;
        all.extend(times);
    }
    all.sort();
    let p = |q: f64| {
        all.get(((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1))).copied().unwrap_or_default()
    };
    println!(
        "full cycles (call → approve → claim → confirm → receipt, 5 commits each), {} clients: {done} in {:.2} s = {:.0} cycles/s; a cycle p50 {:?}, p99 {:?}",
        a.clients,
        elapsed.as_secs_f64(),
        done as f64 / elapsed.as_secs_f64(),
        p(0.5),
        p(0.99)
    );
    println!("load after: {}", uptime());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn cycle(host: &Client, riley: &Client, key: &str) -> Result<(), String> {
    let call = json!({"agent": "Triage", "skill": "ExportFailures", "tool": "SendReply",
        "arguments": {"ticket": "T-42", "recipient": "customer-42", "text": "J-42 failed."}, "requester": "Sam",
        "operation_key": key, "claim_token": format!("{key}-c"), "covered_version": "7"});
    let (_, answer) = host.post("/v1/calls", &call)?;
    let p = &answer["proposal"];
    let id = p["id"].as_str().ok_or_else(|| format!("no proposal: {answer}"))?;
    expect(riley.post(&format!("/v1/proposals/{id}/approve"), &json!({"fingerprint": p["fingerprint"]}))?)?;
    let token = json!({"token": key, "covered_version": "7"});
    expect(host.post(&format!("/v1/executions/{id}/claim"), &token)?)?;
    expect(host.post(&format!("/v1/executions/{id}/confirm"), &json!({"token": key}))?)?;
    let receipt = json!({"token": key, "outcome": "done", "receipt": {"message": key}});
    let (_, done) = expect(host.post(&format!("/v1/executions/{id}/receipt"), &receipt)?)?;
    if done["status"] != "done" {
        return Err(format!("the cycle ended {}", done["status"]));
    }
    Ok(())
}

fn expect(answer: (u16, Value)) -> Result<(u16, Value), String> {
    if answer.0 == 200 { Ok(answer) } else { Err(format!("{}: {}", answer.0, answer.1)) }
}

fn uptime() -> String {
    Command::new("uptime").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

/// A keep-alive client with one key.
struct Client {
    base: String,
    auth: String,
    agent: ureq::Agent,
}

impl Client {
    fn new(base: &str, key: &str) -> Client {
        // Each phase bounded, not the whole: a global timeout makes ureq resolve the host on a thread of its
        // own for every request, which would be timed as the service's.
        let phase = Some(Duration::from_secs(30));
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(phase)
            .timeout_send_request(phase)
            .timeout_send_body(phase)
            .timeout_recv_response(phase)
            .timeout_recv_body(phase)
            .proxy(None)
            .build()
            .into();
        Client { base: base.to_string(), auth: format!("Bearer {key}"), agent }
    }

    fn get(&self, path: &str) -> Result<(u16, Value), String> {
        let mut response = self.agent.get(format!("{}{path}", self.base)).call().map_err(|e| format!("{path}: {e}"))?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(|e| e.to_string())?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        let mut response = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("authorization", &self.auth)
            .header("content-type", "application/json")
            .send(body.to_string())
            .map_err(|e| format!("{path}: {e}"))?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(|e| e.to_string())?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }
}
