//! Settings: command-line flags > `CSG_*` environment > TOML file (`--config`) > defaults
//! (O-3, SPEC §9), made from the one table of definitions in [`crate::settings`]. This module
//! turns each [`Def`] into a clap argument, reads the file by the same table, layers the four
//! sources and validates every value at start, with errors that name the flag, the variable
//! and the TOML key.

use crate::server_plugin_env::ServerPluginEnv;
use crate::settings::{SETTINGS, Settings};
use anyhow::{Context, Result};
use clap::{Arg, ArgAction, ArgMatches};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default listen address (SPEC §9).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// Where the settings start in `--help`: after the arguments the commands derive.
const DISPLAY_ORDER: usize = 100;

/// The subcommands that take the settings of [`Scope::ServeAndMcp`] and [`Scope::Serve`].
const SERVE_AND_MCP: &[&str] = &["serve", "mcp"];
const SERVE: &[&str] = &["serve"];

/// Which commands a setting belongs to. Only those read it from the flags, the environment
/// and the file (and refuse a bad value); the others keep its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every command: a global flag, accepted before or after the subcommand.
    Global,
    /// `csg serve` and `csg mcp`.
    ServeAndMcp,
    /// `csg serve` only.
    Serve,
}

impl Scope {
    /// The subcommands whose arguments carry the setting; empty for [`Scope::Global`], which
    /// is an argument of the top-level command.
    pub fn subcommands(self) -> &'static [&'static str] {
        match self {
            Scope::Global => &[],
            Scope::ServeAndMcp => SERVE_AND_MCP,
            Scope::Serve => SERVE,
        }
    }

    fn applies_to(self, subcommand: Option<&str>) -> bool {
        self == Scope::Global || subcommand.is_some_and(|name| self.subcommands().contains(&name))
    }
}

/// A setting's type, range and the field of [`Settings`] it fills; its parser, its check and
/// the type its TOML key takes follow from it.
#[derive(Debug, Clone, Copy)]
pub enum Field {
    /// A path (any bytes). TOML: a string.
    Path(fn(&mut Settings) -> &mut Option<PathBuf>),
    /// Free text. TOML: a string.
    Text(fn(&mut Settings) -> &mut Option<String>),
    /// `IP:PORT`. TOML: a string.
    Listen(fn(&mut Settings) -> &mut SocketAddr),
    /// One of a few words. TOML: a string.
    Choice(
        &'static [&'static str],
        fn(&mut Settings) -> &mut &'static str,
    ),
    /// `true` or `false`. TOML: a boolean.
    Bool(fn(&mut Settings) -> &mut bool),
    /// A whole number in `min..=max`. TOML: an integer.
    Count {
        min: u64,
        max: u64,
        field: fn(&mut Settings) -> &mut u64,
    },
    /// A whole number in `min..=max`, kept as a `usize`. TOML: an integer.
    Size {
        min: usize,
        max: usize,
        field: fn(&mut Settings) -> &mut usize,
    },
    /// A duration (`500ms`, `10s`, `2m`, `1h`) in `min..=max`. TOML: a string.
    Duration {
        min: Duration,
        max: Duration,
        field: fn(&mut Settings) -> &mut Duration,
    },
    /// Several items: a repeatable flag, a comma-separated variable. TOML: an array of strings.
    List(fn(&mut Settings) -> &mut Option<Vec<String>>),
}

/// What a setting is when no flag, variable or key sets it.
#[derive(Debug, Clone, Copy)]
pub enum DefaultValue {
    /// This value, written as a user would write it (parsed and checked like one), and shown
    /// as it is in `--help` and the README.
    Value(fn() -> String),
    /// A value computed on this machine (`value`), described by `shown`.
    Computed {
        value: fn() -> String,
        shown: &'static str,
    },
    /// No value (the field stays `None`): `csg` decides at start from other facts, as `shown`
    /// (Markdown) describes.
    Derived(&'static str),
}

/// One setting: everything about it in one place.
#[derive(Debug, Clone, Copy)]
pub struct Def {
    /// The TOML key, also the clap argument id (`read_budget_bytes`).
    pub key: &'static str,
    /// The long flag without its dashes (`read-budget-bytes`).
    pub flag: &'static str,
    /// The environment variable (`CSG_READ_BUDGET_BYTES`).
    pub env: &'static str,
    /// Whether the TOML file may set it (not `config`, which names the file).
    pub in_file: bool,
    /// The commands it belongs to.
    pub scope: Scope,
    /// The value's name in `--help` (`BYTES`).
    pub value_name: &'static str,
    /// Its type, range and field.
    pub field: Field,
    /// Its default.
    pub default: DefaultValue,
    /// What it does: one or two sentences, for `--help` and the README (Markdown code spans
    /// are fine in both).
    pub help: &'static str,
}

/// A setting's value as one layer gives it, before it is parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Input {
    /// A flag's or variable's text, or a TOML value written as text (`42`, `true`).
    One(OsString),
    /// A list setting's items.
    Many(Vec<String>),
}

