//! The `csg` binary: repository commands and settings precedence (O-1, O-2, O-3, M-6).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use testgit::{HungFetches, SourceRepo};

const CSG: &str = env!("CARGO_BIN_EXE_csg");

/// A temp dir with a one-commit repository `source/`; `data/` beside it is the data dir.
fn workspace() -> (SourceRepo, String) {
    let source = SourceRepo::with_files(&[("a.md", b"# A\n")]);
    let head = source.head();
    (source, head)
}

fn csg(tmp: &Path, args: &[&str]) -> Output {
    bounded(csg_command(tmp, args), args)
}

/// Runs a short `csg` command to its end; a hang fails the test instead of holding it.
fn bounded(mut command: Command, args: &[&str]) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("csg runs");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().ok();
            panic!("csg {args:?} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("csg output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn csg_command(tmp: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(CSG);
    command
        .arg("--data-dir")
        .arg(tmp.join("data"))
        .args(args)
        .env_remove("CSG_LISTEN")
        .env_remove("CSG_DATA_DIR")
        .env_remove("SOURCEGRAPH_API_TOKEN");
    command
}

/// `csg ARGS` with `SOURCEGRAPH_API_TOKEN` set, as an operator calls a running server.
fn csg_with_token(tmp: &Path, token: &str, args: &[&str]) -> Output {
    let mut command = csg_command(tmp, args);
    command.env("SOURCEGRAPH_API_TOKEN", token);
    bounded(command, args)
}

/// a token of a new user `ops` who holds the prepare capability.
fn prepare_token(tmp: &Path) -> String {
    let added = csg(tmp, &["user", "add", "ops", "--prepare"]);
    assert!(added.status.success(), "{added:?}");
    let created = csg(tmp, &["token", "create", "ops"]);
    assert!(created.status.success(), "{created:?}");
    String::from_utf8_lossy(&created.stdout).trim().to_owned()
}

/// O-1: `repo add`, `list`, `sync`, `remove`.
#[test]
fn o1_repo_commands() {
    let (tmp, head) = workspace();
    let source = tmp.path().to_path_buf();
    let added = csg(
        tmp.tmp(),
        &["repo", "add", "acme/docs", source.to_str().unwrap()],
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&added.stdout).trim(),
        format!("acme/docs {head}")
    );
    let listed = csg(tmp.tmp(), &["repo", "list"]);
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listing.contains("acme/docs") && listing.contains(&head) && listing.contains("main"),
        "{listing}"
    );
    let synced = csg(tmp.tmp(), &["repo", "sync", "acme/docs"]);
    assert!(synced.status.success());
    let bad = csg(
        tmp.tmp(),
        &["repo", "add", "not-a-name", source.to_str().unwrap()],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("owner/name"));
    let removed = csg(tmp.tmp(), &["repo", "remove", "acme/docs"]);
    assert!(removed.status.success());
    let listed = csg(tmp.tmp(), &["repo", "list"]);
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("acme/docs"));
}

