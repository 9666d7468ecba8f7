//! Commit and diff search (S-9): an incremental index of a repository's history, searched
//! like `git log --grep` (commit messages) and `git log -G` (added and removed lines).
//!
//! The index never reads Git: a [`HistorySource`] walks the history in `git log` order and
//! answers each commit's record (message, author, dates, changed paths, diff lines against
//! the first parent). An update (module `update`) adds the commits of the tip's history not
//! indexed yet as a new *segment* (module `segment`: commit table, messages, diff lines and a
//! trigram index over each commit's diff lines), writes the tip's order, and publishes both
//! with a manifest written by rename; segments beyond [`MAX_SEGMENTS`] are merged into one.
//! A search (module `query`) walks the tip's order, selects diff candidates by trigrams and
//! verifies lines with the regex, and stops when the page (and one hit more, for the cursor)
//! is found.
//!
//! On disk, beside the code index: `<dir>/<owner>/<name>/history/` holding `manifest.json`,
//! `seg-<n>/` (segments), `order-<n>.bin` (the tip's commits in `git log` order: u32 count,
//! then per commit its segment number (u32) and number in the segment (u32)) and
//! `.build.lock` (updates of one repository are serialised across processes; searches take
//! no lock: they read the manifest, then the files it names, which are only deleted after a
//! newer manifest is published, and retry when one went away meanwhile).

mod dates;
mod query;
mod segment;
mod update;

use std::path::{Path, PathBuf};

pub use query::{
    HistoryHit, HistoryKind, HistoryRequest, HistoryResults, MAX_HISTORY_LIMIT, history_cursor_tip,
};
pub use update::{HistoryBuildStats, MAX_SEGMENTS};

/// Most commits of a revision's history a search reads from the source itself because they
/// are not indexed (a branch other than the indexed ones, or a tip newer than the index).
pub const MAX_LIVE_COMMITS: usize = 2_000;

/// One commit as a [`HistorySource`] gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryRecord {
    /// Full SHA (40 hex digits).
    pub commit: String,
    /// How many parents it has (more than one: a merge).
    pub parents: usize,
    /// `Name <email>`.
    pub author: String,
    /// Author date: seconds since the epoch and the recorded offset east of UTC (seconds).
    pub author_time: i64,
    pub author_offset: i32,
    /// Committer date (the order and `since`/`until` use it, as git's do).
    pub committer_time: i64,
    /// The whole message.
    pub message: String,
    /// Per parent (one group for a root commit): the paths that differ.
    pub changed: Vec<Vec<String>>,
    /// Added and removed lines against the first parent (none for a merge).
    pub lines: Vec<HistoryLine>,
}

/// One added or removed line of a commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryLine {
    /// The new path (added) or the old path (removed).
    pub path: String,
    /// `+` (true) or `-` line.
    pub added: bool,
    /// Its number in the new (added) or old (removed) file.
    pub line: u32,
    /// The text, without line feed.
    pub text: String,
}

/// Where the history comes from: the search crate never touches Git.
pub trait HistorySource: Sync {
    /// The commits reachable from `tip` in `git log`'s default order, at most `max`.
    fn walk(&self, tip: &str, max: usize) -> Result<Vec<String>, String>;
    /// One commit's record.
    fn commit(&self, commit: &str) -> Result<HistoryRecord, String>;
}

