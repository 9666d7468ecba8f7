//! The repository and tree pages over real HTTP on 127.0.0.1 (issue 34, points 5, 7, 8, 9):
//! the README rendered and sanitised with its URLs pinned to the full SHA, human-readable
//! sizes, permalinks at a branch, the Commits tab and the top bar's search box, under a CSP
//! without `unsafe-inline`. The repository is made with `git` in a temp dir.

mod sitecommon;

use service::{Service, ServiceConfig};
use std::time::Duration;
use testgit::SourceRepo;

const REPO: &str = "acme/readme";

const README: &str = "# Shop\n\n\
    A [guide](docs/guide.md), the [docs](docs/) and a logo: ![logo](img/logo.png) \
    ![gone](img/missing.png)\n\n\
    | Part | Language |\n| ---- | -------- |\n| core | Rust |\n\n\
    - [x] carts\n- [ ] refunds\n\n\
    <script>window.__pwned = true</script><img src=x onerror=\"window.__pwned = true\">\n\n\
    [click](javascript:window.__pwned=true) [out](../../etc/passwd) [web](https://example.com/)\n";

struct Site {
    source: SourceRepo,
    base: String,
    client: reqwest::Client,
}

async fn site() -> Site {
    let source = SourceRepo::with_files(&[
        ("README.md", README.as_bytes()),
        ("docs/guide.md", b"# Guide\n"),
        ("docs/README", b"plain <b>text</b> readme\n"),
        ("img/logo.png", b"\x89PNG\r\n\x1a\n"),
        ("big.txt", &[b'x'; 1234]),
    ]);
    let store = source.store(REPO, "");
    let users = std::sync::Arc::new(access::AccessStore::open(&store.metadata_path()).unwrap());
    let service = Service::new(store, ServiceConfig::default());
    let base = sitecommon::serve_site(service, users).await;
    Site {
        source,
        base,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap(),
    }
}

impl Site {
    async fn get(&self, path: &str) -> (u16, String, reqwest::header::HeaderMap) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let headers = response.headers().clone();
        (
            response.status().as_u16(),
            response.text().await.unwrap(),
            headers,
        )
    }
}

/// Issue 34 points 5, 7, 8, 9: the repository page renders the top README (table, task list)
/// with no script, handler or `javascript:` URL, links and images at the head's full SHA (an
/// image that is not in the repository gets no source), sizes in SI units, a permalink to
/// the tree at the full SHA, a Commits tab and the search box, under a strict CSP.
#[tokio::test(flavor = "multi_thread")]
async fn repository_page_renders_the_readme_at_the_full_sha() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = site().await;
        let sha = s.source.head();
        let (status, page, headers) = s.get(&format!("/sourcegraph/repos/{REPO}")).await;
        assert_eq!(status, 200, "{page}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(
            !csp.contains("unsafe-inline") && csp.contains("img-src 'self'"),
            "{csp}"
        );

        let readme = &page[page.find("<section class=\"readme\"").expect(&page)..];
        let at =
            |kind: &str, path: &str| format!("/sourcegraph/repos/{REPO}/-/{kind}/{sha}/{path}");
        for expected in [
            "<th>Part</th>".to_owned(),
            "<td>Rust</td>".to_owned(),
            format!("href=\"{}\"", at("blob", "docs/guide.md")),
            format!("href=\"{}\"", at("tree", "docs")),
            format!("src=\"{}\"", at("raw", "img/logo.png")),
            "<img alt=\"gone\">".to_owned(),
            "href=\"https://example.com/\" rel=\"noopener noreferrer nofollow\"".to_owned(),
            format!("href=\"{}\">README.md</a>", at("blob", "README.md")),
        ] {
            assert!(readme.contains(&expected), "missing {expected}: {readme}");
        }
        // The task list: two disabled checkboxes, one checked (attribute order is the
        // sanitiser's).
        assert_eq!(readme.matches("type=\"checkbox\"").count(), 2, "{readme}");
        assert_eq!(readme.matches("disabled=\"\"").count(), 2, "{readme}");
        assert_eq!(readme.matches("checked=\"\"").count(), 1, "{readme}");
        let lower = readme.to_ascii_lowercase();
        for gone in ["<script", "onerror", "javascript:", "passwd", "src=\"x\""] {
            assert!(!lower.contains(gone), "{gone} survived: {readme}");
        }
        // Point 7: SI sizes, the exact count in the tooltip; point 8: the permalink.
        assert!(
            page.contains("<span title=\"1234 bytes\">1.2 KB</span>"),
            "{page}"
        );
        assert!(
            page.contains(&format!(
                "data-permalink=\"\" href=\"{}\"",
                at("tree", "").trim_end_matches('/')
            )) || page.contains(&format!(
                "data-permalink href=\"{}\"",
                at("tree", "").trim_end_matches('/')
            )),
            "{page}"
        );
        // Point 9: the Commits tab at the default branch; the search box in the top bar.
        assert!(
            page.contains(&format!(
                "href=\"/sourcegraph/repos/{REPO}/-/commits/main\">Commits</a>"
            )),
            "{page}"
        );
        assert!(page.contains("id=\"site-search\""), "{page}");
    })
    .await
    .unwrap();
}

/// Issue 34 points 5 and 8: a tree page shows its directory's README (a plain one as text)
/// and, opened at a branch, a permalink to the same directory at the full SHA; at the SHA
/// itself, none.
#[tokio::test(flavor = "multi_thread")]
async fn tree_page_shows_the_directory_readme_and_a_permalink() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let s = site().await;
        let sha = s.source.head();
        let (status, page, _) = s
            .get(&format!("/sourcegraph/repos/{REPO}/-/tree/main/docs"))
            .await;
        assert_eq!(status, 200, "{page}");
        assert!(
            page.contains("<pre class=\"plain\">plain &lt;b&gt;text&lt;/b&gt; readme"),
            "{page}"
        );
        let permalink = format!("href=\"/sourcegraph/repos/{REPO}/-/tree/{sha}/docs\"");
        assert!(
            page.contains("data-permalink") && page.contains(&permalink),
            "{page}"
        );
        assert!(
            page.contains(&format!(
                "href=\"/sourcegraph/repos/{REPO}/-/commits/main\">Commits</a>"
            )),
            "{page}"
        );
        let (status, page, _) = s
            .get(&format!("/sourcegraph/repos/{REPO}/-/tree/{sha}/docs"))
            .await;
        assert_eq!(status, 200, "{page}");
        assert!(!page.contains("data-permalink"), "{page}");
    })
    .await
    .unwrap();
}
