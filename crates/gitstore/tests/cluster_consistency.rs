//! Cluster mode's consistency (issue 31, behaviour 4), against a real PostgreSQL server
//! (`metadb::testing`) and real Git repositories: two or three stores with data directories
//! of their own on one database are replicas. A branch resolves to the head the leased sync
//! recorded, on every replica; a replica whose mirror lacks it answers "not synced" (never
//! its own older head) until its background follow fetched it; syncs of one repository are
//! leased, so one replica fetches from the source and the others follow; a replica killed
//! holding the lease blocks the others no longer than the lease; sweeps and gc follow the
//! shared rows. And SQLite mode still resolves from its mirror, as before.

mod replicas;

use gitstore::{
    Error, GitStore, ManualClock, Metadata, Registration, RepoName, RepoPath, SourceFetch,
};
use metadb::testing::{eventually, within};
use replicas::{
    DAY, SEEN_WITHIN, SQLITE_SCHEMA, cid, clock, connect, name, open, path, sqlite_int,
    sqlite_schema_version,
};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Fetches from the source a store ran, by kind.
#[derive(Default)]
struct Fetches {
    syncs: AtomicUsize,
    follows: AtomicUsize,
}

impl Fetches {
    fn syncs(&self) -> usize {
        self.syncs.load(Ordering::SeqCst)
    }
    fn follows(&self) -> usize {
        self.follows.load(Ordering::SeqCst)
    }

    /// A fetch hook counting into these counters; fetches of the kind `held` names wait at its
    /// gate.
    fn hook(self: &Arc<Self>, held: Option<(SourceFetch, Arc<Gate>)>) -> gitstore::FetchHook {
        let counted = self.clone();
        Arc::new(move |_, why| {
            match why {
                SourceFetch::Sync => counted.syncs.fetch_add(1, Ordering::SeqCst),
                SourceFetch::Follow => counted.follows.fetch_add(1, Ordering::SeqCst),
            };
            if let Some((kind, gate)) = &held
                && *kind == why
            {
                gate.pass();
            }
        })
    }
}

/// A gate fetches can be held at until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    /// Waits until open (at most a minute: a test that forgot to open it fails, not hangs).
    fn pass(&self) {
        let open = self.open.lock().unwrap();
        let (open, _) = self
            .opened
            .wait_timeout_while(open, Duration::from_secs(60), |open| !*open)
            .unwrap();
        assert!(*open, "the gate was never opened");
    }
}

/// One replica: a store on its own data directory and its own connection to the database.
struct Replica {
    _dir: tempfile::TempDir,
    data: PathBuf,
    store: GitStore,
    fetches: Arc<Fetches>,
}

impl Replica {
    /// A replica counting its fetches; those of `hold` wait at `gate` (when given).
    fn new(url: &str, clock: &ManualClock, held: Option<(SourceFetch, Arc<Gate>)>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let store = open(&data, clock, Metadata::Postgres(connect(url)));
        let fetches = Arc::new(Fetches::default());
        store.set_fetch_hook(Some(fetches.hook(held)));
        Self {
            _dir: dir,
            data,
            store,
            fetches,
        }
    }

    fn mirror(&self) -> PathBuf {
        self.data.join("mirrors/acme/widgets.git")
    }

