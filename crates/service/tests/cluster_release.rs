//! Cluster mode (issue 31, behaviour 2): a replica that loses a repository drops it after a
//! grace period. Real Git repositories, a real PostgreSQL server (`metadb::testing`) for the
//! shared metadata, the real maintenance loop, and a placement stub whose ownership the test
//! flips. What a release drops (mirror into the trash, search index, plugin preparations) is
//! kept through the grace, is kept while a reader leases it, stays when the repository is
//! owned again in time, and is never dropped with SQLite metadata, where it is the only copy.
#![cfg(unix)]

mod common;

use common::cluster::{bounded, fresh_database, open_store, postgres, reachable};
use common::register;
use gitstore::{Error, GitStore, Metadata, Released, RepoName, RepoPath};
use service::{
    CallContext, ErrorKind, Membership, Placement, ReadRequest, Route, Service, ServiceConfig,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use testgit::SourceRepo;

const REPO: &str = "acme/widgets";
const SELF: &str = "http://10.0.0.1:7000";
const OTHERS: [&str; 2] = ["http://10.0.0.2:7000", "http://10.0.0.3:7000"];

/// Every test's bound: a release that waits for something that never comes fails the test.
const TEST_LIMIT: Duration = Duration::from_secs(180);
/// How long a background step (a round, a sync, a build) may take to show.
const SHOWS_WITHIN: Duration = Duration::from_secs(60);
/// The maintenance loop's interval in these tests.
const ROUND: Duration = Duration::from_millis(100);

/// Polls `check` until it holds; fails after [`SHOWS_WITHIN`].
async fn eventually(what: &str, check: impl FnMut() -> bool) {
    common::cluster::eventually(what, SHOWS_WITHIN, check).await;
}

/// A placement with this replica among the owners of every repository or not, as the test
/// says, and the grace the test chose.
struct Fixed {
    owned: AtomicBool,
    grace: Duration,
}

impl Placement for Fixed {
    fn owners(&self, _repo: &str) -> Vec<String> {
        if self.owned.load(Ordering::SeqCst) {
            vec![SELF.to_owned(), OTHERS[0].to_owned()]
        } else {
            OTHERS.iter().map(|s| (*s).to_owned()).collect()
        }
    }

    fn self_url(&self) -> &str {
        SELF
    }

    fn members(&self) -> Membership {
        reachable()
    }

    fn release_grace(&self) -> Duration {
        self.grace
    }
}

fn name() -> RepoName {
    RepoName::parse(REPO).unwrap()
}

/// One replica: a store on its own data directory, the service over it with the stub
/// placement, the repository registered, synced and indexed.
struct Replica {
    _dir: tempfile::TempDir,
    data: PathBuf,
    source: SourceRepo,
    store: GitStore,
    service: Service,
    placement: Arc<Fixed>,
}

impl Replica {
    fn new(metadata: Metadata, grace: Duration) -> Self {
        let source = SourceRepo::with_files(&[("a.md", b"alpha\nbeta\n")]);
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let store = open_store(data.clone(), metadata);
        register(&store, REPO, &source);
        let service = Service::new(store.clone(), ServiceConfig::default());
        let placement = Arc::new(Fixed {
            owned: AtomicBool::new(true),
            grace,
        });
        assert!(service.set_placement(placement.clone()));
        Self {
            _dir: dir,
            data,
            source,
            store,
            service,
            placement,
        }
    }

    /// A replica on a fresh database of the test server (cluster mode).
    fn clustered(grace: Duration) -> Self {
        Self::new(postgres(&fresh_database()), grace)
    }

    fn own(&self, owned: bool) {
        self.placement.owned.store(owned, Ordering::SeqCst);
    }

    fn mirror(&self) -> PathBuf {
        self.data.join("mirrors/acme/widgets.git")
    }

    fn index_dir(&self) -> PathBuf {
        self.data.join("index/acme/widgets")
    }

    fn trash_entries(&self) -> usize {
        entries(&self.data.join("trash"))
    }

    /// Everything a release drops is here: the mirror, a lease on its head, the index.
    fn keeps_all(&self) -> bool {
        self.mirror().join("HEAD").is_file()
            && self.store.lease_revision(&name(), None).is_ok()
            && self.service.index_info(REPO).is_some()
    }

    /// Nothing a release drops is left.
    fn keeps_nothing(&self) -> bool {
        !self.mirror().exists()
            && matches!(
                self.store.lease_revision(&name(), None),
                Err(Error::NotSynced(_))
            )
            && self.service.index_info(REPO).is_none()
            && entries(&self.index_dir()) == 0
    }

    async fn read(&self) -> Result<String, service::ServiceError> {
        let item = self
            .service
            .read(
                &CallContext::default(),
                ReadRequest {
                    repo: REPO.to_owned(),
                    revision: None,
                    path: "a.md".to_owned(),
                    start_line: None,
                    end_line: None,
                    plugins: None,
                },
            )
            .await?;
        Ok(item.outcome.expect("a.md reads").content)
    }

    /// Starts the maintenance loop; dropping the answer stops it.
    fn maintain(&self) -> Maintenance {
        let (stop, signal) = tokio::sync::watch::channel(false);
        let task = service::spawn_maintenance(self.service.clone(), ROUND, signal);
        Maintenance {
            stop,
            task: Some(task),
        }
    }
}

/// A running maintenance loop.
struct Maintenance {
    stop: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Maintenance {
    async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            tokio::time::timeout(SHOWS_WITHIN, task)
                .await
                .expect("maintenance stops")
                .expect("maintenance ran without panicking");
        }
    }
}

