//! The compiled-module cache and the single compile worker (W-30).
//!
//! Callers of [`super::Runtime::module`] that miss the cache enqueue a job (or join the job
//! already queued for the same digest) and wait for it until their own deadline. The one
//! worker thread takes jobs in order. The last caller to give up on a job the worker has not
//! started takes it out of the queue itself, so the queue only ever holds jobs somebody still
//! waits for; a job the worker started runs to its end (the worker stays busy until the
//! compiler exits) and a result nobody waits for any more is dropped, not cached.
//! At most CONCURRENCY callers wait at once, so the queue is bounded by the callers
//! themselves and a further caller is told PLUGIN_BUSY. A job shares the caller's artifact
//! (`Arc<[u8]>`, up to ARTIFACT_BYTES) rather than copying it, and lets go of it as soon as
//! the worker took it or the job left the queue.
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
use std::time::Instant;

use super::stats::bump;
use super::{Module, Shared};
use crate::abi;
use crate::{Code, Diagnostic};

pub(super) type Outcome = Result<Arc<Module>, Diagnostic>;

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
    /// Jobs not started yet, each with at least one waiting caller.
    queue: VecDeque<Arc<Job>>,
    /// Callers blocked in `module` or `prepare_module` (bounded by CONCURRENCY).
    waiting: usize,
    shutdown: bool,
}

/// One compiled module in the cache.
struct Entry {
    digest: String,
    module: Arc<Module>,
    /// A read got this module since it was cached: preparation never evicts it.
    read: bool,
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
    /// A module compiled for this caller. `cached` is false only when nobody but preparation
    /// waited for it and the cache had filled up with modules reads use meanwhile.
    Compiled { module: Arc<Module>, cached: bool },
    /// Preparation only: every cache slot holds a module a read used; nothing was compiled.
    NoRoom,
}

struct Job {
    digest: String,
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
    /// The worker took the job: from then on it runs to its end whoever still waits.
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

    /// Asks the worker to stop after its current compile.
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
        if let Some(answer) = refusal(shared, &state, deadline, caller) {
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

/// The answer of a miss that compiles nothing (no room for a prepared module, the deadline
/// passed, too many callers waiting), or `None` when the caller may wait for a compile.
fn refusal(
    shared: &Shared,
    state: &State,
    deadline: Option<Instant>,
    caller: Caller,
) -> Option<Result<Got, Diagnostic>> {
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
        progress.readers += usize::from(caller == Caller::Read);
        progress.preparers += usize::from(caller == Caller::Prepare);
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
        progress: Mutex::new(progress),
        done: Condvar::new(),
    });
    state.inflight.insert(digest.to_string(), job.clone());
    state.queue.push_back(job.clone());
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
/// worker also holds when it takes a job and when it publishes one, so the job is seen either
/// queued, started or finished, never in between.
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
    if progress.waiters == 0 && !progress.started {
        // The last waiter of a job the worker has not taken: the job goes now rather than
        // when the worker reaches it, so abandoned jobs (and their artifacts) never pile up
        // behind a long compile (W-30: no queue beyond the callers waiting).
        progress.artifact = None;
        state.queue.retain(|queued| !Arc::ptr_eq(queued, job));
        forget(state, job);
        bump(&shared.counters.compiles_skipped);
    }
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

/// The worker thread's loop: one compile at a time until shutdown.
pub(super) fn work(shared: Arc<Shared>) {
    let compiler = &shared.compiler;
    loop {
        let (job, artifact) = {
            let mut state = lock(&compiler.state);
            loop {
                if state.shutdown {
                    return;
                }
                let Some(job) = state.queue.pop_front() else {
                    state = compiler
                        .work
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                    continue;
                };
                // Decided under the compiler lock so that no caller can join the job between
                // this check and its removal from `inflight`. Callers remove a job they all
                // gave up on themselves; this only guards against one slipping through.
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
                break (job, artifact);
            }
        };
        #[cfg(test)]
        compiler.hold.wait();
        // A panic inside the compiler must not take the only worker down with it (every later
        // compile would wait forever); the module is then reported as not compilable.
        let outcome = match artifact {
            Some(artifact) => std::panic::catch_unwind(AssertUnwindSafe(|| {
                build(&shared, &job.digest, &artifact)
            }))
            .unwrap_or_else(|_| {
                Err(Diagnostic::new(
                    Code::Artifact,
                    "the module could not be compiled",
                ))
            })
            .map(Arc::new),
            None => Err(lost()),
        };
        publish(&shared, &job, outcome);
    }
}

/// Hands a finished compile to its waiters and the cache, or drops it when nobody waits.
fn publish(shared: &Shared, job: &Arc<Job>, outcome: Outcome) {
    let mut evicted = Vec::new();
    {
        let mut state = lock(&shared.compiler.state);
        let mut progress = lock(&job.progress);
        forget(&mut state, job);
        if progress.waiters == 0 {
            // W-30: a compile that finishes after its caller gave up is dropped, never run.
            bump(&shared.counters.compiles_dropped_late);
            return;
        }
        if let Ok(module) = &outcome {
            bump(&shared.counters.compiles);
            let entry = Entry {
                digest: job.digest.clone(),
                module: module.clone(),
                read: progress.readers > 0,
            };
            let capacity = shared.config.cache_entries;
            // Some `module` caller waits: plain LRU. Only preparation waits: no read's
            // module is evicted for it.
            progress.cached = if progress.waiters > progress.preparers {
                cache_requested(&mut state, capacity, entry, &mut evicted)
            } else {
                cache_prepared(&mut state, capacity, entry, &mut evicted)
            };
        }
        progress.outcome = Some(outcome);
        job.done.notify_all();
    }
    // An evicted module's idle instances go too ("close what is no longer used"); done
    // outside the compiler lock because dropping stores takes a while.
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

/// Static checks, compile, link.
fn build(shared: &Shared, digest: &str, artifact: &[u8]) -> Result<Module, Diagnostic> {
    let started = Instant::now();
    abi::check(artifact, &shared.static_limits())?;
    let module = wasmtime::Module::new(&shared.engine, artifact).map_err(|error| {
        tracing::debug!(digest, %error, "plugin module not compiled");
        Diagnostic::new(
            Code::Artifact,
            "the module could not be compiled within the host's limits",
        )
    })?;
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
        bytes = artifact.len(),
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
