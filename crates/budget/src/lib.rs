//! A call's budget as the work inside it sees it (O-9): when it must stop (its deadline) and
//! whether the caller is still there (a cancellation flag the transport or the service frame
//! raises when the call is abandoned). Long work — history walks, blame, diffs, tree
//! listings, rename detection, README rendering, parses — takes a [`Budget`] and calls
//! [`Budget::check`] between steps, so an abandoned or overdue call stops working, not only
//! waiting.
//!
//! A `Budget` is cheap to clone (one `Arc`); every clone sees the same flag. The crate knows
//! nothing of transports, classes or slots: those are the service's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// Why work was told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    /// The call's deadline passed.
    #[error("the call ran out of time")]
    Deadline,
    /// The caller went away (or the server is shutting down): nobody waits for the answer.
    #[error("the call was cancelled")]
    Cancelled,
}

#[derive(Debug)]
struct Shared {
    /// The hard deadline: past it the work is useless (the caller was answered already).
    deadline: Option<Instant>,
    /// The soft deadline: work that can answer a partial page stops here and answers.
    soft: Option<Instant>,
    /// Non-zero once cancelled: the convention of tree-sitter's cancellation flags, so a
    /// parse can watch it directly ([`Budget::flag`]).
    cancelled: AtomicUsize,
    /// Budgets made [`Budget::within`] this one: cancelling this one cancels them.
    children: Mutex<Vec<Weak<Shared>>>,
}

impl Shared {
    fn cancel(&self) {
        self.cancelled.store(1, Ordering::Release);
        let children =
            std::mem::take(&mut *self.children.lock().unwrap_or_else(PoisonError::into_inner));
        for child in children.iter().filter_map(Weak::upgrade) {
            child.cancel();
        }
    }
}

/// A deadline and a cancellation flag shared by every clone.
#[derive(Debug, Clone)]
pub struct Budget(Arc<Shared>);

impl Budget {
    /// A budget ending at `deadline`; work that can answer partially stops at `soft` (at the
    /// latest at `deadline`).
    pub fn new(deadline: Instant, soft: Instant) -> Self {
        Self::build(Some(deadline), Some(soft.min(deadline)))
    }

    /// A budget of `time` from now, its soft deadline at `partial` of it (`0.0..=1.0`).
    pub fn lasting(time: Duration, partial: f64) -> Self {
        let now = Instant::now();
        Self::new(now + time, now + time.mul_f64(partial.clamp(0.0, 1.0)))
    }

    /// No deadline, only cancellation: maintenance that no caller waits for (a sync, an index
    /// build), and tests.
    pub fn unlimited() -> Self {
        Self::build(None, None)
    }

    fn build(deadline: Option<Instant>, soft: Option<Instant>) -> Self {
        Budget(Arc::new(Shared {
            deadline,
            soft,
            cancelled: AtomicUsize::new(0),
            children: Mutex::new(Vec::new()),
        }))
    }

    /// A budget inside this one ending no later than `deadline` (and no later than this
    /// one's): cancelling this one stops it; cancelling it leaves this one running.
    pub fn within(&self, deadline: Instant) -> Budget {
        self.within_soft(deadline, deadline)
    }

    /// [`Budget::within`] whose partial answers are due at `soft`.
    pub fn within_soft(&self, deadline: Instant, soft: Instant) -> Budget {
        let deadline = self.0.deadline.map_or(deadline, |d| d.min(deadline));
        let soft = self.0.soft.map_or(soft, |s| s.min(soft)).min(deadline);
        let child = Self::build(Some(deadline), Some(soft));
        let mut children = self
            .0
            .children
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.is_cancelled() {
            child.cancel();
        } else {
            // Budgets that ended are forgotten here, so a long-lived parent does not grow.
            children.retain(|c| c.strong_count() > 0);
            children.push(Arc::downgrade(&child.0));
        }
        child
    }

