//! Discovery (W-2..W-7): which plugins a commit holds, where, and what they say about
//! themselves. Static only: nothing here runs a plugin (W-6).

use crate::abi::{self, static_limits};
use crate::metadata::{ARTIFACT_SUFFIX, Metadata, read_metadata};
use crate::{Code, Diagnostic, PluginConfig};
use std::sync::Arc;
use std::time::Instant;

/// At most this many artifacts are considered per catalog (one commit and scope); discovery
/// stops there and says so (W-29: the catalog's work is bounded like its cache).
pub const CATALOG_ARTIFACTS: usize = 1024;

/// The longest artifact path accepted, in bytes (as gitstore's `RepoPath`, G-6).
const MAX_PATH_BYTES: usize = 4096;

/// At most this many artifact bytes are read per catalog: the 128 MiB catalog budget of W-29.
/// Discovery stops before the artifact that would pass it and says so.
pub const CATALOG_ARTIFACT_BYTES: u64 = 128 * 1024 * 1024;

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
    /// Repository-relative path (a lossy rendering when `path_utf8` is false).
    pub path: String,
    /// Whether the path in the tree is valid UTF-8. Git allows any bytes but `/` and NUL in a
    /// file name; a path that is not UTF-8 (`false`, `path` then being its lossy rendering,
    /// U+FFFD for each bad sequence) cannot be read back by name, so [`discover`] refuses
    /// the artifact (PLUGIN_ARTIFACT) without reading it.
    pub path_utf8: bool,
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
    /// Set when discovery stopped at [`CATALOG_ARTIFACTS`] or [`CATALOG_ARTIFACT_BYTES`]: the
    /// artifacts after that point are not in the catalog (PLUGIN_ARTIFACT, shown with every
    /// enrichment and by `availability`).
    pub truncated: Option<Diagnostic>,
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

/// Why `entry`'s path cannot be an artifact's, or `None` for a plain repository path. The
/// rules are those of gitstore's `RepoPath::parse` (G-6), by which the service reads an
/// artifact: a path it would refuse is refused here first, as that artifact's own diagnostic,
/// instead of failing the read and with it the whole discovery.
fn path_refusal(entry: &ArtifactEntry) -> Option<&'static str> {
    let path = entry.path.as_str();
    if !entry.path_utf8 {
        Some("is not valid UTF-8")
    } else if path.len() > MAX_PATH_BYTES {
        Some("is longer than 4096 bytes")
    } else if path.contains('\\') {
        Some("contains a backslash")
    } else if path.chars().any(char::is_control) {
        Some("contains a control character")
    } else if path.starts_with('/') {
        Some("is absolute")
    } else if path
        .split('/')
        .any(|segment| matches!(segment, "" | "." | ".."))
    {
        Some("has an empty, `.` or `..` segment")
    } else {
        None
    }
}

