//! `bench/navigate`: the navigation and history tools of issue 12, each beside the `git`
//! command an agent would run instead, measured in the same run.
//!
//! 1. History (targets: blame and log at least 2× faster than git): a repository made here
//!    with a 2,000-line file edited across 300 commits, beside other files.
//! 2. Symbols, on the registry corpus of `bench/search` (`--mb`, default 110): extraction
//!    throughput of the `symbols` crate on one core (MB/s of the files that have a grammar),
//!    the index build with its symbol table and how much the table adds to the index, then
//!    `definitions` and `references` p50 (`Service`, limit 50) for frequent and unique names
//!    next to `git grep -n -w -F NAME` on the same commit (target: definitions < 10 ms p50).

use anyhow::{Result, bail};
use bench::percentile;
use gitstore::{CommitId, RepoName, RepoPath};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

const LINES: usize = 2_000;
const COMMITS: usize = 300;

/// The value of `--flag N`, or `default`.
fn flag(name: &str, default: u64) -> Result<u64> {
    Ok(std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(default))
}

fn main() -> Result<()> {
    let runs = flag("--runs", 20)? as usize;
    if runs == 0 {
        bail!("usage: bench/navigate [--runs N (at least 1)] [--mb N]");
    }
    let history_ok = history(runs)?;
    let symbols_ok = symbols_bench(flag("--mb", 110)?, runs)?;
    println!(
        "\ntargets: {}",
        if history_ok && symbols_ok {
            "all met"
        } else {
            "MISSED (see above)"
        }
    );
    Ok(())
}

/// Part 1: blame and log against git. Answers whether both are at least 2× faster.
fn history(runs: usize) -> Result<bool> {
    let mut lines: Vec<String> = (0..LINES)
        .map(|n| format!("line {n} of the big file\n"))
        .collect();
    let source = testgit::SourceRepo::with_files(&[("big.txt", lines.concat().as_bytes())]);
    // A deterministic walk of edits: each commit rewrites a few lines and touches another file.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for c in 0..COMMITS {
        for _ in 0..5 {
            let at = (next() % LINES as u64) as usize;
            lines[at] = format!("line {at} edited in commit {c}\n");
        }
        let other = format!("notes {c}\n");
        source.commit(
            &[
                ("big.txt", lines.concat().as_bytes()),
                (&format!("other/{}.md", c % 20), other.as_bytes()),
            ],
            &format!("commit {c}"),
        );
    }
    let store = source.store("bench/navigate", "");
    let name = RepoName::parse("bench/navigate")?;
    let head = CommitId::parse(&source.head()).ok_or_else(|| anyhow::anyhow!("head"))?;
    let big = RepoPath::parse("big.txt")?;

    let (ranges, _) = store.blame(&name, &head, &big, 1, LINES as u64)?;
    if ranges.last().map(|r| r.end_line) != Some(LINES as u64) {
        bail!("blame did not cover the file");
    }
    let mut rows = Vec::new();
    let mut measure =
        |label: &str, ours: &mut dyn FnMut() -> Result<()>, git: &[&str]| -> Result<()> {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                let t = Instant::now();
                ours()?;
                a.push(t.elapsed());
                let t = Instant::now();
                source.git(git);
                b.push(t.elapsed());
            }
            let (ours50, git50) = (percentile(&mut a, 0.5), percentile(&mut b, 0.5));
            rows.push((label.to_owned(), ours50, git50));
            Ok(())
        };
    measure(
        "blame of 2,000 lines",
        &mut || {
            store
                .blame(&name, &head, &big, 1, LINES as u64)
                .map(drop)
                .map_err(Into::into)
        },
        &["blame", "--porcelain", "HEAD", "--", "big.txt"],
    )?;
    measure(
        "log -- big.txt (301)",
        &mut || {
            store
                .log(&name, &head, &big, 0, 1000)
                .map(drop)
                .map_err(Into::into)
        },
        &["log", "--format=%H", "HEAD", "--", "big.txt"],
    )?;
    let other = RepoPath::parse("other/7.md")?;
    measure(
        "log -- other/7.md (15)",
        &mut || {
            store
                .log(&name, &head, &other, 0, 1000)
                .map(drop)
                .map_err(Into::into)
        },
        &["log", "--format=%H", "HEAD", "--", "other/7.md"],
    )?;
    println!("bench/navigate: {COMMITS} commits, a {LINES}-line file; p50 of {runs} runs each");
    println!("{:<26} {:>12} {:>12} {:>8}", "", "csg", "git", "git/csg");
    let mut ok = true;
    for (label, ours, git) in rows {
        let ratio = git.as_secs_f64() / ours.as_secs_f64();
        ok &= ratio >= 2.0;
        println!(
            "{label:<26} {:>10.2}ms {:>10.2}ms {ratio:>7.1}x",
            ours.as_secs_f64() * 1e3,
            git.as_secs_f64() * 1e3
        );
    }
    println!(
        "target: at least 2x faster than git: {}",
        if ok { "ok" } else { "FAIL" }
    );
    Ok(ok)
}

