//! `bench/site`: the website's file view of a 10,000-line file (target: under 200 ms), over
//! real HTTP on 127.0.0.1 against the service in process, next to a `git cat-file` of the
//! same blob as the floor measured in the same run.

use anyhow::{Context, Result, bail};
use bench::percentile;
use service::{Service, ServiceConfig};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const REPO: &str = "bench/site";
const LINES: usize = 10_000;

/// One HTTP/1.1 GET: the whole response.
fn get(addr: &str, path: &str) -> Result<String> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

#[tokio::main]
async fn main() -> Result<()> {
    let runs: usize = std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .map(|n| n.parse())
        .transpose()
        .context("--runs N")?
        .unwrap_or(50);
    let text: String = (1..=LINES)
        .map(|n| {
            format!(
                "fn line_{n}(x: &str) -> Option<&str> {{ x.get({n}..) }} // <tag> & \"quote\"\n"
            )
        })
        .collect();
    let source = testgit::SourceRepo::with_files(&[("src/big.rs", text.as_bytes())]);
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    let site = httpserver::SiteConfig {
        origin: "http://127.0.0.1".into(),
    };
    let app = httpserver::with_access(
        httpserver::site_router(service.clone(), &site),
        service,
        &site,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    tokio::spawn(httpserver::serve(listener, app, std::future::pending()));

    let path = format!("/sourcegraph/repos/{REPO}/-/blob/HEAD/src/big.rs");
    let page = tokio::task::spawn_blocking({
        let (addr, path) = (addr.clone(), path.clone());
        move || get(&addr, &path)
    })
    .await??;
    if !page.starts_with("HTTP/1.1 200") || !page.contains(&format!("id=\"L{LINES}\"")) {
        bail!(
            "the file view did not show all {LINES} lines: {}",
            &page[..page.len().min(300)]
        );
    }
    let mut page_times = Vec::with_capacity(runs);
    let mut git_times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (addr, path) = (addr.clone(), path.clone());
        let started = Instant::now();
        tokio::task::spawn_blocking(move || get(&addr, &path)).await??;
        page_times.push(started.elapsed());
        let started = Instant::now();
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(source.path())
            .args(["cat-file", "-p", "HEAD:src/big.rs"])
            .output()?;
        git_times.push(started.elapsed());
        if out.stdout.len() != text.len() {
            bail!("git cat-file read {} bytes", out.stdout.len());
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "bench/site: file view of {LINES} lines ({} KiB, {} KiB of HTML), {runs} runs",
        text.len() / 1024,
        page.len() / 1024
    );
    println!("                      p50        p99");
    let (p50, p99) = (
        percentile(&mut page_times, 0.5),
        percentile(&mut page_times, 0.99),
    );
    println!("file view page   {:8.2} ms {:8.2} ms", ms(p50), ms(p99));
    let (g50, g99) = (
        percentile(&mut git_times, 0.5),
        percentile(&mut git_times, 0.99),
    );
    println!(
        "git cat-file     {:8.2} ms {:8.2} ms   (ratio p50 {:.1}x)",
        ms(g50),
        ms(g99),
        ms(p50) / ms(g50)
    );
    println!(
        "target: p50 < 200 ms: {}",
        if p50 < Duration::from_millis(200) {
            "ok"
        } else {
            "FAIL"
        }
    );
    Ok(())
}
