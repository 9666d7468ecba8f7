//! Enrichment by repository plugins (W-33, W-34): after the base read, outside the query
//! lock, holding the snapshot lease. Discovery results are cached per commit and scope
//! (W-29); the plugin host (`wasmplugin`) compiles, runs and bounds the plugins.

use crate::model::{Enrichment, PluginInfo, ReadItem};
use crate::{CallContext, Inner};
use gitstore::{CommitId, EntryKind, RepoName, RepoPath};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use wasmplugin::runtime::{ExecutionReport, HostFiles, HostReadError, InstanceKey, Runtime};
use wasmplugin::{
    ArtifactEntry, ArtifactKind, Attachments, Catalog, Code, Diagnostic, ItemRef, PluginConfig,
    PluginSelection,
};

/// Catalogs kept (W-29).
const CATALOG_ENTRIES: usize = 64;
/// Artifact bytes kept in catalogs (W-29).
const CATALOG_BYTES: usize = 128 * 1024 * 1024;

/// A catalog unused this long is dropped by the background sweep (W-29).
pub const CATALOG_IDLE: std::time::Duration = std::time::Duration::from_secs(600);

/// (repository, commit): what a catalog is cached under.
type CatalogKey = (String, String);

/// The plugin host of one service: configuration, runtime and the catalog cache.
pub(crate) struct Plugins {
    pub(crate) config: PluginConfig,
    runtime: Option<Runtime>,
    catalogs: Mutex<CatalogCache>,
    /// Discoveries in progress, by (repository, commit).
    flights: Mutex<HashMap<CatalogKey, Arc<Mutex<()>>>>,
    /// Discoveries run (cache misses that did the work), for tests and metrics.
    pub(crate) discoveries: std::sync::atomic::AtomicU64,
}

/// A small LRU of catalogs by (repository, commit); the storage root and scope are fixed
/// per repository registration within one store.
#[derive(Default)]
struct CatalogCache {
    entries: HashMap<CatalogKey, Cached>,
    order: VecDeque<CatalogKey>,
    bytes: usize,
}

/// A cached catalog and when it was last used (for the idle sweep).
struct Cached {
    catalog: Arc<Catalog>,
    used: Instant,
}

impl CatalogCache {
    fn get(&mut self, key: &CatalogKey) -> Option<Arc<Catalog>> {
        let found = self.entries.get_mut(key)?;
        found.used = Instant::now();
        let catalog = found.catalog.clone();
        self.order.retain(|k| k != key);
        self.order.push_back(key.clone());
        Some(catalog)
    }

    fn put(&mut self, key: CatalogKey, catalog: Arc<Catalog>) {
        self.bytes += catalog.artifact_bytes();
        let cached = Cached {
            catalog,
            used: Instant::now(),
        };
        if let Some(old) = self.entries.insert(key.clone(), cached) {
            self.bytes -= old.catalog.artifact_bytes();
        }
        self.order.retain(|k| *k != key);
        self.order.push_back(key);
        while self.entries.len() > CATALOG_ENTRIES || self.bytes > CATALOG_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.remove(&oldest);
        }
    }

    fn remove(&mut self, key: &CatalogKey) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= old.catalog.artifact_bytes();
        }
    }

    /// Drops the catalogs unused since `now - CATALOG_IDLE`; answers how many.
    fn sweep_idle(&mut self, now: Instant) -> usize {
        let idle: Vec<CatalogKey> = self
            .entries
            .iter()
            .filter(|(_, c)| now.saturating_duration_since(c.used) >= CATALOG_IDLE)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &idle {
            self.remove(key);
        }
        self.order.retain(|k| self.entries.contains_key(k));
        idle.len()
    }
}

