//! Issue 43's access matrix, generated from the tables rather than
//! written by hand: every repository-naming tool of `tools::TOOLS` and every page of the
//! website's route table, on every face (MCP over Streamable HTTP, the JSON API's POST and,
//! for a read-only tool, GET; the site's pages), by every kind of caller (anonymous, a token
//! without grants, a granted user, a user with `prepare` but no grants), for every state a
//! repository name can be in (public, private, private and registered but held by no replica
//! yet, an `ALIASES` alias of a private one, unknown), through every position in a real
//! three-replica cluster (each replica, owners and the non-owner, and a call forwarded to an
//! owner), with public read on and off. The expected outcome of each cell comes from the
//! access rules ([`expect`]); "may not read" must answer byte for byte as "unknown" (after the
//! name), and no cluster-internal route may answer a client, nor any client route a wrong
//! cluster secret.
//!
//! The cluster is real: PostgreSQL (`metadb::testing`, a throwaway server), three `csg serve`
//! processes in cluster mode on loopback, the repositories registered and granted with the
//! `csg` admin commands. Bounded as a whole ([`common::LIMIT`]).

mod common;

use common::{
    Got, Server, arguments, csg_with, mcp_try_call, repository_naming_tools, source, wait_indexed,
    within,
};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use testgit::answers::untimed;
use tools::{Limits, ToolDef};

/// The secret of the matrix's clusters.
const SECRET: &str = "the-access-matrix-cluster-secret-0123456789";
const PUBLIC: &str = "acme/docs";
const PRIVATE: &str = "acme/secret";
const PENDING: &str = "acme/pending";
const UNKNOWN: &str = "acme/nothing";
/// An `ALIASES` key naming [`PRIVATE`].
const PRIVATE_ALIAS: &str = "vault";
/// A CSRF cookie every site request carries, so that two pages differ only where their
/// answers do (without one, each page names a fresh random token).
const CSRF: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Who calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Anonymous,
    /// A token of a user without grants.
    Reader,
    /// A token of a user granted [`PRIVATE`] and [`PENDING`].
    Granted,
    /// A token of a user with the `prepare` capability and no grants.
    Preparer,
}

/// What a repository name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Public,
    Private,
    /// Private, registered, held by no replica: its source cannot be fetched.
    Pending,
    /// An alias of [`State::Private`].
    Alias,
    Unknown,
}

impl State {
    const ALL: [State; 5] = [
        State::Public,
        State::Private,
        State::Pending,
        State::Alias,
        State::Unknown,
    ];

    /// The name a caller sends.
    fn name(self) -> &'static str {
        match self {
            State::Public => PUBLIC,
            State::Private => PRIVATE,
            State::Pending => PENDING,
            State::Alias => PRIVATE_ALIAS,
            State::Unknown => UNKNOWN,
        }
    }

    /// The repository the name means (an alias is replaced before anything else).
    fn meant(self) -> &'static str {
        match self {
            State::Alias => PRIVATE,
            other => other.name(),
        }
    }
}

/// What the access rules expect of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Answered: HTTP 200, MCP not `isError`.
    Answered,
    /// Exactly the answer an unknown name gets: the caller may not read it.
    AsUnknown,
    /// Readable, but no replica holds it yet: refused as unavailable (HTTP 503, MCP
    /// `isError`) on every replica.
    Unavailable,
    /// Public read is off and no token came: 401 before anything else.
    TokenNeeded,
}

/// The access rules, as the issue states them.
fn expect(who: Who, state: State, public_read: bool) -> Expect {
    if who == Who::Anonymous && !public_read {
        return Expect::TokenNeeded;
    }
    match (state, who) {
        (State::Unknown, _) => Expect::AsUnknown,
        (State::Public, _) => Expect::Answered,
        (State::Private | State::Alias, Who::Granted) => Expect::Answered,
        (State::Pending, Who::Granted) => Expect::Unavailable,
        // `prepare` is not read: a preparer without a grant may not read either.
        (State::Private | State::Alias | State::Pending, _) => Expect::AsUnknown,
    }
}

/// A replica of the cluster and the MCP session of each caller on it.
struct Replica {
    server: Server,
    /// `http://127.0.0.1:PORT`, its node URL.
    url: String,
    sessions: tokio::sync::Mutex<Vec<(Who, RunningService<RoleClient, ()>)>>,
}

