//! The interpreter thread, its job queue and the watchdog (P-5, P-12, P-23).
//!
//! One thread owns CPython. Callers push jobs on a queue and wait on a oneshot reply; the
//! thread attaches to the interpreter only while it runs a job, so it never waits for work while
//! holding it. The watchdog times every hook step: past its deadline it raises `HookTimeout`
//! into the thread (`PyThreadState_SetAsyncExc`, from a helper thread, because it needs the
//! interpreter lock, which a hook stuck in C code may never give up); if the thread is still in
//! that step a grace period later, the host is wedged: the waiting callers are answered at once
//! and every later call bypasses the plugins.
//!
//! This module holds the host's handle and the callers' side: queueing a job and waiting for
//! its reply. The thread's loop (`thread`), the watchdog (`watchdog`), loading an epoch
//! (`load`), running a hook over its files (`pipeline`), freeing a released one (`release`),
//! the host's own Python (`guard`), the conversions between plain data and Python objects
//! (`convert`) and a Python error as text (`traceback`) are its submodules.

mod convert;
mod guard;
mod load;
mod pipeline;
mod release;
mod thread;
mod traceback;
mod watchdog;

use crate::hookset::{Hook, HookClass};
use crate::{EpochData, HostConfig, HostError, Outcome, ReleaseFault, SearchPage};
use pyo3::prelude::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a caller, and the interpreter thread between jobs, wait actively before sleeping.
const SPIN: Duration = Duration::from_micros(50);
/// How long the interpreter thread waits actively for a job announced by
/// [`Interpreter::expect`] before it sleeps.
const EXPECT_SPIN: Duration = Duration::from_millis(1);
/// Stack of the interpreter thread and of threads plugins start. CPython 3.11 checks only its
/// recursion limit, not the C stack: recursion through C code (`sorted(key=...)`, `map`,
/// `functools.reduce`, `__eq__`) costs C stack for every Python frame. Measured with Debian's
/// 3.11 at the limit of 1000: `sorted(key=...)` needs about 2.5 MiB (so the default 2 MiB
/// thread stack overflowed and aborted the process before `RecursionError`), `map` 0.7 MiB,
/// `reduce` and `__eq__` 0.3 MiB. 64 MiB leaves a wide margin for heavier C paths; only the
/// pages touched are ever committed.
const INTERPRETER_STACK: usize = 64 * 1024 * 1024;

enum Work {
    Load {
        config: HostConfig,
        epoch: u64,
    },
    Run {
        epoch: Arc<EpochData>,
        hook: Hook,
        payload: Payload,
        only: Option<usize>,
    },
    Release(u64),
}

impl Work {
    fn into_payload(self) -> Option<Value> {
        match self {
            Work::Run { mut payload, .. } => Some(payload.take_value()),
            Work::Load { .. } | Work::Release(_) => None,
        }
    }
}

/// What a run job hands the hooks.
pub(crate) enum Payload {
    /// Plain data, converted to Python objects as it is.
    Value(Value),
    /// A search page: converted to Python objects directly, and made a [`Value`] only when a
    /// hook returns a result to check against it (a pipeline of hooks that all return None
    /// never builds one).
    Search(SearchPage),
}

impl Payload {
    /// The plain-data payload, taken out (`Null` for a search page, which stays).
    fn take_value(&mut self) -> Value {
        match self {
            Payload::Value(value) => std::mem::take(value),
            Payload::Search(_) => Value::Null,
        }
    }
}

/// Answers every job still queued as bypassed, with its payload.
fn bypass(jobs: impl Iterator<Item = Job>) {
    for job in jobs {
        if let Some(reply) = job.reply {
            let _ = reply.send(Reply::Bypassed(job.work.into_payload()));
        }
    }
}

enum Reply {
    Loaded(Result<EpochData, HostError>),
    Ran(Outcome),
    /// The host wedged or stopped: the job did not run (its payload, if it had not started).
    Bypassed(Option<Value>),
}

