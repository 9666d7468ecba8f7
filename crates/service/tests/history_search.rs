//! `search` with `type: "commit"` and `type: "diff"` (S-9) through the service, compared
//! with `git log --grep`, `git log -G` and `git show` on a repository built here: branches, a
//! merge, a rename, a deleted file, a binary file, two authors with different dates. Paging
//! with the cursor to the end, the index updated incrementally, a revision other than the
//! indexed head, access refusal and argument errors.

use std::collections::BTreeSet;
use std::time::Duration;

use service::{
    CallContext, Caller, ErrorKind, LineChange, SearchAnswer, SearchKind, SearchRequest, Service,
    ServiceConfig,
};
use testgit::SourceRepo;

const REPO: &str = "test/history";
/// Every test here finishes in seconds; a hang fails instead of holding the run.
const TIMEOUT: Duration = Duration::from_secs(120);

fn ctx() -> CallContext {
    CallContext::default()
}

fn lines(prefix: &str, n: usize) -> String {
    (1..=n).map(|i| format!("{prefix} line {i}\n")).collect()
}

/// Commits as `author` with author date `date` (the committer date is testgit's clock).
fn commit_as(repo: &SourceRepo, author: &str, date: &str, message: &str) -> String {
    repo.git(&["add", "-A"]);
    repo.git(&[
        "commit",
        "-q",
        "--allow-empty",
        "--author",
        author,
        "--date",
        date,
        "-m",
        message,
    ]);
    repo.head()
}

const ALICE: &str = "Alice Liddell <alice@example.invalid>";
const BOB: &str = "Bob Builder <bob@example.invalid>";

/// The history: main with a merge of `side` (a rename on it), a deletion, a binary change;
/// `feature` one commit ahead of main, never merged.
fn build(repo: &SourceRepo) {
    let mut lib = lines("lib", 20);
    lib = lib.replace("lib line 5\n", "obsolete Needle here\n");
    repo.write(&[
        ("src/lib.rs", lib.as_bytes()),
        ("README.md", b"# Project\nthe needle readme\n"),
        ("logo.png", b"\x89PNG\0\0needle binary\n"),
        ("docs/old.md", lines("doc", 12).as_bytes()),
    ]);
    commit_as(repo, ALICE, "2021-01-10T10:00:00+01:00", "Initial import");
    let lib2 = lib
        .replace("obsolete Needle here\n", "")
        .replace("lib line 9\n", "lib line 9\nlet needle_one = 1;\n");
    repo.write(&[("src/lib.rs", lib2.as_bytes())]);
    commit_as(
        repo,
        BOB,
        "2022-02-15T08:30:00-05:00",
        "lib: drop the obsolete needle\n\nLonger body mentioning HAYSTACK.",
    );
    repo.git(&["checkout", "-q", "-b", "side"]);
    repo.write(&[("src/side.rs", b"fn side() {\n    // needle side\n}\n")]);
    commit_as(repo, BOB, "2022-03-01T12:00:00Z", "side: add side.rs");
    std::fs::remove_file(repo.path().join("docs/old.md")).expect("rm");
    let renamed = lines("doc", 12).replace("doc line 12\n", "doc line 12\nneedle after rename\n");
    repo.write(&[("docs/new.md", renamed.as_bytes())]);
    commit_as(repo, BOB, "2022-03-02T12:00:00Z", "docs: rename old to new");
    repo.git(&["checkout", "-q", "main"]);
    std::fs::remove_file(repo.path().join("README.md")).expect("rm");
    commit_as(
        repo,
        ALICE,
        "2022-04-01T09:00:00+02:00",
        "remove the readme",
    );
    repo.write(&[("logo.png", b"\x89PNG\0\0needle binary v2\n")]);
    commit_as(
        repo,
        ALICE,
        "2022-04-02T09:00:00+02:00",
        "logo: new needle art",
    );
    repo.git(&[
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge branch side (needle work)",
        "side",
    ]);
    let side = b"fn side() {\n    // needle side\n    let x = 1;\n    // second NEEDLE\n}\n";
    repo.write(&[("src/side.rs", side)]);
    commit_as(repo, BOB, "2023-05-05T05:05:05Z", "side: more");
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write(&[("src/feature.rs", b"needle on feature\n")]);
    commit_as(repo, ALICE, "2023-06-01T00:00:00Z", "feature: needle");
    repo.git(&["checkout", "-q", "main"]);
}

