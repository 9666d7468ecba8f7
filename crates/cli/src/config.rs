//! Settings: command-line flags > `CSG_*` environment > TOML file (`--config`) > defaults
//! (O-3, SPEC §9), made from the one table of definitions in [`crate::settings`]. This module
//! turns each [`Def`] into a clap argument, reads the file by the same table, layers the four
//! sources and validates every value at start, with errors that name the flag, the variable
//! and the TOML key.

use crate::server_plugin_env::ServerPluginEnv;
use crate::setting::{DISPLAY_ORDER, Def, Input, SERVE_AND_MCP, Scope, Settings};
use crate::settings::SETTINGS;
use anyhow::{Context, Result};
use clap::ArgMatches;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

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
    for (place, def) in SETTINGS.iter().enumerate() {
        // After the command's own arguments (`--repo`), in the table's order.
        let arg = || def.arg().display_order(DISPLAY_ORDER + place);
        command = match def.scope {
            Scope::Global => command.arg(arg().global(true)),
            scope => command.mut_subcommands(|sub| {
                if scope.subcommands().contains(&sub.get_name()) {
                    sub.arg(arg())
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

/// The identity provider's settings (A-5, issue 44) go together: `--oauth-issuer` needs the
/// public URL (the canonical MCP URL tokens are issued for is under it), and the others mean
/// nothing without it. Answers the group grants, parsed. Contacts nothing: an issuer that does
/// not answer at start is retried in the background.
pub fn check_oauth(
    settings: &Settings,
    subcommand: Option<&str>,
) -> Result<Vec<service::GroupGrant>> {
    if subcommand != Some("serve") {
        return Ok(Vec::new());
    }
    let Some(issuer) = &settings.oauth_issuer else {
        let stray = settings.oauth_audience.is_some()
            || settings.oauth_group_grants.is_some()
            || settings.oauth_prepare_groups.is_some()
            || settings.oauth_client_id.is_some()
            || settings.oauth_client_secret.is_some();
        if stray {
            anyhow::bail!(
                "--oauth-audience, --oauth-group-grant, --oauth-prepare-group, --oauth-client-id \
                 and CSG_OAUTH_CLIENT_SECRET apply only with --oauth-issuer (CSG_OAUTH_ISSUER); \
                 pass it too, or drop them"
            );
        }
        return Ok(Vec::new());
    };
    if settings.oauth_client_secret.is_some() && settings.oauth_client_id.is_none() {
        anyhow::bail!(
            "CSG_OAUTH_CLIENT_SECRET is the secret of the website's client: give its \
             --oauth-client-id (CSG_OAUTH_CLIENT_ID) too"
        );
    }
    if settings.public_url.is_none() {
        anyhow::bail!(
            "--oauth-issuer {issuer} needs --public-url (CSG_PUBLIC_URL): access tokens are \
             issued for this server's canonical MCP URL, <public URL>/sourcegraph/mcp, which \
             MCP clients also check"
        );
    }
    settings
        .oauth_group_grants
        .iter()
        .flatten()
        .map(|grant| {
            grant
                .parse::<service::GroupGrant>()
                .map_err(|why| anyhow::anyhow!("invalid --oauth-group-grant: {why}"))
        })
        .collect()
}

/// The shortest cluster secret accepted: guessing it must be out of reach.
const MIN_CLUSTER_SECRET_CHARS: usize = 32;

/// Cluster mode's settings go together: `serve` with `--database` needs the URL the other
/// replicas reach it at and the secret they share, and a replica that serves HTTPS
/// (`--cluster-tls-cert`) is reached at an `https://` node URL and only then; without
/// `--database` none of them means anything, and a stray one is most likely a deployment
/// mistake worth stopping for. Called at start, after [`resolve`] (which checks each setting
/// alone); the TLS files themselves are read when the replica joins.
pub fn check_cluster(settings: &Settings, subcommand: Option<&str>) -> Result<()> {
    if subcommand != Some("serve") {
        return Ok(());
    }
    let tls = settings.cluster_tls_cert.is_some()
        || settings.cluster_tls_key.is_some()
        || settings.cluster_ca.is_some()
        || settings.cluster_mtls;
    if settings.database.is_none() {
        if settings.node_url.is_some() || settings.cluster_secret.is_some() {
            anyhow::bail!(
                "--node-url and --cluster-secret (CSG_NODE_URL, CSG_CLUSTER_SECRET) apply only \
                 in cluster mode; pass --database (CSG_DATABASE_URL) too, or drop them"
            );
        }
        if tls {
            anyhow::bail!(
                "--cluster-tls-cert, --cluster-tls-key, --cluster-ca and --cluster-mtls \
                 (CSG_CLUSTER_TLS_CERT, …) apply only in cluster mode, between replicas; pass \
                 --database (CSG_DATABASE_URL) too, or drop them (HTTPS for clients is the \
                 balancer's job)"
            );
        }
        return Ok(());
    }
    if settings.node_url.is_none() {
        anyhow::bail!(
            "cluster mode (--database) needs --node-url (CSG_NODE_URL): the URL the other \
             replicas reach this one at, such as http://10.0.0.5:7878"
        );
    }
    match &settings.cluster_secret {
        None => anyhow::bail!(
            "cluster mode (--database) needs CSG_CLUSTER_SECRET: the same secret of at least \
             {MIN_CLUSTER_SECRET_CHARS} characters on every replica (e.g. `openssl rand -hex 32`)"
        ),
        Some(secret) if secret.expose().chars().count() < MIN_CLUSTER_SECRET_CHARS => {
            anyhow::bail!(
                "CSG_CLUSTER_SECRET is too short: use at least {MIN_CLUSTER_SECRET_CHARS} \
                 characters (e.g. `openssl rand -hex 32`)"
            )
        }
        Some(_) => {}
    }
    let https = settings
        .node_url
        .as_deref()
        .is_some_and(|url| url.trim().to_ascii_lowercase().starts_with("https://"));
    match (settings.cluster_tls_cert.is_some(), https) {
        (true, false) => anyhow::bail!(
            "with --cluster-tls-cert this replica serves HTTPS only: its --node-url \
             (CSG_NODE_URL) must start with https://, such as https://csg-1.example.internal:7878"
        ),
        (false, true) => anyhow::bail!(
            "--node-url (CSG_NODE_URL) starts with https://, but this replica has no \
             --cluster-tls-cert to serve HTTPS with; give it --cluster-tls-cert, \
             --cluster-tls-key and --cluster-ca, or use an http:// node URL"
        ),
        _ => Ok(()),
    }
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

/// The fuzz target `config` (`fuzz/`, issue 43; the fuzz crate includes this module by path,
/// and `fuzz_corpus` below replays its corpus in CI): a `--config` file's text read by the
/// same table as [`resolve`] and each value applied as there (every other setting at its
/// default), then the start's checks that need no network: cluster mode's settings, the
/// identity provider's, the trusted proxies, the node URL. An error is an answer; a panic is a finding.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn fuzz_config_file(text: &str) -> Result<Settings> {
    let mut file = FileValues {
        values: FileValues::parse(text)?,
    };
    let mut settings = Settings::BLANK;
    for def in SETTINGS.iter() {
        match file.values.remove(def.key) {
            Some(input) if def.in_file => def.apply(&mut settings, input)?,
            _ => def.apply_default(&mut settings)?,
        }
    }
    check_cluster(&settings, Some("serve"))?;
    check_oauth(&settings, Some("serve"))?;
    let proxies = settings
        .trusted_proxies
        .iter()
        .flatten()
        .map(String::as_str);
    httpserver::TrustedProxies::from_values(proxies).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(url) = &settings.node_url {
        cluster::NodeUrl::parse(url).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(settings)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::{DEFAULT_LISTEN, DefaultValue, Field};
    use std::collections::HashMap;
    use std::time::Duration;

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
            Field::Path(_) | Field::Text(_) | Field::Secret(_) | Field::List(_) => None,
            _ => Some("bogus"),
        }
    }

    /// A TOML line setting `def` to a valid value other than its default.
    fn toml_sample(def: &Def) -> String {
        let value = match def.field {
            Field::Path(_) => "\"/sample\"".to_owned(),
            Field::Text(_) => "\"https://sample.example\"".to_owned(),
            Field::Secret(_) => "\"postgres://u:p@sample.example/db\"".to_owned(),
            Field::Listen(_) => "\"127.0.0.1:1\"".to_owned(),
            Field::Choice(choices, _) => format!("\"{}\"", choices[choices.len() - 1]),
            // Never the default.
            Field::Bool(_) => match def.default {
                DefaultValue::Value(value) if value() == "false" => "true".to_owned(),
                _ => "false".to_owned(),
            },
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
            Field::Secret(field) => format!("{:?}", field(settings).as_ref().map(|s| s.expose())),
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

    /// Issue 31: cluster mode's settings go together, and neither the database password nor
    /// the cluster secret is ever repeated in an error or `Debug` output.
    #[test]
    fn a5_identity_provider_settings_go_together() {
        let check = |args: &[&str], env: &[(&str, &str)]| {
            let settings = resolve_with(args, env)?;
            check_oauth(&settings, args.first().copied())
        };
        let issuer = ("CSG_OAUTH_ISSUER", "https://id.example.org/realms/acme");
        let error = check(&["serve"], &[issuer]).unwrap_err().to_string();
        assert!(error.contains("needs --public-url"), "{error}");
        let public = ("CSG_PUBLIC_URL", "https://csg.example.org");
        assert_eq!(check(&["serve"], &[issuer, public]).unwrap(), []);
        let grants = check(
            &[
                "serve",
                "--oauth-group-grant",
                "eng=acme/*",
                "--oauth-group-grant",
                "*=docs",
            ],
            &[issuer, public],
        )
        .unwrap();
        assert_eq!(grants.len(), 2);
        assert_eq!(
            (grants[1].group.as_str(), grants[1].repo.as_str()),
            ("*", "docs")
        );
        let error = check(&["serve", "--oauth-group-grant", "eng"], &[issuer, public])
            .unwrap_err()
            .to_string();
        assert!(error.contains("GROUP=REPO"), "{error}");
        let error = check(&["serve", "--oauth-prepare-group", "ops"], &[public])
            .unwrap_err()
            .to_string();
        assert!(error.contains("only with --oauth-issuer"), "{error}");
        // Other commands ignore them.
        assert_eq!(check(&["repo", "list"], &[]).unwrap(), []);
    }

    #[test]
    fn cluster_settings_go_together_and_stay_secret() {
        let resolve_with = |args: &[&str], env: &[(&str, &str)]| {
            let settings = resolve_with(args, env)?;
            check_cluster(&settings, args.first().copied()).map(|()| settings)
        };
        let url = "postgres://csg:hunter2-password@127.0.0.1:5432/csg";
        let secret = "s".repeat(40);
        let database = [("CSG_DATABASE_URL", url)];
        let error = resolve_with(&["serve"], &database).unwrap_err().to_string();
        assert!(error.contains("needs --node-url"), "{error}");
        let with_node = [
            ("CSG_DATABASE_URL", url),
            ("CSG_NODE_URL", "http://10.0.0.5:7878"),
        ];
        let error = resolve_with(&["serve"], &with_node)
            .unwrap_err()
            .to_string();
        assert!(error.contains("needs CSG_CLUSTER_SECRET"), "{error}");
        let short = [
            ("CSG_DATABASE_URL", url),
            ("CSG_NODE_URL", "http://10.0.0.5:7878"),
            ("CSG_CLUSTER_SECRET", "short-secret"),
        ];
        let error = resolve_with(&["serve"], &short).unwrap_err().to_string();
        assert!(error.contains("too short"), "{error}");
        assert!(!error.contains("short-secret"), "{error}");
        let complete = [
            ("CSG_DATABASE_URL", url),
            ("CSG_NODE_URL", "http://10.0.0.5:7878"),
            ("CSG_CLUSTER_SECRET", secret.as_str()),
        ];
        let settings = resolve_with(&["serve"], &complete).unwrap();
        assert_eq!(
            settings.database.as_ref().map(|url| url.expose()),
            Some(url)
        );
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains(&secret),
            "{shown}"
        );
        // The admin commands take the database alone.
        assert!(resolve_with(&["repo", "list"], &database).is_ok());
        // Without the database, the cluster-only settings are a mistake worth stopping for.
        let stray = [("CSG_NODE_URL", "http://10.0.0.5:7878")];
        let error = resolve_with(&["serve"], &stray).unwrap_err().to_string();
        assert!(error.contains("apply only in cluster mode"), "{error}");
        let stray = [("CSG_CLUSTER_CA", "/etc/csg/ca.pem")];
        let error = resolve_with(&["serve"], &stray).unwrap_err().to_string();
        assert!(error.contains("apply only in cluster mode"), "{error}");
        // O-10: a replica that serves HTTPS is reached at an https:// node URL, and only then.
        let tls = [
            ("CSG_DATABASE_URL", url),
            ("CSG_CLUSTER_SECRET", secret.as_str()),
            ("CSG_CLUSTER_TLS_CERT", "/etc/csg/replica.pem"),
            ("CSG_CLUSTER_TLS_KEY", "/etc/csg/replica.key"),
            ("CSG_CLUSTER_CA", "/etc/csg/ca.pem"),
            ("CSG_CLUSTER_MTLS", "true"),
        ];
        let plain_node = [&tls[..], &[("CSG_NODE_URL", "http://10.0.0.5:7878")]].concat();
        let error = resolve_with(&["serve"], &plain_node)
            .unwrap_err()
            .to_string();
        assert!(error.contains("must start with https://"), "{error}");
        let node = [&tls[..], &[("CSG_NODE_URL", "https://10.0.0.5:7878")]].concat();
        let settings = resolve_with(&["serve"], &node).unwrap();
        assert!(settings.cluster_mtls);
        let https_only = [
            ("CSG_DATABASE_URL", url),
            ("CSG_CLUSTER_SECRET", secret.as_str()),
            ("CSG_NODE_URL", "https://10.0.0.5:7878"),
        ];
        let error = resolve_with(&["serve"], &https_only)
            .unwrap_err()
            .to_string();
        assert!(error.contains("no --cluster-tls-cert"), "{error}");
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
            history_depth: 0,
            blob_cache_bytes: gitstore::DEFAULT_BLOB_CACHE_BYTES,
            max_text_bytes: gitstore::DEFAULT_MAX_TEXT_BYTES as usize,
            sync_interval: Duration::from_secs(60),
            max_searches: service.max_concurrent_searches,
            heavy_calls: service.heavy_calls,
            shutdown_grace: Duration::from_secs(10),
            listen: DEFAULT_LISTEN.parse().unwrap(),
            public_url: None,
            allowed_hosts: None,
            allowed_origins: None,
            public_read: service.public_read,
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
            oauth_groups_claim: Some("groups".to_owned()),
            oauth_group_grants: None,
            oauth_prepare_groups: None,
            oauth_client_id: None,
            oauth_client_secret: None,
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
            // `--database` is a URL, as its key and variable say (issue 31's interface).
            let flag = def.key.replace('_', "-");
            let plural = match def.flag.strip_suffix('y') {
                Some(stem) => format!("{stem}ies"),
                None => format!("{}s", def.flag),
            };
            assert!(
                def.flag == flag || plural == flag || format!("{}-url", def.flag) == flag,
                "{}",
                def.flag
            );
        }

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.toml");
        let config = path.to_str().unwrap();
        let defaults = resolve_with(&["serve"], &[]).unwrap();
        // As many fields as settings (each field's line in `{:#?}` is indented once and names
        // it; a `Some(` value's closing line is indented once too).
        let fields = format!("{defaults:#?}")
            .lines()
            .filter(|line| {
                line.strip_prefix("    ")
                    .and_then(|rest| rest.split_once(':'))
                    .is_some_and(|(name, _)| {
                        !name.is_empty()
                            && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                    })
            })
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

/// CI's replay of the fuzz target `config` (issue 43): every committed corpus input and
/// every regression input (`fuzz/corpus/config/`, `fuzz/regressions/config/`) through
/// [`fuzz_config_file`], each well within its bound.
#[cfg(test)]
mod fuzz_corpus {
    #[test]
    fn fuzz_config_corpus_replays() {
        testgit::fuzz::replay("config", |data| {
            let _ = super::fuzz_config_file(&String::from_utf8_lossy(data));
        });
    }
}
