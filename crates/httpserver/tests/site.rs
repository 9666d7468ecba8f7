//! The website over real HTTP on 127.0.0.1 (SPEC §9 routes, M-6, A-1, A-2, W-6): pages
//! render repository text and plugin metadata as escaped text under a strict CSP; signing in
//! by pasting a token gives a strict cookie session that every form guards with a CSRF token
//! and that ends the moment its token is revoked.

mod sitecommon;

use service::{Service, ServiceConfig};
use testgit::SourceRepo;

const REPO: &str = "acme/site";
const HOSTILE: &str = "<script>alert(1)</script>";
const HOSTILE_SCHEMA: &str = "</code><script>alert(3)</script>";

/// A plugin module whose description is [`HOSTILE`] and whose `input_schema` carries
/// [`HOSTILE_SCHEMA`] (discovery reads them, never runs the module).
fn hostile_plugin() -> Vec<u8> {
    let json = format!(
        r#"{{"name":"hostile","abi_version":2,"operations":["read"],"description":"{HOSTILE}","input_schema":{{"description":"{HOSTILE_SCHEMA}"}}}}"#
    )
    .replace('"', "\\\"");
    wat::parse_str(format!(
        r#"(module (memory (export "memory") 1)
            (func (export "alloc") (param i32) (result i32) (i32.const 16))
            (func (export "dealloc") (param i32 i32))
            (func (export "enrich") (param i32 i32) (result i64) (i64.const 0))
            (@custom "sourcegraph.plugin.v1" "{json}"))"#
    ))
    .unwrap()
}

struct Site {
    _source: SourceRepo,
    base: String,
    client: reqwest::Client,
    users: std::sync::Arc<access::AccessStore>,
}

async fn site(public_read: bool, private: bool) -> Site {
    let plugin = hostile_plugin();
    let source = SourceRepo::with_files(&[
        (
            "docs/<b>.md",
            b"# Title\n<script>alert(2)</script>\nthird\n",
        ),
        ("plugins/hostile.sourcegraph.wasm", &plugin),
        (
            "src/shop.py",
            b"class Shop:\n    def open(self):\n        return 1\n",
        ),
    ]);
    let store = source.store(REPO, "");
    store
        .set_private(&gitstore::RepoName::parse(REPO).unwrap(), private)
        .unwrap();
    // The operator's store, which keeps the website's sessions too.
    let users = std::sync::Arc::new(access::AccessStore::open(&store.metadata_path()).unwrap());
    let config = ServiceConfig {
        public_read,
        ..ServiceConfig::default()
    };
    let service = Service::new(store, config);
    let base = sitecommon::serve_site(service, users.clone()).await;
    Site {
        _source: source,
        base,
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        users,
    }
}

/// A browser's cookie jar, by hand: what the site set, sent back.
#[derive(Default, Clone)]
struct Jar(Vec<(String, String)>);

