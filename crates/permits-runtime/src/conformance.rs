//! The store conformance suite (issue #22): every store-level test is one generic function, run against
//! the memory store, the SQLite store (feature `sqlite`) and the PostgreSQL store (feature `postgres`) by
//! [`conformance!`], so the stores cannot drift. What only one store has (SQLite's migrations from old
//! files, PostgreSQL's lost connections) is tested beside that store.
//!
//! The PostgreSQL tests need a server: `PERMITS_TEST_POSTGRES` names a database whose user may create
//! databases (each test makes its own and drops it). `.ci/postgres start` starts a throwaway one and prints
//! the variable; without it those tests fail, saying so — they never skip.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use crate::audit::{AuditEvent, ChainedEvent, EventKind};
use crate::error::StoreError;
use crate::records::{
    Basis, BudgetRecord, Decider, Grant, HostClaim, Lease, Proposal, Reservation, RuleRevocation, Run, StandingRule,
    Status, TableInstall, Task, WorkFor,
};
use crate::store::{MemoryStore, Store, Transaction};
use crate::table::{Level, Route};

/// A place stores are opened on: a fresh, empty one per test, and as many stores on it as a test opens
/// (each another host on the same data).
pub(crate) trait Backend: Sized {
    /// The store.
    type S: Store + Send + Sync + 'static;
    /// A new, empty place for the test `name`.
    fn fresh(name: &str) -> Self;
    /// A store on this place (a second call: another store on the same data, as a second process has).
    fn open(&self) -> Self::S;
}

/// The memory store, shared: "opening" it again is another handle on the same state.
pub(crate) struct Memory(Arc<MemoryStore>);

/// A handle on a shared [`MemoryStore`].
pub(crate) struct SharedMemory(Arc<MemoryStore>);

impl Store for SharedMemory {
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.0.begin()
    }
}

impl Backend for Memory {
    type S = SharedMemory;
    fn fresh(_: &str) -> Memory {
        Memory(Arc::new(MemoryStore::new()))
    }
    fn open(&self) -> SharedMemory {
        SharedMemory(self.0.clone())
    }
}

/// A temporary directory, removed when dropped (even when a test fails).
#[cfg(feature = "sqlite")]
pub(crate) struct TempDir(pub(crate) std::path::PathBuf);

#[cfg(feature = "sqlite")]
impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        use std::sync::atomic::AtomicU32;
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("permits-store-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temporary directory");
        TempDir(dir)
    }

    pub(crate) fn db(&self) -> std::path::PathBuf {
        self.0.join("permits.db")
    }
}

#[cfg(feature = "sqlite")]
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An SQLite file in a temporary directory.
#[cfg(feature = "sqlite")]
pub(crate) struct Sqlite(TempDir);

#[cfg(feature = "sqlite")]
impl Backend for Sqlite {
    type S = crate::SqliteStore;
    fn fresh(name: &str) -> Sqlite {
        Sqlite(TempDir::new(name))
    }
    fn open(&self) -> crate::SqliteStore {
        crate::SqliteStore::open(&self.0.db()).expect("open the SQLite store")
    }
}

/// An SQLite file in a temporary directory, opened with the group commit on ([`crate::Synchronous::Group`]):
/// the store answers the same with it.
#[cfg(feature = "sqlite")]
pub(crate) struct SqliteGroup(TempDir);

#[cfg(feature = "sqlite")]
impl Backend for SqliteGroup {
    type S = crate::SqliteStore;
    fn fresh(name: &str) -> SqliteGroup {
        SqliteGroup(TempDir::new(name))
    }
    fn open(&self) -> crate::SqliteStore {
        let store = crate::SqliteStore::open(&self.0.db()).expect("open the SQLite store");
        let mode = store.set_synchronous(crate::Synchronous::Group).expect("set the group commit");
        assert_eq!(mode, crate::Synchronous::Group);
        store
    }
}

/// A database of its own on the server `PERMITS_TEST_POSTGRES` names, dropped when the test ends.
#[cfg(feature = "postgres")]
pub(crate) struct TestDatabase {
    pub(crate) admin: ::postgres::Config,
    /// The database's name.
    pub(crate) name: String,
    /// The configuration of the test's database.
    pub(crate) config: ::postgres::Config,
}

/// The variable that names the test server, and what to do when it is missing.
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES_VARIABLE: &str = "PERMITS_TEST_POSTGRES";

#[cfg(feature = "postgres")]
impl TestDatabase {
    pub(crate) fn new(test: &str) -> TestDatabase {
        use std::sync::atomic::AtomicU32;
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let url = std::env::var(POSTGRES_VARIABLE).unwrap_or_else(|_| {
            panic!(
                "the PostgreSQL store's tests need a server: set {POSTGRES_VARIABLE} to a URL whose user may create \
                 databases, e.g. run `eval \"$(.ci/postgres start)\"` at the repository's root (a throwaway cluster; \
                 `.ci/postgres stop \"$PERMITS_PG_DIR\"` ends it)"
            )
        });
        let admin: ::postgres::Config = url.parse().unwrap_or_else(|e| panic!("{POSTGRES_VARIABLE}: {e}"));
        let short: String = test.chars().filter(char::is_ascii_alphanumeric).take(30).collect();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("permits_{}_{n}_{}", std::process::id(), short.to_ascii_lowercase());
        let mut client =
            admin.connect(::postgres::NoTls).unwrap_or_else(|e| panic!("{POSTGRES_VARIABLE} ({url}): {e}"));
        client.batch_execute(&format!("CREATE DATABASE {name}")).expect("create the test database");
        let mut config = admin.clone();
        config.dbname(&name);
        TestDatabase { admin, name, config }
    }
}

