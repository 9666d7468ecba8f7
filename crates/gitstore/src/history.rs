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

/// A commit waiting in the walk: newest committer date first, then the one queued first
/// (git's `commit_list_insert_by_date` keeps insertion order among equal dates).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Queued(i64, std::cmp::Reverse<u64>, ObjectId);

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

/// The tree of commit `id`.
pub(crate) fn tree_of(repo: &gix::Repository, id: ObjectId) -> Result<ObjectId, Error> {
    Ok(repo
        .find_commit(id)
        .map_err(odb)?
        .tree_id()
        .map_err(odb)?
        .detach())
}

/// The commits `git log [-- path]` lists from `start`, in its default order, each with its
/// parents: one walk for the `log` tool and the history index (`walk.rs`).
pub(crate) struct LogWalk<'r> {
    repo: &'r gix::Repository,
    path: &'r RepoPath,
    queue: BinaryHeap<Queued>,
    seen: HashSet<ObjectId>,
    queued: u64,
}

impl<'r> LogWalk<'r> {
    /// A walk from `start`, limited to commits that changed `path` (the root: every commit).
    pub(crate) fn new(
        repo: &'r gix::Repository,
        start: ObjectId,
        path: &'r RepoPath,
    ) -> Result<Self, Error> {
        let mut walk = Self {
            repo,
            path,
            queue: BinaryHeap::new(),
            seen: HashSet::new(),
            queued: 0,
        };
        walk.push(start)?;
        Ok(walk)
    }

    fn push(&mut self, id: ObjectId) -> Result<(), Error> {
        if self.seen.insert(id) {
            let time = self
                .repo
                .find_commit(id)
                .map_err(odb)?
                .time()
                .map_err(odb)?
                .seconds;
            self.queued += 1;
            self.queue
                .push(Queued(time, std::cmp::Reverse(self.queued), id));
        }
        Ok(())
    }

    /// The next listed commit and its parents, or `None` at the end.
    fn next_listed(&mut self) -> Result<Option<(gix::Commit<'r>, Vec<ObjectId>)>, Error> {
        while let Some(Queued(_, _, id)) = self.queue.pop() {
            let commit = self.repo.find_commit(id).map_err(odb)?;
            let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
            let (listed, follow) = if self.path.is_root() {
                (true, parents.clone())
            } else {
                let tree = commit.tree_id().map_err(odb)?.detach();
                let mine = entry_at(self.repo, tree, self.path)?;
                let mut same = None;
                for parent in &parents {
                    if entry_at(self.repo, tree_of(self.repo, *parent)?, self.path)? == mine {
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
            for parent in follow {
                self.push(parent)?;
            }
            if listed {
                return Ok(Some((commit, parents)));
            }
        }
        Ok(None)
    }
}

impl<'r> Iterator for LogWalk<'r> {
    type Item = Result<(gix::Commit<'r>, Vec<ObjectId>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_listed().transpose()
    }
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
    let mut out = Vec::new();
    for listed in LogWalk::new(repo, start, path)?.skip(skip) {
        let (commit, parents) = listed?;
        if out.len() == limit {
            return Ok((out, true));
        }
        out.push(summary(&commit, &parents)?);
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
