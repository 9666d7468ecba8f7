//! The compiled-module cache and the compile worker (W-30, O-9).
//!
//! Callers of [`super::Runtime::module`] that miss the cache enqueue a job (or join the job
//! already queued for the same digest) and wait for it until their own deadline. One worker
//! thread compiles one job at a time: of the queued jobs, one a read waits for before the
//! others, and the smallest artifact first (compile time grows with size, so a small plugin
//! never waits behind a large one that is merely queued). The last caller to give up on a
//! job the worker has not started takes it out of the queue itself, so the queue only ever
//! holds jobs somebody still waits for. At most CONCURRENCY callers wait at once, so the
//! queue is bounded by the callers themselves and a further caller is told PLUGIN_BUSY. A
//! job shares the caller's artifact (`Arc<[u8]>`, up to ARTIFACT_BYTES) rather than copying
//! it, and lets go of it as soon as the worker took it or the job left the queue.
//!
//! A compile that finishes after every caller gave up is dropped: not cached, never executed
//! (W-30; seed 000: a late artifact is closed, never executed), counted in
//! `compiles_dropped_late`; the next caller compiles again. With a compile child (see
//! `child.rs`) a running compile is stopped rather than left to finish, for four reasons
//! ([`should_stop`], asked before the child starts and then every 10 ms, `child.rs`'s `POLL`):
//! - every caller gave up (*abandoned*: the last one was a read whose deadline passed, and no
//!   preparation or caller without a deadline waits): the job is forgotten there and then,
//!   under the compiler lock, so no later caller joins it, and the child is killed. An
//!   abandoned compile stops costing a core within one poll interval of the give-up;
//! - a read has waited behind it long enough: at once when no read waits for the running
//!   one; after half of TIMEOUT when one does and the waiting read's artifact is smaller.
//!   It is *preempted* and queued again if anybody still waits for it, so one large artifact
//!   cannot make every other first use time out;
//! - it ran for the compile cap (12 × TIMEOUT; only a compile somebody still waits for gets
//!   that far): its artifact is *remembered as failed* for [`FAILED_FOR`], so that nothing
//!   compiles it again and again;
//! - shutdown.
//!
//! The worker's slot stays taken until a stopped child has exited. Without a compile child
//! the worker compiles in-process and nothing can stop it: an abandoned in-process compile
//! runs to its end (a caller arriving meanwhile joins it), and is dropped if nobody waits then.
//!
//! Background preparation ([`super::Runtime::prepare_module`], W-31) goes through the same
//! queue and worker but never evicts a module a read used since it was cached: each cache
//! entry remembers whether a read (a `module` call with a request deadline) got it.
//! Preparation caches its module only in a free slot or in place of a module no read used,
//! and compiles nothing when there is no such room. A prepared module enters at the least
//! recently used end, so that until a read uses it, it is also the first a read's miss evicts
//! (reads themselves keep plain LRU).

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::child::{self, Failure};
use super::stats::bump;
use super::{Module, Shared};
use crate::abi;
use crate::config::CompileCommand;
use crate::config::format_duration;
use crate::{Code, Diagnostic, PluginConfig};

pub(super) type Outcome = Result<Arc<Module>, Diagnostic>;

/// How long an artifact whose compile overran the cap (or that the compiler refused or died
/// on) is refused at once instead of compiled again.
pub(super) const FAILED_FOR: Duration = Duration::from_secs(600);

/// Artifacts remembered as failed at most (the oldest goes first).
const FAILED_ENTRIES: usize = 256;

/// The compile cap, in TIMEOUTs: long enough for an artifact of the default ARTIFACT_BYTES
/// at the slowest compile speed measured (about 0.3 MB/s), short enough that an artifact
/// nobody can use stops costing a core soon.
const CAP_TIMEOUTS: u32 = 12;

/// Longest one compile runs before it is stopped and its artifact remembered as failed.
pub(super) fn compile_cap(config: &PluginConfig) -> Duration {
    config.timeout.saturating_mul(CAP_TIMEOUTS)
}

/// How long a read waits behind a compile another read waits for before that compile is
/// preempted: half of TIMEOUT, leaving the other half for its own compile and execution.
pub(super) fn read_patience(config: &PluginConfig) -> Duration {
    config.timeout / 2
}

#[derive(Default)]
pub(super) struct Compiler {
    state: Mutex<State>,
    /// Wakes the worker: a job was queued, or shutdown.
    work: Condvar,
    /// Lets a test keep the worker from compiling the job it took.
    #[cfg(test)]
    hold: tests::Hold,
}

#[derive(Default)]
struct State {
    /// Compiled modules, least recently used first.
    cache: VecDeque<Entry>,
    /// The job per digest that is queued or compiling.
    inflight: HashMap<String, Arc<Job>>,
    /// Jobs not started yet, each with at least one waiting caller, in arrival order.
    queue: Vec<Arc<Job>>,
    /// Callers blocked in `module` or `prepare_module` (bounded by CONCURRENCY).
    waiting: usize,
    /// Artifacts refused at once until the given time, and why.
    failed: HashMap<String, Failed>,
    shutdown: bool,
}

