//! When long work says in the log how far it is (O-5): once per tenth of each phase, so a
//! log shows a clone or an index build moving without a line per object or file; and nothing
//! in its first seconds, so short work (a fetch of a few hundred milliseconds) logs no
//! progress at all, only its caller's one line when it is done.

use std::time::{Duration, Instant};

/// How long work runs before its progress is logged.
pub const QUIET_START: Duration = Duration::from_secs(2);

/// Remembers the last tenth logged of the current phase, and when the work started.
#[derive(Debug)]
pub struct TenthLog {
    started: Instant,
    phase: String,
    logged: u64,
}

impl Default for TenthLog {
    /// A log for work starting now.
    fn default() -> Self {
        Self {
            started: Instant::now(),
            phase: String::new(),
            logged: 0,
        }
    }
}

impl TenthLog {
    /// Whether `done` of `total` in `phase` reached a tenth not yet logged (a new phase
    /// starts over) and the work has run [`QUIET_START`]. A phase of 0 units counts as
    /// complete. Tenths reached in the quiet start count as logged, so the first line after
    /// it is the next new tenth, not a burst of the ones passed.
    pub fn crossed(&mut self, phase: &str, done: u64, total: u64) -> bool {
        self.crossed_at(phase, done, total, Instant::now())
    }

    fn crossed_at(&mut self, phase: &str, done: u64, total: u64, now: Instant) -> bool {
        if phase != self.phase {
            phase.clone_into(&mut self.phase);
            self.logged = 0;
        }
        let tenth = (done.saturating_mul(10)).checked_div(total).unwrap_or(10);
        if tenth > self.logged {
            self.logged = tenth;
            now.duration_since(self.started) >= QUIET_START
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// O-5: after the quiet start, one line per tenth and phase, none at the start, one for
    /// an empty phase.
    #[test]
    fn o5_logs_each_tenth_of_each_phase_once() {
        let mut log = TenthLog::default();
        let later = log.started + QUIET_START;
        let hits = |log: &mut TenthLog, phase: &str, total: u64| {
            (0..=total)
                .filter(|&d| log.crossed_at(phase, d, total, later))
                .count()
        };
        assert_eq!(hits(&mut log, "Counting objects", 1000), 10);
        assert_eq!(hits(&mut log, "Counting objects", 1000), 0);
        assert_eq!(hits(&mut log, "Receiving objects", 3), 3);
        assert_eq!(hits(&mut log, "Resolving deltas", 0), 1);
    }

    /// Issue 34 point 11: work shorter than the quiet start logs no progress; work that
    /// outlasts it goes on from the next tenth, without repeating the ones it passed.
    #[test]
    fn short_work_logs_no_progress() {
        let mut log = TenthLog::default();
        let soon = log.started + Duration::from_millis(150);
        let logged = (0..=1000)
            .filter(|&d| log.crossed_at("Receiving objects", d, 1000, soon))
            .count();
        assert_eq!(logged, 0);

        let mut log = TenthLog::default();
        let (soon, later) = (log.started, log.started + QUIET_START);
        assert!(!log.crossed_at("indexing", 300, 1000, soon));
        assert!(!log.crossed_at("indexing", 350, 1000, later));
        assert!(log.crossed_at("indexing", 400, 1000, later));
    }
}
