//! Index settings and the index fingerprint a generation is built under.

use crate::disk::FORMAT_VERSION;

/// Default of [`IndexConfig::max_file_bytes`]: 1 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1_048_576;

/// Index settings. Tests build it directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexConfig {
    /// Files larger than this are indexed by path only (default 1 MiB = 1_048_576).
    pub max_file_bytes: u64,
    /// A failing [`Source::transform`](crate::Source::transform) fails the build (the published generation keeps
    /// answering) instead of indexing that file as if there were no transform (P-7,
    /// `SOURCEGRAPH_SERVER_PLUGINS_STRICT`).
    pub strict_transforms: bool,
    /// Keep the ranked hits of recent searches for their later pages (default true).
    /// Benchmarks turn it off to time every search in full.
    pub result_cache: bool,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            strict_transforms: false,
            result_cache: true,
        }
    }
}

impl IndexConfig {
    /// The index fingerprint of a build whose source has `plugin_fingerprint` (see
    /// [`Source::plugin_fingerprint`](crate::Source::plugin_fingerprint)): format version, size limit and the plugin part. A
    /// generation built under another fingerprint is rebuilt even for the same commit.
    pub fn fingerprint(&self, plugin_fingerprint: &str) -> String {
        format!(
            "format={FORMAT_VERSION};max_file_bytes={};plugins={plugin_fingerprint}",
            self.max_file_bytes
        )
    }
}

/// The plugin part of an index fingerprint (see [`IndexConfig::fingerprint`]).
pub fn plugin_part(fingerprint: &str) -> Option<&str> {
    fingerprint
        .rsplit_once(";plugins=")
        .map(|(_, plugins)| plugins)
}
