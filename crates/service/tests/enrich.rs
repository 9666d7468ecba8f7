//! Repository-plugin enrichment through the service, with the committed fixture artifacts
//! (W-37) inside real Git repositories: selection, grouping, versioning, isolation and the
//! example plugins.

use serde_json::json;
use service::{
    CallContext, ConnectionPlugins, Enrichment, FileRange, PluginSelection, ReadItem,
    ReadManyRequest, ReadRequest, Service, ServiceConfig,
};
use testgit::SourceRepo;

mod common;

use common::{artifact, batch, read};

fn service(source: &SourceRepo, scope: &str) -> Service {
    Service::new(source.store("test/repo", scope), ServiceConfig::default())
}

fn auto() -> CallContext {
    CallContext::default()
}

fn selection(name: &str, args: serde_json::Value) -> PluginSelection {
    PluginSelection {
        name: name.into(),
        args,
    }
}

fn texts(enrichment: &Enrichment, index: usize) -> Vec<String> {
    enrichment.for_item(index).map(str::to_string).collect()
}

/// W-8, W-17: a default-enabled plugin applies to its directory only; its text is the
/// item's; base results are untouched.
#[tokio::test]
async fn w8_w17_default_plugin_attaches_to_its_items() {
    let echo = artifact("echo");
    let source = SourceRepo::with_files(&[
        ("docs/echo.sourcegraph.wasm", &echo),
        ("docs/a.md", b"one\ntwo\n"),
        ("README.md", b"r\n"),
    ]);
    let service = service(&source, "");
    let (item, enrichment) = service
        .read_enriched(&auto(), read("docs/a.md"))
        .await
        .unwrap();
    assert_eq!(
        texts(&enrichment, 0),
        ["echo read-0 a.md 1-2 root=docs op=read calls=1"]
    );
    assert!(
        enrichment.diagnostics.is_empty(),
        "{:?}",
        enrichment.diagnostics
    );
    assert_eq!(
        item,
        service.read(&auto(), read("docs/a.md")).await.unwrap(),
        "W-25: base unchanged"
    );
    let (_, outside) = service
        .read_enriched(&auto(), read("README.md"))
        .await
        .unwrap();
    assert_eq!(outside, Enrichment::default());
}

/// W-14, W-15: a batch over two plugin directories of a monorepo registered path: ids are
/// not renumbered, failed items are not passed, paths are relative to each plugin
/// directory, `root` is repository-relative and the prefix is not added twice.
#[tokio::test]
async fn w15_multi_directory_batch() {
    let echo = artifact("echo");
    let source = SourceRepo::with_files(&[
        ("packages/docs/echo.sourcegraph.wasm", &echo),
        ("packages/docs/kb/echo.sourcegraph.wasm", &echo),
        ("packages/docs/a.md", b"a\n"),
        ("packages/docs/kb/b.md", b"b1\nb2\n"),
        ("packages/docs/kb/deep/c.md", b"c\n"),
    ]);
    let service = service(&source, "packages/docs");
    let request = batch(&[
        "packages/docs/kb/b.md",
        "packages/docs/missing.md",
        "packages/docs/a.md",
        "packages/docs/kb/deep/c.md",
    ]);
    let (answer, enrichment) = service.read_many_enriched(&auto(), request).await.unwrap();
    assert!(answer.items[1].outcome.is_err());
    assert_eq!(
        texts(&enrichment, 0),
        ["echo read-0 b.md 1-2 root=packages/docs/kb op=read_many calls=1"]
    );
    assert!(
        texts(&enrichment, 1).is_empty(),
        "a failed item gets nothing"
    );
    assert_eq!(
        texts(&enrichment, 2),
        ["echo read-2 a.md 1-1 root=packages/docs op=read_many calls=1"]
    );
    assert_eq!(
        texts(&enrichment, 3),
        ["echo read-3 deep/c.md 1-1 root=packages/docs/kb op=read_many calls=1"]
    );
    // W-19: the root-most directory runs first.
    let order: Vec<&str> = enrichment
        .per_item
        .iter()
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(order, ["read-2", "read-0", "read-3"]);
}

