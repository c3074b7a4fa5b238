//! The durable store (spec §6 "The ledger is durable"): proposals, grants, standing rules and the budget
//! ledger in an embedded SQLite database, behind the same [`Store`] trait as the in-memory store.
//!
//! A [`SqliteStore`] owns one connection. Each [`Transaction`] is an SQLite `BEGIN IMMEDIATE … COMMIT`: it
//! takes the database's write lock when it begins, so two stores on one file (two processes, or two
//! runtimes in one process) serialize — the second `begin` waits (up to a busy timeout of ten seconds)
//! instead of failing, and then sees everything the first committed. Dropping a transaction without
//! committing rolls it back. The file is in WAL mode with `synchronous=NORMAL`: a commit survives the
//! process ending; the last commits may be lost only if the machine itself loses power or its operating
//! system crashes. [`SqliteStore::set_synchronous`] with [`Synchronous::Full`] or [`Synchronous::Group`]
//! syncs every commit before it returns instead; `Group` (what `permitd` does by default) lets the commits
//! of concurrent transactions share one sync (a group commit, below).
//!
//! # Group commit
//!
//! With [`Synchronous::Group`] SQLite runs at `synchronous=NORMAL` and the store syncs the write-ahead log
//! itself: a transaction's `COMMIT` appends its frames to the log (SQLite's own write, not yet synced), the
//! transaction is numbered and releases the connection, and its [`Transaction::commit`] returns only once a
//! sync of the log that *started after* that `COMMIT` has finished. The first waiter with nothing in flight
//! runs the sync (`fdatasync` of `FILE-wal` — its frames and its length — and `fsync` of its directory the
//! first time); the others wait on it, so
//! while one sync runs the next transactions commit and then share the next sync. What returns is exactly as
//! durable as with `FULL` (which is `NORMAL` plus a sync of the log at every commit: SQLite's checkpoints sync
//! the log before and the database after, in both). A failed sync is never retried — after a failed `fsync`
//! Linux may have dropped the unwritten pages and report success the next time — so it fails that commit
//! and every later one on this store: reopen the store (restart `permitd`) to go on.
//!
//! Lazy commits ([`Transaction::commit_lazily`]) are numbered like the others but return without waiting;
//! the store's background thread (started at the first) syncs a question's ([`Lazily::Question`]) at once
//! and a receipt's ([`Lazily::Receipt`]) once no commit has come for [`Lazily::QUIET_MILLIS`] (or after
//! [`Lazily::MAX_LAG_MILLIS`]) — in between, the next durable commit's sync covers it.
//! [`Transaction::commit_syncing`] numbers a durable commit, hands its sync to that thread at once and
//! returns a [`Syncing`] to wait on. With [`Checkpoints::WhenQuiet`] the same thread also checkpoints, on a
//! connection of its own, once the store is quiet ([`SqliteStore::set_checkpoints`]).
//!
//! # The schema (version 7, [`SqliteStore::SCHEMA_VERSION`])
//!
//! Records are kept as JSON text (their serde form) in a `record` column, next to the key columns the
//! lookups need. The version is SQLite's `PRAGMA user_version`.
//!
//! ```sql
//! CREATE TABLE sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
//! CREATE TABLE proposals (
//!     slot INTEGER PRIMARY KEY AUTOINCREMENT,  -- insertion order: "oldest first"
//!     id TEXT NOT NULL UNIQUE,
//!     operation_key TEXT NOT NULL,
//!     fingerprint TEXT NOT NULL,
//!     tool TEXT NOT NULL,
//!     subject TEXT,                            -- canonical JSON of the subject argument, or NULL
//!     record TEXT NOT NULL                     -- the Proposal, as JSON
//! );
//! CREATE INDEX proposals_by_fingerprint ON proposals (operation_key, fingerprint);
//! CREATE INDEX proposals_by_subject ON proposals (operation_key, tool, subject);
//! CREATE TABLE rules (slot INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, record TEXT NOT NULL);
//! CREATE TABLE budgets (name TEXT PRIMARY KEY, installed_ceiling INTEGER NOT NULL, spent INTEGER NOT NULL);
//! CREATE TABLE reservations (
//!     holder TEXT PRIMARY KEY, budget TEXT NOT NULL, amount INTEGER NOT NULL, created_at INTEGER NOT NULL
//! );
//! CREATE INDEX reservations_by_budget ON reservations (budget);
//! -- version 3:
//! CREATE TABLE tasks (key TEXT PRIMARY KEY, record TEXT NOT NULL);  -- the Task bound to an operation key
//! CREATE TABLE audit (                     -- the one audit chain of the store (spec §5a)
//!     seq INTEGER PRIMARY KEY,             -- 1, 2, …: written in the transaction of the change it records
//!     prev TEXT NOT NULL,                  -- the hash of the event before (64 zeros for the first)
//!     hash TEXT NOT NULL,                  -- SHA-256 of canonical {seq, prev, event}
//!     event TEXT NOT NULL                  -- the AuditEvent, as JSON
//! );
//! CREATE TABLE installed_tables (seq INTEGER PRIMARY KEY, record TEXT NOT NULL);  -- each TableInstall, in
//!                                          -- order; the last is the store's current table (spec §5a)
//! -- version 4:
//! CREATE TABLE runs (                      -- alone runs a host claimed (the execution protocol)
//!     slot INTEGER PRIMARY KEY AUTOINCREMENT,
//!     id TEXT NOT NULL UNIQUE,             -- A-n
//!     token TEXT NOT NULL UNIQUE,          -- the claim token
//!     record TEXT NOT NULL                 -- the Run, as JSON
//! );
//! -- version 5 (spec §6 "Per task"):
//! ALTER TABLE reservations ADD COLUMN task TEXT;  -- the operation key it is held for, or NULL
//! CREATE INDEX reservations_by_task ON reservations (budget, task);
//! CREATE TABLE task_spent (                -- what each task spent from each budget
//!     budget TEXT NOT NULL, task TEXT NOT NULL, spent INTEGER NOT NULL, PRIMARY KEY (budget, task)
//! );
//! -- version 6 (the inbox's lists, read a page at a time through an index):
//! ALTER TABLE proposals ADD COLUMN status TEXT;      -- the record's status
//! ALTER TABLE proposals ADD COLUMN decider TEXT;     -- `decider_key`: person:N, role:N, queue:N,
//!                                                    -- requester:N or sponsored:AGENT
//! ALTER TABLE proposals ADD COLUMN requester TEXT;   -- the person the work is for
//! ALTER TABLE proposals ADD COLUMN decided_by TEXT;  -- who decided it
//! ALTER TABLE proposals ADD COLUMN agent TEXT;
//! ALTER TABLE proposals ADD COLUMN expires_at INTEGER;
//! CREATE INDEX proposals_by_decider ON proposals (status, decider, slot, requester, expires_at);  -- covering
//! CREATE INDEX proposals_by_task ON proposals (operation_key, slot);
//! CREATE INDEX proposals_by_agent ON proposals (agent, slot);
//! CREATE INDEX proposals_by_requester ON proposals (requester, slot);
//! CREATE INDEX proposals_by_decided_by ON proposals (decided_by, slot);
//! DROP INDEX IF EXISTS proposals_by_status;  -- the expression index version 5 files may have
//! -- version 7 (spec §5a "Leases"):
//! CREATE TABLE leases (key TEXT PRIMARY KEY, record TEXT NOT NULL);  -- the Lease on an operation key
//! ```
//!
//! Amounts, times and sequence numbers are unsigned in the records and signed 64-bit integers in SQLite: a
//! value above `i64::MAX` cannot be stored (a [`StoreError`]), and a negative one read back is a corrupt
//! record.
//!
//! # Versions and migrations
//!
//! - **0**: an empty (new) file. Opening it creates the schema above at version 7.
//! - **1**: the schema from before approval bases existed ([`SqliteStore::SCHEMA_V1`]): the same tables and
//!   indexes, but a proposal's `grant` in the `record` JSON has no `basis` member.
//! - **2**: every grant has a `basis` (`operator`, `automatic` or `unknown`).
//! - **3**: the `tasks` table (spec §5a "Tasks"), the `audit` chain (§5a "Audit") and
//!   the `installed_tables` history (§5a "One current table per store"). Proposal records gain
//!   `fingerprint_format` and `instruction_version`; a record without them reads as format 1, which is
//!   `stale` when it is decided or executed (fingerprint format 2), and standing rules gain `scope` and
//!   `expires_at`, read as any arguments and no expiry when absent. Migration 2 → 3 only adds the table:
//!   the records need no rewrite.
//! - **4**: version 3 and the `runs` table (alone runs claimed by a host that runs the
//!   tool itself, with their claim token). A proposal's record may carry a `host_claim`; a record without
//!   one reads as not claimed by such a host. Migration 3 → 4 only adds the table.
//! - **5**: version 4, reservations tagged by task and the `task_spent` table (spec §6
//!   "Per task"). Migration 4 → 5 adds the column, the index and the table, and tags each reservation
//!   with the operation key of the proposal (or claimed alone run) that holds it; a reservation of an alone
//!   call that ran in-process has no record to trace and stays untagged (it counts in the budget's total,
//!   and toward its task's cap once that task's execution rechecks it). What was spent before version 5
//!   counts in the budget's total spent, not in any task's.
//! - **6**: version 5 and the proposals' list columns (`status`, `decider`,
//!   `requester`, `decided_by`, `agent`, `expires_at`) with their indexes, so the inbox's and the API's
//!   lists read one page through an index ([`Transaction::proposal_page`]). Migration 5 → 6 adds them,
//!   fills them from each record (a record that does not decode keeps them empty and is listed nowhere, as
//!   before) and drops version 5's expression index on the status.
//! - **7**: the current schema: version 6 and the `leases` table (spec §5a "Leases"). Migration 6 → 7 only
//!   adds the table.
//!
//! Migrations run in one transaction when the file is opened, each after the one before. Migration 1 → 2: every proposal record whose `grant` is
//! an object without `basis` gets `"basis": "unknown"` (spec §6: a record from before bases existed never
//! authorizes an execution), then `user_version` becomes 2 (3 after migration 2 → 3, 4 after 3 → 4). A corrupt record stops the migration, which is
//! rolled back, and the file stays at version 1. A file at a newer version than this runtime knows is
//! refused, and left untouched.
//!
//! # Errors
//!
//! Every failure — SQLite's (a locked database past the busy timeout, a full disk, a file that is not a
//! database), or a record that does not decode — is a [`StoreError`] with a lowercase message naming what
//! failed (`the stored proposal \`P-3\` is corrupt: …`). Nothing read from the database is trusted: a
//! corrupt record is an error, never a panic.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::audit::{AuditHead, ChainedEvent};
use super::error::StoreError;
use super::record_text::{HasId, decode, encode};
use super::records::{BudgetRecord, Lease, Proposal, Reservation, Run, StandingRule, Status, TableInstall, Task};
use super::store::{Lazily, ProposalCount, ProposalPage, ProposalQuery, Store, Syncing, Transaction};

/// What version 3 adds to the tables of versions 1 and 2 (a new file gets [`SqliteStore::SCHEMA_V1`] and
/// this; migration 2 → 3 runs this alone).
const SCHEMA_V3_ADDS: &str = "
CREATE TABLE tasks (key TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE audit (seq INTEGER PRIMARY KEY, prev TEXT NOT NULL, hash TEXT NOT NULL, event TEXT NOT NULL);
CREATE TABLE installed_tables (seq INTEGER PRIMARY KEY, record TEXT NOT NULL);
";

/// What version 4 adds: alone runs claimed by a host that runs the tool itself ([`crate::Run`]), found by
/// id or claim token (a new file gets it too; migration 3 → 4 runs it alone).
/// What version 6 adds: the proposals' list columns, written from the record by every `put_proposal`, and
/// their indexes (a new file gets them too; migration 5 → 6 adds them and fills them from the records).
const SCHEMA_V6_ADDS: &str = "
ALTER TABLE proposals ADD COLUMN status TEXT;
ALTER TABLE proposals ADD COLUMN decider TEXT;
ALTER TABLE proposals ADD COLUMN requester TEXT;
ALTER TABLE proposals ADD COLUMN decided_by TEXT;
ALTER TABLE proposals ADD COLUMN agent TEXT;
ALTER TABLE proposals ADD COLUMN expires_at INTEGER;
CREATE INDEX proposals_by_decider ON proposals (status, decider, slot, requester, expires_at);
CREATE INDEX proposals_by_task ON proposals (operation_key, slot);
CREATE INDEX proposals_by_agent ON proposals (agent, slot);
CREATE INDEX proposals_by_requester ON proposals (requester, slot);
CREATE INDEX proposals_by_decided_by ON proposals (decided_by, slot);
DROP INDEX IF EXISTS proposals_by_status;
";

/// What version 7 adds: task leases (spec §5a "Leases"; a new file gets it too, migration 6 → 7 runs it
/// alone).
const SCHEMA_V7_ADDS: &str = "
CREATE TABLE leases (key TEXT PRIMARY KEY, record TEXT NOT NULL);
";

const SCHEMA_V4_ADDS: &str = "
CREATE TABLE runs (
    slot INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    token TEXT NOT NULL UNIQUE,
    record TEXT NOT NULL
);
";

/// What version 5 adds: reservations tagged by task and what each task spent (spec §6 "Per task"); then
/// the reservations held before are tagged with their holder's operation key (a new file gets it too, and
/// the tagging finds nothing; migration 4 → 5 runs it alone).
const SCHEMA_V5_ADDS: &str = "
ALTER TABLE reservations ADD COLUMN task TEXT;
CREATE INDEX reservations_by_task ON reservations (budget, task);
CREATE TABLE task_spent (
    budget TEXT NOT NULL,
    task TEXT NOT NULL,
    spent INTEGER NOT NULL,
    PRIMARY KEY (budget, task)
);
UPDATE reservations SET task = (SELECT operation_key FROM proposals WHERE proposals.id = reservations.holder)
    WHERE task IS NULL;
UPDATE reservations SET task = (SELECT json_extract(record, '$.operation_key') FROM runs WHERE runs.id = reservations.holder)
    WHERE task IS NULL;
";

/// How long a `begin` (or an open that must migrate) waits for another connection's write transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The durable store: an SQLite database (spec §6 "The ledger is durable").
///
/// Each transaction is a `BEGIN IMMEDIATE … COMMIT`; several stores on one file (several processes)
/// serialize, a `begin` waiting up to ten seconds for another's transaction. Records are kept as JSON
/// beside the key columns their lookups need, in tables `sequences`, `proposals`, `rules`, `budgets`,
/// `reservations` and `runs`; the schema version is `PRAGMA user_version` ([`SqliteStore::SCHEMA_VERSION`]). A file
/// at version 1 ([`SqliteStore::SCHEMA_V1`], from before grants had a basis) is migrated when opened: its
/// grants get basis `unknown`, which never authorizes an execution; a file at version 2 gains the `runs`
/// table. A newer file is refused. The DDL and
/// every migration are described at the top of `src/runtime/sqlite.rs`.
///
/// Transactions hold the store's connection for their whole life, like [`super::MemoryStore`]'s: never begin
/// a second transaction, or call [`SqliteStore::schema_version`], on a thread that holds one.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    group: Arc<GroupSync>,
}

