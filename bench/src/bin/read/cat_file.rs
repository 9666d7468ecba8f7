//! The floor: `git cat-file --batch` on the same blobs, its input fed from a thread.

use super::table::Row;
use anyhow::{Context, Result};
use bench::cpu::proc_cpu;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::time::Instant;

/// Hands `input` to a `git cat-file --batch` stdin from a thread (its output must be read
/// meanwhile, or both sides block on full pipes); answers stdin back.
fn feed(
    mut stdin: ChildStdin,
    input: String,
) -> std::thread::JoinHandle<std::io::Result<ChildStdin>> {
    std::thread::spawn(move || {
        stdin.write_all(input.as_bytes())?;
        stdin.flush()?;
        Ok(stdin)
    })
}

fn read_blobs(stdout: &mut impl BufRead, count: usize) -> Result<u64> {
    let mut total = 0u64;
    let mut header = String::new();
    let mut body = Vec::new();
    for _ in 0..count {
        header.clear();
        stdout.read_line(&mut header)?;
        let size: u64 = header
            .split_whitespace()
            .nth(2)
            .with_context(|| format!("cat-file answered `{}`", header.trim()))?
            .parse()?;
        body.resize(size as usize + 1, 0);
        stdout.read_exact(&mut body)?;
        total += size;
    }
    Ok(total)
}

/// `HEAD:<path>` for every file through one `git cat-file --batch` (the floor: object lookup
/// by path, inflate, write), its own CPU from `/proc` around the measured part.
pub(super) fn cat_file<T>(
    label: &str,
    source: &Path,
    warm: &[T],
    files: &[T],
    path: impl Fn(&T) -> &str,
) -> Result<Row> {
    let mut child = Command::new("git")
        .current_dir(source)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let pid = child.id().to_string();
    let input =
        |list: &[T]| -> String { list.iter().map(|f| format!("HEAD:{}\n", path(f))).collect() };
    let mut stdout = BufReader::new(child.stdout.take().context("stdout")?);
    let writer = feed(child.stdin.take().context("stdin")?, input(warm));
    read_blobs(&mut stdout, warm.len())?;
    let stdin = writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
    let before = proc_cpu(&pid)?;
    let started = Instant::now();
    let writer = feed(stdin, input(files));
    read_blobs(&mut stdout, files.len())?;
    let elapsed = started.elapsed();
    let after = proc_cpu(&pid)?;
    drop(
        writer
            .join()
            .map_err(|_| anyhow::anyhow!("writer thread panicked"))??,
    );
    child.wait()?;
    Ok(Row {
        label: label.to_string(),
        calls: files.len(),
        elapsed,
        latencies: Vec::new(),
        server_us: after.own_us - before.own_us,
        client_us: None,
        children_us: 0.0,
        log_bytes: None,
    })
}
