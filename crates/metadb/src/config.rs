//! The options of a [`crate::Database`] and its checked URL: what to connect to, shown without
//! its password.

use std::time::Duration;

use postgres::Client;
use postgres::config::Host;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{self, Error, Kind};
use crate::tls::{self, Mode};

/// How a [`crate::Database`] connects and how long it waits.
#[derive(Debug, Clone)]
pub struct Options {
    /// Connections (each on its own thread) that run calls; at least 1 (0 is taken as 1).
    pub connections: usize,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
    /// How long a call may take, waiting for a free connection included. The server also
    /// cancels any single statement that runs longer (`statement_timeout`).
    pub call_timeout: Duration,
    /// What `pg_stat_activity` shows for this process's connections (unless the URL sets
    /// `application_name`).
    pub application_name: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connections: 4,
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(10),
            application_name: "csg".to_owned(),
        }
    }
}

/// A checked database URL: the driver's configuration, its TLS (`sslmode`, `sslrootcert`),
/// the URL as it may be shown, and the password's spellings, which are cut from any message
/// that might echo them.
pub(crate) struct Target {
    config: postgres::Config,
    tls: MakeRustlsConnect,
    mode: Mode,
    /// `postgres://user:***@host:port/db`.
    pub(crate) shown: String,
    secrets: Vec<String>,
    statement_timeout: Duration,
}

impl Target {
    /// Checks `url` and prepares its configuration; contacts nothing, but reads the CA
    /// certificates a `verify-*` mode needs (a bad file fails here, at start).
    pub(crate) fn parse(url: &str, options: &Options) -> Result<Target, Error> {
        const FORM: &str = "write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE";
        let url = url.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::InvalidUrl(format!(
                "it does not start with postgres:// or postgresql://; {FORM}"
            )));
        }
        let secrets = password_spellings(url);
        // The driver knows neither `verify-*` nor `sslrootcert`: they are taken out first.
        let (url, tls_settings) = tls::split(url, percent_decode)
            .map_err(|why| Error::InvalidUrl(redact(&secrets, why)))?;
        let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| {
            Error::InvalidUrl(redact(&secrets, format!("{}; {FORM}", error::describe(&e))))
        })?;
        if config.get_user().is_none_or(str::is_empty) {
            return Err(Error::InvalidUrl(format!("it names no user; {FORM}")));
        }
        if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
            return Err(Error::InvalidUrl(format!("it names no host; {FORM}")));
        }
        let mode = tls_settings.mode;
        config.ssl_mode(mode.driver());
        let tls = tls::connector(&tls_settings).map_err(Error::InvalidUrl)?;
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name(&options.application_name);
        }
        // A server that vanishes without closing the connection (a cut network, a frozen host)
        // is noticed within about 30 s on an idle connection, and once sent data stays unacked
        // for longer than a call may take.
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(15));
        config.keepalives_interval(Duration::from_secs(5));
        config.keepalives_retries(3);
        config.tcp_user_timeout(options.call_timeout + options.connect_timeout);
        let shown = show(&config, mode);
        Ok(Target {
            config,
            tls,
            mode,
            shown,
            secrets,
            statement_timeout: options.call_timeout,
        })
    }

    /// Opens one connection (on the calling thread, which must not be inside a Tokio runtime).
    /// `statement_timeout` makes the server give up on a statement the caller no longer waits
    /// for, rather than hold a connection and its locks.
    pub(crate) fn connect(&self, statement_timeout: bool) -> Result<Client, Error> {
        let mut client = self
            .config
            .connect(self.tls.clone())
            .map_err(|e| self.connect_error(&e))?;
        // The server's NOTICEs (`CREATE TABLE IF NOT EXISTS` of a table that exists) would be
        // logged by the driver at INFO on every start of every command: only warnings count.
        let mut setup = "SET client_min_messages = warning;".to_owned();
        if statement_timeout {
            let millis = self.statement_timeout.as_millis();
            setup.push_str(&format!(" SET statement_timeout = {millis};"));
        }
        client
            .batch_execute(&setup)
            .map_err(|e| self.connect_error(&e))?;
        Ok(client)
    }

    fn connect_error(&self, e: &postgres::Error) -> Error {
        let shown = &self.shown;
        // A TLS failure is told as one, with what to change; the server stays "unreachable"
        // to the callers (a certificate renewed on the server lets the next attempt in).
        if let Some(why) = tls::explain(e, self.mode) {
            let why = redact(&self.secrets, why);
            return Error::Unreachable(format!("cannot connect to {shown} over TLS: {why}"));
        }
        let cause = redact(&self.secrets, error::describe(e));
        match error::kind(e) {
            // pg_hba.conf takes this client only over TLS (`hostssl`).
            Kind::Refused if self.mode == Mode::Disable && cause.contains("no encryption") => {
                Error::Refused(format!(
                    "{shown}: {cause}; the server takes this connection only over TLS: connect \
                     with sslmode=verify-full (or require) instead of sslmode=disable"
                ))
            }
            Kind::Refused => Error::Refused(format!(
                "{shown}: {cause}; check the user, password and database name in the database URL"
            )),
            Kind::Unreachable | Kind::Query => Error::Unreachable(format!(
                "cannot connect to {shown}: {cause}; check that the server is running and \
                 that the URL's host and port are right"
            )),
        }
    }
}