/// One compiled module in the cache.
struct Entry {
    digest: String,
    module: Arc<Module>,
    /// A read got this module since it was cached: preparation never evicts it.
    read: bool,
}

/// An artifact remembered as failed.
struct Failed {
    until: Instant,
    diagnostic: Diagnostic,
}

/// Who asks for a module: decides what a cache hit refreshes and how a compile is cached.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// `module` with a request deadline: a read.
    Read,
    /// `module` without a deadline.
    Unbounded,
    /// `prepare_module`: background preparation.
    Prepare,
}

/// What a caller of [`obtain`] got.
pub(super) enum Got {
    /// The cached module.
    Hit(Arc<Module>),
    /// A module compiled for this caller. `cached` is false only when CACHE_ENTRIES is 0, or
    /// when no `module` caller ever waited for it and the cache had filled up with modules
    /// reads use meanwhile.
    Compiled { module: Arc<Module>, cached: bool },
    /// Preparation only: every cache slot holds a module a read used; nothing was compiled.
    NoRoom,
}

struct Job {
    digest: String,
    /// The artifact's length: the queue's order.
    bytes: usize,
    progress: Mutex<Progress>,
    done: Condvar,
}

#[derive(Default)]
struct Progress {
    /// Callers still waiting for this job.
    waiters: usize,
    /// Of those, reads (the only callers with a deadline, so the only ones who give up).
    readers: usize,
    /// Of those, preparations.
    preparers: usize,
    /// Since when reads have waited for this job without a break; `None` while none waits.
    read_since: Option<Instant>,
    /// A `module` caller (a read or one without deadline) ever waited: its module is cached
    /// like a read's, not like a prepared one.
    requested: bool,
    /// A read ever waited: its cache entry counts as used by a read.
    read: bool,
    /// The worker took the job (and has not put it back in the queue).
    started: bool,
    /// The bytes to compile, until the worker takes them (or the job leaves the queue).
    artifact: Option<Arc<[u8]>>,
    outcome: Option<Outcome>,
    /// Set with `outcome`: the module went into the cache.
    cached: bool,
}

/// Poisoning only means another thread panicked while holding the lock; the protected data
/// is still consistent for our purposes (counters and queues), so go on with it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Compiler {
    /// Whether `digest` is in the cache (does not refresh its recency).
    pub fn is_cached(&self, digest: &str) -> bool {
        lock(&self.state)
            .cache
            .iter()
            .any(|entry| entry.digest == digest)
    }

    /// Asks the worker to stop; a compile child it runs is killed within a poll interval.
    pub fn shut_down(&self) {
        lock(&self.state).shutdown = true;
        self.work.notify_all();
    }
}

/// The cached module (and `true`: a cache hit), or a compile by the worker waited for until
/// `deadline`. A hit refreshes the module's recency; a hit or compile with a deadline marks
/// it as used by a read.
pub(super) fn module(
    shared: &Shared,
    digest: &str,
    artifact: &Arc<[u8]>,
    deadline: Option<Instant>,
) -> (Outcome, bool) {
    let caller = if deadline.is_some() {
        Caller::Read
    } else {
        Caller::Unbounded
    };
    match obtain(shared, digest, artifact, deadline, caller) {
        Ok(Got::Hit(module)) => (Ok(module), true),
        Ok(Got::Compiled { module, .. }) => (Ok(module), false),
        // Only preparation is ever refused for room; never seen here.
        Ok(Got::NoRoom) => (Err(lost()), false),
        Err(diagnostic) => (Err(diagnostic), false),
    }
}

/// Background preparation of one module: a hit changes nothing (neither recency nor the
/// read mark), a miss compiles without a deadline and caches the module only where it evicts
/// no module a read used.
pub(super) fn prepare(
    shared: &Shared,
    digest: &str,
    artifact: &Arc<[u8]>,
) -> Result<Got, Diagnostic> {
    obtain(shared, digest, artifact, None, Caller::Prepare)
}

fn obtain(
    shared: &Shared,
    digest: &str,
    artifact: &Arc<[u8]>,
    deadline: Option<Instant>,
    caller: Caller,
) -> Result<Got, Diagnostic> {
    let compiler = &shared.compiler;
    let job = {
        let mut state = lock(&compiler.state);
        if let Some(answer) = cache_hit(shared, &mut state, digest, caller) {
            return answer;
        }
        if let Some(failed) = remembered(&mut state, digest) {
            return Err(failed);
        }
        if let Some(answer) = refusal(shared, &state, artifact, deadline, caller) {
            return answer;
        }
        join(compiler, &mut state, digest, artifact, caller)
    };
    let finished = wait_for(&job, deadline);
    let mut state = lock(&compiler.state);
    state.waiting -= 1;
    match finished {
        Some(answer) => answer,
        None => give_up(shared, &mut state, &job),
    }
}

