//! Replica-to-replica TLS (O-10): the certificate a replica serves HTTPS with, the CA the
//! replicas verify each other with, and whether they present their certificates to each other
//! (mutual TLS). rustls on the *ring* provider, given explicitly to every configuration, so
//! nothing depends on a process-wide default.
//!
//! With mutual TLS, a replica asks every TLS client for a certificate but does not insist (the
//! load balancer and clients have none): a connection whose client certificate chains to the
//! cluster CA is marked [`PeerCertified`], and the replica gate accepts the cluster's markers
//! only on such a connection (see `replica.rs`).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The files of a replica's TLS, as the operator names them.
#[derive(Debug, Clone, Default)]
pub struct ClusterTlsFiles {
    /// This replica's certificate chain (PEM, leaf first): it serves HTTPS with it, and with
    /// `mutual` presents it to the other replicas.
    pub cert: Option<PathBuf>,
    /// The private key of `cert` (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// The CA certificates (PEM) the replicas' certificates chain to.
    pub ca: Option<PathBuf>,
    /// Mutual TLS: replicas present their certificates to each other, and the cluster's
    /// markers are accepted only from a peer whose certificate chains to `ca`.
    pub mutual: bool,
}

/// A replica's TLS, read and checked: what its listener serves with, what its client trusts
/// and presents.
#[derive(Clone)]
pub struct ClusterTls {
    server: Option<Arc<ServerConfig>>,
    client: Option<Arc<ClientConfig>>,
    mutual: bool,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTls")
            .field("serves_https", &self.server.is_some())
            .field("verifies_peers", &self.client.is_some())
            .field("mutual", &self.mutual)
            .finish()
    }
}

/// Why a replica's TLS files cannot be used. Each says which file and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read or holds no PEM item of the kind needed.
    #[error("{what} {path}: {why}")]
    File {
        /// Which setting's file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        why: String,
    },
    /// The files do not go together (a certificate without its key, say).
    #[error("{0}")]
    Incomplete(String),
    /// rustls refused the configuration (a key that does not match the certificate, say).
    #[error("{0}")]
    Rejected(String),
}

/// rustls' *ring* provider, given to every configuration here (nothing relies on a
/// process-wide default). Deprecated since rustls 0.23.48 because *ring* has no post-quantum
/// key exchange; the alternative, aws-lc-rs, needs cmake and clang to build.
#[allow(deprecated)]
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl ClusterTls {
    /// Reads and checks `files`: a certificate goes with its key and the CA; mutual TLS needs
    /// all three. Contacts nothing.
    pub fn load(files: &ClusterTlsFiles) -> Result<Self, TlsError> {
        let identity = match (&files.cert, &files.key) {
            (Some(cert), Some(key)) => {
                Some((certificates("--cluster-tls-cert", cert)?, private_key(key)?))
            }
            (None, None) => None,
            (Some(_), None) => {
                return Err(TlsError::Incomplete(
                    "--cluster-tls-cert needs --cluster-tls-key, the private key of that certificate".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(TlsError::Incomplete(
                    "--cluster-tls-key needs --cluster-tls-cert, the certificate of that key"
                        .into(),
                ));
            }
        };
        let roots = match &files.ca {
            Some(ca) => Some(Arc::new(roots(ca)?)),
            None => None,
        };
        if identity.is_some() && roots.is_none() {
            return Err(TlsError::Incomplete(
                "--cluster-tls-cert needs --cluster-ca: the CA the replicas' certificates chain \
                 to, with which this replica verifies the others"
                    .into(),
            ));
        }
        if files.mutual && identity.is_none() {
            return Err(TlsError::Incomplete(
                "--cluster-mtls needs --cluster-tls-cert, --cluster-tls-key and --cluster-ca: \
                 each replica presents its certificate to the others"
                    .into(),
            ));
        }
        let versions = |e: rustls::Error| TlsError::Rejected(format!("cannot set up TLS: {e}"));
        let server = match (&identity, &roots) {
            (Some((chain, key)), Some(roots)) => {
                let builder = ServerConfig::builder_with_provider(provider())
                    .with_safe_default_protocol_versions()
                    .map_err(versions)?;
                let builder = if files.mutual {
                    // Clients without a certificate (the balancer, agents) are served too; a
                    // certificate that is sent must chain to the cluster CA.
                    let verifier =
                        WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
                            .allow_unauthenticated()
                            .build()
                            .map_err(|e| {
                                TlsError::Rejected(format!(
                                    "--cluster-ca cannot verify client certificates: {e}"
                                ))
                            })?;
                    builder.with_client_cert_verifier(verifier)
                } else {
                    builder.with_no_client_auth()
                };
                let mut config = builder
                    .with_single_cert(chain.clone(), key.clone_key())
                    .map_err(|e| TlsError::Rejected(format!(
                        "--cluster-tls-cert and --cluster-tls-key do not go together ({e}); give the key of that certificate"
                    )))?;
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Some(Arc::new(config))
            }
            _ => None,
        };
        let client = match &roots {
            Some(roots) => {
                let builder = ClientConfig::builder_with_provider(provider())
                    .with_safe_default_protocol_versions()
                    .map_err(versions)?
                    .with_root_certificates(roots.clone());
                let config = match (&identity, files.mutual) {
                    (Some((chain, key)), true) => builder
                        .with_client_auth_cert(chain.clone(), key.clone_key())
                        .map_err(|e| TlsError::Rejected(format!(
                            "--cluster-tls-cert cannot be presented as a client certificate ({e})"
                        )))?,
                    _ => builder.with_no_client_auth(),
                };
                // No ALPN here: the replica client's connector sets it (and refuses a config
                // that has one).
                Some(Arc::new(config))
            }
            None => None,
        };
        Ok(Self {
            server,
            client,
            mutual: files.mutual,
        })
    }

    /// Whether this replica serves HTTPS (a certificate was given).
    pub fn serves_https(&self) -> bool {
        self.server.is_some()
    }

    /// Whether replicas present certificates to each other.
    pub fn mutual(&self) -> bool {
        self.mutual
    }

    /// What the listener serves with ([`crate::ServeOptions::tls`]); `None` without a
    /// certificate.
    pub fn server(&self) -> Option<ServerTls> {
        self.server.clone().map(ServerTls)
    }

    pub(crate) fn client(&self) -> Option<Arc<ClientConfig>> {
        self.client.clone()
    }
}

/// What a listener serves HTTPS with: every connection then is TLS.
#[derive(Clone)]
pub struct ServerTls(pub(crate) Arc<ServerConfig>);

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls")
    }
}

fn read_error(what: &'static str, path: &Path, why: String) -> TlsError {
    TlsError::File {
        what,
        path: path.to_owned(),
        why,
    }
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            read_error(
                what,
                path,
                format!("cannot read PEM certificates from it ({e}); name a readable PEM file"),
            )
        })?;
    if certs.is_empty() {
        return Err(read_error(
            what,
            path,
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| read_error(
        "--cluster-tls-key",
        path,
        format!("cannot read a PEM private key from it ({e}); name an unencrypted PKCS#8, PKCS#1 or SEC1 key"),
    ))
}

fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in certificates("--cluster-ca", path)? {
        store.add(cert).map_err(|e| {
            read_error(
                "--cluster-ca",
                path,
                format!("a certificate in it cannot be a CA ({e})"),
            )
        })?;
    }
    Ok(store)
}

/// In a request's extensions when its connection's client certificate chains to the cluster
/// CA (mutual TLS): the peer is a replica.
#[derive(Debug, Clone, Copy)]
pub struct PeerCertified;