/// The URL as it may be shown in logs and errors: everything that identifies the server and
/// its `sslmode` (unless the default), the password replaced by `***`.
fn show(config: &postgres::Config, mode: Mode) -> String {
    let user = config.get_user().unwrap_or_default();
    let password = if config.get_password().is_some() {
        ":***"
    } else {
        ""
    };
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let hosts: Vec<String> = if config.get_hosts().is_empty() {
        let addrs = config.get_hostaddrs().iter().enumerate();
        addrs.map(|(i, a)| format!("{a}:{}", port(i))).collect()
    } else {
        let hosts = config.get_hosts().iter().enumerate();
        hosts
            .map(|(i, host)| match host {
                Host::Tcp(name) => format!("{name}:{}", port(i)),
                Host::Unix(dir) => format!("{}:{}", dir.display(), port(i)),
            })
            .collect()
    };
    let database = config.get_dbname().unwrap_or(user);
    let tls = match mode {
        Mode::Prefer => String::new(),
        mode => format!("?sslmode={}", mode.name()),
    };
    format!(
        "postgres://{user}{password}@{}/{database}{tls}",
        hosts.join(",")
    )
}

/// Every spelling of the URL's password that a message could carry: as written in the URL's
/// user info or `password=` parameter, and percent-decoded.
fn password_spellings(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && let Some((_, password)) = userinfo.split_once(':')
    {
        found.push(password.to_owned());
    }
    if let Some((_, query)) = rest.split_once('?') {
        for pair in query.split('&') {
            if let Some(password) = pair.strip_prefix("password=") {
                found.push(password.to_owned());
            }
        }
    }
    let decoded: Vec<String> = found.iter().map(|p| percent_decode(p)).collect();
    found.extend(decoded);
    // Longest first, so that a spelling containing another is cut whole.
    found.sort_by_key(|p| std::cmp::Reverse(p.len()));
    found.retain(|p| !p.is_empty());
    found.dedup();
    found
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with every spelling of the password replaced by `***`.
fn redact(secrets: &[String], mut text: String) -> String {
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), "***");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_the_url_without_its_password() {
        let target = Target::parse(
            "postgresql://csg:s%40cret@db.example:6543/meta",
            &Options::default(),
        )
        .unwrap();
        assert_eq!(target.shown, "postgres://csg:***@db.example:6543/meta");
        assert_eq!(
            redact(&target.secrets, "a s@cret b s%40cret".into()),
            "a *** b ***"
        );
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        let bad = [
            ("mysql://csg:pw@h/db", "postgres://"),
            ("host=h user=csg password=pw", "postgres://"),
            ("postgres://h:5432/db", "no user"),
            ("postgres://csg:pw@h:notaport/db", "port"),
            ("postgres://csg:pw@h/db?sslmode=verify", "verify-full"),
            (
                "postgres://csg:pw@h/db?sslcert=c.pem",
                "client certificates",
            ),
            (
                "postgres://csg:pw@h/db?sslmode=require&sslrootcert=system",
                "sslrootcert=system",
            ),
            (
                "postgres://csg:pw@h/db?sslmode=verify-ca&sslrootcert=/no/such/ca.pem",
                "/no/such/ca.pem",
            ),
        ];
        for (url, says) in bad {
            let e = Target::parse(url, &Options::default()).err().unwrap();
            let text = e.to_string();
            assert!(matches!(e, Error::InvalidUrl(_)), "{url}: {text}");
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("pw"), "{url}: {text}");
        }
    }

    #[test]
    fn reads_sslmode_and_sslrootcert_as_libpq_does() {
        let split = |url: &str| tls::split(url, percent_decode).unwrap();
        let (rest, settings) = split("postgres://u@h/db?application_name=x&sslmode=verify-full");
        assert_eq!(rest, "postgres://u@h/db?application_name=x");
        assert_eq!(settings.mode, Mode::VerifyFull);
        // The default, as libpq's.
        assert_eq!(split("postgres://u@h/db").1.mode, Mode::Prefer);
        // `require` with a CA file checks the chain; `system` means the whole check.
        let (rest, settings) = split("postgres://u@h/db?sslmode=require&sslrootcert=%2Fca.pem");
        assert_eq!(
            (rest.as_str(), settings.mode),
            ("postgres://u@h/db", Mode::VerifyCa)
        );
        assert_eq!(
            split("postgres://u@h/db?sslrootcert=system").1.mode,
            Mode::VerifyFull
        );
        // The last of a repeated parameter wins.
        let (_, settings) = split("postgres://u@h/db?sslmode=disable&sslmode=require");
        assert_eq!(settings.mode, Mode::Require);
        let target = Target::parse(
            "postgres://csg:pw@db.example/meta?sslmode=require",
            &Options::default(),
        )
        .unwrap();
        assert_eq!(
            target.shown,
            "postgres://csg:***@db.example:5432/meta?sslmode=require"
        );
    }
}
