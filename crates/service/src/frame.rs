//! The service frame (issue 30): every operation that names a repository runs through
//! [`Service::framed`], which takes these steps in this order, once each, so no operation can
//! skip one:
//!
//! 1. **alias** — `ALIASES` of the call's server-plugin epoch (P-22; the epoch is pinned on
//!    the [`CallContext`], so the whole call sees one epoch, P-12);
//! 2. **access** — read access (A-2: a private repository the caller may not read answers
//!    exactly like an unknown one, A-4), or the prepare capability for operator actions
//!
//! 3. **snapshot and lease** — one look at the registry resolves the revision and leases
//!    the commit (R-8, G-8); the lease is the operation's to hold for as long as it works,
//!    enrichment included;
//! 4. **statistics** — the call is counted once under its operation.
//!
//! Steps 1 and 4 wrap the operation; steps 2 and 3 are the only way from a [`RepoCall`] to a
//! checked repository or a lease: [`RepoCall::open`] checks access and answers an [`Opened`]
//! repository, whose [`Opened::lease`] is the snapshot (and [`RepoCall::targets`] does both
//! for the operations over the search index). An operation that names no
//! repository at all (`discovery`, plugin status) is not framed.

use crate::cost::{Admit, Class, ClientKey, Cost, Slot};
use crate::stats::{OpStats, QueryStats};
use crate::{CallContext, Caller, ErrorKind, Inner, Service, ServiceError};
use budget::Budget;
use gitstore::{CommitId, Lease, RepoName};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long past its deadline the frame waits for work to stop by itself (and answer its
/// own, more precise error) before it answers "ran out of time" for it.
const DEADLINE_GRACE: Duration = Duration::from_millis(250);

/// Cluster mode: how long a lease on the blocking pool waits for this replica to follow a
/// head another replica's sync recorded before it answers "not synced" (after which a
/// forwarding replica asks the other owner). A follow of a small change takes a fraction of
/// a second; the bound stays far below a forwarded attempt's deadline (30 s).
pub(crate) const FOLLOW_WAIT: Duration = Duration::from_secs(3);

thread_local! {
    /// Set while a framed operation runs on the blocking pool, where a lease may wait for a
    /// follow; never on an async thread, where it answers at once.
    static MAY_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `work` (on a blocking-pool thread) with leases allowed to wait for a follow.
pub(crate) fn on_blocking_pool<T>(work: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            MAY_WAIT.with(|may| may.set(self.0));
        }
    }
    let _reset = Reset(MAY_WAIT.with(|may| may.replace(true)));
    work()
}

/// What the caller must hold for an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Read access to the repository.
    Read,
    /// The prepare capability: an operator capability over every repository, which
    /// neither needs nor gives read access.
    Prepare,
}

/// One repository-naming operation as the frame knows it: its name, its statistics slot
/// what the caller must hold, and what a caller whose call ran out of time can do
/// instead (O-9). What it may spend is the caller's [`Cost`], stated by the tool or route.
#[derive(Clone, Copy)]
pub(crate) struct Op {
    /// The operation's name (the MCP tool's, and what plugins are told).
    pub(crate) name: &'static str,
    stats: fn(&QueryStats) -> &OpStats,
    need: Need,
    /// How to narrow a call that ran out of time.
    narrow: &'static str,
}

macro_rules! ops {
    ($($constant:ident => $name:ident, $need:ident, $narrow:literal;)*) => {
        impl Op {
            $(
                pub(crate) const $constant: Op = Op {
                    name: stringify!($name),
                    stats: |stats| &stats.$name,
                    need: Need::$need,
                    narrow: $narrow,
                };
            )*
        }
    };
}

