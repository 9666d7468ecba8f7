//! Commit history: the commits reachable from a readable commit, newest first by committer
//! date, as `git log` lists them; limited to a path, with git's default history
//! simplification (a commit is listed when its entry at the path differs from every parent's;
//! at a merge whose entry equals one parent's, only that parent is followed). Reads objects
//! with `gix`; no `git` subprocess.

use crate::objects::{odb, to_commit_id};
use crate::{CommitId, Error, RepoPath};
use gix::ObjectId;
use std::collections::{BinaryHeap, HashSet};

/// One commit as a log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitSummary {
    /// Full SHA.
    pub commit: CommitId,
    /// Parents, full SHAs, in order.
    pub parents: Vec<CommitId>,
    /// Author name and email, as recorded (repository data).
    pub author: String,
    pub author_email: String,
    /// When it was authored: seconds since the Unix epoch.
    pub author_time: i64,
    /// The first line of the message (repository data), without line breaks.
    pub subject: String,
}

/// A commit waiting in the walk, ordered by committer time (newest first), then by id so the
/// order is total.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Queued(i64, ObjectId);

/// The entry id and mode at `path` in `tree`, `None` when there is none (the root is the
/// tree itself).
fn entry_at(
    repo: &gix::Repository,
    tree: ObjectId,
    path: &RepoPath,
) -> Result<Option<(ObjectId, u32)>, Error> {
    if path.is_root() {
        return Ok(Some((tree, 0o040000)));
    }
    let tree = repo.find_tree(tree).map_err(odb)?;
    let entry = tree.lookup_entry(path.segments()).map_err(odb)?;
    Ok(entry.map(|e| (e.object_id(), u32::from(e.mode().value()))))
}

/// Walks from `start`: answers up to `limit` commits after skipping `skip` listed ones, and
/// whether more follow. `path` (repository-relative; the root for every commit) limits the
/// log to commits that changed it.
pub(crate) fn log(
    repo: &gix::Repository,
    start: ObjectId,
    path: &RepoPath,
    skip: usize,
    limit: usize,
) -> Result<(Vec<CommitSummary>, bool), Error> {
    let mut queue = BinaryHeap::new();
    let mut seen = HashSet::new();
    let time_of = |id: ObjectId| -> Result<i64, Error> {
        let commit = repo.find_commit(id).map_err(odb)?;
        Ok(commit.time().map_err(odb)?.seconds)
    };
    queue.push(Queued(time_of(start)?, start));
    seen.insert(start);
    let mut listed = 0usize;
    let mut out = Vec::new();
    while let Some(Queued(_, id)) = queue.pop() {
        let commit = repo.find_commit(id).map_err(odb)?;
        let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
        let (changed, follow) = if path.is_root() {
            (true, parents.clone())
        } else {
            let mine = entry_at(repo, commit.tree_id().map_err(odb)?.detach(), path)?;
            let mut same = None;
            for parent in &parents {
                let tree = repo
                    .find_commit(*parent)
                    .map_err(odb)?
                    .tree_id()
                    .map_err(odb)?;
                if entry_at(repo, tree.detach(), path)? == mine {
                    same = Some(*parent);
                    break;
                }
            }
            match same {
                // TREESAME to this parent: not listed, and its history is that parent's.
                Some(parent) => (false, vec![parent]),
                // A root commit changed the path if it has it.
                None => (!parents.is_empty() || mine.is_some(), parents.clone()),
            }
        };
        if changed {
            if listed >= skip {
                if out.len() == limit {
                    return Ok((out, true));
                }
                out.push(summary(&commit, &parents)?);
            }
            listed += 1;
        }
        for parent in follow {
            if seen.insert(parent) {
                queue.push(Queued(time_of(parent)?, parent));
            }
        }
    }
    Ok((out, false))
}

pub(crate) fn summary(
    commit: &gix::Commit<'_>,
    parents: &[ObjectId],
) -> Result<CommitSummary, Error> {
    let author = commit.author().map_err(odb)?;
    // As git's `%s`: the message's first paragraph, its lines joined by spaces.
    let message = String::from_utf8_lossy(commit.message_raw_sloppy());
    let subject = message
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    Ok(CommitSummary {
        commit: to_commit_id(&commit.id)?,
        parents: parents.iter().map(to_commit_id).collect::<Result<_, _>>()?,
        author: author.name.to_string(),
        author_email: author.email.to_string(),
        author_time: author.time().map_err(odb)?.seconds,
        subject,
    })
}
