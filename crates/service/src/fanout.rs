//! Cluster mode (issue 31, behaviour 3): a `search` or `references` over every readable
//! repository, asked of any replica, covers every repository, not only those this replica
//! holds.
//!
//! The replica asked decides access once (the frame's [`RepoCall::targets`]) and applies the
//! server plugins' `QUERY_ALIASES` before and `on_search_results` after, as on one server.
//! It then splits the readable repositories by owners ([`crate::Placement::owners`]): those it owns
//! and holds an index of it searches itself; the others go to their preferred owners, one
//! call per owner for all the repositories it is preferred for, and what an owner could not
//! answer (it failed, timed out, or has no index of some) to each repository's next owner.
//! Each part answers the first `offset + limit` hits of its ranked list with their rank keys
//! ([`Service::search_shard`] on the owner, through [`Peers`]); [`search::merge`] puts them in
//! the one global order, cuts the page and makes the cursor (the cursor names every part's
//! commits, so a page after an owner indexed a new head is refused as expired: search again;
//! a page asked of another replica, answered by another owner of the same commits, goes on). Repositories no owner answered for are named in
//! `not_searched`. `definitions` fans out the same way and merges with
//! [`search::merge_definitions`].
//!
//! The service knows no HTTP: [`Peers`] is the transport's, plugged in with the placement.

use crate::frame::{IndexedTargets, RepoCall};
use crate::{Service, ServiceError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one owner is asked: its part of a query over many repositories, with the access
/// already decided by the replica asking (the repositories are the caller's readable ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRequest {
    /// A search, or the occurrences of a name.
    pub mode: ShardMode,
    /// The search's query, after `QUERY_ALIASES` (empty for references).
    #[serde(default)]
    pub query: String,
    #[serde(default)]
    pub regex: bool,
    #[serde(default)]
    pub case_sensitive: bool,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub lang: Option<String>,
    /// The repositories to search (real names).
    pub repos: Vec<String>,
    /// How many hits of the head of the ranked list to answer: the page's offset plus limit.
    pub want: usize,
    /// Count the part's hits up to the count cap (S-10), as the caller's `count` asks.
    #[serde(default)]
    pub count: bool,
}

/// What a part is of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ShardMode {
    /// `search`.
    Search,
    /// `references` of `symbol`.
    References { symbol: String },
    /// `definitions` of `symbol`: the part answers [`ShardAnswer::definitions`], at most
    /// `want`, and no hits.
    Definitions { symbol: String },
}

impl ShardMode {
    /// The ranked list it is of; `None` for definitions.
    fn as_search(&self) -> Option<search::Mode<'_>> {
        match self {
            ShardMode::Search => Some(search::Mode::Search),
            ShardMode::References { symbol } => Some(search::Mode::References(symbol)),
            ShardMode::Definitions { .. } => None,
        }
    }
}

/// One owner's part: the head of its ranked list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardAnswer {
    /// At most `want` hits, in rank order.
    pub hits: Vec<ShardHit>,
    /// (repository, commit, generation) of every repository searched: what a cursor names.
    pub generations: Vec<(String, String, u64)>,
    /// Repositories asked for that this replica holds no (readable) index of.
    pub not_indexed: Vec<String>,
    /// For a search or references, of the part's whole ranked list; for definitions,
    /// `total_hits` counts every definition found.
    pub stats: ShardStats,
    /// For definitions: at most `want`, in repository, path and line order (the
    /// repositories looked in are `generations`, with generation 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub definitions: Vec<ShardDefinition>,
}

/// One definition found ([`search::Definition`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardDefinition {
    pub repo: String,
    pub commit: String,
    pub path: String,
    /// The kind's name ([`search::SymbolKind::as_str`]).
    pub kind: String,
    pub name: String,
    pub line: u32,
    pub start_line: u32,
    pub end_line: u32,
    pub parent: Option<u32>,
    pub signature: String,
    pub parent_name: Option<String>,
}

