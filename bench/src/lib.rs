//! Shared parts of the benchmarks (each benchmark is a binary under `src/bin/`).

pub mod corpus;

use std::time::Duration;

/// The `p` quantile (0.0..=1.0) of `times`, nearest rank; sorts them. `times` must not be
/// empty.
pub fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort_unstable();
    times[((times.len() - 1) as f64 * p).round() as usize]
}