/// The cached module of `digest` as `caller` takes it, or `None` on a miss.
fn cache_hit(
    shared: &Shared,
    state: &mut State,
    digest: &str,
    caller: Caller,
) -> Option<Result<Got, Diagnostic>> {
    let at = state
        .cache
        .iter()
        .position(|entry| entry.digest == digest)?;
    if caller == Caller::Prepare {
        // Preparation is a guess about future reads, not a use: it leaves the order
        // reads made alone.
        return Some(
            state
                .cache
                .get(at)
                .map(|entry| Got::Hit(entry.module.clone()))
                .ok_or_else(lost),
        );
    }
    // Move to the back: most recently used.
    let Some(mut entry) = state.cache.remove(at) else {
        return Some(Err(lost()));
    };
    entry.read |= caller == Caller::Read;
    let module = entry.module.clone();
    state.cache.push_back(entry);
    bump(&shared.counters.compile_cache_hits);
    Some(Ok(Got::Hit(module)))
}

/// Why `digest` is refused without a compile, while it is remembered as failed.
fn remembered(state: &mut State, digest: &str) -> Option<Diagnostic> {
    let failed = state.failed.get(digest)?;
    if Instant::now() < failed.until {
        return Some(failed.diagnostic.clone());
    }
    state.failed.remove(digest);
    None
}

/// Remembers `digest` as failed with `diagnostic` for [`FAILED_FOR`].
fn remember(state: &mut State, digest: &str, diagnostic: &Diagnostic) {
    let now = Instant::now();
    state.failed.retain(|_, failed| failed.until > now);
    if state.failed.len() >= FAILED_ENTRIES
        && let Some(oldest) = state
            .failed
            .iter()
            .min_by_key(|(_, failed)| failed.until)
            .map(|(digest, _)| digest.clone())
    {
        state.failed.remove(&oldest);
    }
    state.failed.insert(
        digest.to_string(),
        Failed {
            until: now + FAILED_FOR,
            diagnostic: diagnostic.clone(),
        },
    );
}

/// The answer of a miss that compiles nothing (an artifact over ARTIFACT_BYTES, no room for
/// a prepared module, the deadline passed, too many callers waiting), or `None` when the
/// caller may wait for a compile.
fn refusal(
    shared: &Shared,
    state: &State,
    artifact: &[u8],
    deadline: Option<Instant>,
    caller: Caller,
) -> Option<Result<Got, Diagnostic>> {
    let limit = shared.config.artifact_bytes;
    if artifact.len() as u64 > limit {
        // Discovery refuses such an artifact already; a caller handing one over anyway gets
        // the same answer rather than a compile of a size nobody allowed.
        return Some(Err(Diagnostic::new(
            Code::Artifact,
            format!(
                "the artifact is {} bytes, over ARTIFACT_BYTES ({limit})",
                artifact.len()
            ),
        )));
    }
    if caller == Caller::Prepare && !room_for_prepared(state, shared.config.cache_entries) {
        // Checked before compiling: a compile whose module could not be kept is wasted
        // worker time that reads may be waiting behind.
        return Some(Ok(Got::NoRoom));
    }
    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
        return Some(Err(timeout()));
    }
    if state.waiting >= shared.config.concurrency {
        return Some(Err(Diagnostic::new(
            Code::Busy,
            format!(
                "{} plugin compiles are already waiting (CONCURRENCY)",
                state.waiting
            ),
        )));
    }
    None
}

/// Counts `caller` as waiting for the compile of `digest`: on the job already queued or
/// running, else on a new one queued for the worker.
fn join(
    compiler: &Compiler,
    state: &mut State,
    digest: &str,
    artifact: &Arc<[u8]>,
    caller: Caller,
) -> Arc<Job> {
    state.waiting += 1;
    let join = |progress: &mut Progress| {
        progress.waiters += 1;
        if caller == Caller::Read {
            progress.readers += 1;
            progress.read_since.get_or_insert_with(Instant::now);
        }
        progress.preparers += usize::from(caller == Caller::Prepare);
        progress.requested |= caller != Caller::Prepare;
        progress.read |= caller == Caller::Read;
    };
    if let Some(job) = state.inflight.get(digest) {
        join(&mut lock(&job.progress));
        return job.clone();
    }
    let mut progress = Progress {
        artifact: Some(artifact.clone()),
        ..Progress::default()
    };
    join(&mut progress);
    let job = Arc::new(Job {
        digest: digest.to_string(),
        bytes: artifact.len(),
        progress: Mutex::new(progress),
        done: Condvar::new(),
    });
    state.inflight.insert(digest.to_string(), job.clone());
    state.queue.push(job.clone());
    compiler.work.notify_one();
    job
}