    /// `git rev-parse` of `rev` in this replica's mirror (`None` if it does not resolve).
    fn mirror_rev(&self, rev: &str) -> Option<String> {
        let out = testgit::git_raw(
            self.data.parent().unwrap(),
            &[
                "--git-dir",
                self.mirror().to_str().unwrap(),
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
            None,
        );
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn read(&self, name: &RepoName, sha: &str) -> Result<String, Error> {
        self.store
            .read_text(name, &cid(sha), &path("a.md"))
            .map(|t| t.to_string())
    }
}

fn repo_name() -> RepoName {
    name("acme/widgets")
}

fn registration(source: &testgit::SourceRepo) -> Registration {
    Registration {
        name: repo_name(),
        source: source.source(),
        registered_path: RepoPath::root(),
        branch: None,
        private: None,
    }
}

/// What each test starts from: a fresh database (its URL), the replicas' clock and an empty
/// source repository.
fn setup() -> (String, ManualClock, testgit::SourceRepo) {
    let url = metadb::testing::shared().create_database();
    (url, clock(), testgit::SourceRepo::new())
}

/// A registers the repository and syncs `head` from the source; B, once it sees the head A
/// recorded, syncs its own mirror.
fn synced_on_both(a: &Replica, b: &Replica, source: &testgit::SourceRepo, head: &str) {
    let name = repo_name();
    a.store.register(registration(source)).unwrap();
    a.store.sync(&name).unwrap();
    eventually(SEEN_WITHIN, "B sees A's sync", || {
        b.store.repo(&name).is_ok_and(|r| r.head == Some(cid(head)))
    });
    b.store.sync(&name).unwrap();
}

/// Two replicas in step: what most tests start from.
struct InStep {
    /// The fresh database's URL.
    url: String,
    clock: ManualClock,
    source: testgit::SourceRepo,
    /// The commits made on main, in order; both replicas hold the last.
    commits: Vec<String>,
    /// Where B's fetches of the kind [`in_step`] was given wait.
    gate: Arc<Gate>,
    a: Replica,
    b: Replica,
}

/// A fresh database, replicas A and B on it, and a source with one commit on main per
/// entry of `versions` (each `a.md` reading that line, and named after it), which A
/// registers and syncs and B then syncs; B's fetches of the kind `held_on_b` wait at the
/// gate.
fn in_step(versions: &[&str], held_on_b: Option<SourceFetch>) -> InStep {
    let (url, clock, source) = setup();
    let commits: Vec<String> = versions
        .iter()
        .map(|version| source.commit(&[("a.md", format!("{version}\n").as_bytes())], version))
        .collect();
    let gate = Arc::new(Gate::default());
    let a = Replica::new(&url, &clock, None);
    let b = Replica::new(&url, &clock, held_on_b.map(|kind| (kind, gate.clone())));
    synced_on_both(&a, &b, &source, commits.last().expect("a commit"));
    InStep {
        url,
        clock,
        source,
        commits,
        gate,
        a,
        b,
    }
}

/// Main force-pushed to `base` → a new commit, which A syncs and B follows on its own (by the
/// notification). Answers the new commit.
fn force_pushed(a: &Replica, b: &Replica, source: &testgit::SourceRepo, base: &str) -> String {
    let name = repo_name();
    source.git(&["reset", "-q", "--hard", base]);
    let new = source.commit(&[("a.md", b"new\n")], "new");
    a.store.sync(&name).unwrap();
    eventually(SEEN_WITHIN, "B follows A's sync", || {
        b.store.resolve(&name, None) == Ok(cid(&new))
    });
    new
}

/// Rows of a table of the test database.
fn count(url: &str, sql: &'static str) -> i64 {
    connect(url)
        .run(move |client| client.query_one(sql, &[])?.try_get(0))
        .unwrap()
}

/// Sync leases held in the test database (taken and not yet given back).
fn sync_leases(url: &str) -> i64 {
    count(url, "SELECT count(*) FROM sync_leases")
}

/// Replica A syncs a new commit on main. Replica B, whose mirror still has the older head,
/// never answers that older head once it knows of A's record: it answers "not synced" (for
/// the branch, the default branch and the new SHA) while its background follow is held, and
/// A's SHA as soon as the follow fetched it. Only A fetched from the source for the sync; B
/// caught up by one follow fetch, and no `git` ran on B's reading thread.
#[test]
fn a_branch_resolves_to_the_recorded_head_on_every_replica() {
    within(Duration::from_secs(120), || {
        let step = in_step(&["one"], Some(SourceFetch::Follow));
        let (source, commits, gate, a, b) = (step.source, step.commits, step.gate, step.a, step.b);
        let (first, name) = (commits[0].clone(), repo_name());
        assert_eq!(b.store.resolve(&name, None).unwrap(), cid(&first));

        let second = source.commit(&[("a.md", b"two\n")], "two");
        let outcome = a.store.sync(&name).unwrap();
        assert_eq!(outcome.head, Some(cid(&second)));
        assert_eq!(a.store.resolve(&name, Some("main")).unwrap(), cid(&second));
        assert_eq!(a.fetches.syncs(), 2);

        // B learns of A's record through the notification...
        eventually(SEEN_WITHIN, "B sees A's sync", || {
            b.store.repo(&name).unwrap().head == Some(cid(&second))
        });
        // ... and from then on never answers its own older head, which its mirror still has.
        for _ in 0..20 {
            for revision in [None, Some("main"), Some("refs/heads/main"), Some("HEAD")] {
                assert_eq!(
                    b.store.resolve(&name, revision),
                    Err(Error::NotSynced(name.clone())),
                    "{revision:?}"
                );
            }
            assert!(matches!(
                b.store.lease_revision(&name, None),
                Err(Error::NotSynced(_))
            ));
            assert_eq!(
                b.store.resolve(&name, Some(&second)),
                Err(Error::NotSynced(name.clone()))
            );
            assert_eq!(b.read(&name, &second), Err(Error::NotSynced(name.clone())));
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(b.mirror_rev("refs/heads/main"), Some(first.clone()));
        assert_eq!(b.mirror_rev(&second), None, "B has not fetched it");
        // The older head is still readable by SHA where it is retained, on both.
        assert_eq!(b.read(&name, &first).unwrap(), "one\n");
        eventually(SEEN_WITHIN, "B's follow fetches (held at the gate)", || {
            b.fetches.follows() == 1
        });

        // The follow goes ahead: B answers A's SHA, and only it.
        gate.open();
        let mut answers = Vec::new();
        eventually(SEEN_WITHIN, "B answers the recorded head", || {
            let answer = b.store.resolve(&name, None);
            let done = answer == Ok(cid(&second));
            answers.push(answer);
            done
        });
        assert!(
            answers
                .iter()
                .all(|a| *a == Ok(cid(&second)) || *a == Err(Error::NotSynced(name.clone()))),
            "{answers:?}"
        );
        assert_eq!(b.store.resolve(&name, Some("main")).unwrap(), cid(&second));
        let lease = b.store.lease_revision(&name, Some("main")).unwrap();
        assert_eq!(lease.commit(), &cid(&second));
        assert_eq!(&*lease.read_text(&path("a.md")).unwrap(), "two\n");
        assert_eq!(
            b.store.branch_heads(&name).unwrap(),
            vec![("main".to_string(), cid(&second))]
        );
        assert_eq!(
            b.fetches.syncs(),
            1,
            "B's own sync of the first commit only"
        );
        assert_eq!(b.fetches.follows(), 1);
    });
}

/// Two replicas sync one repository at once: exactly one takes the lease and fetches from
/// the source; the other returns at once with the heads recorded so far, fetching nothing
/// from the source for the sync, and answers the new head once the holder recorded it. The
/// lease is given back after the sync.
#[test]
fn concurrent_syncs_fetch_from_the_source_once() {
    within(Duration::from_secs(120), || {
        // The first sync through A alone; B has no mirror yet: its sync takes the (free)
        // lease and fetches.
        let step = in_step(&["one"], None);
        let (url, source, commits, a, b) = (step.url, step.source, step.commits, step.a, step.b);
        let (first, name) = (commits[0].clone(), repo_name());
        assert_eq!(b.store.resolve(&name, None).unwrap(), cid(&first));
        let before = (a.fetches.syncs(), b.fetches.syncs());
        assert_eq!(before, (1, 1));

        // Now both at once, the holder's fetch held until the other's sync has returned.
        let second = source.commit(&[("a.md", b"two\n")], "two");
        let gate = Arc::new(Gate::default());
        for replica in [&a, &b] {
            let held = Some((SourceFetch::Sync, gate.clone()));
            replica
                .store
                .set_fetch_hook(Some(replica.fetches.hook(held)));
        }
        let (done, results) = mpsc::channel();
        let start = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = [("A", a.store.clone()), ("B", b.store.clone())]
            .into_iter()
            .map(|(who, store)| {
                let (done, start, name) = (done.clone(), start.clone(), name.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let _ = done.send((who, store.sync(&name)));
                })
            })
            .collect();
        let (follower, followed) = results
            .recv_timeout(Duration::from_secs(30))
            .expect("one sync returns while the other holds the lease");
        // The follower answered the heads recorded so far, without fetching from the source.
        assert_eq!(followed.unwrap().head, Some(cid(&first)), "{follower}");
        gate.open();
        let (holder, held_outcome) = results.recv_timeout(Duration::from_secs(30)).unwrap();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_ne!(holder, follower);
        assert_eq!(held_outcome.unwrap().head, Some(cid(&second)));
        let after = (a.fetches.syncs(), b.fetches.syncs());
        assert_eq!(
            after.0 + after.1 - before.0 - before.1,
            1,
            "exactly one fetch from the source for the two syncs"
        );
        let (holder_store, follower_replica) = if holder == "A" { (&a, &b) } else { (&b, &a) };
        assert_eq!(
            holder_store.fetches.follows(),
            0,
            "the holder follows nobody"
        );
        assert_eq!(sync_leases(&url), 0);

        // The follower answers the holder's head once its mirror has it.
        eventually(SEEN_WITHIN, "the follower answers the new head", || {
            follower_replica.store.resolve(&name, None) == Ok(cid(&second))
        });
        assert_eq!(a.store.resolve(&name, None).unwrap(), cid(&second));
        assert_eq!(
            follower_replica.read(&name, &second).unwrap(),
            "two\n",
            "fetched by a follow"
        );
        assert_eq!(follower_replica.fetches.follows(), 1);
        let recorded = count(
            &url,
            "SELECT count(*) FROM branch_heads WHERE repo = 'acme/widgets'",
        );
        assert_eq!(recorded, 1);
    });
}

/// The environment variable that makes [`a_killed_holder_blocks_no_longer_than_its_lease`]
/// play the replica that is killed (database URL, data directory, lines of their own).
const CHILD: &str = "GITSTORE_TEST_LEASE_HOLDER";
const HOLDING: &str = "csg-test-child: holding the sync lease";

/// The child process: syncs the repository and parks inside the fetch, lease held, until
/// it is killed (or a minute passes: a parent that died must not leave it behind).
fn hold_the_lease_until_killed(spec: &str) {
    let mut lines = spec.lines();
    let (url, data) = (lines.next().unwrap(), lines.next().unwrap());
    let store = open(Path::new(data), &clock(), Metadata::Postgres(connect(url)));
    store.set_sync_lease(Duration::from_secs(3));
    store.set_fetch_hook(Some(Arc::new(|_, _| {
        println!("{HOLDING}");
        std::thread::sleep(Duration::from_secs(60));
        std::process::exit(3);
    })));
    let _ = store.sync(&repo_name());
}

/// A replica SIGKILLed while it holds a repository's sync lease (a real process, killed in
/// the middle of its sync) keeps the other replica from syncing it no longer than the lease:
/// the other's sync, nothing being recorded yet, waits, fetches nothing from the source
/// until the lease ran out, then takes the lease over and syncs.
#[test]
fn a_killed_holder_blocks_no_longer_than_its_lease() {
    if let Ok(spec) = std::env::var(CHILD) {
        hold_the_lease_until_killed(&spec);
        return;
    }
    within(Duration::from_secs(120), || {
        let (url, clock, source) = setup();
        let tip = source.commit(&[("a.md", b"one\n")], "one");
        let b = Replica::new(&url, &clock, None);
        b.store.set_sync_lease(Duration::from_secs(3));
        let name = repo_name();
        b.store.register(registration(&source)).unwrap();

        let child_dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "a_killed_holder_blocks_no_longer_than_its_lease",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                CHILD,
                format!("{url}\n{}", child_dir.path().join("data").display()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (said, heard) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains(HOLDING) {
                    let _ = said.send(());
                }
            }
        });
        heard
            .recv_timeout(Duration::from_secs(60))
            .expect("the child takes the lease");
        child.kill().unwrap();
        child.wait().unwrap();
        let killed = Instant::now();
        assert_eq!(sync_leases(&url), 1);
        let left = connect(&url)
            .run(|client| {
                client
                    .query_one(
                        "SELECT extract(epoch FROM expires_at - clock_timestamp())::float8
                         FROM sync_leases",
                        &[],
                    )?
                    .try_get::<_, f64>(0)
            })
            .unwrap();
        let runs_out = killed + Duration::from_secs_f64(left.max(0.0));

        // The dead holder's lease stands for a moment: B's sync waits, fetching nothing from
        // the source, then takes the lease over and syncs.
        let fetched_at = Arc::new(Mutex::new(None));
        let noted = fetched_at.clone();
        let counted = b.fetches.hook(None);
        b.store.set_fetch_hook(Some(Arc::new(move |name, why| {
            noted.lock().unwrap().get_or_insert(Instant::now());
            counted(name, why);
        })));
        b.store.sync(&name).unwrap();
        let waited = killed.elapsed();
        assert!(
            waited <= Duration::from_secs(3) + Duration::from_secs(2),
            "blocked for {waited:?}, longer than the lease"
        );
        let fetched_at = fetched_at.lock().unwrap().expect("B fetched");
        assert!(
            fetched_at + Duration::from_millis(200) >= runs_out,
            "B fetched {:?} before the dead holder's lease ran out",
            runs_out - fetched_at
        );
        assert_eq!(b.store.repo(&name).unwrap().last_error, None);
        assert_eq!((b.fetches.syncs(), b.fetches.follows()), (1, 0));
        assert_eq!(b.store.resolve(&name, None).unwrap(), cid(&tip));
        assert_eq!(sync_leases(&url), 0);
    });
}