#[cfg(feature = "postgres")]
impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = self.admin.connect(::postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

/// A database of its own on the test server.
#[cfg(feature = "postgres")]
pub(crate) struct Postgres(pub(crate) TestDatabase);

#[cfg(feature = "postgres")]
impl Backend for Postgres {
    type S = crate::PostgresStore;
    fn fresh(name: &str) -> Postgres {
        Postgres(TestDatabase::new(name))
    }
    fn open(&self) -> crate::PostgresStore {
        crate::PostgresStore::with_config(self.0.config.clone()).expect("connect the PostgreSQL store")
    }
}

/// [`Transaction::proposal_page`]: every store answers exactly what [`ProposalQuery::matches`] says over
/// all its proposals, newest first, a page at a time, with the total — on a mix of routes, requesters,
/// statuses, agents, tasks and expiries, and after a proposal changes (its columns follow its record).
pub(crate) fn pages_of_proposals_are_what_the_query_matches<B: Backend>() {
    use crate::store::{DeciderQuery, ProposalQuery};
    let place = B::fresh("pages");
    let store = place.open();
    let routes = [
        Route::Requester,
        Route::Person("Noor".into()),
        Route::Role("Finance".into()),
        Route::Queue("Payments".into()),
    ];
    let requesters = [Some("Mia"), Some("Noor"), None];
    let mut all = Vec::new();
    let mut tx = store.begin().expect("begin");
    for n in 1..=48u64 {
        let mut p = proposal(n, None, None);
        p.decider.route = routes[(n % 4) as usize].clone();
        p.requester = requesters[(n % 3) as usize].map(str::to_string);
        p.agent = if n % 5 == 0 { "Clerk".into() } else { "Buyer".into() };
        p.operation_key = format!("order-{}", n % 7);
        p.expires_at = 1_700_000_000 + 10 * n;
        if n % 6 == 0 {
            p.status = Status::Rejected;
            p.decided_by = Some(if n % 12 == 0 { "Noor".into() } else { "Ravi".into() });
        }
        tx.put_proposal(&p).expect("put");
        all.push(p);
    }
    tx.commit().expect("commit");
    // A change of a record moves it between lists.
    let mut tx = store.begin().expect("begin");
    let mut moved = all[8].clone();
    moved.status = Status::Granted;
    moved.decided_by = Some("Noor".into());
    tx.put_proposal(&moved).expect("replace");
    tx.commit().expect("commit");
    all[8] = moved;

    let noor = DeciderQuery {
        direct: vec!["person:Noor".into(), "requester:Noor".into(), "sponsored:Clerk".into()],
        shared: vec!["role:Finance".into(), "queue:Payments".into()],
        person: "Noor".into(),
        own_requests: false,
    };
    let noor_and_hers = DeciderQuery { own_requests: true, ..noor.clone() };
    let queries = [
        ProposalQuery::default(),
        ProposalQuery { status: Some(Status::Waiting), ..ProposalQuery::default() },
        ProposalQuery { status: Some(Status::Waiting), deciders: Some(noor.clone()), ..ProposalQuery::default() },
        ProposalQuery {
            status: Some(Status::Waiting),
            deciders: Some(noor),
            open_at: Some(1_700_000_200),
            ..ProposalQuery::default()
        },
        ProposalQuery { operation_key: Some("order-3".into()), ..ProposalQuery::default() },
        ProposalQuery { agents: Some(vec!["Clerk".into()]), ..ProposalQuery::default() },
        ProposalQuery { involving: Some("Noor".into()), ..ProposalQuery::default() },
        ProposalQuery { status: Some(Status::Expired), ..ProposalQuery::default() },
        ProposalQuery { status: Some(Status::Waiting), deciders: Some(noor_and_hers), ..ProposalQuery::default() },
    ];
    let mut tx = store.begin().expect("begin");
    for query in &queries {
        let mut expected: Vec<String> = all.iter().filter(|p| query.matches(p)).map(|p| p.id.clone()).collect();
        expected.reverse();
        let mut read = Vec::new();
        let mut offset = 0;
        loop {
            let page = tx.proposal_page(query, offset, 5).expect("a page");
            assert_eq!(page.total, expected.len(), "{query:?}");
            assert!(page.proposals.len() <= 5);
            if page.proposals.is_empty() {
                break;
            }
            offset += page.proposals.len();
            read.extend(page.proposals.into_iter().map(|p| p.id));
        }
        assert_eq!(read, expected, "{query:?}");
        // The counts by decider add up to the total, each what the query matches with that key.
        let counts = tx.proposal_counts(query).expect("counts");
        let mut by_key: std::collections::BTreeMap<(String, bool), usize> = std::collections::BTreeMap::new();
        let person = query.deciders.as_ref().map(|d| d.person.as_str());
        for p in all.iter().filter(|p| query.matches(p)) {
            let own = person.is_some() && p.requester.as_deref() == person;
            *by_key.entry((crate::store::decider_key(p), own)).or_default() += 1;
        }
        let want: Vec<crate::store::ProposalCount> = by_key
            .into_iter()
            .map(|((decider, own), count)| crate::store::ProposalCount { decider, own, count })
            .collect();
        assert_eq!(counts, want, "{query:?}");
    }
    // With her own requests, Noor's list gains the ones routed to her role that she asked for.
    let gained: Vec<&Proposal> = all.iter().filter(|p| queries[8].matches(p) && !queries[2].matches(p)).collect();
    assert!(!gained.is_empty());
    assert!(gained.iter().all(|p| p.requester.as_deref() == Some("Noor")));
    // The queries are not vacuous: each of the person's kinds of route is on Noor's list, and her own
    // request routed to her role is not.
    let q = &queries[2];
    let listed: Vec<&Proposal> = all.iter().filter(|p| q.matches(p)).collect();
    for key in ["person:Noor", "requester:Noor", "sponsored:Clerk", "role:Finance", "queue:Payments"] {
        assert!(listed.iter().any(|p| crate::store::decider_key(p) == key), "{key}");
    }
    assert!(all.iter().any(|p| p.status == Status::Waiting
        && crate::store::decider_key(p) == "role:Finance"
        && p.requester.as_deref() == Some("Noor")
        && !q.matches(p)));
    assert_eq!(tx.proposal_page(&queries[0], 0, 3).expect("a page").proposals.len(), 3);
    assert!(tx.proposal_page(&queries[0], 100, 3).expect("past the end").proposals.is_empty());
}

// ---------------------------------------------------------------------------------------------------------
// Records.

pub(crate) fn proposal(n: u64, subject: Option<&str>, grant: Option<Grant>) -> Proposal {
    Proposal {
        id: format!("P-{n}"),
        operation_key: "order-1".into(),
        agent: "Buyer".into(),
        skill: "Restock".into(),
        tool: "PlaceOrder".into(),
        label: "Place an order".into(),
        arguments: json!({"supplier": "acme", "amount": 4500 + n}),
        shown: vec![],
        covered_version: None,
        destination: Some("https://acme.example/orders".into()),
        why: "the shelf is empty".into(),
        evidence: vec![],
        requester: Some("Mia".into()),
        decider: Decider { route: Route::Requester, persons: vec!["Mia".into()] },
        level: Level::Propose,
        entry_digest: "e".repeat(64),
        mode: Some("Plan".into()),
        via: Vec::new(),
        definition_digest: "d".repeat(64),
        subject: subject.map(str::to_string),
        fingerprint: format!("{n:064}"),
        fingerprint_format: 2,
        claim: None,
        instruction_version: Some("prompts-3".into()),
        created_at: 1_700_000_000 + n,
        expires_at: 1_700_600_000,
        status: if grant.is_some() { Status::Granted } else { Status::Waiting },
        grant,
        ran_as: None,
        receipt: None,
        reason: None,
        decided_by: None,
        host_claim: None,
    }
}

pub(crate) fn grant(basis: Basis) -> Grant {
    Grant { approver: Some("Noor".into()), basis, granted_at: 1_700_000_100, expires_at: 1_700_086_500 }
}

pub(crate) fn rule(n: u64) -> StandingRule {
    StandingRule {
        id: format!("R-{n}"),
        agent: "Buyer".into(),
        tool: "PlaceOrder".into(),
        skill: Some("Restock".into()),
        work_for: WorkFor::Person("Mia".into()),
        by: "Noor".into(),
        definition_digest: "d".repeat(64),
        covered: [("Restock".to_string(), "e".repeat(64))].into_iter().collect(),
        scope: crate::records::Scope::these(&json!({"sku": "acme", "amount": 4_502})),
        expires_at: Some(1_800_000_000),
        created_at: 1_700_000_000,
        uses: n,
        revoked: None,
        mode: Some("Plan".into()),
        via: Vec::new(),
        task: Some("order-1".into()),
    }
}

pub(crate) fn budget() -> BudgetRecord {
    BudgetRecord { name: "Purchases".into(), installed_ceiling: 100_000, spent: 2_500 }
}

pub(crate) fn reservation(holder: &str, amount: u64) -> Reservation {
    Reservation { holder: holder.into(), budget: "Purchases".into(), amount, created_at: 1_700_000_200, task: None }
}

pub(crate) fn run(n: u64, token: &str) -> Run {
    Run {
        id: format!("A-{n}"),
        operation_key: "order-1".into(),
        agent: "Buyer".into(),
        skill: "Restock".into(),
        tool: "PlaceOrder".into(),
        arguments: json!({"supplier": "acme", "amount": 300}),
        requester: Some("Mia".into()),
        via: Vec::new(),
        standing_rule: None,
        amount: Some(300),
        status: Status::Granted,
        token: token.into(),
        host_claim: HostClaim {
            fence: None,
            runs_as: "Mia".into(),
            claimed_at: 1_700_000_000,
            confirmed_at: None,
            table_digest: "t".repeat(64),
        },
        receipt: None,
        reason: None,
        created_at: 1_700_000_000,
    }
}

fn event(n: u64) -> AuditEvent {
    AuditEvent {
        at: 1_700_000_000 + n,
        kind: EventKind::Proposal,
        who: Some("Buyer".into()),
        agent: "Buyer".into(),
        skill: "Restock".into(),
        tool: "PlaceOrder".into(),
        proposal: Some(format!("P-{n}")),
        fingerprint: Some(format!("{n:064}")),
        rule: None,
        outcome: "propose".into(),
        reason: None,
        authorized_by: None,
    }
}

fn task(key: &str) -> Task {
    Task {
        key: key.into(),
        root_agent: "Buyer".into(),
        root_skill: "Restock".into(),
        person: Some("Mia".into()),
        mode: None,
        bound_at: 1_700_000_000,
        ended_at: None,
    }
}

fn install(seq: u64, digest: char) -> TableInstall {
    TableInstall {
        seq,
        table_digest: digest.to_string().repeat(64),
        serial: Some(seq),
        key: None,
        installed_at: 1_700_000_000 + seq,
        forced_by: None,
    }
}

/// Writes proposals, a rule, a budget and reservations, and commits.
pub(crate) fn fill(store: &impl Store) {
    let mut tx = store.begin().expect("begin");
    tx.put_proposal(&proposal(1, Some("\"acme\""), None)).expect("put");
    tx.put_proposal(&proposal(2, Some("\"acme\""), Some(grant(Basis::Operator)))).expect("put");
    tx.put_proposal(&proposal(3, None, None)).expect("put");
    tx.put_rule(&rule(1)).expect("put rule");
    tx.put_budget(&budget()).expect("put budget");
    tx.put_reservation(&reservation("P-2", 4_502)).expect("put reservation");
    tx.put_reservation(&reservation("A-1", 300)).expect("put reservation");
    tx.commit().expect("commit");
}

/// Checks everything [`fill`] wrote, as a new transaction reads it.
pub(crate) fn check_filled(store: &impl Store) {
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.proposal("P-2").expect("read"), Some(proposal(2, Some("\"acme\""), Some(grant(Basis::Operator)))));
    assert_eq!(tx.proposal("P-9").expect("read"), None);
    let ids: Vec<String> = tx.proposals().expect("read").into_iter().map(|p| p.id).collect();
    assert_eq!(ids, ["P-1", "P-2", "P-3"]);
    let by_fp = tx.proposal_by_fingerprint("order-1", &format!("{:064}", 3)).expect("read");
    assert_eq!(by_fp.map(|p| p.id), Some("P-3".to_string()));
    assert_eq!(tx.proposal_by_fingerprint("order-2", &format!("{:064}", 3)).expect("read"), None);
    let same: Vec<String> = tx
        .proposals_for_subject("order-1", "PlaceOrder", "\"acme\"")
        .expect("read")
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(same, ["P-1", "P-2"]);
    assert!(tx.proposals_for_subject("order-1", "PlaceOrder", "\"other\"").expect("read").is_empty());
    assert!(tx.proposals_for_subject("order-1", "Refund", "\"acme\"").expect("read").is_empty());
    assert_eq!(tx.rules().expect("read"), vec![rule(1)]);
    assert_eq!(tx.budget("Purchases").expect("read"), Some(budget()));
    assert_eq!(tx.budget("Travel").expect("read"), None);
    assert_eq!(tx.reservation("P-2").expect("read"), Some(reservation("P-2", 4_502)));
    assert_eq!(tx.reservation("P-1").expect("read"), None);
    assert_eq!(tx.reserved_total("Purchases").expect("sum"), 4_802);
    assert_eq!(tx.reserved_total("Travel").expect("sum"), 0);
}