ops! {
    READ => read, Read, "read fewer lines (`start_line`/`end_line`), or retry in a moment";
    READ_MANY => read_many, Read, "read fewer items or lines per call, or retry in a moment";
    SEARCH => search, Read, "narrow the query (`repo`, `path`, `lang`, a longer literal), or retry in a moment";
    LIST => list, Read, "list a deeper `path` or a smaller `depth`";
    RESOLVE => resolve, Read, "retry in a moment";
    AVAILABILITY => availability, Read, "retry in a moment";
    LOG => log, Read, "pass `path` or a more recent `revision`, or continue from the page's `next_cursor`";
    COMMIT => commit, Read, "read the commit's `diff` by path, or retry in a moment";
    DIFF => diff, Read, "pass `path` to diff part of the tree, or continue from `next_cursor`";
    BLAME => blame, Read, "blame fewer lines (`start_line`/`end_line`) or a more recent `revision`; `log` with `path` lists the file's commits";
    OUTLINE => outline, Read, "outline a smaller file, or use `search` for the names you need";
    DEFINITIONS => definitions, Read, "name the repository (`repo`), or retry in a moment";
    REFERENCES => references, Read, "name the repository (`repo`) and a `path`, or retry in a moment";
    PREPARE => prepare, Prepare, "retry in a moment; the work may go on in the background";
    HIGHLIGHT => highlight, Read, "read the file with `read`, which does not highlight";
    RAW => raw, Read, "fetch a smaller file, or retry in a moment";
}

/// How an operation names its repository: one (`String`), or one or every readable one
/// (`Option<String>`, the operations over the search index).
pub(crate) trait Named: Sized {
    /// Step 1: the repository the name means (`ALIASES`, P-22).
    fn unalias(self, service: &Service, ctx: &CallContext) -> Self;
}

impl Named for String {
    fn unalias(self, service: &Service, ctx: &CallContext) -> Self {
        service.unalias(ctx, self)
    }
}

impl Named for Option<String> {
    fn unalias(self, service: &Service, ctx: &CallContext) -> Self {
        self.map(|repo| service.unalias(ctx, repo))
    }
}

/// A framed call after step 1: who calls and the repository meant (an alias already
/// replaced by the real name). Steps 2 and 3 go through it.
pub(crate) struct RepoCall<R> {
    op: Op,
    caller: Caller,
    repo: R,
    /// What the call may spend.
    cost: Cost,
    /// Its budget: the work checks it between steps (O-9).
    budget: Budget,
    /// Who it counts against for slots.
    client: ClientKey,
    /// The slots it took (of its class; of another a step found heavy, such as an
    /// overlay build inside a search), held for as long as the call (and the work it moved
    /// to the blocking pool) lives.
    slots: Vec<(Class, Arc<Slot>)>,
}

/// A repository the caller passed step 2 for; its leases are step 3. Only [`RepoCall::open`]
/// makes one.
pub(crate) struct Opened {
    name: RepoName,
    /// The call's budget: a retention walk of its lease stops with it.
    budget: Budget,
}

impl Opened {
    /// The repository's real name.
    pub(crate) fn name(&self) -> &RepoName {
        &self.name
    }

    /// Step 3: resolves `revision` (`None`: the default branch head) and leases the commit
    /// on one look at the registry. An operation on two commits (`diff`) leases each.
    ///
    /// Cluster mode (issue 31, behaviour 4): when this replica lacks the head the cluster
    /// recorded for the revision ("not synced"), a lease on the blocking pool waits up to
    /// [`FOLLOW_WAIT`] for this replica to follow it and tries once more; on an async thread,
    /// or when the wait runs out, "not synced" stands. The wait is for a notification, not
    /// a lock.
    ///
    /// Blocks while the retention check walks the history (issue 42 point 7), until the
    /// call's budget stops it: on an async thread, take [`Opened::lease_inline`] instead.
    pub(crate) fn lease(
        &self,
        inner: &Inner,
        revision: Option<&str>,
    ) -> Result<Lease, gitstore::Error> {
        lease_revision(inner, &self.name, revision, &self.budget)
    }

