//! `list`: list a directory.

use crate::render;
use crate::tool::{Answer, Face, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use service::{CallContext, Service};

/// The `list` tool.
pub(crate) struct List;

/// `list {repo, revision?, path?, depth?}` (S-7).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Full SHA, unique short SHA, branch or tag. Omitted: the head of the default branch.
    #[serde(default)]
    pub revision: Option<String>,
    /// Directory to list, repository-relative. Omitted: the top of the repository (or of its
    /// registered path).
    #[serde(default)]
    pub path: Option<String>,
    /// Levels to descend, 1 (default: direct entries only) to 10.
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub depth: Option<u32>,
}

impl Tool for List {
    type Args = ListArgs;
    const NAME: &'static str = "list";
    const TITLE: &'static str = "List a directory";
    const DESCRIPTION: &'static str = "\
List a directory of a repository at a commit, to find paths you do not know. The answer: \
header lines (Repo, Commit, Path, Depth, Entries, Truncated), a blank line, then one \
repository-relative path per line, usable as `read`'s path as it is. Directories end with `/`; \
files show `  [N bytes]`, executables `  [executable, N bytes]`; `  [symlink]` and \
`  [submodule]` entries are not readable as text.";

    async fn run(
        service: &Service,
        ctx: &CallContext,
        args: Self::Args,
        face: Face,
    ) -> Result<Answer, ToolError> {
        let request = service::ListRequest {
            repo: args.repo,
            revision: args.revision,
            path: args.path,
            depth: args.depth,
        };
        let answer = service.list(ctx, request).await?;
        Ok(Answer::of(face, &answer, render::render_list))
    }
}
