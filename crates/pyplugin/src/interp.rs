//! The interpreter thread, its job queue and the watchdog (P-5, P-12, P-23).
//!
//! One thread owns CPython. Callers push jobs on a queue and wait on a oneshot reply; the
//! thread attaches to the interpreter only while it runs a job, so it never waits for work while
//! holding it. The watchdog times every hook step: past its deadline it raises `HookTimeout`
//! into the thread (`PyThreadState_SetAsyncExc`, from a helper thread, because it needs the
//! interpreter lock, which a hook stuck in C code may never give up); if the thread is still in
//! that step a grace period later, the host is wedged: the waiting callers are answered at once
//! and every later call bypasses the plugins.

use crate::ToolCatalog;
use crate::hookset::{self, Applied, Hook, HookClass};
use crate::names::{self, Binding};
use crate::tables::{self, FileTables, Tables};
use crate::{EpochData, Failure, FileStatus, HostConfig, HostError, MAX_FILE_BYTES, Outcome};
use crate::{Rejection, ReleaseFault, SearchPage, startup_payload};
use pyo3::exceptions::PyException;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyModule, PyString, PyTuple};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::oneshot;

/// Deepest nesting a returned value may have.
const MAX_DEPTH: usize = 64;
/// How long a caller, and the interpreter thread between jobs, wait actively before sleeping.
const SPIN: Duration = Duration::from_micros(50);
/// How long the interpreter thread looks for the next job before it sleeps.
const IDLE_SPIN: Duration = Duration::from_micros(100);
/// How long the interpreter thread waits actively for a job announced by
/// [`Interpreter::expect`] before it sleeps.
const EXPECT_SPIN: Duration = Duration::from_millis(1);
/// Most values (of any kind) in one returned value.
const MAX_NODES: usize = 1_000_000;
/// Most bytes of strings in one returned value.
const MAX_STRING_BYTES: usize = 32 * 1024 * 1024;
/// Most [`ReleaseFault`]s on record.
const MAX_RELEASE_FAULTS: usize = 64;
/// Most bytes of a failure message (a traceback): an exception over a huge object must not
/// fill the status and the log.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;
/// The recursion limit set on the interpreter, and the most a plugin may raise it to.
const RECURSION_LIMIT: u32 = 1000;
/// Stack of the interpreter thread and of threads plugins start. CPython 3.11 checks only its
/// recursion limit, not the C stack: recursion through C code (`sorted(key=...)`, `map`,
/// `functools.reduce`, `__eq__`) costs C stack for every Python frame. Measured with Debian's
/// 3.11 at the limit of 1000: `sorted(key=...)` needs about 2.5 MiB (so the default 2 MiB
/// thread stack overflowed and aborted the process before `RecursionError`), `map` 0.7 MiB,
/// `reduce` and `__eq__` 0.3 MiB. 64 MiB leaves a wide margin for heavier C paths; only the
/// pages touched are ever committed.
const INTERPRETER_STACK: usize = 64 * 1024 * 1024;

/// The host's own Python, run once when the interpreter thread starts: the `HookTimeout`
/// exception and `install`, which scrubs secrets from the plugins' view of the environment
/// (P-11) and replaces what would end, signal or overflow the server process with functions
/// that raise `PluginForbidden` (documented in `plugin_api.py`).
const GUARD: &std::ffi::CStr = cr##"
import _thread
import faulthandler
import os
import posix
import re
import signal
import sys

try:
    import _signal
except ImportError:
    _signal = None
try:
    import resource
except ImportError:
    resource = None


class HookTimeout(BaseException):
    """Raised into a hook that overran its time limit."""


class PluginForbidden(RuntimeError):
    """Raised into a plugin that calls what would end, signal or stall the server process."""


class ReleaseWatch:
    """While this thread frees objects of a released epoch: the finalizers (`__del__`) that
    this host's HookTimeout interrupted, as (qualified name, file of its code), as
    `sys.unraisablehook` (installed once per process, shared by every host's thread) reports
    them."""

    def __init__(self):
        self.timeout = HookTimeout
        self.interrupted = []
        self.thread = _thread.get_ident()
        sys._csg_release_watches[self.thread] = self

    def close(self):
        sys._csg_release_watches.pop(self.thread, None)


_SECRET_NAME = re.compile("TOKEN|SECRET|PASSWORD|KEY", re.IGNORECASE)
# scheme://userinfo@ : a user and password (or a token as the user) in a URL.
_URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*@")


def _secret(name, value):
    name, value = os.fsdecode(name), os.fsdecode(value)
    return bool(_SECRET_NAME.search(name) or _URL_CREDENTIALS.search(value))


def _scrub_environ():
    # Only the interpreter's copies: deleting through os.environ would unsetenv() the variable
    # in the server process, which still needs it. os.environb shares os.environ's dict.
    for mapping in (os.environ._data, posix.environ):
        for key in [k for k, v in mapping.items() if _secret(k, v)]:
            del mapping[key]


def _refuse(what, why):
    raise PluginForbidden(f"{what} is not available to server plugins: {why}")


def _forbid(module, names, why):
    for name in names:
        if hasattr(module, name):
            def refused(*args, _what=f"{module.__name__}.{name}", **kwargs):
                _refuse(_what, why)
            refused.__name__ = refused.__qualname__ = name
            setattr(module, name, refused)