/// When SQLite syncs a commit to the disk (its `PRAGMA synchronous`), the ledger being in WAL mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synchronous {
    /// `FULL`: every commit is synced to the write-ahead log before it returns, so a commit survives the
    /// process ending, an operating-system crash and a power loss. One sync per transaction.
    Full,
    /// `NORMAL` (what [`SqliteStore::open`] sets): the log is synced only at checkpoints, so a commit survives
    /// the process ending (`SIGKILL` included), but an operating-system crash or a power loss may lose the
    /// last commits (never corrupting the file: it reopens at an earlier consistent state).
    Normal,
    /// A group commit (module documentation): SQLite at `NORMAL`, and every commit returns only after the
    /// store has synced the write-ahead log since — as durable as `Full`, but transactions that commit while
    /// a sync runs share the next one instead of each waiting for its own. For a store in memory, `Normal`.
    Group,
}

impl Synchronous {
    /// The setting's name: `FULL`, `NORMAL` or `GROUP` (the first two are SQLite's pragma values; `GROUP`
    /// runs the pragma at `NORMAL`).
    pub fn as_str(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
            Synchronous::Group => "GROUP",
        }
    }

    /// The value of SQLite's `PRAGMA synchronous` for this setting.
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal | Synchronous::Group => "NORMAL",
        }
    }
}

/// When the store checkpoints its write-ahead log — copies the pages committed to it back into the
/// database file and syncs both, so that the log can start again from its beginning
/// ([`SqliteStore::set_checkpoints`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpoints {
    /// SQLite's own: inside the commit that brings the log to [`Checkpoints::INLINE_PAGES`] pages (what
    /// [`SqliteStore::open`] sets). That commit waits for the checkpoint's two syncs.
    Inline,
    /// Off the commits' path: once the store has had no commit for [`Lazily::QUIET_MILLIS`] milliseconds
    /// after [`Checkpoints::QUIET_AFTER_COMMITS`] commits or more, the store's background thread checkpoints
    /// on a connection of its own (a passive checkpoint: it waits for no writer). Only under load without
    /// such a pause, when the log reaches [`Checkpoints::QUIET_CAP_PAGES`] pages, does a commit checkpoint
    /// inline, so the log stays bounded. For a host whose calls come with pauses between them and should
    /// never wait for a checkpoint (the MCP gateway's lane, issue #19).
    WhenQuiet,
}

impl Checkpoints {
    /// SQLite's default for [`Checkpoints::Inline`] (1,000 pages of 4 KiB).
    pub const INLINE_PAGES: i64 = 1000;
    /// The log's bound under [`Checkpoints::WhenQuiet`] (16,000 pages of 4 KiB: 64 MiB).
    pub const QUIET_CAP_PAGES: i64 = 16_000;
    /// How many commits since the last checkpoint make the next quiet moment checkpoint (64).
    pub const QUIET_AFTER_COMMITS: u64 = 64;
}

/// The group commit's shared state (module documentation): transactions are numbered as they commit, and a
/// commit returns once `synced` has reached its number.
#[derive(Debug)]
struct GroupSync {
    /// The write-ahead log and its directory; `None` for a database in memory.
    wal: Option<(PathBuf, PathBuf)>,
    /// Whether commits wait for a sync ([`Synchronous::Group`]); changed only under the connection's lock.
    on: AtomicBool,
    state: Mutex<GroupState>,
    done: Condvar,
    /// Wakes the background syncer ([`GroupSync::want`]): a lazy commit ([`Transaction::commit_lazily`]) wants
    /// a sync it does not wait for.
    wanted: Condvar,
    /// The background syncer was started (once, at the first lazy commit).
    syncer: AtomicBool,
}

#[derive(Debug, Default)]
struct GroupState {
    /// The number of the last transaction that committed.
    committed: u64,
    /// Every transaction up to this number is synced.
    synced: u64,
    /// A sync is running.
    syncing: bool,
    /// The directory has been synced once (the log's name in it is durable).
    dir_synced: bool,
    /// How many syncs ran.
    syncs: u64,
    /// A sync failed: this and every later commit fails (never retried, module documentation).
    failed: Option<String>,
    /// The highest number a [`Lazily::Question`] wants synced; the background syncer syncs up to it at once.
    wanted: u64,
    /// The highest number a [`Lazily::Receipt`] wants synced, and since when the oldest unsynced one has
    /// waited: the background syncer syncs up to it once no commit has come for [`Lazily::QUIET_MILLIS`] (or
    /// it has waited [`Lazily::MAX_LAG_MILLIS`]), unless a durable commit's sync covers it first.
    wanted_quietly: u64,
    wanted_quietly_since: Option<Instant>,
    /// When the last transaction committed (durably or lazily).
    last_commit: Option<Instant>,
    /// [`Lazily::QUIET_MILLIS`] and [`Lazily::MAX_LAG_MILLIS`] (other values in tests only).
    quiet: Duration,
    max_lag: Duration,
    /// [`Checkpoints::WhenQuiet`]: the background syncer checkpoints once the store is quiet.
    quiet_checkpoints: bool,
    /// The number of the last commit before the last checkpoint the background syncer ran.
    checkpointed: u64,
    /// The number of the last transaction that committed durably (not lazily): what a lazy commit may
    /// have read that matters — a lazy commit adds only a question's audit event.
    durable: u64,
}

impl GroupSync {
    fn new(wal: Option<(PathBuf, PathBuf)>) -> GroupSync {
        GroupSync {
            wal,
            on: AtomicBool::new(false),
            state: Mutex::new(GroupState {
                quiet: Duration::from_millis(Lazily::QUIET_MILLIS),
                max_lag: Duration::from_millis(Lazily::MAX_LAG_MILLIS),
                ..GroupState::default()
            }),
            done: Condvar::new(),
            wanted: Condvar::new(),
            syncer: AtomicBool::new(false),
        }
    }

    /// A lazy commit numbered `number` wants a sync it does not wait for: the background syncer (started
    /// here the first time) runs it — at once for a [`Lazily::Question`], so it is durable a sync later, not
    /// at the next commit that happens to wait; for a [`Lazily::Receipt`] once the store is quiet.
    fn want(self: &Arc<GroupSync>, number: u64, when: Lazily) {
        {
            let mut state = self.lock();
            match when {
                Lazily::Question => state.wanted = number,
                Lazily::Receipt => {
                    if state.wanted_quietly <= state.synced {
                        state.wanted_quietly_since = Some(Instant::now());
                    }
                    state.wanted_quietly = number;
                }
            }
        }
        self.ensure_syncer();
        self.wanted.notify_one();
    }

    /// Starts the background syncer, once.
    fn ensure_syncer(self: &Arc<GroupSync>) {
        if !self.syncer.swap(true, Ordering::SeqCst) {
            let weak = Arc::downgrade(self);
            let started = std::thread::Builder::new().name("permits-sqlite-sync".into()).spawn(move || syncer(weak));
            if started.is_err() {
                // No thread: the next commit that waits syncs it, as `Normal` would at a checkpoint.
                self.syncer.store(false, Ordering::SeqCst);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, GroupState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Numbers a transaction that has just committed; called while it still holds the connection, so the
    /// numbers follow the order of the commits.
    fn committed(&self) -> u64 {
        let mut state = self.lock();
        state.committed += 1;
        state.durable = state.committed;
        state.last_commit = Some(Instant::now());
        state.committed
    }

    /// Numbers a lazy commit ([`Transaction::commit_lazily`]), and returns the number of the last durable
    /// commit before it (what it must wait for: what it read that matters).
    fn committed_lazily(&self) -> (u64, u64) {
        let mut state = self.lock();
        state.committed += 1;
        state.last_commit = Some(Instant::now());
        (state.committed, state.durable)
    }

    /// The number of the last transaction that committed.
    fn last(&self) -> u64 {
        self.lock().committed
    }

    /// Returns once every transaction up to `number` is synced to the disk, running the sync itself when
    /// none is in flight.
    ///
    /// Errors: the sync failed, now or before (the transaction is committed, but may be lost to a power
    /// loss or an operating-system crash).
    fn wait(&self, number: u64) -> Result<(), StoreError> {
        let mut state = self.lock();
        loop {
            if let Some(why) = &state.failed {
                return Err(StoreError(format!(
                    "the change was committed but the ledger could not be synced to the disk ({why}): a power \
                     loss or an operating-system crash may lose it; reopen the store once the disk is sound"
                )));
            }
            if state.synced >= number {
                return Ok(());
            }
            if state.syncing {
                state = self.done.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // Everything numbered so far has committed, so its frames are in the log: one sync covers them.
            let target = state.committed;
            let dir = !state.dir_synced;
            state.syncing = true;
            drop(state);
            let synced = self.sync(dir);
            state = self.lock();
            state.syncing = false;
            match synced {
                Ok(()) => {
                    state.synced = state.synced.max(target);
                    state.dir_synced = true;
                    state.syncs += 1;
                }
                Err(why) => state.failed = Some(why),
            }
            self.done.notify_all();
        }
    }

    /// A passive checkpoint on a connection of the background syncer's own ([`Checkpoints::WhenQuiet`]),
    /// opened the first time: it copies what it can of the log into the database and syncs both, and never
    /// waits for the store's connection or a writer. A failure is left for the next one (or for SQLite's
    /// own checkpoint at the cap).
    fn checkpoint(&self, checkpointer: &mut Option<Connection>) {
        let Some((wal, _)) = &self.wal else { return };
        let Some(db) = wal.to_str().and_then(|w| w.strip_suffix("-wal")) else { return };
        if checkpointer.is_none() {
            let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
            *checkpointer = Connection::open_with_flags(db, flags).ok();
        }
        if let Some(conn) = checkpointer.as_ref() {
            let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        }
    }

    /// `fdatasync` of the log (and `fsync` of its directory when `dir`). A log that is not there has nothing unsynced:
    /// SQLite removes it only after a checkpoint, which syncs the database.
    fn sync(&self, dir: bool) -> Result<(), String> {
        let Some((wal, parent)) = &self.wal else { return Ok(()) };
        match std::fs::File::open(wal) {
            // `fdatasync`: the frames and the log's length, what reading them back needs (its times are not).
            Ok(file) => file.sync_data().map_err(|e| format!("`fdatasync` of `{}`: {e}", wal.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot open `{}` to sync it: {e}", wal.display())),
        }
        if dir {
            std::fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(|e| format!("`fsync` of the directory `{}`: {e}", parent.display()))?;
        }
        Ok(())
    }
}

impl SqliteStore {
    /// The schema version this runtime writes and understands (kept in `PRAGMA user_version`).
    pub const SCHEMA_VERSION: u32 = 7;

    /// The version-1 schema, kept so migrations can be tested and old files understood.
    ///
    /// A version-1 file is this DDL with `PRAGMA user_version = 1`. Its tables are those of version 2; what
    /// differs is the `record` JSON of proposals: a `grant` has `approver`, `granted_at` and `expires_at`, and no
    /// `basis`.
    pub const SCHEMA_V1: &str = "
CREATE TABLE sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE proposals (
    slot INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    operation_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    tool TEXT NOT NULL,
    subject TEXT,
    record TEXT NOT NULL
);
CREATE INDEX proposals_by_fingerprint ON proposals (operation_key, fingerprint);
CREATE INDEX proposals_by_subject ON proposals (operation_key, tool, subject);
CREATE TABLE rules (slot INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, record TEXT NOT NULL);
CREATE TABLE budgets (name TEXT PRIMARY KEY, installed_ceiling INTEGER NOT NULL, spent INTEGER NOT NULL);
CREATE TABLE reservations (
    holder TEXT PRIMARY KEY,
    budget TEXT NOT NULL,
    amount INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX reservations_by_budget ON reservations (budget);
";

    /// Opens the database at `path`, creating the file if there is none, and migrates it to
    /// [`SqliteStore::SCHEMA_VERSION`] (see the module documentation). The directory must exist.
    ///
    /// The connection uses WAL journaling, `synchronous=NORMAL`, foreign keys, and a busy timeout of ten
    /// seconds, so that several stores on one file wait for each other instead of failing.
    ///
    /// Errors: the file cannot be opened or is not an SQLite database; it is at a newer schema version
    /// than this runtime knows; a migration failed (it is rolled back, the file keeps its version).
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open(path)
            .map_err(|e| StoreError(format!("cannot open the database `{}`: {e}", path.display())))?;
        // SQLite names the log after the database as opened: `FILE-wal`, beside it.
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        SqliteStore::setup(conn, Some((PathBuf::from(wal), parent)))
    }

    /// A new, empty database in memory: lost when the store is dropped. For tests.
    ///
    /// Errors: SQLite's, when it cannot allocate the database.
    pub fn open_in_memory() -> Result<SqliteStore, StoreError> {
        let conn =
            Connection::open_in_memory().map_err(|e| StoreError(format!("cannot open a database in memory: {e}")))?;
        SqliteStore::setup(conn, None)
    }

    /// Sets when a commit is synced to the disk ([`Synchronous`]); it holds for this store's connection
    /// from the next transaction on. Answers the setting read back from SQLite (`Group` on a store in
    /// memory answers `Normal`: there is no file to sync).
    ///
    /// Errors: SQLite's, when the pragma cannot be set or read back, or reads back as something else.
    pub fn set_synchronous(&self, mode: Synchronous) -> Result<Synchronous, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.pragma_update(None, "synchronous", mode.pragma()).map_err(sql("set `synchronous`"))?;
        let now: i64 =
            conn.pragma_query_value(None, "synchronous", |row| row.get(0)).map_err(sql("read `synchronous`"))?;
        // SQLite answers a number: 1 is NORMAL, 2 FULL.
        let answer = match (mode, now) {
            (Synchronous::Normal, 1) | (Synchronous::Full, 2) => mode,
            (Synchronous::Group, 1) if self.group.wal.is_some() => mode,
            (Synchronous::Group, 1) => Synchronous::Normal,
            _ => {
                return Err(StoreError(format!(
                    "`synchronous` reads back as {now} after setting it to {}",
                    mode.pragma()
                )));
            }
        };
        // Under the connection's lock: no transaction is between its `COMMIT` and its number.
        self.group.on.store(answer == Synchronous::Group, Ordering::SeqCst);
        Ok(answer)
    }

    /// Sets when the store checkpoints its write-ahead log ([`Checkpoints`]), for this store's connection.
    /// Answers the setting in force: [`Checkpoints::WhenQuiet`] needs a file and [`Synchronous::Group`]
    /// (its background thread) and is [`Checkpoints::Inline`] otherwise.
    ///
    /// Errors: SQLite's, when the pragma cannot be set.
    pub fn set_checkpoints(&self, when: Checkpoints) -> Result<Checkpoints, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let quiet = when == Checkpoints::WhenQuiet && self.group.wal.is_some() && self.group.on.load(Ordering::SeqCst);
        let pages = if quiet { Checkpoints::QUIET_CAP_PAGES } else { Checkpoints::INLINE_PAGES };
        conn.pragma_update(None, "wal_autocheckpoint", pages).map_err(sql("set `wal_autocheckpoint`"))?;
        self.group.lock().quiet_checkpoints = quiet;
        if quiet {
            self.group.ensure_syncer();
            Ok(Checkpoints::WhenQuiet)
        } else {
            Ok(Checkpoints::Inline)
        }
    }

    /// The journal mode of the database (`wal` for a file, `memory` in memory).
    ///
    /// Errors: SQLite's, when it cannot be read.
    pub fn journal_mode(&self) -> Result<String, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.pragma_query_value(None, "journal_mode", |row| row.get(0)).map_err(sql("read the journal mode"))
    }

    /// The schema version of the database (`PRAGMA user_version`): [`SqliteStore::SCHEMA_VERSION`] once opened.
    ///
    /// Errors: SQLite's, when the version cannot be read.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        user_version(&conn)
    }

    /// The audit chain of the database at `path`, read without changing the file (opened read-only, not
    /// migrated): what `permitc audit verify` checks.
    ///
    /// Errors: the file cannot be opened read-only or is not a database; its schema version is before 3
    /// (it has no chain); an event does not decode.
    pub fn read_audit_chain(path: &Path) -> Result<Vec<ChainedEvent>, StoreError> {
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| StoreError(format!("cannot open the database `{}`: {e}", path.display())))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql("set the busy timeout"))?;
        let version = user_version(&conn)?;
        if version < 3 {
            return Err(StoreError(format!(
                "the database is at schema version {version}: it has no audit chain (version 3 and later do)"
            )));
        }
        check_known(version)?;
        let conn = Mutex::new(conn);
        let guard = conn.lock().unwrap_or_else(PoisonError::into_inner);
        let mut tx = SqliteTransaction { conn: guard, committed: true, group: None, changes_at_begin: 0 };
        tx.audit_events()
    }

