//! A directory's README on the repository and tree pages (issue 34, point 5): Markdown
//! (CommonMark with GitHub's tables, task lists and strikethrough, by `pulldown-cmark`) made
//! into HTML and sanitised by `ammonia`, or a plain README shown as text.
//!
//! A README is repository content, so hostile: its HTML keeps no script, no event handler,
//! no `style`, no form and no URL scheme but the harmless ones (`javascript:` and `data:`
//! go). Its URLs are rewritten so that everything stays pinned to the commit the page shows:
//! a relative link goes to the blob page (a directory to the tree page) at the full SHA, a
//! relative image to the raw URL at the full SHA when the file exists (else the image loses
//! its source, so no request fails), a link out of the repository's top is left inert, and an
//! image from another site is not loaded (the Content-Security-Policy allows only this site's
//! images; a Markdown image from elsewhere becomes a link to it). Headings get GitHub's ids
//! under a `user-content-` prefix (`#x` links follow), so no README id can shadow a page
//! element or a script global.
//!
//! Rendering is bounded (issue 42, point 6): the caller runs it off the HTTP workers, under
//! the page's budget, and keeps what it made (a README renders once per blob and commit). The
//! Markdown's HTML is cut at [`README_HTML_BYTES`]; before the sanitiser parses it, the same
//! parser measures it (`shape`): raw HTML that would nest elements deeper than GitHub allows
//! or expand (unclosed formatting tags reopened in every later block) is shown as text, and a
//! README whose Markdown alone does so, or whose render runs out of time, is shown as plain
//! text. The page says so.

mod shape;

use crate::paths::{blob_url, raw_url, tree_url};
use crate::size::human_size;
use budget::{Budget, Stop, Ticker};
use maud::{Markup, PreEscaped, html};
use pulldown_cmark::{CodeBlockKind, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};
use service::{EntryKind, ListAnswer};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// README file names, in order of preference (compared without regard to case).
const README_NAMES: [&str; 5] = [
    "readme.md",
    "readme.markdown",
    "readme",
    "readme.txt",
    "readme.rst",
];

/// What README ids get in front, so that they never collide with the page's own ids.
const ID_PREFIX: &str = "user-content-";

/// Bytes of HTML a README's Markdown renders to at most; the rest is cut (the page says so).
pub const README_HTML_BYTES: usize = 1 << 20;

/// Bytes the parser may build from that HTML (elements with their attributes, and text;
/// reopened formatting elements included): about what ammonia would hold and write.
const PARSED_BYTES: u64 = 2 << 20;

/// Bytes of sanitised HTML a page shows at most (rewritten URLs make it longer than the
/// Markdown's HTML); a longer README is shown as text.
const SHOWN_BYTES: usize = 2 << 20;

/// What one render may take of the page's budget; a README that takes longer is shown as
/// text.
const RENDER_TIME: Duration = Duration::from_secs(2);

/// Markdown events between two looks at the budget.
const EVENTS_PER_CHECK: u32 = 1024;

/// READMEs rendered from Markdown since the process started.
static MARKDOWN_RENDERS: AtomicU64 = AtomicU64::new(0);

/// How many READMEs were rendered from Markdown since the process started: each is work a
/// cache did not save (the website's cache tests count them).
pub fn readme_renders() -> u64 {
    MARKDOWN_RENDERS.load(Ordering::Relaxed)
}

/// A README read for a page: where it is and its text.
#[derive(Debug, Clone)]
pub struct Readme {
    /// Repository-relative path of the README (`docs/README.md`).
    pub path: String,
    /// The full SHA it was read at; every rewritten URL names it.
    pub commit: String,
    /// The text read, or why it could not be read (shown as a note).
    pub text: Result<String, String>,
    /// Only the first `text.len()` bytes were read: the page says so and links to the file.
    pub cut: bool,
}

impl Readme {
    /// Whether showing it means rendering Markdown (the work worth a slot and a cache);
    /// a plain README or an unreadable one is shown as it is.
    pub fn is_markdown(&self) -> bool {
        self.text.is_ok() && text_kind(&self.path) == ReadmeText::Markdown
    }
}

/// A README made ready for a page ([`render_readme`]): its HTML (or text), what the page says
/// about it, and the relative images it shows, which get their source once it is known which
/// of them exist ([`RenderedReadme::show_images`]).
#[derive(Debug, Clone)]
pub struct RenderedReadme {
    repo: String,
    path: String,
    commit: String,
    body: Body,
    notes: Vec<Note>,
    /// Repository paths of the relative images, one per image shown (its placeholder's
    /// number is its index).
    images: Vec<String>,
}

#[derive(Debug, Clone)]
enum Body {
    /// Sanitised HTML.
    Html(String),
    /// Shown as text.
    Text(String),
    /// Why it could not be read.
    Unreadable(String),
}

/// What the page says about a README besides showing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Note {
    /// Only the first `shown` bytes were read.
    TextCut { shown: u64 },
    /// Its HTML was cut at [`README_HTML_BYTES`].
    HtmlCut,
    /// Its raw HTML is shown as text.
    RawHtmlAsText(Excess),
    /// All of it is shown as text.
    AsText(Excess),
}

/// Why HTML was not rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Excess {
    /// It would nest elements deeper than [`shape::MAX_DEPTH`].
    TooDeep,
    /// The parser would build more than `bytes` (formatting elements reopened).
    Expands { bytes: u64 },
    /// The sanitised HTML is `bytes` long, more than [`SHOWN_BYTES`].
    TooLarge { bytes: u64 },
    /// Rendering took longer than [`RENDER_TIME`].
    TooSlow,
}

