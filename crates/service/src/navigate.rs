//! Code navigation (issue 12): `outline` of one file, `definitions` of a name, `references`
//! to it. Symbols are derived state of the search index (extracted with tree-sitter at index
//! time), so `definitions` and `references` answer for the indexed head of each repository;
//! `outline` answers at any readable commit, from the index at the indexed head and by
//! parsing the file otherwise. Search-based navigation, not a compiler's: names are matched
//! as written, never resolved. Never runs plugins.

use crate::frame::IndexedTargets;
use crate::frame::Op;
use crate::{CallContext, Service, ServiceError};
use gitstore::{CommitId, RepoPath};
use serde::Serialize;

/// Symbols one `outline` page shows at most; `next_cursor` continues.
pub const MAX_OUTLINE_SYMBOLS: usize = 1000;
/// Bytes of a file `outline` parses when it is not in the index (the index stores symbols of
/// files up to its own size limit).
pub const MAX_OUTLINE_BYTES: usize = 4 * 1024 * 1024;
/// Definitions answered when the caller gives no `limit`.
pub const DEFAULT_DEFINITIONS_LIMIT: usize = 50;
/// References per page when the caller gives no `limit`.
pub const DEFAULT_REFERENCES_LIMIT: usize = 50;

/// `outline {repo, revision?, path, cursor?}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutlineRequest {
    pub repo: String,
    pub revision: Option<String>,
    pub path: String,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One definition of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutlineSymbol {
    /// `function`, `method`, `class`, `interface`, `module`, `macro`, `type`, `constant`,
    /// `impl` or `other`, as the grammar's tags query names it.
    pub kind: &'static str,
    /// Repository data.
    pub name: String,
    /// The line of the name (1-based).
    pub line: u32,
    /// The definition's first and last lines: read this range for its text.
    pub start_line: u32,
    pub end_line: u32,
    /// The position in the file's whole outline of the definition containing it.
    pub parent: Option<u32>,
    /// The name's line, trimmed (repository data).
    pub signature: String,
}

impl From<search::Symbol> for OutlineSymbol {
    fn from(symbol: search::Symbol) -> Self {
        OutlineSymbol {
            kind: symbol.kind.as_str(),
            name: symbol.name,
            line: symbol.line,
            start_line: symbol.start_line,
            end_line: symbol.end_line,
            parent: symbol.parent,
            signature: symbol.signature,
        }
    }
}

/// One definition of an outline, with how deeply it is nested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutlineEntry {
    #[serde(flatten)]
    pub symbol: OutlineSymbol,
    /// Enclosing definitions (0: top level), counted over the whole file, so a page that
    /// starts inside a class indents as the first page would.
    pub depth: u32,
}

/// Nesting depth of each symbol: parents come before their children.
fn depths(symbols: &[search::Symbol]) -> Vec<u32> {
    let mut depths: Vec<u32> = Vec::with_capacity(symbols.len());
    for symbol in symbols {
        let depth = symbol
            .parent
            .and_then(|p| depths.get(p as usize))
            .map_or(0, |d| d + 1);
        depths.push(depth);
    }
    depths
}

/// A file's outline, or one page of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutlineAnswer {
    pub repo: String,
    /// The full SHA outlined.
    pub commit: String,
    pub path: String,
    /// The language of the grammar used; absent when the file's language has none (the
    /// outline is empty then).
    pub lang: Option<&'static str>,
    /// `index` (symbols stored when the commit was indexed) or `parsed` (parsed for this
    /// call: the commit is not the indexed head).
    pub source: &'static str,
    /// Position of the first symbol shown in the whole outline.
    pub offset: usize,
    pub symbols: Vec<OutlineEntry>,
    /// Symbols of the whole file.
    pub total_symbols: usize,
    /// Pass it back as `cursor` for the rest; absent on the last page.
    pub next_cursor: Option<String>,
}

