//! History (issue 12). `log {repo, revision?, path?, limit?, cursor?}`: the commits
//! reachable from a readable commit, newest first, optionally only those that changed a
//! path; with `follow` one file's history across renames (`git log --follow`, issue 34).
//! Paged (O-9, issue 42): a page walks until it has its commits or the call's walk and time
//! budget runs out, and answers what it found (`partial` when the budget ended it) with an
//! opaque, signed cursor carrying the walk's frontier, so the next page goes on exactly where
//! this one stopped and no page costs more than one page's walk. `commit {repo, revision}`:
//! one commit's message and the files it changed with line counts, renames detected.
//! `commit_diff`: a commit's own diff as `git show` prints it (the website's commit page).
//! Never runs plugins.

use crate::frame::Op;
use crate::{CallContext, Service, ServiceError, rfc3339};
use gitstore::RepoPath;
use serde::Serialize;
use std::time::{Duration, UNIX_EPOCH};

/// Commits per page when `limit` is not given.
pub const DEFAULT_LOG_LIMIT: usize = 50;
/// Most commits one page may ask for.
pub const MAX_LOG_LIMIT: usize = 500;

/// `log` arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRequest {
    pub repo: String,
    /// Where the log starts: branch, tag or SHA; the default branch's head when absent.
    pub revision: Option<String>,
    /// Only commits that changed this path (a file or directory).
    pub path: Option<String>,
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Follow the file `path` across renames and copies, as `git log --follow` does; each
    /// entry then says the path the file had in that commit.
    pub follow: bool,
}

/// One page of a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogAnswer {
    pub repo: String,
    /// The full SHA the log starts from (the same on every page).
    pub commit: String,
    /// The path the log is limited to, `""` for none.
    pub path: String,
    pub commits: Vec<LogEntry>,
    /// Pass it back as `cursor` for the next page; absent on the last.
    pub next_cursor: Option<String>,
    /// The log follows one file across renames (`git log --follow`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub follow: bool,
    /// The page's walk ran out of its budget (time or commits walked) before the page was
    /// full: it holds the commits found so far, perhaps none; `next_cursor` goes on where
    /// the walk stopped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// One commit of a log. Everything but the SHAs and the date is repository data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogEntry {
    pub commit: String,
    pub parents: Vec<String>,
    pub author: String,
    pub author_email: String,
    /// When it was authored, RFC 3339 UTC.
    pub date: String,
    pub subject: String,
    /// In a followed log: the path the file had in this commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// In a followed log: `added`, `modified`, `deleted`, `renamed` or `copied`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<&'static str>,
    /// In a followed log, for a rename or copy: the path in the parent it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_path: Option<String>,
}

/// Changed files `commit` counts lines for at most (a vendoring commit can touch tens of
/// thousands); the answer says how many there are in all.
pub const MAX_COMMIT_FILES: usize = 1000;
/// Lines one `blame` call covers at most: a file's blame walks its whole history, so a call
/// is bounded like a read; `next_start_line` continues.
pub const MAX_BLAME_LINES: u64 = 2_000;
/// Bytes of a commit message `commit` shows at most.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// One commit in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommitAnswer {
    pub repo: String,
    #[serde(flatten)]
    pub entry: LogEntry,
    /// The whole message, cut at [`MAX_MESSAGE_BYTES`] (repository data).
    pub message: String,
    pub message_truncated: bool,
    /// Committer name and email (repository data) and date (RFC 3339 UTC).
    pub committer: String,
    pub committer_email: String,
    pub committer_date: String,
    /// Against the first parent (a root commit adds every file), renames detected as
    /// `git show` does, in git's order (by new path); at most [`MAX_COMMIT_FILES`].
    pub files: Vec<ChangedFile>,
    /// How many files changed in all.
    pub total_files: usize,
    /// Inexact rename detection was skipped (too many added and deleted files, git's rename
    /// limit): a renamed and edited file shows as deleted and added.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub renames_skipped: bool,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedFile {
    /// The path in the commit (for a deletion: the path deleted).
    pub path: String,
    /// For a rename: the path in the parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// `added`, `deleted`, `modified` or `renamed`.
    pub status: &'static str,
    /// Lines added and removed; absent for a binary file.
    pub added: Option<u64>,
    pub removed: Option<u64>,
}

