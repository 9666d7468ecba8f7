//! Typed errors of the search crate. Every message is fit to show a caller: it says what was
//! wrong and what to do, and never contains a host path (I/O details go to the log).

/// Everything that can go wrong while indexing or searching.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The query is empty.
    #[error("the query is empty: give a text (or, with regex, a regular expression) to search for")]
    EmptyQuery,
    /// The query exceeds [`crate::MAX_QUERY_BYTES`].
    #[error(
        "the query is {len} bytes long, over the limit of {max} bytes: search for a shorter, distinctive part of the text"
    )]
    QueryTooLong {
        /// Length of the query in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The regular expression does not parse (the message shows the position).
    #[error(
        "invalid regular expression: {message}\nThe syntax is Rust `regex` (no back-references, no look-around); set regex to false to search for the text literally."
    )]
    InvalidRegex {
        /// The parser's own message, with the pattern and a caret under the error.
        message: String,
    },
    /// The compiled regular expression would exceed the size limit.
    #[error(
        "the regular expression is too big once compiled (limit {limit} bytes): use smaller repetition counts or a more specific pattern"
    )]
    RegexTooBig {
        /// The compiled-size limit in bytes.
        limit: usize,
    },
    /// The `path` filter is not a valid glob.
    #[error(
        "invalid path glob `{glob}`: {message}; use a glob such as `docs/**/*.md` (`*` does not cross `/`, `**` does)"
    )]
    InvalidGlob {
        /// The glob as given.
        glob: String,
        /// What is wrong with it.
        message: String,
    },
    /// A `definitions`/`references` symbol that cannot be a name.
    #[error("invalid symbol: {reason}")]
    InvalidSymbol {
        /// What is wrong and what a symbol looks like.
        reason: &'static str,
    },
    /// The `lang` filter names no known language.
    #[error("unknown language `{lang}`; known languages: {known}")]
    UnknownLang {
        /// The language as given.
        lang: String,
        /// The known language names, comma-separated.
        known: String,
    },
    /// A repository name that cannot name an index directory.
    #[error(
        "invalid repository name `{repo}`: use `owner/name` with letters, digits, `-`, `_` and `.` (not starting with `.`)"
    )]
    InvalidRepo {
        /// The name as given.
        repo: String,
    },
    /// The cursor was not made by this service for this query.
    #[error(
        "invalid cursor: pass the next_cursor of the previous answer unchanged, with the same query and filters"
    )]
    InvalidCursor,
    /// The cursor refers to an index generation that is no longer current.
    #[error(
        "the cursor has expired: a repository was re-indexed since the previous page; search again without a cursor"
    )]
    CursorExpired,
    /// An overlay search (`Indexes::search_overlay`) names other than one repository.
    #[error(
        "a search at a commit that is not indexed covers one repository, not {count}: name the repository"
    )]
    OverlayRepos {
        /// Repositories named.
        count: usize,
    },
    /// An overlay's differences were computed against another commit than the one the
    /// repository is indexed at now (it was re-indexed meanwhile).
    #[error(
        "the index of `{repo}` is at commit {indexed}, not at {base} which the differences were computed against: compute them against {indexed} and search again"
    )]
    OverlayBase {
        /// The repository.
        repo: String,
        /// The commit of its current generation.
        indexed: String,
        /// The commit the overlay was computed against.
        base: String,
    },
    /// The search ran over its time budget.
    #[error(
        "the search took longer than {seconds} s and was stopped: add a literal part, a path or lang filter, or fewer repositories"
    )]
    Timeout {
        /// The budget in seconds.
        seconds: u64,
    },
    /// The source of files failed while building.
    #[error("reading the repository for indexing failed: {message}")]
    Source {
        /// The source's message.
        message: String,
    },
    /// A file of the index could not be read or written (details in the log).
    #[error("index storage failed while {action}; see the server log")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The underlying error (never shown: it may contain a host path).
        #[source]
        source: std::io::Error,
    },
    /// An index file is damaged.
    #[error("the index of `{repo}` is damaged ({detail}); rebuild it")]
    Corrupt {
        /// The repository.
        repo: String,
        /// What is wrong.
        detail: String,
    },
}

impl SearchError {
    /// An I/O error with a description of the action; logs the details, which may name paths.
    pub(crate) fn io(action: &'static str, source: std::io::Error) -> Self {
        tracing::warn!(action, error = %source, "search index I/O error");
        SearchError::Io { action, source }
    }
}
