//! Background maintenance: periodic sync of every registered repository (G-3, default every
//! 60 s), indexing (S-3), plugin preparation (W-31), the retention sweep (G-5) and the plugin catalog idle
//! sweep (W-29).
//!
//! Repositories are maintained independently: each one's sync → index → prepare runs as a
//! task of its own, a few at once, so one hung fetch (a peer that never answers, up to the
//! fetch timeout) holds up only its own repository. A repository whose work from an earlier
//! round is still running is skipped, not queued twice.
//!
//! A repository whose fetch fails is retried with exponential backoff (two rounds later,
//! then four, … at most [`MAX_SYNC_BACKOFF`] apart): an unreachable remote is not hammered
//! every minute, while its last good state keeps serving and `discovery` shows the error.
//!
//! Cluster mode (issue 31, behaviour 2): a replica maintains the repositories it owns. One it
//! still keeps (a mirror, an index) but no longer owns is noted in the round that first finds
//! it so; once it has not been owned for the grace ([`crate::Placement::release_grace`],
//! [`Service::DEFAULT_RELEASE_GRACE`]), a round drops its mirror, index and plugin
//! preparations here. Owned again before that, its note is cleared and nothing is dropped.
//! Its calls go to its owners meanwhile ([`Service::route`]).
//!
//! Between full rounds, a catch-up round runs every [`CATCH_UP_EVERY`]: from memory only (the
//! registry snapshot and the published indexes), it fetches and indexes what this process
//! owns but holds no mirror of (a new registration, a repository gained), and indexes what
//! it holds whose index is missing or of another commit than the recorded head (another
//! replica's sync, which this replica's follow workers fetched; in the embedded default, a
//! `csg repo add` or `csg repo sync` another process ran on the data directory). So a
//! registration or a new head is searchable within seconds, not at the next full round; a
//! repository already busy (a full round's sync or build) is left to it.

use crate::Service;
use crate::placement::Releases;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// The longest wait between fetch attempts of a repository that keeps failing.
pub(crate) const MAX_SYNC_BACKOFF: Duration = Duration::from_secs(3600);

/// How long after its `failures`-th failure in a row a repository is fetched again:
/// `interval` × 2^failures, at most [`MAX_SYNC_BACKOFF`] (and never less than `interval`).
pub(crate) fn sync_backoff(interval: Duration, failures: u32) -> Duration {
    let factor = 1u32 << failures.min(16);
    interval
        .saturating_mul(factor)
        .min(MAX_SYNC_BACKOFF.max(interval))
}

/// Failing repositories: consecutive failures and when the next attempt is due.
#[derive(Default)]
struct Backoffs(Mutex<HashMap<String, (u32, Instant)>>);

impl Backoffs {
    fn due(&self, repo: &str, now: Instant) -> bool {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(repo).is_none_or(|&(_, next)| now >= next)
    }

    /// Records the outcome of a fetch; answers the wait before the next one after a failure.
    fn record(&self, repo: &str, ok: bool, interval: Duration) -> Option<Duration> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if ok {
            map.remove(repo);
            return None;
        }
        let failures = map.get(repo).map_or(0, |&(n, _)| n) + 1;
        let wait = sync_backoff(interval, failures);
        map.insert(repo.to_owned(), (failures, Instant::now() + wait));
        Some(wait)
    }

    /// Forgets repositories no longer registered.
    fn retain(&self, registered: &std::collections::HashSet<&str>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|repo, _| registered.contains(repo.as_str()));
    }
}

/// A shutdown signal: loops end when it turns true or its sender is dropped.
pub type Shutdown = tokio::sync::watch::Receiver<bool>;

/// Repositories synced and indexed at once: enough that a few hung fetches leave room for
/// the others, few enough that a hundred repositories do not fetch all at the same moment.
const MAINTENANCE_PARALLEL: usize = 4;