struct Job {
    work: Work,
    reply: Option<oneshot::Sender<Reply>>,
    /// A call-scoped hook's deadline on getting the interpreter (queue wait and interpreter
    /// lock): past it the call is answered as without plugins (`Interpreter::wait_timeouts`).
    start_by: Option<Instant>,
}

/// The hook step being timed.
struct Watched {
    seq: u64,
    deadline: Instant,
    interrupted_at: Option<Instant>,
    what: String,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// The reply of the job running now (the watchdog answers it when the host wedges).
    in_flight: Option<oneshot::Sender<Reply>>,
    step: Option<Watched>,
    seq: u64,
    wedged: Option<String>,
    /// The host was dropped: both threads end.
    stopped: bool,
    /// Until when a job announced by [`Interpreter::expect`] is awaited actively.
    expected_until: Option<Instant>,
    /// Since when jobs have been waiting while none ran. Past the hook limit and its grace,
    /// the interpreter thread cannot get the interpreter (a plugin thread holds it in C
    /// code): a reload waiting for it is then answered [`HostError::Busy`] instead of
    /// blocking its caller for as long as the plugin thread wants.
    stalled_since: Option<Instant>,
}

/// Hosts started in this process so far: the number of the next one.
static HOSTS: AtomicU64 = AtomicU64::new(0);

/// The interpreter thread's handle, shared by every epoch of the host.
pub(crate) struct Interpreter {
    /// This host's number in the process. Hosts share the one interpreter and its
    /// `sys.modules`: the modules of one host's epoch are named apart from another's, so
    /// releasing an epoch never drops another host's modules (or runs their `__del__`).
    id: u64,
    queue: Mutex<Queue>,
    work: Condvar,
    watch: Condvar,
    grace: Duration,
    timeout: Duration,
    /// `PyThread_get_thread_ident` of the interpreter thread.
    ident: OnceLock<std::os::raw::c_ulong>,
    /// The `HookTimeout` exception class raised into an overrunning hook.
    timeout_class: OnceLock<Py<PyAny>>,
    /// The `ReleaseWatch` class: names the finalizers interrupted while a file is released.
    release_watch: OnceLock<Py<PyAny>>,
    /// The latest epoch released, and what overran the limit while it was (by file).
    release_faults: Mutex<(u64, BTreeMap<String, ReleaseFault>)>,
    /// Set together with `Queue::wedged`: every call checks it, without the queue's lock.
    is_wedged: AtomicBool,
    /// Jobs in `Queue::jobs`, readable without the lock (the thread's spin before it sleeps).
    queued: AtomicUsize,
    /// Calls answered without plugins because the interpreter was not theirs in time.
    wait_timeouts: AtomicU64,
}

impl std::fmt::Debug for Interpreter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interpreter").finish_non_exhaustive()
    }
}

/// Lets an epoch free its Python objects (on the interpreter thread) when its last call ends.
#[derive(Debug)]
pub(crate) struct Releaser(Weak<Interpreter>);

impl Releaser {
    pub(crate) fn release(&self, epoch: u64) {
        if let Some(interpreter) = self.0.upgrade() {
            interpreter.submit(Work::Release(epoch), None);
        }
    }
}