/// What can go wrong in a history update or search; every message fits a caller.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The query is empty.
    #[error("the query is empty: give a text (or, with regex, a regular expression) to search for")]
    EmptyQuery,
    /// The query is too long.
    #[error(
        "the query is {len} bytes long, over the limit of {max} bytes: search for a shorter, distinctive part of the text"
    )]
    QueryTooLong { len: usize, max: usize },
    /// The query (or `author`) is not a valid regular expression.
    #[error(
        "invalid regular expression in {field}: {message}\nThe syntax is Rust `regex` (no back-references, no look-around); for the query, set regex to false to search for the text literally."
    )]
    InvalidRegex {
        field: &'static str,
        message: String,
    },
    /// The `path` filter is not a valid glob.
    #[error(
        "invalid path `{glob}`: {message}; give a directory or file path (`src/lib`) or a glob such as `docs/**/*.md`"
    )]
    InvalidGlob { glob: String, message: String },
    /// `since` or `until` is not a date.
    #[error(
        "invalid {field} `{value}`: give a date as YYYY-MM-DD (a whole UTC day) or an RFC 3339 time such as 2024-01-31T12:00:00Z"
    )]
    InvalidDate { field: &'static str, value: String },
    /// The cursor was not made for this search.
    #[error(
        "invalid cursor: pass the next_cursor of the previous answer unchanged, with the same query, type and filters"
    )]
    InvalidCursor,
    /// Too much of the revision's history is not indexed yet to read it from Git now.
    #[error(
        "the history of `{repo}` at this revision is not indexed yet ({missing} commits or more are missing): search without revision (the indexed default branch), or again after the next index update"
    )]
    NotIndexed { repo: String, missing: usize },
    /// The source failed.
    #[error("reading the repository history failed: {message}")]
    Source { message: String },
    /// An index file could not be read or written (details in the log).
    #[error("history index storage failed while {action}; see the server log")]
    Io {
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// An index file is damaged.
    #[error(
        "the history index of `{repo}` is damaged ({detail}); it is rebuilt on the next update"
    )]
    Corrupt { repo: String, detail: String },
    /// An error of the code index's shared pieces (repository names, locks, mapping).
    #[error(transparent)]
    Index(#[from] crate::SearchError),
}

impl HistoryError {
    fn io(action: &'static str, source: std::io::Error) -> Self {
        tracing::warn!(action, error = %source, "history index I/O error");
        HistoryError::Io { action, source }
    }

    /// Whether the caller's request is at fault (else the server).
    pub fn is_invalid_request(&self) -> bool {
        match self {
            HistoryError::Index(inner) => !matches!(
                inner,
                crate::SearchError::Io { .. } | crate::SearchError::Corrupt { .. }
            ),
            HistoryError::Source { .. }
            | HistoryError::Io { .. }
            | HistoryError::Corrupt { .. }
            | HistoryError::NotIndexed { .. } => false,
            _ => true,
        }
    }
}

/// The history indexes under one index directory (the code index's).
#[derive(Debug, Clone)]
pub struct HistoryIndexes {
    dir: PathBuf,
}

impl HistoryIndexes {
    /// History indexes under `dir` (created on the first update).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        HistoryIndexes { dir: dir.into() }
    }

    fn repo_dir(&self, repo: &str) -> Result<PathBuf, HistoryError> {
        let mut dir = self.dir.clone();
        for part in crate::repodir::repo_components(repo)? {
            dir.push(part);
        }
        dir.push("history");
        Ok(dir)
    }

    /// The tip the published history index of `repo` was built from, if any.
    pub fn indexed_tip(&self, repo: &str) -> Option<String> {
        let dir = self.repo_dir(repo).ok()?;
        update::Manifest::read(&dir).ok().flatten().map(|m| m.tip)
    }

    /// Drops `repo`'s history index (waits for an update of it to finish).
    pub fn remove(&self, repo: &str) -> Result<(), HistoryError> {
        let dir = self.repo_dir(repo)?;
        if !dir.exists() {
            return Ok(());
        }
        let _lock = crate::repodir::lock_repo_dir(&dir)?;
        remove_all(&dir);
        // Last the lock file and the directory, as the code index's removal does, so an
        // unregistered repository leaves nothing behind.
        let _ = std::fs::remove_file(dir.join(crate::repodir::LOCK_FILE));
        let _ = std::fs::remove_dir(&dir);
        Ok(())
    }
}

/// Deletes a history directory's contents but its lock file (held while this runs).
fn remove_all(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if entry.file_name() == crate::repodir::LOCK_FILE {
                continue;
            }
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}
