//! Paging: where a page starts (the opaque cursor, bound to the request and the generations it
//! was made from: the hits returned before it and the last of them), and one page of a ranked
//! list, its hits grouped by repository with their snippets, and the cursor of the next page.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::SearchError;
use crate::rank::{Pos, Ranked, RankedList, Tier};
use crate::request::{Hit, PathOnly, RepoHits};
use crate::snippet::snippet;
use crate::store::{DocKind, Generation};

/// Most hits per page.
pub const MAX_LIMIT: usize = 1000;

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
        repos: by_repo(page, &list.marks, pinned),
        next_cursor,
    }
}

/// The hits of a page grouped by repository, in order of each repository's first hit; `marks`
/// are theirs, hit by hit.
fn by_repo(
    page: &[Ranked],
    marks: &[Vec<Range<u32>>],
    pinned: &[(String, Arc<Generation>)],
) -> Vec<RepoHits> {
    let mut order: Vec<usize> = Vec::new();
    let mut grouped: BTreeMap<usize, Vec<Hit>> = BTreeMap::new();
    for (index, ranked) in page.iter().enumerate() {
        let repo = ranked.repo();
        if !grouped.contains_key(&repo) {
            order.push(repo);
        }
        grouped.entry(repo).or_default().push(to_hit(
            ranked,
            &pinned[repo].1,
            marks.get(index).cloned().unwrap_or_default(),
        ));
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

/// A ranked hit as the caller sees it: its path, and for a line its number, snippet and the
/// `marks` in it ([`RankedList::marks`](crate::rank::RankedList::marks)).
pub(crate) fn to_hit(ranked: &Ranked, generation: &Generation, marks: Vec<Range<u32>>) -> Hit {
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
                marks,
            }
        }
    }
}

