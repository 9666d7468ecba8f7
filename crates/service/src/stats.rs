//! Query statistics of the base operations. Plugin enrichment will keep its own
//! figures (W-38); nothing else writes here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Counters of one operation.
#[derive(Debug, Default)]
pub struct OpStats {
    calls: AtomicU64,
    errors: AtomicU64,
    total_micros: AtomicU64,
    max_micros: AtomicU64,
}

impl OpStats {
    pub(crate) fn record(&self, started: Instant, ok: bool) {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.total_micros.fetch_add(micros, Ordering::Relaxed);
        self.max_micros.fetch_max(micros, Ordering::Relaxed);
    }

    fn snapshot(&self) -> OpSnapshot {
        OpSnapshot {
            calls: self.calls.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            total_micros: self.total_micros.load(Ordering::Relaxed),
            max_micros: self.max_micros.load(Ordering::Relaxed),
        }
    }
}

/// Counters of every base operation.
#[derive(Debug, Default)]
pub struct QueryStats {
    pub(crate) read: OpStats,
    pub(crate) read_many: OpStats,
    pub(crate) list: OpStats,
    pub(crate) resolve: OpStats,
}

impl QueryStats {
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            read: self.read.snapshot(),
            read_many: self.read_many.snapshot(),
            list: self.list.snapshot(),
            resolve: self.resolve.snapshot(),
        }
    }
}

/// A copy of one operation's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OpSnapshot {
    pub calls: u64,
    pub errors: u64,
    /// Sum of latencies (microseconds), for the mean.
    pub total_micros: u64,
    pub max_micros: u64,
}

/// A copy of all counters, e.g. for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    pub read: OpSnapshot,
    pub read_many: OpSnapshot,
    pub list: OpSnapshot,
    pub resolve: OpSnapshot,
}

impl StatsSnapshot {
    /// The operations by name, for exporters.
    pub fn by_operation(&self) -> [(&'static str, OpSnapshot); 4] {
        [
            ("read", self.read),
            ("read_many", self.read_many),
            ("list", self.list),
            ("resolve", self.resolve),
        ]
    }
}
