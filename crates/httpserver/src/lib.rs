//! `httpserver` is the HTTP face of Context Source Graph: the JSON API under
//! `/sourcegraph/api/` (R-6, SPEC §9), the website's routes under `/sourcegraph/` (pages
//! rendered by the `website` crate; sessions and CSRF here), `/healthz`, `/readyz`,
//! `/metrics`, the listener and graceful shutdown. Handlers are thin: they turn query strings,
//! JSON bodies and forms into `service` calls and answers into JSON or HTML. The JSON API
//! never runs plugins.
//!
//! Other faces (the MCP endpoint) are mounted by the binary onto the [`Router`] this crate
//! builds; this crate does not know MCP.

mod api;
mod auth;
mod body;
mod client;
mod forward;
#[doc(hidden)]
pub mod fuzzing;
mod json;
mod listener;
mod oauth;
mod peers;
mod replica;
mod replica_client;
mod session;
mod site;
mod tls;
mod wire;

use axum::Router;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use auth::{AccessOptions, with_access, with_access_and_sessions, with_access_options};
pub use body::{MAX_JSON_VALUES, MAX_REQUEST_BODY_BYTES, with_body_limit};
pub use client::{ClientAddr, InvalidTrustedProxy, TrustedProxies};
pub use forward::{ClusterRouting, with_cluster_routing};
pub use json::ErrorBody;
pub use oauth::{CALLBACK_PATH, METADATA_PATH, OAuthResource, ROOT_METADATA_PATH};
pub use peers::PeerClient;
pub use replica::{INTERNAL_PREFIX, with_replica_gate};
pub use site::{site_budgets_table, site_route_patterns};
pub use tls::{ClusterTls, ClusterTlsFiles, PeerCertified, ServerTls, TlsError};
pub use tools::ItemJson;
pub use wire::{FORWARDED_HEADER, Forwarded, FromReplica, REPLICA_HEADER};

/// Whether the server is ready to answer (`/readyz`): set once start-up work is done.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the server ready.
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether it is ready.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The router of the JSON API, health probes and metrics.
pub fn router(service: service::Service, readiness: Readiness) -> Router {
    api::router(service, readiness)
}

/// Where the site is reached: what the access page's client configuration points at, and
/// whether cookies are `Secure`.
#[derive(Debug, Clone)]
pub struct SiteConfig {
    /// The public origin (`https://csg.example.com`), or the listen address's.
    pub origin: String,
}

impl SiteConfig {
    /// Whether the site is served over TLS (its cookies must then be `Secure`).
    pub fn secure(&self) -> bool {
        self.origin.starts_with("https://")
    }
}

/// Which origin the access page's client configuration names (M-6).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ConnectOrigin {
    /// Always [`SiteConfig::origin`] (the deployment's `--public-url`, which wins over any
    /// request).
    #[default]
    Fixed,
    /// The request's own `Host`, as `http://host[:port]` (the service itself speaks plain
    /// HTTP), when it is one of these allowed hosts: the list the MCP endpoint validates
    /// `Host` against, matched the same way (a name without a port accepts any port). Any
    /// other `Host`, or none, gets [`SiteConfig::origin`]; an empty list trusts no `Host`
    /// (the MCP endpoint would accept every one, so it says nothing about this one).
    RequestHost(Vec<String>),
}

/// The router of the website's pages (SPEC §9 routes): mount it beside [`router`], behind
/// [`with_access_and_sessions`] (which keeps the sign-in sessions). The access page names
/// [`SiteConfig::origin`] ([`ConnectOrigin::Fixed`]).
pub fn site_router(service: service::Service, site: &SiteConfig) -> Router {
    site::router(service, site, ConnectOrigin::Fixed)
}

/// [`site_router`] whose access page names the origin `connect` picks per request (M-6).
pub fn site_router_with_origin(
    service: service::Service,
    site: &SiteConfig,
    connect: ConnectOrigin,
) -> Router {
    site::router(service, site, connect)
}

/// How [`serve_with`] tells clients apart and bounds a connection's start.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The proxies (load balancers) whose word on the client is taken: their
    /// `X-Forwarded-For` entries and PROXY protocol headers (see [`TrustedProxies::client`]
    /// for the exact rule). None by default: the client is the TCP peer.
    pub trusted_proxies: TrustedProxies,
    /// How long a connection from a trusted proxy may take to show whether it opens with a
    /// PROXY header, and to send it whole (5 s); then it is closed.
    pub proxy_header_timeout: std::time::Duration,
    /// Serve HTTPS: every connection is TLS with this configuration ([`ClusterTls::server`]).
    /// `None` (the default): plain HTTP.
    pub tls: Option<ServerTls>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            trusted_proxies: TrustedProxies::none(),
            proxy_header_timeout: std::time::Duration::from_secs(5),
            tls: None,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then lets in-flight requests finish
/// (O-6): [`serve_with`] and the default [`ServeOptions`], which trust no proxy.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, app, shutdown, ServeOptions::default()).await
}

/// Serves `app` on `listener` until `shutdown` completes, then lets in-flight requests finish
/// (O-6). Each connection is served to its end by one of as many worker threads as the
/// calling runtime has workers (see `listener.rs` for why). Every request carries its
/// [`ClientAddr`] in its extensions (and the TCP peer as `ConnectInfo<SocketAddr>`): the peer,
/// or behind one of `options.trusted_proxies` the client they name. The client address keys
/// the wrong-token rate limits (API and sign-in) and the logs; it never earns a capability.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> std::io::Result<()> {
    listener::serve(
        listener,
        app,
        shutdown,
        options.trusted_proxies,
        options.proxy_header_timeout,
        options.tls,
    )
    .await
}
