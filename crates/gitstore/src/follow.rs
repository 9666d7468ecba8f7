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
use crate::history::{summary, tree_of};
use crate::objects::{odb, to_oid};
use crate::walk::{Chunks, MAX_SCORE, MIN_RENAME_SCORE, similarity};
use crate::{CommitId, CommitSummary, Error, GitStore, RepoName, RepoPath};
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
    /// The history of the file `path` from `commit` (readable now), following renames and
    /// copies as `git log --follow -- <path>` does: skips `skip` listed commits, answers at
    /// most `limit` and whether more follow. `path` must be a file inside the registered
    /// scope at `commit`; candidate sources of a rename are the files inside the scope.
    pub fn log_follow(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        skip: usize,
        limit: usize,
    ) -> Result<(Vec<FollowedCommit>, bool), Error> {
        let scope = self.inner.registered_path(name)?;
        if !path.is_within(&scope) || path.is_root() {
            return Err(Error::OutsideScope {
                repo: name.clone(),
                path: path.to_string(),
                scope: scope.to_string(),
            });
        }
        let reader = self.inner.blob_reader(name, commit)?;
        let start = to_oid(commit)?;
        crate::handles::with_repo(&reader.repo, |repo| {
            follow(repo, start, path, &scope, skip, limit)
        })
    }
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

fn follow(
    repo: &gix::Repository,
    start: ObjectId,
    path: &RepoPath,
    scope: &RepoPath,
    skip: usize,
    limit: usize,
) -> Result<(Vec<FollowedCommit>, bool), Error> {
    let start_tree = tree_of(repo, start)?;
    let mut current = path.to_string();
    if leaf_at(repo, start_tree, &current)?.is_none() {
        let tree = repo.find_tree(start_tree).map_err(odb)?;
        let entry = tree.lookup_entry(path.segments()).map_err(odb)?;
        return Err(match entry {
            Some(e) if e.mode().is_tree() => Error::IsDirectory {
                path: current.clone(),
            },
            _ => Error::NotFound {
                path: current.clone(),
                commit: crate::objects::to_commit_id(&start)?,
            },
        });
    }
    let root = RepoPath::parse("")?;
    let mut out = Vec::new();
    let mut listed = 0usize;
    for walked in crate::history::LogWalk::new(repo, start, &root)? {
        let (commit, parents) = walked?;
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
                match source_of(repo, parent_tree, tree, &current, leaf, scope, true)? {
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
        listed += 1;
        if listed <= skip {
            continue;
        }
        if out.len() == limit {
            return Ok((out, true));
        }
        out.push(FollowedCommit {
            commit: summary(&commit, &parents)?,
            path: here,
            previous_path: previous,
            status,
            similarity: score.map(|s| u8::try_from(s * 100 / MAX_SCORE).unwrap_or(100)),
        });
    }
    Ok((out, false))
}

/// Every file (blob) of `tree` inside `scope`, with its path, in path order.
fn files(
    repo: &gix::Repository,
    tree: ObjectId,
    prefix: &str,
    scope: &RepoPath,
    out: &mut Vec<(String, ObjectId)>,
) -> Result<(), Error> {
    let tree = repo.find_tree(tree).map_err(odb)?;
    for entry in tree.iter() {
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
            files(repo, entry.object_id(), &format!("{path}/"), scope, out)?;
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
/// without, only the files the commit deleted (`git blame`'s rename detection).
pub(crate) fn source_of(
    repo: &gix::Repository,
    parent_tree: ObjectId,
    tree: ObjectId,
    path: &str,
    dest: Leaf,
    scope: &RepoPath,
    copies: bool,
) -> Result<Option<(String, bool, u64)>, Error> {
    let Leaf::Blob(dest_id, _) = dest else {
        return Ok(None);
    };
    let mut candidates = Vec::new();
    files(repo, parent_tree, "", scope, &mut candidates)?;
    let kept = |source: &str| -> Result<bool, Error> { Ok(leaf_at(repo, tree, source)?.is_some()) };
    if !copies {
        let mut deleted = Vec::new();
        for (source, id) in candidates {
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
    let dest_data = changes::content(repo, Some(dest))?;
    if dest_data.is_empty() {
        return Ok(None);
    }
    let dest_size = dest_data.len() as u64;
    let dest_chunks = Chunks::of(&dest_data);
    // Best score, then the same base name, then path order (git's `score_compare`).
    let mut best: Option<(u64, bool, String)> = None;
    for (source, id) in &candidates {
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