    /// Every stored record that cannot be decoded, with why (spec §5a: one bad record affects only itself
    /// and is reported): lists skip it, and a lookup of it by id is an error. Empty for a sound file.
    ///
    /// Errors: SQLite's, when the tables cannot be read at all.
    pub fn unreadable_records(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for (kind, table, key) in [
            ("proposal", "proposals", "id"),
            ("standing rule", "rules", "id"),
            ("task", "tasks", "key"),
            ("lease", "leases", "key"),
        ] {
            let mut stmt = conn
                .prepare(&format!("SELECT {key}, record FROM {table} ORDER BY rowid"))
                .map_err(|e| StoreError(format!("cannot read the {kind}s: {e}")))?;
            let rows = stmt
                .query_map([], |row| {
                    Ok((row.get::<_, rusqlite::types::Value>(0)?, row.get::<_, rusqlite::types::Value>(1)?))
                })
                .map_err(|e| StoreError(format!("cannot read the {kind}s: {e}")))?;
            for row in rows {
                let (id, text) = row.map_err(|e| StoreError(format!("cannot read the {kind}s: {e}")))?;
                let (rusqlite::types::Value::Text(id), rusqlite::types::Value::Text(text)) = (&id, &text) else {
                    out.push(format!("a stored {kind} is corrupt: its columns are not text ({id:?})"));
                    continue;
                };
                let decoded = match kind {
                    "proposal" => decode::<Proposal>(kind, id, text).map(|_| ()),
                    "standing rule" => decode::<StandingRule>(kind, id, text).map(|_| ()),
                    "lease" => decode::<Lease>(kind, id, text).map(|_| ()),
                    _ => decode::<Task>(kind, id, text).map(|_| ()),
                };
                if let Err(e) = decoded {
                    out.push(e.0);
                }
            }
        }
        Ok(out)
    }

    fn setup(conn: Connection, wal: Option<(PathBuf, PathBuf)>) -> Result<SqliteStore, StoreError> {
        // The busy timeout comes first: switching to WAL and migrating may wait for another connection.
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql("set the busy timeout"))?;
        // A file this runtime does not understand is refused before anything (the journal mode included)
        // is changed in it.
        check_known(user_version(&conn)?)?;
        // An in-memory database answers `memory`: WAL applies to files only, and that is fine.
        conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get::<_, String>(0))
            .map_err(sql("switch the journal to WAL"))?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(sql("set `synchronous`"))?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sql("enable foreign keys"))?;
        migrate(&conn)?;
        Ok(SqliteStore { conn: Mutex::new(conn), group: Arc::new(GroupSync::new(wal)) })
    }
}

/// The background syncer of a group commit: syncs what lazy commits want, and ends once the store is gone
/// (it holds the state only while it syncs or waits, a tenth of a second at most).
fn syncer(weak: Weak<GroupSync>) {
    // The connection of [`Checkpoints::WhenQuiet`], opened at its first checkpoint.
    let mut checkpointer: Option<Connection> = None;
    loop {
        let Some(group) = weak.upgrade() else { return };
        let due = {
            let mut state = group.lock();
            match state.due(Instant::now()) {
                Due::After(wait) => {
                    state = group.wanted.wait_timeout(state, wait).map(|(s, _)| s).unwrap_or_else(|e| e.into_inner().0);
                    state.due(Instant::now())
                }
                due => due,
            }
        };
        match due {
            // A failure is kept in the state: the next commit that waits reports it.
            Due::Now(target) => drop(group.wait(target)),
            Due::Checkpoint(number) => {
                group.checkpoint(&mut checkpointer);
                let mut state = group.lock();
                state.checkpointed = state.checkpointed.max(number);
            }
            Due::After(_) => {}
        }
    }
}

/// What the background syncer does next ([`GroupState::due`]).
#[derive(Debug, PartialEq, Eq)]
enum Due {
    /// Sync every commit up to this number now.
    Now(u64),
    /// Checkpoint the log now (every commit up to this number is in it): [`Checkpoints::WhenQuiet`].
    Checkpoint(u64),
    /// Look again after this long (or when woken).
    After(Duration),
}

impl GroupState {
    /// What the background syncer should do at `now`: a [`Lazily::Question`] wants its sync at once; a
    /// [`Lazily::Receipt`] once no commit has come for [`Lazily::QUIET_MILLIS`], or after
    /// [`Lazily::MAX_LAG_MILLIS`] however busy the store. Otherwise it looks again within a tenth of a second
    /// (so that it notices the store is gone).
    fn due(&self, now: Instant) -> Due {
        let idle = Duration::from_millis(100);
        if self.failed.is_some() {
            return Due::After(idle);
        }
        if self.wanted > self.synced {
            return Due::Now(self.wanted.max(self.wanted_quietly));
        }
        if self.wanted_quietly > self.synced {
            let (quiet, lag) = (self.quiet, self.max_lag);
            let since_commit = self.last_commit.map_or(quiet, |t| now.saturating_duration_since(t));
            let waited = self.wanted_quietly_since.map_or(lag, |t| now.saturating_duration_since(t));
            if since_commit >= quiet || waited >= lag {
                return Due::Now(self.wanted_quietly);
            }
            return Due::After((quiet - since_commit).min(lag - waited));
        }
        if self.quiet_checkpoints && self.committed >= self.checkpointed + Checkpoints::QUIET_AFTER_COMMITS {
            let since_commit = self.last_commit.map_or(self.quiet, |t| now.saturating_duration_since(t));
            if since_commit >= self.quiet {
                return Due::Checkpoint(self.committed);
            }
            return Due::After((self.quiet - since_commit).min(idle));
        }
        Due::After(idle)
    }
}

impl Store for SqliteStore {
    fn begin(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        // A transaction is rolled back when dropped, even while unwinding; this only guards against a
        // connection left inside one some other way, whose writes must not leak into the next.
        if !conn.is_autocommit() {
            conn.execute_batch("ROLLBACK").map_err(sql("roll back an unfinished transaction"))?;
        }
        conn.execute_batch("BEGIN IMMEDIATE").map_err(sql("begin a transaction"))?;
        let changes_at_begin = conn.total_changes();
        Ok(Box::new(SqliteTransaction { conn, committed: false, group: Some(&self.group), changes_at_begin }))
    }
}

/// Brings the database to [`SqliteStore::SCHEMA_VERSION`], in one immediate transaction.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version = user_version(conn)?;
    if version == SqliteStore::SCHEMA_VERSION {
        return Ok(());
    }
    check_known(version)?;
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql("begin the migration"))?;
    match migrate_in_transaction(conn) {
        Ok(()) => conn.execute_batch("COMMIT").map_err(|e| {
            let _ = conn.execute_batch("ROLLBACK");
            StoreError(format!("cannot commit the migration: {e}"))
        }),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

fn migrate_in_transaction(conn: &Connection) -> Result<(), StoreError> {
    // Read again under the write lock: another connection may have migrated the file meanwhile.
    let mut version = user_version(conn)?;
    check_known(version)?;
    if version == 0 {
        conn.execute_batch(SqliteStore::SCHEMA_V1)
            .and_then(|()| conn.execute_batch(SCHEMA_V3_ADDS))
            .and_then(|()| conn.execute_batch(SCHEMA_V4_ADDS))
            .and_then(|()| conn.execute_batch(SCHEMA_V5_ADDS))
            .and_then(|()| conn.execute_batch(SCHEMA_V6_ADDS))
            .and_then(|()| conn.execute_batch(SCHEMA_V7_ADDS))
            .map_err(sql("create the schema (is this a database of another program?)"))?;
        version = SqliteStore::SCHEMA_VERSION;
    }
    if version == 1 {
        migrate_1_to_2(conn)?;
        version = 2;
    }
    if version == 2 {
        conn.execute_batch(SCHEMA_V3_ADDS).map_err(sql("add the tables of schema version 3"))?;
        version = 3;
    }
    if version == 3 {
        conn.execute_batch(SCHEMA_V4_ADDS).map_err(sql("add the table of runs (schema version 4)"))?;
        version = 4;
    }
    if version == 4 {
        conn.execute_batch(SCHEMA_V5_ADDS).map_err(sql("add the per-task ledger (schema version 5)"))?;
        version = 5;
    }
    if version == 5 {
        conn.execute_batch(SCHEMA_V6_ADDS).map_err(sql("add the proposals' list columns (schema version 6)"))?;
        fill_list_columns(conn)?;
        version = 6;
    }
    if version == 6 {
        conn.execute_batch(SCHEMA_V7_ADDS).map_err(sql("add the task leases (schema version 7)"))?;
        version = 7;
    }
    conn.pragma_update(None, "user_version", version).map_err(sql("record the schema version"))
}

fn check_known(version: u32) -> Result<(), StoreError> {
    if version > SqliteStore::SCHEMA_VERSION {
        return Err(StoreError(format!(
            "the database is at schema version {version}; this runtime knows up to {}",
            SqliteStore::SCHEMA_VERSION
        )));
    }
    Ok(())
}

/// Version 1 → 2: grants gained a basis; a grant recorded before bases existed gets basis `unknown`.
fn migrate_1_to_2(conn: &Connection) -> Result<(), StoreError> {
    let mut select =
        conn.prepare("SELECT id, record FROM proposals ORDER BY slot").map_err(sql("read the proposals"))?;
    let rows = select
        .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))
        .map_err(sql("read the proposals"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql("read the proposals"))?;
    let mut update =
        conn.prepare("UPDATE proposals SET record = ?2 WHERE id = ?1").map_err(sql("update a proposal"))?;
    for (id, text) in rows {
        let mut record: Value = serde_json::from_str(&text)
            .map_err(|e| StoreError(format!("the stored proposal `{id}` is corrupt: {e}")))?;
        let Some(grant) = record.get_mut("grant").and_then(Value::as_object_mut) else { continue };
        if grant.contains_key("basis") {
            continue;
        }
        grant.insert("basis".to_string(), Value::String("unknown".to_string()));
        let text = serde_json::to_string(&record)
            .map_err(|e| StoreError(format!("cannot encode the proposal `{id}`: {e}")))?;
        update
            .execute(params![id, text])
            .map_err(|e| StoreError(format!("cannot migrate the proposal `{id}`: {e}")))?;
    }
    Ok(())
}

