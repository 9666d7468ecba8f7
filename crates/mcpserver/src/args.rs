//! Tool arguments (R-1, R-4, S-5..S-7, SPEC §9) and their strict input schemas (M-3).
//!
//! Every argument struct denies unknown fields, which gives both halves of M-3 at once: serde
//! refuses an unknown argument (answered as JSON-RPC invalid params naming it) and schemars
//! writes `additionalProperties: false` into the advertised `inputSchema`. Old clients rely on
//! that refusal to learn that an argument such as `plugins` is not supported and fall back
//! once, so it must stay a protocol error, never a tool result.
//!
//! The doc comments on fields become the schema's property descriptions: they are what an
//! agent reads to fill the arguments in.

use rmcp::ErrorData;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;

use crate::server::Limits;

/// `read {repo, revision?, path, start_line?, end_line?, plugins?}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    /// Repository name `owner/name`, as `discovery` or `search` show it.
    pub repo: String,
    /// Full commit SHA (best: the `Commit` of an earlier answer or of a search hit), a
    /// unique short SHA (at least 7 hex digits), a branch or a tag. Omitted: the head of the
    /// default branch. The answer always names the full SHA it read.
    #[serde(default)]
    pub revision: Option<String>,
    /// Repository-relative file path, e.g. `docs/guide.md` (no leading `/`).
    pub path: String,
    /// First line to return, 1-based. Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Last line to return, inclusive. Default `start_line + {last_offset}`.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
    /// Repository plugins for this call: omit to use the connection's choice (the plugins'
    /// defaults with `?plugins=auto`), `[]` for none, or `[{"name": "...", "args": {...}}]`
    /// for exactly those. The connection setting `plugins=off` always wins.
    #[serde(default)]
    pub plugins: Option<Vec<PluginArg>>,
}

/// One entry of `read_many.files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileArg {
    /// Repository-relative file path.
    pub path: String,
    /// First line, 1-based. Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Last line, inclusive. Default `start_line + {last_offset}`.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
}

/// `read_many {repo, revision?, files, plugins?}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadManyArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// One revision for the whole batch: full SHA (best), unique short SHA, branch or tag.
    /// Omitted: the head of the default branch.
    #[serde(default)]
    pub revision: Option<String>,
    /// The ranges to read, answered one block each in this order (1 to {max_items} entries).
    /// Entries may repeat.
    #[schemars(length(min = 1))]
    pub files: Vec<FileArg>,
    /// Repository plugins for this call, as in `read`.
    #[serde(default)]
    pub plugins: Option<Vec<PluginArg>>,
}

/// One selected repository plugin (W-10).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PluginArg {
    /// The plugin's name (as `availability` with `include_plugins: true` lists it).
    pub name: String,
    /// Business arguments the plugin itself defines; opaque to the server. Default `{}`.
    #[serde(default)]
    pub args: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `search {query, repo?, path?, lang?, regex?, case_sensitive?, limit?, cursor?}` (S-1).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    /// Text to find (literal by default), 1 to 1000 bytes. A match never spans lines.
    pub query: String,
    /// Limit the search to one repository `owner/name`. Omitted: every repository you can
    /// read.
    #[serde(default)]
    pub repo: Option<String>,
    /// Only paths matching this glob, e.g. `docs/**/*.md` or `src/*.rs` (`*` stays inside one
    /// directory, `**` crosses them).
    #[serde(default)]
    pub path: Option<String>,
    /// Only files of this language, by extension: e.g. `rust`, `python`, `go`, `markdown`.
    #[serde(default)]
    pub lang: Option<String>,
    /// `true`: `query` is a regular expression in Rust `regex` syntax (no back-references, no
    /// look-around). Default false: literal text.
    #[serde(default)]
    pub regex: Option<bool>,
    /// Default false: case-insensitive.
    #[serde(default)]
    pub case_sensitive: Option<bool>,
    /// Hits per page, 1 to 1000. Default 50.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// The `NextCursor` of the previous answer, to get the next page of the same search.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `list {repo, revision?, path?, depth?}` (S-7).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Full SHA, unique short SHA, branch or tag. Omitted: the head of the default branch.
    #[serde(default)]
    pub revision: Option<String>,
    /// Directory to list, repository-relative. Omitted: the top of the repository (or of its
    /// registered path).
    #[serde(default)]
    pub path: Option<String>,
    /// Levels to descend, 1 (default: direct entries only) to 10.
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub depth: Option<u32>,
}

/// `log {repo, revision?, path?, limit?, cursor?}` (issue 12).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Where the log starts: full SHA, unique short SHA, branch or tag. Omitted: the head of
    /// the default branch.
    #[serde(default)]
    pub revision: Option<String>,
    /// Only commits that changed this file or directory (repository-relative).
    #[serde(default)]
    pub path: Option<String>,
    /// Commits per page: default 50, at most 500.
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
    /// The `NextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `commit {repo, revision}` (issue 12).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommitArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// The commit: full SHA (best: one a `log` listed), unique short SHA, branch or tag.
    pub revision: String,
}

