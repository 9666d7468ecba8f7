//! Background maintenance: periodic sync of every registered repository (G-3, default every
//! 60 s), indexing (S-3), plugin preparation (W-31), the retention sweep (G-5) and the plugin catalog idle
//! sweep (W-29).

use crate::Service;
use std::time::Duration;

/// A shutdown signal: loops end when it turns true or its sender is dropped.
pub type Shutdown = tokio::sync::watch::Receiver<bool>;

/// Spawns the maintenance loop: every `interval`, sync each repository (a failure is
/// recorded and reported by `discovery`, the last good state keeps serving), then sweep
/// retention. Ends when `shutdown` turns true or its sender is dropped.
pub fn spawn_maintenance(
    service: Service,
    interval: Duration,
    mut shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick fires at once: the caller synced at start-up, so this round only
        // prepares plugins (W-31), and readiness never waits for it.
        ticker.tick().await;
        for repo in service
            .discovery(&crate::CallContext::default())
            .await
            .unwrap_or_default()
        {
            index_then_prepare(&service, &repo.name).await;
        }
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        return;
                    }
                }
            }
            let repos = match service.discovery(&crate::CallContext::default()).await {
                Ok(repos) => repos,
                Err(error) => {
                    tracing::warn!(%error, "maintenance: listing repositories failed");
                    continue;
                }
            };
            for repo in repos {
                match service.sync(repo.name.clone()).await {
                    Ok(outcome) => {
                        tracing::debug!(repo = %repo.name, changed = outcome.changed.len(), "synced")
                    }
                    Err(error) => {
                        tracing::warn!(repo = %repo.name, %error, "sync failed; serving the last good state")
                    }
                }
                index_then_prepare(&service, &repo.name).await;
            }
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
    })
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
