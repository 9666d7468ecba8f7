//! Issue 42 point 5 through the service: a read of a file over the text cap is refused from
//! its object header with what to do instead; 16 concurrent pages of a ~40 MB file share one
//! decode; a `read_many` of 50 items of it decodes it once; the diff of the commit adding it
//! is one budget-sized page.

use gitstore::GitStore;
use service::{
    CallContext, ErrorKind, FileRange, ReadManyRequest, ReadRequest, Service, ServiceConfig,
};
use std::time::Duration;
use testgit::SourceRepo;

const REPO: &str = "test/repo";
const BIG: &str = "data/big.txt";
const MIB: u64 = 1024 * 1024;
const LINES: u64 = 760_000;

struct Fixture {
    _source: SourceRepo,
    store: GitStore,
    service: Service,
    /// The commit adding the big file.
    adding: String,
}

/// A repository whose second commit adds ~40 MB of text in 760,000 numbered lines.
fn fixture() -> Fixture {
    fixture_with(ServiceConfig {
        // Every one of a test's concurrent reads may hold a slot.
        heavy_calls: 64,
        ..ServiceConfig::default()
    })
}

/// [`fixture`] with the service configured as `config`.
fn fixture_with(config: ServiceConfig) -> Fixture {
    let source = SourceRepo::with_files(&[("README.md", b"small\n")]);
    let text = testgit::numbered_lines(LINES);
    let adding = source.commit(&[(BIG, text.as_bytes())], "add a big file");
    let store = source.store(REPO, "");
    let service = Service::new(store.clone(), config);
    Fixture {
        _source: source,
        store,
        service,
        adding,
    }
}

fn page(start: u64, end: u64) -> ReadRequest {
    ReadRequest {
        repo: REPO.into(),
        revision: None,
        path: BIG.into(),
        start_line: Some(start),
        end_line: Some(end),
        plugins: None,
    }
}

async fn bounded<T>(secs: u64, test: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), test)
        .await
        .unwrap_or_else(|_| panic!("the test finished within {secs} s"))
}

/// Issue 42 point 5: over the cap, `read` and `read_many` refuse the file from its header
/// (nothing inflated) and say what to do; the item of a batch fails alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue42_a_read_over_the_cap_is_refused_before_inflating() {
    bounded(120, async {
        let f = fixture();
        f.store.set_max_text_bytes(MIB);
        let ctx = CallContext::default();
        let decodes = f.store.blob_decodes();
        let refused = f.service.read(&ctx, page(1, 500)).await.unwrap_err();
        assert_eq!(refused.kind, ErrorKind::InvalidArgument);
        assert!(
            refused
                .message
                .contains("over the 1048576 bytes this server reads as text")
                && refused.message.contains("raw view")
                && refused.message.contains("`search`"),
            "{}",
            refused.message
        );
        let batch = ReadManyRequest {
            repo: REPO.into(),
            revision: None,
            files: vec![
                FileRange {
                    path: BIG.into(),
                    start_line: Some(1),
                    end_line: Some(1),
                },
                FileRange {
                    path: "README.md".into(),
                    start_line: None,
                    end_line: None,
                },
            ],
            plugins: None,
        };
        let answer = f.service.read_many(&ctx, batch).await.unwrap();
        assert!(
            answer.items[0]
                .outcome
                .as_ref()
                .unwrap_err()
                .contains("raw view")
        );
        assert_eq!(answer.items[1].outcome.as_ref().unwrap().content, "small\n");
        assert_eq!(f.store.blob_decodes() - decodes, 1, "only the small file");
    })
    .await;
}

/// Issue 42 point 5: 16 concurrent 500-line pages of the file (under a raised cap) answer
/// from one decode. With the default slots (one client holds one `large_read` slot), the
/// calls that wait for the slot while another decodes answer from that decode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue42_sixteen_concurrent_pages_share_one_decode() {
    bounded(300, async {
        let f = fixture_with(ServiceConfig {
            heavy_calls: 2,
            ..ServiceConfig::default()
        });
        f.store.set_max_text_bytes(64 * MIB);
        let decodes = f.store.blob_decodes();
        let mut calls = tokio::task::JoinSet::new();
        for n in 0..16u64 {
            let service = f.service.clone();
            calls.spawn(async move {
                let start = 1 + n * 40_000;
                let item = service
                    .read(&CallContext::default(), page(start, start + 499))
                    .await
                    .expect("a page");
                (start, item)
            });
        }
        while let Some(done) = calls.join_next().await {
            let (start, item) = done.expect("no panic");
            let range = item.outcome.expect("read");
            assert_eq!((range.start_line, range.total_lines), (start, LINES));
            assert!(range.content.starts_with(&format!("{:08} the", start - 1)));
        }
        assert_eq!(
            f.store.blob_decodes() - decodes,
            1,
            "one decode for 16 pages"
        );
    })
    .await;
}

/// Issue 42 point 5: one `read_many` of 50 one-line items of the file decodes it once, even
/// with the blob cache off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue42_read_many_decodes_each_blob_once() {
    bounded(300, async {
        let f = fixture();
        f.store.set_max_text_bytes(64 * MIB);
        f.store.set_blob_cache_bytes(0);
        let decodes = f.store.blob_decodes();
        let files = (0..50u64)
            .map(|n| FileRange {
                path: BIG.into(),
                start_line: Some(1 + n * 15_000),
                end_line: Some(1 + n * 15_000),
            })
            .collect();
        let batch = ReadManyRequest {
            repo: REPO.into(),
            revision: None,
            files,
            plugins: None,
        };
        let answer = f
            .service
            .read_many(&CallContext::default(), batch)
            .await
            .unwrap();
        assert_eq!(answer.items.len(), 50);
        for (n, item) in answer.items.iter().enumerate() {
            let range = item.outcome.as_ref().expect("read");
            assert_eq!(range.start_line, 1 + n as u64 * 15_000);
            assert!(
                range
                    .content
                    .starts_with(&format!("{:08} ", n as u64 * 15_000))
            );
        }
        assert_eq!(
            f.store.blob_decodes() - decodes,
            1,
            "one decode for 50 items"
        );
    })
    .await;
}

/// Issue 42 point 5: the commit adding the file is one page of its diff, cut at a line
/// within the read budget; over the cap, one line says the file is too large to diff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue42_the_diff_of_a_huge_file_is_a_budget_sized_page() {
    bounded(300, async {
        let f = fixture();
        let ctx = CallContext::default();
        let budget = f.service.config().read_budget;
        f.store.set_max_text_bytes(64 * MIB);
        let page = f
            .service
            .commit_diff(&ctx, REPO.into(), f.adding.clone(), None)
            .await
            .unwrap();
        assert_eq!(page.files.len(), 1);
        let file = &page.files[0];
        assert!(file.truncated && file.text.len() <= budget);
        assert!(file.text.ends_with("lazy dog\n"));
        assert_eq!(page.next_cursor, None);
        f.store.set_max_text_bytes(MIB);
        let page = f
            .service
            .commit_diff(&ctx, REPO.into(), f.adding.clone(), None)
            .await
            .unwrap();
        let file = &page.files[0];
        assert!(!file.truncated);
        assert!(
            file.text.contains("differ; file too large to diff"),
            "{}",
            file.text
        );
    })
    .await;
}