impl Plugins {
    /// The host; when the runtime cannot start, enrichment answers a diagnostic instead of
    /// attachments (never failing a base read).
    pub(crate) fn new(config: PluginConfig) -> Self {
        let runtime = if config.disabled {
            None
        } else {
            match Runtime::new(config.clone()) {
                Ok(runtime) => Some(runtime),
                Err(error) => {
                    tracing::error!(%error, "the repository plugin runtime did not start; plugins are off");
                    None
                }
            }
        };
        Self {
            config,
            runtime,
            catalogs: Mutex::new(CatalogCache::default()),
            flights: Mutex::default(),
            discoveries: Default::default(),
        }
    }

    pub(crate) fn runtime(&self) -> Option<&Runtime> {
        self.runtime.as_ref()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, CatalogCache> {
        self.catalogs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops catalogs idle for [`CATALOG_IDLE`] as of `now` (W-29); answers how many.
    pub(crate) fn sweep_catalogs(&self, now: Instant) -> usize {
        self.cache().sweep_idle(now)
    }

    /// Catalogs cached now.
    pub(crate) fn cached_catalogs(&self) -> usize {
        self.cache().entries.len()
    }
}

impl Inner {
    /// Background preparation (W-31): discovery, caching of metadata and bytes, and
    /// compilation of default-enabled modules of `commit`, with no deadline. Never calls
    /// `enrich`. Answers how many modules are compiled and cached.
    pub(crate) fn prepare_plugins(
        &self,
        repo: &RepoName,
        commit: &CommitId,
    ) -> Result<usize, String> {
        let catalog = self.catalog(repo, commit)?;
        let Some(runtime) = self.plugins.runtime() else {
            return Ok(0);
        };
        let mut ready = 0;
        for plugin in catalog
            .plugins
            .iter()
            .filter(|p| p.metadata.default_enabled)
        {
            match runtime.module(&plugin.digest, &plugin.bytes, None) {
                Ok(_) => ready += 1,
                Err(diagnostic) => {
                    tracing::info!(plugin = %plugin.name, dir = %plugin.dir, %diagnostic, "plugin not prepared")
                }
            }
        }
        Ok(ready)
    }
}

/// Host reads of one execution: the same repository, commit and scope, inside the plugin
/// directory (W-22). Each read takes the query lock briefly and re-checks retention.
struct PluginFiles<'a> {
    inner: &'a Inner,
    repo: &'a RepoName,
    commit: &'a CommitId,
    dir: String,
    deadline: Instant,
}

impl HostFiles for PluginFiles<'_> {
    fn read(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        if Instant::now() >= self.deadline {
            return Err("the request deadline passed".to_string().into());
        }
        let refused = |e: gitstore::Error| HostReadError::Refused(e.to_string());
        let relative = RepoPath::parse(path).map_err(refused)?;
        if relative.is_root() {
            return Err("an empty path names no file".to_string().into());
        }
        let full = if self.dir.is_empty() {
            relative.to_string()
        } else {
            format!("{}/{}", self.dir, relative)
        };
        let full = RepoPath::parse(&full).map_err(refused)?;
        let _guard = self
            .inner
            .query_lock
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        match self
            .inner
            .store
            .read_bytes_within(self.repo, self.commit, &full, max_bytes)
        {
            Err(gitstore::Error::TooLarge { size, .. }) => Err(HostReadError::TooLarge(size)),
            other => other.map_err(refused),
        }
    }
}

