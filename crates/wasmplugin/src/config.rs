//! Budgets and switches of the plugin host (W-26), read once at start-up from
//! `SOURCEGRAPH_PLUGINS_*`; tests build [`PluginConfig`] directly.

use std::time::Duration;

/// The environment prefix of every plugin setting (seed 000).
pub const ENV_PREFIX: &str = "SOURCEGRAPH_PLUGINS_";

/// Every budget of W-26, with the seed's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    /// `DISABLED`: enrichment off for the whole host (W-11).
    pub disabled: bool,
    /// `TIMEOUT`: the whole enrichment of one request, artifact reads and all plugins included.
    pub timeout: Duration,
    /// `MEMORY_MIB`: linear memory per instance.
    pub memory_mib: u64,
    /// `ARTIFACT_BYTES`: largest `.sourcegraph.wasm` that is run.
    pub artifact_bytes: u64,
    /// `METADATA_BYTES`: largest `sourcegraph.plugin.v1` section.
    pub metadata_bytes: u64,
    /// `FILE_BYTES`: largest file one host read returns.
    pub file_bytes: u64,
    /// `READ_BYTES`: bytes all host reads of one execution return.
    pub read_bytes: u64,
    /// `OUTPUT_BYTES`: largest raw output of one execution.
    pub output_bytes: u64,
    /// `READ_CALLS`: host reads per execution (`read_file` = 1, each path of `read_files` = 1).
    pub read_calls: u64,
    /// `CONCURRENCY`: executions running at once host-wide; a further one is PLUGIN_BUSY.
    pub concurrency: usize,
    /// `CACHE_ENTRIES`: compiled artifacts kept.
    pub cache_entries: usize,
    /// `IDLE_INSTANCES`: idle instances kept host-wide.
    pub idle_instances: usize,
}

impl Default for PluginConfig {
    fn default() -> Self {
        Self {
            disabled: false,
            timeout: Duration::from_secs(10),
            memory_mib: 256,
            artifact_bytes: 33_554_432,
            metadata_bytes: 262_144,
            file_bytes: 33_554_432,
            read_bytes: 134_217_728,
            output_bytes: 2_097_152,
            read_calls: 1024,
            concurrency: 8,
            cache_entries: 16,
            idle_instances: 8,
        }
    }
}

/// A setting that could not be parsed; names the variable and the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {ENV_PREFIX}{name}={value:?}: {expected}")]
pub struct ConfigError {
    pub name: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl PluginConfig {
    /// Reads `SOURCEGRAPH_PLUGINS_*` from the process environment over the defaults.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(format!("{ENV_PREFIX}{name}")).ok())
    }

    /// Reads settings through `lookup(suffix)` over the defaults (testable without touching
    /// the process environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        let number = |name: &'static str, into: &mut u64| -> Result<(), ConfigError> {
            if let Some(value) = lookup(name) {
                *into = value.trim().parse().map_err(|_| ConfigError {
                    name,
                    value,
                    expected: "a whole number",
                })?;
            }
            Ok(())
        };
        number("MEMORY_MIB", &mut config.memory_mib)?;
        number("ARTIFACT_BYTES", &mut config.artifact_bytes)?;
        number("METADATA_BYTES", &mut config.metadata_bytes)?;
        number("FILE_BYTES", &mut config.file_bytes)?;
        number("READ_BYTES", &mut config.read_bytes)?;
        number("OUTPUT_BYTES", &mut config.output_bytes)?;
        number("READ_CALLS", &mut config.read_calls)?;
        let mut counts = [
            ("CONCURRENCY", config.concurrency as u64),
            ("CACHE_ENTRIES", config.cache_entries as u64),
            ("IDLE_INSTANCES", config.idle_instances as u64),
        ];
        for (name, value) in &mut counts {
            number(name, value)?;
        }
        config.concurrency = counts[0].1 as usize;
        config.cache_entries = counts[1].1 as usize;
        config.idle_instances = counts[2].1 as usize;
        if let Some(value) = lookup("DISABLED") {
            config.disabled = match value.trim() {
                "1" | "true" => true,
                "0" | "false" | "" => false,
                _ => {
                    return Err(ConfigError {
                        name: "DISABLED",
                        value,
                        expected: "1/true or 0/false",
                    });
                }
            };
        }
        if let Some(value) = lookup("TIMEOUT") {
            config.timeout = parse_duration(&value).ok_or(ConfigError {
                name: "TIMEOUT",
                value,
                expected: "a duration such as 500ms, 10s or 2m",
            })?;
        }
        Ok(config)
    }
}

/// The duration syntax of every setting, `SOURCEGRAPH_PLUGINS_TIMEOUT` and the `csg` flags
/// alike (one parser, so they cannot drift apart): `500ms`, `10s`, `2m`, `1h`; a bare number
/// is seconds. `None` for anything else, or a value that overflows.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: u64 = number.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(value)),
        "s" | "" => Some(Duration::from_secs(value)),
        "m" => Some(Duration::from_secs(value.checked_mul(60)?)),
        "h" => Some(Duration::from_secs(value.checked_mul(3600)?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// W-26: defaults, overrides, and clear refusals.
    #[test]
    fn w26_budgets_from_environment() {
        let none = PluginConfig::from_lookup(|_| None).unwrap();
        assert_eq!(none, PluginConfig::default());
        assert_eq!(none.timeout, Duration::from_secs(10));
        let env: HashMap<&str, &str> = [
            ("TIMEOUT", "500ms"),
            ("DISABLED", "1"),
            ("CONCURRENCY", "2"),
            ("MEMORY_MIB", "64"),
        ]
        .into();
        let config = PluginConfig::from_lookup(|k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(
            (
                config.timeout,
                config.disabled,
                config.concurrency,
                config.memory_mib
            ),
            (Duration::from_millis(500), true, 2, 64)
        );
        let error = PluginConfig::from_lookup(|k| (k == "TIMEOUT").then(|| "soon".to_string()))
            .unwrap_err();
        assert!(
            error.to_string().contains("SOURCEGRAPH_PLUGINS_TIMEOUT"),
            "{error}"
        );
        assert!(PluginConfig::from_lookup(|k| (k == "DISABLED").then(|| "yes".into())).is_err());
    }

    /// O-3: the one duration syntax.
    #[test]
    fn o3_duration_syntax() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration(" 10s "), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        for bad in [
            "",
            "ten",
            "5d",
            "1.5s",
            "-1s",
            "99999999999999999999s",
            "307445734561825861m",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
