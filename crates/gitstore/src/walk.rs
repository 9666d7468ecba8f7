//! What a history index needs from Git (S-9): the commits reachable from a tip in `git log`'s
//! default order, and for one commit its message, its author and what it changed: the paths
//! changed against each parent and the added and removed lines against its first parent,
//! as `git log -G` sees them (renames detected, binary files skipped).
//! The lines come from a port of git's own diff (`gitdiff`: xdiff's Myers with its
//! preprocessing and group sliding), so they are the lines `-G` tests, at the line numbers
//! `git show` prints (indent heuristic on, which moves a group only among equal lines).
//!
//! Order: git's walk takes the commit with the newest committer date from its queue, and
//! among equal dates the one queued first (`commit_list_insert_by_date` keeps insertion
//! order among equals); parents are queued in parent order. With a registered scope the
//! walk is `git log -- <scope>`'s, with git's default history simplification (as
//! `history.rs`).
//!
//! Renames (git's default for `log`): an added and a deleted path with the same blob are a
//! rename; else pairs at least 50% similar by git's measure (bytes of equal chunks, a chunk
//! ending at a newline or after 64 bytes, over the larger size), best score first, each path
//! used once, tried only while added × deleted stays within git's rename limit (1000²). A
//! renamed file's lines are the diff of its two blobs: removed lines under the old path,
//! added under the new one.

use crate::changes::{self, Leaf, Pending};
use crate::gitdiff::{self, Slide};
use crate::history::tree_of;
use crate::objects::{odb, to_commit_id, to_oid};
use crate::{CommitId, Error, GitStore, RepoName, RepoPath};
use budget::{Budget, Ticker};
use gix::ObjectId;
use std::collections::HashMap;

/// Git's `diff.renameLimit` default: inexact renames are looked for only while
/// added × deleted ≤ this squared.
pub(crate) const RENAME_LIMIT: usize = 1000;
/// Git's `MAX_SCORE` and default minimum rename score (50%).
pub(crate) const MAX_SCORE: u64 = 60_000;
pub(crate) const MIN_RENAME_SCORE: u64 = 30_000;

/// One commit as a history index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryCommit {
    /// Full SHA.
    pub id: CommitId,
    /// Parents, in order.
    pub parents: Vec<CommitId>,
    /// `Name <email>` as recorded (repository data).
    pub author: String,
    /// Author date: seconds since the Unix epoch, and the recorded offset east of UTC in
    /// seconds.
    pub author_time: i64,
    pub author_offset: i32,
    /// Committer date, seconds since the Unix epoch (what `git log` orders and
    /// `--since`/`--until` filter by).
    pub committer_time: i64,
    /// The whole message (repository data, lossily decoded).
    pub message: String,
}

/// The side of a diff line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineSide {
    /// A `+` line; its number is in the commit's file.
    Added,
    /// A `-` line; its number is in the first parent's file.
    Removed,
}

/// One added or removed line of a commit against its first parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    /// The new path for an added line, the old path for a removed one.
    pub path: String,
    pub side: LineSide,
    /// 1-based line number on its side.
    pub line: u32,
    /// The line without its line feed (lossily decoded).
    pub text: String,
}

/// What a commit changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommitChanges {
    /// For each parent in order (one entry, against nothing, for a root commit): the paths
    /// (files, symlinks, submodules) that differ, inside the registered scope.
    pub changed: Vec<Vec<String>>,
    /// Added and removed lines against the first parent, file by file in path order, removed
    /// lines of a hunk before its added ones. Empty for a merge (`git log -G` shows no diff
    /// for merges) and for binary files.
    pub lines: Vec<DiffLine>,
}

impl GitStore {
    /// The commits reachable from `tip` (which must be readable now) in `git log`'s default
    /// order, at most `max`; with a registered scope only those `git log -- <scope>` lists.
    pub fn history_walk(
        &self,
        name: &RepoName,
        tip: &CommitId,
        max: usize,
    ) -> Result<Vec<CommitId>, Error> {
        self.history_walk_within(name, tip, max, &budget::Budget::unlimited())
    }