// ---------------------------------------------------------------------------------------------------------
// The tests, one generic function each.

pub(crate) fn records_round_trip<B: Backend>() {
    let place = B::fresh("round-trip");
    let store = place.open();
    fill(&store);
    check_filled(&store);
    // Another store on the same data (another host) reads the same.
    check_filled(&place.open());
}

pub(crate) fn replacing_keeps_the_slot_and_updates_keys<B: Backend>() {
    let place = B::fresh("replace");
    let store = place.open();
    fill(&store);
    let mut tx = store.begin().expect("begin");
    // P-1 is replaced: its subject changes, and it stays first.
    let mut p1 = proposal(1, Some("\"globex\""), Some(grant(Basis::Automatic)));
    p1.status = Status::Superseded;
    tx.put_proposal(&p1).expect("put");
    let all = tx.proposals().expect("read");
    assert_eq!(all.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["P-1", "P-2", "P-3"]);
    assert_eq!(all[0], p1);
    let acme: Vec<String> = tx
        .proposals_for_subject("order-1", "PlaceOrder", "\"acme\"")
        .expect("read")
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(acme, ["P-2"]);
    let mut r1 = rule(7);
    r1.id = "R-1".into();
    r1.revoked = Some(RuleRevocation { by: "Noor".into(), why: "too broad".into(), at: 1_700_000_900 });
    tx.put_rule(&rule(2)).expect("put rule");
    tx.put_rule(&r1).expect("put rule");
    assert_eq!(tx.rules().expect("read"), vec![r1.clone(), rule(2)]);
    tx.put_budget(&BudgetRecord { spent: 7_000, ..budget() }).expect("put budget");
    assert_eq!(tx.budget("Purchases").expect("read").map(|b| b.spent), Some(7_000));
    tx.put_reservation(&reservation("P-2", 10)).expect("put reservation");
    tx.remove_reservation("A-1").expect("remove");
    tx.remove_reservation("A-404").expect("removing nothing is fine");
    assert_eq!(tx.reserved_total("Purchases").expect("sum"), 10);
    tx.commit().expect("commit");
    let reopened = place.open();
    let mut tx = reopened.begin().expect("begin");
    assert_eq!(tx.rules().expect("read"), vec![r1, rule(2)]);
    assert_eq!(tx.proposal("P-1").expect("read"), Some(p1));
    assert_eq!(tx.reserved_total("Purchases").expect("sum"), 10);
}