/// A replica with no copy of a repository whose first sync another replica runs (every
/// owner of a new registration syncs it at once) waits for that sync and follows it: it
/// gets its copy by one follow fetch, never answers "not synced" for it, and records no
/// failure. Before, it answered "not synced" at once and, nothing asking for a follow of a
/// repository it held no copy of, stayed without one until its next sync (which its caller
/// backs off after a failure): the cluster had one copy where it should have two.
#[test]
fn a_replica_without_a_copy_follows_another_replicas_first_sync() {
    within(Duration::from_secs(120), || {
        let (url, clock, source) = setup();
        let first = source.commit(&[("a.md", b"one\n")], "one");
        let gate = Arc::new(Gate::default());
        let a = Replica::new(&url, &clock, Some((SourceFetch::Sync, gate.clone())));
        let b = Replica::new(&url, &clock, None);
        let name = repo_name();
        a.store.register(registration(&source)).unwrap();
        eventually(SEEN_WITHIN, "B sees the registration", || {
            b.store.repo(&name).is_ok()
        });

        // A's first sync holds the lease, its fetch held at the gate.
        let (done, results) = mpsc::channel();
        let syncing = a.store.clone();
        let (a_done, a_name) = (done.clone(), name.clone());
        let a_thread = std::thread::spawn(move || {
            let _ = a_done.send(("A", syncing.sync(&a_name)));
        });
        eventually(SEEN_WITHIN, "A fetches, holding the lease", || {
            a.fetches.syncs() == 1
        });
        let following = b.store.clone();
        let b_name = name.clone();
        let b_thread = std::thread::spawn(move || {
            let _ = done.send(("B", following.sync(&b_name)));
        });
        // B waits for A's sync rather than answering "not synced".
        assert!(
            results.recv_timeout(Duration::from_millis(700)).is_err(),
            "a sync returned while A's first sync was held"
        );
        assert_eq!(
            b.fetches.syncs(),
            0,
            "B does not fetch for a sync it does not hold"
        );
        assert_eq!(sync_leases(&url), 1);

        gate.open();
        let mut outcomes: Vec<_> = (0..2)
            .map(|_| results.recv_timeout(Duration::from_secs(30)).unwrap())
            .collect();
        a_thread.join().unwrap();
        b_thread.join().unwrap();
        outcomes.sort_by_key(|(who, _)| *who);
        for (who, outcome) in outcomes {
            assert_eq!(outcome.unwrap().head, Some(cid(&first)), "{who}");
        }
        assert_eq!((b.fetches.syncs(), b.fetches.follows()), (0, 1));
        assert_eq!(b.store.resolve(&name, None).unwrap(), cid(&first));
        assert_eq!(b.read(&name, &first).unwrap(), "one\n");
        assert_eq!(b.mirror_rev("refs/heads/main"), Some(first.clone()));
        assert_eq!(b.store.repo(&name).unwrap().last_error, None);
        assert_eq!(sync_leases(&url), 0);
    });
}

