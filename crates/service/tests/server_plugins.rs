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
