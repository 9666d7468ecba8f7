//! Cluster mode's routing (issue 31): a call naming a repository this replica does not own
//! is forwarded, credentials and all, to an owner, and to the next when one does not answer;
//! a forwarded call is never forwarded again. Two real replicas on 127.0.0.1, each with its
//! own data directory; the placement is fixed so the test decides who owns what.

mod common;

use common::{Replica, SECRET, bind, bounded, routing, serve, site};
use serde_json::Value;
use std::time::Duration;

/// A replica holding `repo` with one file `a.md` of `text`, routing by `owners`.
async fn replica(
    listener: tokio::net::TcpListener,
    repo: &str,
    text: &str,
    owners: &[(&str, Vec<String>)],
) -> Replica {
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (service, source) = common::holding(&base, repo, text.as_bytes(), owners);
    // Echoes the `Host` a request arrived with: a forwarded call must keep the caller's.
    let me = repo.to_owned();
    let echo_host = axum::routing::post(move |headers: axum::http::HeaderMap| async move {
        let host = headers
            .get(axum::http::header::HOST)
            .and_then(|host| host.to_str().ok())
            .unwrap_or_default();
        format!("{host} at the replica of {me}")
    });
    let routes = httpserver::router(service.clone(), httpserver::Readiness::default())
        .merge(httpserver::site_router(service.clone(), &site(&base)))
        .route("/sourcegraph/mcp", echo_host);
    serve(
        listener,
        &base,
        service,
        routes,
        routing(Duration::from_secs(5)),
    );
    Replica { source, base }
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    let answer = client.get(url).send().await.expect("send");
    (answer.status().as_u16(), answer.text().await.expect("text"))
}

fn text_of(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    value["content"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_for_another_owners_repository_is_answered_by_that_owner() {
    bounded(Duration::from_secs(120), async {
        let ((la, a_url), (lb, b_url)) = (bind().await, bind().await);
        let dead = "http://127.0.0.1:1".to_owned();
        // A owns acme/a; acme/b is B's, and A tries a dead replica first.
        let a = replica(
            la,
            "acme/a",
            "from A\n",
            &[
                ("acme/a", vec![a_url.clone()]),
                ("acme/b", vec![dead.clone(), b_url.clone()]),
                ("acme/gone", vec![dead.clone()]),
            ],
        )
        .await;
        // B believes A owns acme/x: a forwarded call must still not bounce back.
        let b = replica(
            lb,
            "acme/b",
            "from B\n",
            &[("acme/b", vec![b_url.clone()]), ("acme/x", vec![a_url])],
        )
        .await;
        let client = reqwest::Client::new();

        let (status, body) = get(
            &client,
            &format!("{}/sourcegraph/api/read?repo=acme/a&path=a.md", a.base),
        )
        .await;
        assert_eq!(
            (status, text_of(&body).as_str()),
            (200, "from A\n"),
            "{body}"
        );
        // Through A, past the dead replica, answered by B.
        let (status, body) = get(
            &client,
            &format!("{}/sourcegraph/api/read?repo=acme/b&path=a.md", a.base),
        )
        .await;
        assert_eq!(
            (status, text_of(&body).as_str()),
            (200, "from B\n"),
            "{body}"
        );
        // The same call as a POST with a JSON body.
        let answer = client
            .post(format!("{}/sourcegraph/api/read", a.base))
            .json(&serde_json::json!({"repo": "acme/b", "path": "a.md"}))
            .send()
            .await
            .expect("send");
        let status = answer.status().as_u16();
        let body = answer.text().await.expect("text");
        assert_eq!(
            (status, text_of(&body).as_str()),
            (200, "from B\n"),
            "{body}"
        );
        // The site's pages of a repository route the same way.
        let (status, page) = get(
            &client,
            &format!("{}/sourcegraph/repos/acme/b/-/blob/HEAD/a.md", a.base),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("from B"), "{page}");
        // The owner sees the caller's Host, not the node URL's (its MCP endpoint checks it).
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"repo":"acme/b","path":"a.md"}}}"#;
        let host = client
            .post(format!("{}/sourcegraph/mcp", a.base))
            .header("host", "csg.example.com")
            .body(call)
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("text");
        assert_eq!(host, "csg.example.com at the replica of acme/b");
        // An unknown repository owned by B answers as B answers it: not found.
        let (status, _) = get(
            &client,
            &format!("{}/sourcegraph/api/read?repo=acme/b2&path=a.md", b.base),
        )
        .await;
        assert_eq!(status, 404);
        // No owner answers: a clear 503, not a hang.
        let (status, body) = get(
            &client,
            &format!("{}/sourcegraph/api/read?repo=acme/gone&path=a.md", a.base),
        )
        .await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("did not answer"), "{body}");

        // A forwarded call (with the marker) is answered where it lands, even when that
        // replica thinks another owns the repository: B does not hold acme/x, and says so as
        // the routing's own refusal (the forwarding replica then tries the next owner)
        // instead of sending it on to A.
        let answer = client
            .get(format!(
                "{}/sourcegraph/api/read?repo=acme/x&path=a.md",
                b.base
            ))
            .header("x-csg-forwarded-secret", SECRET)
            .send()
            .await
            .expect("send");
        assert_eq!(answer.status().as_u16(), 503);
        assert!(answer.headers().contains_key("x-csg-routing-refusal"));
        // A wrong secret is refused outright, and so is replica identity on a client route.
        for (marker, secret) in [
            ("x-csg-forwarded-secret", "not-the-secret"),
            ("x-csg-replica-secret", SECRET),
        ] {
            let answer = client
                .get(format!(
                    "{}/sourcegraph/api/read?repo=acme/b&path=a.md",
                    b.base
                ))
                .header(marker, secret)
                .send()
                .await
                .expect("send");
            assert_eq!(answer.status().as_u16(), 403, "{marker}");
        }
    })
    .await;
}