/// Entries in `dir` (0 when it does not exist).
fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| entries.count())
}

/// Behaviour 2: owned, then not owned. Through the grace the mirror, the lease on it and the
/// index stay (calls already go to the owners); after it the mirror moves to the trash (which
/// the next sweep empties), the index is gone, a read here answers "not synced" (unavailable)
/// and the route points at the owners. Owned again, the next round clones and indexes it and
/// reads answer here again.
#[test]
fn c2_released_after_the_grace_and_fetched_again_once_owned() {
    bounded(TEST_LIMIT, || async {
        let grace = Duration::from_secs(2);
        let replica = Replica::clustered(grace);
        replica.service.index(REPO.into(), |_| {}).await.unwrap();
        let maintenance = replica.maintain();
        assert!(replica.keeps_all());
        assert_eq!(replica.read().await.unwrap(), "alpha\nbeta\n");

        replica.own(false);
        let lost = Instant::now();
        assert_eq!(
            replica.service.route(&CallContext::default(), REPO),
            Route::Elsewhere(OTHERS.iter().map(|s| (*s).to_owned()).collect()),
            "calls go to the owners at once"
        );
        // Within the grace nothing goes: a release is due no earlier than `grace` after the
        // round that noted it, which came after `lost`.
        while lost.elapsed() < grace / 2 {
            let kept = replica.keeps_all();
            assert!(
                kept || lost.elapsed() >= grace,
                "dropped within the grace, {:?} after ownership moved",
                lost.elapsed()
            );
            tokio::time::sleep(ROUND / 2).await;
        }
        eventually("the repository released after the grace", || {
            replica.keeps_nothing()
        })
        .await;
        assert!(
            lost.elapsed() >= grace,
            "released {:?} after ownership moved, before the grace of {grace:?}",
            lost.elapsed()
        );
        let error = replica.read().await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::Unavailable, "{error:?}");
        assert!(
            error.message.contains("not been synced"),
            "{}",
            error.message
        );
        // The shared registry is untouched: other replicas go on serving it.
        assert_eq!(replica.store.repo(&name()).unwrap().name, name());
        eventually("the trash emptied by a sweep", || {
            replica.trash_entries() == 0
        })
        .await;

        // Owned again (with a new commit meanwhile): fetched and indexed in the next round.
        let head = replica
            .source
            .commit(&[("a.md", b"alpha\nbeta\ngamma\n")], "more");
        replica.own(true);
        eventually("fetched and indexed again once owned", || {
            replica.keeps_all()
                && replica
                    .service
                    .index_info(REPO)
                    .is_some_and(|info| info.commit == head)
        })
        .await;
        assert_eq!(replica.read().await.unwrap(), "alpha\nbeta\ngamma\n");
        assert_eq!(
            replica.service.route(&CallContext::default(), REPO),
            Route::Here
        );
        maintenance.stop().await;
    });
}

/// Behaviour 2: owned again before the grace ran out, nothing is dropped, and the note is
/// cleared: losing it again starts a whole new grace.
#[test]
fn c2_owned_again_within_the_grace_keeps_everything() {
    bounded(TEST_LIMIT, || async {
        let grace = Duration::from_secs(3);
        let replica = Replica::clustered(grace);
        replica.service.index(REPO.into(), |_| {}).await.unwrap();
        let maintenance = replica.maintain();

        replica.own(false);
        tokio::time::sleep(grace * 2 / 3).await;
        replica.own(true);
        // Well past the first loss's grace, owned all along since.
        tokio::time::sleep(grace).await;
        assert!(replica.keeps_all(), "dropped though owned again in time");

        // Lost again: the earlier note is gone, so a full grace runs from now.
        replica.own(false);
        let lost = Instant::now();
        tokio::time::sleep(grace * 2 / 3).await;
        assert!(
            replica.keeps_all() || lost.elapsed() >= grace,
            "the note of the first loss was kept: dropped {:?} into the second",
            lost.elapsed()
        );
        replica.own(true);
        tokio::time::sleep(grace).await;
        assert!(replica.keeps_all());
        assert_eq!(replica.read().await.unwrap(), "alpha\nbeta\n");
        maintenance.stop().await;
    });
}

