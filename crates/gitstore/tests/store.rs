//! End-to-end tests of the store against real Git repositories (SPEC section 1, G-1..G-8).

mod common;

use common::{Fixture, cid, git_with_input, open_store, path};
use gitstore::{EntryKind, Error, Registration, RepoName, RepoPath};
use std::collections::HashMap;

// ----- G-1, G-3: registration and sync ---------------------------------------------------

/// G-1, G-3: a local source registers, syncs, and its head is the branch tip.
#[test]
fn g1_register_and_sync_local_source() {
    let f = Fixture::new();
    f.commit(&[("README.md", b"one\n")], "one");
    let tip = f.commit(&[("README.md", b"two\n")], "two");

    let info = f.register("");
    assert_eq!(info.name, f.name);
    assert_eq!(info.head, None);
    assert_eq!(info.last_sync, None);
    assert!(matches!(
        f.store.resolve(&f.name, None),
        Err(Error::NotSynced(_))
    ));

    let outcome = f.sync();
    assert_eq!(outcome.head, Some(cid(&tip)));
    assert_eq!(outcome.changed, vec![("main".to_string(), cid(&tip))]);

    let info = f.store.repo(&f.name).unwrap();
    assert_eq!(info.head, Some(cid(&tip)));
    assert_eq!(info.default_branch.as_deref(), Some("main"));
    assert_eq!(info.last_sync, Some(f.now()));
    assert_eq!(info.last_good_sync, Some(f.now()));
    assert_eq!(info.last_error, None);
    assert!(f.mirror().join("HEAD").is_file());
    assert_eq!(f.store.repos().unwrap(), vec![info]);
    assert_eq!(f.store.resolve(&f.name, None).unwrap(), cid(&tip));
    assert_eq!(
        &*f.store
            .read_text(&f.name, &cid(&tip), &path("README.md"))
            .unwrap(),
        "two\n"
    );

    // A second sync with nothing new changes nothing.
    assert!(f.sync().changed.is_empty());
    // A new commit shows up as a changed branch.
    let three = f.commit(&[("README.md", b"three\n")], "three");
    assert_eq!(f.sync().changed, vec![("main".to_string(), cid(&three))]);
}

/// G-1: registering the same thing twice is a no-op; another source under the name is refused.
#[test]
fn g1_register_twice_is_noop_other_source_is_name_taken() {
    let f = Fixture::new();
    f.commit(&[("a.md", b"a\n")], "a");
    let first = f.register("");
    f.sync();
    let again = f.store.register(f.registration("")).unwrap();
    assert_eq!(again.name, first.name);
    assert!(
        again.head.is_some(),
        "the existing registration is returned"
    );

    let mut other = f.registration("");
    other.source = f
        .source
        .tmp()
        .join("elsewhere")
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        f.store.register(other),
        Err(Error::NameTaken(f.name.clone()))
    );
    assert_eq!(
        f.store.register(f.registration("docs")),
        Err(Error::NameTaken(f.name.clone()))
    );
    let mut flag = f.registration("");
    flag.name = RepoName::parse("acme/flag").unwrap();
    flag.source = "--upload-pack=touch /tmp/x".to_string();
    assert!(matches!(
        f.store.register(flag),
        Err(Error::InvalidName { .. })
    ));
}

/// G-3: a failed fetch is reported (path-free) and the last good state keeps serving.
#[test]
fn g3_failed_sync_keeps_serving_last_good_state() {
    let f = Fixture::new();
    let tip = f.commit(&[("a.md", b"alpha\n")], "a");
    f.register("");
    f.sync();
    let good = f.store.repo(&f.name).unwrap();

    std::fs::remove_dir_all(&f.src).unwrap();
    f.advance_days(1);
    let err = f.store.sync(&f.name).unwrap_err();
    assert!(matches!(err, Error::Sync { .. }), "{err:?}");
    f.assert_path_free(&err.to_string());

    let info = f.store.repo(&f.name).unwrap();
    let last_error = info.last_error.clone().expect("last_error is set");
    f.assert_path_free(&last_error);
    assert!(
        last_error.contains("does not appear to be a git repository"),
        "{last_error}"
    );
    assert_eq!(info.head, good.head);
    assert_eq!(info.last_good_sync, good.last_good_sync);
    assert_eq!(info.last_sync, Some(f.now()));

    assert_eq!(f.store.resolve(&f.name, None).unwrap(), cid(&tip));
    assert_eq!(
        &*f.store
            .read_text(&f.name, &cid(&tip), &path("a.md"))
            .unwrap(),
        "alpha\n"
    );
}

/// G-1, G-3: state survives reopening the store; unregister removes metadata and mirror.
#[test]
fn g1_reopen_and_unregister() {
    let f = Fixture::new();
    let tip = f.commit(&[("a.md", b"alpha\n")], "a");
    f.register("");
    f.sync();

    let reopened = open_store(&f.data, &f.clock);
    assert_eq!(reopened.resolve(&f.name, Some("main")).unwrap(), cid(&tip));
    assert_eq!(
        &*reopened
            .read_text(&f.name, &cid(&tip), &path("a.md"))
            .unwrap(),
        "alpha\n"
    );
    assert_eq!(reopened.storage_root(), f.data.as_path());

    f.store.unregister(&f.name).unwrap();
    assert!(!f.mirror().exists());
    assert!(matches!(f.store.repo(&f.name), Err(Error::UnknownRepo(_))));
    assert!(matches!(
        f.store.resolve(&f.name, None),
        Err(Error::UnknownRepo(_))
    ));
    assert!(matches!(
        f.store.unregister(&f.name),
        Err(Error::UnknownRepo(_))
    ));
    assert!(f.store.repos().unwrap().is_empty());
}

