//! Set-up shared by the cluster-mode tests (issue 31): each replica is a store on a data
//! directory of its own over one real PostgreSQL database (`metadb::testing`), every test
//! runs under a bound of its own, and what background work does is polled for.

use gitstore::{DEFAULT_RETENTION, GitStore, Metadata, StoreConfig, SystemClock};
use service::Membership;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Runs `test` on a runtime of four workers on its own thread and fails it if it takes
/// longer than `limit`.
pub fn bounded<F, Fut>(limit: Duration, test: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    bounded_on(4, limit, test);
}

/// [`bounded`] on a runtime of `workers` worker threads.
pub fn bounded_on<F, Fut>(workers: usize, limit: Duration, test: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let (done, finished) = mpsc::channel();
    // The test runs on a thread of its own so that one that hangs is reported, not waited for.
    let handle = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(test());
        let _ = done.send(());
    });
    match finished.recv_timeout(limit) {
        Ok(()) => handle.join().expect("test thread"),
        Err(RecvTimeoutError::Disconnected) => {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(RecvTimeoutError::Timeout) => panic!("the test did not finish within {limit:?}"),
    }
}

/// Polls `check` until it holds and answers how long that took; fails after `within`,
/// saying what it waited for.
pub async fn eventually(what: &str, within: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < within,
            "gave up after {within:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

/// The URL of a fresh database on the shared test server: a cluster of its own.
pub fn fresh_database() -> String {
    metadb::testing::shared().create_database()
}

/// Metadata in the database at `url`, over a connection of its own (one a replica).
pub fn postgres(url: &str) -> Metadata {
    let db = metadb::Database::connect(url, metadb::Options::default())
        .expect("connect to the test database");
    Metadata::Postgres(db)
}

/// A store on the data directory `data_dir` over `metadata`, on the system clock.
pub fn open_store(data_dir: PathBuf, metadata: Metadata) -> GitStore {
    GitStore::open_with(
        StoreConfig {
            data_dir,
            retention: DEFAULT_RETENTION,
        },
        Arc::new(SystemClock),
        metadata,
    )
    .expect("open store")
}

/// What a stub placement reports of the cluster: the database reachable, not draining.
pub fn reachable() -> Membership {
    Membership {
        members: Vec::new(),
        database_reachable: true,
        draining: false,
    }
}
