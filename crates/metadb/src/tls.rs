//! TLS to PostgreSQL (O-10): the database URL's `sslmode` and `sslrootcert`, read as libpq
//! reads them, on rustls with the *ring* crypto provider.
//!
//! | `sslmode` | encrypted | certificate chain checked | host name checked |
//! | --- | --- | --- | --- |
//! | `disable` | no | – | – |
//! | `prefer` (the default) | if the server offers TLS | no | no |
//! | `require` | yes | only with `sslrootcert` (then as `verify-ca`) | no |
//! | `verify-ca` | yes | yes | no |
//! | `verify-full` | yes | yes | yes |
//!
//! `sslrootcert=FILE` names a PEM file of the CA certificates to trust; without it (or with
//! `sslrootcert=system`, which as in libpq means `verify-full` unless a mode is given) the
//! system's trusted roots are used, through `rustls-native-certs`: the operating system's
//! store (Debian's `ca-certificates`, `SSL_CERT_FILE`), which is where an operator installs a
//! managed database's CA or a company's own, and which is updated with the system rather than
//! compiled into the binary as `webpki-roots` would be. (libpq's default,
//! `~/.postgresql/root.crt`, is not read: a service has no meaningful home directory.)
//!
//! Even unverified (`prefer`, `require`), the handshake's signatures are checked against the
//! certificate the server sent, so with SCRAM's channel binding (`SCRAM-SHA-256-PLUS`, which
//! the driver uses whenever the server offers it over TLS) a man in the middle cannot relay the
//! password exchange.

use std::path::Path;
use std::sync::Arc;

use postgres::config::SslMode;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How a URL asks for TLS (its `sslmode`, adjusted by `sslrootcert` as libpq adjusts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Option<Mode> {
        Some(match value {
            "disable" => Mode::Disable,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            _ => return None,
        })
    }

    /// The URL's spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }

    /// What the driver is told: whether TLS is tried, and whether it is a must. Verification
    /// is the connector's business.
    pub(crate) fn driver(self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }

    /// Whether the server's certificate is checked.
    pub(crate) fn verifies(self) -> bool {
        matches!(self, Mode::VerifyCa | Mode::VerifyFull)
    }
}

/// Where the trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    System,
    File(String),
}

/// The TLS parameters of a URL, taken out of it (the driver knows neither `verify-*` nor
/// `sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    roots: Roots,
}

/// Parameters of libpq's that this client does not implement: named, so that a URL written
/// for libpq fails with a clear word instead of the driver's "unknown option".
const UNSUPPORTED: [(&str, &str); 6] = [
    (
        "sslcert",
        "client certificates are not supported; log in with a password",
    ),
    (
        "sslkey",
        "client certificates are not supported; log in with a password",
    ),
    (
        "sslpassword",
        "client certificates are not supported; log in with a password",
    ),
    (
        "sslcrl",
        "certificate revocation lists are not supported; drop it",
    ),
    (
        "sslcrldir",
        "certificate revocation lists are not supported; drop it",
    ),
    ("sslsni", "the server name is always sent; drop it"),
];

/// Takes `sslmode` and `sslrootcert` out of `url`'s query string (percent-decoded; the last
/// of a repeated parameter wins, as in libpq) and answers the URL without them and what they
/// asked for. `decode` percent-decodes a value.
pub(crate) fn split(url: &str, decode: fn(&str) -> String) -> Result<(String, Settings), String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
    let mut kept = Vec::new();
    let (mut mode, mut root) = (None, None);
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decode(key).as_str() {
            "sslmode" => {
                let value = decode(value);
                mode = Some(Mode::parse(&value).ok_or_else(|| {
                    format!(
                        "sslmode={value} is not one of disable, prefer, require, verify-ca, \
                         verify-full"
                    )
                })?);
            }
            "sslrootcert" => root = Some(decode(value)),
            key => {
                if let Some((_, why)) = UNSUPPORTED.iter().find(|(name, _)| *name == key) {
                    return Err(format!("{key}: {why}"));
                }
                kept.push(pair);
            }
        }
    }
    let roots = match root.as_deref() {
        None => Roots::System,
        Some("system") => Roots::System,
        Some("") => {
            return Err(
                "sslrootcert is empty; name a PEM file of CA certificates, or drop it".to_owned(),
            );
        }
        Some(file) => Roots::File(file.to_owned()),
    };
    let mode = match (mode, root.as_deref()) {
        // libpq 16: the system's roots are meant to be checked, host name included.
        (None, Some("system")) => Mode::VerifyFull,
        (
            Some(weak @ (Mode::Disable | Mode::Prefer | Mode::Require | Mode::VerifyCa)),
            Some("system"),
        ) => {
            return Err(format!(
                "sslmode={} cannot be used with sslrootcert=system: the system's roots are \
                 trusted only with sslmode=verify-full",
                weak.name()
            ));
        }
        // libpq: `require` with a root certificate file checks the chain, as `verify-ca`.
        (Some(Mode::Require), Some(_)) => Mode::VerifyCa,
        (Some(mode), _) => mode,
        (None, _) => Mode::Prefer,
    };
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, Settings { mode, roots }))
}

