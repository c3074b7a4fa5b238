//! The inbox's benchmark (issue #17, BENCHMARKS.md "The inbox"): a ledger with `--proposals N` proposals
//! (default 100,000) of which `--waiting W` wait (default 100; the others are rejected), made through the
//! runtime itself on an SQLite file; then `permitd serve` on it, a person signed in, and the time of
//! `GET /inbox/waiting` (the first page) and `GET /inbox/proposals/{id}` measured over loopback,
//! `--requests R` times each (default 50), after 5 warm-up requests. Bounded: it stops making proposals
//! after `--seconds S` (default 600).
//!
//! ```sh
//! cargo build --release -p permits-service --bins --examples
//! target/release/examples/inbox_bench --proposals 100000 --waiting 100
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use permits_runtime::table::Table;
use permits_runtime::{AdmitAll, Call, ProposalRequest, Runtime, SqliteStore, Synchronous};
use serde_json::json;

type R<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn main() -> R {
    let (n, waiting, requests, seconds) =
        (arg("--proposals", 100_000), arg("--waiting", 100), arg("--requests", 50), arg("--seconds", 600));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let table_path = root.join("crates/permits-runtime/tests/fixtures/holes.table.json");
    let dir = std::env::temp_dir().join(format!("permits-inbox-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store = dir.join("ledger.db");
    let made = Instant::now();
    {
        let sqlite = SqliteStore::open(&store)?;
        sqlite.set_synchronous(Synchronous::Normal)?;
        let rt = Runtime::new(Table::load_path(&table_path)?, AdmitAll).with_store(sqlite);
        rt.install_table()?;
        let deadline = Instant::now() + Duration::from_secs(seconds);
        for i in 0..n {
            if Instant::now() > deadline {
                eprintln!("stopped after {i} proposals: --seconds {seconds}");
                break;
            }
            let call = Call::new("Clerkbot", "Reorder", "PlaceOrder")
                .with_arguments(json!({"sku": format!("sku-{i}"), "quantity": 1, "amount": 900}))
                .for_person("Sam");
            let p = rt.propose(&ProposalRequest::new(call, format!("task-{i}"), "the freezer runs low"))?;
            if i < n.saturating_sub(waiting) {
                rt.reject(&p.id, "Max", "not this one")?;
            }
        }
    }
    println!("made {n} proposals ({waiting} waiting) in {:.1} s", made.elapsed().as_secs_f64());
    let permitd =
        std::env::current_exe()?.parent().and_then(Path::parent).map(|d| d.join("permitd")).ok_or("no target dir")?;
    set_password(&permitd, &store)?;
    let mut child = Command::new(&permitd)
        .args(["serve", "--listen", "127.0.0.1:0", "--sync", "normal", "--table"])
        .arg(&table_path)
        .arg("--store")
        .arg(&store)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("stdout")?).read_line(&mut line)?;
    let base = line.trim().strip_prefix("listening on ").ok_or("no address")?.to_string();
    let result = measure(&base, requests, n);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn set_password(permitd: &PathBuf, store: &Path) -> R {
    let mut child = Command::new(permitd)
        .args(["people", "set-password", "--store"])
        .arg(store)
        .arg("Max")
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    writeln!(child.stdin.take().ok_or("stdin")?, "a benchmark password")?;
    if !child.wait()?.success() {
        return Err("set-password failed".into());
    }
    Ok(())
}

fn measure(base: &str, requests: u64, n: u64) -> R {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into();
    let form = agent.get(format!("{base}/inbox/sign-in")).call()?;
    let pre = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("permits_signin=").and_then(|c| c.split(';').next()).map(str::to_string))
        .ok_or("no sign-in cookie")?;
    let html = form.into_body().read_to_string()?;
    let csrf = html.split("name=\"csrf\" value=\"").nth(1).and_then(|r| r.split('"').next()).ok_or("no token")?;
    let signed = agent
        .post(format!("{base}/inbox/sign-in"))
        .header("cookie", format!("permits_signin={pre}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .send(format!("csrf={csrf}&person=Max&password=a+benchmark+password"))?;
    let session = signed
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("permits_session=").and_then(|c| c.split(';').next()).map(str::to_string))
        .ok_or("not signed in")?;
    for (name, path) in
        [("waiting, first page", "/inbox/waiting".to_string()), ("a proposal", format!("/inbox/proposals/P-{n}"))]
    {
        let mut times = Vec::new();
        for i in 0..requests + 5 {
            let started = Instant::now();
            let mut answer =
                agent.get(format!("{base}{path}")).header("cookie", format!("permits_session={session}")).call()?;
            let body = answer.body_mut().read_to_string()?;
            let took = started.elapsed();
            if answer.status() != 200 || body.len() < 500 {
                return Err(format!("{path}: {} {body}", answer.status()).into());
            }
            if i >= 5 {
                times.push(took);
            }
        }
        times.sort();
        println!(
            "{name} ({path}): p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms over {requests} requests",
            percentile(&times, 0.5).as_secs_f64() * 1e3,
            percentile(&times, 0.9).as_secs_f64() * 1e3,
            times.last().copied().unwrap_or_default().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