impl Jar {
    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn take(&mut self, response: &reqwest::Response) {
        for set in response.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            assert!(
                set.contains("HttpOnly") && set.contains("SameSite=Strict"),
                "{set}"
            );
            let (pair, _) = set.split_once(';').unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            self.0.retain(|(n, _)| n != name);
            if !set.contains("Max-Age=0") {
                self.0.push((name.to_owned(), value.to_owned()));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Site {
    async fn get(&self, jar: &mut Jar, path: &str) -> (u16, String, reqwest::header::HeaderMap) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        jar.take(&response);
        let headers = response.headers().clone();
        (
            response.status().as_u16(),
            response.text().await.unwrap(),
            headers,
        )
    }

    async fn post(&self, jar: &mut Jar, path: &str, form: &[(&str, &str)]) -> (u16, String) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header("cookie", jar.header())
            .form(form)
            .send()
            .await
            .unwrap();
        jar.take(&response);
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    }
}

/// The value of the first hidden `csrf` field of a page.
fn csrf_field(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF field")
        + 19;
    page[at..at + 64].to_owned()
}

/// W-6, SPEC §9: file names, file contents and plugin metadata are escaped text, on pages
/// sent with a strict Content-Security-Policy; a repository's routes all answer.
#[tokio::test]
async fn w6_pages_escape_repository_text_under_a_strict_csp() {
    let s = site(true, false).await;
    let mut jar = Jar::default();
    let (status, page, headers) = s.get(&mut jar, "/sourcegraph/").await;
    assert_eq!(status, 200, "{page}");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(
        page.contains(&format!("href=\"/sourcegraph/repos/{REPO}\"")),
        "{page}"
    );
    assert!(
        jar.get("csg_csrf").is_some(),
        "a visitor gets a CSRF cookie"
    );

    let (status, page, _) = s
        .get(
            &mut jar,
            &format!("/sourcegraph/repos/{REPO}/-/tree/HEAD/docs"),
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("&lt;b&gt;.md") && !page.contains("<b>.md"),
        "{page}"
    );
    assert!(page.contains("/-/blob/HEAD/docs/%3Cb%3E.md"), "{page}");

    let (status, page, _) = s
        .get(
            &mut jar,
            &format!("/sourcegraph/repos/{REPO}/-/blob/HEAD/docs/%3Cb%3E.md"),
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(2)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script>alert"), "{page}");
    assert!(page.contains("<tr id=\"L3\">"), "line anchors: {page}");
    assert!(
        !page.contains("class=\"outline\""),
        "a Markdown file has no outline"
    );

    // Issue 12: a source file's outline links each definition to its line range.
    let (status, page, _) = s
        .get(
            &mut jar,
            &format!("/sourcegraph/repos/{REPO}/-/blob/HEAD/src/shop.py"),
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Outline (2)"), "{page}");
    assert!(
        page.contains("<li class=\"depth-0\"><a href=\"#L1-L3\">Shop</a>"),
        "{page}"
    );
    assert!(
        page.contains("<li class=\"depth-1\"><a href=\"#L2-L3\">open</a>"),
        "{page}"
    );

    let (status, page, _) = s
        .get(&mut jar, &format!("/sourcegraph/repos/{REPO}/-/plugins"))
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains(HOSTILE), "{page}");
    // W-3, W-6: the input schema is shown as its compact JSON, escaped.
    assert!(
        page.contains(
            "<td class=\"schema\"><code>{&quot;description&quot;:&quot;&lt;/code&gt;&lt;script&gt;alert(3)&lt;/script&gt;&quot;}</code></td>"
        ),
        "{page}"
    );
    assert!(
        !page.contains(HOSTILE_SCHEMA) && !page.contains("<script>alert(3)"),
        "{page}"
    );

    let (status, _, _) = s.get(&mut jar, "/sourcegraph/repos/nobody/here").await;
    assert_eq!(status, 404);
    // A directory's blob URL leads to the directory.
    let (status, _, headers) = s
        .get(
            &mut jar,
            &format!("/sourcegraph/repos/{REPO}/-/blob/HEAD/docs"),
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(
        headers["location"],
        format!("/sourcegraph/repos/{REPO}/-/tree/HEAD/docs")
    );
    let (status, page, _) = s.get(&mut jar, "/sourcegraph/search?q=third").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("not indexed yet") || page.contains("#L3"),
        "{page}"
    );
    // Issue 33 point 8: text that mentions the token prefix is searchable, and the form keeps
    // the revision and type fields.
    let (status, page, _) = s.get(&mut jar, "/sourcegraph/search?q=csg_session").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("value=\"csg_session\""), "{page}");
    let (_, page, _) = s
        .get(
            &mut jar,
            &format!("/sourcegraph/search?q=csg_session&repo={REPO}&rev=HEAD&type=commit"),
        )
        .await;
    assert!(page.contains("name=\"rev\" value=\"HEAD\""), "{page}");
    assert!(
        page.contains("<option value=\"commit\" selected>commit</option>"),
        "{page}"
    );
    let (status, page, _) = s.get(&mut jar, "/sourcegraph/connect").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("http://127.0.0.1/sourcegraph/mcp?plugins=auto"),
        "{page}"
    );
}