/// How a README's text is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadmeText {
    Markdown,
    Plain,
}

/// The README of a listed directory, if it has one: the path of the entry with the most
/// preferred name (`README.md`, `README.markdown`, `README`, `README.txt`, `README.rst`;
/// case ignored; files only). In a listing deeper than one level the shallowest wins: the
/// directory's own README, however paths are rooted (a registered scope's listing too).
pub fn readme_path(listing: &ListAnswer) -> Option<&str> {
    listing
        .entries
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::File | EntryKind::Executable))
        .filter_map(|e| {
            let name = e.path.rsplit('/').next().unwrap_or(&e.path);
            let rank = README_NAMES
                .iter()
                .position(|n| n.eq_ignore_ascii_case(name))?;
            Some((e.path.matches('/').count(), rank, e.path.as_str()))
        })
        .min()
        .map(|(_, _, path)| path)
}

/// The files and directories a listing shows: the directories decide where a README's
/// relative links go ([`render_readme`]), the files which relative images load
/// ([`RenderedReadme::show_images`]).
pub fn known_paths(listing: &ListAnswer) -> (HashSet<String>, HashSet<String>) {
    let mut files = HashSet::new();
    let mut dirs = HashSet::new();
    for entry in &listing.entries {
        match entry.kind {
            EntryKind::Directory => dirs.insert(entry.path.trim_matches('/').to_owned()),
            _ => files.insert(entry.path.trim_matches('/').to_owned()),
        };
    }
    (files, dirs)
}

/// `readme` of `repo` made ready for a page: Markdown rendered and sanitised with every URL
/// rewritten (module docs; a relative link to one of `dirs` goes to its tree page), within
/// bounds, or the text as it is. `Err` only when `budget` stops: the caller left or its
/// deadline passed (a render that only outlasts [`RENDER_TIME`] shows the text instead).
pub fn render_readme(
    repo: &str,
    readme: &Readme,
    dirs: &HashSet<String>,
    budget: &Budget,
) -> Result<RenderedReadme, Stop> {
    let mut notes = Vec::new();
    if let (true, Ok(text)) = (readme.cut, &readme.text) {
        notes.push(Note::TextCut {
            shown: text.len() as u64,
        });
    }
    let mut images = Vec::new();
    let body = match &readme.text {
        Err(message) => Body::Unreadable(message.clone()),
        Ok(text) if text_kind(&readme.path) == ReadmeText::Plain => Body::Text(text.clone()),
        Ok(text) => {
            MARKDOWN_RENDERS.fetch_add(1, Ordering::Relaxed);
            let within = budget.within(Instant::now() + RENDER_TIME);
            let rewriter = Arc::new(Rewriter::new(readme, repo, dirs));
            match render_markdown(text, &rewriter, &within) {
                Ok(Rendered::Html(html, more)) => {
                    notes.extend(more);
                    images = rewriter.images();
                    Body::Html(html)
                }
                Ok(Rendered::AsText(excess)) => {
                    notes.push(Note::AsText(excess));
                    Body::Text(text.clone())
                }
                // Out of render time, not of the page's: the text is shown.
                Err(Stop::Deadline) if budget.check().is_ok() => {
                    notes.push(Note::AsText(Excess::TooSlow));
                    Body::Text(text.clone())
                }
                Err(stop) => return Err(stop),
            }
        }
    };
    Ok(RenderedReadme {
        repo: repo.to_owned(),
        path: readme.path.clone(),
        commit: readme.commit.clone(),
        body,
        notes,
        images,
    })
}

impl RenderedReadme {
    /// The repository paths of the relative images the README shows (Markdown images and
    /// HTML `img`), in order, each once: the page lists their directories so that only
    /// images that exist are requested. Links escaping the repository are not among them.
    pub fn image_paths(&self) -> Vec<&str> {
        let mut seen = HashSet::new();
        self.images
            .iter()
            .map(String::as_str)
            .filter(|p| seen.insert(*p))
            .collect()
    }

    /// Gives each relative image whose file is among `files` its raw URL at the commit; the
    /// others show without a source (no request fails).
    pub fn show_images(&mut self, files: &HashSet<String>) {
        let Body::Html(html) = &mut self.body else {
            return;
        };
        if self.images.is_empty() {
            return;
        }
        let mut out = String::with_capacity(html.len());
        let mut rest = html.as_str();
        // Whether the text copied so far ends inside a tag: the last `<` or `>` in it is a
        // `<` (text and attribute values hold neither unescaped).
        let mut in_tag = false;
        while let Some(at) = rest.find(IMAGE_MARK) {
            let before = &rest[..at];
            if let Some(i) = before.rfind(['<', '>']) {
                in_tag = before.as_bytes()[i] == b'<';
            }
            out.push_str(before);
            let after = &rest[at + IMAGE_MARK.len()..];
            let end = after.find(IMAGE_MARK_END).filter(|_| in_tag);
            let Some(end) = end else {
                // README text that reads like a placeholder: left as it is.
                out.push_str(IMAGE_MARK);
                rest = after;
                continue;
            };
            let image = after[..end]
                .parse::<usize>()
                .ok()
                .and_then(|i| self.images.get(i));
            if let Some(path) = image.filter(|path| files.contains(*path)) {
                out.push_str(" src=\"");
                out.push_str(&raw_url(&self.repo, &self.commit, path));
                out.push('"');
            }
            rest = &after[end + IMAGE_MARK_END.len()..];
        }
        out.push_str(rest);
        *html = out;
    }

