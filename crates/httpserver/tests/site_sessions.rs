//! The website's sign-in sessions live in the metadata store (issue 31 point 7), over real
//! HTTP on 127.0.0.1: a session survives a restart of the server (SQLite), neither its id
//! nor the token is stored in plaintext, and two replicas sharing PostgreSQL honour each
//! other's sessions, sign-outs and revocations.

mod sitecommon;

use access::AccessStore;
use service::{Service, ServiceConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long any one test may take: a hang fails the test instead of stalling the run.
const LIMIT: Duration = Duration::from_secs(120);

/// Runs `test` under [`LIMIT`].
async fn within<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(LIMIT, test).await.expect("timed out");
}

/// One server: its address and the way to stop it.
struct Server {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// The site of `store` (no public read), its sessions in `sessions`.
    async fn start(store: gitstore::GitStore, sessions: Arc<AccessStore>) -> Server {
        let config = ServiceConfig {
            public_read: false,
            ..ServiceConfig::default()
        };
        let service = Service::new(store, config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (base, served) = sitecommon::serve_site_until(service, sessions, async move {
            let _ = stopped.await;
        })
        .await;
        Server {
            base,
            stop: Some(stop),
            served,
        }
    }

    async fn shut_down(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.served).await.unwrap().unwrap();
    }
}

/// A browser's cookies for the site, by hand.
#[derive(Default)]
struct Browser {
    cookies: Vec<(String, String)>,
}

