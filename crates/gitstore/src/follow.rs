//! A file's history across renames, as `git log --follow -- <file>` lists it (issue 34).
//!
//! Git's `--follow` turns off history simplification: every commit reachable from the start
//! is walked in `git log`'s order (newest committer date first), and a commit is listed when
//! its diff against its parent touches the followed path; merges are never listed (`git log`
//! shows no diff for a merge), a root commit is listed when it has the path. The followed
//! path is one value for the whole walk, not one per line of history: when a commit adds the
//! path, git looks for where it came from, and from then on follows the old name. Where it
//! came from is found as `try_to_follow_renames` does: with copies found harder, so every
//! file of the parent is a candidate source (the same blob first, preferring a file the
//! commit deleted, then one with the same base name; else the most similar file by git's
//! measure, at least 50%); a deleted source makes a rename, a kept one a copy.

use crate::changes::{self, Leaf};
use crate::history::{
    Binding, Frontier, LogCursor, LogWalk, Pacer, PageLimits, Step, check_start, summary, tree_of,
};
use crate::objects::{odb, to_oid};
use crate::walk::{Chunks, MAX_SCORE, MIN_RENAME_SCORE, similarity};
use crate::{CommitId, CommitSummary, Error, GitStore, LogPage, RepoName, RepoPath};
use budget::{Budget, Ticker};
use gix::ObjectId;

/// How a listed commit changed the followed file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowStatus {
    /// The file appeared from nothing (git's `A`): its history ends here.
    Added,
    /// Its content or mode changed (`M`).
    Modified,
    /// It was deleted (`D`), on a line of history where the followed name went away.
    Deleted,
    /// It was renamed from `previous_path` (`R`).
    Renamed,
    /// It was copied from `previous_path`, which the commit kept (`C`).
    Copied,
}

/// One commit of a followed file's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowedCommit {
    pub commit: CommitSummary,
    /// The file's path in this commit (for a deletion: the path it was deleted from).
    pub path: String,
    /// For a rename or copy: the path in the parent it came from.
    pub previous_path: Option<String>,
    pub status: FollowStatus,
    /// For a rename or copy: git's similarity in percent (100 for the same blob).
    pub similarity: Option<u8>,
}

impl GitStore {
    /// One page of the history of the file `path` from `commit` (readable now), following
    /// renames and copies as `git log --follow -- <path>` does, from the start or from where
    /// `from` (a [`GitStore::log_cursor`] of this followed log) paused. Pages as
    /// [`GitStore::log_page`] does: the walk stops at `limits` and answers what it found,
    /// with a cursor carrying its frontier and the path the file had there. `path` must be a
    /// file inside the registered scope at `commit`; candidate sources of a rename are the
    /// files inside the scope.
    pub fn log_follow_page(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        from: Option<&LogCursor>,
        limits: PageLimits<'_>,
    ) -> Result<LogPage<FollowedCommit>, Error> {
        let scope = self.inner.registered_path(name)?;
        if !path.is_within(&scope) || path.is_root() {
            return Err(Error::OutsideScope {
                repo: name.clone(),
                path: path.to_string(),
                scope: scope.to_string(),
            });
        }
        check_start(commit, from)?;
        let reader = self.inner.blob_reader(name, commit)?;
        let key = cursor_key(self)?;
        let start = to_oid(commit)?;
        let (commits, next, partial, walked) = crate::handles::with_repo(&reader.repo, |repo| {
            follow(repo, start, path, &scope, from.map(|c| &c.frontier), limits)
        })?;
        let binding = Binding {
            repo: name.as_str(),
            path: path.as_str(),
            follow: true,
        };
        Ok(LogPage {
            commits,
            next_cursor: next
                .map(|frontier| crate::history::encode_cursor(&key, &binding, &start, &frontier))
                .transpose()?,
            partial,
            walked,
        })
    }
}

fn cursor_key(store: &GitStore) -> Result<[u8; 32], Error> {
    crate::history::cursor_key(store.inner.storage_root())
}

/// The leaf at `path` in `tree` (a file, symlink or submodule), `None` when there is none.
pub(crate) fn leaf_at(
    repo: &gix::Repository,
    tree: ObjectId,
    path: &str,
) -> Result<Option<Leaf>, Error> {
    let tree = repo.find_tree(tree).map_err(odb)?;
    let Some(entry) = tree.lookup_entry(path.split('/')).map_err(odb)? else {
        return Ok(None);
    };
    let mode = entry.mode();
    Ok(if mode.is_tree() {
        None
    } else if mode.is_commit() {
        Some(Leaf::Submodule(entry.object_id()))
    } else {
        Some(Leaf::Blob(entry.object_id(), mode.value()))
    })
}

