//! The local gateway's lane under load (issue #19, BENCHMARKS.md "The MCP gateway"): the store's part of an
//! `alone` `tools/call` in `permitc mcp proxy --store`, without the agent, the upstream server or the frames.
//! Each call is what the gateway does: [`Lane::call`] (decided and admitted, the transaction left open), the
//! call sent, [`Lane::claim`] (the run written and committed) while the tool runs, [`Lane::durable`] before
//! the answer, then [`Lane::receipt`] after it. Each is timed.
//!
//! ```text
//! cargo run --release -p permits-mcp --example lane_load -- [CALLS] [PAUSE_MS] [TOOL_US] [FOLDER]
//! ```
//!
//! `CALLS` calls (default 2,000) one after the other, each after a pause of `PAUSE_MS` milliseconds (default 0:
//! back to back; an agent's calls come seconds apart), the tool itself taking `TOOL_US` microseconds (default
//! 0; spent spinning on the calling thread, as the gateway waits for the server's answer). A tool that only
//! reads is sent once admitted, and runs while its claim is written and synced
//! ([`permits_runtime::Runtime::claim_if_alone_sending`]), so what the lane adds before the answer is the
//! admission and whatever of the claim and its sync outlasts the tool. The store is a fresh
//! SQLite file in `FOLDER` (default: a new folder under the system's temporary one, removed at the end), on
//! the disk the gateway would use. Bounded: it stops after `CALLS` calls.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use permits_compiler::compile::compile_loaded;
use permits_compiler::syntax::{Source, Sources, parse_sources};
use permits_mcp::lane::{Lane, LaneOptions, Laned};
use permits_runtime::{AdmitAll, Call, ProposalRequest, RunOutcome, Runtime, SqliteStore};
use serde_json::json;

type R<T> = Result<T, Box<dyn std::error::Error>>;

/// The gateway tests' world in small: Ana's Scribe reads notes alone.
const POLICY: &str = "person Ana\n\
agent Scribe \"Keeps notes for Ana.\" { sponsor Ana skills [Notes] }\n\
skill Notes \"Notes.\" { tools [read_note] }\n\
extern tool read_note \"Read a note\" (title: string) : reads\n";

fn main() -> R<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let calls: usize = args.first().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let pause = Duration::from_millis(args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(0));
    let tool = Duration::from_micros(args.get(2).map(|a| a.parse()).transpose()?.unwrap_or(0));
    let (folder, remove) = match args.get(3) {
        Some(f) => (PathBuf::from(f), false),
        None => (std::env::temp_dir().join(format!("permits-lane-load-{}", std::process::id())), true),
    };
    std::fs::create_dir_all(&folder)?;
    let result = run(&folder, calls, pause, tool);
    if remove {
        let _ = std::fs::remove_dir_all(&folder);
    }
    result
}

fn run(folder: &Path, calls: usize, pause: Duration, tool: Duration) -> R<()> {
    let mut sources = Sources::default();
    sources.add(Source::new("policy.permits", POLICY.as_bytes().to_vec()));
    let out = compile_loaded(parse_sources(sources));
    let table = out.table.ok_or("the policy does not compile")?;
    let table_path = folder.join("table.json");
    std::fs::write(&table_path, table.to_pretty_json())?;
    let store = folder.join("ledger.db");
    let _ = std::fs::remove_file(&store);
    // Installed as `permitd serve` installs it; the store stays open beside the lane, as `permitd`'s does.
    let service = Runtime::new(table, AdmitAll).with_store(SqliteStore::open(&store)?);
    service.install_table()?;
    let lane = Lane::open(&LaneOptions::beside(&table_path, &store))?;
    let (mut returned, mut added, mut receipts) = (Vec::new(), Vec::new(), Vec::new());
    let started = Instant::now();
    for n in 0..calls {
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        let call = Call::new("Scribe", "Notes", "read_note").with_arguments(json!({"title": "n"})).for_person("Ana");
        let request = ProposalRequest::new(call, "task-load", "");
        let token = format!("load-{n}");
        let t = Instant::now();
        let Laned::Admitted(admitted) = lane.call(request, &token) else {
            return Err(format!("call {n} was not admitted alone in the lane").into());
        };
        returned.push(t.elapsed());
        // Sent here; the claim is written while the tool runs (its own time spent on this thread after the
        // claim, as the gateway's upstream reader waits for the server's answer).
        let sent = Instant::now();
        let (run, syncing) = lane.claim(admitted)?;
        while sent.elapsed() < tool {
            std::hint::spin_loop();
        }
        let ran = tool.min(sent.elapsed());
        lane.durable(syncing)?;
        added.push(t.elapsed().saturating_sub(ran));
        let t = Instant::now();
        lane.receipt(&run.id, &token, RunOutcome::Done(json!({"content": [{"type": "text", "text": "x"}]})))?;
        receipts.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    println!(
        "{calls} alone calls, pause {} ms, tool {} µs, in {:.2} s",
        pause.as_millis(),
        tool.as_micros(),
        elapsed.as_secs_f64()
    );
    show("admitted (the call may be sent)", &mut returned);
    show("added before the answer (admission, claim, durable)", &mut added);
    show("receipt (after the answer)", &mut receipts);
    Ok(())
}

fn show(name: &str, values: &mut [Duration]) {
    values.sort();
    let at = |q: f64| values[((values.len() as f64 * q) as usize).min(values.len() - 1)].as_secs_f64() * 1000.0;
    println!("{name:<46} p50 {:6.3} ms  p99 {:6.3} ms  max {:6.3} ms", at(0.5), at(0.99), at(1.0));
}