/// A-1, A-2: signing in by token, CSRF on every form, a private repository shown only to a
/// granted user, the token page, and a session that ends when its token is revoked; wrong
/// tokens at the sign-in form are rate-limited like bearer tokens.
#[tokio::test]
async fn a1_sign_in_sessions_csrf_and_revocation() {
    let s = site(false, false).await;
    s.users.add_user("alice", false).unwrap();
    let alice = s.users.create_token("alice", None).unwrap();
    s.users.grant("alice", REPO).unwrap();

    let mut jar = Jar::default();
    // Without public read, a page needs a session: the sign-in form answers.
    let (status, page, _) = s.get(&mut jar, "/sourcegraph/").await;
    assert_eq!(status, 401, "{page}");
    assert!(page.contains("action=\"/sourcegraph/sign-in\""), "{page}");
    let csrf = csrf_field(&page);
    assert_eq!(Some(csrf.as_str()), jar.get("csg_csrf"));

    let forged = s
        .post(
            &mut jar,
            "/sourcegraph/sign-in",
            &[("csrf", "0".repeat(64).as_str()), ("token", &alice.secret)],
        )
        .await;
    assert_eq!(
        forged.0, 403,
        "a form without the page's CSRF token is refused"
    );
    assert!(jar.get("csg_session").is_none());
    let (status, page) = s
        .post(
            &mut jar,
            "/sourcegraph/sign-in",
            &[("csrf", &csrf), ("token", "csg_wrong")],
        )
        .await;
    assert_eq!(status, 401, "{page}");

    let (status, _) = s
        .post(
            &mut jar,
            "/sourcegraph/sign-in",
            &[("csrf", &csrf), ("token", &alice.secret)],
        )
        .await;
    assert_eq!(status, 303);
    let session = jar.get("csg_session").expect("a session cookie").to_owned();
    assert!(
        !session.contains("csg_"),
        "the cookie never holds the token"
    );
    let (status, page, _) = s.get(&mut jar, "/sourcegraph/").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(REPO) && page.contains("Sign out alice"),
        "{page}"
    );

    // The token page: a new token is shown once; its forms carry the session's CSRF token.
    let (status, page, _) = s.get(&mut jar, "/sourcegraph/settings/tokens").await;
    assert_eq!(status, 200, "{page}");
    let csrf = csrf_field(&page);
    let (status, page) = s
        .post(
            &mut jar,
            "/sourcegraph/settings/tokens",
            &[("csrf", &csrf), ("name", "laptop")],
        )
        .await;
    assert_eq!(status, 200, "{page}");
    let shown = page
        .find("csg_")
        .map(|at| &page[at..at + 68])
        .expect("the new secret");
    assert!(
        s.users.authenticate(shown).is_ok(),
        "the page shows a working token"
    );
    let (status, _) = s
        .post(
            &mut jar,
            "/sourcegraph/settings/tokens",
            &[("csrf", "x"), ("name", "forged")],
        )
        .await;
    assert_eq!(status, 403);
    assert_eq!(s.users.tokens(Some("alice")).unwrap().len(), 2);

    // W-34: revoking the session's token ends the session on the next page.
    s.users.revoke_token(alice.info.id).unwrap();
    let (status, _, _) = s.get(&mut jar, "/sourcegraph/settings/tokens").await;
    assert_eq!(status, 303, "to the sign-in page");
    assert!(jar.get("csg_session").is_none(), "the cookie is cleared");
    let (status, _, _) = s.get(&mut jar, &format!("/sourcegraph/repos/{REPO}")).await;
    assert_eq!(status, 401);

    // A-1: guessing at the sign-in form is slowed down like a bearer token brute force.
    let csrf = jar.get("csg_csrf").unwrap().to_owned();
    let mut statuses = Vec::new();
    for n in 0..12 {
        let token = format!("csg_{n:064x}");
        statuses.push(
            s.post(
                &mut jar,
                "/sourcegraph/sign-in",
                &[("csrf", &csrf), ("token", &token)],
            )
            .await
            .0,
        );
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}

