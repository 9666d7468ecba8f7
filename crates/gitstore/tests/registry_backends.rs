//! The registry's behaviour on both metadata backends (issue 31): every test in `both!` runs
//! once on SQLite in a temporary data directory and once on a fresh database of a real
//! PostgreSQL server (`metadb::testing`), against real Git repositories. Below them, what only
//! cluster mode has: two stores with their own data directories on one database (two
//! replicas), and a database outage.

mod replicas;

use gitstore::{
    DEFAULT_RETENTION, Error, GitStore, ManualClock, Metadata, Registration, RepoName, RepoPath,
    StoreConfig,
};
use metadb::testing::{eventually, within};
use replicas::{
    DAY, SEEN_WITHIN, SQLITE_SCHEMA, cid, clock, connect, name, open, path, sqlite_int,
    sqlite_schema_version,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Where a store's metadata lives.
#[derive(Clone)]
enum Backend {
    Sqlite,
    /// A database URL.
    Postgres(String),
}

impl Backend {
    fn postgres() -> Self {
        Backend::Postgres(metadb::testing::shared().create_database())
    }

    fn metadata(&self) -> Metadata {
        match self {
            Backend::Sqlite => Metadata::Sqlite,
            Backend::Postgres(url) => Metadata::Postgres(connect(url)),
        }
    }
}

/// A source repository and a store on `backend` with a manual clock.
struct Fixture {
    source: testgit::SourceRepo,
    data: PathBuf,
    clock: ManualClock,
    backend: Backend,
    store: GitStore,
    name: RepoName,
}

impl Fixture {
    fn new(backend: Backend) -> Self {
        let source = testgit::SourceRepo::new();
        let data = source.data_dir();
        let clock = clock();
        let store = open(&data, &clock, backend.metadata());
        Self {
            source,
            data,
            clock,
            backend,
            store,
            name: name("acme/widgets"),
        }
    }

    /// The same metadata opened again (a restarted process).
    fn reopen(&self) -> GitStore {
        open(&self.data, &self.clock, self.backend.metadata())
    }

    /// Another replica on this fixture's database: a store on a data directory of its own
    /// (the directory goes with the returned guard) with a connection of its own.
    fn other_replica(&self) -> (tempfile::TempDir, GitStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &self.clock, self.backend.metadata());
        (dir, store)
    }

    fn registration(&self, private: Option<bool>) -> Registration {
        Registration {
            name: self.name.clone(),
            source: self.source.source(),
            registered_path: RepoPath::root(),
            branch: None,
            private,
        }
    }

    fn commit(&self, files: &[(&str, &[u8])], message: &str) -> String {
        self.source.commit(files, message)
    }

    fn read(&self, sha: &str) -> Result<String, Error> {
        read(&self.store, &self.name, sha)
    }

    /// main = base → old, synced; then main force-pushed to base → new, synced. Answers
    /// (base, old, new).
    fn force_pushed(&self) -> (String, String, String) {
        let base = self.commit(&[("a.md", b"base\n")], "base");
        let old = self.commit(&[("a.md", b"old\n")], "old");
        self.store.register(self.registration(None)).unwrap();
        self.store.sync(&self.name).unwrap();
        self.source.git(&["reset", "-q", "--hard", &base]);
        let new = self.commit(&[("a.md", b"new\n")], "new");
        self.store.sync(&self.name).unwrap();
        (base, old, new)
    }
}

fn read(store: &GitStore, name: &RepoName, sha: &str) -> Result<String, Error> {
    store
        .read_text(name, &cid(sha), &path("a.md"))
        .map(|t| t.to_string())
}

// ----- the same tests on both backends -----------------------------------------------------

