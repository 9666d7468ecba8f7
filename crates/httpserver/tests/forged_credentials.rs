//! Forged session cookies and made-up tokens from one client address never cost another
//! client its session or its new token (A-1, issue 43 finding 3), over real HTTP on loopback
//! addresses: the flood comes from 127.0.0.2 (or 127.0.2.x), every visitor from an address of
//! its own, the server listening on 127.0.0.1 and taking each TCP peer as the client.
//!
//! "Another replica made it a moment ago" is a session or token row written into the shared
//! PostgreSQL database behind the server's back, without the announcement a replica's write
//! sends: the server's view does not know it, so only the database look-up the flood used to
//! spend can find it. (SQLite cannot stand in: every writer there bumps the change counter,
//! so a view knows a new session on its very next call and never needs the look-up.)

use access::AccessStore;
use service::{Service, ServiceConfig};
use sha2::{Digest, Sha256};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long any one test may take: a hang fails the test instead of stalling the run.
const LIMIT: Duration = Duration::from_secs(180);

/// Requests of one flood wave, sent at once: the reproduction used about 130.
const WAVE: usize = 150;

/// Runs `test` under [`LIMIT`].
async fn within<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(LIMIT, test).await.expect("timed out");
}

/// An HTTP client whose connections come from `address` (any of 127/8 is this host's).
fn client_from(address: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(address.parse::<IpAddr>().expect("an address"))
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 64 hex digits no one else draws: a session id, or a token's secret part.
fn fresh_secret(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_nanos();
    hex(&Sha256::digest(format!("{what} {nanos}").as_bytes()))
}

fn now_secs() -> i64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs();
    i64::try_from(secs).expect("in range")
}

/// Serves the API and the site of `service` behind the access layer (sessions in `users`)
/// on a free port of 127.0.0.1, as `csg serve` does; answers the base URL.
async fn serve(service: Service, users: Arc<AccessStore>) -> String {
    let site = httpserver::SiteConfig {
        origin: "http://127.0.0.1".into(),
    };
    let app = httpserver::router(service.clone(), httpserver::Readiness::default())
        .merge(httpserver::site_router(service.clone(), &site));
    let app = httpserver::with_access_and_sessions(app, service, &site, users);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let base = format!("http://{}", listener.local_addr().expect("its address"));
    tokio::spawn(httpserver::serve(listener, app, std::future::pending()));
    base
}

fn connect(url: &str) -> metadb::Database {
    metadb::Database::connect(url, metadb::Options::default()).expect("connect")
}

/// One replica of a cluster on the PostgreSQL database `url`, serving the site and the API
/// (no public read), with the user alice and a token of hers its view already knows.
struct Replica {
    _data: tempfile::TempDir,
    url: String,
    base: String,
    token_id: i64,
}

impl Replica {
    async fn start() -> Replica {
        let url = metadb::testing::shared().create_database();
        let data = tempfile::tempdir().expect("tempdir");
        let store = gitstore::GitStore::open_with(
            gitstore::StoreConfig {
                data_dir: data.path().to_path_buf(),
                retention: gitstore::DEFAULT_RETENTION,
            },
            Arc::new(gitstore::SystemClock),
            gitstore::Metadata::Postgres(connect(&url)),
        )
        .expect("a store on the database");
        let config = ServiceConfig {
            public_read: false,
            ..ServiceConfig::default()
        };
        let service = Service::new(store, config);
        let sessions = Arc::new(AccessStore::open_postgres(connect(&url)).expect("open"));
        // Made through another replica's store: announced, so this replica learns them.
        let operator = AccessStore::open_postgres(connect(&url)).expect("open");
        operator.add_user("alice", false).expect("user");
        let token = operator.create_token("alice", None).expect("token");
        let deadline = Instant::now() + Duration::from_secs(10);
        while sessions.authenticate(&token.secret).is_err()
            || service.authenticate(&token.secret).is_err()
        {
            assert!(Instant::now() < deadline, "the announcement never arrived");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let base = serve(service, sessions).await;
        Replica {
            _data: data,
            url,
            base,
            token_id: token.info.id,
        }
    }

    /// A session of alice's token, as another replica writes it, unannounced: answers its id
    /// (the cookie value).
    fn session_made_elsewhere(&self) -> String {
        let id = fresh_secret("session");
        let hash = Sha256::digest(id.as_bytes()).to_vec();
        let (token_id, now) = (self.token_id, now_secs());
        connect(&self.url)
            .run(move |client| {
                client.execute(
                    "INSERT INTO sessions (hash, token_id, created, last_seen)
                     VALUES ($1, $2, $3, $3)",
                    &[&hash, &token_id, &now],
                )
            })
            .expect("a session row written elsewhere");
        id
    }

    /// A new token of alice's, as another replica writes it, unannounced: answers it.
    fn token_made_elsewhere(&self, name: &str) -> String {
        let secret = format!("{}{}", access::TOKEN_PREFIX, fresh_secret("token"));
        let hash = Sha256::digest(secret.as_bytes()).to_vec();
        let (name, now) = (name.to_owned(), now_secs());
        connect(&self.url)
            .run(move |client| {
                client.execute(
                    "INSERT INTO tokens (user_name, name, hash, created) VALUES ('alice', $1, $2, $3)",
                    &[&name, &hash, &now],
                )
            })
            .expect("a token row written elsewhere");
        secret
    }
}

/// Whether a response removes the session cookie (signs the visitor out).
fn signs_out(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.starts_with("csg_session=") && value.contains("Max-Age=0"))
}