/// Version 5 → 6: the list columns of every proposal, from its record. A record that does not decode keeps
/// them empty (it is listed nowhere, as before, and reported by [`SqliteStore::unreadable_records`]).
fn fill_list_columns(conn: &Connection) -> Result<(), StoreError> {
    let mut select =
        conn.prepare("SELECT id, record FROM proposals ORDER BY slot").map_err(sql("read the proposals"))?;
    let rows = select
        .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))
        .map_err(sql("read the proposals"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql("read the proposals"))?;
    let mut update = conn
        .prepare(
            "UPDATE proposals SET status = ?2, decider = ?3, requester = ?4, decided_by = ?5, agent = ?6,
                 expires_at = ?7 WHERE id = ?1",
        )
        .map_err(sql("update a proposal"))?;
    for (id, text) in rows {
        let Ok(p) = decode::<Proposal>("proposal", &id, &text) else { continue };
        let columns = ListColumns::of(&p)?;
        update
            .execute(params![
                id,
                columns.status,
                columns.decider,
                p.requester,
                p.decided_by,
                p.agent,
                columns.expires_at
            ])
            .map_err(|e| StoreError(format!("cannot migrate the proposal `{id}`: {e}")))?;
    }
    Ok(())
}

/// The list columns of a proposal that are not copied as they are.
struct ListColumns {
    status: &'static str,
    decider: String,
    expires_at: i64,
}

impl ListColumns {
    fn of(p: &Proposal) -> Result<ListColumns, StoreError> {
        Ok(ListColumns {
            status: p.status.as_str(),
            decider: crate::store::decider_key(p),
            expires_at: to_sql(p.expires_at, || format!("the expiry of proposal `{}`", p.id))?,
        })
    }
}

fn user_version(conn: &Connection) -> Result<u32, StoreError> {
    let version: i64 =
        conn.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(sql("read the schema version"))?;
    u32::try_from(version).map_err(|_| StoreError(format!("the database's schema version {version} is not valid")))
}

/// An open `BEGIN IMMEDIATE` transaction, holding the store's connection.
struct SqliteTransaction<'a> {
    conn: MutexGuard<'a, Connection>,
    committed: bool,
    /// The store's group commit (none for a read-only reader).
    group: Option<&'a Arc<GroupSync>>,
    /// SQLite's count of changed rows when the transaction began: unchanged at its end, it wrote nothing.
    changes_at_begin: u64,
}

impl Drop for SqliteTransaction<'_> {
    fn drop(&mut self) {
        if !self.committed && !self.conn.is_autocommit() {
            // Nothing to report to: a failed rollback leaves the connection in the transaction, and the
            // next `begin` rolls it back before starting.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

impl SqliteTransaction<'_> {
    /// The records (`id`, `record` columns) a query returns, decoded, in order.
    fn records<T: DeserializeOwned + HasId>(
        &self,
        kind: &str,
        query: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<T>, StoreError> {
        let mut stmt =
            self.conn.prepare_cached(query).map_err(|e| StoreError(format!("cannot read the {kind}s: {e}")))?;
        let rows = stmt
            .query_map(params, |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))
            .map_err(|e| StoreError(format!("cannot read the {kind}s: {e}")))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, text) = row.map_err(|e| StoreError(format!("cannot read the {kind}s: {e}")))?;
            out.push(decode(kind, &id, &text)?);
        }
        Ok(out)
    }

    /// The records a list query returns that decode, in order: one record that does not decode affects
    /// only itself (spec §5a "Bounded input, durable output"), and [`SqliteStore::unreadable_records`]
    /// reports it.
    fn readable_records<T: DeserializeOwned + HasId>(
        &self,
        kind: &str,
        query: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<T>, StoreError> {
        let mut stmt =
            self.conn.prepare_cached(query).map_err(|e| StoreError(format!("cannot read the {kind}s: {e}")))?;
        let rows = stmt
            .query_map(params, |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))
            .map_err(|e| StoreError(format!("cannot read the {kind}s: {e}")))?;
        let mut out = Vec::new();
        for row in rows {
            // A row whose columns are not text is as unreadable as a record that does not decode.
            let Ok((id, text)) = row else { continue };
            if let Ok(record) = decode(kind, &id, &text) {
                out.push(record);
            }
        }
        Ok(out)
    }

    /// The table installs a query (`seq`, `record` columns) returns, in order. The history decides which
    /// table is current, so a record that does not decode is an error, never skipped.
    fn table_installs(&self, query: &str) -> Result<Vec<TableInstall>, StoreError> {
        let mut stmt = self.conn.prepare_cached(query).map_err(sql("read the installed tables"))?;
        let rows = stmt
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))
            .map_err(sql("read the installed tables"))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, text) = row.map_err(sql("read the installed tables"))?;
            let install: TableInstall = serde_json::from_str(&text)
                .map_err(|e| StoreError(format!("the stored table install {seq} is corrupt: {e}")))?;
            out.push(install);
        }
        Ok(out)
    }

    /// The one record a query returns, if any.
    fn record<T: DeserializeOwned + HasId>(
        &self,
        kind: &str,
        query: &str,
        params: impl rusqlite::Params,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.records(kind, query, params)?.into_iter().next())
    }
}

/// An unsigned value as SQLite stores it.
/// The `WHERE` clause of a [`ProposalQuery`] on the list columns, with its values in order: what
/// [`ProposalQuery::matches`] says, through the indexes of schema version 6.
fn page_filter(query: &ProposalQuery) -> Result<(String, Vec<rusqlite::types::Value>), StoreError> {
    use rusqlite::types::Value as V;
    // Every record that decodes has its columns (a corrupt one keeps them empty, and is no proposal).
    let mut clauses = vec!["status IS NOT NULL".to_string()];
    let mut values = Vec::new();
    let list = |values: &mut Vec<V>, items: &[String]| {
        values.extend(items.iter().map(|i| V::Text(i.clone())));
        vec!["?"; items.len()].join(", ")
    };
    if let Some(status) = query.status {
        clauses.push("status = ?".into());
        values.push(V::Text(status.as_str().into()));
    }
    if let Some(key) = &query.operation_key {
        clauses.push("operation_key = ?".into());
        values.push(V::Text(key.clone()));
    }
    if let Some(agents) = &query.agents {
        let marks = list(&mut values, agents);
        clauses.push(format!("agent IN ({marks})"));
    }
    if let Some(d) = &query.deciders {
        // One `IN` over every key, so SQLite seeks `proposals_by_decider` once per key; the shared keys then
        // leave out the person's own requests.
        let keys: Vec<String> = d.direct.iter().chain(&d.shared).cloned().collect();
        let all = list(&mut values, &keys);
        let shared = list(&mut values, &d.shared);
        values.push(V::Text(d.person.clone()));
        let mut clause =
            format!("(decider IN ({all}) AND (decider NOT IN ({shared}) OR requester IS NULL OR requester <> ?))");
        if d.own_requests {
            values.push(V::Text(d.person.clone()));
            clause = format!("({clause} OR requester = ?)");
        }
        clauses.push(clause);
    }
    if let Some(person) = &query.involving {
        clauses.push("(requester = ? OR decided_by = ?)".into());
        values.push(V::Text(person.clone()));
        values.push(V::Text(person.clone()));
    }
    if let Some(t) = query.open_at {
        clauses.push("expires_at > ?".into());
        values.push(V::Integer(to_sql(t, || "the time of a list".to_string())?));
    }
    Ok((clauses.join(" AND "), values))
}

fn to_sql(value: u64, what: impl FnOnce() -> String) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError(format!("{} is {value}: too large to store", what())))
}

/// An unsigned value read back from SQLite.
fn from_sql(value: i64, what: impl FnOnce() -> String) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError(format!("{} is corrupt: it is {value}", what())))
}

/// Maps an SQLite error to a [`StoreError`] saying what could not be done.
fn sql(doing: &str) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError(format!("cannot {doing}: {e}"))
}

impl SqliteTransaction<'_> {
    /// The number a durable commit that just committed waits for: its own, or — for a transaction that
    /// wrote nothing — the last commit's, since nothing it may have read goes unsynced into an answer (as
    /// with `FULL`, where readers see only synced commits).
    fn durable_number(&self, group: &GroupSync) -> u64 {
        if self.conn.total_changes() == self.changes_at_begin { group.last() } else { group.committed() }
    }
}

