//! When long work says in the log how far it is (O-5): once per tenth of each phase, so a
//! log shows a clone or an index build moving without a line per object or file.

/// Remembers the last tenth logged of the current phase.
#[derive(Debug, Default)]
pub struct TenthLog {
    phase: String,
    logged: u64,
}

impl TenthLog {
    /// Whether `done` of `total` in `phase` reached a tenth not yet logged (a new phase
    /// starts over). A phase of 0 units counts as complete.
    pub fn crossed(&mut self, phase: &str, done: u64, total: u64) -> bool {
        if phase != self.phase {
            phase.clone_into(&mut self.phase);
            self.logged = 0;
        }
        let tenth = (done.saturating_mul(10)).checked_div(total).unwrap_or(10);
        if tenth > self.logged {
            self.logged = tenth;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// O-5: one line per tenth and phase, none at the start, one for an empty phase.
    #[test]
    fn o5_logs_each_tenth_of_each_phase_once() {
        let mut log = TenthLog::default();
        let hits = |log: &mut TenthLog, phase: &str, total: u64| {
            (0..=total)
                .filter(|&d| log.crossed(phase, d, total))
                .count()
        };
        assert_eq!(hits(&mut log, "Counting objects", 1000), 10);
        assert_eq!(hits(&mut log, "Counting objects", 1000), 0);
        assert_eq!(hits(&mut log, "Receiving objects", 3), 3);
        assert_eq!(hits(&mut log, "Resolving deltas", 0), 1);
    }
}