def install(recursion_limit, thread_stack):
    """Makes the interpreter safe to hand to plugins; once per process (hosts share it)."""
    if getattr(sys, "_csg_guarded", False):
        return
    sys._csg_guarded = True
    sys._csg_release_watches = {}
    reported = sys.unraisablehook
    function_type = type(install)

    def unraisablehook(unraisable, /):
        watch = sys._csg_release_watches.get(_thread.get_ident())
        if watch is not None and unraisable.exc_type is watch.timeout:
            what = unraisable.object
            # Only a plain function's names: reading them runs no plugin code.
            if type(what) is function_type:
                watch.interrupted.append((str.__str__(what.__qualname__),
                                          str.__str__(what.__code__.co_filename)))
        reported(unraisable)

    sys.unraisablehook = unraisablehook
    sys.setrecursionlimit(recursion_limit)
    _thread.stack_size(thread_stack)
    _scrub_environ()

    getpid, getpgid = os.getpid, os.getpgid
    host_pid = getpid()

    def in_host():
        # A child a plugin forked (multiprocessing) may still exit or exec itself.
        return getpid() == host_pid

    def own_group(group):
        try:
            return group == getpgid(0)
        except OSError:
            return False

    real_exit, real_abort, real_kill = os._exit, os.abort, os.kill
    real_killpg = getattr(os, "killpg", None)

    def _exit(status):
        if in_host():
            _refuse("os._exit", "it would end the server process; raise an exception instead")
        real_exit(status)

    def abort():
        if in_host():
            _refuse("os.abort", "it would end the server process")
        real_abort()

    def kill(pid, sig, /):
        # 0: this process's group; -1: every process it may signal; -N: group N.
        if (in_host() and isinstance(pid, int) and sig != 0
                and (pid in (0, -1, host_pid) or (pid < -1 and own_group(-pid)))):
            _refuse(f"os.kill({pid}, {sig})", "it would signal the server process")
        return real_kill(pid, sig)

    def killpg(pgid, sig, /):
        if in_host() and isinstance(pgid, int) and sig != 0 and (pgid == 0 or own_group(pgid)):
            _refuse(f"os.killpg({pgid}, {sig})", "it would signal the server's process group")
        return real_killpg(pgid, sig)

    replaced = {"_exit": _exit, "abort": abort, "kill": kill}
    if real_killpg is not None:
        replaced["killpg"] = killpg
    for name in ("execv", "execve"):
        real = getattr(os, name, None)
        if real is None:
            continue

        def exec_(*args, _real=real, _name=name):
            if in_host():
                _refuse(f"os.{_name}", "it would replace the server process")
            return _real(*args)

        replaced[name] = exec_
    for name, function in replaced.items():
        function.__name__ = function.__qualname__ = name
        setattr(os, name, function)
        if hasattr(posix, name):
            setattr(posix, name, function)

    signals = "it would change or send the server process's signals"
    for module in (signal, _signal):
        if module is not None:
            _forbid(module, ("signal", "raise_signal", "pthread_kill", "alarm", "setitimer",
                             "siginterrupt"), signals)
    _forbid(_thread, ("interrupt_main",), signals)
    _forbid(faulthandler, ("register", "_sigsegv", "_sigabrt", "_sigfpe", "_fatal_error",
                           "_fatal_error_c_thread", "_stack_overflow", "_read_null"),
            "it would crash the server or take over its signals")
    real_later = faulthandler.dump_traceback_later

    def dump_traceback_later(timeout, repeat=False, file=sys.__stderr__, exit=False):
        if exit:
            _refuse("faulthandler.dump_traceback_later(exit=True)",
                    "it would end the server process")
        return real_later(timeout, repeat, file, exit)

    faulthandler.dump_traceback_later = dump_traceback_later
    if resource is not None:
        _forbid(resource, ("setrlimit", "prlimit"), "it would change the server process's limits")

    real_recursion = sys.setrecursionlimit

    def setrecursionlimit(limit, /):
        if isinstance(limit, int) and limit > recursion_limit:
            _refuse(f"sys.setrecursionlimit({limit})",
                    f"the interpreter's stack is sized for a limit of {recursion_limit}")
        real_recursion(limit)

    real_switch = sys.setswitchinterval
    switch = sys.getswitchinterval()

    def setswitchinterval(interval, /):
        if interval > switch:
            _refuse(f"sys.setswitchinterval({interval})",
                    f"a plugin thread would hold the interpreter for longer than {switch} s")
        real_switch(interval)

    real_stack = _thread.stack_size

    def stack_size(size=0, /):
        if size and size < thread_stack:
            _refuse(f"threading.stack_size({size})",
                    f"threads need at least {thread_stack} bytes of stack for the recursion limit")
        return real_stack(size) if size else real_stack()

    sys.setrecursionlimit = setrecursionlimit
    sys.setswitchinterval = setswitchinterval
    _thread.stack_size = stack_size
    threading = sys.modules.get("threading")
    if threading is not None:
        threading.stack_size = stack_size