fn entry(c: gitstore::CommitSummary) -> LogEntry {
    LogEntry {
        commit: c.commit.to_string(),
        parents: c.parents.iter().map(ToString::to_string).collect(),
        author: c.author,
        author_email: c.author_email,
        date: date(c.author_time),
        subject: c.subject,
        path: None,
        change: None,
        previous_path: None,
    }
}

/// Seconds since the Unix epoch as RFC 3339 UTC (dates before 1970 as the epoch).
fn date(seconds: i64) -> String {
    rfc3339(UNIX_EPOCH + Duration::from_secs(seconds.max(0).unsigned_abs()))
}

fn followed(c: gitstore::FollowedCommit) -> LogEntry {
    LogEntry {
        path: Some(c.path),
        change: Some(match c.status {
            gitstore::FollowStatus::Added => "added",
            gitstore::FollowStatus::Modified => "modified",
            gitstore::FollowStatus::Deleted => "deleted",
            gitstore::FollowStatus::Renamed => "renamed",
            gitstore::FollowStatus::Copied => "copied",
        }),
        previous_path: c.previous_path,
        ..entry(c.commit)
    }
}

fn file_status(status: gitstore::FileStatus) -> &'static str {
    match status {
        gitstore::FileStatus::Added => "added",
        gitstore::FileStatus::Deleted => "deleted",
        gitstore::FileStatus::Modified => "modified",
        gitstore::FileStatus::Renamed => "renamed",
    }
}

/// `diff` arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffRequest {
    pub repo: String,
    /// The old side: branch, tag or SHA.
    pub base: String,
    /// The new side.
    pub head: String,
    /// Only files at or below this path.
    pub path: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One page of a diff: whole files (the first one cut at a line if it alone is over the
/// budget), in path order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffAnswer {
    pub repo: String,
    /// Full SHAs of both sides (the same on every page).
    pub base: String,
    pub head: String,
    pub path: String,
    pub files: Vec<DiffFile>,
    /// Files that differ in all.
    pub total_files: usize,
    pub next_cursor: Option<String>,
}

/// One file of a diff page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffFile {
    /// The path (a renamed file's new path).
    pub path: String,
    /// A renamed file's old path (a commit's diff detects renames; `diff` does not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// `added`, `deleted`, `modified`, or `renamed` in a commit's diff.
    pub status: &'static str,
    /// Git's text of the file, from its `diff --git` line on (repository data).
    pub text: String,
    /// The text was cut at a line to fit the read budget.
    pub truncated: bool,
}

/// Two revisions and their merge base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergeBaseAnswer {
    pub repo: String,
    /// Full SHAs of both sides.
    pub base: String,
    pub head: String,
    /// Their merge base, absent when their histories share no commit.
    pub merge_base: Option<String>,
}

/// `blame` arguments: a line range as `read` takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlameRequest {
    pub repo: String,
    pub revision: Option<String>,
    pub path: String,
    pub start_line: Option<u64>,
    pub end_line: Option<u64>,
}

/// Who last changed each line of a range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlameAnswer {
    pub repo: String,
    /// The full SHA blamed at.
    pub commit: String,
    pub path: String,
    pub start_line: u64,
    /// The last line blamed (the file may end before the range asked for).
    pub end_line: u64,
    pub total_lines: u64,
    /// Consecutive lines last changed by one commit, in line order.
    pub ranges: Vec<BlameLines>,
    /// Where to continue when the file goes on past `end_line`.
    pub next_start_line: Option<u64>,
}

/// Lines `start_line..=end_line` and the commit that last changed them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlameLines {
    pub start_line: u64,
    pub end_line: u64,
    #[serde(flatten)]
    pub commit: LogEntry,
}

fn status(kind: gitstore::ChangeKind) -> &'static str {
    match kind {
        gitstore::ChangeKind::Added => "added",
        gitstore::ChangeKind::Deleted => "deleted",
        gitstore::ChangeKind::Modified => "modified",
    }
}

