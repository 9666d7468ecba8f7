//! `csg plugins check|api|init|reload|status` (P-13, P-14, SPEC §9) and the server-plugin
//! settings of `serve` and `mcp` (P-1).

use crate::server_plugin_env::ServerPluginEnv;
use anyhow::{Context, Result, bail};
use clap::Subcommand;
use pyplugin::{HostConfig, PluginHost};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Starts the line on which the dry-run's child process hands its report to `csg plugins
/// check`: plugin code may write to the same stdout, so the report is found by this prefix.
const REPORT_PREFIX: &str = "csg-plugins-check-report: ";

/// `csg plugins …`: server plugins (operator Python files), not repository plugins.
#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// Dry-run a plugins directory: load, validate and run each hook once on its sample
    /// payload, with no data, no index and no server. Exits non-zero on any rejection. The
    /// plugin code runs in a child process: one that exits, crashes or hangs it fails the
    /// check with a report.
    Check {
        /// The plugins directory to check.
        dir: PathBuf,
        /// Time limit of one hook call, in milliseconds.
        #[arg(long, default_value_t = 2000)]
        hook_timeout_ms: u64,
        /// Time limit of the whole dry-run, in seconds: a plugin that hangs past it fails the
        /// check.
        #[arg(long, default_value_t = 120)]
        timeout_secs: u64,
    },
    /// The dry-run itself, in the child process `check` starts: prints the report as one
    /// JSON line on stdout. Plugin code runs here, so whatever it does to the process (exit,
    /// crash, hang) is seen by `check` instead of ending it.
    #[command(name = "check-child", hide = true)]
    CheckChild {
        /// The plugins directory to check.
        dir: PathBuf,
        /// Time limit of one hook call, in milliseconds.
        #[arg(long, default_value_t = 2000)]
        hook_timeout_ms: u64,
    },
    /// Print the hook reference `plugin_api.py` (or write it with --out; never into the
    /// plugins directory, where it would load as a plugin).
    Api {
        /// Write it to this file instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write `example.py` into DIR: every hook and table, commented out and harmless.
    Init {
        /// The directory to write `example.py` into (created when missing).
        dir: PathBuf,
    },
    /// Ask a running server to reload its plugins directory (a new epoch).
    Reload {
        /// The server's base URL (token from SOURCEGRAPH_API_TOKEN, if it needs one).
        #[arg(long, env = "CSG_SERVER", default_value = crate::index::DEFAULT_SERVER)]
        server: String,
    },
    /// Show a running server's plugin status.
    Status {
        /// The server's base URL.
        #[arg(long, env = "CSG_SERVER", default_value = crate::index::DEFAULT_SERVER)]
        server: String,
    },
}

/// Runs a `csg plugins` command that needs no data directory.
pub async fn run(command: PluginsCommand) -> Result<()> {
    match command {
        PluginsCommand::Check {
            dir,
            hook_timeout_ms,
            timeout_secs,
        } => {
            let limit = Duration::from_secs(timeout_secs.max(1));
            let hook_timeout_ms = hook_timeout_ms.max(1);
            let checked =
                tokio::task::spawn_blocking(move || check_in_child(&dir, hook_timeout_ms, limit))
                    .await
                    .context("the dry-run stopped")??;
            print!("{}", render_check(&checked));
            if !checked.ok() {
                bail!("the plugins directory has problems (see above)");
            }
            Ok(())
        }
        PluginsCommand::CheckChild {
            dir,
            hook_timeout_ms,
        } => {
            let mut config = HostConfig::new(dir);
            config.hook_timeout = Duration::from_millis(hook_timeout_ms.max(1));
            config.tools = Arc::new(tools::plugin_catalog(&tools::Limits::new(
                &service::ServiceConfig::default(),
            )));
            let report = tokio::task::spawn_blocking(move || pyplugin::check_directory(config))
                .await
                .context("the dry-run stopped")?;
            let json = serde_json::to_string(&report).context("cannot encode the report")?;
            // On a line of its own: plugin output may have left a line unfinished.
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "\n{REPORT_PREFIX}{json}")
                .and_then(|()| stdout.flush())
                .context("cannot write the report")?;
            Ok(())
        }
        PluginsCommand::Api { out: None } => {
            print!("{}", pyplugin::PLUGIN_API);
            Ok(())
        }
        PluginsCommand::Api { out: Some(out) } => {
            if let Some(plugins) = configured_directory() {
                let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
                let parent = parent.unwrap_or(Path::new("."));
                if same_dir(parent, &plugins) {
                    bail!(
                        "{} is in the server plugins directory, where plugin_api.py would load as \
                         a plugin (and be rejected); write it somewhere else",
                        out.display()
                    );
                }
            }
            std::fs::write(&out, pyplugin::PLUGIN_API)
                .with_context(|| format!("cannot write {}", out.display()))?;
            eprintln!("csg: wrote {}", out.display());
            Ok(())
        }
        PluginsCommand::Init { dir } => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let path = dir.join("example.py");
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .with_context(|| {
                    format!(
                        "cannot create {} (it may exist already: csg plugins init never overwrites)",
                        path.display()
                    )
                })?;
            std::io::Write::write_all(&mut file, pyplugin::EXAMPLE.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "csg: wrote {} (everything in it is commented out; `csg plugins check {}` validates it)",
                path.display(),
                dir.display()
            );
            Ok(())
        }
        PluginsCommand::Reload { server } => remote(&server, true).await,
        PluginsCommand::Status { server } => remote(&server, false).await,
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The plugins directory the environment names, if any.
fn configured_directory() -> Option<PathBuf> {
    ServerPluginEnv::configured_directory(|name| std::env::var_os(name))
}