    /// The hard deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.0.deadline
    }

    /// Time left before the hard deadline (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.0
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Tells every holder to stop, and every budget made within this one.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// Whether this budget (or one it lives inside) was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Acquire) != 0
    }

    /// The cancellation flag itself (non-zero once cancelled), for a parser that takes one
    /// (tree-sitter's `cancellation_flag`). It is raised by [`Budget::cancel`] — the frame
    /// cancels a call's budget at its deadline — not by the clock alone.
    pub fn flag(&self) -> &AtomicUsize {
        &self.0.cancelled
    }

    /// `Err` once the call was cancelled or its hard deadline passed: the work must stop
    /// and its result will not be used.
    pub fn check(&self) -> Result<(), Stop> {
        if self.is_cancelled() {
            return Err(Stop::Cancelled);
        }
        match self.0.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(Stop::Deadline),
            _ => Ok(()),
        }
    }

    /// Whether work that can answer a partial page should stop now and answer what it has
    /// (its soft deadline passed), or must stop at once ([`Budget::check`] fails).
    pub fn should_wrap_up(&self) -> Result<bool, Stop> {
        self.check()?;
        Ok(self.0.soft.is_some_and(|soft| Instant::now() >= soft))
    }

    /// A guard that cancels this budget when dropped, unless [`CancelOnDrop::disarm`]ed:
    /// held by the future that waits for the work, so a caller that goes away (its future
    /// dropped) stops the work too.
    pub fn cancel_on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(Some(self.clone()))
    }
}

/// No deadline, not cancelled: [`Budget::unlimited`].
impl Default for Budget {
    fn default() -> Self {
        Budget::unlimited()
    }
}

/// Cancels its budget when dropped (see [`Budget::cancel_on_drop`]).
#[derive(Debug)]
#[must_use = "the budget is cancelled as soon as the guard is dropped"]
pub struct CancelOnDrop(Option<Budget>);

impl CancelOnDrop {
    /// The work finished: dropping the guard no longer cancels anything.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(budget) = self.0.take() {
            budget.cancel();
        }
    }
}

/// Counts steps of a loop and checks the budget every `every` of them, so a tight loop pays
/// for the clock only now and then.
#[derive(Debug)]
pub struct Ticker<'a> {
    budget: &'a Budget,
    every: u32,
    left: u32,
}

impl<'a> Ticker<'a> {
    /// Checks `budget` on the first tick and then every `every` ticks.
    pub fn new(budget: &'a Budget, every: u32) -> Self {
        Self {
            budget,
            every: every.max(1),
            left: 0,
        }
    }

    /// One step: [`Budget::check`] every `every` steps.
    pub fn tick(&mut self) -> Result<(), Stop> {
        if self.left == 0 {
            self.left = self.every;
            self.budget.check()?;
        }
        self.left -= 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_stops_at_its_deadline_and_wraps_up_at_its_soft_one() {
        let now = Instant::now();
        let budget = Budget::new(now + Duration::from_secs(60), now);
        assert_eq!(budget.check(), Ok(()));
        assert_eq!(budget.should_wrap_up(), Ok(true));
        let over = Budget::new(now, now);
        assert_eq!(over.check(), Err(Stop::Deadline));
        assert_eq!(over.should_wrap_up(), Err(Stop::Deadline));
        let unlimited = Budget::unlimited();
        assert_eq!(unlimited.should_wrap_up(), Ok(false));
        assert_eq!(unlimited.remaining(), None);
    }

    #[test]
    fn cancelling_reaches_every_clone_and_every_budget_within() {
        let budget = Budget::lasting(Duration::from_secs(60), 0.5);
        let clone = budget.clone();
        let inner = budget.within(Instant::now() + Duration::from_secs(600));
        assert!(inner.deadline() <= budget.deadline());
        budget.cancel();
        assert_eq!(clone.check(), Err(Stop::Cancelled));
        assert_eq!(inner.check(), Err(Stop::Cancelled));
        // The other way round: an inner cancel leaves the outer budget running.
        let outer = Budget::unlimited();
        outer
            .within(Instant::now() + Duration::from_secs(1))
            .cancel();
        assert_eq!(outer.check(), Ok(()));
    }

    #[test]
    fn a_dropped_guard_cancels_and_a_disarmed_one_does_not() {
        let budget = Budget::unlimited();
        drop(budget.cancel_on_drop());
        assert!(budget.is_cancelled());
        let kept = Budget::unlimited();
        kept.cancel_on_drop().disarm();
        assert!(!kept.is_cancelled());
    }

    #[test]
    fn a_ticker_checks_only_every_nth_step() {
        let budget = Budget::unlimited();
        let mut ticker = Ticker::new(&budget, 3);
        assert_eq!(ticker.tick(), Ok(()));
        budget.cancel();
        // Steps 2 and 3 do not look; step 4 does.
        assert_eq!(ticker.tick(), Ok(()));
        assert_eq!(ticker.tick(), Ok(()));
        assert_eq!(ticker.tick(), Err(Stop::Cancelled));
    }
}
