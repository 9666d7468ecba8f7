//! Counters and latency histograms of the service's work, kept as plain numbers so any
//! exporter can show them (`httpserver` renders them for Prometheus).
//!
//! Three families that are never mixed: the base queries (R-7: `read`, `read_many`,
//! `search`, `list`, `resolve`, `availability` and the history and navigation tools, each
//! timed without plugin enrichment), enrichment by repository plugins (W-38), and operator
//! and maintenance work (`prepare`, sync and index builds, O-4).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Upper bounds (microseconds) of the latency buckets: 50 µs to 10 s, roughly ×2.5 apart,
/// so both a cached read (tens of µs) and a cold clone (seconds) land in a bucket of their
/// own. Prometheus' `+Inf` bucket is the call count.
pub const LATENCY_BUCKETS_MICROS: [u64; 16] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000,
];

const BUCKETS: usize = LATENCY_BUCKETS_MICROS.len();

/// Counters and a latency histogram of one kind of work.
#[derive(Debug, Default)]
pub struct OpStats {
    calls: AtomicU64,
    errors: AtomicU64,
    total_micros: AtomicU64,
    max_micros: AtomicU64,
    /// Calls per bucket, not cumulative (one increment per call); the snapshot sums them.
    buckets: [AtomicU64; BUCKETS],
}

impl OpStats {
    /// Counts one call that began at `started`.
    pub(crate) fn record(&self, started: Instant, ok: bool) {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.total_micros.fetch_add(micros, Ordering::Relaxed);
        self.max_micros.fetch_max(micros, Ordering::Relaxed);
        if let Some(bucket) = LATENCY_BUCKETS_MICROS.iter().position(|&le| micros <= le) {
            self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn snapshot(&self) -> OpSnapshot {
        let mut buckets = [0; BUCKETS];
        let mut below = 0;
        for (cumulative, bucket) in buckets.iter_mut().zip(&self.buckets) {
            below += bucket.load(Ordering::Relaxed);
            *cumulative = below;
        }
        OpSnapshot {
            calls: self.calls.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            total_micros: self.total_micros.load(Ordering::Relaxed),
            max_micros: self.max_micros.load(Ordering::Relaxed),
            buckets,
        }
    }
}

/// Counters of everything the service times.
#[derive(Debug, Default)]
pub struct QueryStats {
    pub(crate) read: OpStats,
    pub(crate) read_many: OpStats,
    pub(crate) search: OpStats,
    pub(crate) list: OpStats,
    pub(crate) resolve: OpStats,
    pub(crate) availability: OpStats,
    pub(crate) log: OpStats,
    pub(crate) commit: OpStats,
    pub(crate) diff: OpStats,
    pub(crate) blame: OpStats,
    pub(crate) outline: OpStats,
    pub(crate) definitions: OpStats,
    pub(crate) references: OpStats,
    /// W-38: plugin enrichment of a `read`/`read_many`, timed apart from the base read.
    pub(crate) enrichment: OpStats,
    /// `prepare` calls, whole: their fetches and builds are counted under `sync` and
    /// `index_build` too.
    pub(crate) prepare: OpStats,
    /// Fetches of a repository (G-3), by any caller.
    pub(crate) sync: OpStats,
    /// Index builds that did work or failed (S-3); a build finding the index current is not
    /// counted.
    pub(crate) index_build: OpStats,
    /// The website's file views (issue 34): highlighted lines and raw bytes. Reads of a
    /// kind, but not the `read` tool: kept apart so page views and their cold highlighting
    /// do not blur the base queries' figures.
    pub(crate) highlight: OpStats,
    pub(crate) raw: OpStats,
}

impl QueryStats {
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            read: self.read.snapshot(),
            read_many: self.read_many.snapshot(),
            search: self.search.snapshot(),
            list: self.list.snapshot(),
            resolve: self.resolve.snapshot(),
            availability: self.availability.snapshot(),
            log: self.log.snapshot(),
            commit: self.commit.snapshot(),
            diff: self.diff.snapshot(),
            blame: self.blame.snapshot(),
            outline: self.outline.snapshot(),
            definitions: self.definitions.snapshot(),
            references: self.references.snapshot(),
            enrichment: self.enrichment.snapshot(),
            prepare: self.prepare.snapshot(),
            sync: self.sync.snapshot(),
            index_build: self.index_build.snapshot(),
            highlight: self.highlight.snapshot(),
            raw: self.raw.snapshot(),
        }
    }
}

/// A copy of one kind of work's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OpSnapshot {
    pub calls: u64,
    pub errors: u64,
    /// Sum of latencies (microseconds), for the mean.
    pub total_micros: u64,
    pub max_micros: u64,
    /// Calls that took at most the matching [`LATENCY_BUCKETS_MICROS`] bound (cumulative, as
    /// Prometheus histograms count).
    pub buckets: [u64; BUCKETS],
}

/// A copy of all counters, e.g. for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    pub read: OpSnapshot,
    pub read_many: OpSnapshot,
    pub search: OpSnapshot,
    pub list: OpSnapshot,
    pub resolve: OpSnapshot,
    pub availability: OpSnapshot,
    pub log: OpSnapshot,
    pub commit: OpSnapshot,
    pub diff: OpSnapshot,
    pub blame: OpSnapshot,
    pub outline: OpSnapshot,
    pub definitions: OpSnapshot,
    pub references: OpSnapshot,
    pub enrichment: OpSnapshot,
    /// Operator actions; not a base query.
    pub prepare: OpSnapshot,
    pub sync: OpSnapshot,
    pub index_build: OpSnapshot,
    /// The website's highlighted file views (not a base query).
    pub highlight: OpSnapshot,
    /// The website's raw file views (not a base query).
    pub raw: OpSnapshot,
}

impl StatsSnapshot {
    /// The base operations by name, for exporters. Enrichment and maintenance are
    /// the other fields, never part of this list.
    pub fn by_operation(&self) -> [(&'static str, OpSnapshot); 13] {
        [
            ("read", self.read),
            ("read_many", self.read_many),
            ("search", self.search),
            ("list", self.list),
            ("resolve", self.resolve),
            ("availability", self.availability),
            ("log", self.log),
            ("commit", self.commit),
            ("diff", self.diff),
            ("blame", self.blame),
            ("outline", self.outline),
            ("definitions", self.definitions),
            ("references", self.references),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// every call lands in exactly one bucket; the snapshot is cumulative and its last
    /// bucket never exceeds the call count (slower calls only reach `+Inf`).
    #[test]
    fn r7_histogram_is_cumulative() {
        let stats = OpStats::default();
        stats.record(Instant::now(), true);
        let slow = Instant::now()
            .checked_sub(Duration::from_millis(30))
            .unwrap_or_else(Instant::now);
        stats.record(slow, false);
        let snap = stats.snapshot();
        assert_eq!((snap.calls, snap.errors), (2, 1));
        let at = |bound: u64| {
            snap.buckets[LATENCY_BUCKETS_MICROS
                .iter()
                .position(|&b| b == bound)
                .unwrap()]
        };
        assert!(at(25_000) <= 1, "{snap:?}");
        assert_eq!(at(50_000), 2, "{snap:?}");
        assert!(snap.buckets.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(snap.buckets[BUCKETS - 1], 2);
    }
}