/// A refused cursor as the caller's error (its message says what to do).
fn cursor_error(error: gitstore::CursorError) -> ServiceError {
    match error {
        gitstore::CursorError::Store(e) => e.into(),
        refused => ServiceError::invalid(refused.to_string()),
    }
}

impl Service {
    /// Makes `log` cursors continue on every server sharing `secret` (a cluster's): by
    /// default each data directory signs its cursors with a key of its own.
    pub fn set_cursor_secret(&self, secret: &[u8]) {
        self.inner.store.set_cursor_secret(secret);
    }

    /// `log`: commits from `revision` (or the cursor's commit), newest first by committer
    /// date as `git log` lists them; with `path`, the commits that changed it (git's default
    /// history simplification). Inside the registered scope only; the same access checks as
    /// `read`. A page walks at most the call's `walk` commits and stops at its soft deadline,
    /// answering what it found (`partial`) with a cursor that goes on from there.
    pub async fn log(&self, ctx: &CallContext, req: LogRequest) -> Result<LogAnswer, ServiceError> {
        let LogRequest {
            repo,
            revision,
            path,
            limit,
            cursor,
            follow,
        } = req;
        self.framed_blocking(ctx, Op::LOG, repo, move |call, inner| {
            let limit = limit.unwrap_or(DEFAULT_LOG_LIMIT);
            if limit == 0 || limit > MAX_LOG_LIMIT {
                return Err(ServiceError::invalid(format!(
                    "limit must be between 1 and {MAX_LOG_LIMIT}"
                )));
            }
            if follow
                && path
                    .as_deref()
                    .is_none_or(|p| p.trim_matches('/').is_empty())
            {
                return Err(ServiceError::invalid(
                    "follow needs `path`: the one file whose history to follow across renames",
                ));
            }
            let path = RepoPath::parse(path.as_deref().unwrap_or(""))?;
            let opened = call.open(inner)?;
            let cursor = cursor
                .as_deref()
                .map(|c| inner.store.log_cursor(opened.name(), &path, follow, c))
                .transpose()
                .map_err(cursor_error)?;
            let start = match &cursor {
                Some(cursor) => Some(cursor.start().to_string()),
                None => revision.clone(),
            };
            let lease = opened.lease(inner, start.as_deref())?;
            let (name, commit) = (lease.repo(), lease.commit());
            if let (Some(cursor), Some(given)) = (&cursor, &revision) {
                let given = opened.lease(inner, Some(given))?;
                if given.commit() != cursor.start() {
                    return Err(ServiceError::invalid(
                        "the cursor belongs to a log of another commit: drop the cursor, or \
                         pass the revision of the first page",
                    ));
                }
            }
            let limits = gitstore::PageLimits {
                limit,
                walk: call.cost().walk,
                budget: call.budget(),
            };
            let (commits, next_cursor, partial) = if follow {
                let page = inner
                    .store
                    .log_follow_page(name, commit, &path, cursor.as_ref(), limits)
                    .map_err(|e| match e {
                        gitstore::Error::IsDirectory { path } => ServiceError::invalid(format!(
                            "`{path}` is a directory: follow takes one file; drop `follow` for \
                             the history of a directory"
                        )),
                        other => other.into(),
                    })?;
                let commits = page.commits.into_iter().map(followed).collect::<Vec<_>>();
                (commits, page.next_cursor, page.partial)
            } else {
                let page = inner
                    .store
                    .log_page(name, commit, &path, cursor.as_ref(), limits)?;
                let commits = page.commits.into_iter().map(entry).collect();
                (commits, page.next_cursor, page.partial)
            };
            Ok(LogAnswer {
                repo: name.to_string(),
                commit: commit.to_string(),
                path: path.to_string(),
                commits,
                next_cursor,
                follow,
                partial,
            })
        })
        .await
    }