/// A-2, A-4: with public read on, a private repository is missing from the list and its
/// pages are "not found" for anonymous visitors and users without a grant, and shown to a
/// granted user once signed in.
#[tokio::test]
async fn a2_private_repositories_only_for_granted_users() {
    let s = site(true, true).await;
    s.users.add_user("alice", false).unwrap();
    s.users.add_user("bob", false).unwrap();
    s.users.grant("alice", REPO).unwrap();
    let repo_page = format!("/sourcegraph/repos/{REPO}/-/blob/HEAD/docs/%3Cb%3E.md");
    for user in [None, Some("bob"), Some("alice")] {
        let mut jar = Jar::default();
        let (_, page, _) = s.get(&mut jar, "/sourcegraph/sign-in").await;
        if let Some(user) = user {
            let token = s.users.create_token(user, None).unwrap().secret;
            let form = [("csrf", csrf_field(&page)), ("token", token)];
            let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            assert_eq!(s.post(&mut jar, "/sourcegraph/sign-in", &form).await.0, 303);
        }
        let granted = user == Some("alice");
        let (status, list, _) = s.get(&mut jar, "/sourcegraph/").await;
        assert_eq!(status, 200);
        assert_eq!(list.contains(REPO), granted, "{user:?}: {list}");
        let (status, page, _) = s.get(&mut jar, &repo_page).await;
        assert_eq!(status, if granted { 200 } else { 404 }, "{user:?}: {page}");
        let (status, _, _) = s
            .get(&mut jar, &format!("/sourcegraph/repos/{REPO}/-/plugins"))
            .await;
        assert_eq!(status, if granted { 200 } else { 404 }, "{user:?}");
    }
}

