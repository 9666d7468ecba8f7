//! `bench/oauth`: what validating an identity provider's access token costs a `read` over
//! HTTP (issue 44's proof point: at most 20 µs of server CPU per call more than the same
//! call with a static API token). One `csg serve` (the release binary as a child) with
//! `--oauth-issuer` pointing at a loopback identity provider in this process
//! (`oauth::testing::TestProvider`: RFC 8414 metadata and a JWKS), one small file, and
//! `GET /sourcegraph/api/read` of it on a keep-alive connection, sequentially, as
//!
//! - an anonymous caller (the floor: no token at all),
//! - a static API token (`csg token create`: looked up by its SHA-256),
//! - a JWT access token signed ES256 and one signed EdDSA (Ed25519) by the provider, each
//!   validated on every call (signature, `iss`, `aud`, `exp`, `nbf`; the keys are cached),
//!   then mapped to its user.
//!
//! RS256, what most providers sign with, is not measured: the test provider publishes only
//! its ES256 and Ed25519 keys.
//!
//! Each round runs every mode once for `--calls` calls, interleaved (each round starts one
//! mode later), after a warm-up; server CPU is the server process's CPU-time clock (ns)
//! before and after, with utime+stime of `/proc/<pid>/stat` in clock ticks beside it. A mode
//! shows its median round; the differences are the medians of the per-round differences
//! (the two modes of one round ran seconds apart, so drift hits both). Last, the same JWTs
//! validated in this process by `oauth::Validator` alone: how much of the difference is the
//! signature and claims, and how much the rest of the path (the user lookup).

mod client;
mod server;
mod validate;

use anyhow::{Context, Result, bail};
use bench::cpu::tick_us;
use client::Caller;
use oauth::testing::{Signer, TestProvider};
use server::{Launch, Server, free_port, static_token};
use std::path::PathBuf;
use std::time::Duration;

const REPO: &str = "bench/oauth";
const FILE: &str = "src/lib.rs";
/// Issue 44's target: what a JWT may add per call over a static token, µs of server CPU.
const TARGET_US: f64 = 20.0;

const USAGE: &str =
    "usage: bench/oauth [--calls N] [--rounds N] [--warmup N] [--csg PATH] [--logs DIR]
--calls N: calls per mode and round (default 5000); --rounds N (default 5); --warmup N: calls
per mode before the first round (default 1000); --csg: the csg binary (default: beside this
one); --logs DIR keeps the server's log.";

struct Options {
    calls: usize,
    rounds: usize,
    warmup: usize,
    csg: PathBuf,
    logs: Option<PathBuf>,
}

impl Options {
    fn parse() -> Result<Self> {
        let mut options = Options {
            calls: 5000,
            rounds: 5,
            warmup: 1000,
            csg: std::env::current_exe()?
                .parent()
                .context("the bench binary has a directory")?
                .join("csg"),
            logs: None,
        };
        for (flag, value) in bench::flag_pairs(USAGE)? {
            let number = || -> Result<usize> { bench::flag_number(&flag, &value, USAGE) };
            match flag.as_str() {
                "--calls" => options.calls = number()?.max(1),
                "--rounds" => options.rounds = number()?.max(1),
                "--warmup" => options.warmup = number()?,
                "--csg" => options.csg = PathBuf::from(&value),
                "--logs" => options.logs = Some(PathBuf::from(&value)),
                _ => bail!("unknown flag `{flag}`\n{USAGE}"),
            }
        }
        Ok(options)
    }
}

/// How a mode's calls present themselves.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Anonymous,
    Static,
    Jwt(Signer),
}

const MODES: [Mode; 4] = [
    Mode::Anonymous,
    Mode::Static,
    Mode::Jwt(Signer::Es256),
    Mode::Jwt(Signer::EdDsa),
];

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Anonymous => "anonymous",
            Mode::Static => "static API token",
            Mode::Jwt(Signer::Es256) => "JWT ES256",
            Mode::Jwt(_) => "JWT EdDSA",
        }
    }
}

