//! Test helpers: real Git repositories built with the `git` CLI in temp dirs, and a store on
//! a manual clock. Works without any global Git configuration.

use gitstore::{
    CommitId, DEFAULT_RETENTION, GitStore, ManualClock, Registration, RepoInfo, RepoName, RepoPath,
    StoreConfig, SyncOutcome,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const DAY: Duration = Duration::from_secs(24 * 60 * 60);

static TICK: AtomicU64 = AtomicU64::new(0);

/// Runs git in `cwd` with a fixed identity, increasing dates and no global config.
pub fn git_in(cwd: &Path, args: &[&str]) -> String {
    git_with_input(cwd, args, None)
}

pub fn git_with_input(cwd: &Path, args: &[&str], input: Option<&[u8]>) -> String {
    let out = git_raw(cwd, args, input);
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn git_raw(cwd: &Path, args: &[&str], input: Option<&[u8]>) -> std::process::Output {
    let n = TICK.fetch_add(1, Ordering::SeqCst);
    let date = format!("{} +0000", 1_700_000_000 + n * 60);
    let mut cmd = Command::new("git");
    cmd.current_dir(cwd)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("git runs");
    if let Some(input) = input {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
    }
    child.wait_with_output().expect("git finishes")
}

pub fn cid(sha: &str) -> CommitId {
    CommitId::parse(sha).expect("full sha")
}

pub fn path(p: &str) -> RepoPath {
    RepoPath::parse(p).expect("valid path")
}

/// A source repository and a store with a manual clock.
pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub src: PathBuf,
    pub data: PathBuf,
    pub clock: ManualClock,
    pub store: GitStore,
    pub name: RepoName,
}

impl Fixture {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let src = tmp.path().join("src");
        let data = tmp.path().join("data");
        std::fs::create_dir_all(&src).expect("mkdir src");
        git_in(&src, &["init", "-q", "-b", "main"]);
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000));
        let store = open_store(&data, &clock);
        Self {
            tmp,
            src,
            data,
            clock,
            store,
            name: RepoName::parse("acme/widgets").expect("name"),
        }
    }

    pub fn git(&self, args: &[&str]) -> String {
        git_in(&self.src, args)
    }

    /// Writes files (creating directories), stages everything, commits; returns the SHA.
    pub fn commit(&self, files: &[(&str, &[u8])], message: &str) -> String {
        for (p, content) in files {
            let full = self.src.join(p);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            std::fs::write(&full, content).expect("write file");
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Commits the index as it is (no `git add`): for entries the worktree cannot hold,
    /// such as gitlinks.
    pub fn commit_index(&self, message: &str) -> String {
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    pub fn registration(&self, registered_path: &str) -> Registration {
        Registration {
            name: self.name.clone(),
            source: self.src.to_string_lossy().into_owned(),
            registered_path: path(registered_path),
            branch: None,
        }
    }

    pub fn register(&self, registered_path: &str) -> RepoInfo {
        self.store
            .register(self.registration(registered_path))
            .expect("register")
    }

    pub fn sync(&self) -> SyncOutcome {
        self.store.sync(&self.name).expect("sync")
    }

    pub fn mirror(&self) -> PathBuf {
        self.data.join("mirrors/acme/widgets.git")
    }

    /// `git cat-file -e` in the mirror.
    pub fn mirror_has(&self, sha: &str) -> bool {
        let mirror = self.mirror();
        git_raw(
            self.tmp.path(),
            &[
                "--git-dir",
                mirror.to_str().expect("utf-8 path"),
                "cat-file",
                "-e",
                sha,
            ],
            None,
        )
        .status
        .success()
    }

    pub fn now(&self) -> SystemTime {
        use gitstore::Clock;
        self.clock.now()
    }

    pub fn advance_days(&self, days: u64) {
        self.clock.advance(DAY * days as u32);
    }

    /// Asserts an error message names no host path of this fixture.
    pub fn assert_path_free(&self, text: &str) {
        let tmp = self.tmp.path().to_string_lossy().into_owned();
        assert!(!text.contains(&tmp), "host path leaked: {text}");
        if let Ok(canonical) = self.tmp.path().canonicalize() {
            let canonical = canonical.to_string_lossy().into_owned();
            assert!(!text.contains(&canonical), "host path leaked: {text}");
        }
        for internal in ["gix", "Traceback", "panicked"] {
            assert!(!text.contains(internal), "internal text leaked: {text}");
        }
    }
}

pub fn open_store(data: &Path, clock: &ManualClock) -> GitStore {
    GitStore::open(
        StoreConfig {
            data_dir: data.to_path_buf(),
            retention: DEFAULT_RETENTION,
        },
        Arc::new(clock.clone()),
    )
    .expect("open store")
}