/// Registrations are listed sorted and read back as registered; registering the same again
/// is the existing registration, another source or visibility under the name is refused;
/// they survive a restart.
fn register_and_list(backend: Backend) {
    let f = Fixture::new(backend);
    f.commit(&[("a.md", b"alpha\n")], "a");
    let info = f.store.register(f.registration(None)).unwrap();
    assert_eq!(info.name, f.name);
    assert_eq!(info.source, f.source.source());
    assert_eq!(info.registered_path, RepoPath::root());
    assert_eq!(
        (&info.head, info.last_sync, info.private),
        (&None, None, false)
    );
    let other = Registration {
        name: name("acme/docs"),
        source: f.source.source(),
        registered_path: path("docs"),
        branch: Some("main".to_string()),
        private: Some(true),
    };
    f.store.register(other.clone()).unwrap();

    let listed: Vec<_> = f
        .store
        .repos()
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(listed, vec![name("acme/docs"), f.name.clone()]);
    let docs = f.store.repo(&name("acme/docs")).unwrap();
    assert_eq!(docs.registered_path, path("docs"));
    assert_eq!(docs.default_branch.as_deref(), Some("main"));
    assert!(docs.private);

    // The same registration again is a no-op answering the existing one.
    assert_eq!(f.store.register(f.registration(None)).unwrap(), info);
    let taken = Registration {
        source: format!("{}-elsewhere", f.source.source()),
        ..f.registration(None)
    };
    assert_eq!(
        f.store.register(taken).unwrap_err(),
        Error::NameTaken(f.name.clone())
    );
    assert!(matches!(
        f.store.register(f.registration(Some(true))),
        Err(Error::VisibilityDiffers { private: false, .. })
    ));
    assert!(matches!(
        f.store.repo(&name("acme/nothing")),
        Err(Error::UnknownRepo(_))
    ));

    let again = f.reopen();
    assert_eq!(again.repos().unwrap(), f.store.repos().unwrap());
}

/// A sync records the head, the default branch and the times; a later sync moves the head;
/// a failed sync records its error and keeps the last good state.
fn sync_records_head(backend: Backend) {
    let f = Fixture::new(backend);
    let first = f.commit(&[("a.md", b"alpha\n")], "a");
    f.store.register(f.registration(None)).unwrap();
    assert!(matches!(
        f.store.resolve(&f.name, None),
        Err(Error::NotSynced(_))
    ));

    let outcome = f.store.sync(&f.name).unwrap();
    assert_eq!(outcome.head, Some(cid(&first)));
    let info = f.store.repo(&f.name).unwrap();
    assert_eq!(info.head, Some(cid(&first)));
    assert_eq!(info.default_branch.as_deref(), Some("main"));
    assert_eq!(info.last_sync, Some(f.clock_now()));
    assert_eq!(info.last_good_sync, info.last_sync);
    assert_eq!(info.last_error, None);
    assert_eq!(f.store.resolve(&f.name, None).unwrap(), cid(&first));
    assert_eq!(f.read(&first).unwrap(), "alpha\n");

    f.clock.advance(Duration::from_secs(60));
    let second = f.commit(&[("a.md", b"beta\n")], "b");
    f.store.sync(&f.name).unwrap();
    assert_eq!(f.store.repo(&f.name).unwrap().head, Some(cid(&second)));
    assert_eq!(
        f.store.resolve(&f.name, Some("main")).unwrap(),
        cid(&second)
    );
    // What the sync recorded is what a restarted process reads.
    let again = f.reopen();
    assert_eq!(again.repo(&f.name).unwrap().head, Some(cid(&second)));
    assert_eq!(read(&again, &f.name, &second).unwrap(), "beta\n");

    // The source vanishes: the failure is recorded, the last good state keeps serving.
    let moved = f.source.tmp().join("moved");
    std::fs::rename(f.source.path(), &moved).unwrap();
    f.clock.advance(Duration::from_secs(60));
    assert!(matches!(f.store.sync(&f.name), Err(Error::Sync { .. })));
    let info = f.store.repo(&f.name).unwrap();
    assert!(info.last_error.is_some(), "{info:?}");
    assert_eq!(info.last_sync, Some(f.clock_now()));
    assert!(info.last_good_sync < info.last_sync);
    assert_eq!(info.head, Some(cid(&second)));
    assert_eq!(f.read(&second).unwrap(), "beta\n");
    std::fs::rename(&moved, f.source.path()).unwrap();
}