/// What `definitions {repo?, revision?, symbol, lang?, path?, limit?}` looks up, and
/// `references` pages over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolQuery {
    /// One repository; `None`: every readable one.
    pub repo: Option<String>,
    /// Must name the indexed head of `repo` when given (the symbols are the index's).
    pub revision: Option<String>,
    /// The exact name, case-sensitive.
    pub symbol: String,
    pub lang: Option<String>,
    /// A glob over repository-relative paths, as for search.
    pub path: Option<String>,
    pub limit: Option<usize>,
}

/// One definition found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefinitionHit {
    pub repo: String,
    /// The full SHA of the indexed head it was found in.
    pub commit: String,
    pub path: String,
    #[serde(flatten)]
    pub symbol: OutlineSymbol,
    /// The name of the definition containing it (repository data).
    pub parent_name: Option<String>,
}

/// What `definitions` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefinitionsAnswer {
    pub symbol: String,
    /// In repository, path and line order; at most the limit.
    pub definitions: Vec<DefinitionHit>,
    /// Definitions found in all.
    pub total: u64,
    /// (repository, full SHA of its indexed head) of every repository looked in.
    pub searched: Vec<(String, String)>,
    /// Repositories without an index yet (not looked in).
    pub not_indexed: Vec<String>,
    /// Cluster mode: repositories none of the replicas holding them answered for (not
    /// looked in; ask again shortly). Absent when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_searched: Vec<String>,
}

/// `references {repo?, revision?, symbol, lang?, path?, limit?, cursor?}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReferencesRequest {
    /// `limit` is per page.
    pub query: SymbolQuery,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One occurrence of the name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reference {
    pub path: String,
    pub line: u64,
    /// The line, trimmed and cut around the name (repository data).
    pub snippet: String,
    /// The symbol table has a definition of the name on this line.
    pub definition: bool,
    /// Byte ranges in `snippet` of the name's occurrences (see [`search::Hit::Line`]).
    /// Never serialized: the JSON and MCP answers are fixed by SPEC §9.
    #[serde(skip)]
    pub marks: Vec<std::ops::Range<u32>>,
}

/// The occurrences of one repository on a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepoReferences {
    pub repo: String,
    /// The full SHA of the indexed head.
    pub commit: String,
    pub references: Vec<Reference>,
}

/// One page of `references`: definitions first, then the other occurrences, each in
/// repository, path and line order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReferencesAnswer {
    pub symbol: String,
    pub repos: Vec<RepoReferences>,
    /// Occurrences in all pages as far as the search knows (a lower bound when `truncated`).
    pub total: u64,
    /// More occurrences than one lookup collects: narrow with path or lang.
    pub truncated: bool,
    pub next_cursor: Option<String>,
    pub not_indexed: Vec<String>,
    /// Cluster mode: repositories none of the replicas holding them answered for (not
    /// looked in; ask again shortly). Absent when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_searched: Vec<String>,
}

fn encode_cursor(commit: &CommitId, offset: usize) -> String {
    format!("{commit}.{offset}")
}

fn decode_cursor(cursor: &str, commit: &CommitId) -> Result<usize, ServiceError> {
    let bad = || {
        ServiceError::invalid(
            "invalid cursor: pass the `next_cursor` of the previous outline page as it was given",
        )
    };
    let (at, offset) = cursor.split_once('.').ok_or_else(bad)?;
    if CommitId::parse(at).as_ref() != Some(commit) {
        return Err(ServiceError::invalid(format!(
            "this cursor belongs to an outline at another commit than {commit}: pass revision = the Commit of the first page"
        )));
    }
    offset.parse().map_err(|_| bad())
}

