//! Commit history: the commits reachable from a readable commit, newest first by committer
//! date, as `git log` lists them; limited to a path, with git's default history
//! simplification (a commit is listed when its entry at the path differs from every parent's;
//! at a merge whose entry equals one parent's, only that parent is followed). Reads objects
//! with `gix`; no `git` subprocess.
//!
//! Calls page (O-9): a page walks until it has its commits or its budget (time, commits
//! walked) runs out, and hands back the walk's frontier in a signed cursor (`cursor.rs`), so
//! the next page goes on exactly where this one stopped. A page that ran out of budget says
//! so (`partial`), with however many commits it found, none perhaps.

mod cursor;

pub(crate) use cursor::{Binding, Frontier};
pub use cursor::{CursorError, LogCursor};

use crate::objects::{odb, to_commit_id, to_oid};
use crate::{CommitId, Error, GitStore, RepoName, RepoPath};
use budget::Budget;
use gix::ObjectId;
use std::collections::{BinaryHeap, HashSet, VecDeque};

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

fn commit_time(repo: &gix::Repository, id: ObjectId) -> Result<i64, Error> {
    Ok(repo
        .find_commit(id)
        .map_err(odb)?
        .time()
        .map_err(odb)?
        .seconds)
}

/// The commits `git log [-- path]` lists from `start`, in its default order, each with its
/// parents: one walk for the `log` tool and the history index (`walk.rs`). It can pause
/// ([`LogWalk::frontier`]) and go on from where it paused ([`LogWalk::resume`]).
pub(crate) struct LogWalk<'r> {
    repo: &'r gix::Repository,
    path: &'r RepoPath,
    queue: BinaryHeap<Queued>,
    seen: HashSet<ObjectId>,
    queued: u64,
    /// The latest walked commits with their dates, oldest first, at most
    /// [`cursor::MAX_CARRIED`]: the ones a cursor may have to carry as seen.
    recent: VecDeque<(i64, ObjectId)>,
}

/// One step of a [`LogWalk`].
pub(crate) enum Step<'r> {
    /// A commit the log lists, with its parents.
    Listed(gix::Commit<'r>, Vec<ObjectId>),
    /// A commit walked but not listed (history simplification).
    Passed,
    /// Nothing is left to walk.
    End,
}

impl<'r> LogWalk<'r> {
    /// A walk from `start`, limited to commits that changed `path` (the root: every commit).
    pub(crate) fn new(
        repo: &'r gix::Repository,
        start: ObjectId,
        path: &'r RepoPath,
    ) -> Result<Self, Error> {
        let mut walk = Self::empty(repo, path);
        walk.push(start)?;
        Ok(walk)
    }

    fn empty(repo: &'r gix::Repository, path: &'r RepoPath) -> Self {
        Self {
            repo,
            path,
            queue: BinaryHeap::new(),
            seen: HashSet::new(),
            queued: 0,
            recent: VecDeque::new(),
        }
    }

    /// The walk paused at `frontier` (its queue in the order the walk takes it), going on
    /// exactly as the paused one would have. Costs a commit lookup per entry.
    pub(crate) fn resume(
        repo: &'r gix::Repository,
        path: &'r RepoPath,
        frontier: &Frontier,
    ) -> Result<Self, Error> {
        let mut walk = Self::empty(repo, path);
        for id in &frontier.carried {
            if walk.seen.insert(*id) {
                walk.recent.push_back((commit_time(repo, *id)?, *id));
            }
        }
        for id in &frontier.queue {
            walk.push(*id)?;
        }
        Ok(walk)
    }

    fn push(&mut self, id: ObjectId) -> Result<(), Error> {
        if self.seen.insert(id) {
            let time = commit_time(self.repo, id)?;
            self.queued += 1;
            self.queue
                .push(Queued(time, std::cmp::Reverse(self.queued), id));
        }
        Ok(())
    }

    /// Commits waiting in the queue: 0 once the walk is over.
    pub(crate) fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Where the walk stands: its queue in the order it takes it, and the walked commits a
    /// later step can reach again. A walked commit is reached again only through a commit
    /// still to walk, which is no newer than the newest one waiting; while committer dates
    /// do not go backwards from a parent to its child, every walked commit is at least as
    /// new as that one, so only walked commits of exactly that date can be reached again.
    /// Under clock skew (a parent committed after its child) a later page may list again
    /// commits an earlier page listed (a walked commit reached anew, and its history): the
    /// cursor would otherwise have to carry every walked commit.
    pub(crate) fn frontier(&self) -> Frontier {
        let mut waiting: Vec<&Queued> = self.queue.iter().collect();
        waiting.sort_by(|a, b| b.cmp(a));
        let newest = waiting.first().map(|q| q.0);
        Frontier {
            queue: waiting.iter().map(|q| q.2).collect(),
            carried: self
                .recent
                .iter()
                .filter(|(time, _)| Some(*time) == newest)
                .map(|(_, id)| *id)
                .collect(),
            followed: None,
        }
    }

