//! The history index (S-9) over an in-memory history: incremental updates read only new
//! commits, segments merge past the cap, pages follow the order to the end with the
//! cursor, filters, a tip not indexed is read from the source, and concurrent updates from
//! several threads (standing in for processes) leave one consistent index.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use search::{
    HistoryIndexes, HistoryKind, HistoryLine, HistoryRecord, HistoryRequest, HistorySource,
    MAX_SEGMENTS,
};

/// A linear history: commit `i` (0 oldest) has parent `i - 1`; tips are indexes.
struct Fake {
    records: Mutex<Vec<HistoryRecord>>,
    reads: AtomicUsize,
}

fn sha(i: usize) -> String {
    format!("{:040x}", i + 1)
}

fn record(i: usize) -> HistoryRecord {
    let author = if i.is_multiple_of(2) {
        "Alice <alice@example.invalid>"
    } else {
        "Bob <bob@example.invalid>"
    };
    let mut lines = vec![HistoryLine {
        path: format!("src/f{}.rs", i % 3),
        added: true,
        line: i as u32 + 1,
        text: format!("let value_{i} = {i};"),
    }];
    if i.is_multiple_of(5) {
        lines.push(HistoryLine {
            path: "docs/readme.md".into(),
            added: false,
            line: 7,
            text: format!("old Needle {i}"),
        });
    }
    HistoryRecord {
        commit: sha(i),
        parents: usize::from(i > 0),
        author: author.into(),
        author_time: 1_600_000_000 + i as i64 * 86_400,
        author_offset: 3600,
        committer_time: 1_600_000_000 + i as i64 * 86_400,
        message: format!("commit {i}: change f{}\n\nbody of {i}", i % 3),
        changed: vec![lines.iter().map(|l| l.path.clone()).collect()],
        lines,
    }
}

impl Fake {
    fn new(n: usize) -> Self {
        Fake {
            records: Mutex::new((0..n).map(record).collect()),
            reads: AtomicUsize::new(0),
        }
    }

    fn grow(&self, n: usize) {
        let mut records = self.records.lock().unwrap();
        let from = records.len();
        records.extend((from..from + n).map(record));
    }
}

impl HistorySource for Fake {
    fn walk(&self, tip: &str, max: usize) -> Result<Vec<String>, String> {
        let records = self.records.lock().unwrap();
        let at = records
            .iter()
            .position(|r| r.commit == tip)
            .ok_or("unknown tip")?;
        Ok((0..=at).rev().take(max).map(sha).collect())
    }

    fn commit(&self, commit: &str) -> Result<HistoryRecord, String> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let records = self.records.lock().unwrap();
        records
            .iter()
            .find(|r| r.commit == commit)
            .cloned()
            .ok_or_else(|| "unknown commit".into())
    }
}

fn request(kind: HistoryKind, query: &str, tip: &str) -> HistoryRequest {
    HistoryRequest {
        kind,
        query: query.into(),
        regex: false,
        case_sensitive: false,
        tip: tip.into(),
        author: None,
        since: None,
        until: None,
        path: None,
        limit: 7,
        cursor: None,
        count: false,
        depth: None,
    }
}

/// Every page to the end: (commit, line) of each hit.
fn all(
    index: &HistoryIndexes,
    source: &Fake,
    mut req: HistoryRequest,
) -> Vec<(String, Option<u32>)> {
    let mut out = Vec::new();
    loop {
        let page = index.search_history("o/r", &req, source).unwrap();
        assert!(page.hits.len() <= req.limit);
        out.extend(page.hits.iter().map(|h| (h.commit.clone(), h.line)));
        match page.next_cursor {
            Some(cursor) => req.cursor = Some(cursor),
            None => return out,
        }
    }
}

#[test]
fn s9_incremental_updates_merge_and_page_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let index = HistoryIndexes::new(dir.path());
    let source = Fake::new(40);
    let stats = index
        .update("o/r", &sha(39), None, &source, &mut |_, _| {})
        .unwrap();
    assert_eq!((stats.commits, stats.added), (40, 40));
    assert_eq!(source.reads.load(Ordering::SeqCst), 40);
    assert!(
        index
            .update("o/r", &sha(39), None, &source, &mut |_, _| {})
            .unwrap()
            .skipped_same
    );
    // Updates one commit at a time: each reads only the new one; past the cap they merge.
    let mut merged = false;
    for step in 0..MAX_SEGMENTS + 2 {
        source.grow(1);
        let tip = sha(40 + step);
        let before = source.reads.load(Ordering::SeqCst);
        let stats = index
            .update("o/r", &tip, None, &source, &mut |_, _| {})
            .unwrap();
        assert_eq!(stats.added, 1);
        assert_eq!(source.reads.load(Ordering::SeqCst), before + 1);
        merged |= stats.merged;
    }
    assert!(merged, "segments merged past the cap");
    let n = 40 + MAX_SEGMENTS + 2;
    let tip = sha(n - 1);
    assert_eq!(index.indexed_tip("o/r"), Some(tip.clone()));

    // Diff search: every commit adds `value_i`; newest first, one hit each.
    let hits = all(&index, &source, request(HistoryKind::Diff, "value_", &tip));
    let want: Vec<(String, Option<u32>)> =
        (0..n).rev().map(|i| (sha(i), Some(i as u32 + 1))).collect();
    assert_eq!(hits, want);
    // Removed lines, case-insensitive by default; case-sensitive finds none in lowercase.
    let needles = all(&index, &source, request(HistoryKind::Diff, "needle", &tip));
    assert_eq!(needles.len(), (0..n).filter(|i| i % 5 == 0).count());
    let sensitive = HistoryRequest {
        case_sensitive: true,
        ..request(HistoryKind::Diff, "needle", &tip)
    };
    assert!(all(&index, &source, sensitive).is_empty());
    // Path filters: a prefix and a glob.
    let docs = HistoryRequest {
        path: Some("docs".into()),
        ..request(HistoryKind::Diff, "e", &tip)
    };
    assert_eq!(all(&index, &source, docs).len(), needles.len());
    let glob = HistoryRequest {
        path: Some("src/f1.*".into()),
        ..request(HistoryKind::Diff, "value", &tip)
    };
    assert_eq!(
        all(&index, &source, glob).len(),
        (0..n).filter(|i| i % 3 == 1).count()
    );
    // Commit search with author and dates (committer date i days after the start).
    let bob = HistoryRequest {
        author: Some("bob@".into()),
        since: Some("2020-09-23".into()),
        until: Some("2020-10-02T23:59:59Z".into()),
        ..request(HistoryKind::Commit, "change", &tip)
    };
    let found = all(&index, &source, bob);
    // 1_600_000_000 is 2020-09-13T12:26:40Z: days 10..=19 are in the window, odd ones Bob's.
    let want: Vec<(String, Option<u32>)> = (10..=19)
        .rev()
        .filter(|i| i % 2 == 1)
        .map(|i| (sha(i), None))
        .collect();
    assert_eq!(found, want);
    // count: exact total on the first page.
    let counted = index
        .search_history(
            "o/r",
            &HistoryRequest {
                count: true,
                ..request(HistoryKind::Diff, "value_", &tip)
            },
            &source,
        )
        .unwrap();
    assert_eq!((counted.total_hits, counted.total_exact), (n as u64, true));
}