"##;

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
            .spawn(move || watchdog_loop(watchdog))
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

    // ---- the interpreter thread ----

    fn main(self: Arc<Self>, ready: std::sync::mpsc::Sender<Result<(), String>>) {
        Python::initialize();
        let started = Python::attach(|py| -> PyResult<()> {
            // No bytecode caches anywhere: plugins are compiled from bytes, and an import a
            // plugin makes must not leave `__pycache__` in the operator's directory.
            let sys = py.import("sys")?;
            sys.setattr("dont_write_bytecode", true)?;
            // `csg mcp` speaks MCP on stdout: a plugin's print() must not corrupt it.
            sys.setattr("stdout", sys.getattr("stderr")?)?;
            let host = PyModule::new(py, "_csg_host")?;
            py.run(GUARD, Some(&host.dict()), None)?;
            // Before any plugin code runs (P-11, P-23): secrets out of os.environ, the
            // recursion limit the stack is sized for, nothing that ends or signals the process.
            host.getattr("install")?
                .call1((RECURSION_LIMIT, INTERPRETER_STACK))?;
            let class = host.getattr("HookTimeout")?;
            let _ = self.timeout_class.set(class.unbind());
            let _ = self
                .release_watch
                .set(host.getattr("ReleaseWatch")?.unbind());
            let _ = self.ident.set(unsafe { ffi::PyThread_get_thread_ident() });
            Ok(())
        });
        let started = started.map_err(|e| Python::attach(|py| describe(py, &e)));
        let failed = started.is_err();
        let _ = ready.send(started);
        if failed {
            return;
        }
        let mut epochs: HashMap<u64, Vec<PyFile>> = HashMap::new();
        // Attached for the thread's whole life, detached only while it waits for work: the
        // thread keeps one thread state instead of creating and deleting one per job.
        Python::attach(|py| {
            // A job stays queued until the thread holds the interpreter again, so a call
            // whose deadline passes meanwhile (a plugin thread holding the interpreter) can
            // still be answered, with its payload, by the watchdog.
            while py.detach(|| self.wait_for_job()) {
                let Some((job, what)) = self.pop_job() else {
                    continue;
                };
                // The whole job is one watched step, so host-side Python (conversions, a
                // `__del__` that a collection runs, formatting an exception) is under the
                // watchdog and the wedge rule too; each hook call and each file's load is
                // a step of its own inside it.
                let (reply, _) = self.timed(what, || self.run_job(py, job, &mut epochs));
                let sender = {
                    let mut queue = lock(&self.queue);
                    queue.stalled_since = (!queue.jobs.is_empty()).then(Instant::now);
                    queue.in_flight.take()
                };
                if let (Some(sender), Some(reply)) = (sender, reply) {
                    let _ = sender.send(reply);
                }
            }
        });
    }

    /// Runs one job; the reply to send, if the job has a caller.
    fn run_job(
        &self,
        py: Python<'_>,
        job: Work,
        epochs: &mut HashMap<u64, Vec<PyFile>>,
    ) -> Option<Reply> {
        match job {
            Work::Load { config, epoch } => {
                let (data, files) = self.load_epoch(py, &config, epoch);
                if let Ok(data) = &data
                    && let Some(files) = files
                {
                    epochs.insert(epoch, files);
                    self.startup(py, data, &epochs[&epoch], &config);
                }
                Some(Reply::Loaded(data))
            }
            Work::Run {
                epoch,
                hook,
                mut payload,
                only,
            } => {
                let outcome = match epochs.get(&epoch.number) {
                    Some(files) => self.pipeline(py, &epoch, files, hook, &mut payload, only),
                    None => Outcome::unchanged(payload.take_value()),
                };
                // What the job leaves behind is freed after its caller has the answer.
                let sender = lock(&self.queue).in_flight.take();
                if let Some(sender) = sender {
                    let _ = sender.send(Reply::Ran(outcome));
                }
                drop(payload);
                None
            }
            Work::Release(epoch) => {
                if let Some(files) = epochs.remove(&epoch) {
                    self.release(py, epoch, files);
                }
                None
            }
        }
    }

    /// Frees a released epoch's Python objects, each step watched (P-23): each file's module
    /// and hooks in a step of its own (what that frees directly is put down to the file),
    /// then one collection for the reference cycles they leave (put down to the file that
    /// defines the interrupted finalizer). A step the watchdog interrupted is recorded for
    /// `plugin_status` ([`ReleaseFault`]).
    fn release(&self, py: Python<'_>, epoch: u64, files: Vec<PyFile>) {
        let names: Vec<String> = files.iter().map(|file| file.file.clone()).collect();
        let mut faults = Vec::new();
        for PyFile {
            file,
            module_name,
            hooks,
        } in files
        {
            let what = format!("{file} (its objects, freed as epoch {epoch} was released)");
            let (finalizer, interrupted) = self.watching_release(py, what, || {
                if let Ok(modules) = py.import("sys").and_then(|sys| sys.getattr("modules")) {
                    let _ = modules.del_item(module_name.as_str());
                }
                drop(hooks);
            });
            if interrupted {
                let what = finalizer.map(|(function, _)| function);
                faults.push(release_fault(file, what, epoch, self.timeout));
            }
        }
        // The objects are freed now, while a step is watched, rather than by a collection in
        // the middle of some later call. One collection for the whole epoch: each costs a
        // walk of every object of the interpreter.
        let what = format!("the objects epoch {epoch} left in reference cycles (a collection)");
        let (finalizer, interrupted) = self.watching_release(py, what, || {
            let _ = py.import("gc").and_then(|gc| gc.call_method0("collect"));
        });
        if interrupted {
            let (file, what) = match finalizer {
                Some((function, file)) if names.contains(&file) => (file, Some(function)),
                other => (files_named(&names), other.map(|(function, _)| function)),
            };
            faults.push(release_fault(file, what, epoch, self.timeout));
        }
        for fault in &faults {
            tracing::warn!(file = %fault.file, epoch, reason = %fault.reason, "server plugin code interrupted while its epoch was released");
        }
        let mut record = self
            .release_faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if epoch > record.0 {
            // The latest release says how the files are now: older faults are history.
            *record = (epoch, BTreeMap::new());
        }
        for fault in faults {
            if record.1.len() < MAX_RELEASE_FAULTS {
                record.1.entry(fault.file.clone()).or_insert(fault);
            }
        }
    }

    /// Runs `free` as a watched step named `what`, noting the finalizer (`__del__`) the
    /// watchdog interrupted in it, if any: its qualified name and the file its code is in.
    fn watching_release(
        &self,
        py: Python<'_>,
        what: String,
        free: impl FnOnce(),
    ) -> (Option<(String, String)>, bool) {
        self.timed(what, || {
            let watch = self
                .release_watch
                .get()
                .and_then(|class| class.bind(py).call0().ok());
            free();
            let watch = watch?;
            let _ = watch.call_method0("close");
            let interrupted = watch.getattr("interrupted").ok()?;
            let mut found = interrupted.extract::<Vec<(String, String)>>().ok()?;
            // One interrupt per step: at most one finalizer.
            found.pop()
        })
    }

    /// The files with a [`ReleaseFault`] on record, in file-name order.
    pub(crate) fn release_faults(&self) -> Vec<ReleaseFault> {
        self.release_faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .values()
            .cloned()
            .collect()
    }

    /// Waits until a job is queued; `false` once the host is wedged or stopped.
    fn wait_for_job(&self) -> bool {
        // Calls often come in bursts: look for the next one for a moment before sleeping,
        // so it does not pay for waking this thread.
        let until = Instant::now() + IDLE_SPIN;
        while self.queued.load(Ordering::Acquire) == 0 && Instant::now() < until {
            std::hint::spin_loop();
        }
        let mut queue = lock(&self.queue);
        loop {
            if queue.wedged.is_some() || queue.stopped {
                return false;
            }
            if !queue.jobs.is_empty() {
                return true;
            }
            match queue.expected_until.take() {
                Some(until) if Instant::now() < until => {
                    drop(queue);
                    // Yielding, not only spinning: on a small machine the search this job
                    // waits for may need this core.
                    while self.queued.load(Ordering::Acquire) == 0 && Instant::now() < until {
                        std::thread::yield_now();
                    }
                    queue = lock(&self.queue);
                }
                _ => {
                    queue = self
                        .work
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }

    /// Takes the next job to run (with the interpreter held), answering those whose deadline
    /// to start has passed as without plugins; with what the job is, for the watchdog.
    fn pop_job(&self) -> Option<(Work, String)> {
        let mut expired = Vec::new();
        let found = {
            let mut queue = lock(&self.queue);
            let now = Instant::now();
            let mut found = None;
            while let Some(job) = queue.jobs.pop_front() {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                if job.start_by.is_some_and(|by| by <= now) {
                    expired.push(job);
                    continue;
                }
                queue.in_flight = job.reply;
                queue.expected_until = None;
                queue.stalled_since = None;
                let what = match &job.work {
                    Work::Load { epoch, .. } => format!("loading epoch {epoch}"),
                    Work::Run { hook, .. } => format!("the host running {}", hook.name()),
                    Work::Release(epoch) => format!("releasing epoch {epoch}"),
                };
                found = Some((job.work, what));
                break;
            }
            found
        };
        // Outside the lock: answering may drop the last handle on an epoch, which queues
        // its release.
        for job in expired {
            self.expire(job);
        }
        found
    }

    /// Answers a call that did not get the interpreter in time as without plugins, and
    /// counts it.
    fn expire(&self, job: Job) {
        self.wait_timeouts.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            limit_ms = self.timeout.as_millis() as u64,
            "a server plugin call did not get the interpreter in time and answers without plugins"
        );
        if let Some(reply) = job.reply {
            let _ = reply.send(Reply::Bypassed(job.work.into_payload()));
        }
    }

    /// The queued loads, taken out of the queue, when no job could start for longer than a
    /// hook may run plus its grace; with how long none could.
    fn stalled_loads(&self) -> Vec<(Job, Duration)> {
        let mut queue = lock(&self.queue);
        let held_for = match queue.stalled_since {
            Some(since) if queue.step.is_none() => since.elapsed(),
            _ => return Vec::new(),
        };
        if held_for < self.timeout + self.grace {
            return Vec::new();
        }
        let (loads, kept): (VecDeque<Job>, VecDeque<Job>) = std::mem::take(&mut queue.jobs)
            .into_iter()
            .partition(|job| matches!(job.work, Work::Load { .. }));
        queue.jobs = kept;
        self.queued.fetch_sub(loads.len(), Ordering::AcqRel);
        loads.into_iter().map(|job| (job, held_for)).collect()
    }

    /// Runs `f` as one timed step (a job, a hook call or a file's load). Answers whether the
    /// watchdog interrupted it. Steps nest: the enclosing step is paused meanwhile and gets a
    /// full time limit again when the inner one ends, so the limit bounds each stretch of work.
    fn timed<R>(&self, what: String, f: impl FnOnce() -> R) -> (R, bool) {
        let outer = {
            let mut queue = lock(&self.queue);
            queue.seq += 1;
            let seq = queue.seq;
            let outer = queue.step.replace(Watched {
                seq,
                deadline: Instant::now() + self.timeout,
                interrupted_at: None,
                what,
            });
            if outer.as_ref().is_some_and(|o| o.interrupted_at.is_some()) {
                // The enclosing step's interrupt may not have hit Python code yet: it must
                // not hit this step's instead.
                self.clear_interrupt();
            }
            outer
        };
        // The watchdog is not woken: it polls at a fraction of the limit (`poll`), so a step
        // costs no thread wake-up.
        let result = f();
        let mut queue = lock(&self.queue);
        let interrupted = queue
            .step
            .take()
            .is_some_and(|step| step.interrupted_at.is_some());
        if interrupted {
            // An interrupt that arrived just as the step ended is still pending: clear it, so
            // it cannot hit the next step. The interpreter lock is held here, and the
            // interrupter checks the step under `queue` while holding it too, so no new one
            // can arrive for this step.
            self.clear_interrupt();
        }
        if let Some(mut outer) = outer {
            queue.seq += 1;
            outer.seq = queue.seq;
            outer.deadline = Instant::now() + self.timeout;
            outer.interrupted_at = None;
            queue.step = Some(outer);
        }
        (result, interrupted)
    }

    /// Drops a `HookTimeout` raised into the interpreter thread and not delivered yet. Only
    /// on the interpreter thread, with the interpreter held.
    fn clear_interrupt(&self) {
        if let Some(ident) = self.ident.get() {
            unsafe { ffi::PyThreadState_SetAsyncExc(*ident as _, std::ptr::null_mut()) };
        }
    }

    fn load_epoch(
        &self,
        py: Python<'_>,
        config: &HostConfig,
        epoch: u64,
    ) -> (Result<EpochData, HostError>, Option<Vec<PyFile>>) {
        let names = match list_plugin_files(&config.directory) {
            Ok(names) => names,
            Err(error) => return (Err(HostError::Directory(error)), None),
        };
        let mut files = Vec::new();
        let mut statuses = Vec::new();
        let mut rejected = Vec::new();
        let mut merged = Tables::default();
        let mut derived = Sha256::new();
        let mut any_derived = false;
        for (index, name) in names.into_iter().enumerate() {
            let source = match read_source(&config.directory.join(&name)) {
                Ok(source) => source,
                Err(reason) => {
                    rejected.push(Rejection {
                        file: name,
                        reasons: vec![reason],
                    });
                    continue;
                }
            };
            let module_name = format!("_csg_plugin_h{}_e{epoch}_{index}", self.id);
            match self.load_file(py, &name, &source, &module_name, &config.tools) {
                Ok((hooks, tables, table_names)) => {
                    if hooks.contains_key(&Hook::SourceFile) {
                        any_derived = true;
                        derived.update(name.as_bytes());
                        derived.update([0]);
                        derived.update(&source);
                        derived.update([0]);
                    }
                    merged.merge(&name, tables);
                    let mut hook_names: Vec<Hook> = hooks.keys().copied().collect();
                    hook_names.sort();
                    statuses.push(FileStatus {
                        file: name.clone(),
                        hooks: hook_names.iter().map(|h| h.name().to_owned()).collect(),
                        tables: table_names,
                        sha256: hex(&Sha256::digest(&source)),
                    });
                    files.push(PyFile {
                        file: name.clone(),
                        module_name,
                        hooks,
                    });
                }
                Err(reasons) => {
                    rejected.push(Rejection {
                        file: name,
                        reasons,
                    });
                }
            }
        }
        let mut defined = [false; Hook::ALL.len()];
        for (i, hook) in Hook::ALL.iter().enumerate() {
            defined[i] = files.iter().any(|f| f.hooks.contains_key(hook));
        }
        let failures = statuses.iter().map(|_| Default::default()).collect();
        let data = EpochData {
            number: epoch,
            loaded_at: SystemTime::now(),
            files: statuses,
            rejected,
            tables: merged,
            derived_fingerprint: if any_derived {
                hex(&derived.finalize())
            } else {
                String::new()
            },
            defined,
            disabled: Mutex::new(Vec::new()),
            failures,
            release: None,
        };
        (Ok(data), Some(files))
    }

    /// Compiles and runs one file into a fresh module, then checks its names (P-4), tables
    /// (P-8) and `REQUIRES` (P-9). `Err` lists every reason to reject it. All of it is one
    /// watched step: besides the top-level code, looking at the names runs plugin code too (a
    /// `__class__` property, a `__signature__`, a table's `__del__`).
    #[allow(clippy::type_complexity)]
    fn load_file(
        &self,
        py: Python<'_>,
        name: &str,
        source: &[u8],
        module_name: &str,
        catalog: &ToolCatalog,
    ) -> Result<(HashMap<Hook, Py<PyAny>>, FileTables, Vec<String>), Vec<String>> {
        let (loaded, interrupted) = self.timed(format!("{name} (loading)"), || {
            let loaded = self.load_module(py, name, source, module_name, catalog);
            // Whatever the check leaves (the module on a rejection, the objects it made) is
            // freed inside the step: a `__del__` runs under the watchdog.
            loaded.map_err(|error| {
                let reasons = error.into_reasons(py, name);
                let _ = py
                    .import("sys")
                    .and_then(|s| s.getattr("modules"))
                    .and_then(|m| m.del_item(module_name));
                reasons
            })
        });
        if interrupted {
            return Err(vec![format!(
                "{name}: loading it (its top-level code, or the names it defines as the host \
                 inspected them) ran longer than the {} ms time limit and was interrupted",
                self.timeout.as_millis()
            )]);
        }
        loaded
    }

    #[allow(clippy::type_complexity)]
    fn load_module(
        &self,
        py: Python<'_>,
        name: &str,
        source: &[u8],
        module_name: &str,
        catalog: &ToolCatalog,
    ) -> Result<(HashMap<Hook, Py<PyAny>>, FileTables, Vec<String>), LoadError> {
        let builtins = py.import("builtins")?;
        let module = PyModule::new(py, module_name)?;
        module.setattr("__file__", name)?;
        // Registered under a name of this load only (never reused), because `dataclasses`
        // and friends look a class's module up in `sys.modules` while the file runs.
        py.import("sys")?
            .getattr("modules")?
            .set_item(module_name, &module)?;
        // Compiled from the file's bytes, as CPython compiles a file: a UTF-8 BOM and a PEP 263
        // coding cookie are honoured, and bytes that are not valid in the declared (or the
        // default UTF-8) encoding are a SyntaxError naming the line.
        let code = builtins.getattr("compile")?.call1((
            pyo3::types::PyBytes::new(py, source),
            name,
            "exec",
            0,
            true,
        ))?;
        let (ran, interrupted) = self.timed(format!("{name} (top-level code)"), || {
            builtins
                .getattr("exec")
                .and_then(|exec| exec.call1((code, module.dict())))
        });
        if interrupted {
            return Err(LoadError::Reasons(vec![format!(
                "{name}: its top-level code ran longer than the {} ms time limit",
                self.timeout.as_millis()
            )]));
        }
        ran?;
        let types = py.import("types")?;
        let module_type = types.getattr("ModuleType")?;
        let function_type = types.getattr("FunctionType")?;
        let inspect = py.import("inspect")?;
        let mut reasons = Vec::new();
        let mut hooks = HashMap::new();
        let mut tables = FileTables::default();
        let mut table_names = Vec::new();
        // A snapshot of the names: inspecting a value may run plugin code that changes the
        // module's dict, which a live iteration would not survive.
        for (key, value) in module.dict().copy()?.iter() {
            let Ok(key) = key.cast_into::<PyString>() else {
                continue;
            };
            let key = key.to_string_lossy().into_owned();
            if key.starts_with('_') {
                continue;
            }
            // An error here (a `__class__` property that raises, or the watchdog's interrupt)
            // rejects the file: going on would run the same plugin code again.
            let binding = if value.is_instance(&module_type)? {
                Binding::Module
            } else if value.is_instance(&function_type)?
                && value
                    .getattr("__module__")
                    .ok()
                    .and_then(|m| m.extract::<String>().ok())
                    .as_deref()
                    == Some(module_name)
            {
                Binding::LocalFunction
            } else {
                Binding::Other
            };
            if let Err(reason) = names::check_name(name, &key, binding) {
                reasons.push(reason);
                continue;
            }
            if let Some(hook) = Hook::from_name(&key) {
                let one_argument = inspect
                    .getattr("signature")
                    .and_then(|signature| signature.call1((&value,)))
                    .and_then(|signature| signature.getattr("bind")?.call1((py.None(),)))
                    .is_ok();
                if one_argument {
                    hooks.insert(hook, value.unbind());
                } else {
                    reasons.push(format!(
                        "{name}: {key} must take exactly one argument (the payload)"
                    ));
                }
            } else if key == hookset::REQUIRES {
                match to_value(&value) {
                    Ok(pins) => {
                        if let Err(reason) = tables::check_requires(&pins) {
                            reasons.push(format!("{name}: {reason}"));
                        }
                    }
                    Err(why) => reasons.push(format!("{name}: REQUIRES {why}")),
                }
            } else if hookset::TABLES.contains(&key.as_str()) {
                let checked = to_value(&value)
                    .map_err(|why| format!("{key} {why}"))
                    .and_then(|table| {
                        tables::check_table(&key, &table, name, catalog, &mut tables)
                    });
                match checked {
                    Ok(()) => table_names.push(key),
                    Err(reason) => reasons.push(format!("{name}: {reason}")),
                }
            }
        }
        if reasons.is_empty() {
            Ok((hooks, tables, table_names))
        } else {
            Err(LoadError::Reasons(reasons))
        }
    }

    fn startup(&self, py: Python<'_>, data: &EpochData, files: &[PyFile], config: &HostConfig) {
        if !data.defined[0] {
            return;
        }
        let names: Vec<String> = data.files.iter().map(|f| f.file.clone()).collect();
        let payload = startup_payload(
            data.number,
            &names,
            Value::Object(config.startup_settings.clone()),
            Value::Object(config.secrets.clone()),
        );
        let mut payload = Payload::Value(payload);
        let _ = self.pipeline(py, data, files, Hook::Startup, &mut payload, None);
    }

    /// One hook over the epoch's files in order (P-6): each step gets a fresh copy of the
    /// current payload (P-3); a failing or invalid step is skipped (P-5, P-10). For a search
    /// page, `Outcome::value` stays `Null` until a hook returns a result.
    fn pipeline(
        &self,
        py: Python<'_>,
        epoch: &EpochData,
        files: &[PyFile],
        hook: Hook,
        payload: &mut Payload,
        only: Option<usize>,
    ) -> Outcome {
        let mut outcome = Outcome::unchanged(payload.take_value());
        let mut page = match &*payload {
            Payload::Search(page) => Some(page),
            Payload::Value(_) => None,
        };
        let mut converted: Option<Bound<'_, PyAny>> = None;
        let runs = |index: usize, file: &PyFile| {
            only.is_none_or(|only| only == index) && file.hooks.contains_key(&hook)
        };
        // The last file to run may have the converted payload itself: no one sees it after.
        let last = (0..files.len()).rev().find(|&i| runs(i, &files[i]));
        for (index, file) in files.iter().enumerate() {
            if !runs(index, file) {
                continue;
            }
            let Some(function) = file.hooks.get(&hook) else {
                continue;
            };
            let file_name = epoch
                .files
                .get(index)
                .map(|f| f.file.as_str())
                .unwrap_or_default();
            if epoch.is_disabled(index, hook) {
                if hook.class() == HookClass::DerivedState {
                    epoch.count_failure(index, hook);
                    outcome.failures.push(Failure {
                        file: file_name.to_owned(),
                        hook: hook.name().to_owned(),
                        message: "disabled until the next reload".into(),
                    });
                }
                continue;
            }
            // The payload as Python objects, built once and again only after a file changed
            // it; each file gets fresh containers over it (`fresh_copy`), so no file sees
            // another's mutations, while the strings (immutable) are not copied again.
            if converted.is_none() {
                converted = match page {
                    Some(page) => page_to_python(py, page),
                    None => to_python(py, &outcome.value),
                }
                .ok();
            }
            let argument = if Some(index) == last {
                converted.take().map(Ok)
            } else {
                converted.as_ref().map(fresh_copy)
            };
            let result = match argument {
                Some(Ok(argument)) => self.call(py, file_name, hook, function, argument),
                Some(Err(error)) => Err((describe(py, &error), false)),
                None => Err((
                    "the payload could not be converted to Python objects".to_owned(),
                    false,
                )),
            };
            let error = match result {
                Ok(None) => continue,
                Ok(Some(returned)) => {
                    if let Some(page) = page.take() {
                        outcome.value = page.to_value();
                    }
                    match hookset::apply_in_place(hook, &mut outcome.value, &returned) {
                        Ok(Applied::Same) => continue,
                        Ok(Applied::Changed) => {
                            outcome.changed_by.push(file_name.to_owned());
                            converted = None;
                            continue;
                        }
                        Ok(Applied::Stop) => {
                            outcome.changed_by.push(file_name.to_owned());
                            outcome.value = serde_json::json!({"skip": true});
                            outcome.stopped = true;
                            return outcome;
                        }
                        Err(why) => (
                            format!("returned an invalid result, discarded: {why}"),
                            false,
                        ),
                    }
                }
                Err(failure) => failure,
            };
            let (message, disable) = error;
            tracing::warn!(file = file_name, hook = hook.name(), error = %message, "server plugin hook failed");
            if disable && (hook.class() == HookClass::CallScoped || message.contains("time limit"))
            {
                epoch.disable(index, hook, &message);
            }
            epoch.count_failure(index, hook);
            outcome.failures.push(Failure {
                file: file_name.to_owned(),
                hook: hook.name().to_owned(),
                message,
            });
        }
        outcome
    }

    /// Calls one hook on a fresh copy of `payload`. `Ok(None)`: it returned None. `Err`: the
    /// message and whether the hook is to be disabled.
    fn call(
        &self,
        py: Python<'_>,
        file: &str,
        hook: Hook,
        function: &Py<PyAny>,
        argument: Bound<'_, PyAny>,
    ) -> Result<Option<Value>, (String, bool)> {
        // One step for everything the hook's objects can run plugin code in: the call, the
        // conversion of what it returned, formatting its exception (`__str__`, `__repr__`)
        // and freeing the argument, the result and the exception (`__del__`).
        let (result, interrupted) = self.timed(format!("{file}: {}", hook.name()), || {
            let result = function.bind(py).call1((argument,));
            match result {
                Err(error) => Err((describe(py, &error), true)),
                Ok(returned) if returned.is_none() => Ok(None),
                Ok(returned) => to_value(&returned).map(Some).map_err(|why| {
                    (
                        format!("returned a value that is not plain data: {why}"),
                        false,
                    )
                }),
            }
        });
        if interrupted {
            return Err((
                format!(
                    "{} ran longer than its time limit of {} ms and was interrupted; disabled until the next reload",
                    hook.name(),
                    self.timeout.as_millis()
                ),
                true,
            ));
        }
        result
    }
}

/// What `plugin_status` says of `file` when its code (`what`, the finalizer, when known) was
/// interrupted as `epoch` was released.
fn release_fault(file: String, what: Option<String>, epoch: u64, limit: Duration) -> ReleaseFault {
    let what = match what {
        Some(function) => format!("`{function}`"),
        None => "its clean-up code (a `__del__` of one of its objects)".to_owned(),
    };
    let reason = format!(
        "{what} ran longer than the {} ms time limit when epoch {epoch} was released and was \
         interrupted; the release went on without it. It runs again whenever an epoch holding \
         this file is released (at a reload): make it return promptly",
        limit.as_millis()
    );
    ReleaseFault {
        file,
        epoch,
        reason,
    }
}

/// The files of an epoch, for a fault that cannot be put down to one of them.
fn files_named(names: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut list = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        list.push_str(&format!(", … ({} files)", names.len()));
    }
    format!("one of {list}")
}

