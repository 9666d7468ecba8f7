//! Rows: one measured between two CPU samples, the median of several rounds, and the table.

use super::{API_ROW, HTTP_ROW, MCP_NEXT_ROW, MCP_ROW, STDIO_ROW};
use anyhow::Result;
use bench::cpu::proc_cpu;
use std::path::Path;
use std::time::{Duration, Instant};

/// One row of the table.
pub(super) struct Row {
    pub(super) label: String,
    pub(super) calls: usize,
    pub(super) elapsed: Duration,
    pub(super) latencies: Vec<Duration>,
    /// Server CPU over the measured calls, µs.
    pub(super) server_us: f64,
    /// CPU of this benchmark process (the client) meanwhile, µs; `None` when it is the server.
    pub(super) client_us: Option<f64>,
    /// CPU of reaped child processes of the server meanwhile, µs.
    pub(super) children_us: f64,
    /// Bytes the server wrote to its log (stderr) meanwhile.
    pub(super) log_bytes: Option<u64>,
}

impl Row {
    pub(super) fn per_call(&self, us: f64) -> f64 {
        us / self.calls as f64
    }

    fn percentile(&self, p: f64) -> Option<f64> {
        if self.latencies.is_empty() {
            return None;
        }
        let mut sorted = self.latencies.clone();
        sorted.sort();
        Some(sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e6)
    }
}

/// Measures `calls` between two CPU samples of `server` (and of this process).
pub(super) async fn measured<F, T>(
    label: &str,
    server: u32,
    log: Option<&Path>,
    work: F,
) -> Result<(Row, T)>
where
    F: std::future::Future<Output = Result<(Vec<Duration>, usize, T)>>,
{
    let pid = server.to_string();
    let own = server == std::process::id();
    let log_size =
        |log: Option<&Path>| log.and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len());
    let (log_before, me_before, before) = (log_size(log), proc_cpu("self")?, proc_cpu(&pid)?);
    let started = Instant::now();
    let (latencies, count, extra) = work.await?;
    let elapsed = started.elapsed();
    let (after, me_after, log_after) = (proc_cpu(&pid)?, proc_cpu("self")?, log_size(log));
    Ok((
        Row {
            label: label.to_string(),
            calls: count,
            elapsed,
            latencies,
            server_us: after.own_us - before.own_us,
            client_us: (!own).then_some(me_after.own_us - me_before.own_us),
            children_us: after.children_us - before.children_us,
            log_bytes: log_before.zip(log_after).map(|(b, a)| a.saturating_sub(b)),
        },
        extra,
    ))
}

/// One row per label, in first-run order: the round with the median server CPU per call;
/// and, when there was more than one round, a line per label with every round's figure.
pub(super) fn median_rounds(rows: Vec<Row>) -> (Vec<Row>, Vec<String>) {
    let mut labels: Vec<String> = Vec::new();
    for row in &rows {
        if !labels.contains(&row.label) {
            labels.push(row.label.clone());
        }
    }
    let mut rows: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    let (mut medians, mut by_round) = (Vec::new(), Vec::new());
    for label in labels {
        let mut rounds: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].as_ref().is_some_and(|r| r.label == label))
            .collect();
        let per_call = |i: usize| rows[i].as_ref().map_or(0.0, |r| r.per_call(r.server_us));
        if rounds.len() > 1 {
            by_round.push(format!(
                "{label}: {}",
                rounds
                    .iter()
                    .map(|&i| format!("{:.1}", per_call(i)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        rounds.sort_by(|&a, &b| per_call(a).total_cmp(&per_call(b)));
        if let Some(row) = rounds
            .get(rounds.len() / 2)
            .and_then(|&median| rows[median].take())
        {
            medians.push(row);
        }
    }
    (medians, by_round)
}

pub(super) fn print_table(rows: &[Row]) {
    let floor = rows
        .iter()
        .find(|r| r.label.starts_with("git cat-file"))
        .map(|r| r.per_call(r.server_us));
    println!();
    println!(
        "{:<30} {:>8} {:>9} {:>9} {:>15} {:>8} {:>15} {:>10}",
        "row",
        "calls/s",
        "p50 µs",
        "p99 µs",
        "server µs/call",
        "× floor",
        "client µs/call",
        "log B/call"
    );
    let dash = |v: Option<f64>, precision: usize| {
        v.map_or("-".to_string(), |v| format!("{v:.precision$}"))
    };
    for row in rows {
        let server = row.per_call(row.server_us);
        println!(
            "{:<30} {:>8.0} {:>9} {:>9} {:>15.1} {:>8} {:>15} {:>10}",
            row.label,
            row.calls as f64 / row.elapsed.as_secs_f64(),
            dash(row.percentile(0.5), 1),
            dash(row.percentile(0.99), 1),
            server,
            dash(floor.filter(|f| *f > 0.0).map(|f| server / f), 2),
            dash(row.client_us.map(|c| row.per_call(c)), 1),
            dash(row.log_bytes.map(|b| b as f64 / row.calls as f64), 1),
        );
        if row.children_us > 0.0 {
            println!(
                "{:<30} note: the server's child processes used {:.0} µs meanwhile (not in the figure above)",
                "", row.children_us
            );
        }
    }
    let find = |label: &str| rows.iter().find(|r| r.label == label);
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    if let Some(stdio) = find(STDIO_ROW) {
        let stdio_us = stdio.per_call(stdio.server_us);
        for label in [MCP_ROW, MCP_NEXT_ROW] {
            if let Some(http) = find(label) {
                let ratio = http.per_call(http.server_us) / stdio_us;
                println!(
                    "issue 30 target: MCP over HTTP ≤ 1.2× stdio's server CPU per read ({label}): {ratio:.2}× {}",
                    verdict(ratio <= 1.2)
                );
            }
        }
        if let Some(http) = find(HTTP_ROW) {
            println!(
                "(rmcp's client, a TCP connection per call: {:.2}× stdio)",
                http.per_call(http.server_us) / stdio_us
            );
        }
        if let Some(api) = find(API_ROW) {
            let ratio = api.per_call(api.server_us) / stdio_us;
            println!(
                "issue 30 target: JSON API ≤ stdio's server CPU per read (1 client): {ratio:.2}× {}",
                verdict(ratio <= 1.0)
            );
        }
    }
    if let Some(stdio) = find(STDIO_ROW) {
        let per_call = stdio.per_call(stdio.server_us);
        println!(
            "issue 13 target: csg mcp stdio ≤ 100 µs server CPU per call: {per_call:.1} µs {}",
            verdict(per_call <= 100.0)
        );
    }
    if let Some(http) = find("csg serve, HTTP, 8 clients") {
        let rate = http.calls as f64 / http.elapsed.as_secs_f64();
        println!(
            "issue 13 target: csg serve HTTP ≥ 5000 calls/s with 8 clients: {rate:.0} calls/s {}",
            verdict(rate >= 5000.0)
        );
    }
}
