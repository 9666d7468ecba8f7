//! Text answers of the MCP tools (R-5, SPEC §9). MCP results carry only `content` text blocks,
//! so every answer is written for an agent that reads it line by line: a header of
//! `Name: value` lines (absent values omitted), then, where there is one, a blank line and the
//! payload.
//!
//! Header values come from repositories (paths, revisions) and may hold any character Git
//! allows, newlines included; [`header_value`] escapes control characters so one header is
//! always one line and `NextStartLine` / `Error` can be found mechanically.

use service::{
    AvailabilityAnswer, BlameAnswer, CommitAnswer, DefinitionsAnswer, DiffAnswer, Enrichment,
    EntryKind, ListAnswer, LogAnswer, LogEntry, OutlineAnswer, PluginDiscovery, ReadItem,
    ReferencesAnswer, RepoSummary, ResolveAnswer, SearchAnswer,
};
use std::borrow::Cow;
use std::fmt::Write as _;

/// Renders one read item as the SPEC §9 block.
///
/// A successful item:
///
/// ```text
/// Repo: example/knowledge
/// Commit: 0123456789abcdef0123456789abcdef01234567
/// Path: knowledge/onboarding.md
/// StartLine: 1
/// EndLine: 30
/// TotalLines: 120
/// Truncated: false
/// HasMore: true
/// NextStartLine: 31
/// BodyBytes: 1834
///
/// <body: the file's bytes for those lines, unchanged>
/// ```
///
/// `NextStartLine` is omitted when `HasMore` is false; `LineCut: <bytes omitted>` follows it
/// when a single over-long line was cut (R-3). A failed item keeps `Repo`, `Commit` and `Path`
/// and has `Error: <message>` instead of the range lines and the body.
pub fn render_read_block(item: &ReadItem) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &item.repo);
    header(&mut out, "Commit", &item.commit);
    header(&mut out, "Path", &item.path);
    match &item.outcome {
        Ok(range) => {
            header(&mut out, "StartLine", range.start_line);
            header(&mut out, "EndLine", range.end_line);
            header(&mut out, "TotalLines", range.total_lines);
            header(&mut out, "Truncated", range.truncated);
            header(&mut out, "HasMore", range.has_more);
            if range.has_more
                && let Some(next) = range.next_start_line
            {
                header(&mut out, "NextStartLine", next);
            }
            if let Some(cut) = range.line_cut {
                header(&mut out, "LineCut", cut);
            }
            header(&mut out, "BodyBytes", range.content.len());
            out.push('\n');
            out.push_str(&range.content);
        }
        Err(message) => {
            out.push_str("Error: ");
            out.push_str(&header_value(message));
        }
    }
    out
}

/// The blocks of a read answer (R-5, SPEC §9): one per item in request order, failed items
/// included (R-4), each followed by its plugin attachments after a blank line (W-17); then
/// one block per whole-batch attachment; then the diagnostics block. Attachment text is
/// appended as it is: never parsed, labelled or merged (W-18).
pub(crate) fn read_blocks(items: &[ReadItem], enrichment: &Enrichment) -> Vec<String> {
    let mut blocks: Vec<String> = items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let mut block = render_read_block(item);
            for text in enrichment.for_item(index) {
                if !block.ends_with('\n') {
                    block.push('\n');
                }
                block.push('\n');
                block.push_str(text);
            }
            block
        })
        .collect();
    blocks.extend(enrichment.whole.iter().cloned());
    if !enrichment.operator_notes.is_empty() {
        blocks.push(render_notes(&enrichment.operator_notes));
    }
    if !enrichment.diagnostics.is_empty() {
        let mut block = String::from("PluginDiagnostics:");
        for line in &enrichment.diagnostics {
            block.push_str("\n- ");
            block.push_str(line);
        }
        blocks.push(block);
    }
    blocks
}

