//! Commit and diff searches over a history index (S-9).
//!
//! Semantics, as git's: commit search is `git log --grep=Q` (a message line matches;
//! merges included), diff search `git log -G Q` (an added or removed line against the first
//! parent matches; merges left out; binary files never match), both `-i` unless
//! case-sensitive, a literal query as `-F`, a regex in Rust `regex` syntax. `author` is a
//! regex over `Name <email>` (`--author`, same case rule); `since`/`until` bound the
//! committer date (`--since`/`--until`). `path` is `-- <path>` for a plain path (the path
//! or anything under it) and a glob (`*` inside one directory, `**` across) when it has glob
//! characters; a commit search lists commits that changed a matching path (a merge: against
//! every parent), a diff search only lines of matching files. Hits come newest first in the
//! order `git log` lists commits; a diff commit's hits in its diff's order.

use std::collections::HashMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use globset::{GlobBuilder, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};

use super::dates::{self, Bound};
use super::segment::{Entry, Segment, SegmentWriter, decode_sha, encode_sha};
use super::update::{Snapshot, read_records};
use super::{HistoryError, HistoryIndexes, HistorySource, MAX_LIVE_COMMITS};
use crate::trigram::TrigramQuery;

/// Most hits on a page.
pub const MAX_HISTORY_LIMIT: usize = 500;
/// Most hits counted with `count`.
const MAX_COUNT: u64 = 10_000;
/// Time one call spends scanning before it answers what it found and a cursor to go on.
const SCAN_BUDGET: Duration = Duration::from_secs(5);

/// What a history search looks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HistoryKind {
    /// Commit messages (`git log --grep`).
    Commit,
    /// Added and removed lines (`git log -G`).
    Diff,
}

impl HistoryKind {
    fn tag(self) -> &'static str {
        match self {
            HistoryKind::Commit => "c",
            HistoryKind::Diff => "d",
        }
    }
}

/// A history search of one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRequest {
    pub kind: HistoryKind,
    pub query: String,
    pub regex: bool,
    pub case_sensitive: bool,
    /// Full SHA of the tip whose history is searched.
    pub tip: String,
    pub author: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub path: Option<String>,
    /// Hits per page (1..=[`MAX_HISTORY_LIMIT`]).
    pub limit: usize,
    pub cursor: Option<String>,
    /// Count hits to the end (up to 10,000) instead of only one past the page.
    pub count: bool,
    /// The depth the index is built with (`None`: whole history): a tip read from the source
    /// is walked as deep.
    pub depth: Option<usize>,
}

/// One hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryHit {
    /// Full SHA.
    pub commit: String,
    /// `Name <email>`.
    pub author: String,
    /// Author date, RFC 3339 with its recorded offset.
    pub date: String,
    /// The message's first paragraph on one line (git's `%s`).
    pub subject: String,
    /// Commit hits: byte ranges in `subject` of the query's matches (each message line of
    /// the paragraph searched whole with the search's regex, then clipped to what the
    /// subject keeps of it): non-empty, in order, disjoint, on character boundaries, at most
    /// [`MAX_MARKS`](crate::MAX_MARKS). Empty for diff hits, whose regex matched the diff.
    pub subject_marks: Vec<Range<u32>>,
    /// Diff hits: the new path (added line) or the old one (removed line).
    pub path: Option<String>,
    /// Diff hits: the line's number in the commit (added) or its first parent (removed).
    pub line: Option<u32>,
    /// Diff hits: `+` (true) or `-`.
    pub added: Option<bool>,
    /// Diff hits: the line; commit hits: the first message line that matched (trimmed and
    /// cut as code search's snippets are).
    pub snippet: String,
    /// Byte ranges in `snippet` of the query's matches on its line, as
    /// [`Hit::Line`](crate::Hit::Line)'s `marks`.
    pub marks: Vec<Range<u32>>,
}

/// One page of a history search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryResults {
    /// The tip searched.
    pub tip: String,
    pub hits: Vec<HistoryHit>,
    pub next_cursor: Option<String>,
    /// Hits found by this call's work: the page, plus what was counted past it.
    pub total_hits: u64,
    /// `total_hits` covers every hit (else it is a lower bound).
    pub total_exact: bool,
    /// Commits in the history searched.
    pub commits: u64,
    /// Commits the trigram index selected (diff search; else the commits looked at).
    pub candidates: u64,
    /// Commits whose lines or message were matched against the regex.
    pub verified: u64,
    /// Commits read from the source because they are not indexed.
    pub live_commits: u64,
    pub elapsed: Duration,
}