impl Def {
    /// Its place in [`SETTINGS`].
    fn index(&self) -> usize {
        SETTINGS
            .iter()
            .position(|def| def.key == self.key)
            .unwrap_or(SETTINGS.len())
    }

    /// `--flag`.
    pub fn long(&self) -> String {
        format!("--{}", self.flag)
    }

    /// An error for `value` naming this setting in all its spellings, then what it accepts.
    fn refuse(&self, value: &str, allowed: &str) -> anyhow::Error {
        let file = if self.in_file {
            format!(" or `{}` in the config file", self.key)
        } else {
            String::new()
        };
        anyhow::anyhow!(
            "invalid {} `{value}` (also {}{file}): {allowed}",
            self.long(),
            self.env
        )
    }

    /// What the setting accepts beyond its type, as a sentence (`None` when the type says
    /// it all).
    pub fn accepts(&self) -> Option<String> {
        match self.field {
            Field::Count { min, max, .. } => whole_numbers(min, max, u64::MAX),
            Field::Size { min, max, .. } => {
                whole_numbers(min as u64, max as u64, usize::MAX as u64)
            }
            Field::Duration { min, max, .. } => {
                Some(format!("From {} to {}.", show(min), show(max)))
            }
            Field::Choice(choices, _) => Some(format!("{}.", code_list(choices))),
            // `--help` lists a boolean's values already.
            Field::Bool(_)
            | Field::Path(_)
            | Field::Text(_)
            | Field::Listen(_)
            | Field::List(_) => None,
        }
    }

    /// The default as the README shows it: a value in a code span, or words.
    #[cfg(test)]
    pub fn default_shown(&self) -> String {
        match self.default {
            DefaultValue::Value(value) => format!("`{}`", value()),
            DefaultValue::Computed { shown, .. } | DefaultValue::Derived(shown) => shown.to_owned(),
        }
    }

    /// The default as `--help` shows it: a value as it is, or words.
    fn default_text(&self) -> String {
        match self.default {
            DefaultValue::Value(value) => value(),
            DefaultValue::Computed { shown, .. } | DefaultValue::Derived(shown) => shown.to_owned(),
        }
    }

    /// The clap argument.
    fn arg(&self) -> Arg {
        let mut help = self.help.to_owned();
        if let Some(accepts) = self.accepts() {
            help.push(' ');
            help.push_str(&accepts);
        }
        // clap's own `default_value` and `env` would make clap a layer of its own; the
        // layering is `resolve`'s, so both are only shown here.
        help.push_str(&format!(
            " [default: {}] [env: {}]",
            self.default_text(),
            self.env
        ));
        let arg = Arg::new(self.key)
            .long(self.flag)
            // After the command's own arguments (`--repo`), in the table's order.
            .display_order(DISPLAY_ORDER + self.index())
            .value_name(self.value_name)
            .help(help);
        match self.field {
            Field::List(_) => arg.action(ArgAction::Append).value_delimiter(','),
            Field::Bool(_) => arg
                .action(ArgAction::Set)
                .value_parser(clap::builder::PossibleValuesParser::new(["true", "false"])),
            Field::Path(_) => arg
                .action(ArgAction::Set)
                .value_parser(clap::value_parser!(OsString)),
            _ => arg.action(ArgAction::Set),
        }
    }

    /// The value the command line gives, if any.
    fn on_command_line(&self, matches: &ArgMatches) -> Option<Input> {
        let mut values = matches.try_get_raw(self.key).ok().flatten()?;
        match self.field {
            Field::List(_) => {
                let items: Vec<String> = values
                    .map(|value| value.to_string_lossy().into_owned())
                    .collect();
                // `--allowed-host ''` lists nothing: the lower layers decide, as before.
                (!items.is_empty()).then_some(Input::Many(items))
            }
            _ => values.next_back().map(|value| Input::One(value.to_owned())),
        }
    }