/// One hit with its rank key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardHit {
    pub tier: ShardTier,
    pub repo: String,
    /// Full SHA of the indexed head it was found in.
    pub commit: String,
    pub path: String,
    /// Absent for a file-name hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// A file-name hit of a file indexed by path only: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_only: Option<ShardPathOnly>,
    /// A line hit: it looks like (or for references, the symbol table says it is) a
    /// definition.
    #[serde(default)]
    pub definition: bool,
    /// A line hit: byte ranges in `snippet` of the query's matches ([`search::Hit::Line`]).
    /// Absent from older replicas' answers (then nothing is marked); marks that do not fit
    /// the snippet are dropped on receipt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<std::ops::Range<u32>>,
}

/// The tier of a hit in the ranking ([`search::Tier`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardTier {
    FileName,
    Definition,
    Line,
}

/// Why a file is indexed by path only ([`search::PathOnly`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardPathOnly {
    TooLarge,
    Binary,
    NotUtf8,
}

/// A part's statistics: a search's, of the part's whole ranked list.
pub type ShardStats = crate::SearchStatsAnswer;

/// Why another replica gave no part: unreachable, timed out, or it answered an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PeerError {
    /// What happened, for the log (no secret in it).
    pub message: String,
}

/// A part being asked for.
pub type PeerFuture = Pin<Box<dyn Future<Output = Result<ShardAnswer, PeerError>> + Send>>;

/// How this replica asks the others for their parts (the transport's; plugged in with the
/// [`Placement`](crate::Placement)).
pub trait Peers: Send + Sync + 'static {
    /// Asks the replica at `owner` (its node URL) for its part: [`Service::search_shard`]
    /// there. Bounded in time by the implementation.
    fn search_shard(&self, owner: &str, request: ShardRequest) -> PeerFuture;
}

/// A query over every readable repository, to fan out.
pub(crate) struct FanQuery {
    pub(crate) mode: ShardMode,
    pub(crate) query: String,
    pub(crate) regex: bool,
    pub(crate) case_sensitive: bool,
    pub(crate) path: Option<String>,
    pub(crate) lang: Option<String>,
    pub(crate) limit: usize,
    pub(crate) cursor: Option<String>,
    /// The caller's `count` (S-10).
    pub(crate) count: bool,
}

impl FanQuery {
    /// A `definitions` or `references` lookup of a name (`mode`), which has no query text.
    pub(crate) fn symbol(
        mode: ShardMode,
        path: Option<String>,
        lang: Option<String>,
        limit: usize,
        cursor: Option<String>,
    ) -> Self {
        Self {
            mode,
            query: String::new(),
            regex: false,
            case_sensitive: false,
            path,
            lang,
            limit,
            cursor,
            count: false,
        }
    }
}

/// How long a query over every repository waits for other replicas' parts, all rounds
/// together: a search's own budget ([`search::SEARCH_BUDGET`], which bounds each owner's
/// part) and a moment for the trip. An owner that hangs, or a second owner asked after the
/// first failed late, costs the caller no more; what is left is named not searched.
const FAN_OUT_BUDGET: Duration = Duration::from_secs(25);

/// A part whose generations are named by their commits only: each replica numbers its own
/// index generations, and the next page of a search may be asked of another replica (a
/// balancer spreads one client's calls), which asks another owner of the same commit. The
/// cursor then binds each repository's commit, which every owner indexes alike.
fn commits_only(mut top: search::TopHits) -> search::TopHits {
    for (_, _, generation) in &mut top.generations {
        *generation = 0;
    }
    top
}

/// A fanned-out query's page.
pub(crate) struct Fanned<T> {
    /// The merged answer; its `not_indexed` covers every part's.
    pub(crate) results: T,
    /// Repositories no owner answered for, sorted.
    pub(crate) not_searched: Vec<String>,
}

/// Where each repository of a query is searched.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    /// Here.
    local: Vec<String>,
    /// Elsewhere: each repository with its owners (node URLs, the preferred first; this
    /// replica not among them).
    remote: Vec<(String, Vec<String>)>,
    /// Not searched anywhere: indexed here at a commit that left retention.
    not_indexed: Vec<String>,
}

/// One part of a query, this replica's own or an owner's.
enum Part {
    Top(search::TopHits),
    Definitions(search::Definitions),
}

