//! This server's hook set (HOOKS_VERSION 1, SPEC P-20..P-22): the hook names and classes, the
//! declarative tables, the shape of every payload and what a hook may return.
//!
//! The host contract (loading, pipelines, isolation, epochs) is the same for every hook; only
//! this module knows what a hook's payload looks like, so `csg plugins check` and the running
//! server validate a hook's result with the very same rules.

use serde_json::{Map, Value, json};

/// Version of the host contract (seed 002: the rules shared by every server of the family).
pub const HOST_CONTRACT_VERSION: i64 = 1;
/// Version of this server's hook set.
pub const HOOKS_VERSION: i64 = 1;
/// The product name a plugin may pin with `REQUIRES`.
pub const PRODUCT: &str = "context-sourcegraph";

/// Largest operator note `on_read_result` may add (P-20).
pub const MAX_NOTE_BYTES: usize = 64 * 1024;
/// Most operator notes one answer carries.
pub const MAX_NOTES: usize = 16;
/// Longest `note` a search hit may carry, in characters.
pub const MAX_HIT_NOTE_CHARS: usize = 1024;

/// When a hook's effect lasts (P-7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookClass {
    /// Affects one call; an edit applies from the next call after a reload.
    CallScoped,
    /// Shapes the persisted search index; its source is part of the index fingerprint.
    DerivedState,
}

/// A hook of this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// `on_startup(info)`: once per epoch, at start and after each reload; result unused.
    Startup,
    /// `on_tool_call(call)`: may rewrite a tool's arguments.
    ToolCall,
    /// `on_search_results(result)`: may reorder, drop or annotate hits.
    SearchResults,
    /// `on_read_result(result)`: may add operator notes to a read's answer.
    ReadResult,
    /// `on_source_file(file)`: at index time, keep, skip or replace what is indexed.
    SourceFile,
}

impl Hook {
    /// Every hook, in the order of the reference.
    pub const ALL: [Hook; 5] = [
        Hook::Startup,
        Hook::ToolCall,
        Hook::SearchResults,
        Hook::ReadResult,
        Hook::SourceFile,
    ];

    /// The function name a plugin defines.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Startup => "on_startup",
            Hook::ToolCall => "on_tool_call",
            Hook::SearchResults => "on_search_results",
            Hook::ReadResult => "on_read_result",
            Hook::SourceFile => "on_source_file",
        }
    }

    /// The hook of that function name.
    pub fn from_name(name: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|hook| hook.name() == name)
    }

    /// Its class (P-7).
    pub fn class(self) -> HookClass {
        match self {
            Hook::SourceFile => HookClass::DerivedState,
            _ => HookClass::CallScoped,
        }
    }

    /// The documented sample payload `csg plugins check` runs the hook on (P-13).
    pub fn sample_payload(self) -> Value {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let caller = json!({"authenticated": false});
        match self {
            Hook::Startup => startup_payload(1, &["example.py".to_owned()], json!({}), json!({})),
            Hook::ToolCall => json!({
                "tool": "search",
                "arguments": {"query": "k8s deploy", "repo": "acme/infra"},
                "caller": caller,
            }),
            Hook::SearchResults => json!({
                "query": "kubernetes deploy",
                "caller": caller,
                "hits": [
                    {"repo": "acme/infra", "commit": commit, "path": "deploy/k8s.yaml",
                     "line": 12, "snippet": "kind: Deployment"},
                    {"repo": "acme/infra", "commit": commit, "path": "docs/deploy.md",
                     "line": 3, "snippet": "How we deploy to kubernetes"},
                ],
            }),
            Hook::ReadResult => json!({
                "tool": "read",
                "repo": "acme/kb",
                "commit": commit,
                "caller": caller,
                "items": [
                    {"path": "docs/a.md", "start_line": 1, "end_line": 2, "total_lines": 2,
                     "has_more": false, "text": "# Onboarding\nRead the handbook first.\n"},
                    {"path": "docs/missing.md", "error": "no such file at this commit"},
                ],
                "notes": [],
            }),
            Hook::SourceFile => json!({
                "repo": "acme/kb",
                "commit": commit,
                "path": "docs/a.md",
                "language": "markdown",
                "text": "# Onboarding\nRead the handbook first.\n",
            }),
        }
    }
}

