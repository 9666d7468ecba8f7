//! A throwaway PostgreSQL server for tests (feature `testing`): a cluster in a temporary
//! directory on a free loopback port, with password logins like production, stopped and
//! removed on drop. One per test process through [`shared`]; each test takes its own database
//! with [`TestServer::create_database`].
//!
//! PostgreSQL refuses to run as root, so as root the server binaries run as the `postgres`
//! user (Debian's package creates it) in a directory that user owns.
//!
//! The functions that a test calls in the middle of its work (`create_database`, `stop`,
//! `restart`, `shared`) panic with a message saying what to do when they fail, as a test
//! would; only [`TestServer::start`] returns its error.
//!
//! [`shared_tls`] is a second kind of server: one that takes TCP connections over TLS only
//! (`hostssl` in `pg_hba.conf`), its certificate made by a throwaway CA with Debian's
//! `openssl` (O-10).
//!
//! Beside the server, the two time bounds the stores' tests share: [`within`], for a test whose
//! failure mode is a hang, and [`eventually`], for what another replica or thread does in the
//! background.

use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// The superuser the tests log in as.
const USER: &str = "csg";

/// A running PostgreSQL cluster for tests. See the [module](self) documentation.
pub struct TestServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    port: u16,
    password: String,
    databases: AtomicU64,
    tls: Option<TlsFiles>,
    /// A process that stops the server and removes its directory once this process is gone,
    /// however it ended: the [`shared`] server is never dropped, and a test process may be
    /// killed.
    watchdog: Mutex<Option<Child>>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("dir", &self.dir.path())
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// The server of this test process, started on first use.
///
/// # Panics
/// If it cannot be started (the message says why and what to do).
pub fn shared() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| match TestServer::start() {
        Ok(server) => server,
        Err(e) => panic!("cannot start the test PostgreSQL server: {e}"),
    })
}

/// The certificates of a server that takes TLS connections only ([`shared_tls`]).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The PEM certificate of the throwaway CA that signed the server's (which names
    /// `localhost` and `127.0.0.1`, and no other host).
    pub ca: PathBuf,
    /// The PEM certificate of another CA, which signed nothing of this server's.
    pub unrelated_ca: PathBuf,
}

/// The TLS-only server of this test process ([`TestServer::start_tls`]), started on first use.
///
/// # Panics
/// If it cannot be started (the message says why and what to do).
pub fn shared_tls() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| match TestServer::start_tls() {
        Ok(server) => server,
        Err(e) => panic!("cannot start the test PostgreSQL server with TLS: {e}"),
    })
}

impl TestServer {
    /// [`TestServer::start`] for a server that takes TCP connections only over TLS
    /// (`hostssl`), with a certificate for `localhost` and `127.0.0.1` signed by a throwaway
    /// CA ([`TestServer::tls`]), made with `openssl`.
    pub fn start_tls() -> Result<TestServer, String> {
        Self::start_with(true)
    }

    /// The CA certificates of a server started with [`TestServer::start_tls`].
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// Creates a cluster (`initdb`, a superuser with a random password, scram-sha-256 logins)
    /// in a new temporary directory and starts it on a free 127.0.0.1 port, waiting until it
    /// accepts connections.
    pub fn start() -> Result<TestServer, String> {
        Self::start_with(false)
    }