/// One page of the followed history (see [`GitStore::log_follow_page`]): the commits, the
/// frontier to go on from (`None`: the end), whether the page stopped at its budget, and the
/// commits walked.
fn follow(
    repo: &gix::Repository,
    start: ObjectId,
    path: &RepoPath,
    scope: &RepoPath,
    from: Option<&Frontier>,
    limits: PageLimits<'_>,
) -> Result<FollowPage, Error> {
    let root = RepoPath::root();
    let (mut walk, mut current) = match from {
        Some(frontier) => (
            LogWalk::resume(repo, &root, frontier)?,
            frontier
                .followed
                .clone()
                .unwrap_or_else(|| path.to_string()),
        ),
        None => {
            let current = path.to_string();
            let start_tree = tree_of(repo, start)?;
            if leaf_at(repo, start_tree, &current)?.is_none() {
                let tree = repo.find_tree(start_tree).map_err(odb)?;
                let entry = tree.lookup_entry(path.segments()).map_err(odb)?;
                return Err(match entry {
                    Some(e) if e.mode().is_tree() => Error::IsDirectory { path: current },
                    _ => Error::NotFound {
                        path: current,
                        commit: crate::objects::to_commit_id(&start)?,
                    },
                });
            }
            (LogWalk::new(repo, start, &root)?, current)
        }
    };
    let mut pacer = Pacer::new(limits);
    let mut out = Vec::new();
    let mut partial = false;
    while out.len() < limits.limit && walk.waiting() > 0 {
        if pacer.wrap_up(walk.waiting())? {
            partial = true;
            break;
        }
        let Step::Listed(commit, parents) = walk.step()? else {
            continue;
        };
        if parents.len() > 1 {
            continue;
        }
        let tree = commit.tree_id().map_err(odb)?.detach();
        let parent_tree = match parents.first() {
            Some(parent) => Some(tree_of(repo, *parent)?),
            None => None,
        };
        let mine = leaf_at(repo, tree, &current)?;
        let theirs = match parent_tree {
            Some(t) => leaf_at(repo, t, &current)?,
            None => None,
        };
        if mine == theirs {
            continue;
        }
        let (status, previous, score) = match (theirs, mine, parent_tree) {
            (None, Some(leaf), Some(parent_tree)) => {
                let found = source_of(
                    repo,
                    parent_tree,
                    tree,
                    &current,
                    leaf,
                    scope,
                    true,
                    limits.budget,
                )?;
                match found {
                    Some((from, kept, score)) => {
                        let status = if kept {
                            FollowStatus::Copied
                        } else {
                            FollowStatus::Renamed
                        };
                        (status, Some(from), Some(score))
                    }
                    None => (FollowStatus::Added, None, None),
                }
            }
            (None, _, _) => (FollowStatus::Added, None, None),
            (Some(_), None, _) => (FollowStatus::Deleted, None, None),
            (Some(_), Some(_), _) => (FollowStatus::Modified, None, None),
        };
        let here = current.clone();
        if let Some(from) = &previous {
            current.clone_from(from);
        }
        out.push(FollowedCommit {
            commit: summary(&commit, &parents)?,
            path: here,
            previous_path: previous,
            status,
            similarity: score.map(|s| u8::try_from(s * 100 / MAX_SCORE).unwrap_or(100)),
        });
    }
    let next = (walk.waiting() > 0).then(|| Frontier {
        followed: Some(current),
        ..walk.frontier()
    });
    Ok((out, next, partial, pacer.walked))
}

/// A followed page: its commits, where it goes on, whether it stopped at its budget, the
/// commits walked.
type FollowPage = (Vec<FollowedCommit>, Option<Frontier>, bool, u64);