impl Service {
    /// `outline`: the definitions of one file at a commit, with kinds, line ranges and
    /// parents; the same checks as `read`.
    pub async fn outline(
        &self,
        ctx: &CallContext,
        req: OutlineRequest,
    ) -> Result<OutlineAnswer, ServiceError> {
        let OutlineRequest {
            repo,
            revision,
            path,
            cursor,
        } = req;
        self.framed_blocking(ctx, Op::OUTLINE, repo, move |mut call, inner| {
            let lease = call.lease(inner, revision.as_deref())?;
            let (name, commit) = (lease.repo(), lease.commit());
            let path = RepoPath::parse(&path)?;
            let offset = match &cursor {
                Some(cursor) => decode_cursor(cursor, commit)?,
                None => 0,
            };
            // Read through the lease either way: it applies the registered scope and says
            // what the path is (missing, a directory, binary) exactly as `read` does.
            let text = lease.read_text(&path)?;
            let grammar = symbols::Grammar::for_path(path.as_str());
            let indexed = inner
                .indexes
                .as_ref()
                .ok()
                .and_then(|indexes| indexes.outline(name.as_str(), path.as_str()))
                .filter(|outline| outline.commit == commit.to_string());
            let (all, source) = match (indexed, grammar) {
                (Some(outline), _) => (outline.symbols, "index"),
                (None, None) => (Vec::new(), "parsed"),
                (None, Some(grammar)) => {
                    if text.as_str().len() > MAX_OUTLINE_BYTES {
                        return Err(ServiceError::invalid(format!(
                            "{path} is {} bytes, over the {MAX_OUTLINE_BYTES} bytes outline parses: read it by line ranges or search it",
                            text.as_str().len()
                        )));
                    }
                    // A parse is the heavy part (O-9): a slot, and the call's budget
                    // flag stops the parser at the deadline.
                    call.admit_blocking(inner, crate::Class::Parse)?;
                    let symbols = symbols::Extractor::new()
                        .extract_within(grammar, text.as_str().as_bytes(), call.budget().flag())
                        .map_err(|error| {
                            if call.budget().is_cancelled() {
                                return ServiceError {
                                    kind: crate::ErrorKind::TimedOut,
                                    message: String::new(),
                                };
                            }
                            tracing::warn!(%error, "outline could not parse a file");
                            ServiceError::internal(
                                "the file could not be parsed for its outline; read it instead",
                            )
                        })?;
                    (symbols, "parsed")
                }
            };
            let total = all.len();
            if offset > total {
                return Err(ServiceError::invalid(format!(
                    "the cursor is past the end of the outline ({total} symbols)"
                )));
            }
            let end = total.min(offset + MAX_OUTLINE_SYMBOLS);
            let depths = depths(&all);
            Ok(OutlineAnswer {
                repo: name.to_string(),
                commit: commit.to_string(),
                path: path.to_string(),
                lang: grammar.map(symbols::Grammar::lang),
                source,
                offset,
                symbols: all
                    .into_iter()
                    .zip(depths)
                    .skip(offset)
                    .take(end - offset)
                    .map(|(symbol, depth)| OutlineEntry {
                        symbol: symbol.into(),
                        depth,
                    })
                    .collect(),
                total_symbols: total,
                next_cursor: (end < total).then(|| encode_cursor(commit, end)),
            })
        })
        .await
    }

    /// `definitions`: where a name is defined, from the symbol tables of the indexed heads of
    /// `repo` or of every readable repository.
    pub async fn definitions(
        &self,
        ctx: &CallContext,
        mut req: SymbolQuery,
    ) -> Result<DefinitionsAnswer, ServiceError> {
        let repo = req.repo.take();
        // Cluster mode: definitions in every repository ask their owners too.
        let peers = repo.is_none().then(|| self.peers()).flatten();
        self.framed(ctx, Op::DEFINITIONS, repo, move |call| async move {
            if let Some(peers) = peers {
                let fan = crate::fanout::FanQuery::symbol(
                    crate::ShardMode::Definitions {
                        symbol: req.symbol.clone(),
                    },
                    req.path,
                    req.lang,
                    req.limit.unwrap_or(DEFAULT_DEFINITIONS_LIMIT),
                    None,
                );
                let fanned = self
                    .fan_out_definitions(call, req.revision, fan, peers)
                    .await?;
                let mut answer = definitions_answer(req.symbol, fanned.results);
                answer.not_searched = fanned.not_searched;
                return Ok(answer);
            }
            self.blocking(move |inner| {
                let (indexes, targets) = call.targets(inner, req.revision.as_deref())?;
                let IndexedTargets {
                    repos,
                    leases,
                    stale,
                } = targets;
                let mut found = indexes.definitions(&search::DefinitionsRequest {
                    symbol: req.symbol.clone(),
                    repos,
                    path: req.path,
                    lang: req.lang,
                    limit: req.limit.unwrap_or(DEFAULT_DEFINITIONS_LIMIT),
                })?;
                drop(leases);
                found.not_indexed.extend(stale);
                found.not_indexed.sort();
                Ok(definitions_answer(req.symbol, found))
            })
            .await
        })
        .await
    }