/// G-1: a configured branch is the default branch; a missing one is a reported sync error.
#[test]
fn g1_configured_branch() {
    let f = Fixture::new();
    f.commit(&[("a.md", b"main\n")], "on main");
    f.git(&["checkout", "-q", "-b", "release"]);
    let release = f.commit(&[("a.md", b"release\n")], "on release");
    f.git(&["checkout", "-q", "main"]);

    let mut reg = f.registration("");
    reg.branch = Some("release".to_string());
    let info = f.store.register(reg).unwrap();
    assert_eq!(info.default_branch.as_deref(), Some("release"));
    assert_eq!(f.sync().head, Some(cid(&release)));
    assert_eq!(f.store.resolve(&f.name, None).unwrap(), cid(&release));

    let other = RepoName::parse("acme/missing-branch").unwrap();
    let reg = Registration {
        name: other.clone(),
        source: f.src.to_string_lossy().into_owned(),
        registered_path: RepoPath::root(),
        branch: Some("nope".to_string()),
        private: None,
    };
    f.store.register(reg).unwrap();
    let err = f.store.sync(&other).unwrap_err();
    assert!(
        err.to_string().contains("branch `nope` does not exist"),
        "{err}"
    );
    assert!(f.store.repo(&other).unwrap().last_error.is_some());
    assert!(matches!(
        f.store.resolve(&other, None),
        Err(Error::NotSynced(_))
    ));
}

/// G-1: without a configured branch the source's HEAD decides, even when it is not `main`.
#[test]
fn g1_default_branch_follows_source_head() {
    let f = Fixture::new();
    f.commit(&[("a.md", b"main\n")], "on main");
    f.git(&["checkout", "-q", "-b", "trunk"]);
    let trunk = f.commit(&[("a.md", b"trunk\n")], "on trunk");
    f.register("");
    assert_eq!(f.sync().head, Some(cid(&trunk)));
    assert_eq!(
        f.store.repo(&f.name).unwrap().default_branch.as_deref(),
        Some("trunk")
    );
}

// ----- G-4: revisions ----------------------------------------------------------------------

/// G-4: branch, lightweight and annotated tag, full and unique short SHA all resolve to the
/// full commit SHA.
#[test]
fn g4_revision_forms_resolve_to_full_sha() {
    let f = Fixture::new();
    let first = f.commit(&[("a.md", b"1\n")], "first");
    f.git(&["tag", "light"]);
    f.git(&["tag", "-a", "-m", "annotated", "v1.0"]);
    let tag_object = f.git(&["rev-parse", "refs/tags/v1.0"]);
    assert_ne!(tag_object, first, "an annotated tag is its own object");
    f.git(&["checkout", "-q", "-b", "feature/x"]);
    let feature = f.commit(&[("a.md", b"2\n")], "feature");
    f.git(&["checkout", "-q", "main"]);
    let tip = f.commit(&[("b.md", b"3\n")], "tip");
    f.register("");
    f.sync();

    let resolve = |rev: Option<&str>| f.store.resolve(&f.name, rev);
    assert_eq!(resolve(None).unwrap(), cid(&tip));
    assert_eq!(resolve(Some("HEAD")).unwrap(), cid(&tip));
    assert_eq!(resolve(Some("main")).unwrap(), cid(&tip));
    assert_eq!(resolve(Some("refs/heads/main")).unwrap(), cid(&tip));
    assert_eq!(resolve(Some("feature/x")).unwrap(), cid(&feature));
    assert_eq!(resolve(Some("light")).unwrap(), cid(&first));
    assert_eq!(resolve(Some("v1.0")).unwrap(), cid(&first));
    assert_eq!(resolve(Some("refs/tags/v1.0")).unwrap(), cid(&first));
    assert_eq!(resolve(Some(&tag_object)).unwrap(), cid(&first));
    assert_eq!(resolve(Some(&first)).unwrap(), cid(&first));
    assert_eq!(
        resolve(Some(&first.to_ascii_uppercase())).unwrap(),
        cid(&first)
    );
    assert_eq!(resolve(Some(&first[..7])).unwrap(), cid(&first));
    assert_eq!(resolve(Some(&feature[..12])).unwrap(), cid(&feature));
}

/// G-4: an ambiguous 7-hex short SHA lists every candidate. Two commits sharing a 7-hex prefix
/// are found by hashing candidate commit objects in-process (a birthday search over ~2^14
/// messages) and only those two are written into the source.
#[test]
fn g4_ambiguous_short_sha_lists_candidates() {
    let f = Fixture::new();
    f.commit(&[("a.md", b"a\n")], "base");
    let tree = f.git(&["rev-parse", "HEAD^{tree}"]);
    let body = |n: u64| {
        format!(
            "tree {tree}\nauthor T <t@example.invalid> 1700000000 +0000\ncommitter T <t@example.invalid> 1700000000 +0000\n\ncandidate {n}\n"
        )
    };
    let mut seen: HashMap<String, u64> = HashMap::new();
    let (a, b) = (0u64..)
        .find_map(|n| {
            let id = gix::objs::compute_hash(
                gix::hash::Kind::Sha1,
                gix::objs::Kind::Commit,
                body(n).as_bytes(),
            )
            .unwrap();
            let prefix = id.to_string()[..7].to_string();
            seen.insert(prefix, n).map(|previous| (previous, n))
        })
        .unwrap();
    let mut shas = Vec::new();
    for (n, branch) in [(a, "collide-a"), (b, "collide-b")] {
        let sha = git_with_input(
            &f.src,
            &["hash-object", "-t", "commit", "-w", "--stdin"],
            Some(body(n).as_bytes()),
        );
        f.git(&["update-ref", &format!("refs/heads/{branch}"), &sha]);
        shas.push(sha);
    }
    assert_eq!(shas[0][..7], shas[1][..7]);
    f.register("");
    f.sync();

    let prefix = &shas[0][..7];
    let mut expected = vec![cid(&shas[0]), cid(&shas[1])];
    expected.sort();
    match f.store.resolve(&f.name, Some(prefix)) {
        Err(Error::Ambiguous {
            repo,
            prefix: p,
            candidates,
        }) => {
            assert_eq!(repo, f.name);
            assert_eq!(p, prefix);
            assert_eq!(candidates, expected);
        }
        other => panic!("expected Ambiguous, got {other:?}"),
    }
    let message = f
        .store
        .resolve(&f.name, Some(prefix))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(&shas[0]) && message.contains(&shas[1]),
        "{message}"
    );
    // One more digit tells them apart, unless the prefix collision is longer.
    let common = shas[0]
        .chars()
        .zip(shas[1].chars())
        .take_while(|(x, y)| x == y)
        .count();
    assert_eq!(
        f.store
            .resolve(&f.name, Some(&shas[0][..common + 1]))
            .unwrap(),
        cid(&shas[0])
    );
}