    /// Walks one commit.
    pub(crate) fn step(&mut self) -> Result<Step<'r>, Error> {
        let Some(Queued(time, _, id)) = self.queue.pop() else {
            return Ok(Step::End);
        };
        if self.recent.len() == cursor::MAX_CARRIED {
            self.recent.pop_front();
        }
        self.recent.push_back((time, id));
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
        Ok(if listed {
            Step::Listed(commit, parents)
        } else {
            Step::Passed
        })
    }
}

impl<'r> Iterator for LogWalk<'r> {
    type Item = Result<(gix::Commit<'r>, Vec<ObjectId>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.step() {
                Ok(Step::Listed(commit, parents)) => return Some(Ok((commit, parents))),
                Ok(Step::Passed) => {}
                Ok(Step::End) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// What one page of a log may spend (O-9).
#[derive(Debug, Clone, Copy)]
pub struct PageLimits<'a> {
    /// Commits to answer at most.
    pub limit: usize,
    /// Commits to walk at most (listed or not).
    pub walk: u64,
    /// The call's budget: the page wraps up at its soft deadline and stops at its hard one.
    pub budget: &'a Budget,
}

/// One page of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage<T> {
    pub commits: Vec<T>,
    /// Where the next page goes on (a signed frontier); `None` at the end of the history.
    pub next_cursor: Option<String>,
    /// The page stopped at its budget (time, commits walked, or the walk's width) before
    /// it was full: fewer commits than asked for, perhaps none, and more may follow.
    pub partial: bool,
    /// Commits walked for this page.
    pub walked: u64,
}

/// A page's queue that ends it (a cursor carries at most [`cursor::MAX_FRONTIER`]).
const PAGE_FRONTIER: usize = 1024;
/// Commits a page walks before it may wrap up, so every page gets somewhere.
const MIN_PROGRESS: u64 = 16;
/// Steps between two looks at the clock.
const CHECK_EVERY: u64 = 8;

/// Paces a page's walk against its [`PageLimits`].
pub(crate) struct Pacer<'a> {
    limits: PageLimits<'a>,
    pub(crate) walked: u64,
}

impl<'a> Pacer<'a> {
    pub(crate) fn new(limits: PageLimits<'a>) -> Self {
        Self { limits, walked: 0 }
    }

    /// Whether the page wraps up before its next step (`waiting`: the walk's queue); an
    /// error once the call must stop at once (its hard deadline, or its caller gone).
    pub(crate) fn wrap_up(&mut self, waiting: usize) -> Result<bool, Error> {
        let may_stop = self.walked >= MIN_PROGRESS;
        if self.walked.is_multiple_of(CHECK_EVERY)
            && self.limits.budget.should_wrap_up()?
            && may_stop
        {
            return Ok(true);
        }
        if may_stop && (self.walked >= self.limits.walk || waiting >= PAGE_FRONTIER) {
            return Ok(true);
        }
        self.walked += 1;
        Ok(false)
    }
}

/// One page of `git log [-- path]` from `start`, or from where `from` paused: the commits
/// listed, the frontier to go on from (`None`: the end), and whether the page stopped at its
/// budget.
pub(crate) fn log_page(
    repo: &gix::Repository,
    start: ObjectId,
    path: &RepoPath,
    from: Option<&Frontier>,
    limits: PageLimits<'_>,
) -> Result<(Vec<CommitSummary>, Option<Frontier>, bool, u64), Error> {
    let mut walk = match from {
        Some(frontier) => LogWalk::resume(repo, path, frontier)?,
        None => LogWalk::new(repo, start, path)?,
    };
    let mut pacer = Pacer::new(limits);
    let mut out = Vec::new();
    let mut partial = false;
    while out.len() < limits.limit && walk.waiting() > 0 {
        if pacer.wrap_up(walk.waiting())? {
            partial = true;
            break;
        }
        if let Step::Listed(commit, parents) = walk.step()? {
            out.push(summary(&commit, &parents)?);
        }
    }
    let next = (walk.waiting() > 0).then(|| walk.frontier());
    Ok((out, next, partial, pacer.walked))
}

