//! Settings: command-line flags > `CSG_*` environment > TOML file (`--config`) > defaults
//! (O-3, SPEC §9). Flags and environment are read by clap (each flag names its variable);
//! this module layers the file and the defaults under them.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default listen address (SPEC §9).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// What the optional TOML file may set. Every key is optional; unknown keys are refused so a
/// typo is loud.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub data_dir: Option<PathBuf>,
    pub listen: Option<String>,
    pub public_url: Option<String>,
    pub allowed_hosts: Option<Vec<String>>,
    pub allowed_origins: Option<Vec<String>>,
    pub retention_days: Option<u64>,
    pub sync_interval: Option<String>,
    pub read_budget_bytes: Option<usize>,
    pub batch_budget_bytes: Option<usize>,
    pub max_batch_items: Option<usize>,
    pub line_cap_bytes: Option<usize>,
    pub index_max_file_bytes: Option<u64>,
    pub log_format: Option<String>,
}

impl FileConfig {
    /// Reads `path`; a missing or malformed file is an error naming it.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
    }
}

/// The data directory when nothing sets it: `$XDG_DATA_HOME/csg`, else `~/.local/share/csg`.
pub fn default_data_dir() -> Result<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("csg"));
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .context("neither XDG_DATA_HOME nor HOME is set; pass --data-dir or set CSG_DATA_DIR")?;
    Ok(PathBuf::from(home).join(".local/share/csg"))
}

/// Parses a duration such as `60s`, `500ms`, `2m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: u64 = number
        .parse()
        .with_context(|| format!("invalid duration `{text}`: use forms like 500ms, 10s, 2m, 1h"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(value),
        "s" | "" => Duration::from_secs(value),
        "m" => Duration::from_secs(value * 60),
        "h" => Duration::from_secs(value * 3600),
        _ => bail!("invalid duration `{text}`: use forms like 500ms, 10s, 2m, 1h"),
    })
}

/// Parses a listen address.
pub fn parse_listen(text: &str) -> Result<SocketAddr> {
    text.parse().with_context(|| {
        format!("invalid listen address `{text}`: use IP:PORT such as 127.0.0.1:7878")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn o3_durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn o3_file_config_refuses_unknown_keys() {
        assert!(toml::from_str::<FileConfig>("listen = \"127.0.0.1:1\"").is_ok());
        let error = toml::from_str::<FileConfig>("lissen = \"x\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("lissen"), "{error}");
    }
}