pub(crate) fn sequences_count_from_one<B: Backend>() {
    let place = B::fresh("sequences");
    let store = place.open();
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.next_number("proposal").expect("next"), 1);
    assert_eq!(tx.next_number("proposal").expect("next"), 2);
    assert_eq!(tx.next_number("rule").expect("next"), 1);
    tx.commit().expect("commit");
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.next_number("proposal").expect("next"), 3);
}

pub(crate) fn dropping_a_transaction_rolls_it_back<B: Backend>() {
    let place = B::fresh("rollback");
    {
        let store = place.open();
        let mut tx = store.begin().expect("begin");
        assert_eq!(tx.next_number("proposal").expect("next"), 1);
        tx.put_proposal(&proposal(1, None, None)).expect("put");
        tx.put_rule(&rule(1)).expect("put rule");
        tx.put_budget(&budget()).expect("put budget");
        tx.put_reservation(&reservation("P-1", 5)).expect("put reservation");
        tx.put_run(&run(1, "tok-1")).expect("put run");
        tx.put_task(&task("order-1")).expect("put task");
        tx.append_audit(&ChainedEvent::after(None, event(1))).expect("append");
        tx.put_installed_table(&install(1, 'a')).expect("install");
        assert_eq!(tx.proposals().expect("read").len(), 1, "a transaction reads its own writes");
        assert_eq!(tx.audit_events().expect("read").len(), 1, "a transaction reads its own writes");
        drop(tx);
        // The same store, right after the drop, sees nothing.
        let mut tx = store.begin().expect("begin");
        assert!(tx.proposals().expect("read").is_empty());
    }
    let store = place.open();
    let mut tx = store.begin().expect("begin");
    assert!(tx.proposals().expect("read").is_empty());
    assert!(tx.rules().expect("read").is_empty());
    assert_eq!(tx.budget("Purchases").expect("read"), None);
    assert_eq!(tx.reservation("P-1").expect("read"), None);
    assert_eq!(tx.reserved_total("Purchases").expect("sum"), 0);
    assert_eq!(tx.run("A-1").expect("read"), None);
    assert_eq!(tx.task("order-1").expect("read"), None);
    assert_eq!(tx.audit_head().expect("read"), None);
    assert_eq!(tx.current_table().expect("read"), None);
    assert_eq!(tx.next_number("proposal").expect("next"), 1, "the rolled-back number is handed out again");
}

