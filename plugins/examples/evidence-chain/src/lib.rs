//! `evidence-chain`: attaches line-anchored references (evidence) to read documents.
//!
//! Configuration is `evidence.json` in the plugin directory, keyed by item path relative to the
//! plugin directory; entry paths are relative to the plugin directory too:
//!
//! ```json
//! {"policies/approval.md": [
//!   {"path": "records/2024-q1.md", "start_line": 2, "end_line": 4, "note": "Q1 sign-off"}
//! ]}
//! ```
//!
//! For a read item with entries, the plugin attaches
//!
//! ```text
//! references:
//! - <site_url>/sourcegraph/repos/<repo>/-/blob/<commit>/<root>/records/2024-q1.md#L2-L4 — Q1 sign-off
//! ```
//!
//! `site_url` comes from the call's args (`{"site_url": "https://example.org"}`, trailing `/`
//! dropped) and defaults to `""`, giving a site-relative link. The repository path is the plugin
//! directory (`root`) joined with the entry's path, so a monorepo prefix is never repeated.
//! `end_line` defaults to `start_line`, `note` to nothing (the ` — <note>` part is omitted).
//! Characters that would break a URL or a Markdown link (space, `#`, `?`, `%`, quotes, angle
//! brackets, controls …) are percent-encoded; other characters, including non-ASCII, are kept
//! so links stay readable. Items without entries get no attachment; a missing or invalid
//! `evidence.json` (or a non-string `site_url`) yields one whole-batch attachment saying so.

use serde::Deserialize;
use sourcegraph_plugin_sdk::{Attachment, Input, OrderedMap};

sourcegraph_plugin_sdk::plugin! {
    metadata: r#"{
  "name": "evidence-chain",
  "title": "Evidence chain",
  "description": "Attach line-anchored references from evidence.json in the plugin directory.",
  "version": "0.1.0",
  "abi_version": 2,
  "operations": ["read", "read_many"],
  "default_enabled": true,
  "input_schema": {"type": "object", "properties": {"site_url": {"type": "string", "description": "Site origin for absolute links, e.g. https://example.org; default site-relative."}}}
}"#,
    enrich: enrich,
}

/// Name of the configuration file, relative to the plugin directory.
const CONFIG: &str = "evidence.json";

/// One reference of `evidence.json`.
/// Unknown fields are ignored, so a configuration may carry extra notes for humans.
#[derive(Debug, Deserialize)]
struct Entry {
    path: String,
    start_line: u64,
    #[serde(default)]
    end_line: Option<u64>,
    #[serde(default)]
    note: Option<String>,
}

fn enrich(input: Input) -> Result<Vec<Attachment>, String> {
    let site_url = input
        .arg_str("site_url")?
        .unwrap_or("")
        .trim_end_matches('/');
    let raw = sourcegraph_plugin_sdk::read_file(CONFIG)
        .map_err(|e| format!("cannot read {CONFIG} in the plugin directory: {e}"))?;
    let config: OrderedMap<Vec<Entry>> = serde_json::from_slice(&raw).map_err(|e| {
        format!(
            "{CONFIG} is not a JSON object of path → array of {{path, start_line, end_line, note}}: {e}"
        )
    })?;

    let base = format!(
        "{site_url}/sourcegraph/repos/{}/-/blob/{}/",
        encode(&input.repository),
        encode(&input.commit)
    );
    let mut attachments = Vec::new();
    for file in &input.files {
        let Some(entries) = config
            .iter()
            .find(|(key, _)| {
                sourcegraph_plugin_sdk::normalize_path(key)
                    == sourcegraph_plugin_sdk::normalize_path(&file.path)
            })
            .map(|(_, entries)| entries)
        else {
            continue;
        };
        if entries.is_empty() {
            continue;
        }
        let mut text = String::from("references:");
        for entry in entries {
            let start = entry.start_line;
            let end = entry.end_line.unwrap_or(start);
            let path = encode(&join(&input.root, &entry.path));
            text.push_str(&format!("\n- {base}{path}#L{start}-L{end}"));
            if let Some(note) = entry
                .note
                .as_deref()
                .map(str::trim)
                .filter(|n| !n.is_empty())
            {
                text.push_str(" — ");
                text.push_str(note);
            }
        }
        attachments.push(Attachment::item(&file.item_id, text));
    }
    Ok(attachments)
}