/// Every part of a query, gathered.
struct Gathered {
    /// The query over every repository the caller may read (the cursor's request).
    base: search::SearchRequest,
    mode: ShardMode,
    parts: Vec<Part>,
    not_indexed: Vec<String>,
    not_searched: Vec<String>,
}

/// What asking the owners of the repositories held elsewhere came to.
#[derive(Debug, Default)]
struct Asked {
    /// Each answer, with the repositories it was asked for.
    answers: Vec<(BTreeSet<String>, ShardAnswer)>,
    /// An owner answered that it holds no index of these, and no other owner answered them.
    not_indexed: Vec<String>,
    /// No owner answered for these.
    not_searched: Vec<String>,
}

impl Service {
    /// The replicas this one asks for parts of a query over every repository: `None` in the
    /// embedded default (every repository is here), or when the placement gives none.
    pub(crate) fn peers(&self) -> Option<Arc<dyn Peers>> {
        self.inner.placement.get()?.peers()
    }

    /// This replica's part of a query over many repositories, for another replica that
    /// decided access and merges the parts (cluster mode, issue 31): the first
    /// `request.want` hits of the ranked list over the repositories it holds an index of,
    /// with their rank keys (or for definitions, the first `want` definitions); the others
    /// are named `not_indexed`. Neither `QUERY_ALIASES` nor `on_search_results` runs (the
    /// asking replica ran them); the transport answers this only to the other replicas (the
    /// cluster secret).
    pub async fn search_shard(&self, request: ShardRequest) -> Result<ShardAnswer, ServiceError> {
        // Another replica asks (it decided access and counts the call): one client.
        let slot = self
            .inner
            .admission
            .admit(
                crate::Class::Search,
                crate::ClientKey::Local,
                &budget::Budget::default(),
            )
            .await?;
        self.blocking(move |inner| {
            let _slot = slot;
            let indexes = inner.indexes()?;
            let mut leases = Vec::new();
            let mut held = Vec::new();
            let mut not_indexed = Vec::new();
            let repos: BTreeSet<String> = request.repos.into_iter().collect();
            // The asking replica waits for this part no longer than its fan-out.
            let budget = budget::Budget::lasting(FAN_OUT_BUDGET, 1.0);
            for repo in repos {
                // S-1, G-8 as in the frame: every hit readable at the SHA it names.
                let lease = indexes.current(&repo).and_then(|info| {
                    crate::frame::lease_indexed(inner, &repo, &info.commit, &budget)
                });
                match lease {
                    Some(lease) => {
                        leases.push(lease);
                        held.push(repo);
                    }
                    None => not_indexed.push(repo),
                }
            }
            let want = request.want.min(search::MAX_HITS);
            let mut answer = match &request.mode {
                ShardMode::Definitions { symbol } => {
                    let found = indexes.definitions(&search::DefinitionsRequest {
                        symbol: symbol.clone(),
                        repos: held,
                        path: request.path,
                        lang: request.lang,
                        limit: want,
                    })?;
                    ShardAnswer::from(found)
                }
                ShardMode::Search | ShardMode::References { .. } => {
                    let part = search::SearchRequest {
                        query: request.query,
                        repos: held,
                        path: request.path,
                        lang: request.lang,
                        regex: request.regex,
                        case_sensitive: request.case_sensitive,
                        limit: 1,
                        cursor: None,
                        count: request.count,
                    };
                    let mode = request.mode.as_search().unwrap_or(search::Mode::Search);
                    ShardAnswer::from(indexes.top_hits(&part, mode, want)?)
                }
            };
            drop(leases);
            answer.not_indexed.extend(not_indexed);
            answer.not_indexed.sort();
            Ok(answer)
        })
        .await
    }