/// A `list` answer: the header, a blank line, then one entry per line.
///
/// Entries are repository-relative paths that `read` accepts as they are. A directory ends with
/// `/`; anything else that is not a plain file carries a bracketed note after two spaces:
/// `[executable]`, `[symlink]`, `[submodule]`; files show their size the same way
/// (`a.md  [1834 bytes]`, `run.sh  [executable, 210 bytes]`).
pub(crate) fn render_list(answer: &ListAnswer) -> String {
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

/// A `resolve` answer.
pub(crate) fn render_resolve(answer: &ResolveAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    header(&mut out, "Revision", &answer.revision);
    header(&mut out, "Commit", &answer.commit);
    out
}

/// A `discovery` answer: a count, then one record per repository, records separated by a blank
/// line.
/// The `search` answer (S-1): per repository `Repo:` and `Commit:`, then one hit per line
/// (`path:line: snippet`, or `path (file name)`), a blank line between repositories, and
/// `NextCursor:` last when more hits exist. Repositories without an index yet are named, so
/// an empty answer is never ambiguous.
pub(crate) fn render_search(answer: &SearchAnswer) -> String {
    let mut out = String::new();
    for (i, repo) in answer.repos.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        header(&mut out, "Repo", &repo.repo);
        header(&mut out, "Commit", &repo.commit);
        for hit in &repo.hits {
            let path = header_value(&hit.path);
            match (hit.line, &hit.snippet) {
                (Some(line), Some(snippet)) => {
                    let _ = writeln!(out, "{path}:{line}: {}", header_value(snippet));
                    if let Some(note) = &hit.note {
                        let _ = writeln!(out, "  Note: {}", header_value(note));
                    }
                }
                _ => match &hit.path_only {
                    Some(why) => {
                        let _ = writeln!(out, "{path} (file name; content not searched: {why})");
                    }
                    None => {
                        let _ = writeln!(out, "{path} (file name)");
                    }
                },
            }
        }
    }
    if answer.repos.is_empty() {
        out.push_str("No hits.\n");
    }
    not_indexed_lines(&mut out, &answer.not_indexed);
    if answer.stats.truncated {
        let _ = writeln!(
            out,
            "Truncated: true (more than {} hits; these pages cover the first ones in path order: \
             narrow the query, path or lang)",
            answer.stats.total_hits
        );
    }
    if let Some(cursor) = &answer.next_cursor {
        header(&mut out, "NextCursor", cursor);
    }
    out
}