    /// `references`: word-boundary occurrences of a name in the indexed heads (the trigram
    /// index, then line verification), defining lines marked and first; paged by cursor.
    pub async fn references(
        &self,
        ctx: &CallContext,
        req: ReferencesRequest,
    ) -> Result<ReferencesAnswer, ServiceError> {
        let ReferencesRequest {
            query: mut req,
            cursor,
        } = req;
        let repo = req.repo.take();
        // Cluster mode: references in every repository ask their owners too.
        let peers = repo.is_none().then(|| self.peers()).flatten();
        self.framed(ctx, Op::REFERENCES, repo, move |call| async move {
            if let Some(peers) = peers {
                let fan = crate::fanout::FanQuery::symbol(
                    crate::ShardMode::References {
                        symbol: req.symbol.clone(),
                    },
                    req.path,
                    req.lang,
                    req.limit.unwrap_or(DEFAULT_REFERENCES_LIMIT),
                    cursor,
                );
                let fanned = self.fan_out(call, req.revision, fan, peers).await?;
                let mut answer = references_answer(req.symbol, fanned.results);
                answer.not_searched = fanned.not_searched;
                return Ok(answer);
            }
            let mut call = call;
            call.admit(&self.inner, crate::Class::Search).await?;
            self.blocking(move |inner| {
                let (indexes, targets) = call.targets(inner, req.revision.as_deref())?;
                let IndexedTargets {
                    repos,
                    leases,
                    stale,
                } = targets;
                let request = search::SearchRequest {
                    repos,
                    path: req.path,
                    lang: req.lang,
                    limit: req.limit.unwrap_or(DEFAULT_REFERENCES_LIMIT),
                    cursor,
                    ..search::SearchRequest::default()
                };
                let mut results = indexes.references(&req.symbol, &request)?;
                drop(leases);
                results.not_indexed.extend(stale);
                results.not_indexed.sort();
                Ok(references_answer(req.symbol, results))
            })
            .await
        })
        .await
    }
}

/// A `references` page from the search's page of the name's occurrences.
fn references_answer(symbol: String, results: search::SearchResults) -> ReferencesAnswer {
    ReferencesAnswer {
        symbol,
        repos: results
            .repos
            .into_iter()
            .map(|r| RepoReferences {
                repo: r.repo,
                commit: r.commit,
                references: r
                    .hits
                    .into_iter()
                    .filter_map(|hit| match hit {
                        search::Hit::Line {
                            path,
                            line,
                            snippet,
                            definition,
                            marks,
                        } => Some(Reference {
                            path,
                            line,
                            snippet,
                            definition,
                            marks,
                        }),
                        search::Hit::FileName { .. } => None,
                    })
                    .collect(),
            })
            .collect(),
        total: results.stats.total_hits,
        truncated: results.stats.truncated,
        next_cursor: results.next_cursor,
        not_indexed: results.not_indexed,
        not_searched: Vec::new(),
    }
}

/// A `definitions` answer from the index's.
fn definitions_answer(symbol: String, found: search::Definitions) -> DefinitionsAnswer {
    DefinitionsAnswer {
        symbol,
        definitions: found
            .definitions
            .into_iter()
            .map(|d| DefinitionHit {
                repo: d.repo,
                commit: d.commit,
                path: d.path,
                symbol: d.symbol.into(),
                parent_name: d.parent_name,
            })
            .collect(),
        total: found.total,
        searched: found.searched,
        not_indexed: found.not_indexed,
        not_searched: Vec::new(),
    }
}
