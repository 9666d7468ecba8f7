//! The head of the source: the text files the clients read, and identifiers common enough to
//! search for.

use super::MAX_FILE_BYTES;
use anyhow::{Context, Result, bail};
use bench::head_blobs;
use std::collections::{HashMap, HashSet};
use std::io::{BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// A text file of the head the clients read.
pub(super) struct SourceFile {
    pub(super) path: String,
    pub(super) lines: u64,
}

/// What the head of the clone holds: its text files and a few common identifiers.
pub(super) struct Corpus {
    pub(super) blobs: usize,
    pub(super) bytes: u64,
    pub(super) files: Vec<SourceFile>,
    pub(super) identifiers: Vec<String>,
}

fn line_count(text: &[u8]) -> u64 {
    let newlines = text.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(!text.is_empty() && !text.ends_with(b"\n"))
}

/// Lists the head's blobs (`ls-tree -r -l`), reads those of 1 byte to 1 MiB through one
/// `git cat-file --batch` and keeps the text ones (UTF-8, no NUL), with their line counts;
/// counts identifiers over a sample of them.
pub(super) fn scan_head(dir: &Path) -> Result<Corpus> {
    let listing = head_blobs(dir)?;
    let (blobs, bytes) = (listing.len(), listing.iter().map(|b| b.size).sum::<u64>());
    let candidates: Vec<(String, String)> = listing
        .into_iter()
        .filter(|b| {
            (b.mode == "100644" || b.mode == "100755") && (1..=MAX_FILE_BYTES).contains(&b.size)
        })
        .map(|b| (b.id, b.path))
        .collect();
    let mut child = Command::new("git")
        .current_dir(dir)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().context("cat-file stdin")?;
    let input: String = candidates.iter().map(|(id, _)| format!("{id}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut stdout = BufReader::new(child.stdout.take().context("cat-file stdout")?);
    let mut files = Vec::new();
    let mut documents: Vec<HashSet<String>> = Vec::new();
    let sample_every = (candidates.len() / 600).max(1);
    let (mut header, mut body) = (String::new(), Vec::new());
    for (index, (_, path)) in candidates.iter().enumerate() {
        bench::read_batch_object(&mut stdout, &mut header, &mut body)?;
        if body.contains(&0) {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&body) else {
            continue;
        };
        files.push(SourceFile {
            path: path.clone(),
            lines: line_count(&body),
        });
        if index % sample_every == 0 {
            documents.push(identifiers_of(text));
        }
    }
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("the cat-file writer panicked"))??;
    child.wait()?;
    if files.is_empty() {
        bail!("the head of {} has no text file", dir.display());
    }
    Ok(Corpus {
        blobs,
        bytes,
        files,
        identifiers: common_identifiers(&documents),
    })
}

/// The code-like identifiers of 8 to 30 characters of one text.
fn identifiers_of(text: &str) -> HashSet<String> {
    // Code-like: camelCase/PascalCase or snake_case, not a plain word of prose.
    let code_like = |w: &str| {
        w.contains('_')
            || w.as_bytes()
                .windows(2)
                .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase())
    };
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| (8..=30).contains(&w.len()))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic()))
        .filter(|w| code_like(w))
        .map(str::to_string)
        .collect()
}

/// Eight identifiers that occur in 2-8 % of the sampled files (common, but not every file's
/// boilerplate), the most frequent first; the most frequent ones when none is in that band.
fn common_identifiers(documents: &[HashSet<String>]) -> Vec<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for document in documents {
        for word in document {
            *counts.entry(word).or_default() += 1;
        }
    }
    let mut ranked: Vec<(&str, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let n = documents.len().max(1);
    let band: Vec<String> = ranked
        .iter()
        .filter(|(_, c)| *c * 50 >= n && *c * 100 <= n * 8 && *c >= 2)
        .take(8)
        .map(|(w, _)| w.to_string())
        .collect();
    if band.is_empty() {
        ranked.iter().take(8).map(|(w, _)| w.to_string()).collect()
    } else {
        band
    }
}
