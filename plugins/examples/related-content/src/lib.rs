//! `related-content`: links each read document to related documents of the same commit.
//!
//! Configuration is `related.json` in the plugin directory: an object mapping a glob to the
//! paths of related files, all relative to the plugin directory:
//!
//! ```json
//! {"guides/**/*.md": ["reference/api.md", "README.md"], "faq.md": ["guides/start.md"]}
//! ```
//!
//! For every read item whose `path` matches one or more globs, the plugin attaches
//!
//! ```text
//! related:
//! - reference/api.md — API reference
//! - README.md — Project overview
//! ```
//!
//! listing the related paths of all matching globs in `related.json` order, each path once.
//! The description is the file's first Markdown ATX heading (outside front matter and code
//! fences), else its first non-blank line, else nothing (`- <path>`); a file that cannot be read
//! is listed as `- <path> — (unreadable: <reason>)`. All related files of a batch are read with a
//! single `read_files` call. Items matching no glob get no attachment. A missing or invalid
//! `related.json` yields one whole-batch attachment saying so.
//!
//! Globs match the whole path: `*` any run of characters except `/`, `?` one character except
//! `/`, `**` any run including `/` (`**/` also matches no directory at all). No other syntax.

use sourcegraph_plugin_sdk::{Attachment, Input, OrderedMap};

sourcegraph_plugin_sdk::plugin! {
    metadata: r#"{
  "name": "related-content",
  "title": "Related content",
  "description": "Attach related repository documents to a read (configured by related.json in the plugin directory).",
  "version": "0.1.0",
  "abi_version": 2,
  "operations": ["read", "read_many"],
  "default_enabled": true,
  "input_schema": {"type": "object", "properties": {}}
}"#,
    enrich: enrich,
}

/// Name of the configuration file, relative to the plugin directory.
const CONFIG: &str = "related.json";

fn enrich(input: Input) -> Result<Vec<Attachment>, String> {
    let raw = read_config()?;
    let config: OrderedMap<Vec<String>> = serde_json::from_slice(&raw)
        .map_err(|e| format!("{CONFIG} is not a JSON object of glob → array of paths: {e}"))?;

    // Per item, the related paths in config order without repeats.
    let per_item: Vec<(&str, Vec<&str>)> = input
        .files
        .iter()
        .map(|file| {
            let mut related: Vec<&str> = Vec::new();
            for (glob, paths) in config.iter() {
                if glob_match(glob, &file.path) {
                    for p in paths {
                        if !related.contains(&p.as_str()) {
                            related.push(p);
                        }
                    }
                }
            }
            (file.item_id.as_str(), related)
        })
        .filter(|(_, related)| !related.is_empty())
        .collect();
    if per_item.is_empty() {
        return Ok(Vec::new());
    }

    // One host call for the whole batch: every distinct related path once.
    let mut unique: Vec<&str> = Vec::new();
    for (_, related) in &per_item {
        for p in related {
            if !unique.contains(p) {
                unique.push(p);
            }
        }
    }
    let titles: Vec<Result<String, String>> = match sourcegraph_plugin_sdk::read_files(&unique) {
        Ok(results) => results
            .into_iter()
            .map(|r| r.map(|bytes| describe(&String::from_utf8_lossy(&bytes))))
            .collect(),
        // The whole request failed (budget, host fault): keep the links, say why titles are missing.
        Err(e) => unique.iter().map(|_| Err(e.clone())).collect(),
    };

    Ok(per_item
        .into_iter()
        .map(|(item_id, related)| {
            let mut text = String::from("related:");
            for path in related {
                let i = unique.iter().position(|u| *u == path).unwrap_or(0);
                match titles.get(i) {
                    Some(Ok(title)) if !title.is_empty() => {
                        text.push_str(&format!("\n- {path} — {title}"))
                    }
                    Some(Err(e)) => text.push_str(&format!("\n- {path} — (unreadable: {e})")),
                    _ => text.push_str(&format!("\n- {path}")),
                }
            }
            Attachment::item(item_id, text)
        })
        .collect())
}

fn read_config() -> Result<Vec<u8>, String> {
    sourcegraph_plugin_sdk::read_file(CONFIG)
        .map_err(|e| format!("cannot read {CONFIG} in the plugin directory: {e}"))
}

