//! The compiled-module cache and the single compile worker (W-30).
//!
//! Callers of [`super::Runtime::module`] that miss the cache enqueue a job (or join the job
//! already queued for the same digest) and wait for it until their own deadline. The one
//! worker thread takes jobs in order; a job every caller gave up on before it started is
//! skipped, and a result nobody waits for any more when it is ready is dropped, not cached.
//! At most CONCURRENCY callers wait at once, so the queue is bounded by the callers
//! themselves and a further caller is told PLUGIN_BUSY.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::stats::bump;
use super::{Module, Shared, abi};
use crate::{Code, Diagnostic};

pub(super) type Outcome = Result<Arc<Module>, Diagnostic>;

#[derive(Default)]
pub(super) struct Compiler {
    state: Mutex<State>,
    /// Wakes the worker: a job was queued, or shutdown.
    work: Condvar,
}

#[derive(Default)]
struct State {
    /// Compiled modules by digest, least recently used first.
    cache: VecDeque<(String, Arc<Module>)>,
    /// The job per digest that is queued or compiling.
    inflight: HashMap<String, Arc<Job>>,
    queue: VecDeque<Arc<Job>>,
    /// Callers blocked in `module` (bounded by CONCURRENCY).
    waiting: usize,
    shutdown: bool,
}

struct Job {
    digest: String,
    artifact: Mutex<Option<Vec<u8>>>,
    progress: Mutex<Progress>,
    done: Condvar,
}

#[derive(Default)]
struct Progress {
    /// Callers still waiting for this job.
    waiters: usize,
    outcome: Option<Outcome>,
}

/// Poisoning only means another thread panicked while holding the lock; the protected data
/// is still consistent for our purposes (counters and queues), so go on with it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Compiler {
    /// Whether `digest` is in the cache (does not refresh its recency).
    pub fn is_cached(&self, digest: &str) -> bool {
        lock(&self.state).cache.iter().any(|(d, _)| d == digest)
    }

    /// Asks the worker to stop after its current compile.
    pub fn shut_down(&self) {
        lock(&self.state).shutdown = true;
        self.work.notify_all();
    }
}

/// The cached module (and `true`: a cache hit), or a compile by the worker waited for until
/// `deadline`.
pub(super) fn module(
    shared: &Shared,
    digest: &str,
    artifact: &[u8],
    deadline: Option<Instant>,
) -> (Outcome, bool) {
    let compiler = &shared.compiler;
    let job = {
        let mut state = lock(&compiler.state);
        if let Some(at) = state.cache.iter().position(|(d, _)| d == digest) {
            // Move to the back: most recently used.
            let Some(entry) = state.cache.remove(at) else {
                return (Err(lost()), false);
            };
            let module = entry.1.clone();
            state.cache.push_back(entry);
            bump(&shared.counters.compile_cache_hits);
            return (Ok(module), true);
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return (Err(timeout()), false);
        }
        if state.waiting >= shared.config.concurrency {
            return (
                Err(Diagnostic::new(
                    Code::Busy,
                    format!(
                        "{} plugin compiles are already waiting (CONCURRENCY)",
                        state.waiting
                    ),
                )),
                false,
            );
        }
        state.waiting += 1;
        match state.inflight.get(digest) {
            Some(job) => {
                lock(&job.progress).waiters += 1;
                job.clone()
            }
            None => {
                let job = Arc::new(Job {
                    digest: digest.to_string(),
                    artifact: Mutex::new(Some(artifact.to_vec())),
                    progress: Mutex::new(Progress {
                        waiters: 1,
                        ..Progress::default()
                    }),
                    done: Condvar::new(),
                });
                state.inflight.insert(digest.to_string(), job.clone());
                state.queue.push_back(job.clone());
                compiler.work.notify_one();
                job
            }
        }
    };

    let outcome = {
        let mut progress = lock(&job.progress);
        loop {
            if let Some(outcome) = &progress.outcome {
                break outcome.clone();
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
                        // Giving up under the job's lock: the worker decides "cache or drop"
                        // under the same lock, so it sees this caller either waiting or gone.
                        progress.waiters -= 1;
                        break Err(timeout());
                    }
                    progress = job
                        .done
                        .wait_timeout(progress, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    };
    lock(&compiler.state).waiting -= 1;
    (outcome, false)
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
        let job = {
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
                // this check and its removal from `inflight`.
                if lock(&job.progress).waiters == 0 {
                    forget(&mut state, &job);
                    bump(&shared.counters.compiles_skipped);
                    continue;
                }
                break job;
            }
        };
        let artifact = lock(&job.artifact).take().unwrap_or_default();
        // A panic inside the compiler must not take the only worker down with it (every later
        // compile would wait forever); the module is then reported as not compilable.
        let outcome =
            std::panic::catch_unwind(AssertUnwindSafe(|| build(&shared, &job.digest, &artifact)))
                .unwrap_or_else(|_| {
                    Err(Diagnostic::new(
                        Code::Artifact,
                        "the module could not be compiled",
                    ))
                })
                .map(Arc::new);
        drop(artifact);
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
            if shared.config.cache_entries > 0 {
                state.cache.retain(|(digest, _)| digest != &job.digest);
                state.cache.push_back((job.digest.clone(), module.clone()));
                while state.cache.len() > shared.config.cache_entries {
                    if let Some((digest, _)) = state.cache.pop_front() {
                        evicted.push(digest);
                    }
                }
            }
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
