//! Repository commands (`csg repo …`), `--repo` specs, and what `serve` prints on start.

use crate::progress::Progress;
use crate::{RepoCommand, repo_name};
use anyhow::{Context, Result, bail};
use gitstore::{
    Awaited, GitStore, Metadata, Registration, RepoName, RepoPath, SyncOutcome, WaitProgress,
};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// Turns `[NAME=]PATH_OR_URL` into a registration. A local path is made absolute; without
/// NAME it is named `local/<directory name>` (G-1), a URL `<owner>/<name>` from its last two
/// path segments.
pub fn registration_from_spec(spec: &str) -> Result<Registration> {
    let (name, source) = match spec.split_once('=') {
        Some((name, source)) if RepoName::parse(name).is_ok() => (Some(name), source),
        _ => (None, spec),
    };
    let (source, derived) = if looks_like_url(source) {
        (source.to_string(), name_from_url(source))
    } else {
        let path = Path::new(source)
            .canonicalize()
            .with_context(|| format!("repository path `{source}` does not exist"))?;
        let dir = path.file_name().and_then(|n| n.to_str()).unwrap_or("repo");
        (
            path.to_string_lossy().into_owned(),
            Some(format!("local/{}", sanitize(dir))),
        )
    };
    let name = match name.map(str::to_string).or(derived) {
        Some(name) => repo_name(&name)?,
        None => bail!("cannot derive a repository name from `{source}`; pass NAME=SOURCE"),
    };
    Ok(Registration {
        name,
        source,
        registered_path: RepoPath::root(),
        branch: None,
        private: None,
    })
}

fn looks_like_url(source: &str) -> bool {
    source.contains("://")
        || (source.contains('@') && source.contains(':') && !Path::new(source).exists())
}

fn name_from_url(url: &str) -> Option<String> {
    let trimmed = url.trim_end_matches('/').trim_end_matches(".git");
    let mut segments = trimmed.rsplit(['/', ':']).filter(|s| !s.is_empty());
    let name = segments.next()?;
    let owner = segments.next()?;
    Some(format!("{}/{}", sanitize(owner), sanitize(name)))
}

/// Keeps `[A-Za-z0-9._-]`, replacing everything else with `-`.
fn sanitize(segment: &str) -> String {
    let cleaned: String = segment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    match cleaned.as_str() {
        "" | "." | ".." => "repo".to_string(),
        _ => cleaned,
    }
}

/// The origin clients reach this deployment at: the public URL, or the bound address
/// (`0.0.0.0` shown as `127.0.0.1`).
pub fn site_origin(bound: SocketAddr, public_url: Option<&str>) -> Result<String> {
    if let Some(url) = public_url {
        let url = url.trim_end_matches('/');
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("invalid public URL `{url}`: it must start with http:// or https://");
        }
        return Ok(url.to_string());
    }
    let host = match bound.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    Ok(format!("http://{host}:{}", bound.port()))
}

fn public_host(public_url: Option<&str>) -> Option<String> {
    let rest = public_url?.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    Some(authority.to_string())
}

/// Loopback names (rmcp's default), the bound IP when it is not a wildcard, and the public
/// URL's host.
pub fn default_allowed_hosts(bound: SocketAddr, public_url: Option<&str>) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !bound.ip().is_unspecified() && !bound.ip().is_loopback() {
        hosts.push(bound.ip().to_string());
    }
    hosts.extend(public_host(public_url));
    hosts
}

/// This server's own origins: loopback names on the bound port, and the public URL.
pub fn default_allowed_origins(bound: SocketAddr, public_url: Option<&str>) -> Vec<String> {
    let port = bound.port();
    let mut origins = vec![
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ];
    if !bound.ip().is_unspecified() && !bound.ip().is_loopback() {
        origins.push(format!("http://{bound}"));
    }
    if let Some(url) = public_url {
        origins.push(url.trim_end_matches('/').to_string());
    }
    origins
}

