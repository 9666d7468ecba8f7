//! `csg`: the Context Source Graph binary. It parses the command line, layers the settings
//! (flags > `CSG_*` env > `--config` TOML > defaults, each defined once in `settings.rs`) and
//! wires the crates together; the work itself lives in the library crates.

mod clustered;
mod config;
mod index;
mod plugins;
mod progress;
#[cfg(test)]
mod readme;
mod repos;
mod server_plugin_env;
mod setting;
mod settings;
mod users;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use gitstore::{GitStore, Metadata, RepoName, StoreConfig, SystemClock};
use service::{ConnectionPlugins, Service, ServiceConfig};
use setting::Settings;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

// The commands and their own arguments; the settings (`--data-dir`, `--listen`, the budgets,
// …) are added from `settings::SETTINGS` by `config::command`.
/// Context Source Graph: commit-pinned code context for AI agents over MCP and HTTP.
#[derive(Debug, Parser)]
#[command(name = "csg", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP (Streamable HTTP), the JSON API and health probes.
    Serve(ServeArgs),
    /// Serve MCP over stdio for a local client.
    Mcp(McpArgs),
    /// Manage registered repositories.
    #[command(subcommand)]
    Repo(RepoCommand),
    /// Manage the search indexes of a running server.
    #[command(subcommand)]
    Index(IndexCommand),
    /// Server plugins (operator Python files): check, reference, example, reload, status.
    #[command(subcommand)]
    Plugins(plugins::PluginsCommand),
    /// Manage users and their `prepare` capability.
    #[command(subcommand)]
    User(users::UserCommand),
    /// Manage personal API tokens: shown once at creation, stored hashed.
    #[command(subcommand)]
    Token(users::TokenCommand),
    /// Grant a user read on a private repository, or take it back with --remove.
    Grant(users::GrantArgs),
}

#[derive(Debug, Subcommand)]
enum IndexCommand {
    /// Rebuild search indexes from scratch on a running server (progress on a terminal).
    Rebuild {
        /// `owner/name`; omitted: every repository of the server.
        repo: Option<String>,
        /// The server's base URL (token from SOURCEGRAPH_API_TOKEN, if it needs one).
        #[arg(long, env = "CSG_SERVER", default_value = index::DEFAULT_SERVER)]
        server: String,
    },
}

/// Arguments shared by `serve` and `mcp` (their settings come from `settings::SETTINGS`).
#[derive(Debug, clap::Args)]
struct ReadOptions {
    /// Register (or reuse) and sync a repository before serving: `[NAME=]PATH_OR_URL`.
    /// Without NAME a local path is named `local/<directory name>`. Repeatable.
    #[arg(long = "repo", value_name = "[NAME=]PATH_OR_URL")]
    repos: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    read: ReadOptions,
}

#[derive(Debug, clap::Args)]
struct McpArgs {
    /// The connection parameter `plugins` (M-2): `auto`, `off` or `a,b`.
    #[arg(long, default_value = "auto")]
    plugins: String,
    #[command(flatten)]
    read: ReadOptions,
}

#[derive(Debug, Subcommand)]
enum RepoCommand {
    /// Register a repository and sync it.
    ///
    /// With --database (cluster mode) the source is checked first (`git ls-remote`), nothing
    /// is cloned here, and the command waits until an owner replica has fetched it.
    Add {
        /// `owner/name`.
        name: String,
        /// A Git URL (https, ssh, file://) or a local path.
        source: String,
        /// Registered path: only this directory is visible (monorepo scope).
        #[arg(long)]
        path: Option<String>,
        /// Default branch (default: the source's HEAD).
        #[arg(long)]
        branch: Option<String>,
        /// Readable only by users granted it (`csg grant USER NAME`), never anonymously.
        #[arg(long)]
        private: bool,
        /// Also keep search fast on the branches matching PATTERN (S-8): a branch name or a
        /// glob (`release/*`: `*` within a segment, `**` across). Repeatable, at most 64;
        /// default the default branch only. Given again, replaces the patterns.
        #[arg(long = "index-branch", value_name = "PATTERN")]
        index_branch: Vec<String>,
        /// Return once the registration is recorded and print `NAME -`: the replicas that
        /// own it (without --database, the server's next maintenance round) fetch it.
        #[arg(long)]
        no_wait: bool,
        /// Cluster mode: how long to wait for an owner replica to fetch it, in seconds; past
        /// it the command fails and the registration stays.
        #[arg(long, value_name = "SECONDS", default_value_t = 600)]
        wait_timeout: u64,
    },
    /// Make a repository `private` or `public`; every server sees it on its next call.
    Visibility {
        /// `owner/name`.
        name: String,
        /// `private` or `public`.
        #[arg(value_parser = ["private", "public"])]
        visibility: String,
    },
    /// List registered repositories and their sync state.
    List,
    /// Fetch a repository now.
    Sync { name: String },
    /// Remove a registration and its mirror.
    Remove { name: String },
}