/// Waits for `job`'s outcome; `None` when the deadline passed first.
fn wait_for(job: &Job, deadline: Option<Instant>) -> Option<Result<Got, Diagnostic>> {
    let mut progress = lock(&job.progress);
    loop {
        if let Some(outcome) = &progress.outcome {
            return Some(answer(outcome, progress.cached));
        }
        match deadline {
            None => {
                progress = job
                    .done
                    .wait(progress)
                    .unwrap_or_else(PoisonError::into_inner)
            }
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return None;
                }
                progress = job
                    .done
                    .wait_timeout(progress, deadline - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
    }
}

/// A finished job's outcome as one waiter's answer.
fn answer(outcome: &Outcome, cached: bool) -> Result<Got, Diagnostic> {
    outcome
        .clone()
        .map(|module| Got::Compiled { module, cached })
}

/// Whether a prepared module can be cached without evicting one a read used.
fn room_for_prepared(state: &State, capacity: usize) -> bool {
    capacity > 0 && (state.cache.len() < capacity || state.cache.iter().any(|entry| !entry.read))
}

/// A caller whose deadline passed leaves `job`. Called under the compiler lock, which the
/// worker also holds when it takes a job, puts it back and publishes it, so the job is seen
/// either queued, started or finished, never in between.
fn give_up(shared: &Shared, state: &mut State, job: &Arc<Job>) -> Result<Got, Diagnostic> {
    let mut progress = lock(&job.progress);
    if let Some(outcome) = &progress.outcome {
        // Published while this caller reached for the lock: the worker counted it as a
        // waiter, so take what it answered.
        return answer(outcome, progress.cached);
    }
    // Only a read has a deadline to give up at.
    progress.waiters -= 1;
    progress.readers -= 1;
    if progress.readers == 0 {
        progress.read_since = None;
    }
    if progress.waiters == 0 && !progress.started {
        // The last waiter of a job the worker has not taken: the job goes now rather than
        // when the worker reaches it, so abandoned jobs (and their artifacts) never pile up
        // behind a long compile (W-30: no queue beyond the callers waiting).
        progress.artifact = None;
        state.queue.retain(|queued| !Arc::ptr_eq(queued, job));
        forget(state, job);
        bump(&shared.counters.compiles_skipped);
    }
    // The last waiter of a started job: a compile child sees it at its next poll and is
    // killed ([`should_stop`]); an in-process compile finishes and is dropped ([`publish`]).
    Err(timeout())
}

fn timeout() -> Diagnostic {
    Diagnostic::new(
        Code::Timeout,
        "the request deadline passed while the plugin was waiting to be compiled",
    )
}

fn lost() -> Diagnostic {
    Diagnostic::new(Code::Artifact, "the compiled module was lost")
}

/// How a compile of the worker ended.
enum Ran {
    /// With an outcome for the waiters; `remember`: a failure to remember (see [`remember`]).
    Done { outcome: Outcome, remember: bool },
    /// Stopped for a read that waited behind it.
    Preempted,
    /// Stopped because every caller gave up; [`should_stop`] already forgot the job.
    Abandoned,
}

/// Why a compile child was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Nobody waits for the compile any more (W-30).
    Abandoned,
    Preempted,
    Cap,
    Shutdown,
}

/// The worker thread's loop: one compile at a time until shutdown.
pub(super) fn work(shared: Arc<Shared>) {
    while let Some((job, artifact)) = next_job(&shared) {
        #[cfg(test)]
        shared.compiler.hold.wait();
        match run(&shared, &job, artifact) {
            Ran::Done { outcome, remember } => publish(&shared, &job, outcome, remember),
            Ran::Preempted => requeue(&shared, &job),
            // Forgotten by `should_stop`; the artifact went with the stopped attempt.
            Ran::Abandoned => {}
        }
    }
}

/// A job the worker took, with its artifact (`None` only if it was lost).
type Taken = (Arc<Job>, Option<Arc<[u8]>>);