/// A read that finds a recorded head this replica lacks may wait for the follow of it
/// (`wait_followed`, what the service does on its blocking pool) and then answers it. The
/// wait is bounded and holds no lock a writer holds: while the follow is held (with the
/// repository's maintenance and mirror locks), a wait runs out on time. A wait where there
/// is nothing to follow (no copy here; SQLite) answers at once.
#[test]
fn a_read_can_wait_for_the_follow_of_a_recorded_head() {
    within(Duration::from_secs(120), || {
        let step = in_step(&["one"], Some(SourceFetch::Follow));
        let (url, clock, source, gate, a, b) =
            (step.url, step.clock, step.source, step.gate, step.a, step.b);
        let name = repo_name();

        let second = source.commit(&[("a.md", b"two\n")], "two");
        a.store.sync(&name).unwrap();
        eventually(SEEN_WITHIN, "B sees A's sync", || {
            b.store.repo(&name).unwrap().head == Some(cid(&second))
        });
        assert!(matches!(
            b.store.lease_revision(&name, Some("main")),
            Err(Error::NotSynced(_))
        ));
        eventually(SEEN_WITHIN, "B's follow is held at the gate", || {
            b.fetches.follows() == 1
        });

        // Lagging, B still holds a copy: its reads wait for the follow rather than go
        // elsewhere.
        assert_eq!(b.store.holds_copy(&name), Ok(true));

        // The follow holds B's locks at the gate: a wait runs out on time all the same.
        let started = Instant::now();
        assert!(!b.store.wait_followed(&name, Duration::from_millis(300)));
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
            "{waited:?}"
        );

        // A read waiting when the follow goes ahead answers the recorded head.
        let store = b.store.clone();
        let waiting_name = name.clone();
        let (answered, answer) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let started = Instant::now();
            let followed = store.wait_followed(&waiting_name, Duration::from_secs(20));
            let leased = store
                .lease_revision(&waiting_name, Some("main"))
                .map(|lease| lease.commit().clone());
            let _ = answered.send((followed, leased, started.elapsed()));
        });
        std::thread::sleep(Duration::from_millis(200));
        gate.open();
        let (followed, leased, waited) = answer.recv_timeout(Duration::from_secs(30)).unwrap();
        reader.join().unwrap();
        assert!(followed, "the wait saw the follow finish");
        assert_eq!(leased.unwrap(), cid(&second));
        assert!(waited < Duration::from_secs(10), "{waited:?}");
        // Caught up: nothing to wait for, one more try is worth it.
        assert!(b.store.wait_followed(&name, Duration::from_secs(5)));

        // No copy here: nothing a wait could bring; it answers at once.
        let c = Replica::new(&url, &clock, None);
        eventually(SEEN_WITHIN, "C sees the registration", || {
            c.store.repo(&name).is_ok()
        });
        let started = Instant::now();
        assert!(!c.store.wait_followed(&name, Duration::from_secs(5)));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(c.fetches.follows(), 0, "a wait never clones");
        assert_eq!(c.store.holds_copy(&name), Ok(false));
        let unknown = gitstore::RepoName::parse("acme/unknown").unwrap();
        assert_eq!(
            c.store.holds_copy(&unknown),
            Err(Error::UnknownRepo(unknown.clone()))
        );
    });
}