async fn service_for(repo: &SourceRepo) -> Service {
    service_with(repo, false).await
}

async fn service_with(repo: &SourceRepo, private: bool) -> Service {
    let store = repo.store(REPO, "");
    if private {
        store
            .set_private(&gitstore::RepoName::parse(REPO).unwrap(), true)
            .expect("private");
    }
    let service = Service::new(store, ServiceConfig::default());
    let stats = service
        .index_history(REPO.into())
        .await
        .expect("history indexed");
    assert!(stats.added > 0);
    service
}

fn request(kind: SearchKind, query: &str) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        repo: Some(REPO.into()),
        kind,
        limit: Some(2),
        ..SearchRequest::default()
    }
}

/// Every page of `req`, following the cursor to the end.
async fn all_pages(service: &Service, mut req: SearchRequest) -> Vec<SearchAnswer> {
    let mut pages = Vec::new();
    loop {
        let page = service.search(&ctx(), req.clone()).await.expect("search");
        let next = page.next_cursor.clone();
        pages.push(page);
        match next {
            Some(cursor) => req.cursor = Some(cursor),
            None => return pages,
        }
        assert!(pages.len() < 200, "paging ends");
    }
}

/// The commits of the hits, in order, each once.
fn commits(pages: &[SearchAnswer]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for page in pages {
        for group in &page.repos {
            for hit in &group.hits {
                let commit = hit.commit.clone().expect("a commit");
                if out.last() != Some(&commit) {
                    assert!(!out.contains(&commit), "one commit's hits come together");
                    out.push(commit);
                }
            }
        }
    }
    out
}

fn git_list(repo: &SourceRepo, args: &[&str]) -> Vec<String> {
    let mut all = vec!["log", "--format=%H"];
    all.extend_from_slice(args);
    repo.git(&all)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// (path, line, added, text trimmed as snippets are) of every `+`/`-` line of `git show`
/// of `commit`.
fn git_show_lines(repo: &SourceRepo, commit: &str) -> BTreeSet<(String, u64, bool, String)> {
    let text = repo.git(&["show", "--format=", "-U0", "--no-color", commit]);
    let (mut old_path, mut new_path) = (String::new(), String::new());
    let (mut old_no, mut new_no) = (0u64, 0u64);
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("--- ") {
            old_path = p.strip_prefix("a/").unwrap_or(p).to_owned();
        } else if let Some(p) = line.strip_prefix("+++ ") {
            new_path = p.strip_prefix("b/").unwrap_or(p).to_owned();
        } else if let Some(h) = line.strip_prefix("@@ ") {
            let mut parts = h.split(' ');
            let start = |s: &str| s[1..].split(',').next().unwrap().parse::<u64>().unwrap();
            old_no = start(parts.next().unwrap());
            new_no = start(parts.next().unwrap());
        } else if let Some(t) = line.strip_prefix('-') {
            out.insert((old_path.clone(), old_no, false, t.trim().to_owned()));
            old_no += 1;
        } else if let Some(t) = line.strip_prefix('+') {
            out.insert((new_path.clone(), new_no, true, t.trim().to_owned()));
            new_no += 1;
        }
    }
    out
}

