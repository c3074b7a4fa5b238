//! Time, from an injectable clock (spec §5: "time comes from an injectable clock, so tests control expiry").

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of the current time, in whole seconds since the Unix epoch.
///
/// The runtime reads it for every expiry (proposals, grants) and stamps every record and audit event with it.
pub trait Clock {
    /// The current time, in seconds since the Unix epoch.
    fn now(&self) -> u64;
}

/// The system's wall clock. A clock set before the epoch reads as 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
    }
}

/// A clock that only moves when told to, for tests and simulations. Clones share the same time, so a test
/// keeps one clone and hands the other to the runtime.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock that reads `seconds` (since the Unix epoch) until it is moved.
    pub fn at(seconds: u64) -> ManualClock {
        ManualClock { now: Arc::new(AtomicU64::new(seconds)) }
    }

    /// Sets the time, in seconds since the Unix epoch.
    pub fn set(&self, seconds: u64) {
        self.now.store(seconds, Ordering::SeqCst);
    }

    /// Moves the time forward by `seconds` (saturating).
    pub fn advance(&self, seconds: u64) {
        let _ = self.now.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| Some(t.saturating_add(seconds)));
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}