#[cfg(test)]
// `vec![a..b]` is a list of one mark (a byte range), not the range's numbers.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::snippet::{MAX_MARKS, SNIPPET_CHARS, marks_fit, snippet_marked};
    use regex::bytes::{Regex, RegexBuilder};

    fn compile(pattern: &str, case_sensitive: bool) -> Regex {
        RegexBuilder::new(pattern)
            .case_insensitive(!case_sensitive)
            .multi_line(true)
            .build()
            .unwrap()
    }

    /// The marked texts of a line hit, checked to be valid marks of its snippet.
    fn marked(line: &str, pattern: &str, case_sensitive: bool) -> Vec<String> {
        let regex = compile(pattern, case_sensitive);
        let at = regex.find(line.as_bytes()).map_or(0, |m| m.start());
        let (snippet, marks) = snippet_marked(line.as_bytes(), at, &regex);
        assert!(marks_fit(&snippet, &marks), "{marks:?} in {snippet:?}");
        marks
            .iter()
            .map(|m| snippet[m.start as usize..m.end as usize].to_owned())
            .collect()
    }

    /// Issue 34 point 8: marks are the matches of the regex on the whole line, so anchors
    /// mean the line's start, not the snippet's (which drops the indentation).
    #[test]
    fn marks_anchor_at_the_line() {
        assert_eq!(marked("    fn main() { fn x }", r"^\s*fn", true), ["fn"]);
        assert_eq!(marked("a a a", "^a", true), ["a"]);
        assert_eq!(marked("a a a", "a$", true), ["a"]);
        let (snippet, marks) = snippet_marked(b"  a a a", 2, &compile("a$", true));
        assert_eq!((snippet.as_str(), marks), ("a a a", vec![4..5]));
    }

    /// A word boundary is judged on the line: a snippet cut right before `foo` does not
    /// make that `foo` a word (the line has `x` before it).
    #[test]
    fn marks_word_boundaries_on_the_line() {
        assert_eq!(marked("foo_bar foo", r"\bfoo\b", true), ["foo"]);
        let line = format!(
            "{}foo {} foo {}",
            "x".repeat(300),
            "y".repeat(35),
            "z".repeat(300)
        );
        let regex = compile(r"\bfoo\b", true);
        let at = regex.find(line.as_bytes()).unwrap().start();
        assert_eq!(at, 340);
        let (snippet, marks) = snippet_marked(line.as_bytes(), at, &regex);
        assert!(snippet.starts_with("foo y"), "{snippet}");
        assert_eq!(marks, vec![40..43]);
    }

    /// Case-insensitive matches of other bytes than the query's: the Kelvin sign is a `k`,
    /// `ſ` an `s` (Unicode simple case folding), marked whole.
    #[test]
    fn marks_case_folded_look_alikes() {
        assert_eq!(
            marked("K k \u{212A} x ſ S", "k", false),
            ["K", "k", "\u{212A}"]
        );
        assert_eq!(marked("ſ S s", "s", false), ["ſ", "S", "s"]);
        assert_eq!(marked("K k \u{212A}", "k", true), ["k"]);
    }

    /// A match that runs past the snippet's 200 characters is marked up to its end; one
    /// beyond is not marked; offsets count bytes of multibyte text before the match.
    #[test]
    fn marks_cut_by_the_window_and_after_multibyte_text() {
        let line = format!("{}{}", "a".repeat(50), "b".repeat(300));
        let regex = compile("b+", true);
        let (snippet, marks) = snippet_marked(line.as_bytes(), 50, &regex);
        assert_eq!(snippet.len(), SNIPPET_CHARS);
        assert_eq!(marks, vec![40..200]);
        let line = format!("{}needle{}needle", "é".repeat(300), "é".repeat(300));
        let regex = compile("needle", true);
        let (snippet, marks) = snippet_marked(line.as_bytes(), 600, &regex);
        assert_eq!(snippet.chars().count(), SNIPPET_CHARS);
        // The window starts 40 bytes (20 `é`) before the match.
        assert_eq!(marks, vec![40..46]);
        assert_eq!(&snippet[40..46], "needle");
        assert_eq!(marked("\t ééé needle", "needle", true), ["needle"]);
        let (_, marks) = snippet_marked("\t ééé needle".as_bytes(), 9, &regex);
        assert_eq!(marks, vec![7..13]);
    }

    /// Several matches of a line, each its own mark (adjacent ones too, as `git grep -o`
    /// lists them), at most [`MAX_MARKS`]; empty matches none; a byte-level match inside a
    /// character widened to the character.
    #[test]
    fn marks_several_empty_and_partial_matches() {
        assert_eq!(
            marked("fn a() { fn b() }", r"fn \w+", true),
            ["fn a", "fn b"]
        );
        assert_eq!(marked("a.b", r"\w", true), ["a", "b"]);
        assert_eq!(marked("axa", "x*", true), ["x"]);
        assert!(marked("abc", "^", true).is_empty());
        assert_eq!(marked(&"x".repeat(40), "x", true).len(), MAX_MARKS);
        assert_eq!(marked("aé", r"(?-u:\xA9)", true), ["é"]);
        // Not UTF-8: a lossy snippet, no marks.
        let (snippet, marks) = snippet_marked(b"a\xFFneedle", 2, &compile("needle", true));
        assert_eq!((snippet.as_str(), marks.len()), ("a\u{FFFD}needle", 0));
    }

    #[test]
    fn marks_that_do_not_fit_are_refused() {
        assert!(marks_fit("abc", &[0..1, 1..3]));
        assert!(!marks_fit("abc", &[0..2, 1..3]));
        assert!(!marks_fit("abc", &[2..4]));
        assert!(!marks_fit("abc", &[1..1]));
        assert!(!marks_fit("é", &[0..1]));
        let many: Vec<Range<u32>> = (0..17).map(|i| i..i + 1).collect();
        assert!(marks_fit(&"x".repeat(40), &many[..16]));
        assert!(!marks_fit(&"x".repeat(40), &many));
    }

    #[test]
    fn snippets_are_bounded() {
        let long = format!("{}needle{}", "é".repeat(300), "x".repeat(300));
        let s = snippet(long.as_bytes(), 600);
        assert!(s.chars().count() <= SNIPPET_CHARS);
        assert!(s.contains("needle"));
    }
}
