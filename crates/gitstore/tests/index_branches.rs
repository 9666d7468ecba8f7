//! S-8 support in the store: the index-branch patterns of a registration, on both metadata
//! backends (SQLite in a temporary data directory, a fresh database of a real PostgreSQL
//! server from `metadb::testing`), and the file deltas between two commits compared with
//! `git diff --raw --no-renames`.

// The helpers are shared with other test files, which use more of them.
#[allow(dead_code)]
mod replicas;

use gitstore::{FileDelta, GitStore, Metadata, RepoPath};
use metadb::testing::within;
use replicas::{cid, clock, connect, name, open};
use std::collections::BTreeSet;
use std::time::Duration;

fn registration(source: &testgit::SourceRepo, scope: &str) -> gitstore::Registration {
    gitstore::Registration {
        name: name("acme/widgets"),
        source: source.source(),
        registered_path: RepoPath::parse(scope).unwrap(),
        branch: None,
        private: None,
    }
}

/// Patterns are stored (duplicates dropped), shown by `repos`, kept when the same
/// registration is made again, survive a restart, and pick the matching tracked branches
/// (never the default branch); the cap and bad patterns are refused and store nothing.
fn patterns_persist(metadata: impl Fn() -> Metadata) {
    let source = testgit::SourceRepo::with_files(&[("a.md", b"alpha\n")]);
    source.git(&["branch", "release/1.0"]);
    source.git(&["branch", "release/2.0"]);
    source.git(&["branch", "release/3/hotfix"]);
    source.git(&["branch", "feature"]);
    let data = source.data_dir();
    let clock = clock();
    let store = open(&data, &clock, metadata());
    let repo = name("acme/widgets");
    store.register(registration(&source, "")).unwrap();
    assert!(store.repo(&repo).unwrap().index_branches.is_empty());
    store.sync(&repo).unwrap();
    assert_eq!(store.indexed_branches(&repo).unwrap(), vec![]);

    let stored = store
        .set_index_branches(
            &repo,
            &["release/*".into(), "main".into(), "release/*".into()],
        )
        .unwrap();
    assert_eq!(stored, vec!["release/*".to_string(), "main".to_string()]);
    let listed = store.repos().unwrap();
    assert_eq!(listed[0].index_branches, stored);
    let head = cid(&source.head());
    assert_eq!(
        store.indexed_branches(&repo).unwrap(),
        vec![
            ("release/1.0".to_string(), head.clone()),
            ("release/2.0".to_string(), head.clone()),
        ],
        "`*` stays within a segment; the default branch has the full index"
    );

    store.register(registration(&source, "")).unwrap();
    assert_eq!(store.index_branches(&repo).unwrap(), stored);

    let too_many: Vec<String> = (0..65).map(|i| format!("b{i}")).collect();
    let error = store
        .set_index_branches(&repo, &too_many)
        .unwrap_err()
        .to_string();
    assert!(error.contains("at most 64"), "{error}");
    let error = store
        .set_index_branches(&repo, &["bad pattern".into()])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("bad pattern") && error.contains("index-branch pattern"),
        "{error}"
    );
    assert_eq!(store.index_branches(&repo).unwrap(), stored, "unchanged");
    let unknown = store
        .set_index_branches(&name("acme/none"), &["main".into()])
        .unwrap_err();
    assert!(
        matches!(unknown, gitstore::Error::UnknownRepo(_)),
        "{unknown}"
    );
    drop(store);

    let reopened = open(&data, &clock, metadata());
    assert_eq!(reopened.index_branches(&repo).unwrap(), stored);
    reopened.set_index_branches(&repo, &[]).unwrap();
    assert!(reopened.index_branches(&repo).unwrap().is_empty());
}

#[test]
fn s8_sqlite_index_branch_patterns_persist() {
    within(Duration::from_secs(120), || {
        patterns_persist(|| Metadata::Sqlite)
    });
}

#[test]
fn s8_postgres_index_branch_patterns_persist() {
    within(Duration::from_secs(180), || {
        let url = metadb::testing::shared().create_database();
        patterns_persist(|| Metadata::Postgres(connect(&url)))
    });
}