/// Behaviour 2 with readers: a lease held when the release falls due keeps the mirror (and
/// its index) through every round until it ends, and reads through it, and by name under
/// it, all succeed. Readers racing the release either read in full or are told "not synced"
/// before they start; none fails half-way. Once the lease ends, a later round releases it.
#[test]
fn c2_a_leased_repository_is_released_only_after_its_readers() {
    bounded(TEST_LIMIT, || async {
        let grace = Duration::from_millis(500);
        let replica = Arc::new(Replica::clustered(grace));
        let maintenance = replica.maintain();
        let lease = replica.store.lease_revision(&name(), None).unwrap();
        let path = RepoPath::parse("a.md").unwrap();

        // Racing readers: each takes a lease and reads through it and by name.
        let stop = Arc::new(AtomicBool::new(false));
        let completed = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (replica, stop, completed) = (replica.clone(), stop.clone(), completed.clone());
                let path = path.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let lease = match replica.store.lease_revision(&name(), None) {
                            Ok(lease) => lease,
                            Err(Error::NotSynced(_)) => continue,
                            Err(other) => panic!("a lease failed otherwise: {other}"),
                        };
                        let text = lease.read_text(&path).expect("a read under a lease");
                        assert_eq!(text.to_string(), "alpha\nbeta\n");
                        let by_name = replica
                            .store
                            .read_text(&name(), lease.commit(), &path)
                            .expect("a read by name under a lease");
                        assert_eq!(by_name.to_string(), "alpha\nbeta\n");
                        let listed = replica
                            .store
                            .list_tree(&name(), lease.commit(), &RepoPath::root(), 1)
                            .expect("a listing under a lease");
                        assert_eq!(listed.len(), 1);
                        completed.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();

        replica.own(false);
        // Due after half a second; many rounds later it is still there, and so are reads.
        tokio::time::sleep(grace * 6).await;
        assert!(
            replica.mirror().join("HEAD").is_file(),
            "released under a lease"
        );
        for _ in 0..5 {
            assert_eq!(lease.read_text(&path).unwrap().to_string(), "alpha\nbeta\n");
            tokio::time::sleep(ROUND).await;
        }
        assert!(replica.mirror().join("HEAD").is_file());

        drop(lease);
        eventually("released once the held lease ended", || {
            !replica.mirror().exists()
        })
        .await;
        stop.store(true, Ordering::SeqCst);
        for reader in readers {
            reader.join().expect("no reader failed");
        }
        assert!(completed.load(Ordering::SeqCst) > 0, "the readers read");
        assert!(matches!(
            replica.store.lease_revision(&name(), None),
            Err(Error::NotSynced(_))
        ));
        maintenance.stop().await;
    });
}

/// `GitStore::release_local` itself, without the loop: refused under a lease of this
/// process, done once it ended; the registration and its rows stay; a later sweep empties the
/// trash; a sync fetches the repository again.
#[test]
fn c2_release_local_waits_for_leases_and_keeps_the_registry() {
    bounded(TEST_LIMIT, || async {
        let replica = Replica::clustered(Duration::from_secs(600));
        let store = replica.store.clone();
        let lease = store.lease_revision(&name(), None).unwrap();
        assert_eq!(store.release_local(&name()).unwrap(), Released::InUse);
        assert!(replica.mirror().join("HEAD").is_file());
        let path = RepoPath::parse("a.md").unwrap();
        assert_eq!(lease.read_text(&path).unwrap().to_string(), "alpha\nbeta\n");
        drop(lease);

        assert_eq!(store.release_local(&name()).unwrap(), Released::Dropped);
        assert!(!replica.mirror().exists());
        assert_eq!(replica.trash_entries(), 1);
        assert!(matches!(
            store.lease_revision(&name(), None),
            Err(Error::NotSynced(_))
        ));
        assert_eq!(store.release_local(&name()).unwrap(), Released::NotHeld);
        let info = store.repo(&name()).unwrap();
        assert!(
            info.head.is_some(),
            "the recorded sync state stays: {info:?}"
        );

        store.sweep().unwrap();
        assert_eq!(replica.trash_entries(), 0, "the sweep emptied the trash");

        store.sync(&name()).unwrap();
        assert_eq!(
            store
                .read_text(&name(), &info.head.clone().unwrap(), &path)
                .unwrap()
                .to_string(),
            "alpha\nbeta\n"
        );
        assert!(matches!(
            store.release_local(&RepoName::parse("acme/unknown").unwrap()),
            Err(Error::UnknownRepo(_))
        ));
    });
}

/// SQLite metadata: the mirror is the only copy. `release_local` refuses, and a placement
/// that says this process owns nothing makes the loop drop nothing, round after round.
#[test]
fn c2_sqlite_mode_never_releases() {
    bounded(TEST_LIMIT, || async {
        let grace = Duration::from_millis(200);
        let replica = Replica::new(Metadata::Sqlite, grace);
        replica.service.index(REPO.into(), |_| {}).await.unwrap();
        match replica.store.release_local(&name()) {
            Err(Error::Storage(message)) => {
                assert!(message.contains("only copy"), "{message}")
            }
            other => panic!("not refused: {other:?}"),
        }
        assert!(replica.keeps_all());

        let maintenance = replica.maintain();
        replica.own(false);
        tokio::time::sleep(grace * 10).await;
        assert!(replica.keeps_all(), "dropped the only copy");
        assert_eq!(replica.trash_entries(), 0);
        assert_eq!(replica.read().await.unwrap(), "alpha\nbeta\n");
        maintenance.stop().await;
    });
}
