//! Entry points of the fuzz targets `tool_args` and `server_plugin_tables` (`fuzz/`, issue
//! 43) and of their corpus replay in CI (`tests/fuzz_corpus.rs`). Each feeds untrusted bytes
//! to the real parser and asserts what must hold of its answer; a panic is a finding. Not an
//! API (hidden); nothing here changes what a tool does.

use crate::{Arguments, Limits, TOOLS, arguments_from_pairs};
use serde_json::Value;
use std::sync::OnceLock;

/// The limits of a default deployment, as tools state them.
fn limits() -> &'static Limits {
    static LIMITS: OnceLock<Limits> = OnceLock::new();
    LIMITS.get_or_init(|| Limits::new(&service::ServiceConfig::default()))
}

/// The input schema of `tool`, made once per tool (schemars is slow beside the parse).
fn schema(tool: &dyn crate::ToolDef) -> &'static Arguments {
    static SCHEMAS: OnceLock<Vec<Arguments>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| {
        TOOLS
            .iter()
            .map(|tool| tool.input_schema(limits()))
            .collect()
    });
    let index = TOOLS
        .iter()
        .position(|t| t.name() == tool.name())
        .unwrap_or_default();
    &schemas[index]
}

/// Target `tool_args`: a tool call's arguments as every face takes them (M-3, R-6): the
/// first line names the tool (or is a number choosing one of [`TOOLS`]); the rest is its
/// arguments as a JSON object (MCP, POST) and as a query string typed by the tool's schema
/// (GET). Both are parsed strictly by the tool's own argument type; an argument the schema
/// does not name is refused.
pub fn tool_arguments(data: &[u8]) {
    let (first, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(end) => (&data[..end], &data[end + 1..]),
        None => (data, &[][..]),
    };
    let first = String::from_utf8_lossy(first);
    let name = first.trim();
    let tool = match name.parse::<usize>() {
        Ok(n) => TOOLS[n % TOOLS.len()],
        Err(_) => match crate::find(name) {
            Some(tool) => tool,
            None => return,
        },
    };
    let schema = schema(tool);
    let properties = schema.get("properties").and_then(Value::as_object);
    let named = |arguments: &Arguments| {
        arguments
            .keys()
            .all(|key| properties.is_some_and(|p| p.contains_key(key)))
    };
    if let Ok(Value::Object(arguments)) = serde_json::from_slice::<Value>(rest) {
        let all_named = named(&arguments);
        let parsed = tool.parse_arguments(arguments);
        assert!(
            all_named || parsed.is_err(),
            "{}: an argument its schema does not name was accepted",
            tool.name()
        );
        if let Err(message) = parsed {
            assert!(message.contains(tool.name()), "{message:?} names no tool");
        }
    }
    let query = String::from_utf8_lossy(rest);
    let pairs = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (name.to_owned(), value.to_owned())
        });
    if let Ok(arguments) = arguments_from_pairs(schema, pairs) {
        let all_named = named(&arguments);
        let parsed = tool.parse_arguments(arguments);
        assert!(all_named || parsed.is_err());
    }
}

/// Target `server_plugin_tables`: a server plugin's tables (`QUERY_ALIASES`, `ALIASES`,
/// `TOOL_PRESETS` checked against the real tools' schemas), its `REQUIRES` pin and a hook's
/// result, as the host validates them (see `pyplugin::fuzzing::tables`).
pub fn server_plugin_tables(data: &[u8]) {
    static CATALOG: OnceLock<pyplugin::ToolCatalog> = OnceLock::new();
    let catalog = CATALOG.get_or_init(|| crate::plugin_catalog(limits()));
    pyplugin::fuzzing::tables(data, catalog);
}
