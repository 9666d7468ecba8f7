//! `csg`: the Context Source Graph binary. It parses the command line, layers the settings
//! (flags > `CSG_*` env > `--config` TOML > defaults) and wires the crates together; the
//! work itself lives in the library crates.

mod config;
mod index;
mod plugins;
mod progress;
mod repos;
mod users;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use config::{DEFAULT_LISTEN, FileConfig, Setting};
use gitstore::{GitStore, RepoName, StoreConfig, SystemClock};
use service::{ConnectionPlugins, Service, ServiceConfig};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Context Source Graph: commit-pinned code context for AI agents over MCP and HTTP.
#[derive(Debug, Parser)]
#[command(name = "csg", version, about)]
struct Cli {
    /// Data directory (SQLite metadata, mirrors). Default: $XDG_DATA_HOME/csg or
    /// ~/.local/share/csg.
    #[arg(long, global = true, env = "CSG_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// TOML configuration file (lowest precedence above the defaults).
    #[arg(long, global = true, env = "CSG_CONFIG")]
    config: Option<PathBuf>,
    /// Log format: `text` or `json`.
    #[arg(long, global = true, env = "CSG_LOG_FORMAT")]
    log_format: Option<String>,
    /// Retention window of former branch heads, in days (G-5; default 30).
    #[arg(long, global = true, env = "CSG_RETENTION_DAYS")]
    retention_days: Option<u64>,
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

/// Options shared by `serve` and `mcp`.
#[derive(Debug, clap::Args)]
struct ReadOptions {
    /// Register (or reuse) and sync a repository before serving: `[NAME=]PATH_OR_URL`.
    /// Without NAME a local path is named `local/<directory name>`. Repeatable.
    #[arg(long = "repo", value_name = "[NAME=]PATH_OR_URL")]
    repos: Vec<String>,
    /// Body bytes one `read` may return (default 262144).
    #[arg(long, env = "CSG_READ_BUDGET_BYTES")]
    read_budget_bytes: Option<usize>,
    /// Body bytes one `read_many` shares across its items (default 524288).
    #[arg(long, env = "CSG_BATCH_BUDGET_BYTES")]
    batch_budget_bytes: Option<usize>,
    /// Items one `read_many` may ask for (default 50).
    #[arg(long, env = "CSG_MAX_BATCH_ITEMS")]
    max_batch_items: Option<usize>,
    /// A single line longer than this is cut inside the line (default 1048576).
    #[arg(long, env = "CSG_LINE_CAP_BYTES")]
    line_cap_bytes: Option<usize>,
    /// Files larger than this are searchable by path only (default 1048576).
    #[arg(long, env = "CSG_INDEX_MAX_FILE_BYTES")]
    index_max_file_bytes: Option<u64>,
    /// Bytes of decoded file text kept for repeat and continuation reads (default 67108864;
    /// 0 turns the cache off).
    #[arg(long, env = "CSG_BLOB_CACHE_BYTES")]
    blob_cache_bytes: Option<usize>,
    /// How often every repository is fetched and re-indexed (default 60s).
    #[arg(long, env = "CSG_SYNC_INTERVAL")]
    sync_interval: Option<String>,
    /// Searches that run at once; a further one waits briefly, then is refused as busy
    /// (default: twice the number of cores).
    #[arg(long, env = "CSG_MAX_SEARCHES")]
    max_searches: Option<usize>,
    /// On SIGTERM/Ctrl-C, how long in-flight calls and maintenance may take to finish before
    /// running git commands are killed and the process exits (default 10s).
    #[arg(long, env = "CSG_SHUTDOWN_GRACE")]
    shutdown_grace: Option<String>,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:7878; port 0 picks a free one).
    #[arg(long, env = "CSG_LISTEN")]
    listen: Option<String>,
    /// The public URL of this deployment (e.g. https://csg.example.org), used in the
    /// printed client configuration, on the access page and in the Origin/Host allow-lists.
    #[arg(long, env = "CSG_PUBLIC_URL")]
    public_url: Option<String>,
    /// Allowed `Host` header values for MCP (DNS-rebinding protection). Default: loopback
    /// names, plus the public URL's host. Without a public URL the access page names the
    /// origin a visitor reached only for these. Repeatable or comma-separated.
    #[arg(
        long = "allowed-host",
        env = "CSG_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
    /// Allowed browser `Origin`s for MCP. Default: this server's own loopback origins and the
    /// public URL. Repeatable or comma-separated.
    #[arg(
        long = "allowed-origin",
        env = "CSG_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,
    /// Whether callers without a token may read public repositories (A-2; default true).
    /// Private repositories always need a granted user's token.
    #[arg(long, env = "CSG_PUBLIC_READ")]
    public_read: Option<bool>,
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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("csg: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let file = match &cli.config {
        Some(path) => FileConfig::load(path)?,
        None => FileConfig::default(),
    };
    init_tracing(cli.log_format.as_deref().or(file.log_format.as_deref()))?;
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
        let store = || open_store(&cli.data_dir, cli.retention_days, &file);
        match cli.command {
            Command::Serve(args) => {
                let settings = RunSettings::new(&args.read, &file)?;
                let store = store()?;
                settings.apply_to(&store);
                serve(store, &file, args, settings, signal.clone()).await
            }
            Command::Mcp(args) => {
                let settings = RunSettings::new(&args.read, &file)?;
                let store = store()?;
                settings.apply_to(&store);
                mcp(store, args, settings, signal.clone()).await
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

fn init_tracing(format: Option<&str>) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CSG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // Logs go to stderr: stdout carries the MCP protocol under `csg mcp`.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colour codes only for a person at a terminal, never into a log file or collector.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format.unwrap_or("text") {
        "text" => builder.init(),
        "json" => builder.json().init(),
        other => anyhow::bail!("invalid log format `{other}`: use `text` or `json`"),
    }
    Ok(())
}

/// Longest retention window `--retention-days` accepts (about 100 years): longer ones would
/// overflow time arithmetic.
const MAX_RETENTION_DAYS: u64 = 36_500;

fn open_store(
    data_dir: &Option<PathBuf>,
    retention_days: Option<u64>,
    file: &FileConfig,
) -> Result<GitStore> {
    let days = Setting::new("--retention-days", "CSG_RETENTION_DAYS", "retention_days").in_range(
        retention_days.or(file.retention_days).unwrap_or(30),
        0,
        MAX_RETENTION_DAYS,
    )?;
    let data_dir = match data_dir.clone().or_else(|| file.data_dir.clone()) {
        Some(dir) => dir,
        None => config::default_data_dir()?,
    };
    let config = StoreConfig {
        data_dir: data_dir.clone(),
        retention: Duration::from_secs(days * 86_400),
    };
    GitStore::open(config, Arc::new(SystemClock))
        .with_context(|| format!("cannot open the data directory {}", data_dir.display()))
}

/// The settings of `serve` and `mcp`, layered and validated before anything starts (O-3): a
/// zero budget or interval is refused at start with the setting's name, never met later as a
/// panic in a background task.
struct RunSettings {
    service: ServiceConfig,
    /// How often maintenance syncs and re-indexes (G-3; default 60 s).
    sync_interval: Duration,
    /// How long in-flight work may finish after a signal (O-6; default 10 s).
    shutdown_grace: Duration,
    /// Bound of the store's decoded-blob cache (0 = off).
    blob_cache_bytes: usize,
}

impl RunSettings {
    fn new(read: &ReadOptions, file: &FileConfig) -> Result<Self> {
        let defaults = ServiceConfig::default();
        let positive = |setting: Setting, value: Option<usize>, default: usize| {
            setting.in_range(value.unwrap_or(default), 1, usize::MAX)
        };
        let read_budget = positive(
            Setting::new(
                "--read-budget-bytes",
                "CSG_READ_BUDGET_BYTES",
                "read_budget_bytes",
            ),
            read.read_budget_bytes.or(file.read_budget_bytes),
            defaults.read_budget,
        )?;
        let batch_budget = positive(
            Setting::new(
                "--batch-budget-bytes",
                "CSG_BATCH_BUDGET_BYTES",
                "batch_budget_bytes",
            ),
            read.batch_budget_bytes.or(file.batch_budget_bytes),
            defaults.batch_budget,
        )?;
        let max_batch_items = positive(
            Setting::new(
                "--max-batch-items",
                "CSG_MAX_BATCH_ITEMS",
                "max_batch_items",
            ),
            read.max_batch_items.or(file.max_batch_items),
            defaults.max_batch_items,
        )?;
        let line_cap = positive(
            Setting::new("--line-cap-bytes", "CSG_LINE_CAP_BYTES", "line_cap_bytes"),
            read.line_cap_bytes.or(file.line_cap_bytes),
            defaults.line_cap,
        )?;
        let max_file_bytes = Setting::new(
            "--index-max-file-bytes",
            "CSG_INDEX_MAX_FILE_BYTES",
            "index_max_file_bytes",
        )
        .in_range(
            read.index_max_file_bytes
                .or(file.index_max_file_bytes)
                .unwrap_or(defaults.index.max_file_bytes),
            1,
            u64::MAX,
        )?;
        let max_concurrent_searches =
            Setting::new("--max-searches", "CSG_MAX_SEARCHES", "max_searches").in_range(
                read.max_searches
                    .or(file.max_searches)
                    .unwrap_or(defaults.max_concurrent_searches),
                1,
                service::MAX_CONCURRENT_SEARCHES,
            )?;
        let blob_cache_bytes = Setting::new(
            "--blob-cache-bytes",
            "CSG_BLOB_CACHE_BYTES",
            "blob_cache_bytes",
        )
        .in_range(
            read.blob_cache_bytes
                .or(file.blob_cache_bytes)
                .unwrap_or(gitstore::DEFAULT_BLOB_CACHE_BYTES),
            0,
            usize::MAX,
        )?;
        let sync_interval = match read
            .sync_interval
            .as_deref()
            .or(file.sync_interval.as_deref())
        {
            Some(text) => Setting::new("--sync-interval", "CSG_SYNC_INTERVAL", "sync_interval")
                .duration(
                    text,
                    Duration::from_millis(1),
                    Duration::from_secs(30 * 86_400),
                )?,
            None => Duration::from_secs(60),
        };
        let shutdown_grace = match read
            .shutdown_grace
            .as_deref()
            .or(file.shutdown_grace.as_deref())
        {
            Some(text) => Setting::new("--shutdown-grace", "CSG_SHUTDOWN_GRACE", "shutdown_grace")
                .duration(text, Duration::ZERO, Duration::from_secs(3600))?,
            None => Duration::from_secs(10),
        };
        // Repository-plugin budgets come from SOURCEGRAPH_PLUGINS_* only (seed 000), read once.
        let plugins = wasmplugin::PluginConfig::from_env()?;
        Ok(Self {
            service: ServiceConfig {
                read_budget,
                batch_budget,
                max_batch_items,
                line_cap,
                max_concurrent_searches,
                plugins,
                index: service::IndexConfig {
                    max_file_bytes,
                    ..defaults.index.clone()
                },
                ..defaults
            },
            sync_interval,
            shutdown_grace,
            blob_cache_bytes,
        })
    }