/// Every file (blob) of `tree` inside `scope`, with its path, in path order.
fn files(
    repo: &gix::Repository,
    tree: ObjectId,
    prefix: &str,
    scope: &RepoPath,
    out: &mut Vec<(String, ObjectId)>,
    ticker: &mut Ticker<'_>,
) -> Result<(), Error> {
    let tree = repo.find_tree(tree).map_err(odb)?;
    for entry in tree.iter() {
        ticker.tick()?;
        let entry = entry.map_err(odb)?;
        let path = format!("{prefix}{}", String::from_utf8_lossy(entry.filename()));
        let inside = RepoPath::parse(&path)
            .map(|p| p.is_within(scope) || scope.is_within(&p))
            .unwrap_or(false);
        if !inside {
            continue;
        }
        let mode = entry.mode();
        if mode.is_tree() {
            files(
                repo,
                entry.object_id(),
                &format!("{path}/"),
                scope,
                out,
                ticker,
            )?;
        } else if mode.is_blob() && RepoPath::parse(&path).is_ok_and(|p| p.is_within(scope)) {
            out.push((path, entry.oid().to_owned()));
        }
    }
    Ok(())
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Where the file `dest` (added at `path` in `tree`) came from in `parent_tree`: the source
/// path, whether the commit kept it (a copy), and the score in units of `MAX_SCORE`. With
/// `copies` every file of the parent is a candidate (`--follow`'s copies found harder);
/// without, only the files the commit deleted (`git blame`'s rename detection). Checks
/// `budget` every few files: a tree of many files is a long loop. Like git's
/// `diff.renameLimit`, content is compared only while candidates × 1 destination stay
/// within [`crate::walk::RENAME_LIMIT`]² (the same blob is found among any number).
#[allow(clippy::too_many_arguments)]
pub(crate) fn source_of(
    repo: &gix::Repository,
    parent_tree: ObjectId,
    tree: ObjectId,
    path: &str,
    dest: Leaf,
    scope: &RepoPath,
    copies: bool,
    budget: &Budget,
) -> Result<Option<(String, bool, u64)>, Error> {
    let Leaf::Blob(dest_id, _) = dest else {
        return Ok(None);
    };
    let mut ticker = Ticker::new(budget, 64);
    let mut candidates = Vec::new();
    files(repo, parent_tree, "", scope, &mut candidates, &mut ticker)?;
    let kept = |source: &str| -> Result<bool, Error> { Ok(leaf_at(repo, tree, source)?.is_some()) };
    if !copies {
        let mut deleted = Vec::new();
        for (source, id) in candidates {
            ticker.tick()?;
            if !kept(&source)? {
                deleted.push((source, id));
            }
        }
        candidates = deleted;
    }
    // The same blob: a deleted source before a kept one, then the same base name, then path
    // order (git's `find_identical_files` scoring).
    let mut best: Option<(u8, String, bool)> = None;
    for (source, id) in &candidates {
        if *id != dest_id {
            continue;
        }
        let is_kept = kept(source)?;
        let rank = u8::from(!is_kept) * 2 + u8::from(base_name(source) == base_name(path));
        if best.as_ref().is_none_or(|(r, _, _)| rank > *r) {
            best = Some((rank, source.clone(), is_kept));
        }
    }
    if let Some((_, source, is_kept)) = best {
        return Ok(Some((source, is_kept, MAX_SCORE)));
    }
    if candidates.len() > crate::walk::RENAME_LIMIT * crate::walk::RENAME_LIMIT {
        // Too many to compare by content for one destination (git's rename limit).
        return Ok(None);
    }
    let dest_data = changes::content(repo, Some(dest))?;
    if dest_data.is_empty() {
        return Ok(None);
    }
    let dest_size = dest_data.len() as u64;
    let dest_chunks = Chunks::of(&dest_data);
    // Best score, then the same base name, then path order (git's `score_compare`).
    let mut best: Option<(u64, bool, String)> = None;
    let mut ticker = Ticker::new(budget, 4);
    for (source, id) in &candidates {
        ticker.tick()?;
        // The size test first, from the object header: most files are never read.
        let size = repo.find_header(*id).map_err(odb)?.size();
        let (max, min) = (size.max(dest_size), size.min(dest_size));
        if size == 0 || max * (MAX_SCORE - MIN_RENAME_SCORE) < (max - min) * MAX_SCORE {
            continue;
        }
        let data = repo.find_object(*id).map_err(odb)?.detach().data;
        let score = similarity(&Chunks::of(&data), &dest_chunks);
        if score < MIN_RENAME_SCORE {
            continue;
        }
        let same_name = base_name(source) == base_name(path);
        let better = match &best {
            None => true,
            Some((s, n, _)) => score > *s || (score == *s && same_name && !n),
        };
        if better {
            best = Some((score, same_name, source.clone()));
        }
    }
    match best {
        Some((score, _, source)) => {
            let is_kept = kept(&source)?;
            Ok(Some((source, is_kept, score)))
        }
        None => Ok(None),
    }
}
