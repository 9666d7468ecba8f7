//! The corpus: `.rs` files of cargo's registry (and a 5 MiB file made of them) committed into
//! a temp repository, and the files each row reads whole.

use super::{BIG_FILE, BIG_FILE_BYTES, CORPUS_BYTES, MAX_FILE_BYTES, MIN_FILE_BYTES};
use anyhow::{Context, Result, bail};
/// A file read whole.
use bench::TextFile as File;
use bench::git;
use std::path::{Path, PathBuf};

/// Copies `.rs` files from cargo's registry sources into `dest` (up to CORPUS_BYTES), adds a
/// 5 MiB file made of those sources for the continuation read, and commits them.
pub(super) fn build_corpus(dest: &Path) -> Result<(usize, u64)> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")?;
    let mut stack = vec![home.join("registry/src")];
    let (mut files, mut bytes) = (0usize, 0u64);
    std::fs::create_dir_all(dest)?;
    let mut sources = Vec::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        entries.sort();
        for path in entries.into_iter().rev() {
            if path.is_symlink() {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                sources.push(path);
            }
        }
    }
    let root = home.join("registry/src");
    let mut big = Vec::with_capacity(BIG_FILE_BYTES as usize + MAX_FILE_BYTES as usize);
    for path in sources {
        if bytes >= CORPUS_BYTES {
            break;
        }
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(&root)?
            .components()
            .skip(1)
            .collect::<PathBuf>();
        let target = dest.join(rel);
        std::fs::create_dir_all(target.parent().context("file has a parent")?)?;
        std::fs::write(target, &text)?;
        if (big.len() as u64) < BIG_FILE_BYTES && std::str::from_utf8(&text).is_ok() {
            big.extend_from_slice(&text);
            if !big.ends_with(b"\n") {
                big.push(b'\n');
            }
        }
        files += 1;
        bytes += text.len() as u64;
    }
    if files == 0 {
        bail!(
            "no Rust sources in {}; build the workspace first so cargo fetches its dependencies",
            root.display()
        );
    }
    if (big.len() as u64) < BIG_FILE_BYTES {
        bail!("the corpus is too small to make a 5 MiB file");
    }
    // Cut at a line end at or after 5 MiB, so the file stays valid UTF-8 and whole lines.
    let cut = big[BIG_FILE_BYTES as usize..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(big.len(), |i| BIG_FILE_BYTES as usize + i + 1);
    big.truncate(cut);
    let target = dest.join(BIG_FILE);
    std::fs::create_dir_all(target.parent().context("file has a parent")?)?;
    std::fs::write(target, &big)?;
    git(dest, &["init", "-q", "-b", "main"])?;
    git(dest, &["add", "-A"])?;
    git(dest, &["commit", "-q", "-m", "corpus"])?;
    git(dest, &["gc", "-q"])?;
    Ok((files, bytes))
}

/// Text files of MIN_FILE_BYTES to MAX_FILE_BYTES from the corpus's head tree (regular files,
/// no NUL, valid UTF-8), in a deterministic shuffle: the first `warmup` for the warm-up, the
/// next `reads` measured (cycling if the corpus has fewer).
pub(super) fn pick_files(
    source: &Path,
    warmup: usize,
    reads: usize,
) -> Result<(Vec<File>, Vec<File>)> {
    let candidates = bench::text_files(source, MIN_FILE_BYTES..=MAX_FILE_BYTES, |path| {
        path != BIG_FILE
    })?;
    if candidates.is_empty() {
        bail!("no text file of {MIN_FILE_BYTES} to {MAX_FILE_BYTES} bytes in the corpus");
    }
    let take = |from: usize, count: usize| -> Vec<File> {
        (0..count)
            .map(|k| candidates[(from + k) % candidates.len()].clone())
            .collect()
    };
    // The warm-up takes files from the end, so a measured read never hits a blob the warm-up
    // just read (unless the corpus is smaller than warm-up + reads).
    let warm = take(candidates.len() - warmup.min(candidates.len()), warmup);
    Ok((warm, take(0, reads)))
}
