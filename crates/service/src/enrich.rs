//! Enrichment by repository plugins (W-33, W-34): after the base read, holding the snapshot
//! lease, never waiting on a lock a registry change can hold. Discovery results are cached per commit and scope
//! (W-29); the plugin host (`wasmplugin`) compiles, runs and bounds the plugins.
//!
//! This module holds the plugin host of the service and the enrichment run itself; the
//! catalog cache (`catalog_cache`), discovery in single flight (`discovery`) and background
//! preparation (`prepare`) are its parts.

pub(crate) mod catalog_cache;
mod discovery;
pub(crate) mod prepare;

use crate::model::{Enrichment, ReadItem};
use crate::{CallContext, Inner, Service};
use catalog_cache::{CatalogCache, CatalogKey};
use discovery::{Flight, Gate, discovery_slots};
use gitstore::{CommitId, Lease, RepoName, RepoPath};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use wasmplugin::runtime::{ExecutionReport, HostFiles, HostReadError, InstanceKey, Runtime};
use wasmplugin::{Attachments, Code, Diagnostic, ItemRef, PluginConfig, PluginSelection};

/// The plugin host of one service: configuration, runtime and the catalog cache.
pub(crate) struct Plugins {
    pub(crate) config: PluginConfig,
    runtime: Option<Runtime>,
    catalogs: Mutex<CatalogCache>,
    /// Discoveries in progress, by catalog key.
    flights: Mutex<HashMap<CatalogKey, Arc<Flight>>>,
    /// Discoveries running at once, over every key.
    discovering: Gate,
    /// Discoveries run (cache misses that did the work), for tests and metrics.
    pub(crate) discoveries: std::sync::atomic::AtomicU64,
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
            discovering: Gate::new(discovery_slots()),
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

    /// Catalog lookups answered from the cache so far.
    pub(crate) fn catalog_hits(&self) -> u64 {
        self.cache().hits
    }
}

impl Service {
    /// Figures of the repository-plugin runtime (W-38), kept apart from the base-query
    /// statistics; `None` when plugins are disabled.
    pub fn plugin_stats(&self) -> Option<wasmplugin::runtime::RuntimeStats> {
        self.inner.plugins.runtime().map(|r| r.stats())
    }

    /// Plugin discoveries run so far (catalog cache misses that did the work, W-29).
    pub fn plugin_discoveries(&self) -> u64 {
        self.inner
            .plugins
            .discoveries
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops plugin catalogs unused for 10 minutes as of `now` (W-29; the maintenance loop
    /// calls it with the current time). Answers how many were dropped.
    pub fn sweep_plugin_catalogs(&self, now: std::time::Instant) -> usize {
        self.inner.plugins.sweep_catalogs(now)
    }

    /// Plugin catalogs cached now (W-29).
    pub fn plugin_catalogs(&self) -> usize {
        self.inner.plugins.cached_catalogs()
    }

    /// Plugin catalog lookups answered from the cache (W-29; with
    /// [`Service::plugin_discoveries`], the hit ratio).
    pub fn plugin_catalog_hits(&self) -> u64 {
        self.inner.plugins.catalog_hits()
    }
}

/// Host reads of one execution: the same repository, commit and scope, inside the plugin
/// directory (W-22). Each read goes through the call's lease, so it uses the registry
/// snapshot of its call and re-checks retention there (W-33).
struct PluginFiles<'a> {
    lease: &'a Lease,
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
        match self.lease.read_bytes(&full, Some(max_bytes)) {
            Err(gitstore::Error::TooLarge { size, .. }) => Err(HostReadError::TooLarge(size)),
            other => other.map_err(refused),
        }
    }
}

/// One enrichment to run: the base answer's items and what selects the plugins.
#[derive(Clone, Copy)]
pub(crate) struct EnrichRequest<'a> {
    pub ctx: &'a CallContext,
    pub operation: &'a str,
    /// The base read's lease: its commit and registry snapshot (W-33).
    pub lease: &'a Lease,
    pub repo: &'a RepoName,
    pub commit: &'a CommitId,
    pub items: &'a [ReadItem],
    pub call: Option<&'a [PluginSelection]>,
}

impl Inner {
    /// Runs the selected plugins over the successful items. Never fails: every problem is a
    /// diagnostic, a panic inside enrichment included (W-25: plan, absorb and host glue are
    /// caught here, so a successful base read never becomes an error).
    pub(crate) fn enrich(&self, req: EnrichRequest<'_>) -> Enrichment {
        let started = Instant::now();
        let enrichment = contain_panics(|| self.enrich_unguarded(req, false).unwrap_or_default());
        self.record_enrichment(started, &enrichment);
        enrichment
    }

    /// W-38: enrichment's own figures; an enrichment with a fault diagnostic counts as an
    /// error (the base read it belongs to still succeeded).
    fn record_enrichment(&self, started: Instant, enrichment: &Enrichment) {
        self.stats
            .enrichment
            .record(started, enrichment.diagnostics.is_empty());
    }