fn lock(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Python-side state of one epoch: the loaded modules and their hook functions.
struct PyFile {
    /// The plugin file's name.
    file: String,
    module_name: String,
    hooks: HashMap<Hook, Py<PyAny>>,
}

impl Interpreter {
    /// Starts the interpreter thread and the watchdog.
    pub(crate) fn start(config: &HostConfig) -> Result<Arc<Self>, String> {
        let interpreter = Arc::new(Interpreter {
            id: HOSTS.fetch_add(1, Ordering::Relaxed) + 1,
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            watch: Condvar::new(),
            grace: config.wedge_grace,
            timeout: config.hook_timeout,
            ident: OnceLock::new(),
            timeout_class: OnceLock::new(),
            release_watch: OnceLock::new(),
            release_faults: Mutex::new((0, BTreeMap::new())),
            is_wedged: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            wait_timeouts: AtomicU64::new(0),
        });
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = interpreter.clone();
        std::thread::Builder::new()
            .name("csg-python".into())
            .stack_size(INTERPRETER_STACK)
            .spawn(move || thread.main(ready_tx))
            .map_err(|e| format!("the Python thread did not start: {e}"))?;
        ready_rx
            .recv()
            .map_err(|_| "the Python interpreter did not start".to_owned())??;
        let watchdog = Arc::downgrade(&interpreter);
        std::thread::Builder::new()
            .name("csg-python-watchdog".into())
            .spawn(move || watchdog::watchdog_loop(watchdog))
            .map_err(|e| format!("the Python watchdog did not start: {e}"))?;
        Ok(interpreter)
    }

    /// Ends the interpreter thread and the watchdog (the host is gone). Queued jobs still
    /// waiting are answered as wedged, which callers treat as "no plugins".
    pub(crate) fn stop(&self) {
        let waiting: Vec<Job> = {
            let mut queue = lock(&self.queue);
            queue.stopped = true;
            queue.jobs.drain(..).collect()
        };
        self.work.notify_all();
        self.watch.notify_all();
        bypass(waiting.into_iter());
    }

    /// The wedge reason, when wedged.
    pub(crate) fn wedged(&self) -> Option<String> {
        if !self.is_wedged.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.queue).wedged.clone()
    }

    /// Calls answered as without plugins because they did not get the interpreter within
    /// their deadline (a long job ahead of them, or a plugin thread holding the interpreter).
    pub(crate) fn wait_timeouts(&self) -> u64 {
        self.wait_timeouts.load(Ordering::Relaxed)
    }

    /// Queues a job; answers whether the thread was idle (nothing queued or running).
    fn submit(&self, work: Work, reply: Option<oneshot::Sender<Reply>>) -> bool {
        let mut queue = lock(&self.queue);
        if queue.wedged.is_some() || queue.stopped {
            if let Some(reply) = reply {
                let _ = reply.send(Reply::Bypassed(work.into_payload()));
            }
            return false;
        }
        let idle = queue.jobs.is_empty() && queue.in_flight.is_none();
        if queue.step.is_none() && queue.stalled_since.is_none() {
            queue.stalled_since = Some(Instant::now());
        }
        // Only a call waits for its answer: the dry-run (`only`), derived-state hooks (an
        // index build needs every file run), loads and releases have no deadline to start.
        let start_by = match &work {
            Work::Run {
                hook, only: None, ..
            } if hook.class() == HookClass::CallScoped => Some(Instant::now() + self.timeout),
            _ => None,
        };
        // A call goes ahead of the index build's queued files (issue 29 point 12): a build
        // runs one file per job, so a call waits for at most the file running now, never for
        // the files every build thread has queued behind it.
        let at = if start_by.is_some() {
            queue
                .jobs
                .iter()
                .position(|job| {
                    matches!(&job.work, Work::Run { hook, .. } if hook.class() == HookClass::DerivedState)
                })
                .unwrap_or(queue.jobs.len())
        } else {
            queue.jobs.len()
        };
        queue.jobs.insert(
            at,
            Job {
                work,
                reply,
                start_by,
            },
        );
        self.queued.fetch_add(1, Ordering::AcqRel);
        drop(queue);
        self.work.notify_one();
        idle
    }

    /// Announces a job that will come soon (a search whose results a hook will see): a
    /// sleeping interpreter thread wakes now and waits for it actively, so the job does not
    /// pay for waking the thread after the search. The wait is bounded ([`EXPECT_SPIN`]) and
    /// yields the core to other threads.
    pub(crate) fn expect(&self) {
        let mut queue = lock(&self.queue);
        if queue.wedged.is_some() || queue.stopped {
            return;
        }
        queue.expected_until = Some(Instant::now() + EXPECT_SPIN);
        drop(queue);
        self.work.notify_one();
    }

    fn ask(&self, work: Work) -> oneshot::Receiver<Reply> {
        self.ask_idle(work).0
    }

    fn ask_idle(&self, work: Work) -> (oneshot::Receiver<Reply>, bool) {
        let (tx, rx) = oneshot::channel();
        let idle = self.submit(work, Some(tx));
        (rx, idle)
    }

    /// Loads the directory into epoch `epoch` (blocking).
    pub(crate) fn load(
        self: &Arc<Self>,
        config: &HostConfig,
        epoch: u64,
    ) -> Result<EpochData, HostError> {
        let rx = self.ask(Work::Load {
            config: config.clone(),
            epoch,
        });
        match rx.blocking_recv() {
            Ok(Reply::Loaded(result)) => result.map(|mut data| {
                data.release = Some(Releaser(Arc::downgrade(self)));
                data
            }),
            Ok(Reply::Bypassed(_)) => Err(HostError::Wedged(self.wedged().unwrap_or_default())),
            Ok(Reply::Ran(_)) | Err(_) => {
                Err(HostError::Unavailable("the Python thread stopped".into()))
            }
        }
    }

    /// The outcome of a run job. A bypassed one (the host wedged or stopped before or while
    /// it ran) changes nothing; its payload comes back when the job had not started yet.
    fn outcome(reply: Result<Reply, oneshot::error::RecvError>) -> Outcome {
        match reply {
            Ok(Reply::Ran(outcome)) => outcome,
            Ok(Reply::Bypassed(payload)) => Outcome::unchanged(payload.unwrap_or(Value::Null)),
            Ok(Reply::Loaded(_)) | Err(_) => Outcome::unchanged(Value::Null),
        }
    }

    /// Runs `hook` over the epoch's files. The payload moves into the job: it is not copied.
    pub(crate) async fn run(&self, epoch: Arc<EpochData>, hook: Hook, payload: Payload) -> Outcome {
        match self.ask_spinning(epoch, hook, payload) {
            Ok(outcome) => outcome,
            Err(rx) => Self::outcome(rx.await),
        }
    }

    /// Asks for a pipeline run and waits for its answer actively for a moment: a pipeline
    /// usually answers within tens of microseconds, less than parking and waking the caller's
    /// thread costs on a small machine. Behind other jobs the wait would be long: the
    /// receiver comes back at once for the caller to block on.
    fn ask_spinning(
        &self,
        epoch: Arc<EpochData>,
        hook: Hook,
        payload: Payload,
    ) -> Result<Outcome, oneshot::Receiver<Reply>> {
        let (mut rx, idle) = self.ask_idle(Work::Run {
            epoch,
            hook,
            payload,
            only: None,
        });
        let until = Instant::now() + if idle { SPIN } else { Duration::ZERO };
        loop {
            match rx.try_recv() {
                Ok(reply) => return Ok(Self::outcome(Ok(reply))),
                Err(oneshot::error::TryRecvError::Empty) if Instant::now() < until => {
                    std::hint::spin_loop();
                }
                Err(_) => return Err(rx),
            }
        }
    }

    pub(crate) fn run_blocking(
        &self,
        epoch: Arc<EpochData>,
        hook: Hook,
        payload: Payload,
    ) -> Outcome {
        match self.ask_spinning(epoch, hook, payload) {
            Ok(outcome) => outcome,
            Err(rx) => Self::outcome(rx.blocking_recv()),
        }
    }

    /// Runs one file's hook alone (the dry-run); `None` when it ran and its result is valid.
    pub(crate) fn run_single(
        &self,
        epoch: &Arc<EpochData>,
        file: usize,
        hook: Hook,
        payload: Value,
    ) -> Option<String> {
        let rx = self.ask(Work::Run {
            epoch: epoch.clone(),
            hook,
            payload: Payload::Value(payload),
            only: Some(file),
        });
        match rx.blocking_recv() {
            Ok(Reply::Ran(outcome)) => outcome.failures.first().map(|f| f.message.clone()),
            Ok(_) | Err(_) => Some("the plugin host is wedged".into()),
        }
    }
}
