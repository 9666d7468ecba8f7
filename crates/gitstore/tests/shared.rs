//! Several stores on one data directory, as several `csg` processes share it (every `csg mcp`
//! of a user, a `serve`, the `csg repo` commands): leases, removals and gc hold across them
//! (G-1, G-8). Two `GitStore`s in one test process are as separate as two processes: they
//! share no memory, and their file locks conflict like those of two processes.

#[allow(unused)]
mod common;

use common::{Fixture, cid, open_store, path};
use gitstore::{Error, GitStore, RepoPath};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

fn read(store: &GitStore, f: &Fixture, sha: &str) -> Result<String, Error> {
    store
        .read_text(&f.name, &cid(sha), &path("a.md"))
        .map(|t| t.to_string())
}

fn trash_entries(f: &Fixture) -> usize {
    std::fs::read_dir(f.data.join("trash"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// G-8 across processes: a lease taken in store A keeps a force-pushed-away commit through a
/// sweep (and gc) in store B past retention; A still reads it. After A releases, the record
/// goes at A's next sweep (never on the release itself), and then the commit is pruned.
#[test]
fn g8_lease_in_one_store_holds_against_sweep_in_another() {
    let f = Fixture::new();
    let (_, old, new) = f.force_pushed();
    let other = open_store(&f.data, &f.clock);
    let lease = f.store.lease(&f.name, &cid(&old)).unwrap();
    f.advance_days(31);

    let report = other.sweep().unwrap();
    assert_eq!(report.kept_by_lease, vec![(f.name.clone(), cid(&old))]);
    assert!(report.expired.is_empty(), "{report:?}");
    assert!(f.mirror_has(&old), "B's gc kept A's leased commit");
    assert_eq!(read(&f.store, &f, &old).unwrap(), "old\n");
    // New requests are refused in both: the commit left retention.
    for store in [&f.store, &other] {
        assert!(matches!(
            store.resolve(&f.name, Some(&old)),
            Err(Error::OutsideRetention { .. })
        ));
    }

    drop(lease);
    // The release is memory only: A's record stays until A's own sweep.
    assert_eq!(
        other.sweep().unwrap().kept_by_lease,
        vec![(f.name.clone(), cid(&old))]
    );
    assert!(f.mirror_has(&old));
    let report = f.store.sweep().unwrap();
    assert_eq!(report.expired, vec![(f.name.clone(), cid(&old))]);
    assert!(!f.mirror_has(&old), "pruned once no store holds a lease");
    for store in [&f.store, &other] {
        assert!(read(store, &f, &old).is_err());
        assert_eq!(read(store, &f, &new).unwrap(), "new\n");
    }
}

/// G-8: the lease records of a store that ended without cleaning up (a killed process: its
/// liveness lock is free) are detected and dropped by another store's sweep.
#[test]
fn g8_leases_of_an_ended_process_time_out() {
    let f = Fixture::new();
    let (_, old, _) = f.force_pushed();
    let doomed = open_store(&f.data, &f.clock);
    let lease = doomed.lease(&f.name, &cid(&old)).unwrap();
    f.advance_days(31);
    assert_eq!(
        f.store.sweep().unwrap().kept_by_lease,
        vec![(f.name.clone(), cid(&old))],
        "a live store's lease holds"
    );
    // Ends without a sweep: like a killed process it leaves its record directory behind,
    // and only its liveness lock (closed with its descriptor) says it is gone.
    drop(lease);
    drop(doomed);
    let record_dirs = || {
        std::fs::read_dir(f.data.join("leases"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_dir())
            .count()
    };
    assert_eq!(
        record_dirs(),
        2,
        "the ended store's records are still on disk"
    );
    // A `git` another test of this binary forks at that moment holds a copy of the ended
    // store's lock descriptor until it execs: the next sweep sees the store gone.
    let mut report = f.store.sweep().unwrap();
    for _ in 0..50 {
        if !report.expired.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        report = f.store.sweep().unwrap();
    }
    assert_eq!(
        report.expired,
        vec![(f.name.clone(), cid(&old))],
        "{report:?}"
    );
    assert!(!f.mirror_has(&old));
    assert_eq!(record_dirs(), 1, "the ended store's records were dropped");
}

/// G-3, G-8 across processes: reads in store A never fail while store B syncs, sweeps past
/// retention and collects garbage on the same mirrors.
#[test]
fn g8_reads_in_one_store_never_fail_while_another_syncs_and_gcs() {
    let f = Fixture::new();
    let (_, old, _) = f.force_pushed();
    let other = open_store(&f.data, &f.clock);
    let lease = f.store.lease(&f.name, &cid(&old)).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut reads = 0u32;
                    while !stop.load(Ordering::SeqCst) {
                        assert_eq!(read(&f.store, &f, &old).unwrap(), "old\n");
                        let head = f.store.resolve(&f.name, None).unwrap();
                        let lease = f.store.lease(&f.name, &head).unwrap();
                        f.store
                            .list_tree(&f.name, lease.commit(), &RepoPath::root(), 2)
                            .unwrap();
                        f.store
                            .read_text(&f.name, lease.commit(), &path("a.md"))
                            .unwrap();
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for i in 0..4 {
            f.commit(&[(&format!("n{i}.md"), b"x\n")], "more");
            other.sync(&f.name).unwrap();
            f.advance_days(20);
            let report = other.sweep().unwrap();
            assert!(report.expired.is_empty(), "{report:?}");
        }
        stop.store(true, Ordering::SeqCst);
        for reader in readers {
            assert!(reader.join().unwrap() > 0);
        }
    });
    assert!(f.mirror_has(&old));
    // A sees B's syncs without syncing itself.
    assert_eq!(
        f.store.resolve(&f.name, None).unwrap(),
        other.resolve(&f.name, None).unwrap()
    );
    drop(lease);
}

/// G-1: a registration added by another process is readable on the next call (not only
/// listed), and one removed by another process answers "unknown repository" (a clear error,
/// never a storage error); its mirror waits in the trash while a lease record on it lives.
#[test]
fn g1_registry_changes_of_another_store_are_seen_on_the_next_call() {
    let f = Fixture::new();
    let tip = f.commit(&[("a.md", b"alpha\n")], "a");
    let server = open_store(&f.data, &f.clock);
    assert!(matches!(
        server.resolve(&f.name, None),
        Err(Error::UnknownRepo(_))
    ));

    // `csg repo add` in another process: register and first sync.
    f.register("");
    f.sync();
    assert_eq!(server.resolve(&f.name, None).unwrap(), cid(&tip));
    assert_eq!(read(&server, &f, &tip).unwrap(), "alpha\n");

    // A new head synced elsewhere is seen too.
    let next = f.commit(&[("a.md", b"beta\n")], "b");
    f.sync();
    assert_eq!(server.resolve(&f.name, None).unwrap(), cid(&next));

    // `csg repo remove` in another process while the server holds a lease.
    let lease = server.lease(&f.name, &cid(&next)).unwrap();
    f.store.unregister(&f.name).unwrap();
    assert!(!f.mirror().exists(), "the mirror left its place");
    for err in [
        server.resolve(&f.name, None).unwrap_err(),
        server
            .read_text(&f.name, &cid(&next), &path("a.md"))
            .unwrap_err(),
        server.sync(&f.name).unwrap_err(),
    ] {
        assert_eq!(err, Error::UnknownRepo(f.name.clone()));
        f.assert_path_free(&err.to_string());
    }
    assert!(
        !f.mirror().exists(),
        "the server's sync did not bring it back"
    );
    f.store.sweep().unwrap();
    assert_eq!(
        trash_entries(&f),
        1,
        "kept while the server's lease record lives"
    );
    drop(lease);
    server.sweep().unwrap();
    assert_eq!(trash_entries(&f), 0, "deleted once no lease record is left");

    // Registered again under the same name: a new registration for everyone.
    f.register("");
    f.sync();
    assert_eq!(read(&server, &f, &next).unwrap(), "beta\n");
}

/// 14: reads of a repository do not wait for its garbage collection. The gc hook runs on the
/// sweeping thread with every lock gc holds; reads on another thread, in the same store and in
/// another one, must finish while the hook still waits for them.
#[test]
fn g8_reads_proceed_while_gc_runs() {
    let f = Fixture::new();
    let (_, old, new) = f.force_pushed();
    f.advance_days(31);
    let reader = open_store(&f.data, &f.clock);
    type Reads = Vec<Result<String, Error>>;
    let (tx, rx) = mpsc::channel::<Reads>();
    let rx = std::sync::Mutex::new(rx);
    let outcome: Arc<std::sync::Mutex<Option<Result<Reads, mpsc::RecvTimeoutError>>>> =
        Arc::default();
    {
        let outcome = outcome.clone();
        let same = f.store.clone();
        let name = f.name.clone();
        f.store.set_gc_hook(Some(Arc::new(move |_| {
            let (same, other, name, new, tx) = (
                same.clone(),
                reader.clone(),
                name.clone(),
                new.clone(),
                tx.clone(),
            );
            std::thread::spawn(move || {
                let read = |s: &GitStore| {
                    s.read_text(&name, &cid(&new), &path("a.md"))
                        .map(|t| t.to_string())
                };
                let _ = tx.send(vec![read(&same), read(&other)]);
            });
            // A guard against hanging forever on reads that wait for gc, not a timing
            // measurement: reads that do not wait finish at once.
            let got = rx.lock().unwrap().recv_timeout(GUARD);
            *outcome.lock().unwrap() = Some(got);
        })));
    }
    let report = f.store.sweep().unwrap();
    f.store.set_gc_hook(None);
    assert_eq!(report.expired, vec![(f.name.clone(), cid(&old))]);
    let got = outcome.lock().unwrap().take().expect("gc ran the hook");
    assert_eq!(
        got.expect("the reads finished while gc held its locks"),
        vec![Ok("new\n".to_string()), Ok("new\n".to_string())]
    );
    assert!(!f.mirror_has(&old));
}

const GUARD: Duration = Duration::from_secs(120);

/// 12: whether a mirror needs garbage collection is on disk, known to every process: a store
/// opened on a data directory does not gc a mirror nothing was deleted from (today's stores
/// each ran `git gc --prune=now` on every mirror on their first sweep), and a gc one store
/// did is not repeated by another.
#[test]
fn g8_gc_only_after_deletions_whoever_sweeps() {
    use std::sync::atomic::AtomicUsize;
    let f = Fixture::new();
    let (_, old, _) = f.force_pushed();
    let counting = |store: &GitStore| {
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        store.set_gc_hook(Some(Arc::new(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        })));
        count
    };
    let first = counting(&f.store);
    let other = open_store(&f.data, &f.clock);
    let second = counting(&other);
    assert_eq!(other.sweep().unwrap(), Default::default());
    assert_eq!(f.store.sweep().unwrap(), Default::default());
    assert_eq!(
        (first.load(Ordering::SeqCst), second.load(Ordering::SeqCst)),
        (0, 0),
        "nothing was deleted: no gc"
    );
    f.advance_days(31);
    assert_eq!(
        other.sweep().unwrap().expired,
        vec![(f.name.clone(), cid(&old))]
    );
    assert!(!f.mirror_has(&old));
    f.store.sweep().unwrap();
    other.sweep().unwrap();
    assert_eq!(
        (first.load(Ordering::SeqCst), second.load(Ordering::SeqCst)),
        (0, 1),
        "one gc, by the store that deleted the refs"
    );
    f.store.set_gc_hook(None);
    other.set_gc_hook(None);
}

/// G-1: a metadata database from before incarnations and state generations opens: its
/// registrations get distinct incarnations (their lease records never collide) and read.
#[test]
fn g1_old_metadata_database_is_upgraded() {
    let source = testgit::SourceRepo::with_files(&[("a.md", b"alpha\n")]);
    let tip = source.head();
    let data = source.data_dir();
    std::fs::create_dir_all(&data).unwrap();
    {
        let conn = rusqlite::Connection::open(data.join("csg.sqlite")).unwrap();
        conn.execute_batch(
            "CREATE TABLE repos (name TEXT PRIMARY KEY NOT NULL, source TEXT NOT NULL,
                 registered_path TEXT NOT NULL, branch TEXT, default_branch TEXT, head TEXT,
                 last_sync INTEGER, last_good_sync INTEGER, last_error TEXT);",
        )
        .unwrap();
        for name in ["acme/one", "acme/two"] {
            conn.execute(
                "INSERT INTO repos (name, source, registered_path) VALUES (?1, ?2, '')",
                [name, &source.source()],
            )
            .unwrap();
        }
    }
    let clock = gitstore::ManualClock::new(std::time::SystemTime::now());
    let store = open_store(&data, &clock);
    let mut leases = Vec::new();
    for name in ["acme/one", "acme/two"] {
        let name = gitstore::RepoName::parse(name).unwrap();
        store.sync(&name).unwrap();
        assert_eq!(
            &*store.read_text(&name, &cid(&tip), &path("a.md")).unwrap(),
            "alpha\n"
        );
        leases.push(store.lease(&name, &cid(&tip)).unwrap());
    }
    let mut prefixes = std::collections::HashSet::new();
    for dir in std::fs::read_dir(data.join("leases")).unwrap() {
        let dir = dir.unwrap().path();
        if dir.is_dir() {
            for record in std::fs::read_dir(dir).unwrap() {
                let name = record.unwrap().file_name().to_string_lossy().into_owned();
                prefixes.insert(name.split_once('-').unwrap().0.to_string());
            }
        }
    }
    assert_eq!(prefixes.len(), 2, "distinct incarnations: {prefixes:?}");
    // And a second store on the upgraded database agrees.
    let other = open_store(&data, &clock);
    assert_eq!(other.repos().unwrap().len(), 2);
}