/// G-4: a branch named like a short SHA wins over the short SHA.
#[test]
fn g4_branch_named_like_hex_wins() {
    let f = Fixture::new();
    let first = f.commit(&[("a.md", b"1\n")], "first");
    let second = f.commit(&[("a.md", b"2\n")], "second");
    let hex_name = &first[..8];
    f.git(&["branch", hex_name, &second]);
    f.register("");
    f.sync();
    assert_eq!(
        f.store.resolve(&f.name, Some(hex_name)).unwrap(),
        cid(&second)
    );
    assert_eq!(
        f.store.resolve(&f.name, Some(&first[..9])).unwrap(),
        cid(&first)
    );
}

/// G-4: unknown repository, unknown SHA, unknown branch, non-commit objects and rev-parse
/// syntax each give their own clear error.
#[test]
fn g4_unknown_and_invalid_revisions() {
    let f = Fixture::new();
    let tip = f.commit(&[("a.md", b"1\n")], "first");
    f.register("");
    f.sync();
    let unknown_repo = RepoName::parse("nobody/nothing").unwrap();
    assert_eq!(
        f.store.resolve(&unknown_repo, None),
        Err(Error::UnknownRepo(unknown_repo.clone()))
    );
    assert!(matches!(
        f.store.read_text(&unknown_repo, &cid(&tip), &path("a.md")),
        Err(Error::UnknownRepo(_))
    ));

    let zero = "0123456789abcdef0123456789abcdef01234567";
    for rev in [
        zero,
        "no-such-branch",
        "deadbee",
        "refs/heads/nope",
        "refs/csg/seen/x",
    ] {
        match f.store.resolve(&f.name, Some(rev)) {
            Err(Error::UnknownRevision { revision, .. }) => assert_eq!(revision, rev),
            other => panic!("{rev}: expected UnknownRevision, got {other:?}"),
        }
    }
    // A blob or tree SHA is not a commit.
    let blob = f.git(&["rev-parse", "HEAD:a.md"]);
    let tree = f.git(&["rev-parse", "HEAD^{tree}"]);
    for sha in [&blob, &tree] {
        assert!(matches!(
            f.store.resolve(&f.name, Some(sha)),
            Err(Error::UnknownRevision { .. })
        ));
        assert!(matches!(
            f.store.read_text(&f.name, &cid(sha), &path("a.md")),
            Err(Error::UnknownRevision { .. })
        ));
    }
    assert!(matches!(
        f.store.read_text(&f.name, &cid(zero), &path("a.md")),
        Err(Error::UnknownRevision { .. })
    ));
    for rev in [
        "main~1",
        "main^",
        "HEAD@{1}",
        "a..b",
        ":/first",
        "main:a.md",
        " main",
        "",
    ] {
        assert!(
            matches!(
                f.store.resolve(&f.name, Some(rev)),
                Err(Error::InvalidRevision { .. })
            ),
            "{rev:?}"
        );
    }
    assert!(matches!(
        f.store.resolve(&f.name, Some(&"a".repeat(300))),
        Err(Error::InvalidRevision { .. })
    ));
}

// ----- G-5: retention ----------------------------------------------------------------------

/// G-5: the whole history of a tracked head is readable.
#[test]
fn g5_history_of_tracked_head_is_readable() {
    let f = Fixture::new();
    let first = f.commit(&[("a.md", b"1\n")], "first");
    let second = f.commit(&[("a.md", b"2\n")], "second");
    f.commit(&[("a.md", b"3\n")], "third");
    f.register("");
    f.sync();
    f.advance_days(365);
    for (sha, text) in [(&first, "1\n"), (&second, "2\n")] {
        assert_eq!(f.store.resolve(&f.name, Some(sha)).unwrap(), cid(sha));
        assert_eq!(
            &*f.store
                .read_text(&f.name, &cid(sha), &path("a.md"))
                .unwrap(),
            text
        );
    }
}