/// Walks from `start`: answers up to `limit` commits after skipping `skip` listed ones, and
/// whether more follow. `path` (repository-relative; the root for every commit) limits the
/// log to commits that changed it. Unbounded: for in-process callers; calls page with
/// [`GitStore::log_page`].
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

/// What a history query limited to `path` covers: `path` inside the registered `scope`, or
/// the scope itself for the root (G-2).
pub(crate) fn history_scope(
    name: &RepoName,
    scope: &RepoPath,
    path: &RepoPath,
) -> Result<RepoPath, Error> {
    if path.is_root() {
        Ok(scope.clone())
    } else if path.is_within(scope) {
        Ok(path.clone())
    } else {
        Err(Error::OutsideScope {
            repo: name.clone(),
            path: path.to_string(),
            scope: scope.to_string(),
        })
    }
}

impl GitStore {
    /// Reads a `log` cursor: verifies its signature and that it belongs to the log of
    /// `path` (as asked for on the first page) in `name` with this `follow` setting. Every
    /// refusal says what to do instead.
    pub fn log_cursor(
        &self,
        name: &RepoName,
        path: &RepoPath,
        follow: bool,
        text: &str,
    ) -> Result<LogCursor, CursorError> {
        let key = cursor::key(self.inner.storage_root())?;
        let binding = Binding {
            repo: name.as_str(),
            path: path.as_str(),
            follow,
        };
        cursor::decode(&key, &binding, text)
    }

    /// One page of the log from `commit` (which must be readable now): commits newest first
    /// by committer date, as `git log [-- path]` lists them (git's default history
    /// simplification; the root means the registered scope, G-2), from the start or from
    /// where `from` (a [`GitStore::log_cursor`] of this log) paused. The walk stops at
    /// `limits` — the page's commits, the commits walked, the budget's soft deadline — and
    /// answers what it found with a cursor carrying the walk's frontier, so a page costs
    /// what it walks, never the history before it.
    pub fn log_page(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        from: Option<&LogCursor>,
        limits: PageLimits<'_>,
    ) -> Result<LogPage<CommitSummary>, Error> {
        let scope = self.inner.registered_path(name)?;
        let limited = history_scope(name, &scope, path)?;
        check_start(commit, from)?;
        let reader = self.inner.blob_reader(name, commit)?;
        let key = cursor::key(self.inner.storage_root())?;
        let start = to_oid(commit)?;
        let (commits, next, partial, walked) = crate::handles::with_repo(&reader.repo, |repo| {
            log_page(repo, start, &limited, from.map(|c| &c.frontier), limits)
        })?;
        let binding = Binding {
            repo: name.as_str(),
            path: path.as_str(),
            follow: false,
        };
        Ok(LogPage {
            commits,
            next_cursor: next
                .map(|frontier| cursor::encode(&key, &binding, &start, &frontier))
                .transpose()?,
            partial,
            walked,
        })
    }

    /// Makes log cursors continue on every server that shares `secret` (a cluster's): by
    /// default each data directory signs them with its own key.
    pub fn set_cursor_secret(&self, secret: &[u8]) {
        cursor::set_secret(self.inner.storage_root(), secret);
    }
}

/// The key `log` cursors of the store at `data_dir` are signed with.
pub(crate) fn cursor_key(data_dir: &std::path::Path) -> Result<[u8; 32], Error> {
    cursor::key(data_dir)
}

/// A signed cursor (see `cursor.rs`).
pub(crate) fn encode_cursor(
    key: &[u8; 32],
    binding: &Binding<'_>,
    start: &ObjectId,
    frontier: &Frontier,
) -> Result<String, Error> {
    cursor::encode(key, binding, start, frontier)
}

/// A cursor read back (see `cursor.rs`), for the fuzz target `cursor` (`fuzzing.rs`).
pub(crate) fn decode_cursor(
    key: &[u8; 32],
    binding: &Binding<'_>,
    text: &str,
) -> Result<LogCursor, CursorError> {
    cursor::decode(key, binding, text)
}

/// A cursor goes on only from the commit its log started from.
pub(crate) fn check_start(commit: &CommitId, from: Option<&LogCursor>) -> Result<(), Error> {
    match from {
        Some(cursor) if cursor.start() != commit => Err(Error::InvalidRevision {
            revision: commit.to_string(),
            reason: "the cursor belongs to a log from another commit; drop the cursor, or pass \
                     the revision of the first page"
                .into(),
        }),
        _ => Ok(()),
    }
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
