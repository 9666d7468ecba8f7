//! What a setting is: its definition ([`Def`]: flag, `CSG_*` variable, TOML key, scope,
//! type, range, default and help) and what follows from one definition alone (its clap
//! argument, its help text, the parsing and checking of one value). The table of settings is
//! [`crate::settings::SETTINGS`]; [`crate::config`] layers them.

use anyhow::Result;
use clap::{Arg, ArgAction, ArgMatches};
use std::ffi::{OsStr, OsString};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
/// The default listen address (SPEC §9).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// A secret setting's text. Its `Debug` never shows it; only [`SecretText::expose`] does.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText(String);

impl SecretText {
    /// The text, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretText(***)")
    }
}

/// Where the settings start in `--help`: after the arguments the commands derive.
pub(crate) const DISPLAY_ORDER: usize = 100;

/// The subcommands that take the settings of [`Scope::ServeAndMcp`] and [`Scope::Serve`].
pub(crate) const SERVE_AND_MCP: &[&str] = &["serve", "mcp"];
pub(crate) const SERVE: &[&str] = &["serve"];

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

    pub(crate) fn applies_to(self, subcommand: Option<&str>) -> bool {
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
    /// Text that must never be shown (a password, a shared secret): no error, log or
    /// `Debug` output repeats it. TOML: a string.
    Secret(fn(&mut Settings) -> &mut Option<SecretText>),
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
pub(crate) enum Input {
    /// A flag's or variable's text, or a TOML value written as text (`42`, `true`).
    One(OsString),
    /// A list setting's items.
    Many(Vec<String>),
}

impl Def {
    /// `--flag`.
    pub fn long(&self) -> String {
        format!("--{}", self.flag)
    }

    /// An error for `value` naming this setting in all its spellings, then what it accepts.
    pub(crate) fn refuse(&self, value: &str, allowed: &str) -> anyhow::Error {
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
            | Field::Secret(_)
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
    pub(crate) fn default_text(&self) -> String {
        match self.default {
            DefaultValue::Value(value) => value(),
            DefaultValue::Computed { shown, .. } | DefaultValue::Derived(shown) => shown.to_owned(),
        }
    }

    /// The clap argument.
    pub(crate) fn arg(&self) -> Arg {
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
    pub(crate) fn on_command_line(&self, matches: &ArgMatches) -> Option<Input> {
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
    pub(crate) fn in_env(&self, env: &dyn Fn(&str) -> Option<OsString>) -> Option<Input> {
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
    pub(crate) fn apply(&self, settings: &mut Settings, input: Input) -> Result<()> {
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
            Field::Secret(field) => {
                let text = one
                    .into_string()
                    .map_err(|_| self.refuse("(not shown)", "use UTF-8 text"))?;
                *field(settings) = Some(SecretText(text));
            }
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
    pub(crate) fn text<'a>(&self, value: &'a OsStr) -> Result<&'a str> {
        value
            .to_str()
            .ok_or_else(|| self.refuse(&value.to_string_lossy(), "use UTF-8 text"))
    }

    /// Applies the default (nothing for a [`DefaultValue::Derived`] one).
    pub(crate) fn apply_default(&self, settings: &mut Settings) -> Result<()> {
        match self.default {
            DefaultValue::Value(value) | DefaultValue::Computed { value, .. } => {
                self.apply(settings, Input::One(value().into()))
            }
            DefaultValue::Derived(_) => Ok(()),
        }
    }

    /// A whole number in `min..=max`.
    pub(crate) fn number<T>(&self, text: &str, min: T, max: T) -> Result<T>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        match text.trim().parse::<T>() {
            Ok(value) if value >= min && value <= max => Ok(value),
            _ => Err(self.refuse(text, &format!("use a whole number from {min} to {max}"))),
        }
    }

    /// A duration (the syntax `SOURCEGRAPH_PLUGINS_TIMEOUT` uses too) in `min..=max`.
    pub(crate) fn duration(&self, text: &str, min: Duration, max: Duration) -> Result<Duration> {
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
    pub(crate) fn read_toml(&self, value: toml::Value) -> Result<Input, &'static str> {
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

/// Every setting, validated. Built by [`crate::config::resolve`]: a setting of a command that
/// is not running holds its default, never a blank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `--config`: the TOML file, if any.
    pub config: Option<PathBuf>,
    /// `--data-dir`; `None`: [`crate::config::default_data_dir`].
    pub data_dir: Option<PathBuf>,
    /// `--log-format`: `text` or `json`.
    pub log_format: &'static str,
    /// `--retention-days` (G-5).
    pub retention_days: u64,
    /// `--read-budget-bytes`.
    pub read_budget_bytes: usize,
    /// `--batch-budget-bytes`.
    pub batch_budget_bytes: usize,
    /// `--max-batch-items`.
    pub max_batch_items: usize,
    /// `--line-cap-bytes`.
    pub line_cap_bytes: usize,
    /// `--index-max-file-bytes`.
    pub index_max_file_bytes: u64,
    /// `--history-depth` (0 = the whole retained history).
    pub history_depth: u64,
    /// `--blob-cache-bytes` (0 = off).
    pub blob_cache_bytes: usize,
    /// `--max-text-bytes` (issue 42): the largest file the text tools read.
    pub max_text_bytes: usize,
    /// `--sync-interval` (G-3).
    pub sync_interval: Duration,
    /// `--max-searches`.
    pub max_searches: usize,
    /// `--heavy-calls` (O-9).
    pub heavy_calls: usize,
    /// `--shutdown-grace` (O-6).
    pub shutdown_grace: Duration,
    /// `--listen`.
    pub listen: SocketAddr,
    /// `--public-url`; `None`: the bound address.
    pub public_url: Option<String>,
    /// `--allowed-host`; `None`: loopback names and the public URL's host.
    pub allowed_hosts: Option<Vec<String>>,
    /// `--allowed-origin`; `None`: this server's loopback origins and the public URL.
    pub allowed_origins: Option<Vec<String>>,
    /// `--public-read`.
    pub public_read: bool,
    /// `--database`: a cluster's PostgreSQL; `None`: the embedded SQLite.
    pub database: Option<SecretText>,
    /// `--node-url`: how the other replicas reach this one (cluster mode).
    pub node_url: Option<String>,
    /// `--cluster-secret`: authenticates replica-to-replica calls (cluster mode).
    pub cluster_secret: Option<SecretText>,
    /// `--cluster-tls-cert`: this replica serves HTTPS with it (O-10).
    pub cluster_tls_cert: Option<PathBuf>,
    /// `--cluster-tls-key`: the private key of `--cluster-tls-cert`.
    pub cluster_tls_key: Option<PathBuf>,
    /// `--cluster-ca`: the CA the replicas verify each other with.
    pub cluster_ca: Option<PathBuf>,
    /// `--cluster-mtls`: replicas present their certificates to each other.
    pub cluster_mtls: bool,
    /// `--trusted-proxy`: the proxies whose forwarded client addresses are believed.
    pub trusted_proxies: Option<Vec<String>>,
    /// `--oauth-issuer`: the identity provider whose access tokens are taken.
    pub oauth_issuer: Option<String>,
    /// `--oauth-audience`; `None`: the canonical MCP URL.
    pub oauth_audience: Option<String>,
    /// `--oauth-groups-claim`.
    pub oauth_groups_claim: Option<String>,
    /// `--oauth-group-grant GROUP=REPO`.
    pub oauth_group_grants: Option<Vec<String>>,
    /// `--oauth-prepare-group`.
    pub oauth_prepare_groups: Option<Vec<String>>,
    /// `--oauth-client-id`: the website's client at the identity provider.
    pub oauth_client_id: Option<String>,
    /// `CSG_OAUTH_CLIENT_SECRET`: its secret.
    pub oauth_client_secret: Option<SecretText>,
}

impl Settings {
    /// Blanks for [`crate::config::resolve`] to write every setting over; never used as they
    /// are (each setting's default comes from its [`Def`]).
    pub(crate) const BLANK: Self = Self {
        config: None,
        data_dir: None,
        log_format: "",
        retention_days: 0,
        read_budget_bytes: 0,
        batch_budget_bytes: 0,
        max_batch_items: 0,
        line_cap_bytes: 0,
        index_max_file_bytes: 0,
        history_depth: 0,
        blob_cache_bytes: 0,
        max_text_bytes: 0,
        sync_interval: Duration::ZERO,
        max_searches: 0,
        heavy_calls: 0,
        shutdown_grace: Duration::ZERO,
        listen: SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        public_url: None,
        allowed_hosts: None,
        allowed_origins: None,
        public_read: false,
        database: None,
        node_url: None,
        cluster_secret: None,
        cluster_tls_cert: None,
        cluster_tls_key: None,
        cluster_ca: None,
        cluster_mtls: false,
        trusted_proxies: None,
        oauth_issuer: None,
        oauth_audience: None,
        oauth_groups_claim: None,
        oauth_group_grants: None,
        oauth_prepare_groups: None,
        oauth_client_id: None,
        oauth_client_secret: None,
    };
}

/// A duration as the settings spell it.
pub(crate) fn show(duration: Duration) -> String {
    let ms = duration.as_millis();
    match ms {
        ms if ms % 3_600_000 == 0 && ms > 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 && ms > 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}
