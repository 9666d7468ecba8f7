//! `csg`: the Context Source Graph binary. It parses the command line, layers the settings
//! (flags > `CSG_*` env > `--config` TOML > defaults) and wires the crates together; the
//! work itself lives in the library crates.

mod config;
mod index;
mod repos;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use config::{DEFAULT_LISTEN, FileConfig};
use gitstore::{GitStore, RepoName, StoreConfig, SystemClock};
use service::{ConnectionPlugins, Service, ServiceConfig};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    /// How often every repository is fetched and re-indexed (default 60s).
    #[arg(long, env = "CSG_SYNC_INTERVAL")]
    sync_interval: Option<String>,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:7878; port 0 picks a free one).
    #[arg(long, env = "CSG_LISTEN")]
    listen: Option<String>,
    /// The public URL of this deployment (e.g. https://csg.example.org), used in the
    /// printed client configuration and the Origin/Host allow-lists.
    #[arg(long, env = "CSG_PUBLIC_URL")]
    public_url: Option<String>,
    /// Allowed `Host` header values for MCP (DNS-rebinding protection). Default: loopback
    /// names, plus the public URL's host. Repeatable or comma-separated.
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let store = || open_store(&cli.data_dir, cli.retention_days, &file);
        match cli.command {
            Command::Serve(args) => serve(store()?, &file, args).await,
            Command::Mcp(args) => mcp(store()?, &file, args).await,
            Command::Repo(command) => repos::run(store()?, command).await,
            // Reaches a running server; the data directory is the server's business.
            Command::Index(IndexCommand::Rebuild { repo, server }) => {
                index::rebuild(&server, repo).await
            }
        }
    })
}

fn init_tracing(format: Option<&str>) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CSG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Logs go to stderr: stdout carries the MCP protocol under `csg mcp`.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format.unwrap_or("text") {
        "text" => builder.init(),
        "json" => builder.json().init(),
        other => anyhow::bail!("invalid log format `{other}`: use `text` or `json`"),
    }
    Ok(())
}

fn open_store(
    data_dir: &Option<PathBuf>,
    retention_days: Option<u64>,
    file: &FileConfig,
) -> Result<GitStore> {
    let data_dir = match data_dir.clone().or_else(|| file.data_dir.clone()) {
        Some(dir) => dir,
        None => config::default_data_dir()?,
    };
    let days = retention_days.or(file.retention_days).unwrap_or(30);
    let config = StoreConfig {
        data_dir: data_dir.clone(),
        retention: Duration::from_secs(days * 86_400),
    };
    GitStore::open(config, Arc::new(SystemClock))
        .with_context(|| format!("cannot open the data directory {}", data_dir.display()))
}

fn service_config(read: &ReadOptions, file: &FileConfig) -> Result<ServiceConfig> {
    let defaults = ServiceConfig::default();
    // Repository-plugin budgets come from SOURCEGRAPH_PLUGINS_* only (seed 000), read once.
    let plugins = wasmplugin::PluginConfig::from_env()?;
    Ok(ServiceConfig {
        read_budget: read
            .read_budget_bytes
            .or(file.read_budget_bytes)
            .unwrap_or(defaults.read_budget),
        batch_budget: read
            .batch_budget_bytes
            .or(file.batch_budget_bytes)
            .unwrap_or(defaults.batch_budget),
        max_batch_items: read
            .max_batch_items
            .or(file.max_batch_items)
            .unwrap_or(defaults.max_batch_items),
        line_cap: read
            .line_cap_bytes
            .or(file.line_cap_bytes)
            .unwrap_or(defaults.line_cap),
        plugins,
        index: service::IndexConfig {
            max_file_bytes: read
                .index_max_file_bytes
                .or(file.index_max_file_bytes)
                .unwrap_or(defaults.index.max_file_bytes),
            ..defaults.index.clone()
        },
        ..defaults
    })
}

/// How often maintenance syncs and re-indexes (G-3; default 60 s).
fn sync_interval(read: &ReadOptions, file: &FileConfig) -> Result<Duration> {
    match read
        .sync_interval
        .as_deref()
        .or(file.sync_interval.as_deref())
    {
        Some(text) => config::parse_duration(text),
        None => Ok(Duration::from_secs(60)),
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

async fn serve(store: GitStore, file: &FileConfig, args: ServeArgs) -> Result<()> {
    let service = Service::new(store, service_config(&args.read, file)?);
    let listen = args
        .listen
        .clone()
        .or_else(|| file.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.into());
    let addr = config::parse_listen(&listen)?;
    let sync_interval = sync_interval(&args.read, file)?;
    register_repos(&service, &args.read.repos).await?;

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

    let shutdown = tokio_util::sync::CancellationToken::new();
    let readiness = httpserver::Readiness::default();
    let mcp = mcpserver::http_service(
        service.clone(),
        mcpserver::McpConfig {
            allowed_hosts: hosts,
            allowed_origins: origins,
        },
        shutdown.clone(),
    );
    let app = httpserver::router(service.clone(), readiness.clone())
        .nest_service("/sourcegraph/mcp", mcp);

    let (stop_maintenance, maintenance_signal) = tokio::sync::watch::channel(false);
    let maintenance =
        service::spawn_maintenance(service.clone(), sync_interval, maintenance_signal);
    readiness.set_ready();
    print!("{}", repos::startup_banner(&site));

    let cancel = shutdown.clone();
    let server = httpserver::serve(listener, app, async move {
        wait_for_signal().await;
        eprintln!("csg: shutting down; letting in-flight calls finish");
        cancel.cancel();
    });
    server.await.context("the HTTP server failed")?;
    let _ = stop_maintenance.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), maintenance).await;
    Ok(())
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

async fn mcp(store: GitStore, file: &FileConfig, args: McpArgs) -> Result<()> {
    let plugins = ConnectionPlugins::parse(Some(&args.plugins))?;
    let service = Service::new(store, service_config(&args.read, file)?);
    let interval = sync_interval(&args.read, file)?;
    register_repos(&service, &args.read.repos).await?;
    // Sync, indexing and plugin preparation run beside the session, as under `serve`.
    let (stop_maintenance, maintenance_signal) = tokio::sync::watch::channel(false);
    let maintenance = service::spawn_maintenance(service.clone(), interval, maintenance_signal);
    let session = mcpserver::serve_stdio(service, plugins)
        .await
        .context("the stdio MCP session failed");
    let _ = stop_maintenance.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), maintenance).await;
    session
}

/// Parses a repository name given on the command line.
fn repo_name(name: &str) -> Result<RepoName> {
    Ok(RepoName::parse(name)?)
}