/// G-5: a former head force-pushed away and last seen 31 days ago is refused, never served
/// with another commit's content.
#[test]
fn g5_force_pushed_head_outside_window_is_refused() {
    let f = Fixture::new();
    let (base, old, new) = f.force_pushed();
    // Inside the window it is still readable.
    assert_eq!(f.store.resolve(&f.name, Some(&old)).unwrap(), cid(&old));
    assert_eq!(
        &*f.store
            .read_text(&f.name, &cid(&old), &path("a.md"))
            .unwrap(),
        "old\n"
    );

    f.advance_days(31);
    for result in [
        f.store.resolve(&f.name, Some(&old)).map(|_| ()),
        f.store.resolve(&f.name, Some(&old[..10])).map(|_| ()),
        f.store
            .read_text(&f.name, &cid(&old), &path("a.md"))
            .map(|_| ()),
        f.store
            .list_tree(&f.name, &cid(&old), &RepoPath::root(), 1)
            .map(|_| ()),
        f.store.lease(&f.name, &cid(&old)).map(|_| ()),
        f.store.pin(&f.name, &cid(&old)),
    ] {
        match result {
            Err(e @ Error::OutsideRetention { .. }) => {
                assert!(e.to_string().contains("outside retention"));
                f.assert_path_free(&e.to_string());
            }
            other => panic!("expected OutsideRetention, got {other:?}"),
        }
    }
    // The current head and its history are unaffected.
    assert_eq!(f.store.resolve(&f.name, None).unwrap(), cid(&new));
    assert_eq!(f.store.resolve(&f.name, Some(&base)).unwrap(), cid(&base));
}

/// G-5: a former head last seen yesterday is readable; a month later it is not.
#[test]
fn g5_former_head_seen_yesterday_is_readable() {
    let f = Fixture::new();
    let base = f.commit(&[("a.md", b"base\n")], "base");
    let old = f.commit(&[("a.md", b"old\n")], "old");
    f.register("");
    f.sync();
    f.advance_days(29);
    f.sync(); // still the head: seen again today
    f.git(&["reset", "-q", "--hard", &base]);
    f.commit(&[("a.md", b"new\n")], "new");
    f.sync();
    f.advance_days(1);
    assert_eq!(f.store.resolve(&f.name, Some(&old)).unwrap(), cid(&old));
    assert_eq!(
        &*f.store
            .read_text(&f.name, &cid(&old), &path("a.md"))
            .unwrap(),
        "old\n"
    );
    f.advance_days(30);
    assert!(matches!(
        f.store.resolve(&f.name, Some(&old)),
        Err(Error::OutsideRetention { .. })
    ));
}

/// G-5: the head of a deleted branch stays readable inside the window.
#[test]
fn g5_deleted_branch_head_is_retained_inside_window() {
    let f = Fixture::new();
    f.commit(&[("a.md", b"base\n")], "base");
    f.git(&["checkout", "-q", "-b", "topic"]);
    let topic = f.commit(&[("t.md", b"topic\n")], "topic");
    f.git(&["checkout", "-q", "main"]);
    f.register("");
    f.sync();
    f.git(&["branch", "-q", "-D", "topic"]);
    f.sync();
    assert!(matches!(
        f.store.resolve(&f.name, Some("topic")),
        Err(Error::UnknownRevision { .. })
    ));
    f.advance_days(30);
    assert_eq!(f.store.resolve(&f.name, Some(&topic)).unwrap(), cid(&topic));
    f.advance_days(1);
    assert!(matches!(
        f.store.resolve(&f.name, Some(&topic)),
        Err(Error::OutsideRetention { .. })
    ));
}

/// G-5: a pin keeps an unreachable commit readable past the window; after unpin and a sweep
/// past the window, it is gone from the mirror.
#[test]
fn g5_pin_keeps_unreachable_commit_readable() {
    let f = Fixture::new();
    let (_, old, _) = f.force_pushed();
    f.store.pin(&f.name, &cid(&old)).unwrap();
    f.store.pin(&f.name, &cid(&old)).unwrap(); // idempotent
    f.advance_days(31);
    assert_eq!(f.store.resolve(&f.name, Some(&old)).unwrap(), cid(&old));
    let report = f.store.sweep().unwrap();
    assert!(report.expired.is_empty(), "{report:?}");
    assert!(f.mirror_has(&old));
    assert_eq!(
        &*f.store
            .read_text(&f.name, &cid(&old), &path("a.md"))
            .unwrap(),
        "old\n"
    );

    f.store.unpin(&f.name, &cid(&old)).unwrap();
    f.store.unpin(&f.name, &cid(&old)).unwrap(); // idempotent
    assert!(matches!(
        f.store.resolve(&f.name, Some(&old)),
        Err(Error::OutsideRetention { .. })
    ));
    let report = f.store.sweep().unwrap();
    assert_eq!(report.expired, vec![(f.name.clone(), cid(&old))]);
    assert!(!f.mirror_has(&old), "the unpinned commit is pruned");
    let err = f.store.resolve(&f.name, Some(&old)).unwrap_err();
    assert!(matches!(err, Error::UnknownRevision { .. }), "{err:?}");
}

/// G-5: sweeping inside the window removes nothing.
#[test]
fn g5_sweep_inside_window_keeps_former_heads() {
    let f = Fixture::new();
    let (_, old, _) = f.force_pushed();
    f.advance_days(29);
    let report = f.store.sweep().unwrap();
    assert_eq!(report, Default::default());
    assert!(f.mirror_has(&old));
    assert_eq!(f.store.resolve(&f.name, Some(&old)).unwrap(), cid(&old));
}

/// G-5: former heads that were fast-forwarded stay readable through their branch's history;
/// sweeping past the window drops their bookkeeping without reporting them as expired.
#[test]
fn g5_fast_forwarded_former_heads_stay_readable() {
    let f = Fixture::new();
    let first = f.commit(&[("a.md", b"1\n")], "first");
    f.register("");
    f.sync();
    let second = f.commit(&[("a.md", b"2\n")], "second");
    f.sync();
    f.advance_days(40);
    let report = f.store.sweep().unwrap();
    assert_eq!(report, Default::default());
    assert!(f.mirror_has(&first));
    assert_eq!(f.store.resolve(&f.name, Some(&first)).unwrap(), cid(&first));
    assert_eq!(f.store.resolve(&f.name, None).unwrap(), cid(&second));
}

