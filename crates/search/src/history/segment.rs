//! One segment of a history index: the commits one update added (or a merge of older
//! segments), written once into a temporary directory and published with a rename.
//!
//! Files (little-endian):
//! - `commits.bin`: [`MAGIC`], then one [`ENTRY`]-byte entry per commit: SHA (20 bytes),
//!   parent count (u32), author time (i64), author offset (i32), committer time (i64), meta
//!   offset (u64) and length (u32) in `meta.bin`, diff offset and length (u64, u64) in
//!   `diff.bin`, first line (u64) and line count (u32) in `lines.bin`, padding.
//! - `meta.bin`: per commit the author (`Name <email>`), a NUL, the message, a NUL, then the
//!   paths changed against each parent: u32 groups, per group u32 paths, per path u32 length
//!   and bytes.
//! - `diff.bin`: per commit its added and removed lines' texts, each ended by `\n`.
//! - `lines.bin`: per line 12 bytes: path id (u32, in `paths.bin`), line number (u32), side
//!   (u8: 0 added, 1 removed), padding.
//! - `paths.bin`: u32 count, count + 1 u64 offsets, the path bytes.
//! - `post.bin`: u32 trigram count, per trigram 16 bytes (trigram u32, offset u64 into the
//!   list area, count u32) sorted by trigram, then the lists: commit numbers (local to the
//!   segment) ascending, delta-coded as LEB128. A commit's trigrams are those of its diff
//!   lines (lowercased, as the code index's).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use memmap2::Mmap;

use super::{HistoryError, HistoryLine, HistoryRecord};
use crate::trigram::{Trigram, TrigramQuery, TrigramScratch, doc_trigrams};

pub(crate) const MAGIC: &[u8; 8] = b"CSGHIS01";
pub(crate) const ENTRY: usize = 96;
/// The files of a segment.
const FILES: [&str; 6] = [
    "commits.bin",
    "meta.bin",
    "diff.bin",
    "lines.bin",
    "paths.bin",
    "post.bin",
];
const LINE: usize = 12;

fn io(action: &'static str) -> impl Fn(std::io::Error) -> HistoryError {
    move |e| HistoryError::io(action, e)
}

/// Builds a segment's files in memory, commit by commit.
pub(crate) struct SegmentWriter {
    commits: Vec<u8>,
    meta: Vec<u8>,
    diff: Vec<u8>,
    lines: Vec<u8>,
    paths: Vec<String>,
    path_ids: HashMap<String, u32>,
    postings: HashMap<Trigram, Vec<u32>>,
    scratch: TrigramScratch,
    trigrams: Vec<Trigram>,
    count: u32,
    line_count: u64,
}

impl SegmentWriter {
    pub(crate) fn new() -> Self {
        SegmentWriter {
            commits: MAGIC.to_vec(),
            meta: Vec::new(),
            diff: Vec::new(),
            lines: Vec::new(),
            paths: Vec::new(),
            path_ids: HashMap::new(),
            postings: HashMap::new(),
            scratch: TrigramScratch::new(),
            trigrams: Vec::new(),
            count: 0,
            line_count: 0,
        }
    }

    pub(crate) fn len(&self) -> u32 {
        self.count
    }

