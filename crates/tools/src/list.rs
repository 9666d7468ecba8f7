//! `list`: list a directory.

use service::Cost;
use std::time::Duration;

use crate::render::{header, header_value};
use crate::tool::{Answer, Face, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use service::{CallContext, EntryKind, ListAnswer, Service};
use std::fmt::Write as _;

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
    const COST: Cost = Cost::light(Duration::from_secs(10));
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
        Ok(Answer::of(face, &answer, render_list))
    }
}

/// A `list` answer: the header, a blank line, then one entry per line.
///
/// Entries are repository-relative paths that `read` accepts as they are. A directory ends with
/// `/`; anything else that is not a plain file carries a bracketed note after two spaces:
/// `[executable]`, `[symlink]`, `[submodule]`; files show their size the same way
/// (`a.md  [1834 bytes]`, `run.sh  [executable, 210 bytes]`).
fn render_list(answer: &ListAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    header(&mut out, "Commit", &answer.commit);
    // The top of the registered scope is `""`; show it as `/` so the line is never empty.
    let shown_path = if answer.path.is_empty() {
        "/"
    } else {
        answer.path.as_str()
    };
    header(&mut out, "Path", shown_path);
    header(&mut out, "Depth", answer.depth);
    header(&mut out, "Entries", answer.entries.len());
    header(&mut out, "Truncated", answer.truncated);
    out.push('\n');
    for entry in &answer.entries {
        out.push_str(&header_value(&entry.path));
        let note = match (entry.kind, entry.size) {
            (EntryKind::Directory, _) => {
                out.push('/');
                None
            }
            (EntryKind::File, Some(size)) => Some(format!("{size} bytes")),
            (EntryKind::File, None) => None,
            (EntryKind::Executable, Some(size)) => Some(format!("executable, {size} bytes")),
            (EntryKind::Executable, None) => Some("executable".to_string()),
            (EntryKind::Symlink, _) => Some("symlink".to_string()),
            (EntryKind::Submodule, _) => Some("submodule".to_string()),
        };
        if let Some(note) = note {
            let _ = write!(out, "  [{note}]");
        }
        out.push('\n');
    }
    if answer.truncated {
        out.push_str(
            "\n(The listing stopped at the entry limit: list a subdirectory or use a smaller depth.)\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use service::{EntryKind, ListEntry};

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    /// S-7: directories end with `/`, notes for sizes and special kinds.
    #[test]
    fn s7_list_rendering() {
        let answer = ListAnswer {
            repo: "a/b".into(),
            commit: SHA.into(),
            path: String::new(),
            depth: 2,
            entries: vec![
                ListEntry {
                    path: "docs".into(),
                    kind: EntryKind::Directory,
                    size: None,
                },
                ListEntry {
                    path: "docs/a.md".into(),
                    kind: EntryKind::File,
                    size: Some(12),
                },
                ListEntry {
                    path: "run.sh".into(),
                    kind: EntryKind::Executable,
                    size: Some(3),
                },
                ListEntry {
                    path: "link".into(),
                    kind: EntryKind::Symlink,
                    size: None,
                },
                ListEntry {
                    path: "vendor/lib".into(),
                    kind: EntryKind::Submodule,
                    size: None,
                },
            ],
            truncated: false,
        };
        assert_eq!(
            render_list(&answer),
            format!(
                "Repo: a/b\nCommit: {SHA}\nPath: /\nDepth: 2\nEntries: 5\nTruncated: false\n\n\
                 docs/\ndocs/a.md  [12 bytes]\nrun.sh  [executable, 3 bytes]\nlink  [symlink]\n\
                 vendor/lib  [submodule]\n"
            )
        );
    }
}