/// The connector of `settings`: the CA file read (or the system's roots loaded) now, so a bad
/// one fails at start, not at the first connection.
pub(crate) fn connector(settings: &Settings) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(ring_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("cannot set up TLS: {error}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = if settings.mode.verifies() {
        let roots = Arc::new(roots(&settings.roots)?);
        match settings.mode {
            Mode::VerifyFull => {
                WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|error| format!("cannot use the CA certificates: {error}"))?
            }
            _ => Arc::new(ShortOfName {
                roots: Some(roots),
                provider,
            }),
        }
    } else {
        Arc::new(ShortOfName {
            roots: None,
            provider,
        })
    };
    let config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// rustls' *ring* provider. Deprecated since rustls 0.23.48 because *ring* has no
/// post-quantum key exchange; the alternative, aws-lc-rs, needs cmake and clang to build. A
/// recorded session broken later by a quantum computer is not this link's threat.
#[allow(deprecated)]
fn ring_provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn roots(roots: &Roots) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(file) => {
            let what = format!("sslrootcert={file}");
            let certs = CertificateDer::pem_file_iter(Path::new(file))
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|error| {
                    format!(
                        "{what}: cannot read CA certificates from it ({error}); name a readable \
                         PEM file holding the certificate of the CA that signed the server's"
                    )
                })?;
            if certs.is_empty() {
                return Err(format!(
                    "{what}: the file holds no PEM certificate (-----BEGIN CERTIFICATE-----); \
                     name the CA certificate that signed the server's"
                ));
            }
            for cert in certs {
                store.add(cert).map_err(|error| {
                    format!("{what}: a certificate in it cannot be used as a CA ({error})")
                })?;
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
                return Err(format!(
                    "no trusted CA certificates found on this system{}; install them (Debian: \
                     ca-certificates) or name the server's CA with sslrootcert=FILE",
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", why.join("; "))
                    }
                ));
            }
        }
    }
    Ok(store)
}

/// A certificate check short of `verify-full`: `verify-ca` (`roots`: the chain to a trusted
/// root, valid now; the name is not checked), or `prefer` and `require` (no roots, libpq's
/// meaning: encrypted, any certificate taken). Either way the handshake must be signed by the
/// key of the certificate sent.
#[derive(Debug)]
struct ShortOfName {
    roots: Option<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ShortOfName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What to tell the operator about a TLS failure found in a driver error's causes, if it is
/// one: the rustls error and what to do about it.
pub(crate) fn explain(error: &postgres::Error, mode: Mode) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        let tls = cause.downcast_ref::<rustls::Error>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(tls) = tls {
            return Some(advice(tls, mode));
        }
        source = cause.source();
    }
    let mut said = Some(error as &(dyn std::error::Error + 'static));
    let mut refused = false;
    while let Some(cause) = said {
        refused |= cause.to_string().contains("server does not support TLS");
        said = cause.source();
    }
    if refused {
        return Some(format!(
            "the server does not offer TLS, which sslmode={} requires; turn on ssl in its \
             postgresql.conf, or connect with sslmode=disable on a trusted network",
            mode.name()
        ));
    }
    None
}

fn advice(error: &rustls::Error, mode: Mode) -> String {
    use rustls::{CertificateError, Error};
    let mode = mode.name();
    match error {
        Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "the server's certificate does not name the host in the URL ({error}); connect by a \
             name the certificate holds, or use sslmode=verify-ca to check the chain only"
        ),
        Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => format!(
            "the server's certificate is not signed by a trusted CA ({error}, sslmode={mode}); \
             name the CA that signed it with sslrootcert=FILE"
        ),
        Error::InvalidCertificate(
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. },
        ) => format!(
            "the server's certificate is not valid now ({error}); renew it, or check this \
             machine's clock"
        ),
        Error::InvalidCertificate(_) => format!(
            "the server's certificate was not accepted ({error}, sslmode={mode}); check it and \
             sslrootcert"
        ),
        other => format!(
            "the TLS handshake failed ({other}); check that the server's ssl settings are valid"
        ),
    }
}