    /// A `search` or `references` over every readable repository in cluster mode: access
    /// decided here, once, by `call`'s targets; each repository searched here or by its
    /// owners; the parts merged into one page (see the module's documentation).
    pub(crate) async fn fan_out(
        &self,
        call: RepoCall<Option<String>>,
        revision: Option<String>,
        query: FanQuery,
        peers: Arc<dyn Peers>,
    ) -> Result<Fanned<search::SearchResults>, ServiceError> {
        let started = Instant::now();
        let gathered = self.gather(call, revision, query, peers).await?;
        self.blocking(move |_| {
            let Gathered {
                base,
                mode,
                parts,
                not_indexed,
                not_searched,
            } = gathered;
            let parts = parts
                .into_iter()
                .filter_map(|part| match part {
                    Part::Top(top) => Some(commits_only(top)),
                    Part::Definitions(_) => None,
                })
                .collect();
            let mode = mode.as_search().unwrap_or(search::Mode::Search);
            let mut results = search::merge(&base, mode, parts)?;
            results.not_indexed.extend(not_indexed);
            results.not_indexed.sort();
            results.not_indexed.dedup();
            results.stats.elapsed = started.elapsed();
            Ok(Fanned {
                results,
                not_searched,
            })
        })
        .await
    }

    /// `definitions` over every readable repository in cluster mode, as [`Service::fan_out`]
    /// does a search.
    pub(crate) async fn fan_out_definitions(
        &self,
        call: RepoCall<Option<String>>,
        revision: Option<String>,
        query: FanQuery,
        peers: Arc<dyn Peers>,
    ) -> Result<Fanned<search::Definitions>, ServiceError> {
        let symbol = match &query.mode {
            ShardMode::Definitions { symbol } => symbol.clone(),
            _ => {
                return Err(ServiceError::internal(
                    "a definitions fan-out of another query",
                ));
            }
        };
        let limit = query.limit;
        let gathered = self.gather(call, revision, query, peers).await?;
        let Gathered {
            base,
            parts,
            not_indexed,
            not_searched,
            ..
        } = gathered;
        let request = search::DefinitionsRequest {
            symbol,
            repos: base.repos,
            path: base.path,
            lang: base.lang,
            limit,
        };
        let parts = parts
            .into_iter()
            .filter_map(|part| match part {
                Part::Definitions(found) => Some(found),
                Part::Top(_) => None,
            })
            .collect();
        let mut results = search::merge_definitions(&request, parts);
        results.not_indexed.extend(not_indexed);
        results.not_indexed.sort();
        results.not_indexed.dedup();
        Ok(Fanned {
            results,
            not_searched,
        })
    }

