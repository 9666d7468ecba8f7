//! Cluster mode's routing of calls answered from the search index (issue 31): an owner that
//! holds a repository but has not indexed it yet (it just gained it, or restarted) does not
//! answer them "not indexed" while another owner can answer them whole; when no owner has an
//! index, a holder still answers (naming the repository as not indexed) rather than nobody.
//! And a forwarded attempt keeps within the caller's deadline. Real replicas on 127.0.0.1,
//! each with its own data directory and its own copy of the repository (told apart by their
//! text); the placement is fixed so the test decides who owns what.

mod common;

use common::{Fixed, Replica, bind, bounded, routing, serve};
use serde_json::Value;
use service::{Service, ServiceConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testgit::SourceRepo;

const REPO: &str = "acme/r";
/// Every test's bound.
const LIMIT: Duration = Duration::from_secs(120);
/// How long one owner gets, as the replicas here are configured.
const ATTEMPT: Duration = Duration::from_secs(5);

/// A replica holding its own copy of [`REPO`] (one file whose line says `who`), indexed or
/// not, routing by `owners` (every replica sees the same owners of the repository).
async fn replica(
    listener: tokio::net::TcpListener,
    who: &str,
    owners: &[String],
    indexed: bool,
) -> Replica {
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let text = format!("needle from {who}\n");
    let source = SourceRepo::with_files(&[("a.md", text.as_bytes())]);
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    if indexed {
        service.index(REPO.to_owned(), |_| {}).await.expect("index");
    }
    service.set_placement(Arc::new(Fixed::for_every(&base, owners)));
    // The MCP endpoint (mounted by the binary) answers who it is: which replica a MCP call
    // was routed to is all the routing decides.
    let me = who.to_owned();
    let mcp = axum::routing::post(move || async move { format!("MCP at {me}") });
    let routes = httpserver::router(service.clone(), httpserver::Readiness::default())
        .route("/sourcegraph/mcp", mcp);
    serve(listener, &base, service, routes, routing(ATTEMPT));
    Replica { source, base }
}

/// A replica owning nothing (F) and the two owners of [`REPO`] (A, then B), each indexed
/// or not as `indexed` says, in that order.
async fn front_and_owners(indexed: [bool; 3]) -> (Replica, Replica, Replica) {
    let ((lf, _), (la, a_url), (lb, b_url)) = (bind().await, bind().await, bind().await);
    let owners = vec![a_url, b_url];
    let front = replica(lf, "F", &owners, indexed[0]).await;
    let a = replica(la, "A", &owners, indexed[1]).await;
    let b = replica(lb, "B", &owners, indexed[2]).await;
    (front, a, b)
}

/// A search of [`REPO`] through `replica`: the status, the snippets found, the repositories
/// named as not indexed.
async fn search(client: &reqwest::Client, replica: &Replica) -> (u16, Vec<String>, Vec<String>) {
    let answer = client
        .get(format!(
            "{}/sourcegraph/api/search?repo={REPO}&query=needle",
            replica.base
        ))
        .send()
        .await
        .expect("send");
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    let snippets = body["repos"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["hits"].as_array().cloned().unwrap_or_default())
        .filter_map(|hit| hit["snippet"].as_str().map(str::to_owned))
        .collect();
    let not_indexed = body["not_indexed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|repo| repo.as_str().map(str::to_owned))
        .collect();
    (status, snippets, not_indexed)
}

/// The text of `a.md` read through the replica at `base`, with the caller's `deadline_ms`.
async fn read(client: &reqwest::Client, base: &str, deadline_ms: Option<&str>) -> (u16, String) {
    let mut request = client.get(format!("{base}/sourcegraph/api/read?repo={REPO}&path=a.md"));
    if let Some(deadline_ms) = deadline_ms {
        request = request.header("x-csg-deadline-ms", deadline_ms);
    }
    let answer = request.send().await.expect("send");
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    (
        status,
        body["content"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_call_goes_to_the_owner_with_an_index() {
    bounded(LIMIT, async {
        // A is preferred but has not indexed its copy yet (a restarted replica); B has.
        let (front, a, b) = front_and_owners([true, false, true]).await;
        let client = reqwest::Client::new();

        // Through a replica that owns nothing: A says it has no index (503), B answers.
        let found = search(&client, &front).await;
        assert_eq!(found, (200, vec!["needle from B".to_owned()], vec![]));
        // Sent to A itself: it sends the call to B rather than answer "not indexed".
        let found = search(&client, &a).await;
        assert_eq!(found, (200, vec!["needle from B".to_owned()], vec![]));
        assert_eq!(
            search(&client, &b).await,
            (200, vec!["needle from B".to_owned()], vec![])
        );
        // A read needs no index: A, the first owner, answers it, directly or forwarded.
        assert_eq!(read(&client, &front.base, None).await, (200, "needle from A\n".to_owned()));
        assert_eq!(read(&client, &a.base, None).await, (200, "needle from A\n".to_owned()));
        // Over MCP, the same: the tool's name tells.
        let mcp = |tool: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"repo":"{REPO}","query":"needle","path":"a.md"}}}}}}"#
            )
        };
        for (tool, answered_by) in [("search", "MCP at B"), ("read", "MCP at A")] {
            let answer = client
                .post(format!("{}/sourcegraph/mcp", front.base))
                .body(mcp(tool))
                .send()
                .await
                .expect("send");
            assert_eq!(answer.status().as_u16(), 200, "{tool}");
            assert_eq!(answer.text().await.expect("text"), answered_by, "{tool}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_indexed_owner_a_holder_still_answers() {
    bounded(LIMIT, async {
        // Neither owner has indexed the repository yet (both just gained it), nor has the
        // replica the call comes through.
        let (front, a, _b) = front_and_owners([false, false, false]).await;
        let client = reqwest::Client::new();
        // An answer naming the repository as not indexed, not a 503 nobody can act on.
        let not_indexed = (200, vec![], vec![REPO.to_owned()]);
        assert_eq!(search(&client, &front).await, not_indexed);
        // An owner without an index tries the other, then answers itself.
        assert_eq!(search(&client, &a).await, not_indexed);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_owner_down_a_replica_with_a_copy_answers() {
    bounded(LIMIT, async {
        let (lf, _) = bind().await;
        // Nothing listens there: every attempt is refused at once.
        let dead = vec![
            "http://127.0.0.1:1".to_owned(),
            "http://127.0.0.1:2".to_owned(),
        ];
        let front = replica(lf, "F", &dead, true).await;
        let client = reqwest::Client::new();
        // The copy this replica keeps (it registered the repository) answers.
        assert_eq!(
            read(&client, &front.base, None).await,
            (200, "needle from F\n".to_owned())
        );
        assert_eq!(
            search(&client, &front).await,
            (200, vec!["needle from F".to_owned()], vec![])
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_attempt_keeps_within_the_callers_deadline() {
    bounded(LIMIT, async {
        // The first owner accepts connections and never answers.
        let (hang, hang_url) = bind().await;
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((stream, _)) = hang.accept().await {
                open.push(stream);
            }
        });
        let ((lf, _), (lb, b_url)) = (bind().await, bind().await);
        let owners = vec![hang_url, b_url];
        let front = replica(lf, "F", &owners, true).await;
        let _b = replica(lb, "B", &owners, true).await;
        let client = reqwest::Client::new();
        let url = front.base.clone();

        // The caller waits 300 ms: the hung owner gets no more, and no owner after it; the
        // copy this replica keeps answers at once then.
        let started = Instant::now();
        let (status, text) = read(&client, &url, Some("300")).await;
        let took = started.elapsed();
        assert_eq!((status, text.as_str()), (200, "needle from F\n"));
        assert!(took < ATTEMPT / 2, "answered after {took:?}");

        // Without a deadline, the hung owner gets its whole attempt, then B answers.
        let started = Instant::now();
        let (status, text) = read(&client, &url, None).await;
        assert_eq!((status, text.as_str()), (200, "needle from B\n"));
        assert!(started.elapsed() >= ATTEMPT, "{:?}", started.elapsed());
        held.abort();
    })
    .await;
}