/// W-9, W-10, M-2: connection `off` beats the call; `[]` turns plugins off for a call; a
/// call list chooses with args; an unknown name is a diagnostic, not an error.
#[tokio::test]
async fn w10_call_and_connection_selection() {
    let echo = artifact("echo");
    let source = SourceRepo::with_files(&[("echo.sourcegraph.wasm", &echo), ("a.md", b"a\n")]);
    let service = service(&source, "");
    let off = CallContext {
        plugins: ConnectionPlugins::Off,
        ..CallContext::default()
    };
    let named = ReadRequest {
        plugins: Some(vec![selection("echo", json!({"whole": "W"}))]),
        ..read("a.md")
    };
    let (_, enrichment) = service.read_enriched(&off, named.clone()).await.unwrap();
    assert!(enrichment.per_item.is_empty());
    assert!(
        enrichment.diagnostics[0].starts_with("code=PLUGIN_DISABLED plugin=echo"),
        "{:?}",
        enrichment.diagnostics
    );
    let (_, none) = service
        .read_enriched(
            &auto(),
            ReadRequest {
                plugins: Some(vec![]),
                ..read("a.md")
            },
        )
        .await
        .unwrap();
    assert_eq!(none, Enrichment::default());
    let (_, chosen) = service.read_enriched(&auto(), named).await.unwrap();
    assert_eq!(chosen.whole, ["W"]);
    let missing = ReadRequest {
        plugins: Some(vec![selection("nope", json!({}))]),
        ..read("a.md")
    };
    let (item, diagnosed) = service.read_enriched(&auto(), missing).await.unwrap();
    assert!(item.outcome.is_ok());
    assert!(
        diagnosed.diagnostics[0].starts_with("code=PLUGIN_NOT_FOUND plugin=nope"),
        "{:?}",
        diagnosed.diagnostics
    );
    let connection_list = CallContext {
        plugins: ConnectionPlugins::Named(vec!["other".into()]),
        ..CallContext::default()
    };
    let (_, listed) = service
        .read_enriched(&connection_list, read("a.md"))
        .await
        .unwrap();
    assert!(
        listed.per_item.is_empty(),
        "only the connection's names run"
    );
}

/// W-7: a plugin added, changed and removed across three commits; each SHA runs its own.
#[tokio::test]
async fn w7_each_commit_runs_its_own_plugins() {
    let source = SourceRepo::with_files(&[("a.md", b"a\n")]);
    let none = source.head();
    let added = source.commit(&[("echo.sourcegraph.wasm", &artifact("echo"))], "add");
    // The change replaces the module with one that no longer validates: the diagnostic
    // proves the new bytes are the ones in force at that commit.
    let changed = source.commit(&[("echo.sourcegraph.wasm", b"\0asm\x01\0\0\0")], "change");
    source.git(&["rm", "-q", "echo.sourcegraph.wasm"]);
    let removed = source.commit_index("remove");
    let service = service(&source, "");
    let at = |rev: &str| ReadRequest {
        revision: Some(rev.to_string()),
        ..read("a.md")
    };
    let (_, e) = service.read_enriched(&auto(), at(&none)).await.unwrap();
    assert_eq!(e, Enrichment::default());
    let (_, e) = service.read_enriched(&auto(), at(&added)).await.unwrap();
    assert_eq!(texts(&e, 0), ["echo read-0 a.md 1-1 root= op=read calls=1"]);
    let (_, e) = service.read_enriched(&auto(), at(&changed)).await.unwrap();
    assert!(e.per_item.is_empty());
    assert!(
        e.diagnostics[0].starts_with("code=PLUGIN_METADATA plugin=echo"),
        "{:?}",
        e.diagnostics
    );
    let (_, e) = service.read_enriched(&auto(), at(&removed)).await.unwrap();
    assert_eq!(e, Enrichment::default());
    let (_, e) = service.read_enriched(&auto(), at(&added)).await.unwrap();
    assert_eq!(texts(&e, 0).len(), 1, "the historical SHA keeps its plugin");
}

/// W-25, W-27: faults are diagnostics; the body is intact and no error is raised.
#[tokio::test]
async fn w25_faults_keep_the_body() {
    let echo = artifact("echo");
    let source = SourceRepo::with_files(&[("echo.sourcegraph.wasm", &echo), ("a.md", b"a\n")]);
    let config = ServiceConfig {
        plugins: wasmplugin_config(std::time::Duration::from_secs(3)),
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store("test/repo", ""), config);
    let base = service.read(&auto(), read("a.md")).await.unwrap();
    for (args, code) in [
        (json!({"panic": "boom"}), "PLUGIN_TRAP"),
        (json!({"spin": true}), "PLUGIN_TIMEOUT"),
        (json!({"grow_mib": 64}), "PLUGIN_MEMORY"),
    ] {
        let request = ReadRequest {
            plugins: Some(vec![selection("echo", args.clone())]),
            ..read("a.md")
        };
        let (item, e) = service.read_enriched(&auto(), request).await.unwrap();
        assert_eq!(item, base, "{args}");
        assert!(e.per_item.is_empty(), "{args}");
        assert!(
            e.diagnostics[0]
                .starts_with(&format!("code={code} plugin=echo root=\"\" items=read-0")),
            "{args}: {:?}",
            e.diagnostics
        );
    }
}

