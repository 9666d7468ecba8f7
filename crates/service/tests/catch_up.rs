//! Catch-up rounds in the embedded default (S-3): what another process of the data directory
//! registers is indexed within seconds. A test binary of its own: `maintenance.rs` stops every
//! `git` of its process (`gitstore::stop_git`), which would cut this test's syncs.
#![cfg(unix)]

mod common;

use common::register;
use service::{CallContext, SearchRequest, Service, ServiceConfig};
use std::time::{Duration, Instant};
use testgit::SourceRepo;

/// The embedded default: a repository another process registers and fetches on the same data
/// directory (`csg repo add` beside a running `csg serve`) is indexed by the server's next
/// catch-up round (seconds), not at its next full round (an hour here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_repository_another_process_adds_is_searchable_within_seconds() {
    let first = SourceRepo::with_files(&[("a.md", b"alpha\n")]);
    let service = Service::new(first.store("acme/first", ""), ServiceConfig::default());
    let (stop, signal) = tokio::sync::watch::channel(false);
    let maintenance =
        service::spawn_maintenance(service.clone(), Duration::from_secs(3600), signal);

    // Another process: a store of its own on the same data directory.
    let other = gitstore::GitStore::open(
        gitstore::StoreConfig {
            data_dir: first.data_dir(),
            retention: gitstore::DEFAULT_RETENTION,
        },
        std::sync::Arc::new(gitstore::SystemClock),
    )
    .expect("a second store on the data directory");
    let later = SourceRepo::with_files(&[("b.md", b"a needle added later\n")]);
    register(&other, "acme/later", &later);

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = service
            .search(
                &CallContext::default(),
                SearchRequest {
                    query: "needle added later".into(),
                    ..SearchRequest::default()
                },
            )
            .await
            .unwrap();
        if found.repos.iter().any(|r| r.repo == "acme/later") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "acme/later was not indexed within 30 s: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop.send(true);
    maintenance.await.unwrap();
}
