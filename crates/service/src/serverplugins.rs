//! Server plugins (SPEC section 7) as the service applies them: the tables (`ALIASES`,
//! `QUERY_ALIASES`, `TOOL_PRESETS`), the call-scoped hooks `on_tool_call`,
//! `on_search_results` and `on_read_result`, status and reload.
//!
//! `pyplugin` runs the Python; this module turns the service's answers into hook payloads and
//! the hooks' outcomes back into answers, re-measuring and re-validating them after the last
//! hook (P-10). Nothing here knows MCP or HTTP: tool arguments are plain JSON objects.

use std::collections::HashMap;
use std::ops::Range;

use crate::{CallContext, SearchAnswer, SearchHit, SearchRepoHits, Service, ServiceError};
use pyplugin::{Epoch, Hook, PageGroup, PageLine, SearchPage};
use serde::Serialize;
use serde_json::{Map, Value, json};

pub use pyplugin::{PluginHost, Status as HostStatus, ToolPreset};

/// A change a server plugin made to a call's arguments, disclosed in the answer (P-10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArgumentRewrite {
    /// The plugin files that changed them, in order (a table shows as `file (TABLE)`).
    pub files: Vec<String>,
    /// The arguments as the caller sent them.
    pub original: Value,
    /// The arguments the call ran with.
    pub effective: Value,
}

/// What `plugin_status` answers: the host's status and what it means for the index.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerPluginsStatus {
    /// The host (P-12).
    #[serde(flatten)]
    pub host: HostStatus,
    /// `current`, or `index stale: rebuild pending` when a derived-state hook changed since
    /// the published index generations were built (P-7).
    pub index: String,
    /// The repositories whose index was built under other derived-state sources.
    pub index_stale_repos: Vec<String>,
    /// How much the caller is shown (`Service::server_plugins_status_for`).
    pub detail: StatusDetail,
}

/// How much of the status a caller sees (P-12, A-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusDetail {
    /// Everything the host keeps, tracebacks and paths included: operators (the local caller,
    /// users with the prepare capability).
    Full,
    /// File names, states and one-line reasons without host paths: everyone else.
    Summary,
}

fn caller(ctx: &CallContext) -> Value {
    // P-11: the caller appears only as whether it is authenticated.
    json!({"authenticated": ctx.caller.authenticated()})
}

impl Service {
    /// The server-plugin host of this service.
    pub fn server_plugins(&self) -> &PluginHost {
        &self.inner.server_plugins
    }

    /// The epoch of the call `ctx` belongs to, if server plugins are active: taken when the
    /// call first needs it and kept for the rest of the call (P-12), so its arguments
    /// rewrite, aliases, result and read hooks all run on one epoch whatever reloads happen.
    fn epoch(&self, ctx: &CallContext) -> Option<Epoch> {
        ctx.server_plugins
            .0
            .get_or_init(|| self.inner.server_plugins.current())
            .clone()
    }

    /// `plugin_status` (P-12) with the full detail, for operators and in-process callers; a
    /// transport answers `Service::server_plugins_status_for` its caller.
    pub fn server_plugins_status(&self) -> ServerPluginsStatus {
        self.plugins_status_of(self.inner.server_plugins.status())
    }

    /// `host` with what it means for the index.
    fn plugins_status_of(&self, host: HostStatus) -> ServerPluginsStatus {
        let stale = self.index_stale_repos(&host.derived_fingerprint);
        let index = if stale.is_empty() {
            "current".to_owned()
        } else {
            "index stale: rebuild pending".to_owned()
        };
        ServerPluginsStatus {
            host,
            index,
            index_stale_repos: stale,
            detail: StatusDetail::Full,
        }
    }

    /// `reload_plugins` (P-12): a new epoch from the directory; calls in flight keep theirs.
    /// An operator action: needs the prepare capability.
    pub async fn reload_server_plugins(
        &self,
        ctx: &CallContext,
    ) -> Result<ServerPluginsStatus, ServiceError> {
        self.inner
            .check_prepare(&ctx.caller, "reloading server plugins")?;
        let status = self.reload_server_plugins_here().await?;
        // Issue 31: a reload through any replica reloads every replica's plugins.
        if let Some(placement) = self.inner.placement.get() {
            placement.announce_plugin_reload();
        }
        Ok(status)
    }