/// A replica whose follow of a recorded head failed (its source unreachable from here, say)
/// does not claim to hold a copy while the failure is fresh, and a read's wait gives up at
/// once: its calls go to another owner rather than wait for a follow that is not coming.
#[test]
fn a_replica_whose_follow_failed_holds_no_copy_for_a_while() {
    within(Duration::from_secs(120), || {
        let step = in_step(&["one"], Some(SourceFetch::Follow));
        let (source, gate, a, b) = (step.source, step.gate, step.a, step.b);
        let name = repo_name();
        assert_eq!(b.store.holds_copy(&name), Ok(true));

        let second = source.commit(&[("a.md", b"two\n")], "two");
        a.store.sync(&name).unwrap();
        // B sees A's record on its next call, and follows it.
        eventually(SEEN_WITHIN, "B's follow is held at the gate", || {
            let _ = b.store.holds_copy(&name);
            b.fetches.follows() == 1
        });
        // The source goes away before B's follow fetches from it.
        let moved = source.tmp().join("moved");
        std::fs::rename(source.path(), &moved).unwrap();
        gate.open();
        eventually(SEEN_WITHIN, "B's follow fails", || {
            b.store.holds_copy(&name) == Ok(false)
        });
        let started = Instant::now();
        assert!(!b.store.wait_followed(&name, Duration::from_secs(5)));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(
            b.store.resolve(&name, None),
            Err(Error::NotSynced(name.clone()))
        );

        // The source is back: once the failure is old, a follow is tried again and B holds
        // its copy at the recorded head.
        std::fs::rename(&moved, source.path()).unwrap();
        eventually(Duration::from_secs(20), "B follows again", || {
            b.store.wait_followed(&name, Duration::from_millis(500))
                && b.store.resolve(&name, None) == Ok(cid(&second))
        });
        assert_eq!(b.store.holds_copy(&name), Ok(true));
    });
}