/// A removed registration is unknown everywhere; the name can be registered again.
fn remove(backend: Backend) {
    let f = Fixture::new(backend);
    let tip = f.commit(&[("a.md", b"alpha\n")], "a");
    f.store.register(f.registration(None)).unwrap();
    f.store.sync(&f.name).unwrap();
    f.store.unregister(&f.name).unwrap();
    assert!(f.store.repos().unwrap().is_empty());
    assert_eq!(
        f.store.resolve(&f.name, None).unwrap_err(),
        Error::UnknownRepo(f.name.clone())
    );
    assert!(matches!(f.store.repo(&f.name), Err(Error::UnknownRepo(_))));
    assert_eq!(
        f.store.unregister(&f.name).unwrap_err(),
        Error::UnknownRepo(f.name.clone())
    );
    assert!(f.reopen().repos().unwrap().is_empty());

    f.store.register(f.registration(None)).unwrap();
    assert!(matches!(
        f.store.resolve(&f.name, None),
        Err(Error::NotSynced(_))
    ));
    f.store.sync(&f.name).unwrap();
    assert_eq!(f.read(&tip).unwrap(), "alpha\n");
}

/// The private flag: set at registration, changed in place, kept across a restart.
fn private_flag(backend: Backend) {
    let f = Fixture::new(backend);
    f.commit(&[("a.md", b"alpha\n")], "a");
    f.store.register(f.registration(Some(true))).unwrap();
    assert!(f.store.is_private(&f.name).unwrap());
    assert!(f.store.repo(&f.name).unwrap().private);
    f.store.set_private(&f.name, false).unwrap();
    assert!(!f.store.is_private(&f.name).unwrap());
    assert!(!f.store.repo(&f.name).unwrap().private);
    // `None` keeps whatever it is.
    f.store.register(f.registration(None)).unwrap();
    assert!(!f.reopen().is_private(&f.name).unwrap());
    f.store.set_private(&f.name, true).unwrap();
    assert!(f.reopen().is_private(&f.name).unwrap());
    assert_eq!(
        f.store
            .set_private(&name("acme/nothing"), true)
            .unwrap_err(),
        Error::UnknownRepo(name("acme/nothing"))
    );
}

/// Heads seen by syncs stay readable for the retention window, and sweeping past it drops
/// them (G-5).
fn seen_heads(backend: Backend) {
    let f = Fixture::new(backend);
    let (_, old, new) = f.force_pushed();
    assert_eq!(f.read(&old).unwrap(), "old\n");
    assert_eq!(f.read(&new).unwrap(), "new\n");
    // A restarted process knows the old head from the metadata.
    assert_eq!(f.reopen().resolve(&f.name, Some(&old)).unwrap(), cid(&old));
    f.clock.advance(DAY * 29);
    assert_eq!(f.store.sweep().unwrap(), Default::default());
    assert_eq!(f.read(&old).unwrap(), "old\n");
    f.clock.advance(DAY * 2);
    let report = f.store.sweep().unwrap();
    assert_eq!(report.expired, vec![(f.name.clone(), cid(&old))]);
    assert!(f.store.resolve(&f.name, Some(&old)).is_err());
    assert!(f.reopen().resolve(&f.name, Some(&old)).is_err());
    assert_eq!(f.read(&new).unwrap(), "new\n");
}