fn wasmplugin_config(timeout: std::time::Duration) -> service::PluginConfig {
    service::PluginConfig {
        timeout,
        memory_mib: 32,
        ..Default::default()
    }
}

/// W-40: the example plugins, as the SPEC describes them.
#[tokio::test]
async fn w40_example_plugins() {
    let related =
        serde_json::to_vec(&json!({"guides/*.md": ["refs/glossary.md", "refs/policy.md"]}))
            .unwrap();
    let evidence = serde_json::to_vec(&json!({"guides/a.md": [{"path": "refs/policy.md", "start_line": 2, "end_line": 4, "note": "approval rule"}]})).unwrap();
    let source = SourceRepo::with_files(&[
        (
            "kb/related-content.sourcegraph.wasm",
            &artifact("related-content"),
        ),
        (
            "kb/evidence-chain.sourcegraph.wasm",
            &artifact("evidence-chain"),
        ),
        ("kb/related.json", &related),
        ("kb/evidence.json", &evidence),
        ("kb/guides/a.md", b"# Guide A\nbody\n"),
        ("kb/refs/glossary.md", b"\n# Glossary\nterms\n"),
        (
            "kb/refs/policy.md",
            b"Policy first line\nrule\nrule\nrule\n",
        ),
    ]);
    let head = source.head();
    let service = service(&source, "");
    let request = ReadRequest {
        plugins: Some(vec![
            selection("related-content", json!({})),
            selection(
                "evidence-chain",
                json!({"site_url": "https://csg.example.org/"}),
            ),
        ]),
        ..read("kb/guides/a.md")
    };
    let (_, e) = service.read_enriched(&auto(), request).await.unwrap();
    assert_eq!(
        texts(&e, 0),
        [
            "related:\n- refs/glossary.md — Glossary\n- refs/policy.md — Policy first line"
                .to_string(),
            format!(
                "references:\n- https://csg.example.org/sourcegraph/repos/test/repo/-/blob/{head}/kb/refs/policy.md#L2-L4 — approval rule"
            ),
        ]
    );
    assert!(e.diagnostics.is_empty(), "{:?}", e.diagnostics);
}

/// W-39: the opt-in interop test against an externally built plugin.
#[tokio::test]
async fn external_plugin_contract() {
    let Ok(path) = std::env::var("SOURCEGRAPH_TEST_PLUGIN_WASM") else {
        eprintln!(
            "SKIPPED: set SOURCEGRAPH_TEST_PLUGIN_WASM=/abs/path.wasm to run the external plugin contract test"
        );
        return;
    };
    let wasm = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let meta = wasmplugin_name(&wasm);
    let file = format!("{meta}.sourcegraph.wasm");
    let source = SourceRepo::with_files(&[
        (&file, &wasm),
        (&format!("docs/{file}"), &wasm),
        ("a.md", b"# A\nroot doc\n"),
        ("docs/b.md", b"# B\ndocs doc\n"),
    ]);
    let service = service(&source, "");
    let call = Some(vec![selection(&meta, json!({}))]);
    let (single, e) = service
        .read_enriched(
            &auto(),
            ReadRequest {
                plugins: call.clone(),
                ..read("a.md")
            },
        )
        .await
        .unwrap();
    assert_eq!(single, service.read(&auto(), read("a.md")).await.unwrap());
    assert_item_ids(&e, &[single]);
    let mut request = batch(&["a.md", "missing.md", "docs/b.md"]);
    request.plugins = call;
    let (answer, e) = service
        .read_many_enriched(&auto(), request.clone())
        .await
        .unwrap();
    request.plugins = None;
    assert_eq!(
        answer,
        service.read_many(&auto(), request).await.unwrap(),
        "base blocks identical to plugins off"
    );
    assert_item_ids(&e, &answer.items);
}

