//! Cluster mode (issue 31, behaviour 4): an owner whose mirror lacks the head another
//! replica's sync recorded answers it by waiting a moment for its follow, not with "not
//! synced". Two replicas, each a store on its own data directory over one real PostgreSQL
//! database (`metadb::testing`), real Git repositories; B's follow fetches are slowed down
//! by a fetch hook so the lag is long enough to be seen.
#![cfg(unix)]

use gitstore::{
    DEFAULT_RETENTION, GitStore, Metadata, Registration, RepoName, RepoPath, SourceFetch,
    StoreConfig, SystemClock,
};
use service::{CallContext, Service, ServiceConfig};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};
use testgit::SourceRepo;

const REPO: &str = "acme/follow";
/// How long B's follow fetches are held back: well past a read's first look, well within
/// its wait.
const FOLLOW_DELAY: Duration = Duration::from_millis(800);

/// Runs `test` on a runtime of its own thread and fails it if it takes longer than `limit`.
fn bounded<F, Fut>(limit: Duration, test: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let (done, finished) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
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

fn open(url: &str, dir: &tempfile::TempDir) -> GitStore {
    let db = metadb::Database::connect(url, metadb::Options::default())
        .expect("connect to the test database");
    GitStore::open_with(
        StoreConfig {
            data_dir: dir.path().join("data"),
            retention: DEFAULT_RETENTION,
        },
        Arc::new(SystemClock),
        Metadata::Postgres(db),
    )
    .expect("open store")
}

fn name() -> RepoName {
    RepoName::parse(REPO).expect("name")
}

/// B lags the head A's sync recorded: a lease of `main` on B says "not synced" at first, but
/// `resolve` through B's service (a framed operation on the blocking pool) waits for B's
/// follow and answers A's head, once, well within the frame's bound.
#[test]
fn a_framed_read_waits_for_the_follow_of_a_recorded_head() {
    bounded(Duration::from_secs(120), || async {
        let url = metadb::testing::shared().create_database();
        let source = SourceRepo::with_files(&[("guide.md", b"version one\n")]);
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (open(&url, &a_dir), open(&url, &b_dir));
        a.register(Registration {
            name: name(),
            source: source.source(),
            registered_path: RepoPath::root(),
            branch: None,
            private: None,
        })
        .expect("register");
        a.sync(&name()).expect("A syncs");
        b.sync(&name()).expect("B follows A's first sync");
        b.set_fetch_hook(Some(Arc::new(|_, why| {
            if why == SourceFetch::Follow {
                std::thread::sleep(FOLLOW_DELAY);
            }
        })));
        let service = Service::new(b.clone(), ServiceConfig::default());

        let second = source.commit(&[("guide.md", b"version two\n")], "two");
        a.sync(&name()).expect("A syncs the new head");
        let seen = Instant::now();
        while b.repo(&name()).expect("repo").head.map(|c| c.to_string()) != Some(second.clone()) {
            assert!(
                seen.elapsed() < Duration::from_secs(10),
                "B never saw A's record"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            matches!(
                b.lease_revision(&name(), Some("main")),
                Err(gitstore::Error::NotSynced(_))
            ),
            "B lags A's head at first"
        );

        let started = Instant::now();
        let answer = service
            .resolve(&CallContext::default(), REPO.to_owned(), "main".to_owned())
            .await
            .expect("resolve through B waits for its follow");
        let took = started.elapsed();
        assert_eq!(answer.commit, second);
        assert!(took < Duration::from_secs(3), "waited {took:?}");
        eprintln!("B answered the new head {took:?} after the first look");
    });
}
