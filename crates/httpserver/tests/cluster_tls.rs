//! Replica-to-replica HTTPS (O-10, issue 43 finding 8): real replicas on 127.0.0.1 serving
//! HTTPS with certificates of a throwaway CA made with `rcgen`, layered as the binary layers
//! one (the replica gate, the access layer, the routing); the placement is fixed, so the test
//! decides who owns what. A forwarded call crosses TLS verified with the cluster CA; a replica
//! whose certificate is not from that CA gets no call; with mutual TLS the cluster's own routes
//! and the forwarded-call marker need a client certificate of the cluster CA besides the
//! secret.

mod common;

use axum::body::Bytes;
use common::{Fixed, SECRET, bounded, register_the_others, site};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;
use service::{Service, ServiceConfig};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testgit::SourceRepo;

const LIMIT: Duration = Duration::from_secs(120);

/// A throwaway CA: its certificate in `dir`, and what it signs with.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pem: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        let pem = dir.join(format!("{name}.crt"));
        std::fs::write(&pem, issuer.pem()).expect("write the CA");
        Self { issuer, pem }
    }

    /// A replica's certificate for `localhost` and 127.0.0.1, for serving and (mutual TLS)
    /// presenting: its files in `dir`.
    fn replica(&self, dir: &Path, name: &str) -> Identity {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        let identity = Identity {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&identity.cert, cert.pem()).expect("write the certificate");
        std::fs::write(&identity.key, key.serialize_pem()).expect("write the key");
        identity
    }
}

/// A certificate and its key, as files.
#[derive(Clone)]
struct Identity {
    cert: PathBuf,
    key: PathBuf,
}

fn cluster_tls(ca: &Path, identity: &Identity, mutual: bool) -> httpserver::ClusterTls {
    httpserver::ClusterTls::load(&httpserver::ClusterTlsFiles {
        cert: Some(identity.cert.clone()),
        key: Some(identity.key.clone()),
        ca: Some(ca.to_owned()),
        mutual,
    })
    .expect("the replica's TLS")
}

/// A replica holding `repo` (one file `a.md` of `text`), routing by `owners`, serving HTTPS
/// with `tls` on `listener`; answers its URL.
async fn replica(
    listener: tokio::net::TcpListener,
    repo: &str,
    text: &str,
    owners: &[(&str, Vec<String>)],
    tls: httpserver::ClusterTls,
) -> (String, SourceRepo) {
    let base = format!("https://{}", listener.local_addr().expect("addr"));
    let (service, source) = common::holding(&base, repo, text.as_bytes(), owners);
    let routing = httpserver::ClusterRouting {
        secret: SECRET.into(),
        attempt_timeout: Duration::from_secs(5),
        tls: Some(tls.clone()),
    };
    let routes = httpserver::router(service.clone(), httpserver::Readiness::default());
    let app = httpserver::with_cluster_routing(routes, service.clone(), routing.clone())
        .expect("routing");
    let app = httpserver::with_access(app, service.clone(), &site(&base));
    let app = httpserver::with_replica_gate(app, service, &routing).expect("gate");
    let options = httpserver::ServeOptions {
        tls: tls.server(),
        ..httpserver::ServeOptions::default()
    };
    tokio::spawn(httpserver::serve_with(
        listener,
        app,
        std::future::pending(),
        options,
    ));
    (base, source)
}

async fn bind() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
}

fn url_of(listener: &tokio::net::TcpListener) -> String {
    format!("https://{}", listener.local_addr().expect("addr"))
}

type TestClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An HTTPS client that trusts `ca`, presenting `identity` if given.
#[allow(deprecated)] // rustls' ring provider: see `httpserver::ClusterTls`.
fn client(ca: &Path, identity: Option<&Identity>) -> TestClient {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("CA file") {
        roots.add(cert.expect("CA certificate")).expect("a CA");
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let config = match identity {
        Some(identity) => {
            let chain = CertificateDer::pem_file_iter(&identity.cert)
                .expect("certificate file")
                .collect::<Result<Vec<_>, _>>()
                .expect("certificates");
            let key = PrivateKeyDer::from_pem_file(&identity.key).expect("key");
            builder
                .with_client_auth_cert(chain, key)
                .expect("a client certificate")
        }
        None => builder.with_no_client_auth(),
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}

/// `GET url` with `headers`: the status and body, or why there was no answer.
async fn get(
    client: &TestClient,
    url: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String), String> {
    let mut request = http::Request::get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::new())).expect("request");
    let answer = tokio::time::timeout(Duration::from_secs(20), client.request(request))
        .await
        .map_err(|_| "no answer within 20 s".to_owned())?
        .map_err(|error| {
            let mut text = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        })?;
    let status = answer.status().as_u16();
    let body = answer
        .into_body()
        .collect()
        .await
        .map_err(|error| error.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn text_of(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    value["content"].as_str().unwrap_or_default().to_owned()
}

/// Two replicas over HTTPS, without and with mutual TLS: a call for B's repository sent to
/// A is forwarded to B over TLS verified with the cluster CA (and with A's client certificate
/// under mutual TLS), and answered by B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_forwarded_between_replicas_over_https() {
    bounded(LIMIT, async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = Ca::new(dir.path(), "cluster-ca");
        let (a_id, b_id) = (
            ca.replica(dir.path(), "replica-a"),
            ca.replica(dir.path(), "replica-b"),
        );
        for mutual in [false, true] {
            let (la, lb) = (bind().await, bind().await);
            let (a_url, b_url) = (url_of(&la), url_of(&lb));
            let owners = [
                ("acme/a", vec![a_url.clone()]),
                ("acme/b", vec![b_url.clone()]),
            ];
            let tls_a = cluster_tls(&ca.pem, &a_id, mutual);
            let tls_b = cluster_tls(&ca.pem, &b_id, mutual);
            let (a, _sa) = replica(la, "acme/a", "from A\n", &owners, tls_a).await;
            let (_b, _sb) = replica(lb, "acme/b", "from B\n", &owners, tls_b).await;
            // A client without a certificate: served as any client is.
            let client = client(&ca.pem, None);
            let (status, body) = get(
                &client,
                &format!("{a}/sourcegraph/api/read?repo=acme/a&path=a.md"),
                &[],
            )
            .await
            .expect("A answers over HTTPS");
            assert_eq!(
                (status, text_of(&body).as_str()),
                (200, "from A\n"),
                "{body}"
            );
            let (status, body) = get(
                &client,
                &format!("{a}/sourcegraph/api/read?repo=acme/b&path=a.md"),
                &[],
            )
            .await
            .expect("A answers for B");
            assert_eq!(
                (status, text_of(&body).as_str()),
                (200, "from B\n"),
                "mutual TLS {mutual}: {body}"
            );
        }
    })
    .await;
}

/// A replica whose certificate is not from the cluster CA gets no forwarded call (nor the
/// secret in it): the forwarding replica refuses the handshake and answers that no owner
/// did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_a_certificate_of_another_ca_is_refused() {
    bounded(LIMIT, async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = Ca::new(dir.path(), "cluster-ca");
        let rogue = Ca::new(dir.path(), "rogue-ca");
        let a_id = ca.replica(dir.path(), "replica-a");
        let b_id = rogue.replica(dir.path(), "replica-b");
        let (la, lb) = (bind().await, bind().await);
        let (a_url, b_url) = (url_of(&la), url_of(&lb));
        let owners = [
            ("acme/a", vec![a_url.clone()]),
            ("acme/b", vec![b_url.clone()]),
        ];
        let (a, _sa) = replica(
            la,
            "acme/a",
            "from A\n",
            &owners,
            cluster_tls(&ca.pem, &a_id, false),
        )
        .await;
        // B trusts the cluster CA but serves a certificate of another.
        let (b, _sb) = replica(
            lb,
            "acme/b",
            "from B\n",
            &owners,
            cluster_tls(&ca.pem, &b_id, false),
        )
        .await;
        let client = client(&ca.pem, None);
        let (status, body) = get(
            &client,
            &format!("{a}/sourcegraph/api/read?repo=acme/b&path=a.md"),
            &[],
        )
        .await
        .expect("A answers");
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("did not answer"), "{body}");
        assert!(!body.contains("from B"), "{body}");
        // Nor does a client that trusts the cluster CA reach B.
        let refused = get(&client, &format!("{b}/healthz"), &[]).await;
        let error = refused.expect_err("B's certificate is not trusted");
        assert!(error.contains("certificate"), "{error}");
    })
    .await;
}

