//! Server plugins in the service (P-7, P-21): a derived-state `on_source_file` shapes the
//! search index; editing it marks the index stale, incremental builds keep the old sources,
//! and an explicit rebuild publishes the new ones while the old generation answered until then.

use pyplugin::{HostConfig, PluginHost};
use service::{CallContext, PrepareAction, PrepareRequest, SearchRequest, Service, ServiceConfig};

const REPO: &str = "test/repo";

fn hook(word: &str) -> String {
    format!(
        "def on_source_file(file):\n    if file['path'].endswith('.min.js'):\n        return {{'skip': True}}\n    return {{'text': file['text'].replace('alpha', '{word}')}}\n"
    )
}

/// A plugins directory with one file, a repository with `files`, and a service over both.
async fn start(
    name: &str,
    plugin: &str,
    files: &[(&str, &[u8])],
) -> (tempfile::TempDir, testgit::SourceRepo, Service) {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(plugins.path().join(name), plugin).unwrap();
    let source = testgit::SourceRepo::with_files(files);
    let config = HostConfig::new(plugins.path().to_path_buf());
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .unwrap();
    let service =
        Service::with_server_plugins(source.store(REPO, ""), ServiceConfig::default(), host);
    (plugins, source, service)
}

async fn paths(service: &Service, query: &str) -> Vec<String> {
    paths_in(service, query, None).await
}

/// `path:line` of every hit of `query`, with the `lang` filter `lang`.
async fn paths_in(service: &Service, query: &str, lang: Option<&str>) -> Vec<String> {
    let answer = service
        .search(
            &CallContext::default(),
            SearchRequest {
                query: query.into(),
                repo: Some(REPO.into()),
                lang: lang.map(str::to_owned),
                ..SearchRequest::default()
            },
        )
        .await
        .unwrap();
    answer
        .repos
        .iter()
        .flat_map(|r| r.hits.iter().map(|h| format!("{}:{:?}", h.path, h.line)))
        .collect()
}

