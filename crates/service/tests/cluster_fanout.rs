//! Cluster mode (issue 31, behaviour 3): `search` and `references` over every repository,
//! asked of a replica that holds only some of them, ask the owners of the others for their
//! parts and merge them into exactly the page one server holding everything answers. Real
//! Git repositories and real services on their own data directories; the transport between
//! replicas is a stub [`Peers`] calling the other service's [`Service::search_shard`].

mod common;

use common::cluster::reachable;
use common::register;
use gitstore::{DEFAULT_RETENTION, GitStore, StoreConfig};
use service::{
    CallContext, Membership, PeerError, PeerFuture, Peers, Placement, ReferencesRequest,
    SearchAnswer, SearchRequest, Service, ServiceConfig, ShardRequest, SymbolQuery,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testgit::SourceRepo;

const A: &str = "http://a.test:7000";
const B: &str = "http://b.test:7000";
const C: &str = "http://c.test:7000";
const DOWN: &str = "http://down.test:7000";
/// An owner that takes the connection and never answers.
const HUNG: &str = "http://hung.test:7000";

/// Every test's bound.
const TEST_LIMIT: Duration = Duration::from_secs(120);

async fn bounded(test: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_LIMIT, test)
        .await
        .expect("the test finished within its bound");
}

fn sources() -> Vec<(&'static str, SourceRepo)> {
    let many: String = (0..25).map(|i| format!("row {i} needle here\n")).collect();
    vec![
        (
            "a/one",
            SourceRepo::with_files(&[
                ("needle.md", b"# title\nsome needle text\n"),
                (
                    "src/lib.rs",
                    b"use needle;\npub fn needle() {}\nneedle();\n",
                ),
                ("src/z.txt", many.as_bytes()),
            ]),
        ),
        (
            "b/two",
            SourceRepo::with_files(&[
                ("docs/needle_guide.md", b"nothing\n"),
                ("lib/a.py", b"def needle():\n    return needle\n"),
                ("lib/b.txt", b"needle\nneedle\nno\nneedle\n"),
            ]),
        ),
        (
            "c/three",
            SourceRepo::with_files(&[
                ("a.rs", b"fn needle() {}\nlet x = needle();\n"),
                ("needle/mod.rs", b"struct Needle;\nimpl Needle {}\n"),
            ]),
        ),
    ]
}