/// The deltas `git diff --raw --no-renames --no-abbrev BASE COMMIT` shows for regular files,
/// within `scope`, as (path, old blob, new blob).
fn git_deltas(
    source: &testgit::SourceRepo,
    base: &str,
    commit: &str,
    scope: &str,
) -> BTreeSet<FileDelta> {
    let zero = "0".repeat(40);
    let raw = source.git(&[
        "diff",
        "--raw",
        "--no-renames",
        "--no-abbrev",
        "-z",
        base,
        commit,
        "--",
        if scope.is_empty() { "." } else { scope },
    ]);
    let mut out = BTreeSet::new();
    let mut fields = raw.split('\0').filter(|f| !f.is_empty());
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let file = |mode: &str| mode.starts_with("100");
        let (old_mode, new_mode, old, new) = (parts[0], parts[1], parts[2], parts[3]);
        let old = (file(old_mode) && old != zero).then(|| old.to_string());
        let new = (file(new_mode) && new != zero).then(|| new.to_string());
        if old == new {
            continue;
        }
        out.insert(FileDelta {
            path: path.to_string(),
            old,
            new,
        });
    }
    out
}

/// S-8: the file deltas between two commits are what `git diff --raw --no-renames` shows
/// for regular files (a rename as a deletion and an addition, a deleted file, a binary file,
/// an executable, a file turned into a directory; a mode change alone and a symlink are no
/// content change of an indexed file), limited to the registered path.
#[test]
fn s8_file_deltas_match_git_diff() {
    within(Duration::from_secs(120), || {
        let source = testgit::SourceRepo::with_files(&[
            ("a.md", b"alpha\n"),
            ("docs/keep.md", b"keep\n"),
            ("docs/old-name.md", b"renamed\n"),
            ("docs/gone.md", b"gone\n"),
            ("tool.sh", b"#!/bin/sh\n"),
            ("thing", b"a file\n"),
        ]);
        let base = source.head();
        std::os::unix::fs::symlink("a.md", source.path().join("link")).unwrap();
        source.git(&["mv", "docs/old-name.md", "docs/new-name.md"]);
        source.git(&["rm", "-q", "docs/gone.md", "thing"]);
        source.git(&["update-index", "--chmod=+x", "a.md"]);
        let commit = source.commit(
            &[
                ("docs/keep.md", b"kept, changed\n"),
                ("image.bin", b"\x00\x01binary\x00"),
                ("thing/inside.md", b"now a directory\n"),
                ("new.md", b"new\n"),
            ],
            "changes",
        );
        for scope in ["", "docs"] {
            let store: GitStore = open(&source.data_dir(), &clock(), Metadata::Sqlite);
            let repo = name("acme/widgets");
            store.register(registration(&source, scope)).unwrap();
            store.sync(&repo).unwrap();
            let (old, new) = (
                store.lease(&repo, &cid(&base)).unwrap(),
                store.lease(&repo, &cid(&commit)).unwrap(),
            );
            let deltas: BTreeSet<FileDelta> =
                new.file_deltas_from(&old).unwrap().into_iter().collect();
            assert_eq!(
                deltas,
                git_deltas(&source, &base, &commit, scope),
                "scope {scope:?}"
            );
            let back: BTreeSet<FileDelta> =
                old.file_deltas_from(&new).unwrap().into_iter().collect();
            assert_eq!(
                back,
                git_deltas(&source, &commit, &base, scope),
                "scope {scope:?}"
            );
            assert!(new.file_deltas_from(&new).unwrap().is_empty());
            let reader = new.blobs().unwrap();
            for delta in &deltas {
                if let Some(id) = &delta.new {
                    let bytes = reader.read(id).unwrap();
                    assert_eq!(reader.size(id).unwrap(), bytes.len() as u64);
                    assert_eq!(
                        bytes,
                        std::fs::read(source.path().join(&delta.path)).unwrap()
                    );
                }
            }
            drop((old, new, store));
            std::fs::remove_dir_all(source.data_dir()).unwrap();
        }
    });
}
