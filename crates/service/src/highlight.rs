//! The file page's operations (issue 34): lines of a file at a commit with syntax
//! highlighting (and, on request, links from names to their definitions), and a file's raw
//! bytes. Both are framed like `read` (alias, access, lease) with statistics of their own
//! (`highlight`, `raw`: page views are not the `read` tool) and answer plain Rust types.
//!
//! `highlight` is what any page that shows code calls: the file page, and the commit page for
//! both sides of a changed file ("lines of `path` at commit X": pass the full SHA as
//! `revision` and the hunk's range as `start_line`/`max_lines`). Highlighting needs the whole
//! file parsed, so its cost is kept per blob content in a process-wide cache
//! ([`HIGHLIGHT_CACHE_BYTES`]): every page of a file, and the same file at another commit
//! or path, reuses one run. Files over [`highlight::Limits`]'s size, runs past its
//! deadline, and languages without a grammar come back as plain tokens (see
//! [`HighlightStatus`]).
//!
//! Definition links come from the search index's symbol table of the repository's indexed
//! head (`definitions`): a repository without an index yet answers no links, and the lookup
//! is bounded by [`MAX_LINKED_NAMES`] names and [`DEFINITIONS_BUDGET`] of time, so it never
//! holds a page up.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use gitstore::{RepoName, RepoPath};

use crate::frame::Op;
use crate::{CallContext, Service, ServiceError};

/// Bytes of highlighting results kept (texts, spans, line tables), least recently used out.
pub const HIGHLIGHT_CACHE_BYTES: usize = 64 * 1024 * 1024;
/// Names of one answer looked up as definitions at most (the page's distinct names).
pub const MAX_LINKED_NAMES: usize = 4000;
/// Time the definition lookups of one answer may take; names not looked up by then are not
/// linked.
pub const DEFINITIONS_BUDGET: Duration = Duration::from_millis(10);
/// Definitions listed per linked name at most.
pub const MAX_DEFINITION_TARGETS: usize = 20;
/// Largest file `raw` serves.
pub const RAW_MAX_BYTES: u64 = 32 * 1024 * 1024;
/// Lines one `highlight` answers when the caller gives no `max_lines`.
pub const DEFAULT_HIGHLIGHT_LINES: u64 = 20_000;

/// `highlight {repo, revision?, path, start_line?, max_lines?, max_bytes?, definitions}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HighlightRequest {
    pub repo: String,
    /// Branch, tag or SHA (default: the default branch's head).
    pub revision: Option<String>,
    pub path: String,
    /// First line answered (1-based; default 1).
    pub start_line: Option<u64>,
    /// Lines answered at most (default [`DEFAULT_HIGHLIGHT_LINES`]).
    pub max_lines: Option<u64>,
    /// Bytes of line text answered at most (default: the read budget); at least one line
    /// is answered.
    pub max_bytes: Option<usize>,
    /// Link names to their definitions in the repository (the file page does; a diff need
    /// not).
    pub definitions: bool,
}

/// What `highlight` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HighlightAnswer {
    pub repo: String,
    /// The full SHA read.
    pub commit: String,
    pub path: String,
    /// The language of the file's grammar (`rust`, `python`…), absent for other files.
    pub lang: Option<&'static str>,
    pub file: HighlightedFile,
}

/// A text file's lines, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HighlightedFile {
    Text(HighlightedText),
    /// Not text (a NUL in its first 8 KiB, or not UTF-8): serve it raw.
    Binary {
        /// Bytes.
        size: u64,
    },
}

/// Lines of a text file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HighlightedText {
    /// The number of the first line of `lines`.
    pub first_line: u64,
    pub lines: Vec<HighlightedLine>,
    pub total_lines: u64,
    /// The file's size in bytes.
    pub total_bytes: u64,
    /// Where the next page starts, when the file goes on.
    pub next_start_line: Option<u64>,
    pub status: HighlightStatus,
    /// The definitions tokens link to (`Token::definition` indexes it).
    pub definitions: Vec<DefinitionLink>,
}

/// One line: its text, and the tokens that cover it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HighlightedLine {
    pub number: u64,
    /// The line without its line end. Repository data, not escaped.
    pub text: String,
    /// Runs of `text` in order, together exactly `text` ([`HighlightedLine::pieces`] gives
    /// each with its text).
    pub tokens: Vec<Token>,
}

