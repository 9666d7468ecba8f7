//! Time bounds for tests whose failure mode is a hang (`within` and `eventually` are
//! `metadb::testing`'s, shared with the stores' tests; `abort_after` for Tokio tests), and
//! small helpers.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use metadb::testing::{eventually, within};

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

/// The password part of a URL `postgres://user:password@…`.
pub fn password_of(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let userinfo = rest.split_once('@').unwrap().0;
    userinfo.split_once(':').unwrap().1.to_owned()
}
