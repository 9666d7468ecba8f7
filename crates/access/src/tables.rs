//! The tables of one metadata database and the view published from them: what every check
//! reads without a lock, and what a reload replaces whole (shared by the store and the
//! reload thread).

use crate::Error;
use crate::backend::{AccessBackend, View};
use arc_swap::ArcSwap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The tables and the view published from them, shared with the reload thread.
pub(crate) struct Tables {
    pub(crate) backend: Box<dyn AccessBackend>,
    /// The published view: loaded without a lock by every check, replaced whole by a reload.
    pub(crate) view: ArcSwap<View>,
    /// Held from a load to its publication, so views are published in the order they were
    /// read: a reload that read before a write never replaces one that read after it.
    reloading: Mutex<()>,
}

impl Tables {
    /// Tables over `backend`, with an empty view until the first [`Tables::reload`].
    pub(crate) fn new(backend: Box<dyn AccessBackend>) -> Self {
        Self {
            backend,
            view: ArcSwap::from_pointee(View::default()),
            reloading: Mutex::new(()),
        }
    }

    /// Loads the tables and publishes the view.
    pub(crate) fn reload(&self) -> Result<(), Error> {
        let _order = lock(&self.reloading);
        let view = self.backend.load()?;
        self.view.store(Arc::new(view));
        Ok(())
    }
}

/// Locks `mutex`, whatever a panicking holder left in it: every value these guard stays
/// valid between statements.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
