//! Freeing a released epoch's Python objects under the watchdog (P-23), and the
//! [`ReleaseFault`]s kept for `plugin_status` when plugin code overran as they were freed.

use super::{Interpreter, PyFile};
use crate::ReleaseFault;
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::sync::PoisonError;
use std::time::Duration;

/// Most [`ReleaseFault`]s on record.
const MAX_RELEASE_FAULTS: usize = 64;

impl Interpreter {
    /// Frees a released epoch's Python objects, each step watched (P-23): each file's module
    /// and hooks in a step of its own (what that frees directly is put down to the file),
    /// then one collection for the reference cycles they leave (put down to the file that
    /// defines the interrupted finalizer). A step the watchdog interrupted is recorded for
    /// `plugin_status` ([`ReleaseFault`]).
    pub(super) fn release(&self, py: Python<'_>, epoch: u64, files: Vec<PyFile>) {
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
