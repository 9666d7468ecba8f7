//! How much one search may spend.

use std::time::Duration;

/// Time budget of one search (the regex engine is linear, but a corpus times a pattern that
/// matches everywhere can still take long).
pub const SEARCH_BUDGET: Duration = Duration::from_secs(20);
