//! `discovery`: list readable repositories.

use crate::render;
use crate::tool::{Answer, Face, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use service::{CallContext, Service};

/// The `discovery` tool.
pub(crate) struct Discovery;

/// `discovery {}` (S-5): no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiscoveryArgs {}

impl Tool for Discovery {
    type Args = DiscoveryArgs;
    const NAME: &'static str = "discovery";
    const TITLE: &'static str = "List readable repositories";
    const DESCRIPTION: &'static str = "\
List the repositories you can read. The answer: `Repositories: N`, then one record per \
repository separated by a blank line: Repo, RegisteredPath (only when the registration is a \
directory of a monorepo: paths outside it are invisible), DefaultBranch, Head (full SHA), \
Indexed, LastSync, LastSyncError. Not needed before read when you know the repository.";

    async fn run(
        service: &Service,
        ctx: &CallContext,
        args: Self::Args,
        face: Face,
    ) -> Result<Answer, ToolError> {
        let DiscoveryArgs {} = args;
        let repositories = service.discovery(ctx).await?;
        Ok(match face {
            Face::Mcp => Answer::Text {
                blocks: vec![render::render_discovery(&repositories)],
                query_rewrite: None,
            },
            Face::Api => Answer::json(&serde_json::json!({ "repositories": repositories })),
        })
    }
}
