//! `availability`: check a repository and revision.

use service::Cost;
use std::time::Duration;

use crate::render::{header, header_value};
use crate::tool::{Answer, Face, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use service::{AvailabilityAnswer, CallContext, PluginDiscovery, Service};

/// The `availability` tool.
pub(crate) struct Availability;

/// `availability {repo, revision?, include_plugins?}` (SPEC §9).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AvailabilityArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Full SHA, unique short SHA, branch or tag. Omitted: the head of the default branch.
    #[serde(default)]
    pub revision: Option<String>,
    /// Also list the repository plugins found at that commit (static discovery; nothing is
    /// run). Default false.
    #[serde(default)]
    pub include_plugins: Option<bool>,
}

impl Tool for Availability {
    type Args = AvailabilityArgs;
    const NAME: &'static str = "availability";
    const COST: Cost = Cost::light(Duration::from_secs(10));
    const TITLE: &'static str = "Check a repository and revision";
    const DESCRIPTION: &'static str = "\
Check whether a repository is visible and a revision resolves and is readable now. The answer \
lines: Repo, Visible, Revision, Commit (full SHA), Readable, Reason (why not), Indexed; with \
include_plugins: true also the repository plugins discovered at that commit (nothing is run). \
Not needed before read.";

    async fn run(
        service: &Service,
        ctx: &CallContext,
        args: Self::Args,
        face: Face,
    ) -> Result<Answer, ToolError> {
        let include_plugins = args.include_plugins.unwrap_or(false);
        let request = service::AvailabilityRequest {
            repo: args.repo,
            revision: args.revision,
            include_plugins,
        };
        let answer = service.availability(ctx, request).await?;
        Ok(Answer::of(face, &answer, |answer| {
            render_availability(answer, include_plugins)
        }))
    }
}

/// An `availability` answer. `include_plugins` is accepted now; repository-plugin discovery
/// joins when the plugin host exists, and until then the answer says so instead of implying
/// that there are no plugins.
fn render_availability(answer: &AvailabilityAnswer, include_plugins: bool) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    header(&mut out, "Visible", answer.visible);
    if let Some(revision) = &answer.revision {
        header(&mut out, "Revision", revision);
    }
    if let Some(commit) = &answer.commit {
        header(&mut out, "Commit", commit);
    }
    header(&mut out, "Readable", answer.readable);
    if let Some(reason) = &answer.reason {
        header(&mut out, "Reason", reason);
    }
    header(&mut out, "Indexed", answer.indexed);
    match (&answer.plugins, include_plugins) {
        (Some(PluginDiscovery::Found(plugins)), _) => {
            header(&mut out, "Plugins", plugins.len());
            for plugin in plugins {
                out.push_str("\n- Name: ");
                out.push_str(&header_value(&plugin.name));
                let mut field = |name: &str, value: &str| {
                    out.push_str("\n  ");
                    out.push_str(name);
                    out.push_str(": ");
                    out.push_str(&header_value(value));
                };
                field("Directory", &plugin.directory);
                // InputSchema is compact one-line JSON, bounded by discovery (W-3).
                for (name, value) in [
                    ("Title", &plugin.title),
                    ("Description", &plugin.description),
                    ("Version", &plugin.version),
                    ("InputSchema", &plugin.input_schema),
                ] {
                    if let Some(value) = value {
                        field(name, value);
                    }
                }
                match &plugin.diagnostic {
                    Some(diagnostic) => field("Diagnostic", diagnostic),
                    None => {
                        field("Operations", &plugin.operations.join(", "));
                        field(
                            "DefaultEnabled",
                            if plugin.default_enabled {
                                "true"
                            } else {
                                "false"
                            },
                        );
                    }
                }
            }
            out.push('\n');
        }
        (Some(PluginDiscovery::Failed(why)), _) => {
            header(&mut out, "Plugins", &format!("unavailable: {why}"))
        }
        (None, true) => header(
            &mut out,
            "Plugins",
            "unavailable: the revision is not readable",
        ),
        (None, false) => {}
    }
    out
}
