//! `availability`: check a repository and revision.

use crate::render;
use crate::tool::{Answer, Face, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use service::{CallContext, Service};

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
            render::render_availability(answer, include_plugins)
        }))
    }
}
