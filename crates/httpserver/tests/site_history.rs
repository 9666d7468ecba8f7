//! The history pages over real HTTP on 127.0.0.1 (issue 34, issue 42 point 4): a file's and
//! a directory's history page through their "Older" links (cursors carrying the walk's
//! frontier) and together list what `git log [--follow] -- path` lists; an altered cursor
//! is refused with what to do.

mod sitecommon;

use service::{Service, ServiceConfig};
use std::time::Duration;
use testgit::SourceRepo;

const REPO: &str = "acme/history";

struct Site {
    source: SourceRepo,
    base: String,
    client: reqwest::Client,
}

/// 60 commits editing `docs/a.md` (the first adds it), each also touching `notes.txt`.
async fn site() -> Site {
    let source = SourceRepo::new();
    for n in 0..60 {
        source.commit(
            &[
                ("docs/a.md", format!("a {n}\n").as_bytes()),
                ("notes.txt", format!("{n}\n").as_bytes()),
            ],
            &format!("change {n}"),
        );
    }
    let store = source.store(REPO, "");
    let users = std::sync::Arc::new(access::AccessStore::open(&store.metadata_path()).unwrap());
    let service = Service::new(store, ServiceConfig::default());
    let base = sitecommon::serve_site(service, users).await;
    Site {
        source,
        base,
        client: sitecommon::visitor(),
    }
}

impl Site {
    /// GET `url` (from `/sourcegraph/` on): status and body.
    async fn page(&self, url: &str) -> (u16, String) {
        let response = self
            .client
            .get(format!("{}{url}", self.base))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    fn git_log(&self, args: &[&str]) -> Vec<String> {
        let mut all = vec!["log", "--format=%H"];
        all.extend(args);
        self.source.git(&all).lines().map(str::to_owned).collect()
    }
}

/// The commits a history page lists, in order.
fn listed(page: &str) -> Vec<String> {
    page.split("<li data-commit=\"")
        .skip(1)
        .map(|rest| rest[..40].to_owned())
        .collect()
}

/// The "Older" link of a history page.
fn older(page: &str) -> Option<String> {
    let at = page.find("?cursor=")?;
    let start = page[..at].rfind("href=\"")? + 6;
    let end = at + page[at..].find('"')?;
    Some(page[start..end].replace("&amp;", "&"))
}

/// Every page of a history from `first`, following its "Older" links.
async fn all_pages(site: &Site, first: &str) -> (Vec<String>, usize) {
    let mut commits = Vec::new();
    let mut url = first.to_owned();
    let mut pages = 0;
    loop {
        let (status, page) = site.page(&url).await;
        assert_eq!(status, 200, "{url}: {page}");
        pages += 1;
        commits.extend(listed(&page));
        match older(&page) {
            Some(next) => url = next,
            None => return (commits, pages),
        }
        assert!(pages < 100, "the pages never end");
    }
}

async fn bounded<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(Duration::from_secs(120), test)
        .await
        .expect("the test finished in time");
}

/// Issue 42 point 4: a directory's history (`git log -- dir`) and a file's (`git log
/// --follow`) go on through their "Older" links to the end; the pages together are git's
/// list. (A directory's later pages carry a plain log's cursor, which the file history's
/// follow refuses: the page falls back to the directory's log.)
#[tokio::test]
async fn issue42_history_pages_go_on_through_older_links() {
    bounded(async {
        let site = site().await;
        let prefix = format!("/sourcegraph/repos/{REPO}/-/commits/main");
        let (dir, pages) = all_pages(&site, &format!("{prefix}/docs")).await;
        assert_eq!(dir, site.git_log(&["--", "docs"]));
        assert_eq!(pages, 2);
        let (file, pages) = all_pages(&site, &format!("{prefix}/docs/a.md")).await;
        assert_eq!(file, site.git_log(&["--follow", "--", "docs/a.md"]));
        assert_eq!(pages, 2);
        let (all, _) = all_pages(&site, &prefix).await;
        assert_eq!(all, site.git_log(&[]));
    })
    .await;
}

/// Issue 42 point 4: an altered cursor is refused with what to do, not walked.
#[tokio::test]
async fn issue42_an_altered_history_cursor_is_refused() {
    bounded(async {
        let site = site().await;
        let (_, page) = site
            .page(&format!("/sourcegraph/repos/{REPO}/-/commits/main/docs"))
            .await;
        let next = older(&page).expect("an Older link");
        let at = next.find("?cursor=").unwrap() + "?cursor=".len() + 12;
        let mut altered = next.clone().into_bytes();
        altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
        let (status, page) = site.page(&String::from_utf8(altered).unwrap()).await;
        assert_eq!(status, 400, "{page}");
        assert!(page.contains("altered or made by another server"), "{page}");
    })
    .await;
}
