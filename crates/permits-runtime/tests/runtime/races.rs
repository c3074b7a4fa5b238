//! Many hosts, one ledger, as separate OS processes (issue #22): four race hosts (`examples/race_host.rs`,
//! each a process with its own runtime and its own PostgreSQL connection) race on one database, round by
//! round, for `PERMITS_RACE_ROUNDS` rounds (1,000 unless set). The test is their start barrier: it sends
//! each round's `go` to all four at once and reads their four answers before the next round, so every
//! round is a real race of four processes, and it checks each round's outcome and, at the end, the store:
//! the audit chain verifies, and replayed in commit order it shows the invariant held at every step.
//!
//! - `ceiling`: approvals for the last of a ceiling (room for one order of four): never over it.
//! - `execute`: executions of one grant: exactly one run per grant (counted by the hosts, by a witness file
//!   the runs append to, and by the store).
//! - `supersede`: proposals superseding each other under one key: never two live (`waiting` or `granted`).
//! - `revoke`: a standing rule's revocation against its use: no use is admitted after the revocation
//!   commits, in the store's commit order (the audit chain) and by the processes' shared clock.
//!
//! And the failures of a host: one killed with SIGKILL in the middle of a transaction (held there by a
//! table lock the test takes, so the kill lands after its writes and before its commit) and one killed at
//! a random moment of a race: nothing half-written, the others go on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use permits_runtime::table::Table;
use permits_runtime::{
    AdmitAll, ApproveMode, ChainedEvent, EventKind, NewRule, PostgresStore, ProposalRequest, Runtime, Scope, Status,
    WorkFor, read_export, verify_chain,
};
use postgres::NoTls;
use serde_json::Value;

use crate::child::{ANSWER_TIMEOUT, HostProcess, example_exe};
use crate::postgres::{Database, order, shop};

type R = Result<(), Box<dyn std::error::Error>>;
type E = Box<dyn std::error::Error>;

const HOSTS: usize = 4;