/// Why a file did not load: Python raised, or the checks found reasons.
enum LoadError {
    Python(PyErr),
    Reasons(Vec<String>),
}

impl From<PyErr> for LoadError {
    fn from(error: PyErr) -> Self {
        LoadError::Python(error)
    }
}

impl LoadError {
    fn into_reasons(self, py: Python<'_>, file: &str) -> Vec<String> {
        match self {
            LoadError::Python(error) => vec![format!("{file}: {}", describe(py, &error))],
            LoadError::Reasons(reasons) => reasons,
        }
    }
}

/// The `.py` files of the plugins directory in sorted name order (P-6). Sub-directories
/// (`__pycache__` among them), hidden files and other extensions are ignored.
fn list_plugin_files(directory: &std::path::Path) -> Result<Vec<String>, String> {
    let entries = std::fs::read_dir(directory).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            "it does not exist: create it, or point SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY at the right place".to_owned()
        }
        _ => e.kind().to_string(),
    })?;
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !name.ends_with(".py") || name.starts_with('.') {
            continue;
        }
        if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn read_source(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size > MAX_FILE_BYTES {
        return Err(format!(
            "{name}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit of a plugin file"
        ));
    }
    // Bytes, not text: the encoding is Python's to decide (a BOM, a coding cookie).
    std::fs::read(path).map_err(|e| format!("{name}: could not be read ({})", e.kind()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A Python error as text, with its traceback and its final `Type: message` line, at most
/// [`MAX_MESSAGE_BYTES`]. Formatting runs plugin code (`__str__`, `__repr__` of the exception
/// and its arguments), so it belongs in a watched step; if it fails or is interrupted, the
/// text falls back to the exception's type name, read without running any Python code.
fn describe(py: Python<'_>, error: &PyErr) -> String {
    let formatted = py
        .import("traceback")
        .and_then(|tb| {
            let trace = error.traceback(py).map(Bound::into_any);
            tb.getattr("format_exception")?
                .call1((error.get_type(py), error.value(py), trace))
        })
        .and_then(|lines| lines.extract::<Vec<String>>());
    let text = match formatted {
        Ok(lines) => lines.concat().trim_end().to_owned(),
        Err(_) => {
            let type_ptr = error.get_type(py).as_type_ptr();
            // SAFETY: a type object lives while `error` holds it, and `tp_name` is a C string
            // the type owns.
            let type_name = unsafe { std::ffi::CStr::from_ptr((*type_ptr).tp_name) };
            format!(
                "{}: (the exception could not be formatted)",
                type_name.to_string_lossy()
            )
        }
    };
    truncate_message(text)
}

/// `text`, cut to [`MAX_MESSAGE_BYTES`] by dropping its middle: a traceback's head says where
/// and its last line what.
fn truncate_message(text: String) -> String {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    let half = MAX_MESSAGE_BYTES / 2;
    let mut head = half;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - half;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[... {} bytes left out ...]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// A fresh Python object tree for a plain value (P-3: every hook call gets its own copy).
fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    to_python_with(py, value, &mut Vec::new())
}

/// Most distinct dict keys [`to_python`] shares between dicts.
const SHARED_KEYS: usize = 16;

/// [`to_python`] with the dict keys met so far: a payload repeats the same few keys in every
/// list item (`path`, `line`, ...), and one immutable str per key also makes the dicts'
/// lookups cheaper for the hooks.
fn to_python_with<'py, 'v>(
    py: Python<'py>,
    value: &'v Value,
    keys: &mut Vec<(&'v str, Bound<'py, PyString>)>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u), _) => u.into_pyobject(py)?.into_any(),
            (_, _, Some(f)) => PyFloat::new(py, f).into_any(),
            _ => return Err(PyException::new_err("unrepresentable number")),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|item| to_python_with(py, item, keys))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                let name = match keys.iter().find(|(k, _)| *k == key) {
                    Some((_, name)) => name.clone(),
                    None => {
                        let name = PyString::new(py, key);
                        if keys.len() < SHARED_KEYS {
                            keys.push((key, name.clone()));
                        }
                        name
                    }
                };
                dict.set_item(name, to_python_with(py, item, keys)?)?;
            }
            dict.into_any()
        }
    })
}