    /// Adds one commit; answers its number in the segment.
    pub(crate) fn push(&mut self, record: &HistoryRecord) -> Result<u32, HistoryError> {
        let sha = decode_sha(&record.commit).ok_or_else(|| HistoryError::Source {
            message: format!("`{}` is not a full commit SHA", record.commit),
        })?;
        let meta_off = self.meta.len() as u64;
        self.meta
            .extend_from_slice(record.author.replace('\0', " ").as_bytes());
        self.meta.push(0);
        self.meta
            .extend_from_slice(record.message.replace('\0', " ").as_bytes());
        self.meta.push(0);
        put_u32(&mut self.meta, record.changed.len());
        for group in &record.changed {
            put_u32(&mut self.meta, group.len());
            for path in group {
                put_u32(&mut self.meta, path.len());
                self.meta.extend_from_slice(path.as_bytes());
            }
        }
        let meta_len = self.meta.len() as u64 - meta_off;
        let diff_off = self.diff.len() as u64;
        let first_line = self.line_count;
        for line in &record.lines {
            // A line never holds a line feed; one that did would shift every later line.
            self.diff
                .extend_from_slice(line.text.replace('\n', " ").as_bytes());
            self.diff.push(b'\n');
            let id = match self.path_ids.get(&line.path) {
                Some(id) => *id,
                None => {
                    let id = self.paths.len() as u32;
                    self.paths.push(line.path.clone());
                    self.path_ids.insert(line.path.clone(), id);
                    id
                }
            };
            self.lines.extend_from_slice(&id.to_le_bytes());
            self.lines.extend_from_slice(&line.line.to_le_bytes());
            self.lines
                .extend_from_slice(&[u8::from(!line.added), 0, 0, 0]);
            self.line_count += 1;
        }
        let diff_len = self.diff.len() as u64 - diff_off;
        let number = self.count;
        doc_trigrams(
            &self.diff[diff_off as usize..],
            &mut self.scratch,
            &mut self.trigrams,
        );
        for &t in &self.trigrams {
            self.postings.entry(t).or_default().push(number);
        }
        let mut entry = Vec::with_capacity(ENTRY);
        entry.extend_from_slice(&sha);
        entry.extend_from_slice(&(record.parents as u32).to_le_bytes());
        entry.extend_from_slice(&record.author_time.to_le_bytes());
        entry.extend_from_slice(&record.author_offset.to_le_bytes());
        entry.extend_from_slice(&record.committer_time.to_le_bytes());
        entry.extend_from_slice(&meta_off.to_le_bytes());
        entry.extend_from_slice(&(meta_len as u32).to_le_bytes());
        entry.extend_from_slice(&diff_off.to_le_bytes());
        entry.extend_from_slice(&diff_len.to_le_bytes());
        entry.extend_from_slice(&first_line.to_le_bytes());
        entry.extend_from_slice(&(record.lines.len() as u32).to_le_bytes());
        entry.resize(ENTRY, 0);
        self.commits.extend_from_slice(&entry);
        self.count += 1;
        Ok(number)
    }

    /// Writes the files into `dir` (which must exist) and syncs them.
    pub(crate) fn write(self, dir: &Path) -> Result<(), HistoryError> {
        for (name, bytes) in FILES.iter().zip(self.finish()) {
            let mut file =
                std::fs::File::create(dir.join(name)).map_err(io("writing the history index"))?;
            file.write_all(&bytes)
                .map_err(io("writing the history index"))?;
            file.sync_all().map_err(io("writing the history index"))?;
        }
        Ok(())
    }

    /// The segment in memory, for searching without publishing it.
    pub(crate) fn into_segment(self) -> Segment {
        let count = self.count;
        let [commits, meta, diff, lines, paths, post] = self.finish().map(Buf::Mem);
        Segment {
            commits,
            meta,
            diff,
            lines,
            paths,
            post,
            count,
        }
    }

    /// The files' bytes, in [`FILES`] order.
    fn finish(self) -> [Vec<u8>; 6] {
        let mut paths = Vec::new();
        put_u32(&mut paths, self.paths.len());
        let mut off = 0u64;
        for path in &self.paths {
            paths.extend_from_slice(&off.to_le_bytes());
            off += path.len() as u64;
        }
        paths.extend_from_slice(&off.to_le_bytes());
        for path in &self.paths {
            paths.extend_from_slice(path.as_bytes());
        }
        let mut trigrams: Vec<(Trigram, Vec<u32>)> = self.postings.into_iter().collect();
        trigrams.sort_unstable_by_key(|(t, _)| *t);
        let mut table = Vec::with_capacity(4 + trigrams.len() * 16);
        put_u32(&mut table, trigrams.len());
        let mut lists = Vec::new();
        for (t, ids) in &trigrams {
            table.extend_from_slice(&t.to_le_bytes());
            table.extend_from_slice(&(lists.len() as u64).to_le_bytes());
            table.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            let mut last = 0u32;
            for &id in ids {
                put_varint(&mut lists, id - last);
                last = id;
            }
        }
        table.extend_from_slice(&lists);
        [self.commits, self.meta, self.diff, self.lines, paths, table]
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_varint(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(crate) fn decode_sha(hex: &str) -> Option<[u8; 20]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

pub(crate) fn encode_sha(sha: &[u8]) -> String {
    sha.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of one file of a segment: mapped when published, in memory for commits read
/// from Git during a search (not in the index yet).
pub(crate) enum Buf {
    Map(Option<Mmap>),
    Mem(Vec<u8>),
}

/// A segment: published and mapped read-only, or built in memory.
pub(crate) struct Segment {
    commits: Buf,
    meta: Buf,
    diff: Buf,
    lines: Buf,
    paths: Buf,
    post: Buf,
    count: u32,
}

/// One commit's fixed fields.
pub(crate) struct Entry<'a> {
    pub sha: &'a [u8],
    pub parents: u32,
    pub author_time: i64,
    pub author_offset: i32,
    pub committer_time: i64,
    meta: (u64, u32),
    diff: (u64, u64),
    lines: (u64, u32),
}

fn bytes(buf: &Buf) -> &[u8] {
    match buf {
        Buf::Map(map) => map.as_deref().unwrap_or(&[]),
        Buf::Mem(bytes) => bytes,
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| {
        u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]])
    })
}