// ----- G-8: leases -------------------------------------------------------------------------

/// G-8: a lease on a former head keeps it through a sweep past the window; once the lease is
/// dropped the next sweep prunes it and reads are refused cleanly.
#[test]
fn g8_lease_holds_old_head_through_sweep() {
    let f = Fixture::new();
    let (_, old, new) = f.force_pushed();
    let lease = f.store.lease(&f.name, &cid(&old)).unwrap();
    assert_eq!(lease.commit(), &cid(&old));
    assert_eq!(lease.repo(), &f.name);
    f.advance_days(31);

    let report = f.store.sweep().unwrap();
    assert_eq!(report.kept_by_lease, vec![(f.name.clone(), cid(&old))]);
    assert!(report.expired.is_empty());
    assert!(f.mirror_has(&old));
    // The operation holding the lease can still read.
    assert_eq!(
        &*f.store
            .read_text(&f.name, &cid(&old), &path("a.md"))
            .unwrap(),
        "old\n"
    );
    // New requests are refused: the commit left retention.
    assert!(matches!(
        f.store.resolve(&f.name, Some(&old)),
        Err(Error::OutsideRetention { .. })
    ));

    drop(lease);
    assert!(matches!(
        f.store.read_text(&f.name, &cid(&old), &path("a.md")),
        Err(Error::OutsideRetention { .. })
    ));
    let report = f.store.sweep().unwrap();
    assert_eq!(report.expired, vec![(f.name.clone(), cid(&old))]);
    assert!(report.kept_by_lease.is_empty());
    assert!(!f.mirror_has(&old), "objects are pruned");

    for err in [
        f.store.resolve(&f.name, Some(&old)).unwrap_err(),
        f.store
            .read_text(&f.name, &cid(&old), &path("a.md"))
            .unwrap_err(),
        f.store
            .list_tree(&f.name, &cid(&old), &RepoPath::root(), 1)
            .unwrap_err(),
        f.store.lease(&f.name, &cid(&old)).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                Error::OutsideRetention { .. } | Error::UnknownRevision { .. }
            ),
            "{err:?}"
        );
        f.assert_path_free(&err.to_string());
    }
    // Everything current still reads after the gc.
    assert_eq!(
        &*f.store
            .read_text(&f.name, &cid(&new), &path("a.md"))
            .unwrap(),
        "new\n"
    );
    // A second sweep has nothing to do.
    assert_eq!(f.store.sweep().unwrap(), Default::default());
}

/// G-8: a lease on a commit from the history of a former head keeps its objects even when
/// that head itself expires.
#[test]
fn g8_lease_on_history_of_expired_head_survives_gc() {
    let f = Fixture::new();
    let base = f.commit(&[("a.md", b"base\n")], "base");
    let mid = f.commit(&[("a.md", b"mid\n")], "mid");
    let old = f.commit(&[("a.md", b"old\n")], "old");
    f.register("");
    f.sync();
    f.git(&["reset", "-q", "--hard", &base]);
    f.commit(&[("a.md", b"new\n")], "new");
    f.sync();

    let lease = f.store.lease(&f.name, &cid(&mid)).unwrap();
    f.advance_days(31);
    let report = f.store.sweep().unwrap();
    assert_eq!(report.expired, vec![(f.name.clone(), cid(&old))]);
    assert!(!f.mirror_has(&old));
    assert!(f.mirror_has(&mid), "the leased commit survives gc");
    assert_eq!(
        &*f.store
            .read_text(&f.name, &cid(&mid), &path("a.md"))
            .unwrap(),
        "mid\n"
    );
    drop(lease);
    f.store.sweep().unwrap();
    assert!(!f.mirror_has(&mid), "released: pruned by the next sweep");
    assert!(
        f.store
            .read_text(&f.name, &cid(&mid), &path("a.md"))
            .is_err()
    );
}

/// G-8: leases are counted; the commit stays protected until the last one is dropped.
#[test]
fn g8_leases_are_counted() {
    let f = Fixture::new();
    let (_, old, _) = f.force_pushed();
    let a = f.store.lease(&f.name, &cid(&old)).unwrap();
    let b = f.store.lease(&f.name, &cid(&old)).unwrap();
    f.advance_days(31);
    drop(a);
    assert_eq!(
        f.store.sweep().unwrap().kept_by_lease,
        vec![(f.name.clone(), cid(&old))]
    );
    drop(b);
    assert_eq!(
        f.store.sweep().unwrap().expired,
        vec![(f.name.clone(), cid(&old))]
    );
}

// ----- G-2: registered path ----------------------------------------------------------------

fn monorepo(f: &Fixture) -> String {
    f.commit(
        &[
            ("README.md", b"root\n"),
            ("packages/docs/knowledge/a.md", b"knowledge a\n"),
            ("packages/docs/b.md", b"docs b\n"),
            ("packages/docsx/d.md", b"sibling d\n"),
            ("packages/other/c.md", b"other c\n"),
        ],
        "monorepo",
    )
}