pub(crate) fn everything_survives_closing_and_reopening<B: Backend>() {
    let place = B::fresh("reopen");
    {
        let store = place.open();
        let mut tx = store.begin().expect("begin");
        for _ in 0..3 {
            tx.next_number("proposal").expect("next");
        }
        tx.commit().expect("commit");
        fill(&store);
    }
    let store = place.open();
    check_filled(&store);
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.next_number("proposal").expect("next"), 4);
    // A proposal written after reopening comes after the old ones.
    tx.put_proposal(&proposal(4, None, None)).expect("put");
    tx.commit().expect("commit");
    drop(store);
    let store = place.open();
    let mut tx = store.begin().expect("begin");
    let ids: Vec<String> = tx.proposals().expect("read").into_iter().map(|p| p.id).collect();
    assert_eq!(ids, ["P-1", "P-2", "P-3", "P-4"]);
    assert_eq!(tx.next_number("proposal").expect("next"), 5);
}

pub(crate) fn runs_are_found_by_id_and_token<B: Backend>() {
    let place = B::fresh("runs");
    {
        let store = place.open();
        let mut tx = store.begin().expect("begin");
        tx.put_run(&run(1, "tok-1")).expect("put");
        tx.put_run(&run(2, "tok-2")).expect("put");
        let mut done = run(1, "tok-1");
        done.status = Status::Done;
        done.receipt = Some(json!("ok"));
        tx.put_run(&done).expect("replace");
        tx.commit().expect("commit");
    }
    let store = place.open();
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.run("A-1").expect("read").map(|r| r.status), Some(Status::Done));
    assert_eq!(tx.run_by_token("tok-2").expect("read"), Some(run(2, "tok-2")));
    assert_eq!(tx.run_by_token("tok-3").expect("read"), None);
    assert_eq!(tx.run("A-3").expect("read"), None);
    // A token is bound to one run.
    let err = tx.put_run(&run(3, "tok-1")).expect_err("a token used twice");
    assert!(err.0.starts_with("cannot store the run `A-3`"), "{err}");
}

