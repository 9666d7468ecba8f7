//! Declarative tables (P-8, P-22) and the `REQUIRES` pin (P-9), checked as data at load time.
//!
//! Tables are module-level constants read once when a file loads: no plugin code runs on the
//! paths they affect, and an invalid entry rejects the whole file, naming the entry and why.

use crate::ToolCatalog;
use crate::hookset::{HOOKS_VERSION, HOST_CONTRACT_VERSION, PRODUCT, kind};
use crate::schema;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Longest `QUERY_ALIASES` key or value, in bytes.
const MAX_TERM_BYTES: usize = 256;
/// Longest `TOOL_PRESETS` description, in characters.
const MAX_PRESET_DESCRIPTION: usize = 1024;

/// A `TOOL_PRESETS` entry: a new tool that is an existing tool with fixed arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolPreset {
    /// The built-in tool it calls.
    pub tool: String,
    /// Its own description, shown in `tools/list`.
    pub description: String,
    /// The arguments it fixes (a caller may not pass these).
    pub arguments: Map<String, Value>,
    /// The plugin file that declared it.
    pub file: String,
}

/// A table value with the file it came from (for disclosure and status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sourced {
    /// The value of the entry.
    pub value: String,
    /// The plugin file that declared it.
    pub file: String,
}

/// The tables of one file, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FileTables {
    pub query_aliases: BTreeMap<String, String>,
    pub aliases: BTreeMap<String, String>,
    pub presets: BTreeMap<String, ToolPreset>,
}

/// The tables of an epoch: every loaded file's entries merged in file order (a later file
/// overrides an earlier one's entry of the same key, as a pipeline would).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tables {
    /// Search term → replacement (P-22), keys lower-cased for case-insensitive lookup.
    pub query_aliases: BTreeMap<String, Sourced>,
    /// Alias → repository name (P-22).
    pub aliases: BTreeMap<String, Sourced>,
    /// Preset tool name → preset (P-22).
    pub tool_presets: BTreeMap<String, ToolPreset>,
}

impl Tables {
    pub(crate) fn merge(&mut self, file: &str, tables: FileTables) {
        for (key, value) in tables.query_aliases {
            self.query_aliases.insert(
                key.to_lowercase(),
                Sourced {
                    value,
                    file: file.to_owned(),
                },
            );
        }
        for (key, value) in tables.aliases {
            self.aliases.insert(
                key,
                Sourced {
                    value,
                    file: file.to_owned(),
                },
            );
        }
        self.tool_presets.extend(tables.presets);
    }

    /// True when no table has an entry.
    pub fn is_empty(&self) -> bool {
        self.query_aliases.is_empty() && self.aliases.is_empty() && self.tool_presets.is_empty()
    }
}

/// Checks one table's value; `Err` names the entry and why.
pub(crate) fn check_table(
    name: &str,
    value: &Value,
    file: &str,
    catalog: &ToolCatalog,
    into: &mut FileTables,
) -> Result<(), String> {
    let entries = value
        .as_object()
        .ok_or_else(|| format!("{name} must be a dict, not {}", kind(value)))?;
    for (key, entry) in entries {
        let bad = |why: String| format!("{name}[{key:?}] {why}");
        match name {
            "QUERY_ALIASES" => {
                let replacement = entry
                    .as_str()
                    .ok_or_else(|| bad(format!("must be a str, not {}", kind(entry))))?;
                if key.is_empty() || key.len() > MAX_TERM_BYTES || key.contains(char::is_whitespace)
                {
                    return Err(bad(format!(
                        "is not a search term: a term is 1 to {MAX_TERM_BYTES} bytes without whitespace"
                    )));
                }
                if replacement.trim().is_empty()
                    || replacement.len() > MAX_TERM_BYTES
                    || replacement.contains(['\n', '\r'])
                {
                    return Err(bad(format!(
                        "must be a non-empty one-line replacement of at most {MAX_TERM_BYTES} bytes"
                    )));
                }
                into.query_aliases
                    .insert(key.clone(), replacement.to_owned());
            }
            "ALIASES" => {
                let target = entry.as_str().ok_or_else(|| {
                    bad(format!("must be a repository name, not {}", kind(entry)))
                })?;
                let alias_ok = (1..=128).contains(&key.len())
                    && key.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/')
                    });
                if !alias_ok {
                    return Err(bad(
                        "is not a valid alias: use 1 to 128 characters of A-Z a-z 0-9 . _ - /"
                            .into(),
                    ));
                }
                if !is_repo_name(target) {
                    return Err(bad(format!(
                        "must name a repository as owner/name, not {target:?}"
                    )));
                }
                if key == target {
                    return Err(bad("is an alias of itself".into()));
                }
                into.aliases.insert(key.clone(), target.to_owned());
            }
            "TOOL_PRESETS" => {
                let preset = check_preset(key, entry, file, catalog).map_err(bad)?;
                into.presets.insert(key.clone(), preset);
            }
            _ => return Err(format!("{name} is not a table of this server")),
        }
    }
    Ok(())
}