/// The command line: the derived commands with every setting's argument.
fn cli_command() -> clap::Command {
    config::command(Cli::command())
}

fn main() -> std::process::ExitCode {
    // Repository plugins compile in a child that is this program again, so a compile can be
    // stopped part-way (O-9); it needs none of the rest.
    if let Some(code) = wasmplugin::runtime::compile_child_if_asked() {
        return code;
    }
    let mut command = cli_command();
    let matches = command.clone().get_matches();
    let cli =
        Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.format(&mut command).exit());
    match run(cli, &matches) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("csg: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli, matches: &clap::ArgMatches) -> Result<()> {
    // Every setting of this command is read and checked here, before anything starts (O-3).
    let settings = config::resolve(matches, &|name| std::env::var_os(name))?;
    config::check_cluster(&settings, matches.subcommand_name())?;
    let group_grants = config::check_oauth(&settings, matches.subcommand_name())?;
    init_tracing(settings.log_format)?;
    // `csg mcp` serves one client over one pipe: a single-threaded runtime answers it with
    // no wake-ups between worker threads (its Git work and maintenance still go to the
    // blocking pool when they are not cheap). Everything else gets a worker per core.
    let mut builder = match cli.command {
        Command::Mcp(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // SIGTERM/Ctrl-C, from the very start: a signal during a start-up clone must stop it too.
    let signal = CancellationToken::new();
    let result = runtime.block_on(async {
        let cancel = signal.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            cancel.cancel();
        });
        let store = || open_store(&settings);
        match cli.command {
            Command::Serve(args) => {
                let wiring = Wiring::new(&settings, &group_grants)?;
                let store = store()?;
                wiring.apply_to(&store);
                serve(store, &settings, args, wiring, signal.clone()).await
            }
            Command::Mcp(args) => {
                let wiring = Wiring::new(&settings, &group_grants)?;
                let store = store()?;
                wiring.apply_to(&store);
                mcp(store, args, wiring, signal.clone()).await
            }
            Command::User(command) => users::user(&store()?, command),
            Command::Token(command) => users::token(&store()?, command),
            Command::Grant(args) => users::grant(&store()?, args),
            Command::Repo(command) => {
                let store = store()?;
                tokio::select! {
                    result = repos::run(store, command) => result,
                    () = signal.cancelled() => Err(anyhow::anyhow!("interrupted")),
                }
            }
            // Needs no data directory: a dry-run, the reference texts, or a running server.
            Command::Plugins(command) => {
                tokio::select! {
                    result = plugins::run(command) => result,
                    () = signal.cancelled() => Err(anyhow::anyhow!("interrupted")),
                }
            }
            // Reaches a running server; the data directory is the server's business.
            Command::Index(IndexCommand::Rebuild { repo, server }) => {
                tokio::select! {
                    result = index::rebuild(&server, repo) => result,
                    () = signal.cancelled() => Err(anyhow::anyhow!("interrupted")),
                }
            }
        }
    });
    // O-6: whatever still runs now is done with or past its drain period. Running git
    // commands are killed (with their helpers; their lock files removed), and blocking work
    // (an index build, a long search) is not waited for.
    gitstore::stop_git();
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

/// The log filter without `CSG_LOG`: our own events at info; rmcp's session life-cycle
/// events ("service initialized", "serve finished"), which stateless Streamable HTTP emits
/// for every POST, only from warn (`CSG_LOG=info` brings them back).
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

fn init_tracing(format: &str) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CSG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // Logs go to stderr: stdout carries the MCP protocol under `csg mcp`.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colour codes only for a person at a terminal, never into a log file or collector.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    // `settings` accepted only these two.
    match format {
        "json" => builder.json().init(),
        _ => builder.init(),
    }
    Ok(())
}

