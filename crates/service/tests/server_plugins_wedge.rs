//! P-7, P-23 (issue 29, point 9): a wedge during an index build never publishes a generation
//! built without the hooks it should have run. A test binary of its own: the wedged
//! interpreter thread stays busy after the test.

use pyplugin::{HostConfig, PluginHost, State};
use service::{CallContext, PrepareAction, PrepareRequest, SearchRequest, Service, ServiceConfig};
use std::time::Duration;

const REPO: &str = "test/repo";

fn hook(word: &str, stall_on: &str) -> String {
    // `time.sleep` in C ignores the watchdog's interrupt: the host wedges on that file.
    format!(
        "import time\n\ndef on_source_file(file):\n    if file['path'] == '{stall_on}':\n        time.sleep(600)\n    return {{'text': file['text'].replace('alpha', '{word}')}}\n"
    )
}

async fn paths(service: &Service, query: &str) -> Vec<String> {
    let answer = service
        .search(
            &CallContext::default(),
            SearchRequest {
                query: query.into(),
                repo: Some(REPO.into()),
                ..SearchRequest::default()
            },
        )
        .await
        .unwrap();
    let mut found: Vec<String> = answer
        .repos
        .iter()
        .flat_map(|r| r.hits.iter().map(|h| h.path.clone()))
        .collect();
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p7_p23_a_wedge_mid_build_fails_the_build_and_the_published_index_answers() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(plugins.path().join("shape.py"), hook("omega", "none")).unwrap();
    let source = testgit::SourceRepo::with_files(&[
        ("a.md", b"one alpha line\n"),
        ("b.md", b"two alpha line\n"),
        ("c.md", b"three alpha line\n"),
    ]);
    let mut config = HostConfig::new(plugins.path().to_path_buf());
    config.hook_timeout = Duration::from_millis(200);
    config.wedge_grace = Duration::from_millis(300);
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .unwrap();
    let service =
        Service::with_server_plugins(source.store(REPO, ""), ServiceConfig::default(), host);
    let built = service.index(REPO.into(), |_| {}).await.unwrap();
    assert_eq!(built.transformed, 3);
    assert_eq!(paths(&service, "omega").await, ["a.md", "b.md", "c.md"]);

    std::fs::write(plugins.path().join("shape.py"), hook("zeta", "b.md")).unwrap();
    service
        .reload_server_plugins(&CallContext::default())
        .await
        .unwrap();
    let reindex = PrepareRequest {
        repo: REPO.into(),
        action: PrepareAction::Reindex,
        revision: None,
    };
    let failed = tokio::time::timeout(
        Duration::from_secs(60),
        service.prepare(&CallContext::default(), reindex, |_| {}),
    )
    .await
    .expect("the build ends though the host wedged")
    .unwrap_err();
    assert!(failed.message.contains("wedged"), "{failed}");
    assert!(matches!(service.server_plugins().state(), State::Wedged(_)));
    assert_eq!(
        paths(&service, "omega").await,
        ["a.md", "b.md", "c.md"],
        "the generation the hooks built keeps answering"
    );
    assert!(
        paths(&service, "alpha").await.is_empty(),
        "nothing untransformed was published"
    );
    // Nor by the next build of this process, which runs without the wedged plugins.
    assert!(service.index(REPO.into(), |_| {}).await.is_err());
    assert_eq!(paths(&service, "omega").await, ["a.md", "b.md", "c.md"]);
}