/// Takes the next job off the queue (a read's first, then the smallest artifact, then the
/// oldest) with its artifact, waiting for one; `None` at shutdown.
fn next_job(shared: &Shared) -> Option<Taken> {
    let compiler = &shared.compiler;
    let mut state = lock(&compiler.state);
    loop {
        if state.shutdown {
            return None;
        }
        let Some(at) = pick(&state.queue) else {
            state = compiler
                .work
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        let job = state.queue.remove(at);
        // Decided under the compiler lock so that no caller can join the job between this
        // check and its removal from `inflight`. Callers remove a job they all gave up on
        // themselves; this only guards against one slipping through.
        let mut progress = lock(&job.progress);
        if progress.waiters == 0 {
            progress.artifact = None;
            drop(progress);
            forget(&mut state, &job);
            bump(&shared.counters.compiles_skipped);
            continue;
        }
        progress.started = true;
        let artifact = progress.artifact.take();
        drop(progress);
        return Some((job, artifact));
    }
}

/// Where in `queue` the next job to compile is: the first of those a read waits for, with
/// the smallest artifact; `None` for an empty queue.
fn pick(queue: &[Arc<Job>]) -> Option<usize> {
    queue
        .iter()
        .enumerate()
        .min_by_key(|(_, job)| (lock(&job.progress).readers == 0, job.bytes))
        .map(|(at, _)| at)
}

/// Compiles `job`: in a child when the configuration names one, else on this thread.
fn run(shared: &Shared, job: &Arc<Job>, artifact: Option<Arc<[u8]>>) -> Ran {
    let Some(artifact) = artifact else {
        return Ran::Done {
            outcome: Err(lost()),
            remember: false,
        };
    };
    match &shared.config.compiler {
        Some(command) => {
            let ran = in_child(shared, command, job, &artifact);
            if matches!(ran, Ran::Preempted) {
                // Back into the job for the next attempt.
                lock(&job.progress).artifact = Some(artifact);
            }
            ran
        }
        None => {
            // A panic inside the compiler must not take the only worker down with it (every
            // later compile would wait forever); the module is then reported as not
            // compilable.
            let built = std::panic::catch_unwind(AssertUnwindSafe(|| {
                build(shared, &job.digest, &artifact)
            }));
            let (outcome, remember) = match built {
                Ok(Ok(module)) => (Ok(Arc::new(module)), false),
                Ok(Err(Built::Checked(diagnostic))) => (Err(diagnostic), false),
                Ok(Err(Built::Compiled(diagnostic))) => (Err(diagnostic), true),
                Err(_) => (Err(not_compiled()), true),
            };
            Ran::Done { outcome, remember }
        }
    }
}

/// Compiles `job` in a child, stopping it when [`should_stop`] says so.
fn in_child(
    shared: &Shared,
    command: &CompileCommand,
    job: &Arc<Job>,
    artifact: &Arc<[u8]>,
) -> Ran {
    let started = Instant::now();
    let digest = job.digest.as_str();
    let done = |outcome, remember| Ran::Done { outcome, remember };
    // The static checks are one validation pass, here, so that each failure keeps its own
    // code (PLUGIN_ABI, PLUGIN_MEMORY) and a wrong module costs no child at all.
    if let Err(diagnostic) = abi::check(artifact, &shared.static_limits()) {
        return done(Err(diagnostic), false);
    }
    let compiled = child::compile(command, shared.engine_settings, artifact, || {
        should_stop(shared, job, started.elapsed())
    });
    let bytes = match compiled {
        Ok(bytes) => bytes,
        Err(Failure::Stopped(Stop::Abandoned)) => {
            bump(&shared.counters.compiles_abandoned);
            tracing::debug!(
                digest,
                ran_us = started.elapsed().as_micros() as u64,
                "plugin compile stopped: every caller gave up"
            );
            return Ran::Abandoned;
        }
        Err(Failure::Stopped(Stop::Preempted)) => {
            bump(&shared.counters.compiles_preempted);
            tracing::debug!(
                digest,
                ran_us = started.elapsed().as_micros() as u64,
                "plugin compile preempted by a waiting read"
            );
            return Ran::Preempted;
        }
        Err(Failure::Stopped(Stop::Cap)) => {
            bump(&shared.counters.compiles_over_cap);
            let cap = format_duration(compile_cap(&shared.config));
            let message =
                format!("the module did not compile within {cap} (12 × TIMEOUT): make it smaller");
            return done(Err(Diagnostic::new(Code::Artifact, message)), true);
        }
        Err(Failure::Stopped(Stop::Shutdown)) => {
            return done(
                Err(Diagnostic::new(
                    Code::Busy,
                    "the plugin host is shutting down",
                )),
                false,
            );
        }
        Err(Failure::Refused(reason)) => {
            tracing::debug!(digest, %reason, "plugin module not compiled");
            return done(Err(not_compiled()), true);
        }
        Err(Failure::Crashed(reason)) => {
            tracing::warn!(digest, %reason, "the plugin compile child failed");
            return done(Err(not_compiled()), true);
        }
        Err(Failure::Start(error)) => {
            tracing::warn!(digest, %error, "the plugin compile child could not be started");
            let message = "the plugin compiler could not be started; try again later";
            return done(Err(Diagnostic::new(Code::Busy, message)), false);
        }
    };
    // SAFETY: `bytes` is what `Engine::precompile_module` wrote in a child running this
    // very program (`CompileCommand::this_program`), unchanged; wasmtime refuses output of
    // another version or of an engine configured differently with an error.
    let module = unsafe { wasmtime::Module::deserialize(&shared.engine, &bytes) };
    drop(bytes);
    let module = match module {
        Ok(module) => module,
        Err(error) => {
            tracing::warn!(digest, %error, "a compiled plugin module could not be loaded");
            return done(Err(not_compiled()), false);
        }
    };
    let outcome = link(shared, digest, module, started).map(Arc::new);
    done(outcome, false)
}

/// Whether to stop the compile of `job` that has run for `ran` (see the module docs). An
/// abandoned job is forgotten here, under the compiler lock that callers join jobs under, so
/// that nobody joins a compile that is about to be killed: a caller arriving from now on
/// queues a job of its own.
fn should_stop(shared: &Shared, job: &Arc<Job>, ran: Duration) -> Option<Stop> {
    let mut state = lock(&shared.compiler.state);
    if state.shutdown {
        return Some(Stop::Shutdown);
    }
    // Preparations and callers without a deadline never give up, so no waiter left means
    // that the last read gave up and none of them waits (W-30, W-31).
    if lock(&job.progress).waiters == 0 {
        forget(&mut state, job);
        return Some(Stop::Abandoned);
    }
    if ran >= compile_cap(&shared.config) {
        return Some(Stop::Cap);
    }
    // A compile no read waits for yields to any read at once. One a read waits for yields
    // only to a smaller artifact's read that has waited half its budget: the queue takes
    // smaller ones first, so that read is what runs next, and a larger one never takes the
    // slot back from it (no two reads stop each other's compiles in turn).
    let (patience, smaller_than) = if lock(&job.progress).readers > 0 {
        (read_patience(&shared.config), job.bytes)
    } else {
        (Duration::ZERO, usize::MAX)
    };
    let now = Instant::now();
    let starved = state.queue.iter().any(|queued| {
        queued.bytes < smaller_than
            && lock(&queued.progress)
                .read_since
                .is_some_and(|since| now.saturating_duration_since(since) >= patience)
    });
    starved.then_some(Stop::Preempted)
}

/// Puts a preempted job back in the queue, or lets it go when nobody waits for it any more.
fn requeue(shared: &Shared, job: &Arc<Job>) {
    let mut state = lock(&shared.compiler.state);
    let mut progress = lock(&job.progress);
    progress.started = false;
    if progress.waiters == 0 {
        progress.artifact = None;
        drop(progress);
        forget(&mut state, job);
        return;
    }
    drop(progress);
    state.queue.push(job.clone());
}

/// Hands a finished compile to its waiters and the cache, and remembers a failure that cost a
/// compile. A module nobody waits for any more is dropped, not cached (W-30): it is closed
/// without ever being executed, and the next caller compiles again.
fn publish(shared: &Shared, job: &Arc<Job>, outcome: Outcome, remember_failure: bool) {
    // Said to the waiters as well as to every caller until it is forgotten.
    let outcome = outcome.map_err(|diagnostic| {
        if !remember_failure {
            return diagnostic;
        }
        let message = format!(
            "{}; it is not compiled again for {}",
            diagnostic.message,
            format_duration(FAILED_FOR)
        );
        Diagnostic::new(diagnostic.code, message)
    });
    let mut evicted = Vec::new();
    let dropped = {
        let mut state = lock(&shared.compiler.state);
        let mut progress = lock(&job.progress);
        forget(&mut state, job);
        if progress.waiters == 0 && outcome.is_ok() {
            // Every caller gave up (each under this lock, so none is on its way to the
            // answer), and with the job forgotten nobody can join it: nobody gets the module.
            bump(&shared.counters.compiles_dropped_late);
            tracing::debug!(digest = job.digest, "plugin module dropped: nobody waits");
            Some(outcome)
        } else {
            match &outcome {
                Ok(module) => {
                    bump(&shared.counters.compiles);
                    let entry = Entry {
                        digest: job.digest.clone(),
                        module: module.clone(),
                        read: progress.read,
                    };
                    let capacity = shared.config.cache_entries;
                    // A `module` caller asked for it: plain LRU. Only preparation did: no
                    // read's module is evicted for it.
                    progress.cached = if progress.requested {
                        cache_requested(&mut state, capacity, entry, &mut evicted)
                    } else {
                        cache_prepared(&mut state, capacity, entry, &mut evicted)
                    };
                }
                // Remembered whether or not anybody still waits: the failure cost a compile,
                // and remembering it keeps no module.
                Err(diagnostic) if remember_failure => {
                    remember(&mut state, &job.digest, diagnostic);
                }
                Err(_) => {}
            }
            progress.outcome = Some(outcome);
            job.done.notify_all();
            None
        }
    };
    // The late module and an evicted module's idle instances go outside the compiler lock,
    // because dropping them takes a while ("close what is no longer used").
    drop(dropped);
    for digest in evicted {
        shared.purge_idle(&digest);
    }
}

/// Caches a module a `module` caller asked for: most recently used, evicting the least
/// recently used beyond `capacity`.
fn cache_requested(
    state: &mut State,
    capacity: usize,
    entry: Entry,
    evicted: &mut Vec<String>,
) -> bool {
    if capacity == 0 {
        return false;
    }
    state.cache.retain(|cached| cached.digest != entry.digest);
    state.cache.push_back(entry);
    while state.cache.len() > capacity {
        if let Some(old) = state.cache.pop_front() {
            evicted.push(old.digest);
        }
    }
    true
}

/// Caches a module only preparation asked for, in a free slot or in place of the least
/// recently used module no read used; `false` when every slot holds a module a read used.
/// It enters least recently used: a guess about future reads ranks below any real use.
fn cache_prepared(
    state: &mut State,
    capacity: usize,
    entry: Entry,
    evicted: &mut Vec<String>,
) -> bool {
    state.cache.retain(|cached| cached.digest != entry.digest);
    if state.cache.len() >= capacity {
        let unread = state.cache.iter().position(|cached| !cached.read);
        let Some(old) = unread.and_then(|at| state.cache.remove(at)) else {
            return false;
        };
        evicted.push(old.digest);
    }
    state.cache.push_front(entry);
    true
}

/// Removes `job` from the in-flight map (unless a newer job for its digest replaced it).
fn forget(state: &mut State, job: &Arc<Job>) {
    if state
        .inflight
        .get(&job.digest)
        .is_some_and(|current| Arc::ptr_eq(current, job))
    {
        state.inflight.remove(&job.digest);
    }
}

fn not_compiled() -> Diagnostic {
    Diagnostic::new(
        Code::Artifact,
        "the module could not be compiled within the host's limits",
    )
}

/// Why an in-process build gave no module.
enum Built {
    /// The static checks or the linker refused it: cheap to find again.
    Checked(Diagnostic),
    /// Cranelift refused it, after a compile's worth of work.
    Compiled(Diagnostic),
}

/// Static checks, compile, link, on this thread.
fn build(shared: &Shared, digest: &str, artifact: &[u8]) -> Result<Module, Built> {
    let started = Instant::now();
    abi::check(artifact, &shared.static_limits()).map_err(Built::Checked)?;
    let module = wasmtime::Module::new(&shared.engine, artifact).map_err(|error| {
        tracing::debug!(digest, %error, "plugin module not compiled");
        Built::Compiled(not_compiled())
    })?;
    link(shared, digest, module, started).map_err(Built::Checked)
}

/// Links a compiled module against the host functions.
fn link(
    shared: &Shared,
    digest: &str,
    module: wasmtime::Module,
    started: Instant,
) -> Result<Module, Diagnostic> {
    let pre = shared.linker.instantiate_pre(&module).map_err(|error| {
        tracing::debug!(digest, %error, "plugin module not linked");
        Diagnostic::new(
            Code::Abi,
            "the module's imports do not match the host functions",
        )
    })?;
    let compile_time = started.elapsed();
    tracing::debug!(
        digest,
        compile_us = compile_time.as_micros() as u64,
        "plugin module compiled"
    );
    Ok(Module {
        digest: digest.to_string(),
        pre,
        compile_time,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::PluginConfig;
    use crate::runtime::Runtime;

    /// Keeps the worker from compiling the job it took while set, so a test can stand for a
    /// long compile without depending on how fast Cranelift is.
    #[derive(Default)]
    pub(super) struct Hold {
        held: Mutex<bool>,
        changed: Condvar,
    }

    impl Hold {
        fn set(&self, held: bool) {
            *lock(&self.held) = held;
            self.changed.notify_all();
        }

        pub(super) fn wait(&self) {
            let mut held = lock(&self.held);
            while *held {
                held = self
                    .changed
                    .wait(held)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }

    /// What the compiler holds besides its cache.
    #[derive(Debug, PartialEq, Eq)]
    struct Backlog {
        queued: usize,
        inflight: usize,
        started: usize,
        /// Artifact bytes held by jobs (a started job has handed its bytes to the worker).
        artifact_bytes: usize,
    }

    impl Compiler {
        fn backlog(&self) -> Backlog {
            let state = lock(&self.state);
            let mut backlog = Backlog {
                queued: state.queue.len(),
                inflight: state.inflight.len(),
                started: 0,
                artifact_bytes: 0,
            };
            // Every queued job is in `inflight` too.
            for job in state.inflight.values() {
                let progress = lock(&job.progress);
                backlog.started += usize::from(progress.started);
                backlog.artifact_bytes += progress.artifact.as_ref().map_or(0, |a| a.len());
            }
            backlog
        }
    }

    fn artifact() -> Arc<[u8]> {
        wat::parse_str(
            r#"(module (memory (export "memory") 1)
                (func (export "alloc") (param i32) (result i32) (i32.const 16))
                (func (export "dealloc") (param i32 i32))
                (func (export "enrich") (param i32 i32) (result i64) (i64.const 0)))"#,
        )
        .unwrap()
        .into()
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let until = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < until, "never happened: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn within(ms: u64) -> Option<Instant> {
        Some(Instant::now() + Duration::from_millis(ms))
    }

    /// W-30: behind a long compile, callers that time out take their jobs (and artifacts) out
    /// of the queue themselves; a job stays queued exactly while somebody waits for it; a later
    /// caller for an abandoned digest still gets its module.
    #[test]
    fn w30_abandoned_jobs_leave_the_queue_with_their_artifacts() {
        let rt = Runtime::new(PluginConfig {
            concurrency: 3,
            ..PluginConfig::default()
        })
        .unwrap();
        let compiler = &rt.shared.compiler;
        let long_bytes = artifact();
        let bytes = artifact();
        let idle = Backlog {
            queued: 0,
            inflight: 1,
            started: 1,
            artifact_bytes: 0,
        };
        compiler.hold.set(true);
        std::thread::scope(|scope| {
            let long = scope.spawn(|| rt.module("long", &long_bytes, None));
            wait_for("the worker takes the long compile", || {
                compiler.backlog().started == 1
            });

            for i in 0..20 {
                let timed_out = rt
                    .module(&format!("short-{i}"), &bytes, within(5))
                    .unwrap_err();
                assert_eq!(timed_out.code, Code::Timeout, "{timed_out}");
                assert_eq!(compiler.backlog(), idle, "after caller {i}");
            }
            assert_eq!(Arc::strong_count(&bytes), 1, "no job keeps the artifact");

            // Two callers of one digest: the job stays while one of them still waits.
            let patient = scope.spawn(|| rt.module("shared", &bytes, within(1_000)));
            wait_for("the patient caller queues its job", || {
                compiler.backlog().queued == 1
            });
            let hurried = rt.module("shared", &bytes, within(5)).unwrap_err();
            assert_eq!(hurried.code, Code::Timeout);
            assert_eq!(
                compiler.backlog(),
                Backlog {
                    queued: 1,
                    inflight: 2,
                    started: 1,
                    artifact_bytes: bytes.len(),
                },
                "one caller still waits"
            );
            let patient = patient.join().unwrap().unwrap_err();
            assert_eq!(patient.code, Code::Timeout);
            assert_eq!(compiler.backlog(), idle);
            assert_eq!(Arc::strong_count(&bytes), 1);
            assert_eq!(rt.stats().compiles_skipped, 21);

            compiler.hold.set(false);
            long.join().unwrap().expect("the long compile");
        });
        assert!(rt.is_cached("long"));

        // A later caller for an abandoned digest compiles it.
        rt.module("shared", &bytes, within(30_000))
            .expect("compiles");
        assert!(rt.is_cached("shared"));
        let stats = rt.stats();
        assert_eq!((stats.compiles, stats.compiles_dropped_late), (2, 0));
        assert_eq!(stats.faults.timeout, 22);
        assert_eq!(
            compiler.backlog(),
            Backlog {
                queued: 0,
                inflight: 0,
                started: 0,
                artifact_bytes: 0
            }
        );
    }

    /// W-30 (seed 000: a late artifact is closed, never executed): an in-process compile,
    /// which nothing can stop, that finishes after its only read gave up is dropped, not
    /// cached; until it finishes a new caller would join it, afterwards one compiles again.
    #[test]
    fn w30_in_process_compile_finishing_after_its_read_gave_up_is_dropped() {
        let rt = Runtime::new(PluginConfig::default()).unwrap();
        let compiler = &rt.shared.compiler;
        let bytes = artifact();
        compiler.hold.set(true);
        std::thread::scope(|scope| {
            // Long enough for the worker to take the job before the read gives up.
            let read = scope.spawn(|| rt.module("late", &bytes, within(1_000)));
            wait_for("the worker takes the compile", || {
                compiler.backlog().started == 1
            });
            let gave_up = read.join().unwrap().unwrap_err();
            assert_eq!(gave_up.code, Code::Timeout, "{gave_up}");
        });
        // Started, so not skipped: the in-process compile still runs for nobody.
        assert_eq!(
            compiler.backlog(),
            Backlog {
                queued: 0,
                inflight: 1,
                started: 1,
                artifact_bytes: 0,
            }
        );
        compiler.hold.set(false);
        wait_for("the late compile ends", || {
            rt.stats().compiles_dropped_late == 1
        });
        assert!(!rt.is_cached("late"), "a late module is never cached");
        assert_eq!(compiler.backlog().inflight, 0, "the job is forgotten");
        let stats = rt.stats();
        assert_eq!(
            (
                stats.compiles,
                stats.compiles_skipped,
                stats.compiles_abandoned
            ),
            (0, 0, 0)
        );

        // The next read compiles again.
        rt.module("late", &bytes, within(30_000))
            .expect("compiles again");
        assert!(rt.is_cached("late"));
        let stats = rt.stats();
        assert_eq!(
            (
                stats.compiles,
                stats.compiles_dropped_late,
                stats.compile_cache_hits
            ),
            (1, 1, 0)
        );
    }

    /// O-9, W-30: the worker compiles what a read waits for first, the smallest artifact
    /// first, in arrival order among equals; preparation and callers without a deadline come
    /// after every read.
    #[test]
    fn o9_w30_reads_first_then_the_smallest_artifact() {
        let job = |name: &str, bytes: usize, readers: usize| {
            Arc::new(Job {
                digest: name.to_string(),
                bytes,
                progress: Mutex::new(Progress {
                    waiters: 1,
                    readers,
                    ..Progress::default()
                }),
                done: Condvar::new(),
            })
        };
        let mut queue = vec![
            job("prepared-small", 10, 0),
            job("read-large", 1_000, 1),
            job("read-small", 100, 2),
            job("read-small-later", 100, 1),
            job("unbounded", 1, 0),
        ];
        let mut order = Vec::new();
        while let Some(at) = pick(&queue) {
            order.push(queue.remove(at).digest.clone());
        }
        assert_eq!(
            order,
            [
                "read-small",
                "read-small-later",
                "read-large",
                "unbounded",
                "prepared-small"
            ]
        );
    }

    /// W-31: a read that uses the only module no read had used, while a preparation compiles,
    /// leaves the preparation no room: its module is dropped, not cached in place of the one
    /// the read now uses.
    #[test]
    fn w31_preparation_finding_the_cache_filled_by_reads_drops_its_module() {
        let rt = Runtime::new(PluginConfig {
            cache_entries: 1,
            ..PluginConfig::default()
        })
        .unwrap();
        let compiler = &rt.shared.compiler;
        let bytes = artifact();
        assert_eq!(
            rt.prepare_module("first", &bytes),
            Ok(crate::runtime::PrepareOutcome::Compiled)
        );
        compiler.hold.set(true);
        std::thread::scope(|scope| {
            let second = scope.spawn(|| rt.prepare_module("second", &bytes));
            wait_for("the worker takes the preparation", || {
                compiler.backlog().started == 1
            });
            rt.module("first", &bytes, within(30_000))
                .expect("a read's hit");
            compiler.hold.set(false);
            assert_eq!(
                second.join().unwrap(),
                Ok(crate::runtime::PrepareOutcome::NoRoom)
            );
        });
        assert!(rt.is_cached("first") && !rt.is_cached("second"));
        let stats = rt.stats();
        assert_eq!(stats.preparations_without_room, 1);
        assert_eq!(stats.faults.total(), 0);
    }
}