/// G-2: a registered path scopes reads and listings; paths stay repository-relative.
#[test]
fn g2_registered_path_scopes_reads_and_listings() {
    let f = Fixture::new();
    let tip = cid(&monorepo(&f));
    let info = f.register("packages/docs");
    assert_eq!(info.registered_path.as_str(), "packages/docs");
    f.sync();

    assert_eq!(
        &*f.store
            .read_text(&f.name, &tip, &path("packages/docs/knowledge/a.md"))
            .unwrap(),
        "knowledge a\n"
    );
    for outside in [
        "README.md",
        "packages/docsx/d.md",
        "packages/other/c.md",
        "packages",
    ] {
        match f.store.read_text(&f.name, &tip, &path(outside)) {
            Err(Error::OutsideScope { path, scope, .. }) => {
                assert_eq!(path, outside);
                assert_eq!(scope, "packages/docs");
            }
            other => panic!("{outside}: expected OutsideScope, got {other:?}"),
        }
    }

    let all = f
        .store
        .list_tree(&f.name, &tip, &RepoPath::root(), 10)
        .unwrap();
    let paths: Vec<&str> = all.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "packages/docs/b.md",
            "packages/docs/knowledge",
            "packages/docs/knowledge/a.md"
        ]
    );
    let top = f
        .store
        .list_tree(&f.name, &tip, &RepoPath::root(), 1)
        .unwrap();
    assert_eq!(top.len(), 2);
    let sub = f
        .store
        .list_tree(&f.name, &tip, &path("packages/docs/knowledge"), 1)
        .unwrap();
    assert_eq!(sub.len(), 1);
    assert_eq!(sub[0].path, "packages/docs/knowledge/a.md");
    assert_eq!(sub[0].size, Some(12));
    for outside in ["packages", "packages/other", "packages/docsx"] {
        assert!(
            matches!(
                f.store.list_tree(&f.name, &tip, &path(outside), 5),
                Err(Error::OutsideScope { .. })
            ),
            "{outside}"
        );
    }
}

/// G-2: a registered path missing at a commit is an empty scope, not an error.
#[test]
fn g2_missing_registered_path_is_empty() {
    let f = Fixture::new();
    let tip = cid(&monorepo(&f));
    f.register("not/there");
    f.sync();
    assert!(
        f.store
            .list_tree(&f.name, &tip, &RepoPath::root(), 3)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        f.store.read_text(&f.name, &tip, &path("not/there/x.md")),
        Err(Error::NotFound { .. })
    ));
}

// ----- G-6, G-7: path safety and content classes -------------------------------------------

/// G-6, G-7: symlinks (escaping and inside), paths through symlinked directories, gitlinks,
/// LFS pointers, binary and non-UTF-8 files, missing paths and directories each answer their
/// own typed error, with no host path in the message.
#[test]
fn g6_g7_special_entries_are_typed_errors() {
    let f = Fixture::new();
    f.commit(
        &[
            ("docs/a.md", b"inside\n"),
            (
                "lfs.bin",
                b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n",
            ),
            ("bin.dat", b"PNG\x00\x01\x02binary"),
            ("latin1.txt", b"caf\xe9 cr\xe8me\n"),
        ],
        "files",
    );
    std::os::unix::fs::symlink("../../etc/passwd", f.src.join("escape")).unwrap();
    std::os::unix::fs::symlink("docs/a.md", f.src.join("inside-link")).unwrap();
    std::os::unix::fs::symlink("docs", f.src.join("linkdir")).unwrap();
    let sub_commit = f.git(&["rev-parse", "HEAD"]);
    f.git(&["add", "-A"]);
    f.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{sub_commit},sub"),
    ]);
    let tip = cid(&f.commit_index("specials"));
    f.register("");
    f.sync();

    let read = |p: &str| f.store.read_text(&f.name, &tip, &path(p));
    assert_eq!(&*read("docs/a.md").unwrap(), "inside\n");

    let cases: Vec<(&str, Error)> = vec![
        (
            "escape",
            Error::Symlink {
                path: "escape".into(),
                target: "../../etc/passwd".into(),
            },
        ),
        (
            "inside-link",
            Error::Symlink {
                path: "inside-link".into(),
                target: "docs/a.md".into(),
            },
        ),
        (
            "linkdir/a.md",
            Error::Symlink {
                path: "linkdir".into(),
                target: "docs".into(),
            },
        ),
        (
            "sub",
            Error::Submodule {
                path: "sub".into(),
                commit: sub_commit.clone(),
            },
        ),
        (
            "sub/inner.md",
            Error::Submodule {
                path: "sub".into(),
                commit: sub_commit.clone(),
            },
        ),
        (
            "lfs.bin",
            Error::LfsPointer {
                path: "lfs.bin".into(),
                oid: "sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"
                    .into(),
                size: 12345,
            },
        ),
        (
            "bin.dat",
            Error::Binary {
                path: "bin.dat".into(),
                size: 12,
            },
        ),
        (
            "latin1.txt",
            Error::NotUtf8 {
                path: "latin1.txt".into(),
                size: 11,
            },
        ),
        (
            "missing.md",
            Error::NotFound {
                path: "missing.md".into(),
                commit: tip.clone(),
            },
        ),
        (
            "docs/missing/deeper.md",
            Error::NotFound {
                path: "docs/missing/deeper.md".into(),
                commit: tip.clone(),
            },
        ),
        (
            "docs/a.md/below",
            Error::NotFound {
                path: "docs/a.md/below".into(),
                commit: tip.clone(),
            },
        ),
        (
            "docs",
            Error::IsDirectory {
                path: "docs".into(),
            },
        ),
    ];
    for (p, expected) in cases {
        let err = read(p).unwrap_err();
        assert_eq!(err, expected, "{p}");
        f.assert_path_free(&err.to_string());
    }
    let binary = read("bin.dat").unwrap_err().to_string();
    assert!(binary.contains("binary file, 12 bytes"), "{binary}");
    assert!(
        read("latin1.txt")
            .unwrap_err()
            .to_string()
            .contains("not UTF-8")
    );

    // Listing shows every kind as what it is.
    let listing = f
        .store
        .list_tree(&f.name, &tip, &RepoPath::root(), 1)
        .unwrap();
    let kinds: Vec<(&str, EntryKind, Option<u64>)> = listing
        .iter()
        .map(|e| (e.path.as_str(), e.kind, e.size))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("bin.dat", EntryKind::File, Some(12)),
            ("docs", EntryKind::Directory, None),
            ("escape", EntryKind::Symlink, None),
            ("inside-link", EntryKind::Symlink, None),
            ("latin1.txt", EntryKind::File, Some(11)),
            ("lfs.bin", EntryKind::File, Some(130)),
            ("linkdir", EntryKind::Symlink, None),
            ("sub", EntryKind::Submodule, None),
        ]
    );
    // Listing a path below a symlink refuses, like reading.
    assert!(matches!(
        f.store.list_tree(&f.name, &tip, &path("linkdir"), 1),
        Ok(ref entries) if entries.len() == 1 && entries[0].kind == EntryKind::Symlink
    ));
    assert!(matches!(
        f.store.list_tree(&f.name, &tip, &path("linkdir/x"), 1),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        f.store.list_tree(&f.name, &tip, &path("nope"), 1),
        Err(Error::NotFound { .. })
    ));
}

