//! O-9, issue 42 point 2: a call's deadline and its client's departure stop the work, not
//! only the wait. Against the real `csg serve`: 64 heavy `blame` calls — half over the JSON
//! API, half as MCP `tools/call`s (whose handling goes on after the response is dropped) —
//! are abandoned by their clients after 1 s. The server must be idle again within 1 s (at
//! most 0.1 CPU-seconds in the second after that) and stay so: at most 0.3 CPU-seconds of
//! work in the 3 s starting 2 s later (the targets), where the calls would have kept
//! both cores busy for tens of seconds.
//!
//! The server runs with `--heavy-calls 128`, so every call gets a slot and really runs (the
//! point is cancellation, not admission); the test first checks that the calls did load the
//! server, so an idle server cannot pass it by doing nothing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CSG: &str = env!("CARGO_BIN_EXE_csg");
/// The whole test, generation, start and every phase included.
const LIMIT: Duration = Duration::from_secs(240);
/// Commits of the generated history; each changes one line of [`LINES`].
const COMMITS: usize = 3_000;
const LINES: usize = 3_000;
const CALLS: usize = 64;

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A history of [`COMMITS`] commits, each rewriting one line of `hot.txt` ([`LINES`] lines),
/// so blaming the whole file walks all of them.
fn generate(dir: &Path) {
    testgit::git(dir, &["init", "--quiet", "-b", "main"]);
    let mut lines: Vec<String> = (0..LINES)
        .map(|i| format!("line {i} of hot.txt\n"))
        .collect();
    testgit::fastimport::linear(dir, COMMITS as u64, "hot.txt", |commit| {
        let at = (commit as usize * 7919) % LINES;
        lines[at] = format!("line {at} changed by commit {commit}\n");
        lines.concat()
    });
}

/// `csg serve --repo DIR` on a free loopback port: the child and its base URL.
fn serve(data: &Path, repo: &Path) -> (Killed, String) {
    let log = std::fs::File::create(data.with_extension("log")).expect("log file");
    let mut child = Command::new(CSG)
        .arg("--data-dir")
        .arg(data)
        .args(["serve", "--listen", "127.0.0.1:0", "--heavy-calls", "128"])
        // The history search index of the generated history is not what this test is
        // about: a short one keeps the server's own background work brief.
        .args(["--history-depth", "10"])
        .arg("--repo")
        .arg(repo)
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("csg serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let child = Killed(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(endpoint) = line.strip_prefix("MCP endpoint: ") {
                let _ = tx.send(endpoint.to_owned());
            }
        }
    });
    let endpoint = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            panic!(
                "csg serve printed no MCP endpoint; its log:\n{}",
                std::fs::read_to_string(data.with_extension("log")).unwrap_or_default()
            )
        });
    let base = endpoint[..endpoint.find("/sourcegraph/").expect("an endpoint path")].to_owned();
    (child, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn o9_abandoned_heavy_calls_leave_the_server_idle() {
    tokio::time::timeout(LIMIT, abandoned_heavy_calls())
        .await
        .expect("the test finished within its bound");
}

async fn abandoned_heavy_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("history");
    std::fs::create_dir(&repo).unwrap();
    let phase = Instant::now();
    generate(&repo);
    eprintln!("generated in {:.1?}", phase.elapsed());
    let (server, base) = serve(&tmp.path().join("data"), &repo);
    let pid = server.0.id();
    let client = reqwest::Client::new();
    // The repository `--repo` registered, once its first sync is done.
    let name = loop {
        let found = client
            .get(format!("{base}/sourcegraph/api/discovery"))
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap();
        let synced = found["repositories"]
            .as_array()
            .and_then(|repos| repos.iter().find(|r| !r["head"].is_null()));
        if let Some(repo) = synced {
            break repo["name"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("synced at {:.1?}", phase.elapsed());
    let arguments = serde_json::json!({
        "repo": name, "path": "hot.txt", "start_line": 1, "end_line": 2000,
    });
    // Quiet before: the server's own background work (indexing the small history) is done
    // when two seconds pass with next to no CPU.
    let mut before = cpu_seconds(pid);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = cpu_seconds(pid);
        if now - before < 0.2 {
            break;
        }
        before = now;
    }
    eprintln!("quiet at {:.1?}", phase.elapsed());
    let abandoning = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let started = cpu_seconds(pid);
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..CALLS {
        let request = if i % 2 == 0 {
            abandoning.get(format!(
                "{base}/sourcegraph/api/blame?repo={name}&path=hot.txt&start_line=1&end_line=2000"
            ))
        } else {
            let call = serde_json::json!({
                "jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "blame", "arguments": arguments},
            });
            abandoning
                .post(format!("{base}/sourcegraph/mcp"))
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2025-06-18")
                .body(call.to_string())
        };
        calls.spawn(async move { request.send().await.map(|r| r.status()) });
    }
    let answered = calls.join_all().await;
    let left_at = Instant::now();
    let finished: Vec<_> = answered.iter().filter(|a| a.is_ok()).collect();
    assert!(
        finished.len() < CALLS / 4,
        "the calls must still be working when their clients leave (else this proves \
         nothing): {finished:?}"
    );
    let loaded = cpu_seconds(pid) - started;
    eprintln!(
        "abandoned at {:.1?}: {loaded:.2} CPU-s meanwhile",
        phase.elapsed()
    );
    assert!(
        loaded > 0.5,
        "the calls loaded the server ({loaded:.2} CPU-s in their first second)"
    );
    tokio::time::sleep(Duration::from_secs(1).saturating_sub(left_at.elapsed())).await;
    let second = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = cpu_seconds(pid) - second;
    eprintln!("{second:.2} CPU-s in the second from 1 s after");
    assert!(
        second <= 0.1,
        "{second:.2} CPU-seconds of work in the second starting 1 s after {CALLS} heavy calls \
         were abandoned: not idle again within 1 s"
    );
    tokio::time::sleep(Duration::from_secs(2).saturating_sub(left_at.elapsed())).await;
    let from = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = cpu_seconds(pid) - from;
    eprintln!("{after:.2} CPU-s in the 3 s from 2 s after");
    assert!(
        after <= 0.3,
        "{after:.2} CPU-seconds of work in the 3 s starting 2 s after {CALLS} heavy calls \
         were abandoned (at most 0.3)"
    );
    // The server still answers.
    let status = client
        .get(format!(
            "{base}/sourcegraph/api/read?repo={name}&path=hot.txt&end_line=3"
        ))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    drop(server);
}

/// CPU-seconds `pid` has used (user and system).
fn cpu_seconds(pid: u32) -> f64 {
    testgit::usage::cpu_seconds(pid).expect("the server runs")
}
