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

/// What identifies a hit of `on_search_results`: a returned hit must carry these unchanged.
pub const SEARCH_HIT_FIELDS: [&str; 5] = ["repo", "commit", "path", "line", "snippet"];
/// The one key a returned search hit may add.
pub const SEARCH_HIT_NOTE: &str = "note";
/// What `on_source_file` may return: `skip` alone, or `text` and/or `language`.
pub const SOURCE_FILE_FIELDS: [&str; 3] = ["skip", "text", "language"];

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

    /// Its position in [`Hook::ALL`].
    pub(crate) fn ordinal(self) -> usize {
        // `ALL` lists the variants in declaration order (a unit test holds it to that).
        self as usize
    }

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

    /// The name of the function's one parameter in the reference (`plugin_api.py`).
    pub fn parameter(self) -> &'static str {
        match self {
            Hook::Startup => "info",
            Hook::ToolCall => "call",
            Hook::SearchResults | Hook::ReadResult => "result",
            Hook::SourceFile => "file",
        }
    }

    /// The keys of a hook's returned dict that the host applies (P-3, P-10); any other key
    /// makes the result invalid. `on_startup`'s result is ignored. `on_source_file` takes
    /// `skip` alone, or `text` and/or `language` ([`SOURCE_FILE_FIELDS`]).
    pub fn applied_fields(self) -> &'static [&'static str] {
        match self {
            Hook::Startup => &[],
            Hook::ToolCall => &["arguments"],
            Hook::SearchResults => &["hits"],
            Hook::ReadResult => &["notes"],
            Hook::SourceFile => &SOURCE_FILE_FIELDS,
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
            only_keys(out, hook.applied_fields())?;
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
            only_keys(out, hook.applied_fields())?;
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
            only_keys(out, hook.applied_fields())?;
            let notes = out.get("notes").ok_or("must return {\"notes\": [...]}")?;
            check_notes(notes)?;
            sets.push(("notes", notes.clone()));
            Ok(Change::Set(sets))
        }
        Hook::SourceFile => {
            let (skip_only, replace) = SOURCE_FILE_FIELDS.split_at(1);
            if let Some(skip) = out.get(skip_only[0]) {
                only_keys(out, skip_only)?;
                return match skip {
                    Value::Bool(true) => Ok(Change::Stop),
                    Value::Bool(false) => Ok(Change::Set(sets)),
                    other => Err(format!(
                        "\"skip\" must be True or False, not {}",
                        kind(other)
                    )),
                };
            }
            only_keys(out, replace)?;
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
    SEARCH_HIT_FIELDS.iter().all(|key| a.get(key) == b.get(key))
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
            if !SEARCH_HIT_FIELDS.contains(&key.as_str()) && key != SEARCH_HIT_NOTE {
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
        if let Some(note) = obj.get(SEARCH_HIT_NOTE) {
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

// ---- the hook reference (`plugin_api.py`, P-14) ----
//
// `assets/plugin_api.py` is committed text with generated blocks: a line `# <generated:NAME>`
// up to the line `# </generated:NAME>`. Everything between comes from the definitions above
// (the hooks, their classes, sample payloads and applied fields, the tables, the presetable
// tools, the versions); everything outside is hand-written prose and stays as it is. A test
// regenerates the blocks and fails when the committed file differs (`CSG_BLESS=1` rewrites it).

/// The generator of the reference's blocks. Only the test that keeps `plugin_api.py` in step
/// with this hook set needs it: the binary ships the committed file.
#[cfg(test)]
mod reference {
    use super::*;
    use std::fmt::Write as _;

    /// Widest line of a generated block, indentation included.
    const REFERENCE_WIDTH: usize = 96;

    /// Blocks of the reference another crate generates: `presets` lists the tools a
    /// `TOOL_PRESETS` entry may target, which the `tools` crate defines (its tests check the
    /// block against its table).
    const OWNED_ELSEWHERE: [&str; 1] = ["presets"];

    /// Every generated block the reference must have.
    pub(super) fn reference_sections() -> Vec<String> {
        let mut names = vec![
            "versions".to_owned(),
            "hooks".to_owned(),
            "presets".to_owned(),
        ];
        for hook in Hook::ALL {
            names.push(format!("payload:{}", hook.name()));
            names.push(format!("applied:{}", hook.name()));
        }
        names
    }

    /// `template` with every generated block filled from this hook set. `Err` names a block
    /// this hook set does not know or one without its end line.
    pub(super) fn render_reference(template: &str) -> Result<String, String> {
        let mut out = String::with_capacity(template.len() + 1024);
        let mut lines = template.split_inclusive('\n');
        while let Some(line) = lines.next() {
            out.push_str(line);
            let Some(name) = line
                .trim()
                .strip_prefix("# <generated:")
                .and_then(|rest| rest.strip_suffix('>'))
            else {
                continue;
            };
            let indent = &line[..line.len() - line.trim_start().len()];
            if OWNED_ELSEWHERE.contains(&name) {
                // Generated and checked by the crate that owns its source: kept as it is.
                continue;
            }
            let body = reference_section(name, indent.len())
                .ok_or_else(|| format!("unknown generated block <generated:{name}>"))?;
            for body_line in body.lines() {
                if !body_line.is_empty() {
                    out.push_str(indent);
                    out.push_str(body_line);
                }
                out.push('\n');
            }
            let end = format!("# </generated:{name}>");
            loop {
                match lines.next() {
                    Some(line) if line.trim() == end => {
                        out.push_str(line);
                        break;
                    }
                    Some(_) => {}
                    None => return Err(format!("<generated:{name}> has no line {end:?}")),
                }
            }
        }
        Ok(out)
    }

    /// The text of one generated block (without its indentation, which is `indent` wide).
    fn reference_section(name: &str, indent: usize) -> Option<String> {
        let width = REFERENCE_WIDTH.saturating_sub(indent);
        if let Some(hook) = name.strip_prefix("payload:").and_then(Hook::from_name) {
            let mut out = String::new();
            python_literal(&hook.sample_payload(), 0, 0, width, &mut out);
            return Some(out);
        }
        if let Some(hook) = name.strip_prefix("applied:").and_then(Hook::from_name) {
            return Some(wrap(&applied_sentence(hook), width, "", ""));
        }
        match name {
            "versions" => Some(format!(
                "HOST_CONTRACT_VERSION = {HOST_CONTRACT_VERSION}\nHOOKS_VERSION = {HOOKS_VERSION}\n\
                 PRODUCT = {}\n",
                quoted(PRODUCT)
            )),
            "hooks" => {
                let mut out = format!("Hooks of this server (HOOKS_VERSION {HOOKS_VERSION}):\n");
                for hook in Hook::ALL {
                    let class = match hook.class() {
                        HookClass::CallScoped => "call-scoped",
                        HookClass::DerivedState => "derived-state",
                    };
                    let applied = match hook.applied_fields() {
                        [] => "nothing (the result is ignored)".to_owned(),
                        fields => fields.join(", "),
                    };
                    let signature = format!("{}({})", hook.name(), hook.parameter());
                    let _ = writeln!(out, "  {signature:<27} {class:<14} applies: {applied}");
                }
                let tables = TABLES.join(", ");
                out.push_str(&wrap(
                    &format!(
                        "Tables: {tables}. Version pin: {REQUIRES} (HOST_CONTRACT_VERSION, \
                         HOOKS_VERSION, PRODUCT)."
                    ),
                    width,
                    "",
                    "  ",
                ));
                Some(out)
            }
            _ => None,
        }
    }

    /// What the reference says a hook's result may carry, from [`Hook::applied_fields`].
    fn applied_sentence(hook: Hook) -> String {
        let keys = |fields: &[&str]| {
            fields
                .iter()
                .map(|f| quoted(f))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match hook {
            Hook::Startup => "Applied keys: none; the return value is ignored.".to_owned(),
            Hook::SourceFile => {
                let (skip, replace) = SOURCE_FILE_FIELDS.split_at(1);
                format!(
                    "Applied keys: {} alone, or {} (either or both); any other key makes the result \
                     invalid.",
                    keys(skip),
                    keys(replace).replace(", ", " and ")
                )
            }
            Hook::SearchResults => format!(
                "Applied keys: {}; any other key makes the result invalid. Each hit keeps {} as \
                 given and may add {}: one line of at most {MAX_HIT_NOTE_CHARS} characters.",
                keys(hook.applied_fields()),
                keys(&SEARCH_HIT_FIELDS),
                quoted(SEARCH_HIT_NOTE)
            ),
            Hook::ReadResult => format!(
                "Applied keys: {}: at most {MAX_NOTES} str of at most {MAX_NOTE_BYTES} bytes each; \
                 any other key makes the result invalid.",
                keys(hook.applied_fields())
            ),
            Hook::ToolCall => format!(
                "Applied keys: {}; any other key makes the result invalid.",
                keys(hook.applied_fields())
            ),
        }
    }

    /// `text` as a Python string literal (JSON's escapes are Python's too).
    fn quoted(text: &str) -> String {
        serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
    }

    /// `value` as a Python literal on one line.
    fn python_compact(value: &Value) -> String {
        match value {
            Value::Null => "None".to_owned(),
            Value::Bool(true) => "True".to_owned(),
            Value::Bool(false) => "False".to_owned(),
            Value::Number(n) => n.to_string(),
            Value::String(s) => quoted(s),
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(python_compact).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Object(map) => {
                let items: Vec<String> = map
                    .iter()
                    .map(|(k, v)| format!("{}: {}", quoted(k), python_compact(v)))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
        }
    }

    /// `value` as a Python literal starting at `column`, nested lines indented from `indent`,
    /// broken into one item per line where it does not fit in `width`.
    pub(super) fn python_literal(
        value: &Value,
        column: usize,
        indent: usize,
        width: usize,
        out: &mut String,
    ) {
        let compact = python_compact(value);
        if column + compact.chars().count() <= width {
            out.push_str(&compact);
            return;
        }
        let pad = " ".repeat(indent + 4);
        match value {
            Value::Array(items) => {
                out.push_str("[\n");
                for item in items {
                    out.push_str(&pad);
                    python_literal(item, indent + 4, indent + 4, width, out);
                    out.push_str(",\n");
                }
            }
            Value::Object(map) => {
                out.push_str("{\n");
                for (key, item) in map {
                    let key = format!("{}: ", quoted(key));
                    out.push_str(&pad);
                    out.push_str(&key);
                    python_literal(item, indent + 4 + key.len(), indent + 4, width, out);
                    out.push_str(",\n");
                }
            }
            _ => {
                out.push_str(&compact);
                return;
            }
        }
        out.push_str(&" ".repeat(indent));
        out.push(if value.is_array() { ']' } else { '}' });
    }

    /// `text` in lines of at most `width` characters (a longer word stays whole), the first
    /// starting with `prefix`, the others with `hang`.
    fn wrap(text: &str, width: usize, prefix: &str, hang: &str) -> String {
        let mut out = String::new();
        let mut line = prefix.to_owned();
        let mut empty = true;
        for word in text.split_whitespace() {
            if !empty && line.chars().count() + 1 + word.chars().count() > width {
                out.push_str(&line);
                out.push('\n');
                line = hang.to_owned();
                empty = true;
            }
            if !empty {
                line.push(' ');
            }
            line.push_str(word);
            empty = false;
        }
        out.push_str(&line);
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::reference::{python_literal, reference_sections, render_reference};
    use super::*;

    #[test]
    fn ordinals_are_positions_in_all() {
        for (position, hook) in Hook::ALL.iter().enumerate() {
            assert_eq!(hook.ordinal(), position, "{hook:?}");
        }
    }

    fn class_name(hook: Hook) -> &'static str {
        match hook.class() {
            HookClass::CallScoped => "call-scoped",
            HookClass::DerivedState => "derived-state",
        }
    }

    /// P-14: `plugin_api.py` documents exactly this hook set: its generated blocks are what
    /// the definitions above give, each hook is there with its class, and there is no other.
    /// `CSG_BLESS=1 cargo test -p pyplugin --lib p14_plugin_api` rewrites the blocks instead
    /// (the hand-written prose around them stays).
    #[test]
    fn p14_plugin_api_is_generated_from_the_hook_set() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/plugin_api.py");
        let committed = std::fs::read_to_string(path).unwrap();
        let fresh = render_reference(&committed).unwrap();
        if std::env::var_os("CSG_BLESS").is_some() && fresh != committed {
            std::fs::write(path, &fresh).unwrap();
            return;
        }
        for name in reference_sections() {
            assert!(
                committed.contains(&format!("# <generated:{name}>\n")),
                "plugin_api.py has no block <generated:{name}>: add its begin and end lines \
                 where it belongs, then bless"
            );
        }
        for hook in Hook::ALL {
            let def = format!(
                "def {}({}):\n    r\"\"\"{}.",
                hook.name(),
                hook.parameter(),
                class_name(hook)
            );
            assert!(committed.contains(&def), "plugin_api.py lacks {def:?}");
        }
        for line in committed.lines() {
            if let Some(rest) = line.strip_prefix("def ") {
                let name = rest.split('(').next().unwrap_or(rest);
                assert!(
                    Hook::from_name(name).is_some(),
                    "plugin_api.py documents {name}, which is not a hook of this server"
                );
            }
        }
        assert!(committed.starts_with(&format!(
            "\"\"\"Server-plugin hook reference of csg (Context Source Graph), HOOKS_VERSION \
             {HOOKS_VERSION}."
        )));
        assert!(
            fresh == committed,
            "plugin_api.py has drifted from the hook set it documents; regenerate it with \
             `CSG_BLESS=1 cargo test -p pyplugin --lib p14_plugin_api` and review the diff"
        );
        assert_eq!(crate::PLUGIN_API, committed, "the binary ships this file");
    }

    /// P-14: regenerating is stable, keeps the text outside the blocks and refuses a block
    /// it does not know or one that does not end.
    #[test]
    fn p14_reference_blocks_are_replaced_and_prose_is_kept() {
        let template = "prose before\n  # <generated:versions>\n  stale\n  # </generated:versions>\nprose after\n";
        let once = render_reference(template).unwrap();
        assert_eq!(
            once,
            format!(
                "prose before\n  # <generated:versions>\n  HOST_CONTRACT_VERSION = \
                 {HOST_CONTRACT_VERSION}\n  HOOKS_VERSION = {HOOKS_VERSION}\n  PRODUCT = \
                 \"{PRODUCT}\"\n  # </generated:versions>\nprose after\n"
            )
        );
        assert_eq!(render_reference(&once).unwrap(), once);
        assert!(render_reference("# <generated:nope>\n# </generated:nope>\n").is_err());
        assert!(render_reference("# <generated:versions>\nno end\n").is_err());
        let mut payload = String::new();
        python_literal(
            &json!({"a": [true, null, 1.5, "x\ny"]}),
            0,
            0,
            80,
            &mut payload,
        );
        assert_eq!(payload, r#"{"a": [True, None, 1.5, "x\ny"]}"#);
        let mut broken = String::new();
        python_literal(&json!({"key": ["aaaa", "bbbb"]}), 0, 0, 12, &mut broken);
        assert_eq!(
            broken,
            "{\n    \"key\": [\n        \"aaaa\",\n        \"bbbb\",\n    ],\n}"
        );
    }

    /// P-14: `example.py` has every hook and table, commented out.
    #[test]
    fn p14_example_has_every_hook_and_table() {
        for hook in Hook::ALL {
            let def = format!("# def {}(", hook.name());
            assert!(crate::EXAMPLE.contains(&def), "example.py lacks {def:?}");
        }
        for table in TABLES.iter().chain([&REQUIRES]) {
            let line = format!("# {table} = ");
            assert!(crate::EXAMPLE.contains(&line), "example.py lacks {line:?}");
        }
    }

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