impl HighlightedLine {
    /// Each token with its text, in order.
    pub fn pieces(&self) -> impl Iterator<Item = (&str, &Token)> {
        self.tokens.iter().map(|t| {
            (
                self.text
                    .get(t.start as usize..t.end as usize)
                    .unwrap_or(""),
                t,
            )
        })
    }
}

/// A run of one line with one class: a byte range of the line's text (on character
/// boundaries), not a copy of it, because a page has tens of thousands of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// Where the run starts in [`HighlightedLine::text`].
    pub start: u32,
    /// Where it ends (exclusive).
    pub end: u32,
    /// The CSS class of its capture (`hl-keyword`, `hl-string`…); `None` for plain text.
    pub class: Option<&'static str>,
    /// The name's definitions: an index into [`HighlightedText::definitions`].
    pub definition: Option<u32>,
}

/// Whether the lines are highlighted, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HighlightStatus {
    Highlighted,
    /// No grammar for this file type.
    NoGrammar,
    /// Over the size highlighting parses.
    TooLarge {
        limit: usize,
    },
    /// Highlighting took longer than its deadline.
    TimedOut,
    /// The parser gave up.
    Failed,
}

/// Where one name is defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionLink {
    /// The name (an identifier of ASCII letters, digits and `_`).
    pub name: String,
    /// In path and line order, at most [`MAX_DEFINITION_TARGETS`].
    pub targets: Vec<DefinitionTarget>,
    /// Definitions found in all.
    pub total: u64,
}

/// One definition of a linked name, at the repository's indexed head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionTarget {
    /// The full SHA its line is valid at (the indexed head).
    pub commit: String,
    pub path: String,
    /// The line of the name.
    pub line: u32,
    /// `function`, `class`…
    pub kind: &'static str,
}

/// `raw {repo, revision?, path}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawRequest {
    pub repo: String,
    pub revision: Option<String>,
    pub path: String,
}

/// A file's exact bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawAnswer {
    pub repo: String,
    /// The full SHA read.
    pub commit: String,
    pub path: String,
    pub bytes: RawBytes,
    /// A NUL in the first 8 KiB or not UTF-8 (the rule that keeps a file from `read`).
    pub binary: bool,
}

/// A file's bytes as `raw` answers them: one copy shared by every call serving the same file
/// at once (and by the store's text cache), so slow downloads of one big file hold it once
/// (issue 42 point 5). Cheap to clone; serve it in slices.
#[derive(Clone)]
pub struct RawBytes(gitstore::SharedBlob);

impl RawBytes {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl AsRef<[u8]> for RawBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::Deref for RawBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for RawBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for RawBytes {}

impl std::fmt::Debug for RawBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawBytes({} bytes)", self.as_slice().len())
    }
}

/// What the highlighting cache did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HighlightCacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    pub bytes: usize,
}

/// The service's highlighting results ([`crate::Inner`] keeps them). Keyed by content and
/// compared in full on a hit, so sharing it between repositories shows nobody another's file;
/// access is checked before it is consulted.
pub(crate) fn new_cache() -> highlight::Cache {
    highlight::Cache::new(HIGHLIGHT_CACHE_BYTES, highlight::Limits::default())
}

/// Bytes probed for a NUL (as the store does for `read`).
const BINARY_PROBE: usize = 8 * 1024;