    /// Step 3 on an async thread: never walks the history nor waits for a walk or a
    /// follow. `Ok(None)` when only the retention walk can tell whether the commit is
    /// retained: redo the lease with [`Opened::lease`] on the blocking pool.
    pub(crate) fn lease_inline(
        &self,
        inner: &Inner,
        revision: Option<&str>,
    ) -> Result<Option<Lease>, gitstore::Error> {
        inner.store.lease_revision_inline(&self.name, revision)
    }
}

/// A lease of the commit `commit` (the search index's) of the repository `repo`, its
/// retention walk stopped at `budget`; `None` when it cannot be had (no longer retained,
/// out of budget, not a name): the index then counts as not serving the repository.
pub(crate) fn lease_indexed(
    inner: &Inner,
    repo: &str,
    commit: &str,
    budget: &Budget,
) -> Option<Lease> {
    let name = RepoName::parse(repo).ok()?;
    CommitId::parse(commit)?;
    inner
        .store
        .lease_revision_within(&name, Some(commit), budget)
        .ok()
}

/// `GitStore::lease_revision_within` (a retention walk stops at `budget`), waiting for a
/// follow on the blocking pool (see [`Opened::lease`]).
pub(crate) fn lease_revision(
    inner: &Inner,
    name: &RepoName,
    revision: Option<&str>,
    budget: &Budget,
) -> Result<Lease, gitstore::Error> {
    match inner.store.lease_revision_within(name, revision, budget) {
        Err(gitstore::Error::NotSynced(_))
            if MAY_WAIT.with(Cell::get) && inner.store.wait_followed(name, FOLLOW_WAIT) =>
        {
            inner.store.lease_revision_within(name, revision, budget)
        }
        leased => leased,
    }
}

impl<R> RepoCall<R> {
    /// The operation's name.
    pub(crate) fn operation(&self) -> &'static str {
        self.op.name
    }

    /// The call's budget: long work checks it between steps and stops when it fails.
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// What the call may spend.
    pub(crate) fn cost(&self) -> &Cost {
        &self.cost
    }

    /// Whether the call holds a slot of `class`.
    fn holds(&self, class: Class) -> bool {
        self.slots.iter().any(|(held, _)| *held == class)
    }

    /// [`RepoCall::admit`] for work on the blocking pool (where `framed_blocking` runs it)
    /// that found itself heavy: waits there, at most the admission wait.
    pub(crate) fn admit_blocking(
        &mut self,
        inner: &Inner,
        class: Class,
    ) -> Result<(), ServiceError> {
        if self.holds(class) {
            return Ok(());
        }
        // A blocking-pool thread may block on the runtime; an async worker may not.
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| ServiceError::internal("a heavy call ran outside the server's runtime"))?;
        let slot = handle.block_on(inner.admission.admit(class, self.client, &self.budget))?;
        self.slots.extend(slot.map(|slot| (class, Arc::new(slot))));
        Ok(())
    }

    /// Takes a slot of `class` for work the call found heavy (a cost admitted
    /// [`Admit::WhenHeavy`]), unless it holds one already; busy when none frees up in time.
    pub(crate) async fn admit(&mut self, inner: &Inner, class: Class) -> Result<(), ServiceError> {
        if !self.holds(class) {
            let slot = inner
                .admission
                .admit(class, self.client, &self.budget)
                .await?;
            self.slots.extend(slot.map(|slot| (class, Arc::new(slot))));
        }
        Ok(())
    }
}

impl RepoCall<String> {
    /// The repository meant, as named (after `ALIASES`), not yet checked.
    pub(crate) fn repo(&self) -> &str {
        &self.repo
    }

