//! The connection threads: each owns one connection and runs the calls it takes from a shared
//! queue, so the sync driver (which panics inside a Tokio runtime) never runs on a caller's
//! thread. Also the link's health, shared with the listener.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use postgres::Client;

use crate::Health;
use crate::Shared;
use crate::error::Error;

/// After a failed connection attempt, the threads try again at most this often; meanwhile
/// calls fail at once with that attempt's error.
pub(crate) const RETRY_EVERY: Duration = Duration::from_secs(1);

/// Whether the server could be reached, and when to try again: shared by the connection threads
/// and the listener.
#[derive(Default)]
pub(crate) struct Link {
    state: Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    down_since: Option<SystemTime>,
    last_error: Option<Error>,
    last_attempt: Option<Instant>,
}

impl Link {
    fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// May this thread try to connect now? While the server is down, one attempt per
    /// [`RETRY_EVERY`] across all threads; the others get the last attempt's error at once.
    fn may_attempt(&self) -> Result<(), Error> {
        let mut state = self.lock();
        if state.down_since.is_some()
            && let (Some(at), Some(error)) = (state.last_attempt, &state.last_error)
            && at.elapsed() < RETRY_EVERY
        {
            return Err(error.clone());
        }
        state.last_attempt = Some(Instant::now());
        Ok(())
    }

    pub(crate) fn connected(&self, shown: &str) {
        let mut state = self.lock();
        if let Some(since) = state.down_since.take() {
            let down = since.elapsed().unwrap_or_default();
            tracing::info!(
                database = shown,
                down_secs = down.as_secs(),
                "PostgreSQL is reachable again"
            );
        }
        state.last_error = None;
    }

    pub(crate) fn failed(&self, error: &Error) {
        let mut state = self.lock();
        if state.down_since.is_none() {
            // Once per outage: every call meanwhile fails with this error anyway.
            tracing::warn!(%error, "PostgreSQL unreachable: metadata writes fail until it is back");
            state.down_since = Some(SystemTime::now());
        }
        state.last_error = Some(error.clone());
    }

    pub(crate) fn health(&self) -> Health {
        match self.lock().down_since {
            Some(since) => Health::Unreachable { since },
            None => Health::Ok,
        }
    }
}

const PENDING: u8 = 0;
const STARTED: u8 = 1;
const ABANDONED: u8 = 2;

/// What a connection thread does for one call: given the connection (or why there is none), it
/// runs the work and sends the outcome back; it answers whether the connection is still fit.
type Job = Box<dyn FnOnce(Result<&mut Client, Error>) -> bool + Send>;

/// A call in the queue. Whoever moves `state` out of PENDING first decides: the thread (the
/// work runs) or the caller giving up (the work never runs), so a timed-out call can't take
/// effect later unnoticed.
pub(crate) struct Envelope {
    state: Arc<AtomicU8>,
    job: Job,
}

impl Envelope {
    fn abandoned(&self) -> bool {
        self.state.load(Ordering::Acquire) == ABANDONED
    }

