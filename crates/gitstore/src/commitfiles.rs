//! What one commit changed against its first parent with renames detected, as
//! `git show --numstat` lists it (issue 34): git's default rename detection (an added and a
//! deleted file with the same blob, else at least 50% similar, `walk::pair_renames`), a
//! renamed file counted as the diff of its two blobs, files in git's order (by the new path).
//! The counts are `changes`' (the history tools' one line diff).

use crate::changes::{self, Leaf};
use crate::history::summary;
use crate::linediff::{self, ExactBudget};
use crate::objects::{odb, to_oid};
use crate::walk::pair_renames_within;
use crate::{CommitId, CommitSummary, Error, GitStore, RepoName, RepoPath};
use budget::Budget;
use gix::ObjectId;

/// How a file changed, renames included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    Added,
    Deleted,
    Modified,
    /// Moved from [`CommitFile::old_path`], perhaps with edits.
    Renamed,
}

/// One changed file of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitFile {
    /// The path in the commit (for a deletion: the path deleted).
    pub path: String,
    /// For a rename: the path in the parent.
    pub old_path: Option<String>,
    pub status: FileStatus,
    /// Lines added and removed; `None` for a binary file (git's `-`).
    pub lines: Option<(u64, u64)>,
}

/// A commit with its whole message and its changed files, renames detected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitFiles {
    pub summary: CommitSummary,
    /// The whole message (repository data).
    pub message: String,
    /// Committer name, email and date (seconds since the Unix epoch).
    pub committer: String,
    pub committer_email: String,
    pub committer_time: i64,
    /// The first `max_files` changed files, in git's order.
    pub files: Vec<CommitFile>,
    /// How many files changed in all (a rename counts once).
    pub total_files: usize,
    /// Inexact rename detection was skipped: too many added and deleted files (git's rename
    /// limit), so a renamed and edited file shows as deleted and added.
    pub renames_skipped: bool,
}

impl GitStore {
    /// `commit` (readable now) with its message, committer and the files it changed against
    /// its first parent inside the registered scope, renames detected as `git show` does;
    /// line counts for the first `max_files`. Under `budget` (O-9): the tree walk, rename
    /// detection and the line counts stop once it runs out ([`Error::Stopped`]).
    pub fn commit_files(
        &self,
        name: &RepoName,
        commit: &CommitId,
        max_files: usize,
        budget: &Budget,
    ) -> Result<CommitFiles, Error> {
        let scope = self.inner.registered_path(name)?;
        let reader = self.inner.blob_reader(name, commit)?;
        let id = to_oid(commit)?;
        crate::handles::with_repo(&reader.repo, |repo| {
            let commit = repo.find_commit(id).map_err(odb)?;
            let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
            let (pairs, renames_skipped) =
                changed_pairs_within(repo, &commit, parents.first().copied(), &scope, budget)?;
            let total_files = pairs.len();
            let mut exact = ExactBudget::per_call();
            let mut files = Vec::new();
            for (old, new) in pairs.into_iter().take(max_files) {
                budget.check()?;
                let lines = count(
                    repo,
                    old.as_ref().map(|(_, l)| *l),
                    new.as_ref().map(|(_, l)| *l),
                    &mut exact,
                )?;
                let file = match (old, new) {
                    (Some((from, _)), Some((to, _))) if from != to => CommitFile {
                        path: to,
                        old_path: Some(from),
                        status: FileStatus::Renamed,
                        lines,
                    },
                    (Some(_), Some((to, _))) => CommitFile {
                        path: to,
                        old_path: None,
                        status: FileStatus::Modified,
                        lines,
                    },
                    (None, Some((to, _))) => CommitFile {
                        path: to,
                        old_path: None,
                        status: FileStatus::Added,
                        lines,
                    },
                    (Some((from, _)), None) => CommitFile {
                        path: from,
                        old_path: None,
                        status: FileStatus::Deleted,
                        lines,
                    },
                    (None, None) => continue,
                };
                files.push(file);
            }
            let committer = commit.committer().map_err(odb)?;
            Ok(CommitFiles {
                summary: summary(&commit, &parents)?,
                message: String::from_utf8_lossy(commit.message_raw_sloppy()).into_owned(),
                committer: committer.name.to_string(),
                committer_email: committer.email.to_string(),
                committer_time: committer.time().map_err(odb)?.seconds,
                files,
                total_files,
                renames_skipped,
            })
        })
    }
}

/// (added, removed) lines between two leaves, `None` when either is binary.
fn count(
    repo: &gix::Repository,
    old: Option<Leaf>,
    new: Option<Leaf>,
    budget: &mut ExactBudget,
) -> Result<Option<(u64, u64)>, Error> {
    let (before, after) = (changes::content(repo, old)?, changes::content(repo, new)?);
    if changes::binary(&before) || changes::binary(&after) {
        return Ok(None);
    }
    let input = imara_diff::InternedInput::new(before.as_slice(), after.as_slice());
    let diff = linediff::line_diff(&input, budget);
    Ok(Some((
        u64::from(diff.count_additions()),
        u64::from(diff.count_removals()),
    )))
}

/// What `commit` changed against `parent` (a root commit: against nothing) inside `scope`,
/// renames paired as `git show` pairs them, in the order git lists them (by the new path, a
/// deleted file by its old one).
pub(crate) fn changed_pairs(
    repo: &gix::Repository,
    commit: &gix::Commit<'_>,
    parent: Option<ObjectId>,
    scope: &RepoPath,
) -> Result<Vec<crate::walk::Pair>, Error> {
    Ok(changed_pairs_within(repo, commit, parent, scope, &Budget::unlimited())?.0)
}

/// [`changed_pairs`] under `budget` (the tree walk and rename detection check it), and
/// whether inexact rename detection was skipped (too many candidates, git's rename limit).
pub(crate) fn changed_pairs_within(
    repo: &gix::Repository,
    commit: &gix::Commit<'_>,
    parent: Option<ObjectId>,
    scope: &RepoPath,
    budget: &Budget,
) -> Result<(Vec<crate::walk::Pair>, bool), Error> {
    let old = match parent {
        Some(parent) => Some(crate::history::tree_of(repo, parent)?),
        None => None,
    };
    let new = commit.tree_id().map_err(odb)?.detach();
    let pending = changes::pending_within(repo, old, Some(new), scope, budget)?;
    let (mut pairs, skipped) = pair_renames_within(repo, pending, budget)?;
    pairs.sort_by_key(|p| {
        p.1.as_ref()
            .or(p.0.as_ref())
            .map(|(path, _)| path.clone())
            .unwrap_or_default()
    });
    Ok((pairs, skipped))
}
