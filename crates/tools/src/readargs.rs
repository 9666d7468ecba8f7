//! The argument shapes `read` and `read_many` share: a file range and a plugin selection.

use crate::tool::{Face, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

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

/// One selected repository plugin (W-10).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PluginArg {
    /// The plugin's name (as `availability` with `include_plugins: true` lists it).
    pub name: String,
    /// Business arguments the plugin itself defines; opaque to the server. Default `{}`.
    #[serde(default)]
    pub args: Option<serde_json::Map<String, Value>>,
}

impl From<PluginArg> for service::PluginSelection {
    fn from(arg: PluginArg) -> Self {
        Self {
            name: arg.name,
            args: Value::Object(arg.args.unwrap_or_default()),
        }
    }
}

/// A call's `plugins` argument for `face`, keeping "not given" apart from `[]` (W-10). The
/// JSON API never runs plugins: a selection there is refused rather than ignored.
pub(crate) fn plugin_selections(
    plugins: Option<Vec<PluginArg>>,
    face: Face,
) -> Result<Option<Vec<service::PluginSelection>>, ToolError> {
    match (face, plugins) {
        (Face::Api, Some(list)) if !list.is_empty() => Err(ToolError::Arguments(
            "invalid arguments: the JSON API never runs repository plugins (R-6); leave \
             `plugins` out, or call the tool over MCP to use them"
                .into(),
        )),
        (Face::Api, _) => Ok(None),
        (Face::Mcp, plugins) => Ok(plugins.map(|list| list.into_iter().map(Into::into).collect())),
    }
}
