//! Selection (W-8..W-12), grouping by plugin directory (W-5, W-15), the ABI 2 input
//! (W-13, W-14) and the placement of what plugins return (W-16..W-21).

use crate::abi::attachments_of;
use crate::catalog::{Catalog, Nearest, Plugin, dir_key};
use crate::{Code, ConnectionPlugins, Diagnostic, PluginSelection};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// One successfully read item, as plugins see it (W-13, W-14).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ItemRef {
    /// `read-<request index>`, never renumbered.
    pub item_id: String,
    /// Repository-relative path.
    pub repository_path: String,
    /// The actual returned range.
    pub start_line: u64,
    pub end_line: u64,
    pub content: String,
    pub truncated: bool,
    pub has_more: Option<bool>,
    pub next_start_line: Option<u64>,
}

/// One run of one plugin over the items of its directory (W-15).
#[derive(Debug, Clone)]
pub struct Execution {
    pub plugin: Arc<Plugin>,
    pub args: Value,
    /// Indexes into the items given to [`plan`], in request order.
    pub items: Vec<usize>,
}

/// What to run, in order (W-19), and what was diagnosed while choosing.
#[derive(Debug, Default)]
pub struct Plan {
    pub executions: Vec<Execution>,
    pub diagnostics: Vec<Diagnostic>,
}

/// The plan of a call that needs no catalog, decided before any discovery (W-10, W-11):
/// `plugins: []` runs nothing and says nothing; connection `off` or the host switch runs
/// nothing and answers PLUGIN_DISABLED for each plugin the call named. `None`: the call
/// needs the catalog.
pub fn plan_without_catalog(
    connection: &ConnectionPlugins,
    call: Option<&[PluginSelection]>,
    host_disabled: bool,
) -> Option<Plan> {
    let mut out = Plan::default();
    if call.is_some_and(<[PluginSelection]>::is_empty) {
        return Some(out);
    }
    let why = match (host_disabled, connection) {
        (true, _) => "repository plugins are disabled on this server",
        (false, ConnectionPlugins::Off) => {
            "repository plugins are off for this connection (plugins=off)"
        }
        _ => return None,
    };
    for selection in call.unwrap_or_default() {
        out.diagnostics
            .push(Diagnostic::new(Code::Disabled, why).at(&selection.name, ""));
    }
    Some(out)
}

/// Chooses the executions for one call.
///
/// `call` is the call's `plugins` argument (`None` = not given); `operation` is `read` or
/// `read_many`; `host_disabled` is `SOURCEGRAPH_PLUGINS_DISABLED`.
pub fn plan(
    catalog: &Catalog,
    connection: &ConnectionPlugins,
    call: Option<&[PluginSelection]>,
    operation: &str,
    host_disabled: bool,
    items: &[ItemRef],
) -> Plan {
    if let Some(decided) = plan_without_catalog(connection, call, host_disabled) {
        return decided;
    }
    let mut out = Plan::default();
    let empty = || Value::Object(Default::default());
    let (chosen, explicit): (Vec<(String, Value)>, bool) = match (call, connection) {
        (Some(list), _) => (
            list.iter()
                .map(|s| (s.name.clone(), s.args.clone()))
                .collect(),
            true,
        ),
        (None, ConnectionPlugins::Named(names)) => {
            (names.iter().map(|n| (n.clone(), empty())).collect(), true)
        }
        _ => (
            catalog
                .names()
                .into_iter()
                .map(|n| (n.to_string(), empty()))
                .collect(),
            false,
        ),
    };
    for (name, args) in chosen {
        // Group the items by the directory of the nearest plugin of this name.
        let mut groups: Vec<(Nearest<'_>, Vec<usize>)> = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let Some(nearest) = catalog.nearest(&name, &item.repository_path) else {
                continue;
            };
            let dir = nearest_dir(nearest);
            match groups.iter_mut().find(|(n, _)| nearest_dir(*n) == dir) {
                Some((_, members)) => members.push(index),
                None => groups.push((nearest, vec![index])),
            }
        }
        if groups.is_empty() && explicit {
            let message = format!(
                "no plugin `{}` applies to the items read at this commit",
                bounded(&name)
            );
            out.diagnostics
                .push(Diagnostic::new(Code::NotFound, message).at(&name, ""));
        }
        groups.sort_by(|(a, _), (b, _)| dir_key(nearest_dir(*a)).cmp(&dir_key(nearest_dir(*b))));
        for (nearest, members) in groups {
            let ids = members.iter().map(|&i| items[i].item_id.clone()).collect();
            match nearest {
                Nearest::Broken(broken) => out
                    .diagnostics
                    .push(broken.diagnostic.clone().for_items(ids)),
                Nearest::Runnable(plugin) if !plugin.metadata.declares(operation) => {
                    if explicit {
                        let message =
                            format!("`{name}` does not declare the operation `{operation}`");
                        out.diagnostics.push(
                            Diagnostic::new(Code::Operation, message)
                                .at(&name, &plugin.dir)
                                .for_items(ids),
                        );
                    }
                }
                Nearest::Runnable(plugin) if !explicit && !plugin.metadata.default_enabled => {}
                Nearest::Runnable(plugin) => {
                    out.executions.push(Execution {
                        plugin: plugin.clone(),
                        args: args.clone(),
                        items: members,
                    });
                }
            }
        }
    }
    out
}

