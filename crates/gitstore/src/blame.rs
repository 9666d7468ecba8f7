//! Blame: for each line of a file at a commit, the commit that last changed it, found the way
//! `git blame` does. Lines start as suspects of the commit itself; at each commit, a diff
//! against each parent in turn (`linediff::line_diff`) passes the lines that parent already had
//! on to it, and the lines no parent had stay with the commit. A parent whose file is the very
//! same blob takes every line at once. Only the asked-for lines are followed. The walk
//! checks the call's budget at every commit (O-9): a blame that runs out of time stops.

use crate::linediff::{self, ExactBudget};
use crate::objects::{odb, to_commit_id, to_oid};
use crate::{CommitId, CommitSummary, Error, GitStore, RepoName, RepoPath};
use budget::Budget;
use gix::ObjectId;
use imara_diff::InternedInput;
use std::collections::{BTreeMap, BinaryHeap};
use std::rc::Rc;

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
fn kept_lines(old: &str, new: &str, budget: &mut ExactBudget) -> Vec<Option<u32>> {
    let input = InternedInput::new(old, new);
    let diff = linediff::line_diff(&input, budget);
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

fn text(repo: &gix::Repository, blob: ObjectId) -> Result<Rc<str>, Error> {
    let data = repo.find_object(blob).map_err(odb)?.detach().data;
    // Valid UTF-8 (the usual case) is taken as it is: validating is much cheaper than the
    // lossy decoder's scan and copy.
    Ok(match String::from_utf8(data) {
        Ok(text) => text.into(),
        Err(invalid) => String::from_utf8_lossy(invalid.as_bytes()).into(),
    })
}

/// A commit whose lines are still to be blamed: the file's path there (it changes across
/// renames), its blob of the file, that blob's text once read (a parent's text is read for
/// the diff anyway, and is kept for when the parent's own turn comes), and its suspect lines.
struct Suspect {
    path: RepoPath,
    blob: ObjectId,
    text: Option<Rc<str>>,
    /// (line in this commit's file → line of the blamed file), both 0-based.
    lines: Vec<(u32, u32)>,
}

impl GitStore {
    /// [`GitStore::blame`] under `budget` (O-9): the walk looks at it at every commit (and
    /// rename detection every few files), and answers [`Error::Stopped`] once its hard
    /// deadline passed or its caller went away: no blame outlives its call.
    pub fn blame_within(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        start_line: u64,
        end_line: u64,
        budget: &Budget,
    ) -> Result<(Vec<BlameRange>, u64), Error> {
        // Scope, retention and the text checks of a read; the text gives the line count.
        let total = self.inner.read_text(name, commit, path)?.line_count();
        let end = end_line.min(total);
        if total == 0 || start_line > end {
            return Ok((Vec::new(), total));
        }
        budget.check()?;
        let reader = self.inner.blob_reader(name, commit)?;
        let id = to_oid(commit)?;
        let ranges = crate::handles::with_repo(&reader.repo, |repo| {
            blame_within(repo, id, path, start_line.max(1), end, budget)
        })?;
        Ok((ranges, total))
    }
}

/// Blames lines `start..=end` (1-based, within the file) of the file `path` at `commit`,
/// without a budget (in-process callers).
pub(crate) fn blame(
    repo: &gix::Repository,
    commit: ObjectId,
    path: &RepoPath,
    start: u64,
    end: u64,
) -> Result<Vec<BlameRange>, Error> {
    blame_within(repo, commit, path, start, end, &Budget::unlimited())
}

/// [`blame`] under `budget`, checked at every commit of the walk.
pub(crate) fn blame_within(
    repo: &gix::Repository,
    commit: ObjectId,
    path: &RepoPath,
    start: u64,
    end: u64,
    budget: &Budget,
) -> Result<Vec<BlameRange>, Error> {
    let Some(blob) = blob_at(repo, commit, path)? else {
        return Err(Error::NotFound {
            path: path.to_string(),
            commit: to_commit_id(&commit)?,
        });
    };
    let first = u32::try_from(start.saturating_sub(1)).unwrap_or(u32::MAX);
    let last = u32::try_from(end.saturating_sub(1)).unwrap_or(u32::MAX);
    let start = Suspect {
        path: path.clone(),
        blob,
        text: None,
        lines: (first..=last).map(|l| (l, l)).collect(),
    };
    let owner = owners(repo, commit, start, budget)?;
    ranges(repo, owner)
}

fn commit_time(repo: &gix::Repository, id: ObjectId) -> Result<i64, Error> {
    Ok(repo
        .find_commit(id)
        .map_err(odb)?
        .time()
        .map_err(odb)?
        .seconds)
}

/// Follows the lines of `start`, the suspect at `commit`, back through history, newest
/// commit first: for each blamed line (0-based), the commit that last changed it.
fn owners(
    repo: &gix::Repository,
    commit: ObjectId,
    start: Suspect,
    budget: &Budget,
) -> Result<BTreeMap<u32, ObjectId>, Error> {
    let mut suspects: BTreeMap<ObjectId, Suspect> = BTreeMap::from([(commit, start)]);
    let mut queue = BinaryHeap::from([(commit_time(repo, commit)?, commit)]);
    let mut owner: BTreeMap<u32, ObjectId> = BTreeMap::new();
    let mut exact = ExactBudget::per_call();
    while let Some((_, id)) = queue.pop() {
        budget.check()?;
        let Some(mut suspect) = suspects.remove(&id) else {
            continue;
        };
        let parents: Vec<ObjectId> = repo
            .find_commit(id)
            .map_err(odb)?
            .parent_ids()
            .map(|p| p.detach())
            .collect();
        for parent in parents {
            if suspect.lines.is_empty() {
                break;
            }
            let (parent_path, parent_blob) = match blob_at(repo, parent, &suspect.path)? {
                Some(blob) => (suspect.path.clone(), blob),
                // Not in the parent: renamed from a file the commit deleted, as `git blame`
                // finds it (git's rename detection for this one file).
                None => match renamed_from(repo, parent, id, &suspect, budget)? {
                    Some(found) => found,
                    None => continue,
                },
            };
            let mut passed = pass_lines(repo, &mut suspect, parent_blob, &mut exact)?;
            passed.path = parent_path;
            if passed.lines.is_empty() {
                continue;
            }
            match suspects.get_mut(&parent) {
                Some(existing) => existing.lines.extend(passed.lines),
                None => {
                    suspects.insert(parent, passed);
                    queue.push((commit_time(repo, parent)?, parent));
                }
            }
        }
        for (_, target) in suspect.lines {
            owner.insert(target, id);
        }
    }
    Ok(owner)
}

/// Takes out of `suspect` the lines a parent whose file is `parent_blob` already had: the
/// parent as a suspect of those lines, with its text when it was read for the diff.
fn pass_lines(
    repo: &gix::Repository,
    suspect: &mut Suspect,
    parent_blob: ObjectId,
    exact: &mut ExactBudget,
) -> Result<Suspect, Error> {
    if parent_blob == suspect.blob {
        return Ok(Suspect {
            path: suspect.path.clone(),
            blob: parent_blob,
            text: suspect.text.clone(),
            lines: std::mem::take(&mut suspect.lines),
        });
    }
    let mine = match &suspect.text {
        Some(text) => text,
        None => suspect.text.insert(text(repo, suspect.blob)?),
    };
    let theirs = text(repo, parent_blob)?;
    let map = kept_lines(&theirs, mine, exact);
    let mut passed = Vec::new();
    suspect.lines.retain(
        |&(here, target)| match map.get(here as usize).copied().flatten() {
            Some(there) => {
                passed.push((there, target));
                false
            }
            None => true,
        },
    );
    Ok(Suspect {
        path: suspect.path.clone(),
        blob: parent_blob,
        text: Some(theirs),
        lines: passed,
    })
}

/// The path and blob in `parent` that the suspect's file of commit `id` was renamed from.
fn renamed_from(
    repo: &gix::Repository,
    parent: ObjectId,
    id: ObjectId,
    suspect: &Suspect,
    budget: &Budget,
) -> Result<Option<(RepoPath, ObjectId)>, Error> {
    let parent_tree = crate::history::tree_of(repo, parent)?;
    let tree = crate::history::tree_of(repo, id)?;
    let Some(leaf) = crate::follow::leaf_at(repo, tree, suspect.path.as_str())? else {
        return Ok(None);
    };
    let root = RepoPath::parse("")?;
    let found = crate::follow::source_of(
        repo,
        parent_tree,
        tree,
        suspect.path.as_str(),
        leaf,
        &root,
        false,
        budget,
    )?;
    let Some((source, _, _)) = found else {
        return Ok(None);
    };
    let source = RepoPath::parse(&source)?;
    Ok(blob_at(repo, parent, &source)?.map(|blob| (source, blob)))
}

/// The owners of consecutive lines merged into ranges, each with its commit's summary.
fn ranges(
    repo: &gix::Repository,
    owner: BTreeMap<u32, ObjectId>,
) -> Result<Vec<BlameRange>, Error> {
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