    /// Whether this process runs server plugins at all (`SOURCEGRAPH_SERVER_PLUGINS_ENABLED`,
    /// a Python in the build): a replica with none has nothing to reload when another
    /// announces a reload.
    pub fn server_plugins_enabled(&self) -> bool {
        !matches!(
            self.inner.server_plugins.state(),
            pyplugin::State::Disabled | pyplugin::State::Unavailable(_)
        )
    }

    /// Reloads this process's server plugins only: what a replica does when another one
    /// announces a reload (no capability check: the announcing replica made it).
    pub async fn reload_server_plugins_here(&self) -> Result<ServerPluginsStatus, ServiceError> {
        let host = self.inner.server_plugins.clone();
        let reloaded = tokio::task::spawn_blocking(move || host.reload())
            .await
            .map_err(|_| ServiceError::internal("the plugin reload stopped; see the server log"))?;
        // Whatever came of it, the current epoch's presets are the tool list now.
        let presets = presets_text(&self.inner.server_plugins);
        self.inner.tool_list.send_if_modified(|shown| {
            let changed = *shown != presets;
            if changed {
                *shown = presets;
            }
            changed
        });
        match reloaded {
            // The status of the epoch this reload made: reading the host's status now would
            // show a reload that came after it (eight at once answered [2,3,4,5,6,7,9,9]).
            Ok(made) => Ok(self.plugins_status_of(made)),
            Err(error @ (pyplugin::HostError::Directory(_) | pyplugin::HostError::Busy(_))) => {
                Err(ServiceError::unavailable(error.to_string()))
            }
            Err(error) => Err(ServiceError::invalid(error.to_string())),
        }
    }

    /// Changes of the tool list (the current epoch's `TOOL_PRESETS`, P-22): marked changed
    /// by each reload that changes them, in this process or announced by another replica.
    /// What the MCP face's `notifications/tools/list_changed` follow.
    pub fn tool_list_changes(&self) -> tokio::sync::watch::Receiver<String> {
        self.inner.tool_list.subscribe()
    }