/// A search page as the Python objects [`to_python`] would make of
/// [`SearchPage::to_value`], built without that tree: the keys are interned and each group's
/// repository and commit are one str shared by its hits.
fn page_to_python<'py>(py: Python<'py>, page: &SearchPage) -> PyResult<Bound<'py, PyAny>> {
    let hits = PyList::empty(py);
    for group in &page.groups {
        let repo = PyString::new(py, &group.repo);
        let commit = PyString::new(py, &group.commit);
        for hit in &group.lines {
            // Keys in the order of the plain-data form (a sorted map), so either form reads
            // the same to a hook that looks at the order.
            let dict = PyDict::new(py);
            dict.set_item(intern!(py, "commit"), &commit)?;
            dict.set_item(intern!(py, "line"), hit.line)?;
            dict.set_item(intern!(py, "path"), PyString::new(py, &hit.path))?;
            dict.set_item(intern!(py, "repo"), &repo)?;
            dict.set_item(intern!(py, "snippet"), PyString::new(py, &hit.snippet))?;
            hits.append(dict)?;
        }
    }
    let payload = PyDict::new(py);
    payload.set_item(intern!(py, "caller"), to_python(py, &page.caller)?)?;
    payload.set_item(intern!(py, "hits"), hits)?;
    payload.set_item(intern!(py, "query"), PyString::new(py, &page.query))?;
    Ok(payload.into_any())
}

