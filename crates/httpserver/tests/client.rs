//! Clients behind a load balancer (issue 31 point 7), over real HTTP on 127.0.0.1: without
//! trusted proxies every request is its TCP peer's, whatever it claims; with the loopback
//! trusted, `X-Forwarded-For` (rightmost untrusted hop) and PROXY protocol headers (v1, v2)
//! tell clients apart, each with its own wrong-token bucket; a PROXY header from an
//! untrusted peer is not honoured, and a slow one holds up nothing but its own connection.

use axum::extract::Extension;
use axum::routing::get;
use httpserver::{ClientAddr, ServeOptions, TrustedProxies};
use service::{Service, ServiceConfig};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use testgit::SourceRepo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A well-formed token no user has.
const WRONG: &str = "csg_0000000000000000000000000000000000000000000000000000000000000000";

/// Answers the request's client address.
async fn whoami(Extension(ClientAddr(addr)): Extension<ClientAddr>) -> String {
    addr.to_string()
}

struct Server {
    _source: SourceRepo,
    addr: SocketAddr,
    client: reqwest::Client,
}

/// The API behind the access layer, plus `/whoami`, served with `options`.
async fn server(options: ServeOptions) -> Server {
    let source = SourceRepo::with_files(&[("a.md", b"# A\n")]);
    let store = source.store("test/client", "");
    let service = Service::new(store, ServiceConfig::default());
    let site = httpserver::SiteConfig {
        origin: "http://127.0.0.1".into(),
    };
    let app = httpserver::with_access(
        httpserver::router(service.clone(), httpserver::Readiness::default())
            .route("/whoami", get(whoami)),
        service,
        &site,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(httpserver::serve_with(
        listener,
        app,
        std::future::pending(),
        options,
    ));
    Server {
        _source: source,
        addr,
        client: reqwest::Client::new(),
    }
}

fn trusting(cidr: &str) -> ServeOptions {
    ServeOptions {
        trusted_proxies: TrustedProxies::parse(cidr).unwrap(),
        ..ServeOptions::default()
    }
}

impl Server {
    /// A call with a wrong token, claiming `forwarded` as `X-Forwarded-For`: its status.
    async fn wrong_token(&self, forwarded: &str) -> u16 {
        self.client
            .get(format!("http://{}/sourcegraph/api/repos", self.addr))
            .bearer_auth(WRONG)
            .header("x-forwarded-for", forwarded)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// Who the server takes a request claiming `forwarded` for.
    async fn whoami(&self, forwarded: &[&str]) -> String {
        let mut request = self.client.get(format!("http://{}/whoami", self.addr));
        for value in forwarded {
            request = request.header("x-forwarded-for", *value);
        }
        request.send().await.unwrap().text().await.unwrap()
    }

    /// Spends the burst of wrong tokens of the client `forwarded` names.
    async fn exhaust(&self, forwarded: &str) {
        for attempt in 0..10 {
            assert_eq!(self.wrong_token(forwarded).await, 401, "attempt {attempt}");
        }
    }
}

/// Runs `test` under a deadline: nothing here may hang the suite.
async fn within<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("timed out");
}

#[tokio::test]
async fn without_trusted_proxies_forwarded_for_is_ignored() {
    within(async {
        let server = server(ServeOptions::default()).await;
        assert_eq!(server.whoami(&["198.51.100.1"]).await, "127.0.0.1");
        server.exhaust("198.51.100.1").await;
        assert_eq!(
            server.wrong_token("198.51.100.2").await,
            429,
            "two claimed clients from one peer share its bucket"
        );
    })
    .await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_clients_get_their_own_buckets() {
    within(async {
        let server = server(trusting("127.0.0.1/32")).await;
        assert_eq!(server.whoami(&["198.51.100.1"]).await, "198.51.100.1");
        assert_eq!(
            server.whoami(&["203.0.113.66, 198.51.100.1"]).await,
            "198.51.100.1",
            "the rightmost untrusted hop"
        );
        assert_eq!(
            server.whoami(&["198.51.100.1", "127.0.0.1"]).await,
            "198.51.100.1",
            "trusted hops skipped, across header instances"
        );
        assert_eq!(server.whoami(&[]).await, "127.0.0.1", "no header: the peer");
        server.exhaust("198.51.100.1").await;
        assert_eq!(server.wrong_token("198.51.100.1").await, 429);
        assert_eq!(
            server.wrong_token("198.51.100.2").await,
            401,
            "another client behind the proxy has its own bucket"
        );
        assert_eq!(
            server.wrong_token("198.51.100.2, 198.51.100.1").await,
            429,
            "a spoofed left entry does not get a client out of its bucket"
        );
    })
    .await;
}

/// Sends `prelude` then a GET of `/whoami` on a new connection; answers the response's text
/// (empty when the server closed without one).
async fn raw_whoami(addr: SocketAddr, prelude: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut bytes = prelude.to_vec();
    bytes.extend_from_slice(b"GET /whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(&bytes).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// The body of an HTTP response.
fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// A PROXY protocol v2 header: `command` 0x20 LOCAL or 0x21 PROXY, `family` 0x11 TCP4 or
/// 0x21 TCP6.
fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.push(command);
    header.push(family);
    header.extend_from_slice(&u16::try_from(addresses.len()).unwrap().to_be_bytes());
    header.extend_from_slice(addresses);
    header
}

fn v2_tcp6(source: &str) -> Vec<u8> {
    let mut addresses = Vec::new();
    addresses.extend_from_slice(&source.parse::<std::net::Ipv6Addr>().unwrap().octets());
    addresses.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    addresses.extend_from_slice(&[0x9c, 0x40, 0, 80]);
    v2(0x21, 0x21, &addresses)
}

#[tokio::test]
async fn proxy_protocol_from_a_trusted_peer_names_the_client() {
    within(async {
        let server = server(trusting("127.0.0.1")).await;
        let v1 = raw_whoami(
            server.addr,
            b"PROXY TCP4 203.0.113.5 127.0.0.1 40000 80\r\n",
        )
        .await;
        assert!(v1.starts_with("HTTP/1.1 200"), "{v1}");
        assert_eq!(body(&v1), "203.0.113.5");
        let v1_six = raw_whoami(server.addr, b"PROXY TCP6 2001:db8::5 ::1 40000 80\r\n").await;
        assert_eq!(body(&v1_six), "2001:db8::5");
        let tcp4 = v2(
            0x21,
            0x11,
            &[203, 0, 113, 6, 127, 0, 0, 1, 0x9c, 0x40, 0, 80],
        );
        assert_eq!(body(&raw_whoami(server.addr, &tcp4).await), "203.0.113.6");
        assert_eq!(
            body(&raw_whoami(server.addr, &v2_tcp6("2001:db8::6")).await),
            "2001:db8::6"
        );
        assert_eq!(
            body(&raw_whoami(server.addr, &v2(0x20, 0x00, &[])).await),
            "127.0.0.1",
            "LOCAL: the peer"
        );
        assert_eq!(
            body(&raw_whoami(server.addr, b"PROXY UNKNOWN\r\n").await),
            "127.0.0.1"
        );
        assert_eq!(
            body(&raw_whoami(server.addr, b"").await),
            "127.0.0.1",
            "a trusted peer without a PROXY header is served as it came"
        );
        assert_eq!(
            raw_whoami(server.addr, b"PROXY TCP4 not-an-address 127.0.0.1 1 2\r\n").await,
            "",
            "a malformed header closes the connection"
        );

        // Every request of a keep-alive connection is the PROXY header's client.
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream
            .write_all(b"PROXY TCP4 203.0.113.7 127.0.0.1 40000 80\r\n")
            .await
            .unwrap();
        for _ in 0..3 {
            stream
                .write_all(b"GET /whoami HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut answer = Vec::new();
            let mut buf = vec![0u8; 4096];
            while !answer.ends_with(b"203.0.113.7") {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "{}", String::from_utf8_lossy(&answer));
                answer.extend_from_slice(&buf[..n]);
            }
        }
    })
    .await;
}

#[tokio::test]
async fn proxy_protocol_sets_the_rate_limit_bucket() {
    within(async {
        let server = server(trusting("127.0.0.1/32")).await;
        let wrong = |source: &'static str| {
            let addr = server.addr;
            async move {
                let mut stream = TcpStream::connect(addr).await.unwrap();
                let request = format!(
                    "PROXY TCP4 {source} 127.0.0.1 40000 80\r\nGET /sourcegraph/api/repos \
                     HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRONG}\r\nConnection: \
                     close\r\n\r\n"
                );
                stream.write_all(request.as_bytes()).await.unwrap();
                let mut answer = String::new();
                let _ = stream.read_to_string(&mut answer).await;
                answer
            }
        };
        for _ in 0..10 {
            assert!(wrong("203.0.113.8").await.starts_with("HTTP/1.1 401"));
        }
        assert!(wrong("203.0.113.8").await.starts_with("HTTP/1.1 429"));
        assert!(wrong("203.0.113.9").await.starts_with("HTTP/1.1 401"));
    })
    .await;
}

#[tokio::test]
async fn proxy_protocol_from_an_untrusted_peer_is_not_honoured() {
    within(async {
        for options in [ServeOptions::default(), trusting("10.0.0.0/8")] {
            let server = server(options).await;
            let v1 = raw_whoami(
                server.addr,
                b"PROXY TCP4 203.0.113.5 127.0.0.1 40000 80\r\n",
            )
            .await;
            assert!(!v1.contains("203.0.113.5"), "{v1}");
            assert!(!v1.starts_with("HTTP/1.1 200"), "refused as HTTP: {v1}");
            let tcp4 = v2(
                0x21,
                0x11,
                &[203, 0, 113, 6, 127, 0, 0, 1, 0x9c, 0x40, 0, 80],
            );
            let v2 = raw_whoami(server.addr, &tcp4).await;
            assert!(
                !v2.contains("203.0.113.6") && !v2.starts_with("HTTP/1.1 200"),
                "{v2}"
            );
            // The peer itself is served as before.
            assert_eq!(body(&raw_whoami(server.addr, b"").await), "127.0.0.1");
        }
    })
    .await;
}

/// One worker thread: a connection stuck in its PROXY header must not keep the worker from
/// serving another, and is closed once its time is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_slow_proxy_header_holds_up_only_itself() {
    within(async {
        let server = server(ServeOptions {
            proxy_header_timeout: Duration::from_secs(2),
            ..trusting("127.0.0.1")
        })
        .await;
        let tcp4 = v2(
            0x21,
            0x11,
            &[203, 0, 113, 6, 127, 0, 0, 1, 0x9c, 0x40, 0, 80],
        );
        for partial in [&b"PROXY TCP4 203.0.1"[..], &tcp4[..20], b"\r\n\r\n", b""] {
            let mut stuck = TcpStream::connect(server.addr).await.unwrap();
            stuck.write_all(partial).await.unwrap();
            let started = Instant::now();
            // Served on the same (only) worker while the other waits.
            assert_eq!(body(&raw_whoami(server.addr, b"").await), "127.0.0.1");
            assert!(
                started.elapsed() < Duration::from_millis(1500),
                "not held up"
            );
            let mut buf = [0u8; 64];
            let closed = tokio::time::timeout(Duration::from_secs(5), stuck.read(&mut buf))
                .await
                .expect("the stuck connection is closed at its timeout");
            assert!(matches!(closed, Ok(0) | Err(_)), "closed without an answer");
            assert!(
                started.elapsed() >= Duration::from_secs(1),
                "not before its time"
            );
        }
    })
    .await;
}
