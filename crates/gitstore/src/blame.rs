//! Blame: for each line of a file at a commit, the commit that last changed it, found the way
//! `git blame` does. Lines start as suspects of the commit itself; at each commit, a diff
//! against each parent in turn (`linediff::line_diff`) passes the lines that parent already had
//! on to it, and the lines no parent had stay with the commit. A parent whose file is the very
//! same blob takes every line at once. Only the asked-for lines are followed.

use crate::objects::odb;
use crate::store::to_commit_id;
use crate::{CommitSummary, Error, RepoPath};
use gix::ObjectId;
use imara_diff::InternedInput;
use std::collections::{BTreeMap, BinaryHeap};

/// Lines `[start, end]` (1-based, inclusive) of the file that one commit last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlameRange {
    pub start_line: u64,
    pub end_line: u64,
    /// The commit that last changed them.
    pub commit: CommitSummary,
}

/// The blob at `path` in `commit`'s tree, if it is a file there.
fn blob_at(
    repo: &gix::Repository,
    commit: ObjectId,
    path: &RepoPath,
) -> Result<Option<ObjectId>, Error> {
    let commit = repo.find_commit(commit).map_err(odb)?;
    let tree = commit.tree().map_err(odb)?;
    let entry = tree.lookup_entry(path.segments()).map_err(odb)?;
    Ok(entry.filter(|e| e.mode().is_blob()).map(|e| e.object_id()))
}

/// For each line of `new`, its line in `old` when the diff keeps it.
fn kept_lines(old: &str, new: &str) -> Vec<Option<u32>> {
    let input = InternedInput::new(old, new);
    let diff = crate::linediff::line_diff(&input);
    let mut map = vec![None; input.after.len()];
    let (mut o, mut n) = (0u32, 0u32);
    for hunk in diff.hunks() {
        while n < hunk.after.start {
            map[n as usize] = Some(o);
            o += 1;
            n += 1;
        }
        o = hunk.before.end;
        n = hunk.after.end;
    }
    while (n as usize) < map.len() {
        map[n as usize] = Some(o);
        o += 1;
        n += 1;
    }
    map
}

fn text(repo: &gix::Repository, blob: ObjectId) -> Result<String, Error> {
    let data = repo.find_object(blob).map_err(odb)?.detach().data;
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// Blames lines `start..=end` (1-based, within the file) of the file `path` at `commit`.
pub(crate) fn blame(
    repo: &gix::Repository,
    commit: ObjectId,
    path: &RepoPath,
    start: u64,
    end: u64,
) -> Result<Vec<BlameRange>, Error> {
    let Some(blob) = blob_at(repo, commit, path)? else {
        return Err(Error::NotFound {
            path: path.to_string(),
            commit: to_commit_id(&commit)?,
        });
    };
    // Suspects by commit: (line in that commit's file → line of the blamed file), both 0-based.
    let mut suspects: BTreeMap<ObjectId, (ObjectId, Vec<(u32, u32)>)> = BTreeMap::new();
    let first = u32::try_from(start.saturating_sub(1)).unwrap_or(u32::MAX);
    let last = u32::try_from(end.saturating_sub(1)).unwrap_or(u32::MAX);
    suspects.insert(commit, (blob, (first..=last).map(|l| (l, l)).collect()));
    let time = |id: ObjectId| -> Result<i64, Error> {
        Ok(repo
            .find_commit(id)
            .map_err(odb)?
            .time()
            .map_err(odb)?
            .seconds)
    };
    let mut queue = BinaryHeap::from([(time(commit)?, commit)]);
    let mut owner: BTreeMap<u32, ObjectId> = BTreeMap::new();
    while let Some((_, id)) = queue.pop() {
        let Some((blob, mut lines)) = suspects.remove(&id) else {
            continue;
        };
        let parents: Vec<ObjectId> = repo
            .find_commit(id)
            .map_err(odb)?
            .parent_ids()
            .map(|p| p.detach())
            .collect();
        let mut content = None;
        for parent in parents {
            if lines.is_empty() {
                break;
            }
            let Some(parent_blob) = blob_at(repo, parent, path)? else {
                continue;
            };
            let passed: Vec<(u32, u32)> = if parent_blob == blob {
                std::mem::take(&mut lines)
            } else {
                let mine = match &content {
                    Some(text) => text,
                    None => content.insert(text(repo, blob)?),
                };
                let map = kept_lines(&text(repo, parent_blob)?, mine);
                let mut passed = Vec::new();
                lines.retain(
                    |&(here, target)| match map.get(here as usize).copied().flatten() {
                        Some(there) => {
                            passed.push((there, target));
                            false
                        }
                        None => true,
                    },
                );
                passed
            };
            if passed.is_empty() {
                continue;
            }
            match suspects.get_mut(&parent) {
                Some((_, existing)) => existing.extend(passed),
                None => {
                    suspects.insert(parent, (parent_blob, passed));
                    queue.push((time(parent)?, parent));
                }
            }
        }
        for (_, target) in lines {
            owner.insert(target, id);
        }
    }
    let mut summaries: BTreeMap<ObjectId, CommitSummary> = BTreeMap::new();
    let mut ranges: Vec<BlameRange> = Vec::new();
    for (line, id) in owner {
        let line = u64::from(line) + 1;
        match ranges.last_mut() {
            Some(range)
                if range.commit.commit == to_commit_id(&id)? && range.end_line + 1 == line =>
            {
                range.end_line = line;
            }
            _ => {
                let commit = match summaries.get(&id) {
                    Some(summary) => summary.clone(),
                    None => {
                        let found = repo.find_commit(id).map_err(odb)?;
                        let parents: Vec<ObjectId> =
                            found.parent_ids().map(|p| p.detach()).collect();
                        let summary = crate::history::summary(&found, &parents)?;
                        summaries.insert(id, summary.clone());
                        summary
                    }
                };
                ranges.push(BlameRange {
                    start_line: line,
                    end_line: line,
                    commit,
                });
            }
        }
    }
    Ok(ranges)
}