/// A copy of a converted payload with new dicts and lists and the same immutable leaves (str,
/// int, float, bool, None): what a deep copy of plain data amounts to.
fn fresh_copy<'py>(object: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    // Shallow copies in C first (`dict.copy()`, a list slice), then only the containers
    // inside are replaced: most values of a payload are leaves.
    if let Ok(dict) = object.cast::<PyDict>() {
        let copy = dict.copy()?;
        for (key, value) in dict.iter() {
            if is_container(&value) {
                copy.set_item(key, fresh_copy(&value)?)?;
            }
        }
        return Ok(copy.into_any());
    }
    if let Ok(list) = object.cast::<PyList>() {
        let copy = list.get_slice(0, list.len());
        for (index, item) in list.iter().enumerate() {
            if is_container(&item) {
                copy.set_item(index, fresh_copy(&item)?)?;
            }
        }
        return Ok(copy.into_any());
    }
    Ok(object.clone())
}

fn is_container(object: &Bound<'_, PyAny>) -> bool {
    object.is_exact_instance_of::<PyDict>() || object.is_exact_instance_of::<PyList>()
}

/// Converts a returned object back, accepting plain data only (P-3): str, int, float, bool,
/// None, lists (tuples read as lists) and dicts with str keys.
fn to_value(object: &Bound<'_, PyAny>) -> Result<Value, String> {
    let mut budget = (MAX_NODES, MAX_STRING_BYTES);
    convert(object, 0, &mut budget)
}