/// The first Markdown heading of `text`, else its first non-blank line, trimmed; `""` if none.
fn describe(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().peekable();
    // YAML front matter is metadata, not a title.
    if lines.peek().map(|l| l.trim_end()) == Some("---") {
        lines.next();
        for line in lines.by_ref() {
            if matches!(line.trim_end(), "---" | "...") {
                break;
            }
        }
    }
    let mut first_line: Option<&str> = None;
    let mut fence: Option<&str> = None;
    for line in lines {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if first_line.is_none() {
            first_line = Some(trimmed);
        }
        // A `#` line inside a fenced code block is code, not a heading.
        for marker in ["```", "~~~"] {
            if trimmed.starts_with(marker) {
                match fence {
                    None => fence = Some(marker),
                    Some(open) if open == marker => fence = None,
                    Some(_) => {}
                }
            }
        }
        if fence.is_some() || trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            continue;
        }
        if let Some(title) = atx_heading(line) {
            return title.to_owned();
        }
    }
    first_line.unwrap_or("").to_owned()
}

/// The text of an ATX heading line (`# Title`, up to three spaces of indent, 1–6 `#`, closing
/// `#`s dropped), or `None` when the line is not one or its text is empty.
fn atx_heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &rest[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let mut text = rest.trim();
    // A closing sequence is only one when separated by a space (`# C#` keeps its `#`).
    let without_hashes = text.trim_end_matches('#');
    if without_hashes.is_empty() || without_hashes.ends_with([' ', '\t']) {
        text = without_hashes.trim_end();
    }
    (!text.is_empty()).then_some(text)
}

/// Whole-path glob match with `*`, `?` and `**` (see the crate docs).
fn glob_match(glob: &str, path: &str) -> bool {
    let glob = sourcegraph_plugin_sdk::normalize_path(glob);
    let path = sourcegraph_plugin_sdk::normalize_path(path);
    let p: Vec<char> = glob.chars().collect();
    let s: Vec<char> = path.chars().collect();
    // memo[pi * (s.len() + 1) + si]: result of matching p[pi..] against s[si..]. Keeps the
    // matcher polynomial however many stars an author writes.
    let mut memo = vec![None; (p.len() + 1) * (s.len() + 1)];
    matches(&p, &s, 0, 0, &mut memo)
}