impl Segment {
    pub(crate) fn open(dir: &Path, repo: &str) -> Result<Segment, HistoryError> {
        let map = |name: &str| {
            crate::disk::map(&dir.join(name))
                .map(Buf::Map)
                .map_err(HistoryError::from)
        };
        let commits = map(FILES[0])?;
        let b = bytes(&commits);
        if b.len() < MAGIC.len()
            || &b[..MAGIC.len()] != MAGIC
            || !(b.len() - 8).is_multiple_of(ENTRY)
        {
            return Err(HistoryError::Corrupt {
                repo: repo.to_owned(),
                detail: "a segment's commit table is damaged".to_owned(),
            });
        }
        let count = ((b.len() - 8) / ENTRY) as u32;
        Ok(Segment {
            count,
            commits,
            meta: map(FILES[1])?,
            diff: map(FILES[2])?,
            lines: map(FILES[3])?,
            paths: map(FILES[4])?,
            post: map(FILES[5])?,
        })
    }

    pub(crate) fn len(&self) -> u32 {
        self.count
    }

    pub(crate) fn entry(&self, i: u32) -> Entry<'_> {
        let b = bytes(&self.commits);
        let at = 8 + i as usize * ENTRY;
        let e = &b[at..at + ENTRY];
        Entry {
            sha: &e[..20],
            parents: u32_at(e, 20),
            author_time: u64_at(e, 24) as i64,
            author_offset: u32_at(e, 32) as i32,
            committer_time: u64_at(e, 36) as i64,
            meta: (u64_at(e, 44), u32_at(e, 52)),
            diff: (u64_at(e, 56), u64_at(e, 64)),
            lines: (u64_at(e, 72), u32_at(e, 80)),
        }
    }

    fn meta(&self, e: &Entry<'_>) -> &[u8] {
        let b = bytes(&self.meta);
        let (off, len) = (e.meta.0 as usize, e.meta.1 as usize);
        b.get(off..off + len).unwrap_or(&[])
    }

    /// The author (`Name <email>`) and the message.
    pub(crate) fn author_message(&self, e: &Entry<'_>) -> (&[u8], &[u8]) {
        let meta = self.meta(e);
        let mut parts = meta.splitn(3, |&b| b == 0);
        let author = parts.next().unwrap_or(&[]);
        let message = parts.next().unwrap_or(&[]);
        (author, message)
    }

    /// The paths changed against each parent.
    pub(crate) fn changed(&self, e: &Entry<'_>) -> Vec<Vec<String>> {
        let meta = self.meta(e);
        let mut nul = 0;
        let mut at = 0;
        while nul < 2 && at < meta.len() {
            if meta[at] == 0 {
                nul += 1;
            }
            at += 1;
        }
        let mut out = Vec::new();
        let groups = u32_at(meta, at);
        at += 4;
        for _ in 0..groups {
            let n = u32_at(meta, at);
            at += 4;
            let mut group = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let len = u32_at(meta, at) as usize;
                at += 4;
                let path = meta.get(at..at + len).unwrap_or(&[]);
                group.push(String::from_utf8_lossy(path).into_owned());
                at += len;
            }
            out.push(group);
        }
        out
    }

    /// The commit's diff lines: (path, line number, added, text), in order.
    pub(crate) fn lines<'a>(
        &'a self,
        e: &Entry<'_>,
    ) -> impl Iterator<Item = (u32, u32, bool, &'a [u8])> + 'a {
        let diff = bytes(&self.diff);
        let (off, len) = (e.diff.0 as usize, e.diff.1 as usize);
        let text = diff.get(off..off + len).unwrap_or(&[]);
        let lines = bytes(&self.lines);
        let first = e.lines.0 as usize;
        text.split(|&b| b == b'\n')
            .take(e.lines.1 as usize)
            .enumerate()
            .map(move |(k, t)| {
                let at = (first + k) * LINE;
                let path = u32_at(lines, at);
                let number = u32_at(lines, at + 4);
                let removed = lines.get(at + 8).copied().unwrap_or(0) == 1;
                (path, number, !removed, t)
            })
    }

    pub(crate) fn path(&self, id: u32) -> &[u8] {
        let b = bytes(&self.paths);
        let n = u32_at(b, 0) as usize;
        let base = 4 + (n + 1) * 8;
        let (from, to) = (
            u64_at(b, 4 + id as usize * 8) as usize,
            u64_at(b, 4 + (id as usize + 1) * 8) as usize,
        );
        b.get(base + from..base + to).unwrap_or(&[])
    }

    /// The whole record of commit `i` (for merging segments).
    pub(crate) fn record(&self, i: u32) -> HistoryRecord {
        let e = self.entry(i);
        let (author, message) = self.author_message(&e);
        HistoryRecord {
            commit: encode_sha(e.sha),
            parents: e.parents as usize,
            author: String::from_utf8_lossy(author).into_owned(),
            author_time: e.author_time,
            author_offset: e.author_offset,
            committer_time: e.committer_time,
            message: String::from_utf8_lossy(message).into_owned(),
            changed: self.changed(&e),
            lines: self
                .lines(&e)
                .map(|(path, line, added, text)| HistoryLine {
                    path: String::from_utf8_lossy(self.path(path)).into_owned(),
                    added,
                    line,
                    text: String::from_utf8_lossy(text).into_owned(),
                })
                .collect(),
        }
    }

    /// The posting list of trigram `t`.
    fn posting(&self, t: Trigram) -> Vec<u32> {
        let b = bytes(&self.post);
        let n = u32_at(b, 0) as usize;
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let key = u32_at(b, 4 + mid * 16);
            match key.cmp(&t) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let off = u64_at(b, 4 + mid * 16 + 4) as usize;
                    let count = u32_at(b, 4 + mid * 16 + 12) as usize;
                    let mut at = 4 + n * 16 + off;
                    let mut out = Vec::with_capacity(count);
                    let mut last = 0u32;
                    for _ in 0..count {
                        let (mut value, mut shift) = (0u32, 0);
                        while let Some(&byte) = b.get(at) {
                            at += 1;
                            value |= u32::from(byte & 0x7f) << shift;
                            shift += 7;
                            if byte & 0x80 == 0 || shift > 28 {
                                break;
                            }
                        }
                        last += value;
                        out.push(last);
                    }
                    return out;
                }
            }
        }
        Vec::new()
    }

    /// The commits of this segment whose diff lines may match `query` (`None`: all).
    pub(crate) fn candidates(&self, query: &TrigramQuery) -> Option<Vec<bool>> {
        let ids = self.eval(query)?;
        let mut set = vec![false; self.count as usize];
        for id in ids {
            if let Some(slot) = set.get_mut(id as usize) {
                *slot = true;
            }
        }
        Some(set)
    }

    fn eval(&self, query: &TrigramQuery) -> Option<Vec<u32>> {
        match query {
            TrigramQuery::All => None,
            TrigramQuery::Trigram(t) => Some(self.posting(*t)),
            TrigramQuery::And(parts) => {
                let mut acc: Option<Vec<u32>> = None;
                for part in parts {
                    let Some(ids) = self.eval(part) else { continue };
                    acc = Some(match acc {
                        None => ids,
                        Some(prev) => crate::candidates::intersect(&prev, &ids),
                    });
                    if acc.as_ref().is_some_and(Vec::is_empty) {
                        break;
                    }
                }
                acc
            }
            TrigramQuery::Or(parts) => {
                let mut acc = Vec::new();
                for part in parts {
                    acc.extend(self.eval(part)?);
                }
                acc.sort_unstable();
                acc.dedup();
                Some(acc)
            }
        }
    }
}
