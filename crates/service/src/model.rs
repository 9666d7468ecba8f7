//! Plain request and answer types of the operations. Transports turn these into MCP text
//! blocks (`mcpserver`) or JSON (`httpserver`); nothing here knows either.

use serde::Serialize;

pub use wasmplugin::PluginSelection;

/// `read {repo, revision?, path, start_line?, end_line?, plugins?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRequest {
    pub repo: String,
    pub revision: Option<String>,
    pub path: String,
    pub start_line: Option<u64>,
    pub end_line: Option<u64>,
    /// The call's `plugins` argument: `None` = not given, `Some([])` = none for this call.
    pub plugins: Option<Vec<PluginSelection>>,
}

/// One entry of `read_many.files`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRange {
    pub path: String,
    pub start_line: Option<u64>,
    pub end_line: Option<u64>,
}

/// `read_many {repo, revision?, files, plugins?}`: one revision for the whole batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadManyRequest {
    pub repo: String,
    pub revision: Option<String>,
    pub files: Vec<FileRange>,
    pub plugins: Option<Vec<PluginSelection>>,
}

/// One answered read item: where it was read, and either the range or why it failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadItem {
    /// `owner/name`.
    pub repo: String,
    /// The full SHA that was read.
    pub commit: String,
    /// The repository-relative path as requested (normalised).
    pub path: String,
    /// The range, or the item's own error (R-4: a failed item keeps its place).
    pub outcome: Result<ReadRange, String>,
}

/// The actual returned range of a read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadRange {
    /// First returned line (1-based). `1` for an empty file.
    pub start_line: u64,
    /// Last returned line (inclusive); `start_line - 1` when no line was returned.
    pub end_line: u64,
    /// The file's line count.
    pub total_lines: u64,
    /// The byte budget cut the requested range.
    pub truncated: bool,
    /// Lines after `end_line` exist in the file.
    pub has_more: bool,
    /// Where to continue, when `has_more`.
    pub next_start_line: Option<u64>,
    /// Bytes omitted from a single line longer than LINE_CAP, when that happened.
    pub line_cut: Option<u64>,
    /// The file's bytes for those lines, unchanged (a cut line excepted).
    pub content: String,
}

impl ReadRange {
    /// The answer for an empty file: `StartLine: 1`, `EndLine: 0`, `TotalLines: 0`, nothing
    /// more.
    pub fn empty_file() -> Self {
        Self {
            start_line: 1,
            end_line: 0,
            total_lines: 0,
            truncated: false,
            has_more: false,
            next_start_line: None,
            line_cut: None,
            content: String::new(),
        }
    }
}

/// The answer of `read_many`: one item per request entry, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadManyAnswer {
    pub repo: String,
    pub commit: String,
    pub items: Vec<ReadItem>,
}

/// `list {repo, revision?, path?, depth?}` (S-7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    pub repo: String,
    pub revision: Option<String>,
    pub path: Option<String>,
    pub depth: Option<u32>,
}

/// The answer of `list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListAnswer {
    pub repo: String,
    pub commit: String,
    /// The listed directory, repository-relative (`""` = the top of the registered scope).
    pub path: String,
    pub depth: u32,
    pub entries: Vec<ListEntry>,
    /// The listing stopped at the entry limit.
    pub truncated: bool,
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListEntry {
    pub path: String,
    /// `file`, `executable`, `directory`, `symlink` or `submodule`.
    pub kind: EntryKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A repository to register (G-1, G-2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterRequest {
    /// `owner/name`.
    pub name: String,
    /// A remote Git URL (https, ssh, file://) or a local path.
    pub source: String,
    /// The monorepo scope, `""` for the whole repository.
    pub registered_path: String,
    /// The branch to serve as default; `None`: the source's default branch.
    pub branch: Option<String>,
    /// Private or public; `None`: public when new, unchanged when registered already.
    pub private: Option<bool>,
}

/// What a listed entry is (S-7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A file with the executable bit.
    Executable,
    /// A directory (a tree).
    Directory,
    /// A symbolic link; never followed (G-6).
    Symlink,
    /// A submodule (gitlink); never dereferenced (G-6).
    Submodule,
}

impl From<gitstore::EntryKind> for EntryKind {
    fn from(kind: gitstore::EntryKind) -> Self {
        use gitstore::EntryKind as Git;
        match kind {
            Git::File => Self::File,
            Git::Executable => Self::Executable,
            Git::Directory => Self::Directory,
            Git::Symlink => Self::Symlink,
            Git::Submodule => Self::Submodule,
        }
    }
}

/// What one sync did (G-3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncAnswer {
    pub repo: String,
    /// Head of the default branch after the fetch (full SHA), `None` for an empty repository.
    pub head: Option<String>,
    /// Branch heads that changed: (branch, new full SHA).
    pub changed: Vec<(String, String)>,
}