#[tokio::test]
async fn p7_p21_derived_state_edit_marks_stale_and_rebuild_publishes() {
    let (plugins, _source, service) = start(
        "shape.py",
        &hook("omega"),
        &[
            ("docs/a.md", b"one alpha line\n"),
            ("app.min.js", b"var alpha=1;\n"),
        ],
    )
    .await;
    let built = service.index(REPO.into(), |_| {}).await.unwrap();
    assert_eq!((built.transformed, built.skipped), (1, 1));
    assert_eq!(paths(&service, "omega").await, ["docs/a.md:Some(1)"]);
    assert!(
        paths(&service, "alpha").await.is_empty(),
        "indexed text replaced, file skipped"
    );
    assert_eq!(service.server_plugins_status().index, "current");
    // `read` returns the file, not the indexed text (P-21).
    let read = service
        .read(
            &CallContext::default(),
            service::ReadRequest {
                repo: REPO.into(),
                revision: None,
                path: "docs/a.md".into(),
                start_line: None,
                end_line: None,
                plugins: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(read.outcome.unwrap().content, "one alpha line\n");

    std::fs::write(plugins.path().join("shape.py"), hook("zeta")).unwrap();
    service
        .reload_server_plugins(&service::CallContext::default())
        .await
        .unwrap();
    let status = service.server_plugins_status();
    assert_eq!(status.index, "index stale: rebuild pending");
    assert_eq!(status.index_stale_repos, [REPO]);
    // Incremental indexing keeps the sources the published generation was built with.
    let again = service.index(REPO.into(), |_| {}).await.unwrap();
    assert!(
        again.skipped_same,
        "no mixing: the old sources still shape the index"
    );
    assert_eq!(paths(&service, "omega").await, ["docs/a.md:Some(1)"]);

    let request = PrepareRequest {
        repo: REPO.into(),
        action: PrepareAction::Reindex,
        revision: None,
    };
    service
        .prepare(&CallContext::default(), request, |_| {})
        .await
        .unwrap();
    assert_eq!(paths(&service, "zeta").await, ["docs/a.md:Some(1)"]);
    assert!(paths(&service, "omega").await.is_empty());
    assert_eq!(service.server_plugins_status().index, "current");
}

#[tokio::test]
async fn p7_a_failing_derived_state_hook_indexes_the_file_as_it_is() {
    let (_plugins, _source, service) = start(
        "bad.py",
        "def on_source_file(file):\n    raise ValueError('no')\n",
        &[("docs/a.md", b"one alpha line\n")],
    )
    .await;
    let built = service.index(REPO.into(), |_| {}).await.unwrap();
    assert_eq!(built.transform_failures, 1);
    assert!(
        built.failure_messages[0].contains("ValueError"),
        "{:?}",
        built.failure_messages
    );
    assert_eq!(paths(&service, "alpha").await, ["docs/a.md:Some(1)"]);
}

/// P-21: `on_source_file` may set the language a file is indexed under (the `lang` filter
/// sees it), or take it away with None, leaving the text as it is.
#[tokio::test]
async fn p21_on_source_file_sets_the_indexed_language() {
    let plugin = "def on_source_file(file):\n    if file['path'] == 'build/gen.txt':\n        return {'language': 'py'}\n    if file['language'] == 'markdown':\n        return {'language': None}\n    return None\n";
    let (_plugins, _source, service) = start(
        "langs.py",
        plugin,
        &[
            ("build/gen.txt", b"def marker(): pass\n"),
            ("docs/a.md", b"a marker line\n"),
        ],
    )
    .await;
    let built = service.index(REPO.into(), |_| {}).await.unwrap();
    assert_eq!(built.transformed, 2);
    let in_lang = |lang| paths_in(&service, "marker", Some(lang));
    assert_eq!(in_lang("python").await, ["build/gen.txt:Some(1)"]);
    assert!(in_lang("text").await.is_empty());
    assert!(in_lang("markdown").await.is_empty());
    assert_eq!(
        paths(&service, "marker").await,
        ["build/gen.txt:Some(1)", "docs/a.md:Some(1)"]
    );
}

/// P-12 (issue 29, point 7): one call sees one epoch. The epoch is taken when the call first
/// needs it; a reload between the call's hooks (its arguments rewrite, then its read hook)
/// does not change what the rest of the call runs: the note comes from the epoch that
/// rewrote the arguments. A new call runs on the new epoch.
#[tokio::test]
async fn p12_one_call_sees_one_epoch_across_a_reload() {
    let version = |v: &str| {
        format!(
            "def on_tool_call(call):\n    return {{'arguments': dict(call['arguments'], seen='{v}')}}\n\ndef on_read_result(result):\n    return {{'notes': result['notes'] + ['{v}']}}\n"
        )
    };
    let (plugins, _source, service) = start("v.py", &version("v1"), &[("a.md", b"a\n")]).await;
    let read = service::ReadRequest {
        repo: REPO.into(),
        revision: None,
        path: "a.md".into(),
        start_line: None,
        end_line: None,
        plugins: None,
    };
    let ctx = CallContext::default();
    let (arguments, rewrite) = service
        .rewrite_tool_call(&ctx, "read", serde_json::Map::new())
        .await;
    assert_eq!(arguments["seen"], "v1");
    assert!(rewrite.is_some());

    std::fs::write(plugins.path().join("v.py"), version("v2")).unwrap();
    let reloaded = service
        .reload_server_plugins(&CallContext {
            caller: service::Caller::Local,
            ..CallContext::default()
        })
        .await
        .unwrap();
    assert_eq!(reloaded.host.epoch, 2);

    let (_, enrichment) = service.read_enriched(&ctx, read.clone()).await.unwrap();
    assert_eq!(
        enrichment.operator_notes,
        ["v1"],
        "the call's read hook ran on the epoch its rewrite ran on"
    );
    let (_, fresh) = service
        .read_enriched(&CallContext::default(), read)
        .await
        .unwrap();
    assert_eq!(
        fresh.operator_notes,
        ["v2"],
        "a new call runs on the new epoch"
    );
}

/// A service over `source`'s data directory (a second process's view of it, as after a
/// restart), with the server plugins of `plugins` (`None`: server plugins off).
async fn restart(source: &testgit::SourceRepo, plugins: Option<&std::path::Path>) -> Service {
    let host = match plugins {
        Some(dir) => {
            let config = HostConfig::new(dir.to_path_buf());
            tokio::task::spawn_blocking(move || PluginHost::start(config))
                .await
                .unwrap()
        }
        None => PluginHost::disabled(),
    };
    Service::with_server_plugins(source.store(REPO, ""), ServiceConfig::default(), host)
}

/// P-7 (issue 29, point 10): the first `on_source_file` ever added, while the server was
/// down, makes the stored index stale at the next start, and the first build rebuilds it
/// with the hook (before, only a change to an existing hook's sources was seen: the index
/// stayed untransformed and "current").
#[tokio::test]
async fn p7_a_hook_added_while_down_rebuilds_at_start() {
    let source = testgit::SourceRepo::with_files(&[("docs/a.md", b"one alpha line\n")]);
    let before = restart(&source, None).await;
    before.index(REPO.into(), |_| {}).await.unwrap();
    assert_eq!(paths(&before, "alpha").await, ["docs/a.md:Some(1)"]);
    drop(before);

    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(plugins.path().join("shape.py"), hook("omega")).unwrap();
    let after = restart(&source, Some(plugins.path())).await;
    assert_eq!(after.server_plugins_status().index_stale_repos, [REPO]);
    let built = after.index(REPO.into(), |_| {}).await.unwrap();
    assert!(!built.skipped_same, "rebuilt with the new hook");
    assert_eq!(built.transformed, 1);
    assert_eq!(paths(&after, "omega").await, ["docs/a.md:Some(1)"]);
    assert_eq!(after.server_plugins_status().index, "current");
}

/// P-7 (issue 29, point 10): a process with server plugins off never rebuilds or
/// republishes an index built with hooks: its build says why and the published generation
/// keeps answering, transformed, for it and for the next process with the plugins.
#[tokio::test]
async fn p7_a_process_without_plugins_never_republishes_a_hooked_index() {
    let (plugins, source, with) = start(
        "shape.py",
        &hook("omega"),
        &[("docs/a.md", b"one alpha line\n")],
    )
    .await;
    with.index(REPO.into(), |_| {}).await.unwrap();
    drop(with);

    let without = restart(&source, None).await;
    let refused = without.index(REPO.into(), |_| {}).await.unwrap_err();
    assert!(
        refused.message.contains("built with server plugins"),
        "{refused}"
    );
    let reindex = PrepareRequest {
        repo: REPO.into(),
        action: PrepareAction::Reindex,
        revision: None,
    };
    assert!(
        without
            .prepare(&CallContext::default(), reindex, |_| {})
            .await
            .is_err(),
        "nor an explicit rebuild"
    );
    assert_eq!(paths(&without, "omega").await, ["docs/a.md:Some(1)"]);
    drop(without);

    let again = restart(&source, Some(plugins.path())).await;
    let built = again.index(REPO.into(), |_| {}).await.unwrap();
    assert!(built.skipped_same, "still the generation the hooks built");
    assert_eq!(paths(&again, "omega").await, ["docs/a.md:Some(1)"]);
}

/// P-7 (issue 29, point 11): each plugin's `on_source_file` is isolated. One plugin failing
/// on a file drops only its own transform of that file: the next plugin of the pipeline
/// still shapes it, and the failure is counted per plugin file in the build's report and in
/// `plugin_status`.
#[tokio::test]
async fn p7_one_failing_plugin_drops_only_its_own_transform() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(
        plugins.path().join("a_fails.py"),
        "def on_source_file(file):\n    if file['path'] == 'docs/b.md':\n        raise ValueError('no')\n    return {'text': file['text'] + 'marked\\n'}\n",
    )
    .unwrap();
    std::fs::write(plugins.path().join("z_shape.py"), hook("omega")).unwrap();
    let source = testgit::SourceRepo::with_files(&[
        ("docs/a.md", b"one alpha line\n"),
        ("docs/b.md", b"two alpha line\n"),
    ]);
    let service = restart(&source, Some(plugins.path())).await;
    let built = service.index(REPO.into(), |_| {}).await.unwrap();
    assert_eq!(built.transform_failures, 1, "{:?}", built.failure_messages);
    assert!(
        built.failure_messages[0].contains("docs/b.md")
            && built.failure_messages[0].contains("ValueError"),
        "{:?}",
        built.failure_messages
    );
    assert_eq!(
        paths(&service, "omega").await,
        ["docs/a.md:Some(1)", "docs/b.md:Some(1)"],
        "z_shape.py still shaped the file a_fails.py failed on"
    );
    assert!(paths(&service, "alpha").await.is_empty());
    // Counted per plugin file: in the build's report and in plugin_status.
    assert_eq!(
        built.transform_failures_by_step,
        [("a_fails.py".to_owned(), 1)].into(),
    );
    let report = service::IndexReport::from(built);
    assert_eq!(
        report.plugin_failures,
        [("a_fails.py".to_owned(), 1)].into()
    );
    assert_eq!(report.transformed, 2);
    let failures = service.server_plugins().status().hook_failures;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(
        (
            failures[0].file.as_str(),
            failures[0].hook.as_str(),
            failures[0].count
        ),
        ("a_fails.py", "on_source_file", 1)
    );
}
