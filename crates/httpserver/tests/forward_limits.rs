//! Issue 42 point 9: one body limit everywhere a body is read — every route under
//! `/sourcegraph/api/`, the MCP endpoint, the cluster routing — refused with a 413 that says
//! the limit and what to do, before the body is held whole: with `Content-Length` from the
//! headers alone, chunked once more than the limit has arrived. The tests send less than they
//! announce (or no last chunk) and keep the connection open: a server that waited for the
//! rest would never answer. And a body within the limit still reaches its owner intact,
//! however far down it names its repository. Real replicas on 127.0.0.1.

mod common;

use common::{Framing, Replica, SECRET, bind, bounded, raw_post, routing, site};
use httpserver::MAX_REQUEST_BODY_BYTES;
use service::{Service, ServiceConfig};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use testgit::SourceRepo;

/// Every test's bound.
const LIMIT: Duration = Duration::from_secs(60);

/// The MCP endpoint of these replicas: who answers, the body's length and its SHA-256, so a
/// test sees which replica a call reached and that its body came whole.
fn echo_mcp(who: &str) -> axum::routing::MethodRouter {
    let me = who.to_owned();
    axum::routing::post(move |body: axum::body::Bytes| async move {
        format!("{me} {} {:x}", body.len(), Sha256::digest(&body))
    })
}

/// The routes a replica serves, as the binary mounts them: the API, the site, the MCP
/// endpoint (here: [`echo_mcp`]), the body limit around them all.
fn routes(service: &Service, base: &str, who: &str) -> axum::Router {
    let routes = httpserver::router(service.clone(), httpserver::Readiness::default())
        .merge(httpserver::site_router(service.clone(), &site(base)))
        .route("/sourcegraph/mcp", echo_mcp(who));
    httpserver::with_body_limit(routes)
}

/// A replica holding `repo`, routing by `owners`; the part route of a search over every
/// repository mounted too.
async fn replica(
    listener: tokio::net::TcpListener,
    repo: &str,
    owners: &[(&str, Vec<String>)],
) -> Replica {
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (service, source) = common::holding(&base, repo, b"hello\n", owners);
    common::serve_until(
        listener,
        &base,
        service.clone(),
        routes(&service, &base, repo),
        routing(Duration::from_secs(5)),
        std::future::pending(),
    );
    Replica { source, base }
}

fn addr(replica: &Replica) -> std::net::SocketAddr {
    replica
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("address")
}

/// A body of `bytes`: a `read` of `repo` padded with a string, as an MCP call when `mcp`.
fn body(repo: &str, bytes: usize, mcp: bool) -> Arc<[u8]> {
    let (head, tail) = if mcp {
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"pad":""#.to_owned(),
            format!(r#"","repo":"{repo}","path":"a.md"}}}}}}"#),
        )
    } else {
        (
            r#"{"pad":""#.to_owned(),
            format!(r#"","repo":"{repo}","path":"a.md"}}"#),
        )
    };
    let pad = bytes - head.len() - tail.len();
    let mut body = head.into_bytes();
    body.resize(body.len() + pad, b'x');
    body.extend_from_slice(tail.as_bytes());
    assert_eq!(body.len(), bytes);
    body.into()
}

/// The 413 of the limit: it says the limit and what to do.
fn assert_refused(answer: &common::RawAnswer, what: &str) {
    assert_eq!(answer.status, 413, "{what}: {}", answer.body);
    assert!(
        answer.body.contains("larger than 2 MiB (2097152 bytes)") && answer.body.contains("split"),
        "{what}: {}",
        answer.body
    );
}

/// O-9: a body over the limit is refused before it is read whole, on a cluster replica (the
/// routing reads bodies first) for a repository it owns and one another owns, at the API and
/// at the MCP endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o9_a_body_over_the_limit_is_refused_before_it_is_read_whole() {
    bounded(LIMIT, async {
        let ((la, a_url), (lb, b_url)) = (bind().await, bind().await);
        let a = replica(
            la,
            "acme/a",
            &[
                ("acme/a", vec![a_url.clone()]),
                ("acme/b", vec![b_url.clone()]),
            ],
        )
        .await;
        let _b = replica(lb, "acme/b", &[("acme/b", vec![b_url.clone()])]).await;
        let over = MAX_REQUEST_BODY_BYTES + 1;
        for repo in ["acme/a", "acme/b"] {
            for (path, mcp) in [("/sourcegraph/api/read", false), ("/sourcegraph/mcp", true)] {
                let what = format!("{repo} at {path}");
                // Announced: refused from the headers, with 64 KiB of 8 MiB sent.
                let sent: Arc<[u8]> = body(repo, 64 * 1024, mcp);
                let answer = raw_post(addr(&a), path, Framing::Length(8 << 20), sent).await;
                assert_refused(&answer, &format!("{what}, announced"));
                // Chunked: refused once past the limit, without the last chunk.
                let sent = body(repo, over + 64 * 1024, mcp);
                let answer = raw_post(addr(&a), path, Framing::Chunked { end: false }, sent).await;
                assert_refused(&answer, &format!("{what}, chunked"));
            }
        }
        // Every route under /sourcegraph/api/, not only the tools'.
        for path in ["/sourcegraph/api/repos", "/sourcegraph/api/prepare"] {
            let sent: Arc<[u8]> = Arc::from(&b"{\"name\":\"acme/b\","[..]);
            let answer = raw_post(addr(&a), path, Framing::Length(8 << 20), sent).await;
            assert_refused(&answer, path);
        }
        // The part route of a search over every repository reads bodies of its own size, for
        // replicas only: to anybody else it is an unknown route, answered before any is read.
        let sent: Arc<[u8]> = Arc::from(&b"{"[..]);
        let answer = raw_post(
            addr(&a),
            "/_cluster/search-part",
            Framing::Length(8 << 20),
            sent,
        )
        .await;
        assert_eq!(answer.status, 404, "{}", answer.body);
    })
    .await;
}

