//! What one commit changed against its first parent (or, for a root commit, against
//! nothing): the files added, deleted and modified, with added and removed line counts as
//! `git diff --numstat --no-renames` gives them. Trees are compared by object id, so
//! unchanged directories are never opened; blobs are diffed with `imara-diff` (Myers, as git).
//! No rename detection.

use crate::objects::odb;
use crate::{Error, RepoPath};
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
enum Leaf {
    Blob(ObjectId),
    /// A submodule: git counts its one line `Subproject commit <sha>`.
    Submodule(ObjectId),
}

/// The entries of a tree by name: id and kind.
type Entries = BTreeMap<Vec<u8>, (ObjectId, EntryKind)>;

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
        out.insert(entry.filename().to_vec(), (entry.object_id(), kind));
    }
    Ok(out)
}

/// A changed path before its lines are counted.
struct Pending {
    path: String,
    kind: ChangeKind,
    old: Option<Leaf>,
    new: Option<Leaf>,
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
    let mut pending = Vec::new();
    walk(repo, old, Some(new), "", scope, &mut pending)?;
    // Git's order: by full path (a directory sorts as its name plus `/`).
    pending.sort_by(|a, b| a.path.cmp(&b.path));
    let total = pending.len();
    let counted = pending
        .into_iter()
        .take(max)
        .map(|p| {
            Ok(FileChange {
                lines: count(repo, p.old, p.new)?,
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
) -> Result<(), Error> {
    let (before, after) = (entries(repo, old)?, entries(repo, new)?);
    let mut names: Vec<&Vec<u8>> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
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
        let tree_of = |e: Option<&(ObjectId, EntryKind)>| {
            e.filter(|(_, kind)| *kind == EntryKind::Tree)
                .map(|(id, _)| *id)
        };
        let leaf_of = |e: Option<&(ObjectId, EntryKind)>| {
            e.and_then(|(id, kind)| match kind {
                EntryKind::Tree => None,
                EntryKind::Commit => Some(Leaf::Submodule(*id)),
                _ => Some(Leaf::Blob(*id)),
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

fn content(repo: &gix::Repository, leaf: Option<Leaf>) -> Result<Vec<u8>, Error> {
    Ok(match leaf {
        None => Vec::new(),
        Some(Leaf::Submodule(id)) => format!("Subproject commit {id}\n").into_bytes(),
        Some(Leaf::Blob(id)) => repo.find_object(id).map_err(odb)?.detach().data,
    })
}

fn binary(data: &[u8]) -> bool {
    data[..data.len().min(BINARY_PROBE)].contains(&0)
}

/// (added, removed) lines between two leaves, `None` when either is binary.
fn count(
    repo: &gix::Repository,
    old: Option<Leaf>,
    new: Option<Leaf>,
) -> Result<Option<(u64, u64)>, Error> {
    let (before, after) = (content(repo, old)?, content(repo, new)?);
    if binary(&before) || binary(&after) {
        return Ok(None);
    }
    let input = imara_diff::InternedInput::new(before.as_slice(), after.as_slice());
    let diff = imara_diff::Diff::compute(imara_diff::Algorithm::Myers, &input);
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