/// `text` with each control character written as its escape (`\t`, `\u{1b}`), so that the
/// name, directory and path of a refused artifact never carry one into `availability`, the
/// website or a diagnostic.
fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Whether `path` (repository-relative) lies in plugin directory `dir`.
pub(crate) fn in_dir(path: &str, dir: &str) -> bool {
    dir.is_empty() || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// Builds the catalog from the artifact entries of a tree (sorted by path). `read` answers an
/// artifact's bytes; its error is a *transient* failure, returned as `Err` so it is never
/// cached as "no plugins" (W-29). `deadline` is the request's (W-26: TIMEOUT covers artifact
/// reads too; `None` for background preparation): once it passed, discovery stops with
/// PLUGIN_TIMEOUT, also a transient failure.
///
/// An artifact whose path is not plain (not UTF-8, a backslash, a control character, or
/// anything else gitstore's `RepoPath` refuses) is listed as broken (PLUGIN_ARTIFACT) without
/// calling `read`; its name, directory and path are shown with control characters escaped.
///
/// Static only (W-6): every artifact is validated and checked against the ABI (exports,
/// imports, initial memory) without compiling, so a module that can never run is listed as
/// broken with the same diagnostic the runtime would give. At most [`CATALOG_ARTIFACTS`]
/// artifacts and [`CATALOG_ARTIFACT_BYTES`] are read; the rest is left out, and
/// [`Catalog::truncated`] says so.
pub fn discover(
    entries: &[ArtifactEntry],
    config: &PluginConfig,
    deadline: Option<Instant>,
    mut read: impl FnMut(&ArtifactEntry) -> Result<Vec<u8>, Diagnostic>,
) -> Result<Catalog, Diagnostic> {
    let mut catalog = Catalog::default();
    let limits = static_limits(config);
    let artifacts: Vec<Artifact<'_>> = entries
        .iter()
        .filter_map(|entry| split_artifact(&entry.path).map(|(dir, name)| (entry, dir, name)))
        .collect();
    let mut bytes_read: u64 = 0;
    for (index, &artifact) in artifacts.iter().enumerate() {
        let (entry, _, _) = artifact;
        if index == CATALOG_ARTIFACTS {
            catalog.truncated = Some(stopped(
                &artifacts[index..],
                format!("more than {CATALOG_ARTIFACTS} plugin artifacts in this commit"),
            ));
            break;
        }
        if let Some(broken) = refused_unread(artifact, config) {
            catalog.broken.push(broken);
            continue;
        }
        if bytes_read.saturating_add(entry.size) > CATALOG_ARTIFACT_BYTES {
            catalog.truncated = Some(stopped(
                &artifacts[index..],
                format!(
                    "the artifacts of this commit pass the {} MiB catalog budget",
                    CATALOG_ARTIFACT_BYTES >> 20
                ),
            ));
            break;
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return Err(Diagnostic::new(
                Code::Timeout,
                "the request deadline passed while the plugin artifacts were read (TIMEOUT)",
            ));
        }
        let bytes = read(entry)?;
        // The blob's header size, unless the reader handed over more.
        bytes_read = bytes_read.saturating_add(entry.size.max(bytes.len() as u64));
        examine(&mut catalog, artifact, bytes, config, &limits);
    }
    catalog.plugins.sort_by(|a, b| {
        (a.name.as_bytes(), dir_key(&a.dir)).cmp(&(b.name.as_bytes(), dir_key(&b.dir)))
    });
    catalog.broken.sort_by(|a, b| {
        (a.name.as_bytes(), dir_key(&a.dir)).cmp(&(b.name.as_bytes(), dir_key(&b.dir)))
    });
    Ok(catalog)
}

/// An artifact entry with the directory and the plugin name its path gives.
type Artifact<'a> = (&'a ArtifactEntry, &'a str, &'a str);

/// `artifact` listed as broken with `diagnostic`.
fn broken((entry, dir, name): Artifact<'_>, diagnostic: Diagnostic) -> Broken {
    Broken {
        name: name.to_string(),
        dir: dir.to_string(),
        artifact_path: entry.path.clone(),
        diagnostic: diagnostic.at(name, dir),
    }
}

/// Why `artifact` is broken before a byte of it is read (its path, its kind, its size), or
/// `None` when it is to be read.
fn refused_unread(artifact: Artifact<'_>, config: &PluginConfig) -> Option<Broken> {
    let (entry, dir, name) = artifact;
    if let Some(why) = path_refusal(entry) {
        // One bad name costs only its own artifact: it is listed as broken, never read.
        let (name, dir) = (shown(name), shown(dir));
        let message = format!(
            "the artifact's path {why}; plugin artifacts need a plain `/`-separated UTF-8 \
             path without backslashes or control characters (rename it)"
        );
        return Some(Broken {
            diagnostic: Diagnostic::new(Code::Artifact, message).at(&name, &dir),
            name,
            dir,
            artifact_path: shown(&entry.path),
        });
    }
    let message = match entry.kind {
        ArtifactKind::Symlink => {
            "the artifact is a symbolic link; commit the module itself".to_string()
        }
        ArtifactKind::Submodule => {
            "the artifact is a submodule; commit the module itself".to_string()
        }
        ArtifactKind::Blob if entry.size > config.artifact_bytes => format!(
            "the artifact is {} bytes, over ARTIFACT_BYTES ({})",
            entry.size, config.artifact_bytes
        ),
        ArtifactKind::Blob => return None,
    };
    Some(broken(artifact, Diagnostic::new(Code::Artifact, message)))
}

