//! `search` with `type: "commit"` or `type: "diff"` (S-9): commit messages and diff lines of
//! one repository's history, like `git log --grep` and `git log -G`.
//!
//! The history index (`search::HistoryIndexes`, beside the code index under
//! `<data>/index/<owner>/<name>/history/`) is brought to the default branch's head after each
//! sync ([`Service::index_history`], from `background.rs`): only commits not indexed yet are
//! read from Git, at most [`crate::ServiceConfig::history_depth`] commits deep. A search at
//! another revision walks that revision's history from Git, takes the indexed commits from
//! the index and reads the few others from Git for that call ([`search::MAX_LIVE_COMMITS`]).
//!
//! Answer: one repository group whose `commit` is the tip searched (full SHA). Commit hits
//! carry `commit`, `author`, `date` (author date, RFC 3339), `subject` and in `snippet` the
//! first message line that matched; their `path` is empty and `line` absent. Diff hits carry
//! the same commit fields plus `path` (the new path of an added line, the old path of a
//! removed one), `line` (its number in the commit, or in the first parent for a removed
//! line), `snippet` (the line) and `change`. Pages follow `git log`'s order, newest first;
//! the cursor is bound to the tip, so later pages stay on it when the branch moves.

use crate::frame::RepoCall;
use crate::{
    DEFAULT_SEARCH_LIMIT, Inner, LineChange, SearchAnswer, SearchHit, SearchKind, SearchRepoHits,
    SearchRequest, SearchStatsAnswer, Service, ServiceError,
};
use gitstore::{CommitId, GitStore, LineSide, RepoName};

/// The history of one repository as the search crate sees it, read from the store's mirror.
struct GitHistory<'a> {
    store: &'a GitStore,
    name: RepoName,
    /// A readable commit whose ancestors are read (retention is checked on it).
    tip: CommitId,
    /// The call's budget: a walk of a revision's history stops with it (O-9); maintenance
    /// walks without one.
    budget: budget::Budget,
}

fn commit_id(sha: &str) -> Result<CommitId, String> {
    CommitId::parse(sha).ok_or_else(|| format!("`{sha}` is not a full commit SHA"))
}

impl search::HistorySource for GitHistory<'_> {
    fn walk(&self, tip: &str, max: usize) -> Result<Vec<String>, String> {
        let tip = commit_id(tip)?;
        Ok(self
            .store
            .history_walk_within(&self.name, &tip, max, &self.budget)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|c| c.to_string())
            .collect())
    }

    fn commit(&self, commit: &str) -> Result<search::HistoryRecord, String> {
        let commit = commit_id(commit)?;
        let (head, changes) = self
            .store
            .history_commit(&self.name, &self.tip, &commit)
            .map_err(|e| e.to_string())?;
        Ok(search::HistoryRecord {
            commit: head.id.to_string(),
            parents: head.parents.len(),
            author: head.author,
            author_time: head.author_time,
            author_offset: head.author_offset,
            committer_time: head.committer_time,
            message: head.message,
            changed: changes.changed,
            lines: changes
                .lines
                .into_iter()
                .map(|l| search::HistoryLine {
                    path: l.path,
                    added: l.side == LineSide::Added,
                    line: l.line,
                    text: l.text,
                })
                .collect(),
        })
    }
}

impl From<search::HistoryError> for ServiceError {
    fn from(error: search::HistoryError) -> Self {
        if error.is_invalid_request() {
            ServiceError::invalid(error.to_string())
        } else if matches!(error, search::HistoryError::NotIndexed { .. }) {
            ServiceError::unavailable(error.to_string())
        } else {
            ServiceError::internal(error.to_string())
        }
    }
}

impl Inner {
    pub(crate) fn history_indexes(&self) -> search::HistoryIndexes {
        search::HistoryIndexes::new(self.store.storage_root().join("index"))
    }
}

impl Service {
    /// Brings the history index of `repo` (S-9) to its default branch's head: the commits
    /// not indexed yet (within `history_depth`) are read from the mirror and added; a no-op
    /// when it is current. Maintenance, not a caller's operation.
    pub async fn index_history(
        &self,
        repo: String,
    ) -> Result<search::HistoryBuildStats, ServiceError> {
        self.blocking(move |inner| {
            let name = RepoName::parse(&repo)?;
            let lease = inner.store.lease_revision(&name, None)?;
            let tip = lease.commit().clone();
            let source = GitHistory {
                store: &inner.store,
                name: name.clone(),
                tip: tip.clone(),
                budget: budget::Budget::unlimited(),
            };
            let mut logged = 0u64;
            let stats = inner.history_indexes().update(
                name.as_str(),
                tip.as_str(),
                inner.config.history_depth,
                &source,
                &mut |done, total| {
                    // A line per tenth: a first build of a long history takes minutes.
                    if total >= 1000 && done * 10 / total > logged {
                        logged = done * 10 / total;
                        tracing::info!(repo = %name, done, total, "indexing history");
                    }
                },
            )?;
            if !stats.skipped_same {
                tracing::info!(
                    repo = %name,
                    commits = stats.commits,
                    added = stats.added,
                    lines = stats.lines,
                    ms = stats.elapsed.as_millis() as u64,
                    "history indexed"
                );
            }
            drop(lease);
            Ok(stats)
        })
        .await
    }

