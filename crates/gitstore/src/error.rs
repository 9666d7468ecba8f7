//! Typed errors of the store. Every message is fit to show a caller: it says what was wrong
//! and what to do, and never contains a host path or an internal error chain (those go to
//! the log).

use crate::names::{CommitId, RepoName};

/// Everything that can go wrong in the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A repository name that is not `owner/name`.
    #[error("invalid repository name `{name}`: {reason}; use `owner/name`")]
    InvalidName { name: String, reason: String },
    /// A path that is not a normal relative path (G-6).
    #[error(
        "invalid path `{path}`: {reason}; give a normal repository-relative path such as `docs/a.md`"
    )]
    InvalidPath { path: String, reason: &'static str },
    /// A revision string that is neither a SHA, a short SHA nor a ref name.
    #[error("invalid revision `{revision}`: {reason}")]
    InvalidRevision { revision: String, reason: String },
    /// No registration under this name (or the caller may not know of it: A-4).
    #[error("unknown repository `{0}`; `discovery` lists the repositories you can read")]
    UnknownRepo(RepoName),
    /// The name is registered with another source or registered path.
    #[error(
        "repository name `{0}` is already registered with another source or path; remove it first or pick another name"
    )]
    NameTaken(RepoName),
    /// Registered again with the other visibility: changing it is an explicit act.
    #[error(
        "repository `{name}` is registered as {}; change that with `csg repo visibility {name} {}`",
        if *.private { "private" } else { "public" },
        if *.private { "public" } else { "private" }
    )]
    VisibilityDiffers { name: RepoName, private: bool },
    /// The repository was registered but never synced successfully.
    #[error("repository `{0}` has not been synced yet; try again once its first sync has finished")]
    NotSynced(RepoName),
    /// The revision names nothing in the repository.
    #[error(
        "unknown revision `{revision}` in `{repo}`; give a full SHA, a branch, a tag or a unique short SHA (≥ 7 hex)"
    )]
    UnknownRevision { repo: RepoName, revision: String },
    /// A short SHA that matches several commits (G-4).
    #[error("ambiguous short SHA `{prefix}` in `{repo}`: it matches {}; give more hex digits", candidates.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", "))]
    Ambiguous {
        repo: RepoName,
        prefix: String,
        candidates: Vec<CommitId>,
    },
    /// The commit exists but is not retained (G-5).
    #[error(
        "commit {commit} of `{repo}` is not readable (outside retention); read a current branch head or a commit from its history"
    )]
    OutsideRetention { repo: RepoName, commit: CommitId },
    /// The path is outside the registered path (G-2).
    #[error(
        "path `{path}` is outside the registered path `{scope}` of `{repo}`; paths must start with `{scope}/`"
    )]
    OutsideScope {
        repo: RepoName,
        path: String,
        scope: String,
    },
    /// Nothing at this path in this commit.
    #[error("no file `{path}` at commit {commit}; use `search` or `list` to find paths")]
    NotFound { path: String, commit: CommitId },
    /// The path is a directory.
    #[error("`{path}` is a directory; use `list` to see its entries")]
    IsDirectory { path: String },
    /// The path (or one of its parents) is a symbolic link, which is never followed (G-6).
    #[error(
        "`{path}` is a symbolic link (to `{target}`); links are not followed, read the target path directly if it is inside the repository"
    )]
    Symlink { path: String, target: String },
    /// The path is a submodule (gitlink), never dereferenced (G-6).
    #[error(
        "`{path}` is a submodule (gitlink to commit {commit}); its content lives in another repository"
    )]
    Submodule { path: String, commit: String },
    /// The file is a Git LFS pointer; the object is not in Git (G-6).
    #[error(
        "`{path}` is a Git LFS pointer (object {oid}, {size} bytes); the content is stored outside Git and is not served"
    )]
    LfsPointer {
        path: String,
        oid: String,
        size: u64,
    },
    /// A binary file (NUL in the first 8 KiB) (G-7).
    #[error("`{path}` is a binary file, {size} bytes; it is not served as text")]
    Binary { path: String, size: u64 },
    /// A file over the caller's size limit, refused before it was read.
    #[error("`{path}` is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { path: String, size: u64, limit: u64 },
    /// A file over the text cap (issue 42), refused from its object header before it was
    /// inflated: the text tools do not read it, diffs do not diff it.
    #[error(
        "`{path}` is {size} bytes, over the {limit} bytes this server reads as text: download it from the file's raw view on the website, or find the lines you need with `search`"
    )]
    TextTooLarge { path: String, size: u64, limit: u64 },
    /// NUL-free but not valid UTF-8 (G-7).
    #[error("`{path}` is not UTF-8 text ({size} bytes); it is not served as text")]
    NotUtf8 { path: String, size: u64 },
    /// The fetch failed; the last good state keeps serving (G-3).
    #[error("sync of `{repo}` failed: {message}; the last good state keeps serving")]
    Sync { repo: RepoName, message: String },
    /// The call's budget ran out or its caller went away (O-9): the work stopped. The
    /// service turns it into its own answer (a partial page, or "ran out of time").
    #[error("stopped: {0}")]
    Stopped(#[from] budget::Stop),
    /// Storage trouble (SQLite, object database, filesystem). The message is generic; the
    /// detail went to the log.
    #[error("storage error: {0}; see the server log")]
    Storage(String),
}

/// The message of the [`Error::Storage`] every metadata write answers while the PostgreSQL
/// metadata database (cluster mode) cannot be reached.
pub(crate) const METADATA_UNREACHABLE: &str = "the metadata database is unreachable, so registrations, removals, visibility changes, pins and sync results cannot be recorded until it is back (reads go on from the last known metadata)";

/// The message of the [`Error::Storage`] that [`crate::GitStore::release_local`] answers
/// with SQLite metadata, where this data directory's mirror is the only copy.
pub(crate) const ONLY_COPY: &str = "this server keeps the only copy of its repositories (SQLite metadata), so it never releases a mirror; only a cluster replica (PostgreSQL metadata) drops the mirrors of repositories it no longer owns";

impl Error {
    /// Whether this is the refusal of a metadata write while the PostgreSQL metadata database
    /// is unreachable: the caller may say "try again later" (HTTP 503) rather than report an
    /// internal error. Reads do not fail this way: they answer from the last known metadata.
    pub fn is_metadata_unreachable(&self) -> bool {
        matches!(self, Error::Storage(message) if message == METADATA_UNREACHABLE)
    }
}
