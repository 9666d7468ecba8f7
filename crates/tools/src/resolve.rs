//! `resolve`: resolve a revision.

use service::Cost;
use std::time::Duration;

use crate::render::header;
use crate::tool::{Answer, Face, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use service::{CallContext, ResolveAnswer, Service};

/// The `resolve` tool.
pub(crate) struct Resolve;

/// `resolve {repo, revision}` (S-6).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResolveArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Branch, tag, full SHA or unique short SHA (at least 7 hex digits).
    pub revision: String,
}

impl Tool for Resolve {
    type Args = ResolveArgs;
    const NAME: &'static str = "resolve";
    const COST: Cost = Cost::light(Duration::from_secs(5));
    const TITLE: &'static str = "Resolve a revision";
    const DESCRIPTION: &'static str = "\
Resolve a branch, tag or short SHA to the full commit SHA (answer lines: Repo, Revision, \
Commit). Not needed before read: read accepts the same revision forms and reports the full SHA \
it read.";

    async fn run(
        service: &Service,
        ctx: &CallContext,
        args: Self::Args,
        face: Face,
    ) -> Result<Answer, ToolError> {
        let answer = service.resolve(ctx, args.repo, args.revision).await?;
        Ok(Answer::of(face, &answer, render_resolve))
    }
}

/// A `resolve` answer.
fn render_resolve(answer: &ResolveAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    header(&mut out, "Revision", &answer.revision);
    header(&mut out, "Commit", &answer.commit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn s6_resolve_rendering() {
        let answer = ResolveAnswer {
            repo: "a/b".into(),
            revision: "main".into(),
            commit: SHA.into(),
        };
        assert_eq!(
            render_resolve(&answer),
            format!("Repo: a/b\nRevision: main\nCommit: {SHA}\n")
        );
    }
}
