//! The reference texts generated from the table: the README's tools table and the list of
//! tools a `TOOL_PRESETS` entry may target in the server-plugin reference (`plugin_api.py`).
//! Tests hold the committed files to them; `CSG_BLESS=1 cargo test -p tools` rewrites the
//! generated blocks (the prose around them stays).

use crate::args::{Arguments, Limits};
use crate::table::TOOLS;
use crate::tool::ToolDef;
use serde_json::Value;

/// A tool's argument names: the required ones in declaration order, then the optional ones
/// in alphabetical order, each with `?`.
pub fn argument_list(schema: &Arguments) -> Vec<String> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Sorted here: the properties' own order depends on whether serde_json keeps insertion
    // order in this build, and generated text must not.
    let mut optional: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|properties| properties.keys())
        .filter(|name| !required.contains(&name.as_str()))
        .map(|name| format!("{name}?"))
        .collect();
    optional.sort_unstable();
    required
        .iter()
        .map(|name| (*name).to_owned())
        .chain(optional)
        .collect()
}

/// The HTTP methods of a tool's route `/sourcegraph/api/<name>`: GET and POST for a
/// read-only tool, POST only otherwise.
pub fn http_methods(tool: &dyn ToolDef) -> &'static [&'static str] {
    if tool.annotations().read_only {
        &["GET", "POST"]
    } else {
        &["POST"]
    }
}

/// The README's tools table (Markdown), one row per tool of [`TOOLS`].
pub fn readme_tools_table(limits: &Limits) -> String {
    let mut out = String::from(
        "| tool | what it does | arguments (`?`: optional) | JSON API | needs | budget |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for tool in TOOLS {
        let arguments = argument_list(&tool.input_schema(limits));
        let arguments = if arguments.is_empty() {
            "—".to_owned()
        } else {
            arguments
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| `{name}` | {title} | {arguments} | `{methods} /sourcegraph/api/{name}` | {needs} | {budget} |\n",
            name = tool.name(),
            title = tool.title(),
            methods = http_methods(*tool).join("/"),
            needs = tool.capability().name(),
            budget = tool.cost().summary(),
        ));
    }
    out
}

/// The `presets` block of `plugin_api.py`: each tool a preset may target with its arguments,
/// as commented lines.
pub fn plugin_api_presets(limits: &Limits) -> String {
    let mut out = String::new();
    for tool in TOOLS.iter().filter(|tool| tool.presetable()) {
        let names = argument_list(&tool.input_schema(limits));
        let names = if names.is_empty() {
            "(no arguments)".to_owned()
        } else {
            names.join(", ")
        };
        out.push_str(&format!("#     {}: {names}\n", tool.name()));
    }
    out
}

/// `text` with the block between `begin` and `end` lines replaced by `body`; `None` when the
/// markers are missing.
pub fn replace_block(text: &str, begin: &str, end: &str, body: &str) -> Option<String> {
    let start = text.find(begin)? + begin.len();
    let start = start + text[start..].find('\n')? + 1;
    let stop = start + text[start..].find(end)?;
    let line_start = text[..stop].rfind('\n').map_or(0, |i| i + 1);
    Some(format!("{}{body}{}", &text[..start], &text[line_start..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{preset_targets, reserved_names};

    fn limits() -> Limits {
        Limits::new(&service::ServiceConfig::default())
    }

    /// Checks that the generated block of `path` (relative to the workspace) is `body`, or
    /// rewrites it under `CSG_BLESS=1`.
    fn holds(path: &str, begin: &str, end: &str, body: &str) {
        let path = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
        let committed = std::fs::read_to_string(&path).unwrap();
        let fresh = replace_block(&committed, begin, end, body)
            .unwrap_or_else(|| panic!("{path} has no block {begin} … {end}"));
        if std::env::var_os("CSG_BLESS").is_some() && fresh != committed {
            std::fs::write(&path, &fresh).unwrap();
            return;
        }
        assert!(
            fresh == committed,
            "{path}: the block {begin} differs from the tools table; run \
             `CSG_BLESS=1 cargo test -p tools` to regenerate it"
        );
    }

    /// Issue 30: the README lists exactly the tools of the table, with their arguments,
    /// routes and capabilities.
    #[test]
    fn the_readme_tools_table_is_generated_from_the_table() {
        holds(
            "README.md",
            "<!-- generated:tools -->",
            "<!-- /generated:tools -->",
            &readme_tools_table(&limits()),
        );
    }

    /// P-14, P-22: the server-plugin reference lists exactly the tools a preset may target,
    /// with the arguments their schemas have.
    #[test]
    fn the_plugin_api_preset_targets_are_generated_from_the_table() {
        holds(
            "crates/pyplugin/assets/plugin_api.py",
            "# <generated:presets>",
            "# </generated:presets>",
            &plugin_api_presets(&limits()),
        );
        let targets = preset_targets(&limits());
        assert!(targets.contains_key("search") && !targets.contains_key("reload_plugins"));
        assert!(reserved_names().any(|name| name == "prepare"));
    }

    #[test]
    fn blocks_are_replaced_between_their_marker_lines() {
        let text = "a\n<!-- b -->\nold\nold\n<!-- /b -->\nz\n";
        assert_eq!(
            replace_block(text, "<!-- b -->", "<!-- /b -->", "new\n").unwrap(),
            "a\n<!-- b -->\nnew\n<!-- /b -->\nz\n"
        );
        assert!(replace_block(text, "<!-- c -->", "<!-- /c -->", "").is_none());
    }
}
