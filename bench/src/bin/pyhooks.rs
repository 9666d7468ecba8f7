//! `bench/pyhooks`: what server plugins add to a call (issue 9's benchmark). Three plugin
//! files, each defining every hook and returning None, against the same service without
//! server plugins, in one run: p50 and p99 of `search` and of a 200-line `read` (target: less
//! than 50 µs added at p50), and the throughput of 8 concurrent readers. The search repeats
//! one query, so after the first run both sides answer it from the result cache (as a page
//! of results is); the hooks run on every answer all the same.

use anyhow::{Context, Result, bail};
use service::{CallContext, PluginHost, ReadRequest, SearchRequest, Service, ServiceConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NOOP: &str = "\
def on_startup(info):\n    return None\n\
def on_tool_call(call):\n    return None\n\
def on_search_results(result):\n    return None\n\
def on_read_result(result):\n    return None\n\
def on_source_file(file):\n    return None\n";

/// The target of the issue: added latency at p50.
const TARGET: Duration = Duration::from_micros(50);

fn main() -> Result<()> {
    let runs: usize = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => 2000,
        [flag, n] if flag == "--runs" => n.parse().context("--runs takes a number")?,
        _ => bail!("usage: bench/pyhooks [--runs N]"),
    };
    let body: String = (1..=200)
        .map(|n| format!("line {n}: the deploy runbook says to check the dashboard first\n"))
        .collect();
    let source = testgit::SourceRepo::with_files(&[
        ("docs/a.md", body.as_bytes()),
        ("src/lib.rs", b"pub fn deploy() -> u32 {\n    42\n}\n"),
    ]);
    let plugins = tempfile::tempdir()?;
    for name in ["10_a.py", "20_b.py", "30_c.py"] {
        std::fs::write(plugins.path().join(name), NOOP)?;
    }
    let host = PluginHost::start(pyplugin_config(plugins.path()));
    if host.status().files.len() != 3 {
        bail!("the three plugin files did not load: {:?}", host.status());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let without = Service::new(source.store("bench/pyhooks", ""), ServiceConfig::default());
    let epoch = host.current().context("the plugin host has no epoch")?;
    let with = Service::with_server_plugins(
        source.store("bench/pyhooks", ""),
        ServiceConfig::default(),
        host,
    );
    runtime.block_on(async move {
        for service in [&without, &with] {
            service.index("bench/pyhooks".into(), |_| {}).await?;
        }
        let read = ReadRequest {
            repo: "bench/pyhooks".into(),
            revision: None,
            path: "docs/a.md".into(),
            start_line: Some(1),
            end_line: Some(200),
            plugins: None,
        };
        let search = SearchRequest {
            query: "runbook".into(),
            repo: Some("bench/pyhooks".into()),
            limit: Some(20),
            ..SearchRequest::default()
        };
        println!("bench/pyhooks: 3 plugin files, every hook defined and returning None; {runs} calls each");
        println!("{:<28} {:>12} {:>12} {:>12} {:>12}", "", "p50 base", "p50 hooks", "added p50", "added p99");
        let mut verdict = true;
        for op in ["read (200 lines)", "search"] {
            let mut base = Vec::with_capacity(runs);
            let mut hooked = Vec::with_capacity(runs);
            for _ in 0..runs {
                // Interleaved, so drift of the machine hits both sides alike.
                for (service, times) in [(&without, &mut base), (&with, &mut hooked)] {
                    let t = Instant::now();
                    if op == "search" {
                        service.search(&CallContext::default(), search.clone()).await?;
                    } else {
                        service.read_enriched(&CallContext::default(), read.clone()).await?;
                    }
                    times.push(t.elapsed());
                }
            }
            let (b50, b99) = percentiles(&mut base);
            let (h50, h99) = percentiles(&mut hooked);
            let added = h50.saturating_sub(b50);
            verdict &= added < TARGET;
            println!(
                "{op:<28} {:>10.1}µs {:>10.1}µs {:>10.1}µs {:>10.1}µs",
                us(b50),
                us(h50),
                us(added),
                us(h99.saturating_sub(b99))
            );
        }
        // Where the added search latency goes: the hook pipeline alone, back to back, on a
        // page like the search's (20 hits), from a blocking thread as the search calls it.
        let page = pyplugin::SearchPage {
            query: "runbook".into(),
            caller: serde_json::json!({"authenticated": false}),
            groups: vec![pyplugin::PageGroup {
                repo: "bench/pyhooks".into(),
                commit: "0".repeat(40),
                lines: (1..=20)
                    .map(|n| pyplugin::PageLine {
                        path: "docs/a.md".into(),
                        line: n,
                        snippet: format!("line {n}: the deploy runbook"),
                    })
                    .collect(),
            }],
        };
        let mut times = tokio::task::spawn_blocking(move || {
            (0..runs)
                .map(|_| {
                    let page = page.clone();
                    let t = Instant::now();
                    epoch.run_search_blocking(page);
                    t.elapsed()
                })
                .collect::<Vec<_>>()
        })
        .await?;
        let (p50, p99) = percentiles(&mut times);
        println!(
            "{:<28} {:>12} {:>10.1}µs {:>12} {:>10.1}µs",
            "on_search_results alone", "", us(p50), "", us(p99)
        );
        for (label, service) in [("without server plugins", &without), ("with the 3 files", &with)] {
            let rate = throughput(service, &read, 8, Duration::from_secs(2)).await?;
            println!("8 concurrent readers, {label:<24} {rate:>9.0} reads/s");
        }
        println!(
            "target: added p50 < {} µs on both: {}",
            TARGET.as_micros(),
            if verdict { "PASS" } else { "FAIL" }
        );
        Ok(())
    })
}

fn pyplugin_config(dir: &std::path::Path) -> service::HostConfig {
    service::HostConfig::new(dir.to_path_buf())
}

fn percentiles(times: &mut [Duration]) -> (Duration, Duration) {
    (
        bench::percentile(times, 0.5),
        bench::percentile(times, 0.99),
    )
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn throughput(
    service: &Service,
    read: &ReadRequest,
    callers: usize,
    length: Duration,
) -> Result<f64> {
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let until = Instant::now() + length;
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let (service, read, done) = (service.clone(), read.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                service
                    .read_enriched(&CallContext::default(), read.clone())
                    .await?;
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok::<_, service::ServiceError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(done.load(std::sync::atomic::Ordering::Relaxed) as f64 / length.as_secs_f64())
}
