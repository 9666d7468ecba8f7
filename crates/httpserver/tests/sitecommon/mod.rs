//! Set-up shared by the website's tests: the site of a service served on 127.0.0.1 as
//! `csg serve` serves it (behind the access layer, sessions in the operator's store).
#![allow(dead_code)] // Each test crate uses what it needs.

use service::Service;
use std::sync::Arc;

/// A visitor's HTTP client: redirects are answers to look at, not to follow, and no page may
/// take longer than 30 s (a hang fails the test).
pub fn visitor() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

/// Serves the site of `service` on a free loopback port for as long as the test runs;
/// answers its base URL (`http://127.0.0.1:PORT`).
pub async fn serve_site(service: Service, users: Arc<access::AccessStore>) -> String {
    serve_site_until(service, users, std::future::pending())
        .await
        .0
}

/// Serves the site of `service` on a free loopback port until `shutdown` completes; answers
/// its base URL and the server's task (it ends once the server has shut down).
pub async fn serve_site_until(
    service: Service,
    users: Arc<access::AccessStore>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let site = httpserver::SiteConfig {
        origin: "http://127.0.0.1".into(),
    };
    let app = httpserver::with_access_and_sessions(
        httpserver::site_router(service.clone(), &site),
        service,
        &site,
        users,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let base = format!("http://{}", listener.local_addr().expect("its address"));
    (
        base,
        tokio::spawn(httpserver::serve(listener, app, shutdown)),
    )
}