/// Adds `artifact` to `catalog` as the plugin its `bytes` make, or as broken: an LFS
/// pointer, bad metadata or a module the ABI refuses.
fn examine(
    catalog: &mut Catalog,
    artifact: Artifact<'_>,
    bytes: Vec<u8>,
    config: &PluginConfig,
    limits: &abi::StaticLimits,
) {
    let (entry, dir, name) = artifact;
    if bytes.starts_with(b"version https://git-lfs.github.com/spec/") {
        let message = "the artifact is a Git LFS pointer; commit the module itself";
        let diagnostic = Diagnostic::new(Code::Artifact, message);
        catalog.broken.push(broken(artifact, diagnostic));
        return;
    }
    let checked = read_metadata(name, &bytes, config.metadata_bytes)
        .and_then(|metadata| abi::check(&bytes, limits).map(|()| metadata));
    match checked {
        Ok(metadata) => catalog.plugins.push(Arc::new(Plugin {
            name: name.to_string(),
            dir: dir.to_string(),
            artifact_path: entry.path.clone(),
            digest: entry.digest.clone(),
            bytes: bytes.into(),
            metadata,
        })),
        Err(diagnostic) => catalog.broken.push(broken(artifact, diagnostic)),
    }
}

/// The diagnostic of a discovery that stopped early: why, and which artifacts were left out.
fn stopped(rest: &[Artifact<'_>], why: String) -> Diagnostic {
    let first = rest.first().map_or("", |(entry, _, _)| entry.path.as_str());
    let shown: String = first.chars().take(200).collect();
    Diagnostic::new(
        Code::Artifact,
        format!(
            "plugin discovery stopped: {why}; {} artifact(s) from `{}` on were not read and do not run",
            rest.len(),
            shown.escape_debug()
        ),
    )
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
        module(name, extra, ABI_FUNCS, "")
    }

    /// The three ABI functions of W-1 (they never run here).
    const ABI_FUNCS: &str = r#"(func (export "alloc") (param i32) (result i32) (i32.const 16))
        (func (export "dealloc") (param i32 i32))
        (func (export "enrich") (param i32 i32) (result i64) (i64.const 0))"#;

    /// A module with valid metadata, one 1-page memory, `funcs` and `imports`.
    fn module(name: &str, extra: &str, funcs: &str, imports: &str) -> Vec<u8> {
        let json = format!(
            r#"{{"name":"{name}","abi_version":2,"operations":["read","read_many"]{extra}}}"#
        );
        let escaped = json.replace('"', "\\\"");
        wat::parse_str(format!(
            "(module {imports} (memory (export \"memory\") 1) {funcs} (@custom \"sourcegraph.plugin.v1\" \"{escaped}\"))"
        ))
        .unwrap()
    }

    fn entry(path: &str, kind: ArtifactKind, size: u64) -> ArtifactEntry {
        ArtifactEntry {
            path: path.into(),
            path_utf8: true,
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
        let catalog = discover(&entries, &config, None, |e| {
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

    /// W-2, W-29 (issue 28): an artifact whose path Git allows but the host cannot read by
    /// name (a backslash, a control character, not UTF-8, a `.`/`..`/empty segment, absolute)
    /// is one PLUGIN_ARTIFACT diagnostic of its own, never read; the artifacts next to it are
    /// read and cataloged as usual, and nothing shown carries a raw control character.
    #[test]
    fn w2_w29_bad_artifact_paths_cost_only_themselves() {
        let mut entries = vec![
            entry("docs/p.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("a\\b/q.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("docs/c\u{1b}[2J.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("docs\n/n.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("x\u{FFFD}/r.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("d/../s.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("d//t.sourcegraph.wasm", ArtifactKind::Blob, 10),
            entry("z.sourcegraph.wasm", ArtifactKind::Blob, 10),
        ];
        entries[4].path_utf8 = false;
        let mut read = Vec::new();
        let catalog = discover(&entries, &PluginConfig::default(), None, |e| {
            read.push(e.path.clone());
            Ok(wasm(split_artifact(&e.path).unwrap().1, ""))
        })
        .unwrap();
        assert_eq!(read, ["docs/p.sourcegraph.wasm", "z.sourcegraph.wasm"]);
        assert_eq!(
            catalog
                .plugins
                .iter()
                .map(|p| (p.name.as_str(), p.dir.as_str()))
                .collect::<Vec<_>>(),
            [("p", "docs"), ("z", "")]
        );
        let mut broken: Vec<(&str, &str, Code)> = catalog
            .broken
            .iter()
            .map(|b| (b.artifact_path.as_str(), b.name.as_str(), b.diagnostic.code))
            .collect();
        broken.sort_by(|a, b| a.0.cmp(b.0));
        assert_eq!(
            broken,
            [
                ("a\\b/q.sourcegraph.wasm", "q", Code::Artifact),
                ("d/../s.sourcegraph.wasm", "s", Code::Artifact),
                ("d//t.sourcegraph.wasm", "t", Code::Artifact),
                (
                    "docs/c\\u{1b}[2J.sourcegraph.wasm",
                    "c\\u{1b}[2J",
                    Code::Artifact
                ),
                ("docs\\n/n.sourcegraph.wasm", "n", Code::Artifact),
                ("x\u{FFFD}/r.sourcegraph.wasm", "r", Code::Artifact),
            ]
        );
        let message = |path: &str| {
            let b = catalog
                .broken
                .iter()
                .find(|b| b.artifact_path == path)
                .unwrap();
            b.diagnostic.message.clone()
        };
        assert!(message("a\\b/q.sourcegraph.wasm").contains("contains a backslash"));
        assert!(message("docs\\n/n.sourcegraph.wasm").contains("contains a control character"));
        assert!(message("x\u{FFFD}/r.sourcegraph.wasm").contains("is not valid UTF-8"));
        assert!(message("d/../s.sourcegraph.wasm").contains("`..` segment"));
        for b in &catalog.broken {
            let shown = [
                &b.name,
                &b.dir,
                &b.artifact_path,
                &b.diagnostic.plugin,
                &b.diagnostic.root,
            ];
            assert!(
                shown.iter().all(|text| !text.chars().any(char::is_control)),
                "{b:?}"
            );
            assert!(
                !b.diagnostic.to_string().chars().any(char::is_control),
                "{b:?}"
            );
        }
        let escape = &catalog
            .broken
            .iter()
            .find(|b| b.name.starts_with('c'))
            .unwrap();
        assert_eq!(
            escape
                .diagnostic
                .to_string()
                .split(" message=")
                .next()
                .unwrap(),
            "code=PLUGIN_ARTIFACT plugin=c\\\\u{1b}[2J root=docs"
        );
        // The reading paths still resolve: the bad artifacts apply nowhere they could shadow.
        assert!(matches!(
            catalog.nearest("p", "docs/a.md"),
            Some(Nearest::Runnable(_))
        ));
    }

    /// W-29: a read failure is transient, not "no plugins".
    #[test]
    fn w29_read_failure_is_not_an_empty_catalog() {
        let entries = vec![entry("p.sourcegraph.wasm", ArtifactKind::Blob, 10)];
        assert!(
            discover(&entries, &PluginConfig::default(), None, |_| Err(
                Diagnostic::new(Code::Artifact, "object database busy")
            ))
            .is_err()
        );
    }

    /// W-6: the static module checks run at discovery, so a module that can never run is
    /// listed as broken with the runtime's code (no compile: nothing here has an engine).
    #[test]
    fn w6_static_module_checks_at_discovery() {
        let artifacts: Vec<(&str, Vec<u8>)> = vec![
            ("ok.sourcegraph.wasm", wasm("ok", "")),
            (
                "wasi.sourcegraph.wasm",
                module(
                    "wasi",
                    "",
                    ABI_FUNCS,
                    r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
                ),
            ),
            (
                "env.sourcegraph.wasm",
                module("env", "", ABI_FUNCS, r#"(import "env" "f" (func))"#),
            ),
            (
                "noenrich.sourcegraph.wasm",
                module(
                    "noenrich",
                    "",
                    r#"(func (export "alloc") (param i32) (result i32) (i32.const 16))
                       (func (export "dealloc") (param i32 i32))"#,
                    "",
                ),
            ),
            ("huge.sourcegraph.wasm", {
                let json = r#"{\"name\":\"huge\",\"abi_version\":2,\"operations\":[\"read\"]}"#;
                wat::parse_str(format!(
                    "(module (memory (export \"memory\") 2000) {ABI_FUNCS} (@custom \"sourcegraph.plugin.v1\" \"{json}\"))"
                ))
                .unwrap()
            }),
        ];
        let entries: Vec<ArtifactEntry> = artifacts
            .iter()
            .map(|(path, bytes)| entry(path, ArtifactKind::Blob, bytes.len() as u64))
            .collect();
        let config = PluginConfig {
            memory_mib: 64,
            ..PluginConfig::default()
        };
        let catalog = discover(&entries, &config, None, |e| {
            Ok(artifacts
                .iter()
                .find(|(p, _)| *p == e.path)
                .unwrap()
                .1
                .clone())
        })
        .unwrap();
        assert_eq!(
            catalog
                .plugins
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            ["ok"]
        );
        let codes: Vec<(&str, Code)> = catalog
            .broken
            .iter()
            .map(|b| (b.name.as_str(), b.diagnostic.code))
            .collect();
        assert_eq!(
            codes,
            [
                ("env", Code::Abi),
                ("huge", Code::Memory),
                ("noenrich", Code::Abi),
                ("wasi", Code::Abi)
            ]
        );
        let wasi = &catalog.broken[3].diagnostic;
        assert!(wasi.message.contains("no WASI"), "{wasi}");
    }

    /// W-29: discovery of one catalog is bounded: at most CATALOG_ARTIFACTS artifacts and
    /// CATALOG_ARTIFACT_BYTES read, then it stops and says so; nothing past it is read.
    #[test]
    fn w29_discovery_bounds_artifacts_and_bytes() {
        let bytes = wasm("p", "");
        let many: Vec<ArtifactEntry> = (0..CATALOG_ARTIFACTS + 3)
            .map(|i| {
                entry(
                    &format!("d{i:05}/p.sourcegraph.wasm"),
                    ArtifactKind::Blob,
                    10,
                )
            })
            .collect();
        let mut reads = 0;
        let catalog = discover(&many, &PluginConfig::default(), None, |_| {
            reads += 1;
            Ok(bytes.clone())
        })
        .unwrap();
        assert_eq!(reads, CATALOG_ARTIFACTS);
        assert_eq!(catalog.plugins.len(), CATALOG_ARTIFACTS);
        let truncated = catalog.truncated.expect("says it stopped");
        assert_eq!(truncated.code, Code::Artifact);
        assert!(
            truncated
                .message
                .contains("3 artifact(s) from `d01024/p.sourcegraph.wasm` on"),
            "{truncated}"
        );

        // Four artifacts claiming 40 MiB each: the fourth would pass 128 MiB.
        let big: Vec<ArtifactEntry> = (0..5)
            .map(|i| {
                entry(
                    &format!("b{i}/p.sourcegraph.wasm"),
                    ArtifactKind::Blob,
                    40 << 20,
                )
            })
            .collect();
        let config = PluginConfig {
            artifact_bytes: 64 << 20,
            ..PluginConfig::default()
        };
        let mut reads = 0;
        let catalog = discover(&big, &config, None, |_| {
            reads += 1;
            Ok(bytes.clone())
        })
        .unwrap();
        assert_eq!(reads, 3);
        let truncated = catalog.truncated.expect("says it stopped");
        assert!(
            truncated.message.contains("128 MiB catalog budget")
                && truncated
                    .message
                    .contains("2 artifact(s) from `b3/p.sourcegraph.wasm`"),
            "{truncated}"
        );
    }

    /// W-26: the request deadline covers artifact reads: once passed, discovery stops with
    /// PLUGIN_TIMEOUT (a transient failure, never an empty catalog).
    #[test]
    fn w26_discovery_stops_at_the_request_deadline() {
        let entries = vec![entry("p.sourcegraph.wasm", ArtifactKind::Blob, 10)];
        let mut reads = 0;
        let outcome = discover(
            &entries,
            &PluginConfig::default(),
            Some(Instant::now()),
            |_| {
                reads += 1;
                Ok(wasm("p", ""))
            },
        );
        assert_eq!(outcome.unwrap_err().code, Code::Timeout);
        assert_eq!(reads, 0);
    }
}
