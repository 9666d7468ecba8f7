//! The repository-plugin contract through the service (seed 000, SPEC W-*): what is decided
//! before discovery, what the deadline and the catalog key cover, which items plugins see,
//! and what discovery diagnoses statically. Real Git repositories, real fixture artifacts.

use serde_json::json;
use service::{
    AvailabilityRequest, CallContext, ConnectionPlugins, Enrichment, PluginConfig, PluginSelection,
    ReadRequest, Service, ServiceConfig,
};
use testgit::SourceRepo;

mod common;

use common::artifact;

/// A module with valid metadata (`wasi`, ABI 2, read/read_many, default on) and the W-1
/// exports that imports `wasi_snapshot_preview1::fd_write`, so it can never run. Built from:
///
/// ```text
/// (module
///   (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
///   (memory (export "memory") 1)
///   (func (export "alloc") (param i32) (result i32) (i32.const 16))
///   (func (export "dealloc") (param i32 i32))
///   (func (export "enrich") (param i32 i32) (result i64) (i64.const 0))
///   (@custom "sourcegraph.plugin.v1" "{\"name\":\"wasi\",\"abi_version\":2,
///     \"operations\":[\"read\",\"read_many\"],\"default_enabled\":true}"))
/// ```
const WASI_MODULE: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x19, 0x04, 0x60, 0x04, 0x7f, 0x7f, 0x7f,
    0x7f, 0x01, 0x7f, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x02, 0x7f, 0x7f, 0x00, 0x60, 0x02, 0x7f,
    0x7f, 0x01, 0x7e, 0x02, 0x23, 0x01, 0x16, 0x77, 0x61, 0x73, 0x69, 0x5f, 0x73, 0x6e, 0x61, 0x70,
    0x73, 0x68, 0x6f, 0x74, 0x5f, 0x70, 0x72, 0x65, 0x76, 0x69, 0x65, 0x77, 0x31, 0x08, 0x66, 0x64,
    0x5f, 0x77, 0x72, 0x69, 0x74, 0x65, 0x00, 0x00, 0x03, 0x04, 0x03, 0x01, 0x02, 0x03, 0x05, 0x03,
    0x01, 0x00, 0x01, 0x07, 0x25, 0x04, 0x06, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x02, 0x00, 0x05,
    0x61, 0x6c, 0x6c, 0x6f, 0x63, 0x00, 0x01, 0x07, 0x64, 0x65, 0x61, 0x6c, 0x6c, 0x6f, 0x63, 0x00,
    0x02, 0x06, 0x65, 0x6e, 0x72, 0x69, 0x63, 0x68, 0x00, 0x03, 0x0a, 0x0e, 0x03, 0x04, 0x00, 0x41,
    0x10, 0x0b, 0x02, 0x00, 0x0b, 0x04, 0x00, 0x42, 0x00, 0x0b, 0x00, 0x6e, 0x15, 0x73, 0x6f, 0x75,
    0x72, 0x63, 0x65, 0x67, 0x72, 0x61, 0x70, 0x68, 0x2e, 0x70, 0x6c, 0x75, 0x67, 0x69, 0x6e, 0x2e,
    0x76, 0x31, 0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0x77, 0x61, 0x73, 0x69, 0x22,
    0x2c, 0x22, 0x61, 0x62, 0x69, 0x5f, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x22, 0x3a, 0x32,
    0x2c, 0x22, 0x6f, 0x70, 0x65, 0x72, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x22, 0x3a, 0x5b, 0x22,
    0x72, 0x65, 0x61, 0x64, 0x22, 0x2c, 0x22, 0x72, 0x65, 0x61, 0x64, 0x5f, 0x6d, 0x61, 0x6e, 0x79,
    0x22, 0x5d, 0x2c, 0x22, 0x64, 0x65, 0x66, 0x61, 0x75, 0x6c, 0x74, 0x5f, 0x65, 0x6e, 0x61, 0x62,
    0x6c, 0x65, 0x64, 0x22, 0x3a, 0x74, 0x72, 0x75, 0x65, 0x7d,
];

const REPO: &str = "test/repo";

fn service_with(source: &SourceRepo, scope: &str, plugins: PluginConfig) -> Service {
    let config = ServiceConfig {
        plugins,
        ..ServiceConfig::default()
    };
    Service::new(source.store(REPO, scope), config)
}