/// Cluster mode: how often a replica looks for repositories it owns but does not hold yet (a
/// new registration, a member that left) and fetches them, between full rounds. Calls for
/// them go to the other owners meanwhile; this bounds how long that lasts.
const CATCH_UP_EVERY: Duration = Duration::from_secs(2);

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
        let backoffs = Arc::new(Backoffs::default());
        let mut releases = Releases::default();
        let mut catch_up_builds = CatchUpBuilds::default();
        let mut catch_up_ticker = tokio::time::interval(CATCH_UP_EVERY);
        catch_up_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        catch_up_ticker.tick().await;
        let clustered = service.clustered();
        // The first tick fires at once: the caller synced at start-up, so this round only
        // indexes and prepares plugins (W-31), and readiness never waits for it.
        ticker.tick().await;
        let mut first = true;
        loop {
            // A catch-up round only fetches what this replica owns and lacks.
            let mut catch_up = false;
            if !first {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = catch_up_ticker.tick() => catch_up = true,
                    changed = shutdown.changed() => {
                        if changed.is_err() || *shutdown.borrow() {
                            break;
                        }
                        continue;
                    }
                }
            }
            let sync = !first && !catch_up;
            first = false;
            let repos = match service.discovery(&crate::CallContext::default()).await {
                Ok(repos) => repos,
                Err(error) => {
                    tracing::warn!(%error, "maintenance: listing repositories failed");
                    continue;
                }
            };
            running.retain(|_, task| !task.is_finished());
            let registered = repos.iter().map(|r| r.name.as_str()).collect();
            backoffs.retain(&registered);
            releases.retain(&registered);
            catch_up_builds.retain(&registered);
            let now = Instant::now();
            let release_grace = service.release_grace();
            let mut served = 0;
            for repo in repos {
                // Cluster mode: a replica keeps mirrors and indexes of what it owns only; the
                // other repositories' calls are forwarded to their owners.
                if !service.owns_here(&repo.name) {
                    if catch_up {
                        continue;
                    }
                    let Some(grace) = release_grace else {
                        continue;
                    };
                    if !service.keeps_anything(&repo.name) {
                        releases.clear(&repo.name);
                        continue;
                    }
                    // A task of an earlier round (a sync or build from while it was owned,
                    // or a release) finishes first; the note keeps its time meanwhile.
                    if let Some(not_owned_for) = releases.due(&repo.name, now, grace)
                        && !running.contains_key(&repo.name)
                    {
                        let (service, name) = (service.clone(), repo.name.clone());
                        let task = tokio::spawn(async move {
                            // Kept (in use, owned again): the next round tries again.
                            if let Err(error) =
                                service.release_here(name.clone(), not_owned_for).await
                            {
                                tracing::warn!(repo = %name, %error, "releasing a repository no longer owned failed; tried again next round");
                            }
                        });
                        running.insert(repo.name, task);
                    }
                    continue;
                }
                releases.clear(&repo.name);
                if clustered && service.holds(&repo.name) {
                    served += 1;
                }
                if running.contains_key(&repo.name) {
                    tracing::debug!(repo = %repo.name, "maintenance: still busy since an earlier round; skipped");
                    continue;
                }
                // A catch-up round: what this replica holds and has indexed at the head
                // the cluster recorded needs nothing; a head whose index is missing or
                // behind is indexed now (once per head: a build that failed is retried by
                // the full rounds), not at the next full round.
                let held = if catch_up {
                    match service.catch_up_standing(&repo.name) {
                        Standing::Current | Standing::Following => continue,
                        Standing::Behind(head) => {
                            if !catch_up_builds.try_head(&repo.name, head) {
                                continue;
                            }
                            let (service, slots) = (service.clone(), slots.clone());
                            let name = repo.name.clone();
                            let task = tokio::spawn(async move {
                                let Ok(_slot) = slots.acquire_owned().await else {
                                    return;
                                };
                                index_then_prepare(&service, &name).await;
                            });
                            running.insert(repo.name, task);
                            continue;
                        }
                        Standing::NotHeld => false,
                    }
                } else {
                    // A repository this process holds no mirror of yet (a replica that just
                    // joined or gained it) is fetched in the first round too.
                    service.holds(&repo.name)
                };
                let sync = (sync || !held) && backoffs.due(&repo.name, now);
                // A catch-up round has nothing to index before a fetch (backing off) lands.
                if catch_up && !sync {
                    continue;
                }
                let (service, slots, name) = (service.clone(), slots.clone(), repo.name.clone());
                let backoffs = backoffs.clone();
                let task = tokio::spawn(async move {
                    let Ok(_slot) = slots.acquire_owned().await else {
                        return;
                    };
                    if sync {
                        let ok = sync_one(&service, &name).await;
                        if let Some(wait) = backoffs.record(&name, ok, interval) {
                            tracing::info!(repo = %name, retry_in_s = wait.as_secs(), "sync backs off");
                        }
                        // Nothing held yet: nothing to index (the next round tries again).
                        if !ok && catch_up {
                            return;
                        }
                    }
                    index_then_prepare(&service, &name).await;
                });
                running.insert(repo.name, task);
            }
            if clustered {
                service.note_served_here(served);
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

/// Completes the retention walk of `name` (on a blocking thread), logging what went wrong.
fn complete_walk(inner: &crate::Inner, name: &gitstore::RepoName) {
    match inner
        .store
        .complete_retention(name, &budget::Budget::unlimited())
    {
        Ok(walks) => {
            tracing::debug!(repo = %name, reached = walks.reached, steps = walks.steps, "retention walk complete")
        }
        // Not synced (here) yet, or removed meanwhile: nothing to walk.
        Err(gitstore::Error::NotSynced(_) | gitstore::Error::UnknownRepo(_)) => {}
        Err(error) => {
            tracing::warn!(repo = %name, %error, "completing the retention walk failed; reads of old commits walk for themselves")
        }
    }
}

/// What a catch-up round finds of a repository this replica owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standing {
    /// No mirror here yet: fetch it (then index it).
    NotHeld,
    /// A mirror that lacks the head the cluster recorded: the store's follow workers fetch
    /// it (asked for by the look that found it so); the next round indexes it.
    Following,
    /// Held, and its index is of the head (or there is no index to build here).
    Current,
    /// Held, with no index or an index of another commit than this head (a full SHA).
    Behind(String),
}