    fn claim(&self) -> bool {
        self.state
            .compare_exchange(PENDING, STARTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// A connection left unused this long is checked with a round trip before it is handed out:
/// the driver does not notice by itself that the server closed it (a restart), and a call
/// should not fail on a connection that was dead before it began.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// How long that check may take before the connection is replaced.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The body of one connection thread: takes calls until the queue's sender (held by the last
/// `Database`) is gone.
pub(crate) fn work(shared: Arc<Shared>, queue: Arc<Mutex<Receiver<Envelope>>>) {
    let mut connection: Option<(Client, Instant)> = None;
    loop {
        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(envelope) = next else { return };
        if envelope.abandoned() {
            continue;
        }
        if let Some((client, last_used)) = connection.as_mut()
            && (client.is_closed()
                || (last_used.elapsed() >= CHECK_AFTER_IDLE
                    && client
                        .is_valid(CHECK_TIMEOUT.min(shared.options.connect_timeout))
                        .is_err()))
        {
            connection = None;
        }
        if connection.is_none() {
            match shared.link.may_attempt().and_then(|()| open(&shared)) {
                Ok(client) => connection = Some((client, Instant::now())),
                Err(error) => {
                    if envelope.claim() {
                        (envelope.job)(Err(error));
                    }
                    continue;
                }
            }
        }
        let Some((client, last_used)) = connection.as_mut() else {
            continue;
        };
        if !envelope.claim() {
            continue;
        }
        let fit = (envelope.job)(Ok(&mut *client));
        *last_used = Instant::now();
        if !fit || client.is_closed() {
            connection = None;
        }
    }
}

fn open(shared: &Shared) -> Result<Client, Error> {
    match shared.target.connect(true) {
        Ok(client) => {
            shared.link.connected(&shared.target.shown);
            Ok(client)
        }
        Err(error) => {
            shared.link.failed(&error);
            Err(error)
        }
    }
}

/// Queues `work` and waits at most `timeout` for its outcome; a panic in `work` resumes here.
pub(crate) fn call<T, E, W>(
    queue: &mpsc::Sender<Envelope>,
    timeout: Duration,
    work: W,
) -> Result<T, E>
where
    T: Send + 'static,
    E: From<Error> + Send + 'static,
    W: FnOnce(&mut Client) -> Result<T, E> + Send + 'static,
{
    type Outcome<T, E> = Result<Result<T, E>, Box<dyn Any + Send>>;
    let (done, outcome) = mpsc::sync_channel::<Outcome<T, E>>(1);
    let state = Arc::new(AtomicU8::new(PENDING));
    let job: Job = Box::new(move |client| match client {
        Err(error) => {
            let _ = done.send(Ok(Err(E::from(error))));
            true
        }
        Ok(client) => {
            let result = panic::catch_unwind(AssertUnwindSafe(|| work(client)));
            // After a panic the connection may be mid-transaction or mid-protocol: replace it.
            let fit = result.is_ok();
            let _ = done.send(result);
            fit
        }
    });
    let envelope = Envelope {
        state: state.clone(),
        job,
    };
    if queue.send(envelope).is_err() {
        return Err(E::from(stopped()));
    }
    let received = match outcome.recv_timeout(timeout) {
        Ok(received) => received,
        Err(RecvTimeoutError::Timeout) => {
            if state
                .compare_exchange(PENDING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Err(E::from(Error::Busy(timeout)));
            }
            // Started: it may have finished just now.
            match outcome.try_recv() {
                Ok(received) => received,
                Err(_) => return Err(E::from(Error::Timeout(timeout))),
            }
        }
        Err(RecvTimeoutError::Disconnected) => return Err(E::from(stopped())),
    };
    match received {
        Ok(result) => result,
        Err(payload) => panic::resume_unwind(payload),
    }
}

fn stopped() -> Error {
    Error::Query("the PostgreSQL connection threads have stopped; restart csg".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_failed_attempt_others_fail_at_once_until_a_second_has_passed() {
        let link = Link::default();
        assert_eq!(link.health(), Health::Ok);
        link.may_attempt().unwrap();
        link.failed(&Error::Unreachable("refused".into()));
        assert!(matches!(link.health(), Health::Unreachable { .. }));
        let cached = link.may_attempt().unwrap_err();
        assert!(matches!(cached, Error::Unreachable(ref text) if text == "refused"));
        link.lock().last_attempt = Some(Instant::now() - RETRY_EVERY);
        link.may_attempt().unwrap();
        // This attempt now runs: everyone else waits for its outcome's second.
        assert!(link.may_attempt().is_err());
        link.connected("postgres://u@h:1/d");
        assert_eq!(link.health(), Health::Ok);
        link.may_attempt().unwrap();
    }
}