/// One answer of a flood wave.
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: String,
}

/// Sends [`WAVE`] requests at once from `flood`, each built by `request` from its number;
/// answers their answers.
async fn wave(
    flood: &reqwest::Client,
    request: impl Fn(&reqwest::Client, usize) -> reqwest::RequestBuilder,
) -> Vec<Answer> {
    let sent: Vec<_> = (0..WAVE)
        .map(|n| {
            let request = request(flood, n);
            tokio::spawn(async move {
                let response = request.send().await.expect("an answer");
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body = response.text().await.expect("a body");
                Answer {
                    status,
                    retry_after,
                    body,
                }
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(WAVE);
    for one in sent {
        answers.push(one.await.expect("the request ran"));
    }
    answers
}

/// How many answers have `status`.
fn count(answers: &[Answer], status: u16) -> usize {
    answers.iter().filter(|a| a.status == status).count()
}

/// A-1, issue 43 finding 3 (the proof): in 100 trials, a visitor whose session another
/// replica made a moment ago (this replica's view does not know it yet) opens a page right
/// after a wave of forged session cookies from another client address: the visitor is signed
/// in and keeps the cookie every time. Before the fix, one budget of database look-ups for
/// the whole server was spent by the wave, the visitor's look-up was refused as "session
/// ended" and the cookie deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a1_forged_cookies_from_another_address_sign_no_visitor_out() {
    within(async {
        let replica = Replica::start().await;
        let flood = client_from("127.0.0.2");
        let (mut signed_out, mut anonymous) = (0, 0);
        for trial in 0..100u32 {
            let id = replica.session_made_elsewhere();
            let answers = wave(&flood, |client, n| {
                client
                    .get(format!("{}/sourcegraph/sign-in", replica.base))
                    .header(
                        "cookie",
                        format!("csg_session={}", fresh_secret(&n.to_string())),
                    )
            })
            .await;
            assert_eq!(
                count(&answers, 200),
                WAVE,
                "the forged visitors browse anonymously"
            );
            // Each visitor is a client of its own (127.0.1.1 to 127.0.1.100).
            let visitor = client_from(&format!("127.0.1.{}", trial + 1));
            let response = visitor
                .get(format!("{}/sourcegraph/settings/tokens", replica.base))
                .header("cookie", format!("csg_session={id}"))
                .send()
                .await
                .expect("an answer");
            if signs_out(&response) {
                signed_out += 1;
            }
            let status = response.status().as_u16();
            let page = response.text().await.expect("a page");
            if status != 200 || !page.contains("Sign out alice") {
                anonymous += 1;
            }
        }
        eprintln!("100 trials: {signed_out} visitors signed out, {anonymous} not signed in");
        assert_eq!(
            signed_out, 0,
            "visitors signed out by someone else's forged cookies"
        );
        assert_eq!(
            anonymous, 0,
            "visitors not recognised though their look-up was due"
        );
    })
    .await;
}

/// A-1, issue 43 finding 3: a token another replica made a moment ago works at its first
/// call while another client address floods made-up tokens (a fresh flooding address each
/// trial). Before the fix the flood spent the server's one budget of look-ups and the new
/// token was refused as invalid (401).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a1_a_token_from_another_replica_works_while_another_address_floods() {
    within(async {
        let replica = Replica::start().await;
        for trial in 1..=5u32 {
            let secret = replica.token_made_elsewhere(&format!("new-{trial}"));
            let flood = client_from(&format!("127.0.2.{trial}"));
            let answers = wave(&flood, |client, n| {
                let made_up = format!("{}{}", access::TOKEN_PREFIX, fresh_secret(&n.to_string()));
                client
                    .get(format!("{}/sourcegraph/api/discovery", replica.base))
                    .bearer_auth(made_up)
            })
            .await;
            // Refused as invalid while the flooder's look-ups last; then "unknown now"
            // (retry) or, once the limiter counted its wrong tokens, slowed down.
            assert_eq!(
                count(&answers, 401) + count(&answers, 429) + count(&answers, 503),
                WAVE
            );
            let response = client_from(&format!("127.0.3.{trial}"))
                .get(format!("{}/sourcegraph/api/discovery", replica.base))
                .bearer_auth(&secret)
                .send()
                .await
                .expect("an answer");
            let status = response.status().as_u16();
            let body = response.text().await.expect("a body");
            assert_eq!(status, 200, "trial {trial}: {body}");
        }
    })
    .await;
}

/// A-1, issue 43 finding 3: once a client's look-ups are spent, a token the view does not
/// know is "unknown now": 503 with `Retry-After` and a message that says to try again, never
/// 401 `invalid_token` (which tells the client to give the token up). Only tokens that were
/// looked up are invalid: at most a client's budget of them per wave. The wrong-token limiter
/// stops a client once it has counted ten, so only a wave whose calls pass it before those
/// are counted spends the budget: waves from fresh addresses are sent until one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a1_a_spent_budget_is_a_retry_not_an_invalid_token() {
    within(async {
        let replica = Replica::start().await;
        let mut unknown_now = 0;
        for flooder in 1..=10 {
            let flood = client_from(&format!("127.0.4.{flooder}"));
            let answers = wave(&flood, |client, n| {
                let made_up = format!("{}{}", access::TOKEN_PREFIX, fresh_secret(&n.to_string()));
                client
                    .get(format!("{}/sourcegraph/api/discovery", replica.base))
                    .bearer_auth(made_up)
            })
            .await;
            let (invalid, limited, unknown) = (
                count(&answers, 401),
                count(&answers, 429),
                count(&answers, 503),
            );
            assert_eq!(invalid + limited + unknown, WAVE);
            assert!(
                (1..=20).contains(&invalid),
                "only looked-up tokens are invalid: {invalid}"
            );
            for answer in answers.iter().filter(|a| a.status == 503) {
                let wait: u64 = answer
                    .retry_after
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .expect("Retry-After in seconds");
                assert!(wait >= 1);
                assert!(answer.body.contains("try again in"), "{}", answer.body);
                assert!(!answer.body.contains("invalid_token"), "{}", answer.body);
            }
            unknown_now += unknown;
            if unknown_now > 0 {
                break;
            }
        }
        assert!(unknown_now > 0, "no wave spent its client's look-ups");
    })
    .await;
}

/// A-1, issue 43 finding 3: cookies naming no session count like wrong tokens, per client
/// address (here over SQLite, where nothing else is needed). After ten from one address its
/// tokens are slowed down (429) and its unknown cookies are no longer looked up: kept, the
/// page anonymous; a session the view knows still works from that address (another visitor
/// behind it), and another address is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a1_wrong_session_ids_count_like_wrong_tokens() {
    within(async {
        let source = testgit::SourceRepo::with_files(&[("a.md", b"a\n")]);
        let store = source.store("acme/docs", "");
        let users = Arc::new(AccessStore::open(&store.metadata_path()).expect("open"));
        users.add_user("alice", false).expect("user");
        let token = users.create_token("alice", None).expect("token");
        let session = users.start_session(&token.secret).expect("sign in");
        let config = ServiceConfig {
            public_read: false,
            ..ServiceConfig::default()
        };
        let base = serve(Service::new(store, config), users).await;
        let page = |client: &reqwest::Client, path: &str, cookie: &str| {
            client
                .get(format!("{base}{path}"))
                .header("cookie", format!("csg_session={cookie}"))
                .send()
        };

        let forger = client_from("127.0.0.6");
        for n in 0..12 {
            let response = page(
                &forger,
                "/sourcegraph/sign-in",
                &fresh_secret(&n.to_string()),
            )
            .await
            .expect("an answer");
            assert_eq!(response.status().as_u16(), 200);
            if n < 10 {
                assert!(
                    signs_out(&response),
                    "a cookie naming no session is removed"
                );
            }
        }
        let response = forger
            .get(format!("{base}/sourcegraph/api/discovery"))
            .bearer_auth(&token.secret)
            .send()
            .await
            .expect("an answer");
        assert_eq!(response.status().as_u16(), 429, "counted like wrong tokens");
        assert!(response.headers().contains_key("retry-after"));

        let response = page(&forger, "/sourcegraph/sign-in", &fresh_secret("late"))
            .await
            .expect("an answer");
        assert_eq!(response.status().as_u16(), 200);
        assert!(
            !signs_out(&response),
            "not looked up now: nothing known, cookie kept"
        );
        let response = page(&forger, "/sourcegraph/settings/tokens", &session.id)
            .await
            .expect("an answer");
        assert!(!signs_out(&response));
        let text = response.text().await.expect("a page");
        assert!(
            text.contains("Sign out alice"),
            "a known session needs no look-up"
        );

        let response = client_from("127.0.0.7")
            .get(format!("{base}/sourcegraph/api/discovery"))
            .bearer_auth(&token.secret)
            .send()
            .await
            .expect("an answer");
        assert_eq!(
            response.status().as_u16(),
            200,
            "another address is untouched"
        );
    })
    .await;
}