impl Service {
    /// Completes the retention walk of `repo` on the blocking pool (issue 42 point 7), so a
    /// read pinned to an old commit answers from the memo on its async thread rather than
    /// moving to the blocking pool to walk. After a sync whose new heads hold the old ones it
    /// walks only the new commits; when the memo is complete, it costs a lock. No caller
    /// waits for it: it runs to the end (about 3–11 µs a commit). Failures are logged (a read
    /// of an old commit then walks for itself, under its budget).
    pub(crate) async fn complete_retention(&self, repo: String) {
        let done = self
            .blocking(move |inner| {
                if let Ok(name) = gitstore::RepoName::parse(&repo) {
                    complete_walk(inner, &name);
                }
                Ok(())
            })
            .await;
        if let Err(error) = done {
            tracing::warn!(%error, "completing a retention walk failed");
        }
    }

    /// [`Service::complete_retention`] of every registered repository (after a sweep).
    async fn complete_retention_all(&self) {
        let done = self
            .blocking(|inner| {
                for info in inner.store.repos()? {
                    complete_walk(inner, &info.name);
                }
                Ok(())
            })
            .await;
        if let Err(error) = done {
            tracing::warn!(%error, "completing the retention walks failed");
        }
    }

    /// Where an owned repository `name` stands, from memory only: the registry snapshot's
    /// view of the head the read path resolves (the one recorded by the last sync, whichever
    /// replica ran it) and the published index's commit. No `git`, no database query (a
    /// changed registry is reloaded as on any call), so a round can look at every repository.
    pub(crate) fn catch_up_standing(&self, name: &str) -> Standing {
        let Ok(repo) = gitstore::RepoName::parse(name) else {
            return Standing::Current;
        };
        let head = match self.inner.store.resolve(&repo, None) {
            Ok(head) => head,
            // A view whose recorded head is not fetched yet: a follow is queued (resolving
            // asked for it), which is cheaper than the sync a missing mirror needs.
            Err(gitstore::Error::NotSynced(_)) if self.inner.store.branch_heads(&repo).is_ok() => {
                return Standing::Following;
            }
            Err(gitstore::Error::NotSynced(_)) => return Standing::NotHeld,
            // An empty repository, a head out of retention: nothing a build could index.
            Err(_) => return Standing::Current,
        };
        let Ok(indexes) = self.inner.indexes() else {
            return Standing::Current;
        };
        match indexes.indexed_commit(name) {
            Some(indexed) if indexed == head.as_str() => Standing::Current,
            _ => Standing::Behind(head.as_str().to_owned()),
        }
    }
}