    /// `commit`: one readable commit with its message, committer and the files it changed
    /// against its first parent (renames detected as `git show` does), inside the registered
    /// scope; the same access checks as `read`.
    pub async fn commit(
        &self,
        ctx: &CallContext,
        repo: String,
        revision: String,
    ) -> Result<CommitAnswer, ServiceError> {
        self.framed_blocking(ctx, Op::COMMIT, repo, move |call, inner| {
            let lease = call.lease(inner, Some(&revision))?;
            let (name, commit) = (lease.repo(), lease.commit());
            let details =
                inner
                    .store
                    .commit_files(name, commit, MAX_COMMIT_FILES, call.budget())?;
            let mut message = details.message;
            let message_truncated = message.len() > MAX_MESSAGE_BYTES;
            if message_truncated {
                message.truncate(message.floor_char_boundary(MAX_MESSAGE_BYTES));
            }
            Ok(CommitAnswer {
                repo: name.to_string(),
                entry: entry(details.summary),
                message,
                message_truncated,
                committer: details.committer,
                committer_email: details.committer_email,
                committer_date: date(details.committer_time),
                files: details
                    .files
                    .into_iter()
                    .map(|c| ChangedFile {
                        path: c.path,
                        old_path: c.old_path,
                        status: file_status(c.status),
                        added: c.lines.map(|(added, _)| added),
                        removed: c.lines.map(|(_, removed)| removed),
                    })
                    .collect(),
                total_files: details.total_files,
                renames_skipped: details.renames_skipped,
            })
        })
        .await
    }

    /// `diff`: git's unified diff between two readable commits, inside the registered scope,
    /// paged by file under the read budget; the same access checks as `read` for both sides.
    pub async fn diff(
        &self,
        ctx: &CallContext,
        req: DiffRequest,
    ) -> Result<DiffAnswer, ServiceError> {
        let DiffRequest {
            repo,
            base,
            head,
            path,
            cursor,
        } = req;
        self.framed_blocking(ctx, Op::DIFF, repo, move |call, inner| {
            // One access check, a lease on each side.
            let opened = call.open(inner)?;
            let base_lease = opened.lease(inner, Some(&base))?;
            let head_lease = opened.lease(inner, Some(&head))?;
            let (name, base, head) = (opened.name(), base_lease.commit(), head_lease.commit());
            let skip = match &cursor {
                None => 0,
                Some(cursor) => {
                    let bad = || {
                        ServiceError::invalid(
                            "invalid cursor: pass the `next_cursor` of the previous diff page \
                             with the same base and head",
                        )
                    };
                    let mut parts = cursor.split('.');
                    let (Some(b), Some(h), Some(n), None) =
                        (parts.next(), parts.next(), parts.next(), parts.next())
                    else {
                        return Err(bad());
                    };
                    if b != base.as_str() || h != head.as_str() {
                        return Err(bad());
                    }
                    n.parse().map_err(|_| bad())?
                }
            };
            let path = RepoPath::parse(path.as_deref().unwrap_or(""))?;
            // The call's budget is checked between files (issue 42).
            let page = inner.store.diff_within(
                name,
                base,
                head,
                &path,
                skip,
                inner.config.read_budget,
                call.budget(),
            )?;
            Ok(DiffAnswer {
                repo: name.to_string(),
                base: base.to_string(),
                head: head.to_string(),
                path: path.to_string(),
                files: page
                    .files
                    .into_iter()
                    .map(|f| DiffFile {
                        path: f.path,
                        old_path: None,
                        status: status(f.kind),
                        text: f.text,
                        truncated: f.truncated,
                    })
                    .collect(),
                total_files: page.total_files,
                next_cursor: page.next_file.map(|n| format!("{base}.{head}.{n}")),
            })
        })
        .await
    }

    /// The merge base of two readable revisions (`git merge-base BASE HEAD`), what a
    /// comparison `BASE...HEAD` diffs from: the full SHAs of both sides and of the merge base
    /// (`None` when their histories share no commit). The same access checks as `diff`.
    pub async fn merge_base(
        &self,
        ctx: &CallContext,
        repo: String,
        base: String,
        head: String,
    ) -> Result<MergeBaseAnswer, ServiceError> {
        self.framed_blocking(ctx, Op::DIFF, repo, move |call, inner| {
            let opened = call.open(inner)?;
            let base_lease = opened.lease(inner, Some(&base))?;
            let head_lease = opened.lease(inner, Some(&head))?;
            let name = opened.name();
            let found = inner
                .store
                .merge_base(name, base_lease.commit(), head_lease.commit())?;
            Ok(MergeBaseAnswer {
                repo: name.to_string(),
                base: base_lease.commit().to_string(),
                head: head_lease.commit().to_string(),
                merge_base: found.map(|c| c.to_string()),
            })
        })
        .await
    }