    /// About how many bytes it holds (what a cache of rendered READMEs counts).
    pub fn weight(&self) -> usize {
        let body = match &self.body {
            Body::Html(s) | Body::Text(s) | Body::Unreadable(s) => s.len(),
        };
        body + self.repo.len()
            + self.path.len()
            + self.commit.len()
            + self.images.iter().map(|p| p.len() + 24).sum::<usize>()
            + 128
    }
}

/// How a relative image's source reads until [`RenderedReadme::show_images`]: the value
/// `<image N>` as the serialiser writes it, ` src="&lt;image N&gt;"`. README text can read
/// the same (a text's `"` is not escaped), but never inside a tag, where it is looked for; in
/// a tag, only an attribute can hold it, and an attribute value's `"` is always `&quot;`.
const IMAGE_MARK: &str = " src=\"&lt;image ";

/// What ends [`IMAGE_MARK`]'s number.
const IMAGE_MARK_END: &str = "&gt;\"";

/// The README section of a page: the file's name linking to its blob page, what the page
/// says about it, then the rendered Markdown (or the text).
pub(crate) fn readme_section(readme: &RenderedReadme) -> Markup {
    let name = readme.path.rsplit('/').next().unwrap_or(&readme.path);
    let file_url = blob_url(&readme.repo, &readme.commit, &readme.path);
    html! {
        section.readme id="readme" {
            h2.readme-name { a href=(file_url) { (name) } }
            @for note in &readme.notes {
                p.meta.cut { (note_text(*note)) " " a href=(file_url) { "The whole file" } "." }
            }
            @match &readme.body {
                Body::Unreadable(message) => p.error { "The README could not be shown: " (message) },
                Body::Html(html) => div.markdown { (PreEscaped(html.as_str())) },
                Body::Text(text) => pre.plain { (text) },
            }
        }
    }
}

/// What the page says about a README.
fn note_text(note: Note) -> String {
    let deep = shape::MAX_DEPTH;
    match note {
        Note::TextCut { shown } => format!(
            "Only the first {} of this README are shown: it is longer than one read.",
            human_size(shown)
        ),
        Note::HtmlCut => format!(
            "This README's HTML is cut at {}: the rest is not shown.",
            human_size(README_HTML_BYTES as u64)
        ),
        Note::RawHtmlAsText(Excess::TooDeep) => format!(
            "This README's raw HTML is shown as text: it would nest elements more than {deep} \
             deep (an unclosed tag such as <b> is reopened in every later paragraph)."
        ),
        Note::RawHtmlAsText(Excess::Expands { bytes }) => format!(
            "This README's raw HTML is shown as text: its unclosed tags (such as <b>, reopened \
             in every later paragraph) would have expanded it to more than {}.",
            human_size(bytes)
        ),
        Note::AsText(Excess::TooDeep) | Note::RawHtmlAsText(Excess::TooLarge { .. }) => format!(
            "This README is shown as text: its Markdown would nest elements more than {deep} \
             deep."
        ),
        Note::AsText(Excess::Expands { bytes }) => format!(
            "This README is shown as text: its HTML would have expanded to more than {}.",
            human_size(bytes)
        ),
        Note::AsText(Excess::TooLarge { bytes }) => format!(
            "This README is shown as text: its HTML would be {}, more than the {} a page shows.",
            human_size(bytes),
            human_size(SHOWN_BYTES as u64)
        ),
        Note::AsText(Excess::TooSlow) | Note::RawHtmlAsText(Excess::TooSlow) => format!(
            "This README is shown as text: rendering it took longer than {} s.",
            RENDER_TIME.as_secs()
        ),
    }
}

fn text_kind(path: &str) -> ReadmeText {
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".md") || lower.ends_with(".markdown") {
        ReadmeText::Markdown
    } else {
        ReadmeText::Plain
    }
}

/// What became of a README's Markdown.
enum Rendered {
    /// Sanitised HTML and what the page says about it.
    Html(String, Vec<Note>),
    /// It is to be shown as text, for this reason.
    AsText(Excess),
}

/// Markdown to sanitised HTML with every URL rewritten (module docs), within bounds: raw HTML
/// the parser would make too much of is escaped, and when that is not enough, or the result
/// is too long, the caller shows the text.
fn render_markdown(
    text: &str,
    rewriter: &Arc<Rewriter>,
    budget: &Budget,
) -> Result<Rendered, Stop> {
    let mut notes = Vec::new();
    let mut page = markdown_html(text, RawHtml::Kept, budget)?;
    if let Some(excess) = too_much(&page.html, budget)? {
        if !page.raw_html {
            return Ok(Rendered::AsText(excess));
        }
        page = markdown_html(text, RawHtml::AsText, budget)?;
        if let Some(excess) = too_much(&page.html, budget)? {
            return Ok(Rendered::AsText(excess));
        }
        notes.push(Note::RawHtmlAsText(excess));
    }
    if page.cut {
        notes.push(Note::HtmlCut);
    }
    let html = sanitise(&page.html, rewriter);
    if html.len() > SHOWN_BYTES {
        return Ok(Rendered::AsText(Excess::TooLarge {
            bytes: html.len() as u64,
        }));
    }
    Ok(Rendered::Html(html, notes))
}

