//! Code search (S-1..S-3): building the index of a repository head from the Git store, and
//! answering `search` from the current index generations. The query never reaches repository
//! plugins (S-2).

use crate::frame::{IndexedTargets, Op, RepoCall};
use crate::{CallContext, Inner, Service, ServiceError, TenthLog};
use gitstore::{BlobReader, CommitId, EntryKind, RepoName};
use std::ops::Range;

use serde::Serialize;
use std::time::Instant;

/// Hits per page when the caller gives no `limit`.
pub const DEFAULT_SEARCH_LIMIT: usize = 50;

/// The most searches [`crate::ServiceConfig::max_concurrent_searches`] may let run at once.
pub const MAX_CONCURRENT_SEARCHES: usize = 1024;

/// Twice the cores: a search uses up to two threads (S-4), so more at once only queue for CPU
/// and push every one of them towards its deadline.
pub(crate) fn default_concurrent_searches() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 2
}

pub use search::{BuildProgress, BuildStats, IndexConfig, IndexInfo, IndexesStats};

/// What a `search` looks for (its `type`, S-1, S-9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchKind {
    /// Lines and file names of the files at a commit (the indexed head, or `revision`).
    #[default]
    Code,
    /// Commit messages, newest first, like `git log --grep` (S-9).
    Commit,
    /// Added and removed lines of each commit against its first parent, like `git log -G`
    /// (S-9).
    Diff,
}

impl SearchKind {
    /// The name the tools and the JSON API use (`type`).
    pub fn name(self) -> &'static str {
        match self {
            SearchKind::Code => "code",
            SearchKind::Commit => "commit",
            SearchKind::Diff => "diff",
        }
    }
}

/// `search {query, repo?, revision?, path?, lang?, regex?, case_sensitive?, type?, author?,
/// since?, until?, count?, limit?, cursor?}` (S-1, S-8, S-9, S-10).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchRequest {
    pub query: String,
    /// One repository; `None` searches every readable repository.
    pub repo: Option<String>,
    /// Code: search the files at this commit (branch, tag or SHA within retention) instead of
    /// the indexed head (S-8). Commit and diff: the tip of the history searched (default the
    /// default branch's head). Needs `repo`.
    pub revision: Option<String>,
    /// What to look for (default code).
    pub kind: SearchKind,
    /// Commit and diff: only commits whose author (name or e-mail) matches this, like
    /// `git log --author`.
    pub author: Option<String>,
    /// Commit and diff: only commits at or after this date, like `git log --since`.
    pub since: Option<String>,
    /// Commit and diff: only commits at or before this date, like `git log --until`.
    pub until: Option<String>,
    /// Count every hit up to the count cap (else only as many as the page's work found; the
    /// total is then a lower bound) (S-10).
    pub count: bool,
    /// A glob over repository-relative paths (`docs/**/*.md`).
    pub path: Option<String>,
    pub lang: Option<String>,
    /// `true`: `query` is a Rust `regex` pattern; else literal text.
    pub regex: bool,
    pub case_sensitive: bool,
    /// Hits per page (default [`DEFAULT_SEARCH_LIMIT`], at most [`search::MAX_LIMIT`]).
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One page of search hits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchAnswer {
    /// Hits grouped by repository, each with the full commit SHA they were found in.
    pub repos: Vec<SearchRepoHits>,
    /// Pass it back as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
    /// Requested repositories whose index is not built yet (not searched).
    pub not_indexed: Vec<String>,
    /// Cluster mode: repositories none of the replicas holding them answered for (not
    /// searched; search again shortly). Absent when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_searched: Vec<String>,
    pub stats: SearchStatsAnswer,
    /// `QUERY_ALIASES` changed the query (P-10 disclosure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_rewrite: Option<crate::ArgumentRewrite>,
}

/// The hits of one repository on a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchRepoHits {
    pub repo: String,
    /// Full SHA: `read` it with this revision.
    pub commit: String,
    pub hits: Vec<SearchHit>,
}

