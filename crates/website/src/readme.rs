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

use crate::paths::{blob_url, raw_url, tree_url};
use maud::{Markup, PreEscaped, html};
use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};
use service::{EntryKind, ListAnswer};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

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

/// A README read for a page: where it is, its text and what is known of the paths it names.
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
    /// Files known to exist (repository-relative): relative images load only from these.
    pub files: HashSet<String>,
    /// Directories known to exist: relative links to them go to tree pages.
    pub dirs: HashSet<String>,
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

/// The files and directories a listing shows, for [`Readme::files`] and [`Readme::dirs`].
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

/// The repository paths of the relative images a README shows (Markdown images and HTML
/// `img`), in order, each once: the page lists their directories so that only images that
/// exist are requested. Links escaping the repository are not among them.
pub fn readme_images(readme: &Readme) -> Vec<String> {
    let Ok(text) = &readme.text else {
        return Vec::new();
    };
    if text_kind(&readme.path) != ReadmeText::Markdown {
        return Vec::new();
    }
    let rewriter = Arc::new(Rewriter::new(readme, "", true));
    sanitise(&markdown_html(text), &rewriter);
    let mut seen = HashSet::new();
    let images = match rewriter.images.lock() {
        Ok(images) => images.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    images
        .into_iter()
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// The README section of a page in `repo`: the file's name linking to its blob page, then
/// the rendered Markdown (or the text), and a note when it was cut or could not be read.
pub(crate) fn readme_section(repo: &str, readme: &Readme) -> Markup {
    let name = readme.path.rsplit('/').next().unwrap_or(&readme.path);
    let file_url = blob_url(repo, &readme.commit, &readme.path);
    html! {
        section.readme id="readme" {
            h2.readme-name { a href=(file_url) { (name) } }
            @match &readme.text {
                Err(message) => p.error { "The README could not be shown: " (message) },
                Ok(text) => {
                    @if readme.cut {
                        p.meta.cut {
                            "Only the first " (crate::pages::human_size(text.len() as u64))
                            " of this README are shown: it is longer than one read. "
                            a href=(file_url) { "The whole file" } "."
                        }
                    }
                    @match text_kind(&readme.path) {
                        ReadmeText::Markdown => div.markdown { (render_markdown(repo, readme, text)) },
                        ReadmeText::Plain => pre.plain { (text) },
                    }
                }
            }
        }
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

/// Markdown to sanitised HTML with every URL rewritten (module docs).
fn render_markdown(repo: &str, readme: &Readme, text: &str) -> PreEscaped<String> {
    let rewriter = Arc::new(Rewriter::new(readme, repo, false));
    PreEscaped(sanitise(&markdown_html(text), &rewriter))
}

/// CommonMark with GitHub's tables, task lists and strikethrough, raw HTML kept for the
/// sanitiser; headings get GitHub's ids, Markdown images from other sites become links.
fn markdown_html(text: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS | Options::ENABLE_STRIKETHROUGH;
    let mut events: Vec<Event> = Parser::new_ext(text, options).collect();
    heading_ids(&mut events);
    external_images_as_links(&mut events);
    let mut out = String::with_capacity(text.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut out, events.into_iter());
    // Table columns' alignment as the `align` attribute the sanitiser keeps, not the `style`
    // it drops. Only markup can hold this text: pulldown-cmark escapes quotes in text.
    for side in ["left", "center", "right"] {
        out = out.replace(
            &format!(" style=\"text-align: {side}\">"),
            &format!(" align=\"{side}\">"),
        );
    }
    out
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
    files: HashSet<String>,
    dirs: HashSet<String>,
    /// Collecting: relative images are recorded (kept as they are otherwise).
    collect: bool,
    images: Mutex<Vec<String>>,
}

impl Rewriter {
    fn new(readme: &Readme, repo: &str, collect: bool) -> Self {
        let dir = match readme.path.trim_matches('/').rsplit_once('/') {
            Some((dir, _)) => dir.to_owned(),
            None => String::new(),
        };
        Rewriter {
            repo: repo.to_owned(),
            commit: readme.commit.clone(),
            dir,
            files: readme.files.clone(),
            dirs: readme.dirs.clone(),
            collect,
            images: Mutex::new(Vec::new()),
        }
    }

    /// `ammonia`'s attribute filter: URLs rewritten, anything else kept. Runs after the
    /// sanitiser has dropped attributes it does not allow and URLs with other schemes.
    fn filter<'u>(&self, element: &str, attribute: &str, value: &'u str) -> Option<Cow<'u, str>> {
        match (element, attribute) {
            ("img", "src") => self.image(value),
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
        if self.collect {
            if let Ok(mut images) = self.images.lock() {
                images.push(target.path.clone());
            }
            return Some(Cow::Borrowed(value));
        }
        self.files
            .contains(&target.path)
            .then(|| Cow::Owned(raw_url(&self.repo, &self.commit, &target.path)))
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

    const REPO: &str = "acme/shop";
    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn readme(path: &str, text: &str, files: &[&str], dirs: &[&str]) -> Readme {
        Readme {
            path: path.to_owned(),
            commit: SHA.to_owned(),
            text: Ok(text.to_owned()),
            cut: false,
            files: files.iter().map(|s| s.to_string()).collect(),
            dirs: dirs.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn render(path: &str, text: &str, files: &[&str], dirs: &[&str]) -> String {
        readme_section(REPO, &readme(path, text, files, dirs)).into_string()
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
            &[],
            &[],
        );
        assert_eq!(readme_images(&r), vec!["docs/img/a.png", "b.png"]);
    }

    #[test]
    fn plain_readmes_are_text_and_cut_ones_say_so() {
        let mut r = readme("README", "<b>not bold</b>\n# not a heading", &[], &[]);
        r.cut = true;
        let html = readme_section(REPO, &r).into_string();
        assert!(
            html.contains("<pre class=\"plain\">&lt;b&gt;not bold&lt;/b&gt;"),
            "{html}"
        );
        assert!(
            html.contains("Only the first 31 B of this README are shown"),
            "{html}"
        );
        r.text = Err("binary".into());
        let html = readme_section(REPO, &r).into_string();
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
}
