//! Comparing the JSON answers of two calls that should agree (an alias and the real name, two
//! transports).

use serde_json::Value;

/// `value` without what differs between two identical calls by timing alone: durations, and
/// whether a search page came from the result cache (a repeated search does) with the work
/// counts that go with it.
pub fn untimed(mut value: Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for key in [
                    "elapsed_us",
                    "elapsed_ms",
                    "cached",
                    "candidate_files",
                    "files_verified",
                ] {
                    map.remove(key);
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value
}

/// Every `"repo"` field of an answer, wherever it is, appended to `into`.
pub fn repos_named(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, field) in map {
                match (key.as_str(), field) {
                    ("repo", Value::String(repo)) => into.push(repo.clone()),
                    _ => repos_named(field, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| repos_named(item, into)),
        _ => {}
    }
}