impl Inner {
    /// Runs the selected plugins over the successful items. Never fails: every problem is a
    /// diagnostic.
    pub(crate) fn enrich(
        &self,
        ctx: &CallContext,
        operation: &str,
        repo: &RepoName,
        commit: &CommitId,
        items: &[ReadItem],
        call: Option<&[PluginSelection]>,
    ) -> Enrichment {
        let started = Instant::now();
        let deadline = started + self.plugins.config.timeout;
        let refs: Vec<ItemRef> = items
            .iter()
            .enumerate()
            .filter_map(|(index, item)| {
                let range = item.outcome.as_ref().ok()?;
                Some(ItemRef {
                    item_id: format!("read-{index}"),
                    repository_path: item.path.clone(),
                    start_line: range.start_line,
                    end_line: range.end_line,
                    content: range.content.clone(),
                    truncated: range.truncated,
                    has_more: Some(range.has_more),
                    next_start_line: range.next_start_line,
                })
            })
            .collect();
        let mut attachments = Attachments::default();
        let quiet = call.is_none() && matches!(ctx.plugins, wasmplugin::ConnectionPlugins::Off);
        if quiet || refs.is_empty() || (self.plugins.config.disabled && call.is_none()) {
            return Enrichment::default();
        }
        let catalog = match self.catalog(repo, commit) {
            Ok(catalog) => catalog,
            Err(message) => {
                attachments
                    .diagnostics
                    .push(Diagnostic::new(Code::Artifact, message));
                return finish(attachments, started);
            }
        };
        let disabled = self.plugins.config.disabled || self.plugins.runtime().is_none();
        let plan = wasmplugin::plan(&catalog, &ctx.plugins, call, operation, disabled, &refs);
        attachments.diagnostics.extend(plan.diagnostics);
        let Some(runtime) = self.plugins.runtime() else {
            return finish(attachments, started);
        };
        let mut totals = Totals::default();
        for execution in &plan.executions {
            let plugin = &execution.plugin;
            let ids: Vec<String> = execution
                .items
                .iter()
                .map(|&i| refs[i].item_id.clone())
                .collect();
            let compiling = Instant::now();
            totals.compile_hits += u64::from(runtime.is_cached(&plugin.digest));
            let module = runtime.module(&plugin.digest, &plugin.bytes, Some(deadline));
            totals.compile += compiling.elapsed();
            let outcome = module.and_then(|module| {
                let key = InstanceKey {
                    storage_root: self.store.storage_root().to_string_lossy().into_owned(),
                    repo: repo.to_string(),
                    commit: commit.to_string(),
                    plugin_dir: plugin.dir.clone(),
                    args: execution.args.to_string(),
                };
                let input = execution.input(operation, repo.as_str(), commit.as_str(), &refs);
                let files = PluginFiles {
                    inner: self,
                    repo,
                    commit,
                    dir: plugin.dir.clone(),
                    deadline,
                };
                let (outcome, report) =
                    runtime.execute_reported(&module, &key, &input, &files, deadline);
                totals.add(&report);
                outcome
            });
            let failed = match outcome {
                Ok(executed) => {
                    attachments.absorb(execution, &refs, &executed.output);
                    executed.read_budget
                }
                Err(diagnostic) => Some(diagnostic),
            };
            if let Some(diagnostic) = failed {
                totals.faults.push(diagnostic.code.as_str());
                attachments
                    .diagnostics
                    .push(diagnostic.at(&plugin.name, &plugin.dir).for_items(ids));
            }
        }
        totals.log(plan.executions.len(), started);
        finish(attachments, started)
    }

    /// What `availability(include_plugins: true)` shows (W-6): static information only.
    pub(crate) fn plugin_infos(
        &self,
        repo: &RepoName,
        commit: &CommitId,
    ) -> Result<Vec<PluginInfo>, String> {
        let catalog = self.catalog(repo, commit)?;
        let runnable = catalog.plugins.iter().map(|p| PluginInfo {
            name: p.name.clone(),
            directory: p.dir.clone(),
            title: p.metadata.title.clone(),
            description: p.metadata.description.clone(),
            version: p.metadata.version.clone(),
            operations: p.metadata.operations.clone(),
            default_enabled: p.metadata.default_enabled,
            diagnostic: None,
        });
        let broken = catalog.broken.iter().map(|b| PluginInfo {
            name: b.name.clone(),
            directory: b.dir.clone(),
            title: None,
            description: None,
            version: None,
            operations: Vec::new(),
            default_enabled: false,
            diagnostic: Some(b.diagnostic.to_string()),
        });
        let mut infos: Vec<PluginInfo> = runnable.chain(broken).collect();
        infos.sort_by(|a, b| {
            (a.name.as_bytes(), &a.directory).cmp(&(b.name.as_bytes(), &b.directory))
        });
        Ok(infos)
    }

