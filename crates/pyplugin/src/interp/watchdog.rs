//! The watchdog (P-5, P-23): every step on the interpreter thread is timed; one past its
//! deadline gets `HookTimeout` raised into it, one still running a grace period later wedges
//! the host. Calls that waited too long to start and reloads that cannot start are answered
//! here too.

use super::{Interpreter, Job, Reply, Watched, Work, bypass, lock};
use crate::HostError;
use pyo3::ffi;
use pyo3::prelude::*;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::{Duration, Instant};

impl Interpreter {
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
    pub(super) fn timed<R>(&self, what: String, f: impl FnOnce() -> R) -> (R, bool) {
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
}

pub(super) fn watchdog_loop(interpreter: Weak<Interpreter>) {
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
