//! The MCP face of server plugins (SPEC P-10, P-12, P-22): the `reload_plugins` and
//! `plugin_status` tools, `TOOL_PRESETS` as tools of their own, and the answer blocks that
//! disclose what plugins changed.

use crate::render::header_value;
use rmcp::ErrorData;
use rmcp::model::{JsonObject, Tool};
use serde_json::Value;
use service::{ArgumentRewrite, ServerPluginsStatus, StatusDetail, ToolPreset};
use std::fmt::Write;
use std::sync::Arc;

pub(crate) const RELOAD_DESCRIPTION: &str = "\
Operator tool: re-read the server-plugins directory into a new epoch (calls in flight finish \
on the old one) and answer the new plugin status. Refused when server plugins are disabled or \
wedged, and to callers without the prepare capability (over HTTP: a token of a user made with \
`csg user add NAME --prepare`).";

pub(crate) const STATUS_DESCRIPTION: &str = "\
Show the server plugins (operator Python plugins, not repository plugins): state, epoch, \
loaded files with their hooks and tables, rejected files and why, hooks disabled until the \
next reload and why, versions, and whether the search index waits for a rebuild. Tracebacks \
and server paths are shown to operators (the prepare capability) only.";

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

/// The `OperatorNotes:` block: one `- ` item per note, continuation lines indented.
pub(crate) fn render_notes(notes: &[String]) -> String {
    let mut out = String::from("OperatorNotes:\n");
    for note in notes {
        for (i, line) in note.lines().enumerate() {
            out.push_str(if i == 0 { "- " } else { "  " });
            out.push_str(&header_value(line));
            out.push('\n');
        }
        if note.is_empty() {
            out.push_str("-\n");
        }
    }
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

/// The `plugin_status` answer (P-12), as detailed as the service decided for the caller.
pub(crate) fn render_status(status: &ServerPluginsStatus) -> String {
    let host = &status.host;
    let mut out = String::new();
    let _ = writeln!(out, "ServerPlugins: {}", host.state.name());
    if let Some(reason) = &host.state_reason {
        let _ = writeln!(out, "Reason: {}", header_value(reason));
    }
    if matches!(host.state, pyplugin_state::Disabled) {
        out.push_str("Enable: set SOURCEGRAPH_SERVER_PLUGINS_ENABLED=true and restart\n");
    }
    let _ = writeln!(out, "Epoch: {}", host.epoch);
    let _ = writeln!(
        out,
        "LastReload: {}",
        match &host.last_reload_error {
            None => "ok".to_owned(),
            Some(error) => format!("failed: {}", header_value(error)),
        }
    );
    let _ = writeln!(out, "Index: {}", status.index);
    if !status.index_stale_repos.is_empty() {
        let _ = writeln!(
            out,
            "IndexStaleRepos: {}",
            header_value(&status.index_stale_repos.join(", "))
        );
    }
    let _ = writeln!(out, "HookTimeoutMs: {}", host.hook_timeout_ms);
    let _ = writeln!(
        out,
        "Versions: HOST_CONTRACT_VERSION={} HOOKS_VERSION={} PRODUCT={}",
        host.host_contract_version, host.hooks_version, host.product
    );
    let _ = writeln!(out, "Files: {}", host.files.len());
    for file in &host.files {
        let _ = writeln!(
            out,
            "- {} hooks={} tables={} sha256={}",
            header_value(&file.file),
            list(&file.hooks),
            list(&file.tables),
            file.sha256
        );
    }
    let _ = writeln!(out, "Rejected: {}", host.rejected.len());
    let full = status.detail == StatusDetail::Full;
    for rejected in &host.rejected {
        for reason in &rejected.reasons {
            // A reason names its file already unless it is a traceback's last line.
            let line = first_line(reason);
            let prefix = format!("{}: ", rejected.file);
            let line = line.strip_prefix(&prefix).unwrap_or(&line);
            let _ = writeln!(out, "- {}: {line}", header_value(&rejected.file));
            // Operators get the whole message (a traceback) under its summary line; the
            // service has already cut it to that line for everyone else.
            let whole = reason.trim_end();
            if full && whole.contains('\n') {
                let whole = whole.strip_prefix(&prefix).unwrap_or(whole);
                for line in whole.lines() {
                    let _ = writeln!(out, "    {}", header_value(line));
                }
            }
        }
    }
    let _ = writeln!(out, "Disabled: {}", host.disabled.len());
    for disabled in &host.disabled {
        let _ = writeln!(
            out,
            "- {} {}: {}",
            header_value(&disabled.file),
            disabled.hook,
            first_line(&disabled.reason)
        );
    }
    let _ = writeln!(out, "HookFailures: {}", host.hook_failures.len());
    for failures in &host.hook_failures {
        let _ = writeln!(
            out,
            "- {} {}: {}",
            header_value(&failures.file),
            failures.hook,
            failures.count
        );
    }
    out.push_str(if full {
        "Detail: full (operator view: tracebacks and paths included)\n"
    } else {
        "Detail: summary (one-line reasons without tracebacks or host paths; operators, the \
         local user and callers with the prepare capability, see the full detail)\n"
    });
    out
}

use service::HostState as pyplugin_state;

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        header_value(&items.join(",")).into_owned()
    }
}

fn first_line(text: &str) -> String {
    header_value(service::failure_summary(text)).into_owned()
}