/// O-9: without cluster routing the same limit holds, from the body-limit layer alone (the
/// API's router carries it; the binary puts it around the MCP endpoint too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o9_the_limit_holds_without_cluster_routing() {
    bounded(LIMIT, async {
        let (listener, base) = bind().await;
        let address = listener.local_addr().expect("addr");
        let source = SourceRepo::with_files(&[("a.md", b"hello\n")]);
        let service = Service::new(source.store("acme/a", ""), ServiceConfig::default());
        let app = httpserver::with_access(routes(&service, &base, "acme/a"), service, &site(&base));
        tokio::spawn(httpserver::serve(listener, app, std::future::pending()));
        let over = MAX_REQUEST_BODY_BYTES + 1;
        for (path, mcp) in [("/sourcegraph/api/read", false), ("/sourcegraph/mcp", true)] {
            let sent = body("acme/a", 64 * 1024, mcp);
            let answer = raw_post(address, path, Framing::Length(8 << 20), sent).await;
            assert_refused(&answer, path);
            let sent = body("acme/a", over + 64 * 1024, mcp);
            let answer = raw_post(address, path, Framing::Chunked { end: false }, sent).await;
            assert_refused(&answer, path);
        }
        // The API's own router carries the limit, wherever it is mounted.
        let bare = httpserver::router(
            Service::new(source.store("acme/a", ""), ServiceConfig::default()),
            httpserver::Readiness::default(),
        );
        let (listener, _) = bind().await;
        let bare_address = listener.local_addr().expect("addr");
        tokio::spawn(httpserver::serve(listener, bare, std::future::pending()));
        let sent = body("acme/a", over + 64 * 1024, false);
        let answer = raw_post(
            bare_address,
            "/sourcegraph/api/read",
            Framing::Chunked { end: false },
            sent,
        )
        .await;
        assert_refused(&answer, "the bare API router");
        // Within the limit, a body of too many values is refused before any handler parses
        // it; one of a few is answered.
        let values = format!(
            r#"{{"repo":"acme/a","path":"a.md","pad":[{}]}}"#,
            vec!["0"; httpserver::MAX_JSON_VALUES].join(",")
        );
        let answer = raw_post(
            address,
            "/sourcegraph/api/read",
            Framing::Length(values.len() as u64),
            Arc::from(values.as_bytes()),
        )
        .await;
        assert_eq!(answer.status, 413, "{}", answer.body);
        assert!(answer.body.contains("10000 JSON values"), "{}", answer.body);
        let small = br#"{"repo":"acme/a","path":"a.md"}"#;
        let answer = raw_post(
            address,
            "/sourcegraph/api/read",
            Framing::Chunked { end: true },
            Arc::from(&small[..]),
        )
        .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    })
    .await;
}

/// A body just within the limit that names its repository after 2 MiB of other text reaches
/// the owner whole, chunked or not; and a replica with the cluster secret is held to the
/// same limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o9_a_body_within_the_limit_reaches_its_owner_intact() {
    bounded(LIMIT, async {
        let ((la, a_url), (lb, b_url)) = (bind().await, bind().await);
        let a = replica(
            la,
            "acme/a",
            &[("acme/a", vec![a_url]), ("acme/b", vec![b_url.clone()])],
        )
        .await;
        let _b = replica(lb, "acme/b", &[("acme/b", vec![b_url.clone()])]).await;
        let call = body("acme/b", MAX_REQUEST_BODY_BYTES, true);
        let expected = format!(
            "acme/b {} {:x}",
            call.len(),
            Sha256::digest(&call[..])
        );
        for framing in [
            Framing::Length(call.len() as u64),
            Framing::Chunked { end: true },
        ] {
            let answer = raw_post(addr(&a), "/sourcegraph/mcp", framing, call.clone()).await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            assert_eq!(answer.body, expected);
        }
        // Named with escapes (`acme\/b`): still B's.
        let escaped = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"repo":"acme\/b","path":"a.md"}}}"#;
        let answer = raw_post(
            addr(&a),
            "/sourcegraph/mcp",
            Framing::Length(escaped.len() as u64),
            Arc::from(&escaped[..]),
        )
        .await;
        assert!(answer.body.starts_with("acme/b "), "{}", answer.body);
        // A forwarded call over the limit (with the marker) is refused all the same.
        let b_addr = b_url.trim_start_matches("http://").parse().expect("address");
        let answer = common::raw_post_with(
            b_addr,
            "/sourcegraph/mcp",
            &format!("x-csg-forwarded-secret: {SECRET}\r\n"),
            Framing::Length(8 << 20),
            body("acme/b", 64 * 1024, true),
        )
        .await;
        assert_refused(&answer, "a forwarded call");
    })
    .await;
}
