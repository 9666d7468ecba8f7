//! Paging: where a page starts (the opaque cursor, bound to the request and the generations it
//! was made from), and one page cut from a ranked list, its hits grouped by repository with
//! their snippets, and the cursor of the next page.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::SearchError;
use crate::rank::{Ranked, RankedList};
use crate::request::{Hit, PathOnly, RepoHits};
use crate::store::{DocKind, Generation};

/// Most hits per page.
pub const MAX_LIMIT: usize = 1000;
/// Longest snippet, in characters.
pub const SNIPPET_CHARS: usize = 200;

/// The content of a cursor (hex of JSON: opaque to callers).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// Hits already returned.
    pub offset: u64,
    /// Hash of the query and its filters.
    pub request: String,
    /// (repository, commit, generation) of every searched repository.
    pub generations: Vec<(String, String, u64)>,
}

impl Cursor {
    pub(crate) fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        json.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub(crate) fn decode(text: &str) -> Result<Cursor, SearchError> {
        let text = text.trim();
        if !text.len().is_multiple_of(2) || text.len() > 1 << 16 {
            return Err(SearchError::InvalidCursor);
        }
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(text.get(i..i + 2).unwrap_or("zz"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| SearchError::InvalidCursor)?;
        serde_json::from_slice(&bytes).map_err(|_| SearchError::InvalidCursor)
    }
}

/// The offset a request's page starts at: 0 without a cursor; a cursor is refused when it
/// was made for another request (`request` is the cursor's form of its hash) or over other
/// generations than the ones pinned now.
pub(crate) fn start(
    cursor: Option<&str>,
    request: &str,
    generations: &[(String, String, u64)],
) -> Result<u64, SearchError> {
    let Some(text) = cursor else {
        return Ok(0);
    };
    let cursor = Cursor::decode(text)?;
    if cursor.request != request {
        return Err(SearchError::InvalidCursor);
    }
    if cursor.generations != generations {
        return Err(SearchError::CursorExpired);
    }
    Ok(cursor.offset)
}

/// One page of hits and the cursor of the next one.
pub(crate) struct Page {
    pub repos: Vec<RepoHits>,
    pub next_cursor: Option<String>,
}

/// The `limit` hits of `list` from `offset`, grouped by repository in rank order of each
/// repository's first hit; the next cursor carries `request` (the hash) and `generations`.
pub(crate) fn cut(
    list: &RankedList,
    offset: u64,
    limit: usize,
    pinned: &[(String, Arc<Generation>)],
    request: String,
    generations: Vec<(String, String, u64)>,
) -> Page {
    let total = list.hits.len() as u64;
    let from = usize::try_from(offset).unwrap_or(usize::MAX);
    let page: &[Ranked] = list
        .hits
        .get(from..)
        .map_or(&[], |rest| &rest[..rest.len().min(limit)]);
    let end = offset + page.len() as u64;
    let next_cursor = (end < total).then(|| {
        Cursor {
            offset: end,
            request,
            generations,
        }
        .encode()
    });
    Page {
        repos: by_repo(page, pinned),
        next_cursor,
    }
}

/// The hits of a page grouped by repository, in order of each repository's first hit.
fn by_repo(page: &[Ranked], pinned: &[(String, Arc<Generation>)]) -> Vec<RepoHits> {
    let mut order: Vec<usize> = Vec::new();
    let mut grouped: BTreeMap<usize, Vec<Hit>> = BTreeMap::new();
    for ranked in page {
        let repo = ranked.repo();
        if !grouped.contains_key(&repo) {
            order.push(repo);
        }
        grouped
            .entry(repo)
            .or_default()
            .push(to_hit(ranked, &pinned[repo].1));
    }
    order
        .into_iter()
        .map(|repo| RepoHits {
            repo: pinned[repo].0.clone(),
            commit: pinned[repo].1.meta.commit.clone(),
            hits: grouped.remove(&repo).unwrap_or_default(),
        })
        .collect()
}

/// A ranked hit as the caller sees it: its path, and for a line its number and snippet.
pub(crate) fn to_hit(ranked: &Ranked, generation: &Generation) -> Hit {
    match ranked {
        Ranked::FileName { doc, .. } => {
            let doc = &generation.docs[*doc as usize];
            Hit::FileName {
                path: doc.path.clone(),
                path_only: match doc.kind {
                    DocKind::Text => None,
                    DocKind::TooLarge => Some(PathOnly::TooLarge),
                    DocKind::Binary => Some(PathOnly::Binary),
                    DocKind::NotUtf8 => Some(PathOnly::NotUtf8),
                },
            }
        }
        Ranked::Line { hit, .. } => {
            let doc = &generation.docs[hit.doc as usize];
            let text = generation.text(doc);
            Hit::Line {
                path: doc.path.clone(),
                line: u64::from(hit.line),
                snippet: snippet(&text[hit.start..hit.end], hit.at),
                definition: hit.definition,
            }
        }
    }
}

/// Cuts a snippet of at most [`SNIPPET_CHARS`] characters around the match.
fn snippet(line: &[u8], at: usize) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches(['\r', '\n']);
    let trimmed = text.trim_start();
    let lead = text.len() - trimmed.len();
    if trimmed.chars().count() <= SNIPPET_CHARS {
        return trimmed.trim_end().to_owned();
    }
    // Start a little before the match so that it shows with some context.
    let from = trimmed.floor_char_boundary(at.saturating_sub(lead).saturating_sub(40));
    trimmed[from..].chars().take(SNIPPET_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_bounded() {
        let long = format!("{}needle{}", "é".repeat(300), "x".repeat(300));
        let s = snippet(long.as_bytes(), 600);
        assert!(s.chars().count() <= SNIPPET_CHARS);
        assert!(s.contains("needle"));
    }
}
