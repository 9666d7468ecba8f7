//! Cluster mode (issue 31): an owner's index follows the cluster within seconds, and an owner
//! that cannot answer an index call yet says so. Two replicas, each a store on its own data
//! directory over one real PostgreSQL database (`metadb::testing`), real Git repositories,
//! the real maintenance loop with a full round far away (an hour), so only its catch-up
//! rounds (every 2 s) can do what is asserted.
//!
//! - A new head another replica's sync recorded is followed and indexed by the owner.
//! - A repository registered after the owner started is fetched and indexed by it.
//! - An owner that holds a repository but has no index of it yet does not serve calls that
//!   read the index ([`Service::serves_repo`]) and routes them to the other owner
//!   ([`Service::route_call`]); once indexed it serves them.
#![cfg(unix)]

mod common;

use common::cluster::{bounded, eventually, fresh_database, open_store, postgres, reachable};
use common::register;
use gitstore::{GitStore, RepoName};
use service::{
    CallContext, Membership, Placement, Route, RoutedCall, SearchRequest, Service, ServiceConfig,
};
use std::sync::Arc;
use std::time::Duration;
use testgit::SourceRepo;

const REPO: &str = "acme/fresh";
const LATER: &str = "acme/later";
const A: &str = "http://10.0.0.1:7000";
const B: &str = "http://10.0.0.2:7000";

/// Every test's bound.
const TEST_LIMIT: Duration = Duration::from_secs(120);
/// What catch-up rounds (every 2 s) must achieve within: a follow, a round, a small build.
const WITHIN: Duration = Duration::from_secs(20);
/// The full maintenance round, far beyond the test: only catch-up rounds run meanwhile.
const FULL_ROUND: Duration = Duration::from_secs(3600);

/// Both replicas own every repository, `self_url` first.
struct Both {
    self_url: &'static str,
}

impl Placement for Both {
    fn owners(&self, _repo: &str) -> Vec<String> {
        let other = if self.self_url == A { B } else { A };
        vec![self.self_url.to_owned(), other.to_owned()]
    }

    fn self_url(&self) -> &str {
        self.self_url
    }

    fn members(&self) -> Membership {
        reachable()
    }
}

/// One replica: its own data directory, the shared database.
struct Replica {
    _dir: tempfile::TempDir,
    store: GitStore,
    service: Service,
}

impl Replica {
    fn new(url: &str, self_url: &'static str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = open_store(dir.path().join("data"), postgres(url));
        let service = Service::new(store.clone(), ServiceConfig::default());
        assert!(service.set_placement(Arc::new(Both { self_url })));
        Self {
            _dir: dir,
            store,
            service,
        }
    }

    /// Starts the maintenance loop; dropping the sender stops it.
    fn maintain(&self) -> tokio::sync::watch::Sender<bool> {
        let (stop, signal) = tokio::sync::watch::channel(false);
        drop(service::spawn_maintenance(
            self.service.clone(),
            FULL_ROUND,
            signal,
        ));
        stop
    }

    fn indexed(&self, repo: &str) -> Option<String> {
        self.service.index_info(repo).map(|info| info.commit)
    }

    /// Waits (at most [`WITHIN`]) until this replica has indexed `repo` at `head`; answers
    /// how long that took.
    async fn indexes(&self, what: &str, repo: &str, head: &str) -> Duration {
        eventually(what, WITHIN, || self.indexed(repo).as_deref() == Some(head)).await
    }

    async fn search(&self, repo: &str, query: &str) -> Vec<(String, Vec<String>)> {
        let answer = self
            .service
            .search(
                &CallContext::default(),
                SearchRequest {
                    query: query.to_owned(),
                    repo: Some(repo.to_owned()),
                    ..SearchRequest::default()
                },
            )
            .await
            .expect("search");
        answer
            .repos
            .into_iter()
            .map(|group| {
                let snippets = group
                    .hits
                    .into_iter()
                    .filter_map(|hit| hit.snippet)
                    .collect();
                (group.commit, snippets)
            })
            .collect()
    }
}