impl Service {
    /// `highlight`: lines of a file at a commit as highlighted tokens (see the module docs);
    /// a binary file answers [`HighlightedFile::Binary`]. The same checks as `read`.
    pub async fn highlight(
        &self,
        ctx: &CallContext,
        req: HighlightRequest,
    ) -> Result<HighlightAnswer, ServiceError> {
        let HighlightRequest {
            repo,
            revision,
            path,
            start_line,
            max_lines,
            max_bytes,
            definitions,
        } = req;
        self.framed_blocking(ctx, Op::HIGHLIGHT, repo, move |mut call, inner| {
            let lease = call.lease(inner, revision.as_deref())?;
            let repo_name = lease.repo().clone();
            let commit = lease.commit().to_string();
            let path = RepoPath::parse(&path)?;
            let grammar = highlight::Grammar::for_path(path.as_str());
            let answer = |file| HighlightAnswer {
                repo: repo_name.to_string(),
                commit: commit.clone(),
                path: path.to_string(),
                lang: grammar.map(highlight::Grammar::lang),
                file,
            };
            let text = match lease.read_text(&path) {
                Ok(text) => text,
                Err(
                    gitstore::Error::Binary { size, .. } | gitstore::Error::NotUtf8 { size, .. },
                ) => return Ok(answer(HighlightedFile::Binary { size })),
                Err(e) => return Err(e.into()),
            };
            let first = start_line.unwrap_or(1).max(1);
            let max_lines = max_lines.unwrap_or(DEFAULT_HIGHLIGHT_LINES).max(1);
            let max_bytes = max_bytes.unwrap_or(inner.config.read_budget);
            let kept = inner.highlights.cached(grammar, text.as_str());
            if kept.is_none()
                && grammar.is_some()
                && text.as_str().len() <= inner.highlights.limits().max_bytes
            {
                // A first parse is heavy work of its own class (O-9); a kept one takes no slot.
                call.admit_blocking(inner, crate::Class::Parse)?;
            }
            let (highlighted, looked_up) = match kept {
                Some(kept) => (kept, None),
                // A new file that will be highlighted (and so linked): its names are looked
                // up beside the run.
                None if definitions
                    && grammar.is_some()
                    && text.as_str().len() <= inner.highlights.limits().max_bytes =>
                {
                    let names = || page_names(text.as_str(), first, max_lines, max_bytes);
                    beside(
                        || look_up(inner, &repo_name, &names()),
                        || inner.highlights.highlight(grammar, text.as_str()),
                    )
                }
                None => (inner.highlights.highlight(grammar, text.as_str()), None),
            };
            drop(text);
            let total = highlighted.line_count() as u64;
            if first > total.max(1) {
                return Err(ServiceError::invalid(format!(
                    "start_line {first} is past the end of {path} ({total} lines)"
                )));
            }
            let mut page = page_of(&highlighted, first, max_lines, max_bytes);
            let mut links = Vec::new();
            if definitions && highlighted.outcome() == highlight::Outcome::Highlighted {
                links = link_definitions(
                    inner,
                    &repo_name,
                    path.as_str(),
                    &mut page.lines,
                    looked_up.flatten(),
                );
            }
            Ok(answer(HighlightedFile::Text(HighlightedText {
                first_line: first,
                lines: page.lines,
                total_lines: total,
                total_bytes: highlighted.text().len() as u64,
                next_start_line: page.next,
                status: status(highlighted.outcome()),
                definitions: links,
            })))
        })
        .await
    }

    /// `raw`: the exact bytes of a file at a commit, up to [`RAW_MAX_BYTES`] (a bigger file is
    /// refused from its header, before it is read), shared with every other call serving the
    /// same blob now (see [`RawBytes`]). The same checks as `read`.
    pub async fn raw(&self, ctx: &CallContext, req: RawRequest) -> Result<RawAnswer, ServiceError> {
        let RawRequest {
            repo,
            revision,
            path,
        } = req;
        self.framed_blocking(ctx, Op::RAW, repo, move |call, inner| {
            let lease = call.lease(inner, revision.as_deref())?;
            let path = RepoPath::parse(&path)?;
            let bytes = match lease.read_shared(&path, RAW_MAX_BYTES) {
                Ok(bytes) => bytes,
                Err(gitstore::Error::TooLarge { size, limit, .. }) => {
                    return Err(ServiceError::invalid(format!(
                        "`{path}` is {size} bytes, over the {limit} bytes the raw view serves: clone the repository to get it"
                    )));
                }
                Err(e) => return Err(e.into()),
            };
            let binary = !bytes.known_text() && {
                let all = bytes.as_bytes();
                all[..all.len().min(BINARY_PROBE)].contains(&0)
                    || std::str::from_utf8(all).is_err()
            };
            Ok(RawAnswer {
                repo: lease.repo().to_string(),
                commit: lease.commit().to_string(),
                path: path.to_string(),
                bytes: RawBytes(bytes),
                binary,
            })
        })
        .await
    }

    /// What the process's highlighting cache did so far.
    pub fn highlight_cache_stats(&self) -> HighlightCacheStats {
        let stats = self.inner.highlights.stats();
        HighlightCacheStats {
            hits: stats.hits,
            misses: stats.misses,
            entries: stats.entries,
            bytes: stats.bytes,
        }
    }
}

