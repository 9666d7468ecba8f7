//! Background maintenance: periodic sync of every registered repository (G-3, default every
//! 60 s), indexing (S-3), plugin preparation (W-31), the retention sweep (G-5) and the plugin catalog idle
//! sweep (W-29).
//!
//! Repositories are maintained independently: each one's sync → index → prepare runs as a
//! task of its own, a few at once, so one hung fetch (a peer that never answers, up to the
//! fetch timeout) holds up only its own repository. A repository whose work from an earlier
//! round is still running is skipped, not queued twice.

use crate::Service;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A shutdown signal: loops end when it turns true or its sender is dropped.
pub type Shutdown = tokio::sync::watch::Receiver<bool>;

/// Repositories synced and indexed at once: enough that a few hung fetches leave room for
/// the others, few enough that a hundred repositories do not fetch all at the same moment.
const MAINTENANCE_PARALLEL: usize = 4;

/// Spawns the maintenance loop: every `interval`, sync each repository (a failure is
/// recorded and reported by `discovery`, the last good state keeps serving), index and
/// prepare it, then sweep retention. Ends when `shutdown` turns true or its sender is
/// dropped, once the work already started has finished (the caller bounds that wait, O-6).
pub fn spawn_maintenance(
    service: Service,
    interval: Duration,
    mut shutdown: Shutdown,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAINTENANCE_PARALLEL));
        let mut running: HashMap<String, JoinHandle<()>> = HashMap::new();
        let mut housekeeping: Option<JoinHandle<()>> = None;
        // The first tick fires at once: the caller synced at start-up, so this round only
        // indexes and prepares plugins (W-31), and readiness never waits for it.
        ticker.tick().await;
        let mut first = true;
        loop {
            if !first {
                tokio::select! {
                    _ = ticker.tick() => {}
                    changed = shutdown.changed() => {
                        if changed.is_err() || *shutdown.borrow() {
                            break;
                        }
                        continue;
                    }
                }
            }
            let sync = !first;
            first = false;
            let repos = match service.discovery(&crate::CallContext::default()).await {
                Ok(repos) => repos,
                Err(error) => {
                    tracing::warn!(%error, "maintenance: listing repositories failed");
                    continue;
                }
            };
            running.retain(|_, task| !task.is_finished());
            for repo in repos {
                if running.contains_key(&repo.name) {
                    tracing::debug!(repo = %repo.name, "maintenance: still busy since an earlier round; skipped");
                    continue;
                }
                let (service, slots, name) = (service.clone(), slots.clone(), repo.name.clone());
                let task = tokio::spawn(async move {
                    let Ok(_slot) = slots.acquire_owned().await else {
                        return;
                    };
                    if sync {
                        sync_one(&service, &name).await;
                    }
                    index_then_prepare(&service, &name).await;
                });
                running.insert(repo.name, task);
            }
            if sync && housekeeping.as_ref().is_none_or(JoinHandle::is_finished) {
                housekeeping = Some(tokio::spawn(sweep(service.clone())));
            }
        }
        // Shutting down: let what already started finish (the caller bounds the wait).
        for task in running.into_values().chain(housekeeping) {
            let _ = task.await;
        }
    })
}

async fn sync_one(service: &Service, repo: &str) {
    match service.sync(repo.to_string()).await {
        Ok(outcome) => {
            tracing::debug!(repo, changed = outcome.changed.len(), "synced")
        }
        Err(error) => {
            tracing::warn!(repo, %error, "sync failed; serving the last good state")
        }
    }
}

/// The round's housekeeping across repositories: retention sweep, indexes of removed
/// repositories, idle plugin catalogs. A task of its own: the sweep waits for each
/// repository's running sync, and must not hold up the next round's syncs meanwhile.
async fn sweep(service: Service) {
    match service.sweep().await {
        Ok(report) if !report.expired.is_empty() => {
            tracing::info!(
                expired = report.expired.len(),
                kept = report.kept_by_lease.len(),
                "retention sweep"
            )
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "retention sweep failed"),
    }
    match service.prune_indexes().await {
        Ok(dropped) if !dropped.is_empty() => {
            tracing::info!(?dropped, "indexes of unregistered repositories dropped")
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "pruning indexes failed"),
    }
    let idle = service.sweep_plugin_catalogs(std::time::Instant::now());
    if idle > 0 {
        tracing::debug!(idle, "plugin catalogs dropped after 10 idle minutes");
    }
}

/// G-3: after a sync, index the head (S-3; a no-op when it is current), then prepare its
/// plugins (W-31; a cache hit when nothing changed), so the first search and the first read
/// find both ready. Failures are logged; the last good index keeps answering.
async fn index_then_prepare(service: &Service, repo: &str) {
    if let Err(error) = service.index(repo.to_string(), |_| {}).await {
        tracing::warn!(repo, %error, "indexing failed; search answers from the last index");
    }
    if let Err(error) = service.prepare_plugins(repo.to_string()).await {
        tracing::debug!(repo, %error, "plugin preparation skipped");
    }
}