/// Why the parser must not build `html`, if it must not.
fn too_much(html: &str, budget: &Budget) -> Result<Option<Excess>, Stop> {
    Ok(match shape::measure(html, PARSED_BYTES, budget)? {
        shape::Shape::Fits { .. } => None,
        shape::Shape::TooDeep => Some(Excess::TooDeep),
        shape::Shape::Expands { bytes } => Some(Excess::Expands { bytes }),
    })
}

/// What is done with a README's raw HTML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RawHtml {
    /// Kept for the sanitiser.
    Kept,
    /// Shown as text: an HTML block as a code block, inline HTML as text.
    AsText,
}

/// A README's Markdown as HTML.
struct MarkdownHtml {
    html: String,
    /// Cut at [`README_HTML_BYTES`].
    cut: bool,
    /// The Markdown has raw HTML.
    raw_html: bool,
}

/// CommonMark with GitHub's tables, task lists and strikethrough, raw HTML kept for the
/// sanitiser (or shown as text); headings get GitHub's ids, Markdown images from other sites
/// become links. At most [`README_HTML_BYTES`] are written (a link reference can repeat a
/// long URL many times).
fn markdown_html(text: &str, raw: RawHtml, budget: &Budget) -> Result<MarkdownHtml, Stop> {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS | Options::ENABLE_STRIKETHROUGH;
    let mut ticker = Ticker::new(budget, EVENTS_PER_CHECK);
    let mut raw_html = false;
    let mut events: Vec<Event> = Vec::new();
    for event in Parser::new_ext(text, options) {
        ticker.tick()?;
        let event = match event {
            Event::Html(html) | Event::InlineHtml(html) if raw == RawHtml::AsText => {
                raw_html = true;
                Event::Text(html)
            }
            Event::Html(_) | Event::InlineHtml(_) => {
                raw_html = true;
                event
            }
            Event::Start(Tag::HtmlBlock) if raw == RawHtml::AsText => {
                Event::Start(Tag::CodeBlock(CodeBlockKind::Indented))
            }
            Event::End(TagEnd::HtmlBlock) if raw == RawHtml::AsText => {
                Event::End(TagEnd::CodeBlock)
            }
            event => event,
        };
        events.push(event);
    }
    heading_ids(&mut events);
    external_images_as_links(&mut events);
    let mut out = Capped {
        html: String::with_capacity((text.len() * 3 / 2).min(README_HTML_BYTES)),
        cap: README_HTML_BYTES,
    };
    let cut = pulldown_cmark::html::write_html_fmt(&mut out, events.into_iter()).is_err();
    let mut html = out.html;
    // Table columns' alignment as the `align` attribute the sanitiser keeps, not the `style`
    // it drops. Only markup can hold this text: pulldown-cmark escapes quotes in text.
    for side in ["left", "center", "right"] {
        html = html.replace(
            &format!(" style=\"text-align: {side}\">"),
            &format!(" align=\"{side}\">"),
        );
    }
    Ok(MarkdownHtml {
        html,
        cut,
        raw_html,
    })
}

/// A `fmt::Write` that takes at most `cap` bytes: the first write past it fails, which ends
/// the HTML writer.
struct Capped {
    html: String,
    cap: usize,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.html.len() + s.len() > self.cap {
            return Err(fmt::Error);
        }
        self.html.push_str(s);
        Ok(())
    }
}

/// GitHub's heading ids: the heading's text lower-cased, punctuation dropped, spaces as `-`,
/// a repeated id numbered (`-1`, `-2`). The sanitiser prefixes them.
fn heading_ids(events: &mut [Event]) {
    let mut used: HashMap<String, usize> = HashMap::new();
    let mut i = 0;
    while i < events.len() {
        if let Event::Start(Tag::Heading { id: None, .. }) = &events[i] {
            let mut text = String::new();
            let mut j = i + 1;
            while j < events.len() && !matches!(events[j], Event::End(TagEnd::Heading(_))) {
                if let Event::Text(t) | Event::Code(t) = &events[j] {
                    text.push_str(t);
                }
                j += 1;
            }
            let slug = slug(&text);
            let count = used.entry(slug.clone()).or_insert(0);
            let id = if *count == 0 {
                slug
            } else {
                format!("{slug}-{count}")
            };
            *count += 1;
            if let Event::Start(Tag::Heading { id: slot, .. }) = &mut events[i] {
                *slot = Some(CowStr::from(id));
            }
            i = j;
        }
        i += 1;
    }
}

