//! The file page (`/-/blob/<rev>/<path>`): numbered lines with anchors and the file's
//! outline.

use crate::Chrome;
use crate::frame::{Tab, breadcrumbs, layout, permalink, repo_header, short_sha};
use crate::paths::blob_url;
use maud::{Markup, html};
use service::OutlineEntry;

/// One page of a file, as the file view shows it.
#[derive(Debug, Clone, Default)]
pub struct FileView {
    pub repo: String,
    /// The revision as the URL named it (links keep it).
    pub rev: String,
    /// The full SHA it resolved to.
    pub commit: String,
    pub path: String,
    /// The number of the first line of `content`.
    pub first_line: u64,
    /// The lines shown, each ending with `\n` but perhaps the last.
    pub content: String,
    pub total_lines: u64,
    /// Where the next page starts, when the file goes on.
    pub next_start_line: Option<u64>,
    /// The file's definitions (its outline), empty for a language without symbols.
    pub outline: Vec<OutlineEntry>,
}

/// Deepest nesting the outline indents.
const MAX_OUTLINE_DEPTH: usize = 6;

/// The outline beside a file: one link per definition to its line range, on this page or on
/// the page it starts on. Names are repository data, shown as text.
fn outline(view: &FileView, last: u64) -> Markup {
    html! {
        details.outline open {
            summary { "Outline (" (view.outline.len()) ")" }
            ul {
                @for entry in &view.outline {
                    @let symbol = &entry.symbol;
                    @let depth = (entry.depth as usize).min(MAX_OUTLINE_DEPTH);
                    @let anchor = format!("#L{}-L{}", symbol.start_line, symbol.end_line);
                    @let on_page = u64::from(symbol.start_line) >= view.first_line
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

/// `/-/blob/<rev>/<path>`: the file with line numbers; `#L2` and `#L2-L4` anchors.
pub fn blob(chrome: &Chrome, view: &FileView) -> String {
    let last = view.first_line + view.content.lines().count() as u64;
    layout(
        chrome,
        &format!("{} · {}", view.path, view.repo),
        html! {
            (repo_header(&view.repo, Tab::Files, Some(&view.commit)))
            (breadcrumbs(&view.repo, &view.rev, &view.path))
            p.meta {
                "Commit " (short_sha(&view.commit)) " · "
                @if view.total_lines == 0 { "empty file" }
                @else if view.first_line == 1 && view.next_start_line.is_none() { (view.total_lines) " lines" }
                @else { "lines " (view.first_line) "–" (last.saturating_sub(1)) " of " (view.total_lines) }
                " · "
                (permalink(&blob_url(&view.repo, &view.commit, &view.path)))
            }
            @if !view.outline.is_empty() { (outline(view, last)) }
            table.code {
                tbody {
                    @for (n, line) in (view.first_line..).zip(view.content.lines()) {
                        tr id={ "L" (n) } {
                            td.num { a href={ "#L" (n) } { (n) } }
                            td.line { code { (line) } }
                        }
                    }
                }
            }
            @if let Some(next) = view.next_start_line {
                p.more {
                    a href={ (blob_url(&view.repo, &view.rev, &view.path)) "?from=" (next) } { "Show lines from " (next) }
                }
            }
        },
    )
}