/// A holder whose lease was taken over while it fetched (its renewals failed past the
/// expiry, say) records nothing: the record is fenced by the lease's token. It follows the
/// heads recorded instead.
#[test]
fn a_sync_that_lost_its_lease_records_nothing() {
    within(Duration::from_secs(120), || {
        let (url, clock, source) = setup();
        let first = source.commit(&[("a.md", b"one\n")], "one");
        let a = Replica::new(&url, &clock, None);
        let name = repo_name();
        a.store.register(registration(&source)).unwrap();
        a.store.sync(&name).unwrap();

        let second = source.commit(&[("a.md", b"two\n")], "two");
        let steal = url.clone();
        a.store.set_fetch_hook(Some(Arc::new(move |_, why| {
            if why == SourceFetch::Sync {
                // Another replica takes the lease over (a new token).
                connect(&steal)
                    .run(|client| {
                        client.execute(
                            "UPDATE sync_leases SET token = nextval('sync_lease_tokens')",
                            &[],
                        )
                    })
                    .unwrap();
            }
        })));
        let outcome = a.store.sync(&name).unwrap();
        assert_eq!(
            outcome.head,
            Some(cid(&first)),
            "the recorded head, followed"
        );
        let info = a.store.repo(&name).unwrap();
        assert_eq!(info.head, Some(cid(&first)), "nothing recorded");
        assert_eq!(info.last_error, None);
        assert_eq!(a.store.resolve(&name, None).unwrap(), cid(&first));
        assert!(matches!(
            a.store.resolve(&name, Some(&second)),
            Err(Error::OutsideRetention { .. })
        ));
        // The stolen lease is not this replica's to release.
        assert_eq!(sync_leases(&url), 1);
    });
}

