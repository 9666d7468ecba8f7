//! Incremental updates of a repository's history index, and the published snapshot searches
//! read (see the module doc of `history`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::segment::{Segment, SegmentWriter, decode_sha};
use super::{HistoryError, HistoryIndexes, HistoryRecord, HistorySource};

/// Segments kept before an update merges them all into one.
pub const MAX_SEGMENTS: usize = 8;
/// Format of the manifest and segments; another one is rebuilt from scratch.
const FORMAT: u32 = 2;
const MANIFEST: &str = "manifest.json";
/// Commits read from the source per batch (spread over threads).
const BATCH: usize = 256;

/// What an update did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryBuildStats {
    /// The tip indexed.
    pub tip: String,
    /// Commits in the tip's (depth-bounded) history.
    pub commits: u64,
    /// Commits read from the source (not indexed before).
    pub added: u64,
    /// Diff lines of the added commits.
    pub lines: u64,
    /// The index was at this tip already: nothing done.
    pub skipped_same: bool,
    /// Segments were merged into one.
    pub merged: bool,
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Manifest {
    format: u32,
    repo: String,
    pub(crate) tip: String,
    depth: Option<usize>,
    /// Segment directory names, oldest first.
    segments: Vec<String>,
    /// The order file of `tip`.
    order: String,
    /// Next number for a new segment or order file.
    next: u64,
}

impl Manifest {
    pub(crate) fn read(dir: &Path) -> Result<Option<Manifest>, HistoryError> {
        let text = match std::fs::read(dir.join(MANIFEST)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(HistoryError::io("reading the history manifest", e)),
        };
        let manifest: Manifest =
            serde_json::from_slice(&text).map_err(|_| HistoryError::Corrupt {
                repo: String::new(),
                detail: "unreadable manifest".into(),
            })?;
        Ok((manifest.format == FORMAT).then_some(manifest))
    }

    fn write(&self, dir: &Path) -> Result<(), HistoryError> {
        let tmp = dir.join(format!("{MANIFEST}.tmp-{}", std::process::id()));
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| HistoryError::Corrupt {
            repo: self.repo.clone(),
            detail: e.to_string(),
        })?;
        write_synced(&tmp, &bytes)?;
        std::fs::rename(&tmp, dir.join(MANIFEST))
            .map_err(|e| HistoryError::io("publishing the history manifest", e))
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), HistoryError> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)
        .map_err(|e| HistoryError::io("writing the history index", e))?;
    file.write_all(bytes)
        .map_err(|e| HistoryError::io("writing the history index", e))?;
    file.sync_all()
        .map_err(|e| HistoryError::io("writing the history index", e))
}

/// A published index: its segments and the tip's order.
pub(crate) struct Snapshot {
    pub(crate) tip: String,
    pub(crate) segments: Vec<Segment>,
    /// (segment, number in it) per commit of the tip's history, newest first.
    pub(crate) order: Vec<(u32, u32)>,
}

impl Snapshot {
    /// The published index of the history directory `dir`, if any. A file deleted by an
    /// update between reading the manifest and opening it: read again.
    pub(crate) fn load(dir: &Path, repo: &str) -> Result<Option<Snapshot>, HistoryError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::load_once(dir, repo) {
                Err(HistoryError::Index(crate::SearchError::Io { .. }))
                | Err(HistoryError::Io { .. })
                    if attempt < 4 =>
                {
                    continue;
                }
                other => return other,
            }
        }
    }

    fn load_once(dir: &Path, repo: &str) -> Result<Option<Snapshot>, HistoryError> {
        let Some(manifest) = Manifest::read(dir)? else {
            return Ok(None);
        };
        if manifest.repo != repo {
            return Ok(None);
        }
        let segments = manifest
            .segments
            .iter()
            .map(|name| Segment::open(&dir.join(name), repo))
            .collect::<Result<Vec<_>, _>>()?;
        let order = std::fs::read(dir.join(&manifest.order))
            .map_err(|e| HistoryError::io("reading the history order", e))?;
        let order = decode_order(&order, &segments).ok_or_else(|| HistoryError::Corrupt {
            repo: repo.to_owned(),
            detail: "the order file does not fit the segments".into(),
        })?;
        Ok(Some(Snapshot {
            tip: manifest.tip,
            segments,
            order,
        }))
    }

    /// Every indexed commit by SHA.
    pub(crate) fn by_sha(&self) -> HashMap<[u8; 20], (u32, u32)> {
        let mut map = HashMap::new();
        for (s, segment) in self.segments.iter().enumerate() {
            for i in 0..segment.len() {
                let mut sha = [0u8; 20];
                sha.copy_from_slice(segment.entry(i).sha);
                map.insert(sha, (s as u32, i));
            }
        }
        map
    }
}