fn assert_item_ids(e: &Enrichment, items: &[ReadItem]) {
    for (id, _) in &e.per_item {
        let index: usize = id
            .strip_prefix("read-")
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX);
        let item = items
            .get(index)
            .unwrap_or_else(|| panic!("attachment for unknown item {id}"));
        assert!(item.outcome.is_ok(), "attachment on a failed item {id}");
    }
}

/// The name in an artifact's metadata section.
fn wasmplugin_name(wasm: &[u8]) -> String {
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let Ok(wasmparser::Payload::CustomSection(reader)) = payload
            && reader.name() == "sourcegraph.plugin.v1"
        {
            let meta: serde_json::Value =
                serde_json::from_slice(reader.data()).expect("metadata JSON");
            return meta["name"].as_str().expect("metadata name").to_string();
        }
    }
    panic!("the external plugin has no sourcegraph.plugin.v1 section")
}

/// W-6: `availability(include_plugins)` shows what discovery found, broken artifacts with
/// their diagnostic, and runs nothing; R-7/W-38: enrichment never touches base statistics.
#[tokio::test]
async fn w6_availability_lists_plugins_without_running_them() {
    let source = SourceRepo::with_files(&[
        ("docs/echo.sourcegraph.wasm", &artifact("echo")),
        ("bad.sourcegraph.wasm", b"not wasm"),
        ("docs/a.md", b"a\n"),
    ]);
    let service = service(&source, "");
    let request = service::AvailabilityRequest {
        repo: "test/repo".into(),
        revision: None,
        include_plugins: true,
    };
    let answer = service.availability(&auto(), request).await.unwrap();
    let Some(service::PluginDiscovery::Found(plugins)) = answer.plugins else {
        panic!(
            "asked for plugins and discovery works: {:?}",
            answer.plugins
        );
    };
    let summary: Vec<(&str, &str, bool, bool)> = plugins
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.directory.as_str(),
                p.default_enabled,
                p.diagnostic.is_some(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [("bad", "", false, true), ("echo", "docs", true, false)]
    );
    assert!(
        plugins[0]
            .diagnostic
            .as_deref()
            .unwrap()
            .starts_with("code=PLUGIN_ARTIFACT"),
        "{plugins:?}"
    );
    assert_eq!(
        service.plugin_stats().unwrap().executions,
        0,
        "discovery never runs a plugin"
    );

    service
        .read_enriched(&auto(), read("docs/a.md"))
        .await
        .unwrap();
    assert_eq!(service.plugin_stats().unwrap().executions, 1);
    let stats = service.stats();
    assert_eq!(
        (stats.read.calls, stats.read.errors),
        (1, 0),
        "one base read counted, enrichment apart"
    );
}

/// W-25: over every file of a generated repository and many random batches, the base
/// answers with plugins on equal the answers with plugins off; attachments only ever name
/// successful items of their batch.
#[tokio::test]
async fn w25_differential_plugins_on_and_off() {
    let echo = artifact("echo");
    let mut files: Vec<(String, Vec<u8>)> = vec![
        ("echo.sourcegraph.wasm".into(), echo.clone()),
        ("docs/echo.sourcegraph.wasm".into(), echo),
    ];
    for i in 0..40 {
        let dir = ["", "docs/", "docs/deep/", "src/"][i % 4];
        let body: String = (0..(i * 7 % 23))
            .map(|n| format!("line {n} of file {i}\n"))
            .collect();
        files.push((format!("{dir}f{i}.txt"), body.into_bytes()));
    }
    files.push(("bin.dat".into(), b"\0\0".to_vec()));
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    let source = SourceRepo::with_files(&refs);
    // Small enough that the shared budget leaves some items without lines (W-14).
    let config = ServiceConfig {
        batch_budget: 600,
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store("test/repo", ""), config);
    let mut left_without_lines = 0;
    let paths: Vec<&str> = files
        .iter()
        .map(|(p, _)| p.as_str())
        .chain(["missing.txt"])
        .collect();
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    for _ in 0..60 {
        let count = 1 + next(8);
        let request = ReadManyRequest {
            repo: "test/repo".into(),
            revision: None,
            files: (0..count)
                .map(|_| {
                    let start = 1 + next(5) as u64;
                    FileRange {
                        path: paths[next(paths.len())].to_string(),
                        start_line: Some(start),
                        end_line: (next(2) == 0).then_some(start + next(10) as u64),
                    }
                })
                .collect(),
            plugins: None,
        };
        let off = service.read_many(&auto(), request.clone()).await.unwrap();
        let (on, enrichment) = service.read_many_enriched(&auto(), request).await.unwrap();
        assert_eq!(on, off);
        assert_item_ids(&enrichment, &on.items);
        // W-14: echo attaches once per item that returned lines (an empty file included);
        // failed items and items the budget left without lines are not passed.
        for (index, item) in on.items.iter().enumerate() {
            let returned = item
                .outcome
                .as_ref()
                .is_ok_and(|r| r.end_line >= r.start_line || r.total_lines == 0);
            left_without_lines += usize::from(item.outcome.is_ok() && !returned);
            assert_eq!(
                enrichment.for_item(index).count(),
                usize::from(returned),
                "item {index}: {item:?}"
            );
        }
    }
    assert!(
        left_without_lines > 0,
        "the budget left some items without lines"
    );
}

