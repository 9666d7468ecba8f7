//! `bench/enrich`: the cost of repository-plugin enrichment, in one run: base `read` without
//! plugins; with the `echo` fixture warm (instance reused); cold instance (compiled module
//! cached, new instance: a new `args` each call); and fully cold (compile). Also checks that
//! enrichment leaves the base-read statistics alone.

use anyhow::{Context, Result, bail};
use serde_json::json;
use service::{CallContext, PluginSelection, ReadRequest, Service, ServiceConfig};
use std::time::{Duration, Instant};

fn main() -> Result<()> {
    let runs = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => 300,
        [flag, n] if flag == "--runs" => n.parse().context("--runs takes a number")?,
        _ => bail!("usage: bench/enrich [--runs N]"),
    };
    let echo = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/wasmplugin/testdata/echo.sourcegraph.wasm"
    ))?;
    let body: String = (1..=200)
        .map(|n| format!("line {n} of a document that plugins enrich\n"))
        .collect();
    let source = testgit::SourceRepo::with_files(&[
        ("docs/echo.sourcegraph.wasm", &echo),
        ("docs/a.md", body.as_bytes()),
    ]);
    let store = source.store("bench/enrich", "");
    let service = Service::new(store, ServiceConfig::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let ctx = CallContext::default();
        let request = |args: serde_json::Value| ReadRequest {
            repo: "bench/enrich".into(),
            revision: None,
            path: "docs/a.md".into(),
            start_line: None,
            end_line: None,
            plugins: Some(vec![PluginSelection { name: "echo".into(), args }]),
        };
        let base_request = ReadRequest { plugins: None, ..request(json!({})) };

        // Fully cold: the first enriched read compiles the module.
        let started = Instant::now();
        let (_, first) = service.read_enriched(&ctx, request(json!({}))).await?;
        let cold_compile = started.elapsed();
        if first.per_item.is_empty() {
            bail!("the echo plugin attached nothing: {:?}", first.diagnostics);
        }

        let mut base = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            service.read(&ctx, base_request.clone()).await?;
            base.push(t.elapsed());
        }

        let mut warm = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            service.read_enriched(&ctx, request(json!({}))).await?;
            warm.push(t.elapsed());
        }
        let mut cold_instance = Vec::new();
        for i in 0..runs {
            // New args: a new instance key, so a new instance from the cached module.
            let t = Instant::now();
            service.read_enriched(&ctx, request(json!({"run": i}))).await?;
            cold_instance.push(t.elapsed());
        }
        let stats = service.stats();
        let plugin = service.plugin_stats().context("plugins are on")?;

        let p50 = |v: &mut Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        let p99 = |v: &[Duration]| v[((v.len() as f64 - 1.0) * 0.99) as usize];
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let (b50, w50, c50) = (p50(&mut base), p50(&mut warm), p50(&mut cold_instance));
        println!("bench/enrich: {runs} reads each of a 200-line file, echo fixture ({} bytes)", echo.len());
        println!("{:<46} p50 {:>8.1} µs  p99 {:>8.1} µs", "base read, no plugins", us(b50), us(p99(&base)));
        println!("{:<46} p50 {:>8.1} µs  p99 {:>8.1} µs", "read + warm plugin (instance reused)", us(w50), us(p99(&warm)));
        println!("{:<46} p50 {:>8.1} µs  p99 {:>8.1} µs", "read + cold instance (module cached)", us(c50), us(p99(&cold_instance)));
        println!("{:<46} {:>12.1} ms", "read + fully cold (compile)", cold_compile.as_secs_f64() * 1e3);
        println!(
            "overhead p50: warm {:.1} µs (target < 100), cold instance {:.1} µs (target < 1000)",
            us(w50) - us(b50),
            us(c50) - us(b50)
        );
        println!(
            "base-read statistics: {} read calls (every read once), mean {:.1} µs: enrichment time is not in them (R-7, W-38)",
            stats.read.calls,
            stats.read.total_micros as f64 / stats.read.calls.max(1) as f64,
        );
        println!(
            "runtime: {} compiles, {} cache hits, {} instantiations, {} reuses, {} executions",
            plugin.compiles, plugin.compile_cache_hits, plugin.instantiations, plugin.instance_reuses, plugin.executions
        );
        Ok(())
    })
}