/// A pin keeps a former head readable past retention, also for a restarted process; unpinned,
/// it goes.
fn pins(backend: Backend) {
    let f = Fixture::new(backend);
    let (_, old, _) = f.force_pushed();
    f.store.pin(&f.name, &cid(&old)).unwrap();
    f.store.pin(&f.name, &cid(&old)).unwrap();
    f.clock.advance(DAY * 31);
    assert!(f.store.sweep().unwrap().expired.is_empty());
    assert_eq!(f.read(&old).unwrap(), "old\n");
    assert_eq!(read(&f.reopen(), &f.name, &old).unwrap(), "old\n");

    f.store.unpin(&f.name, &cid(&old)).unwrap();
    f.store.unpin(&f.name, &cid(&old)).unwrap();
    assert!(matches!(
        f.store.resolve(&f.name, Some(&old)),
        Err(Error::OutsideRetention { .. })
    ));
    let report = f.store.sweep().unwrap();
    assert_eq!(report.expired, vec![(f.name.clone(), cid(&old))]);
    assert!(f.reopen().resolve(&f.name, Some(&old)).is_err());
}

impl Fixture {
    fn clock_now(&self) -> SystemTime {
        use gitstore::Clock;
        self.clock.now()
    }
}

/// Each test twice: `sqlite::NAME` and `postgres::NAME`, each under a timeout.
macro_rules! both {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $test() {
                    super::within(std::time::Duration::from_secs(120), || {
                        super::$test(super::Backend::Sqlite)
                    });
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $test() {
                    super::within(std::time::Duration::from_secs(180), || {
                        super::$test(super::Backend::postgres())
                    });
                }
            )*
        }
    };
}

both!(
    register_and_list,
    sync_records_head,
    remove,
    private_flag,
    seen_heads,
    pins
);

// ----- SQLite only ---------------------------------------------------------------------------

/// A data directory from before the schema was versioned (today's tables, no version row)
/// opens with its rows as they were and is marked version 1; one marked newer than this
/// binary knows is refused with a clear error.
#[test]
fn sqlite_schema_is_versioned() {
    within(Duration::from_secs(60), || {
        let source = testgit::SourceRepo::with_files(&[("a.md", b"alpha\n")]);
        let data = source.data_dir();
        std::fs::create_dir_all(&data).unwrap();
        let file = data.join(gitstore::METADATA_FILE);
        {
            let conn = rusqlite::Connection::open(&file).unwrap();
            conn.execute_batch(
                "CREATE TABLE repos (name TEXT PRIMARY KEY NOT NULL, source TEXT NOT NULL,
                     registered_path TEXT NOT NULL, branch TEXT, default_branch TEXT, head TEXT,
                     last_sync INTEGER, last_good_sync INTEGER, last_error TEXT,
                     incarnation INTEGER NOT NULL DEFAULT 0, state_gen INTEGER NOT NULL DEFAULT 0,
                     private INTEGER NOT NULL DEFAULT 0);
                 CREATE TABLE seen_heads (repo TEXT NOT NULL, sha TEXT NOT NULL,
                     last_seen INTEGER NOT NULL, PRIMARY KEY (repo, sha));
                 CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
                 CREATE TABLE pins (repo TEXT NOT NULL, sha TEXT NOT NULL, PRIMARY KEY (repo, sha));
                 INSERT INTO meta (key, value) VALUES ('registry_generation', 7);",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO repos (name, source, registered_path, incarnation, private)
                 VALUES ('acme/one', ?1, '', 7, 1)",
                [source.source()],
            )
            .unwrap();
        }
        let clock = ManualClock::new(SystemTime::now());
        let store = open(&data, &clock, Metadata::Sqlite);
        let repos = store.repos().unwrap();
        assert_eq!(repos.len(), 1);
        assert!(repos[0].private);
        store.sync(&name("acme/one")).unwrap();
        assert_eq!(
            read(&store, &name("acme/one"), &source.head()).unwrap(),
            "alpha\n"
        );
        drop(store);
        let conn = rusqlite::Connection::open(&file).unwrap();
        // Version 1 for the tables as they were, then 2 (index-branch patterns, S-8).
        assert_eq!(sqlite_schema_version(&conn), SQLITE_SCHEMA);
        assert_eq!(
            sqlite_int(&conn, "SELECT incarnation FROM repos"),
            7,
            "rows are left as they were"
        );

        conn.execute(
            "UPDATE meta SET value = 99 WHERE key = 'registry_schema_version'",
            [],
        )
        .unwrap();
        drop(conn);
        let refused = GitStore::open(
            StoreConfig {
                data_dir: data.clone(),
                retention: DEFAULT_RETENTION,
            },
            Arc::new(clock.clone()),
        )
        .err()
        .expect("a newer schema is refused");
        let text = refused.to_string();
        assert!(
            text.contains("version 99") && text.contains("newer"),
            "{text}"
        );
        assert!(
            !text.contains(&data.to_string_lossy().into_owned()),
            "{text}"
        );
    });
}

