//! Checks a value against a tool's input schema, as far as `TOOL_PRESETS` needs it (P-8).
//!
//! The schemas are the ones `tools/list` advertises (JSON Schema 2020-12, nested types
//! inlined); the host receives them through [`crate::HostConfig::tools`] because this
//! crate knows no transport. Only the keywords those schemas use are checked: `type`, `enum`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`, `items`, `properties`,
//! `required`, `additionalProperties: false` and `anyOf`/`oneOf`. A keyword outside that set
//! constrains nothing here; the call itself still checks everything when the preset is used.

use crate::hookset::kind;
use serde_json::Value;

/// Deepest nesting followed, so a hostile value cannot recurse the host's stack away.
const MAX_DEPTH: usize = 32;

/// `Ok` when `value` is valid for `schema`; `Err` says why, naming the place below `at`.
pub(crate) fn check(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    check_at(schema, value, at, 0)
}

fn check_at(schema: &Value, value: &Value, at: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{at} is nested deeper than {MAX_DEPTH} levels"));
    }
    let Some(schema) = schema.as_object() else {
        // `true` (or a schema we cannot read) admits anything; `false` admits nothing.
        return match schema {
            Value::Bool(false) => Err(format!("{at} is not allowed")),
            _ => Ok(()),
        };
    };
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(choices)) = schema.get(keyword) {
            let mut why = None;
            let fits = choices.iter().any(|choice| {
                let result = check_at(choice, value, at, depth + 1);
                if let Err(reason) = &result {
                    why.get_or_insert_with(|| reason.clone());
                }
                result.is_ok()
            });
            if !fits {
                return Err(why.unwrap_or_else(|| format!("{at} matches none of its forms")));
            }
        }
    }
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|name| has_type(value, name)) {
            return Err(format!(
                "{at} must be {}, not {}",
                names
                    .iter()
                    .map(|name| python_name(name))
                    .collect::<Vec<_>>()
                    .join(" or "),
                kind(value)
            ));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(format!("{at} must be one of {}", allowed.join(", ")));
    }
    match value {
        Value::Number(number) => {
            if let Some(number) = number.as_f64() {
                if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                    && number < min
                {
                    return Err(format!("{at} must be at least {min}, not {number}"));
                }
                if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                    && number > max
                {
                    return Err(format!("{at} must be at most {max}, not {number}"));
                }
            }
        }
        Value::String(text) => {
            let length = text.chars().count() as u64;
            bounds(
                schema,
                ["minLength", "maxLength"],
                length,
                ["character", "characters"],
                at,
            )?;
        }
        Value::Array(items) => {
            bounds(
                schema,
                ["minItems", "maxItems"],
                items.len() as u64,
                ["entry", "entries"],
                at,
            )?;
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check_at(item_schema, item, &format!("{at}[{index}]"), depth + 1)?;
                }
            }
        }
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required")
                && let Some(missing) = required
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|name| !fields.contains_key(*name))
            {
                return Err(format!("{at} needs the key {missing:?}"));
            }
            for (name, field) in fields {
                match properties.and_then(|p| p.get(name)) {
                    Some(field_schema) => {
                        check_at(field_schema, field, &format!("{at}.{name}"), depth + 1)?
                    }
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        let known: Vec<&str> = properties
                            .map(|p| p.keys().map(String::as_str).collect())
                            .unwrap_or_default();
                        return Err(format!(
                            "{at} has an unknown key {name:?} (known: {})",
                            known.join(", ")
                        ));
                    }
                    None => {}
                }
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    Ok(())
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => true,
    }
}

/// The Python name of a JSON Schema type: plugin authors write Python values.
fn python_name(name: &str) -> &str {
    match name {
        "null" => "None",
        "boolean" => "bool",
        "string" => "str",
        "array" => "list",
        "object" => "dict",
        "number" => "float",
        "integer" => "int",
        other => other,
    }
}

/// Checks `count` against the `[minimum, maximum]` keywords; `unit` is `[one, many]`.
fn bounds(
    schema: &serde_json::Map<String, Value>,
    [min_key, max_key]: [&str; 2],
    count: u64,
    [one, many]: [&str; 2],
    at: &str,
) -> Result<(), String> {
    let unit = |n: u64| if n == 1 { one } else { many };
    if let Some(min) = schema.get(min_key).and_then(Value::as_u64)
        && count < min
    {
        return Err(format!(
            "{at} must have at least {min} {}, not {count}",
            unit(min)
        ));
    }
    if let Some(max) = schema.get(max_key).and_then(Value::as_u64)
        && count > max
    {
        return Err(format!(
            "{at} must have at most {max} {}, not {count}",
            unit(max)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The shapes `tools/list` advertises for `search` and `read_many` (trimmed).
    fn schema() -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "limit": {"type": ["integer", "null"], "format": "uint", "minimum": 1, "maximum": 1000},
                "regex": {"type": ["boolean", "null"]},
                "mode": {"enum": ["fast", "exact"]},
                "files": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["path"],
                        "properties": {"path": {"type": "string"}, "start_line": {"type": ["integer", "null"], "minimum": 1}}
                    }
                }
            }
        })
    }

    fn property(name: &str, value: Value) -> Result<(), String> {
        check(&schema()["properties"][name], &value, name)
    }

    #[test]
    fn p8_types_ranges_and_nested_keys_are_checked() {
        assert!(property("limit", json!(20)).is_ok());
        assert!(property("limit", json!(null)).is_ok());
        assert_eq!(
            property("limit", json!("20")).unwrap_err(),
            "limit must be int or None, not str"
        );
        assert_eq!(
            property("limit", json!(1.5)).unwrap_err(),
            "limit must be int or None, not float"
        );
        assert_eq!(
            property("limit", json!(5000)).unwrap_err(),
            "limit must be at most 1000, not 5000"
        );
        assert_eq!(
            property("limit", json!(0)).unwrap_err(),
            "limit must be at least 1, not 0"
        );
        assert!(property("regex", json!(1)).is_err());
        assert!(property("query", json!("")).is_err());
        assert!(
            property("mode", json!("slow"))
                .unwrap_err()
                .contains("\"fast\"")
        );
        assert!(property("files", json!([])).is_err());
        assert_eq!(
            property(
                "files",
                json!([{"path": "a"}, {"path": "b", "start_line": 0}])
            )
            .unwrap_err(),
            "files[1].start_line must be at least 1, not 0"
        );
        assert!(
            property("files", json!([{"path": "a", "end": 3}]))
                .unwrap_err()
                .contains("unknown key \"end\"")
        );
        assert!(
            property("files", json!([{"start_line": 3}]))
                .unwrap_err()
                .contains("needs the key \"path\"")
        );
    }

    #[test]
    fn p8_nesting_is_bounded() {
        let mut deep = json!(1);
        let mut nested = json!(true);
        for _ in 0..100 {
            deep = json!([deep]);
            nested = json!({"type": "array", "items": nested});
        }
        assert!(check(&nested, &deep, "x").unwrap_err().contains("deeper"));
    }
}