/// With mutual TLS the cluster's own routes and the forwarded-call marker need a client
/// certificate of the cluster CA besides the secret; clients without one are served as
/// clients; a certificate of another CA does not get past the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mutual_tls_the_cluster_routes_need_a_replica_certificate() {
    bounded(LIMIT, async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = Ca::new(dir.path(), "cluster-ca");
        let rogue = Ca::new(dir.path(), "rogue-ca");
        let (a_id, peer_id, rogue_id) = (
            ca.replica(dir.path(), "replica-a"),
            ca.replica(dir.path(), "replica-b"),
            rogue.replica(dir.path(), "intruder"),
        );
        let la = bind().await;
        let a_url = url_of(&la);
        let owners = [("acme/a", vec![a_url.clone()])];
        let (a, _sa) = replica(
            la,
            "acme/a",
            "from A\n",
            &owners,
            cluster_tls(&ca.pem, &a_id, true),
        )
        .await;
        let status = format!("{a}/_cluster/status");
        let read = format!("{a}/sourcegraph/api/read?repo=acme/a&path=a.md");
        let replica_secret = [("x-csg-replica-secret", SECRET)];
        let forwarded_secret = [("x-csg-forwarded-secret", SECRET)];

        // No client certificate: the secret alone is not enough.
        let anonymous = client(&ca.pem, None);
        let (code, _) = get(&anonymous, &status, &replica_secret)
            .await
            .expect("answered");
        assert_eq!(
            code, 404,
            "the cluster's status without a replica certificate"
        );
        let (code, body) = get(&anonymous, &read, &forwarded_secret)
            .await
            .expect("answered");
        assert_eq!(code, 403, "{body}");
        assert!(body.contains("--cluster-mtls"), "{body}");
        // ... and a client call without any marker is served as ever.
        let (code, body) = get(&anonymous, &read, &[]).await.expect("answered");
        assert_eq!((code, text_of(&body).as_str()), (200, "from A\n"), "{body}");

        // A replica's certificate and the secret: the cluster's routes answer.
        let peer = client(&ca.pem, Some(&peer_id));
        let (code, body) = get(&peer, &status, &replica_secret)
            .await
            .expect("answered");
        assert_eq!(code, 200, "{body}");
        // The certificate alone is not enough either.
        let (code, _) = get(
            &peer,
            &status,
            &[("x-csg-replica-secret", "not-the-secret")],
        )
        .await
        .expect("answered");
        assert_eq!(code, 404);
        let (code, _) = get(&peer, &status, &[]).await.expect("answered");
        assert_eq!(code, 404);

        // A certificate of another CA does not get past the handshake.
        let intruder = client(&ca.pem, Some(&rogue_id));
        let refused = get(&intruder, &status, &replica_secret).await;
        assert!(refused.is_err(), "{refused:?}");
        // Nor does plain HTTP: the listener speaks TLS only, and goes on serving.
        let plain = reqwest::Client::new()
            .get(format!(
                "http://{}/healthz",
                a.trim_start_matches("https://")
            ))
            .send()
            .await;
        assert!(plain.is_err(), "{plain:?}");
        let (code, _) = get(&anonymous, &format!("{a}/healthz"), &[])
            .await
            .expect("answered");
        assert_eq!(code, 200);
    })
    .await;
}

/// The cost of TLS on a forwarded call (loopback, kept-alive connections): figures for the
/// issue's closing note, not a check. `cargo test -p httpserver --test cluster_tls --
/// --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn forwarded_call_latency_with_and_without_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(dir.path(), "cluster-ca");
    let (a_id, b_id) = (
        ca.replica(dir.path(), "replica-a"),
        ca.replica(dir.path(), "replica-b"),
    );
    const CALLS: u32 = 300;
    for mode in ["plain", "tls", "mtls"] {
        let (la, lb) = (bind().await, bind().await);
        let scheme = if mode == "plain" { "http" } else { "https" };
        let a_url = format!("{scheme}://{}", la.local_addr().expect("addr"));
        let b_url = format!("{scheme}://{}", lb.local_addr().expect("addr"));
        let owners = [
            ("acme/a", vec![a_url.clone()]),
            ("acme/b", vec![b_url.clone()]),
        ];
        let read = format!("{a_url}/sourcegraph/api/read?repo=acme/b&path=a.md");
        if mode == "plain" {
            let routing = common::routing(Duration::from_secs(5));
            for (listener, url, repo) in [(la, &a_url, "acme/a"), (lb, &b_url, "acme/b")] {
                let source = SourceRepo::with_files(&[("a.md", b"text\n")]);
                let store = source.store(repo, "");
                register_the_others(&store, &source, repo, &owners);
                let service = Service::new(store, ServiceConfig::default());
                service.set_placement(Arc::new(Fixed::per_repo(
                    url,
                    owners
                        .iter()
                        .map(|(r, o)| (r.to_string(), o.clone()))
                        .collect(),
                )));
                let routes = httpserver::router(service.clone(), httpserver::Readiness::default());
                common::serve(listener, url, service, routes, routing.clone());
                std::mem::forget(source);
            }
        } else {
            let mutual = mode == "mtls";
            let (_a, sa) = replica(
                la,
                "acme/a",
                "text\n",
                &owners,
                cluster_tls(&ca.pem, &a_id, mutual),
            )
            .await;
            let (_b, sb) = replica(
                lb,
                "acme/b",
                "text\n",
                &owners,
                cluster_tls(&ca.pem, &b_id, mutual),
            )
            .await;
            std::mem::forget((sa, sb));
        }
        // Kept-alive connections from the client to A (A's to B are always kept alive).
        let kept = client(&ca.pem, None);
        let _ = get(&kept, &read, &[]).await.expect("warm");
        let start = Instant::now();
        for _ in 0..CALLS {
            let (code, _) = get(&kept, &read, &[]).await.expect("answered");
            assert_eq!(code, 200);
        }
        let warm = start.elapsed() / CALLS;
        // A new connection (TCP and, but for plain, a TLS handshake) from the client per call.
        let start = Instant::now();
        for _ in 0..CALLS / 3 {
            let (code, _) = get(&client(&ca.pem, None), &read, &[])
                .await
                .expect("answered");
            assert_eq!(code, 200);
        }
        let cold = start.elapsed() / (CALLS / 3);
        eprintln!(
            "{mode}: a forwarded read takes {warm:?} on a kept-alive connection, {cold:?} on a new one"
        );
    }
}
