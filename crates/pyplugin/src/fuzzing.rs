//! The entry point of the fuzz target `server_plugin_tables` (`fuzz/`, issue 43; called with
//! the real tool catalog by `tools::fuzzing`, whose tests replay its corpus in CI): the values
//! a server plugin's module hands the host, checked on the Rust side exactly as a load or a
//! hook run checks them, without CPython. A panic is a finding. Not an API (hidden); nothing
//! here changes what the host does.

use crate::hookset::{self, Hook};
use crate::tables::{FileTables, Tables, check_requires, check_table};
use crate::{ToolCatalog, schema};
use serde_json::Value;

/// The first line of `data` names what the JSON after it is: a table (`QUERY_ALIASES`,
/// `ALIASES`, `TOOL_PRESETS`, or any other name, refused), `REQUIRES`, `SCHEMA` (a pair
/// `[schema, value]`), or a hook (`on_tool_call`, …) whose result it is — for the hook's
/// sample payload, or for the input of a pair `[input, output]`.
pub fn tables(data: &[u8], catalog: &ToolCatalog) {
    let (first, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(end) => (&data[..end], &data[end + 1..]),
        None => (data, &[][..]),
    };
    let first = String::from_utf8_lossy(first);
    let name = first.trim();
    let Ok(value) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    match name {
        "REQUIRES" => {
            let _ = check_requires(&value);
        }
        "SCHEMA" => {
            if let Value::Array(pair) = &value
                && let [schema, value] = pair.as_slice()
            {
                let _ = schema::check(schema, value, "value");
            }
        }
        _ => match Hook::from_name(name) {
            Some(hook) => {
                let (input, output) = match &value {
                    Value::Array(pair) if pair.len() == 2 => (pair[0].clone(), pair[1].clone()),
                    _ => (hook.sample_payload(), value),
                };
                let applied = hookset::apply(hook, &input, &output);
                let mut current = input.clone();
                let in_place = hookset::apply_in_place(hook, &mut current, &output);
                assert_eq!(
                    applied.is_ok(),
                    in_place.is_ok(),
                    "apply and apply_in_place disagree on {output}"
                );
                if in_place.is_err() {
                    assert_eq!(current, input, "a refused result changed the payload");
                }
            }
            None => {
                let mut into = FileTables::default();
                if check_table(name, &value, "fuzz.py", catalog, &mut into).is_ok() {
                    for (alias, target) in &into.aliases {
                        assert_ne!(alias, target);
                        assert!(target.contains('/'), "alias target {target:?}");
                    }
                    for (preset, entry) in &into.presets {
                        assert!(!catalog.reserved.contains(preset));
                        assert!(catalog.preset_targets.contains_key(&entry.tool));
                    }
                    let mut merged = Tables::default();
                    merged.merge("fuzz.py", into);
                }
            }
        },
    }
}