fn is_repo_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    parts.len() >= 2
        && name.len() <= 512
        && parts.iter().all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

fn check_preset(
    name: &str,
    entry: &Value,
    file: &str,
    catalog: &ToolCatalog,
) -> Result<ToolPreset, String> {
    let name_ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !name_ok {
        return Err("is not a valid tool name: use [a-z][a-z0-9_]{0,63}".into());
    }
    if catalog.reserved.contains(name) {
        return Err("is the name of a built-in tool; choose another name".into());
    }
    let obj = entry.as_object().ok_or_else(|| {
        format!(
            "must be a dict with tool, description and arguments, not {}",
            kind(entry)
        )
    })?;
    if let Some(key) = obj
        .keys()
        .find(|k| !["tool", "description", "arguments"].contains(&k.as_str()))
    {
        return Err(format!(
            "has an unknown key {key:?} (allowed: tool, description, arguments)"
        ));
    }
    if catalog.preset_targets.is_empty() {
        // Only an embedding that passed no tools gets here (`HostConfig::tools` left empty).
        return Err(
            "cannot be checked: this server gave the plugin host no tools to build \
                    presets on, so TOOL_PRESETS is not available here"
                .into(),
        );
    }
    let allowed: Vec<&str> = catalog.preset_targets.keys().map(String::as_str).collect();
    let tool = obj
        .get("tool")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("needs \"tool\": one of {}", allowed.join(", ")))?;
    let schema = catalog.preset_targets.get(tool).ok_or_else(|| {
        format!(
            "names tool {tool:?}, which is not a tool a preset can use (one of {})",
            allowed.join(", ")
        )
    })?;
    let properties = schema.get("properties").and_then(Value::as_object);
    let arg_names: Vec<&str> = properties
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let description = obj
        .get("description")
        .and_then(Value::as_str)
        .filter(|d| !d.trim().is_empty() && d.chars().count() <= MAX_PRESET_DESCRIPTION)
        .ok_or_else(|| {
            format!("needs \"description\": a non-empty str of at most {MAX_PRESET_DESCRIPTION} characters")
        })?;
    let arguments = match obj.get("arguments") {
        None => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(other) => return Err(format!("\"arguments\" must be a dict, not {}", kind(other))),
    };
    if let Some(arg) = arguments.keys().find(|a| !arg_names.contains(&a.as_str())) {
        return Err(format!(
            "fixes argument {arg:?}, which {tool} does not take (its arguments: {})",
            arg_names.join(", ")
        ));
    }
    for (arg, value) in &arguments {
        if let Some(property) = properties.and_then(|p| p.get(arg)) {
            schema::check(property, value, &format!("argument {arg:?}"))
                .map_err(|why| format!("fixes an invalid value: {why} (as {tool} takes it)"))?;
        }
    }
    Ok(ToolPreset {
        tool: tool.to_owned(),
        description: description.to_owned(),
        arguments,
        file: file.to_owned(),
    })
}

/// Checks `REQUIRES` (P-9): `Err` names both sides of the first mismatch.
pub(crate) fn check_requires(value: &Value) -> Result<(), String> {
    let pins = value.as_object().ok_or_else(|| {
        format!(
            "REQUIRES must be a dict like {{\"HOOKS_VERSION\": 1}}, not {}",
            kind(value)
        )
    })?;
    for (key, pin) in pins {
        match key.as_str() {
            "HOST_CONTRACT_VERSION" | "HOOKS_VERSION" => {
                let have = if key == "HOOKS_VERSION" {
                    HOOKS_VERSION
                } else {
                    HOST_CONTRACT_VERSION
                };
                let ok = match pin {
                    Value::Number(n) if n.is_i64() => n.as_i64() == Some(have),
                    Value::String(spec) => version_matches(spec, have).map_err(|why| {
                        format!("REQUIRES[{key:?}] = {spec:?} is not a version specifier: {why}")
                    })?,
                    other => {
                        return Err(format!(
                            "REQUIRES[{key:?}] must be an int or a specifier such as \">=1,<2\", not {}",
                            kind(other)
                        ));
                    }
                };
                if !ok {
                    return Err(format!(
                        "REQUIRES {key} {pin} but this server has {key} = {have}"
                    ));
                }
            }
            "PRODUCT" => {
                if pin.as_str() != Some(PRODUCT) {
                    return Err(format!(
                        "REQUIRES PRODUCT {pin} but this server is PRODUCT = {PRODUCT:?}"
                    ));
                }
            }
            other => {
                return Err(format!(
                    "REQUIRES names {other:?}; it may pin HOST_CONTRACT_VERSION, HOOKS_VERSION and PRODUCT"
                ));
            }
        }
    }
    Ok(())
}

