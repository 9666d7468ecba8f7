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
    /// The server takes its identity provider's access tokens (`--oauth-issuer`): MCP
    /// clients can sign in by themselves from the URL alone. Off unless
    /// [`ClientConfig::with_oauth`] turns it on.
    pub oauth: bool,
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
            oauth: false,
        }
    }

    /// The same configurations, saying whether the server takes its identity provider's
    /// access tokens (`--oauth-issuer`): the access page then explains how each MCP client
    /// signs in by itself. The configurations themselves do not change.
    #[must_use]
    pub fn with_oauth(self, on: bool) -> Self {
        Self { oauth: on, ..self }
    }

    /// The name clients know this server by (`context-sourcegraph`), for the commands that
    /// add it.
    pub fn server_name(&self) -> &'static str {
        SERVER_NAME
    }

    /// Claude Code's command that adds this server without a token (it signs in through the
    /// identity provider when the server asks): `claude mcp add --transport http NAME 'URL'`.
    pub fn claude_add_command(&self) -> String {
        format!(
            "claude mcp add --transport http {SERVER_NAME} {}",
            shell_quoted(&self.url)
        )
    }

    /// Codex's command that adds this server without a token:
    /// `codex mcp add NAME --url 'URL'`.
    pub fn codex_add_command(&self) -> String {
        format!(
            "codex mcp add {SERVER_NAME} --url {}",
            shell_quoted(&self.url)
        )
    }

    /// Codex's command that signs in to this server through the identity provider.
    pub fn codex_login_command(&self) -> String {
        format!("codex mcp login {SERVER_NAME}")
    }
}

/// `text` as one POSIX shell word: in single quotes (a URL's `?` is a glob pattern to zsh),
/// each `'` written as `'\''`.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
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

    /// Issue 44: the access page explains the OAuth way to connect each client only when the
    /// server takes its identity provider's tokens, and still offers the token forms.
    #[test]
    fn issue44_the_oauth_section_appears_only_with_oauth() {
        let chrome = crate::Chrome::default();
        let plain = ClientConfig::for_origin("https://csg.example.com", true);
        assert!(!plain.oauth, "off unless asked for");
        let page = crate::connect_page(&chrome, &plain);
        assert!(!page.contains("oauth-clients"), "{page}");
        assert!(!page.contains("codex mcp login"), "{page}");
        assert!(page.contains("This server needs an API token"), "{page}");

        let oauth = plain.clone().with_oauth(true);
        assert_eq!(oauth.json, plain.json, "the configurations do not change");
        assert_eq!(oauth.codex_toml, plain.codex_toml);
        let page = crate::connect_page(&chrome, &oauth);
        assert!(page.contains("id=\"oauth-clients\""), "{page}");
        for client in ["Claude Code", "VS Code", "Cursor", "Codex"] {
            assert!(page.contains(client), "{client}: {page}");
        }
        assert!(
            page.contains(
                "claude mcp add --transport http context-sourcegraph \
                 'https://csg.example.com/sourcegraph/mcp?plugins=auto'"
            ),
            "{page}"
        );
        assert!(
            page.contains("codex mcp login context-sourcegraph"),
            "{page}"
        );
        // The token forms stay, for clients and scripts that do not sign in.
        assert!(page.contains("config-json-token"), "{page}");
        assert!(page.contains("Bearer &lt;your-api-token&gt;"), "{page}");
        assert!(!page.contains("This server needs an API token"), "{page}");

        let open = ClientConfig::for_origin("https://csg.example.com", false).with_oauth(true);
        let page = crate::connect_page(&chrome, &open);
        assert!(
            page.contains("Calls without a token read public repositories"),
            "{page}"
        );
        assert!(!oauth.clone().with_oauth(false).oauth);
    }

    /// The commands quote the URL for the shell, whatever it holds.
    #[test]
    fn issue44_commands_quote_the_url() {
        let config = ClientConfig::for_origin("https://csg.example.com/it's", false);
        assert_eq!(
            config.codex_add_command(),
            "codex mcp add context-sourcegraph --url \
             'https://csg.example.com/it'\\''s/sourcegraph/mcp?plugins=auto'"
        );
        assert_eq!(config.server_name(), "context-sourcegraph");
    }
}