fn status(outcome: highlight::Outcome) -> HighlightStatus {
    match outcome {
        highlight::Outcome::Highlighted => HighlightStatus::Highlighted,
        highlight::Outcome::NoGrammar => HighlightStatus::NoGrammar,
        highlight::Outcome::TooLarge { limit } => HighlightStatus::TooLarge { limit },
        highlight::Outcome::TimedOut => HighlightStatus::TimedOut,
        highlight::Outcome::Failed => HighlightStatus::Failed,
    }
}

/// Runs `side` on another thread while `main` runs on this one, and answers both (`None`
/// for `side` when no thread could be started, or it panicked: the caller does without).
/// A new file's page looks its names up this way while the file is highlighted, so a page
/// costs the longer of the two rather than their sum.
fn beside<A: Send, B>(side: impl FnOnce() -> A + Send, main: impl FnOnce() -> B) -> (B, Option<A>) {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("highlight-names".into())
            .spawn_scoped(scope, side);
        let main = main();
        (main, handle.ok().and_then(|h| h.join().ok()))
    })
}

struct Page {
    lines: Vec<HighlightedLine>,
    next: Option<u64>,
}

/// Lines from `first` while within `max_lines` and `max_bytes` (one line at least).
fn page_of(h: &highlight::Highlighted, first: u64, max_lines: u64, max_bytes: usize) -> Page {
    let total = h.line_count() as u64;
    let mut lines = Vec::new();
    let mut bytes = 0usize;
    let mut n = first;
    while n <= total && (n - first) < max_lines {
        let Some((text, runs)) = usize::try_from(n).ok().and_then(|i| h.line_runs(i)) else {
            break;
        };
        let len = text.len() + 1;
        if !lines.is_empty() && bytes + len > max_bytes {
            break;
        }
        bytes += len;
        lines.push(HighlightedLine {
            number: n,
            text: text.to_owned(),
            // Offsets fit: highlighted texts are at most `Limits::max_bytes`, and a plain
            // line over 4 GiB is not served.
            tokens: runs
                .map(|(range, class)| Token {
                    start: range.start as u32,
                    end: range.end as u32,
                    class: class.map(highlight::Class::css),
                    definition: None,
                })
                .collect(),
        });
        n += 1;
    }
    Page {
        lines,
        next: (n <= total).then_some(n),
    }
}

/// Whether a token's text may hold a definition's name: plain text, or a capture of names.
fn linkable(class: Option<&'static str>) -> bool {
    class.is_none_or(|css| {
        matches!(
            css,
            "hl-constant"
                | "hl-constructor"
                | "hl-function"
                | "hl-function-macro"
                | "hl-function-method"
                | "hl-module"
                | "hl-property"
                | "hl-type"
                | "hl-variable"
                | "hl-attribute"
        )
    })
}

/// The identifiers of `text` (ASCII letters, digits, `_`, not starting with a digit; two
/// bytes at least: one-letter names are locals), as byte ranges.
fn identifiers(text: &str) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    // A word glued to non-ASCII text is part of a longer name.
    let glued = |at: Option<&u8>| at.is_some_and(|b| !b.is_ascii());
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            if !word(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
            }
            if !bytes[start].is_ascii_digit()
                && i - start >= 2
                && i - start <= search::MAX_SYMBOL_BYTES
                && !glued(start.checked_sub(1).and_then(|p| bytes.get(p)))
                && !glued(bytes.get(i))
            {
                return Some(start..i);
            }
        }
        None
    })
}

/// Distinct names in order of first use, at most [`MAX_LINKED_NAMES`].
fn distinct<'a>(all: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut names = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for name in all {
        if names.len() >= MAX_LINKED_NAMES {
            break;
        }
        if seen.insert(name) {
            names.push(name);
        }
    }
    names
}

/// The names of the page's lines in a file's raw text (as [`page_of`] would cut it): before
/// the file is highlighted, so words of comments and strings too.
fn page_names(text: &str, first: u64, max_lines: u64, max_bytes: usize) -> Vec<&str> {
    let skip = usize::try_from(first.saturating_sub(1)).unwrap_or(usize::MAX);
    let take = usize::try_from(max_lines).unwrap_or(usize::MAX);
    let mut bytes = 0usize;
    let lines = text
        .split_inclusive('\n')
        .skip(skip)
        .take(take)
        .take_while(move |line| {
            let fits = bytes == 0 || bytes + line.len() <= max_bytes;
            bytes += line.len();
            fits
        });
    distinct(lines.flat_map(|line| identifiers(line).map(move |r| &line[r])))
}