/// One mode's round.
struct Round {
    /// Server CPU per call from its CPU-time clock, µs.
    clock_us: f64,
    /// The same from `/proc` ticks, µs.
    ticks_us: f64,
    latencies: Vec<Duration>,
}

/// A small Rust file: the read itself is cheap, so the caller's authentication shows.
fn file_text() -> String {
    let mut text = String::from("//! A small file the benchmark reads.\n\n");
    for n in 0..20 {
        text.push_str(&format!(
            "/// Item {n}.\npub fn item_{n}() -> u32 {{\n    {n}\n}}\n"
        ));
    }
    text
}

fn main() -> Result<()> {
    let options = Options::parse()?;
    if !options.csg.is_file() {
        bail!(
            "no csg binary at {}: run `cargo build --release -p csg -p bench --bin csg --bin oauth` \
             (bench/oauth does) or pass --csg",
            options.csg.display()
        );
    }
    // One thread: the `csg serve` child is spawned from it and dies with it (PDEATHSIG), and
    // the client's calls are sequential anyway.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(&options))
}

async fn run(options: &Options) -> Result<()> {
    let text = file_text();
    let source = testgit::SourceRepo::with_files(&[(FILE, text.as_bytes())]);
    let data = source.data_dir();
    let api_token = static_token(&options.csg, &data)?;
    let provider = TestProvider::start().await?;
    let port = free_port()?;
    let log_dir = options
        .logs
        .clone()
        .unwrap_or_else(|| source.tmp().join("logs"));
    std::fs::create_dir_all(&log_dir)?;
    let log = log_dir.join("serve.log");
    eprintln!(
        "starting csg serve on 127.0.0.1:{port} (log {}) …",
        log.display()
    );
    let server = Server::start(&Launch {
        csg: &options.csg,
        data: &data,
        port,
        issuer: provider.issuer(),
        repo: &format!("{REPO}={}", source.source()),
        log,
    })
    .await?;
    let result = measure(options, &server, &provider, &api_token, &text).await;
    server.stop().await?;
    result
}

/// An access token of `provider` for `audience`, valid for an hour (the run's length at most).
fn jwt(provider: &TestProvider, signer: Signer, audience: &str) -> String {
    let mut claims = provider.claims(audience, "alice", oauth::SCOPE_READ, &["eng"]);
    claims["exp"] = (oauth::testing::now() + 3600).into();
    provider.sign(signer, &claims)
}