pub(crate) fn the_audit_chain_tables_and_tasks_are_kept_in_order<B: Backend>() {
    let place = B::fresh("chain");
    let store = place.open();
    let mut tx = store.begin().expect("begin");
    let first = ChainedEvent::after(None, event(1));
    tx.append_audit(&first).expect("append");
    assert_eq!(tx.audit_head().expect("head"), Some(first.head()));
    let second = ChainedEvent::after(Some(&first.head()), event(2));
    tx.append_audit(&second).expect("append");
    tx.put_installed_table(&install(1, 'a')).expect("install");
    tx.put_installed_table(&install(2, 'b')).expect("install");
    tx.put_task(&task("order-1")).expect("task");
    tx.commit().expect("commit");
    let reopened = place.open();
    let mut tx = reopened.begin().expect("begin");
    assert_eq!(tx.audit_events().expect("read"), vec![first.clone(), second.clone()]);
    assert_eq!(tx.audit_head().expect("head"), Some(second.head()));
    assert_eq!(tx.installed_tables().expect("read"), vec![install(1, 'a'), install(2, 'b')]);
    assert_eq!(tx.current_table().expect("read"), Some(install(2, 'b')));
    assert_eq!(tx.task("order-1").expect("read"), Some(task("order-1")));
    assert_eq!(tx.task("order-2").expect("read"), None);
    let ended = Task { ended_at: Some(1_700_000_500), ..task("order-1") };
    tx.put_task(&ended).expect("replace");
    assert_eq!(tx.task("order-1").expect("read"), Some(ended));
    // An event at a place the chain already has is refused, not written twice.
    assert!(tx.append_audit(&first).is_err(), "an audit event's place is taken once");
}

pub(crate) fn two_stores_on_one_place_serialize<B: Backend>() {
    let place = B::fresh("two");
    let first = place.open();
    let second = place.open();
    let mut tx = first.begin().expect("begin");
    assert_eq!(tx.next_number("proposal").expect("next"), 1);
    tx.put_proposal(&proposal(1, None, None)).expect("put");
    let began = AtomicBool::new(false);
    let (ready, starting) = mpsc::channel();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            ready.send(()).expect("signal");
            let mut tx = second.begin().expect("the second waits, then begins");
            began.store(true, Ordering::SeqCst);
            let seen = tx.proposal("P-1").expect("read");
            let next = tx.next_number("proposal").expect("next");
            tx.commit().expect("commit");
            (seen, next)
        });
        starting.recv().expect("the waiter started");
        std::thread::sleep(Duration::from_millis(300));
        assert!(!began.load(Ordering::SeqCst), "the second transaction began while the first was open");
        tx.commit().expect("commit the first");
        let (seen, next) = waiter.join().expect("the waiter finished");
        assert_eq!(seen, Some(proposal(1, None, None)), "the second sees the first's committed write");
        assert_eq!(next, 2);
    });
    let mut tx = first.begin().expect("begin");
    assert_eq!(tx.next_number("proposal").expect("next"), 3, "the first sees the second's write");
}

/// Many threads, each with its own store, each adding one to a counter in a read-then-write transaction:
/// lost updates would show as a smaller total.
pub(crate) fn read_then_write_transactions_lose_no_update<B: Backend>() {
    let place = B::fresh("counter");
    place
        .open()
        .begin()
        .and_then(|mut tx| tx.put_budget(&BudgetRecord { spent: 0, ..budget() }).and(tx.commit()))
        .expect("the counter");
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 50;
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            let store = place.open();
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    let mut tx = store.begin().expect("begin");
                    let record = tx.budget("Purchases").expect("read").expect("the counter");
                    tx.put_budget(&BudgetRecord { spent: record.spent + 1, ..record }).expect("write");
                    tx.commit().expect("commit");
                }
            });
        }
    });
    let reopened = place.open();
    let mut tx = reopened.begin().expect("begin");
    assert_eq!(tx.budget("Purchases").expect("read").map(|b| b.spent), Some(THREADS * ROUNDS));
}

pub(crate) fn a_store_is_a_runtime_store<B: Backend>() {
    let place = B::fresh("runtime");
    // The store behind a runtime: a call is proposed, and another store on the same data sees it, with its
    // event in the chain and its task bound, written in the same transaction.
    let p = crate::tests::propose_on_store(place.open()).expect("propose");
    let reopened = place.open();
    let mut tx = reopened.begin().expect("begin");
    assert_eq!(tx.proposal(&p.id).expect("read").map(|q| q.fingerprint), Some(p.fingerprint));
    let events = tx.audit_events().expect("the chain");
    assert!(events.iter().any(|e| e.event.proposal.as_deref() == Some(p.id.as_str())), "{events:?}");
    assert_eq!(tx.task("job-1").expect("read").map(|t| t.root_agent), Some("Estimator".to_string()));
    assert_eq!(tx.installed_tables().expect("read").len(), 1, "the runtime installed its table");
}