/// The heads catch-up rounds started an index build of, by repository: a head is built once
/// by them, so a build that fails (a broken plugin, a full disk) is not retried every few
/// seconds; the full rounds retry it, and a newer head is built at once.
#[derive(Debug, Default)]
pub(crate) struct CatchUpBuilds(HashMap<String, String>);

impl CatchUpBuilds {
    /// Whether a catch-up build of `repo` at `head` is to start now (noting it if so).
    pub(crate) fn try_head(&mut self, repo: &str, head: String) -> bool {
        if self.0.get(repo) == Some(&head) {
            return false;
        }
        self.0.insert(repo.to_owned(), head);
        true
    }

    /// Forgets repositories no longer registered.
    fn retain(&mut self, registered: &std::collections::HashSet<&str>) {
        self.0.retain(|repo, _| registered.contains(repo.as_str()));
    }
}

/// One fetch; answers whether it succeeded.
async fn sync_one(service: &Service, repo: &str) -> bool {
    match service.sync(repo.to_string()).await {
        Ok(outcome) => {
            tracing::debug!(repo, changed = outcome.changed.len(), "synced");
            true
        }
        Err(error) => {
            tracing::warn!(repo, %error, "sync failed; serving the last good state");
            false
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
    // A sweep that dropped expired heads restarted their repositories' walks.
    service.complete_retention_all().await;
    let idle = service.sweep_plugin_catalogs(std::time::Instant::now());
    if idle > 0 {
        tracing::debug!(idle, "plugin catalogs dropped after 10 idle minutes");
    }
}

/// G-3: after a sync, complete the retention walk (issue 42 point 7: reads of old commits
/// then answer from its memo), index the head (S-3; a no-op when it is current), then
/// prepare its plugins (W-31; a cache hit when nothing changed), so the first search and the
/// first read find both ready. Failures are logged; the last good index keeps answering.
async fn index_then_prepare(service: &Service, repo: &str) {
    service.complete_retention(repo.to_string()).await;
    if let Err(error) = service.index(repo.to_string(), |_| {}).await {
        tracing::warn!(repo, %error, "indexing failed; search answers from the last index");
    }
    // S-8: the indexed branches' overlays over the (new) head, so their first search is fast.
    service.warm_index_branches(repo.to_string()).await;
    if let Err(error) = service.prepare_plugins(repo.to_string()).await {
        tracing::debug!(repo, %error, "plugin preparation skipped");
    }
    // S-9: the commit and diff search index takes the new commits (a no-op when current).
    if let Err(error) = service.index_history(repo.to_string()).await {
        tracing::warn!(repo, %error, "history indexing failed; commit and diff search answer from the last index");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G-3: the wait doubles with each failure in a row, from twice the interval up to the
    /// cap; a success clears it.
    #[test]
    fn g3_sync_backoff_doubles_up_to_the_cap() {
        let minute = Duration::from_secs(60);
        assert_eq!(sync_backoff(minute, 1), 2 * minute);
        assert_eq!(sync_backoff(minute, 2), 4 * minute);
        assert_eq!(sync_backoff(minute, 5), 32 * minute);
        assert_eq!(sync_backoff(minute, 6), MAX_SYNC_BACKOFF);
        assert_eq!(sync_backoff(minute, u32::MAX), MAX_SYNC_BACKOFF);
        let long = Duration::from_secs(7200);
        assert_eq!(sync_backoff(long, 3), long, "never below the interval");

        let backoffs = Backoffs::default();
        let now = Instant::now();
        assert!(backoffs.due("a/b", now));
        assert_eq!(backoffs.record("a/b", false, minute), Some(2 * minute));
        assert!(!backoffs.due("a/b", Instant::now()));
        assert!(backoffs.due("a/b", Instant::now() + 2 * minute));
        assert_eq!(backoffs.record("a/b", false, minute), Some(4 * minute));
        assert_eq!(backoffs.record("a/b", true, minute), None);
        assert!(backoffs.due("a/b", Instant::now()));
    }
}
