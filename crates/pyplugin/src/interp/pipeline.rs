//! Running one hook over an epoch's files in order (P-6): each call on its own copy of the
//! payload (P-3), as a watched step, its result checked and applied; a failing step skipped,
//! counted and, where the rules say so, disabled (P-5, P-10).

use super::convert::{fresh_copy, page_to_python, to_python, to_value};
use super::traceback::describe;
use super::{Interpreter, Payload, PyFile};
use crate::hookset::{self, Applied, Hook, HookClass};
use crate::{EpochData, Failure, Outcome};
use pyo3::prelude::*;
use serde_json::Value;

impl Interpreter {
    /// One hook over the epoch's files in order (P-6): each step gets a fresh copy of the
    /// current payload (P-3); a failing or invalid step is skipped (P-5, P-10). For a search
    /// page, `Outcome::value` stays `Null` until a hook returns a result.
    pub(super) fn pipeline(
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
