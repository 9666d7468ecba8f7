//! The client configuration of the access page and of `csg serve`'s start-up banner (M-6):
//! for this deployment's own origin, the token always in a header, never in the URL.

use serde_json::json;

/// The name clients know this server by.
const SERVER_NAME: &str = "context-sourcegraph";

/// The Codex line that takes the token from the local environment (seed 000).
const BEARER_LINE: &str = "bearer_token_env_var = \"SOURCEGRAPH_API_TOKEN\"";

/// Ready-to-paste client configurations for one origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// `<origin>/sourcegraph/mcp?plugins=auto`.
    pub url: String,
    /// `{"mcpServers": {"context-sourcegraph": {"type": "http", "url": …}}}`.
    pub json: String,
    /// [`ClientConfig::json`] with `"headers": {"Authorization": "Bearer <your-api-token>"}`.
    pub json_with_token: String,
    /// The Codex `~/.codex/config.toml` table: `url`, then `bearer_token_env_var` under a
    /// note, commented out unless [`ClientConfig::token_required`].
    pub codex_toml: String,
    /// Every caller needs a token: the deployment has public read off.
    pub token_required: bool,
}

impl ClientConfig {
    /// The configurations for `origin` (`https://csg.example.com`, no trailing slash).
    /// `token_required`: the deployment has public read off, so the Codex table sets
    /// `bearer_token_env_var` instead of showing it commented out.
    pub fn for_origin(origin: &str, token_required: bool) -> Self {
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
        // Seed 000 shows the line commented out under this note: a client that sets it
        // without a token in its environment would fail against an open deployment.
        let token = if token_required {
            format!(
                "# This deployment requires authentication; the token comes from a local environment variable\n{BEARER_LINE}\n"
            )
        } else {
            format!(
                "# Set only when authentication is required; the token comes from a local environment variable\n# {BEARER_LINE}\n"
            )
        };
        ClientConfig {
            json: pretty(entry),
            json_with_token: pretty(with_token),
            codex_toml: format!("[mcp_servers.{SERVER_NAME}]\nurl = {quoted}\n{token}"),
            url,
            token_required,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// M-6: the shapes the access page and the banner hand out.
    #[test]
    fn m6_configs_point_at_the_origin() {
        let config = ClientConfig::for_origin("https://csg.example.com/", false);
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
        assert!(
            !config.url.contains("token"),
            "tokens never go into the URL"
        );
    }

    /// M-6, seed 000: with public read on, the Codex table carries the bearer line commented
    /// out under the note that it is set only when authentication is needed, the token from
    /// the local environment.
    #[test]
    fn m6_codex_toml_bearer_line_commented_out_with_public_read() {
        let config = ClientConfig::for_origin("https://csg.example.com", false);
        assert_eq!(
            config.codex_toml,
            "[mcp_servers.context-sourcegraph]\n\
             url = \"https://csg.example.com/sourcegraph/mcp?plugins=auto\"\n\
             # Set only when authentication is required; the token comes from a local environment variable\n\
             # bearer_token_env_var = \"SOURCEGRAPH_API_TOKEN\"\n"
        );
        assert!(!config.token_required);
    }

    /// M-6: with public read off every caller needs a token, so the line is active.
    #[test]
    fn m6_codex_toml_bearer_line_active_without_public_read() {
        let config = ClientConfig::for_origin("http://127.0.0.1:7878", true);
        assert_eq!(
            config.codex_toml,
            "[mcp_servers.context-sourcegraph]\n\
             url = \"http://127.0.0.1:7878/sourcegraph/mcp?plugins=auto\"\n\
             # This deployment requires authentication; the token comes from a local environment variable\n\
             bearer_token_env_var = \"SOURCEGRAPH_API_TOKEN\"\n"
        );
        assert!(config.token_required);
        // Every line is either the table, a key or a comment: valid TOML for Codex.
        assert!(config.codex_toml.lines().all(|line| {
            line.starts_with('[') || line.starts_with('#') || line.contains(" = ")
        }));
    }
}
