//! The churn beside the load: the small repository registered and removed, the server plugin
//! file rewritten and reloaded.

use super::calls::{Shared, call, cut, texts, tool_error};
use super::http::http;
use super::processes::csg_cli;
use super::{CALL_TIMEOUT, CHURN_TIMEOUT, Options, REGISTER_EVERY, RELOAD_EVERY, SMALL};
use anyhow::{Context, Result, bail};
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::Peer;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The server plugin file, version `n` (each reload sees a changed file).
fn server_plugin(n: u64) -> String {
    format!(
        "\"\"\"bench/soak's server plugin, version {n}: a query alias and a note on README reads.\"\"\"\n\
         \n\
         QUERY_ALIASES = {{\"soakalias\": \"TODO\"}}\n\
         \n\
         \n\
         def on_read_result(result):\n\
         \x20   if any(item[\"path\"].endswith(\"README.md\") for item in result[\"items\"]):\n\
         \x20       return {{\"notes\": result.get(\"notes\", []) + [\"soak note, version {n}\"]}}\n\
         \x20   return None\n"
    )
}

pub(super) fn write_server_plugin(dir: &Path, n: u64) -> Result<()> {
    let staged = dir.with_extension("staged.py");
    std::fs::write(&staged, server_plugin(n))?;
    std::fs::rename(&staged, dir.join("10_soak.py"))?;
    Ok(())
}

#[derive(Default)]
pub(super) struct Churn {
    /// (action, latency, error) of every registration, removal or reload.
    pub(super) actions: Vec<(&'static str, Duration, Option<String>)>,
}

impl Churn {
    pub(super) fn push(&mut self, action: &'static str, elapsed: Duration, result: Result<()>) {
        let error = result.err().map(|e| cut(&format!("{e:#}"), 200));
        if let Some(error) = &error {
            eprintln!("soak: {action} failed after {elapsed:.1?}: {error}");
        }
        self.actions.push((action, elapsed, error));
    }
}

pub(super) struct Server {
    pub(super) addr: String,
    pub(super) token: String,
    pub(super) data: PathBuf,
    pub(super) plugins: PathBuf,
}

/// Every REGISTER_EVERY: registers the small repository through the JSON API or removes it
/// with `csg repo remove`, alternately, until `stop`.
pub(super) async fn registrations(
    options: Arc<Options>,
    server: Arc<Server>,
    small_url: String,
    operator: Peer<RoleClient>,
    shared: Arc<Shared>,
) -> Churn {
    let mut churn = Churn::default();
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + REGISTER_EVERY, REGISTER_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut registered = false;
    loop {
        tick.tick().await;
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let started = Instant::now();
        if registered {
            let (options, data) = (options.clone(), server.data.clone());
            let removal = tokio::time::timeout(
                CHURN_TIMEOUT,
                tokio::task::spawn_blocking(move || {
                    csg_cli(&options, &data, &["repo", "remove", SMALL])
                }),
            )
            .await;
            let result = match removal {
                Err(_) => Err(anyhow::anyhow!("no end within {CHURN_TIMEOUT:?}")),
                Ok(joined) => joined
                    .map_err(anyhow::Error::from)
                    .and_then(|r| r)
                    .map(|_| ()),
            };
            registered = result.is_err();
            let result = match result {
                Ok(()) => small_visible(&operator, false).await,
                Err(error) => Err(error),
            };
            churn.push("removal", started.elapsed(), result);
        } else {
            let body = serde_json::json!({"name": SMALL, "source": small_url}).to_string();
            let answer = tokio::time::timeout(
                CHURN_TIMEOUT,
                http(
                    &server.addr,
                    "POST",
                    "/sourcegraph/api/repos",
                    Some(&server.token),
                    Some(&body),
                ),
            )
            .await;
            let result = match answer {
                Err(_) => Err(anyhow::anyhow!("no answer within {CHURN_TIMEOUT:?}")),
                Ok(Err(error)) => Err(error),
                Ok(Ok((201, _))) => Ok(()),
                Ok(Ok((status, body))) => Err(anyhow::anyhow!("HTTP {status}: {}", body.trim())),
            };
            // A 200 (already registered) still leaves it registered: remove it next.
            registered = result.is_ok()
                || result
                    .as_ref()
                    .is_err_and(|e| e.to_string().starts_with("HTTP 200"));
            let result = match result {
                Ok(()) => small_visible(&operator, true).await,
                Err(error) => Err(error),
            };
            churn.push("registration", started.elapsed(), result);
        }
    }
    churn
}

/// Checks through MCP that the server sees the small repository registered (readable and
/// indexed: the registration fetched and indexed it) or removed (not visible).
async fn small_visible(operator: &Peer<RoleClient>, registered: bool) -> Result<()> {
    let answer = tokio::time::timeout(
        CALL_TIMEOUT,
        operator.call_tool(call("availability", serde_json::json!({"repo": SMALL}))),
    )
    .await
    .context("availability gave no answer")??;
    if let Some(error) = tool_error(&answer) {
        bail!("then availability: {error}");
    }
    let text = texts(&answer).join("\n");
    let lines: Vec<&str> = text.lines().collect();
    let wanted: &[&str] = if registered {
        &["Visible: true", "Readable: true", "Indexed: true"]
    } else {
        &["Visible: false"]
    };
    if let Some(missing) = wanted.iter().find(|w| !lines.contains(w)) {
        bail!(
            "then availability lacks `{missing}`: {}",
            cut(&lines.join(" | "), 200)
        );
    }
    Ok(())
}

/// Every RELOAD_EVERY: rewrites the server plugin file and reloads, alternately through the
/// JSON API and the MCP tool `reload_plugins` of the operator session, until `stop`.
pub(super) async fn reloads(
    server: Arc<Server>,
    operator: Peer<RoleClient>,
    shared: Arc<Shared>,
) -> Churn {
    let mut churn = Churn::default();
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + RELOAD_EVERY, RELOAD_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut version = 1u64;
    loop {
        tick.tick().await;
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        version += 1;
        if let Err(error) = write_server_plugin(&server.plugins, version) {
            churn.push("reload (http)", Duration::ZERO, Err(error));
            continue;
        }
        let started = Instant::now();
        if version.is_multiple_of(2) {
            let answer = tokio::time::timeout(
                CHURN_TIMEOUT,
                http(
                    &server.addr,
                    "POST",
                    "/sourcegraph/api/plugins/reload",
                    Some(&server.token),
                    Some(""),
                ),
            )
            .await;
            let result = match answer {
                Err(_) => Err(anyhow::anyhow!("no answer within {CHURN_TIMEOUT:?}")),
                Ok(Err(error)) => Err(error),
                Ok(Ok((200, _))) => Ok(()),
                Ok(Ok((status, body))) => Err(anyhow::anyhow!("HTTP {status}: {}", body.trim())),
            };
            churn.push("reload (http)", started.elapsed(), result);
        } else {
            let answer = tokio::time::timeout(
                CHURN_TIMEOUT,
                operator.call_tool(CallToolRequestParams::new("reload_plugins")),
            )
            .await;
            let result = match answer {
                Err(_) => Err(anyhow::anyhow!("no answer within {CHURN_TIMEOUT:?}")),
                Ok(Err(error)) => Err(error.into()),
                Ok(Ok(result)) => match tool_error(&result) {
                    Some(error) => Err(anyhow::anyhow!(error)),
                    None => Ok(()),
                },
            };
            churn.push("reload (mcp)", started.elapsed(), result);
        }
    }
    churn
}
