//! `plugin_status`: the server plugins' state as the caller may see it (P-12).

use service::Cost;
use std::time::Duration;

use crate::render::header_value;
use crate::tool::{Answer, Capability, Face, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use service::{CallContext, ServerPluginsStatus, Service, StatusDetail};
use std::fmt::Write;

/// The `plugin_status` tool.
pub(crate) struct PluginStatus;

/// `plugin_status {}`: no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

impl Tool for PluginStatus {
    type Args = NoArgs;
    const NAME: &'static str = "plugin_status";
    const COST: Cost = Cost::light(Duration::from_secs(10));
    const TITLE: &'static str = "Server plugin status";
    const DESCRIPTION: &'static str = "\
Show the server plugins (operator Python plugins, not repository plugins): state, epoch, \
loaded files with their hooks and tables, rejected files and why, hooks disabled until the \
next reload and why, files whose clean-up code was interrupted when an old epoch was \
released, versions, and whether the search index waits for a rebuild. Tracebacks \
and server paths are shown to operators (the prepare capability) only.";
    const CAPABILITY: Capability = Capability::Read;
    const PRESETABLE: bool = false;

    async fn run(
        service: &Service,
        ctx: &CallContext,
        args: Self::Args,
        face: Face,
    ) -> Result<Answer, ToolError> {
        let NoArgs {} = args;
        let status = service.server_plugins_status_for(ctx);
        Ok(Answer::of(face, &status, render_status))
    }
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
    let _ = writeln!(out, "ReleaseFaults: {}", host.release_faults.len());
    for fault in &host.release_faults {
        let _ = writeln!(
            out,
            "- {} epoch {}: {}",
            header_value(&fault.file),
            fault.epoch,
            first_line(&fault.reason)
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