/// S-7 (G-2 paths): listing depth, executables and sizes.
#[test]
fn g2_list_tree_depth_kinds_sizes() {
    let f = Fixture::new();
    f.commit(
        &[
            ("a/b/c/d.txt", b"deep\n"),
            ("a/top.txt", b"top\n"),
            ("run.sh", b"#!/bin/sh\n"),
        ],
        "tree",
    );
    f.git(&["update-index", "--chmod=+x", "run.sh"]);
    let tip = cid(&f.commit_index("exec"));
    f.register("");
    f.sync();
    let list = |p: &str, depth| {
        f.store
            .list_tree(&f.name, &tip, &path(p), depth)
            .unwrap()
            .into_iter()
            .map(|e| (e.path, e.kind, e.size))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list("", 1),
        vec![
            ("a".to_string(), EntryKind::Directory, None),
            ("run.sh".to_string(), EntryKind::Executable, Some(10)),
        ]
    );
    assert_eq!(list("", 0), list("", 1), "depth 0 is treated as 1");
    assert_eq!(
        list("a", 2)
            .into_iter()
            .map(|(p, _, _)| p)
            .collect::<Vec<_>>(),
        vec!["a/b", "a/b/c", "a/top.txt"]
    );
    assert_eq!(list("", 10).len(), 6);
    assert_eq!(
        list("a/top.txt", 1),
        vec![("a/top.txt".to_string(), EntryKind::File, Some(4))]
    );
}

/// G-1: registering works with `file://` URLs too, and the error of a bad URL is path-free.
#[test]
fn g1_file_url_source() {
    let f = Fixture::new();
    let tip = f.commit(&[("a.md", b"a\n")], "a");
    let name = RepoName::parse("acme/url").unwrap();
    f.store
        .register(Registration {
            name: name.clone(),
            source: format!("file://{}", f.src.display()),
            registered_path: RepoPath::root(),
            branch: None,
            private: None,
        })
        .unwrap();
    assert_eq!(f.store.sync(&name).unwrap().head, Some(cid(&tip)));

    let bad = RepoName::parse("acme/bad-url").unwrap();
    f.store
        .register(Registration {
            name: bad.clone(),
            source: format!("file://{}/nope", f.source.tmp().display()),
            registered_path: RepoPath::root(),
            branch: None,
            private: None,
        })
        .unwrap();
    let err = f.store.sync(&bad).unwrap_err();
    f.assert_path_free(&err.to_string());
}

/// G-3, G-8: reads on other threads keep working while syncs and sweeps replace the mirror
/// state under them (no deadlock, no error, no panic).
#[test]
fn g8_concurrent_reads_during_sync_and_sweep() {
    let f = Fixture::new();
    let first = f.commit(&[("a.md", b"stable\n")], "first");
    f.register("");
    f.sync();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| {
                    let mut reads = 0u32;
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                        let lease = f.store.lease(&f.name, &cid(&first)).unwrap();
                        let text = f
                            .store
                            .read_text(&f.name, lease.commit(), &path("a.md"))
                            .unwrap();
                        assert_eq!(&*text, "stable\n");
                        let head = f.store.resolve(&f.name, None).unwrap();
                        f.store
                            .list_tree(&f.name, &head, &RepoPath::root(), 2)
                            .unwrap();
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for i in 0..5 {
            f.commit(&[(&format!("n{i}.md"), b"x\n")], "more");
            f.sync();
            f.advance_days(10);
            f.store.sweep().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for reader in readers {
            assert!(reader.join().unwrap() > 0);
        }
    });
}