/// Whether `have` satisfies a specifier like `">=1,<2"` (comparators `==`, `!=`, `>=`, `>`,
/// `<=`, `<` and a bare number meaning `==`).
fn version_matches(spec: &str, have: i64) -> Result<bool, String> {
    let mut all = true;
    let mut any = false;
    for part in spec.split(',') {
        let part = part.trim();
        let (op, number) = ["==", "!=", ">=", "<=", ">", "<"]
            .iter()
            .find_map(|op| part.strip_prefix(op).map(|rest| (*op, rest)))
            .unwrap_or(("==", part));
        let n: i64 = number
            .trim()
            .parse()
            .map_err(|_| format!("{part:?} is not a comparison with an integer"))?;
        any = true;
        all &= match op {
            "==" => have == n,
            "!=" => have != n,
            ">=" => have >= n,
            "<=" => have <= n,
            ">" => have > n,
            _ => have < n,
        };
    }
    if !any {
        return Err("it is empty".into());
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A catalog with `search` as the one preset target (its schema trimmed to what the
    /// tests use) and the built-in names reserved.
    fn catalog() -> ToolCatalog {
        ToolCatalog {
            preset_targets: [(
                "search".to_owned(),
                json!({"type": "object", "additionalProperties": false, "properties": {
                    "query": {"type": "string"},
                    "path": {"type": ["string", "null"]},
                    "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000}
                }}),
            )]
            .into(),
            reserved: ["read".to_owned(), "search".to_owned()].into(),
        }
    }

    #[test]
    fn p9_requires_exact_and_specifiers() {
        assert!(check_requires(&json!({"HOOKS_VERSION": 1, "PRODUCT": PRODUCT})).is_ok());
        assert!(check_requires(&json!({"HOOKS_VERSION": ">=1,<2"})).is_ok());
        let err = check_requires(&json!({"HOOKS_VERSION": ">=2"})).unwrap_err();
        assert!(
            err.contains("\">=2\"") && err.contains("HOOKS_VERSION = 1"),
            "{err}"
        );
        let err = check_requires(&json!({"PRODUCT": "graph-metadata-search"})).unwrap_err();
        assert!(
            err.contains("graph-metadata-search") && err.contains(PRODUCT),
            "{err}"
        );
        assert!(check_requires(&json!({"HOOKS_VERSION": "about one"})).is_err());
        assert!(check_requires(&json!({"VERSION": 1})).is_err());
    }

    #[test]
    fn p8_bad_table_entries_are_named() {
        let mut t = FileTables::default();
        let err = check_table(
            "QUERY_ALIASES",
            &json!({"k8s": 5}),
            "a.py",
            &catalog(),
            &mut t,
        )
        .unwrap_err();
        assert!(
            err.contains("QUERY_ALIASES[\"k8s\"]") && err.contains("str"),
            "{err}"
        );
        let err = check_table(
            "ALIASES",
            &json!({"kb": "nope"}),
            "a.py",
            &catalog(),
            &mut t,
        )
        .unwrap_err();
        assert!(
            err.contains("ALIASES[\"kb\"]") && err.contains("owner/name"),
            "{err}"
        );
        let err = check_table(
            "TOOL_PRESETS",
            &json!({"find": {"tool": "grep", "description": "d"}}),
            "a.py",
            &catalog(),
            &mut t,
        )
        .unwrap_err();
        assert!(
            err.contains("TOOL_PRESETS[\"find\"]") && err.contains("\"grep\""),
            "{err}"
        );
        let err = check_table(
            "TOOL_PRESETS",
            &json!({"find": {"tool": "search", "description": "d", "arguments": {"q": 1}}}),
            "a.py",
            &catalog(),
            &mut t,
        )
        .unwrap_err();
        assert!(err.contains("\"q\"") && err.contains("query"), "{err}");
        let err = check_table(
            "TOOL_PRESETS",
            &json!({"read": {"tool": "search", "description": "d"}}),
            "a.py",
            &catalog(),
            &mut t,
        )
        .unwrap_err();
        assert!(err.contains("built-in"), "{err}");
        check_table(
            "TOOL_PRESETS",
            &json!({"search_docs": {"tool": "search", "description": "Docs.", "arguments": {"path": "docs/**"}}}),
            "a.py",
            &catalog(),
            &mut t,
        )
        .unwrap();
        assert_eq!(t.presets["search_docs"].tool, "search");
        let err = check_table(
            "TOOL_PRESETS",
            &json!({"x": {"tool": "search", "description": "d"}}),
            "a.py",
            &ToolCatalog::default(),
            &mut t,
        )
        .unwrap_err();
        assert!(err.contains("no tools to build presets on"), "{err}");
    }
}