    /// Every part of a query: the caller's readable repositories from the frame's targets,
    /// the query checked, the other owners asked while this replica searches what it holds.
    async fn gather(
        &self,
        call: RepoCall<Option<String>>,
        revision: Option<String>,
        query: FanQuery,
        peers: Arc<dyn Peers>,
    ) -> Result<Gathered, ServiceError> {
        let mut call = call;
        call.admit(&self.inner, crate::Class::Search).await?;
        let this = self.clone();
        let (local, waiting, base, mode, mut not_indexed) = self
            .blocking(move |inner| {
                // The slot goes with the call, which this closure drops: held for this
                // replica's own part only; waiting for the others' must not keep a slot
                // (they take one each on their side).
                let (indexes, targets) = call.targets(inner, revision.as_deref())?;
                let IndexedTargets {
                    repos,
                    leases,
                    stale,
                } = targets;
                let FanQuery {
                    mode,
                    query,
                    regex,
                    case_sensitive,
                    path,
                    lang,
                    limit,
                    cursor,
                    count,
                } = query;
                let base = search::SearchRequest {
                    query,
                    repos: repos.clone(),
                    path,
                    lang,
                    regex,
                    case_sensitive,
                    limit,
                    cursor,
                    count,
                };
                let definitions = |repos: Vec<String>, limit: usize| match &mode {
                    ShardMode::Definitions { symbol } => Some(search::DefinitionsRequest {
                        symbol: symbol.clone(),
                        repos,
                        path: base.path.clone(),
                        lang: base.lang.clone(),
                        limit,
                    }),
                    _ => None,
                };
                // A bad query or cursor is refused before anyone is asked.
                let want = match (definitions(Vec::new(), limit), mode.as_search()) {
                    (Some(request), _) => {
                        search::check_definitions(&request)?;
                        limit.clamp(1, search::MAX_DEFINITIONS)
                    }
                    (None, search) => {
                        let search = search.unwrap_or(search::Mode::Search);
                        let offset = search::page_offset(&base, search)?;
                        usize::try_from(offset)
                            .unwrap_or(usize::MAX)
                            .saturating_add(limit.clamp(1, search::MAX_LIMIT))
                    }
                };
                let plan = this.plan(indexes, repos, stale);
                // The others' parts run while this replica searches its own.
                let runtime = tokio::runtime::Handle::current();
                let remote: Vec<String> =
                    plan.remote.iter().map(|(repo, _)| repo.clone()).collect();
                let template = ShardRequest {
                    mode: mode.clone(),
                    query: base.query.clone(),
                    regex,
                    case_sensitive,
                    path: base.path.clone(),
                    lang: base.lang.clone(),
                    repos: Vec::new(),
                    want,
                    count,
                };
                let waiting = (!plan.remote.is_empty()).then(|| {
                    let deadline = tokio::time::Instant::now() + FAN_OUT_BUDGET;
                    runtime.spawn(ask_owners(peers, plan.remote, template, deadline))
                });
                let local = if plan.local.is_empty() {
                    None
                } else if let Some(request) = definitions(plan.local.clone(), want) {
                    Some(Part::Definitions(indexes.definitions(&request)?))
                } else {
                    let part = search::SearchRequest {
                        repos: plan.local,
                        cursor: None,
                        ..base.clone()
                    };
                    let search = mode.as_search().unwrap_or(search::Mode::Search);
                    Some(Part::Top(indexes.top_hits(&part, search, want)?))
                };
                drop(leases);
                Ok((
                    local,
                    waiting.map(|task| (remote, task)),
                    base,
                    mode,
                    plan.not_indexed,
                ))
            })
            .await?;
        let mut parts: Vec<Part> = local.into_iter().collect();
        let mut not_searched = Vec::new();
        if let Some((remote, task)) = waiting {
            match task.await {
                Ok(asked) => {
                    for (repos, answer) in asked.answers {
                        parts.push(answer.into_part(&mode, &repos));
                    }
                    not_indexed.extend(asked.not_indexed);
                    not_searched.extend(asked.not_searched);
                }
                Err(error) => {
                    tracing::error!(%error, "asking owners for their parts of a query failed");
                    not_searched.extend(remote);
                }
            }
        }
        not_searched.sort();
        if !not_searched.is_empty() {
            tracing::warn!(
                repos = not_searched.len(),
                first = %not_searched[0],
                "no owner answered for some repositories of a query over every repository; the answer names them"
            );
        }
        Ok(Gathered {
            base,
            mode,
            parts,
            not_indexed,
            not_searched,
        })
    }

    /// Splits the repositories of a query by where they are searched: here when this replica
    /// owns one and holds its index (or nobody else owns it), else by its other owners.
    fn plan(&self, indexes: &search::Indexes, repos: Vec<String>, stale: Vec<String>) -> Plan {
        let mut plan = Plan::default();
        let Some(placement) = self.inner.placement.get() else {
            plan.local = repos;
            plan.not_indexed = stale;
            return plan;
        };
        let me = placement.self_url();
        let stale: HashSet<String> = stale.into_iter().collect();
        let mut all: Vec<String> = repos;
        all.extend(stale.iter().cloned());
        for repo in all {
            let owners = placement.owners(&repo);
            let mine = owners.is_empty() || owners.iter().any(|owner| owner == me);
            let others: Vec<String> = owners.into_iter().filter(|owner| owner != me).collect();
            let here = mine && indexes.current(&repo).is_some();
            if here || (mine && others.is_empty()) {
                if stale.contains(&repo) {
                    plan.not_indexed.push(repo);
                } else {
                    plan.local.push(repo);
                }
            } else {
                plan.remote.push((repo, others));
            }
        }
        plan
    }
}