/// S-8 (issue 33 point 4): `csg repo add --index-branch PATTERN` is repeatable, stored with
/// the registration, shown by `csg repo list`; the cap of 64 and bad patterns are refused
/// before anything is registered.
#[test]
fn s8_repo_add_index_branch_is_stored_and_listed() {
    let source = SourceRepo::with_files(&[("a.md", b"# A\n")]);
    source.git(&["branch", "release/1.0"]);
    let tmp = source.tmp();
    let path = source.source();

    let too_many: Vec<String> = (0..65)
        .flat_map(|i| ["--index-branch".to_string(), format!("b{i}")])
        .collect();
    let mut args: Vec<&str> = vec!["repo", "add", "acme/docs", &path];
    args.extend(too_many.iter().map(String::as_str));
    let refused = csg(tmp, &args);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("at most 64"),
        "{}",
        text(&refused.stderr)
    );
    let bad = csg(
        tmp,
        &["repo", "add", "acme/docs", &path, "--index-branch", "a b"],
    );
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("index-branch pattern"),
        "{}",
        text(&bad.stderr)
    );
    let listed = csg(tmp, &["repo", "list"]);
    assert!(
        !text(&listed.stdout).contains("acme/docs"),
        "a refused add registers nothing: {}",
        text(&listed.stdout)
    );

    let added = csg(
        tmp,
        &[
            "repo",
            "add",
            "acme/docs",
            &path,
            "--index-branch",
            "release/*",
            "--index-branch",
            "dev",
        ],
    );
    assert!(added.status.success(), "{}", text(&added.stderr));
    let listed = text(&csg(tmp, &["repo", "list"]).stdout);
    let line = listed
        .lines()
        .find(|l| l.starts_with("acme/docs\t"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.ends_with("\tindex-branches=release/*,dev"), "{line}");

    // Registered again without patterns: they stay; with patterns: replaced.
    let again = csg(tmp, &["repo", "add", "acme/docs", &path, "--no-wait"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let listed = text(&csg(tmp, &["repo", "list"]).stdout);
    assert!(
        listed.contains("\tindex-branches=release/*,dev"),
        "{listed}"
    );
    let replaced = csg(
        tmp,
        &[
            "repo",
            "add",
            "acme/docs",
            &path,
            "--no-wait",
            "--index-branch",
            "main",
        ],
    );
    assert!(replaced.status.success(), "{}", text(&replaced.stderr));
    let listed = text(&csg(tmp, &["repo", "list"]).stdout);
    assert!(listed.contains("\tindex-branches=main\n"), "{listed}");
}

/// O-5, issue 34 point 11: off a terminal, a short clone logs no progress lines (work that
/// outlasts `service::progress::QUIET_START` logs a line per tenth of each phase: unit tests
/// of `TenthLog`).
#[test]
fn o5_a_short_clone_logs_no_progress_off_a_terminal() {
    // Over git's unpack limit (100 objects), so the pack is received with progress ticks.
    let contents: Vec<(String, Vec<u8>)> = (0..150)
        .map(|i| (format!("f{i}.txt"), format!("file {i}\n").into_bytes()))
        .collect();
    let files: Vec<(&str, &[u8])> = contents
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_slice()))
        .collect();
    let source = SourceRepo::with_files(&files);
    let added = csg(
        source.tmp(),
        &["repo", "add", "acme/big", source.path().to_str().unwrap()],
    );
    let stderr = text(&added.stderr);
    assert!(added.status.success(), "{stderr}");
    assert!(
        !stderr.lines().any(|l| l.contains("progress")),
        "a short clone logs no progress: {stderr}"
    );
}

