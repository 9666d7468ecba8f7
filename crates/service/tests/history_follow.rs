//! Issue 34 points 3 and 4 in the service: `log` with `follow` (a file's history across a
//! rename, as `git log --follow`), its cursor and its refusals; `commit` and `commit_diff`
//! with renames detected as `git show` does.

use service::{CallContext, ErrorKind, LogRequest, Service, ServiceConfig};
use testgit::SourceRepo;

const REPO: &str = "acme/follow";

fn body(extra: &str) -> Vec<u8> {
    let mut text: String = (1..=30)
        .map(|i| format!("line {i} of the module\n"))
        .collect();
    text.push_str(extra);
    text.into_bytes()
}

/// old.py added and edited, renamed to new.py with an edit, edited again; an unrelated file
/// in between.
fn repo() -> SourceRepo {
    let repo = SourceRepo::with_files(&[("src/old.py", &body(""))]);
    repo.commit(&[("src/old.py", &body("a\n"))], "edit old");
    repo.commit(&[("other.md", b"o\n")], "unrelated");
    repo.git(&["mv", "src/old.py", "src/new.py"]);
    repo.commit(&[("src/new.py", &body("a\nb\n"))], "rename old to new");
    repo.commit(&[("src/new.py", &body("a\nb\nc\n"))], "edit new");
    repo
}

fn follow(cursor: Option<String>, limit: usize) -> LogRequest {
    LogRequest {
        repo: REPO.into(),
        path: Some("src/new.py".into()),
        limit: Some(limit),
        cursor,
        follow: true,
        ..LogRequest::default()
    }
}

/// Issue 34 point 3: the followed log lists `git log --follow`'s commits with the path each
/// had, pages by cursor, and refuses what it cannot follow with what to do.
#[tokio::test]
async fn issue34_log_follow_pages_and_paths_match_git() {
    let source = repo();
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let ctx = CallContext::default();
    let mut cursor = None;
    let mut seen = Vec::new();
    loop {
        let page = service.log(&ctx, follow(cursor, 1)).await.unwrap();
        assert!(page.follow);
        seen.extend(page.commits.into_iter().map(|c| {
            (
                c.commit,
                c.path.unwrap(),
                c.change.unwrap(),
                c.previous_path,
            )
        }));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let git: Vec<String> = source
        .git(&["log", "--follow", "--format=%H", "--", "src/new.py"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        seen.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
        git,
        "the commits of git log --follow"
    );
    let shapes: Vec<(&str, &str, Option<&str>)> = seen
        .iter()
        .map(|s| (s.1.as_str(), s.2, s.3.as_deref()))
        .collect();
    assert_eq!(
        shapes,
        [
            ("src/new.py", "modified", None),
            ("src/new.py", "renamed", Some("src/old.py")),
            ("src/old.py", "modified", None),
            ("src/old.py", "added", None),
        ]
    );
    // Without follow the history stops at the rename (git's default).
    let plain = LogRequest {
        follow: false,
        ..follow(None, 50)
    };
    let page = service.log(&ctx, plain).await.unwrap();
    assert_eq!(page.commits.len(), 2);
    assert!(page.commits.iter().all(|c| c.path.is_none()));

    // Refusals say what was wrong and what to do.
    let cases = [
        (
            LogRequest {
                path: None,
                ..follow(None, 5)
            },
            "follow needs `path`",
        ),
        (
            LogRequest {
                path: Some("src".into()),
                ..follow(None, 5)
            },
            "is a directory: follow takes one file",
        ),
    ];
    for (request, expected) in cases {
        let error = service.log(&ctx, request).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidArgument, "{}", error.message);
        assert!(error.message.contains(expected), "{}", error.message);
    }
    let first = service.log(&ctx, follow(None, 1)).await.unwrap();
    let mixed = LogRequest {
        follow: false,
        ..follow(first.next_cursor, 1)
    };
    let error = service.log(&ctx, mixed).await.unwrap_err();
    assert!(
        error.message.contains("other `follow` setting"),
        "{}",
        error.message
    );
}

/// Issue 34 point 4: `commit` reports the rename with its old path and git's counts;
/// `commit_diff` prints it as `git show` does.
#[tokio::test]
async fn issue34_commit_and_commit_diff_detect_renames() {
    let source = repo();
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let ctx = CallContext::default();
    let rename = source
        .git(&["log", "--format=%H", "-1", "--grep=rename"])
        .trim()
        .to_owned();
    let answer = service
        .commit(&ctx, REPO.into(), rename.clone())
        .await
        .unwrap();
    assert_eq!(answer.total_files, 1);
    let file = &answer.files[0];
    assert_eq!(
        (
            file.path.as_str(),
            file.old_path.as_deref(),
            file.status,
            file.added,
            file.removed
        ),
        (
            "src/new.py",
            Some("src/old.py"),
            "renamed",
            Some(1),
            Some(0)
        )
    );
    let numstat = source.git(&["show", "--numstat", "--format=", &rename]);
    assert_eq!(numstat.trim(), "1\t0\tsrc/{old.py => new.py}");
    assert_eq!(answer.committer, "Test");

    let diff = service
        .commit_diff(&ctx, REPO.into(), rename.clone(), None)
        .await
        .unwrap();
    assert_eq!(diff.head, rename);
    assert_eq!(
        diff.base,
        source.git(&["rev-parse", &format!("{rename}^")]).trim()
    );
    assert_eq!(diff.files.len(), 1);
    assert_eq!(diff.files[0].status, "renamed");
    assert_eq!(diff.files[0].old_path.as_deref(), Some("src/old.py"));
    assert!(
        diff.files[0]
            .text
            .contains("rename from src/old.py\nrename to src/new.py\n"),
        "{}",
        diff.files[0].text
    );
    // A root commit is diffed against nothing: every file added.
    let root = source.git(&["rev-list", "--max-parents=0", "HEAD"]);
    let diff = service
        .commit_diff(&ctx, REPO.into(), root.trim().to_owned(), None)
        .await
        .unwrap();
    assert_eq!(diff.base, "");
    assert!(diff.files.iter().all(|f| f.status == "added"));
    let bad = service
        .commit_diff(&ctx, REPO.into(), rename, Some("nonsense".into()))
        .await
        .unwrap_err();
    assert!(bad.message.contains("invalid cursor"), "{}", bad.message);
}
