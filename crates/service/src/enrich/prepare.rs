//! Background preparation of repository plugins (W-31): discovery and compilation of the
//! default-enabled modules of a repository's heads, ahead of the reads that will run them.

use crate::{Inner, Service, ServiceError};
use gitstore::{Lease, RepoName};
use wasmplugin::runtime::PrepareOutcome;

/// Branch heads of one repository whose plugins background preparation keeps warm (W-31).
pub const PREPARED_BRANCHES: usize = 16;

impl Service {
    /// Prepares the repository plugins of `repo`'s branch heads in the background sense of
    /// W-31: discovery plus compilation of default-enabled modules, never `enrich`. The
    /// default branch comes first; at most [`PREPARED_BRANCHES`] distinct heads, and only
    /// heads not prepared by an earlier call, so the every-minute round costs nothing for a
    /// repository that did not move. What preparation caches never evicts a catalog or
    /// module that reads use. One preparation per repository at a time: a call while
    /// another runs answers 0 at once. Answers how many modules this call made ready.
    pub async fn prepare_plugins(&self, repo: String) -> Result<usize, ServiceError> {
        self.blocking(move |inner| {
            if inner.plugins.config.disabled {
                return Ok(0);
            }
            // Maintenance, not a caller's operation: the local caller reads every repository.
            let resolved = RepoName::parse(&repo).and_then(|name| {
                let head = inner.store.resolve(&name, None)?;
                Ok((name, head))
            });
            let Some(_running) = inner.preparations.start(&repo, resolved.is_ok()) else {
                return Ok(0);
            };
            let (name, head) = resolved?;
            let mut heads = vec![head];
            for (_, commit) in inner.store.branch_heads(&name)? {
                if heads.len() >= PREPARED_BRANCHES {
                    break;
                }
                if !heads.contains(&commit) {
                    heads.push(commit);
                }
            }
            let mut ready = 0;
            let mut prepared = Vec::new();
            for commit in &heads {
                let lease = inner.store.lease(&name, commit)?;
                let key = format!("{commit}:{}", lease.registered_path());
                if inner.preparations.done(&repo, &key) {
                    prepared.push(key);
                    continue;
                }
                match inner.prepare_plugins(&lease) {
                    Ok(modules) => {
                        ready += modules;
                        prepared.push(key);
                    }
                    // Not recorded: the next round tries this head again.
                    Err(why) => {
                        tracing::debug!(repo = %name, %commit, %why, "plugin preparation failed")
                    }
                }
            }
            inner.preparations.finish(&repo, prepared);
            Ok(ready)
        })
        .await
    }
}

/// Background preparation's memory (W-31): the heads each repository had prepared (as
/// `commit:scope`), and which repositories are being prepared now.
#[derive(Default)]
pub(crate) struct Preparations {
    state: std::sync::Mutex<PreparationState>,
}

#[derive(Default)]
struct PreparationState {
    prepared: std::collections::HashMap<String, std::collections::HashSet<String>>,
    running: std::collections::HashSet<String>,
}

/// A preparation of one repository in progress; ends when dropped.
pub(crate) struct Preparing<'a> {
    preparations: &'a Preparations,
    repo: String,
}

impl Drop for Preparing<'_> {
    fn drop(&mut self) {
        self.preparations.state().running.remove(&self.repo);
    }
}

impl Preparations {
    fn state(&self) -> std::sync::MutexGuard<'_, PreparationState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts preparing `repo`, unless that runs already (`None`). A repository that is not
    /// registered (`registered` false) forgets what it had prepared.
    pub(crate) fn start(&self, repo: &str, registered: bool) -> Option<Preparing<'_>> {
        let mut state = self.state();
        if !registered {
            state.prepared.remove(repo);
        }
        state.running.insert(repo.to_string()).then(|| Preparing {
            preparations: self,
            repo: repo.to_string(),
        })
    }

    /// Whether `head` of `repo` was prepared by an earlier call.
    fn done(&self, repo: &str, head: &str) -> bool {
        self.state()
            .prepared
            .get(repo)
            .is_some_and(|heads| heads.contains(head))
    }

    /// Records the heads prepared now; heads no longer current are forgotten.
    fn finish(&self, repo: &str, heads: Vec<String>) {
        self.state()
            .prepared
            .insert(repo.to_string(), heads.into_iter().collect());
    }
}

impl Inner {
    /// Background preparation (W-31): discovery, caching of metadata and bytes, and
    /// compilation of default-enabled modules of the leased commit, with no deadline. Never
    /// calls `enrich`. Answers how many modules are compiled and cached.
    pub(crate) fn prepare_plugins(&self, lease: &Lease) -> Result<usize, String> {
        let (repo, commit) = (lease.repo(), lease.commit());
        let catalog = self.catalog(lease, None).map_err(|diagnostic| {
            // The code tells a timeout from an unreadable artifact; the caller keeps the message.
            tracing::debug!(%repo, %commit, code = %diagnostic.code, error = %diagnostic.message, "plugin discovery failed");
            diagnostic.message
        })?;
        let Some(runtime) = self.plugins.runtime() else {
            return Ok(0);
        };
        let mut ready = 0;
        for plugin in catalog
            .plugins
            .iter()
            .filter(|p| p.metadata.default_enabled)
        {
            // Preparation never evicts a module a read used (W-31): with no room, the first
            // read compiles it on demand.
            match runtime.prepare_module(&plugin.digest, &plugin.bytes) {
                Ok(PrepareOutcome::Cached | PrepareOutcome::Compiled) => ready += 1,
                Ok(PrepareOutcome::NoRoom) => {
                    tracing::debug!(plugin = %plugin.name, dir = %plugin.dir, "plugin not prepared: every module slot holds one a read uses")
                }
                Err(diagnostic) => {
                    tracing::info!(plugin = %plugin.name, dir = %plugin.dir, %diagnostic, "plugin not prepared")
                }
            }
        }
        Ok(ready)
    }
}