/// The names of the page's tokens that may name a definition.
fn linkable_names(lines: &[HighlightedLine]) -> Vec<&str> {
    distinct(lines.iter().flat_map(|line| {
        line.pieces()
            .filter(|(_, t)| linkable(t.class))
            .flat_map(|(text, _)| identifiers(text).map(move |r| &text[r]))
    }))
}

/// Looks `names` up in the symbol table of the repository's indexed head, the kept lookups
/// first, within [`DEFINITIONS_BUDGET`]. No index, or a head that left retention: `None`.
fn look_up(inner: &crate::Inner, repo: &RepoName, names: &[&str]) -> Option<Known> {
    let indexes = inner.indexes().ok()?;
    let indexed = indexes.indexed_commit(repo.as_str())?;
    let deadline = Instant::now() + DEFINITIONS_BUDGET;
    // Held while the symbol table is read: the indexed commit stays retained (G-8).
    let _lease = crate::frame::lease_indexed(
        inner,
        repo.as_str(),
        &indexed,
        &budget::Budget::new(deadline, deadline),
    )?;
    let key = (repo.to_string(), indexed);
    let mut known = inner.definition_links.known(&key, names);
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !known.contains_key(*n))
        .collect();
    let found: Vec<(String, Option<std::sync::Arc<DefinitionLink>>)> = indexes
        .definition_sites(repo.as_str(), &missing, MAX_DEFINITION_TARGETS, deadline)
        // Indexed again meanwhile: its lines belong to another commit; link nothing new.
        .filter(|answer| answer.commit == key.1)
        .map(|answer| {
            let commit = answer.commit;
            missing
                .iter()
                .zip(answer.names)
                .map(|(name, sites)| {
                    let link = sites.map(|found| {
                        std::sync::Arc::new(DefinitionLink {
                            name: (*name).to_owned(),
                            targets: found
                                .sites
                                .into_iter()
                                .map(|site| DefinitionTarget {
                                    commit: commit.clone(),
                                    path: site.path,
                                    line: site.line,
                                    kind: site.kind.as_str(),
                                })
                                .collect(),
                            total: found.total,
                        })
                    });
                    ((*name).to_owned(), link)
                })
                .collect()
        })
        .unwrap_or_default();
    inner.definition_links.remember(&key, &found);
    known.extend(found);
    Some(known)
}

/// Links the page's names to their definitions (`looked_up`: lookups made while the file was
/// highlighted; names it lacks are looked up now) and splits tokens so each linked name is
/// one token. No index, a head that left retention, or the budget spent: fewer (or no)
/// links, never an error.
fn link_definitions(
    inner: &crate::Inner,
    repo: &RepoName,
    path: &str,
    lines: &mut [HighlightedLine],
    looked_up: Option<Known>,
) -> Vec<DefinitionLink> {
    let names = linkable_names(lines);
    let mut known = looked_up.unwrap_or_default();
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !known.contains_key(*n))
        .collect();
    if !missing.is_empty()
        && let Some(more) = look_up(inner, repo, &missing)
    {
        known.extend(more);
    }
    let links: Vec<DefinitionLink> = names
        .iter()
        .filter_map(|name| known.get(*name).cloned().flatten())
        .map(|link| DefinitionLink::clone(&link))
        .collect();
    if links.is_empty() {
        return links;
    }
    let index_of: HashMap<&str, u32> = links
        .iter()
        .enumerate()
        .map(|(i, link)| (link.name.as_str(), i as u32))
        .collect();
    for line in lines.iter_mut() {
        let mut split: Option<Vec<Token>> = None;
        for (i, token) in line.tokens.iter().enumerate() {
            let mut at = token.start as usize;
            let end = token.end as usize;
            if linkable(token.class) {
                let text = line.text.get(at..end).unwrap_or("");
                let base = at;
                for range in identifiers(text) {
                    let Some(&index) = index_of.get(&text[range.clone()]) else {
                        continue;
                    };
                    // The name where it is defined, its only definition: nothing to go to.
                    if let [only] = links[index as usize].targets.as_slice()
                        && only.path == path
                        && u64::from(only.line) == line.number
                    {
                        continue;
                    }
                    let out = split.get_or_insert_with(|| line.tokens[..i].to_vec());
                    let (s, e) = (base + range.start, base + range.end);
                    if s > at {
                        out.push(Token {
                            start: at as u32,
                            end: s as u32,
                            ..*token
                        });
                    }
                    out.push(Token {
                        start: s as u32,
                        end: e as u32,
                        definition: Some(index),
                        ..*token
                    });
                    at = e;
                }
            }
            if let Some(out) = split.as_mut()
                && at < end
            {
                out.push(Token {
                    start: at as u32,
                    ..*token
                });
            }
        }
        if let Some(tokens) = split {
            line.tokens = tokens;
        }
    }
    links
}

