//! The server-plugin settings of `serve` and `mcp` (P-1), from `SOURCEGRAPH_SERVER_PLUGINS_*`,
//! each defined once in [`ServerPluginEnv::SETTINGS`]: name, default, parser and help. The
//! host's configuration (`plugins.rs`) and the README table are made from it.

use anyhow::{Result, bail};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// The environment prefix of every server-plugin setting.
pub const PREFIX: &str = "SOURCEGRAPH_SERVER_PLUGINS_";

/// The server-plugin settings, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPluginEnv {
    /// `ENABLED`: whether server plugins run at all.
    pub enabled: bool,
    /// `STRICT`: a failing `on_source_file` fails the index build (P-7).
    pub strict: bool,
    /// `DIRECTORY`; `None`: `plugins/` in the data directory.
    pub directory: Option<PathBuf>,
    /// `HOOK_TIMEOUT_MS`: how long one hook may run before the watchdog interrupts it.
    pub hook_timeout: Duration,
}

/// One `SOURCEGRAPH_SERVER_PLUGINS_*` setting: everything about it in one place.
#[derive(Debug, Clone, Copy)]
pub struct EnvSetting {
    /// The variable's name after [`PREFIX`].
    pub name: &'static str,
    /// What it does, for the README (Markdown).
    pub help: &'static str,
    value: Value,
}

/// A setting's type with its default and field; the parser follows from the type.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off` in any case; empty is false.
    Switch {
        default: bool,
        field: fn(&mut ServerPluginEnv) -> &mut bool,
    },
    /// A directory; unset, the default `shown` describes.
    Directory {
        shown: &'static str,
        field: fn(&mut ServerPluginEnv) -> &mut Option<PathBuf>,
    },
    /// A positive whole number of milliseconds.
    Millis {
        default: Duration,
        field: fn(&mut ServerPluginEnv) -> &mut Duration,
    },
}

impl ServerPluginEnv {
    /// Every server-plugin setting, in the order the README lists them.
    pub const SETTINGS: &'static [EnvSetting] = &[
        EnvSetting {
            name: "ENABLED",
            help: "Turns server plugins on (they are off by default).",
            value: Value::Switch {
                default: false,
                field: |e| &mut e.enabled,
            },
        },
        EnvSetting {
            name: "DIRECTORY",
            help: "The operator's plugins directory: one Python file per plugin.",
            value: Value::Directory {
                shown: "`plugins/` in the data directory",
                field: |e| &mut e.directory,
            },
        },
        EnvSetting {
            name: "HOOK_TIMEOUT_MS",
            help: "How long one hook call may run, in milliseconds, before a watchdog \
                   interrupts it.",
            value: Value::Millis {
                default: pyplugin::DEFAULT_HOOK_TIMEOUT,
                field: |e| &mut e.hook_timeout,
            },
        },
        EnvSetting {
            name: "STRICT",
            help: "A failing `on_source_file` hook fails the index build instead of keeping \
                   the file as it is (P-7); plugins see it as the startup setting `strict`.",
            value: Value::Switch {
                default: false,
                field: |e| &mut e.strict,
            },
        },
    ];

    /// Reads the settings from the process environment over the defaults.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// Reads the settings through `lookup(full variable name)` over the defaults.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Self> {
        let mut env = Self::defaults();
        for setting in Self::SETTINGS {
            setting.read(&lookup, &mut env)?;
        }
        Ok(env)
    }

    /// The plugins directory the environment names, if any; no other variable is read, so a
    /// bad one does not stop a command that only needs the directory.
    pub fn configured_directory(lookup: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
        let mut env = Self::defaults();
        for setting in Self::SETTINGS {
            if matches!(setting.value, Value::Directory { .. }) {
                // A directory is any bytes: reading one cannot fail.
                setting.read(&lookup, &mut env).ok()?;
            }
        }
        env.directory
    }

    fn defaults() -> Self {
        // Every field is overwritten by its setting's default just below.
        let mut env = Self {
            enabled: false,
            strict: false,
            directory: None,
            hook_timeout: Duration::ZERO,
        };
        for setting in Self::SETTINGS {
            match setting.value {
                Value::Switch { default, field } => *field(&mut env) = default,
                Value::Directory { field, .. } => *field(&mut env) = None,
                Value::Millis { default, field } => *field(&mut env) = default,
            }
        }
        env
    }
}

impl EnvSetting {
    /// The full variable name, e.g. `SOURCEGRAPH_SERVER_PLUGINS_ENABLED`.
    pub fn variable(&self) -> String {
        format!("{PREFIX}{}", self.name)
    }

    /// The default as the README shows it (Markdown).
    pub fn default_shown(&self) -> String {
        match self.value {
            Value::Switch { default, .. } => format!("`{default}`"),
            Value::Directory { shown, .. } => shown.to_owned(),
            Value::Millis { default, .. } => format!("`{}`", default.as_millis()),
        }
    }