/// A site whose access page picks its origin by `connect` (M-6), with `fallback` as the
/// origin computed at start; answers the source (kept alive) and the listen address.
async fn connect_site(
    public_read: bool,
    fallback: &str,
    connect: httpserver::ConnectOrigin,
) -> (SourceRepo, String) {
    let source = SourceRepo::with_files(&[("a.md", b"a\n")]);
    let config = ServiceConfig {
        public_read,
        ..ServiceConfig::default()
    };
    let service = Service::new(source.store(REPO, ""), config);
    let site = httpserver::SiteConfig {
        origin: fallback.into(),
    };
    let app = httpserver::with_access(
        httpserver::site_router_with_origin(service.clone(), &site, connect),
        service,
        &site,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(httpserver::serve(listener, app, std::future::pending()));
    (source, addr)
}

/// `GET /sourcegraph/connect` over a raw connection, so the `Host` header is exactly `host`
/// (none at all for `None`, as HTTP/1.0 allows): the status and the body.
async fn access_page(addr: &str, host: Option<&str>) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = match host {
        Some(host) => {
            format!(
                "GET /sourcegraph/connect HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            )
        }
        None => "GET /sourcegraph/connect HTTP/1.0\r\n\r\n".to_owned(),
    };
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}

/// The endpoint URL the access page shows in its `#endpoint` element.
fn endpoint_shown(page: &str) -> &str {
    let start = page
        .find("<code id=\"endpoint\">")
        .expect("the endpoint is shown")
        + "<code id=\"endpoint\">".len();
    &page[start..start + page[start..].find("</code>").unwrap()]
}

/// M-6: without a public URL the access page names the origin the visitor reached when its
/// `Host` is one of the deployment's allowed hosts (the MCP endpoint's list, a name without
/// a port matching any port); any other `Host`, a `Host` with user information, a malformed
/// one or none gets the origin computed at start, and nothing of such a header is shown.
#[tokio::test]
async fn m6_access_page_names_an_allowed_request_host() {
    let fallback = "http://127.0.0.1:7878";
    let allowed = ["localhost", "::1", "CSG.internal:8443"].map(String::from);
    let (_source, addr) = connect_site(
        true,
        fallback,
        httpserver::ConnectOrigin::RequestHost(allowed.to_vec()),
    )
    .await;
    let mcp = |origin: &str| format!("{origin}/sourcegraph/mcp?plugins=auto");
    for (host, origin) in [
        (Some("localhost:4321"), "http://localhost:4321"),
        (Some("LocalHost"), "http://localhost"),
        (Some("[::1]:4321"), "http://[::1]:4321"),
        (Some("csg.internal:8443"), "http://csg.internal:8443"),
        // Disallowed: another name, another port of a host listed with one.
        (Some("evil.example"), fallback),
        (Some("evil.example:4321"), fallback),
        (Some("csg.internal:9999"), fallback),
        (Some("csg.internal"), fallback),
        // An allowed name behind user information is not taken at its word.
        (Some("evil.example@localhost:4321"), fallback),
        (Some("localhost\"><b>evil</b>"), fallback),
        (None, fallback),
    ] {
        let (status, page) = access_page(&addr, host).await;
        assert_eq!(status, 200, "{host:?}: {page}");
        assert_eq!(endpoint_shown(&page), mcp(origin), "{host:?}");
        let url_in_json = format!("&quot;url&quot;: &quot;{}&quot;", mcp(origin));
        assert!(page.contains(&url_in_json), "{host:?}: {page}");
        assert!(!page.contains("evil"), "{host:?}: {page}");
    }
}

/// M-6: a public URL always wins over the request's `Host`.
#[tokio::test]
async fn m6_access_page_public_url_wins_over_host() {
    let public = "https://csg.example.org";
    let (_source, addr) = connect_site(true, public, httpserver::ConnectOrigin::Fixed).await;
    for host in [Some("localhost:4321"), Some("evil.example"), None] {
        let (status, page) = access_page(&addr, host).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(
            endpoint_shown(&page),
            "https://csg.example.org/sourcegraph/mcp?plugins=auto",
            "{host:?}"
        );
        assert!(
            !page.contains("localhost") && !page.contains("evil"),
            "{page}"
        );
    }
}

/// M-6, seed 000: the Codex table's `bearer_token_env_var` line is commented out under its
/// note while public read is on, and active when it is off (every caller needs a token).
#[tokio::test]
async fn m6_access_page_bearer_line_active_without_public_read() {
    let line = "bearer_token_env_var = &quot;SOURCEGRAPH_API_TOKEN&quot;";
    let note = "# Set only when authentication is required; the token comes from a local environment variable";
    let connect = || httpserver::ConnectOrigin::RequestHost(vec!["localhost".into()]);

    let (_open_source, open) = connect_site(true, "http://127.0.0.1:7878", connect()).await;
    let (status, page) = access_page(&open, Some("localhost:7878")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&format!("{note}\n# {line}\n")), "{page}");
    assert!(!page.contains("This server needs an API token"), "{page}");

    let (_closed_source, closed) = connect_site(false, "http://127.0.0.1:7878", connect()).await;
    let (status, page) = access_page(&closed, Some("localhost:7878")).await;
    assert_eq!(status, 200, "the access page needs no session: {page}");
    assert_eq!(
        endpoint_shown(&page),
        "http://localhost:7878/sourcegraph/mcp?plugins=auto"
    );
    assert!(page.contains(&format!("\n{line}\n")), "{page}");
    assert!(!page.contains(&format!("# {line}")), "{page}");
    assert!(page.contains("This server needs an API token"), "{page}");
}