/// Two replicas on one fresh database; `REPO` (its `guide.md` at "version one") registered
/// and synced through the first.
fn two_replicas() -> (SourceRepo, Replica, Replica) {
    let source = SourceRepo::with_files(&[("guide.md", b"version one\n")]);
    let url = fresh_database();
    let a = Replica::new(&url, A);
    let b = Replica::new(&url, B);
    register(&a.store, REPO, &source);
    (source, a, b)
}

#[test]
fn an_owner_indexes_the_head_another_replica_synced_within_seconds() {
    bounded(TEST_LIMIT, || async {
        let (source, a, b) = two_replicas();
        let first = source.head();
        // B holds the repository and its index at the first head (its first round).
        b.store
            .sync(&RepoName::parse(REPO).unwrap())
            .expect("B syncs");
        let stop = b.maintain();
        b.indexes("B indexes the first head", REPO, &first).await;

        // A new commit, synced through A: B only follows what A recorded.
        let second = source.commit(&[("guide.md", b"version two\n")], "two");
        a.store
            .sync(&RepoName::parse(REPO).unwrap())
            .expect("A syncs the new head");
        let took = b
            .indexes(
                "B indexes the head A's sync recorded (catch-up round, not the hourly one)",
                REPO,
                &second,
            )
            .await;
        eprintln!("B indexed the new head {took:?} after A's sync");
        let hits = b.search(REPO, "version").await;
        assert_eq!(
            hits,
            vec![(second.clone(), vec!["version two".to_owned()])],
            "B searches the new head"
        );
        let _ = stop.send(true);
    });
}

#[test]
fn an_owner_fetches_and_indexes_a_repository_registered_after_it_started() {
    bounded(TEST_LIMIT, || async {
        let (_source, a, b) = two_replicas();
        let stop = b.maintain();
        let later = SourceRepo::with_files(&[("src/lib.rs", b"fn later_needle() {}\n")]);
        register(&a.store, LATER, &later);
        let head = later.head();
        let took = b
            .indexes(
                "B fetches and indexes a repository registered through A after it started",
                LATER,
                &head,
            )
            .await;
        eprintln!("B indexed the new registration {took:?} after it");
        let hits = b.search(LATER, "later_needle").await;
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].0, head);
        let _ = stop.send(true);
    });
}

#[test]
fn an_owner_without_an_index_sends_index_calls_to_the_other_owner() {
    bounded(TEST_LIMIT, || async {
        let (_source, _a, b) = two_replicas();
        let ctx = CallContext::default();
        // Not held yet: nothing is served here.
        assert!(!b.service.serves_repo(&ctx, REPO, false));
        assert!(!b.service.serves_repo(&ctx, REPO, true));
        assert_eq!(
            b.service.route_call(&ctx, REPO, RoutedCall::default()),
            Route::Elsewhere(vec![A.to_owned()])
        );

        // Held, not indexed: reads here, index calls elsewhere.
        b.service.sync(REPO.to_owned()).await.expect("B syncs");
        assert!(b.service.serves_repo(&ctx, REPO, false));
        assert!(!b.service.serves_repo(&ctx, REPO, true));
        assert_eq!(
            b.service.route_call(&ctx, REPO, RoutedCall::default()),
            Route::Here
        );
        assert_eq!(
            b.service.route_call(
                &ctx,
                REPO,
                RoutedCall {
                    reads_index: true,
                    ..RoutedCall::default()
                }
            ),
            Route::Elsewhere(vec![A.to_owned()])
        );

        // Indexed: everything here.
        b.service
            .index(REPO.to_owned(), |_| {})
            .await
            .expect("B indexes");
        assert!(b.service.serves_repo(&ctx, REPO, true));
        assert_eq!(
            b.service.route_call(
                &ctx,
                REPO,
                RoutedCall {
                    reads_index: true,
                    ..RoutedCall::default()
                }
            ),
            Route::Here
        );
        // An unknown name is answered here, as unknown.
        assert!(b.service.serves_repo(&ctx, "acme/unknown", true));
    });
}