/// Part 2: symbol extraction, the symbol table's size, `definitions` and `references`.
/// Answers whether definitions meet < 10 ms p50.
fn symbols_bench(mb: u64, runs: usize) -> Result<bool> {
    const REPO: &str = "bench/corpus";
    let tmp = tempfile::tempdir()?;
    let tree = tmp.path().join("corpus");
    let corpus = bench::corpus::build_corpus(&tree, mb * 1_000_000)?;
    println!(
        "\nsymbols: corpus of {} files, {:.1} MB from ~/.cargo/registry/src",
        corpus.files.len(),
        corpus.bytes as f64 / 1e6
    );

    // Extraction on one core, per grammar.
    let mut extractor = symbols::Extractor::new();
    let mut per_lang: BTreeMap<&str, (u64, u64, u64, Duration)> = BTreeMap::new();
    let mut names: HashMap<String, u32> = HashMap::new();
    for rel in &corpus.files {
        let Some(grammar) = symbols::Grammar::for_path(rel) else {
            continue;
        };
        let bytes = std::fs::read(tree.join(rel))?;
        let t = Instant::now();
        let found = extractor.extract(grammar, &bytes)?;
        let elapsed = t.elapsed();
        let row = per_lang.entry(grammar.lang()).or_default();
        row.0 += 1;
        row.1 += bytes.len() as u64;
        row.2 += found.len() as u64;
        row.3 += elapsed;
        for symbol in found {
            *names.entry(symbol.name).or_default() += 1;
        }
    }
    println!(
        "{:<12} {:>7} {:>9} {:>9} {:>10}",
        "extraction", "files", "MB", "symbols", "MB/s/core"
    );
    let mut total = (0u64, 0u64, 0u64, Duration::ZERO);
    for (lang, (files, bytes, count, time)) in &per_lang {
        println!(
            "{lang:<12} {files:>7} {:>9.1} {count:>9} {:>10.1}",
            *bytes as f64 / 1e6,
            *bytes as f64 / 1e6 / time.as_secs_f64()
        );
        total = (
            total.0 + files,
            total.1 + bytes,
            total.2 + count,
            total.3 + *time,
        );
    }
    println!(
        "{:<12} {:>7} {:>9.1} {:>9} {:>10.1}",
        "all",
        total.0,
        total.1 as f64 / 1e6,
        total.2,
        total.1 as f64 / 1e6 / total.3.as_secs_f64()
    );

    // The index build over the production path, and what the symbol table adds.
    let (store, head) = bench::corpus::register_corpus(&tmp.path().join("data"), REPO, &tree)?;
    let mirror = store.storage_root().join("mirrors/bench/corpus.git");
    let index_dir = tmp.path().join("data/index");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let service = {
        let _context = runtime.enter();
        service::Service::new(
            store,
            service::ServiceConfig {
                index: service::IndexConfig {
                    result_cache: false,
                    ..service::IndexConfig::default()
                },
                ..service::ServiceConfig::default()
            },
        )
    };
    let t = Instant::now();
    let stats = runtime.block_on(service.index(REPO.to_owned(), |_| {}))?;
    let build = t.elapsed();
    let table = files_named(&index_dir, "symbols.bin")?;
    println!(
        "index build: searchable after {:.1} s, symbol table after {:.1} s more ({:.1} MB/s per core of the corpus, 2 threads)",
        stats.searchable_after.as_secs_f64(),
        (stats.elapsed - stats.searchable_after).as_secs_f64(),
        stats.corpus_bytes as f64
            / 1e6
            / (stats.elapsed - stats.searchable_after).as_secs_f64()
            / 2.0
    );
    println!(
        "  {:.1} s in all for {:.1} MB, {} symbols; index {:.1} MB of which symbols.bin {:.1} MB (+{:.1}% over the rest of the index)",
        build.as_secs_f64(),
        stats.corpus_bytes as f64 / 1e6,
        stats.symbols,
        stats.bytes as f64 / 1e6,
        table as f64 / 1e6,
        table as f64 * 100.0 / (stats.bytes - table).max(1) as f64
    );

    // Names to look up: the most defined ones, and unique ones picked by a stable hash.
    let mut frequent: Vec<(&String, &u32)> = names.iter().collect();
    frequent.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut unique: Vec<&String> = names
        .iter()
        .filter(|(name, n)| **n == 1 && name.len() >= 8 && name.is_ascii())
        .map(|(name, _)| name)
        .collect();
    unique.sort_by_key(|name| {
        name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
    });
    let sets: [(&str, Vec<String>); 2] = [
        (
            "frequent (10 most defined)",
            frequent
                .iter()
                .take(10)
                .map(|(n, _)| (*n).clone())
                .collect(),
        ),
        (
            "unique (20 defined once)",
            unique.iter().take(20).map(|n| (*n).clone()).collect(),
        ),
    ];
    let ctx = service::CallContext::default();
    println!(
        "\n{:<28} {:>14} {:>14} {:>16} {:>9}",
        "p50 per name set", "definitions", "references", "git grep -w -F", "git/defs"
    );
    let mut ok = true;
    for (label, set) in &sets {
        let (mut defs, mut refs, mut grep) = (Vec::new(), Vec::new(), Vec::new());
        for name in set {
            // One untimed call each to warm the page cache and the mapping.
            runtime.block_on(service.definitions(&ctx, definitions_request(name)))?;
            for _ in 0..runs {
                let t = Instant::now();
                let found =
                    runtime.block_on(service.definitions(&ctx, definitions_request(name)))?;
                defs.push(t.elapsed());
                if found.total == 0 {
                    bail!("no definition of {name} found");
                }
                let t = Instant::now();
                runtime.block_on(service.references(
                    &ctx,
                    service::ReferencesRequest {
                        query: definitions_request(name),
                        cursor: None,
                    },
                ))?;
                refs.push(t.elapsed());
                let t = Instant::now();
                // Exit 1 (no match) cannot happen: the name occurs where it is defined.
                bench::corpus::git(&mirror, &["grep", "-n", "-w", "-F", "-e", name, &head])?;
                grep.push(t.elapsed());
            }
        }
        let (d, r, g) = (
            percentile(&mut defs, 0.5),
            percentile(&mut refs, 0.5),
            percentile(&mut grep, 0.5),
        );
        ok &= d < Duration::from_millis(10);
        println!(
            "{label:<28} {:>12.2}ms {:>12.2}ms {:>14.2}ms {:>8.0}x",
            d.as_secs_f64() * 1e3,
            r.as_secs_f64() * 1e3,
            g.as_secs_f64() * 1e3,
            g.as_secs_f64() / d.as_secs_f64()
        );
    }
    println!(
        "target: definitions < 10 ms p50: {}",
        if ok { "ok" } else { "FAIL" }
    );
    Ok(ok)
}

fn definitions_request(name: &str) -> service::SymbolQuery {
    service::SymbolQuery {
        symbol: name.to_owned(),
        limit: Some(50),
        ..service::SymbolQuery::default()
    }
}

/// Total size of the files called `name` under `dir`.
fn files_named(dir: &std::path::Path, name: &str) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            total += files_named(&entry.path(), name)?;
        } else if entry.file_name() == name {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}