/// Where a page resumes: the position in the order and the hits of that commit already
/// given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resume {
    position: usize,
    skip: usize,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// FNV-1a of the request's fields that decide the hits (not page size or cursor).
fn request_hash(req: &HistoryRequest) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let fields = [
        req.kind.tag(),
        &req.query,
        if req.regex { "r" } else { "l" },
        if req.case_sensitive { "s" } else { "i" },
        req.author.as_deref().unwrap_or("\u{1}"),
        req.since.as_deref().unwrap_or("\u{1}"),
        req.until.as_deref().unwrap_or("\u{1}"),
        req.path.as_deref().unwrap_or("\u{1}"),
    ];
    for field in fields {
        for b in field.bytes().chain([0xff]) {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

fn encode_cursor(req: &HistoryRequest, resume: Resume) -> String {
    let text = format!(
        "h1|{}|{}|{:016x}|{}|{}",
        req.kind.tag(),
        req.tip,
        request_hash(req),
        resume.position,
        resume.skip
    );
    hex(text.as_bytes())
}

/// The tip a cursor was made for (its pages stay on it even if the branch moved).
pub fn history_cursor_tip(cursor: &str) -> Result<String, HistoryError> {
    let text = unhex(cursor)
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or(HistoryError::InvalidCursor)?;
    let parts: Vec<&str> = text.split('|').collect();
    match parts.as_slice() {
        ["h1", _, tip, _, _, _] if decode_sha(tip).is_some() => Ok((*tip).to_owned()),
        _ => Err(HistoryError::InvalidCursor),
    }
}

fn decode_cursor(req: &HistoryRequest, cursor: &str) -> Result<Resume, HistoryError> {
    let text = unhex(cursor)
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or(HistoryError::InvalidCursor)?;
    let parts: Vec<&str> = text.split('|').collect();
    let ["h1", kind, tip, hash, position, skip] = parts.as_slice() else {
        return Err(HistoryError::InvalidCursor);
    };
    if *kind != req.kind.tag() || *tip != req.tip || *hash != format!("{:016x}", request_hash(req))
    {
        return Err(HistoryError::InvalidCursor);
    }
    Ok(Resume {
        position: position.parse().map_err(|_| HistoryError::InvalidCursor)?,
        skip: skip.parse().map_err(|_| HistoryError::InvalidCursor)?,
    })
}

/// The `path` filter: a path prefix (`git log -- path`) or a glob.
enum PathFilter {
    Prefix(String),
    Glob(GlobMatcher),
}

impl PathFilter {
    fn new(path: Option<&str>) -> Result<Option<PathFilter>, HistoryError> {
        let Some(path) = path.map(str::trim).filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        if path.contains(['*', '?', '[', '{']) {
            let glob = GlobBuilder::new(path)
                .literal_separator(true)
                .build()
                .map_err(|e| HistoryError::InvalidGlob {
                    glob: path.to_owned(),
                    message: e.kind().to_string(),
                })?;
            return Ok(Some(PathFilter::Glob(glob.compile_matcher())));
        }
        let prefix = path.trim_start_matches("./").trim_end_matches('/');
        if prefix.is_empty() || prefix == "." {
            return Ok(None);
        }
        Ok(Some(PathFilter::Prefix(prefix.to_owned())))
    }

    fn allows(&self, path: &[u8]) -> bool {
        match self {
            PathFilter::Prefix(prefix) => {
                let p = prefix.as_bytes();
                path.starts_with(p) && (path.len() == p.len() || path[p.len()] == b'/')
            }
            PathFilter::Glob(glob) => glob.is_match(String::from_utf8_lossy(path).as_ref()),
        }
    }
}

fn build_regex(
    field: &'static str,
    pattern: &str,
    case_sensitive: bool,
) -> Result<Regex, HistoryError> {
    RegexBuilder::new(pattern)
        .case_insensitive(!case_sensitive)
        .size_limit(crate::REGEX_SIZE_LIMIT)
        .dfa_size_limit(crate::REGEX_SIZE_LIMIT)
        .build()
        .map_err(|error| HistoryError::InvalidRegex {
            field,
            message: match error {
                regex::Error::Syntax(message) => message,
                other => other.to_string(),
            },
        })
}

/// The checked and compiled parts of a request.
struct Plan {
    regex: Regex,
    trigrams: TrigramQuery,
    author: Option<Regex>,
    since: Option<i64>,
    until: Option<i64>,
    path: Option<PathFilter>,
}

fn plan(req: &HistoryRequest) -> Result<Plan, HistoryError> {
    if req.query.is_empty() {
        return Err(HistoryError::EmptyQuery);
    }
    if req.query.len() > crate::MAX_QUERY_BYTES {
        return Err(HistoryError::QueryTooLong {
            len: req.query.len(),
            max: crate::MAX_QUERY_BYTES,
        });
    }
    let pattern = if req.regex {
        req.query.clone()
    } else {
        regex::escape(&req.query)
    };
    let regex = build_regex("query", &pattern, req.case_sensitive)?;
    let trigrams = match regex_syntax::ParserBuilder::new()
        .case_insensitive(!req.case_sensitive)
        .build()
        .parse(&pattern)
    {
        Ok(hir) => crate::trigram::plan(&hir),
        Err(_) => TrigramQuery::All,
    };
    let author = match req.author.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(author) => Some(build_regex("author", author, req.case_sensitive)?),
    };
    let since = req
        .since
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(|s| dates::parse("since", s, Bound::Since))
        .transpose()?;
    let until = req
        .until
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(|s| dates::parse("until", s, Bound::Until))
        .transpose()?;
    Ok(Plan {
        regex,
        trigrams,
        author,
        since,
        until,
        path: PathFilter::new(req.path.as_deref())?,
    })
}

/// git's `%s` (the first paragraph, its lines trimmed and joined by spaces) and, with
/// `regex`, the byte ranges of its matches in it: each line of the paragraph searched whole,
/// as commit search matches message lines, the matches clipped to what `%s` keeps of the
/// line, on character boundaries, non-empty, at most [`crate::MAX_MARKS`].
fn subject_marked(message: &[u8], regex: Option<&Regex>) -> (String, Vec<Range<u32>>) {
    let mut subject = String::new();
    let mut marks: Vec<Range<u32>> = Vec::new();
    let paragraph = message
        .split(|&b| b == b'\n')
        .skip_while(|line| line.trim_ascii().is_empty())
        .take_while(|line| !line.trim_ascii().is_empty());
    for raw in paragraph {
        let text = String::from_utf8_lossy(raw);
        let kept = text.trim();
        if !subject.is_empty() {
            subject.push(' ');
        }
        let base = subject.len();
        subject.push_str(kept);
        // A line that is not UTF-8 is shown lossily, with other offsets: not marked.
        let (Some(regex), Ok(line)) = (regex, std::str::from_utf8(raw)) else {
            continue;
        };
        let lead = line.len() - line.trim_start().len();
        crate::snippet::marks_shown(line, lead..lead + kept.len(), regex, base, &mut marks);
    }
    (subject, marks)
}

/// The commits a search walks: the index's segments (plus one in memory for commits read
/// from the source) and the tip's order over them.
struct View {
    segments: Vec<Segment>,
    order: Vec<(u32, u32)>,
    live: u64,
}

impl HistoryIndexes {
    /// One page of a commit or diff search of `repo` at `req.tip`. The tip's history comes
    /// from the index when it was built at that tip; otherwise it is walked through
    /// `source`, indexed commits are taken from the index and up to [`MAX_LIVE_COMMITS`]
    /// others are read from `source` for this search.
    pub fn search_history(
        &self,
        repo: &str,
        req: &HistoryRequest,
        source: &dyn HistorySource,
    ) -> Result<HistoryResults, HistoryError> {
        let started = Instant::now();
        let plan = plan(req)?;
        let resume = match req.cursor.as_deref().filter(|c| !c.is_empty()) {
            Some(cursor) => decode_cursor(req, cursor)?,
            None => Resume {
                position: 0,
                skip: 0,
            },
        };
        let limit = req.limit.clamp(1, MAX_HISTORY_LIMIT);
        let view = self.view(repo, req, source)?;
        let mut scan = Scan {
            plan: &plan,
            kind: req.kind,
            view: &view,
            candidates: vec![None; view.segments.len()],
            paths: vec![HashMap::new(); view.segments.len()],
            stats: (0, 0),
        };
        let mut hits = Vec::new();
        let mut counted = 0u64;
        let mut next: Option<Resume> = None;
        let mut exact = true;
        let deadline = started + SCAN_BUDGET;
        let mut position = resume.position;
        let mut skip = resume.skip;
        let cap = if req.count { MAX_COUNT } else { 0 };
        while position < view.order.len() {
            if Instant::now() > deadline {
                // Out of time: answer what was found; the cursor goes on from here.
                if next.is_none() {
                    next = Some(Resume { position, skip: 0 });
                }
                exact = false;
                break;
            }
            let found = scan.commit(position);
            let after_skip = found.into_iter().skip(skip);
            for (k, hit) in after_skip.enumerate() {
                if hits.len() < limit {
                    hits.push(hit);
                } else {
                    if next.is_none() {
                        next = Some(Resume {
                            position,
                            skip: skip + k,
                        });
                    }
                    counted += 1;
                }
            }
            skip = 0;
            position += 1;
            if next.is_some() && counted >= cap.max(1) {
                // Enough to know a next page exists (and, with count, the cap is reached).
                exact = position >= view.order.len();
                break;
            }
        }
        let total_hits = hits.len() as u64 + counted;
        Ok(HistoryResults {
            tip: req.tip.clone(),
            hits,
            next_cursor: next.map(|r| encode_cursor(req, r)),
            total_hits,
            total_exact: exact,
            commits: view.order.len() as u64,
            candidates: scan.stats.0,
            verified: scan.stats.1,
            live_commits: view.live,
            elapsed: started.elapsed(),
        })
    }

    /// The segments and order of `req.tip`'s history.
    fn view(
        &self,
        repo: &str,
        req: &HistoryRequest,
        source: &dyn HistorySource,
    ) -> Result<View, HistoryError> {
        let dir = self.repo_dir(repo)?;
        let (mut segments, known) = match Snapshot::load(&dir, repo)? {
            Some(s) if s.tip == req.tip => {
                return Ok(View {
                    segments: s.segments,
                    order: s.order,
                    live: 0,
                });
            }
            Some(s) => {
                let known = s.by_sha();
                (s.segments, known)
            }
            None => (Vec::new(), HashMap::new()),
        };
        let shas = source
            .walk(&req.tip, req.depth.unwrap_or(usize::MAX))
            .map_err(|message| HistoryError::Source { message })?;
        let missing: Vec<String> = shas
            .iter()
            .filter(|sha| decode_sha(sha).is_none_or(|k| !known.contains_key(&k)))
            .cloned()
            .collect();
        if missing.len() > MAX_LIVE_COMMITS {
            return Err(HistoryError::NotIndexed {
                repo: repo.to_owned(),
                missing: missing.len(),
            });
        }
        let live_index = segments.len() as u32;
        let mut writer = SegmentWriter::new();
        let mut live: HashMap<String, u32> = HashMap::new();
        // Read on the caller's time: past the scan budget it is refused like a history
        // too far from the index, not read on however long it takes.
        let read_all = read_records(
            source,
            &missing,
            Some(Instant::now() + SCAN_BUDGET),
            |record| {
                let number = writer.push(&record)?;
                live.insert(record.commit, number);
                Ok(())
            },
        )?;
        if !read_all {
            return Err(HistoryError::NotIndexed {
                repo: repo.to_owned(),
                missing: missing.len(),
            });
        }
        let live_count = writer.len() as u64;
        segments.push(writer.into_segment());
        let order = shas
            .iter()
            .filter_map(|sha| {
                decode_sha(sha)
                    .and_then(|k| known.get(&k).copied())
                    .or_else(|| live.get(sha).map(|&i| (live_index, i)))
            })
            .collect();
        Ok(View {
            segments,
            order,
            live: live_count,
        })
    }
}

/// The matching work of one search.
struct Scan<'a> {
    plan: &'a Plan,
    kind: HistoryKind,
    view: &'a View,
    /// Per segment, once computed: the diff candidates (`None` inside: every commit).
    candidates: Vec<Option<Option<Vec<bool>>>>,
    /// Per segment: path id → allowed by the path filter.
    paths: Vec<HashMap<u32, bool>>,
    /// (candidates, verified).
    stats: (u64, u64),
}