impl Transaction for SqliteTransaction<'_> {
    fn next_number(&mut self, sequence: &str) -> Result<u64, StoreError> {
        let value: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO sequences (name, value) VALUES (?1, 1)
                 ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value",
            )
            .and_then(|mut stmt| stmt.query_row([sequence], |row| row.get(0)))
            .map_err(|e| StoreError(format!("cannot advance the sequence `{sequence}`: {e}")))?;
        from_sql(value, || format!("the stored sequence `{sequence}`"))
    }

    fn proposal(&mut self, id: &str) -> Result<Option<Proposal>, StoreError> {
        self.record("proposal", "SELECT id, record FROM proposals WHERE id = ?1", [id])
    }

    fn proposal_by_fingerprint(
        &mut self,
        operation_key: &str,
        fingerprint: &str,
    ) -> Result<Option<Proposal>, StoreError> {
        self.record(
            "proposal",
            "SELECT id, record FROM proposals WHERE operation_key = ?1 AND fingerprint = ?2 ORDER BY slot LIMIT 1",
            [operation_key, fingerprint],
        )
    }

    fn proposals_for_subject(
        &mut self,
        operation_key: &str,
        tool: &str,
        subject: &str,
    ) -> Result<Vec<Proposal>, StoreError> {
        self.readable_records(
            "proposal",
            "SELECT id, record FROM proposals WHERE operation_key = ?1 AND tool = ?2 AND subject = ?3 ORDER BY slot",
            [operation_key, tool, subject],
        )
    }

    fn proposals(&mut self) -> Result<Vec<Proposal>, StoreError> {
        self.readable_records("proposal", "SELECT id, record FROM proposals ORDER BY slot", [])
    }

    fn proposals_in_status(&mut self, status: Status) -> Result<Vec<Proposal>, StoreError> {
        // Through the index that starts with the status (`proposals_by_decider`): SQLite reads only these rows.
        let found: Vec<Proposal> = self.readable_records(
            "proposal",
            "SELECT id, record FROM proposals WHERE status = ?1 ORDER BY slot",
            [status.as_str()],
        )?;
        // The record decides, not the column: a record whose JSON says otherwise is not listed.
        Ok(found.into_iter().filter(|p| p.status == status).collect())
    }

    fn proposal_page(
        &mut self,
        query: &ProposalQuery,
        offset: usize,
        limit: usize,
    ) -> Result<ProposalPage, StoreError> {
        let (filter, values) = page_filter(query)?;
        let count_sql = format!("SELECT count(*) FROM proposals WHERE {filter}");
        let total: i64 = self
            .conn
            .prepare_cached(&count_sql)
            .and_then(|mut stmt| stmt.query_row(rusqlite::params_from_iter(values.iter()), |row| row.get(0)))
            .map_err(sql("count the proposals"))?;
        // The page's slots first, from the index alone (it covers the filter's columns), then only their
        // records: sorting the matching rows with their records would read every one of them.
        let page_sql = format!(
            "SELECT id, record FROM proposals WHERE slot IN (SELECT slot FROM proposals WHERE {filter} ORDER BY slot DESC LIMIT ? OFFSET ?) ORDER BY slot DESC"
        );
        let mut values = values;
        values.push(rusqlite::types::Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        values.push(rusqlite::types::Value::Integer(i64::try_from(offset).unwrap_or(i64::MAX)));
        let found: Vec<Proposal> =
            self.readable_records("proposal", &page_sql, rusqlite::params_from_iter(values.iter()))?;
        // The record decides, not the columns: one whose JSON says otherwise is not listed.
        let proposals = found.into_iter().filter(|p| query.matches(p)).collect();
        Ok(ProposalPage { proposals, total: usize::try_from(total).unwrap_or(0) })
    }

    fn proposal_counts(&mut self, query: &ProposalQuery) -> Result<Vec<ProposalCount>, StoreError> {
        let (filter, mut values) = page_filter(query)?;
        let person = query.deciders.as_ref().map_or(String::new(), |d| d.person.clone());
        let has_person = i64::from(query.deciders.is_some());
        let mut all = vec![rusqlite::types::Value::Integer(has_person), rusqlite::types::Value::Text(person)];
        all.append(&mut values);
        let count_sql = format!(
            "SELECT decider, ifnull(? AND requester = ?, 0), count(*) FROM proposals WHERE {filter} GROUP BY 1, 2 ORDER BY 1, 2"
        );
        let mut stmt = self.conn.prepare_cached(&count_sql).map_err(sql("count the proposals"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(all.iter()), |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
            })
            .map_err(sql("count the proposals"))?;
        let mut out = Vec::new();
        for row in rows {
            let (decider, own, count) = row.map_err(sql("count the proposals"))?;
            out.push(ProposalCount { decider, own: own != 0, count: usize::try_from(count).unwrap_or(0) });
        }
        Ok(out)
    }

    fn put_proposal(&mut self, proposal: &Proposal) -> Result<(), StoreError> {
        let record = encode("proposal", &proposal.id, proposal)?;
        let columns = ListColumns::of(proposal)?;
        // An upsert, not `INSERT OR REPLACE`: replacing would delete the row and give it a new slot.
        self.conn
            .prepare_cached(
                "INSERT INTO proposals (id, operation_key, fingerprint, tool, subject, record, status, decider,
                     requester, decided_by, agent, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (id) DO UPDATE SET operation_key = excluded.operation_key,
                     fingerprint = excluded.fingerprint, tool = excluded.tool, subject = excluded.subject,
                     record = excluded.record, status = excluded.status, decider = excluded.decider,
                     requester = excluded.requester, decided_by = excluded.decided_by, agent = excluded.agent,
                     expires_at = excluded.expires_at",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    proposal.id,
                    proposal.operation_key,
                    proposal.fingerprint,
                    proposal.tool,
                    proposal.subject,
                    record,
                    columns.status,
                    columns.decider,
                    proposal.requester,
                    proposal.decided_by,
                    proposal.agent,
                    columns.expires_at
                ])
            })
            .map_err(|e| StoreError(format!("cannot store the proposal `{}`: {e}", proposal.id)))?;
        Ok(())
    }

    fn rules(&mut self) -> Result<Vec<StandingRule>, StoreError> {
        self.readable_records("standing rule", "SELECT id, record FROM rules ORDER BY slot", [])
    }

    fn put_rule(&mut self, rule: &StandingRule) -> Result<(), StoreError> {
        let record = encode("standing rule", &rule.id, rule)?;
        self.conn
            .prepare_cached(
                "INSERT INTO rules (id, record) VALUES (?1, ?2)
                 ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            )
            .and_then(|mut stmt| stmt.execute(params![rule.id, record]))
            .map_err(|e| StoreError(format!("cannot store the standing rule `{}`: {e}", rule.id)))?;
        Ok(())
    }

    fn budget(&mut self, name: &str) -> Result<Option<BudgetRecord>, StoreError> {
        let row: Option<(i64, i64)> = self
            .conn
            .prepare_cached("SELECT installed_ceiling, spent FROM budgets WHERE name = ?1")
            .and_then(|mut stmt| stmt.query_row([name], |row| Ok((row.get(0)?, row.get(1)?))).optional())
            .map_err(|e| StoreError(format!("cannot read the budget `{name}`: {e}")))?;
        let Some((installed_ceiling, spent)) = row else { return Ok(None) };
        Ok(Some(BudgetRecord {
            name: name.to_string(),
            installed_ceiling: from_sql(installed_ceiling, || format!("the installed ceiling of the budget `{name}`"))?,
            spent: from_sql(spent, || format!("the spending of the budget `{name}`"))?,
        }))
    }

    fn put_budget(&mut self, record: &BudgetRecord) -> Result<(), StoreError> {
        let name = &record.name;
        let installed_ceiling =
            to_sql(record.installed_ceiling, || format!("the installed ceiling of the budget `{name}`"))?;
        let spent = to_sql(record.spent, || format!("the spending of the budget `{name}`"))?;
        self.conn
            .prepare_cached(
                "INSERT INTO budgets (name, installed_ceiling, spent) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET installed_ceiling = excluded.installed_ceiling,
                     spent = excluded.spent",
            )
            .and_then(|mut stmt| stmt.execute(params![name, installed_ceiling, spent]))
            .map_err(|e| StoreError(format!("cannot store the budget `{name}`: {e}")))?;
        Ok(())
    }

    fn reservation(&mut self, holder: &str) -> Result<Option<Reservation>, StoreError> {
        let row: Option<(String, i64, i64, Option<String>)> = self
            .conn
            .prepare_cached("SELECT budget, amount, created_at, task FROM reservations WHERE holder = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([holder], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))).optional()
            })
            .map_err(|e| StoreError(format!("cannot read the reservation of `{holder}`: {e}")))?;
        let Some((budget, amount, created_at, task)) = row else { return Ok(None) };
        Ok(Some(Reservation {
            holder: holder.to_string(),
            budget,
            amount: from_sql(amount, || format!("the amount of the reservation of `{holder}`"))?,
            created_at: from_sql(created_at, || format!("the time of the reservation of `{holder}`"))?,
            task,
        }))
    }

    fn put_reservation(&mut self, reservation: &Reservation) -> Result<(), StoreError> {
        let holder = &reservation.holder;
        let amount = to_sql(reservation.amount, || format!("the amount of the reservation of `{holder}`"))?;
        let created_at = to_sql(reservation.created_at, || format!("the time of the reservation of `{holder}`"))?;
        self.conn
            .prepare_cached(
                "INSERT INTO reservations (holder, budget, amount, created_at, task) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (holder) DO UPDATE SET budget = excluded.budget, amount = excluded.amount,
                     created_at = excluded.created_at, task = excluded.task",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![holder, reservation.budget, amount, created_at, reservation.task])
            })
            .map_err(|e| StoreError(format!("cannot store the reservation of `{holder}`: {e}")))?;
        Ok(())
    }

    fn remove_reservation(&mut self, holder: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM reservations WHERE holder = ?1")
            .and_then(|mut stmt| stmt.execute([holder]))
            .map_err(|e| StoreError(format!("cannot remove the reservation of `{holder}`: {e}")))?;
        Ok(())
    }

    fn reserved_total(&mut self, budget: &str) -> Result<u64, StoreError> {
        let total: i64 = self
            .conn
            .prepare_cached("SELECT COALESCE(SUM(amount), 0) FROM reservations WHERE budget = ?1")
            .and_then(|mut stmt| stmt.query_row([budget], |row| row.get(0)))
            .map_err(|e| StoreError(format!("cannot sum the reservations of the budget `{budget}`: {e}")))?;
        from_sql(total, || format!("the sum of the reservations of the budget `{budget}`"))
    }

    fn reserved_for_task(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        let total: i64 = self
            .conn
            .prepare_cached("SELECT COALESCE(SUM(amount), 0) FROM reservations WHERE budget = ?1 AND task = ?2")
            .and_then(|mut stmt| stmt.query_row([budget, task], |row| row.get(0)))
            .map_err(|e| {
                StoreError(format!("cannot sum the reservations of task `{task}` in the budget `{budget}`: {e}"))
            })?;
        from_sql(total, || format!("the sum of the reservations of task `{task}` in the budget `{budget}`"))
    }

    fn task_spent(&mut self, budget: &str, task: &str) -> Result<u64, StoreError> {
        let spent: Option<i64> = self
            .conn
            .prepare_cached("SELECT spent FROM task_spent WHERE budget = ?1 AND task = ?2")
            .and_then(|mut stmt| stmt.query_row([budget, task], |row| row.get(0)).optional())
            .map_err(|e| StoreError(format!("cannot read what task `{task}` spent from the budget `{budget}`: {e}")))?;
        spent.map_or(Ok(0), |s| from_sql(s, || format!("what task `{task}` spent from the budget `{budget}`")))
    }

    fn put_task_spent(&mut self, budget: &str, task: &str, spent: u64) -> Result<(), StoreError> {
        let value = to_sql(spent, || format!("what task `{task}` spent from the budget `{budget}`"))?;
        self.conn
            .prepare_cached(
                "INSERT INTO task_spent (budget, task, spent) VALUES (?1, ?2, ?3)
                 ON CONFLICT (budget, task) DO UPDATE SET spent = excluded.spent",
            )
            .and_then(|mut stmt| stmt.execute(params![budget, task, value]))
            .map_err(|e| {
                StoreError(format!("cannot store what task `{task}` spent from the budget `{budget}`: {e}"))
            })?;
        Ok(())
    }

    fn run(&mut self, id: &str) -> Result<Option<Run>, StoreError> {
        self.record("run", "SELECT id, record FROM runs WHERE id = ?1", [id])
    }

    fn run_by_token(&mut self, token: &str) -> Result<Option<Run>, StoreError> {
        self.record("run", "SELECT id, record FROM runs WHERE token = ?1", [token])
    }

    fn put_run(&mut self, run: &Run) -> Result<(), StoreError> {
        let record = encode("run", &run.id, run)?;
        self.conn
            .prepare_cached(
                "INSERT INTO runs (id, token, record) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET token = excluded.token, record = excluded.record",
            )
            .and_then(|mut stmt| stmt.execute(params![run.id, run.token, record]))
            .map_err(|e| StoreError(format!("cannot store the run `{}`: {e}", run.id)))?;
        Ok(())
    }

    fn audit_head(&mut self) -> Result<Option<AuditHead>, StoreError> {
        let row: Option<(i64, String)> = self
            .conn
            .prepare_cached("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")
            .and_then(|mut stmt| stmt.query_row([], |row| Ok((row.get(0)?, row.get(1)?))).optional())
            .map_err(sql("read the head of the audit chain"))?;
        let Some((seq, hash)) = row else { return Ok(None) };
        Ok(Some(AuditHead { seq: from_sql(seq, || "the head of the audit chain".to_string())?, hash }))
    }

    fn append_audit(&mut self, event: &ChainedEvent) -> Result<(), StoreError> {
        let seq = to_sql(event.seq, || "the place of an audit event".to_string())?;
        let text = serde_json::to_string(&event.event)
            .map_err(|e| StoreError(format!("cannot encode audit event {}: {e}", event.seq)))?;
        self.conn
            .prepare_cached("INSERT INTO audit (seq, prev, hash, event) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut stmt| stmt.execute(params![seq, event.prev, event.hash, text]))
            .map_err(|e| StoreError(format!("cannot store audit event {}: {e}", event.seq)))?;
        Ok(())
    }

    fn audit_events(&mut self) -> Result<Vec<ChainedEvent>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT seq, prev, hash, event FROM audit ORDER BY seq")
            .map_err(sql("read the audit chain"))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                ))
            })
            .map_err(sql("read the audit chain"))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, prev, hash, text) = row.map_err(sql("read the audit chain"))?;
            let seq = from_sql(seq, || "the place of an audit event".to_string())?;
            let event = serde_json::from_str(&text)
                .map_err(|e| StoreError(format!("the stored audit event {seq} is corrupt: {e}")))?;
            out.push(ChainedEvent { seq, prev, hash, event });
        }
        Ok(out)
    }

    fn installed_tables(&mut self) -> Result<Vec<TableInstall>, StoreError> {
        self.table_installs("SELECT seq, record FROM installed_tables ORDER BY seq")
    }

    fn current_table(&mut self) -> Result<Option<TableInstall>, StoreError> {
        Ok(self.table_installs("SELECT seq, record FROM installed_tables ORDER BY seq DESC LIMIT 1")?.pop())
    }

    fn put_installed_table(&mut self, install: &TableInstall) -> Result<(), StoreError> {
        let seq = to_sql(install.seq, || "the place of a table install".to_string())?;
        let record = encode("table install", &install.table_digest, install)?;
        self.conn
            .prepare_cached("INSERT INTO installed_tables (seq, record) VALUES (?1, ?2)")
            .and_then(|mut stmt| stmt.execute(params![seq, record]))
            .map_err(|e| StoreError(format!("cannot record the install of table `{}`: {e}", install.table_digest)))?;
        Ok(())
    }

    fn task(&mut self, key: &str) -> Result<Option<Task>, StoreError> {
        self.record("task", "SELECT key, record FROM tasks WHERE key = ?1", [key])
    }

    fn put_task(&mut self, task: &Task) -> Result<(), StoreError> {
        let record = encode("task", &task.key, task)?;
        self.conn
            .prepare_cached(
                "INSERT INTO tasks (key, record) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET record = excluded.record",
            )
            .and_then(|mut stmt| stmt.execute(params![task.key, record]))
            .map_err(|e| StoreError(format!("cannot store the task `{}`: {e}", task.key)))?;
        Ok(())
    }

    fn lease(&mut self, key: &str) -> Result<Option<Lease>, StoreError> {
        self.record("lease", "SELECT key, record FROM leases WHERE key = ?1", [key])
    }

    fn put_lease(&mut self, lease: &Lease) -> Result<(), StoreError> {
        let record = encode("lease", &lease.key, lease)?;
        self.conn
            .prepare_cached(
                "INSERT INTO leases (key, record) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET record = excluded.record",
            )
            .and_then(|mut stmt| stmt.execute(params![lease.key, record]))
            .map_err(|e| StoreError(format!("cannot store the lease on task `{}`: {e}", lease.key)))?;
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        // On failure the transaction is still open, and dropping `self` rolls it back.
        self.conn.execute_batch("COMMIT").map_err(sql("commit the transaction"))?;
        self.committed = true;
        let Some(group) = self.group.filter(|g| g.on.load(Ordering::SeqCst)) else { return Ok(()) };
        let number = self.durable_number(group);
        // The connection is released before the wait, so the next transactions commit during the sync.
        drop(self);
        group.wait(number)
    }

    fn commit_syncing(mut self: Box<Self>) -> Result<Syncing, StoreError> {
        self.conn.execute_batch("COMMIT").map_err(sql("commit the transaction"))?;
        self.committed = true;
        let Some(group) = self.group.filter(|g| g.on.load(Ordering::SeqCst)) else { return Ok(Syncing::durable()) };
        let group = Arc::clone(group);
        // Synced at once by the background syncer while the caller goes on.
        let number = self.durable_number(&group);
        group.want(number, Lazily::Question);
        drop(self);
        Ok(Syncing::pending(move || group.wait(number)))
    }

    fn commit_lazily(mut self: Box<Self>, when: Lazily) -> Result<(), StoreError> {
        self.conn.execute_batch("COMMIT").map_err(sql("commit the transaction"))?;
        self.committed = true;
        let Some(group) = self.group.filter(|g| g.on.load(Ordering::SeqCst)) else { return Ok(()) };
        // What it may have read that matters: the durable commits before its own (it still holds the
        // connection, so none comes between); the other lazy commits keep no promise ([`Lazily`]).
        let seen = if self.conn.total_changes() == self.changes_at_begin {
            group.lock().durable
        } else {
            let (number, durable) = group.committed_lazily();
            group.want(number, when);
            durable
        };
        drop(self);
        group.wait(seen)
    }
}

