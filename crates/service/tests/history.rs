//! `log` in the service (issue 12): pages by cursor that walk one history, the same access
//! answers as `read`, and clear errors for bad arguments.

use service::{CallContext, Caller, ErrorKind, LogRequest, Service, ServiceConfig};
use testgit::SourceRepo;

const REPO: &str = "acme/hist";

fn repo() -> SourceRepo {
    let repo = SourceRepo::with_files(&[("a.md", b"1\n")]);
    for n in 2..=5 {
        repo.commit(
            &[("a.md", format!("{n}\n").as_bytes())],
            &format!("change {n}"),
        );
    }
    repo.commit(&[("b.md", b"b\n")], "add b");
    repo
}

fn request(limit: usize, cursor: Option<String>) -> LogRequest {
    LogRequest {
        repo: REPO.into(),
        limit: Some(limit),
        cursor,
        ..LogRequest::default()
    }
}

#[tokio::test]
async fn log_pages_walk_one_history_and_match_git() {
    let source = repo();
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let ctx = CallContext::default();
    let mut cursor = None;
    let mut seen = Vec::new();
    loop {
        let page = service.log(&ctx, request(2, cursor)).await.unwrap();
        assert_eq!(
            page.commit,
            source.head(),
            "every page starts from the same commit"
        );
        seen.extend(page.commits.iter().map(|c| c.commit.clone()));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let git: Vec<String> = source
        .git(&["log", "--format=%H"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(seen, git);

    let only_a = LogRequest {
        path: Some("a.md".into()),
        ..request(50, None)
    };
    let page = service.log(&ctx, only_a).await.unwrap();
    assert_eq!(page.path, "a.md");
    let subjects: Vec<&str> = page.commits.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects.len(), 5, "{subjects:?}");
    assert_eq!(subjects[0], "change 5");
    assert!(page.commits[0].date.ends_with('Z'), "{:?}", page.commits[0]);
}

#[tokio::test]
async fn log_refuses_what_read_refuses_and_bad_arguments() {
    let source = repo();
    let store = source.store(REPO, "");
    store
        .set_private(&gitstore::RepoName::parse(REPO).unwrap(), true)
        .unwrap();
    let service = Service::new(store, ServiceConfig::default());
    let anonymous = CallContext {
        caller: Caller::Anonymous,
        ..CallContext::default()
    };
    // a private repository reads as an unknown one.
    let hidden = service.log(&anonymous, request(5, None)).await.unwrap_err();
    let unknown = service
        .log(
            &anonymous,
            LogRequest {
                repo: "acme/nothing".into(),
                ..request(5, None)
            },
        )
        .await
        .unwrap_err();
    assert_eq!(hidden.kind, ErrorKind::NotFound);
    assert_eq!(
        hidden.message.replace(REPO, "X"),
        unknown.message.replace("acme/nothing", "X")
    );

    let ctx = CallContext::default();
    for (bad, expect) in [
        (request(0, None), "limit must be between 1 and 500"),
        (request(501, None), "limit must be between 1 and 500"),
        (request(5, Some("nonsense".into())), "invalid cursor"),
    ] {
        let error = service.log(&ctx, bad).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidArgument);
        assert!(error.message.contains(expect), "{}", error.message);
    }
    // A cursor of one log does not continue another.
    let first = service.log(&ctx, request(1, None)).await.unwrap();
    let older = first.commits[0].parents[0].clone();
    let mixed = LogRequest {
        revision: Some(older),
        ..request(1, first.next_cursor)
    };
    let error = service.log(&ctx, mixed).await.unwrap_err();
    assert!(
        error.message.contains("another commit"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn commit_shows_message_and_changed_files() {
    let source = repo();
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let ctx = CallContext::default();
    let head = service
        .commit(&ctx, REPO.into(), "main".into())
        .await
        .unwrap();
    assert_eq!(head.entry.commit, source.head());
    assert_eq!(head.entry.subject, "add b");
    assert_eq!(head.message, "add b\n");
    assert!(!head.message_truncated);
    assert_eq!(head.total_files, 1);
    let file = &head.files[0];
    assert_eq!(
        (file.path.as_str(), file.status, file.added, file.removed),
        ("b.md", "added", Some(1), Some(0))
    );
    let parent = head.entry.parents[0].clone();
    let edit = service.commit(&ctx, REPO.into(), parent).await.unwrap();
    assert_eq!(edit.files[0].status, "modified");
    assert_eq!(
        (edit.files[0].added, edit.files[0].removed),
        (Some(1), Some(1))
    );
    let missing = service
        .commit(&ctx, REPO.into(), "0000000".into())
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::NotFound, "{}", missing.message);
}

#[tokio::test]
async fn diff_pages_by_file_under_the_read_budget() {
    let source = repo();
    let base = source.head();
    source.commit(
        &[("a.md", b"6\n"), ("c.md", b"c\n"), ("d.md", b"d\n")],
        "three files",
    );
    let config = ServiceConfig {
        read_budget: 200,
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store(REPO, ""), config);
    let ctx = CallContext::default();
    let request = |cursor| service::DiffRequest {
        repo: REPO.into(),
        base: base.clone(),
        head: "main".into(),
        path: None,
        cursor,
    };
    let mut cursor = None;
    let mut files = Vec::new();
    loop {
        let page = service.diff(&ctx, request(cursor)).await.unwrap();
        assert_eq!((page.base.as_str(), page.total_files), (base.as_str(), 3));
        assert!(page.files.iter().map(|f| f.text.len()).sum::<usize>() <= 200);
        files.extend(page.files.into_iter().map(|f| (f.path, f.status)));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(
        files,
        [
            ("a.md".to_owned(), "modified"),
            ("c.md".to_owned(), "added"),
            ("d.md".to_owned(), "added")
        ]
    );
    let stale = service
        .diff(&ctx, request(Some(format!("{base}.{base}.1"))))
        .await
        .unwrap_err();
    assert!(
        stale.message.contains("invalid cursor"),
        "{}",
        stale.message
    );
}

#[tokio::test]
async fn blame_names_the_last_change_of_each_line() {
    let source = repo();
    source.commit(&[("a.md", b"6\nsecond\n")], "second line");
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let ctx = CallContext::default();
    let request = |start, end| service::BlameRequest {
        repo: REPO.into(),
        path: "a.md".into(),
        start_line: start,
        end_line: end,
        ..service::BlameRequest::default()
    };
    let blamed = service.blame(&ctx, request(None, None)).await.unwrap();
    assert_eq!(
        (blamed.start_line, blamed.end_line, blamed.total_lines),
        (1, 2, 2)
    );
    let subjects: Vec<(u64, u64, &str)> = blamed
        .ranges
        .iter()
        .map(|r| (r.start_line, r.end_line, r.commit.subject.as_str()))
        .collect();
    assert_eq!(subjects, [(1, 2, "second line")]);
    let first = service
        .blame(&ctx, request(Some(1), Some(1)))
        .await
        .unwrap();
    assert_eq!(first.next_start_line, Some(2));
    let long: String = (1..=2_500).map(|n| format!("{n}\n")).collect();
    source.commit(&[("long.md", long.as_bytes())], "long");
    service.sync(REPO.into()).await.unwrap();
    let capped = service
        .blame(
            &ctx,
            service::BlameRequest {
                path: "long.md".into(),
                end_line: Some(2_500),
                ..request(Some(1), None)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (capped.end_line, capped.next_start_line),
        (service::MAX_BLAME_LINES, Some(service::MAX_BLAME_LINES + 1))
    );
    let past = service
        .blame(&ctx, request(Some(9), None))
        .await
        .unwrap_err();
    assert!(past.message.contains("past the end"), "{}", past.message);
}