pub(crate) fn render_discovery(repos: &[RepoSummary]) -> String {
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

/// A `log` page: header lines, then one record per commit, blank-line separated.
pub(crate) fn render_log(answer: &LogAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    header(&mut out, "Commit", &answer.commit);
    if !answer.path.is_empty() {
        header(&mut out, "Path", &answer.path);
    }
    header(&mut out, "Commits", answer.commits.len());
    if let Some(cursor) = &answer.next_cursor {
        header(&mut out, "NextCursor", cursor);
    }
    for entry in &answer.commits {
        out.push('\n');
        commit_lines(&mut out, entry);
    }
    out
}

/// A commit's header lines: Commit, Parents, Author, Date, Subject.
fn commit_lines(out: &mut String, entry: &LogEntry) {
    header(out, "Commit", &entry.commit);
    header(out, "Parents", &entry.parents.join(" "));
    header(
        out,
        "Author",
        &format!("{} <{}>", entry.author, entry.author_email),
    );
    header(out, "Date", &entry.date);
    header(out, "Subject", &entry.subject);
}

/// A `commit` answer: header lines, a blank line, one line per changed file (`status +added
/// -removed path`, `binary` for a binary file), a blank line, then the message unchanged
/// (`MessageBytes` long).
pub(crate) fn render_commit(answer: &CommitAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    commit_lines(&mut out, &answer.entry);
    header(&mut out, "Files", answer.total_files);
    if answer.files.len() < answer.total_files {
        header(&mut out, "FilesShown", answer.files.len());
    }
    header(&mut out, "MessageBytes", answer.message.len());
    header(&mut out, "MessageTruncated", answer.message_truncated);
    out.push('\n');
    for file in &answer.files {
        let counts = match (file.added, file.removed) {
            (Some(added), Some(removed)) => format!("+{added} -{removed}"),
            _ => "binary".to_owned(),
        };
        let _ = writeln!(out, "{} {counts} {}", file.status, header_value(&file.path));
    }
    out.push('\n');
    out.push_str(&answer.message);
    out
}

/// A `diff` page: header lines, a blank line, then git's text of each file on the page.
pub(crate) fn render_diff(answer: &DiffAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    header(&mut out, "Base", &answer.base);
    header(&mut out, "Head", &answer.head);
    if !answer.path.is_empty() {
        header(&mut out, "Path", &answer.path);
    }
    header(&mut out, "Files", answer.total_files);
    header(&mut out, "FilesShown", answer.files.len());
    let cut: Vec<&str> = answer
        .files
        .iter()
        .filter(|f| f.truncated)
        .map(|f| f.path.as_str())
        .collect();
    if !cut.is_empty() {
        header(&mut out, "Truncated", &cut.join(" "));
    }
    if let Some(cursor) = &answer.next_cursor {
        header(&mut out, "NextCursor", cursor);
    }
    out.push('\n');
    for file in &answer.files {
        out.push_str(&file.text);
    }
    out
}

/// A `blame` answer: header lines, a blank line, then one line per run of lines last changed
/// by one commit: `START-END SHA DATE AUTHOR <EMAIL> SUBJECT`.
pub(crate) fn render_blame(answer: &BlameAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    header(&mut out, "Commit", &answer.commit);
    header(&mut out, "Path", &answer.path);
    header(&mut out, "StartLine", answer.start_line);
    header(&mut out, "EndLine", answer.end_line);
    header(&mut out, "TotalLines", answer.total_lines);
    header(&mut out, "HasMore", answer.next_start_line.is_some());
    if let Some(next) = answer.next_start_line {
        header(&mut out, "NextStartLine", next);
    }
    out.push('\n');
    for range in &answer.ranges {
        let c = &range.commit;
        let _ = writeln!(
            out,
            "{}-{} {} {} {} <{}> {}",
            range.start_line,
            range.end_line,
            c.commit,
            c.date,
            header_value(&c.author),
            header_value(&c.author_email),
            header_value(&c.subject)
        );
    }
    out
}

/// An `outline` page: header lines, a blank line, then one line per definition
/// `START-END KIND NAME  SIGNATURE`, indented two spaces per enclosing definition.
pub(crate) fn render_outline(answer: &OutlineAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Repo", &answer.repo);
    header(&mut out, "Commit", &answer.commit);
    header(&mut out, "Path", &answer.path);
    header(&mut out, "Lang", answer.lang.unwrap_or("none (no symbols)"));
    header(&mut out, "Source", answer.source);
    header(&mut out, "Symbols", answer.total_symbols);
    header(&mut out, "Shown", answer.symbols.len());
    if let Some(cursor) = &answer.next_cursor {
        header(&mut out, "NextCursor", cursor);
    }
    out.push('\n');
    for entry in &answer.symbols {
        let symbol = &entry.symbol;
        let _ = writeln!(
            out,
            "{:indent$}{}-{} {} {}  {}",
            "",
            symbol.start_line,
            symbol.end_line,
            symbol.kind,
            header_value(&symbol.name),
            header_value(&symbol.signature),
            indent = entry.depth as usize * 2
        );
    }
    out
}

/// A `definitions` answer: `Symbol`, counts, then per repository its Repo and Commit lines
/// and one line per definition `path:START-END: KIND NAME [in PARENT]  SIGNATURE`.
pub(crate) fn render_definitions(answer: &DefinitionsAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Symbol", &answer.symbol);
    header(&mut out, "Definitions", answer.total);
    header(&mut out, "Shown", answer.definitions.len());
    let mut current: Option<&str> = None;
    for d in &answer.definitions {
        if current != Some(d.repo.as_str()) {
            out.push('\n');
            header(&mut out, "Repo", &d.repo);
            header(&mut out, "Commit", &d.commit);
            current = Some(d.repo.as_str());
        }
        let parent = d
            .parent_name
            .as_deref()
            .map(|p| format!(" in {}", header_value(p)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}:{}-{}: {} {}{parent}  {}",
            header_value(&d.path),
            d.symbol.start_line,
            d.symbol.end_line,
            d.symbol.kind,
            header_value(&d.symbol.name),
            header_value(&d.symbol.signature)
        );
    }
    if answer.definitions.is_empty() {
        out.push_str("No definitions.\n");
    }
    not_indexed_lines(&mut out, &answer.not_indexed);
    out
}

/// A `references` page: `Symbol`, the count, then per repository its Repo and Commit lines
/// and one line per occurrence `path:line: definition|reference: snippet`.
pub(crate) fn render_references(answer: &ReferencesAnswer) -> String {
    let mut out = String::new();
    header(&mut out, "Symbol", &answer.symbol);
    header(&mut out, "References", answer.total);
    for repo in &answer.repos {
        out.push('\n');
        header(&mut out, "Repo", &repo.repo);
        header(&mut out, "Commit", &repo.commit);
        for r in &repo.references {
            let role = if r.definition {
                "definition"
            } else {
                "reference"
            };
            let _ = writeln!(
                out,
                "{}:{}: {role}: {}",
                header_value(&r.path),
                r.line,
                header_value(&r.snippet)
            );
        }
    }
    if answer.repos.is_empty() {
        out.push_str("No references.\n");
    }
    not_indexed_lines(&mut out, &answer.not_indexed);
    if answer.truncated {
        let _ = writeln!(
            out,
            "Truncated: true (more than {} occurrences; these pages cover the first ones in path order: narrow with path or lang)",
            answer.total
        );
    }
    if let Some(cursor) = &answer.next_cursor {
        header(&mut out, "NextCursor", cursor);
    }
    out
}

/// `NotIndexed:` lines of repositories whose index is not built yet.
fn not_indexed_lines(out: &mut String, repos: &[String]) {
    for repo in repos {
        let _ = writeln!(
            out,
            "NotIndexed: {} (its index is still being built; search again shortly, or use list and read)",
            header_value(repo)
        );
    }
}

/// An `availability` answer. `include_plugins` is accepted now; repository-plugin discovery
/// joins when the plugin host exists, and until then the answer says so instead of implying
/// that there are no plugins.
pub(crate) fn render_availability(answer: &AvailabilityAnswer, include_plugins: bool) -> String {
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

/// The text of a business failure (`isError: true`): the same `Error:` field an agent checks
/// in read blocks.
pub fn render_error(message: &str) -> String {
    format!("Error: {}", header_value(message))
}

/// Appends `Name: value\n`.
fn header(out: &mut String, name: &str, value: impl HeaderDisplay) {
    out.push_str(name);
    out.push_str(": ");
    out.push_str(&value.shown());
    out.push('\n');
}

/// What a header line may show: numbers and booleans as they are, text escaped.
trait HeaderDisplay {
    fn shown(&self) -> Cow<'_, str>;
}

impl HeaderDisplay for &String {
    fn shown(&self) -> Cow<'_, str> {
        header_value(self)
    }
}

impl HeaderDisplay for &str {
    fn shown(&self) -> Cow<'_, str> {
        header_value(self)
    }
}