/// What one retention sweep did (G-5, G-8): (repository, full SHA) pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepAnswer {
    /// Former heads that left retention.
    pub expired: Vec<(String, String)>,
    /// Former heads past the window kept because a lease held them.
    pub kept_by_lease: Vec<(String, String)>,
}

impl From<gitstore::SweepReport> for SweepAnswer {
    fn from(report: gitstore::SweepReport) -> Self {
        let pairs = |list: Vec<(gitstore::RepoName, gitstore::CommitId)>| {
            list.into_iter()
                .map(|(repo, commit)| (repo.to_string(), commit.to_string()))
                .collect()
        };
        Self {
            expired: pairs(report.expired),
            kept_by_lease: pairs(report.kept_by_lease),
        }
    }
}

/// The answer of `resolve` (S-6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolveAnswer {
    pub repo: String,
    pub revision: String,
    pub commit: String,
}

/// One repository as `discovery` shows it (S-5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepoSummary {
    pub name: String,
    /// `""` for the whole repository.
    pub registered_path: String,
    pub default_branch: Option<String>,
    pub head: Option<String>,
    /// The search index is built from `head` (S-3).
    pub indexed: bool,
    /// RFC 3339 UTC.
    pub last_sync: Option<String>,
    pub last_sync_error: Option<String>,
}

/// `availability {repo, revision?, include_plugins?}` (SPEC §9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvailabilityRequest {
    pub repo: String,
    pub revision: Option<String>,
    pub include_plugins: bool,
}

/// The answer of `availability`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AvailabilityAnswer {
    pub repo: String,
    /// The repository is visible to the caller.
    pub visible: bool,
    /// The revision as asked (`None`: the default branch head).
    pub revision: Option<String>,
    /// The full SHA, when it resolved.
    pub commit: Option<String>,
    /// Readable now.
    pub readable: bool,
    /// Why not, when not readable (unknown, outside retention…).
    pub reason: Option<String>,
    /// The search index is built from this commit (S-3).
    pub indexed: bool,
    /// With `include_plugins`: the repository plugins discovered at that commit (W-6), or
    /// why discovery failed. In JSON a `plugins` array or a `plugins_error` string, and
    /// neither without `include_plugins`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<PluginDiscovery>,
}

/// What discovery found at a commit, for `availability` (W-6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum PluginDiscovery {
    /// The commit's plugins, readable or not (each says why it cannot run).
    #[serde(rename = "plugins")]
    Found(Vec<PluginInfo>),
    /// Discovery failed (a transient read failure, say); the message is safe to show.
    #[serde(rename = "plugins_error")]
    Failed(String),
}

/// One discovered repository plugin, as `availability` shows it (W-6). Everything but
/// `directory` comes from the plugin and is untrusted text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    pub name: String,
    /// The plugin directory, repository-relative (`""` = the repository root).
    pub directory: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub version: Option<String>,
    pub operations: Vec<String>,
    pub default_enabled: bool,
    /// The metadata's `input_schema` as compact one-line JSON, display only (W-3): at most
    /// `wasmplugin::INPUT_SCHEMA_BYTES`, a longer one cut and ending in `…`.
    pub input_schema: Option<String>,
    /// Why the artifact cannot run (SPEC §9 diagnostic line), when it cannot.
    pub diagnostic: Option<String>,
}

/// What repository plugins added to a read (W-17, R-5): texts for items (by `read-N` id, in
/// append order), whole-batch texts, and diagnostic lines (SPEC §9, without the `- `).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Enrichment {
    pub per_item: Vec<(String, String)>,
    pub whole: Vec<String>,
    pub diagnostics: Vec<String>,
    /// Server-plugin operator notes (`on_read_result`, P-20), shown as one block after the
    /// whole-batch attachments.
    pub operator_notes: Vec<String>,
}

impl Enrichment {
    /// The texts attached to the item at request index `index`, in order.
    pub fn for_item(&self, index: usize) -> impl Iterator<Item = &str> {
        let id = format!("read-{index}");
        self.per_item
            .iter()
            .filter(move |(item, _)| *item == id)
            .map(|(_, text)| text.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// W-6, SPEC §9: a failed discovery is a `plugins_error` string beside the other facts.
    #[test]
    fn w6_availability_discovery_error_is_plain_json() {
        let answer = AvailabilityAnswer {
            repo: "a/b".into(),
            visible: true,
            revision: None,
            commit: Some("0".repeat(40)),
            readable: true,
            reason: None,
            indexed: false,
            plugins: Some(PluginDiscovery::Failed("could not read the commit".into())),
        };
        let value = serde_json::to_value(&answer).unwrap();
        assert_eq!(value["plugins_error"], json!("could not read the commit"));
        assert!(value.get("plugins").is_none(), "{value}");
        assert_eq!(value["readable"], json!(true));
    }
}