/// W-29: 16 concurrent cold reads of one commit run exactly one discovery.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn w29_concurrent_cold_reads_discover_once() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    let service = service(&source, "");
    let reads: Vec<_> = (0..16)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move { service.read_enriched(&auto(), read("a.md")).await })
        })
        .collect();
    for read in reads {
        let (_, e) = read.await.unwrap().unwrap();
        assert!(
            e.diagnostics.iter().all(|d| !d.contains("PLUGIN_TIMEOUT")),
            "{:?}",
            e.diagnostics
        );
    }
    assert_eq!(service.plugin_discoveries(), 1);
}

/// W-38, R-7: enrichment has its own figures; the base read's are the same with plugins
/// as without them.
#[tokio::test]
async fn w38_enrichment_is_timed_apart_from_the_base_read() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    let service = service(&source, "");
    service.read(&auto(), read("a.md")).await.unwrap();
    let (_, e) = service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(texts(&e, 0).len(), 1);
    let stats = service.stats();
    assert_eq!(stats.read.calls, 2, "both reads are base reads");
    assert_eq!(stats.enrichment.calls, 1, "one enrichment");
    assert_eq!(stats.enrichment.errors, 0);
    assert_eq!(stats.enrichment.buckets.last().copied(), Some(1));
    assert_eq!(service.plugin_catalog_hits(), 0, "discovered, not a hit");
    service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(service.plugin_catalog_hits(), 1);
    assert_eq!(service.stats().enrichment.calls, 2);
}

/// W-31: preparation discovers and compiles default-enabled modules without running them;
/// the first read then compiles nothing.
#[tokio::test]
async fn w31_preparation_compiles_without_running() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    let service = service(&source, "");
    assert_eq!(
        service.prepare_plugins("test/repo".into()).await.unwrap(),
        1
    );
    let prepared = service.plugin_stats().unwrap();
    assert_eq!(
        (prepared.compiles, prepared.executions),
        (1, 0),
        "compiled, never run"
    );
    let (_, e) = service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(texts(&e, 0).len(), 1);
    let after = service.plugin_stats().unwrap();
    assert_eq!(
        (after.compiles, after.executions),
        (1, 1),
        "the first read compiled nothing"
    );
    assert_eq!(service.plugin_discoveries(), 1, "the catalog was reused");
}

/// W-30: a new commit with the same artifact bytes hits the compiled-module cache (modules
/// are keyed by content digest), while its catalog is discovered anew (W-29: per commit).
#[tokio::test]
async fn w30_same_artifact_in_a_new_commit_is_not_recompiled() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    let first = source.head();
    let second = source.commit(&[("b.md", b"b\n")], "unrelated change");
    let service = service(&source, "");
    for commit in [&first, &second] {
        let request = ReadRequest {
            revision: Some(commit.to_string()),
            ..read("a.md")
        };
        let (_, e) = service.read_enriched(&auto(), request).await.unwrap();
        assert_eq!(texts(&e, 0).len(), 1);
    }
    let stats = service.plugin_stats().unwrap();
    assert_eq!((stats.compiles, stats.compile_cache_hits), (1, 1));
    assert_eq!(service.plugin_discoveries(), 2);
}

/// W-29: a catalog unused for 10 minutes is dropped by the sweep; the next read discovers
/// again.
#[tokio::test]
async fn w29_idle_catalogs_are_swept() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    let service = service(&source, "");
    service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(service.plugin_catalogs(), 1);
    let now = std::time::Instant::now();
    assert_eq!(
        service.sweep_plugin_catalogs(now + std::time::Duration::from_secs(300)),
        0
    );
    assert_eq!(
        service
            .sweep_plugin_catalogs(now + service::CATALOG_IDLE + std::time::Duration::from_secs(1)),
        1
    );
    assert_eq!(service.plugin_catalogs(), 0);
    let (_, e) = service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(texts(&e, 0).len(), 1);
    assert_eq!(service.plugin_discoveries(), 2);
}

