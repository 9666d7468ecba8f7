//! Plain data to Python objects and back (P-3): payloads converted for the hooks (search
//! pages directly, keys shared), fresh copies for each call, and returned values accepted
//! only as bounded plain data.

use crate::SearchPage;
use pyo3::exceptions::PyException;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Deepest nesting a returned value may have.
const MAX_DEPTH: usize = 64;
/// Most values (of any kind) in one returned value.
const MAX_NODES: usize = 1_000_000;
/// Most bytes of strings in one returned value.
const MAX_STRING_BYTES: usize = 32 * 1024 * 1024;

/// A fresh Python object tree for a plain value (P-3: every hook call gets its own copy).
pub(super) fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
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
pub(super) fn page_to_python<'py>(
    py: Python<'py>,
    page: &SearchPage,
) -> PyResult<Bound<'py, PyAny>> {
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
pub(super) fn fresh_copy<'py>(object: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
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
pub(super) fn to_value(object: &Bound<'_, PyAny>) -> Result<Value, String> {
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