fn slug(text: &str) -> String {
    text.trim()
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// A Markdown image from another site would be blocked by the page's policy (and would tell
/// that site who reads the README): it becomes a link to the image, its alt text the link's.
fn external_images_as_links(events: &mut [Event]) {
    for event in events.iter_mut() {
        match event {
            Event::Start(Tag::Image {
                dest_url, title, ..
            }) if is_external(dest_url) => {
                *event = Event::Start(Tag::Link {
                    link_type: LinkType::Inline,
                    dest_url: dest_url.clone(),
                    title: title.clone(),
                    id: CowStr::from(""),
                });
            }
            _ => {}
        }
    }
    // The ends of the images turned into links: an image end whose start is now a link.
    let mut open: Vec<bool> = Vec::new();
    for event in events.iter_mut() {
        match event {
            Event::Start(Tag::Image { .. }) => open.push(false),
            Event::Start(Tag::Link { .. }) => open.push(true),
            Event::End(TagEnd::Image) | Event::End(TagEnd::Link) => {
                if open.pop() == Some(true) {
                    *event = Event::End(TagEnd::Link);
                } else {
                    *event = Event::End(TagEnd::Image);
                }
            }
            _ => {}
        }
    }
}

fn is_external(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("//")
}

/// The sanitiser's policy (module docs); URLs go through `rewriter`.
fn sanitise(html: &str, rewriter: &Arc<Rewriter>) -> String {
    let mut builder = ammonia::Builder::default();
    let headings = ["h1", "h2", "h3", "h4", "h5", "h6"];
    for heading in headings {
        builder.add_tag_attributes(heading, &["id"]);
    }
    // Task lists: every input is a disabled checkbox, whatever the README's HTML says.
    builder
        .add_tags(&["input"])
        .add_tag_attributes("input", &["checked"])
        .set_tag_attribute_value("input", "type", "checkbox")
        .set_tag_attribute_value("input", "disabled", "")
        .id_prefix(Some(ID_PREFIX))
        .link_rel(Some("noopener noreferrer nofollow"))
        .strip_comments(true);
    let rewriter = Arc::clone(rewriter);
    builder.attribute_filter(move |element, attribute, value| {
        rewriter.filter(element, attribute, value)
    });
    builder.clean(html).to_string()
}

/// Rewrites a README's URLs to this site's pages at one commit.
struct Rewriter {
    repo: String,
    commit: String,
    /// The README's directory, repository-relative, no slashes at either end.
    dir: String,
    /// Directories known to exist: relative links to them go to tree pages.
    dirs: HashSet<String>,
    /// The relative images met, in order: each image's source is a placeholder naming its
    /// index ([`IMAGE_MARK`]) until it is known whether the file exists.
    images: Mutex<Vec<String>>,
}

impl Rewriter {
    fn new(readme: &Readme, repo: &str, dirs: &HashSet<String>) -> Self {
        let dir = match readme.path.trim_matches('/').rsplit_once('/') {
            Some((dir, _)) => dir.to_owned(),
            None => String::new(),
        };
        Rewriter {
            repo: repo.to_owned(),
            commit: readme.commit.clone(),
            dir,
            dirs: dirs.clone(),
            images: Mutex::new(Vec::new()),
        }
    }

    fn images(&self) -> Vec<String> {
        match self.images.lock() {
            Ok(images) => images.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// `ammonia`'s attribute filter: URLs rewritten, anything else kept. Runs after the
    /// sanitiser has dropped attributes it does not allow and URLs with other schemes.
    fn filter<'u>(&self, element: &str, attribute: &str, value: &'u str) -> Option<Cow<'u, str>> {
        match (element, attribute) {
            ("img", "src") => self.image(value),
            // No other element has a source (none is allowed one): only images' sources
            // are placeholders.
            (_, "src") => None,
            (_, "href") => self.link(value),
            // `cite` and other URL attributes: only absolute web URLs stay.
            (_, "cite") => is_external(value).then_some(Cow::Borrowed(value)),
            _ => Some(Cow::Borrowed(value)),
        }
    }

    fn link<'u>(&self, value: &'u str) -> Option<Cow<'u, str>> {
        if has_scheme(value) {
            // `http(s):`, `mailto:` and the like: allowed by the sanitiser, kept.
            return Some(Cow::Borrowed(value));
        }
        if value.starts_with("//") {
            return Some(Cow::Owned(format!("https:{value}")));
        }
        if let Some(fragment) = value.strip_prefix('#') {
            return Some(Cow::Owned(if fragment.is_empty() {
                "#".to_owned()
            } else {
                format!("#{ID_PREFIX}{fragment}")
            }));
        }
        let target = resolve(&self.dir, value)?;
        let url = if target.directory || self.dirs.contains(&target.path) {
            tree_url(&self.repo, &self.commit, &target.path)
        } else {
            blob_url(&self.repo, &self.commit, &target.path)
        };
        Some(Cow::Owned(match target.fragment {
            Some(fragment) => format!("{url}#{fragment}"),
            None => url,
        }))
    }

    fn image<'u>(&self, value: &'u str) -> Option<Cow<'u, str>> {
        if has_scheme(value) || value.starts_with("//") {
            // Another site's image: blocked by the policy anyway, so never requested.
            return None;
        }
        let target = resolve(&self.dir, value).filter(|t| !t.directory && !t.path.is_empty())?;
        let mut images = match self.images.lock() {
            Ok(images) => images,
            Err(poisoned) => poisoned.into_inner(),
        };
        images.push(target.path);
        // `IMAGE_MARK` without its leading ` src="`, closed by `>`.
        Some(Cow::Owned(format!("<image {}>", images.len() - 1)))
    }
}

/// `scheme:` at the start (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`).
fn has_scheme(value: &str) -> bool {
    let Some((scheme, _)) = value.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// A relative URL resolved against the README's directory.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// Repository-relative, decoded; `""` is the top.
    path: String,
    /// Ended with `/`: a directory.
    directory: bool,
    fragment: Option<String>,
}

