//! Time bounds for tests whose failure mode is a hang, and the cluster under test.
#![allow(dead_code)]

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use cluster::{ClusterConfig, Membership, NodeUrl};
use metadb::{Database, Options};

/// Runs `f` on a thread of its own and fails the test if it has not finished within `limit`.
/// A panic in `f` fails the test with its own message.
pub fn within<R: Send + 'static>(limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("bounded-test".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .unwrap();
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(RecvTimeoutError::Timeout) => panic!("the test did not finish within {limit:?}"),
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => panic!("the test thread ended without a result"),
        },
    }
}

/// Waits up to `limit` for `condition`, polling.
pub fn eventually(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < limit,
            "gave up waiting for {what} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

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