/// `diff {repo, base, head, path?, cursor?}` (issue 12).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiffArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// The old side: full SHA (best), unique short SHA, branch or tag.
    pub base: String,
    /// The new side, in the same forms.
    pub head: String,
    /// Only files at or below this path (repository-relative).
    #[serde(default)]
    pub path: Option<String>,
    /// The `NextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `blame {repo, revision?, path, start_line?, end_line?}` (issue 12).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BlameArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Full SHA, unique short SHA, branch or tag. Omitted: the head of the default branch.
    #[serde(default)]
    pub revision: Option<String>,
    /// Repository-relative path of a text file.
    pub path: String,
    /// First line, 1-based. Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Last line, inclusive. Default `start_line + {last_offset}`.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
}

/// `outline {repo, revision?, path, cursor?}` (issue 12).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutlineArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Full SHA, unique short SHA, branch or tag. Omitted: the head of the default branch.
    #[serde(default)]
    pub revision: Option<String>,
    /// Repository-relative path of a source file.
    pub path: String,
    /// The `NextCursor` of the previous page of the same outline.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `definitions {repo?, revision?, symbol, lang?, path?, limit?}` (issue 12).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DefinitionsArgs {
    /// The exact name to look up, case-sensitive, e.g. `parse_args` (no spaces, at most 200
    /// bytes).
    pub symbol: String,
    /// One repository `owner/name`. Omitted: every repository you can read.
    #[serde(default)]
    pub repo: Option<String>,
    /// Only the indexed head can be asked (by branch, tag or SHA); needs repo. Omitted: the
    /// indexed head.
    #[serde(default)]
    pub revision: Option<String>,
    /// Only files of this language: e.g. `rust`, `python`, `go`, `typescript`.
    #[serde(default)]
    pub lang: Option<String>,
    /// Only paths matching this glob, e.g. `src/**/*.rs`.
    #[serde(default)]
    pub path: Option<String>,
    /// Most definitions to answer: default 50, at most 500.
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
}

/// `references {repo?, revision?, symbol, lang?, path?, limit?, cursor?}` (issue 12).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReferencesArgs {
    /// The exact name, case-sensitive; found where it stands as a whole word.
    pub symbol: String,
    /// One repository `owner/name`. Omitted: every repository you can read.
    #[serde(default)]
    pub repo: Option<String>,
    /// Only the indexed head can be asked (by branch, tag or SHA); needs repo.
    #[serde(default)]
    pub revision: Option<String>,
    /// Only files of this language.
    #[serde(default)]
    pub lang: Option<String>,
    /// Only paths matching this glob.
    #[serde(default)]
    pub path: Option<String>,
    /// Occurrences per page, 1 to 1000. Default 50.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// The `NextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `resolve {repo, revision}` (S-6).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResolveArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Branch, tag, full SHA or unique short SHA (at least 7 hex digits).
    pub revision: String,
}

/// `discovery {}` (S-5): no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiscoveryArgs {}

/// `availability {repo, revision?, include_plugins?}` (SPEC §9).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AvailabilityArgs {
    /// Repository name `owner/name`.
    pub repo: String,
    /// Full SHA, unique short SHA, branch or tag. Omitted: the head of the default branch.
    #[serde(default)]
    pub revision: Option<String>,
    /// Also list the repository plugins found at that commit (static discovery; nothing is
    /// run). Default false.
    #[serde(default)]
    pub include_plugins: Option<bool>,
}

impl From<PluginArg> for service::PluginSelection {
    fn from(arg: PluginArg) -> Self {
        Self {
            name: arg.name,
            args: serde_json::Value::Object(arg.args.unwrap_or_default()),
        }
    }
}

/// Converts a call's `plugins` argument, keeping "not given" apart from `[]` (W-10).
pub(crate) fn plugin_selections(
    plugins: Option<Vec<PluginArg>>,
) -> Option<Vec<service::PluginSelection>> {
    plugins.map(|list| list.into_iter().map(Into::into).collect())
}

/// Deserializes a tool's arguments, or answers JSON-RPC invalid params (-32602) naming the
/// tool and what was wrong with them (the unknown argument, the missing or mistyped field).
///
/// The message deliberately does not start with rmcp's "failed to deserialize parameters:"
/// prefix: rmcp turns errors with that prefix into `isError` tool results, and M-3 wants a
/// protocol error.
pub(crate) fn parse<T: DeserializeOwned>(
    tool: &str,
    arguments: Option<JsonObject>,
) -> Result<T, ErrorData> {
    let object = arguments.unwrap_or_default();
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|error| {
        let detail = error.to_string();
        // serde says "unknown field `x`"; to the caller these are arguments.
        let detail = detail
            .strip_prefix("unknown field")
            .map(|rest| format!("unknown argument{rest}"))
            .unwrap_or(detail);
        ErrorData::invalid_params(
            format!("invalid arguments for tool `{tool}`: {detail}"),
            None,
        )
    })
}

