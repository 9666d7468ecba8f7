//! `log`, `commit` changes and `blame` against git on this repository's own history (issue
//! 12): the project's checkout is registered as a source, and the answers are compared with
//! `git log`, `git diff --numstat --no-renames --minimal` and `git blame --porcelain` of the
//! same commits. `--minimal`, because a minimal diff's counts are unique whatever alignment is
//! drawn. Git's Myers is not always minimal though, `--minimal` included (its preparation
//! discards lines that occur very often): commit 44e1fa6 changes `plugin_api.py` by 158/51
//! lines in git's count and 153/46 in ours, histogram's and patience's. So the same files must
//! change, with the same net line count, and ours may only ever be smaller.
//! Outside a git checkout (a source tarball) there is no history to compare. A line that
//! occurs several times in a file (a blank line, a closing brace) may be blamed on another
//! commit that added an equal line: two diff implementations choose among equally good
//! alignments differently.

use gitstore::{CommitId, GitStore, RepoName, RepoPath, StoreConfig, SystemClock};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(checkout())
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn history_tools_agree_with_git_on_this_repository() {
    if git(&["rev-parse", "--is-shallow-repository"]).as_deref() != Some("false\n") {
        eprintln!("not a full git checkout: no own history to compare");
        return;
    }
    let head = git(&["rev-parse", "HEAD"]).unwrap().trim().to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let store = GitStore::open(
        StoreConfig {
            data_dir: tmp.path().to_path_buf(),
            retention: gitstore::DEFAULT_RETENTION,
        },
        Arc::new(SystemClock),
    )
    .unwrap();
    let name = RepoName::parse("csg/self").unwrap();
    store
        .register(gitstore::Registration {
            name: name.clone(),
            source: checkout()
                .canonicalize()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            registered_path: RepoPath::root(),
            branch: None,
            private: None,
        })
        .unwrap();
    store.sync(&name).unwrap();
    let commit = CommitId::parse(&head).unwrap();
    if store.resolve(&name, Some(&head)).is_err() {
        eprintln!("HEAD is not the head of a branch: nothing fetched to compare");
        return;
    }

    for path in ["", "README.md", "crates/gitstore"] {
        let (log, _) = store
            .log(&name, &commit, &RepoPath::parse(path).unwrap(), 0, 80)
            .unwrap();
        let ours: Vec<String> = log.iter().map(|c| c.commit.to_string()).collect();
        let mut args = vec!["log", "--format=%H", "-n", "80", &head];
        if !path.is_empty() {
            args.extend(["--", path]);
        }
        let theirs: Vec<String> = git(&args).unwrap().lines().map(str::to_owned).collect();
        assert_eq!(ours, theirs, "log -- {path:?}");
    }

    // Every commit of a young history; the newest 400 once it grows.
    let recent = git(&["rev-list", "--first-parent", "-n", "400", &head]).unwrap();
    for sha in recent.lines() {
        let details = store
            .commit_details(&name, &CommitId::parse(sha).unwrap(), 10_000)
            .unwrap();
        let ours: Vec<String> = details
            .changes
            .iter()
            .map(|c| match c.lines {
                Some((added, removed)) => format!("{added}\t{removed}\t{}", c.path),
                None => format!("-\t-\t{}", c.path),
            })
            .collect();
        let parent = details
            .summary
            .parents
            .first()
            .map_or("4b825dc642cb6eb9a060e54bf8d69288fbee4904".to_owned(), |p| {
                p.to_string()
            });
        let theirs: Vec<String> = git(&[
            "diff",
            "--numstat",
            "--no-renames",
            "--minimal",
            &parent,
            sha,
        ])
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
        assert_eq!(
            ours.len(),
            theirs.len(),
            "files of {sha}: {ours:?} {theirs:?}"
        );
        for (our, their) in ours.iter().zip(&theirs) {
            if our == their {
                continue;
            }
            let counts = |line: &str| -> Option<(i64, i64, String)> {
                let mut parts = line.splitn(3, '\t');
                let added = parts.next()?.parse().ok()?;
                let removed = parts.next()?.parse().ok()?;
                Some((added, removed, parts.next()?.to_owned()))
            };
            let (Some((a, r, path)), Some((ta, tr, their_path))) = (counts(our), counts(their))
            else {
                panic!("numstat of {sha}: {our:?} vs git's {their:?}");
            };
            assert_eq!(path, their_path, "numstat of {sha}");
            assert!(
                a - r == ta - tr && a + r < ta + tr,
                "numstat of {sha}: ours {our:?} may differ from git's {their:?} only by being smaller"
            );
        }
    }

    for file in ["README.md", "Cargo.toml", "crates/gitstore/src/lib.rs"] {
        let (ranges, _) = store
            .blame(&name, &commit, &RepoPath::parse(file).unwrap(), 1, u64::MAX)
            .unwrap();
        let ours: Vec<String> = ranges
            .iter()
            .flat_map(|r| (r.start_line..=r.end_line).map(|_| r.commit.commit.to_string()))
            .collect();
        let porcelain = git(&["blame", "--porcelain", &head, "--", file]).unwrap();
        let mut theirs = Vec::new();
        for line in porcelain.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() >= 3
                && fields[0].len() == 40
                && fields[0].bytes().all(|b| b.is_ascii_hexdigit())
            {
                let at: usize = fields[2].parse().unwrap();
                theirs.resize(theirs.len().max(at), String::new());
                theirs[at - 1] = fields[0].to_owned();
            }
        }
        assert_eq!(ours.len(), theirs.len(), "{file}");
        // A line that occurs more than once in the file (a blank line, a closing brace) may
        // align with another of its copies: git's xdiff and imara-diff choose among equally
        // good alignments differently. Lines that occur once must be blamed alike.
        // The file at the blamed commit, not the working tree's (which may have edits).
        let text = git(&["show", &format!("{head}:{file}")]).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let unique = |i: usize| lines.iter().filter(|l| **l == lines[i]).count() == 1;
        let differing: Vec<(usize, &String, &String)> = ours
            .iter()
            .zip(&theirs)
            .enumerate()
            .filter(|(i, (a, b))| a != b && unique(*i))
            .map(|(i, (a, b))| (i + 1, a, b))
            .collect();
        assert!(
            differing.is_empty(),
            "blame of {file}: (line, ours, git's) differ: {differing:?}"
        );
    }
}