/// What `serve` prints on start (M-6): the endpoint, the site and the access page's
/// client configurations. `token_required`: public read is off, so every caller needs a
/// token. Tokens never go into the URL.
pub fn startup_banner(site: &str, token_required: bool) -> String {
    let config = website::ClientConfig::for_origin(site, token_required);
    let token_note = if token_required {
        "This server requires a token (never put it in the URL)"
    } else {
        "If the server requires a token (never put it in the URL)"
    };
    format!(
        "MCP endpoint: {url}\nHTTP API: {site}/sourcegraph/api/\nWebsite: {site}/sourcegraph/ \
         (client configuration with copy buttons: {site}/sourcegraph/connect)\n\n\
         Client configuration (JSON):\n{json}\n\
         {token_note}:\n{with_token}\n\n\
         Codex (~/.codex/config.toml; the token in SOURCEGRAPH_API_TOKEN):\n{codex}\n",
        url = config.url,
        json = config.json,
        with_token = config.json_with_token,
        codex = config.codex_toml,
    )
}

/// Runs a `csg repo …` command.
/// Syncs `name`, showing the transfer's progress (O-5).
fn sync(store: &GitStore, name: &RepoName) -> Result<SyncOutcome> {
    let mut progress = Progress::new(name.as_str());
    Ok(store.sync_with_progress(name, &mut |p| {
        progress.update(&p.phase, p.done, p.total);
    })?)
}

/// Cluster mode: waits until an owner replica recorded `name`'s heads, saying so on stderr;
/// the recorded head of the default branch.
fn wait_for_owners(store: &GitStore, name: &RepoName, timeout: Duration) -> Result<String> {
    eprintln!("csg: registered {name}; waiting for an owner replica to fetch it …");
    let mut report = |p: &WaitProgress| match &p.last_error {
        Some(error) => eprintln!(
            "csg: {name}: still waiting ({} s); the owners' last attempt failed: {error}",
            p.waited.as_secs()
        ),
        None => eprintln!(
            "csg: {name}: still waiting for an owner replica to fetch it … ({} s)",
            p.waited.as_secs()
        ),
    };
    match store.wait_recorded(name, timeout, &mut report)? {
        Awaited::Recorded { head } => Ok(head
            .map(|c| c.to_string())
            .unwrap_or_else(|| "(no commits)".into())),
        Awaited::NotYet { last_error } => {
            let failed = last_error
                .map(|e| format!(" (their last attempt failed: {e})"))
                .unwrap_or_default();
            bail!(
                "{name} is registered, but no replica has fetched it within {} s{failed}; check that the replicas run (`GET /sourcegraph/api/cluster` lists them and the owners of {name}) and look in their logs. The registration stays: its owners fetch it once they run, and `csg repo list` shows its state",
                timeout.as_secs()
            )
        }
    }
}

pub async fn run(store: GitStore, command: RepoCommand) -> Result<()> {
    tokio::task::spawn_blocking(move || run_blocking(&store, command))
        .await
        .context("interrupted")?
}