/// Retention and gc follow the shared rows. A force-push leaves the old head retained by the
/// seen row A's sync recorded; B, whose mirror got the old head and then lost its branch to
/// the force-push, keeps it through its own sweeps and gc while the row is in the window,
/// and B's sweep drops the row only past the window by its recorded time. A, holding a lease
/// on the old head, keeps reading it through both replicas' sweeps and its own gc; once the
/// lease ends, A's next sweep lets it go.
#[test]
fn sweeps_and_gc_follow_the_shared_rows() {
    within(Duration::from_secs(180), || {
        let step = in_step(&["base", "old"], None);
        let (clock, source, commits, a, b) =
            (step.clock, step.source, step.commits, step.a, step.b);
        let (base, old, name) = (commits[0].clone(), commits[1].clone(), repo_name());

        // Force-push main to base → new; A syncs; B follows on its own (notification).
        clock.advance(DAY * 10);
        let new = force_pushed(&a, &b, &source, &base);
        assert_eq!(b.mirror_rev("refs/heads/main"), Some(new.clone()));
        assert_eq!(b.read(&name, &old).unwrap(), "old\n");
        let lease = a.store.lease_revision(&name, Some(&old)).unwrap();

        let gcs = Arc::new(AtomicUsize::new(0));
        let counted = gcs.clone();
        b.store.set_gc_hook(Some(Arc::new(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        })));
        // A garbage collection on B: a pin and unpin leave B's mirror marked for one.
        let collect_on_b = || {
            b.store.pin(&name, &cid(&new)).unwrap();
            b.store.unpin(&name, &cid(&new)).unwrap();
            let before = gcs.load(Ordering::SeqCst);
            let report = b.store.sweep().unwrap();
            assert_eq!(gcs.load(Ordering::SeqCst), before + 1, "B collected");
            report
        };

        // Day 29 after the old head was seen: in the window. B's sweep and gc keep it, in
        // the shared rows and in B's mirror.
        clock.advance(DAY * 19);
        let report = collect_on_b();
        assert!(report.expired.is_empty(), "{report:?}");
        assert_eq!(b.read(&name, &old).unwrap(), "old\n");
        assert_eq!(b.mirror_rev(&old), Some(old.clone()));
        eventually(SEEN_WITHIN, "A still resolves it", || {
            a.store.resolve(&name, Some(&old)) == Ok(cid(&old))
        });
        assert_eq!(b.store.resolve(&name, Some(&old)).unwrap(), cid(&old));

        // Day 31: past the window by its recorded time. B's sweep drops the row (B holds no
        // lease, and A's lease is A's business) and B's gc the commit.
        clock.advance(DAY * 2);
        let report = collect_on_b();
        assert_eq!(report.expired, vec![(name.clone(), cid(&old))]);
        assert_eq!(b.mirror_rev(&old), None);
        assert!(b.store.resolve(&name, Some(&old)).is_err());
        // A's lease reads on, through A's own sweep and gc.
        assert_eq!(&*lease.read_text(&path("a.md")).unwrap(), "old\n");
        eventually(SEEN_WITHIN, "A sees the row gone", || {
            a.store.resolve(&name, Some(&old)).is_err()
        });
        a.store.sweep().unwrap();
        let a_mirror_has_old = || a.mirror_rev(&old).is_some();
        assert!(a_mirror_has_old(), "kept by A's lease");
        assert_eq!(&*lease.read_text(&path("a.md")).unwrap(), "old\n");
        assert_eq!(a.read(&name, &new).unwrap(), "new\n");
        drop(lease);
        a.store.sweep().unwrap();
        assert!(!a_mirror_has_old(), "let go once the lease ended");
        assert_eq!(a.read(&name, &new).unwrap(), "new\n");
        assert_eq!(b.read(&name, &new).unwrap(), "new\n");
    });
}