fn matches(p: &[char], s: &[char], pi: usize, si: usize, memo: &mut [Option<bool>]) -> bool {
    let key = pi * (s.len() + 1) + si;
    if let Some(known) = memo[key] {
        return known;
    }
    let result = match p.get(pi) {
        None => si == s.len(),
        Some('*') if p.get(pi + 1) == Some(&'*') => {
            if p.get(pi + 2) == Some(&'/') {
                // `**/`: zero directories, or any prefix ending in `/`.
                matches(p, s, pi + 3, si, memo)
                    || (si..s.len()).any(|k| s[k] == '/' && matches(p, s, pi + 3, k + 1, memo))
            } else {
                (si..=s.len()).any(|k| matches(p, s, pi + 2, k, memo))
            }
        }
        Some('*') => {
            let end = s[si..]
                .iter()
                .position(|&c| c == '/')
                .map_or(s.len(), |off| si + off);
            (si..=end).any(|k| matches(p, s, pi + 1, k, memo))
        }
        Some('?') => si < s.len() && s[si] != '/' && matches(p, s, pi + 1, si + 1, memo),
        Some(&c) => si < s.len() && s[si] == c && matches(p, s, pi + 1, si + 1, memo),
    };
    memo[key] = Some(result);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use sourcegraph_plugin_sdk::mock;

    fn run(files: &[(&str, &str)]) -> Value {
        let input = json!({
            "abi_version": 2, "operation": "read_many", "repository": "example/knowledge",
            "commit": "0123456789abcdef0123456789abcdef01234567", "root": "docs", "args": {},
            "files": files.iter().map(|(id, path)| json!({
                "item_id": id, "path": path, "repository_path": format!("docs/{path}"),
                "start_line": 1, "end_line": 3, "content": "x", "truncated": false,
                "has_more": null
            })).collect::<Vec<_>>()
        });
        serde_json::from_slice(&__sourcegraph_run(&serde_json::to_vec(&input).unwrap())).unwrap()
    }

    #[test]
    fn attaches_related_documents_with_titles() {
        mock::set_files([
            (
                "related.json",
                r#"{"guides/**/*.md": ["ref/api.md", "README.md"], "guides/start.md": ["faq.md", "ref/api.md"]}"#,
            ),
            (
                "ref/api.md",
                "---\ntitle: x\n---\n\n# API reference #\n\nText",
            ),
            (
                "README.md",
                "Project overview\n\n## Later heading? no: first heading wins\n",
            ),
            ("faq.md", "```\n# not a heading\n```\n## FAQ\n"),
        ]);
        let out = run(&[("read-0", "guides/start.md"), ("read-1", "other.md")]);
        assert_eq!(
            out,
            json!({"attachments": [{"item_id": "read-0", "text":
                "related:\n- ref/api.md — API reference\n- README.md — Later heading? no: first heading wins\n- faq.md — FAQ"}]})
        );
    }

    #[test]
    fn first_line_when_no_heading_and_unreadable_files_are_listed() {
        mock::set_files([
            (
                "related.json",
                r#"{"*.md": ["plain.txt", "gone.md", "empty.md"]}"#,
            ),
            ("plain.txt", "\n  first line  \nsecond"),
            ("empty.md", ""),
        ]);
        let out = run(&[("read-3", "a.md")]);
        let text = out["attachments"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("related:\n- plain.txt — first line\n- gone.md — (unreadable: "));
        assert!(text.ends_with("\n- empty.md"), "{text}");
    }

    #[test]
    fn missing_or_invalid_config_is_one_batch_attachment() {
        mock::set_files([("other", "")]);
        let out = run(&[("read-0", "a.md")]);
        let atts = out["attachments"].as_array().unwrap();
        assert_eq!(atts.len(), 1);
        assert!(atts[0].get("item_id").is_none());
        assert!(
            atts[0]["text"]
                .as_str()
                .unwrap()
                .starts_with("related-content: cannot read related.json")
        );

        for bad in ["{", "[]", r#"{"*": "x"}"#, r#"{"*": [1]}"#] {
            mock::set_files([("related.json", bad)]);
            let out = run(&[("read-0", "a.md")]);
            let text = out["attachments"][0]["text"].as_str().unwrap();
            assert!(
                text.starts_with("related-content: related.json is not"),
                "{text}"
            );
        }
    }

    #[test]
    fn no_match_means_no_attachment() {
        mock::set_files([("related.json", r#"{"docs/*.md": ["a.md"]}"#)]);
        assert_eq!(run(&[("read-0", "x/y.md")]), json!({"attachments": []}));
    }

    #[test]
    fn globs() {
        for (glob, path, want) in [
            ("*.md", "a.md", true),
            ("*.md", "d/a.md", false),
            ("**/*.md", "a.md", true),
            ("**/*.md", "d/e/a.md", true),
            ("d/**", "d/e/a.md", true),
            ("d/**/a.md", "d/a.md", true),
            ("d/**/a.md", "d/x/y/a.md", true),
            ("d/**/a.md", "dd/a.md", false),
            ("**", "anything/at/all", true),
            ("?.md", "a.md", true),
            ("?.md", "ab.md", false),
            ("a?b", "a/b", false),
            ("./guides/*", "guides/x", true),
            ("文档/*.md", "文档/说明.md", true),
            (
                "a*b*c*d*e*f*g",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
        ] {
            assert_eq!(glob_match(glob, path), want, "{glob} vs {path}");
        }
    }

    #[test]
    fn headings() {
        assert_eq!(atx_heading("# A"), Some("A"));
        assert_eq!(atx_heading("   ### B ###"), Some("B"));
        assert_eq!(atx_heading("# C#"), Some("C#"));
        assert_eq!(atx_heading("#NoSpace"), None);
        assert_eq!(atx_heading("    # code"), None);
        assert_eq!(atx_heading("####### seven"), None);
        assert_eq!(atx_heading("#"), None);
        assert_eq!(describe("\u{feff}# T\n"), "T");
        assert_eq!(describe(""), "");
    }
}
