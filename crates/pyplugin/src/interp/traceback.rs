//! A Python error as text: its traceback and final line, cut to a size a status and a log
//! can hold.

use pyo3::prelude::*;

/// Most bytes of a failure message (a traceback): an exception over a huge object must not
/// fill the status and the log.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// A Python error as text, with its traceback and its final `Type: message` line, at most
/// [`MAX_MESSAGE_BYTES`]. Formatting runs plugin code (`__str__`, `__repr__` of the exception
/// and its arguments), so it belongs in a watched step; if it fails or is interrupted, the
/// text falls back to the exception's type name, read without running any Python code.
pub(super) fn describe(py: Python<'_>, error: &PyErr) -> String {
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