/// S-9: commit search = `git log --grep` (case-insensitive unless asked, literal or regex,
/// author, since/until, path), merges included, newest first, paged to the end.
#[tokio::test]
async fn s9_commit_search_matches_git_log_grep() {
    tokio::time::timeout(TIMEOUT, async {
        let repo = SourceRepo::new();
        build(&repo);
        let service = service_for(&repo).await;
        let head = repo.head();
        let check = |req: SearchRequest, git: Vec<&'static str>| {
            let service = service.clone();
            let repo = &repo;
            let head = head.clone();
            async move {
                let pages = all_pages(&service, req.clone()).await;
                assert!(pages.iter().all(|p| p.repos[0].commit == head));
                let ours = commits(&pages);
                let theirs = git_list(repo, &git);
                assert_eq!(ours, theirs, "{req:?} vs git log {git:?}");
                ours
            }
        };
        let found = check(
            request(SearchKind::Commit, "needle"),
            vec!["-i", "-F", "--grep=needle"],
        )
        .await;
        assert!(found.len() >= 3, "a merge among them: {found:?}");
        check(
            request(SearchKind::Commit, "haystack"),
            vec!["-i", "-F", "--grep=haystack"],
        )
        .await;
        check(
            SearchRequest {
                case_sensitive: true,
                ..request(SearchKind::Commit, "HAYSTACK")
            },
            vec!["-F", "--grep=HAYSTACK"],
        )
        .await;
        check(
            SearchRequest {
                case_sensitive: true,
                ..request(SearchKind::Commit, "haystack")
            },
            vec!["-F", "--grep=haystack"],
        )
        .await;
        check(
            SearchRequest {
                regex: true,
                ..request(SearchKind::Commit, "^(side|lib):")
            },
            vec!["-i", "-E", "--grep=^(side|lib):"],
        )
        .await;
        check(
            SearchRequest {
                author: Some("bob@".into()),
                ..request(SearchKind::Commit, "e")
            },
            vec!["-i", "-F", "--grep=e", "--author=bob@"],
        )
        .await;
        check(
            request(SearchKind::Commit, "(needle"),
            vec!["-i", "-F", "--grep=(needle"],
        )
        .await;
        check(
            SearchRequest {
                path: Some("src".into()),
                ..request(SearchKind::Commit, "e")
            },
            vec!["-i", "-F", "--grep=e", "--", "src"],
        )
        .await;
        check(
            SearchRequest {
                path: Some("docs/*.md".into()),
                ..request(SearchKind::Commit, "e")
            },
            vec!["-i", "-F", "--grep=e", "--", ":(glob)docs/*.md"],
        )
        .await;
        // since/until bound the committer date, as git's do.
        let dates: Vec<i64> = repo
            .git(&["log", "--format=%ct"])
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        let mid = dates[dates.len() / 2];
        let since = format!("@{mid}");
        let rfc = rfc3339(mid);
        let pages = all_pages(
            &service,
            SearchRequest {
                since: Some(rfc.clone()),
                ..request(SearchKind::Commit, "e")
            },
        )
        .await;
        assert_eq!(
            commits(&pages),
            git_list(
                &repo,
                &["-i", "-F", "--grep=e", &format!("--since={since}")]
            )
        );
        let pages = all_pages(
            &service,
            SearchRequest {
                until: Some(rfc),
                ..request(SearchKind::Commit, "e")
            },
        )
        .await;
        assert_eq!(
            commits(&pages),
            git_list(
                &repo,
                &["-i", "-F", "--grep=e", &format!("--until={since}")]
            )
        );

        // The fields of a hit.
        let page = service
            .search(&ctx(), request(SearchKind::Commit, "obsolete"))
            .await
            .unwrap();
        let hit = &page.repos[0].hits[0];
        assert_eq!(hit.author.as_deref(), Some(BOB));
        assert_eq!(hit.date.as_deref(), Some("2022-02-15T08:30:00-05:00"));
        assert_eq!(
            hit.subject.as_deref(),
            Some("lib: drop the obsolete needle")
        );
        assert_eq!(
            hit.snippet.as_deref(),
            Some("lib: drop the obsolete needle")
        );
        assert_eq!(hit.path, "");
        assert_eq!(hit.line, None);
        assert_eq!(page.next_cursor, None);
    })
    .await
    .expect("within the timeout");
}

