//! Test support for every crate of the workspace: real Git repositories made with the `git`
//! CLI in temp dirs. Commands run with a fixed identity, increasing commit dates and no
//! global or system Git configuration, so tests behave the same on any machine.
//!
//! Panics on failure: this crate is only ever a dev-dependency.

#[cfg(unix)]
pub mod answers;
pub mod fastimport;
pub mod fuzz;
mod hang;
pub mod hostile;
mod http;
pub mod usage;

#[cfg(unix)]
pub use hang::HungFetches;
pub use http::DumbHttp;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

static TICK: AtomicU64 = AtomicU64::new(0);

/// Variables that would point git at another repository, index or object store. A test run
/// from a Git hook or an editor's terminal may have them set; the fixtures must not follow them.
const REDIRECTING_VARS: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
];

/// Runs git in `cwd`; panics with git's stderr on failure; answers trimmed stdout.
pub fn git(cwd: &Path, args: &[&str]) -> String {
    git_with_input(cwd, args, None)
}

/// [`git`] with bytes on standard input.
pub fn git_with_input(cwd: &Path, args: &[&str], input: Option<&[u8]>) -> String {
    let out = git_raw(cwd, args, input);
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs git and answers its raw output, successful or not.
pub fn git_raw(cwd: &Path, args: &[&str], input: Option<&[u8]>) -> Output {
    let mut child = git_command(cwd, args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git runs");
    if let Some(input) = input {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
    }
    child.wait_with_output().expect("git finishes")
}

/// git in `cwd` with `args`, the fixed identity, the next date and no global, system or
/// inherited repository configuration; its standard streams are the caller's to set.
pub(crate) fn git_command(cwd: &Path, args: &[&str]) -> Command {
    // Distinct, increasing dates keep commit ids unique and history order deterministic.
    let n = TICK.fetch_add(1, Ordering::SeqCst);
    let date = format!("{} +0000", 1_700_000_000 + n * 60);
    let mut command = Command::new("git");
    for var in REDIRECTING_VARS {
        command.env_remove(var);
    }
    command
        .current_dir(cwd)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date);
    command
}

/// `count` numbered lines of text (`00000000 the quick brown fox jumps over the lazy dog`, 54
/// bytes each): a large text file whose lines a test can tell apart.
pub fn numbered_lines(count: u64) -> String {
    (0..count)
        .map(|n| format!("{n:08} the quick brown fox jumps over the lazy dog\n"))
        .collect()
}

/// A source repository on branch `main` in its own temp dir (`<tmp>/source`), with room
/// beside it (`<tmp>/data`) for a data directory.
pub struct SourceRepo {
    tmp: tempfile::TempDir,
    path: PathBuf,
}

impl Default for SourceRepo {
    fn default() -> Self {
        Self::new()
    }
}

impl SourceRepo {
    /// An empty repository.
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("source");
        std::fs::create_dir_all(&path).expect("mkdir source");
        git(&path, &["init", "-q", "-b", "main"]);
        Self { tmp, path }
    }

    /// A repository with one commit of `files`.
    pub fn with_files(files: &[(&str, &[u8])]) -> Self {
        let repo = Self::new();
        repo.commit(files, "files");
        repo
    }

    /// The work tree.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The work tree as text, for registrations.
    pub fn source(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// The temp dir holding the work tree; gone when `self` drops.
    pub fn tmp(&self) -> &Path {
        self.tmp.path()
    }

    /// A data directory beside the work tree.
    pub fn data_dir(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    /// Runs git in the work tree.
    pub fn git(&self, args: &[&str]) -> String {
        git(&self.path, args)
    }

    /// Writes `files` (creating directories).
    pub fn write(&self, files: &[(&str, &[u8])]) {
        for (rel, content) in files {
            let full = self.path.join(rel);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            std::fs::write(&full, content).expect("write file");
        }
    }

    /// Writes `files`, stages everything, commits; answers the new HEAD.
    pub fn commit(&self, files: &[(&str, &[u8])], message: &str) -> String {
        self.write(files);
        self.git(&["add", "-A"]);
        self.commit_index(message)
    }

    /// Commits the index as it is (for entries a work tree cannot hold, such as gitlinks).
    pub fn commit_index(&self, message: &str) -> String {
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.head()
    }

    /// Serves this repository as an `http://127.0.0.1:PORT/` remote (Git's dumb protocol)
    /// as of now: commits made later are not served.
    pub fn serve_http(&self) -> DumbHttp {
        self.git(&["update-server-info"]);
        DumbHttp::serve(&self.path().join(".git"))
    }

    /// The full SHA of HEAD.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }
}

#[cfg(feature = "store")]
impl SourceRepo {
    /// A store in [`SourceRepo::data_dir`] (system clock, default retention) with this
    /// repository registered as `name` (registered path `scope`, `""` for all) and synced.
    pub fn store(&self, name: &str, scope: &str) -> gitstore::GitStore {
        self.store_with_clock(name, scope, std::sync::Arc::new(gitstore::SystemClock))
    }

    /// [`SourceRepo::store`] on `clock` (e.g. a `ManualClock`, for retention tests).
    pub fn store_with_clock(
        &self,
        name: &str,
        scope: &str,
        clock: std::sync::Arc<dyn gitstore::Clock>,
    ) -> gitstore::GitStore {
        let store = registered_store(self.data_dir(), name, &self.source(), scope, clock);
        let name = gitstore::RepoName::parse(name).expect("repository name");
        store.sync(&name).expect("sync");
        store
    }
}

/// A store in `data_dir` (default retention) with `source` (a path or URL) registered as
/// `name` (registered path `scope`, `""` for all), not synced yet: for probes that time the
/// first sync of a real repository.
#[cfg(feature = "store")]
pub fn registered_store(
    data_dir: PathBuf,
    name: &str,
    source: &str,
    scope: &str,
    clock: std::sync::Arc<dyn gitstore::Clock>,
) -> gitstore::GitStore {
    let config = gitstore::StoreConfig {
        data_dir,
        retention: gitstore::DEFAULT_RETENTION,
    };
    let store = gitstore::GitStore::open(config, clock).expect("open store");
    let registration = gitstore::Registration {
        name: gitstore::RepoName::parse(name).expect("repository name"),
        source: source.to_owned(),
        registered_path: gitstore::RepoPath::parse(scope).expect("registered path"),
        branch: None,
        private: None,
    };
    store.register(registration).expect("register");
    store
}