impl Replica {
    /// `tools/call` over `who`'s session (none: `who` cannot open one, anonymous with public
    /// read off). A call the transport failed (the routing's own 503 when no replica holds
    /// the repository: an HTTP status, not a tool result) is `isError` with the failure as
    /// its text, and the session is opened anew for the next call.
    async fn mcp(&self, who: Who, token: Option<&str>, tool: &str, args: &Value) -> Option<Got> {
        let mut sessions = self.sessions.lock().await;
        let at = sessions.iter().position(|(w, _)| *w == who)?;
        match mcp_try_call(&sessions[at].1, tool, args).await {
            Ok((error, texts)) => Some(Got::Mcp(error, texts)),
            Err(failure) => {
                sessions[at].1 = self.server.mcp(token).await;
                let status = failure
                    .rsplit_once("HTTP ")
                    .map_or(failure.as_str(), |(_, status)| status);
                Some(Got::Mcp(true, vec![format!("transport: HTTP {status}")]))
            }
        }
    }
}

/// A running three-replica cluster with its callers' tokens.
struct Cluster {
    replicas: Vec<Replica>,
    tokens: BTreeMap<&'static str, String>,
    /// The first commit of the sources (what `diff` and the compare page start from).
    first: String,
    /// Each registered repository's owners (node URLs).
    owners: BTreeMap<String, Vec<String>>,
    _tmp: tempfile::TempDir,
    _source: testgit::SourceRepo,
}

impl Cluster {
    fn token(&self, who: Who) -> Option<&str> {
        let key = match who {
            Who::Anonymous => return None,
            Who::Reader => "reader",
            Who::Granted => "granted",
            Who::Preparer => "preparer",
        };
        self.tokens.get(key).map(String::as_str)
    }
}

