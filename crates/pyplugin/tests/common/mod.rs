//! Plugin directories in temp dirs and hosts over them, for the host tests.
#![allow(dead_code)]

use pyplugin::{HostConfig, PluginHost, ToolCatalog};
use std::path::Path;
use std::time::Duration;

/// A temp plugins directory with `files` (name, source) written into it.
pub fn plugin_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, source) in files {
        write(dir.path(), name, source);
    }
    dir
}

pub fn write(dir: &Path, name: &str, source: &str) {
    std::fs::write(dir.join(name), source).unwrap();
}

/// The configuration of a dry run of `dir` with `hook_timeout`.
pub fn check_config(dir: std::path::PathBuf, hook_timeout: Duration) -> HostConfig {
    let mut config = HostConfig::new(dir);
    config.hook_timeout = hook_timeout;
    config
}

/// The tools a server would pass in, trimmed to what the tests use: `search` a preset may
/// target, and its name and `read`'s reserved.
pub fn catalog() -> ToolCatalog {
    ToolCatalog {
        preset_targets: [(
            "search".to_owned(),
            serde_json::json!({"type": "object", "additionalProperties": false, "properties": {
                "query": {"type": "string"},
                "path": {"type": ["string", "null"]}
            }}),
        )]
        .into(),
        reserved: ["read".to_owned(), "search".to_owned()].into(),
    }
}

/// A started host over `dir` with short limits (200 ms per hook, 300 ms grace).
pub fn host(dir: &Path) -> PluginHost {
    let mut config = HostConfig::new(dir.to_path_buf());
    config.tools = std::sync::Arc::new(catalog());
    config.hook_timeout = Duration::from_millis(200);
    config.wedge_grace = Duration::from_millis(300);
    PluginHost::start(config)
}