    /// [`Inner::enrich`] when it is cheap enough for an async thread: nothing to run and the
    /// catalog (if one is needed) already cached. `None` when a discovery or a plugin would
    /// have to run (or anything panicked): then call [`Inner::enrich`] on a blocking thread.
    pub(crate) fn enrich_in_place(&self, req: EnrichRequest<'_>) -> Option<Enrichment> {
        let started = Instant::now();
        let enrichment =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.enrich_unguarded(req, true)))
                .unwrap_or(None)?;
        self.record_enrichment(started, &enrichment);
        Some(enrichment)
    }

    /// The enrichment; with `in_place`, `None` as soon as it would discover or execute.
    fn enrich_unguarded(&self, req: EnrichRequest<'_>, in_place: bool) -> Option<Enrichment> {
        let EnrichRequest {
            ctx,
            operation,
            lease,
            repo,
            commit,
            items,
            call,
        } = req;
        let started = Instant::now();
        // W-26: one TIMEOUT for the whole enrichment, discovery (artifact reads and the wait
        // on another request's discovery) included.
        let deadline = started + self.plugins.config.timeout;
        let refs = item_refs(items);
        let mut attachments = Attachments::default();
        if refs.is_empty() {
            return Some(Enrichment::default());
        }
        // W-10, W-11: `plugins: []`, connection `off` and the host switch are decided before
        // any discovery, so a failing discovery never shows where nothing may be shown.
        let disabled = self.plugins.config.disabled || self.plugins.runtime().is_none();
        if let Some(decided) = wasmplugin::plan_without_catalog(&ctx.plugins, call, disabled) {
            attachments.diagnostics.extend(decided.diagnostics);
            return Some(finish(attachments, started));
        }
        let catalog = if in_place {
            self.cached_catalog(lease)?
        } else {
            match self.catalog(lease, Some(deadline)) {
                Ok(catalog) => catalog,
                Err(diagnostic) => {
                    tracing::debug!(%repo, %commit, code = %diagnostic.code, error = %diagnostic.message, "plugin discovery failed");
                    attachments.diagnostics.push(diagnostic);
                    return Some(finish(attachments, started));
                }
            }
        };
        if let Some(truncated) = &catalog.truncated {
            attachments.diagnostics.push(truncated.clone());
        }
        let plan = wasmplugin::plan(&catalog, &ctx.plugins, call, operation, disabled, &refs);
        if in_place {
            if !plan.executions.is_empty() {
                return None;
            }
            // Counted only now: a probe that hands over to the blocking thread looks again.
            self.plugins.cache().hits += 1;
        }
        attachments.diagnostics.extend(plan.diagnostics);
        let Some(runtime) = self.plugins.runtime() else {
            return Some(finish(attachments, started));
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
                    lease,
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
        Some(finish(attachments, started))
    }
}

/// The items plugins see (W-13, W-14): those that returned lines, with their request-order
/// ids. A failed item, and an item the shared batch budget left without lines, are not
/// passed; an empty file (no lines to return) still is.
fn item_refs(items: &[ReadItem]) -> Vec<ItemRef> {
    items
        .iter()
        .enumerate()
        .filter_map(|(index, item)| {
            let range = item.outcome.as_ref().ok()?;
            let returned = range.end_line >= range.start_line || range.total_lines == 0;
            returned.then(|| ItemRef {
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
        .collect()
}

/// Runs one enrichment; a panic inside it (a host bug, never the guest's: guest faults are
/// diagnostics already) becomes one diagnostic and no attachments (W-25).
fn contain_panics(enrichment: impl FnOnce() -> Enrichment) -> Enrichment {
    std::panic::catch_unwind(AssertUnwindSafe(enrichment)).unwrap_or_else(|_| {
        tracing::error!("repository-plugin enrichment panicked; answered without attachments");
        Enrichment {
            diagnostics: vec![
                Diagnostic::new(
                    Code::Trap,
                    "the plugin host failed internally while enriching this read (logged); the read itself is complete",
                )
                .to_string(),
            ],
            ..Enrichment::default()
        }
    })
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
        operator_notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// W-25: a panic inside enrichment is one diagnostic, never an error of the read.
    #[test]
    fn w25_panic_in_enrichment_is_a_diagnostic() {
        let enrichment = contain_panics(|| panic!("a bug in the host glue"));
        assert!(enrichment.per_item.is_empty() && enrichment.whole.is_empty());
        assert_eq!(enrichment.diagnostics.len(), 1);
        assert!(
            enrichment.diagnostics[0].starts_with("code=PLUGIN_TRAP")
                && !enrichment.diagnostics[0].contains("a bug in the host glue"),
            "{:?}",
            enrichment.diagnostics
        );
        let fine = contain_panics(|| Enrichment {
            whole: vec!["w".into()],
            ..Enrichment::default()
        });
        assert_eq!(fine.whole, ["w"]);
    }
}