/// Definition lookups of names, per (repository, indexed commit): a name links to the same
/// definitions until the repository is indexed at another commit, so a page viewed again (or
/// another file of the repository) looks up only names not seen yet.
#[derive(Default)]
pub(crate) struct LinkCache {
    entries: std::sync::Mutex<LinkEntries>,
}

type LinkKey = (String, String);
type Known = HashMap<String, Option<std::sync::Arc<DefinitionLink>>>;

#[derive(Default)]
struct LinkEntries {
    by_index: HashMap<LinkKey, Known>,
    names: usize,
}

/// Names whose lookups [`LinkCache`] keeps at most (then it starts over).
const MAX_CACHED_NAMES: usize = 200_000;

impl LinkCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, LinkEntries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The kept lookups of `names` at `key`.
    fn known(&self, key: &LinkKey, names: &[&str]) -> Known {
        let entries = self.lock();
        let Some(kept) = entries.by_index.get(key) else {
            return Known::new();
        };
        names
            .iter()
            .filter_map(|name| {
                kept.get(*name)
                    .map(|link| ((*name).to_owned(), link.clone()))
            })
            .collect()
    }

    /// Keeps new lookups at `key`; lookups at an older indexed commit of the repository go.
    fn remember(&self, key: &LinkKey, found: &[(String, Option<std::sync::Arc<DefinitionLink>>)]) {
        if found.is_empty() {
            return;
        }
        let mut entries = self.lock();
        if entries.names + found.len() > MAX_CACHED_NAMES {
            *entries = LinkEntries::default();
        }
        let stale: Vec<LinkKey> = entries
            .by_index
            .keys()
            .filter(|(repo, commit)| *repo == key.0 && *commit != key.1)
            .cloned()
            .collect();
        for old in stale {
            if let Some(gone) = entries.by_index.remove(&old) {
                entries.names -= gone.len();
            }
        }
        let kept = entries.by_index.entry(key.clone()).or_default();
        let before = kept.len();
        kept.extend(found.iter().cloned());
        let added = kept.len() - before;
        entries.names += added;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34, point 1: the names a page may link are identifiers of two bytes or more,
    /// not starting with a digit, not part of a longer non-ASCII word.
    #[test]
    fn identifiers_skip_short_numeric_and_glued_words() {
        let text = "let x = total_cents(a1, 9lives, über_x, naïve, item_2);";
        let found: Vec<&str> = identifiers(text).map(|r| &text[r]).collect();
        assert_eq!(found, ["let", "total_cents", "a1", "item_2"]);
    }

    /// The names looked up while a new file is highlighted: those of the page's lines (as
    /// `page_of` cuts them: from `first`, at most `max_lines`, within `max_bytes` but one
    /// line at least), distinct, in order of first use.
    #[test]
    fn page_names_are_the_page_lines_names_in_order() {
        let text = "fn alpha() {}\n// beta gamma\nfn alpha2() { beta() }\nfn delta() {}\n";
        assert_eq!(
            page_names(text, 2, 2, usize::MAX),
            ["beta", "gamma", "fn", "alpha2"]
        );
        assert_eq!(page_names(text, 1, 10, 5), ["fn", "alpha"]);
        assert_eq!(
            page_names(text, 1, 10, 30),
            ["fn", "alpha", "beta", "gamma"]
        );
        assert!(page_names(text, 9, 10, usize::MAX).is_empty());
    }
}