/// One hit: a line, or a file name (`line` and `snippet` absent); for commit and diff
/// searches also the commit it is in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// For a file-name hit of a file indexed by path only: why its content is not searched
    /// (`binary`, `not UTF-8`, `over the size limit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_only: Option<String>,
    /// A server plugin's note on the hit (`on_search_results`, P-20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Commit and diff hits: the commit (full SHA) the hit is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Commit and diff hits: the commit's author, `Name <email>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Commit and diff hits: the author date, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// Commit hits: the message's first line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Diff hits: whether the line was added (its new line number in `line`) or removed (its
    /// old line number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<LineChange>,
    /// Byte ranges in `snippet` of the query's matches, found by the search with the regex it
    /// matched the line with (see [`search::Hit::Line`]); for the website's highlighting.
    /// Never serialized: the JSON and MCP answers are fixed by SPEC §9.
    #[serde(skip)]
    pub marks: Vec<Range<u32>>,
    /// Commit hits: byte ranges in `subject` of the query's matches (see
    /// [`search::HistoryHit::subject_marks`]). Never serialized.
    #[serde(skip)]
    pub subject_marks: Vec<Range<u32>>,
}

/// The side of a diff line a `type: "diff"` hit is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LineChange {
    /// A `+` line: `line` is its number in the commit.
    Added,
    /// A `-` line: `line` is its number in the first parent.
    Removed,
}

/// Query statistics (S-1: HTTP shows them); in cluster mode also those of one replica's
/// part of a search over every repository ([`crate::ShardStats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SearchStatsAnswer {
    /// Files the trigram index selected.
    pub candidate_files: u64,
    /// Files whose text was verified with the regex.
    pub files_verified: u64,
    /// Documents in the searched indexes.
    pub documents: u64,
    /// Hits of the whole query, all pages, as far as the search knows (S-10): exact unless
    /// `truncated`; with `count`, exact up to [`search::COUNT_CAP`].
    pub total_hits: u64,
    /// `total_hits` is a lower bound, "at least N" (S-10): the search stopped once its page
    /// was full (or, counting, at the cap). Paging on still reaches every hit.
    pub truncated: bool,
    /// The page came from the result cache (the same page of a recent search asked again).
    pub cached: bool,
    /// Wall time of the search in microseconds.
    pub elapsed_us: u64,
}

