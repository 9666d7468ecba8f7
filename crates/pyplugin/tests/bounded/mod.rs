//! A time bound for tests whose failure mode is a hang: a hang fails the test instead of
//! stalling the run.
#![allow(dead_code)]

use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// Runs `f` on a thread of its own and fails the test if it has not finished within `limit`.
/// A panic in `f` fails the test with its own message. A thread that hangs is left behind;
/// the test binary still ends when its tests have.
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
