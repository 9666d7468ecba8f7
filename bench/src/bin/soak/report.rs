//! The report at the end: counts, failures, latency percentiles, memory, and the PASS/MISS
//! lines.

use super::calls::{Record, Shared, cut};
use super::churn::Churn;
use super::memory::Memory;
use super::{EXAMPLES, Options, REPO, RSS_EVERY, SLOW, TOOLS, WARMUP};
use std::time::Duration;

/// What the report needs beside the records.
pub(super) struct Facts {
    pub(super) ran: Duration,
    pub(super) ready_after: Duration,
    /// CPU seconds of the server and of this benchmark (the clients) during the load.
    pub(super) cpu: Option<(f64, f64)>,
    pub(super) interrupted: bool,
    pub(super) server_gone: bool,
    pub(super) unfinished: usize,
    pub(super) rss: Vec<Memory>,
    pub(super) peak_kib: Option<u64>,
    pub(super) status: String,
    pub(super) stopped: String,
    pub(super) server_log: String,
    pub(super) blobs: usize,
    pub(super) bytes: u64,
    /// The given repository's head, and whether its history was left out (missing objects).
    pub(super) source_head: String,
    pub(super) flattened: bool,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub(super) fn report(
    options: &Options,
    shared: &Shared,
    record: &mut Record,
    churn: &Churn,
    facts: Facts,
) -> bool {
    println!();
    println!(
        "soak: {:.1} min{} with {} clients over Streamable HTTP (?plugins=auto); {REPO} = {} of {} at {} \
         + the plugin commit {} ({} blobs, {:.1} MiB at the head, {} text files read), ready after {:.1} s; server {}",
        facts.ran.as_secs_f64() / 60.0,
        if facts.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        options.clients,
        if facts.flattened {
            "the head's tree (history left out)"
        } else {
            "a clone"
        },
        options.repo.display(),
        &facts.source_head[..12],
        &shared.head[..12],
        facts.blobs,
        facts.bytes as f64 / 1048576.0,
        shared.files.len(),
        facts.ready_after.as_secs_f64(),
        options.csg.display()
    );
    println!();
    println!(
        "{:<14} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "tool", "calls", "failed", "p50 ms", "p90 ms", "p99 ms", "max ms", ">2 s"
    );
    let mut all: Vec<Duration> = Vec::new();
    let row = |label: &str, times: &mut Vec<Duration>, failed: u64| {
        if times.is_empty() {
            println!("{label:<14} {:>9} {failed:>8}", 0);
            return;
        }
        let slow = times.iter().filter(|t| **t > SLOW).count();
        println!(
            "{label:<14} {:>9} {failed:>8} {:>9.2} {:>9.2} {:>9.2} {:>9.1} {slow:>6}",
            times.len(),
            ms(bench::percentile(times, 0.5)),
            ms(bench::percentile(times, 0.9)),
            ms(bench::percentile(times, 0.99)),
            ms(*times.iter().max().expect("not empty")),
        );
    };
    for (tool, name) in TOOLS.iter().enumerate() {
        all.extend_from_slice(&record.latencies[tool]);
        row(name, &mut record.latencies[tool], record.failed[tool]);
    }
    let total_failed: u64 = record.failed.iter().sum();
    row("all", &mut all, total_failed);
    let total = all.len();
    let seconds = facts.ran.as_secs_f64().max(0.001);
    println!(
        "{total} calls in {seconds:.1} s: {:.0} calls/s{}",
        total as f64 / seconds,
        match facts.cpu {
            Some((server, client)) => format!(
                "; CPU: server {server:.0} s ({:.2} cores), this benchmark's clients {client:.0} s ({:.2} cores), of {} cores",
                server / seconds,
                client / seconds,
                std::thread::available_parallelism().map_or(0, |n| n.get())
            ),
            None => String::new(),
        }
    );

    if !record.errors.is_empty() {
        println!();
        println!("failures by tool and error (count, first call's arguments):");
        let mut errors: Vec<_> = record.errors.iter().collect();
        errors.sort_by_key(|e| std::cmp::Reverse(e.1.0));
        for ((tool, error), (count, example)) in errors.iter().take(4 * EXAMPLES) {
            println!("  {:<12} {count:>7}  {error}", TOOLS[*tool]);
            println!("  {:<12} {:>7}  e.g. {example}", "", "");
        }
        if errors.len() > 4 * EXAMPLES {
            println!("  … and {} more kinds", errors.len() - 4 * EXAMPLES);
        }
    }
    record.slow.sort_by_key(|s| std::cmp::Reverse(s.0));
    println!();
    println!("calls over 2 s: {}", record.slow.len());
    for (elapsed, at, tool, args) in record.slow.iter().take(EXAMPLES) {
        println!(
            "  {:>9.1} ms at {:>6.1} s {:<12} {args}",
            ms(*elapsed),
            at.as_secs_f64(),
            TOOLS[*tool]
        );
    }
    println!();
    let diagnosed: u64 = record.diagnostics.values().sum();
    println!(
        "plugin diagnostics in read answers: {diagnosed}{}",
        if diagnosed == 0 {
            ""
        } else {
            " (by code and plugin):"
        }
    );
    for (key, count) in &record.diagnostics {
        println!("  {count:>7}  {key}");
    }
    println!(
        "reads with the server plugin's OperatorNotes (README files): {}",
        record.notes
    );

    println!();
    let baseline_at = if facts.ran >= WARMUP * 2 {
        WARMUP
    } else {
        facts.ran / 2
    };
    let baseline = facts.rss.iter().find(|m| m.at >= baseline_at);
    let max = facts.rss.iter().map(|m| m.rss).max().unwrap_or(0);
    match (baseline, facts.rss.last()) {
        (Some(base), Some(last)) => {
            println!(
                "server RSS: {:.0} MiB after warm-up ({:.0} s) -> {:.0} MiB at the end ({:.0} s), {:+.0} MiB; \
                 max sampled {:.0} MiB, peak (VmHWM) {}",
                mib(base.rss),
                base.at.as_secs_f64(),
                mib(last.rss),
                last.at.as_secs_f64(),
                mib(last.rss) - mib(base.rss),
                mib(max),
                facts
                    .peak_kib
                    .map_or("unknown".into(), |k| format!("{:.0} MiB", mib(k))),
            );
            println!(
                "  of it anonymous (heap) {:.0} -> {:.0} MiB ({:+.0}), file-backed (mapped indexes, binary) {:.0} -> {:.0} MiB ({:+.0})",
                mib(base.anon),
                mib(last.anon),
                mib(last.anon) - mib(base.anon),
                mib(base.file),
                mib(last.file),
                mib(last.file) - mib(base.file),
            );
        }
        _ => println!("server RSS: too few samples ({})", facts.rss.len()),
    }
    let samples: Vec<String> = facts
        .rss
        .iter()
        .map(|m| {
            format!(
                "{:.0}s:{:.0}/{:.0}",
                m.at.as_secs_f64(),
                mib(m.rss),
                mib(m.anon)
            )
        })
        .collect();
    println!(
        "  samples every {} s (s:RSS/anonymous MiB): {}",
        RSS_EVERY.as_secs(),
        samples.join(" ")
    );

    println!();
    let mut churn_failed = 0;
    for action in [
        "registration",
        "removal",
        "reload (http)",
        "reload (mcp)",
        "churn task",
    ] {
        let mut times: Vec<Duration> = Vec::new();
        let mut errors: Vec<&str> = Vec::new();
        for (name, elapsed, error) in &churn.actions {
            if *name == action {
                times.push(*elapsed);
                if let Some(error) = error {
                    errors.push(error);
                }
            }
        }
        churn_failed += errors.len();
        if times.is_empty() {
            continue;
        }
        println!(
            "{action:<14} {:>4} done, {:>3} failed; p50 {:>8.1} ms, max {:>8.1} ms",
            times.len(),
            errors.len(),
            ms(bench::percentile(&mut times, 0.5)),
            ms(*times.iter().max().expect("not empty"))
        );
        for error in errors.iter().take(EXAMPLES) {
            println!("  {error}");
        }
    }
    let status: String = facts
        .status
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    println!("server plugins at the end: {}", cut(&status, 400));
    println!("csg serve {}", facts.stopped);
    let warnings: Vec<&str> = facts
        .server_log
        .lines()
        .filter(|l| l.contains(" ERROR ") || l.contains(" WARN "))
        .collect();
    println!(
        "server log: {} lines, {} WARN/ERROR",
        facts.server_log.lines().count(),
        warnings.len()
    );
    for line in warnings.iter().take(EXAMPLES) {
        println!("  {}", cut(line, 300));
    }

    println!();
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    let no_failures = total_failed == 0 && facts.unfinished == 0 && total > 0;
    println!(
        "{}  no failed call: {total_failed} of {total} failed{}",
        verdict(no_failures),
        if facts.unfinished > 0 {
            format!(", {} clients did not finish", facts.unfinished)
        } else {
            String::new()
        }
    );
    let max_call = all.iter().max().copied().unwrap_or_default();
    let no_slow = record.slow.is_empty();
    println!(
        "{}  no call over 2 s: {} over, the slowest {:.1} ms",
        verdict(no_slow),
        record.slow.len(),
        ms(max_call)
    );
    let churn_ok = churn_failed == 0 && !churn.actions.is_empty();
    println!(
        "{}  registrations, removals and reloads: {} done, {churn_failed} failed",
        verdict(churn_ok),
        churn.actions.len()
    );
    let alive = !facts.server_gone;
    println!("{}  the server stayed up for the whole run", verdict(alive));
    let whole = !facts.interrupted;
    println!(
        "{}  the planned {} min ran to the end{}",
        verdict(whole),
        options.minutes,
        if whole {
            ""
        } else {
            " (interrupted by Ctrl-C)"
        }
    );
    no_failures && no_slow && churn_ok && alive && whole
}