fn read(path: &str, plugins: Option<Vec<PluginSelection>>) -> ReadRequest {
    ReadRequest {
        repo: REPO.into(),
        revision: None,
        path: path.into(),
        start_line: None,
        end_line: None,
        plugins,
    }
}

fn named(name: &str) -> Option<Vec<PluginSelection>> {
    Some(vec![PluginSelection {
        name: name.into(),
        args: json!({}),
    }])
}

fn ctx(plugins: ConnectionPlugins) -> CallContext {
    CallContext {
        plugins,
        ..CallContext::default()
    }
}

fn codes(enrichment: &Enrichment) -> Vec<&str> {
    enrichment
        .diagnostics
        .iter()
        .map(|d| d.split(' ').next().unwrap_or_default())
        .collect()
}

/// Hides the artifact's loose object in the mirror, so every discovery of the commit fails
/// (a transient failure) until the returned guard puts it back.
struct Hidden {
    loose: std::path::PathBuf,
    hidden: std::path::PathBuf,
}

impl Drop for Hidden {
    fn drop(&mut self) {
        let _ = std::fs::rename(&self.hidden, &self.loose);
    }
}

fn hide_artifact(source: &SourceRepo, path: &str) -> Hidden {
    let blob = source.git(&["rev-parse", &format!("HEAD:{path}")]);
    let blob = blob.trim();
    let loose = source
        .data_dir()
        .join("mirrors/test/repo.git/objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    let hidden = loose.with_extension("hidden");
    std::fs::rename(&loose, &hidden).expect("the artifact is a loose object in the mirror");
    Hidden { loose, hidden }
}

/// W-10, W-11: `plugins: []`, connection `off` and the host switch decide before any
/// discovery: with a discovery that would fail, `[]` shows nothing, `off` and the host
/// switch show PLUGIN_DISABLED for a named plugin (and nothing without one), and no
/// discovery runs.
#[tokio::test]
async fn w10_w11_off_and_empty_list_decide_before_discovery() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    let service = service_with(&source, "", PluginConfig::default());
    let _hidden = hide_artifact(&source, "echo.sourcegraph.wasm");
    let auto = ctx(ConnectionPlugins::Auto);
    let off = ctx(ConnectionPlugins::Off);

    let (_, empty) = service
        .read_enriched(&auto, read("a.md", Some(vec![])))
        .await
        .unwrap();
    assert_eq!(empty, Enrichment::default(), "[] shows nothing");
    let (_, quiet) = service
        .read_enriched(&off, read("a.md", None))
        .await
        .unwrap();
    assert_eq!(quiet, Enrichment::default(), "off without a named plugin");
    let (_, disabled) = service
        .read_enriched(&off, read("a.md", named("echo")))
        .await
        .unwrap();
    assert_eq!(codes(&disabled), ["code=PLUGIN_DISABLED"], "{disabled:?}");
    assert_eq!(service.plugin_discoveries(), 0, "nothing was discovered");
    assert_eq!(service.plugin_catalogs(), 0);

    // The host switch: a separate service on the same data directory.
    let host_off = service_with(
        &source,
        "",
        PluginConfig {
            disabled: true,
            ..PluginConfig::default()
        },
    );
    let (_, switched) = host_off
        .read_enriched(&auto, read("a.md", named("echo")))
        .await
        .unwrap();
    assert_eq!(codes(&switched), ["code=PLUGIN_DISABLED"], "{switched:?}");
    let (_, nothing) = host_off
        .read_enriched(&auto, read("a.md", None))
        .await
        .unwrap();
    assert_eq!(nothing, Enrichment::default());
    assert_eq!(host_off.plugin_discoveries(), 0);

    // The failing discovery itself is only seen where plugins may run.
    let (_, failed) = service
        .read_enriched(&auto, read("a.md", None))
        .await
        .unwrap();
    assert_eq!(codes(&failed), ["code=PLUGIN_ARTIFACT"], "{failed:?}");
}

