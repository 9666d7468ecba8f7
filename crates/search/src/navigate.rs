//! Navigation over the symbol tables of the current generations (issue 12): a file's
//! outline, where a name is defined, and where it occurs (a word-boundary search whose hits
//! the symbol table marks as definitions).

use symbols::Symbol;

use crate::error::SearchError;
use crate::indexes::Indexes;
use crate::plan::DocFilter;
use crate::request::{SearchRequest, SearchResults};
use crate::store::{Doc, DocKind, Generation};

/// Longest symbol name a lookup takes, in bytes.
pub const MAX_SYMBOL_BYTES: usize = 200;
/// Most definitions one `definitions` call answers.
pub const MAX_DEFINITIONS: usize = 500;

/// The outline of one file at the indexed commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedOutline {
    /// Full SHA of the commit the generation was built from.
    pub commit: String,
    /// The file's definitions in the order they start (empty for a file of a language
    /// without a grammar).
    pub symbols: Vec<Symbol>,
}

/// A `definitions` lookup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefinitionsRequest {
    /// The exact name (case-sensitive).
    pub symbol: String,
    /// Repositories to look in (the caller's readable ones).
    pub repos: Vec<String>,
    /// A glob over repository-relative paths, as for search.
    pub path: Option<String>,
    /// A language, as for search.
    pub lang: Option<String>,
    /// Most definitions answered (clamped to 1..=[`MAX_DEFINITIONS`]).
    pub limit: usize,
}

/// One definition of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// Repository name.
    pub repo: String,
    /// Full SHA of the indexed commit.
    pub commit: String,
    /// Repository-relative path.
    pub path: String,
    /// The definition (its `parent` is an index into the file's outline).
    pub symbol: Symbol,
    /// The name of the definition containing it, if any.
    pub parent_name: Option<String>,
}

/// What a `definitions` lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definitions {
    /// Definitions in repository, path and line order, at most the limit.
    pub definitions: Vec<Definition>,
    /// Definitions found in all (more than answered when over the limit).
    pub total: u64,
    /// (repository, commit) of every repository looked in.
    pub searched: Vec<(String, String)>,
    /// Requested repositories without an index yet.
    pub not_indexed: Vec<String>,
}

/// Checks a symbol name argument.
pub(crate) fn check_symbol(symbol: &str) -> Result<(), SearchError> {
    if symbol.trim().is_empty() || symbol.chars().any(char::is_whitespace) {
        return Err(SearchError::InvalidSymbol {
            reason: "a symbol is one name without spaces, such as `parse_args`",
        });
    }
    if symbol.len() > MAX_SYMBOL_BYTES {
        return Err(SearchError::InvalidSymbol {
            reason: "a symbol is at most 200 bytes",
        });
    }
    Ok(())
}

fn doc_by_path<'g>(generation: &'g Generation, path: &str) -> Option<(u32, &'g Doc)> {
    let id = generation.doc_by_path(path)?;
    Some((id, &generation.docs[id as usize]))
}

impl Indexes {
    /// The outline of `path` in `repo`'s current generation: `None` when the repository is
    /// not indexed, its symbol table is still being written, or the file is not a text
    /// document of it (absent, skipped by a transform, binary, too large), so the caller
    /// parses it itself.
    pub fn outline(&self, repo: &str, path: &str) -> Option<IndexedOutline> {
        let generation = self.slot(repo)?.current()?;
        let (id, doc) = doc_by_path(&generation, path)?;
        if doc.kind != DocKind::Text {
            return None;
        }
        let mut symbols = generation.symbols()?.of_doc(id);
        generation.fill_signatures(id, &mut symbols);
        Some(IndexedOutline {
            commit: generation.meta.commit.clone(),
            symbols,
        })
    }

    /// The full SHA `repo` is indexed at, if it is.
    pub fn indexed_commit(&self, repo: &str) -> Option<String> {
        Some(self.slot(repo)?.current()?.meta.commit.clone())
    }

    /// Where `request.symbol` is defined in the current generations of the repositories.
    pub fn definitions(&self, request: &DefinitionsRequest) -> Result<Definitions, SearchError> {
        check_symbol(&request.symbol)?;
        let filter = DocFilter::new(request.path.as_deref(), request.lang.as_deref())?;
        let limit = request.limit.clamp(1, MAX_DEFINITIONS);
        let (pinned, not_indexed) = self.pinned(&request.repos, true);
        let mut definitions = Vec::new();
        let mut total = 0u64;
        for (repo, generation) in &pinned {
            let Some(table) = generation.symbols() else {
                continue;
            };
            let mut found: Vec<_> = table
                .named(&request.symbol)
                .into_iter()
                .filter(|s| {
                    generation
                        .docs
                        .get(s.doc as usize)
                        .is_some_and(|d| filter.allows(d))
                })
                .collect();
            // Documents are numbered in rank order; definitions answer in path order.
            found.sort_by(|a, b| {
                let path =
                    |s: &crate::symtab::Stored| generation.docs[s.doc as usize].path.as_str();
                path(a).cmp(path(b)).then(a.symbol.line.cmp(&b.symbol.line))
            });
            total += found.len() as u64;
            found.truncate(limit.saturating_sub(definitions.len()));
            for mut stored in found {
                generation.fill_signatures(stored.doc, std::slice::from_mut(&mut stored.symbol));
                let path = generation.docs[stored.doc as usize].path.clone();
                let parent_name = stored
                    .symbol
                    .parent
                    .map(|p| table.name_in_doc(stored.doc, p));
                definitions.push(Definition {
                    repo: repo.clone(),
                    commit: generation.meta.commit.clone(),
                    path,
                    symbol: stored.symbol,
                    parent_name,
                });
            }
        }
        Ok(Definitions {
            definitions,
            total,
            searched: pinned
                .iter()
                .map(|(repo, g)| (repo.clone(), g.meta.commit.clone()))
                .collect(),
            not_indexed,
        })
    }

    /// The word-boundary occurrences of `symbol` (case-sensitive), through the trigram index
    /// and line verification like a search, without file-name hits; each line hit's
    /// `definition` says whether the symbol table has a definition of the name on that line,
    /// and definitions rank first. `request.query`, `regex` and `case_sensitive` are ignored.
    /// Paged with the cursors of search (bound to this kind of request).
    pub fn references(
        &self,
        symbol: &str,
        request: &SearchRequest,
    ) -> Result<SearchResults, SearchError> {
        check_symbol(symbol)?;
        self.search_mode(&references_request(symbol, request), Some(symbol))
    }
}

/// The search a references lookup of `symbol` runs: its word-boundary occurrences,
/// case-sensitive, with the request's repositories, filters, limit and cursor.
pub(crate) fn references_request(symbol: &str, request: &SearchRequest) -> SearchRequest {
    SearchRequest {
        query: format!(r"\b{}\b", regex::escape(symbol)),
        regex: true,
        case_sensitive: true,
        ..request.clone()
    }
}