    /// Step 2: the caller may do this operation on the repository, or the error; for reads,
    /// a private repository the caller may not read is refused exactly like an unknown one
    ///
    pub(crate) fn open(&self, inner: &Inner) -> Result<Opened, ServiceError> {
        if self.op.need == Need::Prepare {
            // Before the name is even parsed: without the capability nothing is learnt.
            inner.check_prepare(&self.caller, self.op.name)?;
        }
        let name = RepoName::parse(&self.repo)?;
        match self.op.need {
            Need::Read => inner.check_read(&self.caller, &name)?,
            // the capability covers every repository; only existence is left to check.
            Need::Prepare => {
                inner.store.is_private(&name)?;
            }
        }
        Ok(Opened {
            name,
            budget: self.budget.clone(),
        })
    }

    /// Steps 2 and 3 for an operation on one commit.
    pub(crate) fn lease(
        &self,
        inner: &Inner,
        revision: Option<&str>,
    ) -> Result<Lease, ServiceError> {
        Ok(self.open(inner)?.lease(inner, revision)?)
    }
}

impl RepoCall<Option<String>> {
    /// Step 2 for a search that names one repository and does not read its code index
    /// (commit and diff searches): checked readable, an unreadable private one refused
    /// exactly like an unknown one.
    pub(crate) fn open_named(&self, inner: &Inner) -> Result<Opened, ServiceError> {
        let Some(repo) = &self.repo else {
            return Err(ServiceError::invalid(format!(
                "{} needs repo here: name the repository to search",
                self.op.name
            )));
        };
        let name = RepoName::parse(repo)?;
        inner.check_read(&self.caller, &name)?;
        Ok(Opened {
            name,
            budget: self.budget.clone(),
        })
    }

    /// Steps 2 and 3 for an operation over the search index: the named repository (checked
    /// readable) or every repository the caller may read, each indexed one leased at its
    /// indexed commit (S-1: every hit must be readable at the SHA it names; a commit that
    /// left retention, its repository not re-indexed since, is reported as not indexed
    /// rather than answered with unreadable hits).
    ///
    /// With `revision` (`definitions`, `references`), it must name the indexed head of the
    /// repository, which must then be named: symbols exist for indexed heads only.
    pub(crate) fn targets<'a>(
        &self,
        inner: &'a Inner,
        revision: Option<&str>,
    ) -> Result<(&'a search::Indexes, IndexedTargets), ServiceError> {
        let tool = self.op.name;
        let one = match &self.repo {
            Some(repo) => {
                let name = RepoName::parse(repo)?;
                inner.check_read(&self.caller, &name)?;
                Some(name)
            }
            None if revision.is_some() => {
                return Err(ServiceError::invalid(format!(
                    "revision needs repo: {tool} answers for the indexed head of each repository"
                )));
            }
            None => {
                if self.caller == Caller::Anonymous && !inner.config.public_read {
                    return Err(ServiceError::unauthenticated(crate::TOKEN_NEEDED));
                }
                None
            }
        };
        let indexes = inner.indexes()?;
        if let (Some(name), Some(revision)) = (&one, revision) {
            let commit = lease_revision(inner, name, Some(revision), &self.budget)?
                .commit()
                .clone();
            match indexes.indexed_commit(name.as_str()) {
                Some(indexed) if indexed != commit.to_string() => {
                    return Err(ServiceError::invalid(format!(
                        "{tool} answers from the index, which holds {name} at {indexed}; revision `{revision}` is {commit}. Omit revision (or pass {indexed}), or use outline, which parses any commit"
                    )));
                }
                // The indexed head, or not indexed yet: the answer lists it as such.
                _ => {}
            }
        }
        let repos: Vec<String> = match one {
            Some(name) => vec![name.to_string()],
            None => inner
                .store
                .repos()?
                .into_iter()
                .filter(|info| inner.may_read(&self.caller, &info.name))
                .map(|info| info.name.to_string())
                .collect(),
        };
        let mut leases = Vec::new();
        let mut stale = Vec::new();
        let repos = repos
            .into_iter()
            .filter(|repo| {
                let Some(info) = indexes.current(repo) else {
                    return true;
                };
                let lease = lease_indexed(inner, repo, &info.commit, &self.budget);
                match lease {
                    Some(lease) => {
                        leases.push(lease);
                        true
                    }
                    None => {
                        stale.push(repo.clone());
                        false
                    }
                }
            })
            .collect();
        Ok((
            indexes,
            IndexedTargets {
                repos,
                leases,
                stale,
            },
        ))
    }
}