/// A free port on 127.0.0.1 (bound, then let go: the replica binds it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// A copy of `source` whose refs stand but whose objects are gone: `git ls-remote` (what a
/// cluster registration checks) lists it; every fetch fails.
fn unfetchable(source: &Path, into: &Path) {
    let status = std::process::Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(source)
        .arg(into)
        .status()
        .expect("git runs");
    assert!(status.success(), "git clone --bare");
    for entry in walk(&into.join("objects")) {
        std::fs::remove_file(entry).expect("an object removed");
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

async fn start_cluster(public_read: bool) -> Cluster {
    let database = tokio::task::spawn_blocking(|| metadb::testing::shared().create_database())
        .await
        .expect("a throwaway database");
    let tmp = tempfile::tempdir().expect("tempdir");
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins directory");
    std::fs::write(
        plugins.join("aliases.py"),
        format!("ALIASES = {{\"{PRIVATE_ALIAS}\": \"{PRIVATE}\"}}\n"),
    )
    .expect("plugin file");
    let plugins = plugins.to_str().expect("a UTF-8 path").to_owned();
    let public_read = public_read.to_string();
    let env = [
        ("CSG_DATABASE_URL", database.as_str()),
        ("CSG_CLUSTER_SECRET", SECRET),
        ("SOURCEGRAPH_SERVER_PLUGINS_ENABLED", "true"),
        ("SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY", plugins.as_str()),
    ];
    let admin = tmp.path().join("admin");
    let admin_csg = |args: Vec<String>| {
        let admin = admin.clone();
        let database = database.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            csg_with(&admin, &args, &[("CSG_DATABASE_URL", &database)]).await
        }
    };
    let strings = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let mut tokens = BTreeMap::new();
    for (user, prepare) in [("reader", false), ("granted", false), ("preparer", true)] {
        let mut add = strings(&["user", "add", user]);
        if prepare {
            add.push("--prepare".into());
        }
        admin_csg(add).await;
        let token = admin_csg(strings(&["token", "create", user])).await;
        tokens.insert(user, token.trim().to_owned());
    }

    let mut replicas = Vec::new();
    for n in 1..=3 {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let data = tmp.path().join(format!("replica{n}"));
        let args = strings(&[
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--node-url",
            &url,
            "--public-read",
            &public_read,
        ]);
        let server = Server::spawn(&data, &args, &env).await;
        assert_eq!(server.base, url, "the replica serves at its node URL");
        replicas.push(Replica {
            server,
            url,
            sessions: tokio::sync::Mutex::new(Vec::new()),
        });
    }

    let (source, first) = source();
    let path = source.path().to_str().expect("utf-8").to_owned();
    let broken = tmp.path().join("broken.git");
    unfetchable(source.path(), &broken);
    let broken = broken.to_str().expect("utf-8").to_owned();
    admin_csg(strings(&["repo", "add", PUBLIC, &path])).await;
    admin_csg(strings(&["repo", "add", PRIVATE, &path, "--private"])).await;
    admin_csg(strings(&[
        "repo",
        "add",
        PENDING,
        &broken,
        "--private",
        "--no-wait",
    ]))
    .await;
    admin_csg(strings(&["grant", "granted", PRIVATE])).await;
    admin_csg(strings(&["grant", "granted", PENDING])).await;

    let mut cluster = Cluster {
        replicas,
        tokens,
        first,
        owners: BTreeMap::new(),
        _tmp: tmp,
        _source: source,
    };
    // Indexed on their owners before any call that reads an index is judged.
    let reader = cluster.token(Who::Reader).map(str::to_owned);
    let granted = cluster.token(Who::Granted).map(str::to_owned);
    wait_indexed(&cluster.replicas[0].server, PUBLIC, reader.as_deref()).await;
    wait_indexed(&cluster.replicas[0].server, PRIVATE, granted.as_deref()).await;

    let status = replica_status(&cluster.replicas[0].url).await;
    for entry in status["repositories"].as_array().expect("repositories") {
        let owners = entry["owners"]
            .as_array()
            .expect("owners")
            .iter()
            .map(|o| o.as_str().expect("a node URL").to_owned())
            .collect();
        cluster
            .owners
            .insert(entry["name"].as_str().expect("a name").to_owned(), owners);
    }
    for name in [PUBLIC, PRIVATE, PENDING] {
        assert_eq!(cluster.owners[name].len(), 2, "{name}: {status}");
    }
    for replica in &mut cluster.replicas {
        for who in [Who::Anonymous, Who::Reader, Who::Granted, Who::Preparer] {
            let token = match who {
                Who::Anonymous if public_read == "false" => continue,
                Who::Anonymous => None,
                Who::Reader => cluster.tokens.get("reader"),
                Who::Granted => cluster.tokens.get("granted"),
                Who::Preparer => cluster.tokens.get("preparer"),
            };
            let session = replica.server.mcp(token.map(String::as_str)).await;
            replica.sessions.get_mut().push((who, session));
        }
    }
    cluster
}

/// `GET /_cluster/status` as a replica asks it.
async fn replica_status(base: &str) -> Value {
    let answer = reqwest::Client::new()
        .get(format!("{base}/_cluster/status"))
        .header("x-csg-replica-secret", SECRET)
        .send()
        .await
        .expect("the replica answers");
    assert_eq!(answer.status().as_u16(), 200);
    answer.json().await.expect("JSON")
}

/// An HTTP call: status and body as JSON (text as a JSON string), without timings.
async fn http(request: reqwest::RequestBuilder) -> Got {
    let response = request.send().await.expect("the replica answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Got::Http(status, untimed(body))
}

/// Where a call goes in: a replica (`forwarded`: as a call another replica forwarded to it,
/// with the cluster's marker and the client's token).
#[derive(Debug, Clone, Copy)]
struct Position {
    replica: usize,
    forwarded: bool,
}

/// One call of `tool` about `name` on every face, at `at`.
async fn tool_faces(
    cluster: &Cluster,
    at: Position,
    who: Who,
    tool: &dyn ToolDef,
    name: &str,
) -> Vec<(&'static str, Got)> {
    let replica = &cluster.replicas[at.replica];
    let args = arguments(tool.name(), name, &cluster.first);
    let client = reqwest::Client::new();
    let with = |mut request: reqwest::RequestBuilder| {
        if let Some(token) = cluster.token(who) {
            request = request.bearer_auth(token);
        }
        if at.forwarded {
            request = request.header("x-csg-forwarded-secret", SECRET);
        }
        request
    };
    let mut got = Vec::new();
    if !at.forwarded
        && let Some(answer) = replica
            .mcp(who, cluster.token(who), tool.name(), &args)
            .await
    {
        got.push(("MCP", answer));
    }
    let url = format!("{}/sourcegraph/api/{}", replica.url, tool.name());
    got.push(("POST", http(with(client.post(&url).json(&args))).await));
    if tool.annotations().read_only {
        let query = common::query_string(&args);
        got.push((
            "GET",
            http(with(client.get(format!("{url}?{query}")))).await,
        ));
    }
    got
}

/// The site pages of the route table about `name` (empty for a name no page path can take).
fn site_paths(name: &str, first: &str) -> Vec<String> {
    if !name.contains('/') {
        return Vec::new();
    }
    httpserver::site_route_patterns()
        .into_iter()
        .filter_map(|pattern| {
            if pattern == "/sourcegraph/" {
                return None;
            }
            if pattern == "/sourcegraph/search" {
                return Some(format!("/sourcegraph/search?q=alpha&repo={name}"));
            }
            Some(
                pattern
                    .replace("[/<path>]", "/<path>")
                    .replace("<owner>/<name>", name)
                    .replace("<base>...<head>", &format!("{first}...main"))
                    .replace("<sha>", first)
                    .replace("<rev>", "main")
                    .replace("<path>", "src/lib.rs")
                    .replace("/-/tree/main/src/lib.rs", "/-/tree/main/src"),
            )
        })
        .collect()
}

/// A site page at `at`, as `who` (a bearer token on a page counts as the caller).
async fn site_page(cluster: &Cluster, at: Position, who: Who, path: &str) -> Got {
    let mut request = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .get(format!("{}{path}", cluster.replicas[at.replica].url))
        .header("cookie", format!("csg_csrf={CSRF}"));
    if let Some(token) = cluster.token(who) {
        request = request.bearer_auth(token);
    }
    if at.forwarded {
        request = request.header("x-csg-forwarded-secret", SECRET);
    }
    http(request).await
}

/// Checks one answer against what the rules expect; `unknown` is the unknown name's answer
/// to the same call, renamed to the name meant.
fn judge(case: &str, expected: Expect, got: &Got, unknown: &Got, tool: &str) {
    match expected {
        Expect::Answered => match got {
            Got::Http(status, body) => assert_eq!(*status, 200, "{case}: {body}"),
            Got::Mcp(error, texts) => assert!(!error, "{case}: {texts:?}"),
        },
        Expect::AsUnknown | Expect::TokenNeeded => {
            assert_eq!(got, unknown, "{case}: as the unknown name");
            match (expected, got) {
                (Expect::TokenNeeded, Got::Http(status, _)) => assert_eq!(*status, 401, "{case}"),
                (_, Got::Http(status, body)) if tool == "availability" => {
                    assert_eq!(*status, 200, "{case}: {body}");
                    assert_eq!(body["visible"], json!(false), "{case}: {body}");
                }
                (_, Got::Http(status, body)) if tool == "site" => {
                    assert!(matches!(status, 404 | 401), "{case}: {body}")
                }
                (_, Got::Http(status, body)) => assert_eq!(*status, 404, "{case}: {body}"),
                (_, Got::Mcp(error, texts)) => {
                    assert_eq!(*error, tool != "availability", "{case}: {texts:?}")
                }
            }
        }
        Expect::Unavailable => match got {
            Got::Http(status, body) => assert_eq!(*status, 503, "{case}: {body}"),
            Got::Mcp(error, texts) => assert!(*error, "{case}: {texts:?}"),
        },
    }
}

async fn matrix(public_read: bool) -> usize {
    let cluster = start_cluster(public_read).await;
    let limits = Limits::new(&service::ServiceConfig::default());
    let tools = repository_naming_tools(&limits);
    let callers = [Who::Anonymous, Who::Reader, Who::Granted, Who::Preparer];
    let mut cells = 0;
    for state in State::ALL {
        // Every replica, and a call forwarded to each owner of the repository meant.
        let mut positions: Vec<Position> = (0..cluster.replicas.len())
            .map(|replica| Position {
                replica,
                forwarded: false,
            })
            .collect();
        for owner in cluster.owners.get(state.meant()).into_iter().flatten() {
            let replica = cluster
                .replicas
                .iter()
                .position(|r| &r.url == owner)
                .expect("an owner is a replica");
            positions.push(Position {
                replica,
                forwarded: true,
            });
        }
        for at in positions {
            let role = match cluster.owners.get(state.meant()) {
                Some(owners) if owners.contains(&cluster.replicas[at.replica].url) => "owner",
                Some(_) => "non-owner",
                None => "any",
            };
            let place = format!(
                "replica {} ({role}{})",
                at.replica + 1,
                if at.forwarded { ", forwarded" } else { "" }
            );
            for who in callers {
                let expected = expect(who, state, public_read);
                for &tool in &tools {
                    let got = tool_faces(&cluster, at, who, tool, state.name()).await;
                    let unknown = tool_faces(&cluster, at, who, tool, UNKNOWN).await;
                    for ((face, got), (_, unknown)) in got.iter().zip(&unknown) {
                        let case = format!(
                            "{} of {} ({state:?}) over {face} by {who:?} at {place}, public read {public_read}",
                            tool.name(),
                            state.name()
                        );
                        let unknown = unknown.renamed(UNKNOWN, state.meant());
                        judge(&case, expected, got, &unknown, tool.name());
                        cells += 1;
                    }
                }
                for path in site_paths(state.name(), &cluster.first) {
                    let got = site_page(&cluster, at, who, &path).await;
                    let unknown_path = path.replace(state.name(), UNKNOWN);
                    let unknown = site_page(&cluster, at, who, &unknown_path)
                        .await
                        .renamed(UNKNOWN, state.meant());
                    let case = format!(
                        "page {path} ({state:?}) by {who:?} at {place}, public read {public_read}"
                    );
                    let expected = match expected {
                        // The site answers anonymous visitors with its own page, not 401.
                        Expect::TokenNeeded => Expect::AsUnknown,
                        other => other,
                    };
                    judge(&case, expected, &got, &unknown, "site");
                    cells += 1;
                }
            }
        }
    }
    cells += boundaries(&cluster).await;
    cells
}

/// No cluster-internal route answers a client, whoever it is; a wrong cluster secret on a
/// client route is refused; the repository list shows only what the caller may read.
async fn boundaries(cluster: &Cluster) -> usize {
    let client = reqwest::Client::new();
    let mut cells = 0;
    for replica in &cluster.replicas {
        let unknown_route = http(client.get(format!("{}/no-such-route", replica.url))).await;
        assert_eq!(unknown_route, Got::Http(404, Value::String(String::new())));
        for who in [Who::Anonymous, Who::Reader, Who::Granted, Who::Preparer] {
            for path in ["/_cluster/status", "/_cluster/search-part", "/_cluster/x"] {
                for marker in [
                    None,
                    Some(("x-csg-replica-secret", "bogus")),
                    Some(("x-csg-forwarded-secret", SECRET)),
                ] {
                    for post in [false, true] {
                        let url = format!("{}{path}", replica.url);
                        let mut request = if post {
                            client.post(url).json(&json!({"repo": PUBLIC}))
                        } else {
                            client.get(url)
                        };
                        if let Some(token) = cluster.token(who) {
                            request = request.bearer_auth(token);
                        }
                        if let Some((name, value)) = marker {
                            request = request.header(name, value);
                        }
                        assert_eq!(
                            http(request).await,
                            unknown_route,
                            "{path} by {who:?} with {marker:?}"
                        );
                        cells += 1;
                    }
                }
            }
            // A bogus secret, or replica identity, on a client route: refused.
            for (name, value) in [
                ("x-csg-forwarded-secret", "bogus"),
                ("x-csg-replica-secret", SECRET),
            ] {
                let mut request = client
                    .get(format!(
                        "{}/sourcegraph/api/read?repo={PUBLIC}&path=src/lib.rs",
                        replica.url
                    ))
                    .header(name, value);
                if let Some(token) = cluster.token(who) {
                    request = request.bearer_auth(token);
                }
                match http(request).await {
                    Got::Http(status, body) => assert_eq!(status, 403, "{name} by {who:?}: {body}"),
                    other => panic!("{other:?}"),
                }
                cells += 1;
            }
            // The repository list names only what the caller may read.
            let page = site_page(
                cluster,
                Position {
                    replica: 0,
                    forwarded: false,
                },
                who,
                "/sourcegraph/",
            )
            .await;
            let text = format!("{page:?}");
            for hidden in [PRIVATE, PENDING] {
                assert_eq!(
                    text.contains(hidden),
                    who == Who::Granted,
                    "the list by {who:?} and {hidden}"
                );
            }
            cells += 1;
        }
    }
    cells
}

/// A-7 (issue 43): the matrix with public read on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a7_access_matrix_with_public_read() {
    within(async {
        let cells = matrix(true).await;
        eprintln!("access matrix, public read on: {cells} cells checked");
    })
    .await;
}

/// A-7 (issue 43): the matrix with public read off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a7_access_matrix_without_public_read() {
    within(async {
        let cells = matrix(false).await;
        eprintln!("access matrix, public read off: {cells} cells checked");
    })
    .await;
}
