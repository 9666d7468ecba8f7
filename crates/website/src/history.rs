//! The history pages (issue 34): blame (`/-/blame/<rev>/<path>`), a history
//! (`/-/commits/<rev>[/<path>]`), one commit (`/-/commit/<sha>`) and a comparison
//! (`/-/compare/<base>...<head>`). They render the service's `blame`, `log`, `commit` and
//! `diff` answers; every name, message and path in them is repository data and reaches the
//! page only through maud's escaping splices. Dates show relative ("3 months ago") with the
//! exact UTC date as a tooltip; the reference time comes with each view so pages are
//! reproducible in tests.

use crate::Chrome;
use crate::frame::{Tab, breadcrumbs, layout, permalink, repo_header, short_sha};
use crate::paths::{blame_url, blob_url, commit_url, commits_url, compare_url};
use maud::{Markup, html};
use service::{BlameAnswer, CommitAnswer, DiffAnswer, HighlightedLine, LogEntry};
use std::collections::BTreeMap;

/// One side of a diffed file, highlighted (`Service::highlight` of the file at that side's
/// commit): its lines by number. Lines not in it show plain.
#[derive(Debug, Clone, Default)]
pub struct SideTokens(pub BTreeMap<u64, HighlightedLine>);

/// The highlighted sides of one diffed file; `None` shows that side plain.
#[derive(Debug, Clone, Default)]
pub struct FileTokens {
    pub old: Option<SideTokens>,
    pub new: Option<SideTokens>,
}

/// The highest old-side and new-side line numbers a file's diff text shows: how many lines
/// of each side its highlighting needs.
pub fn diff_extent(text: &str) -> (u64, u64) {
    let (_, lines) = parse_file(text);
    lines.iter().fold((0, 0), |(o, n), line| match line {
        DiffLine::Context(_, a, b) => (o.max(*a), n.max(*b)),
        DiffLine::Added(_, b) => (o, n.max(*b)),
        DiffLine::Removed(_, a) => (o.max(*a), n),
        _ => (o, n),
    })
}

/// One page of a file's blame: the service's blame of a line range and those lines' text.
#[derive(Debug, Clone)]
pub struct BlameView {
    pub repo: String,
    /// The revision as the URL named it.
    pub rev: String,
    pub blame: BlameAnswer,
    /// The text of lines `blame.start_line..=blame.end_line`, each ending with `\n` but
    /// perhaps the last.
    pub content: String,
    /// Those lines highlighted (`None`: plain).
    pub tokens: Option<SideTokens>,
    /// The reference time for relative dates: seconds since the Unix epoch.
    pub now: i64,
}

/// One page of a history.
#[derive(Debug, Clone)]
pub struct CommitsView {
    pub repo: String,
    /// The revision as the URL named it.
    pub rev: String,
    /// The log's start commit (full SHA) and path (`""` for the whole repository).
    pub commit: String,
    pub path: String,
    /// The log follows one file across renames (each entry then has its path).
    pub follow: bool,
    pub commits: Vec<LogEntry>,
    /// This is not the first page.
    pub later_page: bool,
    pub next_cursor: Option<String>,
    /// The page's walk ran out of its time budget before the page was full (O-9): it shows
    /// what was found so far, perhaps nothing; `next_cursor` walks on.
    pub partial: bool,
    pub now: i64,
}

/// A blame page that was stopped at its time budget (O-9): what to do instead.
#[derive(Debug, Clone)]
pub struct BlameRefusal {
    pub repo: String,
    /// The revision as the URL named it.
    pub rev: String,
    pub path: String,
    /// The lines the page tried to blame.
    pub start_line: u64,
    pub end_line: u64,
}

/// One commit page: the commit and one page of its diff against its first parent.
#[derive(Debug, Clone)]
pub struct CommitView {
    pub repo: String,
    /// The revision as the URL named it (a full SHA, a short one, a branch or tag).
    pub rev: String,
    pub commit: CommitAnswer,
    /// One page of the commit's diff (`git show`'s: renames detected, a root commit against
    /// nothing); `None` when it could not be read (`diff_error`).
    pub diff: Option<DiffAnswer>,
    pub diff_error: Option<String>,
    /// The cursor this diff page was opened with (`None`: the first).
    pub cursor: Option<String>,
    /// Highlighting of the diff's files, in their order (missing or `None` sides: plain).
    pub tokens: Vec<FileTokens>,
    pub now: i64,
}

