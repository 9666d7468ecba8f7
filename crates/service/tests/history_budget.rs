//! `log` and `blame` under their budgets (O-9, issue 42 points 2 and 4), in a long history
//! made with `git fast-import`: a page of a path that changes rarely or never answers
//! partially within its budget with a cursor that goes on where its walk stopped, the pages
//! together are `git log -- path`; forged, altered, foreign and old-form cursors are refused
//! before anything is walked; blame past its deadline answers "ran out of time" with how to
//! narrow it.

use service::{
    BlameRequest, CallContext, Class, Cost, ErrorKind, LogAnswer, LogRequest, Service,
    ServiceConfig, ServiceError,
};
use std::time::{Duration, Instant};
use testgit::SourceRepo;
use testgit::fastimport::{Change, Stream};

const REPO: &str = "acme/long";
/// Commits in the history.
const COMMITS: u64 = 10_000;
/// Where `rare.txt` changes.
const RARE_AT: [u64; 3] = [3, 4_000, 9_000];

/// A linear history of [`COMMITS`] commits: `hot.txt` changes in each, `rare.txt` at
/// [`RARE_AT`], `stable.txt` (200 lines) only in the first.
fn long_history() -> SourceRepo {
    let repo = SourceRepo::new();
    let mut stream = Stream::importing(repo.path());
    let stable: String = (0..200).map(|i| format!("stable {i}\n")).collect();
    for n in 1..=COMMITS {
        let mut changes = vec![Change::Write("hot.txt".into(), format!("{n}\n"))];
        if n == 1 {
            changes.push(Change::Write("stable.txt".into(), stable.clone()));
        }
        if RARE_AT.contains(&n) {
            changes.push(Change::Write("rare.txt".into(), format!("rare {n}\n")));
        }
        stream.next(1_700_000_000 + n as i64, &changes);
    }
    stream.finish();
    repo
}

fn git_log(repo: &SourceRepo, path: &str) -> Vec<String> {
    repo.git(&["log", "--format=%H", "--", path])
        .lines()
        .map(str::to_owned)
        .collect()
}

fn log(path: &str, cursor: Option<String>) -> LogRequest {
    LogRequest {
        repo: REPO.into(),
        path: Some(path.into()),
        limit: Some(50),
        cursor,
        ..LogRequest::default()
    }
}

/// One `log` call under `cost` (its budget starts now), with a hang guard.
async fn page(
    service: &Service,
    cost: Cost,
    request: LogRequest,
) -> Result<LogAnswer, ServiceError> {
    let ctx = CallContext::default().with_cost(cost);
    tokio::time::timeout(Duration::from_secs(60), service.log(&ctx, request))
        .await
        .expect("the log call answered")
}

/// Every page of the log of `path` under `cost`: the commits, the pages' sizes and whether
/// each was partial.
async fn all_pages(service: &Service, cost: Cost, path: &str) -> (Vec<String>, Vec<(usize, bool)>) {
    let mut commits = Vec::new();
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let answer = page(service, cost, log(path, cursor)).await.unwrap();
        pages.push((answer.commits.len(), answer.partial));
        commits.extend(answer.commits.into_iter().map(|c| c.commit));
        cursor = answer.next_cursor;
        if cursor.is_none() {
            return (commits, pages);
        }
        assert!(pages.len() < 10_000, "the pages never end");
    }
}

