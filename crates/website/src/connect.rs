//! The client configuration of the access page and of `csg serve`'s start-up banner (M-6):
//! for this deployment's own origin, the token always in a header, never in the URL.

use serde_json::json;

/// The name clients know this server by.
const SERVER_NAME: &str = "context-sourcegraph";

/// Ready-to-paste client configurations for one origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// `<origin>/sourcegraph/mcp?plugins=auto`.
    pub url: String,
    /// `{"mcpServers": {"context-sourcegraph": {"type": "http", "url": …}}}`.
    pub json: String,
    /// [`ClientConfig::json`] with `"headers": {"Authorization": "Bearer <your-api-token>"}`.
    pub json_with_token: String,
    /// The Codex `~/.codex/config.toml` table with `bearer_token_env_var`.
    pub codex_toml: String,
}

impl ClientConfig {
    /// The configurations for `origin` (`https://csg.example.com`, no trailing slash).
    pub fn for_origin(origin: &str) -> Self {
        let url = format!(
            "{}/sourcegraph/mcp?plugins=auto",
            origin.trim_end_matches('/')
        );
        let entry = json!({"type": "http", "url": url});
        let mut with_token = entry.clone();
        with_token["headers"] = json!({"Authorization": "Bearer <your-api-token>"});
        let pretty = |entry: serde_json::Value| {
            serde_json::to_string_pretty(&json!({"mcpServers": {SERVER_NAME: entry}}))
                .unwrap_or_default()
        };
        // A JSON string is a valid TOML basic string for everything a URL holds.
        let quoted = serde_json::Value::String(url.clone()).to_string();
        ClientConfig {
            json: pretty(entry),
            json_with_token: pretty(with_token),
            codex_toml: format!(
                "[mcp_servers.{SERVER_NAME}]\nurl = {quoted}\nbearer_token_env_var = \"SOURCEGRAPH_API_TOKEN\"\n"
            ),
            url,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// M-6: the shapes the access page and the banner hand out.
    #[test]
    fn m6_configs_point_at_the_origin() {
        let config = ClientConfig::for_origin("https://csg.example.com/");
        let url = "https://csg.example.com/sourcegraph/mcp?plugins=auto";
        assert_eq!(config.url, url);
        let json: serde_json::Value = serde_json::from_str(&config.json).unwrap();
        assert_eq!(
            json,
            json!({"mcpServers": {"context-sourcegraph": {"type": "http", "url": url}}})
        );
        let with_token: serde_json::Value = serde_json::from_str(&config.json_with_token).unwrap();
        assert_eq!(
            with_token["mcpServers"]["context-sourcegraph"]["headers"]["Authorization"],
            "Bearer <your-api-token>"
        );
        assert_eq!(
            config.codex_toml,
            format!(
                "[mcp_servers.context-sourcegraph]\nurl = \"{url}\"\nbearer_token_env_var = \"SOURCEGRAPH_API_TOKEN\"\n"
            )
        );
    }
}
