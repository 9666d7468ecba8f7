//! The file page's operations (issue 34): lines of a file at a commit with syntax
//! highlighting (and, on request, links from names to their definitions), and a file's raw
//! bytes. Both are framed like `read` (alias, access, lease, statistics as `read`) and answer
//! plain Rust types.
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

use gitstore::{CommitId, RepoName, RepoPath};

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

/// One line: its tokens are exactly its text, without the line end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HighlightedLine {
    pub number: u64,
    pub tokens: Vec<Token>,
}

/// A run of one line with one class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Repository data, not escaped.
    pub text: String,
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
    pub bytes: Vec<u8>,
    /// A NUL in the first 8 KiB or not UTF-8 (the rule that keeps a file from `read`).
    pub binary: bool,
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
        self.framed_blocking(ctx, Op::READ, repo, move |call, inner| {
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
            let highlighted = inner.highlights.highlight(grammar, text.as_str());
            drop(text);
            let first = start_line.unwrap_or(1).max(1);
            let total = highlighted.line_count() as u64;
            if first > total.max(1) {
                return Err(ServiceError::invalid(format!(
                    "start_line {first} is past the end of {path} ({total} lines)"
                )));
            }
            let max_lines = max_lines.unwrap_or(DEFAULT_HIGHLIGHT_LINES).max(1);
            let max_bytes = max_bytes.unwrap_or(inner.config.read_budget);
            let mut page = page_of(&highlighted, first, max_lines, max_bytes);
            let mut links = Vec::new();
            if definitions && highlighted.outcome() == highlight::Outcome::Highlighted {
                links = link_definitions(inner, &repo_name, path.as_str(), &mut page.lines);
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
    /// refused from its header, before it is read). The same checks as `read`.
    pub async fn raw(&self, ctx: &CallContext, req: RawRequest) -> Result<RawAnswer, ServiceError> {
        let RawRequest {
            repo,
            revision,
            path,
        } = req;
        self.framed_blocking(ctx, Op::READ, repo, move |call, inner| {
            let lease = call.lease(inner, revision.as_deref())?;
            let path = RepoPath::parse(&path)?;
            let bytes = match lease.read_bytes(&path, Some(RAW_MAX_BYTES)) {
                Ok(bytes) => bytes,
                Err(gitstore::Error::TooLarge { size, limit, .. }) => {
                    return Err(ServiceError::invalid(format!(
                        "`{path}` is {size} bytes, over the {limit} bytes the raw view serves: clone the repository to get it"
                    )));
                }
                Err(e) => return Err(e.into()),
            };
            let binary = bytes[..bytes.len().min(BINARY_PROBE)].contains(&0)
                || std::str::from_utf8(&bytes).is_err();
            Ok(RawAnswer {
                repo: lease.repo().to_string(),
                commit: lease.commit().to_string(),
                path: path.to_string(),
                bytes,
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
        let Some(tokens) = usize::try_from(n).ok().and_then(|i| h.line(i)) else {
            break;
        };
        let len: usize = tokens.iter().map(|t| t.text.len()).sum::<usize>() + 1;
        if !lines.is_empty() && bytes + len > max_bytes {
            break;
        }
        bytes += len;
        lines.push(HighlightedLine {
            number: n,
            tokens: tokens
                .into_iter()
                .map(|t| Token {
                    text: t.text.to_owned(),
                    class: t.class.map(highlight::Class::css),
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
fn identifiers(text: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if word(bytes[i]) {
            let start = i;
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
            }
            // A word glued to non-ASCII text is part of a longer name: skip it.
            let glued = |at: Option<&u8>| at.is_some_and(|b| !b.is_ascii());
            if !bytes[start].is_ascii_digit()
                && i - start >= 2
                && i - start <= search::MAX_SYMBOL_BYTES
                && !glued(start.checked_sub(1).and_then(|p| bytes.get(p)))
                && !glued(bytes.get(i))
            {
                out.push(start..i);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Looks the page's names up in the symbol table of the repository's indexed head and splits
/// tokens so each linked name is one token. No index, a head that left retention, or the
/// budget spent: fewer (or no) links, never an error.
fn link_definitions(
    inner: &crate::Inner,
    repo: &RepoName,
    path: &str,
    lines: &mut [HighlightedLine],
) -> Vec<DefinitionLink> {
    let Ok(indexes) = inner.indexes() else {
        return Vec::new();
    };
    let Some(indexed) = indexes.indexed_commit(repo.as_str()) else {
        return Vec::new();
    };
    // Held while the symbol table is read: the indexed commit stays retained (G-8).
    let Some(_lease) = CommitId::parse(&indexed).and_then(|c| inner.store.lease(repo, &c).ok())
    else {
        return Vec::new();
    };
    // The page's distinct names, in order of first use.
    let mut names: Vec<&str> = Vec::new();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    'lines: for line in lines.iter() {
        for token in line.tokens.iter().filter(|t| linkable(t.class)) {
            for range in identifiers(&token.text) {
                if names.len() >= MAX_LINKED_NAMES {
                    break 'lines;
                }
                let name = &token.text[range];
                if seen.insert(name) {
                    names.push(name);
                }
            }
        }
    }
    let key = (repo.to_string(), indexed);
    let mut known = inner.definition_links.known(&key, &names);
    let started = Instant::now();
    let mut found = Vec::new();
    for name in names.iter().filter(|n| !known.contains_key(**n)) {
        if started.elapsed() > DEFINITIONS_BUDGET {
            break;
        }
        let link = indexes
            .definitions(&search::DefinitionsRequest {
                symbol: (*name).to_owned(),
                repos: vec![key.0.clone()],
                path: None,
                lang: None,
                limit: MAX_DEFINITION_TARGETS,
            })
            .ok()
            .and_then(|answer| {
                let targets: Vec<DefinitionTarget> = answer
                    .definitions
                    .into_iter()
                    .map(|d| DefinitionTarget {
                        commit: d.commit,
                        path: d.path,
                        line: d.symbol.line,
                        kind: d.symbol.kind.as_str(),
                    })
                    .collect();
                (!targets.is_empty()).then(|| {
                    std::sync::Arc::new(DefinitionLink {
                        name: (*name).to_owned(),
                        targets,
                        total: answer.total,
                    })
                })
            });
        found.push(((*name).to_owned(), link));
    }
    inner.definition_links.remember(&key, &found);
    known.extend(found);
    let mut links = Vec::new();
    let mut looked_up: HashMap<String, Option<u32>> = HashMap::new();
    for name in names {
        let index = known.get(name).cloned().flatten().map(|link| {
            links.push(DefinitionLink::clone(&link));
            (links.len() - 1) as u32
        });
        looked_up.insert(name.to_owned(), index);
    }
    if links.is_empty() {
        return links;
    }
    for line in lines.iter_mut() {
        let tokens = std::mem::take(&mut line.tokens);
        for token in tokens {
            if !linkable(token.class) {
                line.tokens.push(token);
                continue;
            }
            let mut at = 0;
            for range in identifiers(&token.text) {
                let Some(Some(index)) = looked_up.get(&token.text[range.clone()]) else {
                    continue;
                };
                // The name where it is defined, its only definition: nothing to go to.
                let link = &links[*index as usize];
                if let [only] = link.targets.as_slice()
                    && only.path == path
                    && u64::from(only.line) == line.number
                {
                    continue;
                }
                if range.start > at {
                    line.tokens.push(Token {
                        text: token.text[at..range.start].to_owned(),
                        class: token.class,
                        definition: None,
                    });
                }
                line.tokens.push(Token {
                    text: token.text[range.clone()].to_owned(),
                    class: token.class,
                    definition: Some(*index),
                });
                at = range.end;
            }
            if at == 0 {
                line.tokens.push(token);
            } else if at < token.text.len() {
                line.tokens.push(Token {
                    text: token.text[at..].to_owned(),
                    class: token.class,
                    definition: None,
                });
            }
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
