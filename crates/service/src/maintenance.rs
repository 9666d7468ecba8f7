//! What changes the Git store without a caller (not framed): registering and removing
//! repositories (G-1, G-2), syncing one (G-3) and the retention sweep (G-5, G-8).
//! `background.rs` runs syncs and sweeps on schedule; `prepare.rs` runs a sync an operator
//! asks for.

use crate::{Inner, RegisterRequest, Service, ServiceError, SweepAnswer, SyncAnswer, TenthLog};
use gitstore::{GitStore, RepoName, RepoPath};
use std::time::Instant;

impl Service {
    /// Registers a repository (G-1, G-2), or reuses the same registration; answers whether
    /// the registration is new. Does not fetch: call [`Service::sync`].
    pub async fn register(&self, req: RegisterRequest) -> Result<bool, ServiceError> {
        self.registry_change(move |store| {
            let name = RepoName::parse(&req.name)?;
            let existed = store.repo(&name).is_ok();
            store.register(gitstore::Registration {
                name,
                source: req.source,
                registered_path: RepoPath::parse(&req.registered_path)?,
                branch: req.branch,
                private: req.private,
            })?;
            Ok(!existed)
        })
        .await
    }

    /// Removes a registration, its metadata and its mirror; its index goes with the next
    /// maintenance round ([`Service::prune_indexes`]).
    pub async fn unregister(&self, repo: String) -> Result<(), ServiceError> {
        let name = RepoName::parse(&repo)?;
        let forget = name.clone();
        self.registry_change(move |store| Ok(store.unregister(&name)?))
            .await?;
        // A later registration under the name must not inherit the grants (after the
        // registration is gone: a failure here leaves grants on a name nobody can read).
        self.inner.access()?.forget_repo(forget.as_str())?;
        Ok(())
    }

    /// Runs a registry change on the blocking pool. It publishes a new registry snapshot and
    /// takes no lock a read takes: a read in flight finishes on the snapshot its lease
    /// holds, so one `read_many` never sees its repository's scope change between items.
    async fn registry_change<T: Send + 'static>(
        &self,
        change: impl FnOnce(&GitStore) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || change(&inner.store))
            .await
            .map_err(|_| {
                ServiceError::internal("a registry change was interrupted; see the server log")
            })?
    }

    /// Fetches one repository now (G-3). Reads keep answering from the last good state while
    /// it runs and if it fails.
    pub async fn sync(&self, repo: String) -> Result<SyncAnswer, ServiceError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let synced = inner.sync(&repo);
            inner.stats.sync.record(started, synced.is_ok());
            synced
        })
        .await
        .map_err(|_| ServiceError::internal("sync was interrupted; see the server log"))?
    }

    /// Drops commits that left retention (G-5); leased commits are kept (G-8). The store
    /// guards object removal per repository, so reads of other repositories never wait.
    pub async fn sweep(&self) -> Result<SweepAnswer, ServiceError> {
        let store = self.inner.store.clone();
        tokio::task::spawn_blocking(move || Ok(store.sweep()?.into()))
            .await
            .map_err(|_| {
                ServiceError::internal("retention sweep was interrupted; see the server log")
            })?
    }
}

impl Inner {
    /// [`Service::sync`] on the calling (blocking) thread.
    fn sync(&self, repo: &str) -> Result<SyncAnswer, ServiceError> {
        let name = RepoName::parse(repo)?;
        let mut log = TenthLog::default();
        let outcome = self.store.sync_with_progress(&name, &mut |p| {
            // A small transfer says only that a phase is done; a large one each tenth.
            if let Some(total) = p.total
                && (total >= 100 || p.done == total)
                && log.crossed(&p.phase, p.done, total)
            {
                tracing::info!(repo = %name, phase = %p.phase, done = p.done, total, "fetching");
            }
        })?;
        Ok(SyncAnswer {
            repo: name.to_string(),
            head: outcome.head.map(|c| c.to_string()),
            changed: outcome
                .changed
                .into_iter()
                .map(|(branch, commit)| (branch, commit.to_string()))
                .collect(),
        })
    }
}
