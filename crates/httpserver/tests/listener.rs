//! The listener (`httpserver::serve`): connections spread over the worker threads, each served
//! to its end on one thread, and a shutdown lets a request in flight finish (O-6).

use axum::Router;
use axum::routing::get;
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Answers the name of the thread that served the request.
async fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_owned()
}

/// Sends one keep-alive GET on `stream` and returns the body.
async fn get_on(stream: &mut TcpStream, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "the server closed the connection");
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length: "))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .expect("content-length");
            if body.len() >= length {
                return body[..length].to_owned();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_spread_over_the_workers_and_stay_on_one_thread() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = Router::new().route("/thread", get(thread_name));
        tokio::spawn(httpserver::serve(listener, app, std::future::pending()));

        let mut streams = Vec::new();
        for _ in 0..4 {
            streams.push(TcpStream::connect(addr).await.expect("connect"));
        }
        let mut per_thread: HashMap<String, usize> = HashMap::new();
        for stream in &mut streams {
            let first = get_on(stream, "/thread").await;
            assert!(first.starts_with("csg-http-"), "served on {first}");
            // Every later request of the connection is served by the same thread.
            for _ in 0..5 {
                assert_eq!(get_on(stream, "/thread").await, first);
            }
            *per_thread.entry(first).or_default() += 1;
        }
        let mut counts: Vec<usize> = per_thread.values().copied().collect();
        counts.sort_unstable();
        assert_eq!(
            counts,
            vec![2, 2],
            "4 connections over 2 workers: {per_thread:?}"
        );
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_a_request_in_flight_finish_then_refuses_new_connections() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
        let entered = std::sync::Mutex::new(Some(entered_tx));
        let entered = std::sync::Arc::new(entered);
        let app = Router::new().route(
            "/slow",
            get(move || {
                let entered = entered.clone();
                async move {
                    if let Some(tx) = entered.lock().ok().and_then(|mut slot| slot.take()) {
                        let _ = tx.send(());
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    "done".to_owned()
                }
            }),
        );
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(httpserver::serve(listener, app, async move {
            let _ = stop_rx.await;
        }));

        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let in_flight = tokio::spawn(async move { get_on(&mut stream, "/slow").await });
        entered_rx.await.expect("the request reached the handler");
        stop_tx.send(()).expect("stop");
        assert_eq!(in_flight.await.expect("join"), "done");
        server
            .await
            .expect("join")
            .expect("the server ended cleanly");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "the listener is closed after shutdown"
        );
    })
    .await
    .expect("timed out");
}