fn rounds() -> u64 {
    std::env::var("PERMITS_RACE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

/// The table the hosts of `kind` run on, as `race_host` makes it: the hardening shop, with the ceiling raised
/// for `execute` and `supersede`.
fn race_table(kind: &str) -> Table {
    let mut table = shop();
    if kind == "execute" || kind == "supersede" {
        if let Some(budget) = table.budgets.get_mut("Supplies") {
            budget.ceiling = 1 << 50;
        }
        table.seal();
    }
    table
}

/// One race host process (`race_host`), its stdin, and its lines of output; `alive` until the test kills it.
struct Host {
    n: usize,
    process: HostProcess,
    alive: bool,
}

impl Host {
    fn start(url: &str, kind: &str, n: usize, witness: Option<&Path>) -> Result<Host, E> {
        let mut command = Command::new(example_exe("race_host", &["postgres"])?);
        command.args(["--db", url, "--kind", kind, "--host", &n.to_string()]);
        if let Some(w) = witness {
            command.arg("--witness").arg(w);
        }
        let host = Host { n, process: HostProcess::start(format!("host {n}"), command)?, alive: true };
        host.expect("ready")?;
        Ok(host)
    }

    fn send(&mut self, line: &str) -> Result<(), E> {
        self.process.send(line)
    }

    fn expect(&self, want: &str) -> Result<String, E> {
        let line = self.process.line()?;
        if !line.starts_with(want) {
            return Err(format!("host {}: `{line}` where `{want}…` was expected", self.n).into());
        }
        Ok(line)
    }

    /// The JSON of this host's `done R …` line for round `round`.
    fn answer(&self, round: u64) -> Result<Value, E> {
        let line = self.expect(&format!("done {round} "))?;
        Ok(serde_json::from_str(&line[format!("done {round} ").len()..])?)
    }

    /// SIGKILL, and wait for the process to be gone.
    fn kill(&mut self) -> Result<(), E> {
        self.process.kill()?;
        self.alive = false;
        Ok(())
    }
}

fn start_hosts(db: &Database, kind: &str, witness: Option<&Path>) -> Result<Vec<Host>, E> {
    let url = db.url()?;
    // Started one after the other: the first migrates the new database (the others would wait for its lock).
    (0..HOSTS).map(|n| Host::start(&url, kind, n, witness)).collect()
}

/// `line` to every living host, then each one's answer, in host order.
fn round_trip(hosts: &mut [Host], round: u64, line: &str) -> Result<Vec<(usize, Value)>, E> {
    for h in hosts.iter_mut().filter(|h| h.alive) {
        h.send(line)?;
    }
    hosts.iter().filter(|h| h.alive).map(|h| Ok((h.n, h.answer(round)?))).collect()
}

/// The parent's own host on the database (setting up rounds, checking figures).
fn parent(db: &Database, kind: &str) -> Result<Runtime, E> {
    Ok(Runtime::new(race_table(kind), AdmitAll).with_store(PostgresStore::with_config(db.config.clone())?))
}

/// The store's chain, verified whole; and its JSON-lines export (what `permitc audit verify` and the
/// service's `GET /v1/audit/verify` check) reads back to the same chain and verifies to the same head.
fn verified_chain(rt: &Runtime) -> Result<Vec<ChainedEvent>, E> {
    let chain = rt.audit_chain()?;
    let head = rt.audit_head()?;
    let verified = verify_chain(&chain, head.as_ref())?;
    assert_eq!(verified, head, "the chain ends at the store's head");
    let mut export = Vec::new();
    assert_eq!(rt.export_audit(&mut export)?, chain.len() as u64);
    let read = read_export(std::str::from_utf8(&export)?)?;
    assert_eq!(verify_chain(&read, head.as_ref())?, head);
    assert!(read == chain, "the export is the chain");
    Ok(chain)
}

fn refusal_of(answer: &Value) -> &str {
    answer["why"]["refusal"].as_str().unwrap_or("")
}

/// The room of the ceiling race: 10 orders of 900 held of 10,000, so one more of 900 fits and two do not.
fn fill_to_the_last_order(rt: &Runtime) -> R {
    for n in 0..10 {
        let p = rt.propose(&ProposalRequest::new(order(900), format!("fill-{n}"), "the standing order"))?;
        rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
    }
    let b = rt.budget("Supplies")?;
    assert_eq!((b.reserved, b.spent, b.effective_ceiling), (9_000, 0, 10_000));
    Ok(())
}

/// One round of the ceiling race among the living hosts: each proposes its order, then all approve at once.
/// Returns the winner's proposal id and the answers.
fn ceiling_round(hosts: &mut [Host], round: u64) -> Result<Vec<(usize, Value)>, E> {
    for h in hosts.iter_mut().filter(|h| h.alive) {
        h.send(&format!("prep {round}"))?;
    }
    for h in hosts.iter().filter(|h| h.alive) {
        h.expect(&format!("prepped {round}"))?;
    }
    round_trip(hosts, round, &format!("go {round}"))
}

#[test]
fn four_processes_approving_the_last_of_a_ceiling_never_exceed_it() -> R {
    let db = Database::new("xceiling")?;
    let rt = parent(&db, "ceiling")?;
    fill_to_the_last_order(&rt)?;
    let mut hosts = start_hosts(&db, "ceiling", None)?;
    let began = Instant::now();
    let mut wins = [0u64; HOSTS];
    for round in 0..rounds() {
        let answers = ceiling_round(&mut hosts, round)?;
        let winners: Vec<&(usize, Value)> = answers.iter().filter(|(_, a)| a["granted"] == true).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one approval fits: {answers:?}");
        for (n, a) in &answers {
            if a["granted"] != true {
                assert_eq!(refusal_of(a), "budget", "round {round}, host {n}: {a}");
            }
        }
        let b = rt.budget("Supplies")?;
        assert_eq!((b.reserved, b.spent), (9_900, 0), "round {round}: never over the ceiling");
        let (n, winner) = winners[0];
        wins[*n] += 1;
        rt.revoke(winner["id"].as_str().unwrap_or_default(), "Max", "the next round")?;
    }
    eprintln!(
        "ceiling race: {} rounds of {HOSTS} processes in {:.1?}, wins per host {wins:?}",
        rounds(),
        began.elapsed()
    );
    let b = rt.budget("Supplies")?;
    assert_eq!((b.reserved, b.spent), (9_000, 0));
    // In commit order, no grant ever took the budget over its ceiling: replay the grants and the releases.
    let chain = verified_chain(&rt)?;
    let granted = chain.iter().filter(|e| e.event.kind == EventKind::Grant).count() as u64;
    assert_eq!(granted, 10 + rounds(), "one grant per round, and the ten standing orders");
    let mut held = 0u64;
    for e in &chain {
        match e.event.kind {
            EventKind::Grant => held += 900,
            EventKind::Revocation => held -= 900,
            _ => {}
        }
        assert!(held <= 10_000, "event {}: {held} held", e.seq);
    }
    assert!(rounds() < 20 || wins.iter().all(|w| *w > 0), "every process won some rounds: {wins:?}");
    Ok(())
}

#[test]
fn four_processes_executing_one_grant_run_it_once() -> R {
    let db = Database::new("xexecute")?;
    let rt = parent(&db, "execute")?;
    let witness_dir = TempDir::new("execute")?;
    let witness = witness_dir.0.join("runs.txt");
    let mut hosts = start_hosts(&db, "execute", Some(&witness))?;
    let began = Instant::now();
    let mut ids: Vec<(String, u32)> = Vec::new();
    for round in 0..rounds() {
        let p = rt.propose(&ProposalRequest::new(order(900), format!("x{round}"), "we are low"))?;
        rt.approve(&p.id, "Max", &p.fingerprint, ApproveMode::Once)?;
        let answers = round_trip(&mut hosts, round, &format!("go {round} {}", p.id))?;
        let ran: Vec<usize> = answers.iter().filter(|(_, a)| a["ran"] == true).map(|(n, _)| *n).collect();
        assert_eq!(ran.len(), 1, "round {round}: exactly one run of {}: {answers:?}", p.id);
        for (n, a) in &answers {
            // The others were refused (the grant consumed) or came after the run and got its outcome; none
            // failed in the store.
            assert_ne!(a["why"]["store"], true, "round {round}, host {n}: {a}");
            if a["ran"] != true && a.get("why").is_some() {
                assert!(["claimed", "status", "not_approved"].contains(&refusal_of(a)), "round {round}, host {n}: {a}");
            }
        }
        // A host that came after the run was told the stored outcome, and that answer is audited too.
        let late = answers.iter().filter(|(_, a)| a["ran"] != true && a.get("why").is_none()).count() as u32;
        ids.push((p.id, late));
    }
    eprintln!("execute race: {} rounds of {HOSTS} processes in {:.1?}", rounds(), began.elapsed());
    drop(hosts);
    // What ran, counted outside the store: each grant once.
    let text = std::fs::read_to_string(&witness)?;
    let mut runs: BTreeMap<&str, u32> = BTreeMap::new();
    for line in text.lines() {
        *runs.entry(line.split(' ').next().unwrap_or_default()).or_default() += 1;
    }
    assert_eq!(runs.len(), ids.len(), "every grant ran");
    assert!(
        runs.values().all(|n| *n == 1),
        "a grant ran twice: {:?}",
        runs.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    // The store: every proposal done, each settled once.
    let b = rt.budget("Supplies")?;
    assert_eq!((b.reserved, b.spent), (0, 900 * rounds()));
    let done = rt.proposals()?.iter().filter(|p| p.status == Status::Done).count();
    assert_eq!(done as u64, rounds());
    // And its chain: per grant one admission (`sending`, the grant consumed) and one outcome (`done`).
    let chain = verified_chain(&rt)?;
    let mut executions: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for e in chain.iter().filter(|e| e.event.kind == EventKind::Execution) {
        *executions.entry((e.event.proposal.as_deref().unwrap_or_default(), e.event.outcome.as_str())).or_default() +=
            1;
    }
    // A late host's answer is one more `done` event, which the host was told as `ran: false`.
    for (id, late) in &ids {
        assert_eq!(
            (executions.get(&(id.as_str(), "sending")), executions.get(&(id.as_str(), "done"))),
            (Some(&1), Some(&(1 + late))),
            "{id}"
        );
    }
    let late: u32 = ids.iter().map(|(_, late)| late).sum();
    assert_eq!(executions.values().sum::<u32>(), 2 * ids.len() as u32 + late, "{executions:?}");
    Ok(())
}

#[test]
fn four_processes_superseding_under_one_key_never_leave_two_live() -> R {
    let db = Database::new("xsupersede")?;
    let rt = parent(&db, "supersede")?;
    let mut hosts = start_hosts(&db, "supersede", None)?;
    let began = Instant::now();
    let mut approvals_refused = 0;
    for round in 0..rounds() {
        let answers = round_trip(&mut hosts, round, &format!("go {round}"))?;
        for (n, a) in &answers {
            assert!(a["id"].is_string(), "round {round}, host {n}: every propose makes a proposal: {a}");
            if a["approved"]["refusal"].is_string() {
                // Another host's proposal superseded this one between its propose and its approval.
                assert_eq!(a["approved"]["refusal"], "status", "round {round}, host {n}: {a}");
                approvals_refused += 1;
            }
        }
    }
    eprintln!(
        "supersede race: {} rounds of {HOSTS} processes in {:.1?}, {approvals_refused} approvals came after a supersession",
        rounds(),
        began.elapsed()
    );
    // Each key: exactly one live proposal at the end, the others superseded.
    let proposals = rt.proposals()?;
    assert_eq!(proposals.len() as u64, HOSTS as u64 * rounds());
    let mut key_of = BTreeMap::new();
    let mut live: BTreeMap<&str, u32> = BTreeMap::new();
    for p in &proposals {
        key_of.insert(p.id.as_str(), p.operation_key.as_str());
        match p.status {
            Status::Waiting | Status::Granted => *live.entry(&p.operation_key).or_default() += 1,
            Status::Superseded => {}
            other => panic!("{} is {other}", p.id),
        }
    }
    assert_eq!(live.len() as u64, rounds());
    assert!(live.values().all(|n| *n == 1), "{live:?}");
    // In commit order, never two live under one key at any step.
    let chain = verified_chain(&rt)?;
    let mut now_live: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in &chain {
        let Some(id) = e.event.proposal.as_deref() else { continue };
        let Some(key) = key_of.get(id) else { continue };
        let set = now_live.entry(key).or_default();
        match e.event.outcome.as_str() {
            "waiting" | "granted" => {
                set.insert(id);
            }
            "refused" => {}
            _ => {
                set.remove(id);
            }
        }
        assert!(set.len() <= 1, "event {}: two live under `{key}`: {set:?}", e.seq);
    }
    // Every granted live one holds its amount, nothing else is held.
    let held: u64 = proposals
        .iter()
        .filter(|p| p.status == Status::Granted)
        .map(|p| p.arguments["amount"].as_u64().unwrap_or_default())
        .sum();
    assert_eq!(rt.budget("Supplies")?.reserved, held);
    Ok(())
}

fn markdown_rule() -> NewRule {
    NewRule {
        agent: "Clerkbot".into(),
        tool: "MarkDown".into(),
        skill: Some("ClearStock".into()),
        work_for: WorkFor::Person("Sam".into()),
        by: "Lucy".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: None,
        via: Vec::new(),
    }
}

fn nanos(v: &Value) -> u128 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or_default()
}

#[test]
fn four_processes_using_a_standing_rule_while_it_is_revoked_never_use_it_after() -> R {
    let db = Database::new("xrevoke")?;
    let rt = parent(&db, "revoke")?;
    let mut hosts = start_hosts(&db, "revoke", None)?;
    let began = Instant::now();
    let (mut before, mut after) = (0u64, 0u64);
    let mut reported: BTreeMap<String, u64> = BTreeMap::new();
    for round in 0..rounds() {
        let rule = rt.allow_alone(&markdown_rule())?;
        let revoker = (round % HOSTS as u64) as usize;
        for h in hosts.iter_mut() {
            let role = if h.n == revoker { "revoke" } else { "use" };
            h.send(&format!("go {round} {role} {}", rule.id))?;
        }
        let answers: Vec<(usize, Value)> =
            hosts.iter().map(|h| Ok((h.n, h.answer(round)?))).collect::<Result<_, E>>()?;
        let revocation = &answers[revoker].1;
        assert_eq!(revocation["revoked"], true, "round {round}: {revocation}");
        let (revoke_start, revoke_end) = (nanos(&revocation["start"]), nanos(&revocation["end"]));
        for (n, a) in answers.iter().filter(|(n, _)| *n != revoker) {
            let uses = a["uses"].as_array().ok_or("no uses")?;
            for u in uses {
                let (start, end) = (nanos(&u["start"]), nanos(&u["end"]));
                if u["admitted"] == true {
                    assert_eq!(u["rule"], rule.id.as_str(), "round {round}, host {n}: admitted by the rule: {u}");
                    *reported.entry(rule.id.clone()).or_default() += 1;
                    // A use that began after the revocation had committed (by the machine's clock) was not
                    // admitted.
                    assert!(
                        start <= revoke_end,
                        "round {round}, host {n}: used after the revocation: {u} {revocation}"
                    );
                    before += 1;
                } else {
                    assert_eq!(u["why"]["refusal"], "must_propose", "round {round}, host {n}: {u}");
                    // A use that ended before the revocation began was admitted.
                    assert!(end >= revoke_start, "round {round}, host {n}: refused before the revocation: {u}");
                    after += 1;
                }
            }
        }
    }
    eprintln!(
        "revoke race: {} rounds of {HOSTS} processes in {:.1?}: {before} uses admitted before the revocation, {after} refused after",
        rounds(),
        began.elapsed()
    );
    // In commit order: every admission under a rule comes before the rule's revocation, and the store
    // counts the uses the hosts saw.
    let chain = verified_chain(&rt)?;
    let mut revoked_at: BTreeMap<&str, u64> = BTreeMap::new();
    let mut admitted: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &chain {
        let Some(rule) = e.event.rule.as_deref() else { continue };
        match (e.event.kind, e.event.outcome.as_str()) {
            (EventKind::RuleRevoked, _) => {
                revoked_at.insert(rule, e.seq);
            }
            (EventKind::Execution, "admitted") => {
                assert!(!revoked_at.contains_key(rule), "event {}: a use of `{rule}` after its revocation", e.seq);
                *admitted.entry(rule).or_default() += 1;
            }
            _ => {}
        }
    }
    assert_eq!(revoked_at.len() as u64, rounds());
    let reported: BTreeMap<&str, u64> = reported.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(admitted, reported, "the store's admissions are the uses the hosts were told of");
    assert!(rounds() < 20 || (before > 0 && after > 0), "both sides of the race happened: {before} / {after}");
    Ok(())
}

/// Backends of `db` waiting for a lock, with their query.
fn lock_waiters(db: &Database) -> Result<Vec<String>, E> {
    let mut admin = db.admin.connect(NoTls)?;
    let rows = admin.query(
        "SELECT query FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' ORDER BY pid",
        &[&db.name],
    )?;
    Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
}

fn wait_for(what: &str, mut done: impl FnMut() -> Result<bool, E>) -> R {
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while !done()? {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

#[test]
fn a_host_killed_mid_transaction_leaves_nothing_half_written_and_the_others_go_on() -> R {
    let db = Database::new("xkill")?;
    let rt = parent(&db, "ceiling")?;
    fill_to_the_last_order(&rt)?;
    let mut hosts = start_hosts(&db, "ceiling", None)?;
    for h in hosts.iter_mut() {
        h.send("prep 0")?;
    }
    for h in &hosts {
        h.expect("prepped 0")?;
    }
    let before = rt.audit_head()?.ok_or("no chain")?;
    // Hold host 0's approval inside its transaction: the test locks the audit table (reads pass, appends
    // wait), so the approval has checked the budget, reserved and granted — all written, none committed —
    // when it waits to append its events.
    let mut blocker = db.config.connect(NoTls)?;
    let mut block = blocker.transaction()?;
    block.batch_execute("LOCK TABLE audit IN EXCLUSIVE MODE")?;
    hosts[0].send("go 0")?;
    wait_for("host 0's append to wait", || Ok(lock_waiters(&db)?.iter().any(|q| q.contains("INSERT INTO audit"))))?;
    // The others wait for its transaction (the advisory lock).
    for h in hosts.iter_mut().skip(1) {
        h.send("go 0")?;
    }
    wait_for("the others to wait", || Ok(lock_waiters(&db)?.len() == HOSTS))?;
    hosts[0].kill()?;
    block.commit()?;
    // Host 0's transaction never committed: of the other three, one gets the room, as if host 0 never came.
    let answers: Vec<(usize, Value)> =
        hosts.iter().skip(1).map(|h| Ok((h.n, h.answer(0)?))).collect::<Result<_, E>>()?;
    let winners: Vec<&(usize, Value)> = answers.iter().filter(|(_, a)| a["granted"] == true).collect();
    assert_eq!(winners.len(), 1, "{answers:?}");
    assert!(answers.iter().all(|(_, a)| a["granted"] == true || refusal_of(a) == "budget"), "{answers:?}");
    let b = rt.budget("Supplies")?;
    assert_eq!((b.reserved, b.spent), (9_900, 0));
    let waiting: Vec<_> = rt
        .proposals()?
        .into_iter()
        .filter(|p| p.operation_key == "c0-h0")
        .map(|p| (p.status, p.grant.is_some()))
        .collect();
    assert_eq!(waiting, [(Status::Waiting, false)], "host 0's approval left nothing");
    let chain = verified_chain(&rt)?;
    let grants_since: Vec<_> = chain
        .iter()
        .filter(|e| e.seq > before.seq && e.event.kind == EventKind::Grant)
        .map(|e| &e.event.proposal)
        .collect();
    assert_eq!(grants_since.len(), 1, "only the winner's grant was recorded: {grants_since:?}");
    rt.revoke(winners[0].1["id"].as_str().unwrap_or_default(), "Max", "the next round")?;

    // The others go on; then one of them is killed at a random moment of a round, and the last two go on.
    let kill_round = 10 + u64::from(std::process::id() % 20);
    for round in 1..60 {
        if round == kill_round {
            for h in hosts.iter_mut().filter(|h| h.alive) {
                h.send(&format!("prep {round}"))?;
            }
            for h in hosts.iter().filter(|h| h.alive) {
                h.expect(&format!("prepped {round}"))?;
            }
            for h in hosts.iter_mut().filter(|h| h.alive) {
                h.send(&format!("go {round}"))?;
            }
            std::thread::sleep(Duration::from_micros(u64::from(std::process::id() % 3_000)));
            hosts[1].kill()?;
            let mut answers: Vec<(usize, Value)> =
                hosts.iter().filter(|h| h.alive).map(|h| Ok((h.n, h.answer(round)?))).collect::<Result<_, E>>()?;
            // Host 1 may have won before it died: the store says.
            let its = rt
                .proposals()?
                .into_iter()
                .find(|p| p.operation_key == format!("c{round}-h1"))
                .ok_or("host 1 had proposed")?;
            answers.push((1, serde_json::json!({"id": its.id, "granted": its.status == Status::Granted})));
            check_ceiling_round(&rt, round, &answers)?;
            continue;
        }
        let answers = ceiling_round(&mut hosts, round)?;
        check_ceiling_round(&rt, round, &answers)?;
    }
    let b = rt.budget("Supplies")?;
    assert_eq!((b.reserved, b.spent), (9_000, 0));
    verified_chain(&rt)?;
    Ok(())
}

/// One winner, the budget at 9,900, and the winner revoked for the next round.
fn check_ceiling_round(rt: &Runtime, round: u64, answers: &[(usize, Value)]) -> R {
    let winners: Vec<&(usize, Value)> = answers.iter().filter(|(_, a)| a["granted"] == true).collect();
    assert_eq!(winners.len(), 1, "round {round}: {answers:?}");
    let b = rt.budget("Supplies")?;
    assert_eq!((b.reserved, b.spent), (9_900, 0), "round {round}");
    rt.revoke(winners[0].1["id"].as_str().unwrap_or_default(), "Max", "the next round")?;
    Ok(())
}

/// A temporary folder, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Result<TempDir, E> {
        let dir = std::env::temp_dir().join(format!("permits-races-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
