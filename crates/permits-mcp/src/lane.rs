//! The local gateway's own lane for `alone` calls (`permitc mcp proxy --store FILE --table TABLE`; issue
//! #19's latency): the proxy already runs the private `permitd` on the store file, so it is inside the
//! store's trust boundary (spec §5a "Who may touch the store") and may run the alone calls on the store
//! itself — decided, claimed and confirmed in one durable transaction ([`Runtime::claim_if_alone`]), the
//! receipt recorded after the answer — instead of a loopback HTTP round trip to `permitd` for each. What it
//! records is what `POST /v1/calls` and the receipt record (the same runtime, table and store; the same
//! audit events, also appended to the service's audit copy beside the store). Every call that is not alone
//! leaves the store untouched here and goes to the service as before (a proposal is made, announced and
//! decided in its inbox), and so does everything when the lane cannot be used: a table the store no longer
//! has as its current one (the person reloaded `permitd`), a store error.
//!
//! Only for a store the proxy started `permitd` on with the key it minted: a `--key` given with `--store`
//! limits the agents the calls may be made as, which only the service checks, and a PostgreSQL store is
//! reached through the service.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use permits_runtime::table::Table;
use permits_runtime::{
    AdmittedRead, AloneClaim, AuditEvent, AuditSink, Authority, Checkpoints, Claimed, Claiming, Principal,
    ProposalRequest, RunOutcome, Runtime, RuntimeError, SqliteStore, Synchronous, Syncing,
};
use serde_json::Value;

/// Where the lane works: the table `permitd` was started with, its store and its audit copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneOptions {
    /// The compiled table (the file `permitd serve --table` read).
    pub table: PathBuf,
    /// The SQLite store file.
    pub store: PathBuf,
    /// The service's audit copy (JSON lines; `permitd serve`'s default is the store's path with
    /// `.audit.jsonl` appended).
    pub audit: PathBuf,
    /// When a commit reaches the disk (`permitd serve --sync`): [`Synchronous::Group`] unless the user
    /// chose otherwise. With [`Synchronous::Normal`] a claim is never waited for.
    pub sync: Synchronous,
}

impl LaneOptions {
    /// The options for `permitd serve --table TABLE --store STORE` with its default audit copy.
    pub fn beside(table: &Path, store: &Path) -> LaneOptions {
        let mut audit = store.as_os_str().to_owned();
        audit.push(".audit.jsonl");
        LaneOptions {
            table: table.to_path_buf(),
            store: store.to_path_buf(),
            audit: PathBuf::from(audit),
            sync: Synchronous::Group,
        }
    }
}

/// What the lane answers for a call.
#[derive(Debug)]
pub enum Laned<'l> {
    /// Alone: claimed and confirmed (`sending`, or what a retry with the same token finds); run it, wait
    /// for the claim's [`Syncing`] before the answer goes to the agent (still running only for a tool that
    /// only reads: [`Runtime::claim_if_alone_syncing`]), and report its receipt with [`Lane::receipt`].
    Alone(Box<Claimed>, Syncing),
    /// Alone, a tool that only reads: decided and admitted, the store's write lock still held. Send the
    /// call now without waiting (the pipe takes it whole, or it waits until after the claim), then
    /// [`Lane::claim`] it at once; its answer waits for the claim's [`Syncing`]
    /// ([`Runtime::claim_if_alone_sending`]).
    Admitted(Box<AdmittedRead<'l>>),
    /// Not alone, or the lane cannot be used: nothing was recorded; make the call through the service.
    Service,
    /// The runtime refused the claim (recorded): the refusal's stable code (`claimed`, `budget`, …, as the
    /// service's error codes) and its message.
    Refused {
        /// The refusal's code.
        code: String,
        /// The message.
        message: String,
    },
}

/// The lane: a runtime on the store, while it can be used.
pub struct Lane {
    rt: Runtime,
    on: AtomicBool,
}

/// The runtime's host permissions in the lane: none are asked (the gateway confirms its own claims, as the
/// service's host does with `"confirm": true`); a closure-based run would fail closed.
struct GatewayConfirms;

impl Authority for GatewayConfirms {
    fn admits(&self, _: Principal<'_>, _: &str, _: &Value) -> Result<(), String> {
        Err("the gateway confirms each claim itself".into())
    }
}

/// The service's audit copy, appended to by this process too: each event one `write` of its line (the file
/// is opened to append, so the lines of the two processes never interleave within a line).
struct AppendedCopy(Mutex<File>);

