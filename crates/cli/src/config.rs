//! Settings: command-line flags > `CSG_*` environment > TOML file (`--config`) > defaults
//! (O-3, SPEC §9). Flags and environment are read by clap (each flag names its variable);
//! this module layers the file and the defaults under them.

use anyhow::{Context, Result};
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
    pub blob_cache_bytes: Option<usize>,
    pub max_searches: Option<usize>,
    pub shutdown_grace: Option<String>,
    pub log_format: Option<String>,
    pub public_read: Option<bool>,
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

/// One setting as the user can spell it, for error messages: the flag, its environment
/// variable and its TOML key.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub flag: &'static str,
    pub env: &'static str,
    pub key: &'static str,
}

impl Setting {
    /// The setting named `--flag`: env `CSG_FLAG`, TOML key `flag` (dashes as underscores).
    pub const fn new(flag: &'static str, env: &'static str, key: &'static str) -> Self {
        Self { flag, env, key }
    }

    fn refuse(&self, value: impl std::fmt::Display, allowed: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "invalid {} `{value}` (also {} or `{}` in the config file): {allowed}",
            self.flag,
            self.env,
            self.key
        )
    }

    /// `value` if it lies in `min..=max`, else an error naming the setting and the range.
    pub fn in_range<T>(&self, value: T, min: T, max: T) -> Result<T>
    where
        T: PartialOrd + std::fmt::Display + Copy,
    {
        if value < min || value > max {
            return Err(self.refuse(value, &format!("use a whole number from {min} to {max}")));
        }
        Ok(value)
    }

    /// Parses a duration (`500ms`, `10s`, `2m`, `1h`; the syntax `SOURCEGRAPH_PLUGINS_TIMEOUT`
    /// uses too) that must lie in `min..=max`.
    pub fn duration(&self, text: &str, min: Duration, max: Duration) -> Result<Duration> {
        let allowed = format!(
            "use a duration such as 500ms, 10s, 2m or 1h, from {} to {}",
            show(min),
            show(max)
        );
        match wasmplugin::parse_duration(text) {
            Some(value) if value >= min && value <= max => Ok(value),
            _ => Err(self.refuse(text, &allowed)),
        }
    }
}

/// A duration as the settings spell it.
fn show(duration: Duration) -> String {
    let ms = duration.as_millis();
    match ms {
        ms if ms % 3_600_000 == 0 && ms > 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 && ms > 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
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
        let s = Setting::new("--sync-interval", "CSG_SYNC_INTERVAL", "sync_interval");
        let (min, max) = (Duration::from_millis(1), Duration::from_secs(86_400));
        assert_eq!(
            s.duration("500ms", min, max).unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            s.duration("2m", min, max).unwrap(),
            Duration::from_secs(120)
        );
        for bad in ["ten", "5d", "0s", "25h"] {
            let error = s.duration(bad, min, max).unwrap_err().to_string();
            assert!(
                error.contains("--sync-interval") && error.contains("from 1ms to 24h"),
                "{error}"
            );
        }
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