    /// [`GitStore::history_walk`] that stops with [`Error::Stopped`] when `budget` does: a
    /// search at a revision walks that revision's history for its call (O-9).
    pub fn history_walk_within(
        &self,
        name: &RepoName,
        tip: &CommitId,
        max: usize,
        budget: &budget::Budget,
    ) -> Result<Vec<CommitId>, Error> {
        let reader = self.inner.blob_reader(name, tip)?;
        let scope = self.inner.registered_path(name)?;
        let start = to_oid(tip)?;
        crate::handles::with_repo(&reader.repo, |repo| walk(repo, start, &scope, max, budget))
    }

    /// `commit` (an ancestor of the readable `tip`) with what it changed, inside the
    /// registered scope.
    pub fn history_commit(
        &self,
        name: &RepoName,
        tip: &CommitId,
        commit: &CommitId,
    ) -> Result<(HistoryCommit, CommitChanges), Error> {
        let reader = self.inner.blob_reader(name, tip)?;
        let scope = self.inner.registered_path(name)?;
        let id = to_oid(commit)?;
        crate::handles::with_repo(&reader.repo, |repo| commit_changes(repo, id, &scope))
    }
}

fn walk(
    repo: &gix::Repository,
    start: ObjectId,
    scope: &RepoPath,
    max: usize,
    budget: &budget::Budget,
) -> Result<Vec<CommitId>, Error> {
    let mut ticker = budget::Ticker::new(budget, 256);
    crate::history::LogWalk::new(repo, start, scope)?
        .take(max)
        .map(|listed| {
            ticker.tick()?;
            to_commit_id(&listed?.0.id)
        })
        .collect()
}

fn commit_changes(
    repo: &gix::Repository,
    id: ObjectId,
    scope: &RepoPath,
) -> Result<(HistoryCommit, CommitChanges), Error> {
    let commit = repo.find_commit(id).map_err(odb)?;
    let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
    let author = commit.author().map_err(odb)?;
    let author_time = author.time().map_err(odb)?;
    let head = HistoryCommit {
        id: to_commit_id(&id)?,
        parents: parents.iter().map(to_commit_id).collect::<Result<_, _>>()?,
        author: format!("{} <{}>", author.name, author.email),
        author_time: author_time.seconds,
        author_offset: author_time.offset,
        committer_time: commit.time().map_err(odb)?.seconds,
        message: String::from_utf8_lossy(commit.message_raw_sloppy()).into_owned(),
    };
    let new_tree = commit.tree_id().map_err(odb)?.detach();
    let mut changes = CommitChanges::default();
    let olds: Vec<Option<ObjectId>> = if parents.is_empty() {
        vec![None]
    } else {
        parents
            .iter()
            .map(|p| tree_of(repo, *p).map(Some))
            .collect::<Result<_, _>>()?
    };
    for (index, old) in olds.into_iter().enumerate() {
        let pending = changes::pending(repo, old, Some(new_tree), scope)?;
        changes
            .changed
            .push(pending.iter().map(|p| p.path.clone()).collect());
        if index == 0 && parents.len() <= 1 {
            changes.lines = lines_of(repo, pending)?;
        }
    }
    Ok((head, changes))
}

/// One file pair whose lines are diffed: (old path, old leaf), (new path, new leaf).
pub(crate) type Pair = (Option<(String, Leaf)>, Option<(String, Leaf)>);