/// Opens the data directory the settings name.
fn open_store(settings: &Settings) -> Result<GitStore> {
    let data_dir = match settings.data_dir.clone() {
        Some(dir) => dir,
        None => config::default_data_dir()?,
    };
    let config = StoreConfig {
        data_dir: data_dir.clone(),
        retention: Duration::from_secs(settings.retention_days * 86_400),
    };
    let metadata = match &settings.database {
        None => Metadata::Sqlite,
        Some(url) => Metadata::Postgres(
            metadb::Database::connect(url.expose(), metadb::Options::default())
                .context("cannot open the cluster's metadata database (--database)")?,
        ),
    };
    GitStore::open_with(config, Arc::new(SystemClock), metadata)
        .with_context(|| format!("cannot open the data directory {}", data_dir.display()))
}

/// What `serve` and `mcp` hand the library crates, made from the validated [`Settings`]
/// and the plugin hosts' environment before anything starts (O-3): a bad value is refused at
/// start with the setting's name, never met later as a panic in a background task.
struct Wiring {
    service: ServiceConfig,
    /// How often maintenance syncs and re-indexes (G-3; default 60 s).
    sync_interval: Duration,
    /// How long in-flight work may finish after a signal (O-6; default 10 s).
    shutdown_grace: Duration,
    /// Bound of the store's decoded-blob cache (0 = off).
    blob_cache_bytes: usize,
    /// The store's text cap.
    max_text_bytes: usize,
}

impl Wiring {
    fn new(settings: &Settings, group_grants: &[service::GroupGrant]) -> Result<Self> {
        let defaults = ServiceConfig::default();
        // Repository-plugin budgets come from SOURCEGRAPH_PLUGINS_* only (seed 000), read once.
        let mut plugins = wasmplugin::PluginConfig::from_env()?;
        // Without it (no way to name this program) compiles run in-process, unstoppable.
        plugins.compiler = wasmplugin::runtime::CompileCommand::this_program().ok();
        // The server-plugin host reads SOURCEGRAPH_SERVER_PLUGINS_* when it starts; a bad value
        // is refused here already, before the data directory is opened.
        server_plugin_env::ServerPluginEnv::from_env()?;
        Ok(Self {
            service: ServiceConfig {
                read_budget: settings.read_budget_bytes,
                batch_budget: settings.batch_budget_bytes,
                max_batch_items: settings.max_batch_items,
                line_cap: settings.line_cap_bytes,
                max_concurrent_searches: settings.max_searches,
                heavy_calls: settings.heavy_calls,
                plugins,
                index: service::IndexConfig {
                    max_file_bytes: settings.index_max_file_bytes,
                    ..defaults.index.clone()
                },
                history_depth: (settings.history_depth > 0)
                    .then(|| usize::try_from(settings.history_depth).unwrap_or(usize::MAX)),
                identity: service::IdentityPolicy {
                    group_grants: group_grants.to_vec(),
                    prepare_groups: settings.oauth_prepare_groups.clone().unwrap_or_default(),
                },
                ..defaults
            },
            sync_interval: settings.sync_interval,
            shutdown_grace: settings.shutdown_grace,
            blob_cache_bytes: settings.blob_cache_bytes,
            max_text_bytes: settings.max_text_bytes,
        })
    }

    /// Applies the store-side settings to `store` (opened before the settings were read).
    fn apply_to(&self, store: &GitStore) {
        store.set_blob_cache_bytes(self.blob_cache_bytes);
        store.set_max_text_bytes(self.max_text_bytes as u64);
    }
}

/// The identity provider's side of the access layer (A-5, issue 44), if `--oauth-issuer` is
/// set: its keys are fetched in the background from now on (an unreachable provider is a
/// warning and a retry; its tokens are refused as "try again" meanwhile).
fn oauth_resource(settings: &Settings) -> Result<Option<httpserver::OAuthResource>> {
    let (Some(issuer), Some(public_url)) = (&settings.oauth_issuer, &settings.public_url) else {
        return Ok(None);
    };
    let public_url = public_url.trim_end_matches('/');
    let validator = oauth::Validator::new(oauth::OAuthConfig {
        issuer: issuer.clone(),
        audience: settings
            .oauth_audience
            .clone()
            .unwrap_or_else(|| format!("{public_url}/sourcegraph/mcp")),
        groups_claim: settings
            .oauth_groups_claim
            .clone()
            .unwrap_or_else(|| "groups".to_owned()),
    })?;
    validator.start();
    progress(&format!(
        "access tokens of the identity provider {issuer} are taken (scopes {})",
        oauth::SCOPES.join(", ")
    ));
    let resource = httpserver::OAuthResource::new(validator, public_url);
    let Some(id) = &settings.oauth_client_id else {
        return Ok(Some(resource));
    };
    progress(&format!(
        "the website signs in through the identity provider as client {id} (redirect URI \
         {public_url}{})",
        httpserver::CALLBACK_PATH
    ));
    Ok(Some(
        resource.with_web_client(oauth::WebClient {
            id: id.clone(),
            secret: settings
                .oauth_client_secret
                .as_ref()
                .map(|secret| secret.expose().to_owned()),
        }),
    ))
}