    /// The value the environment gives, if any.
    fn in_env(&self, env: &dyn Fn(&str) -> Option<OsString>) -> Option<Input> {
        let value = env(self.env)?;
        match self.field {
            Field::List(_) => {
                // An empty variable lists nothing: the lower layers decide, as before.
                let text = value.to_string_lossy();
                (!text.is_empty())
                    .then(|| Input::Many(text.split(',').map(str::to_owned).collect()))
            }
            _ => Some(Input::One(value)),
        }
    }

    /// Parses and checks `input` into this setting's field of `settings`.
    fn apply(&self, settings: &mut Settings, input: Input) -> Result<()> {
        let one = match (self.field, input) {
            (Field::List(field), Input::Many(items)) => {
                *field(settings) = Some(items);
                return Ok(());
            }
            // Only list settings are given items (clap, `in_env` and the file see to it).
            (_, Input::Many(items)) => return Err(self.refuse(&items.join(","), "give one value")),
            (_, Input::One(one)) => one,
        };
        match self.field {
            Field::Path(field) => *field(settings) = Some(PathBuf::from(one)),
            Field::Text(field) => *field(settings) = Some(self.text(&one)?.to_owned()),
            Field::List(field) => {
                let items = self.text(&one)?.split(',').map(str::to_owned).collect();
                *field(settings) = Some(items);
            }
            Field::Listen(field) => {
                let text = self.text(&one)?;
                *field(settings) = text.parse().map_err(|_| {
                    anyhow::anyhow!(
                        "invalid listen address `{text}` ({}, {} or `{}` in the config file): \
                         use IP:PORT such as {DEFAULT_LISTEN}",
                        self.long(),
                        self.env,
                        self.key
                    )
                })?;
            }
            Field::Choice(choices, field) => {
                let text = self.text(&one)?;
                *field(settings) = choices
                    .iter()
                    .find(|choice| **choice == text)
                    .ok_or_else(|| self.refuse(text, &format!("use {}", code_list(choices))))?;
            }
            Field::Bool(field) => {
                *field(settings) = match self.text(&one)? {
                    "true" => true,
                    "false" => false,
                    text => return Err(self.refuse(text, "use true or false")),
                };
            }
            Field::Count { min, max, field } => {
                *field(settings) = self.number(self.text(&one)?, min, max)?;
            }
            Field::Size { min, max, field } => {
                *field(settings) = self.number(self.text(&one)?, min, max)?;
            }
            Field::Duration { min, max, field } => {
                *field(settings) = self.duration(self.text(&one)?, min, max)?;
            }
        }
        Ok(())
    }

    /// `value` as text: every setting but a path is UTF-8.
    fn text<'a>(&self, value: &'a OsStr) -> Result<&'a str> {
        value
            .to_str()
            .ok_or_else(|| self.refuse(&value.to_string_lossy(), "use UTF-8 text"))
    }

    /// Applies the default (nothing for a [`DefaultValue::Derived`] one).
    fn apply_default(&self, settings: &mut Settings) -> Result<()> {
        match self.default {
            DefaultValue::Value(value) | DefaultValue::Computed { value, .. } => {
                self.apply(settings, Input::One(value().into()))
            }
            DefaultValue::Derived(_) => Ok(()),
        }
    }

    /// A whole number in `min..=max`.
    fn number<T>(&self, text: &str, min: T, max: T) -> Result<T>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        match text.trim().parse::<T>() {
            Ok(value) if value >= min && value <= max => Ok(value),
            _ => Err(self.refuse(text, &format!("use a whole number from {min} to {max}"))),
        }
    }

    /// A duration (the syntax `SOURCEGRAPH_PLUGINS_TIMEOUT` uses too) in `min..=max`.
    fn duration(&self, text: &str, min: Duration, max: Duration) -> Result<Duration> {
        match wasmplugin::parse_duration(text) {
            Some(value) if value >= min && value <= max => Ok(value),
            _ => Err(self.refuse(
                text,
                &format!(
                    "use a duration such as 500ms, 10s, 2m or 1h, from {} to {}",
                    show(min),
                    show(max)
                ),
            )),
        }
    }

    /// The TOML value's text, if it has this setting's type; else a sentence saying which
    /// type it needs.
    fn read_toml(&self, value: toml::Value) -> Result<Input, &'static str> {
        use toml::Value as V;
        match (self.field, value) {
            (Field::List(_), V::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    V::String(text) => Ok(text),
                    _ => Err("an array of strings"),
                })
                .collect::<Result<_, _>>()
                .map(Input::Many),
            (Field::List(_), _) => Err("an array of strings"),
            (Field::Bool(_), V::Boolean(value)) => Ok(Input::One(value.to_string().into())),
            (Field::Bool(_), _) => Err("a boolean (true or false)"),
            (Field::Count { .. } | Field::Size { .. }, V::Integer(value)) => {
                Ok(Input::One(value.to_string().into()))
            }
            (Field::Count { .. } | Field::Size { .. }, _) => Err("an integer"),
            (_, V::String(text)) => Ok(Input::One(text.into())),
            (_, _) => Err("a string"),
        }
    }
}