fn decode_order(bytes: &[u8], segments: &[Segment]) -> Option<Vec<(u32, u32)>> {
    let count = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    if bytes.len() != 4 + count * 8 {
        return None;
    }
    let mut out = Vec::with_capacity(count);
    for k in 0..count {
        let at = 4 + k * 8;
        let s = u32::from_le_bytes(bytes[at..at + 4].try_into().ok()?);
        let i = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().ok()?);
        if segments.get(s as usize).is_none_or(|seg| i >= seg.len()) {
            return None;
        }
        out.push((s, i));
    }
    Some(out)
}

fn encode_order(order: &[(u32, u32)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + order.len() * 8);
    out.extend_from_slice(&(order.len() as u32).to_le_bytes());
    for (s, i) in order {
        out.extend_from_slice(&s.to_le_bytes());
        out.extend_from_slice(&i.to_le_bytes());
    }
    out
}

/// Reads `shas`' records from `source`, in order, a batch at a time over a few threads;
/// with `deadline`, no batch starts after it (answers false when it stopped there).
pub(crate) fn read_records(
    source: &dyn HistorySource,
    shas: &[String],
    deadline: Option<std::time::Instant>,
    mut each: impl FnMut(HistoryRecord) -> Result<(), HistoryError>,
) -> Result<bool, HistoryError> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4));
    // A search reads smaller batches, so a deadline is kept closely.
    let batch_size = if deadline.is_some() {
        2 * threads
    } else {
        BATCH
    };
    for batch in shas.chunks(batch_size) {
        if deadline.is_some_and(|at| std::time::Instant::now() >= at) {
            return Ok(false);
        }
        let per = batch.len().div_ceil(threads).max(1);
        let parts: Vec<Result<Vec<HistoryRecord>, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = batch
                .chunks(per)
                .map(|chunk| {
                    scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|sha| source.commit(sha))
                            .collect::<Result<Vec<_>, String>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a history reader thread panicked".into()))
                })
                .collect()
        });
        for part in parts {
            for record in part.map_err(|message| HistoryError::Source { message })? {
                each(record)?;
            }
        }
    }
    Ok(true)
}