/// W-29: a transient read failure during discovery is a diagnostic for that request only;
/// it is never cached as "no plugins", and the next request discovers again.
#[tokio::test]
async fn w29_transient_discovery_failure_is_not_cached() {
    let echo = artifact("echo");
    let source = SourceRepo::with_files(&[("echo.sourcegraph.wasm", &echo), ("a.md", b"a\n")]);
    let service = service(&source, "");
    let blob = source.git(&["rev-parse", "HEAD:echo.sourcegraph.wasm"]);
    let blob = blob.trim();
    // A small fetch leaves loose objects in the mirror: hide the artifact's one for a while.
    let loose = source
        .data_dir()
        .join("mirrors/test/repo.git/objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    let hidden = loose.with_extension("hidden");
    std::fs::rename(&loose, &hidden).expect("the artifact is a loose object in the mirror");
    let base = service.read(&auto(), read("a.md")).await.unwrap();
    let (item, failed) = service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(item, base, "the body is intact");
    assert!(failed.per_item.is_empty());
    assert_eq!(failed.diagnostics.len(), 1, "{:?}", failed.diagnostics);
    assert!(
        failed.diagnostics[0].starts_with("code=PLUGIN_ARTIFACT")
            && failed.diagnostics[0].contains("plugin discovery failed"),
        "{:?}",
        failed.diagnostics
    );
    assert!(
        !failed.diagnostics[0].contains(source.data_dir().to_str().unwrap()),
        "no host path: {:?}",
        failed.diagnostics
    );
    assert_eq!(service.plugin_catalogs(), 0, "the failure was not cached");

    std::fs::rename(&hidden, &loose).unwrap();
    let (_, healed) = service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(texts(&healed, 0).len(), 1, "{:?}", healed.diagnostics);
    assert_eq!(service.plugin_discoveries(), 2);
}

/// W-26: TIMEOUT bounds the whole enrichment of one request, not each plugin: when the
/// first directory's plugin spends the deadline, the second is not started.
#[tokio::test]
async fn w26_one_timeout_covers_every_plugin_of_a_request() {
    let echo = artifact("echo");
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &echo),
        ("kb/echo.sourcegraph.wasm", &echo),
        ("a.md", b"a\n"),
        ("kb/b.md", b"b\n"),
    ]);
    let config = ServiceConfig {
        plugins: wasmplugin_config(std::time::Duration::from_millis(300)),
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store("test/repo", ""), config);
    // Compiled beforehand, so the deadline is spent by running, whatever the machine's load.
    service.prepare_plugins("test/repo".into()).await.unwrap();
    let request = ReadManyRequest {
        plugins: Some(vec![selection("echo", json!({"spin": true}))]),
        ..batch(&["a.md", "kb/b.md"])
    };
    let (_, e) = service.read_many_enriched(&auto(), request).await.unwrap();
    assert!(e.per_item.is_empty());
    assert_eq!(e.diagnostics.len(), 2, "{:?}", e.diagnostics);
    assert!(
        e.diagnostics[0].starts_with("code=PLUGIN_TIMEOUT plugin=echo root=\"\" items=read-0"),
        "{:?}",
        e.diagnostics
    );
    assert!(
        e.diagnostics[1].starts_with("code=PLUGIN_TIMEOUT plugin=echo root=kb items=read-1")
            && e.diagnostics[1].contains("deadline passed before the plugin ran"),
        "{:?}",
        e.diagnostics
    );
    let stats = service.plugin_stats().unwrap();
    assert_eq!(stats.executions, 1, "the second plugin never started");
}