/// `From 1 to 1024.`, `At least 1.`, or nothing when any whole number goes.
fn whole_numbers(min: u64, max: u64, type_max: u64) -> Option<String> {
    match (min, max) {
        (0, max) if max == type_max => None,
        (min, max) if max == type_max => Some(format!("At least {min}.")),
        (min, max) => Some(format!("From {min} to {max}.")),
    }
}

/// `` `a` or `b` `` / `` `a`, `b` or `c` ``.
fn code_list(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|word| format!("`{word}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

/// `command` (the derived command line) with every setting's argument added where its scope
/// puts it, and the plugin hosts' variables under `serve --help` and `mcp --help`.
pub fn command(mut command: clap::Command) -> clap::Command {
    command = command.mut_subcommands(|sub| {
        if SERVE_AND_MCP.contains(&sub.get_name()) {
            sub.after_long_help(plugin_environment_help())
        } else {
            sub
        }
    });
    for def in SETTINGS {
        command = match def.scope {
            Scope::Global => command.arg(def.arg().global(true)),
            scope => command.mut_subcommands(|sub| {
                if scope.subcommands().contains(&sub.get_name()) {
                    sub.arg(def.arg())
                } else {
                    sub
                }
            }),
        };
    }
    command
}

/// The `SOURCEGRAPH_PLUGINS_*` and `SOURCEGRAPH_SERVER_PLUGINS_*` variables, from their tables,
/// for the long help of `serve` and `mcp` (they have no flags).
fn plugin_environment_help() -> String {
    let mut help = String::from("Repository plugins (environment only):\n");
    for setting in wasmplugin::PluginConfig::SETTINGS {
        help.push_str(&format!(
            "  {}\n          {} [default: {}]\n",
            setting.variable(),
            setting.help,
            setting.default_text()
        ));
    }
    help.push_str("\nServer plugins (environment only):\n");
    for setting in ServerPluginEnv::SETTINGS {
        help.push_str(&format!(
            "  {}\n          {} [default: {}]\n",
            setting.variable(),
            setting.help,
            setting.default_shown()
        ));
    }
    help
}

/// The settings of the command `matches` holds (from [`command`]'s parse), layered: the
/// command line > `env` (a variable's value) > the `--config` file > the default. Each setting
/// is read from its highest layer only (a bad value below it is never parsed) and checked
/// there; a setting of another command keeps its default.
pub fn resolve(matches: &ArgMatches, env: &dyn Fn(&str) -> Option<OsString>) -> Result<Settings> {
    let (subcommand, sub_matches) = match matches.subcommand() {
        Some((name, sub)) => (Some(name), Some(sub)),
        None => (None, None),
    };
    let layer = |def: &Def, settings: &mut Settings, file: &mut FileValues| -> Result<()> {
        if !def.scope.applies_to(subcommand) {
            return def.apply_default(settings);
        }
        let arguments = match def.scope {
            Scope::Global => Some(matches),
            Scope::ServeAndMcp | Scope::Serve => sub_matches,
        };
        let input = arguments
            .and_then(|arguments| def.on_command_line(arguments))
            .or_else(|| def.in_env(env))
            .or_else(|| file.values.remove(def.key));
        match input {
            Some(input) => def.apply(settings, input),
            None => def.apply_default(settings),
        }
    };
    let mut settings = Settings::BLANK;
    // The settings the file cannot hold (`config`) first: they decide which file is read.
    let mut file = FileValues::default();
    for def in SETTINGS.iter().filter(|def| !def.in_file) {
        layer(def, &mut settings, &mut file)?;
    }
    if let Some(path) = &settings.config {
        file = FileValues::load(path)?;
    }
    for def in SETTINGS.iter().filter(|def| def.in_file) {
        layer(def, &mut settings, &mut file)?;
    }
    Ok(settings)
}

/// The values of a `--config` file, by key, each of its setting's TOML type.
#[derive(Debug, Default)]
struct FileValues {
    values: BTreeMap<&'static str, Input>,
}

impl FileValues {
    /// Reads `path`; a missing or malformed file, an unknown key (a typo must be loud) or a
    /// value of the wrong type is an error naming the file and the key.
    fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let values = Self::parse(&text)
            .with_context(|| format!("invalid config file {}", path.display()))?;
        Ok(Self { values })
    }

    fn parse(text: &str) -> Result<BTreeMap<&'static str, Input>> {
        let table: toml::Table = toml::from_str(text)?;
        let mut values = BTreeMap::new();
        for (key, value) in table {
            let Some(def) = SETTINGS.iter().find(|def| def.in_file && def.key == key) else {
                let known: Vec<&str> = SETTINGS
                    .iter()
                    .filter(|def| def.in_file)
                    .map(|def| def.key)
                    .collect();
                anyhow::bail!(
                    "unknown key `{key}`; the known keys are {}",
                    known.join(", ")
                );
            };
            let input = def.read_toml(value).map_err(|expected| {
                anyhow::anyhow!(
                    "`{key}` must be {expected} (the setting {}, {})",
                    def.long(),
                    def.env
                )
            })?;
            values.insert(def.key, input);
        }
        Ok(values)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// `csg ARGS` parsed with the environment `env` (and nothing of the process's).
    fn resolve_with(args: &[&str], env: &[(&str, &str)]) -> Result<Settings> {
        let matches = crate::cli_command()
            .try_get_matches_from(std::iter::once("csg").chain(args.to_vec()))?;
        let env: HashMap<String, OsString> = env
            .iter()
            .map(|(name, value)| (name.to_string(), OsString::from(value)))
            .collect();
        resolve(&matches, &|name| env.get(name).cloned())
    }

    fn def(key: &str) -> &'static Def {
        SETTINGS.iter().find(|def| def.key == key).unwrap()
    }

    /// What one invalid value of `def` is, or `None` when every text is valid.
    fn invalid(def: &Def) -> Option<&'static str> {
        match def.field {
            Field::Path(_) | Field::Text(_) | Field::List(_) => None,
            _ => Some("bogus"),
        }
    }

    /// A TOML line setting `def` to a valid value other than its default.
    fn toml_sample(def: &Def) -> String {
        let value = match def.field {
            Field::Path(_) => "\"/sample\"".to_owned(),
            Field::Text(_) => "\"https://sample.example\"".to_owned(),
            Field::Listen(_) => "\"127.0.0.1:1\"".to_owned(),
            Field::Choice(choices, _) => format!("\"{}\"", choices[choices.len() - 1]),
            Field::Bool(_) => "false".to_owned(),
            // Odd: never a default (twice the cores included), and in every range.
            Field::Count { .. } | Field::Size { .. } => "3".to_owned(),
            Field::Duration { .. } => "\"7s\"".to_owned(),
            Field::List(_) => "[\"sample\"]".to_owned(),
        };
        format!("{} = {value}\n", def.key)
    }

    /// The field `def` fills, as text.
    fn field_of(def: &Def, settings: &Settings) -> String {
        let mut settings = settings.clone();
        let settings = &mut settings;
        match def.field {
            Field::Path(field) => format!("{:?}", field(settings)),
            Field::Text(field) => format!("{:?}", field(settings)),
            Field::Listen(field) => format!("{:?}", field(settings)),
            Field::Choice(_, field) => format!("{:?}", field(settings)),
            Field::Bool(field) => format!("{:?}", field(settings)),
            Field::Count { field, .. } => format!("{:?}", field(settings)),
            Field::Size { field, .. } => format!("{:?}", field(settings)),
            Field::Duration { field, .. } => format!("{:?}", field(settings)),
            Field::List(field) => format!("{:?}", field(settings)),
        }
    }

    /// How many settings' fields differ between `a` and `b`.
    fn moved(a: &Settings, b: &Settings) -> usize {
        SETTINGS
            .iter()
            .filter(|def| field_of(def, a) != field_of(def, b))
            .count()
    }

    #[test]
    fn o3_durations() {
        let s = def("sync_interval");
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

    /// O-3: a key the table does not define is refused, naming it and the known keys; so is
    /// `config` (the file cannot name another file) and a value of the wrong type.
    #[test]
    fn o3_file_config_refuses_unknown_keys() {
        assert!(FileValues::parse("listen = \"127.0.0.1:1\"").is_ok());
        for (text, key) in [
            ("lissen = \"x\"", "lissen"),
            ("config = \"x.toml\"", "config"),
        ] {
            let error = format!("{:#}", FileValues::parse(text).unwrap_err());
            assert!(
                error.contains(&format!("unknown key `{key}`"))
                    && error.contains("listen, public_url"),
                "{error}"
            );
        }
        let error = format!(
            "{:#}",
            FileValues::parse("retention_days = \"30\"").unwrap_err()
        );
        assert!(
            error.contains("`retention_days` must be an integer")
                && error.contains("--retention-days"),
            "{error}"
        );
        let error = format!(
            "{:#}",
            FileValues::parse("allowed_hosts = [1]").unwrap_err()
        );
        assert!(error.contains("array of strings"), "{error}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("typo.toml");
        std::fs::write(&path, "lissen = \"127.0.0.1:0\"\n").unwrap();
        let config = path.to_str().unwrap();
        let error = format!(
            "{:#}",
            resolve_with(&["--config", config, "serve"], &[]).unwrap_err()
        );
        assert!(
            error.contains(config) && error.contains("unknown key `lissen`"),
            "{error}"
        );
    }

    /// O-3: flag > environment > file > default, over settings of five types and scopes; a
    /// value below the layer that wins is never parsed.
    #[test]
    fn o3_precedence_flag_env_file_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("csg.toml");
        std::fs::write(
            &path,
            "read_budget_bytes = 1000\nsync_interval = \"2m\"\npublic_read = false\n\
             allowed_hosts = [\"file.example\"]\nretention_days = 1\n",
        )
        .unwrap();
        let config = path.to_str().unwrap();
        let env = [
            ("CSG_READ_BUDGET_BYTES", "2000"),
            ("CSG_SYNC_INTERVAL", "3s"),
            ("CSG_PUBLIC_READ", "true"),
            ("CSG_ALLOWED_HOSTS", "env.example,other.example"),
            ("CSG_RETENTION_DAYS", "2"),
        ];
        let flags = [
            "--read-budget-bytes",
            "3000",
            "--sync-interval",
            "500ms",
            "--public-read",
            "false",
            "--allowed-host",
            "flag.example",
            "--allowed-host",
            "a.example,b.example",
            // A global flag after the subcommand counts as well.
            "--retention-days",
            "3",
        ];
        let layer = |file: bool, env_on: bool, flags_on: bool| {
            let mut args: Vec<&str> = Vec::new();
            if file {
                args.extend(["--config", config]);
            }
            args.push("serve");
            if flags_on {
                args.extend(flags);
            }
            resolve_with(&args, if env_on { &env } else { &[] }).unwrap()
        };
        let defaults = layer(false, false, false);
        assert_eq!(
            (
                defaults.read_budget_bytes,
                defaults.sync_interval,
                defaults.public_read,
                defaults.allowed_hosts.clone(),
                defaults.retention_days
            ),
            (262_144, Duration::from_secs(60), true, None, 30)
        );
        let file = layer(true, false, false);
        assert_eq!(
            (
                file.read_budget_bytes,
                file.sync_interval,
                file.public_read,
                file.allowed_hosts.clone(),
                file.retention_days
            ),
            (
                1000,
                Duration::from_secs(120),
                false,
                Some(vec!["file.example".to_owned()]),
                1
            )
        );
        let env_wins = layer(true, true, false);
        assert_eq!(
            (
                env_wins.read_budget_bytes,
                env_wins.sync_interval,
                env_wins.public_read,
                env_wins.allowed_hosts.clone(),
                env_wins.retention_days
            ),
            (
                2000,
                Duration::from_secs(3),
                true,
                Some(vec!["env.example".to_owned(), "other.example".to_owned()]),
                2
            )
        );
        let flag_wins = layer(true, true, true);
        assert_eq!(
            (
                flag_wins.read_budget_bytes,
                flag_wins.sync_interval,
                flag_wins.public_read,
                flag_wins.allowed_hosts.clone(),
                flag_wins.retention_days
            ),
            (
                3000,
                Duration::from_millis(500),
                false,
                Some(vec![
                    "flag.example".to_owned(),
                    "a.example".to_owned(),
                    "b.example".to_owned()
                ]),
                3
            )
        );

        // Bad values under the winning layer are never read.
        std::fs::write(
            &path,
            "read_budget_bytes = 0\nlisten = \"not an address\"\n",
        )
        .unwrap();
        let settings = resolve_with(
            &["--config", config, "serve", "--read-budget-bytes", "5"],
            &[
                ("CSG_READ_BUDGET_BYTES", "0"),
                ("CSG_LISTEN", "127.0.0.1:9"),
            ],
        )
        .unwrap();
        assert_eq!(settings.read_budget_bytes, 5);
        assert_eq!(settings.listen, "127.0.0.1:9".parse().unwrap());
        // An empty list variable lists nothing: the file decides.
        std::fs::write(&path, "allowed_hosts = [\"file.example\"]\n").unwrap();
        let settings =
            resolve_with(&["--config", config, "serve"], &[("CSG_ALLOWED_HOSTS", "")]).unwrap();
        assert_eq!(
            settings.allowed_hosts,
            Some(vec!["file.example".to_owned()])
        );
    }

    /// O-3: a setting is read by the commands of its scope only; the others keep its default
    /// and do not refuse a bad value of it.
    #[test]
    fn o3_settings_belong_to_their_commands() {
        let env = [("CSG_READ_BUDGET_BYTES", "0"), ("CSG_LISTEN", "bogus")];
        let repo = resolve_with(&["repo", "list"], &env).unwrap();
        assert_eq!(repo.read_budget_bytes, 262_144);
        let mcp = resolve_with(&["mcp"], &env[1..]).unwrap();
        assert_eq!(mcp.listen, DEFAULT_LISTEN.parse().unwrap());
        let error = resolve_with(&["mcp"], &env[..1]).unwrap_err().to_string();
        assert!(error.contains("invalid --read-budget-bytes `0`"), "{error}");
        let error = resolve_with(&["serve"], &env[1..]).unwrap_err().to_string();
        assert!(error.contains("invalid listen address `bogus`"), "{error}");
        // A serve-only flag is no flag of mcp.
        assert!(resolve_with(&["mcp", "--listen", "127.0.0.1:1"], &[]).is_err());
    }

    /// O-3: every setting's defaults are the libraries' own.
    #[test]
    fn o3_defaults_come_from_the_libraries() {
        let service = service::ServiceConfig::default();
        let settings = resolve_with(&["serve"], &[]).unwrap();
        let expected = Settings {
            config: None,
            data_dir: None,
            log_format: "text",
            retention_days: 30,
            read_budget_bytes: service.read_budget,
            batch_budget_bytes: service.batch_budget,
            max_batch_items: service.max_batch_items,
            line_cap_bytes: service.line_cap,
            index_max_file_bytes: service.index.max_file_bytes,
            blob_cache_bytes: gitstore::DEFAULT_BLOB_CACHE_BYTES,
            sync_interval: Duration::from_secs(60),
            max_searches: service.max_concurrent_searches,
            shutdown_grace: Duration::from_secs(10),
            listen: DEFAULT_LISTEN.parse().unwrap(),
            public_url: None,
            allowed_hosts: None,
            allowed_origins: None,
            public_read: service.public_read,
        };
        assert_eq!(settings, expected);
        // Another command's settings hold their defaults too, never blanks.
        assert_eq!(resolve_with(&["repo", "list"], &[]).unwrap(), expected);
    }

    /// O-3: every definition is in the command line exactly once, where its scope puts it, and
    /// `--help` documents its flag and variable.
    #[test]
    fn o3_every_setting_once_in_the_command_line() {
        let command = crate::cli_command();
        command.clone().debug_assert();
        let count = |command: &clap::Command, def: &Def| {
            command
                .get_arguments()
                .filter(|arg| arg.get_id() == def.key)
                .filter(|arg| arg.get_long() == Some(def.flag))
                .count()
        };
        for def in SETTINGS {
            let top = usize::from(def.scope == Scope::Global);
            assert_eq!(count(&command, def), top, "{} at the top level", def.long());
            for sub in command.get_subcommands() {
                let expected = usize::from(def.scope.subcommands().contains(&sub.get_name()));
                assert_eq!(
                    count(sub, def),
                    expected,
                    "{} in {}",
                    def.long(),
                    sub.get_name()
                );
            }
        }
        let help = |args: &[&str]| {
            let error = crate::cli_command().try_get_matches_from(args).unwrap_err();
            assert_eq!(error.kind(), clap::error::ErrorKind::DisplayHelp);
            error.to_string()
        };
        let top = help(&["csg", "--help"]);
        let serve = help(&["csg", "serve", "--help"]);
        let mcp = help(&["csg", "mcp", "--help"]);
        for variable in wasmplugin::PluginConfig::SETTINGS
            .iter()
            .map(|setting| setting.variable())
            .chain(
                ServerPluginEnv::SETTINGS
                    .iter()
                    .map(|setting| setting.variable()),
            )
        {
            assert!(
                serve.contains(&variable),
                "csg serve --help lacks {variable}"
            );
            assert!(mcp.contains(&variable), "csg mcp --help lacks {variable}");
        }
        for def in SETTINGS {
            let flag = format!("{} <{}>", def.long(), def.value_name);
            let env = format!("[env: {}]", def.env);
            let documented = |text: &str| text.contains(&flag) && text.contains(&env);
            assert!(documented(&serve), "csg serve --help lacks {flag} or {env}");
            assert_eq!(
                documented(&mcp),
                def.scope != Scope::Serve,
                "csg mcp --help and {flag}"
            );
            assert_eq!(
                documented(&top),
                def.scope == Scope::Global,
                "csg --help and {flag}"
            );
        }
    }

    /// O-3: the table is consistent: one flag, variable and key per setting, named after each
    /// other, and each setting fills exactly one field of `Settings` through the file (every
    /// file key is parsed), as through the environment.
    #[test]
    fn o3_every_setting_once_in_the_file_and_the_environment() {
        let unique = |names: Vec<&str>| {
            let mut sorted = names.clone();
            sorted.sort_unstable();
            sorted.dedup();
            sorted.len() == names.len()
        };
        assert!(unique(SETTINGS.iter().map(|def| def.key).collect()));
        assert!(unique(SETTINGS.iter().map(|def| def.flag).collect()));
        assert!(unique(SETTINGS.iter().map(|def| def.env).collect()));
        for def in SETTINGS {
            assert_eq!(def.env, format!("CSG_{}", def.key.to_uppercase()));
            // `--allowed-host` is repeated once per host; its key and variable list them.
            let flag = def.key.replace('_', "-");
            assert!(
                def.flag == flag || format!("{}s", def.flag) == flag,
                "{}",
                def.flag
            );
        }

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.toml");
        let config = path.to_str().unwrap();
        let defaults = resolve_with(&["serve"], &[]).unwrap();
        // As many fields as settings (each field's line in `{:#?}` is indented once).
        let fields = format!("{defaults:#?}")
            .lines()
            .filter(|line| line.starts_with("    ") && !line.starts_with("     "))
            .count();
        assert_eq!(fields, SETTINGS.len(), "a field without a setting");
        let with_config = resolve_with(&["--config", config, "serve"], &[]);
        assert!(with_config.is_err(), "the file does not exist yet");
        for def in SETTINGS.iter().filter(|def| def.in_file) {
            std::fs::write(&path, toml_sample(def)).unwrap();
            let from_file = resolve_with(&["--config", config, "serve"], &[]).unwrap();
            // `config` itself, and this setting's field only (so no two settings share one).
            let moved = moved(&defaults, &from_file);
            assert_eq!(moved, 2, "{} = … moved {moved} fields", def.key);
            assert_ne!(
                field_of(def, &defaults),
                field_of(def, &from_file),
                "{}",
                def.key
            );

            if let Some(bad) = invalid(def) {
                let mut cases = vec![(vec!["serve".to_owned()], vec![(def.env, bad)])];
                // clap itself refuses a boolean flag's other values, as it always did.
                if !matches!(def.field, Field::Bool(_)) {
                    cases.push((vec!["serve".to_owned(), def.long(), bad.to_owned()], vec![]));
                }
                let in_file = match def.field {
                    Field::Count { .. } | Field::Size { .. } => Some("-1"),
                    Field::Bool(_) => None,
                    _ => Some("\"bogus\""),
                };
                if let Some(value) = in_file {
                    std::fs::write(&path, format!("{} = {value}\n", def.key)).unwrap();
                    let args = ["--config", config, "serve"].map(str::to_owned);
                    cases.push((args.to_vec(), vec![]));
                }
                for (args, env) in cases {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let error = resolve_with(&args, &env).unwrap_err().to_string();
                    assert!(
                        error.contains(&def.long())
                            && error.contains(def.env)
                            && error.contains(&format!("`{}`", def.key)),
                        "{error}"
                    );
                }
            }
        }
    }
}
