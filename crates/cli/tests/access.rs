//! Access control over real HTTP against the `csg` binary (A-1..A-4, O-1, O-4): users,
//! tokens and grants made with the CLI in the data directory of a running `csg serve`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use testgit::SourceRepo;

const CSG: &str = env!("CARGO_BIN_EXE_csg");

fn csg(data: &Path, args: &[&str]) -> Output {
    let output = Command::new(CSG)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("CSG_LISTEN")
        .env_remove("CSG_DATA_DIR")
        .env_remove("CSG_PUBLIC_READ")
        .output()
        .expect("csg runs");
    assert!(
        output.status.success(),
        "csg {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A new token of `user`, as `csg token create` prints it.
fn token(data: &Path, user: &str) -> String {
    let out = csg(data, &["token", "create", user]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `csg serve` on a free loopback port, logging to `{data}.log`; answers once it printed its
/// endpoint.
fn serve(data: &Path, extra: &[&str]) -> Server {
    let log = std::fs::File::create(data.with_extension("log")).expect("log file");
    let mut child = Command::new(CSG)
        .arg("--data-dir")
        .arg(data)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("CSG_LISTEN")
        .env_remove("CSG_PUBLIC_READ")
        .env_remove("CSG_LOG")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("csg starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(endpoint) = line.strip_prefix("MCP endpoint: ") {
                let base = endpoint[..endpoint.find("/sourcegraph/").unwrap_or(0)].to_owned();
                let _ = tx.send(base);
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("csg serve printed its endpoint");
    Server(child, base)
}

/// One HTTP/1.1 request: status, headers (lower-case names) and body.
fn request(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String, String) {
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("server reachable");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body.unwrap_or(""));
    stream.write_all(head.as_bytes()).expect("request sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response read");
    let (headers, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, headers.to_ascii_lowercase(), body.to_owned())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Read,
    ReadMany,
    Search,
    List,
    Availability,
    Prepare,
}

/// [`call`] as a well-behaved client makes it: a 429 is waited out for its `Retry-After`
/// and the call made again, so a matrix with many refused cells is not cut short by the
/// limiter it does not test.
fn patient_call(base: &str, op: Op, repo: &str, token: Option<&str>) -> (u16, String, String) {
    loop {
        let answer = call(base, op, repo, token);
        if answer.0 != 429 {
            return answer;
        }
        let wait = answer
            .1
            .lines()
            .find_map(|line| line.strip_prefix("retry-after: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1);
        std::thread::sleep(Duration::from_secs(wait));
    }
}

fn call(base: &str, op: Op, repo: &str, token: Option<&str>) -> (u16, String, String) {
    match op {
        Op::Read => request(
            base,
            "GET",
            &format!("/sourcegraph/api/read?repo={repo}&path=a.md"),
            token,
            None,
        ),
        Op::ReadMany => request(
            base,
            "POST",
            "/sourcegraph/api/read_many",
            token,
            Some(&format!(
                r#"{{"repo":"{repo}","files":[{{"path":"a.md"}}]}}"#
            )),
        ),
        Op::Search => request(
            base,
            "GET",
            &format!("/sourcegraph/api/search?query=A&repo={repo}"),
            token,
            None,
        ),
        Op::List => request(
            base,
            "GET",
            &format!("/sourcegraph/api/list?repo={repo}"),
            token,
            None,
        ),
        Op::Availability => request(
            base,
            "GET",
            &format!("/sourcegraph/api/availability?repo={repo}"),
            token,
            None,
        ),
        Op::Prepare => request(
            base,
            "POST",
            "/sourcegraph/api/prepare",
            token,
            Some(&format!(r#"{{"repo":"{repo}","action":"reindex"}}"#)),
        ),
    }
}

/// A-1..A-4 over real HTTP: every cell of {anonymous, token without grant, granted token,
/// revoked token, prepare-capable token} × {public, private} × {read, read_many, search,
/// list, availability, prepare} has its exact outcome; a denial of a private repository is
/// byte for byte the answer about an unknown one.
#[test]
fn a1_a4_access_matrix() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let public = SourceRepo::with_files(&[("a.md", b"# A public\n")]);
    let secret = SourceRepo::with_files(&[("a.md", b"# A secret\n")]);
    csg(
        &data,
        &[
            "repo",
            "add",
            "acme/public",
            public.path().to_str().unwrap(),
        ],
    );
    csg(
        &data,
        &[
            "repo",
            "add",
            "acme/secret",
            secret.path().to_str().unwrap(),
            "--private",
        ],
    );
    for (user, flags) in [
        ("reader", ""),
        ("granted", ""),
        ("gone", ""),
        ("ops", "--prepare"),
    ] {
        let mut args = vec!["user", "add", user];
        if !flags.is_empty() {
            args.push(flags);
        }
        csg(&data, &args);
    }
    csg(&data, &["grant", "granted", "acme/secret"]);
    let reader = token(&data, "reader");
    let granted = token(&data, "granted");
    let gone = token(&data, "gone");
    let ops = token(&data, "ops");
    let listed = String::from_utf8_lossy(&csg(&data, &["token", "list", "--user", "gone"]).stdout)
        .into_owned();
    let gone_id = listed.split('\t').next().unwrap().to_owned();
    csg(&data, &["token", "revoke", &gone_id]);
    assert!(
        !String::from_utf8_lossy(&csg(&data, &["token", "list"]).stdout).contains("csg_"),
        "secrets are never listed"
    );

    let server = serve(&data, &[]);
    let base = server.1.as_str();
    let callers: [(&str, Option<&str>); 5] = [
        ("anonymous", None),
        ("no grant", Some(&reader)),
        ("granted", Some(&granted)),
        ("revoked", Some(&gone)),
        ("prepare", Some(&ops)),
    ];
    let ops_list = [
        Op::Read,
        Op::ReadMany,
        Op::Search,
        Op::List,
        Op::Availability,
        Op::Prepare,
    ];
    for (who, token) in callers {
        for repo in ["acme/public", "acme/secret"] {
            for op in ops_list {
                let (status, headers, body) = patient_call(base, op, repo, token);
                let private = repo == "acme/secret";
                let readable = match who {
                    "revoked" => false,
                    "granted" => true,
                    _ => !private,
                };
                let expected = match (who, op) {
                    ("revoked", _) => 401,
                    ("anonymous", Op::Prepare) => 401,
                    ("prepare", Op::Prepare) => 200,
                    (_, Op::Prepare) => 403,
                    (_, Op::Availability) => 200,
                    _ if readable => 200,
                    _ => 404,
                };
                assert_eq!(status, expected, "{who} × {repo} × {op:?}: {status} {body}");
                if status == 401 {
                    assert!(
                        headers.contains("www-authenticate: bearer"),
                        "{who} {op:?}: {headers}"
                    );
                }
                if op == Op::Availability {
                    let visible = body.contains(r#""visible":true"#);
                    assert_eq!(visible, readable, "{who} × {repo}: {body}");
                }
                if status == 404 || (op == Op::Availability && !readable && status == 200) {
                    // A-4: the same answer as for a repository that does not exist.
                    let (unknown_status, _, unknown) =
                        patient_call(base, op, "acme/nothing", token);
                    assert_eq!(unknown_status, status);
                    assert_eq!(body, unknown.replace("acme/nothing", "acme/secret"));
                }
                if status == 200 && matches!(op, Op::Read) {
                    assert!(body.contains(if private { "A secret" } else { "A public" }));
                }
            }
        }
    }
    // Listing shows only what the caller may read.
    let (_, _, anonymous) = request(base, "GET", "/sourcegraph/api/discovery", None, None);
    assert!(anonymous.contains("acme/public") && !anonymous.contains("acme/secret"));
    let (_, _, mine) = request(
        base,
        "GET",
        "/sourcegraph/api/discovery",
        Some(&granted),
        None,
    );
    assert!(mine.contains("acme/secret"), "{mine}");
    let (_, _, everything) = request(base, "GET", "/sourcegraph/api/search?query=A", None, None);
    assert!(!everything.contains("acme/secret"), "{everything}");

    // W-34: a grant or a token taken back elsewhere is refused on the very next call.
    assert_eq!(
        patient_call(base, Op::Read, "acme/secret", Some(&granted)).0,
        200
    );
    csg(&data, &["grant", "granted", "acme/secret", "--remove"]);
    assert_eq!(
        patient_call(base, Op::Read, "acme/secret", Some(&granted)).0,
        404
    );
    assert_eq!(
        patient_call(base, Op::Read, "acme/public", Some(&reader)).0,
        200
    );
    csg(&data, &["user", "remove", "reader"]);
    assert_eq!(
        patient_call(base, Op::Read, "acme/public", Some(&reader)).0,
        401
    );

    // A token in the URL is refused, and the message says to use the header.
    let (status, _, body) = request(
        base,
        "GET",
        &format!("/sourcegraph/api/read?repo=acme/public&path=a.md&token={ops}"),
        None,
        None,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    let (status, _, _) = request(
        base,
        "POST",
        &format!("/sourcegraph/mcp?plugins=auto&access_token={ops}"),
        None,
        Some("{}"),
    );
    assert_eq!(status, 400);
}

/// A-1, A-2, O-4: without public read, the MCP endpoint and the API answer 401 with a
/// `WWW-Authenticate: Bearer` challenge; a brute force of 1,000 wrong tokens from one
/// address is slowed to a trickle (429 with `Retry-After`); `/metrics` counts all of it.
/// The server's log holds none of the tokens, right or wrong, and no file body (O-4).
#[test]
fn a1_tokens_needed_and_brute_force_is_rate_limited() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let source = SourceRepo::with_files(&[("a.md", b"# A body-marker-91c2\n")]);
    csg(
        &data,
        &["repo", "add", "acme/docs", source.path().to_str().unwrap()],
    );
    csg(&data, &["user", "add", "alice"]);
    let alice = token(&data, "alice");
    let server = serve(&data, &["--public-read", "false"]);
    let base = server.1.as_str();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (status, headers, body) = request(
        base,
        "POST",
        "/sourcegraph/mcp?plugins=auto",
        None,
        Some(initialize),
    );
    assert_eq!(status, 401, "{body}");
    assert!(headers.contains("www-authenticate: bearer"), "{headers}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    let (status, _, body) = request(
        base,
        "POST",
        "/sourcegraph/mcp?plugins=auto",
        Some(&alice),
        Some(initialize),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(call(base, Op::Read, "acme/docs", None).0, 401);
    let (status, _, body) = call(base, Op::Read, "acme/docs", Some(&alice));
    assert_eq!(status, 200);
    assert!(body.contains("body-marker-91c2"), "{body}");
    // A-1: a token in the query string is refused, and must not reach the log either.
    let (status, _, body) = request(
        base,
        "GET",
        &format!("/sourcegraph/api/read?repo=acme/docs&path=a.md&access_token={alice}"),
        None,
        None,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Authorization"), "{body}");
    // Probes and metrics stay open.
    assert_eq!(request(base, "GET", "/healthz", None, None).0, 200);

    let metric = |name: &str| -> u64 {
        let (_, _, text) = request(base, "GET", "/metrics", None, None);
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{text}"))
    };
    let before = (
        metric("csg_auth_refused_total"),
        metric("csg_auth_rate_limited_total"),
    );
    let started = Instant::now();
    let mut statuses = std::collections::BTreeMap::new();
    for n in 0..1000u32 {
        let wrong = format!("csg_{:064x}", u128::from(n) * 7919 + 1);
        let (status, headers, _) = call(base, Op::Read, "acme/docs", Some(&wrong));
        if status == 429 {
            assert!(headers.contains("retry-after: "), "{headers}");
        }
        *statuses.entry(status).or_insert(0u32) += 1;
    }
    let refused = statuses.get(&401).copied().unwrap_or(0);
    let limited = statuses.get(&429).copied().unwrap_or(0);
    assert_eq!(refused + limited, 1000, "{statuses:?}");
    // A burst of 10, then one per second of the run.
    let allowed = 10 + started.elapsed().as_secs() as u32 + 1;
    assert!(
        refused <= allowed,
        "{statuses:?} in {:?}",
        started.elapsed()
    );
    assert!(limited >= 1000 - allowed, "{statuses:?}");
    // The limited address is refused even with a valid token until it waited.
    assert_eq!(call(base, Op::Read, "acme/docs", Some(&alice)).0, 429);
    let after = (
        metric("csg_auth_refused_total"),
        metric("csg_auth_rate_limited_total"),
    );
    assert_eq!(after.0 - before.0, u64::from(refused));
    assert_eq!(after.1 - before.1, u64::from(limited) + 1);
    assert!(metric("csg_queries_total{operation=\"read\"}") >= 1);

    drop(server);
    let log = std::fs::read_to_string(data.with_extension("log")).expect("server log");
    assert!(
        log.contains("index built"),
        "the log is the server's: {log}"
    );
    let secret = alice.trim_start_matches("csg_");
    for leak in [secret, "body-marker-91c2", &format!("{:064x}", 7919 + 1)] {
        assert!(!log.contains(leak), "`{leak}` in the server log:\n{log}");
    }
}

/// `GET path` with exactly `host` as the `Host` header: the status and the body.
fn get_with_host(base: &str, host: &str, path: &str) -> (u16, String) {
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("server reachable");
    let head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("request sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response read");
    let (headers, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}

/// M-6: `csg serve` without `--public-url` and with public read off prints a Codex table
/// whose `bearer_token_env_var` line is active, and its access page names the origin a
/// visitor reached when the `Host` is one the MCP endpoint accepts (`localhost`, any port),
/// the listen address's for any other `Host`.
#[test]
fn m6_serve_banner_and_access_page_follow_host_and_public_read() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mut child = Command::new(CSG)
        .arg("--data-dir")
        .arg(&data)
        .args(["serve", "--listen", "127.0.0.1:0", "--public-read", "false"])
        .env_remove("CSG_LISTEN")
        .env_remove("CSG_PUBLIC_READ")
        .env_remove("CSG_PUBLIC_URL")
        .env_remove("CSG_ALLOWED_HOSTS")
        .env_remove("CSG_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("csg starts");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child, String::new());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // The banner ends with the Codex table, whose last line is the bearer line.
    let mut banner = Vec::new();
    while !banner
        .last()
        .is_some_and(|line: &String| line.contains("bearer_token_env_var"))
    {
        banner.push(
            rx.recv_timeout(Duration::from_secs(60))
                .expect("csg serve printed its banner"),
        );
    }
    let banner = banner.join("\n");
    assert!(
        banner.ends_with("\nbearer_token_env_var = \"SOURCEGRAPH_API_TOKEN\""),
        "active without public read: {banner}"
    );
    let endpoint = banner
        .lines()
        .find_map(|line| line.strip_prefix("MCP endpoint: "))
        .expect("the endpoint line");
    let base = &endpoint[..endpoint.find("/sourcegraph/").expect("a path")];
    let port = base.rsplit(':').next().expect("a port");

    let endpoint_shown = |host: &str| {
        let (status, page) = get_with_host(base, host, "/sourcegraph/connect");
        assert_eq!(status, 200, "{host}: {page}");
        assert!(
            page.contains("\nbearer_token_env_var = &quot;SOURCEGRAPH_API_TOKEN&quot;\n"),
            "{page}"
        );
        let start = page.find("<code id=\"endpoint\">").expect("the endpoint") + 20;
        page[start..start + page[start..].find("</code>").expect("its end")].to_owned()
    };
    assert_eq!(
        endpoint_shown(&format!("localhost:{port}")),
        format!("http://localhost:{port}/sourcegraph/mcp?plugins=auto")
    );
    assert_eq!(endpoint_shown("csg.evil.example"), endpoint);
    drop(server);
}