/// Asks the owners of `remote` (each repository with its owners, the preferred first) for
/// their parts, in rounds: each round asks every owner once, at the same time, for the
/// repositories it is now the first untried owner of — so one call per owner, however many
/// owner sets the repositories fall into. What an owner failed to answer (unreachable,
/// timed out, an error) or holds no index of goes to that repository's next owner in the
/// next round.
async fn ask_owners(
    peers: Arc<dyn Peers>,
    remote: Vec<(String, Vec<String>)>,
    template: ShardRequest,
    deadline: tokio::time::Instant,
) -> Asked {
    let mut asked = Asked::default();
    let mut candidates: HashMap<String, VecDeque<String>> = HashMap::new();
    let mut pending: Vec<String> = Vec::new();
    for (repo, owners) in remote {
        pending.push(repo.clone());
        candidates.insert(repo, owners.into());
    }
    let mut not_indexed_somewhere = BTreeSet::new();
    while !pending.is_empty() {
        if tokio::time::Instant::now() >= deadline {
            // Out of time: what is left is named, not waited for.
            asked.not_searched.append(&mut pending);
            break;
        }
        let mut round: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for repo in pending.drain(..) {
            match candidates.get_mut(&repo).and_then(VecDeque::pop_front) {
                Some(owner) => round.entry(owner).or_default().push(repo),
                None if not_indexed_somewhere.contains(&repo) => asked.not_indexed.push(repo),
                None => asked.not_searched.push(repo),
            }
        }
        let calls: Vec<_> = round
            .into_iter()
            .map(|(owner, repos)| {
                let request = ShardRequest {
                    repos: repos.clone(),
                    ..template.clone()
                };
                let call = tokio::spawn(peers.search_shard(&owner, request));
                (owner, repos, call)
            })
            .collect();
        for (owner, repos, mut call) in calls {
            let outcome = match tokio::time::timeout_at(deadline, &mut call).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(error)) => Err(PeerError {
                    message: format!("the call stopped: {error}"),
                }),
                Err(_) => {
                    call.abort();
                    Err(PeerError {
                        message: format!("no answer within the fan-out's {FAN_OUT_BUDGET:?}"),
                    })
                }
            };
            match outcome {
                Ok(answer) => {
                    let repos: BTreeSet<String> = repos.into_iter().collect();
                    for repo in &answer.not_indexed {
                        if repos.contains(repo) {
                            not_indexed_somewhere.insert(repo.clone());
                            pending.push(repo.clone());
                        }
                    }
                    asked.answers.push((repos, answer));
                }
                Err(error) => {
                    tracing::info!(
                        %owner,
                        %error,
                        repos = repos.len(),
                        "an owner gave no part of a query over every repository; asking the next"
                    );
                    pending.extend(repos);
                }
            }
        }
    }
    asked.not_indexed.sort();
    asked.not_searched.sort();
    asked
}

impl From<search::Definitions> for ShardAnswer {
    fn from(found: search::Definitions) -> Self {
        ShardAnswer {
            hits: Vec::new(),
            generations: found
                .searched
                .into_iter()
                .map(|(repo, commit)| (repo, commit, 0))
                .collect(),
            not_indexed: found.not_indexed,
            stats: ShardStats {
                total_hits: found.total,
                ..ShardStats::default()
            },
            definitions: found
                .definitions
                .into_iter()
                .map(|d| ShardDefinition {
                    repo: d.repo,
                    commit: d.commit,
                    path: d.path,
                    kind: d.symbol.kind.as_str().to_owned(),
                    name: d.symbol.name,
                    line: d.symbol.line,
                    start_line: d.symbol.start_line,
                    end_line: d.symbol.end_line,
                    parent: d.symbol.parent,
                    signature: d.symbol.signature,
                    parent_name: d.parent_name,
                })
                .collect(),
        }
    }
}

impl From<search::TopHits> for ShardAnswer {
    fn from(top: search::TopHits) -> Self {
        let stats = top.stats;
        ShardAnswer {
            hits: top
                .hits
                .into_iter()
                .map(|ranked| {
                    let tier = match ranked.tier {
                        search::Tier::FileName => ShardTier::FileName,
                        search::Tier::Definition => ShardTier::Definition,
                        search::Tier::Line => ShardTier::Line,
                    };
                    let (path, line, snippet, path_only, definition, marks) = match ranked.hit {
                        search::Hit::Line {
                            path,
                            line,
                            snippet,
                            definition,
                            marks,
                        } => (path, Some(line), Some(snippet), None, definition, marks),
                        search::Hit::FileName { path, path_only } => {
                            let why = path_only.map(|why| match why {
                                search::PathOnly::TooLarge => ShardPathOnly::TooLarge,
                                search::PathOnly::Binary => ShardPathOnly::Binary,
                                search::PathOnly::NotUtf8 => ShardPathOnly::NotUtf8,
                            });
                            (path, None, None, why, false, Vec::new())
                        }
                    };
                    ShardHit {
                        tier,
                        repo: ranked.repo,
                        commit: ranked.commit,
                        path,
                        line,
                        snippet,
                        path_only,
                        definition,
                        marks,
                    }
                })
                .collect(),
            generations: top.generations,
            not_indexed: top.not_indexed,
            stats: (&stats).into(),
            definitions: Vec::new(),
        }
    }
}