fn nearest_dir(nearest: Nearest<'_>) -> &str {
    match nearest {
        Nearest::Runnable(plugin) => &plugin.dir,
        Nearest::Broken(broken) => &broken.dir,
    }
}

fn bounded(text: &str) -> String {
    text.chars()
        .take(100)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

/// The ABI 2 input document (W-13).
#[derive(Serialize)]
struct Input<'a> {
    abi_version: i64,
    operation: &'a str,
    repository: &'a str,
    commit: &'a str,
    root: &'a str,
    args: &'a Value,
    files: Vec<InputFile<'a>>,
}

#[derive(Serialize)]
struct InputFile<'a> {
    item_id: &'a str,
    /// Relative to the plugin directory (W-15).
    path: &'a str,
    repository_path: &'a str,
    start_line: u64,
    end_line: u64,
    content: &'a str,
    truncated: bool,
    has_more: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_start_line: Option<u64>,
}

impl Execution {
    /// The UTF-8 JSON input of this execution (W-13..W-15): paths relative to the plugin
    /// directory, `root` the directory itself, ids as in the request.
    pub fn input(
        &self,
        operation: &str,
        repository: &str,
        commit: &str,
        items: &[ItemRef],
    ) -> Vec<u8> {
        let dir = &self.plugin.dir;
        let files = self
            .items
            .iter()
            .map(|&i| {
                let item = &items[i];
                let relative = if dir.is_empty() {
                    item.repository_path.as_str()
                } else {
                    item.repository_path
                        .get(dir.len() + 1..)
                        .unwrap_or(&item.repository_path)
                };
                InputFile {
                    item_id: &item.item_id,
                    path: relative,
                    repository_path: &item.repository_path,
                    start_line: item.start_line,
                    end_line: item.end_line,
                    content: &item.content,
                    truncated: item.truncated,
                    has_more: item.has_more,
                    next_start_line: item.next_start_line,
                }
            })
            .collect();
        let input = Input {
            abi_version: crate::ABI_VERSION,
            operation,
            repository,
            commit,
            root: dir,
            args: &self.args,
            files,
        };
        // Serializing plain strings, numbers and a `Value` cannot fail.
        serde_json::to_vec(&input).unwrap_or_default()
    }
}

/// The total attachment text of one request (W-21).
pub const ATTACHMENT_CAP: usize = 2 * 1024 * 1024;

/// Where attachment text goes (W-17): after an item's body, or as final blocks.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Attachments {
    /// (item id, text), in append order.
    pub per_item: Vec<(String, String)>,
    /// Whole-batch texts, in append order.
    pub whole: Vec<String>,
    pub diagnostics: Vec<Diagnostic>,
    total: usize,
}