    /// The `TOOL_PRESETS` of the current epoch, by name (P-22).
    pub fn tool_presets(&self) -> Vec<(String, ToolPreset)> {
        self.inner
            .server_plugins
            .current()
            .map(|epoch| {
                epoch
                    .tables()
                    .tool_presets
                    .iter()
                    .map(|(name, preset)| (name.clone(), preset.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The built-in tool an MCP call of `name` runs: the preset's, if `name` is one (no hook
    /// runs: `on_tool_call` rewrites arguments, never the tool).
    pub fn preset_tool(&self, ctx: &CallContext, name: &str) -> Option<String> {
        self.epoch(ctx).and_then(|epoch| {
            epoch
                .tables()
                .tool_presets
                .get(name)
                .map(|p| p.tool.clone())
        })
    }

    /// Whether server plugins adapt an MCP call of the tool `name` before it runs: a
    /// `TOOL_PRESETS` entry of that name fixes some of its arguments (P-22), or an
    /// `on_tool_call` hook may rewrite them (P-20). Cluster routing then reads the repository
    /// from [`Service::effective_tool_call`] rather than from the caller's arguments.
    pub fn adapts_tool_call(&self, ctx: &CallContext, name: &str) -> bool {
        self.epoch(ctx).is_some_and(|epoch| {
            epoch.defines(Hook::ToolCall) || epoch.tables().tool_presets.contains_key(name)
        })
    }

    /// The built-in tool an MCP call of `name` runs and the arguments it runs with: a
    /// preset's fixed arguments win over the caller's (a call that passes one is refused by
    /// the MCP face anyway), then `on_tool_call` rewrites them. What cluster routing names the
    /// call's repository by; the replica that answers applies both again itself.
    pub async fn effective_tool_call(
        &self,
        ctx: &CallContext,
        name: &str,
        mut arguments: Map<String, Value>,
    ) -> (String, Map<String, Value>) {
        let preset = self
            .epoch(ctx)
            .and_then(|epoch| epoch.tables().tool_presets.get(name).cloned());
        let tool = match preset {
            Some(preset) => {
                for (key, value) in preset.arguments {
                    arguments.insert(key, value);
                }
                preset.tool
            }
            None => name.to_owned(),
        };
        let (effective, _) = self.rewrite_tool_call(ctx, &tool, arguments).await;
        (tool, effective)
    }

    /// `on_tool_call` (P-20): the arguments the tool runs with and, when a plugin changed
    /// them, the disclosure. The transport re-parses the effective arguments strictly and
    /// falls back to the original ones when they do not parse (P-10).
    pub async fn rewrite_tool_call(
        &self,
        ctx: &CallContext,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> (Map<String, Value>, Option<ArgumentRewrite>) {
        let Some(epoch) = self.epoch(ctx).filter(|e| e.defines(Hook::ToolCall)) else {
            return (arguments, None);
        };
        let original = Value::Object(arguments.clone());
        let payload = json!({"tool": tool, "arguments": original, "caller": caller(ctx)});
        let outcome = epoch.run(Hook::ToolCall, payload).await;
        match outcome.value.get("arguments") {
            Some(Value::Object(effective)) if !outcome.changed_by.is_empty() => {
                let rewrite = ArgumentRewrite {
                    files: outcome.changed_by.clone(),
                    original,
                    effective: Value::Object(effective.clone()),
                };
                (effective.clone(), Some(rewrite))
            }
            _ => (arguments, None),
        }
    }

    /// `ALIASES` (P-22): the repository `repo` names. A registered repository of that very
    /// name wins over an alias for a caller who may read it. Step 1 of the service frame (`frame.rs`), which every
    /// repository-naming operation goes through.
    pub(crate) fn unalias(&self, ctx: &CallContext, repo: String) -> String {
        let Some(epoch) = self.epoch(ctx) else {
            return repo;
        };
        let Some(target) = epoch.tables().aliases.get(&repo) else {
            return repo;
        };
        // A registered repository of that name wins, but only for a caller who may read it:
        // for anyone else it must look unknown, and an unknown name is the alias's.
        let readable = gitstore::RepoName::parse(&repo)
            .ok()
            .is_some_and(|name| self.inner.may_read(&ctx.caller, &name));
        if readable { repo } else { target.value.clone() }
    }

    /// `QUERY_ALIASES` (P-22) on a literal query: every whitespace-separated term equal to a
    /// key (case-insensitively unless `case_sensitive`) is replaced; separators are kept.
    pub(crate) fn alias_query(
        &self,
        ctx: &CallContext,
        query: &str,
        regex: bool,
        case_sensitive: bool,
    ) -> Option<(String, Vec<String>)> {
        let epoch = self.epoch(ctx)?;
        let aliases = &epoch.tables().query_aliases;
        if regex || aliases.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(query.len());
        let mut files = Vec::new();
        let mut rest = query;
        while !rest.is_empty() {
            let space = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..space]);
            rest = &rest[space..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let term = &rest[..end];
            let found = aliases
                .get(&term.to_lowercase())
                .filter(|_| !case_sensitive || aliases.keys().any(|k| k == term));
            match found {
                Some(alias) => {
                    out.push_str(&alias.value);
                    let file = format!("{} (QUERY_ALIASES)", alias.file);
                    if !files.contains(&file) {
                        files.push(file);
                    }
                }
                None => out.push_str(term),
            }
            rest = &rest[end..];
        }
        (out != query).then_some((out, files))
    }

    /// The `on_search_results` step of a search about to run, if an epoch defines the hook.
    /// The plugin host is told now, so it is ready when the search is done.
    pub(crate) fn search_hook(&self, ctx: &CallContext) -> Option<SearchHook> {
        let epoch = self.epoch(ctx).filter(|e| e.defines(Hook::SearchResults))?;
        epoch.expect(Hook::SearchResults);
        Some(SearchHook {
            epoch,
            caller: caller(ctx),
        })
    }
}

/// A line hit as `on_search_results` sees it: repository, commit, path, line, snippet.
type HitKey<'a> = (&'a str, &'a str, &'a str, u64, &'a str);

/// `on_search_results` (P-20) for one search, run on the search's own blocking thread right
/// after it: handing the hits to the interpreter from there saves waking the async task in
/// between.
pub(crate) struct SearchHook {
    epoch: Epoch,
    caller: Value,
}

impl SearchHook {
    /// Lets plugins reorder, drop or annotate the line hits of a page; file-name hits stay.
    /// Counts are recomputed from what is returned. Not to be called from an async task.
    pub(crate) fn apply(self, query: &str, mut answer: SearchAnswer) -> SearchAnswer {
        let SearchHook { epoch, caller } = self;
        let groups = answer
            .repos
            .iter()
            .map(|group| PageGroup {
                repo: group.repo.clone(),
                commit: group.commit.clone(),
                lines: group
                    .hits
                    .iter()
                    .filter_map(|hit| {
                        Some(PageLine {
                            path: hit.path.clone(),
                            line: hit.line?,
                            snippet: hit.snippet.clone()?,
                        })
                    })
                    .collect(),
            })
            .collect();
        let page = SearchPage {
            query: query.to_owned(),
            caller,
            groups,
        };
        if page.is_empty() {
            return answer;
        }
        let given = page.len() as u64;
        let mut outcome = epoch.run_search_blocking(page);
        if outcome.changed().is_none() {
            return answer;
        }
        let Value::Array(returned) = outcome.value["hits"].take() else {
            return answer;
        };
        // Rebuild the groups: file-name hits where they were, then the returned line hits in
        // their new order, each under its repository (groups in order of first appearance).
        let mut groups: Vec<SearchRepoHits> = answer
            .repos
            .iter()
            .map(|group| SearchRepoHits {
                repo: group.repo.clone(),
                commit: group.commit.clone(),
                hits: group
                    .hits
                    .iter()
                    .filter(|h| h.line.is_none())
                    .cloned()
                    .collect(),
            })
            .collect();
        // A returned hit keeps the marks of the hit it was, found by repository, commit,
        // path, line and snippet: one whose snippet had changed would get none (its ranges
        // were of the old text; `pyplugin` refuses such a change today).
        let mut marks: HashMap<HitKey<'_>, &[Range<u32>]> = HashMap::new();
        for group in &answer.repos {
            for hit in &group.hits {
                if let (Some(line), Some(snippet)) = (hit.line, hit.snippet.as_deref()) {
                    marks
                        .entry((&group.repo, &group.commit, &hit.path, line, snippet))
                        .or_insert(&hit.marks);
                }
            }
        }
        for hit in &returned {
            let field = |key: &str| hit.get(key).and_then(Value::as_str).unwrap_or_default();
            if let Some(group) = groups
                .iter_mut()
                .find(|g| g.repo == field("repo") && g.commit == field("commit"))
            {
                let line = hit.get("line").and_then(Value::as_u64);
                let kept = line.and_then(|line| {
                    let key = (
                        field("repo"),
                        field("commit"),
                        field("path"),
                        line,
                        field("snippet"),
                    );
                    marks.get(&key).map(|marks| marks.to_vec())
                });
                group.hits.push(SearchHit {
                    path: field("path").to_owned(),
                    line,
                    snippet: Some(field("snippet").to_owned()),
                    path_only: None,
                    note: hit.get("note").and_then(Value::as_str).map(str::to_owned),
                    marks: kept.unwrap_or_default(),
                    ..SearchHit::default()
                });
            }
        }
        groups.retain(|g| !g.hits.is_empty());
        let dropped = given.saturating_sub(returned.len() as u64);
        answer.stats.total_hits = answer.stats.total_hits.saturating_sub(dropped);
        answer.repos = groups;
        answer
    }
}

impl Service {
    /// `on_read_result` (P-20): operator notes for a read's answer, never replacing the body.
    pub(crate) async fn read_notes(
        &self,
        ctx: &CallContext,
        tool: &str,
        repo: &str,
        commit: &str,
        items: &[crate::ReadItem],
    ) -> Vec<String> {
        let Some(epoch) = self.epoch(ctx).filter(|e| e.defines(Hook::ReadResult)) else {
            return Vec::new();
        };
        let items: Vec<Value> = items
            .iter()
            .map(|item| match &item.outcome {
                Ok(range) => json!({
                    "path": item.path,
                    "start_line": range.start_line,
                    "end_line": range.end_line,
                    "total_lines": range.total_lines,
                    "has_more": range.has_more,
                    "text": range.content,
                }),
                Err(error) => json!({"path": item.path, "error": error}),
            })
            .collect();
        let payload = json!({"tool": tool, "repo": repo, "commit": commit,
            "caller": caller(ctx), "items": items, "notes": []});
        let outcome = epoch.run(Hook::ReadResult, payload).await;
        outcome
            .changed()
            .and_then(|value| value.get("notes").and_then(Value::as_array).cloned())
            .map(|notes| {
                notes
                    .into_iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The `TOOL_PRESETS` of `host`'s current epoch as JSON text (empty without one): what
/// tells one tool list from another.
pub(crate) fn presets_text(host: &PluginHost) -> String {
    host.current()
        .map(|epoch| serde_json::to_string(&epoch.tables().tool_presets).unwrap_or_default())
        .unwrap_or_default()
}
