//! The file pages over real HTTP on 127.0.0.1 (issue 34, points 1 and 6): the raw route's
//! exact bytes and headers, compared with `git cat-file` of the source; the blob page's
//! highlighting, definition links from the search index, binary and large files.

mod sitecommon;

use service::{Service, ServiceConfig};
use std::time::Duration;
use testgit::SourceRepo;

const REPO: &str = "acme/blob";
const LIB_RS: &[u8] = b"//! Core.\n\n/// A priced item.\npub struct Item {\n    pub cents: u64,\n}\n\n/// The total.\npub fn total(items: &[Item]) -> u64 {\n    items.iter().map(|i| i.cents).sum()\n}\n";
const CHECKOUT_RS: &[u8] = b"use crate::{total, Item};\n\npub fn pay(items: &[Item]) -> u64 {\n    total(items) + 499 // \"<script>\" total, Item\n}\n";
const BINARY: &[u8] = &[0, 1, 2, 3, 0, 255, 254, 0, b'<', b'h', b'>'];

struct Site {
    source: SourceRepo,
    base: String,
    client: reqwest::Client,
}

/// A private repository when `private`; anonymous callers then see nothing of it.
async fn site(private: bool) -> Site {
    let hostile_text = "<script>window.__pwned = true</script>\n".repeat(3);
    let source = SourceRepo::with_files(&[
        ("src/lib.rs", LIB_RS),
        ("src/checkout.rs", CHECKOUT_RS),
        ("img/data.bin", BINARY),
        ("notes/<b>.txt", hostile_text.as_bytes()),
        ("latin1.txt", b"caf\xe9\n"),
    ]);
    let store = source.store(REPO, "");
    store
        .set_private(&gitstore::RepoName::parse(REPO).unwrap(), private)
        .unwrap();
    let users = std::sync::Arc::new(access::AccessStore::open(&store.metadata_path()).unwrap());
    let service = Service::new(store, ServiceConfig::default());
    service.index(REPO.into(), |_| {}).await.unwrap();
    let base = sitecommon::serve_site(service, users).await;
    Site {
        source,
        base,
        client: sitecommon::visitor(),
    }
}

impl Site {
    async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}/sourcegraph/repos/{REPO}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    async fn page(&self, path: &str) -> (u16, String) {
        let response = self.get(path).await;
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// The bytes `git` has for `path` at HEAD of the source.
    fn git_bytes(&self, path: &str) -> Vec<u8> {
        testgit::git_raw(
            self.source.path(),
            &["cat-file", "blob", &format!("HEAD:{path}")],
            None,
        )
        .stdout
    }
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn bounded(test: impl Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(120), test)
        .await
        .expect("the test finished within 120 s");
}

/// Issue 34, point 6: text is served as `text/plain; charset=utf-8`, byte for byte as git
/// has it, never sniffed and sandboxed.
#[tokio::test]
async fn raw_serves_text_exactly_with_safe_headers() {
    bounded(async {
        let site = site(false).await;
        for path in ["src/lib.rs", "notes/%3Cb%3E.txt"] {
            let response = site.get(&format!("/-/raw/main/{path}")).await;
            assert_eq!(response.status(), 200, "{path}");
            assert_eq!(
                header(&response, "content-type"),
                "text/plain; charset=utf-8"
            );
            assert_eq!(header(&response, "x-content-type-options"), "nosniff");
            assert_eq!(header(&response, "content-security-policy"), "sandbox");
            let decoded = percent_decode(path);
            let expected = site.git_bytes(&decoded);
            assert_eq!(response.bytes().await.unwrap().to_vec(), expected, "{path}");
        }
    })
    .await;
}

fn percent_decode(path: &str) -> String {
    path.replace("%3C", "<").replace("%3E", ">")
}

