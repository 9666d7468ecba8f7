//! What one commit changed against its first parent (or, for a root commit, against
//! nothing): the files added, deleted and modified, with added and removed line counts as
//! `git diff --numstat --no-renames --minimal` gives them (git's default gives the same on
//! all but very large rewrites, see `linediff`). Trees are compared by object id, so
//! unchanged directories are never opened; blobs are diffed with the history tools' one line
//! diff (`linediff::line_diff`), so the counts are the `diff` tool's.
//! No rename detection.

use crate::linediff::{self, ExactBudget};
use crate::objects::odb;
use crate::{Error, RepoPath};
use budget::{Budget, Ticker};
use gix::ObjectId;
use gix::objs::tree::EntryKind;
use std::collections::BTreeMap;

/// Bytes git looks at for a NUL to call a blob binary.
const BINARY_PROBE: usize = 8000;

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Deleted,
    Modified,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Repository-relative path.
    pub path: String,
    pub kind: ChangeKind,
    /// Lines added and removed; `None` for a binary file (git's `-`).
    pub lines: Option<(u64, u64)>,
}

/// The non-tree side of an entry: what a line count is taken over.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaf {
    /// A blob (a file or a symlink) and its mode.
    Blob(ObjectId, u16),
    /// A submodule: git counts its one line `Subproject commit <sha>`.
    Submodule(ObjectId),
}

impl Leaf {
    pub(crate) fn id(self) -> ObjectId {
        match self {
            Leaf::Blob(id, _) | Leaf::Submodule(id) => id,
        }
    }

    /// The mode as git prints it (`100644`).
    pub(crate) fn mode(self) -> String {
        match self {
            Leaf::Blob(_, mode) => format!("{mode:o}"),
            Leaf::Submodule(_) => "160000".to_owned(),
        }
    }
}

/// The entries of a tree by name: id, kind and mode bits.
type Entries = BTreeMap<Vec<u8>, (ObjectId, EntryKind, u16)>;

/// The entries of `tree` (none for no tree).
fn entries(repo: &gix::Repository, tree: Option<ObjectId>) -> Result<Entries, Error> {
    let mut out = BTreeMap::new();
    let Some(tree) = tree else {
        return Ok(out);
    };
    let tree = repo.find_tree(tree).map_err(odb)?;
    for entry in tree.iter() {
        let entry = entry.map_err(odb)?;
        let kind = entry.mode().kind();
        out.insert(
            entry.filename().to_vec(),
            (entry.object_id(), kind, entry.mode().value()),
        );
    }
    Ok(out)
}

/// A changed path before its lines are counted.
pub(crate) struct Pending {
    pub(crate) path: String,
    pub(crate) kind: ChangeKind,
    pub(crate) old: Option<Leaf>,
    pub(crate) new: Option<Leaf>,
}

/// The changed paths between two root trees within `limit`, in git's order (by full path: a
/// directory sorts as its name plus `/`).
pub(crate) fn pending(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    limit: &RepoPath,
) -> Result<Vec<Pending>, Error> {
    pending_within(repo, old, new, limit, &Budget::unlimited())
}

/// [`pending`] under `budget`, checked every few entries: two trees of many changed files
/// are a long walk (O-9).
pub(crate) fn pending_within(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    limit: &RepoPath,
    budget: &Budget,
) -> Result<Vec<Pending>, Error> {
    let mut pending = Vec::new();
    let mut ticker = Ticker::new(budget, 256);
    walk(repo, old, new, "", limit, &mut pending, &mut ticker)?;
    pending.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(pending)
}

/// The changes between `old` and `new` (root trees) within `scope`, the first `max` of them
/// with line counts, and how many there are in all.
pub(crate) fn changes(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: ObjectId,
    scope: &RepoPath,
    max: usize,
) -> Result<(Vec<FileChange>, usize), Error> {
    let pending = pending(repo, old, Some(new), scope)?;
    let total = pending.len();
    let mut budget = ExactBudget::per_call();
    let counted = pending
        .into_iter()
        .take(max)
        .map(|p| {
            Ok(FileChange {
                lines: count(repo, p.old, p.new, &mut budget)?,
                path: p.path,
                kind: p.kind,
            })
        })
        .collect::<Result<_, Error>>()?;
    Ok((counted, total))
}

