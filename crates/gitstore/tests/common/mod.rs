//! Test helpers: real Git repositories built with the `git` CLI in temp dirs, and a store on
//! a manual clock. Works without any global Git configuration.

use gitstore::{
    CommitId, DEFAULT_RETENTION, GitStore, ManualClock, Registration, RepoInfo, RepoName, RepoPath,
    StoreConfig, SyncOutcome,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const DAY: Duration = Duration::from_secs(24 * 60 * 60);

pub use testgit::{git as git_in, git_raw, git_with_input};

pub fn cid(sha: &str) -> CommitId {
    CommitId::parse(sha).expect("full sha")
}

pub fn path(p: &str) -> RepoPath {
    RepoPath::parse(p).expect("valid path")
}

/// A source repository and a store with a manual clock.
pub struct Fixture {
    pub source: testgit::SourceRepo,
    pub src: PathBuf,
    pub data: PathBuf,
    pub clock: ManualClock,
    pub store: GitStore,
    pub name: RepoName,
}

impl Fixture {
    pub fn new() -> Self {
        let source = testgit::SourceRepo::new();
        let src = source.path().to_path_buf();
        let data = source.data_dir();
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_750_000_000));
        let store = open_store(&data, &clock);
        Self {
            source,
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
        self.source.commit(files, message)
    }

    /// Commits the index as it is (no `git add`): for entries the worktree cannot hold,
    /// such as gitlinks.
    pub fn commit_index(&self, message: &str) -> String {
        self.source.commit_index(message)
    }

    pub fn registration(&self, registered_path: &str) -> Registration {
        Registration {
            name: self.name.clone(),
            source: self.src.to_string_lossy().into_owned(),
            registered_path: path(registered_path),
            branch: None,
            private: None,
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

    /// Builds main = base → old, syncs, then force-pushes main to base → new and syncs
    /// again. Returns (base, old, new).
    pub fn force_pushed(&self) -> (String, String, String) {
        let base = self.commit(&[("a.md", b"base\n")], "base");
        let old = self.commit(&[("a.md", b"old\n")], "old");
        self.register("");
        self.sync();
        self.git(&["reset", "-q", "--hard", &base]);
        let new = self.commit(&[("a.md", b"new\n")], "new");
        self.sync();
        (base, old, new)
    }

    pub fn mirror(&self) -> PathBuf {
        self.data.join("mirrors/acme/widgets.git")
    }

    /// `git cat-file -e` in the mirror.
    pub fn mirror_has(&self, sha: &str) -> bool {
        let mirror = self.mirror();
        git_raw(
            self.source.tmp(),
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
        let tmp = self.source.tmp().to_string_lossy().into_owned();
        assert!(!text.contains(&tmp), "host path leaked: {text}");
        if let Ok(canonical) = self.source.tmp().canonicalize() {
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

/// Runs `test` on a thread of its own and answers its result; fails the test if it has not
/// ended within `limit` (a hang fails instead of stalling the run). A panic in `test` fails
/// the test with its own message.
#[allow(dead_code)] // not every test binary has hang-prone tests
pub fn within<T: Send + 'static>(limit: Duration, test: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, ended) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = done.send(test());
    });
    match ended.recv_timeout(limit) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the test thread sends before it ends"),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the test did not finish within {limit:?}")
        }
    }
}