impl Service {
    /// The service frame: step 1 (alias) before `work`, step 4 (statistics) after it;
    /// `work` takes steps 2 and 3 through the [`RepoCall`] it is given, which is its only
    /// way to the repository. What runs after the answer is counted (enrichment, W-38) runs
    /// after this returns, on the lease `work` hands back.
    pub(crate) async fn framed<R, T, F, Fut>(
        &self,
        ctx: &CallContext,
        op: Op,
        repo: R,
        work: F,
    ) -> Result<T, ServiceError>
    where
        R: Named,
        F: FnOnce(RepoCall<R>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let cost = ctx.cost();
        // A cost the transport set started the call's budget already; else the call's own.
        let budget = match ctx.cost {
            Some(_) => ctx.budget.clone(),
            None => cost.budget(&ctx.budget),
        };
        let call = RepoCall {
            op,
            caller: ctx.caller.clone(),
            repo: repo.unalias(self, ctx),
            cost,
            budget: budget.clone(),
            client: ctx.client,
            slots: Vec::new(),
        };
        let started = Instant::now();
        // Dropped before the end (the caller went away): the work is told to stop.
        let departure = budget.cancel_on_drop();
        let result = self.bounded(op, call, work).await;
        departure.disarm();
        (op.stats)(&self.inner.stats).record(started, result.is_ok());
        result
    }

    /// Step 0 of the frame (O-9): the slot of a class that takes one on every call, then
    /// `work` until the call's deadline, when it is cancelled; a stop the work reports
    /// becomes "ran out of time", with what the operation's caller can do instead.
    async fn bounded<R, T, F, Fut>(
        &self,
        op: Op,
        mut call: RepoCall<R>,
        work: F,
    ) -> Result<T, ServiceError>
    where
        F: FnOnce(RepoCall<R>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let (cost, budget) = (call.cost, call.budget.clone());
        if cost.admit == Admit::Always {
            call.admit(&self.inner, cost.class).await?;
        }
        let result = match budget.deadline() {
            Some(deadline) => {
                let until = tokio::time::Instant::from_std(deadline + DEADLINE_GRACE);
                match tokio::time::timeout_at(until, work(call)).await {
                    Ok(result) => result,
                    Err(_) => {
                        budget.cancel();
                        Err(ServiceError {
                            kind: ErrorKind::TimedOut,
                            message: String::new(),
                        })
                    }
                }
            }
            None => work(call).await,
        };
        result.map_err(|error| match error.kind {
            ErrorKind::TimedOut => ServiceError::timed_out(op.name, cost.time, op.narrow),
            _ => error,
        })
    }

    /// [`Service::framed`] with all of `work` on the blocking pool.
    pub(crate) async fn framed_blocking<R, T>(
        &self,
        ctx: &CallContext,
        op: Op,
        repo: R,
        work: impl FnOnce(RepoCall<R>, &Inner) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ServiceError>
    where
        R: Named + Send + 'static,
        T: Send + 'static,
    {
        self.framed(ctx, op, repo, move |call| {
            self.blocking(move |inner| on_blocking_pool(|| work(call, inner)))
        })
        .await
    }
}

/// The repositories a query over the index covers, each leased at its indexed commit.
pub(crate) struct IndexedTargets {
    /// Repositories to query (indexed or not yet).
    pub repos: Vec<String>,
    /// Leases of the indexed commits, held for the query.
    pub leases: Vec<gitstore::Lease>,
    /// Indexed at a commit that left retention: reported as not indexed.
    pub stale: Vec<String>,
}
