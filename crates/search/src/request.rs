//! A search request and its answer: the request, its stable identity (the canonical encoding
//! behind the result cache's key and the cursor's hash), and the page of hits it gets back.

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::Duration;

/// A search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchRequest {
    /// Literal text, or a Rust `regex` pattern when `regex` is set. 1..=1000 bytes.
    pub query: String,
    /// Repositories to search, already permission-filtered by the caller; each searched at its
    /// current generation. Repositories without an index are listed in
    /// [`SearchResults::not_indexed`].
    pub repos: Vec<String>,
    /// Glob over repository-relative paths like `docs/**/*.md` (globset semantics; `*` does
    /// not cross `/`).
    pub path: Option<String>,
    /// Language name, mapped by file extension (table in the `lang` module docs; see
    /// [`known_langs`](crate::known_langs)).
    pub lang: Option<String>,
    /// false: the query is literal text.
    pub regex: bool,
    /// false: case-insensitive (Unicode simple case folding).
    pub case_sensitive: bool,
    /// Hits per page, clamped to 1..=[`MAX_LIMIT`](crate::MAX_LIMIT).
    pub limit: usize,
    /// Opaque, from a previous answer's `next_cursor` (same query and filters).
    pub cursor: Option<String>,
    /// Count the query's hits exactly up to [`COUNT_CAP`](crate::COUNT_CAP) (costs the
    /// verification of every candidate up to there); without it, the total is what the
    /// page's own work found. Not part of the request's identity: the hits are the same.
    pub count: bool,
}

/// One page of hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResults {
    /// Hits grouped by repository, in rank order of each repository's first hit on the page.
    pub repos: Vec<RepoHits>,
    /// Cursor of the next page, if more hits exist.
    pub next_cursor: Option<String>,
    /// Query statistics.
    pub stats: SearchStats,
    /// Requested repositories that have no index yet (not searched).
    pub not_indexed: Vec<String>,
}

/// The hits of one repository on a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoHits {
    /// Repository name.
    pub repo: String,
    /// Full SHA of the commit every hit was found in.
    pub commit: String,
    /// Hits in rank order.
    pub hits: Vec<Hit>,
}

/// One hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hit {
    /// A line matching the query.
    Line {
        /// Repository-relative path.
        path: String,
        /// 1-based line number.
        line: u64,
        /// The line (trimmed), cut to at most [`SNIPPET_CHARS`](crate::SNIPPET_CHARS) characters around the match.
        snippet: String,
        /// Whether the symbol table says the line defines the searched identifier (literal
        /// queries that are an identifier) or, for
        /// [`Indexes::references`](crate::Indexes::references), the name: such lines rank
        /// right after the file names.
        definition: bool,
        /// Byte ranges in `snippet` of the query's matches on the line, found with the
        /// regex the search verified the line with (on the whole line, then clipped to the
        /// snippet): non-empty, in order, disjoint, on character boundaries, at most
        /// [`MAX_MARKS`](crate::MAX_MARKS). For highlighting; empty when the line is not
        /// UTF-8.
        marks: Vec<Range<u32>>,
    },
    /// A path matching the query (the file itself may be path-only).
    FileName {
        /// Repository-relative path.
        path: String,
        /// Why the file's content is not searchable, when it is indexed by path only.
        path_only: Option<PathOnly>,
    },
}

/// Why a file is indexed by path only (its lines are never hits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathOnly {
    /// Larger than [`IndexConfig::max_file_bytes`](crate::IndexConfig::max_file_bytes).
    TooLarge,
    /// A NUL byte in its first 8000 bytes.
    Binary,
    /// NUL-free but not valid UTF-8.
    NotUtf8,
}

impl PathOnly {
    /// A short phrase for answers: `binary`, `not UTF-8`, `over the size limit`.
    pub fn describe(self) -> &'static str {
        match self {
            PathOnly::TooLarge => "over the size limit",
            PathOnly::Binary => "binary",
            PathOnly::NotUtf8 => "not UTF-8",
        }
    }
}