/// Reservations tagged by task and what each task spent (spec §6 "Per task", schema version 5): sums by
/// budget and task, replacing, rollback, and another store on the same data reading them back.
pub(crate) fn reservations_and_spent_are_kept_per_task<B: Backend>() {
    let place = B::fresh("per-task");
    let store = place.open();
    let in_task =
        |holder: &str, amount: u64, task: &str| Reservation { task: Some(task.into()), ..reservation(holder, amount) };
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.task_spent("Purchases", "T3").expect("read"), 0, "a task that never spent holds nothing");
    tx.put_reservation(&in_task("P-1", 700, "T3")).expect("put");
    tx.put_reservation(&in_task("P-2", 300, "T3")).expect("put");
    tx.put_reservation(&in_task("P-3", 800, "T4")).expect("put");
    tx.put_reservation(&reservation("A-1", 50)).expect("put: no task");
    tx.put_reservation(&Reservation { budget: "Travel".into(), ..in_task("P-4", 5, "T3") }).expect("put");
    tx.put_task_spent("Purchases", "T3", 1_500).expect("put");
    tx.put_task_spent("Purchases", "T3", 1_600).expect("replace");
    tx.put_task_spent("Travel", "T3", 7).expect("put");
    tx.commit().expect("commit");

    let other = place.open();
    let mut tx = other.begin().expect("begin");
    assert_eq!(tx.reservation("P-1").expect("read"), Some(in_task("P-1", 700, "T3")));
    assert_eq!(tx.reservation("A-1").expect("read"), Some(reservation("A-1", 50)));
    assert_eq!(tx.reserved_for_task("Purchases", "T3").expect("sum"), 1_000);
    assert_eq!(tx.reserved_for_task("Purchases", "T4").expect("sum"), 800);
    assert_eq!(tx.reserved_for_task("Purchases", "T5").expect("sum"), 0);
    assert_eq!(tx.reserved_for_task("Travel", "T3").expect("sum"), 5);
    assert_eq!(tx.reserved_total("Purchases").expect("sum"), 1_850);
    assert_eq!(tx.task_spent("Purchases", "T3").expect("read"), 1_600);
    assert_eq!(tx.task_spent("Travel", "T3").expect("read"), 7);
    assert_eq!(tx.task_spent("Purchases", "T4").expect("read"), 0);
    // Moving a reservation to another task moves its amount.
    tx.put_reservation(&in_task("P-2", 300, "T4")).expect("replace");
    assert_eq!(tx.reserved_for_task("Purchases", "T3").expect("sum"), 700);
    assert_eq!(tx.reserved_for_task("Purchases", "T4").expect("sum"), 1_100);
    drop(tx);

    // A dropped transaction changes nothing.
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.reserved_for_task("Purchases", "T4").expect("sum"), 800, "the replacement was rolled back");
    tx.put_task_spent("Purchases", "T4", 99).expect("put");
    tx.remove_reservation("P-1").expect("remove");
    drop(tx);
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.task_spent("Purchases", "T4").expect("read"), 0);
    assert_eq!(tx.reserved_for_task("Purchases", "T3").expect("sum"), 1_000);
}

/// A runtime on the store keeps a budget's `per_task` cap (spec §6): an operator grant that would take a
/// task over it is refused with the figures, the same amount in another task is granted, an automatic
/// grant counts toward the cap, and a settlement moves the task's reservation to its spent.
pub(crate) fn a_per_task_cap_holds_on_every_store<B: Backend>() {
    let place = B::fresh("per-task-runtime");
    let (steps, job_1, job_2, total) = crate::tests::per_task_on_store(place.open()).expect("the spends");
    assert_eq!(
        steps,
        [
            "P-1 granted".to_string(),
            "refused (Budget): budget `Parts`, task `job-1`: per task: 600 of 1000 cents held (0 spent, 600 reserved); 500 cents more would exceed it (400 left)".into(),
            "P-3 granted".into(),
            "P-4 granted".into(),
            "P-1 done".into(),
            "refused (Budget): budget `Parts`, task `job-1`: per task: 700 of 1000 cents held (600 spent, 100 reserved); 500 cents more would exceed it (300 left)".into(),
        ]
    );
    assert_eq!(job_1, (600, 100), "job-1: 600 spent, the automatic grant of 100 reserved");
    assert_eq!(job_2, (0, 500));
    assert_eq!(total, (600, 600));
}

/// Leases are kept, replaced and rolled back like every record (schema version 7).
pub(crate) fn leases_are_kept_and_replaced<B: Backend>() {
    let place = B::fresh("leases");
    let store = place.open();
    let lease = |holder: &str, fence: u64| Lease {
        key: "job-1".into(),
        holder: holder.into(),
        fence,
        taken_at: 1_000,
        expires_at: 1_030,
    };
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.lease("job-1").expect("read"), None);
    tx.put_lease(&lease("host-a", 1)).expect("put");
    tx.commit().expect("commit");
    let other = place.open();
    let mut tx = other.begin().expect("begin");
    assert_eq!(tx.lease("job-1").expect("read"), Some(lease("host-a", 1)));
    tx.put_lease(&lease("host-b", 2)).expect("replace");
    drop(tx);
    let mut tx = store.begin().expect("begin");
    assert_eq!(tx.lease("job-1").expect("read"), Some(lease("host-a", 1)), "the replacement was rolled back");
    tx.put_lease(&lease("host-b", 2)).expect("replace");
    tx.commit().expect("commit");
    let mut tx = other.begin().expect("begin");
    assert_eq!(tx.lease("job-1").expect("read"), Some(lease("host-b", 2)));
    assert_eq!(tx.lease("job-2").expect("read"), None);
}