// ----- PostgreSQL only: replicas and outages -------------------------------------------------

/// Two stores with their own data directories on one database: what one registers the other
/// lists within moments and reads once it synced its own mirror; what one removes is gone
/// from the other; a name registered again with another source is never served from the
/// mirror a replica kept of the old registration.
#[test]
fn postgres_two_replicas_share_the_registry() {
    within(Duration::from_secs(180), || {
        let a = Fixture::new(Backend::postgres());
        let (b_dir, b) = a.other_replica();
        let tip = a.commit(&[("a.md", b"alpha\n")], "a");

        // B has looked at the registry before A's change.
        assert!(b.repos().unwrap().is_empty());
        a.store.register(a.registration(None)).unwrap();
        a.store.sync(&a.name).unwrap();
        eventually(SEEN_WITHIN, "B lists A's registration", || {
            b.repos().unwrap().iter().any(|r| r.name == a.name)
        });
        eventually(SEEN_WITHIN, "B sees A's sync", || {
            b.repo(&a.name).unwrap().head == Some(cid(&tip))
        });
        // B has no mirror yet: not readable there until B syncs its own.
        assert!(matches!(b.resolve(&a.name, None), Err(Error::NotSynced(_))));
        b.sync(&a.name).unwrap();
        assert!(b_dir.path().join("mirrors/acme/widgets.git").is_dir());
        assert_eq!(b.resolve(&a.name, None).unwrap(), cid(&tip));
        assert_eq!(read(&b, &a.name, &tip).unwrap(), "alpha\n");

        // Visibility set through B is seen by A.
        b.set_private(&a.name, true).unwrap();
        eventually(SEEN_WITHIN, "A sees B's visibility change", || {
            a.store.is_private(&a.name).unwrap()
        });

        // A removes it: B answers "unknown repository" for it.
        a.store.unregister(&a.name).unwrap();
        eventually(SEEN_WITHIN, "B sees A's removal", || {
            matches!(b.resolve(&a.name, None), Err(Error::UnknownRepo(_)))
        });
        assert!(b.repos().unwrap().is_empty());
        assert!(matches!(
            b.read_text(&a.name, &cid(&tip), &path("a.md")),
            Err(Error::UnknownRepo(_))
        ));

        // Registered again through A with another source: B does not serve its old mirror.
        let other = testgit::SourceRepo::with_files(&[("a.md", b"other\n")]);
        let other_tip = other.head();
        a.store
            .register(Registration {
                source: other.source(),
                ..a.registration(None)
            })
            .unwrap();
        a.store.sync(&a.name).unwrap();
        eventually(SEEN_WITHIN, "B sees the new registration synced", || {
            b.repo(&a.name)
                .is_ok_and(|r| r.head == Some(cid(&other_tip)))
        });
        assert!(matches!(b.resolve(&a.name, None), Err(Error::NotSynced(_))));
        assert!(matches!(
            b.read_text(&a.name, &cid(&tip), &path("a.md")),
            Err(Error::NotSynced(_))
        ));
        b.sync(&a.name).unwrap();
        assert_eq!(b.resolve(&a.name, None).unwrap(), cid(&other_tip));
        assert_eq!(read(&b, &a.name, &other_tip).unwrap(), "other\n");
        assert!(
            read(&b, &a.name, &tip).is_err(),
            "the old registration's commit is gone"
        );
    });
}

/// A metadata write, named in the outage test.
type Write = Box<dyn Fn() -> Result<(), Error>>;

