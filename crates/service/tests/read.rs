//! The read operations against real Git repositories made in temp dirs (R-1..R-4, G-2, G-3,
//! G-6, G-7 through the service).

use service::{CallContext, FileRange, ReadManyRequest, ReadRequest, Service, ServiceConfig};
use testgit::SourceRepo;

struct Fixture {
    source: SourceRepo,
    service: Service,
    head: String,
}

/// A source repository with `files` committed on `main`, registered as `test/repo` (with
/// registered path `scope`) and synced.
fn fixture(files: &[(&str, &[u8])], scope: &str, config: ServiceConfig) -> Fixture {
    let source = SourceRepo::with_files(files);
    let head = source.head();
    let service = Service::new(source.store("test/repo", scope), config);
    Fixture {
        source,
        service,
        head,
    }
}

fn read(path: &str, start: Option<u64>, end: Option<u64>) -> ReadRequest {
    ReadRequest {
        repo: "test/repo".into(),
        revision: None,
        path: path.into(),
        start_line: start,
        end_line: end,
        plugins: None,
    }
}

fn file(path: &str, start: Option<u64>, end: Option<u64>) -> FileRange {
    FileRange {
        path: path.into(),
        start_line: start,
        end_line: end,
    }
}

fn numbered(lines: usize) -> Vec<u8> {
    (1..=lines)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[tokio::test]
async fn r1_defaults_and_full_sha() {
    let big = numbered(1000);
    let f = fixture(
        &[("big.txt", &big), ("empty.txt", b"")],
        "",
        ServiceConfig::default(),
    );
    let ctx = CallContext::default();
    let item = f
        .service
        .read(&ctx, read("big.txt", None, None))
        .await
        .unwrap();
    assert_eq!(
        item.commit, f.head,
        "revision omitted = default-branch head, as a full SHA"
    );
    let range = item.outcome.unwrap();
    assert_eq!(
        (range.start_line, range.end_line, range.total_lines),
        (1, 500, 1000)
    );
    assert_eq!(
        (range.has_more, range.next_start_line, range.truncated),
        (true, Some(501), false)
    );
    let range = f
        .service
        .read(&ctx, read("big.txt", Some(990), None))
        .await
        .unwrap()
        .outcome
        .unwrap();
    assert_eq!(
        (range.start_line, range.end_line, range.has_more),
        (990, 1000, false)
    );
    assert_eq!(
        range.content,
        "line 990\n".to_string()
            + &(991..=1000)
                .map(|i| format!("line {i}\n"))
                .collect::<String>()
    );

    let empty = f
        .service
        .read(&ctx, read("empty.txt", None, None))
        .await
        .unwrap()
        .outcome
        .unwrap();
    assert_eq!(
        (
            empty.start_line,
            empty.end_line,
            empty.total_lines,
            empty.has_more
        ),
        (1, 0, 0, false)
    );

    let short = &f.head[..10];
    let pinned = ReadRequest {
        revision: Some(short.into()),
        ..read("big.txt", Some(1), Some(1))
    };
    assert_eq!(
        f.service.read(&ctx, pinned).await.unwrap().commit,
        f.head,
        "short SHA answered as full SHA"
    );
}

#[tokio::test]
async fn r1_bad_ranges_are_clear_errors() {
    let f = fixture(&[("a.txt", b"1\n2\n3\n")], "", ServiceConfig::default());
    let ctx = CallContext::default();
    let past = f
        .service
        .read(&ctx, read("a.txt", Some(4), None))
        .await
        .unwrap_err();
    assert!(past.message.contains("has 3 lines"), "{past}");
    let zero = f
        .service
        .read(&ctx, read("a.txt", Some(0), None))
        .await
        .unwrap_err();
    assert!(zero.message.contains("1 or more"), "{zero}");
    let inverted = f
        .service
        .read(&ctx, read("a.txt", Some(3), Some(2)))
        .await
        .unwrap_err();
    assert!(
        inverted.message.contains("before start_line") && inverted.message.contains("3 lines"),
        "{inverted}"
    );
}

/// one shared budget in request order, failures keep their place, duplicates are
/// answered separately, more than 50 entries is a clear error.
#[tokio::test]
async fn r4_batch_order_failures_duplicates_and_budget() {
    let config = ServiceConfig {
        batch_budget: 40,
        ..ServiceConfig::default()
    };
    let f = fixture(
        &[
            ("a.txt", b"aaaa\nbbbb\n"),
            ("b.txt", &numbered(20)),
            ("bin.dat", b"x\0y"),
        ],
        "",
        config,
    );
    let ctx = CallContext::default();
    let request = ReadManyRequest {
        repo: "test/repo".into(),
        revision: None,
        files: vec![
            file("a.txt", None, None),
            file("missing.txt", None, None),
            file("a.txt", None, None),
            file("bin.dat", None, None),
            file("b.txt", None, None),
            file("a.txt", Some(2), None),
        ],
        plugins: None,
    };
    let answer = f.service.read_many(&ctx, request).await.unwrap();
    assert_eq!(answer.commit, f.head);
    let paths: Vec<&str> = answer.items.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(
        paths,
        ["a.txt", "missing.txt", "a.txt", "bin.dat", "b.txt", "a.txt"]
    );
    assert_eq!(
        answer.items[0].outcome.as_ref().unwrap().content,
        "aaaa\nbbbb\n"
    );
    assert!(
        answer.items[1]
            .outcome
            .as_ref()
            .unwrap_err()
            .contains("no file")
    );
    assert_eq!(
        answer.items[2].outcome.as_ref().unwrap().content,
        "aaaa\nbbbb\n",
        "duplicate answered again"
    );
    assert!(
        answer.items[3]
            .outcome
            .as_ref()
            .unwrap_err()
            .contains("binary file, 3 bytes")
    );
    // 20 bytes used, 20 left: b.txt gets as many whole lines as fit ("line N\n" is 7 bytes).
    let b = answer.items[4].outcome.as_ref().unwrap();
    assert_eq!(
        (b.end_line, b.truncated, b.next_start_line),
        (2, true, Some(3))
    );
    let spent = answer.items[5].outcome.as_ref().unwrap();
    assert_eq!(
        (
            spent.content.as_str(),
            spent.truncated,
            spent.has_more,
            spent.next_start_line
        ),
        ("", true, true, Some(2))
    );

    let too_many = ReadManyRequest {
        repo: "test/repo".into(),
        revision: None,
        files: (0..51).map(|_| file("a.txt", None, None)).collect(),
        plugins: None,
    };
    let error = f.service.read_many(&ctx, too_many).await.unwrap_err();
    assert!(error.message.contains("at most 50"), "{error}");
}

/// batch-size errors state the configured limit, not the default.
#[tokio::test]
async fn r3_batch_errors_state_the_configured_limit() {
    let config = ServiceConfig {
        max_batch_items: 3,
        ..ServiceConfig::default()
    };
    let f = fixture(&[("a.txt", b"a\n")], "", config);
    let ctx = CallContext::default();
    let batch = |n: usize| ReadManyRequest {
        repo: "test/repo".into(),
        revision: None,
        files: (0..n).map(|_| file("a.txt", None, None)).collect(),
        plugins: None,
    };
    let empty = f.service.read_many(&ctx, batch(0)).await.unwrap_err();
    assert!(empty.message.contains("1 to 3 entries"), "{empty}");
    let over = f.service.read_many(&ctx, batch(4)).await.unwrap_err();
    assert!(over.message.contains("at most 3"), "{over}");
    assert_eq!(
        f.service
            .read_many(&ctx, batch(3))
            .await
            .unwrap()
            .items
            .len(),
        3
    );
}

/// a single line longer than the read budget is still returned whole; one longer than
/// LINE_CAP is cut inside the line with `line_cut`.
#[tokio::test]
async fn r3_long_lines() {
    let long = format!("{}\nnext\n", "x".repeat(3000));
    let config = ServiceConfig {
        read_budget: 100,
        line_cap: 2000,
        ..ServiceConfig::default()
    };
    let f = fixture(
        &[
            ("long.txt", long.as_bytes()),
            ("mid.txt", format!("{}\nz\n", "y".repeat(500)).as_bytes()),
        ],
        "",
        config,
    );
    let ctx = CallContext::default();
    let mid = f
        .service
        .read(&ctx, read("mid.txt", None, None))
        .await
        .unwrap()
        .outcome
        .unwrap();
    assert_eq!(
        (mid.content.len(), mid.end_line, mid.truncated, mid.line_cut),
        (501, 1, true, None)
    );
    let cut = f
        .service
        .read(&ctx, read("long.txt", None, None))
        .await
        .unwrap()
        .outcome
        .unwrap();
    assert_eq!(
        (cut.content.len(), cut.line_cut, cut.next_start_line),
        (2000, Some(1001), Some(2))
    );
}

/// G-2: with a registered path nothing outside it is readable; paths stay
/// repository-relative.
#[tokio::test]
async fn g2_registered_path_scope() {
    let f = fixture(
        &[
            ("packages/docs/knowledge/a.md", b"# A\n"),
            ("packages/app/secret.txt", b"s\n"),
            ("README.md", b"r\n"),
        ],
        "packages/docs",
        ServiceConfig::default(),
    );
    let ctx = CallContext::default();
    let item = f
        .service
        .read(&ctx, read("packages/docs/knowledge/a.md", None, None))
        .await
        .unwrap();
    assert_eq!(item.path, "packages/docs/knowledge/a.md");
    for outside in ["packages/app/secret.txt", "README.md", "packages/docsx"] {
        let error = f
            .service
            .read(&ctx, read(outside, None, None))
            .await
            .unwrap_err();
        assert!(
            error.message.contains("outside the registered path"),
            "{outside}: {error}"
        );
    }
    let listing = f
        .service
        .list(
            &ctx,
            service::ListRequest {
                repo: "test/repo".into(),
                revision: None,
                path: None,
                depth: Some(10),
            },
        )
        .await
        .unwrap();
    assert!(!listing.entries.is_empty());
    assert!(
        listing
            .entries
            .iter()
            .all(|e| e.path.starts_with("packages/docs")),
        "{:?}",
        listing.entries
    );
}

/// G-6, G-7: the bad-input table, each a clear error, never a host path.
#[tokio::test]
async fn g6_g7_bad_input_table() {
    let lfs = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
    let f = fixture(
        &[
            ("ok.txt", b"fine\n"),
            ("bin.dat", b"\0\x01"),
            ("latin1.txt", b"caf\xe9\n"),
            ("big.lfs", lfs),
            ("dir/inner.txt", b"i\n"),
        ],
        "",
        ServiceConfig::default(),
    );
    std::os::unix::fs::symlink("../../etc/passwd", f.source.path().join("escape")).unwrap();
    f.source.git(&["add", "escape"]);
    let gitlink = format!("160000,{},sub", f.head);
    f.source
        .git(&["update-index", "--add", "--cacheinfo", &gitlink]);
    f.source.commit_index("links");
    f.service.sync("test/repo".into()).await.unwrap();
    let ctx = CallContext::default();
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("../x", None, "`..`"),
        ("/etc/passwd", None, "absolute"),
        ("a\0b", None, "NUL"),
        ("a//b", None, "empty segment"),
        ("a\\b", None, "backslash"),
        ("escape", None, "symbolic link"),
        ("escape/x", None, "symbolic link"),
        ("sub", None, "submodule"),
        ("big.lfs", None, "LFS pointer"),
        ("bin.dat", None, "binary file, 2 bytes"),
        ("latin1.txt", None, "not UTF-8"),
        ("dir", None, "directory"),
        ("nope.txt", None, "no file"),
        (
            "ok.txt",
            Some("0000000000000000000000000000000000000000"),
            "unknown revision",
        ),
        ("ok.txt", Some("no-such-branch"), "unknown revision"),
    ];
    let data = f.source.data_dir().to_string_lossy().into_owned();
    let source = f.source.source();
    for (path, revision, expected) in cases {
        let request = ReadRequest {
            revision: revision.map(String::from),
            ..read(path, None, None)
        };
        let error = f.service.read(&ctx, request).await.unwrap_err();
        assert!(
            error.message.contains(expected),
            "{path:?}: expected {expected:?} in {error}"
        );
        assert!(
            !error.message.contains(&data) && !error.message.contains(&source),
            "host path leaked: {error}"
        );
    }
    let unknown = ReadRequest {
        repo: "nobody/here".into(),
        ..read("ok.txt", None, None)
    };
    assert!(
        f.service
            .read(&ctx, unknown)
            .await
            .unwrap_err()
            .message
            .contains("unknown repository")
    );
}