impl Scan<'_> {
    /// The hits of the commit at `position` (all of them, in order).
    fn commit(&mut self, position: usize) -> Vec<HistoryHit> {
        let (s, i) = self.view.order[position];
        let segment = &self.view.segments[s as usize];
        let entry = segment.entry(i);
        let plan = self.plan;
        if plan.since.is_some_and(|t| entry.committer_time < t)
            || plan.until.is_some_and(|t| entry.committer_time > t)
        {
            return Vec::new();
        }
        if self.kind == HistoryKind::Diff {
            if entry.parents > 1 {
                return Vec::new();
            }
            let candidates = self.candidates[s as usize]
                .get_or_insert_with(|| segment.candidates(&plan.trigrams));
            if let Some(set) = candidates
                && !set.get(i as usize).copied().unwrap_or(false)
            {
                return Vec::new();
            }
        }
        self.stats.0 += 1;
        let (author, message) = segment.author_message(&entry);
        if let Some(re) = &plan.author
            && !re.is_match(author)
        {
            return Vec::new();
        }
        self.stats.1 += 1;
        let kind = self.kind;
        let hit = |path: Option<String>, line: Option<u32>, added: Option<bool>, text: &[u8]| {
            let at = plan.regex.find(text).map_or(0, |m| m.start());
            let (snippet, marks) = crate::snippet::snippet_marked(text, at, &plan.regex);
            // A diff search's regex matched the diff's lines, not the message.
            let (subject, subject_marks) = subject_marked(
                message,
                (kind == HistoryKind::Commit).then_some(&plan.regex),
            );
            HistoryHit {
                commit: encode_sha(entry.sha),
                author: String::from_utf8_lossy(author).into_owned(),
                date: dates::rfc3339(entry.author_time, entry.author_offset),
                subject,
                subject_marks,
                path,
                line,
                added,
                snippet,
                marks,
            }
        };
        match self.kind {
            HistoryKind::Commit => {
                if let Some(filter) = &plan.path
                    && !touches(segment, &entry, filter)
                {
                    return Vec::new();
                }
                message
                    .split(|&b| b == b'\n')
                    .find(|line| plan.regex.is_match(line))
                    .map(|line| vec![hit(None, None, None, line)])
                    .unwrap_or_default()
            }
            HistoryKind::Diff => {
                let allowed = &mut self.paths[s as usize];
                let mut out = Vec::new();
                for (path, number, added, text) in segment.lines(&entry) {
                    if let Some(filter) = &plan.path {
                        let ok = *allowed
                            .entry(path)
                            .or_insert_with(|| filter.allows(segment.path(path)));
                        if !ok {
                            continue;
                        }
                    }
                    if plan.regex.is_match(text) {
                        let path = String::from_utf8_lossy(segment.path(path)).into_owned();
                        out.push(hit(Some(path), Some(number), Some(added), text));
                    }
                }
                out
            }
        }
    }
}