/// A pin made through one replica keeps the commit in every replica's mirror past the
/// window, whoever sweeps; unpinned through that replica, the others let it go.
#[test]
fn pins_keep_commits_in_every_mirror() {
    within(Duration::from_secs(180), || {
        let step = in_step(&["base", "old"], None);
        let (clock, source, commits, a, b) =
            (step.clock, step.source, step.commits, step.a, step.b);
        let (base, old, name) = (commits[0].clone(), commits[1].clone(), repo_name());
        let new = force_pushed(&a, &b, &source, &base);
        a.store.pin(&name, &cid(&old)).unwrap();

        clock.advance(DAY * 31);
        eventually(SEEN_WITHIN, "B sees the pin", || {
            b.store.resolve(&name, Some(&old)) == Ok(cid(&old))
        });
        // B collects (a pin and unpin of its own mark its mirror): the pinned commit stays.
        b.store.pin(&name, &cid(&new)).unwrap();
        b.store.unpin(&name, &cid(&new)).unwrap();
        let report = b.store.sweep().unwrap();
        assert!(report.expired.is_empty(), "{report:?}");
        assert_eq!(b.mirror_rev(&old), Some(old.clone()));
        assert_eq!(b.read(&name, &old).unwrap(), "old\n");
        assert_eq!(a.read(&name, &old).unwrap(), "old\n");

        // Unpinned through A: B's next sweep lets it go from B's mirror.
        a.store.unpin(&name, &cid(&old)).unwrap();
        eventually(SEEN_WITHIN, "B sees the unpin", || {
            b.store.resolve(&name, Some(&old)).is_err()
        });
        b.store.sweep().unwrap();
        assert_eq!(b.mirror_rev(&old), None);
        assert_eq!(b.read(&name, &new).unwrap(), "new\n");
    });
}

/// SQLite mode is unchanged: no recorded heads (the schema stays at version 1), no leases,
/// no follows; a branch resolves to the mirror's own ref, as another process of the data
/// directory moved it.
#[test]
fn sqlite_resolves_from_the_mirror_as_before() {
    within(Duration::from_secs(60), || {
        let source = testgit::SourceRepo::new();
        let first = source.commit(&[("a.md", b"one\n")], "one");
        let data = source.data_dir();
        let clock = clock();
        let store = open(&data, &clock, Metadata::Sqlite);
        let fetches = Arc::new(Fetches::default());
        store.set_fetch_hook(Some(fetches.hook(None)));
        let name = repo_name();
        store.register(registration(&source)).unwrap();
        assert_eq!(store.sync(&name).unwrap().head, Some(cid(&first)));
        let second = source.commit(&[("a.md", b"two\n")], "two");
        store.sync(&name).unwrap();
        assert_eq!(store.resolve(&name, Some("main")).unwrap(), cid(&second));

        // Move the mirror's branch back by hand: a process opening the data directory now
        // resolves main from the mirror's ref, whatever the metadata says.
        let mirror = data.join("mirrors/acme/widgets.git");
        testgit::git(
            source.tmp(),
            &[
                "--git-dir",
                mirror.to_str().unwrap(),
                "update-ref",
                "refs/heads/main",
                &first,
            ],
        );
        let other = open(&data, &clock, Metadata::Sqlite);
        assert_eq!(other.resolve(&name, Some("main")).unwrap(), cid(&first));
        assert_eq!(other.repo(&name).unwrap().head, Some(cid(&second)));
        assert_eq!(
            other
                .read_text(&name, &cid(&first), &path("a.md"))
                .unwrap()
                .to_string(),
            "one\n"
        );
        // An unknown SHA is unknown, never "not synced".
        let unknown = "0123456789012345678901234567890123456789";
        assert!(matches!(
            store.resolve(&name, Some(unknown)),
            Err(Error::UnknownRevision { .. })
        ));
        assert_eq!((fetches.syncs(), fetches.follows()), (2, 0));

        let conn = rusqlite::Connection::open(data.join(gitstore::METADATA_FILE)).unwrap();
        assert_eq!(sqlite_schema_version(&conn), SQLITE_SCHEMA);
        let tables = sqlite_int(
            &conn,
            "SELECT count(*) FROM sqlite_master WHERE name IN ('branch_heads', 'sync_leases')",
        );
        assert_eq!(tables, 0);
    });
}