    /// Reads this setting through `lookup` into `env`, if it is set.
    fn read(
        &self,
        lookup: &impl Fn(&str) -> Option<OsString>,
        env: &mut ServerPluginEnv,
    ) -> Result<()> {
        let name = self.variable();
        let Some(raw) = lookup(&name) else {
            return Ok(());
        };
        match self.value {
            Value::Directory { field, .. } => *field(env) = Some(PathBuf::from(raw)),
            Value::Switch { field, .. } => {
                let value = raw.to_string_lossy();
                *field(env) = match value.trim().to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "on" => true,
                    "false" | "0" | "no" | "off" | "" => false,
                    _ => bail!("{name}={value:?} is not a boolean: use true or false"),
                };
            }
            Value::Millis { field, .. } => {
                let value = raw.to_string_lossy();
                let Some(ms) = value.trim().parse::<u64>().ok().filter(|ms| *ms > 0) else {
                    bail!("{name}={value:?} is not a positive number of milliseconds");
                };
                *field(env) = Duration::from_millis(ms);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Result<ServerPluginEnv> {
        let env: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), OsString::from(v)))
            .collect();
        ServerPluginEnv::from_lookup(|name| env.get(name).cloned())
    }

    /// P-1: off by default, the hook timeout of the host, and each variable read strictly.
    #[test]
    fn p1_server_plugin_settings_from_environment() {
        let none = read(&[]).unwrap();
        assert_eq!(
            none,
            ServerPluginEnv {
                enabled: false,
                strict: false,
                directory: None,
                hook_timeout: pyplugin::DEFAULT_HOOK_TIMEOUT,
            }
        );
        let set = read(&[
            ("ENABLED", "Yes"),
            ("STRICT", " 1 "),
            ("DIRECTORY", "/srv/plugins"),
            ("HOOK_TIMEOUT_MS", "250"),
        ])
        .unwrap();
        assert_eq!(
            set,
            ServerPluginEnv {
                enabled: true,
                strict: true,
                directory: Some(PathBuf::from("/srv/plugins")),
                hook_timeout: Duration::from_millis(250),
            }
        );
        assert!(!read(&[("ENABLED", "")]).unwrap().enabled);
        let error = read(&[("STRICT", "maybe")]).unwrap_err().to_string();
        assert_eq!(
            error,
            "SOURCEGRAPH_SERVER_PLUGINS_STRICT=\"maybe\" is not a boolean: use true or false"
        );
        for bad in ["0", "-5", "soon"] {
            let error = read(&[("HOOK_TIMEOUT_MS", bad)]).unwrap_err().to_string();
            assert!(
                error.contains("SOURCEGRAPH_SERVER_PLUGINS_HOOK_TIMEOUT_MS")
                    && error.contains("positive number of milliseconds"),
                "{error}"
            );
        }
        // The directory alone is read where only it is needed, past a bad switch.
        let env: HashMap<&str, OsString> = [
            ("SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY", OsString::from("/p")),
            (
                "SOURCEGRAPH_SERVER_PLUGINS_ENABLED",
                OsString::from("maybe"),
            ),
        ]
        .into();
        assert_eq!(
            ServerPluginEnv::configured_directory(|name| env.get(name).cloned()),
            Some(PathBuf::from("/p"))
        );
    }

    /// One definition per setting: unique names, each moving exactly one field.
    #[test]
    fn p1_one_definition_per_server_plugin_setting() {
        let settings = ServerPluginEnv::SETTINGS;
        let mut names: Vec<&str> = settings.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), settings.len(), "duplicate names");
        let field_of = |setting: &EnvSetting, env: &ServerPluginEnv| -> String {
            let mut env = env.clone();
            match setting.value {
                Value::Switch { field, .. } => format!("{:?}", field(&mut env)),
                Value::Directory { field, .. } => format!("{:?}", field(&mut env)),
                Value::Millis { field, .. } => format!("{:?}", field(&mut env)),
            }
        };
        let defaults = read(&[]).unwrap();
        let fields = format!("{defaults:#?}")
            .lines()
            .filter(|line| line.starts_with("    ") && !line.starts_with("     "))
            .count();
        assert_eq!(fields, settings.len(), "a field without a setting");
        for setting in settings {
            let other = match setting.value {
                Value::Switch { .. } => "true",
                Value::Directory { .. } => "/elsewhere",
                Value::Millis { .. } => "12345",
            };
            let moved = read(&[(setting.name, other)]).unwrap();
            let changed = settings
                .iter()
                .filter(|s| field_of(s, &moved) != field_of(s, &defaults))
                .count();
            assert_eq!(changed, 1, "{} moves {changed} fields", setting.name);
        }
    }
}