impl From<&search::SearchStats> for SearchStatsAnswer {
    fn from(stats: &search::SearchStats) -> Self {
        Self {
            candidate_files: stats.candidate_files,
            files_verified: stats.files_verified,
            documents: stats.documents,
            total_hits: stats.total_hits,
            truncated: stats.total_is_lower_bound,
            cached: stats.cached,
            elapsed_us: u64::try_from(stats.elapsed.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

impl From<search::SearchResults> for SearchAnswer {
    fn from(results: search::SearchResults) -> Self {
        let repos = results
            .repos
            .into_iter()
            .map(|r| SearchRepoHits {
                repo: r.repo,
                commit: r.commit,
                hits: r
                    .hits
                    .into_iter()
                    .map(|hit| match hit {
                        search::Hit::Line {
                            path,
                            line,
                            snippet,
                            marks,
                            ..
                        } => SearchHit {
                            path,
                            line: Some(line),
                            snippet: Some(snippet),
                            path_only: None,
                            note: None,
                            marks,
                            ..SearchHit::default()
                        },
                        search::Hit::FileName { path, path_only } => SearchHit {
                            path,
                            line: None,
                            snippet: None,
                            path_only: path_only.map(|why| why.describe().to_string()),
                            ..SearchHit::default()
                        },
                    })
                    .collect(),
            })
            .collect();
        Self {
            repos,
            next_cursor: results.next_cursor,
            not_indexed: results.not_indexed,
            not_searched: Vec::new(),
            stats: (&results.stats).into(),
            query_rewrite: None,
        }
    }
}

impl From<search::SearchError> for ServiceError {
    fn from(error: search::SearchError) -> Self {
        use search::SearchError as E;
        match error {
            E::Io { .. } | E::Corrupt { .. } | E::Source { .. } => {
                ServiceError::internal(error.to_string())
            }
            E::Timeout { .. } => ServiceError::unavailable(error.to_string()),
            _ => ServiceError::invalid(error.to_string()),
        }
    }
}

/// The request for the search crate, over `repos`.
pub(crate) fn index_request(req: &SearchRequest, repos: Vec<String>) -> search::SearchRequest {
    search::SearchRequest {
        query: req.query.clone(),
        repos,
        path: req.path.clone(),
        lang: req.lang.clone(),
        regex: req.regex,
        case_sensitive: req.case_sensitive,
        limit: req.limit.unwrap_or(DEFAULT_SEARCH_LIMIT),
        cursor: req.cursor.clone(),
        count: req.count,
    }
}

/// What a build of a repository runs its derived-state hooks with (P-7).
enum Derived {
    /// Build, with this epoch's `on_source_file` (`None`: no transform).
    Run(Option<pyplugin::Epoch>),
    /// Do not build: the published generation keeps answering; the text says why.
    Keep(String),
}

/// The files of one commit, read from the store's mirror by blob id, shaped by the
/// derived-state hook `on_source_file` of `plugins` when there is one (P-21).
/// The plugin steps of a build that failed on a file (P-7, issue 29 point 11).
#[derive(Default)]
struct FailedSteps {
    /// Plugin file → files its `on_source_file` failed on.
    by_plugin: std::collections::BTreeMap<String, u64>,
    /// The first few messages.
    messages: Vec<String>,
}

struct StoreSource {
    repo: String,
    commit: String,
    entries: Vec<search::SourceEntry>,
    blobs: BlobReader,
    plugins: Option<pyplugin::Epoch>,
    /// The host behind `plugins`: a hook it could not run (wedged) aborts the build.
    host: pyplugin::PluginHost,
    /// STRICT (P-7): any failing `on_source_file` fails the build.
    strict: bool,
    /// Plugin steps that failed on a file while the others' transforms were kept (not
    /// strict): counted into the build's report.
    failed_steps: std::sync::Mutex<FailedSteps>,
}

impl search::Source for StoreSource {
    fn entries(&self) -> Result<Vec<search::SourceEntry>, String> {
        Ok(self.entries.clone())
    }

    fn read(&self, entry: &search::SourceEntry) -> Result<Vec<u8>, String> {
        self.blobs.read(&entry.blob_id).map_err(|e| e.to_string())
    }

    fn transform(
        &self,
        entry: &search::SourceEntry,
        text: &str,
    ) -> Result<search::Transform, String> {
        let Some(epoch) = self
            .plugins
            .as_ref()
            .filter(|e| e.defines(pyplugin::Hook::SourceFile))
        else {
            return Ok(search::Transform::Keep);
        };
        let language = search::lang_of(&entry.path);
        let payload = serde_json::json!({
            "repo": self.repo,
            "commit": self.commit,
            "path": entry.path,
            "language": language,
            "text": text,
        });
        let outcome = epoch.run_blocking(pyplugin::Hook::SourceFile, payload);
        if let pyplugin::State::Wedged(why) = self.host.state() {
            // P-7: the hooks did not run (and will not, until a restart): publishing would
            // pass the file off as transformed.
            return Ok(search::Transform::Abort(format!(
                "server plugins are wedged ({})",
                pyplugin::summary(&why)
            )));
        }
        if !outcome.failures.is_empty() {
            let messages: Vec<String> = outcome
                .failures
                .iter()
                .map(|f| {
                    format!(
                        "{}: {} {}: {}",
                        entry.path,
                        f.file,
                        f.hook,
                        pyplugin::summary(&f.message)
                    )
                })
                .collect();
            if self.strict {
                return Err(messages.join("; "));
            }
            // P-7: a failing step leaves only its own transform of this file out; the other
            // files' steps in the pipeline still apply (the host skipped the failed one).
            let mut failed = self
                .failed_steps
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for failure in &outcome.failures {
                *failed.by_plugin.entry(failure.file.clone()).or_default() += 1;
            }
            let room = search::MAX_FAILURE_MESSAGES.saturating_sub(failed.messages.len());
            failed.messages.extend(messages.into_iter().take(room));
        }
        if outcome.stopped {
            return Ok(search::Transform::Skip);
        }
        let Some(changed) = outcome.changed() else {
            return Ok(search::Transform::Keep);
        };
        // The host validated the result: `text` a str, `language` a short str or null.
        let new_text = changed["text"].as_str().filter(|t| *t != text);
        let new_lang = match &changed["language"] {
            serde_json::Value::String(lang) if Some(lang.as_str()) != language => {
                search::DocLang::named(lang)
            }
            serde_json::Value::Null if language.is_some() => search::DocLang::Unknown,
            _ => search::DocLang::FromPath,
        };
        if new_text.is_none() && new_lang == search::DocLang::FromPath {
            return Ok(search::Transform::Keep);
        }
        Ok(search::Transform::Replace {
            text: new_text.map(str::to_owned),
            lang: new_lang,
        })
    }

    fn plugin_fingerprint(&self) -> String {
        self.plugins
            .as_ref()
            .map(|epoch| epoch.derived_fingerprint().to_owned())
            .unwrap_or_default()
    }
}

impl Service {
    /// Builds the search index of `repo`'s default-branch head (S-3) unless it is current;
    /// documents of unchanged blobs are reused from the previous index. `progress` sees
    /// documents done of total (O-5); progress is also logged every tenth.
    pub async fn index(
        &self,
        repo: String,
        mut progress: impl FnMut(BuildProgress) + Send + 'static,
    ) -> Result<BuildStats, ServiceError> {
        self.blocking(move |inner| inner.index(&repo, false, &mut progress))
            .await
    }

    /// `search` (S-1) over the current index of each readable repository (or of `repo`),
    /// with the server plugins' `ALIASES`, `QUERY_ALIASES` and `on_search_results` (P-20,
    /// P-22) applied.
    pub async fn search(
        &self,
        ctx: &CallContext,
        mut req: SearchRequest,
    ) -> Result<SearchAnswer, ServiceError> {
        let repo = req.repo.take();
        if repo.is_none() {
            if req.kind != SearchKind::Code {
                return Err(ServiceError::invalid(format!(
                    "type \"{}\" searches the history of one repository: pass repo",
                    req.kind.name()
                )));
            }
            if req.revision.is_some() {
                return Err(ServiceError::invalid(
                    "revision names a commit of one repository: pass repo too",
                ));
            }
        }
        // Cluster mode: a search over every repository asks their owners too.
        let peers = repo.is_none().then(|| self.peers()).flatten();
        self.framed(ctx, Op::SEARCH, repo, move |call| async move {
            let mut rewrite = None;
            if let Some((query, files)) =
                self.alias_query(ctx, &req.query, req.regex, req.case_sensitive)
            {
                rewrite = Some(crate::ArgumentRewrite {
                    files,
                    original: serde_json::json!({"query": req.query}),
                    effective: serde_json::json!({"query": query}),
                });
                req.query = query;
            }
            let hook = self.search_hook(ctx);
            let mut answer = match (req.kind, &req.revision, peers) {
                (SearchKind::Commit | SearchKind::Diff, _, _) => {
                    self.search_history(call, req).await?
                }
                (SearchKind::Code, Some(_), _) => self.search_revision(call, req, hook).await?,
                (SearchKind::Code, None, Some(peers)) => {
                    self.search_fanned(call, req, hook, peers).await?
                }
                (SearchKind::Code, None, None) => self.search_base(call, req, hook).await?,
            };
            answer.query_rewrite = rewrite;
            Ok(answer)
        })
        .await
    }

    async fn search_base(
        &self,
        call: RepoCall<Option<String>>,
        req: SearchRequest,
        hook: Option<crate::serverplugins::SearchHook>,
    ) -> Result<SearchAnswer, ServiceError> {
        let mut call = call;
        // The slot goes with the call onto the blocking pool: held until the search is done,
        // even if the caller went away meanwhile (it stops at its deadline).
        call.admit(&self.inner, crate::Class::Search).await?;
        self.blocking(move |inner| {
            let (
                indexes,
                IndexedTargets {
                    repos,
                    leases,
                    stale,
                },
            ) = call.targets(inner, None)?;
            let query = req.query.clone();
            let request = index_request(&req, repos);
            let mut answer: SearchAnswer = indexes.search(&request)?.into();
            drop(leases);
            answer.not_indexed.extend(stale);
            answer.not_indexed.sort();
            Ok(match hook {
                Some(hook) => hook.apply(&query, answer),
                None => answer,
            })
        })
        .await
    }

    /// [`Service::search_base`] over every readable repository in cluster mode: each
    /// searched here or by its owners, the parts merged into one page (`fanout.rs`), then
    /// `on_search_results` here.
    async fn search_fanned(
        &self,
        call: RepoCall<Option<String>>,
        req: SearchRequest,
        hook: Option<crate::serverplugins::SearchHook>,
        peers: std::sync::Arc<dyn crate::Peers>,
    ) -> Result<SearchAnswer, ServiceError> {
        let query = req.query.clone();
        let fan = crate::fanout::FanQuery {
            mode: crate::ShardMode::Search,
            query: req.query,
            regex: req.regex,
            case_sensitive: req.case_sensitive,
            path: req.path,
            lang: req.lang,
            limit: req.limit.unwrap_or(DEFAULT_SEARCH_LIMIT),
            cursor: req.cursor,
            count: req.count,
        };
        let fanned = self.fan_out(call, None, fan, peers).await?;
        let mut answer: SearchAnswer = fanned.results.into();
        answer.not_searched = fanned.not_searched;
        match hook {
            Some(hook) => self.blocking(move |_| Ok(hook.apply(&query, answer))).await,
            None => Ok(answer),
        }
    }

    /// Drops the indexes of repositories no longer registered (a `csg repo remove` while the
    /// server was down, or by another process). Answers the names dropped.
    pub async fn prune_indexes(&self) -> Result<Vec<String>, ServiceError> {
        self.blocking(|inner| {
            let indexes = inner.indexes()?;
            let registered: std::collections::HashSet<String> = inner
                .store
                .repos()?
                .into_iter()
                .map(|info| info.name.to_string())
                .collect();
            let mut dropped = Vec::new();
            for repo in indexes.repos() {
                if !registered.contains(&repo) {
                    inner.drop_index(&repo)?;
                    dropped.push(repo);
                }
            }
            Ok(dropped)
        })
        .await
    }

    /// Repositories whose current index was built under other derived-state plugin sources
    /// than `plugin_fingerprint` (P-7: "index stale: rebuild pending").
    pub(crate) fn index_stale_repos(&self, plugin_fingerprint: &str) -> Vec<String> {
        let Ok(indexes) = self.inner.indexes() else {
            return Vec::new();
        };
        indexes
            .repos()
            .into_iter()
            .filter(|repo| {
                indexes.current(repo).is_some_and(|info| {
                    search::plugin_part(&info.fingerprint) != Some(plugin_fingerprint)
                })
            })
            .collect()
    }

    /// The current index of `repo`, if any.
    pub fn index_info(&self, repo: &str) -> Option<IndexInfo> {
        self.inner.indexes().ok()?.current(repo)
    }

    /// Index and search counters since start-up (`None` when the index could not open).
    pub fn index_stats(&self) -> Option<IndexesStats> {
        self.inner.indexes().ok().map(search::Indexes::stats)
    }

    /// Drops every kept search answer (the result cache, the kept revision overlays, the
    /// service's and the search crate's, and their blobs' trigram sets), so the next search of
    /// any query runs cold: benchmarks time first pages this way (issue 33).
    pub fn clear_search_cache(&self) {
        *self
            .inner
            .overlays
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Default::default();
        if let Ok(indexes) = self.inner.indexes() {
            indexes.clear_result_cache();
        }
    }
}

impl Inner {
    pub(crate) fn indexes(&self) -> Result<&search::Indexes, ServiceError> {
        self.indexes.as_ref().map_err(|message| {
            ServiceError::unavailable(format!(
                "code search is unavailable: {message}; `read` and `list` still work"
            ))
        })
    }

    /// Drops `repo`'s index here (cluster mode: a repository this replica no longer owns),
    /// and with it the note that this process built it. Searches running on it finish on
    /// their generation. Answers whether there was one; without search, nothing to drop.
    pub(crate) fn drop_index(&self, repo: &str) -> Result<bool, ServiceError> {
        let Ok(indexes) = self.indexes.as_ref() else {
            return Ok(false);
        };
        let had = indexes.current(repo).is_some();
        // Its commit and diff search index (S-9) goes with it, first: the code index's
        // removal then leaves no directory behind.
        self.history_indexes().remove(repo)?;
        indexes.remove(repo)?;
        self.indexed_here
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(repo);
        Ok(had)
    }

    /// Whether `commit` is the commit `repo`'s current index was built from.
    pub(crate) fn indexed(&self, repo: &RepoName, commit: Option<&CommitId>) -> bool {
        let current = self
            .indexes
            .as_ref()
            .ok()
            .and_then(|indexes| indexes.current(repo.as_str()));
        matches!((current, commit), (Some(info), Some(commit)) if info.commit == commit.as_str())
    }

    /// Indexes `repo`'s head: incrementally (a no-op when current), or with `fresh` from
    /// scratch into a new generation.
    pub(crate) fn index(
        &self,
        repo: &str,
        fresh: bool,
        progress: &mut dyn FnMut(BuildProgress),
    ) -> Result<BuildStats, ServiceError> {
        let started = Instant::now();
        let built = self.index_untimed(repo, fresh, progress);
        // A build that found the index current did no work worth a duration (O-4).
        if !matches!(&built, Ok(stats) if stats.skipped_same) {
            self.stats.index_build.record(started, built.is_ok());
        }
        built
    }

    fn index_untimed(
        &self,
        repo: &str,
        fresh: bool,
        progress: &mut dyn FnMut(BuildProgress),
    ) -> Result<BuildStats, ServiceError> {
        let indexes = self.indexes()?;
        let started = Instant::now();
        // Maintenance, not a caller's operation: the local caller reads every repository.
        let name = RepoName::parse(repo)?;
        let lease = self.store.lease_revision(&name, None)?;
        let commit = lease.commit().clone();
        let entries = self
            .store
            .find_files(&name, &commit, "")?
            .into_iter()
            .filter(|f| matches!(f.kind, EntryKind::File | EntryKind::Executable))
            .map(|f| search::SourceEntry {
                path: f.path,
                blob_id: f.id,
                size: f.size,
            })
            .collect();
        let blobs = self.store.blob_reader(&name, &commit)?;
        let plugins = match self.derived_epoch(indexes, name.as_str(), fresh) {
            Derived::Run(plugins) => plugins,
            Derived::Keep(why) => return Err(ServiceError::unavailable(why)),
        };
        let source = StoreSource {
            repo: name.to_string(),
            commit: commit.to_string(),
            entries,
            blobs,
            plugins,
            host: self.server_plugins.clone(),
            strict: self.config.index.strict_transforms,
            failed_steps: Default::default(),
        };
        let mut log = TenthLog::default();
        let mut report = |p: BuildProgress| {
            if log.crossed("indexing", p.done, p.total) {
                tracing::info!(repo = %name, done = p.done, total = p.total, "indexing");
            }
            progress(p);
        };
        let mut stats = if fresh {
            indexes.rebuild(name.as_str(), commit.as_str(), &source, &mut report)?
        } else {
            indexes.build(name.as_str(), commit.as_str(), &source, &mut report)?
        };
        {
            let failed = &*source
                .failed_steps
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            stats.transform_failures += failed.by_plugin.values().sum::<u64>();
            for (plugin, count) in &failed.by_plugin {
                *stats
                    .transform_failures_by_step
                    .entry(plugin.clone())
                    .or_default() += count;
            }
            let room = search::MAX_FAILURE_MESSAGES.saturating_sub(stats.failure_messages.len());
            stats
                .failure_messages
                .extend(failed.messages.iter().take(room).cloned());
        }
        if let Some(epoch) = &source.plugins
            && !epoch.derived_fingerprint().is_empty()
        {
            self.remember_derived(indexes, epoch.clone());
        }
        self.indexed_here
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_string());
        if stats.transform_failures > 0 {
            tracing::warn!(
                repo = %name,
                failures = stats.transform_failures,
                by_plugin = ?stats.transform_failures_by_step,
                first = ?stats.failure_messages,
                "on_source_file failed for some files; those plugins' transforms of them are left out"
            );
        }
        if !stats.skipped_same {
            tracing::info!(
                repo = %name,
                commit = %commit,
                documents = stats.documents,
                reused = stats.reused,
                read = stats.read,
                path_only = stats.path_only,
                transformed = stats.transformed,
                skipped_by_plugins = stats.skipped,
                bytes = stats.bytes,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "index built"
            );
        }
        Ok(stats)
    }
}

impl Inner {
    /// The server-plugin epoch whose `on_source_file` a build of `repo` runs (P-7), or why
    /// this process must not build it at all.
    ///
    /// - An explicit rebuild, a first build, and a build whose published generation came
    ///   from the current sources use the current epoch.
    /// - An incremental build keeps the sources the published generation was built with (no
    ///   mixing) while this process holds them: a hook added, edited or removed by a reload
    ///   marks the index stale until an explicit rebuild.
    /// - The first build of a repository since this process started uses the current
    ///   sources whatever the published ones were: a hook added, edited or removed while the
    ///   server was down is seen at start and rebuilt in full.
    /// - A process without server plugins (off, or wedged) never rebuilds or republishes a
    ///   generation built with hooks: it serves it as built and says so.
    fn derived_epoch(&self, indexes: &search::Indexes, repo: &str, fresh: bool) -> Derived {
        let current = self.server_plugins.current();
        let current_fp = current.as_ref().map_or("", |e| e.derived_fingerprint());
        let Some(published) = indexes.current(repo) else {
            return Derived::Run(current);
        };
        let published_fp = search::plugin_part(&published.fingerprint).unwrap_or_default();
        if published_fp == current_fp {
            return Derived::Run(current);
        }
        if current.is_none() && !published_fp.is_empty() {
            let state = self.server_plugins.state();
            return Derived::Keep(format!(
                "the index of {repo} was built with server plugins (on_source_file) that this process does not run (server plugins {}); it keeps answering as built: rebuild it from a server running those plugins",
                state.name()
            ));
        }
        if fresh {
            return Derived::Run(current);
        }
        let seen_here = self
            .indexed_here
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(repo);
        if !seen_here {
            return Derived::Run(current);
        }
        if published_fp.is_empty() {
            return Derived::Run(None);
        }
        let held = self
            .derived_epochs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(published_fp)
            .cloned();
        Derived::Run(held.or(current))
    }

    /// Keeps `epoch` for incremental builds of the generations it shaped; forgets epochs no
    /// current generation was built with.
    fn remember_derived(&self, indexes: &search::Indexes, epoch: pyplugin::Epoch) {
        let in_use: std::collections::HashSet<String> = indexes
            .repos()
            .iter()
            .filter_map(|repo| indexes.current(repo))
            .filter_map(|info| search::plugin_part(&info.fingerprint).map(str::to_owned))
            .collect();
        let mut held = self
            .derived_epochs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.insert(epoch.derived_fingerprint().to_owned(), epoch);
        held.retain(|fp, _| in_use.contains(fp));
    }
}

/// Opens the index directory of a store; an error leaves search unavailable, not the service.
pub(crate) fn open(
    store: &gitstore::GitStore,
    config: IndexConfig,
) -> Result<search::Indexes, String> {
    search::Indexes::open(store.storage_root().join("index"), config).map_err(|error| {
        tracing::error!(%error, "the search index did not open; search is unavailable");
        error.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, ServiceConfig};
    use std::time::Duration;

    /// S-1: with every search slot taken, a further search waits `search_queue_wait`, then
    /// is refused as busy with a message saying to retry; once a slot frees, it runs.
    #[tokio::test]
    async fn s1_search_admission_refuses_when_full() {
        let source = testgit::SourceRepo::with_files(&[("a.md", b"needle\n")]);
        let config = ServiceConfig {
            max_concurrent_searches: 1,
            search_queue_wait: Duration::from_millis(20),
            ..ServiceConfig::default()
        };
        let service = Service::new(source.store("acme/docs", ""), config);
        service.index("acme/docs".into(), |_| {}).await.unwrap();
        let request = || SearchRequest {
            query: "needle".into(),
            ..SearchRequest::default()
        };
        // The one slot, taken by another client's running search.
        let running = service
            .inner
            .admission
            .admit(
                crate::Class::Search,
                crate::ClientKey::Token(99),
                &budget::Budget::default(),
            )
            .await
            .unwrap();
        let error = service
            .search(&CallContext::default(), request())
            .await
            .unwrap_err();
        assert_eq!(error.kind, ErrorKind::Busy);
        assert!(
            error.message.contains("busy") && error.message.contains("retry"),
            "{}",
            error.message
        );
        drop(running);
        let answer = service
            .search(&CallContext::default(), request())
            .await
            .unwrap();
        assert_eq!(answer.repos.len(), 1);
        let search = service
            .admission_stats()
            .into_iter()
            .find(|s| s.class == crate::Class::Search)
            .unwrap();
        assert_eq!((search.slots, search.busy), (1, 0), "slot returned");
    }
}