macro_rules! plain_header_display {
    ($($t:ty),*) => {$(
        impl HeaderDisplay for $t {
            fn shown(&self) -> Cow<'_, str> {
                Cow::Owned(self.to_string())
            }
        }
    )*};
}

plain_header_display!(u32, u64, usize, bool);

/// Escapes control characters (newlines above all) so a value stays on its header line; other
/// text, non-ASCII included, is shown as it is.
pub fn header_value(value: &str) -> Cow<'_, str> {
    if !value.chars().any(char::is_control) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The `OperatorNotes:` block: one `- ` item per note, continuation lines indented.
pub fn render_notes(notes: &[String]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use service::{ListEntry, ReadRange};

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn item(outcome: Result<ReadRange, String>) -> ReadItem {
        ReadItem {
            repo: "example/knowledge".into(),
            commit: SHA.into(),
            path: "knowledge/onboarding.md".into(),
            outcome,
        }
    }

    fn range(content: &str) -> ReadRange {
        ReadRange {
            start_line: 1,
            end_line: 30,
            total_lines: 120,
            truncated: false,
            has_more: true,
            next_start_line: Some(31),
            line_cut: None,
            content: content.into(),
        }
    }

    /// R-5 / §9: the exact block shape, header order and the blank line before the body.
    #[test]
    fn r5_read_block_exact_shape() {
        let body = "# Onboarding\nline two\n";
        assert_eq!(
            render_read_block(&item(Ok(range(body)))),
            format!(
                "Repo: example/knowledge\nCommit: {SHA}\nPath: knowledge/onboarding.md\n\
                 StartLine: 1\nEndLine: 30\nTotalLines: 120\nTruncated: false\nHasMore: true\n\
                 NextStartLine: 31\nBodyBytes: {}\n\n{body}",
                body.len()
            )
        );
    }

    /// W-17, W-18, SPEC §9: each attachment follows its item's body after one blank line —
    /// also when the body has no trailing newline — several on one item in append order,
    /// text unchanged; whole-batch attachments are blocks after every item and before the
    /// `PluginDiagnostics:` block, which comes last.
    #[test]
    fn w17_read_blocks_with_attachments_exact() {
        let items = [
            item(Ok(range("no newline"))),
            item(Ok(range("ends\n"))),
            item(Err("no such file".into())),
        ];
        let enrichment = Enrichment {
            per_item: vec![
                ("read-0".into(), "first".into()),
                ("read-1".into(), "- [x](y)\n".into()),
                ("read-0".into(), "second\n\nparagraph".into()),
            ],
            whole: vec!["batch one".into(), "batch two\n".into()],
            diagnostics: vec![
                "code=PLUGIN_TIMEOUT plugin=p root=docs items=read-1 message=slow".into(),
                "code=PLUGIN_NOT_FOUND plugin=q root=\"\" message=none".into(),
            ],
            operator_notes: vec!["ask #platform".into(), "two\nlines".into()],
        };
        let head = |body: &str| {
            format!(
                "Repo: example/knowledge\nCommit: {SHA}\nPath: knowledge/onboarding.md\n\
                 StartLine: 1\nEndLine: 30\nTotalLines: 120\nTruncated: false\nHasMore: true\n\
                 NextStartLine: 31\nBodyBytes: {}\n\n",
                body.len()
            )
        };
        assert_eq!(
            read_blocks(&items, &enrichment),
            [
                format!(
                    "{}no newline\n\nfirst\n\nsecond\n\nparagraph",
                    head("no newline")
                ),
                format!("{}ends\n\n- [x](y)\n", head("ends\n")),
                format!(
                    "Repo: example/knowledge\nCommit: {SHA}\nPath: knowledge/onboarding.md\n\
                     Error: no such file"
                ),
                "batch one".to_string(),
                "batch two\n".to_string(),
                "OperatorNotes:\n- ask #platform\n- two\n  lines\n".to_string(),
                "PluginDiagnostics:\n\
                 - code=PLUGIN_TIMEOUT plugin=p root=docs items=read-1 message=slow\n\
                 - code=PLUGIN_NOT_FOUND plugin=q root=\"\" message=none"
                    .to_string(),
            ]
        );
        // Without attachments or diagnostics the blocks are the items alone.
        assert_eq!(
            read_blocks(&items[..1], &Enrichment::default()),
            [format!("{}no newline", head("no newline"))]
        );
    }

    /// R-1 / §9: an empty file answers StartLine 1, EndLine 0, TotalLines 0, no NextStartLine.
    #[test]
    fn r1_read_block_empty_file() {
        let empty = ReadRange::empty_file();
        assert_eq!(
            render_read_block(&item(Ok(empty))),
            format!(
                "Repo: example/knowledge\nCommit: {SHA}\nPath: knowledge/onboarding.md\n\
                 StartLine: 1\nEndLine: 0\nTotalLines: 0\nTruncated: false\nHasMore: false\n\
                 BodyBytes: 0\n\n"
            )
        );
    }

    /// R-4 / §9: a failed item keeps Repo/Commit/Path and has only `Error`.
    #[test]
    fn r4_read_block_failed_item() {
        let failed = item(Err("no file `x.md` at commit abc; use `search`".into()));
        assert_eq!(
            render_read_block(&failed),
            format!(
                "Repo: example/knowledge\nCommit: {SHA}\nPath: knowledge/onboarding.md\n\
                 Error: no file `x.md` at commit abc; use `search`"
            )
        );
    }

    /// R-3: `LineCut` follows `NextStartLine` and precedes `BodyBytes`; BodyBytes counts UTF-8
    /// bytes, not characters.
    #[test]
    fn r3_read_block_line_cut_and_utf8_bytes() {
        let mut cut = range("héllo\n");
        cut.truncated = true;
        cut.line_cut = Some(4096);
        let block = render_read_block(&item(Ok(cut)));
        assert!(
            block.contains("NextStartLine: 31\nLineCut: 4096\nBodyBytes: 7\n\nhéllo\n"),
            "{block}"
        );
        assert!(block.contains("Truncated: true\n"), "{block}");
    }

    /// §9: NextStartLine is omitted when HasMore is false, whatever the range says.
    #[test]
    fn r2_next_start_line_only_with_has_more() {
        let mut last = range("x\n");
        last.has_more = false;
        last.next_start_line = Some(31);
        let block = render_read_block(&item(Ok(last)));
        assert!(!block.contains("NextStartLine"), "{block}");
    }

    /// A hostile path or message cannot add header lines.
    #[test]
    fn r5_header_values_stay_on_one_line() {
        let mut hostile = item(Err("bad\nNextStartLine: 1".into()));
        hostile.path = "a\nError: forged".into();
        let block = render_read_block(&hostile);
        assert_eq!(block.lines().count(), 4, "{block}");
        assert!(block.contains("Path: a\\nError: forged\n"), "{block}");
        assert!(block.ends_with("Error: bad\\nNextStartLine: 1"), "{block}");
    }

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

    /// S-1: the search block: repositories apart, file-name hits (saying why a path-only
    /// file's content is not searched), control characters escaped, not-indexed repositories
    /// named, the cursor last.
    #[test]
    fn s1_search_block() {
        let hit = |path: &str, line: Option<u64>, snippet: Option<&str>, why: Option<&str>| {
            service::SearchHit {
                path: path.into(),
                line,
                snippet: snippet.map(str::to_string),
                path_only: why.map(str::to_string),
                note: None,
            }
        };
        let answer = SearchAnswer {
            repos: vec![
                service::SearchRepoHits {
                    repo: "a/one".into(),
                    commit: SHA.into(),
                    hits: vec![
                        hit("logo.png", None, None, Some("binary")),
                        hit("src/lib.rs", Some(3), Some("fn x() {}\u{1b}[0m"), None),
                    ],
                },
                service::SearchRepoHits {
                    repo: "b/two".into(),
                    commit: SHA.into(),
                    hits: vec![hit("docs/x.md", None, None, None)],
                },
            ],
            next_cursor: Some("abc".into()),
            not_indexed: vec!["c/three".into()],
            query_rewrite: None,
            stats: service::SearchStatsAnswer {
                candidate_files: 0,
                files_verified: 0,
                documents: 0,
                total_hits: 100_000,
                truncated: true,
                cached: false,
                elapsed_us: 0,
            },
        };
        assert_eq!(
            render_search(&answer),
            format!(
                "Repo: a/one\nCommit: {SHA}\nlogo.png (file name; content not searched: binary)\n\
                 src/lib.rs:3: fn x() {{}}\\u{{1b}}[0m\n\nRepo: b/two\nCommit: {SHA}\n\
                 docs/x.md (file name)\nNotIndexed: c/three (its index is still being built; \
                 search again shortly, or use list and read)\nTruncated: true (more than 100000 \
                 hits; these pages cover the first ones in path order: narrow the query, path or \
                 lang)\nNextCursor: abc\n"
            )
        );
    }
}