impl Browser {
    fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn take(&mut self, response: &reqwest::Response) {
        for set in response.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let (pair, _) = set.split_once(';').unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            self.cookies.retain(|(n, _)| n != name);
            if !set.contains("Max-Age=0") {
                self.cookies.push((name.to_owned(), value.to_owned()));
            }
        }
    }

    fn header(&self) -> String {
        self.cookies
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn get(&mut self, server: &Server, path: &str) -> (u16, String) {
        let response = client()
            .get(format!("{}{path}", server.base))
            .header("cookie", self.header())
            .send()
            .await
            .unwrap();
        self.take(&response);
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn post(&mut self, server: &Server, path: &str, form: &[(&str, &str)]) -> u16 {
        let response = client()
            .post(format!("{}{path}", server.base))
            .header("cookie", self.header())
            .form(form)
            .send()
            .await
            .unwrap();
        self.take(&response);
        response.status().as_u16()
    }

    /// Signs in on `server` with `token`, as a visitor does: the form, then the post.
    async fn sign_in(&mut self, server: &Server, token: &str) {
        let (_, page) = self.get(server, "/sourcegraph/sign-in").await;
        let csrf = csrf_field(&page);
        let status = self
            .post(
                server,
                "/sourcegraph/sign-in",
                &[("csrf", &csrf), ("token", token)],
            )
            .await;
        assert_eq!(status, 303, "signed in");
        assert!(self.cookie("csg_session").is_some());
    }

    /// Who the token page of `server` shows signed in, if anyone.
    async fn signed_in(&mut self, server: &Server) -> Option<String> {
        let (status, page) = self.get(server, "/sourcegraph/settings/tokens").await;
        if status != 200 {
            return None;
        }
        let at = page.find("Sign out ")? + "Sign out ".len();
        Some(
            page[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect(),
        )
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The value of the first hidden `csrf` field of a page.
fn csrf_field(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF field")
        + 19;
    page[at..at + 64].to_owned()
}

/// Whether `needle` occurs in any file of `dir` (the metadata database and its journal).
fn stored_anywhere(dir: &std::path::Path, needle: &str) -> bool {
    std::fs::read_dir(dir).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        path.is_file()
            && std::fs::read(&path)
                .unwrap()
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
    })
}

#[tokio::test]
async fn a_session_survives_a_restart_and_is_not_stored_in_plaintext() {
    within(async {
        let source = testgit::SourceRepo::with_files(&[("a.md", b"a\n")]);
        let store = source.store("acme/docs", "");
        let metadata = store.metadata_path();
        let users = Arc::new(AccessStore::open(&metadata).unwrap());
        users.add_user("alice", false).unwrap();
        let token = users.create_token("alice", None).unwrap();

        let server = Server::start(store.clone(), users.clone()).await;
        let mut browser = Browser::default();
        browser.sign_in(&server, &token.secret).await;
        assert_eq!(browser.signed_in(&server).await.as_deref(), Some("alice"));
        let id = browser.cookie("csg_session").unwrap().to_owned();
        server.shut_down().await;
        drop(users);
        drop(store);

        // A new process: a new store, a new service, the same data directory.
        let store = source.store("acme/docs", "");
        let users = Arc::new(AccessStore::open(&metadata).unwrap());
        let server = Server::start(store, users.clone()).await;
        assert_eq!(
            browser.signed_in(&server).await.as_deref(),
            Some("alice"),
            "the session outlived the server"
        );
        let dir = metadata.parent().unwrap();
        assert!(!stored_anywhere(dir, &id), "the session id is not stored");
        assert!(!stored_anywhere(dir, &token.secret[4..]), "nor the token");

        // Signing out ends it for good, this process or the next.
        let (_, page) = browser.get(&server, "/sourcegraph/settings/tokens").await;
        let csrf = csrf_field(&page);
        assert_eq!(
            browser
                .post(&server, "/sourcegraph/sign-out", &[("csrf", &csrf)])
                .await,
            303
        );
        assert!(browser.cookie("csg_session").is_none());
        browser.cookies.push(("csg_session".into(), id.clone()));
        assert_eq!(browser.signed_in(&server).await, None, "ended in the store");
        assert_eq!(users.session(&id, None), Err(access::Error::SessionEnded));
    })
    .await;
}

/// A store on `data` whose registry and access tables are in the PostgreSQL database `url`.
fn replica_store(data: &std::path::Path, url: &str) -> gitstore::GitStore {
    gitstore::GitStore::open_with(
        gitstore::StoreConfig {
            data_dir: data.to_path_buf(),
            retention: gitstore::DEFAULT_RETENTION,
        },
        Arc::new(gitstore::SystemClock),
        gitstore::Metadata::Postgres(connect(url)),
    )
    .unwrap()
}

fn connect(url: &str) -> metadb::Database {
    metadb::Database::connect(url, metadb::Options::default()).unwrap()
}

/// Polls `check` for up to five seconds; answers whether it held.
async fn eventually<F: std::future::Future<Output = bool>>(mut check: impl FnMut() -> F) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_work_on_every_replica() {
    within(async {
        let url = metadb::testing::shared().create_database();
        let (one_dir, two_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let operator = AccessStore::open_postgres(connect(&url)).unwrap();
        operator.add_user("alice", false).unwrap();
        let token = operator.create_token("alice", None).unwrap();
        let replica = |dir: &std::path::Path| {
            let store = replica_store(dir, &url);
            let sessions = Arc::new(AccessStore::open_postgres(connect(&url)).unwrap());
            (store, sessions)
        };
        let (store, sessions) = replica(one_dir.path());
        let one = Server::start(store, sessions).await;
        let (store, sessions) = replica(two_dir.path());
        let two = Server::start(store, sessions).await;

        // Signed in through one, the very next page on the other (as a balancer may send
        // the redirect after the sign-in) is signed in.
        let mut browser = Browser::default();
        browser.sign_in(&one, &token.secret).await;
        assert_eq!(browser.signed_in(&two).await.as_deref(), Some("alice"));
        assert_eq!(browser.signed_in(&one).await.as_deref(), Some("alice"));

        // Signed out through the other: over on both.
        let id = browser.cookie("csg_session").unwrap().to_owned();
        let (_, page) = browser.get(&two, "/sourcegraph/settings/tokens").await;
        let csrf = csrf_field(&page);
        assert_eq!(
            browser
                .post(&two, "/sourcegraph/sign-out", &[("csrf", &csrf)])
                .await,
            303
        );
        let replayed = |server: &Server| {
            let (base, id) = (server.base.clone(), id.clone());
            async move {
                let response = client()
                    .get(format!("{base}/sourcegraph/settings/tokens"))
                    .header("cookie", format!("csg_session={id}"))
                    .send()
                    .await
                    .unwrap();
                response.status().as_u16()
            }
        };
        assert!(
            eventually(|| async { replayed(&one).await == 303 }).await,
            "the old cookie is refused on the other replica too"
        );

        // A revocation by the operator ends a session on both replicas.
        let mut browser = Browser::default();
        browser.sign_in(&two, &token.secret).await;
        assert_eq!(browser.signed_in(&one).await.as_deref(), Some("alice"));
        operator.revoke_token(token.info.id).unwrap();
        let id = browser.cookie("csg_session").unwrap().to_owned();
        for server in [&one, &two] {
            let (base, id) = (server.base.clone(), id.clone());
            let status = || {
                let (base, id) = (base.clone(), id.clone());
                async move {
                    client()
                        .get(format!("{base}/sourcegraph/settings/tokens"))
                        .header("cookie", format!("csg_session={id}"))
                        .send()
                        .await
                        .unwrap()
                        .status()
                        .as_u16()
                }
            };
            assert!(
                eventually(|| async { status().await == 303 }).await,
                "revoked on {base}"
            );
        }
        one.shut_down().await;
        two.shut_down().await;
    })
    .await;
}