async fn remote(server: &str, reload: bool) -> Result<()> {
    let server = server.trim_end_matches('/');
    let client = crate::index::client()?;
    let request = if reload {
        client.post(format!("{server}/sourcegraph/api/plugins/reload"))
    } else {
        client.get(format!("{server}/sourcegraph/api/plugins/status"))
    };
    let response = request
        .send()
        .await
        .with_context(|| crate::index::unreachable(server))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .context("the server's answer is not JSON")?;
    if !status.is_success() {
        return Err(crate::index::refusal(status, &body));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&body).context("cannot show the answer")?
    );
    Ok(())
}

/// The report of a dry-run as the child process hands it over (`pyplugin::CheckReport`'s
/// JSON), with what became of the child process.
#[derive(Debug, Default, Deserialize)]
struct Checked {
    #[serde(default)]
    files: Vec<CheckedFile>,
    #[serde(default)]
    rejected: Vec<CheckedRejection>,
    #[serde(default)]
    runs: Vec<CheckedRun>,
    #[serde(default)]
    error: Option<String>,
    /// What went wrong with the child process itself (it ended early, crashed or hung).
    #[serde(skip)]
    process: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CheckedFile {
    file: String,
    #[serde(default)]
    hooks: Vec<String>,
    #[serde(default)]
    tables: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct CheckedRejection {
    #[serde(default)]
    reasons: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct CheckedRun {
    file: String,
    hook: String,
    failure: Option<String>,
}

impl Checked {
    /// Whether the directory is good: the child reported, nothing rejected, nothing failed.
    fn ok(&self) -> bool {
        self.process.is_none()
            && self.error.is_none()
            && self.rejected.is_empty()
            && self.runs.iter().all(|run| run.failure.is_none())
    }
}

/// Runs the dry-run of `dir` in a child process (this binary, `plugins check-child`), so that
/// plugin code that ends, crashes or hangs the process fails the check instead of passing it
/// or taking `check` down (P-13). The child is killed after `limit`.
fn check_in_child(dir: &Path, hook_timeout_ms: u64, limit: Duration) -> Result<Checked> {
    let exe = std::env::current_exe().context("cannot find the csg binary to run the dry-run")?;
    let mut child = Command::new(exe)
        .args(["plugins", "check-child"])
        .arg(dir)
        .arg("--hook-timeout-ms")
        .arg(hook_timeout_ms.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Plugin output (print() goes to stderr) and the host's log reach the operator as is.
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start the dry-run process")?;
    let stdout = child
        .stdout
        .take()
        .context("the dry-run process has no stdout")?;
    // Lines through a channel, not read to the end here: a process a plugin started may hold
    // the pipe open long after the child is gone.
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + limit;
    let ended = loop {
        match child
            .try_wait()
            .context("cannot wait for the dry-run process")?
        {
            Some(status) => break Some(status),
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let mut report_line = None;
    let drain_until = Instant::now() + Duration::from_secs(2);
    while let Ok(line) =
        received.recv_timeout(drain_until.saturating_duration_since(Instant::now()))
    {
        if let Some(json) = line.strip_prefix(REPORT_PREFIX) {
            report_line = Some(json.to_owned());
        }
    }
    let reported = report_line.and_then(|json| serde_json::from_str::<Checked>(&json).ok());
    let had_report = reported.is_some();
    let mut checked = reported.unwrap_or_default();
    checked.process = match ended {
        None => Some(format!(
            "the dry-run did not finish within {} s and was stopped: a plugin hangs (at load, in \
             a hook, or while its error is formatted) where the hook time limit cannot end it; \
             in the server it would wedge server plugins or hang the caller{}",
            limit.as_secs(),
            plugin_files(dir)
        )),
        Some(status) if status.success() && had_report => None,
        Some(status) if had_report => Some(format!(
            "the dry-run process {} after it reported: a plugin ended it (a thread it started, \
             an exit handler)",
            describe_exit(status)
        )),
        Some(status) => Some(format!(
            "the dry-run process {} before it reported: a plugin ended the process (os._exit, \
             sys.exit in a thread, os.kill, abort) or crashed it (ctypes, a C extension); the \
             server would end the same way{}",
            describe_exit(status),
            plugin_files(dir)
        )),
    };
    Ok(checked)
}

/// How a child process ended, in words.
fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = match signal {
                1 => " (SIGHUP)",
                2 => " (SIGINT)",
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                13 => " (SIGPIPE)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("was killed by signal {signal}{name}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "ended".to_owned(),
    }
}

/// `; its plugin files: a.py, b.py`, the files one of which did it.
fn plugin_files(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .filter(|name| name.ends_with(".py") && !name.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.is_empty() {
        String::new()
    } else {
        format!("; its plugin files: {}", names.join(", "))
    }
}

fn render_check(report: &Checked) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if let Some(error) = &report.error {
        let _ = writeln!(out, "ERROR     {error}");
    }
    for file in &report.files {
        let _ = writeln!(
            out,
            "LOADED    {}  hooks={}  tables={}",
            file.file,
            dash(&file.hooks),
            dash(&file.tables)
        );
    }
    for rejected in &report.rejected {
        for reason in &rejected.reasons {
            let _ = writeln!(out, "REJECTED  {}", indent(reason));
        }
    }
    for run in &report.runs {
        match &run.failure {
            None => {
                let _ = writeln!(out, "RAN       {} {}: ok", run.file, run.hook);
            }
            Some(failure) => {
                let _ = writeln!(
                    out,
                    "FAILED    {} {}: {}",
                    run.file,
                    run.hook,
                    indent(failure)
                );
            }
        }
    }
    if let Some(process) = &report.process {
        let _ = writeln!(out, "ERROR     {}", indent(process));
        let _ = writeln!(out, "NOT OK: the dry-run did not complete");
        return out;
    }
    let failed = report.runs.iter().filter(|r| r.failure.is_some()).count();
    let _ = writeln!(
        out,
        "{}: {} loaded, {} rejected, {} of {} hook runs failed",
        if report.ok() { "OK" } else { "NOT OK" },
        report.files.len(),
        report.rejected.len(),
        failed,
        report.runs.len()
    );
    out
}

fn dash(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(",")
    }
}

fn indent(text: &str) -> String {
    text.trim_end().replace('\n', "\n          ")
}

/// The server-plugin host of `serve` and `mcp` (P-1), configured by
/// `SOURCEGRAPH_SERVER_PLUGINS_*` (see [`ServerPluginEnv::SETTINGS`]): off unless `ENABLED`,
/// then the directory `DIRECTORY` (default `plugins/` under the data directory).
fn host_from_env(data_dir: &Path, settings: Map<String, Value>) -> Result<HostConfig> {
    let env = ServerPluginEnv::from_env()?;
    let directory = env.directory.unwrap_or_else(|| data_dir.join("plugins"));
    let mut config = HostConfig::new(directory);
    config.enabled = env.enabled;
    config.strict = env.strict;
    config.hook_timeout = env.hook_timeout;
    let mut settings = settings;
    settings.insert("strict".into(), Value::Bool(env.strict));
    settings.insert(
        "hook_timeout_ms".into(),
        Value::from(config.hook_timeout.as_millis() as u64),
    );
    config.startup_settings = settings;
    config.secrets = pyplugin::redact_secrets(std::env::vars());
    Ok(config)
}

/// The service of `serve` (`transport` "http") or `mcp` ("stdio"), with the server plugins
/// the environment configures (P-1).
pub async fn service(
    store: gitstore::GitStore,
    mut config: service::ServiceConfig,
    transport: &str,
) -> Result<service::Service> {
    let settings = Map::from_iter([("transport".to_owned(), Value::from(transport))]);
    let mut host_config = host_from_env(store.storage_root(), settings)?;
    host_config.tools = Arc::new(tools::plugin_catalog(&tools::Limits::new(&config)));
    // P-7: SOURCEGRAPH_SERVER_PLUGINS_STRICT makes a failing on_source_file fail the build.
    config.index.strict_transforms = host_config.strict;
    let host = start_host(host_config).await?;
    Ok(service::Service::with_server_plugins(store, config, host))
}

/// Starts the host on the blocking pool (its first load runs plugin code).
async fn start_host(config: HostConfig) -> Result<PluginHost> {
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .context("the server plugins did not start")?;
    if let pyplugin::State::Unavailable(reason) = host.state() {
        tracing::warn!(%reason, "server plugins are unavailable");
    }
    Ok(host)
}
