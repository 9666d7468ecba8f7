//! The entry point of the fuzz target `readme` (`fuzz/`, issue 43) and of its corpus replay
//! in CI (`tests/fuzz_corpus.rs`): a repository's README (hostile text) rendered as the
//! repository and tree pages render it. A panic is a finding, and so is HTML the sanitiser
//! should have kept out. Not an API (hidden); nothing here changes what a page shows.

use crate::readme::{Readme, readme_section, render_readme};
use budget::Budget;
use std::collections::HashSet;
use std::time::Duration;

/// The first line is the README's path (`README.md`, `docs/readme.rst`, …; one that is not
/// a normal repository path, which no listing gives, is read as `README.md`), the second the
/// files and directories beside it (comma-separated: relative links and images to these
/// resolve), the rest its text.
pub fn readme(data: &[u8]) {
    let mut parts = data.splitn(3, |&b| b == b'\n');
    let path = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let listed = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let text = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let known: HashSet<String> = listed
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let readme = Readme {
        // A listing's path: normal (`gitstore::RepoPath`), so the README's directory is too.
        path: if path
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
        {
            path
        } else {
            "README.md".into()
        },
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        text: Ok(text),
        cut: data.len().is_multiple_of(7),
    };
    let budget = Budget::lasting(Duration::from_secs(30), 1.0);
    let Ok(mut rendered) = render_readme("acme/widgets", &readme, &known, &budget) else {
        panic!("a README render stopped with the page's budget left");
    };
    let images: Vec<String> = rendered
        .image_paths()
        .into_iter()
        .map(str::to_owned)
        .collect();
    // Relative images are repository paths: normal, inside the repository.
    assert!(
        images.iter().all(|image| image
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")),
        "{images:?}"
    );
    rendered.show_images(&known);
    let html = readme_section(&rendered).into_string();
    check_html(&html);
}

/// What the sanitiser promises of the page's HTML: no element that runs or styles anything,
/// no event handler or `style` attribute, no URL with a scheme that runs. The serialiser
/// escapes `<` in text and `"` in attribute values, so tags are found exactly.
fn check_html(html: &str) {
    const FORBIDDEN: [&str; 10] = [
        "script", "style", "iframe", "object", "embed", "form", "base", "meta", "link", "frame",
    ];
    let bytes = html.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut end = start;
        let mut quoted = false;
        while end < bytes.len() && (quoted || bytes[end] != b'>') {
            if bytes[end] == b'"' {
                quoted = !quoted;
            }
            end += 1;
        }
        let tag = &html[start..end.min(bytes.len())];
        i = end + 1;
        let closing = tag.starts_with('/');
        let tag = tag.strip_prefix('/').unwrap_or(tag);
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        assert!(
            !FORBIDDEN.contains(&name.as_str()),
            "a <{name}> element in {html:.2000}"
        );
        let attributes = attributes(tag);
        if name == "input" && !closing {
            // Only a task list's disabled checkbox.
            assert!(
                attributes.contains(&("type", "checkbox"))
                    && attributes.iter().any(|(a, _)| *a == "disabled"),
                "an <input> that is no task-list checkbox: <{tag}>"
            );
        }
        for (attribute, value) in attributes {
            let attribute = attribute.to_ascii_lowercase();
            assert!(
                !attribute.starts_with("on") && attribute != "style" && attribute != "srcdoc",
                "attribute {attribute} on <{name}>"
            );
            if matches!(
                attribute.as_str(),
                "href" | "src" | "action" | "formaction" | "xlink:href"
            ) {
                let url: String = value
                    .replace("&amp;", "&")
                    .chars()
                    .filter(|c| !c.is_ascii_whitespace() && !c.is_control())
                    .collect::<String>()
                    .to_ascii_lowercase();
                for scheme in ["javascript:", "vbscript:", "data:"] {
                    assert!(
                        !url.starts_with(scheme),
                        "{attribute}={value:?} on <{name}>"
                    );
                }
            }
        }
    }
}

/// The `name="value"` attributes of a tag's text (after its name).
fn attributes(tag: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = tag.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest.starts_with('/') {
            return out;
        }
        let name_end = rest
            .find(|c: char| c == '=' || c.is_ascii_whitespace() || c == '/')
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        rest = &rest[name_end..];
        if let Some(after) = rest.strip_prefix("=\"") {
            let close = after.find('"').unwrap_or(after.len());
            out.push((name, &after[..close]));
            rest = after.get(close + 1..).unwrap_or("");
        } else {
            out.push((name, ""));
            if name.is_empty() {
                rest = rest.get(1..).unwrap_or("");
            }
        }
    }
}
