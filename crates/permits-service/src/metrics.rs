//! `/metrics` in Prometheus' text format: requests by route and status, decisions by level, proposals by
//! status, budgets' reservations, the time of each runtime operation (its store transactions included), and
//! table reloads.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use permits_runtime::BudgetStatus;
use permits_runtime::table::Level;

/// The upper bounds of the runtime-operation histogram, in seconds.
const BUCKETS: [f64; 10] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0];

/// The service's counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    decisions: [AtomicU64; 4],
    operations: [AtomicU64; BUCKETS.len() + 1],
    operation_nanos: AtomicU64,
    reloads: Mutex<BTreeMap<&'static str, u64>>,
    version_checks: Mutex<BTreeMap<&'static str, u64>>,
}

fn level_index(level: Level) -> usize {
    match level {
        Level::Alone => 0,
        Level::Propose => 1,
        Level::ProposeEveryTime => 2,
        Level::Never => 3,
    }
}

impl Metrics {
    pub(crate) fn request(&self, route: &str, status: u16) {
        *self
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((route.to_string(), status))
            .or_insert(0) += 1;
    }

    pub(crate) fn decision(&self, level: Level) {
        self.decisions[level_index(level)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn operation(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BUCKETS.iter().position(|b| seconds <= *b).unwrap_or(BUCKETS.len());
        self.operations[bucket].fetch_add(1, Ordering::Relaxed);
        self.operation_nanos.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub(crate) fn reload(&self, outcome: &'static str) {
        *self.reloads.lock().unwrap_or_else(PoisonError::into_inner).entry(outcome).or_insert(0) += 1;
    }

    /// A version URL asked at approval: `same`, `changed` or `unanswered`.
    pub(crate) fn version_check(&self, outcome: &'static str) {
        *self.version_checks.lock().unwrap_or_else(PoisonError::into_inner).entry(outcome).or_insert(0) += 1;
    }

    /// The text of `/metrics`, with the proposals by status and the budgets read just now.
    pub(crate) fn render(
        &self,
        proposals: &BTreeMap<String, u64>,
        budgets: &[BudgetStatus],
        audit_failures: u64,
    ) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP permits_requests_total HTTP requests answered, by route and status.");
        let _ = writeln!(out, "# TYPE permits_requests_total counter");
        for ((route, status), n) in self.requests.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = writeln!(out, "permits_requests_total{{route=\"{}\",status=\"{status}\"}} {n}", escape(route));
        }
        let _ = writeln!(out, "# HELP permits_decisions_total Calls decided (decide and call), by level.");
        let _ = writeln!(out, "# TYPE permits_decisions_total counter");
        for level in [Level::Alone, Level::Propose, Level::ProposeEveryTime, Level::Never] {
            let n = self.decisions[level_index(level)].load(Ordering::Relaxed);
            let _ = writeln!(out, "permits_decisions_total{{level=\"{level}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP permits_proposals Proposals in the store, by status.");
        let _ = writeln!(out, "# TYPE permits_proposals gauge");
        for (status, n) in proposals {
            let _ = writeln!(out, "permits_proposals{{status=\"{status}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP permits_budget_reserved Held for granted, unsent spends, in the budget's minor unit."
        );
        let _ = writeln!(out, "# TYPE permits_budget_reserved gauge");
        for b in budgets {
            let _ = writeln!(out, "permits_budget_reserved{{budget=\"{}\"}} {}", escape(&b.name), b.reserved);
        }
        let _ = writeln!(out, "# HELP permits_budget_spent Spent, in the budget's minor unit.");
        let _ = writeln!(out, "# TYPE permits_budget_spent gauge");
        for b in budgets {
            let _ = writeln!(out, "permits_budget_spent{{budget=\"{}\"}} {}", escape(&b.name), b.spent);
        }
        let _ = writeln!(
            out,
            "# HELP permits_store_operation_seconds Runtime operations on the blocking pool, store transactions included."
        );
        let _ = writeln!(out, "# TYPE permits_store_operation_seconds histogram");
        let mut cumulative = 0;
        for (i, bound) in BUCKETS.iter().enumerate() {
            cumulative += self.operations[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "permits_store_operation_seconds_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.operations[BUCKETS.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "permits_store_operation_seconds_bucket{{le=\"+Inf\"}} {cumulative}");
        let nanos = self.operation_nanos.load(Ordering::Relaxed);
        let _ = writeln!(out, "permits_store_operation_seconds_sum {}", nanos as f64 / 1e9);
        let _ = writeln!(out, "permits_store_operation_seconds_count {cumulative}");
        let _ = writeln!(out, "# HELP permits_table_reloads_total Table installs asked for, by outcome.");
        let _ = writeln!(out, "# TYPE permits_table_reloads_total counter");
        for (outcome, n) in self.reloads.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = writeln!(out, "permits_table_reloads_total{{outcome=\"{outcome}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP permits_version_checks_total Version URLs asked when a person approved, by outcome (same, changed, unanswered)."
        );
        let _ = writeln!(out, "# TYPE permits_version_checks_total counter");
        for (outcome, n) in self.version_checks.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = writeln!(out, "permits_version_checks_total{{outcome=\"{outcome}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP permits_audit_write_failures_total Audit events that could not be written to the log file."
        );
        let _ = writeln!(out, "# TYPE permits_audit_write_failures_total counter");
        let _ = writeln!(out, "permits_audit_write_failures_total {audit_failures}");
        out
    }
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