/// The added and removed lines of `pending` (one commit against its first parent), renames
/// paired first.
fn lines_of(repo: &gix::Repository, pending: Vec<Pending>) -> Result<Vec<DiffLine>, Error> {
    let mut pairs = pair_renames(repo, pending)?;
    // Git orders a diff's files by the new path (the old one for a deletion).
    pairs.sort_by(|a, b| {
        let key = |p: &Pair| {
            p.1.as_ref()
                .or(p.0.as_ref())
                .map(|(path, _)| path.clone())
                .unwrap_or_default()
        };
        key(a).cmp(&key(b))
    });
    let mut out = Vec::new();
    for (old, new) in pairs {
        let before = changes::content(repo, old.as_ref().map(|(_, leaf)| *leaf))?;
        let after = changes::content(repo, new.as_ref().map(|(_, leaf)| *leaf))?;
        if before == after || changes::binary(&before) || changes::binary(&after) {
            continue;
        }
        // Lines are compared as bytes, as git does (decoding first could make two different
        // lines equal), and only the kept text is decoded.
        let input = imara_diff::InternedInput::new(before.as_slice(), after.as_slice());
        let text = |token: imara_diff::Token| {
            let line: &[u8] = input.interner[token];
            String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line)).into_owned()
        };
        let old_path = old.map(|(path, _)| path).unwrap_or_default();
        let new_path = new.map(|(path, _)| path).unwrap_or_default();
        for change in gitdiff::diff(&input, Slide::IndentHeuristic) {
            for i in change.before {
                out.push(DiffLine {
                    path: old_path.clone(),
                    side: LineSide::Removed,
                    line: i + 1,
                    text: text(input.before[i as usize]),
                });
            }
            for i in change.after {
                out.push(DiffLine {
                    path: new_path.clone(),
                    side: LineSide::Added,
                    line: i + 1,
                    text: text(input.after[i as usize]),
                });
            }
        }
    }
    Ok(out)
}

/// Git's rename detection over one commit's added and deleted paths (see the module doc),
/// without a budget.
pub(crate) fn pair_renames(
    repo: &gix::Repository,
    pending: Vec<Pending>,
) -> Result<Vec<Pair>, Error> {
    Ok(pair_renames_within(repo, pending, &Budget::unlimited())?.0)
}

/// Git's rename detection under `budget` (checked while blobs are read and the similarity
/// matrix is filled, O-9): the pairs, and whether inexact detection was skipped because
/// the commit has too many candidates (git's rename limit, added × deleted over
/// [`RENAME_LIMIT`]², or more than [`RENAME_BYTES`] of candidate blobs); exact renames are
/// paired either way.
pub(crate) fn pair_renames_within(
    repo: &gix::Repository,
    pending: Vec<Pending>,
    budget: &Budget,
) -> Result<(Vec<Pair>, bool), Error> {
    let mut pairs: Vec<Pair> = Vec::new();
    let mut added: Vec<(String, Leaf)> = Vec::new();
    let mut deleted: Vec<(String, Leaf)> = Vec::new();
    for p in pending {
        match (p.old, p.new) {
            (None, Some(new)) => added.push((p.path, new)),
            (Some(old), None) => deleted.push((p.path, old)),
            (old, new) => pairs.push((
                old.map(|l| (p.path.clone(), l)),
                new.map(|l| (p.path.clone(), l)),
            )),
        }
    }
    if added.is_empty() || deleted.is_empty() {
        pairs.extend(deleted.into_iter().map(|d| (Some(d), None)));
        pairs.extend(added.into_iter().map(|a| (None, Some(a))));
        return Ok((pairs, false));
    }
    let is_blob = |leaf: &Leaf| matches!(leaf, Leaf::Blob(..));
    let mut used_src = vec![false; deleted.len()];
    let mut used_dst = vec![false; added.len()];
    // Exact renames: the same blob.
    let mut by_blob: HashMap<ObjectId, Vec<usize>> = HashMap::new();
    for (i, (_, leaf)) in deleted.iter().enumerate() {
        if is_blob(leaf) {
            by_blob.entry(leaf.id()).or_default().push(i);
        }
    }
    let mut matched: Vec<(usize, usize)> = Vec::new();
    for (j, (_, leaf)) in added.iter().enumerate() {
        if !is_blob(leaf) {
            continue;
        }
        if let Some(i) = by_blob
            .get(&leaf.id())
            .and_then(|c| c.iter().copied().find(|&i| !used_src[i]))
        {
            used_src[i] = true;
            used_dst[j] = true;
            matched.push((i, j));
        }
    }
    let sources: Vec<usize> = (0..deleted.len())
        .filter(|&i| !used_src[i] && is_blob(&deleted[i].1))
        .collect();
    let dests: Vec<usize> = (0..added.len())
        .filter(|&j| !used_dst[j] && is_blob(&added[j].1))
        .collect();
    let mut skipped = false;
    if !sources.is_empty() && !dests.is_empty() {
        match similar_pairs(repo, &sources, &deleted, &dests, &added, budget)? {
            Some(scored) => {
                for (_, si, dj) in scored {
                    let (i, j) = (sources[si], dests[dj]);
                    if used_src[i] || used_dst[j] {
                        continue;
                    }
                    used_src[i] = true;
                    used_dst[j] = true;
                    matched.push((i, j));
                }
            }
            None => skipped = true,
        }
    }
    for (i, j) in matched {
        pairs.push((Some(deleted[i].clone()), Some(added[j].clone())));
    }
    for (i, d) in deleted.into_iter().enumerate() {
        if !used_src[i] {
            pairs.push((Some(d), None));
        }
    }
    for (j, a) in added.into_iter().enumerate() {
        if !used_dst[j] {
            pairs.push((None, Some(a)));
        }
    }
    Ok((pairs, skipped))
}

