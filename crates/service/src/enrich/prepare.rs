//! Background preparation of repository plugins (W-31): discovery and compilation of the
//! default-enabled modules of a repository's heads, ahead of the reads that will run them.

use crate::Inner;
use gitstore::Lease;
use wasmplugin::runtime::PrepareOutcome;

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