/// `url` (relative, or `/`-rooted at the repository's top) against `dir`: query dropped,
/// percent-escapes decoded, `.` and `..` applied. `None` when it climbs above the top or is
/// not UTF-8 once decoded: such a link is left inert.
fn resolve(dir: &str, url: &str) -> Option<Target> {
    let (rest, fragment) = match url.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment.to_owned())),
        None => (url, None),
    };
    let rest = rest.split_once('?').map_or(rest, |(path, _)| path);
    let decoded = percent_encoding::percent_decode_str(rest)
        .decode_utf8()
        .ok()?;
    let mut segments: Vec<&str> = if decoded.starts_with('/') {
        Vec::new()
    } else {
        dir.split('/').filter(|s| !s.is_empty()).collect()
    };
    let directory = decoded.ends_with('/') || decoded.is_empty() || decoded.ends_with("/.");
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop()?;
            }
            segment => segments.push(segment),
        }
    }
    let directory = directory || decoded.ends_with("..");
    Some(Target {
        path: segments.join("/"),
        directory,
        fragment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use testgit::hostile::formatting_bomb;

    const REPO: &str = "acme/shop";
    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn readme(path: &str, text: &str) -> Readme {
        Readme {
            path: path.to_owned(),
            commit: SHA.to_owned(),
            text: Ok(text.to_owned()),
            cut: false,
        }
    }

    fn set(paths: &[&str]) -> HashSet<String> {
        paths.iter().map(|s| s.to_string()).collect()
    }

    /// `readme` rendered as a page would show it, the relative images among `files` shown.
    fn shown(readme: &Readme, files: &[&str], dirs: &[&str]) -> String {
        let mut rendered =
            render_readme(REPO, readme, &set(dirs), &Budget::unlimited()).expect("rendered");
        rendered.show_images(&set(files));
        readme_section(&rendered).into_string()
    }

    fn render(path: &str, text: &str, files: &[&str], dirs: &[&str]) -> String {
        shown(&readme(path, text), files, dirs)
    }

    /// Runs `work` on its own thread: a hang or a render far past its bounds fails the test
    /// instead of stalling it.
    fn within<T: Send + 'static>(secs: u64, work: impl FnOnce() -> T + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = send.send(work());
        });
        receive
            .recv_timeout(Duration::from_secs(secs))
            .expect("the render finished within its hang guard")
    }

    /// Issue 34 point 5: hostile Markdown loses every way to run script or restyle the page.
    #[test]
    fn hostile_markdown_is_sanitised() {
        let text = "# Title\n\n\
            <script>window.__pwned = true</script>\n\n\
            <img src=x onerror=\"window.__pwned = true\">\n\n\
            [click](javascript:window.__pwned=true) <a href=\"JaVaScRiPt:alert(1)\">b</a>\n\n\
            <a href=\"#\" onclick=\"window.__pwned=true\">or me</a>\n\n\
            <iframe src=\"https://evil.example/\"></iframe>\n\n\
            <p style=\"position:fixed;top:0\" onmouseover=\"x()\">styled</p>\n\n\
            <form action=\"/sourcegraph/sign-out\"><button formaction=\"/x\">go</button></form>\n\n\
            <object data=\"x.swf\"></object><embed src=\"x\"><svg onload=\"x()\"></svg>\n\n\
            <style>body{display:none}</style><link rel=stylesheet href=/x.css>\n\n\
            ![d](data:image/png;base64,AAAA) <h2 id=\"__pwned\">clobber</h2>\n";
        let html = render("README.md", text, &["x"], &[]);
        let lower = html.to_ascii_lowercase();
        for gone in [
            "<script",
            "onerror",
            "javascript:",
            "onclick",
            "<iframe",
            "style=",
            "onmouseover",
            "<form",
            "formaction",
            "<object",
            "<embed",
            "<svg",
            "onload",
            "<style",
            "<link",
            "data:image",
            "id=\"__pwned\"",
        ] {
            assert!(!lower.contains(gone), "{gone} survived: {html}");
        }
        assert!(html.contains("id=\"user-content-__pwned\""), "{html}");
        assert!(html.contains(">styled</p>"), "{html}");
        assert!(
            html.contains("<a href=\"#\" rel=\"noopener noreferrer nofollow\">or me</a>"),
            "{html}"
        );
    }

    /// Issue 34 point 5: GitHub tables and task lists render; inputs are disabled checkboxes.
    #[test]
    fn tables_and_task_lists_render() {
        let text = "| Part | Language |\n| :--- | -------: |\n| core | Rust |\n\n- [x] carts\n- [ ] refunds\n\n~~old~~\n\n<input type=text name=csrf value=x>\n";
        let html = render("README.md", text, &[], &[]);
        assert!(html.contains("<table>"), "{html}");
        assert!(!html.contains("text-align"), "no style: {html}");
        assert!(html.contains("<th align=\"left\">Part</th>"), "{html}");
        assert!(html.contains("<td align=\"right\">Rust</td>"), "{html}");
        let quoted = render("README.md", "a style=\"text-align: left\">b\n", &[], &[]);
        assert!(
            quoted.contains("a style=\"text-align: left\"&gt;b") && !quoted.contains("align="),
            "text is never taken for an alignment: {quoted}"
        );
        assert_eq!(html.matches("type=\"checkbox\"").count(), 3, "{html}");
        assert_eq!(html.matches("disabled=\"\"").count(), 3, "{html}");
        assert_eq!(html.matches("checked=\"\"").count(), 1, "{html}");
        assert!(
            !html.contains("type=\"text\"") && !html.contains("csrf"),
            "{html}"
        );
        assert!(html.contains("<del>old</del>"), "{html}");
    }

    /// Issue 34 point 5: relative links go to blob pages (directories to tree pages) and
    /// images to raw URLs, all at the full SHA; `../`, spaces and `#` resolve; links out of
    /// the repository are inert; external links keep `rel`.
    #[test]
    fn relative_urls_are_rewritten_at_the_commit() {
        let text = "[guide](docs/guide.md) [lines](./docs/guide.md#L2-L4) [up](../README.md) \
            [spaced](<my notes.md>) [encoded](a%20b%23c.md) [dir](src/) [known](docs) \
            [top](/src/lib.rs?plain=1) [escape](../../etc/passwd) [out](https://example.com/x) \
            [anchor](#part-two) [mail](mailto:a@example.com)\n\n\
            ![logo](../img/logo.png) ![missing](nope.png) <img src=\"../img/a%20b.png\" alt=b> \
            ![remote](https://example.com/i.png) <img src=\"//example.com/t.png\">\n\n## Part two\n";
        let files = ["img/logo.png", "img/a b.png"];
        let html = render("guide/README.md", text, &files, &["guide/docs"]);
        let at =
            |kind: &str, path: &str| format!("/sourcegraph/repos/acme/shop/-/{kind}/{SHA}/{path}");
        for expected in [
            format!("href=\"{}\"", at("blob", "guide/docs/guide.md")),
            format!("href=\"{}#L2-L4\"", at("blob", "guide/docs/guide.md")),
            format!("href=\"{}\"", at("blob", "README.md")),
            format!("href=\"{}\"", at("blob", "guide/my%20notes.md")),
            format!("href=\"{}\"", at("blob", "guide/a%20b%23c.md")),
            format!("href=\"{}\"", at("tree", "guide/src")),
            format!("href=\"{}\"", at("tree", "guide/docs")),
            format!("href=\"{}\"", at("blob", "src/lib.rs")),
            "href=\"https://example.com/x\" rel=\"noopener noreferrer nofollow\"".to_owned(),
            "href=\"#user-content-part-two\"".to_owned(),
            "id=\"user-content-part-two\"".to_owned(),
            "href=\"mailto:a@example.com\"".to_owned(),
            format!("src=\"{}\"", at("raw", "img/logo.png")),
            format!("src=\"{}\"", at("raw", "img/a%20b.png")),
            // A Markdown image from elsewhere is a link to it, never loaded.
            "<a href=\"https://example.com/i.png\" rel=\"noopener noreferrer nofollow\">remote</a>"
                .to_owned(),
        ] {
            assert!(html.contains(&expected), "missing {expected}: {html}");
        }
        assert!(
            html.contains("<a rel=\"noopener noreferrer nofollow\">escape</a>"),
            "{html}"
        );
        assert!(
            html.contains("<img alt=\"missing\">"),
            "a missing image has no source: {html}"
        );
        assert!(!html.contains("example.com/t.png"), "{html}");
        assert!(!html.contains("src=\"//"), "{html}");
        assert!(!html.contains("passwd"), "{html}");
    }

    #[test]
    fn images_are_collected_for_the_existence_check() {
        let r = readme(
            "docs/README.md",
            "![a](img/a.png) <img src=\"../b.png\"> ![a](img/a.png) ![x](https://e.com/x.png) ![y](../../y.png)",
        );
        let rendered = render_readme(REPO, &r, &set(&[]), &Budget::unlimited()).unwrap();
        assert_eq!(rendered.image_paths(), vec!["docs/img/a.png", "b.png"]);
    }

    /// An image's placeholder cannot be forged by README text or attributes: only real
    /// relative images get a source, and only when their file exists.
    #[test]
    fn image_placeholders_cannot_be_forged() {
        let text = "src=\"<image 0>\" <img alt=' src=\"<image 0>\"' title=\"<image 0>\"> \
            `<img src=\"<image 0>\">` ![real](a.png) <img src=\"<image 0>\">\n";
        let html = render("README.md", text, &["a.png"], &[]);
        let raw = format!("/sourcegraph/repos/acme/shop/-/raw/{SHA}/a.png");
        assert_eq!(html.matches(&raw).count(), 1, "{html}");
        assert!(!html.contains("<img src=\"&lt;image"), "{html}");
        // The text that reads like a placeholder stays text.
        assert!(html.contains("<p>src=\"&lt;image 0&gt;\" <img"), "{html}");
        assert!(
            html.contains("<code>&lt;img src=\"&lt;image 0&gt;\"&gt;</code>"),
            "{html}"
        );
    }

    #[test]
    fn plain_readmes_are_text_and_cut_ones_say_so() {
        let mut r = readme("README", "<b>not bold</b>\n# not a heading");
        r.cut = true;
        let html = shown(&r, &[], &[]);
        assert!(
            html.contains("<pre class=\"plain\">&lt;b&gt;not bold&lt;/b&gt;"),
            "{html}"
        );
        assert!(
            html.contains("Only the first 31 B of this README are shown"),
            "{html}"
        );
        r.text = Err("binary".into());
        let html = shown(&r, &[], &[]);
        assert!(html.contains("could not be shown: binary"), "{html}");
    }

    #[test]
    fn the_preferred_readme_is_found() {
        use service::ListEntry;
        let entry = |path: &str, kind| ListEntry {
            path: path.into(),
            kind,
            size: Some(1),
        };
        let listing = ListAnswer {
            repo: REPO.into(),
            commit: SHA.into(),
            path: "docs".into(),
            depth: 1,
            entries: vec![
                entry("docs/README.txt", EntryKind::File),
                entry("docs/readme", EntryKind::Directory),
                entry("docs/Readme.md", EntryKind::File),
                entry("docs/sub/README.md", EntryKind::File),
            ],
            truncated: false,
        };
        assert_eq!(readme_path(&listing), Some("docs/Readme.md"));
    }

    #[test]
    fn urls_resolve() {
        assert_eq!(
            resolve("a/b", "../c"),
            Some(Target {
                path: "a/c".into(),
                directory: false,
                fragment: None
            })
        );
        assert_eq!(resolve("", "../c"), None);
        assert_eq!(
            resolve("a", "x/%2e%2e/y/"),
            Some(Target {
                path: "a/y".into(),
                directory: true,
                fragment: None
            })
        );
        assert_eq!(resolve("a", "%FF"), None);
        assert_eq!(
            resolve("a", "..").map(|t| (t.path, t.directory)),
            Some((String::new(), true))
        );
        assert!(has_scheme("mailto:x") && !has_scheme("a b:c") && !has_scheme("docs/x:y"));
    }

    /// Issue 42 point 6: the 44 KB bomb (2000 unclosed `<b>`s, 2000 paragraphs: 28 MB of
    /// HTML and 920 MB of memory before) and its 256 KiB version render at once, the raw
    /// HTML shown as text and the page saying why; ordinary Markdown around it still renders.
    #[test]
    fn the_formatting_element_bomb_shows_its_raw_html_as_text() {
        for (n, m) in [(2000, 2000), (10_500, 12_000)] {
            let text = format!("# Bomb\n\nSome *Markdown*.\n\n{}", formatting_bomb(n, m));
            assert!(text.len() >= 44_000, "{}", text.len());
            let html = within(30, move || render("README.md", &text, &[], &[]));
            assert!(html.len() <= SHOWN_BYTES, "{}", html.len());
            assert!(html.len() <= 4 * (n * 14 + m * 8) + 4096, "{}", html.len());
            assert!(
                html.contains("raw HTML is shown as text: it would nest elements more than 400"),
                "{}",
                &html[..2000]
            );
            assert!(html.contains("&lt;b class=a0&gt;"), "{}", &html[..2000]);
            assert!(html.contains("<em>Markdown</em>"), "{}", &html[..2000]);
            assert!(!html.contains("<b class") && !html.contains("<b>"));
        }
    }

    /// A bomb shallower than the depth limit still multiplies: fewer unclosed tags reopened
    /// in many paragraphs would expand the page past what the parser may build.
    #[test]
    fn a_shallow_bomb_that_would_expand_shows_its_raw_html_as_text() {
        let text = formatting_bomb(300, 3000);
        let html = within(30, move || render("README.md", &text, &[], &[]));
        assert!(
            html.contains(
                "its unclosed tags (such as &lt;b&gt;, reopened in every later \
                 paragraph) would have expanded it to more than 2.1 MB"
            ),
            "{}",
            &html[..1000]
        );
        assert!(html.len() < 200_000, "{}", html.len());
    }

    /// Markdown nested deeper than the parser may go, with no raw HTML to blame, is shown as
    /// text; so is HTML longer than a page shows.
    #[test]
    fn markdown_too_deep_or_too_long_is_shown_as_text() {
        let deep = format!("{}x\n", "- ".repeat(100_000));
        let html = within(30, move || render("README.md", &deep, &[], &[]));
        assert!(
            html.contains("shown as text: its Markdown would nest elements more than 400 deep"),
            "{}",
            &html[..1000]
        );
        assert!(
            html.contains("<pre class=\"plain\">- - - "),
            "{}",
            &html[..1000]
        );

        // Relative links are rewritten to long URLs: 36,000 of them make 4 MB.
        let links = "[a](b) ".repeat(36_000);
        let html = within(30, move || render("README.md", &links, &[], &[]));
        assert!(
            html.contains("shown as text: its HTML would be 4.")
                && html.contains("more than the 2.1 MB a page shows"),
            "{}",
            &html[..1000]
        );
        assert!(html.len() < 400_000, "{}", html.len());
    }

    /// A wide table's HTML is five times its Markdown: past its bound the HTML is cut and
    /// the page says so.
    #[test]
    fn html_past_its_bound_is_cut() {
        let row = format!("{}|\n", "|a".repeat(100));
        let text = format!("{row}{}|\n{}", "|-".repeat(100), row.repeat(1300));
        assert!(text.len() < 270_000, "{}", text.len());
        let html = within(30, move || render("README.md", &text, &[], &[]));
        assert!(
            html.contains("This README's HTML is cut at 1.0 MB: the rest is not shown."),
            "{}",
            &html[..1000]
        );
        assert!(
            html.len() <= README_HTML_BYTES + 64 * 1024,
            "{}",
            html.len()
        );
    }

    /// A caller that left stops the render: nothing is made for nobody.
    #[test]
    fn a_cancelled_render_stops() {
        let budget = Budget::unlimited();
        budget.cancel();
        let r = readme("README.md", &"# x\n\ntext\n".repeat(1000));
        assert_eq!(
            render_readme(REPO, &r, &set(&[]), &budget).map(|_| ()),
            Err(Stop::Cancelled)
        );
    }
}