/// W-22, W-27: host-read budgets through the service. FILE_BYTES is refused from the object
/// header before the blob is read; an overrun keeps the plugin's output and adds
/// PLUGIN_READ_BUDGET.
#[tokio::test]
async fn w27_read_budgets_through_the_service() {
    let source = SourceRepo::with_files(&[
        ("reader.sourcegraph.wasm", &artifact("reader")),
        ("a.md", b"a\n"),
        ("big.txt", &[b'x'; 4096]),
    ]);
    let config = ServiceConfig {
        plugins: service::PluginConfig {
            file_bytes: 1024,
            read_calls: 2,
            ..wasmplugin_config(std::time::Duration::from_secs(5))
        },
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store("test/repo", ""), config);
    let request = ReadRequest {
        plugins: Some(vec![selection(
            "reader",
            json!({"paths": ["a.md", "big.txt", "a.md"]}),
        )]),
        ..read("a.md")
    };
    let (_, e) = service.read_enriched(&auto(), request).await.unwrap();
    let whole: Vec<&str> = e.whole.iter().map(String::as_str).collect();
    assert_eq!(
        whole,
        [
            "a.md: 2 bytes",
            "big.txt: error file is 4096 bytes, over FILE_BYTES (1024)",
            "a.md: error read budget spent: at most 2 reads per execution (READ_CALLS)",
        ]
    );
    assert_eq!(
        e.diagnostics,
        [
            "code=PLUGIN_READ_BUDGET plugin=reader root=\"\" items=read-0 message=2 host read(s) \
          refused by a budget; first: file is 4096 bytes, over FILE_BYTES (1024)"
        ]
    );
    let stats = service.plugin_stats().unwrap();
    assert_eq!((stats.host_read_bytes, stats.read_budget_hits), (2, 2));
}

/// W-22, W-24: host reads resolve below the plugin directory only: `..`, absolute paths
/// and anything outside the registered scope are refused per path (softly), with messages
/// that name no host path; files below the directory are read.
#[tokio::test]
async fn w22_host_reads_stay_inside_the_plugin_directory_and_scope() {
    let source = SourceRepo::with_files(&[
        ("docs/reader.sourcegraph.wasm", &artifact("reader")),
        ("docs/a.md", b"a\n"),
        ("docs/sub/ok.md", b"ok\n"),
        ("secret.md", b"s\n"),
    ]);
    let service = service(&source, "docs");
    let request = ReadRequest {
        plugins: Some(vec![selection(
            "reader",
            json!({"paths": ["../secret.md", "/etc/passwd", "sub/../../secret.md", "sub/ok.md", ""],
                   "batch": true}),
        )]),
        ..read("docs/a.md")
    };
    let (_, e) = service.read_enriched(&auto(), request).await.unwrap();
    assert!(e.diagnostics.is_empty(), "{:?}", e.diagnostics);
    let whole: Vec<&str> = e.whole.iter().map(String::as_str).collect();
    assert_eq!(whole.len(), 5, "{whole:?}");
    assert!(whole[0].contains("contains a `..` segment"), "{whole:?}");
    assert!(
        whole[1].contains("absolute paths are not allowed"),
        "{whole:?}"
    );
    assert!(whole[2].contains("contains a `..` segment"), "{whole:?}");
    assert_eq!(whole[4], ": error an empty path names no file");
    for refused in [0, 1, 2, 4] {
        assert!(whole[refused].contains(": error "), "{whole:?}");
        assert!(!whole[refused].contains(&*source.data_dir().to_string_lossy()));
    }
    assert_eq!(whole[3], "sub/ok.md: 3 bytes");
    let stats = service.plugin_stats().unwrap();
    assert_eq!(stats.host_read_bytes, 3, "nothing outside was read");
}

/// W-31: preparation covers every tracked branch head, not only the default branch; it
/// never runs a plugin.
#[tokio::test]
async fn w31_preparation_covers_branch_heads() {
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    source.git(&["checkout", "-q", "-b", "topic"]);
    source.commit(
        &[("kb/reader.sourcegraph.wasm", &artifact("reader"))],
        "a plugin on a branch",
    );
    source.git(&["checkout", "-q", "main"]);
    let service = service(&source, "");
    assert_eq!(
        service.prepare_plugins("test/repo".into()).await.unwrap(),
        3,
        "echo on main; echo and reader on topic"
    );
    let stats = service.plugin_stats().unwrap();
    assert_eq!((stats.compiles, stats.executions), (2, 0));
    assert_eq!(service.plugin_discoveries(), 2, "one catalog per head");
}