/// G-3: a sync whose source vanished reports the error in `discovery`, and the last good
/// state keeps serving.
#[tokio::test]
async fn g3_failed_sync_keeps_serving() {
    let f = fixture(&[("a.txt", b"still here\n")], "", ServiceConfig::default());
    let ctx = CallContext::default();
    std::fs::remove_dir_all(f.source.path()).unwrap();
    let error = f.service.sync("test/repo".into()).await.unwrap_err();
    assert!(
        error.message.contains("sync of `test/repo` failed"),
        "{error}"
    );
    let repos = f.service.discovery(&ctx).await.unwrap();
    let repo = repos.iter().find(|r| r.name == "test/repo").unwrap();
    assert!(
        repo.last_sync_error.is_some(),
        "discovery reports the failed sync"
    );
    assert_eq!(repo.head.as_deref(), Some(f.head.as_str()));
    let item = f
        .service
        .read(&ctx, read("a.txt", None, None))
        .await
        .unwrap();
    assert_eq!(item.outcome.unwrap().content, "still here\n");
}

/// base reads are counted.
#[tokio::test]
async fn r7_statistics_count_base_reads() {
    let f = fixture(&[("a.txt", b"a\n")], "", ServiceConfig::default());
    let ctx = CallContext::default();
    f.service
        .read(&ctx, read("a.txt", None, None))
        .await
        .unwrap();
    f.service
        .read(&ctx, read("missing", None, None))
        .await
        .unwrap_err();
    let stats = f.service.stats();
    assert_eq!((stats.read.calls, stats.read.errors), (2, 1));
}