    /// The catalog of (repo, commit): cached, else discovered (W-29). A failure is never
    /// cached.
    fn catalog(&self, repo: &RepoName, commit: &CommitId) -> Result<Arc<Catalog>, String> {
        let key = (repo.to_string(), commit.to_string());
        let cached = || self.plugins.cache().get(&key);
        if let Some(found) = cached() {
            return Ok(found);
        }
        // Single flight (W-29): concurrent cold requests for one key wait for the first one's
        // discovery instead of repeating it.
        let flight = {
            let mut flights = self
                .plugins
                .flights
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            flights.entry(key.clone()).or_default().clone()
        };
        let _flight = flight.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = cached() {
            return Ok(found);
        }
        self.plugins
            .discoveries
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let discovered = self.discover(repo, commit);
        self.plugins
            .flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        let catalog = Arc::new(discovered?);
        self.plugins.cache().put(key, catalog.clone());
        Ok(catalog)
    }

    /// Discovery proper: the artifacts of the commit inside the scope, read and checked.
    fn discover(&self, repo: &RepoName, commit: &CommitId) -> Result<Catalog, String> {
        {
            let _guard = self
                .query_lock
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            let found = self
                .store
                .find_files(repo, commit, wasmplugin::ARTIFACT_SUFFIX)
                .map_err(|e| format!("plugin discovery failed: {e}"))?;
            let entries: Vec<ArtifactEntry> = found
                .into_iter()
                .map(|f| ArtifactEntry {
                    path: f.path,
                    kind: match f.kind {
                        EntryKind::Symlink => ArtifactKind::Symlink,
                        EntryKind::Submodule => ArtifactKind::Submodule,
                        _ => ArtifactKind::Blob,
                    },
                    size: f.size,
                    digest: f.id,
                })
                .collect();
            wasmplugin::discover(&entries, &self.plugins.config, |entry| {
                let path = RepoPath::parse(&entry.path).map_err(|e| e.to_string())?;
                self.store
                    .read_bytes(repo, commit, &path)
                    .map_err(|e| format!("plugin discovery failed: {e}"))
            })
        }
    }
}

/// The W-36 figures of one enrichment, summed over its executions.
#[derive(Default)]
struct Totals {
    compile: std::time::Duration,
    compile_hits: u64,
    instantiate: std::time::Duration,
    execute: std::time::Duration,
    host_read: std::time::Duration,
    read_calls: u64,
    read_bytes: u64,
    instance_reuses: u64,
    faults: Vec<&'static str>,
}

impl Totals {
    fn add(&mut self, report: &ExecutionReport) {
        self.instantiate += report.instantiate;
        self.execute += report.execute;
        self.host_read += report.host_read;
        self.read_calls += report.read_calls;
        self.read_bytes += report.read_bytes;
        self.instance_reuses += u64::from(report.instance_reused);
    }

    /// One debug line per enrichment (W-36): timings, reads, cache hits and fault codes;
    /// never args, bodies or output.
    fn log(&self, executions: usize, started: Instant) {
        let us = |d: std::time::Duration| d.as_micros() as u64;
        tracing::debug!(
            executions,
            total_us = us(started.elapsed()),
            compile_us = us(self.compile),
            instantiate_us = us(self.instantiate),
            execute_us = us(self.execute),
            host_read_us = us(self.host_read),
            read_calls = self.read_calls,
            read_bytes = self.read_bytes,
            compile_cache_hits = self.compile_hits,
            instance_reuses = self.instance_reuses,
            faults = %self.faults.join(","),
            "plugin enrichment"
        );
    }
}

fn finish(attachments: Attachments, started: Instant) -> Enrichment {
    tracing::debug!(
        elapsed_us = started.elapsed().as_micros() as u64,
        attachments = attachments.per_item.len() + attachments.whole.len(),
        diagnostics = attachments.diagnostics.len(),
        "enrichment"
    );
    Enrichment {
        per_item: attachments.per_item,
        whole: attachments.whole,
        diagnostics: attachments
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect(),
    }
}