/// W-31: background preparation stays within the cache caps. A second round over heads
/// that did not move discovers nothing, and preparing a new head never evicts a catalog
/// that reads use: with the cache full of catalogs that reads asked for, the new head's
/// catalog is not kept, and every earlier commit still reads from the cache.
#[tokio::test]
async fn w31_preparation_prepares_new_heads_and_never_evicts_what_reads_use() {
    /// The catalog cache's entry cap (W-29).
    const CATALOGS: usize = 64;
    let source = SourceRepo::with_files(&[
        ("echo.sourcegraph.wasm", &artifact("echo")),
        ("a.md", b"a\n"),
    ]);
    let service = service(&source, "");
    assert_eq!(
        service.prepare_plugins("test/repo".into()).await.unwrap(),
        1
    );
    assert_eq!(service.plugin_discoveries(), 1);
    assert_eq!(
        service.prepare_plugins("test/repo".into()).await.unwrap(),
        0,
        "the head did not move: nothing to prepare"
    );
    assert_eq!(
        service.plugin_discoveries(),
        1,
        "and nothing discovered again"
    );

    // Reads at as many commits as the cache holds: every catalog is one a read used.
    let mut commits = Vec::new();
    for n in 0..CATALOGS {
        commits.push(source.commit(&[("a.md", format!("{n}\n").as_bytes())], "n"));
    }
    service.sync("test/repo".into()).await.unwrap();
    let at = |commit: &String| ReadRequest {
        revision: Some(commit.clone()),
        ..read("a.md")
    };
    for commit in &commits {
        let (_, e) = service.read_enriched(&auto(), at(commit)).await.unwrap();
        assert_eq!(texts(&e, 0).len(), 1);
    }
    let discovered = service.plugin_discoveries();
    assert_eq!(service.plugin_catalogs(), CATALOGS);

    // A new head: preparation discovers it but keeps nothing a read used out of the cache.
    source.commit(&[("b.md", b"b\n")], "new head");
    service.sync("test/repo".into()).await.unwrap();
    service.prepare_plugins("test/repo".into()).await.unwrap();
    assert_eq!(service.plugin_discoveries(), discovered + 1);
    let hits = service.plugin_catalog_hits();
    for commit in &commits {
        service.read_enriched(&auto(), at(commit)).await.unwrap();
    }
    assert_eq!(
        service.plugin_discoveries(),
        discovered + 1,
        "every catalog the reads used is still cached"
    );
    assert_eq!(service.plugin_catalog_hits(), hits + CATALOGS as u64);
}

/// W-5, W-29 (issue 28, point 4): artifacts whose paths Git allows but a read cannot name —
/// a backslash, a control character, bytes that are not UTF-8 — are one PLUGIN_ARTIFACT
/// diagnostic each; the commit's other plugins run, and the catalog is cached like any other
/// (before, the whole discovery failed and every read discovered again).
#[tokio::test]
async fn w5_w29_an_artifact_with_an_odd_path_costs_only_itself() {
    let echo = artifact("echo");
    let source = SourceRepo::with_files(&[("echo.sourcegraph.wasm", &echo), ("a.md", b"a\n")]);
    let blob = testgit::git_with_input(
        source.path(),
        &["hash-object", "-w", "--stdin"],
        Some(&echo),
    );
    let mut index = Vec::new();
    for name in [
        &b"back\\slash.sourcegraph.wasm"[..],
        b"bell\x07.sourcegraph.wasm",
        b"caf\xe9.sourcegraph.wasm",
    ] {
        index.extend_from_slice(format!("100644 {blob}\tdir/").as_bytes());
        index.extend_from_slice(name);
        index.push(b'\n');
    }
    testgit::git_with_input(
        source.path(),
        &["update-index", "--index-info"],
        Some(&index),
    );
    source.commit_index("artifacts with odd names");
    let service = service(&source, "");

    let (_, e) = service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(texts(&e, 0).len(), 1, "the good plugin ran: {e:?}");
    let answer = service
        .availability(
            &auto(),
            service::AvailabilityRequest {
                repo: "test/repo".into(),
                revision: None,
                include_plugins: true,
            },
        )
        .await
        .unwrap();
    let Some(service::PluginDiscovery::Found(found)) = answer.plugins else {
        panic!("discovery failed: {answer:?}");
    };
    let broken: Vec<&String> = found.iter().filter_map(|p| p.diagnostic.as_ref()).collect();
    assert_eq!(broken.len(), 3, "{found:?}");
    for diagnostic in &broken {
        assert!(
            diagnostic.starts_with("code=PLUGIN_ARTIFACT"),
            "{diagnostic}"
        );
        assert!(
            !diagnostic.chars().any(|c| c.is_control()),
            "control characters escaped: {diagnostic:?}"
        );
    }
    assert!(
        found
            .iter()
            .any(|p| p.name == "echo" && p.diagnostic.is_none())
    );
    service.read_enriched(&auto(), read("a.md")).await.unwrap();
    assert_eq!(service.plugin_discoveries(), 1, "the catalog was cached");
}