/// PostgreSQL stopped: reads of a synced repository keep answering (from the last known
/// metadata, without reaching for the database); every metadata write fails at once with the
/// clear error; once the server is back, writes work again without reopening the store, and
/// another replica's change is seen again.
#[test]
fn postgres_outage_keeps_reads_and_refuses_writes() {
    within(Duration::from_secs(240), || {
        let server = metadb::testing::TestServer::start().expect("start a PostgreSQL server");
        let url = server.create_database();
        let f = Fixture::new(Backend::Postgres(url.clone()));
        let (_b_dir, b) = f.other_replica();
        let tip = f.commit(&[("a.md", b"alpha\n")], "a");
        f.store.register(f.registration(None)).unwrap();
        f.store.sync(&f.name).unwrap();
        f.store.pin(&f.name, &cid(&tip)).unwrap();
        let listed = f.store.repos().unwrap();

        server.stop();
        // Reads go on, also after the listener noticed the outage.
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            assert_eq!(f.store.resolve(&f.name, None).unwrap(), cid(&tip));
            assert_eq!(f.read(&tip).unwrap(), "alpha\n");
            assert_eq!(f.store.repos().unwrap(), listed);
            assert_eq!(f.store.repo(&f.name).unwrap().head, Some(cid(&tip)));
            assert!(!f.store.is_private(&f.name).unwrap());
            let lease = f.store.lease_revision(&f.name, Some("main")).unwrap();
            assert_eq!(&*lease.read_text(&path("a.md")).unwrap(), "alpha\n");
            std::thread::sleep(Duration::from_millis(50));
        }

        // Writes fail at once, with the clear error.
        let other = Registration {
            name: name("acme/other"),
            ..f.registration(None)
        };
        let writes: Vec<(&str, Write)> = vec![
            ("register", {
                let (store, other) = (f.store.clone(), other.clone());
                Box::new(move || store.register(other.clone()).map(|_| ()))
            }),
            ("set_private", {
                let (store, n) = (f.store.clone(), f.name.clone());
                Box::new(move || store.set_private(&n, true))
            }),
            ("sync", {
                let (store, n) = (f.store.clone(), f.name.clone());
                Box::new(move || store.sync(&n).map(|_| ()))
            }),
            ("unpin", {
                let (store, n, c) = (f.store.clone(), f.name.clone(), cid(&tip));
                Box::new(move || store.unpin(&n, &c))
            }),
            ("unregister", {
                let (store, n) = (f.store.clone(), f.name.clone());
                Box::new(move || store.unregister(&n))
            }),
        ];
        for (what, write) in &writes {
            let started = Instant::now();
            let err = write().expect_err(what);
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{what} took {:?}",
                started.elapsed()
            );
            assert!(err.is_metadata_unreachable(), "{what}: {err}");
            let text = err.to_string();
            assert!(
                text.contains("metadata database is unreachable")
                    && text.contains("until it is back"),
                "{what}: {text}"
            );
            assert!(!text.contains(&url), "{what}: {text}");
        }
        // Nothing changed meanwhile.
        assert_eq!(f.read(&tip).unwrap(), "alpha\n");
        assert_eq!(f.store.repos().unwrap(), listed);

        server.restart();
        // Back without reopening: the registration goes through once the server answers.
        eventually(
            Duration::from_secs(15),
            "a registration after the restart",
            || f.store.register(other.clone()).is_ok(),
        );
        assert_eq!(f.store.repos().unwrap().len(), 2);
        eventually(SEEN_WITHIN, "the other replica sees it", || {
            b.repos().unwrap().len() == 2
        });
        // The other replica reconnects on its own too (at most one attempt a second).
        eventually(
            Duration::from_secs(15),
            "a write through the other replica",
            || b.set_private(&f.name, true).is_ok(),
        );
        eventually(SEEN_WITHIN, "and this one sees the other's change", || {
            f.store.is_private(&f.name).unwrap()
        });
        assert_eq!(f.read(&tip).unwrap(), "alpha\n");
    });
}
