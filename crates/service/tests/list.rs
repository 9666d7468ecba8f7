//! `list` (S-7) over a real repository: bounded work on a big tree.

use service::{CallContext, ListRequest, Service, ServiceConfig};
use testgit::SourceRepo;

fn list(depth: u32) -> ListRequest {
    ListRequest {
        repo: "acme/tree".into(),
        revision: None,
        path: None,
        depth: Some(depth),
    }
}

/// S-7: a listing stops collecting at `max_list_entries`, level by level, and says it is
/// truncated: the top level is shown whole rather than the first directory's subtree.
#[tokio::test]
async fn s7_list_stops_at_its_limit_level_by_level() {
    let source = SourceRepo::with_files(&[
        ("a/1.md", b"1\n"),
        ("a/2.md", b"2\n"),
        ("a/3.md", b"3\n"),
        ("b.md", b"b\n"),
        ("c.md", b"c\n"),
    ]);
    let config = ServiceConfig {
        max_list_entries: 3,
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store("acme/tree", ""), config);
    let paths = |answer: &service::ListAnswer| {
        answer
            .entries
            .iter()
            .map(|e| e.path.clone())
            .collect::<Vec<_>>()
    };

    let deep = service
        .list(&CallContext::default(), list(2))
        .await
        .unwrap();
    assert!(deep.truncated);
    assert_eq!(paths(&deep), ["a", "b.md", "c.md"]);

    // Exactly the limit: complete, not truncated.
    let top = service
        .list(&CallContext::default(), list(1))
        .await
        .unwrap();
    assert!(!top.truncated);
    assert_eq!(paths(&top), ["a", "b.md", "c.md"]);

    let unbounded = Service::new(
        gitstore::GitStore::open(
            gitstore::StoreConfig {
                data_dir: source.data_dir(),
                retention: gitstore::DEFAULT_RETENTION,
            },
            std::sync::Arc::new(gitstore::SystemClock),
        )
        .unwrap(),
        ServiceConfig::default(),
    );
    let all = unbounded
        .list(&CallContext::default(), list(2))
        .await
        .unwrap();
    assert!(!all.truncated);
    assert_eq!(
        paths(&all),
        ["a", "a/1.md", "a/2.md", "a/3.md", "b.md", "c.md"]
    );
}