/// W-26: TIMEOUT covers the whole enrichment, artifact reads included: a deadline that has
/// passed before the artifacts are read ends in PLUGIN_TIMEOUT, and the unfinished discovery
/// is not cached (it is transient).
#[tokio::test]
async fn w26_timeout_covers_discovery() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    let service = service_with(
        &source,
        "",
        PluginConfig {
            timeout: std::time::Duration::ZERO,
            ..PluginConfig::default()
        },
    );
    let base = service
        .read(&ctx(ConnectionPlugins::Auto), read("a.md", None))
        .await
        .unwrap();
    let (item, e) = service
        .read_enriched(&ctx(ConnectionPlugins::Auto), read("a.md", None))
        .await
        .unwrap();
    assert_eq!(item, base);
    assert_eq!(codes(&e), ["code=PLUGIN_TIMEOUT"], "{e:?}");
    assert!(
        e.diagnostics[0].contains("plugin artifacts were read"),
        "{e:?}"
    );
    assert_eq!(
        service.plugin_catalogs(),
        0,
        "a timed-out discovery is not cached"
    );
    assert_eq!(service.plugin_stats().unwrap().executions, 0);
}

/// W-29, G-2: the catalog key holds the registered scope: after the repository is registered
/// again with another scope, the cached catalog of the old scope does not apply (the same
/// commit is discovered again, and the plugin outside the old scope now runs).
#[tokio::test]
async fn w29_g2_catalog_key_includes_the_registered_scope() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("docs/a.md", b"a\n"),
    ]);
    let service = service_with(&source, "docs", PluginConfig::default());
    let auto = ctx(ConnectionPlugins::Auto);
    let (_, scoped) = service
        .read_enriched(&auto, read("docs/a.md", None))
        .await
        .unwrap();
    assert!(
        scoped.per_item.is_empty(),
        "the root artifact is outside the scope"
    );
    assert_eq!(service.plugin_catalogs(), 1);

    service.unregister(REPO.into()).await.unwrap();
    service
        .register(service::RegisterRequest {
            name: REPO.into(),
            source: source.source(),
            registered_path: String::new(),
            branch: None,
            private: None,
        })
        .await
        .unwrap();
    service.sync(REPO.into()).await.unwrap();

    let (_, whole) = service
        .read_enriched(&auto, read("docs/a.md", None))
        .await
        .unwrap();
    assert_eq!(
        whole.for_item(0).count(),
        1,
        "the root echo applies in the new scope: {whole:?}"
    );
    assert_eq!(service.plugin_discoveries(), 2);
}

/// W-14: only items that returned lines are passed: an item the shared batch budget left
/// without lines is not (no id, no attachment), an empty file still is, failed items never.
#[tokio::test]
async fn w14_items_without_lines_are_not_passed() {
    let long: String = (0..40)
        .map(|n| format!("line {n} of the long file\n"))
        .collect();
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("long.md", long.as_bytes()),
        ("short.md", b"short\n"),
        ("empty.md", b""),
    ]);
    let config = ServiceConfig {
        batch_budget: 200,
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store(REPO, ""), config);
    let request = common::batch(&["long.md", "short.md", "empty.md", "missing.md"]);
    let (answer, e) = service
        .read_many_enriched(&ctx(ConnectionPlugins::Auto), request)
        .await
        .unwrap();
    let short = answer.items[1].outcome.as_ref().expect("short.md is read");
    assert_eq!(
        (short.start_line, short.end_line, short.content.as_str()),
        (1, 0, ""),
        "the budget left short.md without lines"
    );
    let attached: Vec<usize> = (0..4).filter(|&i| e.for_item(i).count() > 0).collect();
    assert_eq!(attached, [0, 2], "{e:?}");
    assert!(
        e.for_item(2)
            .next()
            .unwrap()
            .starts_with("echo read-2 empty.md"),
        "{e:?}"
    );
}

