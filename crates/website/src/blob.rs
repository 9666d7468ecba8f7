//! The file page (`/-/blob/<rev>/<path>`): highlighted lines with anchors (`#L12`, ranges
//! `#L2-L4` marked by `code.js`), the outline beside them, names linked to their
//! definitions, pages for large files, and links to the raw file, blame and history.
//!
//! Every token is repository data: it reaches the page only through `maud`'s escaping
//! splices; a span's class is one of the highlighter's fixed class names.

use crate::Chrome;
use crate::frame::{Tab, breadcrumbs, layout, permalink, repo_header, short_sha};
use crate::paths::{blame_url, blob_url, commits_url, raw_url};
use crate::size::human_size;
use maud::{Markup, html};
use service::{DefinitionLink, HighlightStatus, HighlightedFile, HighlightedText, OutlineEntry};

/// One page of a file, as the file view shows it.
#[derive(Debug, Clone)]
pub struct FileView {
    pub repo: String,
    /// The revision as the URL named it (links keep it).
    pub rev: String,
    /// The full SHA it resolved to.
    pub commit: String,
    pub path: String,
    /// The language of the file's grammar, if it has one.
    pub lang: Option<&'static str>,
    /// The lines of this page (or that the file is binary).
    pub file: HighlightedFile,
    /// The file's definitions (its outline), empty for a language without symbols.
    pub outline: Vec<OutlineEntry>,
}

/// Deepest nesting the outline indents.
const MAX_OUTLINE_DEPTH: usize = 6;

/// The outline beside a file: one link per definition to its line range, on this page or on
/// the page it starts on. Names are repository data, shown as text.
fn outline(view: &FileView, first: u64, last: u64) -> Markup {
    html! {
        details.outline open {
            summary { "Outline (" (view.outline.len()) ")" }
            ul {
                @for entry in &view.outline {
                    @let symbol = &entry.symbol;
                    @let depth = (entry.depth as usize).min(MAX_OUTLINE_DEPTH);
                    @let anchor = format!("#L{}-L{}", symbol.start_line, symbol.end_line);
                    @let on_page = u64::from(symbol.start_line) >= first
                        && u64::from(symbol.start_line) < last;
                    li class={ "depth-" (depth) } {
                        @if on_page {
                            a href=(anchor) { (symbol.name) }
                        } @else {
                            a href={ (blob_url(&view.repo, &view.commit, &view.path)) "?from=" (symbol.start_line) (anchor) } { (symbol.name) }
                        }
                        " " span.kind { (symbol.kind) }
                    }
                }
            }
        }
    }
}

/// The fragment id of a name's list of definitions (names are ASCII identifiers).
fn definitions_id(link: &DefinitionLink) -> String {
    format!("def-{}", link.name)
}

/// Where a linked name goes: its one definition's line (at the commit the line is valid
/// at), or the list of its definitions on this page.
fn definition_href(view: &FileView, text: &HighlightedText, link: &DefinitionLink) -> String {
    // The page's lines are consecutive from `first_line`.
    let last = text.first_line + text.lines.len() as u64;
    match link.targets.as_slice() {
        [one]
            if one.commit == view.commit
                && one.path == view.path
                && (text.first_line..last).contains(&u64::from(one.line)) =>
        {
            format!("#L{}", one.line)
        }
        [one] => format!(
            "{}#L{}",
            blob_url(&view.repo, &one.commit, &one.path),
            one.line
        ),
        _ => format!("#{}", definitions_id(link)),
    }
}

/// The lists of names with several definitions, each shown when its fragment is the target
/// (`:target`, no script).
fn definition_lists(view: &FileView, text: &HighlightedText) -> Markup {
    let mut used = vec![false; text.definitions.len()];
    for t in text.lines.iter().flat_map(|l| &l.tokens) {
        if let Some(slot) = t.definition.and_then(|i| used.get_mut(i as usize)) {
            *slot = true;
        }
    }
    html! {
        @for (link, _) in text.definitions.iter().zip(&used).filter(|(l, used)| **used && l.targets.len() > 1) {
            section.def-list id=(definitions_id(link)) aria-label={ "Definitions of " (link.name) } {
                h2 { "Definitions of " code { (link.name) } }
                ul {
                    @for target in &link.targets {
                        li {
                            a href={ (blob_url(&view.repo, &target.commit, &target.path)) "#L" (target.line) } {
                                (target.path) ":" (target.line)
                            }
                            " " span.kind { (target.kind) }
                        }
                    }
                }
                @if link.total > link.targets.len() as u64 {
                    p.meta { "and " (link.total - link.targets.len() as u64) " more" }
                }
                a.close href="#_" { "Close" }
            }
        }
    }
}