/// The repository path of `path` (relative to the plugin directory `root`), resolving `.` and
/// `..` lexically; `..` never climbs above the repository root.
fn join(root: &str, path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in root.split('/').chain(path.split('/')) {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    segments.join("/")
}

/// Percent-encodes the ASCII characters that would end or corrupt a URL path inside Markdown.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_control() || " \"#%<>?[\\]^`{|}()".contains(c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use sourcegraph_plugin_sdk::mock;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn run(root: &str, args: Value, paths: &[(&str, &str)]) -> Value {
        let input = json!({
            "abi_version": 2, "operation": "read_many", "repository": "example/knowledge",
            "commit": SHA, "root": root, "args": args,
            "files": paths.iter().map(|(id, path)| json!({
                "item_id": id, "path": path, "repository_path": join(root, path),
                "start_line": 1, "end_line": 3, "content": "x", "truncated": false,
                "has_more": false
            })).collect::<Vec<_>>()
        });
        serde_json::from_slice(&__sourcegraph_run(&serde_json::to_vec(&input).unwrap())).unwrap()
    }

    fn evidence() {
        mock::set_files([(
            "evidence.json",
            r#"{"policies/approval.md": [
                 {"path": "records/q1.md", "start_line": 2, "end_line": 4, "note": "Q1 sign-off"},
                 {"path": "./records/q2 draft.md", "start_line": 7}
               ],
               "empty.md": []}"#,
        )]);
    }

    #[test]
    fn site_relative_links_under_the_plugin_root() {
        evidence();
        let out = run(
            "packages/docs",
            json!({}),
            &[
                ("read-0", "other.md"),
                ("read-1", "policies/approval.md"),
                ("read-2", "empty.md"),
            ],
        );
        assert_eq!(
            out,
            json!({"attachments": [{"item_id": "read-1", "text": format!(
                "references:\n\
                 - /sourcegraph/repos/example/knowledge/-/blob/{SHA}/packages/docs/records/q1.md#L2-L4 — Q1 sign-off\n\
                 - /sourcegraph/repos/example/knowledge/-/blob/{SHA}/packages/docs/records/q2%20draft.md#L7-L7")}]})
        );
    }

    #[test]
    fn absolute_links_from_site_url_at_the_repository_root() {
        evidence();
        let out = run(
            "",
            json!({"site_url": "https://example.org/"}),
            &[("read-0", "policies/approval.md")],
        );
        let text = out["attachments"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(&format!(
            "references:\n- https://example.org/sourcegraph/repos/example/knowledge/-/blob/{SHA}/records/q1.md#L2-L4 — Q1 sign-off\n"
        )), "{text}");
    }

    #[test]
    fn failures_are_one_batch_attachment() {
        evidence();
        let out = run(
            "",
            json!({"site_url": 1}),
            &[("read-0", "policies/approval.md")],
        );
        assert_eq!(
            out,
            json!({"attachments": [{"text": "evidence-chain: args.site_url must be a string"}]})
        );

        mock::set_files([("x", "")]);
        let out = run("", json!({}), &[("read-0", "a.md")]);
        assert!(
            out["attachments"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("evidence-chain: cannot read evidence.json")
        );

        for bad in [
            "nope",
            r#"{"a.md": {}}"#,
            r#"{"a.md": [{"path": "b"}]}"#,
            r#"{"a.md": [{"path": "b", "start_line": "1"}]}"#,
        ] {
            mock::set_files([("evidence.json", bad)]);
            let out = run("", json!({}), &[("read-0", "a.md")]);
            let atts = out["attachments"].as_array().unwrap();
            assert_eq!(atts.len(), 1, "{bad}");
            assert!(
                atts[0]["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("evidence-chain: evidence.json is not"),
                "{bad}"
            );
        }
    }

    #[test]
    fn joining_and_encoding() {
        assert_eq!(join("", "a/b.md"), "a/b.md");
        assert_eq!(join("pkg/docs/", "./a/../b.md"), "pkg/docs/b.md");
        assert_eq!(join("pkg", "../../x"), "x");
        assert_eq!(encode("a b#c?d%e/文档"), "a%20b%23c%3Fd%25e/文档");
    }
}
