//! Background maintenance over real repositories (G-3, S-3): repositories are maintained
//! independently, so one whose fetch hangs does not hold up the others.
#![cfg(unix)]

mod common;

use common::register;
use service::{CallContext, SearchRequest, Service, ServiceConfig};
use std::time::{Duration, Instant};
use testgit::{HungFetches, SourceRepo};

/// G-3, S-3: two repositories; the fetch of the first (in maintenance order) hangs. The other
/// still syncs its new commit and is indexed at it, and the hung one keeps serving its last
/// good state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g3_hung_fetch_does_not_stall_other_repositories() {
    let hung_source = SourceRepo::with_files(&[("a.md", b"alpha\n")]);
    let live_source = SourceRepo::with_files(&[("b.md", b"beta\n")]);
    let store = hung_source.store("acme/a-hung", "");
    register(&store, "acme/b-live", &live_source);
    let service = Service::new(store, ServiceConfig::default());

    let hung = HungFetches::new(hung_source.path());
    let new_head = live_source.commit(&[("b.md", b"beta\nfreshly committed\n")], "more");
    let (stop, signal) = tokio::sync::watch::channel(false);
    let maintenance =
        service::spawn_maintenance(service.clone(), Duration::from_millis(50), signal);

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let repos = service.discovery(&CallContext::default()).await.unwrap();
        let b = repos.iter().find(|r| r.name == "acme/b-live").unwrap();
        if b.head.as_deref() == Some(new_head.as_str()) && b.indexed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "acme/b-live was not synced and indexed while acme/a-hung's fetch hung: {repos:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let found = service
        .search(
            &CallContext::default(),
            SearchRequest {
                query: "freshly committed".into(),
                ..SearchRequest::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(found.repos.len(), 1, "{found:?}");
    assert_eq!(found.repos[0].commit, new_head);
    assert_eq!(read_a(&service, "acme/a-hung").await, "alpha\n");

    // The hung fetch would otherwise hold its blocking thread (and this test) for the
    // fetch timeout: stop it the way a shutdown does.
    let _ = stop.send(true);
    gitstore::stop_git();
    maintenance.await.unwrap();
    drop(hung);
}

/// G-3: a repository whose remote has gone is fetched with backoff, not every round: over
/// 30 rounds of 50 ms it is tried a handful of times. Its last good state keeps serving and
/// `discovery` shows the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g3_failing_sync_backs_off() {
    let source = SourceRepo::with_files(&[("a.md", b"alpha\n")]);
    let service = Service::new(source.store("acme/gone", ""), ServiceConfig::default());
    let moved = source.path().with_extension("moved");
    std::fs::rename(source.path(), &moved).unwrap();
    let (stop, signal) = tokio::sync::watch::channel(false);
    let maintenance =
        service::spawn_maintenance(service.clone(), Duration::from_millis(50), signal);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _ = stop.send(true);
    maintenance.await.unwrap();
    std::fs::rename(&moved, source.path()).unwrap();

    let sync = service.stats().sync;
    assert_eq!(sync.calls, sync.errors, "every attempt failed");
    // Without backoff: ~29 attempts (every round but the first). With it: rounds 1, 3, 7,
    // 15 and maybe 31 (about 50, 150, 350, 750 and 1550 ms in).
    assert!(
        (2..=8).contains(&sync.errors),
        "{} attempts in 30 rounds",
        sync.errors
    );
    let repos = service.discovery(&CallContext::default()).await.unwrap();
    assert!(repos[0].last_sync_error.is_some(), "{repos:?}");
    assert_eq!(
        read_a(&service, "acme/gone").await,
        "alpha\n",
        "the last good state"
    );
}

/// The text of `a.md` in `repo`, as the local caller reads it.
async fn read_a(service: &Service, repo: &str) -> String {
    let read = service
        .read(
            &CallContext::default(),
            service::ReadRequest {
                repo: repo.into(),
                revision: None,
                path: "a.md".into(),
                start_line: None,
                end_line: None,
                plugins: None,
            },
        )
        .await
        .unwrap();
    read.outcome.unwrap().content
}