/// Two hosts on one place, one task, leases taken in turn (spec §5a "Leases"): the fenced host can neither
/// execute nor settle nor renew, the tool runs once, and a released task takes calls without a lease.
pub(crate) fn a_taken_over_lease_fences_the_old_holder<B: Backend>() {
    let place = B::fresh("fencing");
    let (steps, runs) = crate::tests::leases_on_stores(place.open(), place.open()).expect("the steps");
    assert_eq!(
        steps,
        [
            "`host-a` holds `job-1` with fence 1 until 1000030".to_string(),
            "refused (NotHolder): task `job-1` is held by `host-a` until 1000030: take it after that, or when `host-a` releases it".into(),
            "P-1 waiting".into(),
            "P-1 granted".into(),
            "refused (NotHolder): task `job-1` is held by `host-a` until 1000030: only its holder acts under it (take the task, or wait)".into(),
            "`host-b` holds `job-1` with fence 2 until 1000061".into(),
            "refused (NotHolder): this host no longer holds the task `job-1`: `host-b` holds it now (fence 2); `host-a` may not act under it".into(),
            "refused (NotHolder): this host no longer holds the task `job-1`: `host-b` holds it now (fence 2); `host-a` may not act under it".into(),
            "P-1 unknown".into(),
            "refused (NotHolder): this host no longer holds the task `job-1`: `host-b` holds it now (fence 2); `host-a` may not act under it".into(),
            "refused (NotHolder): task `job-1` is held by `host-b` until 1000061: only its holder acts under it (take the task, or wait)".into(),
            "spent 600".into(),
            "`host-b` holds `job-1` with fence 2 until 1000091".into(),
            "`host-b` holds `job-1` with fence 2 until 1000031".into(),
            "P-2 granted".into(),
            "refused (NotHolder): this host no longer holds the task `job-1`: `host-b` holds it now (fence 2); `host-a` may not act under it".into(),
        ]
    );
    assert_eq!(runs, 1, "the tool ran once, for the host that held the task");
}

/// A decide's event is committed ([`Transaction::commit_lazily`]) and read back by another store.
pub(crate) fn a_decide_is_committed<B: Backend>() {
    let place = B::fresh("decide");
    let decision = crate::tests::decide_on_store(place.open()).expect("decided");
    assert_eq!(decision.level, Level::Propose);
    let reopened = place.open();
    let mut tx = reopened.begin().expect("begin");
    let events = tx.audit_events().expect("the chain");
    assert_eq!(events.last().map(|e| (e.event.kind, e.event.outcome.as_str())), Some((EventKind::Decision, "propose")));
    let head = tx.audit_head().expect("the head");
    assert_eq!(crate::audit::verify_chain(&events, head.as_ref()), Ok(head.clone()), "the chain verifies");
}

/// Instantiates every test of the suite for a backend, in the module it is called in.
macro_rules! conformance {
    ($backend:ty) => {
        #[test]
        fn records_round_trip() {
            $crate::conformance::records_round_trip::<$backend>();
        }
        #[test]
        fn replacing_keeps_the_slot_and_updates_keys() {
            $crate::conformance::replacing_keeps_the_slot_and_updates_keys::<$backend>();
        }
        #[test]
        fn sequences_count_from_one() {
            $crate::conformance::sequences_count_from_one::<$backend>();
        }
        #[test]
        fn dropping_a_transaction_rolls_it_back() {
            $crate::conformance::dropping_a_transaction_rolls_it_back::<$backend>();
        }
        #[test]
        fn everything_survives_closing_and_reopening() {
            $crate::conformance::everything_survives_closing_and_reopening::<$backend>();
        }
        #[test]
        fn runs_are_found_by_id_and_token() {
            $crate::conformance::runs_are_found_by_id_and_token::<$backend>();
        }
        #[test]
        fn the_audit_chain_tables_and_tasks_are_kept_in_order() {
            $crate::conformance::the_audit_chain_tables_and_tasks_are_kept_in_order::<$backend>();
        }
        #[test]
        fn two_stores_on_one_place_serialize() {
            $crate::conformance::two_stores_on_one_place_serialize::<$backend>();
        }
        #[test]
        fn read_then_write_transactions_lose_no_update() {
            $crate::conformance::read_then_write_transactions_lose_no_update::<$backend>();
        }
        #[test]
        fn reservations_and_spent_are_kept_per_task() {
            $crate::conformance::reservations_and_spent_are_kept_per_task::<$backend>();
        }

        #[test]
        fn pages_of_proposals_are_what_the_query_matches() {
            $crate::conformance::pages_of_proposals_are_what_the_query_matches::<$backend>();
        }
        #[test]
        fn a_per_task_cap_holds_on_every_store() {
            $crate::conformance::a_per_task_cap_holds_on_every_store::<$backend>();
        }
        #[test]
        fn leases_are_kept_and_replaced() {
            $crate::conformance::leases_are_kept_and_replaced::<$backend>();
        }
        #[test]
        fn a_taken_over_lease_fences_the_old_holder() {
            $crate::conformance::a_taken_over_lease_fences_the_old_holder::<$backend>();
        }
        #[test]
        fn a_decide_is_committed() {
            $crate::conformance::a_decide_is_committed::<$backend>();
        }
        #[test]
        fn a_store_is_a_runtime_store() {
            $crate::conformance::a_store_is_a_runtime_store::<$backend>();
        }
    };
}

mod memory {
    conformance!(super::Memory);
}

#[cfg(feature = "sqlite")]
mod sqlite {
    conformance!(super::Sqlite);
}

#[cfg(feature = "sqlite")]
mod sqlite_group_commit {
    conformance!(super::SqliteGroup);
}

#[cfg(feature = "postgres")]
mod postgres {
    conformance!(super::Postgres);
}