/// Whether a commit changed a path the filter allows: against its parent, or for a merge
/// against every parent (`git log -- path` lists a merge only when it differs from all).
fn touches(segment: &Segment, entry: &Entry<'_>, filter: &PathFilter) -> bool {
    let changed = segment.changed(entry);
    !changed.is_empty()
        && changed
            .iter()
            .all(|group| group.iter().any(|p| filter.allows(p.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(subject: &str, marks: &[Range<u32>]) -> Vec<String> {
        assert!(crate::marks_fit(subject, marks), "{marks:?} in {subject:?}");
        marks
            .iter()
            .map(|m| subject[m.start as usize..m.end as usize].to_owned())
            .collect()
    }

    /// Issue 34 point 8: a commit hit's subject (git's `%s`) carries the matches of each of
    /// its message lines, searched whole (anchors at the line's start), clipped to what
    /// `%s` keeps and placed where the line lands in it.
    #[test]
    fn subject_marks_follow_the_message_lines() {
        let regex = build_regex("query", r"^\s*fix\w*|é\w+", false).unwrap();
        let message = b"\n  Fix: \xc3\xa9t\xc3\xa9 parser\r\n  fixes \xc3\xa9crit\n\nfix body\n";
        let (subject, marks) = subject_marked(message, Some(&regex));
        assert_eq!(subject, "Fix: été parser fixes écrit");
        assert_eq!(marked(&subject, &marks), ["Fix", "été", "fixes", "écrit"]);
        let (plain, none) = subject_marked(message, None);
        assert_eq!((plain.as_str(), none.len()), (subject.as_str(), 0));
        assert_eq!(subject_marked(b"\n\n", Some(&regex)).0, "");
    }
}