/// Candidate blobs a commit's inexact rename detection reads at most, in bytes: past it
/// the detection is skipped as past git's rename limit (a vendoring commit must not make a
/// call hold gigabytes).
pub(crate) const RENAME_BYTES: u64 = 256 << 20;

/// A similarity score with the indexes of its source and destination.
type Scored = (u64, usize, usize);

/// The (score, source, destination) pairs at least [`MIN_RENAME_SCORE`] similar, best
/// first (among equal scores the earlier destination, then source); `None` when there are
/// too many candidates to compare.
fn similar_pairs(
    repo: &gix::Repository,
    sources: &[usize],
    deleted: &[(String, Leaf)],
    dests: &[usize],
    added: &[(String, Leaf)],
    budget: &Budget,
) -> Result<Option<Vec<Scored>>, Error> {
    if sources.len() * dests.len() > RENAME_LIMIT * RENAME_LIMIT {
        return Ok(None);
    }
    let mut ticker = Ticker::new(budget, 64);
    // Sizes from the object headers first: a blob no counterpart could be half as large as
    // (or twice) is never read, and the bytes to read are known before any is.
    let size =
        |leaf: Leaf| -> Result<u64, Error> { Ok(repo.find_header(leaf.id()).map_err(odb)?.size()) };
    let mut src_sizes = Vec::with_capacity(sources.len());
    for &i in sources {
        ticker.tick()?;
        src_sizes.push(size(deleted[i].1)?);
    }
    let mut dst_sizes = Vec::with_capacity(dests.len());
    for &j in dests {
        ticker.tick()?;
        dst_sizes.push(size(added[j].1)?);
    }
    let fits = |mine: u64, others: &[u64]| {
        mine > 0
            && others.iter().any(|&other| {
                let (max, min) = (mine.max(other), mine.min(other));
                max * (MAX_SCORE - MIN_RENAME_SCORE) >= (max - min) * MAX_SCORE
            })
    };
    let wanted_src: Vec<bool> = src_sizes.iter().map(|&s| fits(s, &dst_sizes)).collect();
    let wanted_dst: Vec<bool> = dst_sizes.iter().map(|&s| fits(s, &src_sizes)).collect();
    let bytes: u64 = src_sizes
        .iter()
        .zip(&wanted_src)
        .chain(dst_sizes.iter().zip(&wanted_dst))
        .filter(|(_, wanted)| **wanted)
        .map(|(size, _)| size)
        .sum();
    if bytes > RENAME_BYTES {
        return Ok(None);
    }
    let mut load = |leaf: Leaf, wanted: bool| -> Result<Option<Chunks>, Error> {
        ticker.tick()?;
        if !wanted {
            return Ok(None);
        }
        let data = changes::content(repo, Some(leaf))?;
        Ok((!data.is_empty()).then(|| Chunks::of(&data)))
    };
    let mut src_chunks: Vec<Option<Chunks>> = Vec::with_capacity(sources.len());
    for (&i, &wanted) in sources.iter().zip(&wanted_src) {
        src_chunks.push(load(deleted[i].1, wanted)?);
    }
    let mut dst_chunks: Vec<Option<Chunks>> = Vec::with_capacity(dests.len());
    for (&j, &wanted) in dests.iter().zip(&wanted_dst) {
        dst_chunks.push(load(added[j].1, wanted)?);
    }
    let mut ticker = Ticker::new(budget, 256);
    let mut scored: Vec<Scored> = Vec::new();
    for (dj, dst) in dst_chunks.iter().enumerate() {
        let Some(dst) = dst else { continue };
        for (si, src) in src_chunks.iter().enumerate() {
            let Some(src) = src else { continue };
            ticker.tick()?;
            let score = similarity(src, dst);
            if score >= MIN_RENAME_SCORE {
                scored.push((score, si, dj));
            }
        }
    }
    // Best first; among equal scores the earlier destination, then source (stable).
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)).then(a.1.cmp(&b.1)));
    Ok(Some(scored))
}