/// The `on_search_results` payload in typed form: a search builds this instead of a
/// [`Value`] tree, because the host converts it to Python objects directly, and only a hook
/// that returns a result makes the tree exist at all. [`SearchPage::to_value`] is the payload
/// as a hook sees it: `{"query", "caller", "hits": [{"repo", "commit", "path", "line",
/// "snippet"}, ...]}`, the hits in page order.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage {
    /// The query as it ran (after `QUERY_ALIASES`).
    pub query: String,
    /// The caller, as P-11 lets plugins see it.
    pub caller: Value,
    /// The line hits, grouped by the repository and commit they were found in.
    pub groups: Vec<PageGroup>,
}

/// The line hits of one repository at one commit, in [`SearchPage`].
#[derive(Debug, Clone, PartialEq)]
pub struct PageGroup {
    /// The repository name.
    pub repo: String,
    /// The commit searched (40 hex digits).
    pub commit: String,
    /// Its line hits, in page order.
    pub lines: Vec<PageLine>,
}

/// One line hit of [`SearchPage`].
#[derive(Debug, Clone, PartialEq)]
pub struct PageLine {
    /// The file's path.
    pub path: String,
    /// The 1-based line number.
    pub line: u64,
    /// The line's text as the answer shows it.
    pub snippet: String,
}

impl SearchPage {
    /// How many line hits the page has.
    pub fn len(&self) -> usize {
        self.groups.iter().map(|g| g.lines.len()).sum()
    }

    /// Whether the page has no line hits.
    pub fn is_empty(&self) -> bool {
        self.groups.iter().all(|g| g.lines.is_empty())
    }

    /// The payload as plain data (what [`apply_in_place`] checks a hook's result against).
    pub fn to_value(&self) -> Value {
        let hits: Vec<Value> = self
            .groups
            .iter()
            .flat_map(|group| {
                group.lines.iter().map(|hit| {
                    json!({"repo": group.repo, "commit": group.commit, "path": hit.path,
                        "line": hit.line, "snippet": hit.snippet})
                })
            })
            .collect();
        json!({"query": self.query, "caller": self.caller, "hits": hits})
    }
}

/// The `on_startup` payload (P-11: `secrets` holds booleans only).
pub fn startup_payload(epoch: u64, files: &[String], settings: Value, secrets: Value) -> Value {
    json!({
        "product": PRODUCT,
        "version": env!("CARGO_PKG_VERSION"),
        "host_contract_version": HOST_CONTRACT_VERSION,
        "hooks_version": HOOKS_VERSION,
        "epoch": epoch,
        "plugin_files": files,
        "settings": settings,
        "secrets": secrets,
    })
}

/// The declarative tables (P-22) and `REQUIRES` (P-9): every UPPER_CASE name a plugin may use.
pub const TABLES: [&str; 3] = ["QUERY_ALIASES", "ALIASES", "TOOL_PRESETS"];
/// The pin of versions a plugin may declare.
pub const REQUIRES: &str = "REQUIRES";

/// Tools a `TOOL_PRESETS` entry may build on, with their argument names. `mcpserver` checks in
/// a test that these agree with its tool schemas.
pub const PRESETABLE_TOOLS: [(&str, &[&str]); 14] = [
    (
        "read",
        &[
            "repo",
            "revision",
            "path",
            "start_line",
            "end_line",
            "plugins",
        ],
    ),
    ("read_many", &["repo", "revision", "files", "plugins"]),
    (
        "search",
        &[
            "query",
            "repo",
            "path",
            "lang",
            "regex",
            "case_sensitive",
            "limit",
            "cursor",
        ],
    ),
    ("list", &["repo", "revision", "path", "depth"]),
    ("resolve", &["repo", "revision"]),
    ("discovery", &[]),
    ("availability", &["repo", "revision", "include_plugins"]),
    ("log", &["repo", "revision", "path", "limit", "cursor"]),
    ("commit", &["repo", "revision"]),
    ("diff", &["repo", "base", "head", "path", "cursor"]),
    (
        "blame",
        &["repo", "revision", "path", "start_line", "end_line"],
    ),
    ("outline", &["repo", "revision", "path", "cursor"]),
    (
        "definitions",
        &["symbol", "repo", "revision", "lang", "path", "limit"],
    ),
    (
        "references",
        &[
            "symbol", "repo", "revision", "lang", "path", "limit", "cursor",
        ],
    ),
];