/// Query statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Text documents selected by the trigram index for the line tier (after path and lang
    /// filters); 0 when the page was full without it.
    pub candidate_files: u64,
    /// Documents whose text was run through the regex.
    pub files_verified: u64,
    /// Wall time of the search.
    pub elapsed: Duration,
    /// Documents in the searched generations.
    pub documents: u64,
    /// Hits of the whole query (all pages) as far as known: those of the pages before, this
    /// page's, and those its work found beyond it. Exact unless
    /// [`total_is_lower_bound`](SearchStats::total_is_lower_bound); with
    /// [`SearchRequest::count`], exact up to [`COUNT_CAP`](crate::COUNT_CAP).
    pub total_hits: u64,
    /// True when the query may have more hits than `total_hits` ("at least N"): the search
    /// stopped once its page was full (or, counting, at the cap). Paging on still reaches
    /// every hit.
    pub total_is_lower_bound: bool,
    /// The same as `total_is_lower_bound` (its name before S-10, kept for callers).
    pub truncated: bool,
    /// True when the page came from the result cache (the same page asked again;
    /// `files_verified` is 0 then, `candidate_files` is that of the search that filled it).
    pub cached: bool,
}

impl SearchRequest {
    /// A hash of everything that defines the query's hit list (query, `regex`,
    /// `case_sensitive`, `path`, `lang`, and the set of repositories; not `limit` nor
    /// `cursor`). Stable across builds, platforms and Rust releases (FNV-1a 64 over a
    /// canonical encoding), so cursors, which carry it, survive a server upgrade.
    pub fn stable_hash(&self) -> u64 {
        fnv1a64(&canonical_request(self))
    }
}

/// The canonical encoding of what defines a request's hit list: a version tag, then every
/// field length-prefixed (u64 little-endian), options tagged, repositories sorted and deduplicated.
/// Any change here changes every cursor (they are then refused as invalid, once).
pub(crate) fn canonical_request(request: &SearchRequest) -> Vec<u8> {
    fn bytes(out: &mut Vec<u8>, value: &[u8]) {
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
        out.extend_from_slice(value);
    }
    fn option(out: &mut Vec<u8>, value: Option<&str>) {
        match value {
            None => out.push(0),
            Some(value) => {
                out.push(1);
                bytes(out, value.as_bytes());
            }
        }
    }
    let mut out = Vec::with_capacity(64 + request.query.len());
    out.extend_from_slice(b"csg-search-request/1\n");
    bytes(&mut out, request.query.as_bytes());
    out.push(u8::from(request.regex));
    out.push(u8::from(request.case_sensitive));
    option(&mut out, request.path.as_deref());
    option(&mut out, request.lang.as_deref());
    let repos: BTreeSet<&str> = request.repos.iter().map(String::as_str).collect();
    out.extend_from_slice(&(repos.len() as u64).to_le_bytes());
    for repo in repos {
        bytes(&mut out, repo.as_bytes());
    }
    out
}

/// FNV-1a, 64 bits.
fn fnv1a64(data: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in data {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The cursor's form of [`SearchRequest::stable_hash`].
pub(crate) fn request_hash(request: &SearchRequest, references: bool) -> String {
    let hash = request.stable_hash();
    // A references cursor is not a search cursor for the same regex, nor the reverse.
    let hash = if references { !hash } else { hash };
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn canonical_request_ignores_page_and_repo_order() {
        let a = SearchRequest {
            query: "q".into(),
            repos: vec!["b/b".into(), "a/a".into(), "b/b".into()],
            limit: 10,
            ..SearchRequest::default()
        };
        let b = SearchRequest {
            repos: vec!["a/a".into(), "b/b".into()],
            limit: 20,
            cursor: Some("x".into()),
            ..a.clone()
        };
        assert_eq!(canonical_request(&a), canonical_request(&b));
        // Fields cannot run into each other.
        let c = SearchRequest {
            path: Some(String::new()),
            ..b.clone()
        };
        assert_ne!(canonical_request(&b), canonical_request(&c));
    }
}