/// A blob as git's rename detection sees it: bytes per chunk hash, and its size.
pub(crate) struct Chunks {
    /// (hash, bytes) sorted by hash.
    counts: Vec<(u64, u64)>,
    size: u64,
}

impl Chunks {
    /// Chunks end at a newline or after 64 bytes; in a text a CR before LF is left out (as
    /// git's `hash_chars`).
    pub(crate) fn of(data: &[u8]) -> Chunks {
        let text = !changes::binary(data);
        let mut map: HashMap<u64, u64> = HashMap::new();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut len = 0u64;
        let mut i = 0;
        while i < data.len() {
            let c = data[i];
            i += 1;
            if text && c == b'\r' && data.get(i) == Some(&b'\n') {
                continue;
            }
            hash = (hash ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3);
            len += 1;
            if len < 64 && c != b'\n' {
                continue;
            }
            *map.entry(hash).or_default() += len;
            hash = 0xcbf2_9ce4_8422_2325;
            len = 0;
        }
        if len > 0 {
            *map.entry(hash).or_default() += len;
        }
        let mut counts: Vec<(u64, u64)> = map.into_iter().collect();
        counts.sort_unstable();
        Chunks {
            counts,
            size: data.len() as u64,
        }
    }
}

/// Git's `estimate_similarity`: bytes of `src` found in `dst`, over the larger size, in
/// units of [`MAX_SCORE`]; 0 when the sizes differ too much to reach the minimum.
pub(crate) fn similarity(src: &Chunks, dst: &Chunks) -> u64 {
    let max = src.size.max(dst.size);
    let min = src.size.min(dst.size);
    if max == 0 || max * (MAX_SCORE - MIN_RENAME_SCORE) < (max - min) * MAX_SCORE {
        return 0;
    }
    let (mut a, mut b, mut copied) = (0, 0, 0u64);
    while a < src.counts.len() && b < dst.counts.len() {
        let (ha, ca) = src.counts[a];
        let (hb, cb) = dst.counts[b];
        match ha.cmp(&hb) {
            std::cmp::Ordering::Less => a += 1,
            std::cmp::Ordering::Greater => b += 1,
            std::cmp::Ordering::Equal => {
                copied += ca.min(cb);
                a += 1;
                b += 1;
            }
        }
    }
    copied * MAX_SCORE / max
}
