//! The cluster under test, and the time bounds for tests whose failure mode is a hang
//! (`within` and `eventually`, `metadb::testing`'s, shared with the stores' tests).
#![allow(dead_code)]

use std::time::Duration;

use cluster::{ClusterConfig, Membership, NodeUrl};
use metadb::{Database, Options};

pub use metadb::testing::{eventually, within};

pub fn url(text: &str) -> NodeUrl {
    NodeUrl::parse(text).unwrap()
}

/// A replica's own database handle, as the binary gives the membership.
pub fn database(url: &str) -> Database {
    Database::connect(
        url,
        Options {
            connections: 1,
            ..Options::default()
        },
    )
    .unwrap()
}

/// How long a member of [`fast`] settings stays alive without a heartbeat.
pub const FAST_LEASE: Duration = Duration::from_millis(800);

/// Settings with a short heartbeat and lease, so deaths show within a second or so (the lease
/// is eight heartbeats, so a busy test machine does not make members look dead).
pub fn fast(node: &str) -> ClusterConfig {
    ClusterConfig {
        heartbeat_every: Duration::from_millis(100),
        lease: FAST_LEASE,
        ..ClusterConfig::new(url(node))
    }
}

/// Settings whose heartbeats are far apart: whatever a view learns within a second it learned
/// from a notification.
pub fn slow(node: &str) -> ClusterConfig {
    ClusterConfig {
        heartbeat_every: Duration::from_secs(20),
        lease: Duration::from_secs(60),
        ..ClusterConfig::new(url(node))
    }
}

pub fn join(database_url: &str, config: ClusterConfig) -> Membership {
    Membership::join(database(database_url), config).unwrap()
}

pub fn urls(list: &[NodeUrl]) -> Vec<&str> {
    list.iter().map(NodeUrl::as_str).collect()
}

/// 200 repository names.
pub fn sample() -> Vec<String> {
    (0..200)
        .map(|i| format!("github.com/org{}/repo-{i}", i % 7))
        .collect()
}
