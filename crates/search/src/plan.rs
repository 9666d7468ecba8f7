//! Query planning: a request's query checked, compiled into the regex that verifies lines and
//! the trigram query that selects candidate documents, and its `path` and `lang` filters.

use globset::{GlobBuilder, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};

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
        request.query.clone()
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
    let ascii = if request.regex && pattern.is_ascii() {
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