#[cfg(test)]
mod tests {
    //! What only the SQLite store has: migrations from old files, files that are not databases, corrupt
    //! columns, values SQLite cannot hold. Everything every store does is in the conformance suite
    //! (`src/conformance.rs`), run on this store too.

    use super::*;
    use crate::Claiming;
    use crate::conformance::{TempDir, budget, fill, grant, proposal, reservation, run};
    use crate::records::Basis;

    #[test]
    fn a_group_commit_runs_one_sync_for_every_commit_before_it_and_none_for_what_is_synced() {
        let dir = TempDir::new("group-sync");
        let wal = dir.db().with_extension("db-wal");
        std::fs::write(&wal, b"frames").expect("write a log");
        let group = GroupSync::new(Some((wal, dir.db().parent().expect("a directory").to_path_buf())));
        let (one, two, three) = (group.committed(), group.committed(), group.committed());
        assert_eq!((one, two, three), (1, 2, 3));
        group.wait(two).expect("synced");
        // The sync that `two` ran started after `three` committed: it covers `three` too.
        let state = group.lock();
        assert_eq!((state.synced, state.syncs, state.dir_synced), (3, 1, true));
        drop(state);
        group.wait(three).expect("already synced");
        group.wait(group.last()).expect("nothing new");
        assert_eq!(group.lock().syncs, 1, "nothing unsynced: no second sync");
        let four = group.committed();
        group.wait(four).expect("synced");
        let state = group.lock();
        assert_eq!((state.synced, state.syncs), (4, 2));
    }

    /// A store shared with the test, so it can look at the group commit's state behind a runtime.
    struct Shared(Arc<SqliteStore>);

    impl Store for Shared {
        fn begin(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
            self.0.begin()
        }
    }

    #[test]
    fn a_decide_does_not_wait_for_the_sync_and_the_background_syncer_runs_it() -> Result<(), StoreError> {
        let dir = TempDir::new("group-lazy");
        let store = Arc::new(SqliteStore::open(&dir.db())?);
        store.set_synchronous(Synchronous::Group)?;
        let decision = crate::tests::decide_on_store(Shared(store.clone())).expect("decided");
        assert_eq!(decision.level, crate::table::Level::Propose);
        // The proposal's commit waited for its sync; the decide's was numbered after it and only wanted one.
        let wanted = store.group.lock().wanted;
        assert!(wanted >= 2, "the decide's commit wanted a sync: {wanted}");
        assert!(store.group.syncer.load(Ordering::SeqCst), "the background syncer started");
        // Nothing else commits: the background syncer syncs the decide's event (bounded wait, not a timing
        // assertion: a sync takes well under a millisecond here).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.group.lock().synced < wanted && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(store.group.lock().synced >= wanted, "the syncer synced the lazy commit");
        // A read of the chain sees the event (and would have waited for its sync).
        let mut tx = store.begin()?;
        let events = tx.audit_events()?;
        assert_eq!(events.last().map(|e| e.event.kind), Some(crate::audit::EventKind::Decision));
        Ok(())
    }

    #[test]
    fn a_question_is_synced_at_once_and_a_receipt_once_the_store_is_quiet() {
        let at = Instant::now();
        let ms = Duration::from_millis;
        let state = |wanted, wanted_quietly, since: u64, last: u64| GroupState {
            committed: 9,
            synced: 4,
            wanted,
            wanted_quietly,
            wanted_quietly_since: Some(at + ms(since)),
            last_commit: Some(at + ms(last)),
            quiet: ms(Lazily::QUIET_MILLIS),
            max_lag: ms(Lazily::MAX_LAG_MILLIS),
            ..GroupState::default()
        };
        // Nothing unsynced is wanted: look again in a tenth of a second.
        assert_eq!(state(4, 3, 0, 0).due(at + ms(500)), Due::After(ms(100)));
        // A question's event: now (a receipt wanted too rides along).
        assert_eq!(state(6, 0, 0, 0).due(at), Due::Now(6));
        assert_eq!(state(6, 8, 0, 0).due(at), Due::Now(8));
        // A receipt, the last commit 4 ms ago: 6 ms more of quiet, then now.
        assert_eq!(state(4, 7, 0, 0).due(at + ms(4)), Due::After(ms(6)));
        assert_eq!(state(4, 7, 0, 0).due(at + ms(10)), Due::Now(7));
        // Commits keep coming (the last 2 ms ago): it waits for quiet, but never more than a second in all.
        assert_eq!(state(4, 7, 0, 995).due(at + ms(997)), Due::After(ms(3)));
        assert_eq!(state(4, 7, 0, 999).due(at + ms(1000)), Due::Now(7));
        // A failed sync: nothing to do but wait (the next commit reports it).
        let failed = GroupState { failed: Some("disk".into()), ..state(6, 7, 0, 0) };
        assert_eq!(failed.due(at + ms(50)), Due::After(ms(100)));
    }

    #[test]
    fn a_receipt_recorded_lazily_shares_the_next_claims_sync() -> Result<(), crate::RuntimeError> {
        let dir = TempDir::new("group-receipt");
        let store = Arc::new(SqliteStore::open(&dir.db())?);
        store.set_synchronous(Synchronous::Group)?;
        // No quiet moment comes in this test (the background syncer stays out of the count) …
        store.group.lock().quiet = Duration::from_secs(3600);
        store.group.lock().max_lag = Duration::from_secs(3600);
        let (rt, request) = crate::tests::alone_call_on_store(Shared(store.clone()));
        let first = rt.claim_alone_confirmed(&request, "tok-1")?;
        assert_eq!(first.status, Status::Sending);
        let state = store.group.lock();
        let (syncs, synced) = (state.syncs, state.synced);
        drop(state);
        assert_eq!(synced, store.group.last(), "the claim is durable before it returns");
        let done =
            rt.record_outcome_lazily(&first.id, "tok-1", crate::RunOutcome::Done(serde_json::json!({"parts": 2})))?;
        assert_eq!(done.status, Status::Done);
        let receipt = store.group.last();
        let state = store.group.lock();
        assert_eq!((state.syncs, state.synced, state.wanted_quietly), (syncs, synced, receipt), "no sync waited for");
        drop(state);
        // … until the next claim: its one sync covers the receipt before it.
        let second = rt.claim_alone_confirmed(&request.clone(), "tok-2")?;
        assert_eq!(second.status, Status::Sending);
        let state = store.group.lock();
        assert_eq!(state.syncs, syncs + 1, "one sync for the receipt and the next claim");
        assert!(state.synced > receipt, "the receipt is durable with the claim after it");
        drop(state);
        // A quiet store: the background syncer syncs a receipt on its own (bounded wait, not a timing assertion).
        store.group.lock().quiet = Duration::from_millis(Lazily::QUIET_MILLIS);
        rt.record_outcome_lazily(&second.id, "tok-2", crate::RunOutcome::Failed("no parts".into()))?;
        let wanted = store.group.last();
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.group.lock().synced < wanted && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(store.group.lock().synced >= wanted, "the syncer synced the receipt once the store was quiet");
        // What was recorded is what `record_outcome` records.
        let mut tx = store.begin()?;
        let outcomes: Vec<String> = tx.audit_events()?.into_iter().map(|e| e.event.outcome).collect();
        assert_eq!(outcomes[outcomes.len() - 3..], ["claimed", "sending", "failed"]);
        Ok(())
    }

    #[test]
    fn a_claim_of_a_tool_that_only_reads_syncs_while_the_read_runs() -> Result<(), Box<dyn std::error::Error>> {
        let dir = TempDir::new("group-syncing");
        let store = Arc::new(SqliteStore::open(&dir.db())?);
        store.set_synchronous(Synchronous::Group)?;
        let (rt, reads) = crate::tests::alone_call_on_store(Shared(store.clone()));
        // `PartsFor` only reads: the claim is committed and its sync handed to the background thread.
        let (claimed, syncing) =
            rt.claim_if_alone_syncing(&reads, "tok-1", Claiming::ClaimAndConfirm)?.ok_or("alone")?;
        assert_eq!((claimed.status, claimed.confirmed), (Status::Sending, true));
        assert_eq!(format!("{syncing:?}"), "Syncing(pending)");
        let number = store.group.last();
        syncing.wait()?;
        assert!(store.group.lock().synced >= number, "durable once the wait returns");
        // `NoteRepair` changes a repair: durable before the claim returns, as `claim_if_alone`.
        let mut changes = reads.clone();
        changes.call.tool = "NoteRepair".into();
        changes.call.arguments = serde_json::json!({"repair": "T-7", "note": "pads worn"});
        let (claimed, syncing) =
            rt.claim_if_alone_syncing(&changes, "tok-2", Claiming::ClaimAndConfirm)?.ok_or("alone")?;
        assert_eq!(claimed.status, Status::Sending);
        assert_eq!(format!("{syncing:?}"), "Syncing(durable)");
        let last = store.group.last();
        assert_eq!(store.group.lock().synced, last, "synced before it returned");
        // A sync that fails fails the wait: the host withholds the read's answer.
        store.group.lock().failed = Some("the disk is gone".into());
        let (_, syncing) = rt.claim_if_alone_syncing(&reads, "tok-4", Claiming::ClaimAndConfirm)?.ok_or("alone")?;
        let refused = syncing.wait().err().map(|e| e.0).unwrap_or_default();
        assert!(refused.contains("could not be synced to the disk (the disk is gone)"), "{refused}");
        store.group.lock().failed = None;
        // A call that is not alone records nothing and has nothing to wait for.
        let mut never = reads.clone();
        never.call.tool = "ScrapRepair".into();
        never.call.arguments = serde_json::json!({"repair": "T-7"});
        let before = store.group.last();
        assert!(rt.claim_if_alone_syncing(&never, "tok-3", Claiming::ClaimAndConfirm)?.is_none());
        assert_eq!(store.group.last(), before);
        Ok(())
    }

    #[test]
    fn a_read_admitted_before_its_claim_is_written_holds_the_store_until_it_is_claimed()
    -> Result<(), Box<dyn std::error::Error>> {
        use crate::AloneClaim;
        let dir = TempDir::new("group-sending");
        let store = Arc::new(SqliteStore::open(&dir.db())?);
        store.set_synchronous(Synchronous::Group)?;
        let (rt, reads) = crate::tests::alone_call_on_store(Shared(store.clone()));
        // Another process's view of the file: no wait for a lock.
        let other = Connection::open(dir.db()).map_err(sql("open"))?;
        other.busy_timeout(Duration::ZERO).map_err(sql("busy timeout"))?;
        let runs = |c: &Connection| -> Result<i64, StoreError> {
            c.query_row("SELECT count(*) FROM runs", [], |row| row.get(0)).map_err(sql("count"))
        };
        let kinds = |events: Vec<ChainedEvent>| -> Vec<(String, String)> {
            events.into_iter().map(|e| (format!("{:?}", e.event.kind).to_lowercase(), e.event.outcome)).collect()
        };
        // `PartsFor` only reads: decided and admitted, the transaction left open.
        let AloneClaim::Admitted(admitted) =
            rt.claim_if_alone_sending(reads.clone(), "tok-1", Claiming::ClaimAndConfirm)?
        else {
            return Err("a read decided alone is admitted".into());
        };
        assert_eq!(runs(&other)?, 0, "nothing is committed before the claim");
        let locked = other.execute_batch("BEGIN IMMEDIATE").map_err(|e| e.to_string());
        assert!(locked.as_ref().is_err_and(|e| e.contains("locked")), "no other writer gets in: {locked:?}");
        let (claimed, syncing) = admitted.claim()?;
        assert_eq!((claimed.id.as_str(), claimed.status, claimed.confirmed), ("A-1", Status::Sending, true));
        assert_eq!(format!("{syncing:?}"), "Syncing(pending)");
        syncing.wait()?;
        assert_eq!(runs(&other)?, 1);
        other.execute_batch("BEGIN IMMEDIATE; ROLLBACK").map_err(sql("write after the claim"))?;
        // The same record as `claim_if_alone_syncing` makes on a store of its own: the table's install, then
        // the decision, the task's binding, the claim and its confirmation.
        let admitted_events = kinds(SqliteStore::read_audit_chain(&dir.db())?);
        let dir2 = TempDir::new("group-syncing-same");
        let store2 = Arc::new(SqliteStore::open(&dir2.db())?);
        store2.set_synchronous(Synchronous::Group)?;
        let (rt2, _) = crate::tests::alone_call_on_store(Shared(store2.clone()));
        let (_, syncing) = rt2.claim_if_alone_syncing(&reads, "tok-1", Claiming::ClaimAndConfirm)?.ok_or("alone")?;
        syncing.wait()?;
        assert_eq!(admitted_events, kinds(SqliteStore::read_audit_chain(&dir2.db())?));
        assert_eq!(
            admitted_events.iter().rev().take(4).rev().map(|(k, o)| format!("{k} {o}")).collect::<Vec<_>>(),
            ["decision alone", "task bound", "execution claimed", "execution sending"]
        );
        // Dropped unclaimed (the call was not sent): nothing recorded, not even the run's number.
        let before = SqliteStore::read_audit_chain(&dir.db())?.len();
        match rt.claim_if_alone_sending(reads.clone(), "tok-3", Claiming::ClaimAndConfirm)? {
            AloneClaim::Admitted(admitted) => drop(admitted),
            other => return Err(format!("admitted, not {other:?}").into()),
        }
        assert_eq!(SqliteStore::read_audit_chain(&dir.db())?.len(), before);
        let AloneClaim::Admitted(next) =
            rt.claim_if_alone_sending(reads.clone(), "tok-4", Claiming::ClaimAndConfirm)?
        else {
            return Err("admitted".into());
        };
        assert_eq!(next.claim()?.0.id, "A-2", "the dropped admission's number was not used");
        // A retry with a token already claimed finds its run; a tool that changes is claimed durably first;
        // a call that is not alone records nothing.
        match rt.claim_if_alone_sending(reads.clone(), "tok-1", Claiming::ClaimAndConfirm)? {
            AloneClaim::Claimed(c, _) => assert_eq!((c.id.as_str(), c.status), ("A-1", Status::Sending)),
            other => return Err(format!("the same run, not {other:?}").into()),
        }
        let mut changes = reads.clone();
        changes.call.tool = "NoteRepair".into();
        changes.call.arguments = serde_json::json!({"repair": "T-7", "note": "pads worn"});
        match rt.claim_if_alone_sending(changes, "tok-5", Claiming::ClaimAndConfirm)? {
            AloneClaim::Claimed(c, syncing) => {
                assert_eq!(c.status, Status::Sending);
                assert_eq!(format!("{syncing:?}"), "Syncing(durable)");
            }
            other => return Err(format!("claimed, not {other:?}").into()),
        }
        let mut never = reads.clone();
        never.call.tool = "ScrapRepair".into();
        never.call.arguments = serde_json::json!({"repair": "T-7"});
        let before = SqliteStore::read_audit_chain(&dir.db())?.len();
        assert!(matches!(rt.claim_if_alone_sending(never, "tok-6", Claiming::ClaimAndConfirm)?, AloneClaim::NotAlone));
        assert_eq!(SqliteStore::read_audit_chain(&dir.db())?.len(), before);
        Ok(())
    }

