//! The clock behind retention (G-4: "retention time comes from an injectable clock").

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of "now".
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to; for tests of retention.
#[derive(Debug, Clone)]
pub struct ManualClock {
    secs: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: SystemTime) -> Self {
        let secs = start
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        Self {
            secs: Arc::new(AtomicU64::new(secs)),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.secs.fetch_add(by.as_secs(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.secs.load(Ordering::SeqCst))
    }
}