/// Issue 34, point 6: a binary (and a non-UTF-8) file is `application/octet-stream`, byte
/// for byte.
#[tokio::test]
async fn raw_serves_binary_as_octet_stream() {
    bounded(async {
        let site = site(false).await;
        for path in ["img/data.bin", "latin1.txt"] {
            let response = site.get(&format!("/-/raw/main/{path}")).await;
            assert_eq!(response.status(), 200);
            assert_eq!(
                header(&response, "content-type"),
                "application/octet-stream"
            );
            assert_eq!(header(&response, "x-content-type-options"), "nosniff");
            assert_eq!(header(&response, "content-security-policy"), "sandbox");
            let expected = site.git_bytes(path);
            assert_eq!(response.bytes().await.unwrap().to_vec(), expected);
        }
    })
    .await;
}

/// Issue 34, point 6 and A-4: raw is permission-checked like `read`: a private repository
/// is unknown to an anonymous caller, and a missing file is a 404 page, not bytes.
#[tokio::test]
async fn raw_is_permission_checked() {
    bounded(async {
        let private = site(true).await;
        let response = private.get("/-/raw/main/src/lib.rs").await;
        assert_ne!(response.status(), 200);
        let body = response.text().await.unwrap();
        assert!(!body.contains("pub fn total"), "{body}");
        let public = site(false).await;
        let (status, body) = public.page("/-/raw/main/no/such.rs").await;
        assert_eq!(status, 404, "{body}");
    })
    .await;
}

/// Issue 34, point 6: a file over the raw cap is refused with what to do.
#[tokio::test]
async fn raw_refuses_a_file_over_its_cap() {
    bounded(async {
        let big = vec![b'a'; service::RAW_MAX_BYTES as usize + 1];
        let fresh = SourceRepo::with_files(&[("big.txt", &big)]);
        let store = fresh.store(REPO, "");
        let service = Service::new(store, ServiceConfig::default());
        let answer = service
            .raw(
                &service::CallContext::default(),
                service::RawRequest {
                    repo: REPO.into(),
                    revision: None,
                    path: "big.txt".into(),
                },
            )
            .await
            .unwrap_err();
        assert!(
            answer.message.contains("over the") && answer.message.contains("clone the repository"),
            "{}",
            answer.message
        );
    })
    .await;
}

/// Issue 34, point 1: the blob page shows highlighted tokens (escaped), links `total` in
/// checkout.rs to its definition's line in lib.rs at the indexed commit, and has Raw, Blame
/// and History links.
#[tokio::test]
async fn blob_page_highlights_and_links_definitions() {
    bounded(async {
        let site = site(false).await;
        let head = site.source.head();
        let (status, page) = site.page("/-/blob/main/src/checkout.rs").await;
        assert_eq!(status, 200);
        assert!(page.contains("<span class=\"hl-keyword\">pub</span>"), "{page}");
        assert!(page.contains("hl-comment"), "{page}");
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;"));
        let link = format!(
            "<a class=\"def\" href=\"/sourcegraph/repos/{REPO}/-/blob/{head}/src/lib.rs#L9\">total</a>"
        );
        assert!(page.contains(&link), "no {link} in {page}");
        assert!(page.contains(&format!("/sourcegraph/repos/{REPO}/-/raw/{head}/src/checkout.rs")));
        assert!(page.contains(&format!("/sourcegraph/repos/{REPO}/-/blame/main/src/checkout.rs")));
        assert!(page.contains(&format!("/sourcegraph/repos/{REPO}/-/commits/main/src/checkout.rs")));
        // Names in comments are not links, though they are defined (the first view looks
        // the raw text's names up while highlighting, comments included).
        assert!(
            page.contains("<span class=\"hl-comment\">// &quot;&lt;script&gt;&quot; total, Item</span>"),
            "{page}"
        );
        // A second view (highlighting and lookups kept) is the same page.
        let (_, again) = site.page("/-/blob/main/src/checkout.rs").await;
        assert_eq!(again, page);
        // Its own definition line is not a link to itself.
        let (_, lib) = site.page("/-/blob/main/src/lib.rs").await;
        assert!(!lib.contains("src/lib.rs#L9\">total</a>"), "{lib}");
    })
    .await;
}

/// Issue 34, point 1: a binary file's page says so and offers the raw file.
#[tokio::test]
async fn blob_page_of_a_binary_file_offers_raw() {
    bounded(async {
        let site = site(false).await;
        let head = site.source.head();
        let (status, page) = site.page("/-/blob/main/img/data.bin").await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("Binary file"), "{page}");
        assert!(page.contains(&format!(
            "/sourcegraph/repos/{REPO}/-/raw/{head}/img/data.bin"
        )));
    })
    .await;
}