/// Starts `csg serve` and waits for the banner; answers the child and the endpoint line.
fn serve(tmp: &Path, extra: &[&str], env: &[(&str, &str)]) -> Result<(Child, String), String> {
    let mut command = Command::new(CSG);
    command
        .arg("--data-dir")
        .arg(tmp.join("data"))
        .args(extra)
        .env_remove("CSG_LISTEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("csg starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("MCP endpoint: ") {
                let _ = tx.send(line);
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(line) = rx.try_recv() {
            return Ok((child, line));
        }
        if let Ok(Some(_)) = child.try_wait() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            return Err(stderr);
        }
        assert!(
            Instant::now() < deadline,
            "csg serve did not print its endpoint in time"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `csg serve` on a free loopback port with `source` registered as `acme/docs`: the child
/// and the server's base URL (`http://127.0.0.1:PORT`).
fn serve_repo(tmp: &Path, source: &Path) -> (Child, String) {
    let (child, line) = serve(
        tmp,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--repo",
            &format!("acme/docs={}", source.to_str().unwrap()),
        ],
        &[],
    )
    .unwrap();
    let endpoint = line.trim_start_matches("MCP endpoint: ");
    let base = endpoint[..endpoint.find("/sourcegraph/").unwrap()].to_string();
    (child, base)
}

/// O-2, M-6: `serve --repo PATH` needs no config; it prints the endpoint with plugins=auto.
#[test]
fn o2_serve_embedded_default() {
    let (tmp, _) = workspace();
    let source = tmp.path().to_path_buf();
    let (mut child, line) = serve(
        tmp.tmp(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--repo",
            source.to_str().unwrap(),
        ],
        &[],
    )
    .unwrap();
    assert!(
        line.starts_with("MCP endpoint: http://127.0.0.1:"),
        "{line}"
    );
    assert!(line.ends_with("/sourcegraph/mcp?plugins=auto"), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
    let listed = csg(tmp.tmp(), &["repo", "list"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("local/source"),
        "named after its directory"
    );
}

/// O-3: flags > env > TOML file > defaults. A bad value at a lower level is never read when
/// a higher level sets the key.
#[test]
fn o3_settings_precedence() {
    let (tmp, _) = workspace();
    let config = tmp.tmp().join("csg.toml");
    std::fs::write(&config, "listen = \"127.0.0.1:0\"\n").unwrap();
    let config = config.to_str().unwrap();

    let (mut child, _) =
        serve(tmp.tmp(), &["--config", config, "serve"], &[]).expect("TOML value used");
    child.kill().unwrap();
    child.wait().unwrap();

    let bad_file = tmp.tmp().join("bad.toml");
    std::fs::write(&bad_file, "listen = \"not an address\"\n").unwrap();
    let bad_file = bad_file.to_str().unwrap();
    let (mut child, _) = serve(
        tmp.tmp(),
        &["--config", bad_file, "serve"],
        &[("CSG_LISTEN", "127.0.0.1:0")],
    )
    .expect("env beats the file");
    child.kill().unwrap();
    child.wait().unwrap();

    let (mut child, _) = serve(
        tmp.tmp(),
        &["serve", "--listen", "127.0.0.1:0"],
        &[("CSG_LISTEN", "bogus")],
    )
    .expect("flag beats env");
    child.kill().unwrap();
    child.wait().unwrap();

    let error =
        serve(tmp.tmp(), &["serve"], &[("CSG_LISTEN", "bogus")]).expect_err("bad env refused");
    assert!(error.contains("invalid listen address `bogus`"), "{error}");

    let typo = tmp.tmp().join("typo.toml");
    std::fs::write(&typo, "lissen = \"127.0.0.1:0\"\n").unwrap();
    let error = serve(
        tmp.tmp(),
        &["--config", typo.to_str().unwrap(), "serve"],
        &[],
    )
    .expect_err("typo refused");
    assert!(error.contains("lissen"), "{error}");
}

/// O-1, O-5, S-3: `csg index rebuild` reaches the running server through its JSON API and
/// reports the rebuilt index; without a server it says how to fix that.
#[test]
fn o5_index_rebuild_through_the_server() {
    let (tmp, head) = workspace();
    let source = tmp.path().to_path_buf();
    let (mut child, base) = serve_repo(tmp.tmp(), &source);
    let base = base.as_str();
    // rebuilding an index needs the prepare capability, loopback or not.
    let anonymous = csg(
        tmp.tmp(),
        &["index", "rebuild", "acme/docs", "--server", base],
    );
    assert!(!anonymous.status.success());
    assert!(
        String::from_utf8_lossy(&anonymous.stderr).contains("SOURCEGRAPH_API_TOKEN"),
        "{}",
        String::from_utf8_lossy(&anonymous.stderr)
    );
    let ops = prepare_token(tmp.tmp());
    for args in [
        vec!["index", "rebuild", "acme/docs", "--server", base],
        vec!["index", "rebuild", "--server", base],
    ] {
        let rebuilt = csg_with_token(tmp.tmp(), &ops, &args);
        assert!(
            rebuilt.status.success(),
            "{}",
            String::from_utf8_lossy(&rebuilt.stderr)
        );
        let stdout = String::from_utf8_lossy(&rebuilt.stdout);
        assert!(
            stdout.starts_with(&format!(
                "acme/docs: indexed 1 files (0 path-only) at {head} in "
            )),
            "{stdout}"
        );
    }
    let unknown = csg_with_token(
        tmp.tmp(),
        &ops,
        &["index", "rebuild", "nobody/here", "--server", base],
    );
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("unknown repository `nobody/here`"),
        "{}",
        String::from_utf8_lossy(&unknown.stderr)
    );
    child.kill().unwrap();
    child.wait().unwrap();

    let refused = csg(tmp.tmp(), &["index", "rebuild", "--server", base]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is `csg serve` running there?"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// A plain HTTP/1.1 GET against `base` (`http://127.0.0.1:PORT`): status and raw body.
fn http_get(base: &str, path_and_query: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("server reachable");
    write!(
        stream,
        "GET {path_and_query} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// G-1, O-1 across processes: a running server reads a repository `csg repo add` registered
/// from another process on the very next call (not only lists it), and after `csg repo
/// remove` elsewhere it answers "unknown repository", never a storage error.
#[test]
fn g1_running_server_sees_repo_add_and_remove_of_another_process() {
    let (tmp, _) = workspace();
    let other = SourceRepo::with_files(&[("b.md", b"# B\n")]);
    let source = tmp.path().to_path_buf();
    let (mut child, base) = serve_repo(tmp.tmp(), &source);
    let base = base.as_str();
    let read_b = "/sourcegraph/api/read?repo=acme/other&path=b.md";

    let (status, body) = http_get(base, read_b);
    assert!(
        status >= 400 && body.contains("unknown repository"),
        "{status} {body}"
    );

    let added = csg(
        tmp.tmp(),
        &["repo", "add", "acme/other", other.path().to_str().unwrap()],
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let (status, body) = http_get(base, read_b);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("# B"), "{body}");
    let (_, listed) = http_get(base, "/sourcegraph/api/discovery");
    assert!(listed.contains("acme/other"), "{listed}");

    let removed = csg(tmp.tmp(), &["repo", "remove", "acme/other"]);
    assert!(
        removed.status.success(),
        "{}",
        String::from_utf8_lossy(&removed.stderr)
    );
    let (status, body) = http_get(base, read_b);
    assert!(
        status >= 400 && body.contains("unknown repository `acme/other`"),
        "{status} {body}"
    );
    assert!(!body.contains("storage error"), "{body}");
    let (status, body) = http_get(base, "/sourcegraph/api/read?repo=acme/docs&path=a.md");
    assert_eq!(
        status, 200,
        "the server's own repository is untouched: {body}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Runs `csg` and expects it to refuse to start: a non-zero exit (a process still running
/// after 30 s accepted the setting). Answers its stderr.
fn refused(tmp: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut command = Command::new(CSG);
    command
        .arg("--data-dir")
        .arg(tmp.join("data"))
        .args(args)
        .env_remove("CSG_LISTEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("csg starts");
    let status = wait_for_exit(&mut child, Duration::from_secs(30));
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let status = status.unwrap_or_else(|| {
        panic!("csg {args:?} {env:?} started instead of refusing the setting: {stderr}")
    });
    assert!(!status.success(), "csg {args:?} {env:?} succeeded");
    stderr
}

/// Waits for `child` to exit; `None` (after killing it) if it is still running at `limit`.
fn wait_for_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

/// O-3: a zero budget, a zero interval or an overflowing retention is refused at start with
/// the setting's name (flag, variable, TOML key) and what it accepts, whichever layer set it.
#[test]
fn o3_bad_settings_refused_at_start() {
    let (tmp, _) = workspace();
    let serve = |flag: &str, value: &str| {
        vec![
            "serve".to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            flag.to_string(),
            value.to_string(),
        ]
    };
    let cases = [
        (
            serve("--sync-interval", "0"),
            "--sync-interval",
            "from 1ms to 720h",
        ),
        (
            serve("--sync-interval", "9999999999999999999h"),
            "--sync-interval",
            "from 1ms",
        ),
        (
            serve("--read-budget-bytes", "0"),
            "--read-budget-bytes",
            "from 1 to",
        ),
        (
            serve("--batch-budget-bytes", "0"),
            "--batch-budget-bytes",
            "from 1 to",
        ),
        (
            serve("--max-batch-items", "0"),
            "--max-batch-items",
            "from 1 to",
        ),
        (
            serve("--line-cap-bytes", "0"),
            "--line-cap-bytes",
            "from 1 to",
        ),
        (
            serve("--index-max-file-bytes", "0"),
            "--index-max-file-bytes",
            "from 1 to",
        ),
        (
            serve("--max-searches", "0"),
            "--max-searches",
            "from 1 to 1024",
        ),
        (
            serve("--shutdown-grace", "2h"),
            "--shutdown-grace",
            "from 0s to 1h",
        ),
        (
            vec![
                "--retention-days".into(),
                "999999999999999999".into(),
                "serve".into(),
                "--listen".into(),
                "127.0.0.1:0".into(),
            ],
            "--retention-days",
            "from 0 to 36500",
        ),
        (
            vec!["mcp".into(), "--sync-interval".into(), "0ms".into()],
            "--sync-interval",
            "from 1ms",
        ),
    ];
    for (args, flag, allowed) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stderr = refused(tmp.tmp(), &args, &[]);
        assert!(
            stderr.contains(&format!("invalid {flag}")) && stderr.contains(allowed),
            "{args:?}: {stderr}"
        );
    }

    // From the environment and the file, the message still names the setting.
    let listen = ["serve", "--listen", "127.0.0.1:0"];
    let stderr = refused(tmp.tmp(), &listen, &[("CSG_SYNC_INTERVAL", "0s")]);
    assert!(stderr.contains("CSG_SYNC_INTERVAL"), "{stderr}");
    let file = tmp.tmp().join("zero.toml");
    std::fs::write(&file, "read_budget_bytes = 0\n").unwrap();
    let file = file.to_str().unwrap();
    let stderr = refused(
        tmp.tmp(),
        &["--config", file, "serve", "--listen", "127.0.0.1:0"],
        &[],
    );
    assert!(stderr.contains("`read_budget_bytes`"), "{stderr}");
    // The plugin host's duration takes the same syntax, with the same refusal.
    let stderr = refused(
        tmp.tmp(),
        &listen,
        &[("SOURCEGRAPH_PLUGINS_TIMEOUT", "soon")],
    );
    assert!(
        stderr.contains("SOURCEGRAPH_PLUGINS_TIMEOUT") && stderr.contains("500ms"),
        "{stderr}"
    );
    // Nothing was started or created for a refused setting.
    assert!(!tmp.tmp().join("data").exists(), "data dir created");
}

/// Polls `condition` until it holds; panics naming `what` after a minute.
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// O-6: SIGTERM while a maintenance fetch hangs: the server gives in-flight work its grace
/// period, then kills the fetch (with the `git-upload-pack` it started) and exits; the next
/// start on the same data directory syncs normally.
#[cfg(target_os = "linux")]
#[test]
fn o6_sigterm_during_a_hung_fetch_exits_and_next_start_recovers() {
    let (tmp, _) = workspace();
    let source = tmp.path().to_path_buf();
    let added = csg(
        tmp.tmp(),
        &["repo", "add", "acme/docs", source.to_str().unwrap()],
    );
    assert!(added.status.success());

    let hung = HungFetches::new(&source);
    let (mut child, _) = serve(
        tmp.tmp(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--sync-interval",
            "100ms",
            "--shutdown-grace",
            "1s",
        ],
        &[],
    )
    .unwrap();
    eventually("the maintenance fetch to hang", || hung.blocked());
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = wait_for_exit(&mut child, Duration::from_secs(60))
        .expect("csg serve exits after SIGTERM although a fetch hangs");
    assert!(status.success(), "{status}");
    eventually("the killed fetch's helper to be gone", || !hung.blocked());

    drop(hung);
    let head = tmp.commit(&[("b.md", b"# B\n")], "more");
    let (mut child, _) = serve(tmp.tmp(), &["serve", "--listen", "127.0.0.1:0"], &[])
        .expect("a fresh start on the same data directory");
    let synced = csg(tmp.tmp(), &["repo", "sync", "acme/docs"]);
    assert!(
        synced.status.success(),
        "{}",
        String::from_utf8_lossy(&synced.stderr)
    );
    let listed = csg(tmp.tmp(), &["repo", "list"]);
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(listing.contains(&head), "{listing}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The build note of issue 9: the binary binds Debian's libpython 3.11 (the one it was built
/// against through `.cargo/config.toml`), found without LD_LIBRARY_PATH or an rpath.
#[test]
fn p1_binary_binds_debians_libpython() {
    let out = Command::new("ldd").arg(CSG).output().expect("ldd runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("libpython"))
        .unwrap_or_else(|| panic!("csg does not link libpython: {text}"));
    let bound = line
        .split("=>")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unresolved: {line}"));
    assert!(line.contains("libpython3.11.so.1.0"), "{line}");
    let want = std::fs::canonicalize("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0").unwrap();
    assert_eq!(std::fs::canonicalize(bound).unwrap(), want, "{line}");
}

/// P-13, P-14: the dry-run's exit codes, `init` and `api`.
#[test]
fn p13_p14_plugins_check_init_and_api() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    let init = csg(tmp.path(), &["plugins", "init", dir.to_str().unwrap()]);
    assert!(init.status.success(), "{init:?}");
    let example = std::fs::read_to_string(dir.join("example.py")).unwrap();
    assert!(
        example.contains("# def on_read_result(result):"),
        "{example}"
    );
    let again = csg(tmp.path(), &["plugins", "init", dir.to_str().unwrap()]);
    assert!(!again.status.success(), "never overwrites");

    let good = csg(tmp.path(), &["plugins", "check", dir.to_str().unwrap()]);
    let report = String::from_utf8_lossy(&good.stdout);
    assert!(good.status.success(), "{report}");
    assert!(
        report.contains("LOADED    example.py") && report.contains("OK: 1 loaded"),
        "{report}"
    );

    std::fs::write(
        dir.join("typo.py"),
        "def on_serch_results(result):\n    return None\n",
    )
    .unwrap();
    let bad = csg(tmp.path(), &["plugins", "check", dir.to_str().unwrap()]);
    let report = String::from_utf8_lossy(&bad.stdout);
    assert!(!bad.status.success(), "{report}");
    assert!(
        report.contains("REJECTED  typo.py: on_serch_results"),
        "{report}"
    );
    assert!(
        report.contains("did you mean on_search_results?"),
        "{report}"
    );
    assert!(
        !tmp.path().join("data").exists(),
        "a dry-run touches no data directory"
    );

    let api = csg(tmp.path(), &["plugins", "api"]);
    let text = String::from_utf8_lossy(&api.stdout);
    assert!(
        api.status.success() && text.contains("HOOKS_VERSION = 1"),
        "{text}"
    );
    let into_plugins = Command::new(CSG)
        .args(["plugins", "api", "--out"])
        .arg(dir.join("plugin_api.py"))
        .env("SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY", &dir)
        .output()
        .unwrap();
    assert!(!into_plugins.status.success());
    assert!(!dir.join("plugin_api.py").exists());
    let elsewhere = tmp.path().join("plugin_api.py");
    let out = csg(
        tmp.path(),
        &["plugins", "api", "--out", elsewhere.to_str().unwrap()],
    );
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(elsewhere).unwrap(), text);
}

/// P-1, P-12: `csg serve` with server plugins on: status over HTTP, `csg plugins reload`
/// and `status` against it; off, the directory is never read.
#[test]
fn p1_p12_serve_with_server_plugins() {
    let (source, _) = workspace();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let marker = tmp.path().join("loaded");
    std::fs::write(
        dir.join("a.py"),
        format!(
            "open({:?}, 'a').write('x')\ndef on_read_result(result):\n    return None\n",
            marker.to_str().unwrap()
        ),
    )
    .unwrap();
    let repo = format!("acme/docs={}", source.path().to_str().unwrap());
    let args = ["serve", "--listen", "127.0.0.1:0", "--repo", &repo];
    let directory = dir.to_str().unwrap();

    let (mut off, line) = serve(
        tmp.path(),
        &args,
        &[("SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY", directory)],
    )
    .unwrap();
    let endpoint = line.trim_start_matches("MCP endpoint: ");
    let base = &endpoint[..endpoint.find("/sourcegraph/").unwrap()];
    let (status, body) = http_get(base, "/sourcegraph/api/plugins/status");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"state\":\"disabled\""), "{body}");
    assert!(
        !marker.exists(),
        "a disabled subsystem never reads the directory"
    );
    off.kill().unwrap();
    off.wait().unwrap();

    let (mut on, line) = serve(
        tmp.path(),
        &args,
        &[
            ("SOURCEGRAPH_SERVER_PLUGINS_ENABLED", "true"),
            ("SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY", directory),
        ],
    )
    .unwrap();
    let endpoint = line.trim_start_matches("MCP endpoint: ");
    let base = endpoint[..endpoint.find("/sourcegraph/").unwrap()].to_string();
    let (_, body) = http_get(&base, "/sourcegraph/api/plugins/status");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["state"], "active", "{body}");
    assert_eq!(json["epoch"], 1);
    assert_eq!(json["files"][0]["file"], "a.py");
    assert_eq!(json["index"], "current");

    std::fs::write(dir.join("b.py"), "QUERY_ALIASES = {'k8s': 'kubernetes'}\n").unwrap();
    let refused = csg(tmp.path(), &["plugins", "reload", "--server", &base]);
    assert!(!refused.status.success(), "A-3: reload needs prepare");
    let ops = prepare_token(tmp.path());
    let reload = csg_with_token(tmp.path(), &ops, &["plugins", "reload", "--server", &base]);
    let text = String::from_utf8_lossy(&reload.stdout);
    assert!(reload.status.success(), "{reload:?}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["epoch"], 2, "{text}");
    assert_eq!(json["files"][1]["tables"][0], "QUERY_ALIASES");
    let status = csg(tmp.path(), &["plugins", "status", "--server", &base]);
    assert!(String::from_utf8_lossy(&status.stdout).contains("\"epoch\": 2"));
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "xx",
        "loaded at start and reload"
    );
    on.kill().unwrap();
    on.wait().unwrap();
}
