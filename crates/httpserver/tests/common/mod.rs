//! Set-up shared by the cluster-mode routing tests (issue 31): real replicas on 127.0.0.1,
//! each served as the binary serves one, with a placement the test fixes so that it decides
//! who owns what.
#![allow(dead_code)]

use service::{Membership, Peers, Placement, Service};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use testgit::SourceRepo;

/// The cluster secret every replica of these tests shares.
pub const SECRET: &str = "a-cluster-secret-of-at-least-32-characters";

/// A placement the test fixes: the owners of each repository named in `owners`, `otherwise`
/// of any other, and the peers a search over every repository asks for their parts.
pub struct Fixed {
    pub me: String,
    pub owners: HashMap<String, Vec<String>>,
    pub otherwise: Vec<String>,
    pub peers: Option<Arc<dyn Peers>>,
}

impl Fixed {
    /// The replica at `me`, with the owners of each repository as `owners` names them (none
    /// for any other).
    pub fn per_repo(me: &str, owners: HashMap<String, Vec<String>>) -> Self {
        Self {
            me: me.to_owned(),
            owners,
            otherwise: Vec::new(),
            peers: None,
        }
    }

    /// The replica at `me`, with `owners` the owners of every repository.
    pub fn for_every(me: &str, owners: &[String]) -> Self {
        Self {
            me: me.to_owned(),
            owners: HashMap::new(),
            otherwise: owners.to_vec(),
            peers: None,
        }
    }
}

impl Placement for Fixed {
    fn owners(&self, repo: &str) -> Vec<String> {
        self.owners
            .get(repo)
            .cloned()
            .unwrap_or_else(|| self.otherwise.clone())
    }
    fn self_url(&self) -> &str {
        &self.me
    }
    fn members(&self) -> Membership {
        Membership {
            members: Vec::new(),
            database_reachable: true,
            draining: false,
        }
    }
    fn peers(&self) -> Option<Arc<dyn Peers>> {
        self.peers.clone()
    }
}

/// A replica the test reaches at `base`, serving from its copy of `source`.
pub struct Replica {
    pub source: SourceRepo,
    pub base: String,
}

/// Cluster routing with [`SECRET`], giving each owner `attempt_timeout`.
pub fn routing(attempt_timeout: Duration) -> httpserver::ClusterRouting {
    httpserver::ClusterRouting {
        secret: SECRET.into(),
        attempt_timeout,
        tls: None,
    }
}

/// A listener on a free port of 127.0.0.1 and the URL it is reached at.
pub async fn bind() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    (listener, url)
}

/// The site of the replica reached at `base`.
pub fn site(base: &str) -> httpserver::SiteConfig {
    httpserver::SiteConfig {
        origin: base.to_owned(),
    }
}

/// Runs `test`, failing it if it takes longer than `limit`.
pub async fn bounded(limit: Duration, test: impl Future<Output = ()>) {
    tokio::time::timeout(limit, test)
        .await
        .expect("the test finished within its bound");
}

/// Serves `routes` (the API and whatever the test mounts beside it) on `listener` for as
/// long as the test runs, as the replica of `service` reached at `base`, layered as the
/// binary layers one: the routing inside the access layer, the replica gate (with the
/// cluster's own routes) outside it.
pub fn serve(
    listener: tokio::net::TcpListener,
    base: &str,
    service: Service,
    routes: axum::Router,
    routing: httpserver::ClusterRouting,
) {
    serve_until(
        listener,
        base,
        service,
        routes,
        routing,
        std::future::pending(),
    );
}

/// [`serve`] until `stop` resolves.
pub fn serve_until(
    listener: tokio::net::TcpListener,
    base: &str,
    service: Service,
    routes: axum::Router,
    routing: httpserver::ClusterRouting,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    let options = httpserver::AccessOptions::default();
    serve_with(listener, base, service, routes, routing, options, stop);
}

/// [`serve_until`] with the access layer's `options` (an identity provider, say).
pub fn serve_with(
    listener: tokio::net::TcpListener,
    base: &str,
    service: Service,
    routes: axum::Router,
    routing: httpserver::ClusterRouting,
    options: httpserver::AccessOptions,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    let app = httpserver::with_cluster_routing(routes, service.clone(), routing.clone())
        .expect("routing");
    let app = httpserver::with_access_options(app, service.clone(), &site(base), options);
    let app = httpserver::with_replica_gate(app, service, &routing).expect("gate");
    tokio::spawn(httpserver::serve(listener, app, stop));
}

