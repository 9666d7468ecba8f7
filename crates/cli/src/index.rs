//! `csg index rebuild [REPO] [--server URL]` (O-1, O-5, SPEC §9): asks a running server to
//! rebuild search indexes through its JSON API (`prepare {action: "reindex"}`), so the index
//! the server answers from is the one rebuilt. Progress streams back as NDJSON and shows as a
//! bar on a terminal, as log lines otherwise; the server logs it too.

use crate::progress::Progress;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// Where `--server` points by default: the default listen address.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7878";

/// Rebuilds `repo` (or every repository the server lists) on `server`.
pub async fn rebuild(server: &str, repo: Option<String>) -> Result<()> {
    let server = server.trim_end_matches('/');
    let client = client()?;
    let repos = match repo {
        Some(repo) => vec![repo],
        None => list_repos(&client, server).await?,
    };
    if repos.is_empty() {
        bail!("the server at {server} has no repositories; register one with `csg repo add`");
    }
    for repo in repos {
        rebuild_one(&client, server, &repo).await?;
    }
    Ok(())
}

pub(crate) fn client() -> Result<reqwest::Client> {
    let mut headers = reqwest::header::HeaderMap::new();
    // the token travels in the Authorization header, never in the URL.
    if let Ok(token) = std::env::var("SOURCEGRAPH_API_TOKEN") {
        let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
            .context("SOURCEGRAPH_API_TOKEN is not a valid header value")?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .context("cannot create the HTTP client")
}

/// The error of a non-success answer: the server's message, and for a missing or refused
/// token how the `csg` commands send one.
pub(crate) fn refusal(status: reqwest::StatusCode, body: &Value) -> anyhow::Error {
    let message = body["error"]["message"].as_str().map_or_else(
        || format!("the server answered HTTP {status}"),
        str::to_owned,
    );
    if status == reqwest::StatusCode::UNAUTHORIZED {
        let given = if std::env::var_os("SOURCEGRAPH_API_TOKEN").is_some() {
            "the token in SOURCEGRAPH_API_TOKEN was refused"
        } else {
            "set SOURCEGRAPH_API_TOKEN to a token (`csg token create USER`)"
        };
        anyhow::anyhow!("{message}\n{given}")
    } else {
        anyhow::anyhow!("{message}")
    }
}

pub(crate) fn unreachable(server: &str) -> String {
    format!("cannot reach the server at {server}: is `csg serve` running there? pass --server URL")
}

async fn list_repos(client: &reqwest::Client, server: &str) -> Result<Vec<String>> {
    let response = client
        .get(format!("{server}/sourcegraph/api/discovery"))
        .send()
        .await
        .with_context(|| unreachable(server))?;
    let body: Value = response
        .json()
        .await
        .context("the server's discovery answer is not JSON")?;
    Ok(body["repositories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect())
}

async fn rebuild_one(client: &reqwest::Client, server: &str, repo: &str) -> Result<()> {
    let mut response = client
        .post(format!("{server}/sourcegraph/api/prepare"))
        .header(reqwest::header::ACCEPT, "application/x-ndjson")
        .json(&json!({"repo": repo, "action": "reindex"}))
        .send()
        .await
        .with_context(|| unreachable(server))?;
    if !response.status().is_success() {
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        bail!("{repo}: {}", refusal(status, &body));
    }
    let mut progress = Progress::new(repo);
    let mut pending = Vec::new();
    let mut outcome = None;
    while let Some(chunk) = response
        .chunk()
        .await
        .with_context(|| format!("{repo}: the connection to the server broke"))?
    {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line)
                .with_context(|| format!("{repo}: the server sent a line that is not JSON"))?;
            if let Some(files) = event.get("progress") {
                let done = files["done"].as_u64().unwrap_or(0);
                progress.update("indexing files", done, files["total"].as_u64());
            } else {
                outcome = Some(event);
            }
        }
    }
    drop(progress);
    let Some(event) = outcome else {
        bail!("{repo}: the server ended the answer without a result; see its log");
    };
    if let Some(message) = event["error"]["message"].as_str() {
        bail!("{repo}: {message}");
    }
    let result = &event["result"];
    let index = &result["index"];
    println!(
        "{repo}: indexed {} files ({} path-only) at {} in {} ms, {} bytes on disk",
        index["documents"],
        index["path_only"],
        result["commit"].as_str().unwrap_or("?"),
        index["elapsed_ms"],
        index["bytes"],
    );
    if let Some(failures) = index["plugin_failures"].as_object()
        && !failures.is_empty()
    {
        let failures: Vec<String> = failures
            .iter()
            .map(|(plugin, count)| format!("{plugin} on_source_file failed on {count} files"))
            .collect();
        println!(
            "{repo}: server plugins: {}; their transforms of those files are left out (see \
             plugin_status and the server log)",
            failures.join(", ")
        );
    }
    Ok(())
}