    #[test]
    fn checkpoints_when_quiet_leave_the_commits_and_run_once_no_commit_comes() -> Result<(), StoreError> {
        let dir = TempDir::new("quiet-checkpoints");
        let store = SqliteStore::open(&dir.db())?;
        // Without a group commit's background thread, checkpoints stay SQLite's own.
        assert_eq!(store.set_checkpoints(Checkpoints::WhenQuiet)?, Checkpoints::Inline);
        store.set_synchronous(Synchronous::Group)?;
        store.group.lock().quiet = Duration::from_secs(3600);
        assert_eq!(store.set_checkpoints(Checkpoints::WhenQuiet)?, Checkpoints::WhenQuiet);
        let pages: i64 = {
            let conn = store.conn.lock().unwrap_or_else(PoisonError::into_inner);
            conn.pragma_query_value(None, "wal_autocheckpoint", |row| row.get(0)).map_err(sql("read"))?
        };
        assert_eq!(pages, Checkpoints::QUIET_CAP_PAGES);
        // 150 commits of some 10 pages each, one after the other: no commit checkpoints, the log grows past
        // SQLite's 1,000 pages (inline, it would have started again from its beginning at 1,000).
        let big = "x".repeat(40_000);
        for n in 1..=150 {
            let mut tx = store.begin()?;
            let mut r = run(n, &format!("tok-{n}"));
            r.arguments = serde_json::json!({"note": big});
            tx.put_run(&r)?;
            tx.commit()?;
        }
        let wal = std::fs::metadata(dir.db().with_extension("db-wal")).map_err(|e| StoreError(e.to_string()))?.len();
        assert!(wal > 1000 * 4120, "the log grew past 1,000 pages without a checkpoint: {wal} bytes");
        assert_eq!(store.group.lock().checkpointed, 0, "no quiet moment yet");
        // A quiet moment: the background thread checkpoints (bounded wait, not a timing assertion).
        store.group.lock().quiet = Duration::from_millis(Lazily::QUIET_MILLIS);
        store.group.wanted.notify_one();
        let last = store.group.last();
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.group.lock().checkpointed < last && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(store.group.lock().checkpointed, last, "checkpointed once the store was quiet");
        // Everything in the log is in the database now: another checkpoint finds nothing left to copy.
        let conn = Connection::open(dir.db()).map_err(sql("open"))?;
        let (busy, log, copied): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(sql("checkpoint"))?;
        assert_eq!((busy, log), (0, copied), "every page of the log was copied");
        assert!(log > 1000, "{log} pages");
        Ok(())
    }

    #[test]
    fn a_failed_group_sync_fails_that_commit_and_every_later_one() {
        let dir = TempDir::new("group-fail");
        // The log's "directory" is a file: opening the log fails with something other than "not found".
        let not_a_dir = dir.db();
        std::fs::write(&not_a_dir, b"a file").expect("write a file");
        let group = GroupSync::new(Some((not_a_dir.join("ledger.db-wal"), not_a_dir.clone())));
        let first = group.committed();
        let err = group.wait(first).expect_err("the sync fails");
        assert!(err.0.starts_with("the change was committed but the ledger could not be synced to the disk"), "{err}");
        assert!(err.0.contains("cannot open"), "{err}");
        let second = group.committed();
        let again = group.wait(second).expect_err("never retried");
        assert_eq!(again.0, err.0);
        assert_eq!(group.lock().syncs, 0);
    }

    #[test]
    fn the_group_commit_is_set_on_a_file_and_is_normal_in_memory() -> Result<(), StoreError> {
        let dir = TempDir::new("group-mode");
        let store = SqliteStore::open(&dir.db())?;
        assert_eq!(store.set_synchronous(Synchronous::Group)?, Synchronous::Group);
        let pragma: i64 = store
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .map_err(sql("read `synchronous`"))?;
        assert_eq!(pragma, 1, "SQLite itself runs at NORMAL");
        fill(&store);
        let syncs = store.group.lock().syncs;
        assert!(syncs >= 1, "every commit waited for a sync: {syncs}");
        // A transaction that only reads, with nothing unsynced, runs no sync.
        let mut tx = store.begin()?;
        assert!(tx.proposal("P-1")?.is_some());
        tx.commit()?;
        assert_eq!(store.group.lock().syncs, syncs);
        drop(store);
        let reopened = SqliteStore::open(&dir.db())?;
        assert!(reopened.begin()?.proposal("P-1")?.is_some());
        assert_eq!(reopened.set_synchronous(Synchronous::Normal)?, Synchronous::Normal);
        let memory = SqliteStore::open_in_memory()?;
        assert_eq!(memory.set_synchronous(Synchronous::Group)?, Synchronous::Normal);
        Ok(())
    }

    #[test]
    fn concurrent_commits_under_the_group_commit_all_return_and_share_syncs() -> Result<(), StoreError> {
        let dir = TempDir::new("group-threads");
        let store = SqliteStore::open(&dir.db())?;
        store.set_synchronous(Synchronous::Group)?;
        std::thread::scope(|scope| {
            for t in 0..8 {
                let store = &store;
                scope.spawn(move || {
                    for i in 0..25 {
                        let mut tx = store.begin().expect("begin");
                        let n = tx.next_number(&format!("thread-{t}")).expect("a number");
                        assert_eq!(n, i + 1);
                        tx.commit().expect("commit");
                    }
                });
            }
        });
        let state = store.group.lock();
        assert_eq!((state.committed, state.synced), (200, 200));
        assert!(state.syncs <= 200, "{}", state.syncs);
        drop(state);
        let mut tx = store.begin()?;
        for t in 0..8 {
            assert_eq!(tx.next_number(&format!("thread-{t}"))?, 26);
        }
        Ok(())
    }

    #[test]
    fn a_page_of_a_persons_queue_and_of_a_history_is_read_through_an_index() -> Result<(), StoreError> {
        let store = SqliteStore::open_in_memory()?;
        fill(&store);
        let conn = store.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let plan = |query: &ProposalQuery| -> Result<Vec<String>, StoreError> {
            let (filter, values) = page_filter(query)?;
            let sql_text = format!(
                "EXPLAIN QUERY PLAN SELECT id, record FROM proposals WHERE {filter} ORDER BY slot DESC LIMIT 20"
            );
            let mut stmt = conn.prepare(&sql_text).map_err(sql("explain"))?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(values.iter()), |r| r.get::<_, String>(3))
                .map_err(sql("explain"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(sql("explain"))
        };
        let queue = ProposalQuery {
            status: Some(Status::Waiting),
            deciders: Some(crate::store::DeciderQuery {
                direct: vec!["person:Noor".into(), "requester:Noor".into()],
                shared: vec!["role:Finance".into()],
                person: "Noor".into(),
                own_requests: false,
            }),
            open_at: Some(1),
            ..ProposalQuery::default()
        };
        let steps = plan(&queue)?;
        assert!(steps.iter().any(|s| s.contains("INDEX proposals_by_decider")), "{steps:?}");
        assert!(!steps.iter().any(|s| s.starts_with("SCAN proposals")), "{steps:?}");
        let task = ProposalQuery { operation_key: Some("order-1".into()), ..ProposalQuery::default() };
        let steps = plan(&task)?;
        assert!(steps.iter().any(|s| s.contains("USING INDEX proposals_by_task")), "{steps:?}");
        let history = ProposalQuery { involving: Some("Noor".into()), ..ProposalQuery::default() };
        let steps = plan(&history)?;
        assert!(!steps.iter().any(|s| s.starts_with("SCAN proposals")), "{steps:?}");
        Ok(())
    }

    #[test]
    fn waiting_proposals_are_read_through_the_index_on_their_status() -> Result<(), StoreError> {
        let store = SqliteStore::open_in_memory()?;
        let conn = store.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let plan: Vec<String> = conn
            .prepare("EXPLAIN QUERY PLAN SELECT id, record FROM proposals WHERE status = ?1 ORDER BY slot")
            .and_then(|mut stmt| stmt.query_map(["waiting"], |r| r.get::<_, String>(3))?.collect())
            .map_err(sql("explain the query"))?;
        assert!(plan.iter().any(|step| step.contains("USING INDEX proposals_by_decider (status=?)")), "{plan:?}");
        Ok(())
    }

    #[test]
    fn a_record_that_is_not_json_neither_breaks_the_status_index_nor_is_listed() -> Result<(), StoreError> {
        let store = SqliteStore::open_in_memory()?;
        fill(&store);
        {
            let conn = store.conn.lock().unwrap_or_else(PoisonError::into_inner);
            conn.execute("UPDATE proposals SET record = '{\"id\": \"P-2\"' WHERE id = 'P-2'", [])
                .map_err(sql("corrupt a record"))?;
        }
        let mut tx = store.begin()?;
        let all: Vec<String> = tx.proposals()?.into_iter().map(|p| p.id).collect();
        let waiting: Vec<String> = tx.proposals_in_status(Status::Waiting)?.into_iter().map(|p| p.id).collect();
        let expected: Vec<String> =
            tx.proposals()?.into_iter().filter(|p| p.status == Status::Waiting).map(|p| p.id).collect();
        assert!(!all.contains(&"P-2".to_string()));
        assert!(!waiting.is_empty(), "the fill has waiting proposals");
        assert_eq!(waiting, expected);
        Ok(())
    }

    /// A version-1 file: [`SqliteStore::SCHEMA_V1`], `user_version = 1`, and proposals whose grant has no basis.
    fn write_v1(path: &Path, proposals: &[Proposal]) {
        let conn = Connection::open(path).expect("open");
        conn.execute_batch(SqliteStore::SCHEMA_V1).expect("v1 schema");
        conn.pragma_update(None, "user_version", 1).expect("version 1");
        for p in proposals {
            let mut record = serde_json::to_value(p).expect("encode");
            if let Some(grant) = record.get_mut("grant").and_then(Value::as_object_mut) {
                assert!(grant.remove("basis").is_some());
            }
            conn.execute(
                "INSERT INTO proposals (id, operation_key, fingerprint, tool, subject, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![p.id, p.operation_key, p.fingerprint, p.tool, p.subject, record.to_string()],
            )
            .expect("insert");
        }
    }

    #[test]
    fn version_1_grants_get_the_unknown_basis() {
        let dir = TempDir::new("migrate");
        let old = [proposal(1, Some("\"acme\""), Some(grant(Basis::Operator))), proposal(2, None, None)];
        write_v1(&dir.db(), &old);
        // Version 1 records do not decode as they are: the migration is what makes them readable.
        let conn = Connection::open(dir.db()).expect("open");
        let text: String =
            conn.query_row("SELECT record FROM proposals WHERE id = 'P-1'", [], |row| row.get(0)).expect("read");
        assert!(serde_json::from_str::<Proposal>(&text).is_err());
        drop(conn);

        let store = SqliteStore::open(&dir.db()).expect("open and migrate");
        assert_eq!(store.schema_version().expect("version"), SqliteStore::SCHEMA_VERSION);
        let mut tx = store.begin().expect("begin");
        let p1 = tx.proposal("P-1").expect("read").expect("P-1 is kept");
        assert_eq!(p1.grant.as_ref().map(|g| g.basis), Some(Basis::Unknown));
        assert_eq!(p1, proposal(1, Some("\"acme\""), Some(grant(Basis::Unknown))));
        assert_eq!(tx.proposal("P-2").expect("read"), Some(old[1].clone()));
        assert_eq!(tx.proposals_for_subject("order-1", "PlaceOrder", "\"acme\"").expect("read").len(), 1);
        drop(tx);
        drop(store);
        // Opening again does not migrate again.
        let store = SqliteStore::open(&dir.db()).expect("reopen");
        assert_eq!(store.schema_version().expect("version"), SqliteStore::SCHEMA_VERSION);
        let mut tx = store.begin().expect("begin");
        assert_eq!(tx.proposal("P-1").expect("read").and_then(|p| p.grant).map(|g| g.basis), Some(Basis::Unknown));
        // Migration 2 → 3 added the tasks.
        assert_eq!(tx.task("order-1").expect("the tasks table exists"), None);
        // Migration 6 → 7 added the leases.
        assert_eq!(tx.lease("order-1").expect("the leases table exists"), None);
    }

    #[test]
    fn a_failed_migration_leaves_version_1() {
        let dir = TempDir::new("migrate-corrupt");
        write_v1(&dir.db(), &[proposal(1, None, Some(grant(Basis::Operator)))]);
        let conn = Connection::open(dir.db()).expect("open");
        conn.execute(
            "INSERT INTO proposals (id, operation_key, fingerprint, tool, record) VALUES ('P-2', 'k', 'f', 't', '{oops')",
            [],
        )
        .expect("insert");
        drop(conn);
        let err = SqliteStore::open(&dir.db()).expect_err("a corrupt record stops the migration");
        assert!(err.0.starts_with("the stored proposal `P-2` is corrupt"), "{err}");
        let conn = Connection::open(dir.db()).expect("open");
        let version: u32 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).expect("version");
        assert_eq!(version, 1);
        let text: String =
            conn.query_row("SELECT record FROM proposals WHERE id = 'P-1'", [], |row| row.get(0)).expect("read");
        assert!(!text.contains("basis"), "the migration was rolled back: {text}");
    }