    /// A commit or diff search over `call`'s repository (which the caller named).
    pub(crate) async fn search_history(
        &self,
        call: RepoCall<Option<String>>,
        req: SearchRequest,
    ) -> Result<SearchAnswer, ServiceError> {
        let kind = match req.kind {
            SearchKind::Commit => search::HistoryKind::Commit,
            SearchKind::Diff => search::HistoryKind::Diff,
            SearchKind::Code => {
                return Err(ServiceError::internal(
                    "a code search reached the history search",
                ));
            }
        };
        if req.lang.as_deref().is_some_and(|l| !l.trim().is_empty()) {
            return Err(ServiceError::invalid(format!(
                "lang filters code search only; for type \"{}\" use path (a directory, file or glob) instead",
                req.kind.name()
            )));
        }
        let mut call = call;
        call.admit(&self.inner, crate::Class::Search).await?;
        self.blocking(move |inner| {
            // Access to the named repository: refused exactly like an unknown one.
            // Its code index does not matter here.
            let opened = call.open_named(inner)?;
            // The tip: the cursor's (its pages stay on one history), else the revision, else
            // the default branch's head; leased for the whole search (G-8).
            let cursor = req.cursor.as_deref().filter(|c| !c.is_empty());
            let revision = match cursor {
                Some(cursor) => Some(search::history_cursor_tip(cursor)?),
                None => req.revision.clone(),
            };
            let lease =
                crate::frame::on_blocking_pool(|| opened.lease(inner, revision.as_deref()))?;
            let name = opened.name().clone();
            let tip = lease.commit().clone();
            let request = search::HistoryRequest {
                kind,
                query: req.query,
                regex: req.regex,
                case_sensitive: req.case_sensitive,
                tip: tip.to_string(),
                author: req.author,
                since: req.since,
                until: req.until,
                path: req.path,
                limit: req.limit.unwrap_or(DEFAULT_SEARCH_LIMIT),
                cursor: req.cursor,
                count: req.count,
                depth: inner.config.history_depth,
            };
            let source = GitHistory {
                store: &inner.store,
                name: name.clone(),
                tip: tip.clone(),
                budget: call.budget().clone(),
            };
            let results = inner
                .history_indexes()
                .search_history(name.as_str(), &request, &source)
                .map_err(|error| match call.budget().check() {
                    // The walk of the revision's history stopped at the call's budget: the
                    // frame says so with how to narrow the call.
                    Err(_) => ServiceError {
                        kind: crate::ErrorKind::TimedOut,
                        message: String::new(),
                    },
                    Ok(()) => error.into(),
                })?;
            drop(lease);
            Ok(answer(name.to_string(), results))
        })
        .await
    }
}

fn answer(repo: String, results: search::HistoryResults) -> SearchAnswer {
    let hits = results
        .hits
        .into_iter()
        .map(|hit| SearchHit {
            path: hit.path.unwrap_or_default(),
            line: hit.line.map(u64::from),
            snippet: Some(hit.snippet),
            marks: hit.marks,
            subject_marks: hit.subject_marks,
            commit: Some(hit.commit),
            author: Some(hit.author),
            date: Some(hit.date),
            subject: Some(hit.subject),
            change: hit.added.map(|added| {
                if added {
                    LineChange::Added
                } else {
                    LineChange::Removed
                }
            }),
            ..SearchHit::default()
        })
        .collect();
    SearchAnswer {
        repos: vec![SearchRepoHits {
            repo,
            commit: results.tip,
            hits,
        }],
        next_cursor: results.next_cursor,
        not_indexed: Vec::new(),
        not_searched: Vec::new(),
        stats: SearchStatsAnswer {
            candidate_files: results.candidates,
            files_verified: results.verified,
            documents: results.commits,
            total_hits: results.total_hits,
            truncated: !results.total_exact,
            cached: false,
            elapsed_us: u64::try_from(results.elapsed.as_micros()).unwrap_or(u64::MAX),
        },
        query_rewrite: None,
    }
}