/// The strict input schema of `T`: JSON Schema 2020-12 with nested types inlined (some agent
/// clients do not follow `$ref`), `additionalProperties: false` from `deny_unknown_fields`,
/// and the struct's own title and description stripped as rmcp does (noise to the model).
/// The strict input schema of `T`, its property descriptions filled with `limits`.
pub(crate) fn input_schema<T: JsonSchema>(limits: &Limits) -> Arc<JsonObject> {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|settings| {
        settings.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match serde_json::to_value(schema) {
        Ok(serde_json::Value::Object(object)) => object,
        // A derived schema is always an object; should that ever change, advertise a schema
        // that still refuses unknown arguments rather than fail the whole tools/list.
        other => {
            tracing::error!(?other, "tool input schema is not a JSON object");
            let mut fallback = JsonObject::new();
            fallback.insert("type".into(), "object".into());
            fallback.insert("additionalProperties".into(), false.into());
            fallback
        }
    };
    object.remove("title");
    object.remove("description");
    object.remove("$schema");
    for value in object.values_mut() {
        fill_descriptions(value, limits);
    }
    Arc::new(object)
}

/// Writes the configured limits into every `description` below `value`.
fn fill_descriptions(value: &mut serde_json::Value, limits: &Limits) {
    match value {
        serde_json::Value::Object(object) => {
            for (key, child) in object.iter_mut() {
                match child {
                    serde_json::Value::String(text) if key == "description" => {
                        *text = limits.fill(text);
                    }
                    _ => fill_descriptions(child, limits),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                fill_descriptions(item, limits);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: serde_json::Value) -> Option<JsonObject> {
        match value {
            serde_json::Value::Object(object) => Some(object),
            _ => None,
        }
    }

    /// M-3: an unknown top-level argument is invalid params naming it.
    #[test]
    fn m3_unknown_argument_is_invalid_params_naming_it() {
        let error = parse::<ReadArgs>(
            "read",
            object(json!({"repo": "a/b", "path": "x", "bogus_arg": 1})),
        )
        .unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("`bogus_arg`"), "{}", error.message);
        assert!(
            error.message.contains("unknown argument"),
            "{}",
            error.message
        );
        assert!(
            !error
                .message
                .starts_with("failed to deserialize parameters:"),
            "{}",
            error.message
        );
    }

    /// M-3: nested objects are strict too, and discovery takes nothing.
    #[test]
    fn m3_nested_and_empty_argument_objects_are_strict() {
        let error = parse::<ReadManyArgs>(
            "read_many",
            object(json!({"repo": "a/b", "files": [{"path": "x", "line": 3}]})),
        )
        .unwrap_err();
        assert!(error.message.contains("`line`"), "{}", error.message);
        assert!(parse::<DiscoveryArgs>("discovery", None).is_ok());
        assert!(parse::<DiscoveryArgs>("discovery", object(json!({"x": 1}))).is_err());
    }

    /// W-10: `plugins` absent, `[]`, and a selection with default args.
    #[test]
    fn w10_plugins_argument_shapes() {
        let absent: ReadArgs = parse("read", object(json!({"repo": "a/b", "path": "x"}))).unwrap();
        assert!(plugin_selections(absent.plugins).is_none());
        let none: ReadArgs = parse(
            "read",
            object(json!({"repo": "a/b", "path": "x", "plugins": []})),
        )
        .unwrap();
        assert_eq!(plugin_selections(none.plugins), Some(vec![]));
        let named: ReadArgs = parse(
            "read",
            object(json!({"repo": "a/b", "path": "x", "plugins": [{"name": "related-content"}]})),
        )
        .unwrap();
        assert_eq!(
            plugin_selections(named.plugins),
            Some(vec![service::PluginSelection {
                name: "related-content".into(),
                args: json!({}),
            }])
        );
    }

    /// M-3: every schema refuses unknown properties, nested ones included, without `$ref`.
    #[test]
    fn m3_schemas_are_strict_and_inline() {
        let limits = Limits::new(&service::ServiceConfig::default());
        for schema in [
            input_schema::<ReadArgs>(&limits),
            input_schema::<ReadManyArgs>(&limits),
            input_schema::<ListArgs>(&limits),
            input_schema::<SearchArgs>(&limits),
            input_schema::<ResolveArgs>(&limits),
            input_schema::<OutlineArgs>(&limits),
            input_schema::<DefinitionsArgs>(&limits),
            input_schema::<ReferencesArgs>(&limits),
            input_schema::<DiscoveryArgs>(&limits),
            input_schema::<AvailabilityArgs>(&limits),
        ] {
            assert_eq!(schema.get("type"), Some(&json!("object")), "{schema:?}");
            assert_eq!(
                schema.get("additionalProperties"),
                Some(&json!(false)),
                "{schema:?}"
            );
            let text = serde_json::to_string(&*schema).unwrap();
            assert!(!text.contains("$ref"), "{text}");
        }
        let read_many = input_schema::<ReadManyArgs>(&limits);
        let files_item = &read_many["properties"]["files"]["items"];
        assert_eq!(files_item["additionalProperties"], json!(false));
        assert_eq!(read_many["required"], json!(["repo", "files"]));
    }
}