    #[test]
    fn a_newer_version_is_refused() {
        let dir = TempDir::new("too-new");
        let conn = Connection::open(dir.db()).expect("open");
        conn.execute_batch(SqliteStore::SCHEMA_V1).expect("schema");
        conn.pragma_update(None, "user_version", 8).expect("version 8");
        drop(conn);
        let err = SqliteStore::open(&dir.db()).expect_err("refused");
        assert_eq!(err, StoreError("the database is at schema version 8; this runtime knows up to 7".into()));
        let conn = Connection::open(dir.db()).expect("open");
        let version: u32 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).expect("version");
        assert_eq!(version, 8, "the file is left untouched");
    }

    #[test]
    fn a_file_that_is_not_a_database_is_an_error() {
        let dir = TempDir::new("not-a-db");
        std::fs::write(dir.db(), "this is not an SQLite database, just some text that is long enough").expect("write");
        let err = SqliteStore::open(&dir.db()).expect_err("refused");
        assert!(err.0.starts_with("cannot "), "{err}");
    }

    #[test]
    fn a_corrupt_record_is_an_error_not_a_panic() {
        let store = SqliteStore::open_in_memory().expect("open");
        fill(&store);
        {
            let conn = store.conn.lock().expect("lock");
            conn.execute("UPDATE proposals SET record = '{\"id\": \"P-2\"' WHERE id = 'P-2'", []).expect("corrupt");
            conn.execute(
                "UPDATE proposals SET record = ?1 WHERE id = 'P-3'",
                [serde_json::to_string(&proposal(9, None, None)).expect("encode")],
            )
            .expect("swap");
            conn.execute("UPDATE rules SET record = 42 WHERE id = 'R-1'", []).expect("corrupt");
            conn.execute("UPDATE budgets SET spent = -1", []).expect("corrupt");
            conn.execute("UPDATE reservations SET amount = 'lots' WHERE holder = 'A-1'", []).expect("corrupt");
            conn.execute("INSERT INTO leases (key, record) VALUES ('job-9', '{\"key\": \"job-9\"}')", [])
                .expect("a corrupt lease");
        }
        let mut tx = store.begin().expect("begin");
        let err = tx.proposal("P-2").expect_err("corrupt");
        assert!(err.0.starts_with("the stored proposal `P-2` is corrupt: "), "{err}");
        // One bad record affects only itself: the list has the others, and the store reports it.
        let ids: Vec<String> = tx.proposals().expect("the others read").into_iter().map(|p| p.id).collect();
        assert_eq!(ids, ["P-1"]);
        let err = tx.proposal("P-3").expect_err("a record under another id");
        assert_eq!(err.0, "the stored proposal `P-3` is corrupt: its record has the id `P-9`");
        assert!(tx.proposal("P-1").expect("the others still read").is_some());
        assert!(tx.rules().expect("the others read").is_empty());
        let err = tx.budget("Purchases").expect_err("corrupt");
        assert_eq!(err.0, "the spending of the budget `Purchases` is corrupt: it is -1");
        let err = tx.reservation("A-1").expect_err("corrupt");
        assert!(err.0.starts_with("cannot read the reservation of `A-1`"), "{err}");
        let err = tx.lease("job-9").expect_err("corrupt");
        assert!(err.0.starts_with("the stored lease `job-9` is corrupt: "), "{err}");
        assert_eq!(tx.lease("job-1").expect("another key reads"), None);
        drop(tx);
        let unreadable = store.unreadable_records().expect("scan");
        assert_eq!(unreadable.len(), 4, "{unreadable:?}");
        assert!(unreadable[3].starts_with("the stored lease `job-9` is corrupt"), "{unreadable:?}");
        assert!(unreadable[0].starts_with("the stored proposal `P-2` is corrupt"), "{unreadable:?}");
        assert_eq!(unreadable[1], "the stored proposal `P-3` is corrupt: its record has the id `P-9`");
        assert!(unreadable[2].starts_with("the stored standing rule `R-1` is corrupt"), "{unreadable:?}");
    }

    #[test]
    fn values_sqlite_cannot_hold_are_refused() {
        let store = SqliteStore::open_in_memory().expect("open");
        let mut tx = store.begin().expect("begin");
        let err = tx.put_budget(&BudgetRecord { spent: u64::MAX, ..budget() }).expect_err("too large");
        assert_eq!(err.0, format!("the spending of the budget `Purchases` is {}: too large to store", u64::MAX));
        let err = tx.put_reservation(&reservation("P-1", u64::MAX)).expect_err("too large");
        assert!(err.0.contains("too large to store"), "{err}");
    }

    #[test]
    fn a_version_2_file_gains_the_tables_of_3_4_and_5() {
        let dir = TempDir::new("migrate-2-3");
        write_v1(&dir.db(), &[proposal(1, None, Some(grant(Basis::Operator)))]);
        {
            // A version-2 file: version 1's tables, grants with a basis.
            let store = {
                let conn = Connection::open(dir.db()).expect("open");
                conn.execute(
                    "UPDATE proposals SET record = ?1",
                    [serde_json::to_string(&proposal(1, None, Some(grant(Basis::Operator)))).expect("encode")],
                )
                .expect("update");
                conn.pragma_update(None, "user_version", 2).expect("version 2");
                drop(conn);
                SqliteStore::open(&dir.db()).expect("open and migrate")
            };
            assert_eq!(store.schema_version().expect("version"), SqliteStore::SCHEMA_VERSION);
            let mut tx = store.begin().expect("begin");
            assert_eq!(tx.proposal("P-1").expect("read"), Some(proposal(1, None, Some(grant(Basis::Operator)))));
            tx.put_run(&run(1, "tok-1")).expect("the new table");
            tx.commit().expect("commit");
        }
        let store = SqliteStore::open(&dir.db()).expect("reopen");
        let mut tx = store.begin().expect("begin");
        assert_eq!(tx.run("A-1").expect("read"), Some(run(1, "tok-1")));
    }

    /// Migration 4 → 5 (spec §6 "Per task"): the reservations held before are tagged with their holder's
    /// operation key (a proposal, or a claimed alone run); one with no record to trace stays untagged; no
    /// task has spent anything yet, and the budget's total is unchanged.
    #[test]
    fn a_version_4_file_gains_reservations_by_task() {
        let dir = TempDir::new("migrate-4-5");
        {
            let conn = Connection::open(dir.db()).expect("open");
            conn.execute_batch(SqliteStore::SCHEMA_V1)
                .and_then(|()| conn.execute_batch(SCHEMA_V3_ADDS))
                .and_then(|()| conn.execute_batch(SCHEMA_V4_ADDS))
                .expect("the version-4 schema");
            conn.pragma_update(None, "user_version", 4).expect("version 4");
            let p = proposal(1, None, Some(grant(Basis::Operator)));
            conn.execute(
                "INSERT INTO proposals (id, operation_key, fingerprint, tool, subject, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![p.id, p.operation_key, p.fingerprint, p.tool, p.subject, serde_json::to_string(&p).expect("encode")],
            )
            .expect("a proposal");
            let mut r = run(1, "tok-1");
            r.operation_key = "order-7".into();
            conn.execute(
                "INSERT INTO runs (id, token, record) VALUES ('A-1', 'tok-1', ?1)",
                [serde_json::to_string(&r).expect("encode")],
            )
            .expect("a run");
            conn.execute_batch(
                "INSERT INTO budgets VALUES ('Purchases', 100000, 2500);
                 INSERT INTO reservations VALUES ('P-1', 'Purchases', 700, 1700000200);
                 INSERT INTO reservations VALUES ('A-1', 'Purchases', 200, 1700000200);
                 INSERT INTO reservations VALUES ('A-2', 'Purchases', 100, 1700000200);",
            )
            .expect("reservations of version 4");
        }
        let store = SqliteStore::open(&dir.db()).expect("open and migrate");
        assert_eq!(store.schema_version().expect("version"), SqliteStore::SCHEMA_VERSION);
        let mut tx = store.begin().expect("begin");
        // Migration 5 → 6 filled the list columns from the record: the proposal is on its requester's list.
        let query = ProposalQuery {
            status: Some(Status::Granted),
            deciders: Some(crate::store::DeciderQuery {
                direct: vec!["requester:Mia".into()],
                shared: vec![],
                person: "Mia".into(),
                own_requests: false,
            }),
            ..ProposalQuery::default()
        };
        let page = tx.proposal_page(&query, 0, 10).expect("a page");
        assert_eq!((page.total, page.proposals.len()), (1, 1));
        assert_eq!(tx.reservation("P-1").expect("read").and_then(|r| r.task).as_deref(), Some("order-1"));
        assert_eq!(tx.reservation("A-1").expect("read").and_then(|r| r.task).as_deref(), Some("order-7"));
        assert_eq!(tx.reservation("A-2").expect("read").map(|r| r.task), Some(None), "nothing to trace it to");
        assert_eq!(tx.reserved_for_task("Purchases", "order-1").expect("sum"), 700);
        assert_eq!(tx.reserved_for_task("Purchases", "order-7").expect("sum"), 200);
        assert_eq!(tx.reserved_total("Purchases").expect("sum"), 1_000);
        assert_eq!(tx.task_spent("Purchases", "order-1").expect("read"), 0);
        assert_eq!(tx.budget("Purchases").expect("read"), Some(budget()));
    }

    /// Migration 5 → 6: the list columns are filled from the records; a record that does not decode keeps
    /// them empty and stops nothing (it is listed nowhere, as before, and reported as unreadable).
    #[test]
    fn a_version_5_file_gains_the_list_columns_and_a_corrupt_record_stops_nothing() {
        let dir = TempDir::new("migrate-5-6");
        {
            let conn = Connection::open(dir.db()).expect("open");
            conn.execute_batch(SqliteStore::SCHEMA_V1)
                .and_then(|()| conn.execute_batch(SCHEMA_V3_ADDS))
                .and_then(|()| conn.execute_batch(SCHEMA_V4_ADDS))
                .and_then(|()| conn.execute_batch(SCHEMA_V5_ADDS))
                .expect("the version-5 schema");
            conn.pragma_update(None, "user_version", 5).expect("version 5");
            for n in 1..=3 {
                let mut p = proposal(n, None, None);
                p.decider.route = crate::table::Route::Role("Finance".into());
                let text =
                    if n == 2 { "{\"id\": \"P-2\"".to_string() } else { serde_json::to_string(&p).expect("encode") };
                conn.execute(
                    "INSERT INTO proposals (id, operation_key, fingerprint, tool, subject, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![p.id, p.operation_key, p.fingerprint, p.tool, p.subject, text],
                )
                .expect("a proposal");
            }
        }
        let store = SqliteStore::open(&dir.db()).expect("open and migrate");
        assert_eq!(store.schema_version().expect("version"), SqliteStore::SCHEMA_VERSION);
        let mut tx = store.begin().expect("begin");
        let query = ProposalQuery {
            status: Some(Status::Waiting),
            deciders: Some(crate::store::DeciderQuery {
                direct: vec![],
                shared: vec!["role:Finance".into()],
                person: "Noor".into(),
                own_requests: false,
            }),
            ..ProposalQuery::default()
        };
        let page = tx.proposal_page(&query, 0, 10).expect("a page");
        let ids: Vec<&str> = page.proposals.iter().map(|p| p.id.as_str()).collect();
        assert_eq!((ids, page.total), (vec!["P-3", "P-1"], 2));
        drop(tx);
        assert_eq!(store.unreadable_records().expect("read").len(), 1);
        let conn = store.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let decider: Option<String> =
            conn.query_row("SELECT decider FROM proposals WHERE id = 'P-1'", [], |r| r.get(0)).expect("read");
        assert_eq!(decider.as_deref(), Some("role:Finance"));
    }

    #[test]
    fn the_sync_setting_is_set_and_read_back() {
        let dir = TempDir::new("sync");
        let store = SqliteStore::open(&dir.db()).expect("open");
        assert_eq!(store.journal_mode().expect("journal"), "wal");
        let read = |s: &SqliteStore| -> i64 {
            let conn = s.conn.lock().unwrap_or_else(PoisonError::into_inner);
            conn.pragma_query_value(None, "synchronous", |row| row.get(0)).expect("read")
        };
        assert_eq!(read(&store), 1, "open sets NORMAL");
        assert_eq!(store.set_synchronous(Synchronous::Full).expect("full"), Synchronous::Full);
        assert_eq!(read(&store), 2);
        assert_eq!(store.set_synchronous(Synchronous::Normal).expect("normal"), Synchronous::Normal);
        assert_eq!(read(&store), 1);
    }

    #[test]
    fn sqlite_store_is_a_runtime_store() {
        fn store_for_runtime<S: Store + Send + Sync + 'static>(_: &S) {}
        store_for_runtime(&SqliteStore::open_in_memory().expect("open"));
    }
}
