//! Cluster mode (issue 31, behaviour 4): an owner whose mirror lacks the head another
//! replica's sync recorded answers it by waiting a moment for its follow, not with "not
//! synced". Two replicas, each a store on its own data directory over one real PostgreSQL
//! database (`metadb::testing`), real Git repositories; B's follow fetches are slowed down
//! by a fetch hook so the lag is long enough to be seen.
#![cfg(unix)]

mod common;

use common::cluster::{bounded_on, fresh_database, open_store, postgres};
use common::register;
use gitstore::{GitStore, RepoName, SourceFetch};
use service::{CallContext, Service, ServiceConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testgit::SourceRepo;

const REPO: &str = "acme/follow";
/// How long B's follow fetches are held back: well past a read's first look, well within
/// its wait.
const FOLLOW_DELAY: Duration = Duration::from_millis(800);

/// A replica's store on a data directory in `dir` over the database at `url`.
fn open(url: &str, dir: &tempfile::TempDir) -> GitStore {
    open_store(dir.path().join("data"), postgres(url))
}

fn name() -> RepoName {
    RepoName::parse(REPO).expect("name")
}

/// B lags the head A's sync recorded: a lease of `main` on B says "not synced" at first, but
/// `resolve` through B's service (a framed operation on the blocking pool) waits for B's
/// follow and answers A's head, once, well within the frame's bound.
#[test]
fn a_framed_read_waits_for_the_follow_of_a_recorded_head() {
    bounded_on(2, Duration::from_secs(120), || async {
        let url = fresh_database();
        let source = SourceRepo::with_files(&[("guide.md", b"version one\n")]);
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (open(&url, &a_dir), open(&url, &b_dir));
        register(&a, REPO, &source);
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
