//! Discovery (W-2..W-7): which plugins a commit holds, where, and what they say about
//! themselves. Static only: nothing here runs a plugin (W-6).

use crate::metadata::{ARTIFACT_SUFFIX, Metadata, read_metadata};
use crate::{Code, Diagnostic, PluginConfig};
use std::sync::Arc;

/// What the tree holds at an artifact's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactKind {
    /// A normal (or executable) blob: the only kind that can be an artifact.
    Blob,
    Symlink,
    Submodule,
}

/// A `*.sourcegraph.wasm` entry found in the commit's tree inside the registered scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactEntry {
    /// Repository-relative path.
    pub path: String,
    pub kind: ArtifactKind,
    /// Blob size in bytes (0 for non-blobs).
    pub size: u64,
    /// Content digest (the Git blob id): compiled modules are reused by it (W-30).
    pub digest: String,
}

/// A runnable plugin: valid module, valid metadata.
#[derive(Debug)]
pub struct Plugin {
    pub name: String,
    /// The plugin directory, repository-relative (`""` = the repository root).
    pub dir: String,
    pub artifact_path: String,
    pub digest: String,
    pub bytes: Arc<[u8]>,
    pub metadata: Metadata,
}

/// An artifact that cannot run, with why (shown by `availability`, W-6).
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    /// The name from the file name.
    pub name: String,
    pub dir: String,
    pub artifact_path: String,
    pub diagnostic: Diagnostic,
}

/// The plugins of one commit and scope.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Sorted by name, then directory.
    pub plugins: Vec<Arc<Plugin>>,
    /// Sorted by name, then directory.
    pub broken: Vec<Broken>,
}