/// One comparison page.
#[derive(Debug, Clone)]
pub struct CompareView {
    pub repo: String,
    /// Both sides as the URL named them.
    pub base_rev: String,
    pub head_rev: String,
    /// From the merge base of both sides (`diff.base`) to the head; `None` when their
    /// histories share no commit and the diff is from the base itself.
    pub diff: DiffAnswer,
    pub merge_base: Option<String>,
    pub cursor: Option<String>,
    /// Highlighting of the diff's files, in their order.
    pub tokens: Vec<FileTokens>,
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the epoch of the service's `YYYY-MM-DDTHH:MM:SSZ`.
fn epoch_seconds(date: &str) -> Option<i64> {
    let n = |range: std::ops::Range<usize>| date.get(range)?.parse::<i64>().ok();
    let days = days_from_civil(n(0..4)?, n(5..7)?, n(8..10)?);
    Some(days * 86_400 + n(11..13)? * 3600 + n(14..16)? * 60 + n(17..19)?)
}

/// "3 months ago", as the code hosts say it.
pub fn relative_date(date: &str, now: i64) -> String {
    let Some(then) = epoch_seconds(date) else {
        return date.to_owned();
    };
    let ago = now - then;
    if ago < 0 {
        return "in the future".to_owned();
    }
    let units = [
        (365 * 86_400, "year"),
        (30 * 86_400, "month"),
        (7 * 86_400, "week"),
        (86_400, "day"),
        (3600, "hour"),
        (60, "minute"),
    ];
    for (size, name) in units {
        let count = ago / size;
        if count >= 1 {
            let plural = if count == 1 { "" } else { "s" };
            return format!("{count} {name}{plural} ago");
        }
    }
    "just now".to_owned()
}

/// A date shown relative, the exact UTC date as its tooltip.
fn when(date: &str, now: i64) -> Markup {
    html! { time datetime=(date) title=(date.replace('T', " ").replace('Z', " UTC")) { (relative_date(date, now)) } }
}

/// The short SHA of `sha` linking to its commit page.
fn commit_link(repo: &str, sha: &str) -> Markup {
    html! { a.sha href=(commit_url(repo, sha)) { (short_sha(sha)) } }
}

/// `/-/blame/<rev>/<path>`: each line with the commit that last changed it, consecutive
/// lines of one commit grouped (the commit shown once per group).
pub fn blame_page(chrome: &Chrome, view: &BlameView) -> String {
    let b = &view.blame;
    let lines: Vec<&str> = view.content.lines().collect();
    layout(
        chrome,
        &format!("Blame {} · {}", b.path, view.repo),
        html! {
            (repo_header(&view.repo, Tab::Files, Some(&b.commit)))
            (breadcrumbs(&view.repo, &view.rev, &b.path))
            p.meta {
                "Blame at " (short_sha(&b.commit)) " · "
                @if b.total_lines == 0 { "empty file" }
                @else if b.start_line == 1 && b.next_start_line.is_none() { (b.total_lines) " lines" }
                @else { "lines " (b.start_line) "–" (b.end_line) " of " (b.total_lines) }
                " · " a href=(blob_url(&view.repo, &view.rev, &b.path)) { "View file" }
                " · " a href=(commits_url(&view.repo, &view.rev, &b.path)) { "History" }
                @if view.rev != b.commit {
                    " · " (permalink(&blame_url(&view.repo, &b.commit, &b.path)))
                }
            }
            @if b.start_line > 1 || b.next_start_line.is_some() {
                p.note {
                    "Blame is shown in pages of at most " (service::MAX_BLAME_LINES) " lines. "
                    @if b.start_line > 1 {
                        a href={ (blame_url(&view.repo, &view.rev, &b.path)) "?from=" (b.start_line.saturating_sub(service::MAX_BLAME_LINES).max(1)) } { "Previous lines" }
                        " "
                    }
                    @if let Some(next) = b.next_start_line {
                        a href={ (blame_url(&view.repo, &view.rev, &b.path)) "?from=" (next) } { "Lines from " (next) }
                    }
                }
            }
            div.scroll {
                table.blame {
                    tbody {
                        @for range in &b.ranges {
                            @for n in range.start_line..=range.end_line {
                                @let first = n == range.start_line;
                                tr id={ "L" (n) } class=[first.then_some("group")] data-commit=(range.commit.commit) {
                                    // One line per row, so the code's lines keep their height: the
                                    // commit on a group's first row, its subject on the second.
                                    td.who title=[(n <= range.start_line + 1).then_some(&range.commit.subject)] {
                                        @if first {
                                            (commit_link(&view.repo, &range.commit.commit))
                                            " " span.author { (range.commit.author) }
                                            " " (when(&range.commit.date, view.now))
                                        } @else if n == range.start_line + 1 {
                                            span.subject { (range.commit.subject) }
                                        }
                                    }
                                    td.num { a href={ "#L" (n) } { (n) } }
                                    td.line { (code(lines.get((n - b.start_line) as usize).copied().unwrap_or(""), view.tokens.as_ref(), n)) }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// `/-/blame/<rev>/<path>` stopped at its time budget: why, and where to look instead.
pub fn blame_refused_page(chrome: &Chrome, view: &BlameRefusal) -> String {
    layout(
        chrome,
        &format!("Blame {} · {}", view.path, view.repo),
        html! {
            (repo_header(&view.repo, Tab::Files, None))
            (breadcrumbs(&view.repo, &view.rev, &view.path))
            h2 { "Blame stopped" }
            p.error {
                "Blaming lines " (view.start_line) "–" (view.end_line) " of " code { (view.path) }
                " took longer than this page's time budget, so it was stopped. Blame follows each line back through the history to the commit that last changed it: lines unchanged for a long time in a long history take longest."
            }
            p {
                "Instead: "
                a href=(blob_url(&view.repo, &view.rev, &view.path)) { "view the file" }
                ", see "
                a href=(commits_url(&view.repo, &view.rev, &view.path)) { "the commits that changed it" }
                ", or try again in a moment."
            }
        },
    )
}

/// `/-/commits/<rev>[/<path>]`: newest first, paged.
pub fn commits_page(chrome: &Chrome, view: &CommitsView) -> String {
    let title = if view.path.is_empty() {
        format!("Commits · {}", view.repo)
    } else {
        format!("History of {} · {}", view.path, view.repo)
    };
    layout(
        chrome,
        &title,
        html! {
            (repo_header(&view.repo, Tab::Commits, Some(&view.commit)))
            @if !view.path.is_empty() { (breadcrumbs(&view.repo, &view.rev, &view.path)) }
            p.meta {
                "Commits from " (short_sha(&view.commit))
                @if view.rev != view.commit { " (" (view.rev) ")" }
                @if view.follow { " · following renames" }
                @if view.rev != view.commit {
                    " · " (permalink(&commits_url(&view.repo, &view.commit, &view.path)))
                }
            }
            @if view.partial {
                p.note.partial {
                    "This page stopped after walking part of the history: each page has a time budget. "
                    @if view.commits.is_empty() {
                        "No commit in the part walked so far changed "
                        @if view.path.is_empty() { "the repository" } @else { code { (view.path) } }
                        ". "
                    } @else {
                        "These are the commits found so far. "
                    }
                    @if let Some(cursor) = &view.next_cursor {
                        a href={ (commits_url(&view.repo, &view.commit, &view.path)) "?cursor=" (query_value(cursor)) } { "Walk on through older history" }
                    }
                }
            } @else if view.commits.is_empty() {
                p { "No commits." }
            }
            ol.commits {
                @for c in &view.commits {
                    li data-commit=(c.commit) {
                        div.subject { a href=(commit_url(&view.repo, &c.commit)) { (c.subject) } }
                        div.byline {
                            (commit_link(&view.repo, &c.commit))
                            " " span.author { (c.author) }
                            " authored " (when(&c.date, view.now))
                            @if let (true, Some(path)) = (view.follow, &c.path) {
                                @if path != &view.path || c.previous_path.is_some() {
                                    " · " span.path {
                                        @if let Some(previous) = &c.previous_path {
                                            (c.change.unwrap_or("renamed")) " from " code { (previous) } " to "
                                        }
                                        a href=(blob_url(&view.repo, &c.commit, path)) { code { (path) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            nav.pager {
                @if view.later_page {
                    a href=(commits_url(&view.repo, &view.rev, &view.path)) { "Newest" }
                }
                @if let Some(cursor) = &view.next_cursor {
                    a href={ (commits_url(&view.repo, &view.commit, &view.path)) "?cursor=" (query_value(cursor)) } { "Older" }
                }
            }
        },
    )
}

/// A query value: cursors are made of hex digits, dots and letters, but nothing is assumed.
fn query_value(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `/-/commit/<sha>`: message, people, parents, the changed files with counts, the diff.
pub fn commit_page(chrome: &Chrome, view: &CommitView) -> String {
    let c = &view.commit;
    let e = &c.entry;
    let (title, body) = match c.message.split_once('\n') {
        Some((first, rest)) => (first, rest.trim_matches('\n')),
        None => (c.message.as_str(), ""),
    };
    let (added, removed) = c.files.iter().fold((0, 0), |(a, r), f| {
        (a + f.added.unwrap_or(0), r + f.removed.unwrap_or(0))
    });
    layout(
        chrome,
        &format!("{} · {}", e.subject, view.repo),
        html! {
            (repo_header(&view.repo, Tab::Commits, Some(&e.commit)))
            article.commit {
                h2.message { (title) }
                @if !body.is_empty() { pre.body { (body) } }
                @if c.message_truncated { p.note { "The message is cut at " (service::MAX_MESSAGE_BYTES) " bytes." } }
                dl.facts {
                    dt { "Commit" } dd { code.full-sha { (e.commit) } }
                    dt { "Author" } dd { span.author { (e.author) } " " span.email { "<" (e.author_email) ">" } " " (when(&e.date, view.now)) }
                    dt { "Committer" } dd { span.committer { (c.committer) } " " span.email { "<" (c.committer_email) ">" } " " (when(&c.committer_date, view.now)) }
                    dt { "Parents" } dd {
                        @if e.parents.is_empty() { "none (a root commit)" }
                        @for (i, p) in e.parents.iter().enumerate() {
                            @if i > 0 { " " }
                            (commit_link(&view.repo, p))
                        }
                    }
                    dt { "Browse" } dd {
                        a href=(crate::paths::tree_url(&view.repo, &e.commit, "")) { "Files at this commit" }
                        @if let Some(parent) = e.parents.first() {
                            " · " a href=(compare_url(&view.repo, parent, &e.commit)) { "Compare with parent" }
                        }
                        @if view.rev != e.commit { " · " (permalink(&commit_url(&view.repo, &e.commit))) }
                    }
                }
            }
            h3 { (c.total_files) " changed " (if c.total_files == 1 { "file" } else { "files" }) " "
                span.add { "+" (added) } " " span.del { "−" (removed) } }
            @if c.files.len() < c.total_files {
                p.note { "Only the first " (c.files.len()) " of " (c.total_files) " changed files are listed." }
            }
            @if c.renames_skipped {
                p.note { "Renames are not detected in this commit: it adds and deletes too many files to compare (git's rename limit), so a moved and edited file shows as deleted and added." }
            }
            table.numstat {
                tbody {
                    @for f in &c.files {
                        tr data-path=(f.path) data-status=(f.status) {
                            td.status { span class={ "badge " (f.status) } { (f.status) } }
                            td.counts {
                                @match (f.added, f.removed) {
                                    (Some(a), Some(r)) => { span.add data-added=(a) { "+" (a) } " " span.del data-removed=(r) { "−" (r) } }
                                    _ => { span.binary { "binary" } }
                                }
                            }
                            td.path {
                                @if let Some(old) = &f.old_path { code.old-path { (old) } " → " }
                                @if f.status == "deleted" {
                                    code { (f.path) }
                                } @else {
                                    a href=(blob_url(&view.repo, &e.commit, &f.path)) { code { (f.path) } }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(error) = &view.diff_error {
                p.error { "The diff could not be shown: " (error) }
            }
            @if let Some(diff) = &view.diff {
                (diff_files(diff, &view.tokens, &commit_url(&view.repo, &e.commit), view.cursor.is_some()))
            }
        },
    )
}

/// `/-/compare/<base>...<head>`.
pub fn compare_page(chrome: &Chrome, view: &CompareView) -> String {
    let d = &view.diff;
    layout(
        chrome,
        &format!(
            "Compare {}...{} · {}",
            view.base_rev, view.head_rev, view.repo
        ),
        html! {
            (repo_header(&view.repo, Tab::Commits, Some(&d.head)))
            h2 { "Comparing " code { (view.base_rev) } " … " code { (view.head_rev) } }
            p.meta {
                @if view.merge_base.is_some() { "From the merge base " } @else { "From " }
                (commit_link(&view.repo, &d.base)) " to " (commit_link(&view.repo, &d.head))
                " · " (d.total_files) " changed " (if d.total_files == 1 { "file" } else { "files" })
                @if view.base_rev != d.base || view.head_rev != d.head {
                    " · " (permalink(&compare_url(&view.repo, &d.base, &d.head)))
                }
            }
            (diff_files(d, &view.tokens, &compare_url(&view.repo, &view.base_rev, &view.head_rev), view.cursor.is_some()))
        },
    )
}

/// One line of a unified diff as the page shows it.
enum DiffLine<'a> {
    Hunk(&'a str),
    Context(&'a str, u64, u64),
    Added(&'a str, u64),
    Removed(&'a str, u64),
    /// `\ No newline at end of file`.
    Note(&'a str),
}

/// A file's git text: its header lines (before the first hunk) and its diff lines numbered.
fn parse_file(text: &str) -> (Vec<&str>, Vec<DiffLine<'_>>) {
    let mut header = Vec::new();
    let mut lines = Vec::new();
    let (mut old, mut new) = (0u64, 0u64);
    let mut in_hunks = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("@@ ") {
            in_hunks = true;
            // `@@ -a[,b] +c[,d] @@`
            let mut parts = rest.split(' ');
            let start = |p: Option<&str>| {
                p.and_then(|p| p.get(1..))
                    .and_then(|p| p.split(',').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            old = start(parts.next());
            new = start(parts.next());
            lines.push(DiffLine::Hunk(line));
            continue;
        }
        if !in_hunks {
            header.push(line);
            continue;
        }
        match line.as_bytes().first() {
            Some(b'+') => {
                lines.push(DiffLine::Added(&line[1..], new));
                new += 1;
            }
            Some(b'-') => {
                lines.push(DiffLine::Removed(&line[1..], old));
                old += 1;
            }
            Some(b'\\') => lines.push(DiffLine::Note(line)),
            _ => {
                lines.push(DiffLine::Context(line.get(1..).unwrap_or(""), old, new));
                old += 1;
                new += 1;
            }
        }
    }
    (header, lines)
}

/// A diff page's files, each a table of numbered lines (added and removed marked by colour
/// and a sign), with notes for cut files and the link to the next page.
/// A diff line's text: its highlighted tokens from `side` when they match the text (the
/// same line of the same file), else plain.
fn code(text: &str, side: Option<&SideTokens>, number: u64) -> Markup {
    let line = side
        .and_then(|s| s.0.get(&number))
        .filter(|line| line.text == text);
    html! {
        code {
            @match line {
                Some(line) => {
                    @for (piece, t) in line.pieces() {
                        @match t.class {
                            Some(class) => span class=(class) { (piece) },
                            None => (piece),
                        }
                    }
                }
                None => (text),
            }
        }
    }
}

fn diff_files(
    diff: &DiffAnswer,
    tokens: &[FileTokens],
    page_url: &str,
    later_page: bool,
) -> Markup {
    html! {
        section.diffs {
            @if later_page {
                p.note { a href=(page_url) { "First files" } }
            }
            @for (i, file) in diff.files.iter().enumerate() {
                @let (header, lines) = parse_file(&file.text);
                @let sides = tokens.get(i);
                @let old = sides.and_then(|s| s.old.as_ref());
                @let new = sides.and_then(|s| s.new.as_ref());
                details.diff-file open data-path=(file.path) {
                    summary {
                        span class={ "badge " (file.status) } { (file.status) }
                        " "
                        @if let Some(old) = &file.old_path { code.old-path { (old) } " → " }
                        code { (file.path) }
                    }
                    @if lines.is_empty() {
                        p.note {
                            @if header.iter().any(|h| h.starts_with("Binary files")) { "Binary file: not shown." }
                            @else if file.old_path.is_some() { "Renamed without changes." }
                            @else { "No line changes (mode or empty file)." }
                        }
                    } @else {
                        div.scroll {
                            table.diff {
                                tbody {
                                    @for line in &lines {
                                        @match line {
                                            DiffLine::Hunk(text) => tr.hunk { td.num {} td.num {} td.sign {} td.line { code { (text) } } },
                                            DiffLine::Context(text, o, n) => tr.ctx { td.num { (o) } td.num { (n) } td.sign { " " } td.line { (code(text, new, *n)) } },
                                            DiffLine::Added(text, n) => tr.add { td.num {} td.num { (n) } td.sign { "+" } td.line { (code(text, new, *n)) } },
                                            DiffLine::Removed(text, o) => tr.del { td.num { (o) } td.num {} td.sign { "-" } td.line { (code(text, old, *o)) } },
                                            DiffLine::Note(text) => tr.note { td.num {} td.num {} td.sign {} td.line { code { (text) } } },
                                        }
                                    }
                                }
                            }
                        }
                    }
                    @if file.truncated {
                        p.note { "This file's diff is cut here: it is larger than one page may show. Read the file at each side for the rest." }
                    }
                }
            }
            @if let Some(cursor) = &diff.next_cursor {
                p.note.more {
                    "Showing " (diff.files.len()) " of " (diff.total_files) " changed files on this page (a page holds what fits the read budget). "
                    a href={ (page_url) "?cursor=" (query_value(cursor)) } { "More files" }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_dates() {
        let now = epoch_seconds("2026-12-07T10:00:00Z").unwrap();
        assert_eq!(relative_date("2026-12-07T09:59:30Z", now), "just now");
        assert_eq!(relative_date("2026-12-07T07:00:00Z", now), "3 hours ago");
        assert_eq!(relative_date("2026-12-06T10:00:00Z", now), "1 day ago");
        assert_eq!(relative_date("2026-09-01T10:00:00Z", now), "3 months ago");
        assert_eq!(relative_date("2024-01-01T00:00:00Z", now), "2 years ago");
        assert_eq!(epoch_seconds("1970-01-02T00:00:01Z"), Some(86_401));
    }

    #[test]
    fn diff_lines_are_numbered() {
        let text = "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -2,3 +2,3 @@\n a\n-b\n+c\n d\n";
        let (header, lines) = parse_file(text);
        assert_eq!(header.len(), 4);
        let shown: Vec<String> = lines
            .iter()
            .map(|l| match l {
                DiffLine::Hunk(_) => "@".into(),
                DiffLine::Context(_, o, n) => format!(" {o},{n}"),
                DiffLine::Added(_, n) => format!("+{n}"),
                DiffLine::Removed(_, o) => format!("-{o}"),
                DiffLine::Note(_) => "\\".into(),
            })
            .collect();
        assert_eq!(shown, ["@", " 2,2", "-3", "+3", " 4,4"]);
    }

    fn chrome() -> Chrome {
        Chrome {
            user: None,
            csrf: "t".into(),
            provider_sign_in: false,
        }
    }

    /// Issue 42 point 4: a history page its budget ended says so, also when it found
    /// nothing, and links on to the walk's next page; a full page does not.
    #[test]
    fn issue42_a_partial_history_page_says_so_and_walks_on() {
        let view = CommitsView {
            repo: "o/r".into(),
            rev: "main".into(),
            commit: "a".repeat(40),
            path: "docs/<x>.md".into(),
            follow: false,
            commits: vec![],
            later_page: false,
            next_cursor: Some("AQ-_x".into()),
            partial: true,
            now: 0,
        };
        let page = commits_page(&chrome(), &view);
        assert!(
            page.contains("stopped after walking part of the history"),
            "{page}"
        );
        assert!(
            page.contains(
                "No commit in the part walked so far changed <code>docs/&lt;x&gt;.md</code>"
            ),
            "{page}"
        );
        assert!(
            page.contains("?cursor=AQ-_x\">Walk on through older history</a>"),
            "{page}"
        );
        assert!(!page.contains("No commits."), "{page}");
        let full = commits_page(
            &chrome(),
            &CommitsView {
                partial: false,
                ..view
            },
        );
        assert!(!full.contains("stopped after"), "{full}");
        assert!(full.contains("No commits."), "{full}");
    }

    /// Issue 42 point 2: a blame page stopped at its budget says why and links to the file
    /// and its history, the path escaped.
    #[test]
    fn issue42_a_stopped_blame_page_says_where_to_look_instead() {
        let page = blame_refused_page(
            &chrome(),
            &BlameRefusal {
                repo: "o/r".into(),
                rev: "main".into(),
                path: "src/<a>.c".into(),
                start_line: 1,
                end_line: 2000,
            },
        );
        assert!(page.contains("Blame stopped"), "{page}");
        assert!(
            page.contains("Blaming lines 1–2000 of <code>src/&lt;a&gt;.c</code>"),
            "{page}"
        );
        assert!(page.contains("the commits that changed it</a>"), "{page}");
        assert!(page.contains("view the file</a>"), "{page}");
        assert!(!page.contains("<a>"), "{page}");
    }
}
