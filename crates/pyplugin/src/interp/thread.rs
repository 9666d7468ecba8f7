//! The interpreter thread: its start-up (the guard installed), its loop (wait for a job,
//! take it, run it as one watched step, answer) and the jobs whose deadline to start passed.

use super::guard::GUARD;
use super::traceback::describe;
use super::{INTERPRETER_STACK, Interpreter, Job, PyFile, Reply, Work, lock};
use crate::Outcome;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyModule;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

/// How long the interpreter thread looks for the next job before it sleeps.
const IDLE_SPIN: Duration = Duration::from_micros(100);
/// The recursion limit set on the interpreter, and the most a plugin may raise it to.
const RECURSION_LIMIT: u32 = 1000;

impl Interpreter {
    pub(super) fn main(self: Arc<Self>, ready: std::sync::mpsc::Sender<Result<(), String>>) {
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
}

impl Interpreter {
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
    pub(super) fn expire(&self, job: Job) {
        self.wait_timeouts.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            limit_ms = self.timeout.as_millis() as u64,
            "a server plugin call did not get the interpreter in time and answers without plugins"
        );
        if let Some(reply) = job.reply {
            let _ = reply.send(Reply::Bypassed(job.work.into_payload()));
        }
    }
}
