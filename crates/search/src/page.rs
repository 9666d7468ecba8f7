//! Paging: where a page starts (the opaque cursor, bound to the request and the generations it
//! was made from: the hits returned before it and the last of them), and one page of a ranked
//! list, its hits grouped by repository with their snippets, and the cursor of the next page.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::SearchError;
use crate::rank::{Pos, Ranked, RankedList, Tier};
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
    /// The last hit returned: the next page starts after it (S-10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<After>,
}

/// A hit as a cursor names it: the same in one index set and in a merge of parts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct After {
    /// [`Tier::number`].
    pub tier: u8,
    pub repo: String,
    pub path: String,
    /// 0 for a file-name hit.
    pub line: u64,
}

impl After {
    /// The last hit of a page as a cursor names it.
    fn of(ranked: &Ranked, pinned: &[(String, Arc<Generation>)]) -> After {
        let (repo, generation) = &pinned[ranked.repo()];
        let (doc, line) = match ranked {
            Ranked::FileName { doc, .. } => (*doc, 0),
            Ranked::Line { hit, .. } => (hit.doc, u64::from(hit.line)),
        };
        After {
            tier: ranked.tier().number(),
            repo: repo.clone(),
            path: generation.docs[doc as usize].path.clone(),
            line,
        }
    }

    /// Its place in the ranking of `pinned` (which the cursor's generations are).
    pub(crate) fn pos(&self, pinned: &[(String, Arc<Generation>)]) -> Result<Pos, SearchError> {
        let tier = Tier::from_number(self.tier).ok_or(SearchError::InvalidCursor)?;
        let repo = pinned
            .binary_search_by(|(name, _)| name.as_str().cmp(&self.repo))
            .map_err(|_| SearchError::InvalidCursor)?;
        let generation = &pinned[repo].1;
        let doc = generation
            .doc_by_path(&self.path)
            .ok_or(SearchError::InvalidCursor)?;
        Ok(Pos {
            tier,
            rank: generation.docs[doc as usize].rank,
            repo,
            doc,
            line: u32::try_from(self.line).map_err(|_| SearchError::InvalidCursor)?,
        })
    }
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

/// Where a request's page starts: the hits returned before it and the last of them (0 and
/// none without a cursor); a cursor is refused when it was made for another request
/// (`request` is the cursor's form of its hash) or over other generations than the ones
/// pinned now.
pub(crate) fn start(
    cursor: Option<&str>,
    request: &str,
    generations: &[(String, String, u64)],
) -> Result<(u64, Option<After>), SearchError> {
    let Some(text) = cursor else {
        return Ok((0, None));
    };
    let cursor = Cursor::decode(text)?;
    if cursor.request != request {
        return Err(SearchError::InvalidCursor);
    }
    if cursor.generations != generations {
        return Err(SearchError::CursorExpired);
    }
    if cursor.offset > 0 && cursor.after.is_none() {
        return Err(SearchError::InvalidCursor);
    }
    Ok((cursor.offset, cursor.after))
}

/// One page of hits and the cursor of the next one.
pub(crate) struct Page {
    pub repos: Vec<RepoHits>,
    pub next_cursor: Option<String>,
}

/// The hits of `list` (a page that starts after `offset` hits), grouped by repository in
/// rank order of each repository's first hit; the next cursor, when more hits follow,
/// carries `request` (the hash), `generations` and the page's last hit.
pub(crate) fn cut(
    list: &RankedList,
    offset: u64,
    pinned: &[(String, Arc<Generation>)],
    request: String,
    generations: Vec<(String, String, u64)>,
) -> Page {
    let page: &[Ranked] = &list.hits;
    let end = offset + page.len() as u64;
    let next_cursor = page.last().filter(|_| list.more).map(|last| {
        Cursor {
            offset: end,
            request,
            generations,
            after: Some(After::of(last, pinned)),
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