impl Attachments {
    /// The texts attached to `item_id`, in order.
    pub fn for_item<'a>(&'a self, item_id: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.per_item
            .iter()
            .filter(move |(id, _)| id == item_id)
            .map(|(_, text)| text.as_str())
    }

    /// Takes one execution's raw output (W-16, W-18..W-21): invalid JSON or shape drops the
    /// whole output; a bad attachment is dropped alone; text is never parsed, labelled,
    /// merged or cut.
    pub fn absorb(&mut self, execution: &Execution, items: &[ItemRef], output: &str) {
        let plugin = &execution.plugin;
        let ids: Vec<String> = execution
            .items
            .iter()
            .map(|&i| items[i].item_id.clone())
            .collect();
        let diagnose = |code: Code, message: String| {
            Diagnostic::new(code, message)
                .at(&plugin.name, &plugin.dir)
                .for_items(ids.clone())
        };
        let attachments = match attachments_of(output) {
            Ok(list) => list,
            Err(why) => {
                self.diagnostics.push(diagnose(Code::Output, why));
                return;
            }
        };
        for (index, attachment) in attachments.into_iter().enumerate() {
            let Value::Object(mut fields) = attachment else {
                self.diagnostics.push(diagnose(
                    Code::Attachment,
                    format!("attachment {index} is not an object; dropped"),
                ));
                continue;
            };
            let Some(Value::String(text)) = fields.remove("text") else {
                self.diagnostics.push(diagnose(
                    Code::Attachment,
                    format!("attachment {index} has no string `text`; dropped"),
                ));
                continue;
            };
            // Only an absent key means whole-batch (W-17); `null` is a wrong type (W-20).
            let target = match fields.remove("item_id") {
                None => None,
                Some(Value::String(id)) if ids.contains(&id) => Some(id),
                Some(Value::String(id)) => {
                    let message = format!(
                        "attachment {index} names item `{}`, which is not one of this execution's items; dropped",
                        bounded(&id)
                    );
                    self.diagnostics.push(diagnose(Code::Attachment, message));
                    continue;
                }
                Some(_) => {
                    self.diagnostics.push(diagnose(
                        Code::Attachment,
                        format!("attachment {index} has a non-string `item_id`; dropped"),
                    ));
                    continue;
                }
            };
            if self.total + text.len() > ATTACHMENT_CAP {
                let message = format!(
                    "attachment {index} ({} bytes) would pass the 2 MiB attachment cap of this request; omitted",
                    text.len()
                );
                self.diagnostics.push(diagnose(Code::Attachment, message));
                continue;
            }
            self.total += text.len();
            match target {
                Some(id) => self.per_item.push((id, text)),
                None => self.whole.push(text),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PluginConfig;
    use crate::catalog::{ArtifactEntry, ArtifactKind, discover};

    fn wasm(name: &str, extra: &str) -> Vec<u8> {
        let json = format!(r#"{{"name":"{name}","abi_version":2{extra}}}"#);
        let escaped = json.replace('"', "\\\"");
        wat::parse_str(format!(
            r#"(module (memory (export "memory") 1)
                (func (export "alloc") (param i32) (result i32) (i32.const 16))
                (func (export "dealloc") (param i32 i32))
                (func (export "enrich") (param i32 i32) (result i64) (i64.const 0))
                (@custom "sourcegraph.plugin.v1" "{escaped}"))"#
        ))
        .unwrap()
    }

    /// A catalog from (artifact path, metadata extra) pairs.
    fn catalog(artifacts: &[(&str, &str)]) -> Catalog {
        let entries: Vec<ArtifactEntry> = artifacts
            .iter()
            .map(|(path, _)| ArtifactEntry {
                path: path.to_string(),
                path_utf8: true,
                kind: ArtifactKind::Blob,
                size: 1,
                digest: path.to_string(),
            })
            .collect();
        discover(&entries, &PluginConfig::default(), None, |e| {
            let (path, extra) = artifacts.iter().find(|(p, _)| *p == e.path).unwrap();
            let name = path
                .rsplit('/')
                .next()
                .unwrap()
                .strip_suffix(".sourcegraph.wasm")
                .unwrap();
            Ok(wasm(name, extra))
        })
        .unwrap()
    }

    fn item(id: usize, path: &str) -> ItemRef {
        ItemRef {
            item_id: format!("read-{id}"),
            repository_path: path.into(),
            start_line: 1,
            end_line: 1,
            content: "x\n".into(),
            truncated: false,
            has_more: Some(false),
            next_start_line: None,
        }
    }

    fn named(names: &[&str]) -> Vec<PluginSelection> {
        names
            .iter()
            .map(|n| PluginSelection {
                name: n.to_string(),
                args: Value::Object(Default::default()),
            })
            .collect()
    }

    /// (plugin, dir, item ids) of each execution, and diagnostic codes.
    fn summary(plan: &Plan) -> (Vec<String>, Vec<&'static str>) {
        let runs = plan
            .executions
            .iter()
            .map(|e| {
                format!(
                    "{}@{}:{}",
                    e.plugin.name,
                    e.plugin.dir,
                    e.items
                        .iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .collect();
        (
            runs,
            plan.diagnostics.iter().map(|d| d.code.as_str()).collect(),
        )
    }

    const ON: &str = r#","operations":["read","read_many"],"default_enabled":true"#;
    const OFF_CHILD: &str = r#","operations":["read","read_many"],"default_enabled":false"#;
    const STRING_TRUE: &str = r#","operations":["read","read_many"],"default_enabled":"true""#;
    const READ_ONLY: &str = r#","operations":["read"],"default_enabled":true"#;

    /// One row of the selection table: (artifacts, connection, call, operation, disabled,
    /// expected runs, expected diagnostic codes).
    type Case = (
        &'static [(&'static str, &'static str)],
        ConnectionPlugins,
        Option<Vec<PluginSelection>>,
        &'static str,
        bool,
        &'static [&'static str],
        &'static [&'static str],
    );

    /// W-8 automatic selection and W-5 overrides.
    fn automatic_cases() -> Vec<Case> {
        vec![
            // W-8 automatic: default-enabled, declaring the operation, by name ascending.
            (
                &[("b.sourcegraph.wasm", ON), ("a.sourcegraph.wasm", ON)],
                ConnectionPlugins::Auto,
                None,
                "read_many",
                false,
                &["a@:0,1,2", "b@:0,1,2"],
                &[],
            ),
            (
                &[("a.sourcegraph.wasm", STRING_TRUE)],
                ConnectionPlugins::Auto,
                None,
                "read",
                false,
                &[],
                &[],
            ),
            (
                &[("a.sourcegraph.wasm", READ_ONLY)],
                ConnectionPlugins::Auto,
                None,
                "read_many",
                false,
                &[],
                &[],
            ),
            // W-5: a child overrides its parent, also switching the default off.
            (
                &[("a.sourcegraph.wasm", ON), ("docs/a.sourcegraph.wasm", ON)],
                ConnectionPlugins::Auto,
                None,
                "read",
                false,
                &["a@:1", "a@docs:0,2"],
                &[],
            ),
            (
                &[
                    ("a.sourcegraph.wasm", ON),
                    ("docs/sub/a.sourcegraph.wasm", OFF_CHILD),
                ],
                ConnectionPlugins::Auto,
                None,
                "read",
                false,
                &["a@:0,1"],
                &[],
            ),
        ]
    }

    /// W-9 connection lists and W-10 call lists, and a connection switched off.
    fn listed_cases() -> Vec<Case> {
        vec![
            // W-9 connection list: only those, in the list's order.
            (
                &[("a.sourcegraph.wasm", ON), ("b.sourcegraph.wasm", ON)],
                ConnectionPlugins::Named(vec!["b".into()]),
                None,
                "read",
                false,
                &["b@:0,1,2"],
                &[],
            ),
            (
                &[("a.sourcegraph.wasm", OFF_CHILD)],
                ConnectionPlugins::Named(vec!["a".into()]),
                None,
                "read",
                false,
                &["a@:0,1,2"],
                &[],
            ),
            // W-10 call list overrides connection and defaults; [] is none.
            (
                &[("a.sourcegraph.wasm", ON), ("b.sourcegraph.wasm", ON)],
                ConnectionPlugins::Named(vec!["a".into()]),
                Some(named(&["b", "a"])),
                "read",
                false,
                &["b@:0,1,2", "a@:0,1,2"],
                &[],
            ),
            (
                &[("a.sourcegraph.wasm", ON)],
                ConnectionPlugins::Auto,
                Some(vec![]),
                "read",
                false,
                &[],
                &[],
            ),
            // Connection off wins over the call; a named call is diagnosed.
            (
                &[("a.sourcegraph.wasm", ON)],
                ConnectionPlugins::Off,
                Some(named(&["a"])),
                "read",
                false,
                &[],
                &["PLUGIN_DISABLED"],
            ),
            (
                &[("a.sourcegraph.wasm", ON)],
                ConnectionPlugins::Off,
                None,
                "read",
                false,
                &[],
                &[],
            ),
        ]
    }

    /// W-11 host switch, W-12 refusals and W-4 broken artifacts.
    fn refused_cases() -> Vec<Case> {
        vec![
            // W-11 host switch.
            (
                &[("a.sourcegraph.wasm", ON)],
                ConnectionPlugins::Auto,
                None,
                "read",
                true,
                &[],
                &[],
            ),
            (
                &[("a.sourcegraph.wasm", ON)],
                ConnectionPlugins::Auto,
                Some(named(&["a"])),
                "read",
                true,
                &[],
                &["PLUGIN_DISABLED"],
            ),
            // W-12: not found, missing operation.
            (
                &[("a.sourcegraph.wasm", ON)],
                ConnectionPlugins::Auto,
                Some(named(&["zzz"])),
                "read",
                false,
                &[],
                &["PLUGIN_NOT_FOUND"],
            ),
            (
                &[("a.sourcegraph.wasm", READ_ONLY)],
                ConnectionPlugins::Auto,
                Some(named(&["a"])),
                "read_many",
                false,
                &[],
                &["PLUGIN_OPERATION"],
            ),
            // A broken artifact in scope is diagnosed, never run (W-4).
            (
                &[(
                    "docs/a.sourcegraph.wasm",
                    r#","operations":["read"],"abi_version":1"#,
                )],
                ConnectionPlugins::Auto,
                None,
                "read",
                false,
                &[],
                &["PLUGIN_ABI"],
            ),
        ]
    }

    /// W-8..W-12 and W-5 as one table (the rows of the `*_cases` functions, in order).
    #[test]
    fn w8_w12_selection_table() {
        let items = [
            item(0, "docs/a.md"),
            item(1, "src/b.rs"),
            item(2, "docs/sub/c.md"),
        ];
        let cases = [automatic_cases(), listed_cases(), refused_cases()].concat();
        for (index, (artifacts, connection, call, operation, disabled, runs, codes)) in
            cases.into_iter().enumerate()
        {
            let plan = plan(
                &catalog(artifacts),
                &connection,
                call.as_deref(),
                operation,
                disabled,
                &items,
            );
            let (got_runs, got_codes) = summary(&plan);
            assert_eq!(
                (got_runs.as_slice(), got_codes.as_slice()),
                (runs_owned(runs).as_slice(), codes),
                "case {index}"
            );
        }
    }

    fn runs_owned(runs: &[&str]) -> Vec<String> {
        runs.iter().map(|s| s.to_string()).collect()
    }

    /// W-13..W-15: paths relative to the plugin directory, `root` the directory, ids kept.
    #[test]
    fn w13_w15_input_is_relative_to_the_plugin_directory() {
        let catalog = catalog(&[("packages/docs/kb/a.sourcegraph.wasm", ON)]);
        let items = [
            item(0, "packages/docs/kb/x.md"),
            item(3, "packages/docs/kb/deep/y.md"),
        ];
        let plan = plan(
            &catalog,
            &ConnectionPlugins::Auto,
            None,
            "read_many",
            false,
            &items,
        );
        let input: Value = serde_json::from_slice(&plan.executions[0].input(
            "read_many",
            "acme/mono",
            "c0ffee",
            &items,
        ))
        .unwrap();
        assert_eq!(input["abi_version"], 2);
        assert_eq!(input["root"], "packages/docs/kb");
        assert_eq!(input["args"], serde_json::json!({}));
        assert_eq!(input["files"][0]["path"], "x.md");
        assert_eq!(input["files"][1]["path"], "deep/y.md");
        assert_eq!(input["files"][1]["item_id"], "read-3");
        assert_eq!(
            input["files"][1]["repository_path"],
            "packages/docs/kb/deep/y.md"
        );
        assert_eq!(input["files"][0]["has_more"], false);
    }

    /// W-20: `"item_id": null` is a wrong type, diagnosed and dropped; only an absent key
    /// makes a whole-batch attachment. W-16: a JSON array is not the output shape.
    #[test]
    fn w20_null_item_id_is_dropped_not_whole_batch() {
        let catalog = catalog(&[("a.sourcegraph.wasm", ON)]);
        let items = [item(0, "x.md")];
        let plan = plan(
            &catalog,
            &ConnectionPlugins::Auto,
            None,
            "read",
            false,
            &items,
        );
        let mut out = Attachments::default();
        out.absorb(
            &plan.executions[0],
            &items,
            r#"{"attachments":[{"item_id":null,"text":"null id"},{"text":"whole"},{"item_id":"read-0","text":"mine"}]}"#,
        );
        assert_eq!(out.whole, ["whole"], "null never means whole-batch");
        assert_eq!(out.for_item("read-0").collect::<Vec<_>>(), ["mine"]);
        assert_eq!(out.diagnostics.len(), 1, "{:?}", out.diagnostics);
        assert_eq!(out.diagnostics[0].code, Code::Attachment);
        assert!(
            out.diagnostics[0].message.contains("non-string `item_id`"),
            "{}",
            out.diagnostics[0]
        );

        let mut array = Attachments::default();
        array.absorb(&plan.executions[0], &items, "[]");
        assert!(array.whole.is_empty() && array.per_item.is_empty());
        assert_eq!(array.diagnostics[0].code, Code::Output);
    }

    /// W-19: plugin roots are ordered segment by segment, bytewise, the root first: `a/b`
    /// comes before `a-b` (a plain string comparison would put `-` before `/`).
    #[test]
    fn w19_root_order_is_segment_wise() {
        let catalog = catalog(&[
            ("a-b/p.sourcegraph.wasm", ON),
            ("a/b/p.sourcegraph.wasm", ON),
            ("p.sourcegraph.wasm", ON),
            ("a/p.sourcegraph.wasm", ON),
        ]);
        let items = [
            item(0, "a-b/x.md"),
            item(1, "a/b/y.md"),
            item(2, "z.md"),
            item(3, "a/w.md"),
        ];
        let plan = plan(
            &catalog,
            &ConnectionPlugins::Auto,
            None,
            "read_many",
            false,
            &items,
        );
        assert_eq!(summary(&plan).0, ["p@:2", "p@a:3", "p@a/b:1", "p@a-b:0"]);
    }

    /// W-17..W-21: placement, bad attachments dropped alone, the 2 MiB cap omits whole.
    #[test]
    fn w17_w21_attachments() {
        let catalog = catalog(&[("a.sourcegraph.wasm", ON), ("docs/a.sourcegraph.wasm", ON)]);
        let items = [item(0, "x.md"), item(1, "docs/y.md")];
        let plan = plan(
            &catalog,
            &ConnectionPlugins::Auto,
            None,
            "read_many",
            false,
            &items,
        );
        let (root, docs) = (&plan.executions[0], &plan.executions[1]);
        let mut out = Attachments::default();
        out.absorb(root, &items, r#"{"attachments":[{"item_id":"read-0","text":"one"},{"text":"batch"},{"item_id":"read-1","text":"foreign"},{"item_id":7,"text":"x"},{"item_id":"read-0","text":3},{"item_id":"read-9","text":"unknown"}]}"#);
        out.absorb(
            docs,
            &items,
            r#"{"attachments":[{"item_id":"read-1","text":"two"}]}"#,
        );
        out.absorb(docs, &items, "not json");
        out.absorb(docs, &items, r#"{"attachments":{}}"#);
        assert_eq!(out.for_item("read-0").collect::<Vec<_>>(), ["one"]);
        assert_eq!(out.for_item("read-1").collect::<Vec<_>>(), ["two"]);
        assert_eq!(out.whole, ["batch"]);
        let codes: Vec<&str> = out.diagnostics.iter().map(|d| d.code.as_str()).collect();
        assert_eq!(
            codes,
            [
                "PLUGIN_ATTACHMENT",
                "PLUGIN_ATTACHMENT",
                "PLUGIN_ATTACHMENT",
                "PLUGIN_ATTACHMENT",
                "PLUGIN_OUTPUT",
                "PLUGIN_OUTPUT"
            ]
        );

        let big = "x".repeat(ATTACHMENT_CAP - 10);
        let mut capped = Attachments::default();
        capped.absorb(root, &items, &serde_json::json!({"attachments":[{"text": big}, {"text": "0123456789A"}, {"text": "fits"}]}).to_string());
        assert_eq!(
            capped.whole.len(),
            2,
            "the crossing attachment is omitted whole; a later one that fits stays"
        );
        assert_eq!(capped.whole[1], "fits");
        assert_eq!(capped.diagnostics[0].code, Code::Attachment);
    }
}
