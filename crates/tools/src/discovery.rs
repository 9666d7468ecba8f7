//! `discovery`: list readable repositories.

use service::Cost;
use std::time::Duration;

use crate::render::header;
use crate::tool::{Answer, Face, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use service::{CallContext, RepoSummary, Service};

/// The `discovery` tool.
pub(crate) struct Discovery;

/// `discovery {}` (S-5): no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiscoveryArgs {}

impl Tool for Discovery {
    type Args = DiscoveryArgs;
    const NAME: &'static str = "discovery";
    const COST: Cost = Cost::light(Duration::from_secs(10));
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
                blocks: vec![render_discovery(&repositories)],
                query_rewrite: None,
            },
            Face::Api => Answer::json(&serde_json::json!({ "repositories": repositories })),
        })
    }
}

/// A `discovery` answer: a count, then one record per repository, records separated by a blank
/// line.
fn render_discovery(repos: &[RepoSummary]) -> String {
    let mut out = String::new();
    header(&mut out, "Repositories", repos.len());
    for repo in repos {
        out.push('\n');
        header(&mut out, "Repo", &repo.name);
        if !repo.registered_path.is_empty() {
            header(&mut out, "RegisteredPath", &repo.registered_path);
        }
        if let Some(branch) = &repo.default_branch {
            header(&mut out, "DefaultBranch", branch);
        }
        if let Some(head) = &repo.head {
            header(&mut out, "Head", head);
        }
        header(&mut out, "Indexed", repo.indexed);
        if let Some(at) = &repo.last_sync {
            header(&mut out, "LastSync", at);
        }
        if let Some(error) = &repo.last_sync_error {
            header(&mut out, "LastSyncError", error);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn s5_discovery_rendering_omits_absent_values() {
        let repos = vec![RepoSummary {
            name: "a/b".into(),
            registered_path: String::new(),
            default_branch: Some("main".into()),
            head: Some(SHA.into()),
            indexed: false,
            last_sync: None,
            last_sync_error: None,
        }];
        assert_eq!(
            render_discovery(&repos),
            format!(
                "Repositories: 1\n\nRepo: a/b\nDefaultBranch: main\nHead: {SHA}\nIndexed: false\n"
            )
        );
    }
}