/// The service of the replica at `base` holding `repo` (one file, `a.md`, of `text`), with
/// every other repository of `owners` registered, and placed by `owners`. The source is
/// returned to keep the store's directory alive.
pub fn holding(
    base: &str,
    repo: &str,
    text: &[u8],
    owners: &[(&str, Vec<String>)],
) -> (Service, SourceRepo) {
    let source = SourceRepo::with_files(&[("a.md", text)]);
    let store = source.store(repo, "");
    register_the_others(&store, &source, repo, owners);
    let service = Service::new(store, service::ServiceConfig::default());
    service.set_placement(Arc::new(Fixed::per_repo(
        base,
        owners
            .iter()
            .map(|(repo, owners)| (repo.to_string(), owners.clone()))
            .collect(),
    )));
    (service, source)
}

/// [`register_elsewhere`] for every repository of `owners` but `own`.
pub fn register_the_others(
    store: &gitstore::GitStore,
    source: &SourceRepo,
    own: &str,
    owners: &[(&str, Vec<String>)],
) {
    let others: Vec<&str> = owners
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| *name != own)
        .collect();
    register_elsewhere(store, source, &others);
}

/// Registers `names` in `store` (from `source`, not synced): in a real cluster
/// every replica shares one registry, so each knows the repositories the others hold; these
/// tests give each replica a store of its own.
pub fn register_elsewhere(store: &gitstore::GitStore, source: &SourceRepo, names: &[&str]) {
    for name in names {
        store
            .register(gitstore::Registration {
                name: gitstore::RepoName::parse(name).expect("repository name"),
                source: source.source(),
                registered_path: gitstore::RepoPath::parse("").expect("registered path"),
                branch: None,
                private: None,
            })
            .expect("register");
    }
}

/// An answer read off a raw HTTP/1.1 connection.
pub struct RawAnswer {
    pub status: u16,
    pub body: String,
}

/// How a raw POST frames its body.
#[derive(Clone, Copy)]
pub enum Framing {
    /// `Content-Length` as given (it may promise more than is sent).
    Length(u64),
    /// `Transfer-Encoding: chunked`, ended with the last chunk when `end` says so.
    Chunked { end: bool },
}

/// A POST of `body` to `path` by raw HTTP/1.1 (no client library between the test and the
/// server's framing), written in 64 KiB pieces while the answer is read: the server may
/// answer before the body is sent whole, and a write that fails then ends the writing, not
/// the call. The connection stays open until the answer is read, so a server that waits for
/// more than was sent never answers (the caller's timeout then fails the test).
pub async fn raw_post(
    addr: std::net::SocketAddr,
    path: &str,
    framing: Framing,
    body: Arc<[u8]>,
) -> RawAnswer {
    raw_post_with(addr, path, "", framing, body).await
}

/// [`raw_post`] with more header lines (each ending in `\r\n`).
pub async fn raw_post_with(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &str,
    framing: Framing,
    body: Arc<[u8]>,
) -> RawAnswer {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let header = match framing {
        Framing::Length(length) => format!("Content-Length: {length}"),
        Framing::Chunked { .. } => "Transfer-Encoding: chunked".to_owned(),
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{headers}{header}\r\n\r\n"
    );
    let writing = tokio::spawn(async move {
        writer.write_all(head.as_bytes()).await?;
        let chunked = matches!(framing, Framing::Chunked { .. });
        for piece in body.chunks(64 * 1024) {
            if chunked {
                writer
                    .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                    .await?;
                writer.write_all(piece).await?;
                writer.write_all(b"\r\n").await?;
            } else {
                writer.write_all(piece).await?;
            }
        }
        if let Framing::Chunked { end: true } = framing {
            writer.write_all(b"0\r\n\r\n").await?;
        }
        Ok::<_, std::io::Error>(writer)
    });
    let mut answer = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    let (status, body_at, length) = loop {
        let read = reader.read(&mut buffer).await.expect("read the answer");
        assert!(read > 0, "the connection closed before an answer");
        answer.extend_from_slice(&buffer[..read]);
        let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status line");
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|length| length.trim().parse::<usize>().ok())
            .unwrap_or(0);
        break (status, end + 4, length);
    };
    while answer.len() < body_at + length {
        let read = reader.read(&mut buffer).await.expect("read the answer");
        if read == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..read]);
    }
    writing.abort();
    RawAnswer {
        status,
        body: String::from_utf8_lossy(&answer[body_at..]).into_owned(),
    }
}
