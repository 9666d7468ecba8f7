//! Query planning: a request's query checked, compiled into the regex that verifies lines and
//! the trigram query that selects candidate documents, and its `path` and `lang` filters.

use globset::{GlobBuilder, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::{Capture, Hir, HirKind, Look, Repetition};

use crate::error::SearchError;
use crate::lang::LangFilter;
use crate::request::SearchRequest;
use crate::store::Doc;
use crate::trigram::{TrigramQuery, plan};

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1000;
/// Compiled-size limit of a regular expression (and of its lazy DFA cache).
pub const REGEX_SIZE_LIMIT: usize = 8 << 20;

/// A query ready to run.
pub(crate) struct Compiled {
    pub regex: Regex,
    /// For a regular expression, the same pattern without Unicode mode, when it compiles:
    /// on ASCII-only text it matches exactly what `regex` matches (`\w`, `\d`, `\s`, `\b`,
    /// `.` and case folding differ only on non-ASCII bytes), and unlike `regex` it runs on
    /// the lazy DFA even with word boundaries, so verification uses it for ASCII documents.
    pub ascii: Option<Regex>,
    pub plan: TrigramQuery,
    /// Every match is a non-empty run of word characters (module `words`): the word
    /// vocabulary may select the candidates.
    pub word_only: bool,
    pub filter: DocFilter,
}

/// The `path` glob and `lang` filter of a request.
pub(crate) struct DocFilter {
    glob: Option<GlobMatcher>,
    lang: Option<LangFilter>,
}

impl DocFilter {
    /// Validates and compiles the filters (blank ones filter nothing).
    pub(crate) fn new(path: Option<&str>, lang: Option<&str>) -> Result<DocFilter, SearchError> {
        let glob = match path.map(str::trim) {
            None | Some("") => None,
            Some(glob) => Some(
                GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| SearchError::InvalidGlob {
                        glob: glob.to_owned(),
                        message: e.kind().to_string(),
                    })?
                    .compile_matcher(),
            ),
        };
        let lang = match lang.map(str::trim) {
            None | Some("") => None,
            Some(lang) => Some(LangFilter::parse(lang)?),
        };
        Ok(DocFilter { glob, lang })
    }

    /// Whether a document passes both filters.
    pub(crate) fn allows(&self, doc: &Doc) -> bool {
        self.glob.as_ref().is_none_or(|g| g.is_match(&doc.path))
            && self
                .lang
                .as_ref()
                .is_none_or(|l| l.matches_doc(&doc.path, &doc.lang))
    }
}

/// Refuses an empty query or one over [`MAX_QUERY_BYTES`]: checked before anything else.
pub(crate) fn check_length(query: &str) -> Result<(), SearchError> {
    if query.is_empty() {
        return Err(SearchError::EmptyQuery);
    }
    if query.len() > MAX_QUERY_BYTES {
        return Err(SearchError::QueryTooLong {
            len: query.len(),
            max: MAX_QUERY_BYTES,
        });
    }
    Ok(())
}

/// Validates and compiles the request's query and filters; its length has passed
/// [`check_length`] already.
pub(crate) fn compile(request: &SearchRequest) -> Result<Compiled, SearchError> {
    let pattern = if request.regex {
        line_anchored(&request.query, request.case_sensitive)
    } else {
        regex::escape(&request.query)
    };
    let regex = RegexBuilder::new(&pattern)
        .case_insensitive(!request.case_sensitive)
        .multi_line(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|error| match error {
            regex::Error::CompiledTooBig(limit) => SearchError::RegexTooBig { limit },
            regex::Error::Syntax(message) => SearchError::InvalidRegex { message },
            other => SearchError::InvalidRegex {
                message: other.to_string(),
            },
        })?;
    // The same flags as the regex, so the plan describes exactly what the regex matches.
    let (plan, word_only) = match regex_syntax::ParserBuilder::new()
        .case_insensitive(!request.case_sensitive)
        .multi_line(true)
        .build()
        .parse(&pattern)
    {
        Ok(hir) => (plan(&hir), crate::words::word_only(&hir)),
        Err(_) => (TrigramQuery::All, false),
    };
    let filter = DocFilter::new(request.path.as_deref(), request.lang.as_deref())?;
    // A non-ASCII character in the pattern can fold to an ASCII one (`ſ` to `s`, the Kelvin
    // sign to `k`), which only Unicode mode knows: such patterns keep the Unicode regex.
    let ascii = if request.regex && pattern.is_ascii() && !escapes_beyond_ascii(&pattern) {
        RegexBuilder::new(&pattern)
            .unicode(false)
            .case_insensitive(!request.case_sensitive)
            .multi_line(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
            .ok()
    } else {
        None
    };
    Ok(Compiled {
        ascii,
        regex,
        plan,
        word_only,
        filter,
    })
}

/// Whether `pattern` may name a character outside ASCII with an escape (`\u212A`,
/// `\x{17F}`, `\U…`, a Unicode class `\p{…}`), judged by its text, conservatively: such a
/// character can fold to an ASCII one too, which the ASCII twin would not know (fuzz target
/// `search_query`, issue 43: `(?i)\u212a` matched no `k` in an ASCII file).
fn escapes_beyond_ascii(pattern: &str) -> bool {
    ["\\u", "\\U", "\\x{", "\\p", "\\P"]
        .iter()
        .any(|escape| pattern.contains(escape))
}

/// `pattern` with its absolute anchors (`\A`, `\z`, and `^`, `$` where a flag turns
/// multi-line mode off) made line anchors. A line is matched alone (S-1, as `git grep` does),
/// where both mean the same; but verification runs the regex over a whole document, where an
/// absolute anchor would see only its first or last line (fuzz target `search_query`, issue
/// 43: `\Afoo` found no line but the first). A pattern without one is returned as it is.
fn line_anchored(pattern: &str, case_sensitive: bool) -> String {
    let parsed = regex_syntax::ParserBuilder::new()
        .case_insensitive(!case_sensitive)
        .multi_line(true)
        .build()
        .parse(pattern);
    match parsed {
        Ok(hir) if hir.properties().look_set().contains_anchor_haystack() => {
            to_line_anchors(&hir).to_string()
        }
        _ => pattern.to_owned(),
    }
}

fn to_line_anchors(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(Look::Start) => Hir::look(Look::StartLF),
        HirKind::Look(Look::End) => Hir::look(Look::EndLF),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            sub: Box::new(to_line_anchors(&rep.sub)),
            ..rep.clone()
        }),
        HirKind::Capture(capture) => Hir::capture(Capture {
            sub: Box::new(to_line_anchors(&capture.sub)),
            ..capture.clone()
        }),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(to_line_anchors).collect()),
        HirKind::Alternation(parts) => {
            Hir::alternation(parts.iter().map(to_line_anchors).collect())
        }
        _ => hir.clone(),
    }
}
