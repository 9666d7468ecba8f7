//! Time bounds for tests whose failure mode is a hang, and small helpers.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

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

/// For `#[tokio::test]`s, whose body blocks its runtime thread on purpose (no future timeout
/// could fire): aborts the test process if the returned guard is still alive after `limit`.
pub fn abort_after(limit: Duration, test: &'static str) -> AbortGuard {
    let done = Arc::new(AtomicBool::new(false));
    let watched = done.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < limit {
            if watched.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{test} did not finish within {limit:?}: aborting the test process");
        std::process::abort();
    });
    AbortGuard(done)
}

pub struct AbortGuard(Arc<AtomicBool>);

impl Drop for AbortGuard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
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
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The password part of a URL `postgres://user:password@…`.
pub fn password_of(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let userinfo = rest.split_once('@').unwrap().0;
    userinfo.split_once(':').unwrap().1.to_owned()
}