/// W-6: discovery applies the static module checks: `availability(include_plugins: true)`
/// lists a module importing WASI as broken with PLUGIN_ABI (and a module whose initial memory
/// is over MEMORY_MIB with PLUGIN_MEMORY) without compiling or running anything; a read
/// never tries to run it.
#[tokio::test]
async fn w6_availability_shows_plugin_abi_for_a_module_that_cannot_run() {
    let source = SourceRepo::with_files(&[
        ("wasi.sourcegraph.wasm", WASI_MODULE),
        ("docs/echo.sourcegraph.wasm", &artifact("echo")),
        ("docs/a.md", b"a\n"),
    ]);
    let service = service_with(
        &source,
        "",
        PluginConfig {
            // The echo fixture's initial memory (rustc's default of 17 pages) is over 1 MiB.
            memory_mib: 1,
            ..PluginConfig::default()
        },
    );
    let plugins = discovered_plugins(&service).await;
    let shown: Vec<(&str, &str)> = plugins
        .iter()
        .map(|p| {
            let diagnostic = p.diagnostic.as_deref().unwrap_or("runnable");
            (
                p.name.as_str(),
                diagnostic.split(' ').next().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [("echo", "code=PLUGIN_MEMORY"), ("wasi", "code=PLUGIN_ABI")],
        "{plugins:?}"
    );
    assert!(
        plugins[1]
            .diagnostic
            .as_deref()
            .unwrap()
            .contains("no WASI"),
        "{plugins:?}"
    );
    let stats = service.plugin_stats().unwrap();
    assert_eq!((stats.compiles, stats.executions), (0, 0));

    let (_, e) = service
        .read_enriched(&ctx(ConnectionPlugins::Auto), read("docs/a.md", None))
        .await
        .unwrap();
    assert_eq!(
        codes(&e),
        ["code=PLUGIN_MEMORY", "code=PLUGIN_ABI"],
        "diagnosed from the catalog, never compiled: {e:?}"
    );
    assert_eq!(service.plugin_stats().unwrap().compiles, 0);
}

/// W-2, SPEC §9: a real submodule entry (a gitlink) named like an artifact is diagnosed
/// PLUGIN_ARTIFACT by discovery, never read or run.
#[tokio::test]
async fn w2_gitlink_artifact_is_plugin_artifact() {
    let source = SourceRepo::with_files(&[("a.md", b"a\n")]);
    let target = source.head();
    source.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{target},x.sourcegraph.wasm"),
    ]);
    source.commit_index("a gitlink named like an artifact");
    let listed = source.git(&["ls-tree", "HEAD", "x.sourcegraph.wasm"]);
    assert!(listed.starts_with("160000 commit "), "{listed}");
    let service = service_with(&source, "", PluginConfig::default());
    let plugins = discovered_plugins(&service).await;
    assert_eq!(plugins.len(), 1, "{plugins:?}");
    assert_eq!(plugins[0].name, "x");
    let diagnostic = plugins[0].diagnostic.as_deref().unwrap();
    assert!(
        diagnostic.starts_with("code=PLUGIN_ARTIFACT plugin=x") && diagnostic.contains("submodule"),
        "{diagnostic}"
    );
    let (_, e) = service
        .read_enriched(&ctx(ConnectionPlugins::Auto), read("a.md", None))
        .await
        .unwrap();
    assert_eq!(codes(&e), ["code=PLUGIN_ARTIFACT"], "{e:?}");
}

/// W-3, W-6: `availability(include_plugins: true)` carries each plugin's `input_schema` from
/// the metadata embedded in the module, as compact one-line JSON (display only); a module
/// whose metadata has none, here one that cannot run, shows none.
#[tokio::test]
async fn w3_w6_availability_carries_input_schema() {
    let source = SourceRepo::with_files(&[
        ("docs/echo.sourcegraph.wasm", &artifact("echo")),
        ("wasi.sourcegraph.wasm", WASI_MODULE),
        ("docs/a.md", b"a\n"),
    ]);
    let service = service_with(&source, "", PluginConfig::default());
    let plugins = discovered_plugins(&service).await;
    let schemas: Vec<(&str, Option<&str>)> = plugins
        .iter()
        .map(|p| (p.name.as_str(), p.input_schema.as_deref()))
        .collect();
    let echo = json!({"type": "object"}).to_string();
    assert_eq!(
        schemas,
        [("echo", Some(echo.as_str())), ("wasi", None)],
        "{plugins:?}"
    );
}

/// `availability {include_plugins: true}` of the head: the plugins discovery found.
async fn discovered_plugins(service: &Service) -> Vec<service::PluginInfo> {
    let request = AvailabilityRequest {
        repo: REPO.into(),
        revision: None,
        include_plugins: true,
    };
    let answer = service
        .availability(&ctx(ConnectionPlugins::Auto), request)
        .await
        .unwrap();
    match answer.plugins {
        Some(service::PluginDiscovery::Found(plugins)) => plugins,
        other => panic!("asked for plugins and discovery works: {other:?}"),
    }
}
