//! Issue 42 point 9: a flood of big anonymous bodies at a cluster replica costs it little
//! memory. Sixteen clients at once each send an 8 MiB JSON body (a `repo` and 4 million tiny
//! array elements: what a `serde_json::Value` tree makes 16 times bigger) to the JSON API and
//! the MCP endpoint of a replica with cluster routing in front, chunked (no `Content-Length`,
//! so the server cannot refuse from the headers alone) and with `Content-Length`; then the
//! same with bodies just within the body limit. The process's peak resident memory may grow
//! by at most 64 MB each time. Alone in its test binary: the peak is the whole process's.

mod common;

use common::{Fixed, Framing, bind, raw_post, routing, serve};
use service::{Service, ServiceConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use testgit::SourceRepo;
use testgit::usage;

/// The size of each flood body.
const BODY_BYTES: usize = 8 * 1024 * 1024;
/// Clients at once.
const CLIENTS: usize = 16;
/// How much the process's peak resident memory may grow during the flood.
const MAX_GROWTH_BYTES: u64 = 64 * 1024 * 1024;

/// `head`, then `,0` until `tail` makes it exactly `bytes` long: a few names and as many
/// tiny array elements as fit.
fn padded(head: &[u8], tail: &[u8], bytes: usize) -> Arc<[u8]> {
    let mut body = Vec::with_capacity(bytes);
    body.extend_from_slice(head);
    while body.len() + 2 + tail.len() <= bytes {
        body.extend_from_slice(b",0");
    }
    while body.len() + tail.len() < bytes {
        body.push(b' ');
    }
    body.extend_from_slice(tail);
    assert_eq!(body.len(), bytes);
    body.into()
}

/// The API's arguments of a `read` of `acme/a`, padded to `bytes`.
fn api_body(bytes: usize) -> Arc<[u8]> {
    padded(br#"{"repo":"acme/a","path":"a.md","pad":[0"#, b"]}", bytes)
}

/// An MCP `tools/call` of `read` whose arguments carry the same padding.
fn mcp_body(bytes: usize) -> Arc<[u8]> {
    let head = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"repo":"acme/a","path":"a.md","pad":[0"#;
    padded(head, b"]}}}", bytes)
}

/// Sends [`CLIENTS`] bodies at once, half `api` to the JSON API and half `mcp` to the MCP
/// endpoint, three in four chunked (the server sees no size before the body): their
/// statuses and the process's peak resident memory growth meanwhile, in bytes.
async fn flood(addr: std::net::SocketAddr, api: &Arc<[u8]>, mcp: &Arc<[u8]>) -> (Vec<u16>, u64) {
    let baseline = usage::rss();
    let reset = usage::reset_peak();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(usage::rss());
                std::thread::sleep(Duration::from_millis(1));
            }
            peak
        })
    };
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (path, body) = if i % 2 == 0 {
                ("/sourcegraph/api/read", api.clone())
            } else {
                ("/sourcegraph/mcp", mcp.clone())
            };
            let framing = if i % 4 == 3 {
                Framing::Length(body.len() as u64)
            } else {
                Framing::Chunked { end: true }
            };
            tokio::spawn(async move { raw_post(addr, path, framing, body).await.status })
        })
        .collect();
    let mut statuses = Vec::new();
    for client in clients {
        statuses.push(client.await.expect("client"));
    }
    let took = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let sampled = sampler.join().expect("sampler");
    let peak = if reset {
        sampled.max(usage::peak())
    } else {
        sampled
    };
    let growth = peak.saturating_sub(baseline);
    eprintln!(
        "flood of {CLIENTS} x {} KiB: baseline RSS {} MiB, peak {} MiB, growth {} MiB \
         (VmHWM reset: {reset}), {took:?}, statuses {statuses:?}",
        api.len() >> 10,
        baseline >> 20,
        peak >> 20,
        growth >> 20,
    );
    (statuses, growth)
}

/// O-9, issue 42: bodies over the limit are refused (413) without being held whole or
/// parsed; bodies within it that would make a huge `serde_json::Value` tree are refused by
/// the value count before any handler parses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o9_sixteen_8_mib_anonymous_bodies_add_at_most_64_mb() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let (listener, base) = bind().await;
        let addr = listener.local_addr().expect("addr");
        let source = SourceRepo::with_files(&[("a.md", b"hello\n")]);
        let service = Service::new(source.store("acme/a", ""), ServiceConfig::default());
        service.set_placement(Arc::new(Fixed::for_every(
            &base,
            std::slice::from_ref(&base),
        )));
        // As the binary mounts it: the MCP endpoint beside the API, the body limit around both.
        let mcp = axum::routing::post(|| async { "MCP" });
        let routes = httpserver::router(service.clone(), httpserver::Readiness::default())
            .route("/sourcegraph/mcp", mcp);
        let routes = httpserver::with_body_limit(routes);
        serve(
            listener,
            &base,
            service,
            routes,
            routing(Duration::from_secs(5)),
        );
        let (api, mcp) = (api_body(BODY_BYTES), mcp_body(BODY_BYTES));
        // Just within the limit, and some hundred thousand values each.
        let within = httpserver::MAX_REQUEST_BODY_BYTES;
        let (api_within, mcp_within) = (api_body(within), mcp_body(within));
        // Warm up: the server's workers, the client's runtime, one body of each kind.
        let small = Arc::<[u8]>::from(&br#"{"repo":"acme/a","path":"a.md"}"#[..]);
        let small_length = Framing::Length(small.len() as u64);
        let answer = raw_post(addr, "/sourcegraph/api/read", small_length, small).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let whole = Framing::Chunked { end: true };
        raw_post(addr, "/sourcegraph/api/read", whole, api.clone()).await;
        let length = Framing::Length(mcp_within.len() as u64);
        raw_post(addr, "/sourcegraph/mcp", length, mcp_within.clone()).await;

        let (statuses, growth) = flood(addr, &api, &mcp).await;
        assert!(
            statuses.iter().all(|&status| status == 413),
            "every body over the limit is refused with 413: {statuses:?}"
        );
        assert!(
            growth <= MAX_GROWTH_BYTES,
            "peak RSS grew by {} MiB (at most {} MiB)",
            growth >> 20,
            MAX_GROWTH_BYTES >> 20
        );
        let (statuses, growth) = flood(addr, &api_within, &mcp_within).await;
        assert!(
            statuses.iter().all(|&status| status == 413),
            "every body of too many values is refused with 413: {statuses:?}"
        );
        assert!(
            growth <= MAX_GROWTH_BYTES,
            "peak RSS grew by {} MiB (at most {} MiB)",
            growth >> 20,
            MAX_GROWTH_BYTES >> 20
        );
    })
    .await
    .expect("the floods were answered within 120 s");
}