/// The plugin of a name that applies to a path (W-5): the nearest ancestor directory wins,
/// whether that artifact is runnable or not.
#[derive(Debug, Clone, Copy)]
pub enum Nearest<'a> {
    Runnable(&'a Arc<Plugin>),
    Broken(&'a Broken),
}

/// Splits `dir/name.sourcegraph.wasm` into (`dir`, `name`).
fn split_artifact(path: &str) -> Option<(&str, &str)> {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let name = file.strip_suffix(ARTIFACT_SUFFIX)?;
    (!name.is_empty()).then_some((dir, name))
}

/// Whether `path` (repository-relative) lies in plugin directory `dir`.
pub(crate) fn in_dir(path: &str, dir: &str) -> bool {
    dir.is_empty() || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// Builds the catalog from the artifact entries of a tree. `read` answers an artifact's
/// bytes; its error is a *transient* failure, returned as `Err` so it is never cached as
/// "no plugins" (W-29).
pub fn discover(
    entries: &[ArtifactEntry],
    config: &PluginConfig,
    mut read: impl FnMut(&ArtifactEntry) -> Result<Vec<u8>, String>,
) -> Result<Catalog, String> {
    let mut catalog = Catalog::default();
    for entry in entries {
        let Some((dir, name)) = split_artifact(&entry.path) else {
            continue;
        };
        let broken = |code: Code, message: String| Broken {
            name: name.to_string(),
            dir: dir.to_string(),
            artifact_path: entry.path.clone(),
            diagnostic: Diagnostic::new(code, message).at(name, dir),
        };
        let refusal = match entry.kind {
            ArtifactKind::Symlink => {
                Some("the artifact is a symbolic link; commit the module itself")
            }
            ArtifactKind::Submodule => {
                Some("the artifact is a submodule; commit the module itself")
            }
            ArtifactKind::Blob => None,
        };
        if let Some(why) = refusal {
            catalog.broken.push(broken(Code::Artifact, why.to_string()));
            continue;
        }
        if entry.size > config.artifact_bytes {
            let message = format!(
                "the artifact is {} bytes, over ARTIFACT_BYTES ({})",
                entry.size, config.artifact_bytes
            );
            catalog.broken.push(broken(Code::Artifact, message));
            continue;
        }
        let bytes = read(entry)?;
        if bytes.starts_with(b"version https://git-lfs.github.com/spec/") {
            let message = "the artifact is a Git LFS pointer; commit the module itself".to_string();
            catalog.broken.push(broken(Code::Artifact, message));
            continue;
        }
        match read_metadata(name, &bytes, config.metadata_bytes) {
            Ok(metadata) => catalog.plugins.push(Arc::new(Plugin {
                name: name.to_string(),
                dir: dir.to_string(),
                artifact_path: entry.path.clone(),
                digest: entry.digest.clone(),
                bytes: bytes.into(),
                metadata,
            })),
            Err(diagnostic) => catalog.broken.push(Broken {
                name: name.to_string(),
                dir: dir.to_string(),
                artifact_path: entry.path.clone(),
                diagnostic: diagnostic.at(name, dir),
            }),
        }
    }
    catalog.plugins.sort_by(|a, b| {
        (a.name.as_bytes(), dir_key(&a.dir)).cmp(&(b.name.as_bytes(), dir_key(&b.dir)))
    });
    catalog.broken.sort_by(|a, b| {
        (a.name.as_bytes(), dir_key(&a.dir)).cmp(&(b.name.as_bytes(), dir_key(&b.dir)))
    });
    Ok(catalog)
}

/// Directory order of W-19: segment by segment, bytewise; the root first.
pub(crate) fn dir_key(dir: &str) -> Vec<&[u8]> {
    dir.split('/')
        .filter(|s| !s.is_empty())
        .map(str::as_bytes)
        .collect()
}

impl Catalog {
    /// Every plugin name present (runnable or not), sorted bytewise.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .plugins
            .iter()
            .map(|p| p.name.as_str())
            .chain(self.broken.iter().map(|b| b.name.as_str()))
            .collect();
        names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        names.dedup();
        names
    }

    /// The plugin called `name` that applies to `path`: the deepest directory holding one
    /// (W-5).
    pub fn nearest(&self, name: &str, path: &str) -> Option<Nearest<'_>> {
        let runnable = self
            .plugins
            .iter()
            .filter(|p| p.name == name && in_dir(path, &p.dir))
            .map(|p| (p.dir.len(), Nearest::Runnable(p)));
        let broken = self
            .broken
            .iter()
            .filter(|b| b.name == name && in_dir(path, &b.dir))
            .map(|b| (b.dir.len(), Nearest::Broken(b)));
        runnable
            .chain(broken)
            .max_by_key(|(depth, _)| *depth)
            .map(|(_, nearest)| nearest)
    }

    /// Bytes of artifacts held, for the catalog cache's budget (W-29).
    pub fn artifact_bytes(&self) -> usize {
        self.plugins.iter().map(|p| p.bytes.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn wasm(name: &str, extra: &str) -> Vec<u8> {
        let json = format!(
            r#"{{"name":"{name}","abi_version":2,"operations":["read","read_many"]{extra}}}"#
        );
        let escaped = json.replace('"', "\\\"");
        wat::parse_str(format!("(module (memory (export \"memory\") 1) (@custom \"sourcegraph.plugin.v1\" \"{escaped}\"))")).unwrap()
    }

    fn entry(path: &str, kind: ArtifactKind, size: u64) -> ArtifactEntry {
        ArtifactEntry {
            path: path.into(),
            kind,
            size,
            digest: format!("digest-of-{path}"),
        }
    }

    /// W-2, W-5: artifacts are found anywhere; non-blobs and LFS pointers are diagnosed;
    /// the nearest same-name ancestor wins; different names apply together.
    #[test]
    fn w2_w5_discovery_and_nearest() {
        let entries = vec![
            entry("p.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("docs/p.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("docs/q.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("link.sourcegraph.wasm", ArtifactKind::Symlink, 0),
            entry("sub/m.sourcegraph.wasm", ArtifactKind::Submodule, 0),
            entry("big.sourcegraph.wasm", ArtifactKind::Blob, 1 << 40),
            entry("lfs.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("docs/deep/p.sourcegraph.wasm", ArtifactKind::Blob, 10),
        ];
        let config = PluginConfig::default();
        let catalog = discover(&entries, &config, |e| {
            Ok(match e.path.as_str() {
                "lfs.sourcegraph.wasm" => {
                    b"version https://git-lfs.github.com/spec/v1\noid sha256:x\nsize 9\n".to_vec()
                }
                "docs/deep/p.sourcegraph.wasm" => wasm("other", ""),
                path => wasm(split_artifact(path).unwrap().1, ""),
            })
        })
        .unwrap();
        assert_eq!(
            catalog
                .plugins
                .iter()
                .map(|p| (p.name.as_str(), p.dir.as_str()))
                .collect::<Vec<_>>(),
            [("p", ""), ("p", "docs"), ("q", "docs")]
        );
        let broken: Vec<(&str, Code)> = catalog
            .broken
            .iter()
            .map(|b| (b.artifact_path.as_str(), b.diagnostic.code))
            .collect();
        assert!(broken.contains(&("link.sourcegraph.wasm", Code::Artifact)));
        assert!(broken.contains(&("sub/m.sourcegraph.wasm", Code::Artifact)));
        assert!(broken.contains(&("big.sourcegraph.wasm", Code::Artifact)));
        assert!(broken.contains(&("lfs.sourcegraph.wasm", Code::Artifact)));
        assert!(
            broken.contains(&("docs/deep/p.sourcegraph.wasm", Code::Metadata)),
            "name mismatch"
        );
        let dir_of = |n: Option<Nearest<'_>>| match n {
            Some(Nearest::Runnable(p)) => format!("ok:{}", p.dir),
            Some(Nearest::Broken(b)) => format!("broken:{}", b.dir),
            None => "none".into(),
        };
        assert_eq!(dir_of(catalog.nearest("p", "README.md")), "ok:");
        assert_eq!(dir_of(catalog.nearest("p", "docs/a.md")), "ok:docs");
        assert_eq!(
            dir_of(catalog.nearest("p", "docs/deep/a.md")),
            "broken:docs/deep",
            "the nearest wins even when broken"
        );
        assert_eq!(dir_of(catalog.nearest("p", "docsx/a.md")), "ok:");
        assert_eq!(dir_of(catalog.nearest("q", "README.md")), "none");
        assert_eq!(catalog.names(), ["big", "lfs", "link", "m", "p", "q"]);
    }

    /// W-29: a read failure is transient, not "no plugins".
    #[test]
    fn w29_read_failure_is_not_an_empty_catalog() {
        let entries = vec![entry("p.sourcegraph.wasm", ArtifactKind::Blob, 10)];
        assert!(
            discover(&entries, &PluginConfig::default(), |_| Err(
                "object database busy".into()
            ))
            .is_err()
        );
    }
}