fn walk(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    prefix: &str,
    scope: &RepoPath,
    out: &mut Vec<Pending>,
    ticker: &mut Ticker<'_>,
) -> Result<(), Error> {
    let (before, after) = (entries(repo, old)?, entries(repo, new)?);
    let mut names: Vec<&Vec<u8>> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        ticker.tick()?;
        let path = format!("{prefix}{}", String::from_utf8_lossy(name));
        let inside = RepoPath::parse(&path)
            .map(|p| p.is_within(scope) || scope.is_within(&p))
            .unwrap_or(false);
        if !inside {
            continue;
        }
        let (b, a) = (before.get(name), after.get(name));
        if b == a {
            continue;
        }
        let tree_of = |e: Option<&(ObjectId, EntryKind, u16)>| {
            e.filter(|(_, kind, _)| *kind == EntryKind::Tree)
                .map(|(id, _, _)| *id)
        };
        let leaf_of = |e: Option<&(ObjectId, EntryKind, u16)>| {
            e.and_then(|(id, kind, mode)| match kind {
                EntryKind::Tree => None,
                EntryKind::Commit => Some(Leaf::Submodule(*id)),
                _ => Some(Leaf::Blob(*id, *mode)),
            })
        };
        // A directory on either side: its files, added or deleted as the other side says.
        if tree_of(b).is_some() || tree_of(a).is_some() {
            walk(
                repo,
                tree_of(b),
                tree_of(a),
                &format!("{path}/"),
                scope,
                out,
                ticker,
            )?;
        }
        let (old_leaf, new_leaf) = (leaf_of(b), leaf_of(a));
        if old_leaf.is_none() && new_leaf.is_none() {
            continue;
        }
        if !RepoPath::parse(&path).is_ok_and(|p| p.is_within(scope)) {
            continue;
        }
        let kind = match (old_leaf, new_leaf) {
            (None, Some(_)) => ChangeKind::Added,
            (Some(_), None) => ChangeKind::Deleted,
            _ => ChangeKind::Modified,
        };
        out.push(Pending {
            path,
            kind,
            old: old_leaf,
            new: new_leaf,
        });
    }
    Ok(())
}

/// What git diffs a leaf as: a blob's bytes, a submodule's one line, nothing for no leaf.
pub(crate) fn content(repo: &gix::Repository, leaf: Option<Leaf>) -> Result<Vec<u8>, Error> {
    Ok(match leaf {
        None => Vec::new(),
        Some(Leaf::Submodule(id)) => format!("Subproject commit {id}\n").into_bytes(),
        Some(Leaf::Blob(id, _)) => repo.find_object(id).map_err(odb)?.detach().data,
    })
}

/// Git's test: a NUL among the first 8000 bytes.
pub(crate) fn binary(data: &[u8]) -> bool {
    data[..data.len().min(BINARY_PROBE)].contains(&0)
}

/// (added, removed) lines between two leaves, `None` when either is binary.
fn count(
    repo: &gix::Repository,
    old: Option<Leaf>,
    new: Option<Leaf>,
    budget: &mut ExactBudget,
) -> Result<Option<(u64, u64)>, Error> {
    let (before, after) = (content(repo, old)?, content(repo, new)?);
    if binary(&before) || binary(&after) {
        return Ok(None);
    }
    let input = imara_diff::InternedInput::new(before.as_slice(), after.as_slice());
    let diff = linediff::line_diff(&input, budget);
    Ok(Some((
        u64::from(diff.count_additions()),
        u64::from(diff.count_removals()),
    )))
}

/// A commit with its whole message and what it changed against its first parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitDetails {
    pub summary: crate::CommitSummary,
    /// The whole message (repository data).
    pub message: String,
    /// Against the first parent (a root commit's files are all added), in path order: the
    /// first `max_files` asked for.
    pub changes: Vec<FileChange>,
    /// How many files changed in all (more than `changes` holds when the limit cut it).
    pub total_changes: usize,
}

/// [`CommitDetails`] of `id`, its changes limited to `scope`.
pub(crate) fn details(
    repo: &gix::Repository,
    id: ObjectId,
    scope: &RepoPath,
    max_files: usize,
) -> Result<CommitDetails, Error> {
    let commit = repo.find_commit(id).map_err(odb)?;
    let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
    let old = match parents.first() {
        Some(parent) => Some(
            repo.find_commit(*parent)
                .map_err(odb)?
                .tree_id()
                .map_err(odb)?
                .detach(),
        ),
        None => None,
    };
    let new = commit.tree_id().map_err(odb)?.detach();
    let (changes, total_changes) = changes(repo, old, new, scope, max_files)?;
    Ok(CommitDetails {
        summary: crate::history::summary(&commit, &parents)?,
        message: String::from_utf8_lossy(commit.message_raw_sloppy()).into_owned(),
        changes,
        total_changes,
    })
}
