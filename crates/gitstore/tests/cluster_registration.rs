//! A registration by an admin command in cluster mode (issue 31): `check_source` refuses a
//! source that cannot be fetched before anything is recorded, and `wait_recorded` waits for
//! an owner replica's sync instead of cloning into the admin's own data directory. Against a
//! real PostgreSQL server (`metadb::testing`) and real Git repositories; the "replicas" are
//! stores on data directories of their own, one of them the admin's.

// The helpers are shared with other test files, which use more of them.
#[allow(dead_code)]
mod replicas;

use gitstore::{Awaited, Error, GitStore, Metadata, Registration, RepoName, RepoPath, SourceError};
use metadb::testing::{eventually, within};
use replicas::{SEEN_WITHIN, cid, clock, connect, name, open};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn registration(source: &str) -> Registration {
    Registration {
        name: repo_name(),
        source: source.to_string(),
        registered_path: RepoPath::root(),
        branch: None,
        private: None,
    }
}

fn repo_name() -> RepoName {
    name("acme/widgets")
}

/// A store on a data directory of its own below `dir`, on the test database `url`.
fn store_on(dir: &Path, who: &str, url: &str) -> (PathBuf, GitStore) {
    let data = dir.join(who);
    let store = open(&data, &clock(), Metadata::Postgres(connect(url)));
    (data, store)
}

fn mirror(data: &Path) -> PathBuf {
    data.join("mirrors/acme/widgets.git")
}

/// A good source passes, with its configured branch; a missing path, a directory that is no
/// repository, a branch the source lacks and an unreachable URL fail at once, each saying
/// what is wrong, the URL's password never shown. Nothing is recorded by a check.
#[test]
fn a_source_is_checked_before_anything_is_recorded() {
    within(Duration::from_secs(60), || {
        let url = metadb::testing::shared().create_database();
        let source = testgit::SourceRepo::new();
        source.commit(&[("a.md", b"one\n")], "one");
        let dir = tempfile::tempdir().unwrap();
        let (_, admin) = store_on(dir.path(), "admin", &url);

        admin.check_source(&registration(&source.source())).unwrap();
        let mut on_main = registration(&source.source());
        on_main.branch = Some("main".into());
        admin.check_source(&on_main).unwrap();
        // A file:// URL of it, and an empty repository (nothing to list yet, but a repository).
        admin
            .check_source(&registration(&format!("file://{}", source.source())))
            .unwrap();
        let empty = testgit::SourceRepo::new();
        admin.check_source(&registration(&empty.source())).unwrap();

        let missing = dir.path().join("no-such-repo");
        let error = admin
            .check_source(&registration(missing.to_str().unwrap()))
            .unwrap_err();
        assert!(matches!(error, SourceError::Missing { .. }), "{error}");
        assert!(error.to_string().contains("does not exist"), "{error}");

        let plain = dir.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        let error = admin
            .check_source(&registration(plain.to_str().unwrap()))
            .unwrap_err();
        assert!(matches!(error, SourceError::NotGit { .. }), "{error}");
        assert!(
            error.to_string().contains("not a Git repository"),
            "{error}"
        );

        let mut typo = registration(&source.source());
        typo.branch = Some("mian".into());
        let error = admin.check_source(&typo).unwrap_err();
        assert!(matches!(error, SourceError::NoBranch { .. }), "{error}");
        assert!(error.to_string().contains("`mian`"), "{error}");

        // Port 1 on loopback: refused at once.
        let started = Instant::now();
        let error = admin
            .check_source(&registration(
                "http://bob:hunter2-secret@127.0.0.1:1/acme/widgets.git",
            ))
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(matches!(error, SourceError::Unreachable { .. }), "{error}");
        let text = error.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!format!("{error:?}").contains("hunter2"), "{error:?}");
        assert!(text.contains("bob:***@127.0.0.1:1"), "{text}");

        let error = admin
            .check_source(&registration("-upload-pack=x"))
            .unwrap_err();
        assert!(matches!(error, SourceError::Invalid { .. }), "{error}");

        assert!(admin.repos().unwrap().is_empty());
        assert!(!dir.path().join("admin/mirrors/acme").exists());
    });
}