/// Why lines are plain, when a grammar would have highlighted them.
fn plain_note(status: HighlightStatus) -> Option<String> {
    match status {
        HighlightStatus::Highlighted | HighlightStatus::NoGrammar => None,
        HighlightStatus::TooLarge { limit } => Some(format!(
            "Shown without highlighting: the file is over the {} highlighting parses.",
            human_size(limit as u64)
        )),
        HighlightStatus::TimedOut => {
            Some("Shown without highlighting: highlighting this file took too long.".into())
        }
        HighlightStatus::Failed => {
            Some("Shown without highlighting: the file could not be parsed.".into())
        }
    }
}

/// `/-/blob/<rev>/<path>`: the file with line numbers; `#L2` and `#L2-L4` anchors.
pub fn blob(chrome: &Chrome, view: &FileView) -> String {
    let here = blob_url(&view.repo, &view.rev, &view.path);
    let actions = html! {
        nav.file-actions aria-label="File" {
            a href=(raw_url(&view.repo, &view.commit, &view.path)) { "Raw" }
            a href=(blame_url(&view.repo, &view.rev, &view.path)) { "Blame" }
            a href=(commits_url(&view.repo, &view.rev, &view.path)) { "History" }
        }
    };
    let body = match &view.file {
        HighlightedFile::Binary { size } => html! {
            p.meta {
                "Commit " (short_sha(&view.commit)) " · " (human_size(*size)) " · "
                (permalink(&blob_url(&view.repo, &view.commit, &view.path)))
            }
            (actions)
            p.note.binary {
                "Binary file (" (human_size(*size)) "): it is not shown as text. "
                a href=(raw_url(&view.repo, &view.commit, &view.path)) { "View the raw file" }
                "."
            }
        },
        HighlightedFile::Text(text) => {
            let first = text.first_line;
            let last = first + text.lines.len() as u64;
            let paged = first > 1 || text.next_start_line.is_some();
            // Each linked name's target, made once (a name may occur on every line).
            let hrefs: Vec<String> = text
                .definitions
                .iter()
                .map(|link| definition_href(view, text, link))
                .collect();
            html! {
                p.meta {
                    "Commit " (short_sha(&view.commit)) " · "
                    @if text.total_lines == 0 { "empty file" }
                    @else { (text.total_lines) " lines" }
                    " · " (human_size(text.total_bytes))
                    @if let Some(lang) = view.lang { " · " (lang) }
                    " · "
                    (permalink(&blob_url(&view.repo, &view.commit, &view.path)))
                }
                (actions)
                @if paged {
                    p.note.paging role="note" {
                        "This file is large (" (text.total_lines) " lines, " (human_size(text.total_bytes))
                        "), more than one page shows: these are lines " (first) "–" (last.saturating_sub(1))
                        " of " (text.total_lines) ". "
                        @if first > 1 {
                            a href=(here) { "First page" }
                            " · "
                        }
                        @if let Some(next) = text.next_start_line {
                            a href={ (here) "?from=" (next) } { "Next lines from " (next) }
                            " · "
                        }
                        a href=(raw_url(&view.repo, &view.commit, &view.path)) { "Whole file (raw)" }
                    }
                }
                @if let Some(note) = plain_note(text.status) { p.note { (note) } }
                div.blob-body {
                    div.blob-code {
                        table.code {
                            tbody {
                                // Rows in this one template, not a `Markup` each: a
                                // page has thousands of lines and tens of thousands of
                                // tokens. Each token: plain text, a classed span, a
                                // definition link, or a link in a span.
                                @for line in &text.lines {
                                    tr id={ "L" (line.number) } {
                                        td.num { a href={ "#L" (line.number) } { (line.number) } }
                                        td.line { code {
                                            @for (piece, t) in line.pieces() {
                                                @let href = t.definition.and_then(|i| hrefs.get(i as usize));
                                                @match (t.class, href) {
                                                    (None, None) => (piece),
                                                    (Some(class), None) => span class=(class) { (piece) },
                                                    (None, Some(href)) => a.def href=(href) { (piece) },
                                                    (Some(class), Some(href)) => span class=(class) {
                                                        a.def href=(href) { (piece) }
                                                    },
                                                }
                                            }
                                        } }
                                    }
                                }
                            }
                        }
                    }
                    @if !view.outline.is_empty() { aside.blob-outline { (outline(view, first, last)) } }
                }
                (definition_lists(view, text))
                @if let Some(next) = text.next_start_line {
                    p.more {
                        a href={ (here) "?from=" (next) } { "Show lines from " (next) }
                    }
                }
            }
        }
    };
    layout(
        chrome,
        &format!("{} · {}", view.path, view.repo),
        html! {
            (repo_header(&view.repo, Tab::Files, Some(&view.commit)))
            (breadcrumbs(&view.repo, &view.rev, &view.path))
            (body)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use service::{DefinitionTarget, HighlightedLine, Token};

    fn view(
        pieces: Vec<(&str, Option<&'static str>, Option<u32>)>,
        definitions: Vec<DefinitionLink>,
    ) -> FileView {
        let mut line = HighlightedLine {
            number: 1,
            text: String::new(),
            tokens: Vec::new(),
        };
        for (text, class, definition) in pieces {
            let start = line.text.len() as u32;
            line.text.push_str(text);
            line.tokens.push(Token {
                start,
                end: line.text.len() as u32,
                class,
                definition,
            });
        }
        FileView {
            repo: "o/r".into(),
            rev: "main".into(),
            commit: "a".repeat(40),
            path: "src/<b>.rs".into(),
            lang: Some("rust"),
            file: HighlightedFile::Text(HighlightedText {
                first_line: 1,
                lines: vec![line],
                total_lines: 1,
                total_bytes: 10,
                next_start_line: None,
                status: HighlightStatus::Highlighted,
                definitions,
            }),
            outline: Vec::new(),
        }
    }

    /// Issue 34, points 1 and 9: tokens are escaped, classes are the highlighter's.
    #[test]
    fn hostile_tokens_are_escaped() {
        let page = blob(
            &Chrome::default(),
            &view(
                vec![
                    (
                        "\"<script>window.__pwned=1</script>\"",
                        Some("hl-string"),
                        None,
                    ),
                    (" <img src=x onerror=alert(1)>", None, None),
                ],
                Vec::new(),
            ),
        );
        assert!(!page.contains("<script>window"), "{page}");
        assert!(!page.contains("<img src=x"), "{page}");
        assert!(page.contains("&lt;script&gt;window.__pwned=1&lt;/script&gt;"));
        assert!(page.contains("<span class=\"hl-string\">"));
        assert!(page.contains("src/&lt;b&gt;.rs"));
    }

    /// Issue 34, point 1: one definition links to its line, several to their list.
    #[test]
    fn definition_links_go_to_the_line_or_the_list() {
        let target = |path: &str, line| DefinitionTarget {
            commit: "b".repeat(40),
            path: path.into(),
            line,
            kind: "function",
        };
        let one = DefinitionLink {
            name: "total".into(),
            targets: vec![target("src/lib.rs", 10)],
            total: 1,
        };
        let many = DefinitionLink {
            name: "new".into(),
            targets: vec![target("a.rs", 1), target("b.rs", 2)],
            total: 3,
        };
        let page = blob(
            &Chrome::default(),
            &view(
                vec![
                    ("total", Some("hl-function"), Some(0)),
                    ("(", None, None),
                    ("new", None, Some(1)),
                ],
                vec![one, many],
            ),
        );
        let b = "b".repeat(40);
        assert!(
            page.contains(&format!(
                "<a class=\"def\" href=\"/sourcegraph/repos/o/r/-/blob/{b}/src/lib.rs#L10\">total</a>"
            )),
            "{page}"
        );
        assert!(page.contains("<a class=\"def\" href=\"#def-new\">new</a>"));
        assert!(page.contains("id=\"def-new\""));
        assert!(page.contains("and 1 more"));
    }
}