async fn measure(
    options: &Options,
    server: &Server,
    provider: &TestProvider,
    api_token: &str,
    text: &str,
) -> Result<()> {
    let authority = &server.authority;
    let audience = format!("http://{authority}/sourcegraph/mcp");
    // Tokens are checked at all: one for another resource and a made-up API token are
    // refused (two wrong tokens: far below the limiter's ten).
    for (what, token) in [
        (
            "a JWT for another audience",
            jwt(
                provider,
                Signer::Es256,
                &format!("http://{authority}/other"),
            ),
        ),
        (
            "a made-up API token",
            format!("csg_{}", "0123456789abcdef".repeat(4)),
        ),
    ] {
        let mut caller = Caller::connect(authority, REPO, FILE, Some(&token)).await?;
        let (status, body) = caller.call().await?;
        if status != 401 {
            bail!(
                "{what} answered HTTP {status}, not 401: {}",
                String::from_utf8_lossy(&body)
            );
        }
    }
    let tokens: Vec<Option<String>> = MODES
        .iter()
        .map(|mode| match mode {
            Mode::Anonymous => None,
            Mode::Static => Some(api_token.to_owned()),
            Mode::Jwt(signer) => Some(jwt(provider, *signer, &audience)),
        })
        .collect();
    let mut callers = Vec::new();
    for (mode, token) in MODES.iter().zip(&tokens) {
        let mut caller = Caller::connect(authority, REPO, FILE, token.as_deref()).await?;
        caller
            .check(text, Duration::from_secs(30))
            .await
            .with_context(|| format!("the {} read", mode.label()))?;
        caller.calls(options.warmup).await?;
        callers.push(caller);
    }

    let mut rounds: Vec<Vec<Round>> = MODES.iter().map(|_| Vec::new()).collect();
    for round in 0..options.rounds {
        for i in (0..MODES.len()).map(|i| (i + round) % MODES.len()) {
            let caller = &mut callers[i];
            caller.reconnect().await?;
            let before = server.cpu()?;
            let latencies = caller.calls(options.calls).await?;
            let after = server.cpu()?;
            let calls = options.calls as f64;
            rounds[i].push(Round {
                clock_us: (after.clock_us - before.clock_us) / calls,
                ticks_us: (after.ticks - before.ticks) as f64 * tick_us() / calls,
                latencies,
            });
        }
    }
    let jwts: Vec<&str> = MODES
        .iter()
        .zip(&tokens)
        .filter(|(mode, _)| matches!(mode, Mode::Jwt(_)))
        .filter_map(|(_, token)| token.as_deref())
        .collect();
    let alone = validate::validation_us(provider.issuer(), &audience, &jwts, options.calls).await?;
    report(options, text.len(), &rounds, &alone);
    Ok(())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// `alone`: CPU µs per in-process validation of each JWT mode, in [`MODES`] order.
fn report(options: &Options, bytes: usize, rounds: &[Vec<Round>], alone: &[f64]) {
    println!();
    println!(
        "bench/oauth: GET /sourcegraph/api/read of one {bytes}-byte file, one keep-alive \
         connection, sequential calls; {} rounds × {} calls per mode, interleaved (each round \
         starts one mode later), after {} warm-up calls per mode",
        options.rounds, options.calls, options.warmup
    );
    println!(
        "server CPU = the csg serve process's CPU-time clock (ns resolution), and utime+stime \
         of /proc/<pid>/stat in ticks of {:.0} µs; each mode's median round; latency = the \
         client's wall time per call over every round",
        tick_us()
    );
    println!(
        "{:<18} {:>7} {:>13} {:>15} {:>9} {:>9}",
        "mode", "calls", "CPU µs/call", "ticks µs/call", "p50 µs", "p99 µs"
    );
    let mut cpu = Vec::new();
    for (mode, rounds) in MODES.iter().zip(rounds) {
        let clock = median(rounds.iter().map(|r| r.clock_us).collect());
        let ticks = median(rounds.iter().map(|r| r.ticks_us).collect());
        let mut latencies: Vec<Duration> =
            rounds.iter().flat_map(|r| r.latencies.clone()).collect();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let p50 = us(bench::percentile(&mut latencies, 0.5));
        let p99 = us(bench::percentile(&mut latencies, 0.99));
        println!(
            "{:<18} {:>7} {clock:>13.1} {ticks:>15.1} {p50:>9.0} {p99:>9.0}",
            mode.label(),
            latencies.len()
        );
        cpu.push(rounds.iter().map(|r| r.clock_us).collect::<Vec<_>>());
    }
    println!("server CPU µs/call by round:");
    for (mode, figures) in MODES.iter().zip(&cpu) {
        let figures: Vec<String> = figures.iter().map(|f| format!("{f:.1}")).collect();
        println!("  {:<18} {}", mode.label(), figures.join("  "));
    }
    let index = |mode: Mode| MODES.iter().position(|m| *m == mode).unwrap_or(0);
    // The median of the per-round differences of two modes.
    let difference = |a: Mode, b: Mode| {
        median(
            cpu[index(a)]
                .iter()
                .zip(&cpu[index(b)])
                .map(|(a, b)| a - b)
                .collect(),
        )
    };
    println!("differences of server CPU per call (median of the rounds' differences):");
    for (signer, alone) in [Signer::Es256, Signer::EdDsa].into_iter().zip(alone) {
        let jwt = Mode::Jwt(signer);
        let added = difference(jwt, Mode::Static);
        println!(
            "  {} − static API token: {added:+.1} µs  (target ≤ {TARGET_US:.0} µs: {}); \
             oauth::Validator::validate alone, in process: {alone:.1} µs",
            jwt.label(),
            if added <= TARGET_US { "PASS" } else { "FAIL" }
        );
    }
    println!(
        "  static API token − anonymous: {:+.1} µs",
        difference(Mode::Static, Mode::Anonymous)
    );
}