fn run_blocking(store: &GitStore, command: RepoCommand) -> Result<()> {
    match command {
        RepoCommand::Add {
            name,
            source,
            path,
            branch,
            private,
            index_branch,
            no_wait,
            wait_timeout,
        } => {
            let name = repo_name(&name)?;
            // Checked before anything is recorded: a bad pattern leaves no registration.
            gitstore::check_index_branches(&index_branch)?;
            let source = if looks_like_url(&source) {
                source
            } else {
                Path::new(&source)
                    .canonicalize()
                    .with_context(|| format!("repository path `{source}` does not exist"))?
                    .to_string_lossy()
                    .into_owned()
            };
            let registered_path = RepoPath::parse(path.as_deref().unwrap_or(""))?;
            let registration = Registration {
                name: name.clone(),
                source,
                registered_path,
                branch,
                private: private.then_some(true),
            };
            // Cluster mode: the owner replicas clone it, not this machine; a source they
            // could not fetch is refused before anything is recorded.
            let cluster = matches!(store.metadata(), Metadata::Postgres(_));
            if cluster {
                store.check_source(&registration)?;
            }
            store.register(registration)?;
            if !index_branch.is_empty() {
                store.set_index_branches(&name, &index_branch)?;
            }
            if no_wait {
                println!("{name} -");
                return Ok(());
            }
            if cluster {
                let head = wait_for_owners(store, &name, Duration::from_secs(wait_timeout))?;
                println!("{name} {head}");
                return Ok(());
            }
            eprintln!("csg: registered {name}; syncing …");
            let outcome = sync(store, &name)?;
            let head = outcome
                .head
                .map(|c| c.to_string())
                .unwrap_or_else(|| "(no commits)".into());
            println!("{name} {head}");
        }
        RepoCommand::List => {
            for repo in store.repos()? {
                let head = repo
                    .head
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "-".into());
                let scope = if repo.registered_path.is_root() {
                    "/".to_string()
                } else {
                    repo.registered_path.to_string()
                };
                let state = repo
                    .last_error
                    .map(|e| format!("sync error: {e}"))
                    .unwrap_or_else(|| "ok".into());
                // S-8: the index-branch patterns beside the default branch, `-` for none.
                let index_branches = if repo.index_branches.is_empty() {
                    "-".to_string()
                } else {
                    format!("index-branches={}", repo.index_branches.join(","))
                };
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    repo.name,
                    if repo.private { "private" } else { "public" },
                    scope,
                    repo.default_branch.unwrap_or_else(|| "-".into()),
                    head,
                    state,
                    index_branches
                );
            }
        }
        RepoCommand::Sync { name } => {
            let name = repo_name(&name)?;
            let outcome = sync(store, &name)?;
            let head = outcome
                .head
                .map(|c| c.to_string())
                .unwrap_or_else(|| "(no commits)".into());
            println!(
                "{name} {head} ({} branch heads changed)",
                outcome.changed.len()
            );
        }
        RepoCommand::Remove { name } => {
            let name = repo_name(&name)?;
            store.unregister(&name)?;
            // A repository registered later under the name must not inherit the grants.
            service::open_access(store)?.forget_repo(name.as_str())?;
            println!("removed {name}");
        }
        RepoCommand::Visibility { name, visibility } => {
            let name = repo_name(&name)?;
            store.set_private(&name, visibility == "private")?;
            println!("{name} is {visibility}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G-1: `--repo .` names a local repository `local/<directory name>`.
    #[test]
    fn g1_names_from_specs() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("my repo");
        std::fs::create_dir(&repo).unwrap();
        let reg = registration_from_spec(repo.to_str().unwrap()).unwrap();
        assert_eq!(reg.name.as_str(), "local/my-repo");
        let reg = registration_from_spec(&format!("acme/docs={}", repo.display())).unwrap();
        assert_eq!(reg.name.as_str(), "acme/docs");
        let reg = registration_from_spec("https://example.org/acme/widgets.git").unwrap();
        assert_eq!(
            (reg.name.as_str(), reg.source.as_str()),
            ("acme/widgets", "https://example.org/acme/widgets.git")
        );
        assert!(registration_from_spec("/definitely/not/here").is_err());
    }

    /// M-6: the printed configuration carries the endpoint with `plugins=auto`, both forms.
    #[test]
    fn m6_banner_has_client_configs() {
        let banner = startup_banner("https://csg.example.org", false);
        assert!(
            banner.contains("MCP endpoint: https://csg.example.org/sourcegraph/mcp?plugins=auto")
        );
        assert!(banner.contains("\"context-sourcegraph\""));
        assert!(banner.contains("\"type\": \"http\""));
        assert!(banner.contains("[mcp_servers.context-sourcegraph]"));
        assert!(banner.contains("SOURCEGRAPH_API_TOKEN"));
        assert!(!banner.contains("token="), "tokens never go into the URL");
    }

    /// M-6, seed 000: the banner's Codex table has the bearer line commented out while public
    /// read is on, and active when it is off.
    #[test]
    fn m6_banner_bearer_line_follows_public_read() {
        let bearer = "bearer_token_env_var = \"SOURCEGRAPH_API_TOKEN\"";
        let open = startup_banner("http://127.0.0.1:7878", false);
        assert!(open.contains(&format!("\n# {bearer}\n")), "{open}");
        assert!(!open.contains(&format!("\n{bearer}\n")), "{open}");
        let closed = startup_banner("http://127.0.0.1:7878", true);
        assert!(closed.contains(&format!("\n{bearer}\n")), "{closed}");
        assert!(!closed.contains(&format!("# {bearer}")), "{closed}");
        assert!(closed.contains("This server requires a token"), "{closed}");
    }

    #[test]
    fn m1_default_origins_follow_the_bound_port() {
        let bound: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        let origins = default_allowed_origins(bound, Some("https://csg.example.org/"));
        assert!(origins.contains(&"http://127.0.0.1:4321".to_string()));
        assert!(origins.contains(&"https://csg.example.org".to_string()));
        let hosts = default_allowed_hosts(bound, Some("https://csg.example.org"));
        assert!(hosts.contains(&"csg.example.org".to_string()));
    }
}