/// Issue 42 point 4: the log of a path that never changed answers a partial page with no
/// commits and a cursor within its budget — at its walk bound, or at its soft deadline —
/// and the pages go on to the end; so does a rarely changed path's, and both equal
/// `git log -- path`.
#[tokio::test]
async fn issue42_log_answers_partial_pages_within_its_budget() {
    let source = long_history();
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let by_walk = Cost::heavy(Class::History, Duration::from_secs(20)).walking(1_500, 100);
    let started = Instant::now();
    let first = page(&service, by_walk, log("missing.txt", None))
        .await
        .unwrap();
    assert!(first.commits.is_empty() && first.partial, "{first:?}");
    assert!(first.next_cursor.is_some());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "within its budget"
    );
    for path in ["missing.txt", "rare.txt"] {
        let (commits, pages) = all_pages(&service, by_walk, path).await;
        assert_eq!(commits, git_log(&source, path), "{path}");
        assert!(pages.len() >= 6, "{path}: {pages:?}");
        assert!(
            pages[..pages.len() - 1].iter().all(|p| p.1),
            "{path}: {pages:?}"
        );
    }
    // By time: the soft deadline (4 ms of 400 ms) ends each page. (At 40 ms a warm walk of
    // the whole history fit in it on a fast run, and the page was whole, not partial.)
    let by_time = Cost::heavy(Class::History, Duration::from_millis(400)).walking(u64::MAX, 1);
    let started = Instant::now();
    let first = page(&service, by_time, log("missing.txt", None))
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(first.partial && first.next_cursor.is_some(), "{first:?}");
    assert!(
        took < Duration::from_secs(4),
        "answered long before any hang: {took:?}"
    );
    let (commits, _) = all_pages(&service, by_time, "rare.txt").await;
    assert_eq!(commits, git_log(&source, "rare.txt"));
}

/// Issue 42 point 4: a cursor is signed and bound to its log: an altered one, one of another
/// path, one of the old form and nonsense are refused with what to do, before any walk.
#[tokio::test]
async fn issue42_forged_and_old_cursors_are_refused() {
    let source = long_history();
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let cost = Cost::heavy(Class::History, Duration::from_secs(20)).walking(1_500, 100);
    let first = page(&service, cost, log("missing.txt", None))
        .await
        .unwrap();
    let cursor = first.next_cursor.expect("a cursor");
    // Another character in the middle: still base64url, no longer what the server signed.
    let mut altered: Vec<char> = cursor.chars().collect();
    altered[12] = if altered[12] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    let old = format!("{}.150000", first.commit);
    let cases = [
        (
            log("missing.txt", Some(altered)),
            "altered or made by another server",
        ),
        (
            log("rare.txt", Some(cursor.clone())),
            "another repository or path",
        ),
        (log("missing.txt", Some(old)), "older form"),
        (
            log("missing.txt", Some("x".repeat(5_000))),
            "invalid cursor",
        ),
        (
            LogRequest {
                follow: true,
                ..log("missing.txt", Some(cursor))
            },
            "other `follow` setting",
        ),
    ];
    for (request, expected) in cases {
        let started = Instant::now();
        let error = page(&service, cost, request).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidArgument, "{}", error.message);
        assert!(error.message.contains(expected), "{}", error.message);
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}

/// Issue 42 point 2: a blame that runs past its deadline answers "ran out of time" with how
/// to narrow it (fewer lines, a more recent revision).
#[tokio::test]
async fn issue42_blame_past_its_deadline_says_how_to_narrow_it() {
    let source = long_history();
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let ctx =
        CallContext::default().with_cost(Cost::heavy(Class::Blame, Duration::from_millis(30)));
    let request = BlameRequest {
        repo: REPO.into(),
        revision: None,
        path: "stable.txt".into(),
        start_line: Some(1),
        end_line: Some(200),
    };
    let error = tokio::time::timeout(
        Duration::from_secs(60),
        service.blame(&ctx, request.clone()),
    )
    .await
    .expect("blame answered")
    .unwrap_err();
    assert_eq!(error.kind, ErrorKind::TimedOut, "{}", error.message);
    assert!(
        error.message.contains("blame fewer lines")
            && error.message.contains("more recent `revision`"),
        "{}",
        error.message
    );
    // With time enough, it answers: every line from the first commit.
    let answer = service
        .blame(&CallContext::default(), request)
        .await
        .unwrap();
    let root = source.git(&["rev-list", "--max-parents=0", "HEAD"]);
    assert_eq!(answer.ranges.len(), 1);
    assert_eq!(answer.ranges[0].commit.commit, root);
}