/// Names a preset may not take: the built-in tools, including the plugin tools.
pub const RESERVED_TOOL_NAMES: [&str; 17] = [
    "read",
    "read_many",
    "search",
    "list",
    "resolve",
    "discovery",
    "availability",
    "log",
    "commit",
    "diff",
    "blame",
    "outline",
    "definitions",
    "references",
    "prepare",
    "reload_plugins",
    "plugin_status",
];

/// The argument names of a presetable tool.
pub fn preset_tool_arguments(tool: &str) -> Option<&'static [&'static str]> {
    PRESETABLE_TOOLS
        .iter()
        .find(|(name, _)| *name == tool)
        .map(|(_, args)| *args)
}

/// What one file's hook result means for the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The next file gets this payload.
    Continue(Value),
    /// `on_source_file` returned `{"skip": True}`: the pipeline ends, the file is not indexed.
    Stop(Value),
}

/// What one file's valid result changes.
enum Change {
    /// Replace these top-level keys of the payload.
    Set(Vec<(&'static str, Value)>),
    /// `on_source_file` skips the file.
    Stop,
}

/// Applies one file's returned `output` to the pipeline's `input` (P-3, P-6), or says why the
/// result is invalid (P-10: it is then discarded and the input goes on unchanged).
pub fn apply(hook: Hook, input: &Value, output: &Value) -> Result<Step, String> {
    let mut next = input.clone();
    Ok(match apply_in_place(hook, &mut next, output)? {
        Applied::Stop => Step::Stop(json!({"skip": true})),
        Applied::Changed | Applied::Same => Step::Continue(next),
    })
}

/// What [`apply_in_place`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The payload changed.
    Changed,
    /// The result was valid and changed nothing.
    Same,
    /// `on_source_file` skips the file.
    Stop,
}

/// [`apply`] on the pipeline's payload itself, so a long payload (a read's text) is not
/// copied per file. On `Err` the payload is left as it was.
pub fn apply_in_place(hook: Hook, current: &mut Value, output: &Value) -> Result<Applied, String> {
    let sets = match changes(hook, current, output)? {
        Change::Stop => return Ok(Applied::Stop),
        Change::Set(sets) => sets,
    };
    let Some(object) = current.as_object_mut() else {
        return Err("the payload is not a dict".to_owned());
    };
    let mut changed = false;
    for (key, value) in sets {
        if object.get(key) != Some(&value) {
            object.insert(key.to_owned(), value);
            changed = true;
        }
    }
    Ok(if changed {
        Applied::Changed
    } else {
        Applied::Same
    })
}

fn changes(hook: Hook, input: &Value, output: &Value) -> Result<Change, String> {
    let out = output
        .as_object()
        .ok_or_else(|| format!("must return None or a dict, not {}", kind(output)))?;
    if !input.is_object() {
        return Err("the payload is not a dict".to_owned());
    }
    let mut sets: Vec<(&'static str, Value)> = Vec::new();
    match hook {
        Hook::Startup => Ok(Change::Set(sets)),
        Hook::ToolCall => {
            only_keys(out, &["arguments"])?;
            let arguments = out
                .get("arguments")
                .ok_or("a rewrite must return {\"arguments\": {...}}")?;
            if !arguments.is_object() {
                return Err(format!(
                    "\"arguments\" must be a dict, not {}",
                    kind(arguments)
                ));
            }
            sets.push(("arguments", arguments.clone()));
            Ok(Change::Set(sets))
        }
        Hook::SearchResults => {
            only_keys(out, &["hits"])?;
            let hits = out.get("hits").ok_or("must return {\"hits\": [...]}")?;
            let given = input
                .get("hits")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let checked = check_hits(given, hits)?;
            sets.push(("hits", Value::Array(checked)));
            Ok(Change::Set(sets))
        }
        Hook::ReadResult => {
            only_keys(out, &["notes"])?;
            let notes = out.get("notes").ok_or("must return {\"notes\": [...]}")?;
            check_notes(notes)?;
            sets.push(("notes", notes.clone()));
            Ok(Change::Set(sets))
        }
        Hook::SourceFile => {
            if let Some(skip) = out.get("skip") {
                only_keys(out, &["skip"])?;
                return match skip {
                    Value::Bool(true) => Ok(Change::Stop),
                    Value::Bool(false) => Ok(Change::Set(sets)),
                    other => Err(format!(
                        "\"skip\" must be True or False, not {}",
                        kind(other)
                    )),
                };
            }
            only_keys(out, &["text", "language"])?;
            match out.get("text") {
                Some(Value::String(text)) => {
                    sets.push(("text", Value::String(text.clone())));
                }
                Some(other) => return Err(format!("\"text\" must be a str, not {}", kind(other))),
                None if !out.contains_key("language") => {
                    return Err(
                        "must return {\"skip\": True}, or \"text\" and/or \"language\"".into(),
                    );
                }
                None => {}
            }
            match out.get("language") {
                None => {}
                Some(Value::String(lang)) if !lang.trim().is_empty() && lang.len() <= 64 => {
                    sets.push(("language", Value::String(lang.clone())));
                }
                Some(Value::Null) => {
                    sets.push(("language", Value::Null));
                }
                Some(other) => {
                    return Err(format!(
                        "\"language\" must be a language name (a non-empty str of at most 64 bytes), not {}",
                        kind(other)
                    ));
                }
            }
            Ok(Change::Set(sets))
        }
    }
}

fn only_keys(out: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match out.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!(
            "returned an unknown key {key:?} (allowed: {})",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

/// A hit's identity: everything but its `note`.
fn same_hit(a: &Value, b: &Value) -> bool {
    ["repo", "commit", "path", "line", "snippet"]
        .iter()
        .all(|key| a.get(key) == b.get(key))
}

fn check_hits(given: &[Value], hits: &Value) -> Result<Vec<Value>, String> {
    let hits = hits
        .as_array()
        .ok_or_else(|| format!("\"hits\" must be a list, not {}", kind(hits)))?;
    let mut used = vec![false; given.len()];
    let mut out = Vec::with_capacity(hits.len());
    for (i, hit) in hits.iter().enumerate() {
        let obj = hit
            .as_object()
            .ok_or_else(|| format!("hit {i} must be a dict, not {}", kind(hit)))?;
        for key in obj.keys() {
            if !["repo", "commit", "path", "line", "snippet", "note"].contains(&key.as_str()) {
                return Err(format!("hit {i} has an unknown key {key:?}"));
            }
        }
        let typed = ["repo", "commit", "path", "snippet"]
            .iter()
            .all(|key| obj.get(*key).is_some_and(Value::is_string))
            && obj
                .get("line")
                .and_then(Value::as_u64)
                .is_some_and(|line| line >= 1);
        if !typed {
            return Err(format!(
                "hit {i} must have string repo, commit, path and snippet and an integer line >= 1"
            ));
        }
        let found = given
            .iter()
            .enumerate()
            .position(|(j, g)| !used[j] && same_hit(g, hit));
        let Some(j) = found else {
            return Err(format!(
                "hit {i} is not one of the hits the search returned (a hook may reorder, drop or \
                 annotate hits with \"note\", not add or change them)"
            ));
        };
        used[j] = true;
        if let Some(note) = obj.get("note") {
            match note {
                Value::String(text)
                    if text.chars().count() <= MAX_HIT_NOTE_CHARS
                        && !text.contains(['\n', '\r']) => {}
                Value::Null => {}
                _ => {
                    return Err(format!(
                        "hit {i}: \"note\" must be one line of at most {MAX_HIT_NOTE_CHARS} characters"
                    ));
                }
            }
        }
        out.push(hit.clone());
    }
    Ok(out)
}

fn check_notes(notes: &Value) -> Result<(), String> {
    let list = notes
        .as_array()
        .ok_or_else(|| format!("\"notes\" must be a list of str, not {}", kind(notes)))?;
    if list.len() > MAX_NOTES {
        return Err(format!(
            "{} notes is more than the {MAX_NOTES} an answer carries",
            list.len()
        ));
    }
    for (i, note) in list.iter().enumerate() {
        match note {
            Value::String(text) if text.len() <= MAX_NOTE_BYTES => {}
            Value::String(text) => {
                return Err(format!(
                    "note {i} is {} bytes, over the {MAX_NOTE_BYTES}-byte limit",
                    text.len()
                ));
            }
            other => return Err(format!("note {i} must be a str, not {}", kind(other))),
        }
    }
    Ok(())
}

/// The Python type name of a plain value, for messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "None",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p10_search_hits_may_be_reordered_dropped_and_noted_but_not_invented() {
        let input = Hook::SearchResults.sample_payload();
        let hits = input["hits"].as_array().unwrap().clone();
        let mut noted = hits[1].clone();
        noted["note"] = json!("owned by the platform team");
        let step = apply(
            Hook::SearchResults,
            &input,
            &json!({"hits": [noted.clone()]}),
        )
        .unwrap();
        assert_eq!(
            step,
            Step::Continue({
                let mut next = input.clone();
                next["hits"] = json!([noted]);
                next
            })
        );
        let mut invented = hits[0].clone();
        invented["line"] = json!(99);
        let err = apply(Hook::SearchResults, &input, &json!({"hits": [invented]})).unwrap_err();
        assert!(err.contains("not one of the hits"), "{err}");
        let mut changed = hits[0].clone();
        changed["snippet"] = json!("rm -rf /");
        assert!(apply(Hook::SearchResults, &input, &json!({"hits": [changed]})).is_err());
        let twice = json!({"hits": [hits[0].clone(), hits[0].clone()]});
        assert!(
            apply(Hook::SearchResults, &input, &twice).is_err(),
            "a hit used twice"
        );
        assert!(apply(Hook::SearchResults, &input, &json!({"hits": "x"})).is_err());
        assert!(apply(Hook::SearchResults, &input, &json!([1])).is_err());
    }

    #[test]
    fn p20_read_notes_are_bounded() {
        let input = Hook::ReadResult.sample_payload();
        assert!(apply(Hook::ReadResult, &input, &json!({"notes": ["ok"]})).is_ok());
        let big = "x".repeat(MAX_NOTE_BYTES + 1);
        assert!(apply(Hook::ReadResult, &input, &json!({"notes": [big]})).is_err());
        assert!(apply(Hook::ReadResult, &input, &json!({"notes": [1]})).is_err());
        let many: Vec<String> = (0..=MAX_NOTES).map(|i| i.to_string()).collect();
        assert!(apply(Hook::ReadResult, &input, &json!({"notes": many})).is_err());
        assert!(apply(Hook::ReadResult, &input, &json!({"body": "replaced"})).is_err());
    }

    #[test]
    fn p21_source_file_keep_skip_replace() {
        let input = Hook::SourceFile.sample_payload();
        assert_eq!(
            apply(Hook::SourceFile, &input, &json!({"skip": true})).unwrap(),
            Step::Stop(json!({"skip": true}))
        );
        let Step::Continue(next) = apply(
            Hook::SourceFile,
            &input,
            &json!({"text": "t", "language": "rust"}),
        )
        .unwrap() else {
            panic!("replace continues the pipeline")
        };
        assert_eq!(
            (next["text"].as_str(), next["language"].as_str()),
            (Some("t"), Some("rust"))
        );
        // The language alone: the text stays the file's.
        let Step::Continue(next) =
            apply(Hook::SourceFile, &input, &json!({"language": null})).unwrap()
        else {
            panic!("a language change continues the pipeline")
        };
        assert_eq!(
            (&next["text"], &next["language"]),
            (&input["text"], &Value::Null)
        );
        assert!(apply(Hook::SourceFile, &input, &json!({})).is_err());
        assert!(apply(Hook::SourceFile, &input, &json!({"language": ""})).is_err());
        assert!(apply(Hook::SourceFile, &input, &json!({"text": 3})).is_err());
        assert!(apply(Hook::SourceFile, &input, &json!({"skip": "yes"})).is_err());
    }

    #[test]
    fn p20_tool_call_rewrites_arguments_only() {
        let input = Hook::ToolCall.sample_payload();
        let Step::Continue(next) = apply(
            Hook::ToolCall,
            &input,
            &json!({"arguments": {"query": "x"}}),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(next["arguments"], json!({"query": "x"}));
        assert_eq!(next["tool"], input["tool"]);
        assert!(apply(Hook::ToolCall, &input, &json!({"tool": "read"})).is_err());
        assert!(apply(Hook::ToolCall, &input, &json!({"arguments": [1]})).is_err());
    }
}
