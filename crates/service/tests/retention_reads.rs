//! Issue 42 point 7 through the service: a read pinned to an old commit never walks the
//! history on the async thread that received it (the lease answers "needs a blocking thread"
//! and the read is redone on the blocking pool, where the walk runs under the call's budget),
//! a sync does not restart the walk, and maintenance completes it after each sync so old
//! commits are answered from the memo. The store's walk counters prove what walked.

mod common;

use gitstore::{GitStore, RepoName, WalkStats};
use service::{CallContext, ReadRequest, Service, ServiceConfig};
use std::time::Duration;
use testgit::SourceRepo;

/// Every test's hang guard: generous, the work takes a fraction of it.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Makes `main` of a new source a linear history of `count` commits, each setting
/// `file.txt` to `line <n>`; answers it and the root commit's SHA.
fn linear_source(count: u64) -> (SourceRepo, String) {
    let source = SourceRepo::new();
    let root =
        testgit::fastimport::linear(source.path(), count, "file.txt", |n| format!("line {n}\n"));
    (source, root)
}

fn name() -> RepoName {
    RepoName::parse("test/repo").expect("name")
}

fn walks(store: &GitStore) -> WalkStats {
    store.retention_walks(&name()).expect("registered")
}

fn at(revision: &str) -> ReadRequest {
    ReadRequest {
        revision: Some(revision.to_string()),
        ..common::read("file.txt")
    }
}

async fn read_text(service: &Service, revision: &str) -> String {
    let item = service
        .read(&CallContext::default(), at(revision))
        .await
        .expect("read");
    item.outcome.expect("a text").content
}

/// G-5, G-8: the first read pinned to the root commit is redone on the blocking pool, which
/// walks down to it; after a sync it is answered from the memo, nothing walked again.
#[tokio::test]
async fn g5_a_read_of_an_old_commit_walks_on_the_blocking_pool_once() {
    tokio::time::timeout(TIMEOUT, async {
        let (source, root) = linear_source(120);
        let store = source.store("test/repo", "");
        let service = Service::new(store.clone(), ServiceConfig::default());
        assert_eq!(walks(&store).steps, 0);

        assert_eq!(read_text(&service, &root).await, "line 0\n");
        let walked = walks(&store);
        assert_eq!(
            walked.steps, 119,
            "walked down to the root's child: {walked:?}"
        );

        for n in 0..2u64 {
            source.commit(&[("more.txt", format!("{n}\n").as_bytes())], "more");
            store.sync(&name()).expect("sync");
            assert_eq!(read_text(&service, &root).await, "line 0\n");
            let after = walks(&store);
            assert_eq!(after.restarts, 1, "no restart after sync {n}: {after:?}");
            assert_eq!(after.steps, walked.steps, "nothing walked: {after:?}");
        }
    })
    .await
    .expect("the test hung");
}

/// G-3, G-5: maintenance completes the walk after each sync, walking only the new commits:
/// the read of the root commit then walks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g3_maintenance_completes_the_retention_walk_after_each_sync() {
    tokio::time::timeout(TIMEOUT, async {
        let (source, root) = linear_source(80);
        let store = source.store("test/repo", "");
        let service = Service::new(store.clone(), ServiceConfig::default());
        let (stop, signal) = tokio::sync::watch::channel(false);
        let maintenance =
            service::spawn_maintenance(service.clone(), Duration::from_millis(50), signal);

        let complete = loop {
            let stats = walks(&store);
            if stats.complete {
                break stats;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!((complete.steps, complete.reached), (80, 80), "{complete:?}");
        assert_eq!(read_text(&service, &root).await, "line 0\n");
        assert_eq!(walks(&store).steps, 80, "the read walked nothing");

        let head = source.commit(&[("more.txt", b"more\n")], "more");
        let extended = loop {
            let stats = walks(&store);
            let synced = store.resolve(&name(), None).ok().map(|c| c.to_string());
            if synced.as_deref() == Some(head.as_str()) && stats.complete {
                break stats;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(extended.restarts, 1, "{extended:?}");
        assert_eq!(
            extended.steps, 81,
            "only the new commit walked: {extended:?}"
        );
        let _ = stop.send(true);
        maintenance.await.expect("maintenance ends");
    })
    .await
    .expect("the test hung");
}