/// Registers (or reuses) and syncs every `--repo`.
async fn register_repos(service: &Service, specs: &[String]) -> Result<()> {
    for spec in specs {
        let registration = repos::registration_from_spec(spec)?;
        let name = registration.name.clone();
        service
            .register(service::RegisterRequest {
                name: name.to_string(),
                source: registration.source,
                registered_path: registration.registered_path.to_string(),
                branch: registration.branch,
                private: None,
            })
            .await?;
        // One line for a short transfer (issue 34 point 11): a long one also logs its
        // progress (after a quiet start, see `service::TenthLog`).
        let started = std::time::Instant::now();
        match service.sync(name.to_string()).await {
            Ok(outcome) => {
                let head = outcome
                    .head
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "(no commits)".into());
                progress(&format!(
                    "synced {name} at {head} in {} ms",
                    started.elapsed().as_millis()
                ));
            }
            Err(error) => {
                // A repository that synced before keeps serving its last good state (G-3).
                tracing::warn!(repo = %name, %error, "sync failed");
                eprintln!("csg: warning: {error}");
            }
        }
    }
    Ok(())
}

/// Start-up progress (O-5): on stderr, so it never mixes with a protocol on stdout.
pub(crate) fn progress(message: &str) {
    eprintln!("csg: {message}");
}

