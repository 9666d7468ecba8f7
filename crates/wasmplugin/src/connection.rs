//! What a connection and a call say about repository plugins: the connection parameter
//! `plugins` (M-2), read from the endpoint URL of an MCP connection
//! (`/sourcegraph/mcp?plugins=…`) or `csg mcp --plugins …`, and the call's `plugins`
//! argument (W-10).

use std::fmt;

/// What a connection says about repository plugins.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ConnectionPlugins {
    /// Absent or `auto`: the plugins' own defaults apply.
    #[default]
    Auto,
    /// `off`: no plugins on this connection, whatever a tool call says.
    Off,
    /// `a,b`: when a call does not pass `plugins`, only these (in this order).
    Named(Vec<String>),
}

/// A `plugins` value that is not `auto`, `off` or a list of plugin names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidConnectionPlugins(String);

impl fmt::Display for InvalidConnectionPlugins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid connection parameter plugins={}: use `auto`, `off` or comma-separated plugin names such as `related-content,evidence-chain`",
            self.0
        )
    }
}

impl std::error::Error for InvalidConnectionPlugins {}

impl ConnectionPlugins {
    /// Parses the parameter's value; `None` (absent) is [`ConnectionPlugins::Auto`].
    /// Names are plugin artifact names: letters, digits, `.`, `_`, `-`; empty list
    /// entries (`a,,b`, a trailing comma) are ignored; duplicates keep their first place.
    pub fn parse(value: Option<&str>) -> Result<Self, InvalidConnectionPlugins> {
        let Some(raw) = value else {
            return Ok(Self::Auto);
        };
        let trimmed = raw.trim();
        match trimmed {
            "" | "auto" => return Ok(Self::Auto),
            "off" => return Ok(Self::Off),
            _ => {}
        }
        let shown = || {
            InvalidConnectionPlugins(
                raw.chars()
                    .take(100)
                    .collect::<String>()
                    .escape_debug()
                    .to_string(),
            )
        };
        let mut names: Vec<String> = Vec::new();
        for name in trimmed.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let valid = name.len() <= 100
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !valid || name == "auto" || name == "off" {
                return Err(shown());
            }
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
        if names.is_empty() {
            return Ok(Self::Auto);
        }
        Ok(Self::Named(names))
    }
}

/// One selected repository plugin with its business arguments (W-10): the call's
/// `plugins: [{name, args}]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PluginSelection {
    /// The plugin's name (its artifact name without `.sourcegraph.wasm`).
    pub name: String,
    /// Business arguments, opaque to the host; `{}` when absent.
    #[serde(default = "empty_object")]
    pub args: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// M-2: absent, `auto`, `off`, `a,b`, and refusals.
    #[test]
    fn m2_connection_plugins_parameter() {
        assert_eq!(ConnectionPlugins::parse(None), Ok(ConnectionPlugins::Auto));
        assert_eq!(
            ConnectionPlugins::parse(Some("auto")),
            Ok(ConnectionPlugins::Auto)
        );
        assert_eq!(
            ConnectionPlugins::parse(Some("")),
            Ok(ConnectionPlugins::Auto)
        );
        assert_eq!(
            ConnectionPlugins::parse(Some("off")),
            Ok(ConnectionPlugins::Off)
        );
        assert_eq!(
            ConnectionPlugins::parse(Some("related-content,evidence-chain")),
            Ok(ConnectionPlugins::Named(vec![
                "related-content".into(),
                "evidence-chain".into()
            ]))
        );
        assert_eq!(
            ConnectionPlugins::parse(Some("a, b,,a,")),
            Ok(ConnectionPlugins::Named(vec!["a".into(), "b".into()]))
        );
        assert!(ConnectionPlugins::parse(Some("a b")).is_err());
        assert!(ConnectionPlugins::parse(Some("../x")).is_err());
        assert!(ConnectionPlugins::parse(Some("a,off")).is_err());
        let message = ConnectionPlugins::parse(Some("<script>"))
            .unwrap_err()
            .to_string();
        assert!(message.contains("use `auto`, `off`"), "{message}");
    }
}