/// W-2 support: `find_files` finds artifacts of every kind inside the scope only, with ids;
/// `read_bytes` answers raw bytes (binary included) under the same path rules.
#[test]
fn g2_find_files_and_read_bytes() {
    let f = Fixture::new();
    f.commit(
        &[
            ("a.sourcegraph.wasm", b"\0asm-a"),
            ("docs/b.sourcegraph.wasm", b"\0asm-b"),
            ("docs/notes.md", b"n\n"),
        ],
        "artifacts",
    );
    std::os::unix::fs::symlink("a.sourcegraph.wasm", f.src.join("docs/c.sourcegraph.wasm"))
        .unwrap();
    let tip = cid(&f.commit(&[], "link"));
    f.register("");
    f.sync();
    let found = f
        .store
        .find_files(&f.name, &tip, ".sourcegraph.wasm")
        .unwrap();
    let summary: Vec<(&str, gitstore::EntryKind, u64)> = found
        .iter()
        .map(|e| (e.path.as_str(), e.kind, e.size))
        .collect();
    assert_eq!(
        summary,
        [
            ("a.sourcegraph.wasm", gitstore::EntryKind::File, 6),
            ("docs/b.sourcegraph.wasm", gitstore::EntryKind::File, 6),
            ("docs/c.sourcegraph.wasm", gitstore::EntryKind::Symlink, 0),
        ]
    );
    assert!(found.iter().all(|e| e.id.len() == 40));
    assert_eq!(
        f.store
            .read_bytes(&f.name, &tip, &path("a.sourcegraph.wasm"))
            .unwrap(),
        b"\0asm-a"
    );
    assert!(matches!(
        f.store
            .read_bytes(&f.name, &tip, &path("docs/c.sourcegraph.wasm")),
        Err(Error::Symlink { .. })
    ));
    // The indexer's bulk path: blobs by the ids `find_files` gave.
    let reader = f.store.blob_reader(&f.name, &tip).unwrap();
    assert_eq!(reader.read(&found[1].id).unwrap(), b"\0asm-b");
    assert!(matches!(reader.read("not-hex"), Err(Error::Storage(_))));
    // A size limit refuses from the object header (W-22 FILE_BYTES), at the limit it reads.
    assert_eq!(
        f.store
            .read_bytes_within(&f.name, &tip, &path("a.sourcegraph.wasm"), 6)
            .unwrap(),
        b"\0asm-a"
    );
    match f
        .store
        .read_bytes_within(&f.name, &tip, &path("a.sourcegraph.wasm"), 5)
    {
        Err(
            e @ Error::TooLarge {
                size: 6, limit: 5, ..
            },
        ) => assert_eq!(
            e.to_string(),
            "`a.sourcegraph.wasm` is 6 bytes, over the limit of 5 bytes"
        ),
        other => panic!("expected TooLarge, got {other:?}"),
    }

    let scoped = Fixture::new();
    scoped.commit(
        &[
            ("a.sourcegraph.wasm", b"x"),
            ("docs/b.sourcegraph.wasm", b"y"),
        ],
        "two",
    );
    let tip = cid(&scoped.commit(&[], "again"));
    scoped.register("docs");
    scoped.sync();
    let found = scoped
        .store
        .find_files(&scoped.name, &tip, ".sourcegraph.wasm")
        .unwrap();
    assert_eq!(
        found.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
        ["docs/b.sourcegraph.wasm"]
    );
    assert!(matches!(
        scoped
            .store
            .read_bytes(&scoped.name, &tip, &path("a.sourcegraph.wasm")),
        Err(Error::OutsideScope { .. })
    ));
}

/// G-3, G-5: a sweep skips a repository whose fetch hangs (it is swept next round) and still
/// expires the former heads of the others: one stuck fetch never holds up every sweep.
#[cfg(target_os = "linux")]
#[test]
fn g5_sweep_skips_a_repository_busy_with_a_hung_fetch() {
    let f = Fixture::new();
    let (_, old, _) = f.force_pushed();
    let stuck_source = testgit::SourceRepo::with_files(&[("s.md", b"stuck\n")]);
    let stuck = RepoName::parse("acme/stuck").unwrap();
    f.store
        .register(Registration {
            name: stuck.clone(),
            source: stuck_source.source(),
            registered_path: RepoPath::root(),
            branch: None,
            private: None,
        })
        .unwrap();
    f.store.sync(&stuck).unwrap();

    let hung = testgit::HungFetches::new(stuck_source.path());
    let store = f.store.clone();
    let fetch = std::thread::spawn(move || store.sync(&stuck));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !hung.blocked() {
        assert!(
            std::time::Instant::now() < deadline,
            "the fetch never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }

    f.advance_days(31);
    let report = f.store.sweep().unwrap();
    assert_eq!(report.expired, vec![(f.name.clone(), cid(&old))]);
    assert!(
        !f.mirror_has(&old),
        "the other repository was swept and pruned"
    );

    drop(hung);
    fetch.join().unwrap().expect("the released fetch completes");
}

/// R-2 (continuation reads), G-2: the blob cache keeps a read file's decoded text by blob id,
/// so reading it again (the next range, another commit or path with the same bytes) does not
/// inflate it again; every read still answers its own commit's content, scope is checked
/// before the cache is asked, and a zero bound caches nothing.
#[test]
fn r2_blob_cache_serves_repeat_reads_by_blob_id() {
    let f = Fixture::new();
    let first = f.commit(
        &[
            ("docs/a.md", b"same bytes\n"),
            ("docs/b.md", b"same bytes\n"),
        ],
        "first",
    );
    f.register("docs");
    f.sync();
    let read = |commit: &str, p: &str| f.store.read_text(&f.name, &cid(commit), &path(p));
    assert_eq!(&*read(&first, "docs/a.md").unwrap(), "same bytes\n");
    // 11 bytes of text and one 4-byte line start.
    assert_eq!(f.store.blob_cache_usage(), (1, 15));
    assert_eq!(&*read(&first, "docs/b.md").unwrap(), "same bytes\n");
    assert_eq!(f.store.blob_cache_usage(), (1, 15), "one blob, one entry");

    let second = f.commit(
        &[("docs/a.md", b"changed\n"), ("x.md", b"same bytes\n")],
        "second",
    );
    f.sync();
    assert_eq!(&*read(&second, "docs/a.md").unwrap(), "changed\n");
    assert_eq!(&*read(&first, "docs/a.md").unwrap(), "same bytes\n");
    assert_eq!(f.store.blob_cache_usage(), (2, 15 + 8 + 4));
    assert!(
        matches!(read(&second, "x.md"), Err(Error::OutsideScope { .. })),
        "a cached blob outside the registered path stays invisible"
    );

    f.store.set_blob_cache_bytes(0);
    assert_eq!(f.store.blob_cache_usage(), (0, 0));
    assert_eq!(&*read(&second, "docs/a.md").unwrap(), "changed\n");
    assert_eq!(f.store.blob_cache_usage(), (0, 0));
}