async fn serve(
    store: GitStore,
    settings: &Settings,
    args: ServeArgs,
    wiring: Wiring,
    signal: CancellationToken,
) -> Result<()> {
    let mut config = wiring.service.clone();
    config.public_read = settings.public_read;
    let service = plugins::service(store, config, "http").await?;
    let addr = settings.listen;
    // Checked before anything starts (O-3): a bad block is refused with its setting's name.
    let trusted_proxies = httpserver::TrustedProxies::from_values(
        settings
            .trusted_proxies
            .iter()
            .flatten()
            .map(String::as_str),
    )
    .map_err(|error| anyhow::anyhow!("invalid --trusted-proxy (CSG_TRUSTED_PROXIES): {error}"))?;
    // Cluster mode: placement first, so the start-up syncs below only fetch what this
    // replica owns.
    let replica = clustered::Replica::join(settings, &service).await?;
    tokio::select! {
        registered = register_repos(&service, &args.read.repos) => registered?,
        () = signal.cancelled() => {
            progress("interrupted during start-up; stopping");
            return Ok(());
        }
    }

    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr}; is another server using it? pass --listen")
    })?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let public_url = settings.public_url.clone();
    // O-10: a replica with --cluster-tls-cert serves HTTPS only; without a public URL its own
    // origins are https://.
    let https = |origin: String| match replica.as_ref().and_then(clustered::Replica::server_tls) {
        Some(_) if public_url.is_none() => origin.replacen("http://", "https://", 1),
        _ => origin,
    };
    let site = https(repos::site_origin(bound, public_url.as_deref())?);
    let hosts = settings
        .allowed_hosts
        .clone()
        .unwrap_or_else(|| repos::default_allowed_hosts(bound, public_url.as_deref()));
    let origins = settings.allowed_origins.clone().unwrap_or_else(|| {
        let origins = repos::default_allowed_origins(bound, public_url.as_deref());
        origins.into_iter().map(https).collect()
    });

    let readiness = httpserver::Readiness::default();
    // MCP sessions end when the signal arrives.
    let mcp = mcpserver::http_service(
        service.clone(),
        mcpserver::McpConfig {
            allowed_hosts: hosts.clone(),
            allowed_origins: origins,
        },
        signal.clone(),
    );
    let site_config = httpserver::SiteConfig {
        origin: site.clone(),
    };
    // M-6: the access page names the public URL when there is one, else the origin a visitor
    // reached, if the MCP endpoint would accept its Host.
    let connect = if public_url.is_some() {
        httpserver::ConnectOrigin::Fixed
    } else {
        httpserver::ConnectOrigin::RequestHost(hosts)
    };
    let app = httpserver::router(service.clone(), readiness.clone())
        .merge(httpserver::site_router_with_origin(
            service.clone(),
            &site_config,
            connect,
        ))
        .nest_service("/sourcegraph/mcp", mcp);
    // Issue 42: the API's body limit for the MCP endpoint too, inside the access layer (a
    // refused caller's body is never read).
    let app = httpserver::with_body_limit(app);
    // Issue 31, A-7: calls for repositories other replicas own go to them, credentials and
    // all; routed inside the access layer, so only once the caller is known and may read the
    // repository.
    let app = match &replica {
        Some(replica) => replica.route(app, service.clone())?,
        None => app,
    };
    // who calls, for the API, MCP and the site alike; the site's sign-in sessions
    // live in the access store, so they survive restarts and work on every replica.
    let options = httpserver::AccessOptions {
        sessions: service.access_store(),
        oauth: oauth_resource(settings)?,
    };
    let app = httpserver::with_access_options(app, service.clone(), &site_config, options);
    // outermost, the replica gate: the cluster's own routes answer only replicas, and a
    // call another replica forwarded is marked before anything else sees it.
    let app = match &replica {
        Some(replica) => replica.gate(app, service.clone())?,
        None => app,
    };

    let (stop_maintenance, maintenance_signal) = tokio::sync::watch::channel(false);
    let mut maintenance =
        service::spawn_maintenance(service.clone(), wiring.sync_interval, maintenance_signal);
    readiness.set_ready();
    print!("{}", repos::startup_banner(&site, !service.public_read()));

    let grace = wiring.shutdown_grace;
    let stop_accepting = signal.clone();
    let options = httpserver::ServeOptions {
        trusted_proxies,
        // O-10: a replica with --cluster-tls-cert serves HTTPS only.
        tls: replica.as_ref().and_then(clustered::Replica::server_tls),
        ..httpserver::ServeOptions::default()
    };
    let mut server = std::pin::pin!(httpserver::serve_with(
        listener,
        app,
        async move {
            stop_accepting.cancelled().await;
        },
        options
    ));
    tokio::select! {
        ended = &mut server => {
            let _ = stop_maintenance.send(true);
            return ended.context("the HTTP server failed");
        }
        () = signal.cancelled() => {}
    }
    progress(&format!(
        "shutting down; letting in-flight calls finish (up to {}s)",
        grace.as_secs_f64()
    ));
    let _ = stop_maintenance.send(true);
    // The other replicas take this one's repositories over now, not after its lease.
    let leaving = replica.map(|replica| tokio::spawn(replica.leave()));
    // O-6: in-flight calls and the maintenance round get the grace period; whatever still
    // runs after it is stopped by run() (git killed, blocking work abandoned).
    let drained = tokio::time::timeout(grace, async {
        let served = (&mut server).await;
        let _ = (&mut maintenance).await;
        if let Some(leaving) = leaving {
            let _ = leaving.await;
        }
        served
    })
    .await;
    match drained {
        Ok(served) => served.context("the HTTP server failed"),
        Err(_) => {
            progress(&format!(
                "in-flight work did not finish within {}s; stopping it",
                grace.as_secs_f64()
            ));
            Ok(())
        }
    }
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

async fn mcp(
    store: GitStore,
    args: McpArgs,
    wiring: Wiring,
    signal: CancellationToken,
) -> Result<()> {
    let plugins = ConnectionPlugins::parse(Some(&args.plugins))?;
    let service = plugins::service(store, wiring.service, "stdio").await?;
    tokio::select! {
        registered = register_repos(&service, &args.read.repos) => registered?,
        () = signal.cancelled() => return Ok(()),
    }
    // Sync, indexing and plugin preparation run beside the session, as under `serve`.
    let (stop_maintenance, maintenance_signal) = tokio::sync::watch::channel(false);
    let maintenance =
        service::spawn_maintenance(service.clone(), wiring.sync_interval, maintenance_signal);
    let session = tokio::select! {
        session = mcpserver::serve_stdio(service, plugins) => {
            session.context("the stdio MCP session failed")
        }
        () = signal.cancelled() => Ok(()),
    };
    let _ = stop_maintenance.send(true);
    let _ = tokio::time::timeout(wiring.shutdown_grace, maintenance).await;
    session
}

/// Parses a repository name given on the command line.
fn repo_name(name: &str) -> Result<RepoName> {
    Ok(RepoName::parse(name)?)
}
