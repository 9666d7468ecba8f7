//! O-9, issue 42 point 2: a forwarded call cancels on the owner when the forwarder gives up.
//! Two real replicas on 127.0.0.1; B owns a long history, A forwards `blame` calls for it.
//! The callers leave A after 1 s: A drops its forwarded requests, B sees its connections go,
//! and B's blame work — which would run for many seconds — stops, its slots free at once.

mod common;

use common::{Fixed, bind, bounded, routing, serve, site};
use service::{Class, Service, ServiceConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testgit::SourceRepo;

const CALLS: usize = 8;
const COMMITS: u64 = 3_000;
const LINES: usize = 3_000;

/// Slots of the blame class held on `service`.
fn blame_busy(service: &Service) -> usize {
    service
        .admission_stats()
        .into_iter()
        .find(|class| class.class == Class::Blame)
        .map_or(0, |class| class.busy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o9_a_forwarded_call_stops_on_the_owner_when_the_forwarder_gives_up() {
    bounded(Duration::from_secs(180), async {
        let ((la, a_url), (lb, b_url)) = (bind().await, bind().await);
        let owners = vec![(String::from("acme/hist"), vec![b_url.clone()])];
        let config = || ServiceConfig {
            // Every call gets a slot and runs: the point is cancellation, not admission.
            heavy_calls: 64,
            ..ServiceConfig::default()
        };
        // B: the owner of a history where blaming `hot.txt` walks every commit.
        let source = SourceRepo::new();
        let mut lines: Vec<String> = (0..LINES).map(|i| format!("line {i}\n")).collect();
        testgit::fastimport::linear(source.path(), COMMITS, "hot.txt", |commit| {
            let at = (commit as usize * 7919) % LINES;
            lines[at] = format!("line {at} changed by commit {commit}\n");
            lines.concat()
        });
        let owner = Service::new(source.store("acme/hist", ""), config());
        owner.set_placement(Arc::new(Fixed::per_repo(
            &b_url,
            owners.iter().cloned().collect(),
        )));
        let routes = httpserver::router(owner.clone(), httpserver::Readiness::default())
            .merge(httpserver::site_router(owner.clone(), &site(&b_url)));
        serve(
            lb,
            &b_url,
            owner.clone(),
            routes,
            routing(Duration::from_secs(30)),
        );
        // A: holds nothing of it, forwards to B.
        let other = SourceRepo::with_files(&[("a.md", b"a\n")]);
        let store = other.store("acme/other", "");
        common::register_elsewhere(&store, &source, &["acme/hist"]);
        let forwarder = Service::new(store, config());
        forwarder.set_placement(Arc::new(Fixed::per_repo(
            &a_url,
            owners.into_iter().collect(),
        )));
        let routes = httpserver::router(forwarder.clone(), httpserver::Readiness::default());
        serve(
            la,
            &a_url,
            forwarder,
            routes,
            routing(Duration::from_secs(30)),
        );

        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .expect("client");
        let url = format!(
            "{a_url}/sourcegraph/api/blame?repo=acme/hist&path=hot.txt&start_line=1&end_line=2000"
        );
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..CALLS {
            let (client, url) = (client.clone(), url.clone());
            calls.spawn(async move { client.get(url).send().await.map(|r| r.status()) });
        }
        // Just before the callers give up, the owner is working on every call.
        tokio::time::sleep(Duration::from_millis(900)).await;
        let working = blame_busy(&owner);
        let answered = calls.join_all().await;
        let left = Instant::now();
        assert!(
            answered
                .iter()
                .all(|a| a.as_ref().is_err_and(|e| e.is_timeout())),
            "every caller gave up before an answer (else this proves nothing): {answered:?}"
        );
        assert_eq!(working, CALLS, "the owner ran every forwarded call");
        // The owner's slots free as its work stops, not when the blames would have ended.
        while blame_busy(&owner) > 0 {
            assert!(
                left.elapsed() < Duration::from_secs(2),
                "{} blame calls still working on the owner {:.1?} after their callers left",
                blame_busy(&owner),
                left.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // And they would have run much longer: one blame, waited for, on the owner.
        let started = Instant::now();
        let answer = reqwest::get(format!(
            "{b_url}/sourcegraph/api/blame?repo=acme/hist&path=hot.txt&start_line=1&end_line=2000"
        ))
        .await
        .expect("the owner answers");
        assert!(answer.status().is_success() || answer.status() == 503);
        assert!(
            started.elapsed() > Duration::from_secs(2),
            "one blame alone takes longer than the owner took to stop eight: {:.1?}",
            started.elapsed()
        );
    })
    .await;
}
