//! Measures build speed, index size and query latency over a directory tree (not a test):
//! `cargo run --release -p search --example measure -- <dir> [max_mb] [query...]`.
//! Blob ids are `path:size` here (the tree has no Git object ids), so nothing is reused.
//! Per query: the first run, the median of cold first pages (the result cache cleared before
//! each), of repeats (answered from the result cache) and of cold second pages; `+` after the
//! hit count means the total is a lower bound ("at least N", S-10).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use search::{IndexConfig, Indexes, SearchRequest, Source, SourceEntry};

struct DirSource {
    root: PathBuf,
    entries: Vec<SourceEntry>,
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<SourceEntry>, budget: &mut u64) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = read.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if *budget == 0 {
            return;
        }
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && entry.file_name() != ".git" {
            walk(root, &path, out, budget);
        } else if kind.is_file() {
            let size = entry.metadata().map_or(0, |m| m.len());
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            *budget = budget.saturating_sub(size);
            out.push(SourceEntry {
                blob_id: format!("{rel}:{size}"),
                path: rel,
                size,
            });
        }
    }
}

impl Source for DirSource {
    fn entries(&self) -> Result<Vec<SourceEntry>, String> {
        Ok(self.entries.clone())
    }
    fn read(&self, entry: &SourceEntry) -> Result<Vec<u8>, String> {
        std::fs::read(self.root.join(&entry.path)).map_err(|e| e.to_string())
    }
}

/// Every file under `dir`.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = PathBuf::from(args.first().cloned().unwrap_or_else(|| ".".into()));
    let max_mb: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100);
    let mut entries = Vec::new();
    let mut budget = max_mb << 20;
    walk(&root, &root, &mut entries, &mut budget);
    let source = DirSource { root, entries };
    let tmp = std::env::temp_dir().join(format!("csg-search-measure-{}", std::process::id()));
    let indexes = Indexes::open(tmp.clone(), IndexConfig::default()).expect("open");
    let stats = indexes
        .build("bench/corpus", "0", &source, &mut |_| {})
        .expect("build");
    let mb = stats.corpus_bytes as f64 / 1e6;
    println!(
        "corpus {:.1} MB in {} files ({} path-only); build {:.2} s = {:.1} MB/s; on disk {:.1} MB = {:.2}x corpus (text {:.1} MB)",
        mb,
        stats.documents,
        stats.path_only,
        stats.elapsed.as_secs_f64(),
        mb / stats.elapsed.as_secs_f64(),
        stats.bytes as f64 / 1e6,
        stats.bytes as f64 / stats.corpus_bytes as f64,
        stats.content_bytes as f64 / 1e6,
    );
    // The size of each file of the generation (where the index's bytes go).
    let mut files: Vec<String> = Vec::new();
    for entry in walk_files(&tmp) {
        if let Ok(meta) = std::fs::metadata(&entry) {
            let name = entry.file_name().map(|n| n.to_string_lossy().into_owned());
            files.push(format!(
                "{} {:.1} MB",
                name.unwrap_or_default(),
                meta.len() as f64 / 1e6
            ));
        }
    }
    files.sort();
    println!("files: {}", files.join(", "));
    let default_queries = [
        "l:ZYXWV_never_there",
        "l:fn main",
        "l:unsafe impl Send",
        "l:return",
        "r:fn\\s+\\w+_mut\\(",
        "r:\\w+\\s*=\\s*\\d{5}",
        "r:[A-Z]{20}",
        "r:\\b[a-z]+_[0-9]{3}\\b",
        "i:hashmap",
    ];
    let queries: Vec<String> = if args.len() > 2 {
        args[2..].to_vec()
    } else {
        default_queries.iter().map(|s| s.to_string()).collect()
    };
    for q in queries {
        let (kind, text) = q.split_at(2);
        let request = SearchRequest {
            query: text.to_owned(),
            repos: vec!["bench/corpus".into()],
            regex: kind == "r:",
            case_sensitive: kind != "i:",
            limit: 50,
            ..SearchRequest::default()
        };
        // The first run verifies; cold runs clear the result cache first; repeats are
        // answered from it.
        let t = Instant::now();
        let cold = indexes.search(&request).expect("search");
        let first_time = t.elapsed();
        let mut colds: Vec<Duration> = Vec::new();
        for _ in 0..11 {
            indexes.clear_result_cache();
            let t = Instant::now();
            indexes.search(&request).expect("search");
            colds.push(t.elapsed());
        }
        colds.sort();
        let mut times: Vec<Duration> = Vec::new();
        let mut last = None;
        for _ in 0..11 {
            let t = Instant::now();
            last = Some(indexes.search(&request).expect("search"));
            times.push(t.elapsed());
        }
        times.sort();
        let last = last.expect("ran");
        // Page 2 (the cursor of page 1), when there is one.
        let mut page2: Vec<Duration> = Vec::new();
        let mut page2_verified = 0;
        if let Some(cursor) = &last.next_cursor {
            let mut next = request.clone();
            next.cursor = Some(cursor.clone());
            for _ in 0..11 {
                indexes.clear_result_cache();
                let t = Instant::now();
                let answer = indexes.search(&next).expect("page 2");
                page2.push(t.elapsed());
                page2_verified = answer.stats.files_verified;
            }
            page2.sort();
        }
        let page2 = page2.get(page2.len() / 2).map_or("-".to_owned(), |d| {
            format!("{:.2} ms", d.as_secs_f64() * 1e3)
        });
        println!(
            "{q:22} first {:8.2} ms  cold {:6.2} ms  repeat {:6.2} ms  hits {:7}{}  candidates {:5}  verified {:5}  cold page 2 {page2:>8} (verified {page2_verified})",
            first_time.as_secs_f64() * 1e3,
            colds[colds.len() / 2].as_secs_f64() * 1e3,
            times[times.len() / 2].as_secs_f64() * 1e3,
            cold.stats.total_hits,
            if cold.stats.truncated { "+" } else { " " },
            cold.stats.candidate_files,
            cold.stats.files_verified,
        );
    }
    drop(indexes);
    let _ = std::fs::remove_dir_all(tmp);
}