fn convert(
    object: &Bound<'_, PyAny>,
    depth: usize,
    budget: &mut (usize, usize),
) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    budget.0 = budget
        .0
        .checked_sub(1)
        .ok_or_else(|| format!("more than {MAX_NODES} values"))?;
    if object.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = object.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if object.is_instance_of::<PyInt>() {
        if let Ok(i) = object.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = object.extract::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        return Err("an int outside the 64-bit range".into());
    }
    if let Ok(f) = object.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| "a float that is NaN or infinite".to_owned());
    }
    if let Ok(s) = object.cast::<PyString>() {
        let text = s
            .to_str()
            .map_err(|_| "a str that is not valid Unicode (lone surrogates)".to_owned())?;
        budget.1 = budget
            .1
            .checked_sub(text.len())
            .ok_or_else(|| format!("more than {MAX_STRING_BYTES} bytes of text"))?;
        return Ok(Value::String(text.to_owned()));
    }
    if let Ok(list) = object.cast::<PyList>() {
        return list
            .iter()
            .map(|item| convert(&item, depth + 1, budget))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    if let Ok(tuple) = object.cast::<PyTuple>() {
        return tuple
            .iter()
            .map(|item| convert(&item, depth + 1, budget))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    if let Ok(dict) = object.cast::<PyDict>() {
        let mut map = Map::new();
        for (key, item) in dict.iter() {
            let key = key
                .cast::<PyString>()
                .map_err(|_| "a dict with a key that is not a str".to_owned())?
                .to_str()
                .map_err(|_| "a dict key that is not valid Unicode".to_owned())?
                .to_owned();
            map.insert(key, convert(&item, depth + 1, budget)?);
        }
        return Ok(Value::Object(map));
    }
    let type_name = object
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into());
    Err(format!(
        "a {type_name} (only str, int, float, bool, None, list and dict are plain data)"
    ))
}