/// Issue 34, point 1: `Service::highlight` is "lines of the file at commit X" (what the
/// commit page calls for both sides of a diff): an older commit by full SHA, a line window,
/// tokens that are exactly the lines `git show` has, and the same checks as `read`.
#[tokio::test]
async fn highlight_answers_lines_of_a_file_at_a_commit() {
    bounded(async {
        let source = SourceRepo::with_files(&[("src/lib.rs", LIB_RS), ("img/data.bin", BINARY)]);
        let old = source.head();
        source.commit(&[("src/lib.rs", b"pub fn other() {}\n")], "rewrite");
        let store = source.store(REPO, "");
        let service = Service::new(store, ServiceConfig::default());
        let ctx = service::CallContext::default();
        let request = |revision: &str, path: &str| service::HighlightRequest {
            repo: REPO.into(),
            revision: Some(revision.into()),
            path: path.into(),
            start_line: Some(4),
            max_lines: Some(3),
            ..service::HighlightRequest::default()
        };
        let answer = service
            .highlight(&ctx, request(&old, "src/lib.rs"))
            .await
            .unwrap();
        assert_eq!(answer.commit, old);
        assert_eq!(answer.lang, Some("rust"));
        let service::HighlightedFile::Text(text) = answer.file else {
            panic!("src/lib.rs is text");
        };
        assert_eq!(text.status, service::HighlightStatus::Highlighted);
        let shown = testgit::git(source.path(), &["show", &format!("{old}:src/lib.rs")]);
        let expected: Vec<&str> = shown.lines().skip(3).take(3).collect();
        let lines: Vec<String> = text
            .lines
            .iter()
            .map(|l| l.pieces().map(|(text, _)| text).collect())
            .collect();
        assert_eq!(lines, expected);
        assert_eq!(
            text.lines.iter().map(|l| l.number).collect::<Vec<_>>(),
            [4, 5, 6]
        );
        assert_eq!(text.next_start_line, Some(7));
        assert_eq!(text.total_lines, shown.lines().count() as u64);
        assert!(
            text.lines[0]
                .pieces()
                .any(|(text, t)| text == "pub" && t.class == Some("hl-keyword")),
            "{:?}",
            text.lines[0]
        );
        // A binary file says so instead of failing.
        let binary = service
            .highlight(&ctx, request("HEAD", "img/data.bin"))
            .await
            .unwrap();
        assert_eq!(
            binary.file,
            service::HighlightedFile::Binary {
                size: BINARY.len() as u64
            }
        );
        // Counted as file views of their own, not as the `read` tool.
        service
            .raw(
                &ctx,
                service::RawRequest {
                    repo: REPO.into(),
                    revision: None,
                    path: "src/lib.rs".into(),
                },
            )
            .await
            .unwrap();
        let stats = service.stats();
        assert_eq!(
            (stats.highlight.calls, stats.raw.calls, stats.read.calls),
            (2, 1, 0)
        );
        // A private repository is unknown to an anonymous caller, as for `read`.
        let private = SourceRepo::with_files(&[("src/lib.rs", LIB_RS)]);
        let store = private.store(REPO, "");
        store
            .set_private(&gitstore::RepoName::parse(REPO).unwrap(), true)
            .unwrap();
        let service = Service::new(store, ServiceConfig::default());
        let anonymous = service::CallContext {
            caller: service::Caller::Anonymous,
            ..service::CallContext::default()
        };
        let refused = service
            .highlight(&anonymous, request("HEAD", "src/lib.rs"))
            .await
            .unwrap_err();
        let read = service
            .read(
                &anonymous,
                service::ReadRequest {
                    repo: REPO.into(),
                    revision: Some("HEAD".into()),
                    path: "src/lib.rs".into(),
                    start_line: None,
                    end_line: None,
                    plugins: None,
                },
            )
            .await
            .unwrap_err();
        assert_eq!((refused.kind, refused.message), (read.kind, read.message));
    })
    .await;
}