impl AuditSink for AppendedCopy {
    fn record(&self, event: &AuditEvent) {
        let Ok(mut line) = serde_json::to_string(event) else { return };
        line.push('\n');
        let mut file = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Recording must not fail the action (`AuditSink`): the store's chain is the record.
        let _ = file.write_all(line.as_bytes());
    }
}

impl Lane {
    /// Opens the store with the table: claims synced as `permitd serve`'s default `--sync group` does
    /// (a tool that only reads runs while its claim syncs, [`Runtime::claim_if_alone_syncing`]; or as
    /// `options.sync` says), receipts
    /// synced with the next claim or once the store is quiet ([`Runtime::record_outcome_lazily`]), and
    /// checkpoints run while no call comes ([`Checkpoints::WhenQuiet`]).
    ///
    /// Errors: a table that does not load, a store or an audit copy that cannot be opened, as text.
    pub fn open(options: &LaneOptions) -> Result<Lane, String> {
        let table = Table::load_path(&options.table).map_err(|e| e.to_string())?;
        let store = SqliteStore::open(&options.store).map_err(|e| e.to_string())?;
        store.set_synchronous(options.sync).map_err(|e| e.to_string())?;
        // No call waits for a checkpoint: they run while no call comes (an agent's calls come with pauses).
        store.set_checkpoints(Checkpoints::WhenQuiet).map_err(|e| e.to_string())?;
        let copy = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&options.audit)
            .map_err(|e| format!("cannot open the audit copy `{}`: {e}", options.audit.display()))?;
        let rt = Runtime::new(table, GatewayConfirms).with_store(store).with_audit(AppendedCopy(Mutex::new(copy)));
        Ok(Lane { rt, on: AtomicBool::new(true) })
    }

    /// Whether the lane is still used.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    fn off(&self, why: &str) {
        if self.on.swap(false, Ordering::SeqCst) {
            crate::proxy::log(&format!("alone calls go through the approval service from now on: {why}"));
        }
    }

    /// Decides `request` and, when it is alone, claims and confirms its run under `token`
    /// ([`Runtime::claim_if_alone_sending`]: a tool that only reads is admitted, sent, then claimed, and
    /// runs while the claim syncs).
    pub fn call(&self, request: ProposalRequest, token: &str) -> Laned<'_> {
        if !self.is_on() {
            return Laned::Service;
        }
        match self.rt.claim_if_alone_sending(request, token, Claiming::ClaimAndConfirm) {
            Ok(AloneClaim::Claimed(claimed, syncing)) => Laned::Alone(claimed, syncing),
            Ok(AloneClaim::Admitted(admitted)) => Laned::Admitted(admitted),
            Ok(AloneClaim::NotAlone) => Laned::Service,
            Err(RuntimeError::Refused { refusal, message }) => Laned::Refused { code: refusal.code(), message },
            Err(e) => {
                // The store's current table is not this one (the service was reloaded), or the store
                // failed: nothing was claimed; the service answers from now on.
                self.off(&e.to_string());
                Laned::Service
            }
        }
    }

    /// Writes and commits the claim of a read the lane admitted ([`Laned::Admitted`], [`AdmittedRead::claim`]),
    /// the call sent or about to be: its run (`sending`, confirmed) and the sync its answer waits for. A
    /// failure turns the lane off.
    ///
    /// Errors: the store's, as text: nothing was recorded, so the answer must be withheld.
    pub fn claim(&self, admitted: Box<AdmittedRead<'_>>) -> Result<(Claimed, Syncing), String> {
        admitted.claim().map_err(|e| {
            self.off(&e.to_string());
            e.to_string()
        })
    }

    /// Waits for a claim's sync ([`Laned::Alone`]) before its answer goes to the agent; a failed sync turns
    /// the lane off (the store refuses every later commit).
    ///
    /// Errors: the sync failed: the claim may be lost to a power loss, so the answer must be withheld.
    pub fn durable(&self, syncing: Syncing) -> Result<(), String> {
        syncing.wait().map_err(|e| {
            self.off(&e.to_string());
            e.to_string()
        })
    }

    /// Records the outcome of a run the lane claimed, after its answer went to the agent: the commit does
    /// not wait for its sync ([`Runtime::record_outcome_lazily`]; durable with the next claim, or once the
    /// store is quiet).
    ///
    /// Errors: the runtime's refusal or the store's error, as text.
    pub fn receipt(&self, id: &str, token: &str, outcome: RunOutcome) -> Result<(), String> {
        self.rt.record_outcome_lazily(id, token, outcome).map(|_| ()).map_err(|e| e.to_string())
    }
}