/// reads too big to inflate in place (over the 256 KiB in-place allowance, one
/// file or a batch together) are redone on the blocking pool with the same answers: the
/// continuation reproduces the file, a batch keeps request order and its shared budget, and
/// each call is counted once.
#[tokio::test]
async fn r2_reads_moved_off_the_async_thread_answer_the_same() {
    let big = numbered(60_000); // about 650 KiB
    // About 120 KiB each and distinct (one blob each): three exceed the allowance together.
    let medium: Vec<Vec<u8>> = (1..=3)
        .map(|n| [format!("file {n}\n").into_bytes(), numbered(12_000)].concat())
        .collect();
    let f = fixture(
        &[
            ("big.txt", &big),
            ("m1.txt", &medium[0]),
            ("m2.txt", &medium[1]),
            ("m3.txt", &medium[2]),
        ],
        "",
        ServiceConfig::default(),
    );
    let ctx = CallContext::default();
    let mut rebuilt = String::new();
    let mut next = Some(1);
    let mut calls = 0;
    while let Some(start) = next {
        let item = f
            .service
            .read(&ctx, read("big.txt", Some(start), Some(start + 9_999)))
            .await
            .unwrap();
        let range = item.outcome.unwrap();
        rebuilt.push_str(&range.content);
        next = range.next_start_line;
        calls += 1;
    }
    assert_eq!(rebuilt.as_bytes(), &big[..]);

    let service::ReadManyAnswer { items, .. } = f
        .service
        .read_many(
            &ctx,
            ReadManyRequest {
                repo: "test/repo".into(),
                revision: None,
                files: vec![
                    file("m1.txt", None, Some(12_001)),
                    file("m2.txt", None, Some(12_001)),
                    file("m3.txt", None, Some(12_001)),
                ],
                plugins: None,
            },
        )
        .await
        .unwrap();
    let ranges: Vec<_> = items.into_iter().map(|i| i.outcome.unwrap()).collect();
    // 512 KiB shared, 256 KiB per item: all three fit whole, in request order.
    for (range, expected) in ranges.iter().zip(&medium) {
        assert_eq!(range.content.as_bytes(), &expected[..]);
        assert!(!range.truncated && !range.has_more);
    }
    let stats = f.service.stats();
    assert_eq!((stats.read.calls, stats.read_many.calls), (calls, 1));
}