impl ShardAnswer {
    /// The part as the merge of `mode` takes it, keeping only the repositories `asked` for.
    fn into_part(self, mode: &ShardMode, asked: &BTreeSet<String>) -> Part {
        match mode {
            ShardMode::Definitions { .. } => Part::Definitions(self.into_definitions(asked)),
            ShardMode::Search | ShardMode::References { .. } => {
                Part::Top(self.into_top_hits(asked))
            }
        }
    }

    /// The definitions of the part, of the repositories `asked` for only.
    fn into_definitions(self, asked: &BTreeSet<String>) -> search::Definitions {
        search::Definitions {
            definitions: self
                .definitions
                .into_iter()
                .filter(|d| asked.contains(&d.repo))
                .map(|d| search::Definition {
                    repo: d.repo,
                    commit: d.commit,
                    path: d.path,
                    symbol: search::Symbol {
                        kind: search::SymbolKind::from_name(&d.kind),
                        name: d.name,
                        line: d.line,
                        start_line: d.start_line,
                        end_line: d.end_line,
                        parent: d.parent,
                        signature: d.signature,
                    },
                    parent_name: d.parent_name,
                })
                .collect(),
            total: self.stats.total_hits,
            searched: self
                .generations
                .into_iter()
                .filter(|(repo, _, _)| asked.contains(repo))
                .map(|(repo, commit, _)| (repo, commit))
                .collect(),
            not_indexed: Vec::new(),
        }
    }

    /// The part as the merge takes it, keeping only the repositories `asked` for (an owner
    /// never widens what the caller may read); its `not_indexed` is the asker's to place.
    fn into_top_hits(self, asked: &BTreeSet<String>) -> search::TopHits {
        let stats = self.stats;
        search::TopHits {
            hits: self
                .hits
                .into_iter()
                .filter(|hit| asked.contains(&hit.repo))
                .map(|hit| search::RankedHit {
                    tier: match hit.tier {
                        ShardTier::FileName => search::Tier::FileName,
                        ShardTier::Definition => search::Tier::Definition,
                        ShardTier::Line => search::Tier::Line,
                    },
                    repo: hit.repo,
                    commit: hit.commit,
                    hit: match (hit.line, hit.snippet) {
                        (Some(line), Some(snippet)) => search::Hit::Line {
                            // Another replica's marks are used only when they can be this
                            // snippet's (slicing the snippet by them must not fail later).
                            marks: if search::marks_fit(&snippet, &hit.marks) {
                                hit.marks
                            } else {
                                Vec::new()
                            },
                            path: hit.path,
                            line,
                            snippet,
                            definition: hit.definition,
                        },
                        _ => search::Hit::FileName {
                            path: hit.path,
                            path_only: hit.path_only.map(|why| match why {
                                ShardPathOnly::TooLarge => search::PathOnly::TooLarge,
                                ShardPathOnly::Binary => search::PathOnly::Binary,
                                ShardPathOnly::NotUtf8 => search::PathOnly::NotUtf8,
                            }),
                        },
                    },
                })
                .collect(),
            generations: self
                .generations
                .into_iter()
                .filter(|(repo, _, _)| asked.contains(repo))
                .collect(),
            not_indexed: Vec::new(),
            stats: search::SearchStats {
                candidate_files: stats.candidate_files,
                files_verified: stats.files_verified,
                elapsed: Duration::from_micros(stats.elapsed_us),
                documents: stats.documents,
                total_hits: stats.total_hits,
                total_is_lower_bound: stats.truncated,
                truncated: stats.truncated,
                cached: stats.cached,
            },
        }
    }
}