    fn start_with(tls: bool) -> Result<TestServer, String> {
        let bin = binaries()?;
        let as_postgres = running_as_root()?;
        let dir = tempfile::Builder::new()
            .prefix("csg-pg-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let mut password_bytes = [0u8; 16];
        getrandom::fill(&mut password_bytes)
            .map_err(|e| format!("cannot draw a random password: {e}"))?;
        let password = password_bytes.iter().fold(String::new(), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        });
        let password_file = dir.path().join("password");
        fs::write(&password_file, format!("{password}\n"))
            .map_err(|e| format!("cannot write {}: {e}", password_file.display()))?;
        // Made before the directory is handed to the server's user: its key must be that
        // user's, readable by nobody else.
        let tls = if tls {
            Some(make_certificates(dir.path())?)
        } else {
            None
        };
        if as_postgres {
            let mut chown = Command::new("chown");
            chown.args(["-R", "postgres:postgres"]).arg(dir.path());
            run(&mut chown, "chown")?;
        }
        let mut server = TestServer {
            dir,
            bin,
            as_postgres,
            port: 0,
            password,
            databases: AtomicU64::new(0),
            tls,
            watchdog: Mutex::new(None),
        };
        let mut initdb = server.command("initdb");
        initdb
            .arg("-D")
            .arg(server.data())
            .args([
                "-U",
                USER,
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .arg(format!("--pwfile={}", password_file.display()));
        run(&mut initdb, "initdb")?;
        // Sockets only in the temporary directory. No fsync: speed over surviving a machine
        // crash; a server crash (`stop`) still loses no committed transaction, which the outage
        // tests rely on (so no `synchronous_commit = off`).
        let settings = format!(
            "\n# csg tests\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nfull_page_writes = off\nmax_connections = 400\n",
            server.dir.path().display()
        );
        append(&server.data().join("postgresql.conf"), &settings)?;
        if server.tls.is_some() {
            let dir = server.dir.path().display();
            let ssl = format!(
                "ssl = on\nssl_cert_file = '{dir}/server.crt'\nssl_key_file = '{dir}/server.key'\n"
            );
            append(&server.data().join("postgresql.conf"), &ssl)?;
            // TCP logins over TLS only: a plain connection finds no entry and is refused.
            let hba = "local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\n";
            let path = server.data().join("pg_hba.conf");
            fs::write(&path, hba).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        server.watchdog = Mutex::new(Some(server.spawn_watchdog()?));
        // A free port may be taken between looking and binding: try a few.
        let mut last = String::new();
        for _ in 0..5 {
            server.port = free_port()?;
            let port_line = format!("port = {}\n", server.port);
            append(&server.data().join("postgresql.conf"), &port_line)?;
            match server.pg_ctl_start() {
                Ok(()) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The URL of `database` on this server, with the superuser's name and password.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{database}",
            self.password, self.port
        )
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Creates a fresh database and returns its URL.
    ///
    /// # Panics
    /// If the server does not accept the `CREATE DATABASE`.
    pub fn create_database(&self) -> String {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let name = format!("t{n}");
        let mut admin = self.url("postgres");
        if self.tls.is_some() {
            admin.push_str("?sslmode=require");
        }
        let statement = format!("CREATE DATABASE {name}");
        // The driver must not run on a thread inside a Tokio runtime, which the caller's may be.
        let created = thread::spawn(move || {
            let target = crate::config::Target::parse(&admin, &crate::Options::default())?;
            let mut client = target.connect(false)?;
            client.batch_execute(&statement).map_err(crate::Error::from)
        })
        .join();
        match created {
            Ok(Ok(())) => self.url(&name),
            Ok(Err(e)) => panic!("cannot create test database {name}: {e}"),
            Err(_) => panic!("cannot create test database {name}: its thread panicked"),
        }
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`), like a crash; [`Self::restart`]
    /// brings it back on the same port.
    ///
    /// # Panics
    /// If `pg_ctl` fails, e.g. when the server is already stopped.
    pub fn stop(&self) {
        if let Err(e) = self.pg_ctl_stop() {
            panic!("cannot stop the test PostgreSQL server: {e}");
        }
    }

    /// Stops the server if it runs and starts it again on the same port: an outage.
    ///
    /// # Panics
    /// If it does not start again.
    pub fn restart(&self) {
        let _ = self.pg_ctl_stop();
        if let Err(e) = self.pg_ctl_start() {
            panic!("cannot restart the test PostgreSQL server: {e}");
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A server binary, as the `postgres` user when this process is root.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut runuser = Command::new("runuser");
            runuser.args(["-u", "postgres", "--"]).arg(program);
            runuser
        } else {
            Command::new(program)
        };
        // The caller's working directory may be closed to the postgres user.
        command.current_dir(self.dir.path()).stdin(Stdio::null());
        command
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let log = self.dir.path().join("server.log");
        let mut start = self.command("pg_ctl");
        start
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "60", "start"]);
        run(&mut start, "pg_ctl start").map_err(|e| {
            let text = fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!("{e}\nserver log:\n{}", tail.join("\n"))
        })
    }

    fn pg_ctl_stop(&self) -> Result<(), String> {
        let mut stop = self.command("pg_ctl");
        stop.arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "-t", "60", "stop"]);
        run(&mut stop, "pg_ctl stop")
    }

    fn spawn_watchdog(&self) -> Result<Child, String> {
        const SCRIPT: &str = r#"pid=$1; pg_ctl=$2; data=$3; dir=$4; as_postgres=$5
while [ -d "/proc/$pid" ]; do sleep 1; done
if [ "$as_postgres" = yes ]; then
  runuser -u postgres -- "$pg_ctl" -D "$data" -m immediate stop
else
  "$pg_ctl" -D "$data" -m immediate stop
fi
rm -rf "$dir""#;
        let as_postgres = if self.as_postgres { "yes" } else { "no" };
        Command::new("sh")
            .args(["-c", SCRIPT, "metadb-watchdog"])
            .arg(std::process::id().to_string())
            .arg(self.bin.join("pg_ctl"))
            .arg(self.data())
            .arg(self.dir.path())
            .arg(as_postgres)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C to the tests must not end it first.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the server's watchdog (sh): {e}"))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.pg_ctl_stop();
        let watchdog = self
            .watchdog
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(mut child) = watchdog.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The directory goes with `self.dir`.
    }
}

/// Runs `f` on a thread of its own and answers its result, failing the test if `f` has not
/// finished within `limit`: a test that hangs fails instead of stalling the whole run.
///
/// # Panics
/// If `f` takes longer than `limit` (the thread is left behind; the test process ends with
/// the run), or with `f`'s own panic, passed on unchanged so the test fails with its message.
pub fn within<R: Send + 'static>(limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let worker = thread::Builder::new()
        .name("bounded-test".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .unwrap_or_else(|e| panic!("cannot start the test's thread: {e}"));
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(RecvTimeoutError::Timeout) => panic!("the test did not finish within {limit:?}"),
        // `f` ended without sending: it panicked.
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => panic!("the test thread ended without a result"),
        },
    }
}

/// How often [`eventually`] asks again: often enough that a limit of a second still allows
/// a hundred looks, rarely enough that a check querying the database does not load it.
const POLL: Duration = Duration::from_millis(10);

/// Calls `check` until it answers `true`, every 10 ms, and fails the test if `limit` passes
/// first. `what` names the awaited condition in the failure message.
///
/// # Panics
/// If `check` has not held within `limit`.
pub fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < limit,
            "gave up after {limit:?} waiting for: {what}"
        );
        thread::sleep(POLL);
    }
}

/// The OpenSSL configuration of [`make_certificates`]: a CA, and a server certificate for
/// `localhost` and `127.0.0.1` as rustls (webpki) checks it (subject alternative names, the
/// server-auth usage).
const OPENSSL_CONFIG: &str = "[req]\ndistinguished_name = dn\n[dn]\n\
[ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n\
subjectKeyIdentifier = hash\n\
[server]\nbasicConstraints = critical,CA:FALSE\n\
keyUsage = critical,digitalSignature,keyEncipherment\nextendedKeyUsage = serverAuth\n\
subjectAltName = DNS:localhost,IP:127.0.0.1\n";

/// Makes a throwaway CA, a server certificate it signs (`server.crt`, `server.key`) and an
/// unrelated CA in `dir`, with `openssl`.
fn make_certificates(dir: &Path) -> Result<TlsFiles, String> {
    let config = dir.join("openssl.cnf");
    fs::write(&config, OPENSSL_CONFIG)
        .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
    let openssl = |args: &[&str]| {
        let mut command = Command::new("openssl");
        command.args(args).current_dir(dir).stdin(Stdio::null());
        run(&mut command, "openssl").map_err(|e| {
            format!("{e}; the TLS tests need Debian's openssl (apt-get install openssl)")
        })
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-config",
        "openssl.cnf",
    ];
    for (name, subject) in [
        ("ca", "/CN=csg test CA"),
        ("unrelated-ca", "/CN=another CA"),
    ] {
        let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
        let mut args = vec!["req", "-x509", "-days", "30", "-subj", subject];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &crt, "-extensions", "ca"]);
        openssl(&args)?;
    }
    let mut args = vec!["req", "-new", "-subj", "/CN=localhost"];
    args.extend(ec);
    args.extend(["-keyout", "server.key", "-out", "server.csr"]);
    openssl(&args)?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-days",
        "30",
        "-out",
        "server.crt",
        "-extfile",
        "openssl.cnf",
        "-extensions",
        "server",
    ])?;
    // PostgreSQL refuses a key that others may read.
    let key = dir.join("server.key");
    fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", key.display()))?;
    Ok(TlsFiles {
        ca: dir.join("ca.crt"),
        unrelated_ca: dir.join("unrelated-ca.crt"),
    })
}

/// The directory of `initdb` and `pg_ctl`: Debian's newest `/usr/lib/postgresql/N/bin`, else
/// the `PATH`.
fn binaries() -> Result<PathBuf, String> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    let debian = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| has_both(bin))
        .max_by_key(|(version, _)| *version);
    if let Some((_, bin)) = debian {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|dir| has_both(dir))
        .ok_or_else(|| {
            "PostgreSQL server binaries not found (initdb, pg_ctl); run scripts/setup.sh \
             (installs Debian's postgresql) or scripts/postgres.sh install"
                .to_owned()
        })
}

fn running_as_root() -> Result<bool, String> {
    let output = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("cannot run `id -u`: {e}"))?;
    Ok(String::from_utf8_lossy(&output.stdout).trim() == "0")
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("cannot find a free loopback port: {e}"))
}

fn append(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write as _;
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout).trim(),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}