#[test]
fn s9_a_tip_not_indexed_reads_only_its_new_commits() {
    let dir = tempfile::tempdir().unwrap();
    let index = HistoryIndexes::new(dir.path());
    let source = Fake::new(30);
    index
        .update("o/r", &sha(19), None, &source, &mut |_, _| {})
        .unwrap();
    let before = source.reads.load(Ordering::SeqCst);
    let page = index
        .search_history(
            "o/r",
            &request(HistoryKind::Diff, "value_2", &sha(29)),
            &source,
        )
        .unwrap();
    assert_eq!(page.live_commits, 10);
    assert_eq!(source.reads.load(Ordering::SeqCst), before + 10);
    let commits: Vec<&str> = page.hits.iter().map(|h| h.commit.as_str()).collect();
    let want: Vec<String> = [29, 28, 27, 26, 25, 24, 23].into_iter().map(sha).collect();
    assert_eq!(commits, want);
    assert_eq!(page.tip, sha(29));
    // The cursor is bound to the tip and the query.
    let cursor = page.next_cursor.unwrap();
    assert_eq!(search::history_cursor_tip(&cursor).unwrap(), sha(29));
    let other = HistoryRequest {
        cursor: Some(cursor),
        ..request(HistoryKind::Diff, "value_3", &sha(29))
    };
    assert!(index.search_history("o/r", &other, &source).is_err());
}

#[test]
fn s9_concurrent_updates_publish_one_consistent_index() {
    let dir = tempfile::tempdir().unwrap();
    let source = Fake::new(300);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let source = &source;
            let dir = dir.path();
            scope.spawn(move || {
                let index = HistoryIndexes::new(dir);
                for tip in [100 + t * 10, 299] {
                    index
                        .update("o/r", &sha(tip), None, source, &mut |_, _| {})
                        .unwrap();
                }
            });
        }
        // Searches meanwhile never fail: each reads a published snapshot.
        let index = HistoryIndexes::new(dir.path());
        for _ in 0..20 {
            if index.indexed_tip("o/r").is_some() {
                let tip = index.indexed_tip("o/r").unwrap();
                let page = index.search_history(
                    "o/r",
                    &request(HistoryKind::Commit, "commit", &tip),
                    &source,
                );
                assert!(page.is_ok(), "{page:?}");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
    let index = HistoryIndexes::new(dir.path());
    assert_eq!(index.indexed_tip("o/r"), Some(sha(299)));
    let hits = all(
        &index,
        &source,
        request(HistoryKind::Diff, "value_", &sha(299)),
    );
    assert_eq!(hits.len(), 300);
    let distinct: HashMap<_, _> = hits.iter().map(|h| (h.0.clone(), ())).collect();
    assert_eq!(distinct.len(), 300);
}

#[test]
fn s9_errors_say_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let index = HistoryIndexes::new(dir.path());
    let source = Fake::new(3);
    let tip = sha(2);
    let fails = |req: HistoryRequest| index.search_history("o/r", &req, &source).unwrap_err();
    let e = fails(HistoryRequest {
        since: Some("yesterday".into()),
        ..request(HistoryKind::Commit, "x", &tip)
    });
    assert!(e.to_string().contains("YYYY-MM-DD"), "{e}");
    assert!(e.is_invalid_request());
    let e = fails(HistoryRequest {
        regex: true,
        ..request(HistoryKind::Diff, "a(", &tip)
    });
    assert!(e.to_string().contains("regular expression"), "{e}");
    let e = fails(request(HistoryKind::Diff, "", &tip));
    assert!(e.to_string().contains("empty"), "{e}");
    let e = fails(HistoryRequest {
        cursor: Some("zz".into()),
        ..request(HistoryKind::Diff, "x", &tip)
    });
    assert!(e.to_string().contains("cursor"), "{e}");
}