impl HistoryIndexes {
    /// Brings `repo`'s history index to `tip`: the commits of its history (the newest
    /// `depth`, `None`: all) not indexed yet are read from `source` into a new segment, and
    /// the tip's order is published. A no-op when the index is at `tip` with that depth.
    /// `progress` sees (commits read, commits to read).
    pub fn update(
        &self,
        repo: &str,
        tip: &str,
        depth: Option<usize>,
        source: &dyn HistorySource,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<HistoryBuildStats, HistoryError> {
        let started = Instant::now();
        let dir = self.repo_dir(repo)?;
        let _lock = crate::repodir::lock_repo_dir(&dir)?;
        let old = match Manifest::read(&dir) {
            Ok(Some(m)) if m.repo == repo => Some(m),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(repo, %error, "rebuilding an unreadable history index");
                None
            }
        };
        if let Some(old) = &old
            && old.tip == tip
            && old.depth == depth
        {
            return Ok(HistoryBuildStats {
                tip: tip.to_owned(),
                skipped_same: true,
                elapsed: started.elapsed(),
                ..HistoryBuildStats::default()
            });
        }
        let snapshot = match &old {
            Some(_) => Snapshot::load(&dir, repo).unwrap_or_else(|error| {
                tracing::warn!(repo, %error, "rebuilding an unreadable history index");
                None
            }),
            None => None,
        };
        let mut next = old.as_ref().map_or(1, |m| m.next);
        let (mut names, mut segments) = match (old, snapshot) {
            (Some(m), Some(s)) => (m.segments, s.segments),
            _ => (Vec::new(), Vec::new()),
        };
        let shas = source
            .walk(tip, depth.unwrap_or(usize::MAX))
            .map_err(|message| HistoryError::Source { message })?;
        let mut known: HashMap<[u8; 20], (u32, u32)> = HashMap::new();
        for (s, segment) in segments.iter().enumerate() {
            for i in 0..segment.len() {
                let mut sha = [0u8; 20];
                sha.copy_from_slice(segment.entry(i).sha);
                known.insert(sha, (s as u32, i));
            }
        }
        let mut missing = Vec::new();
        for sha in &shas {
            let key = decode_sha(sha).ok_or_else(|| HistoryError::Source {
                message: format!("`{sha}` is not a full commit SHA"),
            })?;
            if !known.contains_key(&key) {
                missing.push(sha.clone());
            }
        }
        let mut stats = HistoryBuildStats {
            tip: tip.to_owned(),
            commits: shas.len() as u64,
            added: missing.len() as u64,
            ..HistoryBuildStats::default()
        };
        clear_debris(&dir);
        // Merge when the segments would exceed the cap: the old ones' commits still in the
        // history go into the new segment too (commits no longer reachable are dropped).
        let merge = !missing.is_empty() && segments.len() + 1 > MAX_SEGMENTS;
        if !missing.is_empty() {
            let mut writer = SegmentWriter::new();
            if merge {
                let wanted: HashSet<[u8; 20]> = shas.iter().filter_map(|s| decode_sha(s)).collect();
                for segment in &segments {
                    for i in 0..segment.len() {
                        if wanted.contains(segment.entry(i).sha) {
                            writer.push(&segment.record(i))?;
                        }
                    }
                }
            }
            let total = missing.len() as u64;
            let mut done = 0u64;
            let mut lines = 0u64;
            read_records(source, &missing, None, |record| {
                lines += record.lines.len() as u64;
                writer.push(&record)?;
                done += 1;
                if done.is_multiple_of(64) || done == total {
                    progress(done, total);
                }
                Ok(())
            })?;
            stats.lines = lines;
            let name = format!("seg-{next}");
            next += 1;
            let tmp = dir.join(format!("tmp-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&tmp)
                .map_err(|e| HistoryError::io("writing the history index", e))?;
            writer.write(&tmp)?;
            std::fs::rename(&tmp, dir.join(&name))
                .map_err(|e| HistoryError::io("publishing a history segment", e))?;
            let segment = Segment::open(&dir.join(&name), repo)?;
            if merge {
                names.clear();
                segments.clear();
                stats.merged = true;
            }
            names.push(name);
            segments.push(segment);
        }
        // The tip's order over the (new) segments.
        let mut known: HashMap<[u8; 20], (u32, u32)> = HashMap::new();
        for (s, segment) in segments.iter().enumerate() {
            for i in 0..segment.len() {
                let mut sha = [0u8; 20];
                sha.copy_from_slice(segment.entry(i).sha);
                known.insert(sha, (s as u32, i));
            }
        }
        let order: Vec<(u32, u32)> = shas
            .iter()
            .filter_map(|sha| decode_sha(sha).and_then(|k| known.get(&k).copied()))
            .collect();
        let order_name = format!("order-{next}.bin");
        next += 1;
        write_synced(&dir.join(&order_name), &encode_order(&order))?;
        let manifest = Manifest {
            format: FORMAT,
            repo: repo.to_owned(),
            tip: tip.to_owned(),
            depth,
            segments: names,
            order: order_name,
            next,
        };
        manifest.write(&dir)?;
        drop(segments);
        remove_unlisted(&dir, &manifest);
        stats.elapsed = started.elapsed();
        Ok(stats)
    }
}

/// Temporary files and directories of updates that did not finish (the lock is ours).
fn clear_debris(dir: &Path) {
    for path in entries(dir) {
        let name = file_name(&path);
        if name.starts_with("tmp-") || name.starts_with(&format!("{MANIFEST}.tmp-")) {
            remove(&path);
        }
    }
}

/// Segments and order files the published manifest no longer names.
fn remove_unlisted(dir: &Path, manifest: &Manifest) {
    for path in entries(dir) {
        let name = file_name(&path);
        let listed = manifest.segments.contains(&name) || manifest.order == name;
        if !listed && (name.starts_with("seg-") || name.starts_with("order-")) {
            remove(&path);
        }
    }
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|e| e.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn remove(path: &Path) {
    let _ = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
}
