//! The MCP face of server plugins (SPEC P-10, P-22): `TOOL_PRESETS` as tools of their own,
//! and the answer block that discloses an argument rewrite.

use rmcp::ErrorData;
use rmcp::model::{JsonObject, Tool};
use serde_json::Value;
use service::{ArgumentRewrite, ToolPreset};
use std::fmt::Write;
use std::sync::Arc;
use tools::render::header_value;

/// The MCP tool of a preset: the base tool's schema without the fixed arguments.
pub(crate) fn preset_tool(name: &str, preset: &ToolPreset, base: &Tool) -> Tool {
    let mut schema: JsonObject = (*base.input_schema).clone();
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for fixed in preset.arguments.keys() {
            properties.remove(fixed);
        }
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| r.as_str().is_none_or(|r| !preset.arguments.contains_key(r)));
    }
    let mut tool = Tool::new(
        name.to_owned(),
        preset.description.clone(),
        Arc::new(schema),
    );
    tool.annotations = base.annotations.clone();
    tool.title = Some(format!("Preset of {}", preset.tool));
    tool
}

/// The caller's arguments with the preset's fixed ones; passing a fixed one is invalid.
pub(crate) fn preset_arguments(
    name: &str,
    preset: &ToolPreset,
    arguments: Option<JsonObject>,
) -> Result<JsonObject, ErrorData> {
    let mut merged = arguments.unwrap_or_default();
    if let Some(fixed) = merged.keys().find(|k| preset.arguments.contains_key(*k)) {
        return Err(ErrorData::invalid_params(
            format!(
                "invalid arguments for tool `{name}`: `{}` is fixed by this preset; omit it, or call `{}` directly",
                header_value(fixed),
                preset.tool
            ),
            None,
        ));
    }
    for (key, value) in &preset.arguments {
        merged.insert(key.clone(), value.clone());
    }
    Ok(merged)
}

/// The `ArgumentsRewritten:` block (P-10, SPEC §9).
pub(crate) fn render_rewrite(rewrite: &ArgumentRewrite) -> String {
    let mut out = String::from("ArgumentsRewritten:\n");
    let _ = writeln!(out, "Plugin: {}", header_value(&rewrite.files.join(", ")));
    let _ = writeln!(out, "Original: {}", rewrite.original);
    let _ = writeln!(out, "Effective: {}", rewrite.effective);
    out
}

/// Merges the disclosure of an `on_tool_call` rewrite and of a `QUERY_ALIASES` rewrite of
/// the same call into one (SPEC §9: one block).
pub(crate) fn merge_rewrites(
    call: Option<ArgumentRewrite>,
    query: Option<&ArgumentRewrite>,
    arguments: &JsonObject,
) -> Option<ArgumentRewrite> {
    let Some(query) = query else {
        return call;
    };
    let mut merged = call.unwrap_or_else(|| ArgumentRewrite {
        files: Vec::new(),
        original: Value::Object(arguments.clone()),
        effective: Value::Object(arguments.clone()),
    });
    merged.files.extend(query.files.iter().cloned());
    if let (Value::Object(effective), Some(q)) =
        (&mut merged.effective, query.effective.get("query"))
    {
        effective.insert("query".into(), q.clone());
    }
    Some(merged)
}