// ---- the watchdog ----

fn watchdog_loop(interpreter: Weak<Interpreter>) {
    loop {
        let Some(host) = interpreter.upgrade() else {
            return;
        };
        // Calls whose deadline to get the interpreter passed while queued (behind a long job,
        // or with a plugin thread holding the interpreter) are answered now, without plugins;
        // outside the lock, because answering one may drop the last handle on its epoch,
        // which queues the epoch's release.
        let expired: VecDeque<Job> = {
            let mut queue = lock(&host.queue);
            let now = Instant::now();
            let (expired, kept): (VecDeque<Job>, VecDeque<Job>) = std::mem::take(&mut queue.jobs)
                .into_iter()
                .partition(|job| job.start_by.is_some_and(|by| by <= now));
            queue.jobs = kept;
            host.queued.fetch_sub(expired.len(), Ordering::AcqRel);
            expired
        };
        for job in expired {
            host.expire(job);
        }
        for (job, held_for) in host.stalled_loads() {
            let reason = format!(
                "no job could start on the Python interpreter for {} ms (a plugin's own thread \
                 holds it, e.g. in a long C call)",
                held_for.as_millis()
            );
            tracing::warn!(%reason, "a server plugin reload could not start");
            if let Some(reply) = job.reply {
                let _ = reply.send(Reply::Loaded(Err(HostError::Busy(reason))));
            }
        }
        let mut queue = lock(&host.queue);
        if queue.wedged.is_some() || queue.stopped {
            return;
        }
        let now = Instant::now();
        let poll = (host.timeout / 8).clamp(Duration::from_millis(5), Duration::from_millis(250));
        let mut wait = poll;
        if let Some(step) = &mut queue.step {
            match step.interrupted_at {
                None if now >= step.deadline => {
                    step.interrupted_at = Some(now);
                    interrupt(&host, step.seq);
                    // Polled, not slept through: the step may end and a new one start.
                    wait = host.grace.min(poll);
                }
                None => wait = (step.deadline - now).min(poll),
                Some(at) if now >= at + host.grace => {
                    let reason = format!(
                        "{} did not stop within {} ms of being interrupted",
                        step.what,
                        host.grace.as_millis()
                    );
                    tracing::error!(%reason, "server plugins wedged; restart the server to use them again");
                    queue.wedged = Some(reason);
                    host.is_wedged.store(true, Ordering::Release);
                    let in_flight = queue.in_flight.take();
                    let waiting: Vec<Job> = queue.jobs.drain(..).collect();
                    drop(queue);
                    host.work.notify_all();
                    if let Some(reply) = in_flight {
                        let _ = reply.send(Reply::Bypassed(None));
                    }
                    bypass(waiting.into_iter());
                    return;
                }
                Some(at) => wait = ((at + host.grace) - now).min(poll),
            }
        }
        if queue
            .jobs
            .iter()
            .any(|job| job.start_by.is_some() || matches!(job.work, Work::Load { .. }))
        {
            wait = wait.min(poll);
        }
        let (queue, _) = host
            .watch
            .wait_timeout(queue, wait.max(Duration::from_millis(1)))
            .unwrap_or_else(PoisonError::into_inner);
        drop(queue);
        drop(host);
    }
}

/// Raises `HookTimeout` into the interpreter thread if it is still in step `seq`. Runs on a
/// thread of its own: it needs the interpreter lock, which a hook stuck in C code may hold
/// forever, and the watchdog must still be able to declare the host wedged then.
fn interrupt(host: &Arc<Interpreter>, seq: u64) {
    let host = host.clone();
    let spawned = std::thread::Builder::new()
        .name("csg-python-interrupt".into())
        .spawn(move || {
            Python::attach(|py| {
                let queue = lock(&host.queue);
                let current = queue.step.as_ref().map(|step| step.seq);
                if current == Some(seq)
                    && let (Some(ident), Some(class)) = (host.ident.get(), host.timeout_class.get())
                {
                    unsafe {
                        ffi::PyThreadState_SetAsyncExc(*ident as _, class.bind(py).as_ptr());
                    }
                }
            })
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "could not start the hook interrupter");
    }
}