/// The admin registers and waits; a replica's sync (its catch-up after the notification)
/// records the heads; the wait answers that head. The admin's data directory gets no mirror.
/// A wait for a repository synced before answers at once.
#[test]
fn a_wait_answers_the_head_an_owner_recorded_and_clones_nothing_here() {
    within(Duration::from_secs(90), || {
        let url = metadb::testing::shared().create_database();
        let source = testgit::SourceRepo::new();
        let head = source.commit(&[("a.md", b"one\n")], "one");
        let dir = tempfile::tempdir().unwrap();
        let (admin_data, admin) = store_on(dir.path(), "admin", &url);
        let (owner_data, owner) = store_on(dir.path(), "owner", &url);
        let name = repo_name();

        admin.check_source(&registration(&source.source())).unwrap();
        admin.register(registration(&source.source())).unwrap();
        let syncing = std::thread::spawn({
            let name = name.clone();
            move || {
                eventually(SEEN_WITHIN, "the owner sees the registration", || {
                    owner.repo(&name).is_ok()
                });
                std::thread::sleep(Duration::from_millis(500));
                owner.sync(&name).unwrap();
            }
        });
        let mut reports = Vec::new();
        let started = Instant::now();
        let awaited = admin
            .wait_recorded(&name, Duration::from_secs(60), &mut |p| {
                reports.push(p.clone())
            })
            .unwrap();
        syncing.join().unwrap();
        assert_eq!(
            awaited,
            Awaited::Recorded {
                head: Some(cid(&head))
            }
        );
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(
            reports.iter().all(|r| r.last_error.is_none()),
            "{reports:?}"
        );
        assert!(mirror(&owner_data).join("HEAD").is_file());
        assert!(
            !mirror(&admin_data).exists(),
            "the admin's data directory got a mirror"
        );
        assert_eq!(admin.repo(&name).unwrap().head, Some(cid(&head)));

        let started = Instant::now();
        let again = admin
            .wait_recorded(&name, Duration::from_secs(60), &mut |_| {})
            .unwrap();
        assert_eq!(again, awaited);
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(!mirror(&admin_data).exists());
    });
}

/// Nobody syncs: the wait ends at its bound with `NotYet` and the registration stays. An
/// owner's failed attempt is reported while the wait goes on and named when it ends. A
/// registration removed meanwhile ends the wait with "unknown repository".
#[test]
fn a_wait_nobody_answers_ends_at_its_bound_and_keeps_the_registration() {
    within(Duration::from_secs(90), || {
        let url = metadb::testing::shared().create_database();
        let source = testgit::SourceRepo::new();
        source.commit(&[("a.md", b"one\n")], "one");
        let dir = tempfile::tempdir().unwrap();
        let (admin_data, admin) = store_on(dir.path(), "admin", &url);
        let (_, owner) = store_on(dir.path(), "owner", &url);
        let name = repo_name();
        admin.register(registration(&source.source())).unwrap();

        let started = Instant::now();
        let awaited = admin
            .wait_recorded(&name, Duration::from_millis(800), &mut |_| {})
            .unwrap();
        let took = started.elapsed();
        assert_eq!(awaited, Awaited::NotYet { last_error: None });
        assert!(took >= Duration::from_millis(800), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert_eq!(admin.repo(&name).unwrap().last_good_sync, None);

        // The source goes away; the owner's attempt fails and is recorded.
        std::fs::remove_dir_all(source.path()).unwrap();
        eventually(SEEN_WITHIN, "the owner sees the registration", || {
            owner.repo(&name).is_ok()
        });
        assert!(matches!(owner.sync(&name), Err(Error::Sync { .. })));
        let mut reports = Vec::new();
        let awaited = admin
            .wait_recorded(&name, Duration::from_secs(2), &mut |p| {
                reports.push(p.clone())
            })
            .unwrap();
        let Awaited::NotYet {
            last_error: Some(error),
        } = awaited
        else {
            panic!("{awaited:?}")
        };
        assert!(error.contains("git repository"), "{error}");
        assert!(
            reports
                .iter()
                .any(|r| r.last_error.as_deref() == Some(error.as_str())),
            "the failure was not reported while waiting: {reports:?}"
        );
        assert!(admin.repos().unwrap().iter().any(|r| r.name == name));
        assert!(!mirror(&admin_data).exists());

        // Removed through the owner while the admin waits.
        let waiting = std::thread::spawn({
            let name = name.clone();
            move || admin.wait_recorded(&name, Duration::from_secs(30), &mut |_| {})
        });
        std::thread::sleep(Duration::from_millis(300));
        owner.unregister(&name).unwrap();
        assert_eq!(waiting.join().unwrap(), Err(Error::UnknownRepo(name)));
    });
}