fn rfc3339(seconds: i64) -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{seconds}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("date runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// S-9: diff search = `git log -G` (merges and binary files left out, renames detected),
/// each hit a `+`/`-` line of `git show` with its line number.
#[tokio::test]
async fn s9_diff_search_matches_git_log_g_and_git_show() {
    tokio::time::timeout(TIMEOUT, async {
        let repo = SourceRepo::new();
        build(&repo);
        let service = service_for(&repo).await;
        let cases: Vec<(SearchRequest, Vec<&str>)> = vec![
            (
                request(SearchKind::Diff, "needle"),
                vec!["-i", "-G", "needle"],
            ),
            (
                SearchRequest {
                    case_sensitive: true,
                    ..request(SearchKind::Diff, "NEEDLE")
                },
                vec!["-G", "NEEDLE"],
            ),
            (
                SearchRequest {
                    regex: true,
                    ..request(SearchKind::Diff, r"needle_\w+|line 1[12]$")
                },
                vec!["-i", "-G", r"needle_[a-z]+|line 1[12]$"],
            ),
            (
                request(SearchKind::Diff, "doc line 3"),
                vec!["-i", "-G", "doc line 3"],
            ),
            (
                SearchRequest {
                    path: Some("src".into()),
                    ..request(SearchKind::Diff, "needle")
                },
                vec!["-i", "-G", "needle", "--", "src"],
            ),
            (
                SearchRequest {
                    author: Some("alice".into()),
                    ..request(SearchKind::Diff, "needle")
                },
                vec!["-i", "-G", "needle", "--author=alice"],
            ),
        ];
        for (req, git) in cases {
            let pages = all_pages(&service, req.clone()).await;
            let listed = commits(&pages);
            assert!(!listed.is_empty(), "{req:?} finds something");
            assert_eq!(listed, git_list(&repo, &git), "{req:?}");
            let matches = matcher(&req);
            for page in &pages {
                for hit in &page.repos[0].hits {
                    let commit = hit.commit.as_deref().unwrap();
                    let shown = git_show_lines(&repo, commit);
                    let added = hit.change == Some(LineChange::Added);
                    let key = (
                        hit.path.clone(),
                        hit.line.unwrap(),
                        added,
                        hit.snippet.clone().unwrap(),
                    );
                    assert!(shown.contains(&key), "{key:?} in git show {commit}");
                }
            }
            // Every matching +/- line of every listed commit is a hit.
            let Some(matches) = matches else { continue };
            for commit in commits(&pages) {
                let want: BTreeSet<_> = git_show_lines(&repo, &commit)
                    .into_iter()
                    .filter(|(path, _, _, text)| {
                        matches(text) && req.path.as_deref().is_none_or(|p| path.starts_with(p))
                    })
                    .collect();
                let got: BTreeSet<_> = pages
                    .iter()
                    .flat_map(|p| p.repos[0].hits.iter())
                    .filter(|h| h.commit.as_deref() == Some(commit.as_str()))
                    .map(|h| {
                        (
                            h.path.clone(),
                            h.line.unwrap(),
                            h.change == Some(LineChange::Added),
                            h.snippet.clone().unwrap(),
                        )
                    })
                    .collect();
                assert_eq!(got, want, "{commit} for {req:?}");
            }
        }
        // The rename: the added line under the new path, nothing for the unchanged lines.
        let page = service
            .search(&ctx(), request(SearchKind::Diff, "needle after rename"))
            .await
            .unwrap();
        let hit = &page.repos[0].hits[0];
        assert_eq!((hit.path.as_str(), hit.line), ("docs/new.md", Some(13)));
        assert_eq!(hit.subject.as_deref(), Some("docs: rename old to new"));
    })
    .await
    .expect("within the timeout");
}

/// What a literal query matches (`None` for a regex: only git's commit set is compared).
fn matcher(req: &SearchRequest) -> Option<impl Fn(&str) -> bool> {
    if req.regex {
        return None;
    }
    let (query, sensitive) = (req.query.clone(), req.case_sensitive);
    Some(move |text: &str| {
        if sensitive {
            text.contains(&query)
        } else {
            text.to_lowercase().contains(&query.to_lowercase())
        }
    })
}

/// S-9: new commits are added incrementally; a revision other than the indexed head (a
/// branch never merged) is searched with its own commits read from Git; the cursor stays
/// on its tip; `count` counts every hit.
#[tokio::test]
async fn s9_incremental_update_revision_and_count() {
    tokio::time::timeout(TIMEOUT, async {
        let repo = SourceRepo::new();
        build(&repo);
        let service = service_for(&repo).await;
        let again = service.index_history(REPO.into()).await.unwrap();
        assert!(again.skipped_same);

        // At `feature` (not indexed): its commit is found, the answer names its tip.
        let feature = repo.git(&["rev-parse", "feature"]);
        let pages = all_pages(
            &service,
            SearchRequest {
                revision: Some("feature".into()),
                ..request(SearchKind::Diff, "needle")
            },
        )
        .await;
        assert!(pages.iter().all(|p| p.repos[0].commit == feature));
        assert_eq!(
            commits(&pages),
            git_list(&repo, &["-i", "-G", "needle", "feature"])
        );

        // A new commit on main, synced and indexed: only it is read.
        repo.write(&[("src/new.rs", b"a fresh needle\n")]);
        commit_as(&repo, ALICE, "2024-01-01T00:00:00Z", "new needle");
        let store = gitstore::GitStore::open(
            gitstore::StoreConfig {
                data_dir: repo.data_dir(),
                retention: gitstore::DEFAULT_RETENTION,
            },
            std::sync::Arc::new(gitstore::SystemClock),
        )
        .unwrap();
        store
            .sync(&gitstore::RepoName::parse(REPO).unwrap())
            .unwrap();
        let service = Service::new(store, ServiceConfig::default());
        let stats = service.index_history(REPO.into()).await.unwrap();
        assert_eq!(stats.added, 1, "{stats:?}");
        let pages = all_pages(&service, request(SearchKind::Diff, "needle")).await;
        assert_eq!(commits(&pages), git_list(&repo, &["-i", "-G", "needle"]));

        // count: every hit counted on the first page.
        let all: usize = pages.iter().map(|p| p.repos[0].hits.len()).sum();
        let first = service
            .search(
                &ctx(),
                SearchRequest {
                    count: true,
                    ..request(SearchKind::Diff, "needle")
                },
            )
            .await
            .unwrap();
        assert_eq!(first.stats.total_hits, all as u64);
        assert!(!first.stats.truncated);
        let first = service
            .search(&ctx(), request(SearchKind::Diff, "needle"))
            .await
            .unwrap();
        assert!(first.stats.total_hits > 2 && first.stats.truncated);
    })
    .await
    .expect("within the timeout");
}

/// A-4 and argument errors: a private repository refuses an anonymous caller exactly like
/// an unknown one; bad dates, regexes, cursors and a lang filter say what to give.
#[tokio::test]
async fn s9_refusals_and_errors() {
    tokio::time::timeout(TIMEOUT, async {
        let repo = SourceRepo::new();
        build(&repo);
        let service = service_with(&repo, true).await;
        let anonymous = CallContext {
            caller: Caller::Anonymous,
            ..CallContext::default()
        };
        let local = service
            .search(&ctx(), request(SearchKind::Commit, "needle"))
            .await;
        assert!(local.is_ok(), "the local caller reads it: {local:?}");
        let refused = service
            .search(&anonymous, request(SearchKind::Diff, "needle"))
            .await
            .unwrap_err();
        let unknown = service
            .search(
                &anonymous,
                SearchRequest {
                    repo: Some("test/unknown".into()),
                    ..request(SearchKind::Diff, "needle")
                },
            )
            .await
            .unwrap_err();
        assert_eq!(refused.kind, unknown.kind);
        assert_eq!(
            refused.message.replace(REPO, "X"),
            unknown.message.replace("test/unknown", "X")
        );

        let err = |req: SearchRequest| {
            let service = service.clone();
            async move { service.search(&ctx(), req).await.unwrap_err() }
        };
        let bad_date = err(SearchRequest {
            since: Some("last tuesday".into()),
            ..request(SearchKind::Commit, "needle")
        })
        .await;
        assert_eq!(bad_date.kind, ErrorKind::InvalidArgument);
        assert!(
            bad_date.message.contains("YYYY-MM-DD") && bad_date.message.contains("RFC 3339"),
            "{}",
            bad_date.message
        );
        let bad_regex = err(SearchRequest {
            regex: true,
            ..request(SearchKind::Diff, "needle(")
        })
        .await;
        assert_eq!(bad_regex.kind, ErrorKind::InvalidArgument);
        assert!(bad_regex.message.contains("regular expression"));
        let bad_author = err(SearchRequest {
            author: Some("[bob".into()),
            ..request(SearchKind::Commit, "needle")
        })
        .await;
        assert!(
            bad_author.message.contains("author"),
            "{}",
            bad_author.message
        );
        let bad_cursor = err(SearchRequest {
            cursor: Some("nonsense".into()),
            ..request(SearchKind::Commit, "needle")
        })
        .await;
        assert!(bad_cursor.message.contains("cursor"));
        // A cursor of another query is refused.
        let page = service
            .search(&ctx(), request(SearchKind::Diff, "needle"))
            .await
            .unwrap();
        let other = err(SearchRequest {
            cursor: page.next_cursor,
            ..request(SearchKind::Diff, "other")
        })
        .await;
        assert!(other.message.contains("cursor"));
        let lang = err(SearchRequest {
            lang: Some("rust".into()),
            ..request(SearchKind::Diff, "needle")
        })
        .await;
        assert!(lang.message.contains("path"));
        let unknown_rev = err(SearchRequest {
            revision: Some("no-such-branch".into()),
            ..request(SearchKind::Diff, "needle")
        })
        .await;
        assert_eq!(unknown_rev.kind, ErrorKind::NotFound);
    })
    .await
    .expect("within the timeout");
}

/// A timing probe, not a check (S-9 target: a cold first page ≤ 100 ms where `git log -G`
/// takes seconds): `CSG_HISTORY_BENCH_REPO=/path/to/bare.git CSG_HISTORY_BENCH_DEPTH=12000
/// cargo test --release -p service --test history_search -- --ignored --nocapture` registers
/// the repository in a temp data directory, builds the history index (depth commits) and
/// prints the build time and, per query, the first page's time beside `git log`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark over a large repository named by CSG_HISTORY_BENCH_REPO"]
async fn s9_history_bench() {
    let Ok(bare) = std::env::var("CSG_HISTORY_BENCH_REPO") else {
        eprintln!("CSG_HISTORY_BENCH_REPO is not set: nothing to time");
        return;
    };
    let depth: usize = std::env::var("CSG_HISTORY_BENCH_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(12_000);
    let tmp = tempfile::tempdir().unwrap();
    let store = testgit::registered_store(
        tmp.path().join("data"),
        "bench/history",
        &bare,
        "",
        std::sync::Arc::new(gitstore::SystemClock),
    );
    let name = gitstore::RepoName::parse("bench/history").unwrap();
    let t = std::time::Instant::now();
    store.sync(&name).unwrap();
    eprintln!("mirror: {:?}", t.elapsed());
    let config = ServiceConfig {
        history_depth: Some(depth),
        ..ServiceConfig::default()
    };
    let service = Service::new(store, config);
    let t = std::time::Instant::now();
    let stats = service.index_history("bench/history".into()).await.unwrap();
    eprintln!(
        "history index: {} commits, {} lines in {:?}",
        stats.commits,
        stats.lines,
        t.elapsed()
    );
    let size = std::process::Command::new("du")
        .args(["-sh"])
        .arg(tmp.path().join("data/index/bench/history/history"))
        .output()
        .unwrap();
    eprintln!("on disk: {}", String::from_utf8_lossy(&size.stdout).trim());
    let tip = std::process::Command::new("git")
        .args(["-C", &bare, "rev-parse", "HEAD"])
        .output()
        .unwrap();
    let tip = String::from_utf8_lossy(&tip.stdout).trim().to_owned();
    // The history git walks: the same newest `depth` commits (git log's order) when the
    // index is bounded, so git's answers are kept to those.
    let range = tip.clone();
    let bounded_to: Option<std::collections::HashSet<String>> = ((stats.commits as usize) >= depth)
        .then(|| {
            let listed = std::process::Command::new("git")
                .args([
                    "-C",
                    &bare,
                    "rev-list",
                    &format!("--max-count={depth}"),
                    &tip,
                ])
                .output()
                .unwrap();
            String::from_utf8_lossy(&listed.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        });
    // `kind:query` (`kind` d, D for a regex, c, C for a regex), `;`-separated; the defaults
    // suit redis/redis.
    let queries = std::env::var("CSG_HISTORY_BENCH_QUERIES").unwrap_or_else(|_| {
        r"d:dictAdd;d:zmalloc_used_memory;d:serverLog(LL_WARNING;D:\bSIGKILL\b;d:deprecated;c:cluster;c:revert"
            .into()
    });
    for spec in queries.split(';').filter(|q| !q.is_empty()) {
        let (tag, query) = spec.split_once(':').unwrap();
        let (kind, regex) = match tag {
            "d" => (SearchKind::Diff, false),
            "D" => (SearchKind::Diff, true),
            "c" => (SearchKind::Commit, false),
            _ => (SearchKind::Commit, true),
        };
        let req = SearchRequest {
            query: query.into(),
            repo: Some("bench/history".into()),
            kind,
            regex,
            limit: Some(50),
            ..SearchRequest::default()
        };
        let t = std::time::Instant::now();
        let page = service.search(&ctx(), req.clone()).await.unwrap();
        let ours = t.elapsed();
        let t = std::time::Instant::now();
        let again = service.search(&ctx(), req.clone()).await.unwrap();
        let warm = t.elapsed();
        assert_eq!(page.repos, again.repos);
        let t = std::time::Instant::now();
        let pages = all_pages(
            &service,
            SearchRequest {
                limit: Some(500),
                ..req
            },
        )
        .await;
        let paged = t.elapsed();
        let mut args = vec!["-C".to_owned(), bare.clone(), "log".into(), "-i".into()];
        match (kind, regex) {
            (SearchKind::Diff, true) => args.extend(["-G".into(), query.into()]),
            // -G takes an extended regular expression: a literal is escaped for it.
            (SearchKind::Diff, false) => args.extend(["-G".into(), ere_escape(query)]),
            (_, true) => args.extend(["-E".into(), format!("--grep={query}")]),
            _ => args.extend(["-F".into(), format!("--grep={query}")]),
        }
        args.extend(["--format=%H".into(), range.clone()]);
        let t = std::time::Instant::now();
        let out = std::process::Command::new("git")
            .args(&args)
            .output()
            .unwrap();
        let git = t.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|c| bounded_to.as_ref().is_none_or(|set| set.contains(*c)))
            .map(str::to_owned)
            .collect();
        let ours_all = commits(&pages);
        eprintln!(
            "{kind:?} {query:?}: first page {ours:?} (again {warm:?}; {} hits, {} commits verified), all {} pages {paged:?}; git log {git:?}; {} commits, same list as git's: {}",
            page.repos[0].hits.len(),
            page.stats.files_verified,
            pages.len(),
            theirs.len(),
            ours_all == theirs
        );
        if ours_all != theirs {
            let ours_set: BTreeSet<&String> = ours_all.iter().collect();
            let theirs_set: BTreeSet<&String> = theirs.iter().collect();
            eprintln!(
                "  only ours: {:?}\n  only git's: {:?}",
                ours_set.difference(&theirs_set).take(5).collect::<Vec<_>>(),
                theirs_set.difference(&ours_set).take(5).collect::<Vec<_>>()
            );
        }
    }
}

/// `text` as a POSIX extended regular expression matching it literally.
fn ere_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.[]()*+?{}|^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// S-9: `git log`'s order where committer dates tie (a merge of two branches whose commits
/// all carry one date): among equal dates the commit queued first comes first, as git's
/// walk does.
#[tokio::test]
async fn s9_equal_dates_keep_git_log_order() {
    tokio::time::timeout(TIMEOUT, async {
        let repo = SourceRepo::new();
        let same_date = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .current_dir(repo.path())
                .args(args)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_AUTHOR_NAME", "T")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "T")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .env("GIT_AUTHOR_DATE", "1700000000 +0000")
                .env("GIT_COMMITTER_DATE", "1700000000 +0000")
                .output()
                .expect("git runs");
            assert!(out.status.success(), "{args:?}");
        };
        let commit = |file: &str, message: &str| {
            repo.write(&[(file, message.as_bytes())]);
            same_date(&["add", "-A"]);
            same_date(&["commit", "-q", "-m", message]);
        };
        commit("a", "tick base");
        same_date(&["checkout", "-q", "-b", "left"]);
        commit("l1", "tick left 1");
        commit("l2", "tick left 2");
        same_date(&["checkout", "-q", "main"]);
        commit("r1", "tick right 1");
        commit("r2", "tick right 2");
        same_date(&["merge", "-q", "--no-ff", "-m", "tick merge", "left"]);
        commit("r3", "tick after");
        let service = service_for(&repo).await;
        let pages = all_pages(&service, request(SearchKind::Commit, "tick")).await;
        assert_eq!(commits(&pages), git_list(&repo, &["--grep=tick"]));
        assert_eq!(commits(&pages).len(), 7);
    })
    .await
    .expect("within the timeout");
}

/// O-9, issue 42: a search at a revision the history index does not hold walks that
/// revision's history under the call's budget. Past its deadline the call answers that it
/// ran out of time, and the walk stops with it: the search slot the work holds is free again
/// at once, not when the walk of the whole history would have ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o9_a_revision_history_walk_stops_at_the_calls_deadline() {
    tokio::time::timeout(TIMEOUT, async {
        let repo = SourceRepo::new();
        testgit::fastimport::linear(repo.path(), 200_000, "f.txt", |n| format!("{n}\n"));
        // No history index at all: the revision's whole history is walked live (and, were it
        // walked to the end, found not indexed).
        let service = Service::new(repo.store(REPO, ""), ServiceConfig::default());
        let older = repo.git(&["rev-parse", "main~20"]);
        let cost = service::Cost::when_heavy(service::Class::Search, Duration::from_millis(200));
        let ctx = ctx().with_cost(cost);
        let req = SearchRequest {
            repo: Some(REPO.into()),
            revision: Some(older),
            ..request(SearchKind::Commit, "commit 5")
        };
        let error = service
            .search(&ctx, req)
            .await
            .expect_err("past its deadline");
        assert_eq!(error.kind, ErrorKind::TimedOut, "{}", error.message);
        let stopped = std::time::Instant::now();
        let busy = || {
            service
                .admission_stats()
                .into_iter()
                .find(|s| s.class == service::Class::Search)
                .map_or(0, |s| s.busy)
        };
        while busy() > 0 {
            assert!(
                stopped.elapsed() < Duration::from_millis(500),
                "the walk went on after its call answered"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("within its bound");
}