    /// Applies the store-side settings to `store` (opened before the settings were read).
    fn apply_to(&self, store: &GitStore) {
        store.set_blob_cache_bytes(self.blob_cache_bytes);
    }
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
        progress(&format!("syncing {name} …"));
        match service.sync(name.to_string()).await {
            Ok(outcome) => {
                let head = outcome
                    .head
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "(no commits)".into());
                progress(&format!("synced {name} at {head}"));
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
fn progress(message: &str) {
    eprintln!("csg: {message}");
}

async fn serve(
    store: GitStore,
    file: &FileConfig,
    args: ServeArgs,
    settings: RunSettings,
    signal: CancellationToken,
) -> Result<()> {
    let mut config = settings.service.clone();
    config.public_read = args.public_read.or(file.public_read).unwrap_or(true);
    let service = plugins::service(store, config, "http").await?;
    let listen = args
        .listen
        .clone()
        .or_else(|| file.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.into());
    let addr = config::parse_listen(&listen)?;
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
    let public_url = args.public_url.clone().or_else(|| file.public_url.clone());
    let site = repos::site_origin(bound, public_url.as_deref())?;
    let hosts = if args.allowed_hosts.is_empty() {
        file.allowed_hosts
            .clone()
            .unwrap_or_else(|| repos::default_allowed_hosts(bound, public_url.as_deref()))
    } else {
        args.allowed_hosts.clone()
    };
    let origins = if args.allowed_origins.is_empty() {
        file.allowed_origins
            .clone()
            .unwrap_or_else(|| repos::default_allowed_origins(bound, public_url.as_deref()))
    } else {
        args.allowed_origins.clone()
    };

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
    // who calls, for the API, MCP and the site alike.
    let app = httpserver::with_access(app, service.clone(), &site_config);

    let (stop_maintenance, maintenance_signal) = tokio::sync::watch::channel(false);
    let mut maintenance =
        service::spawn_maintenance(service.clone(), settings.sync_interval, maintenance_signal);
    readiness.set_ready();
    print!("{}", repos::startup_banner(&site, !service.public_read()));

    let grace = settings.shutdown_grace;
    let stop_accepting = signal.clone();
    let mut server = std::pin::pin!(httpserver::serve(listener, app, async move {
        stop_accepting.cancelled().await;
    }));
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
    // O-6: in-flight calls and the maintenance round get the grace period; whatever still
    // runs after it is stopped by run() (git killed, blocking work abandoned).
    let drained = tokio::time::timeout(grace, async {
        let served = (&mut server).await;
        let _ = (&mut maintenance).await;
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
    settings: RunSettings,
    signal: CancellationToken,
) -> Result<()> {
    let plugins = ConnectionPlugins::parse(Some(&args.plugins))?;
    let service = plugins::service(store, settings.service, "stdio").await?;
    tokio::select! {
        registered = register_repos(&service, &args.read.repos) => registered?,
        () = signal.cancelled() => return Ok(()),
    }
    // Sync, indexing and plugin preparation run beside the session, as under `serve`.
    let (stop_maintenance, maintenance_signal) = tokio::sync::watch::channel(false);
    let maintenance =
        service::spawn_maintenance(service.clone(), settings.sync_interval, maintenance_signal);
    let session = tokio::select! {
        session = mcpserver::serve_stdio(service, plugins) => {
            session.context("the stdio MCP session failed")
        }
        () = signal.cancelled() => Ok(()),
    };
    let _ = stop_maintenance.send(true);
    let _ = tokio::time::timeout(settings.shutdown_grace, maintenance).await;
    session
}

/// Parses a repository name given on the command line.
fn repo_name(name: &str) -> Result<RepoName> {
    Ok(RepoName::parse(name)?)
}