    /// A commit's own diff, as `git show` prints it: against its first parent (a root
    /// commit against nothing), renames detected, inside the registered scope, paged by file
    /// under the read budget (`cursor`: the previous page's `next_cursor`); the same access
    /// checks as `read`. The answer's `base` is the first parent (`""` for a root commit).
    pub async fn commit_diff(
        &self,
        ctx: &CallContext,
        repo: String,
        revision: String,
        cursor: Option<String>,
    ) -> Result<DiffAnswer, ServiceError> {
        self.framed_blocking(ctx, Op::DIFF, repo, move |call, inner| {
            let lease = call.lease(inner, Some(&revision))?;
            let (name, commit) = (lease.repo(), lease.commit());
            let skip = match &cursor {
                None => 0,
                Some(cursor) => {
                    let bad = || {
                        ServiceError::invalid(
                            "invalid cursor: pass the `next_cursor` of the previous page of this \
                             commit's diff",
                        )
                    };
                    let (sha, n) = cursor.split_once('.').ok_or_else(bad)?;
                    if sha != commit.as_str() {
                        return Err(bad());
                    }
                    n.parse().map_err(|_| bad())?
                }
            };
            let page = inner.store.commit_diff_within(
                name,
                commit,
                skip,
                inner.config.read_budget,
                call.budget(),
            )?;
            Ok(DiffAnswer {
                repo: name.to_string(),
                base: page.parent.map(|p| p.to_string()).unwrap_or_default(),
                head: commit.to_string(),
                path: String::new(),
                files: page
                    .files
                    .into_iter()
                    .map(|f| DiffFile {
                        status: if f.old_path.is_some() {
                            "renamed"
                        } else {
                            status(f.kind)
                        },
                        path: f.path,
                        old_path: f.old_path,
                        text: f.text,
                        truncated: f.truncated,
                    })
                    .collect(),
                total_files: page.total_files,
                next_cursor: page.next_file.map(|n| format!("{commit}.{n}")),
            })
        })
        .await
    }

    /// `blame`: for a line range of a text file (the defaults of `read`, at most
    /// [`MAX_BLAME_LINES`]), the commit that last changed each line, as `git blame` finds it;
    /// the same checks as `read`.
    pub async fn blame(
        &self,
        ctx: &CallContext,
        req: BlameRequest,
    ) -> Result<BlameAnswer, ServiceError> {
        let BlameRequest {
            repo,
            revision,
            path,
            start_line,
            end_line,
        } = req;
        self.framed_blocking(ctx, Op::BLAME, repo, move |call, inner| {
            let lease = call.lease(inner, revision.as_deref())?;
            let (name, commit) = (lease.repo(), lease.commit());
            let path = RepoPath::parse(&path)?;
            let start = start_line.unwrap_or(1);
            if start == 0 {
                return Err(ServiceError::invalid(
                    "start_line is 1-based: use 1 or more",
                ));
            }
            let end = end_line
                .unwrap_or(start.saturating_add(inner.config.default_lines - 1))
                .min(start.saturating_add(MAX_BLAME_LINES - 1));
            if end < start {
                return Err(ServiceError::invalid(format!(
                    "end_line {end} is before start_line {start}"
                )));
            }
            let (ranges, total) =
                inner
                    .store
                    .blame_within(name, commit, &path, start, end, call.budget())?;
            if total > 0 && start > total {
                return Err(ServiceError::invalid(format!(
                    "start_line {start} is past the end of the file ({total} lines)"
                )));
            }
            let last = end.min(total);
            Ok(BlameAnswer {
                repo: name.to_string(),
                commit: commit.to_string(),
                path: path.to_string(),
                start_line: start,
                end_line: last,
                total_lines: total,
                ranges: ranges
                    .into_iter()
                    .map(|r| BlameLines {
                        start_line: r.start_line,
                        end_line: r.end_line,
                        commit: entry(r.commit),
                    })
                    .collect(),
                next_start_line: (last < total).then_some(last + 1),
            })
        })
        .await
    }
}