/// A service on a data directory of its own with `registered` registered and synced and
/// `indexed` indexed.
async fn replica(
    dir: &tempfile::TempDir,
    sources: &[(&'static str, SourceRepo)],
    registered: &[&str],
    indexed: &[&str],
) -> Service {
    let store = GitStore::open(
        StoreConfig {
            data_dir: dir.path().join("data"),
            retention: DEFAULT_RETENTION,
        },
        Arc::new(gitstore::SystemClock),
    )
    .expect("open store");
    for (name, source) in sources {
        if registered.contains(name) {
            register(&store, name, source);
        }
    }
    let service = Service::new(store, ServiceConfig::default());
    for name in indexed {
        service.index((*name).to_owned(), |_| {}).await.unwrap();
    }
    service
}

/// The other replicas, reached by calling their services; a URL not here is down.
#[derive(Default)]
struct Stub {
    replicas: Mutex<HashMap<String, Service>>,
    asked: Mutex<Vec<(String, Vec<String>)>>,
}

impl Peers for Stub {
    fn search_shard(&self, owner: &str, request: ShardRequest) -> PeerFuture {
        self.asked
            .lock()
            .unwrap()
            .push((owner.to_owned(), request.repos.clone()));
        let replica = self.replicas.lock().unwrap().get(owner).cloned();
        let hung = owner == HUNG;
        Box::pin(async move {
            if hung {
                std::future::pending::<()>().await;
            }
            match replica {
                Some(service) => service
                    .search_shard(request)
                    .await
                    .map_err(|error| PeerError {
                        message: error.message,
                    }),
                None => Err(PeerError {
                    message: "connection refused".into(),
                }),
            }
        })
    }
}

/// Replica A's view: fixed owners per repository, and the stub peers.
struct Fixed {
    owners: HashMap<&'static str, Vec<&'static str>>,
    peers: Arc<Stub>,
}

impl Placement for Fixed {
    fn owners(&self, repo: &str) -> Vec<String> {
        self.owners
            .get(repo)
            .map(|owners| owners.iter().map(|o| (*o).to_owned()).collect())
            .unwrap_or_default()
    }

    fn self_url(&self) -> &str {
        A
    }

    fn members(&self) -> Membership {
        reachable()
    }

    fn peers(&self) -> Option<Arc<dyn Peers>> {
        Some(self.peers.clone())
    }
}

/// A holds a/one and c/three; b/two is owned by B (and by C, which has no index of it yet,
/// asked first), or by replicas that are down.
struct Cluster {
    _dirs: Vec<tempfile::TempDir>,
    _sources: Vec<(&'static str, SourceRepo)>,
    a: Service,
    whole: Service,
    peers: Arc<Stub>,
}

impl Cluster {
    /// A search over every repository for `query`, asked of A.
    async fn search_all(&self, query: &str, limit: usize) -> SearchAnswer {
        self.a
            .search(&CallContext::default(), all_repos(query, limit))
            .await
            .unwrap()
    }
}

async fn cluster(b_owners: Vec<&'static str>) -> Cluster {
    let sources = sources();
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let all = ["a/one", "b/two", "c/three"];
    let a = replica(&dirs[0], &sources, &all, &["a/one", "c/three"]).await;
    let b = replica(&dirs[1], &sources, &["b/two"], &["b/two"]).await;
    let c = replica(&dirs[2], &sources, &["b/two"], &[]).await;
    let whole = replica(&dirs[3], &sources, &all, &all).await;
    let peers = Arc::new(Stub::default());
    peers.replicas.lock().unwrap().insert(B.into(), b);
    peers.replicas.lock().unwrap().insert(C.into(), c);
    let owners = HashMap::from([
        ("a/one", vec![A, B]),
        ("c/three", vec![B, A]),
        ("b/two", b_owners),
    ]);
    assert!(a.set_placement(Arc::new(Fixed {
        owners,
        peers: peers.clone(),
    })));
    Cluster {
        _dirs: dirs,
        _sources: sources,
        a,
        whole,
        peers,
    }
}

fn all_repos(query: &str, limit: usize) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        limit: Some(limit),
        ..SearchRequest::default()
    }
}

/// The answer without what differs between runs (timings, cache use, verified files) or
/// between a cluster and one server: a fanned-out cursor binds each repository's commit,
/// one server's its own generation numbers, so each pages with its own; and a total that is
/// a lower bound (S-10: what each side's work found, which differs).
fn comparable(answer: &SearchAnswer) -> (String, bool, Vec<String>, Option<u64>) {
    (
        format!("{:?}", answer.repos),
        answer.next_cursor.is_some(),
        answer.not_indexed.clone(),
        (!answer.stats.truncated).then_some(answer.stats.total_hits),
    )
}

/// Both totals count at least the hits answered so far; exact ones are equal.
fn same_totals(here: &SearchAnswer, one: &SearchAnswer, so_far: usize) {
    let page: usize = one.repos.iter().map(|r| r.hits.len()).sum();
    for answer in [here, one] {
        assert!(
            answer.stats.total_hits >= (so_far + page) as u64,
            "{:?}",
            answer.stats
        );
    }
    if !here.stats.truncated && !one.stats.truncated {
        assert_eq!(here.stats.total_hits, one.stats.total_hits);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_search_over_every_repository_pages_as_one_server_holding_everything() {
    bounded(async {
        let cluster = cluster(vec![C, B]).await;
        let ctx = CallContext::default();
        let queries = [("needle", 1000), ("needle", 4), ("fn", 2), ("row 1", 3)];
        for ((query, limit), count) in queries.into_iter().flat_map(|q| [(q, false), (q, true)]) {
            let mut left = SearchRequest {
                count,
                ..all_repos(query, limit)
            };
            let mut right = left.clone();
            let mut pages = 0;
            let mut so_far = 0;
            loop {
                let here = cluster.a.search(&ctx, left.clone()).await.unwrap();
                let one = cluster.whole.search(&ctx, right.clone()).await.unwrap();
                let (hits, next, not_indexed, _) = comparable(&here);
                let (one_hits, one_next, one_not_indexed, _) = comparable(&one);
                assert_eq!(
                    (hits, next, not_indexed),
                    (one_hits, one_next, one_not_indexed),
                    "{query} page {pages}"
                );
                same_totals(&here, &one, so_far);
                if count {
                    // S-10: counted totals are exact across replicas too (below the cap).
                    assert!(!here.stats.truncated && !one.stats.truncated, "{query}");
                }
                so_far += one.repos.iter().map(|r| r.hits.len()).sum::<usize>();
                assert!(here.not_searched.is_empty(), "{:?}", here.not_searched);
                pages += 1;
                match (here.next_cursor, one.next_cursor) {
                    (Some(cursor), Some(whole)) => {
                        left.cursor = Some(cursor);
                        right.cursor = Some(whole);
                    }
                    _ => break,
                }
            }
            assert!(pages >= 1);
        }
        let first = cluster.search_all("needle", 1000).await;
        let repos: Vec<&str> = first.repos.iter().map(|r| r.repo.as_str()).collect();
        assert_eq!(repos, ["a/one", "b/two", "c/three"]);
        // b/two went to C first (no index there), then to B for it; nobody was asked for
        // what A holds.
        let asked = cluster.peers.asked.lock().unwrap().clone();
        assert!(
            asked
                .iter()
                .all(|(_, repos)| repos == &["b/two".to_owned()])
        );
        assert!(asked.iter().any(|(owner, _)| owner == C));
        assert!(asked.iter().any(|(owner, _)| owner == B));
        // JSON: `not_searched` is absent when empty, so answers look as they always did.
        let json = serde_json::to_value(&first).unwrap();
        assert!(json.get("not_searched").is_none(), "{json}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn owners_that_do_not_answer_leave_their_repositories_not_searched_and_the_rest_answers() {
    bounded(async {
        let cluster = cluster(vec![DOWN, DOWN]).await;
        let answer = cluster.search_all("needle", 1000).await;
        assert_eq!(answer.not_searched, ["b/two"]);
        assert!(answer.not_indexed.is_empty());
        let repos: Vec<&str> = answer.repos.iter().map(|r| r.repo.as_str()).collect();
        assert_eq!(repos, ["a/one", "c/three"]);
        let json = serde_json::to_value(&answer).unwrap();
        assert_eq!(json["not_searched"], serde_json::json!(["b/two"]));
        // An owner answering it has no index, the other down: not indexed, not "not searched".
        let cluster = self::cluster(vec![C, DOWN]).await;
        let answer = cluster.search_all("needle", 10).await;
        assert!(answer.not_searched.is_empty());
        assert_eq!(answer.not_indexed, ["b/two"]);
    })
    .await;
}

/// An owner that never answers costs a search over every repository no more than the
/// fan-out's budget (25 s), even with a second owner left to ask: its repositories are named
/// not searched, the rest is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_owner_costs_at_most_the_fan_out_budget() {
    bounded(async {
        let cluster = cluster(vec![HUNG, B]).await;
        let started = std::time::Instant::now();
        let answer = cluster.search_all("needle", 1000).await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(40), "took {took:?}");
        assert_eq!(answer.not_searched, ["b/two"]);
        let repos: Vec<&str> = answer.repos.iter().map(|r| r.repo.as_str()).collect();
        assert_eq!(repos, ["a/one", "c/three"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cursor_expires_when_an_owner_reindexes_and_a_bad_query_asks_nobody() {
    bounded(async {
        let cluster = cluster(vec![B]).await;
        let ctx = CallContext::default();
        let first = cluster.search_all("needle", 3).await;
        let mut next = all_repos("needle", 3);
        next.cursor = first.next_cursor.clone();
        assert!(cluster.a.search(&ctx, next.clone()).await.is_ok());
        // B re-indexes b/two at a new commit: the cursor names its old generation.
        let b = cluster.peers.replicas.lock().unwrap()[B].clone();
        let source = &cluster._sources[1].1;
        source.commit(&[("lib/b.txt", b"needle changed\n")], "change");
        b.sync("b/two".into()).await.unwrap();
        b.index("b/two".into(), |_| {}).await.unwrap();
        let error = cluster.a.search(&ctx, next).await.unwrap_err();
        assert!(error.message.contains("search again"), "{}", error.message);
        // A query that does not compile is refused before any owner is asked.
        let asked = cluster.peers.asked.lock().unwrap().len();
        let bad = SearchRequest {
            query: "(".into(),
            regex: true,
            ..SearchRequest::default()
        };
        let error = cluster.a.search(&ctx, bad).await.unwrap_err();
        assert!(
            error.message.contains("regular expression"),
            "{}",
            error.message
        );
        assert_eq!(cluster.peers.asked.lock().unwrap().len(), asked);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn references_over_every_repository_page_as_one_server_holding_everything() {
    bounded(async {
        let cluster = cluster(vec![C, B]).await;
        let ctx = CallContext::default();
        let request = |cursor: Option<String>| ReferencesRequest {
            query: SymbolQuery {
                symbol: "needle".into(),
                limit: Some(3),
                ..SymbolQuery::default()
            },
            cursor,
        };
        let (mut left, mut right) = (None, None);
        let mut pages = 0;
        loop {
            let here = cluster.a.references(&ctx, request(left)).await.unwrap();
            let one = cluster
                .whole
                .references(&ctx, request(right))
                .await
                .unwrap();
            assert_eq!(here.repos, one.repos, "page {pages}");
            assert_eq!(here.next_cursor.is_some(), one.next_cursor.is_some());
            // Totals are what each side's work found (S-10): equal when both are exact.
            if !here.truncated && !one.truncated {
                assert_eq!(here.total, one.total);
            }
            assert!(here.not_searched.is_empty());
            pages += 1;
            match (here.next_cursor, one.next_cursor) {
                (Some(cursor), Some(whole)) => {
                    left = Some(cursor);
                    right = Some(whole);
                }
                _ => break,
            }
        }
        assert!(pages > 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn definitions_over_every_repository_answer_as_one_server_holding_everything() {
    bounded(async {
        let cluster = cluster(vec![C, B]).await;
        let ctx = CallContext::default();
        for (symbol, limit) in [("needle", 1), ("needle", 2), ("needle", 50), ("Needle", 50)] {
            let query = SymbolQuery {
                symbol: symbol.into(),
                limit: Some(limit),
                ..SymbolQuery::default()
            };
            let here = cluster.a.definitions(&ctx, query.clone()).await.unwrap();
            let one = cluster.whole.definitions(&ctx, query).await.unwrap();
            assert_eq!(here.definitions, one.definitions, "{symbol} {limit}");
            assert_eq!(here.total, one.total);
            assert_eq!(here.searched, one.searched);
            assert_eq!(here.not_indexed, one.not_indexed);
            assert!(here.not_searched.is_empty());
        }
        // Owners down: their repositories are named, the rest answers.
        let cluster = self::cluster(vec![DOWN]).await;
        let query = SymbolQuery {
            symbol: "needle".into(),
            ..SymbolQuery::default()
        };
        let here = cluster.a.definitions(&ctx, query).await.unwrap();
        assert_eq!(here.not_searched, ["b/two"]);
        let repos: Vec<&str> = here.definitions.iter().map(|d| d.repo.as_str()).collect();
        assert!(
            repos.contains(&"a/one") && repos.contains(&"c/three"),
            "{repos:?}"
        );
        // A bad symbol is refused before anyone is asked.
        let asked = cluster.peers.asked.lock().unwrap().len();
        let bad = SymbolQuery {
            symbol: "two words".into(),
            ..SymbolQuery::default()
        };
        assert!(cluster.a.definitions(&ctx, bad).await.is_err());
        assert_eq!(cluster.peers.asked.lock().unwrap().len(), asked);
    })
    .await;
}

/// However many owner sets the repositories fall into, each owner is asked once per round:
/// first every repository's preferred owner, then, for what it could not answer, the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_owner_is_asked_once_for_all_the_repositories_it_is_preferred_for() {
    bounded(async {
        let sources = sources();
        let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
        let all = ["a/one", "b/two", "c/three"];
        let a = replica(&dirs[0], &sources, &all, &[]).await;
        let b = replica(&dirs[1], &sources, &all, &["a/one", "b/two"]).await;
        let c = replica(&dirs[2], &sources, &["c/three"], &["c/three"]).await;
        let whole = replica(&dirs[3], &sources, &all, &all).await;
        let peers = Arc::new(Stub::default());
        peers.replicas.lock().unwrap().insert(B.into(), b);
        peers.replicas.lock().unwrap().insert(C.into(), c);
        let owners = HashMap::from([
            ("a/one", vec![B, C]),
            ("b/two", vec![B, DOWN]),
            ("c/three", vec![B, C]),
        ]);
        assert!(a.set_placement(Arc::new(Fixed {
            owners,
            peers: peers.clone(),
        })));
        let ctx = CallContext::default();
        let here = a.search(&ctx, all_repos("needle", 7)).await.unwrap();
        let one = whole.search(&ctx, all_repos("needle", 7)).await.unwrap();
        let (hits, next, not_indexed, _) = comparable(&here);
        let (one_hits, one_next, one_not_indexed, _) = comparable(&one);
        assert_eq!(
            (hits, next, not_indexed),
            (one_hits, one_next, one_not_indexed)
        );
        same_totals(&here, &one, 0);
        let asked = peers.asked.lock().unwrap().clone();
        let all: Vec<String> = all.map(str::to_owned).to_vec();
        assert_eq!(
            asked,
            [
                (B.to_owned(), all),
                (C.to_owned(), vec!["c/three".to_owned()])
            ]
        );
    })
    .await;
}
