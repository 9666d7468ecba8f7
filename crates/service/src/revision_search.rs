//! `search` at a `revision` other than the indexed head (S-8, issue 33 points 4 and 5).
//!
//! **Design.** Each repository has one full index: its default branch's head (the current
//! generation, `search`). A commit that is not indexed is searched as that generation with
//! the files that differ *laid over* it ([`search::Overlay`]): the base's paths whose content
//! differs or that the commit lacks are hidden, and the commit's files that the base lacks
//! or has with other content are added with their bytes. Content is keyed by blob id, so
//! every unchanged file keeps its postings from the generation; only the differing blobs
//! are read from Git (their sizes first, from object headers, so the bytes are bounded
//! before anything is inflated) and verified directly by the search crate, which caches
//! their trigram sets by blob. Results equal `git grep -n` at that commit and the answer
//! names the full SHA.
//!
//! **Revision.** Resolved exactly as `read` resolves one (branch, tag, full or unique short
//! SHA within retention, with `read`'s errors); the call holds a lease on it while it
//! searches, as on the indexed head.
//!
//! **Bounds.** The differing blobs of one overlay are at most [`MAX_OVERLAY_BYTES`] and are
//! read within the search budget; past either the call fails and says how to get an answer
//! (a commit nearer the head; `--index-branch` for a branch, whose overlay is then made in
//! the background, without the budget).
//!
//! **Caching.** Overlays are kept in memory by (repository, registered path, base commit,
//! commit) under [`OVERLAY_CACHE_BYTES`], least recently used first, so the same
//! call again neither diffs trees nor reads blobs (and the search crate keeps the overlay's
//! generation, so it verifies nothing either). A new indexed head is a new base commit: old
//! entries are simply never asked for again and age out.
//!
//! **Indexed branches.** An indexed branch (`csg repo add --index-branch PATTERN`) is an
//! overlay kept warm over the default branch's generation: after each sync and index build
//! ([`Service::warm_index_branches`]) the overlay of every branch matching the repository's
//! patterns is made (without the search budget) and its generation built by a one-hit
//! search, so the first search at that branch finds both ready.

use crate::frame::{self, IndexedTargets, RepoCall};
use crate::index::index_request;
use crate::serverplugins::SearchHook;
use crate::{Inner, SearchAnswer, SearchRequest, Service, ServiceError};
use gitstore::{CommitId, Lease, RepoName};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Instant;

/// Most bytes of differing blobs one overlay reads (256 MiB): a commit further from the
/// indexed head than that is refused with what to do instead.
pub const MAX_OVERLAY_BYTES: u64 = 256 << 20;

/// Most bytes of overlays (their added texts and paths) kept in memory, all repositories
/// together (512 MiB). The texts are shared with the search crate's overlay generations.
pub const OVERLAY_CACHE_BYTES: usize = 512 << 20;

/// Threads reading differing blobs for one overlay (inflating is CPU work; the machine
/// has few cores and other searches run too).
const READ_THREADS: usize = 2;

/// What an overlay is computed for in one service: the same key, the same overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OverlayKey {
    repo: String,
    /// The registered path: what is visible depends on it.
    scope: String,
    base: String,
    commit: String,
}

/// Overlays kept, most recently used first, bounded in bytes.
#[derive(Default)]
pub(crate) struct OverlayCache {
    kept: VecDeque<(OverlayKey, Arc<search::Overlay>, usize)>,
    bytes: usize,
}

impl OverlayCache {
    fn get(&mut self, key: &OverlayKey) -> Option<Arc<search::Overlay>> {
        let at = self.kept.iter().position(|(k, _, _)| k == key)?;
        let entry = self.kept.remove(at)?;
        let overlay = entry.1.clone();
        self.kept.push_front(entry);
        Some(overlay)
    }

    fn insert(&mut self, key: OverlayKey, overlay: Arc<search::Overlay>) {
        let bytes = footprint(&overlay);
        if bytes > OVERLAY_CACHE_BYTES / 2 {
            return;
        }
        if let Some(at) = self.kept.iter().position(|(k, _, _)| *k == key)
            && let Some((_, _, old)) = self.kept.remove(at)
        {
            self.bytes -= old;
        }
        self.bytes += bytes;
        self.kept.push_front((key, overlay, bytes));
        while self.bytes > OVERLAY_CACHE_BYTES {
            match self.kept.pop_back() {
                Some((_, _, freed)) => self.bytes -= freed,
                None => break,
            }
        }
    }
}

/// What an overlay holds in memory, roughly.
fn footprint(overlay: &search::Overlay) -> usize {
    let added: usize = overlay
        .added
        .iter()
        .map(|doc| doc.text.len() + doc.path.len() + doc.blob.len() + 64)
        .sum();
    let hidden: usize = overlay.hidden.iter().map(|p| p.len() + 24).sum();
    added + hidden + 256
}

/// Why an overlay was not made.
enum Refused {
    /// The differing blobs are more than [`MAX_OVERLAY_BYTES`].
    TooBig {
        files: usize,
        bytes: u64,
    },
    /// The budget ran out while reading them.
    TooSlow {
        files: usize,
    },
    Failed(ServiceError),
}

impl From<gitstore::Error> for Refused {
    fn from(error: gitstore::Error) -> Self {
        Refused::Failed(error.into())
    }
}

impl Service {
    /// A code search of `call`'s repository at `req.revision` (S-8): the ordinary search
    /// when the revision is the indexed head, else the indexed head with the differing
    /// files laid over it.
    pub(crate) async fn search_revision(
        &self,
        call: RepoCall<Option<String>>,
        req: SearchRequest,
        hook: Option<SearchHook>,
    ) -> Result<SearchAnswer, ServiceError> {
        let mut call = call;
        // Held until the search is done (the slot goes with the call).
        call.admit(&self.inner, crate::Class::Search).await?;
        self.blocking(move |inner| {
            let query = req.query.clone();
            // A lease on the blocking pool may wait for a follow (cluster mode), as a read's.
            let answer = frame::on_blocking_pool(|| inner.search_at_revision(&mut call, req))?;
            Ok(match hook {
                Some(hook) => hook.apply(&query, answer),
                None => answer,
            })
        })
        .await
    }

    /// Indexed branches (S-8): makes the overlay of every branch of `repo` that its
    /// index-branch patterns match (the default branch aside) over its current index, and
    /// builds its search generation, so the first search at such a branch is fast. Run
    /// after a sync and its index build; a failure is logged and costs only that first
    /// search its time.
    pub async fn warm_index_branches(&self, repo: String) {
        let result = self
            .blocking(move |inner| {
                inner.warm_index_branches(&repo);
                Ok(())
            })
            .await;
        if let Err(error) = result {
            tracing::warn!(%error, "warming indexed branches failed");
        }
    }
}

impl Inner {
    fn kept_overlays(&self) -> std::sync::MutexGuard<'_, OverlayCache> {
        self.overlays.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn search_at_revision(
        &self,
        call: &mut RepoCall<Option<String>>,
        req: SearchRequest,
    ) -> Result<SearchAnswer, ServiceError> {
        let started = Instant::now();
        let revision = req.revision.clone().unwrap_or_default();
        // The index may move to a new head between the look and the search: then the
        // overlay is made again against the new one, once.
        for attempt in 0..2 {
            // Access to the named repository and a lease on its indexed head.
            let (
                indexes,
                IndexedTargets {
                    repos,
                    leases,
                    stale,
                },
            ) = call.targets(self, None)?;
            let Some(repo) = repos.first().or(stale.first()).cloned() else {
                return Err(ServiceError::invalid(
                    "revision names a commit of one repository: pass repo too",
                ));
            };
            let name = RepoName::parse(&repo)?;
            let at = frame::lease_revision(self, &name, Some(&revision), call.budget())?;
            let base = leases.first();
            let overlay = match base {
                Some(base) if base.commit() != at.commit() => {
                    // Building an overlay is heavy work of its own class (O-9); a kept one
                    // takes no slot.
                    if !self.overlay_kept(base, &at) {
                        call.admit_blocking(self, crate::Class::Overlay)?;
                    }
                    match self.overlay(base, &at, Some((started, call.budget()))) {
                        Ok(overlay) => Some(overlay),
                        Err(refused) => return Err(refusal(refused, &name, &at, base)),
                    }
                }
                // The indexed head itself; or no index (or one out of retention): answered
                // as a search without revision answers it (not indexed).
                _ => None,
            };
            let request = index_request(&req, repos);
            let results = match &overlay {
                Some(overlay) => match indexes.search_overlay(&request, overlay) {
                    Err(search::SearchError::OverlayBase { .. }) if attempt == 0 => continue,
                    searched => searched?,
                },
                None => indexes.search(&request)?,
            };
            let mut answer: SearchAnswer = results.into();
            drop((leases, at));
            answer.not_indexed.extend(stale);
            answer.not_indexed.sort();
            return Ok(answer);
        }
        Err(ServiceError::unavailable(
            "the index moved to a new head twice while this search ran; search again",
        ))
    }

    /// Whether the overlay of `at` over `base` is kept already.
    fn overlay_kept(&self, base: &Lease, at: &Lease) -> bool {
        self.kept_overlays().get(&overlay_key(base, at)).is_some()
    }

    /// The overlay of `at` over `base` (the indexed head): kept, or made and kept. With
    /// `budget_from`, reading stops when the search budget since then runs out or the call's
    /// budget is cancelled.
    fn overlay(
        &self,
        base: &Lease,
        at: &Lease,
        budget_from: Option<(Instant, &budget::Budget)>,
    ) -> Result<Arc<search::Overlay>, Refused> {
        let key = overlay_key(base, at);
        if let Some(kept) = self.kept_overlays().get(&key) {
            return Ok(kept);
        }
        let overlay = Arc::new(make_overlay(base, at, budget_from)?);
        self.kept_overlays().insert(key, overlay.clone());
        Ok(overlay)
    }

    /// See [`Service::warm_index_branches`].
    fn warm_index_branches(&self, repo: &str) {
        let Ok(indexes) = self.indexes() else {
            return;
        };
        let Some(indexed) = indexes.current(repo) else {
            return;
        };
        let warm = || -> Result<usize, gitstore::Error> {
            let name = RepoName::parse(repo)?;
            let branches = self.store.indexed_branches(&name)?;
            if branches.is_empty() {
                return Ok(0);
            }
            let Some(indexed_commit) = CommitId::parse(&indexed.commit) else {
                return Ok(0);
            };
            let base = self.store.lease(&name, &indexed_commit)?;
            let mut warmed = 0;
            for (branch, head) in branches {
                if head == indexed_commit {
                    continue;
                }
                let at = match self.store.lease(&name, &head) {
                    Ok(at) => at,
                    Err(error) => {
                        tracing::debug!(repo, branch, %error, "indexed branch not readable");
                        continue;
                    }
                };
                let overlay = match self.overlay(&base, &at, None) {
                    Ok(overlay) => overlay,
                    Err(refused) => {
                        let error = refusal(refused, &name, &at, &base);
                        tracing::warn!(repo, branch, %error, "indexed branch not warmed");
                        continue;
                    }
                };
                // One hit of a query that is cheap anywhere builds the overlay's generation
                // (and the trigram sets of its blobs) in the search crate.
                let mut request = index_request(
                    &SearchRequest {
                        query: "csg-warm-indexed-branch".into(),
                        ..SearchRequest::default()
                    },
                    vec![repo.to_string()],
                );
                request.limit = 1;
                if let Err(error) = indexes.search_overlay(&request, &overlay) {
                    tracing::debug!(repo, branch, %error, "indexed branch generation not built");
                    continue;
                }
                warmed += 1;
            }
            Ok(warmed)
        };
        match warm() {
            Ok(0) => {}
            Ok(warmed) => tracing::info!(repo, warmed, "indexed branches warmed"),
            Err(error) => tracing::warn!(repo, %error, "indexed branches not warmed"),
        }
    }
}

/// What an overlay is kept under.
fn overlay_key(base: &Lease, at: &Lease) -> OverlayKey {
    OverlayKey {
        repo: at.repo().to_string(),
        scope: at.registered_path().to_string(),
        base: base.commit().to_string(),
        commit: at.commit().to_string(),
    }
}

/// The error a refused overlay answers, saying what to do.
fn refusal(refused: Refused, name: &RepoName, at: &Lease, base: &Lease) -> ServiceError {
    let (commit, head) = (at.commit(), base.commit());
    match refused {
        Refused::TooBig { files, bytes } => ServiceError::invalid(format!(
            "commit {commit} of {name} differs from the indexed head {head} in too many files to search without an index of its own ({files} files, {} MiB; a search at a revision reads at most {} MiB): search a commit nearer the head, or omit revision",
            bytes.div_ceil(1 << 20),
            MAX_OVERLAY_BYTES >> 20
        )),
        Refused::TooSlow { files } => ServiceError::unavailable(format!(
            "commit {commit} of {name} differs from the indexed head {head} in too many files ({files}) to read within the search budget ({} s); for a branch searched often, have it indexed (`csg repo add {name} SOURCE --index-branch BRANCH`: its files are then read after each sync), or search a commit nearer the head",
            search::SEARCH_BUDGET.as_secs()
        )),
        Refused::Failed(error) => error,
    }
}

/// Diffs the two trees and reads the differing blobs of `at` (see the module docs).
fn make_overlay(
    base: &Lease,
    at: &Lease,
    budget_from: Option<(Instant, &budget::Budget)>,
) -> Result<search::Overlay, Refused> {
    // A caller's overlay stops with its call; the warm-up's (no caller) runs whole.
    let deltas = match budget_from {
        Some((_, budget)) => at.file_deltas_from_within(base, budget)?,
        None => at.file_deltas_from(base)?,
    };
    let reader = at.blobs()?;
    let hidden: Vec<String> = deltas
        .iter()
        .filter(|d| d.old.is_some())
        .map(|d| d.path.clone())
        .collect();
    // Each distinct blob once, however many paths hold it.
    let mut wanted: Vec<&str> = deltas.iter().filter_map(|d| d.new.as_deref()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut bytes = 0u64;
    for id in &wanted {
        bytes += reader.size(id)?;
        if bytes > MAX_OVERLAY_BYTES {
            return Err(Refused::TooBig {
                files: deltas.len(),
                bytes: wanted.iter().map(|id| reader.size(id).unwrap_or(0)).sum(),
            });
        }
    }
    let texts = read_all(&reader, &wanted, budget_from).ok_or(Refused::TooSlow {
        files: deltas.len(),
    })??;
    let added = deltas
        .iter()
        .filter_map(|d| {
            let blob = d.new.as_ref()?;
            let index = wanted.binary_search(&blob.as_str()).ok()?;
            Some(search::OverlayDoc {
                path: d.path.clone(),
                blob: blob.clone(),
                text: texts[index].clone(),
            })
        })
        .collect();
    Ok(search::Overlay {
        commit: at.commit().to_string(),
        base_commit: base.commit().to_string(),
        hidden,
        added,
    })
}

/// One blob read: its place in the list and its bytes.
type Read = (usize, Arc<[u8]>);

/// The bytes of `ids`, in order, read by [`READ_THREADS`] threads; `None` when the search
/// budget since `budget_from` ran out first, or the call was cancelled.
fn read_all(
    reader: &gitstore::BlobReader,
    ids: &[&str],
    budget_from: Option<(Instant, &budget::Budget)>,
) -> Option<Result<Vec<Arc<[u8]>>, gitstore::Error>> {
    let deadline = budget_from.map(|(from, _)| from + search::SEARCH_BUDGET);
    let cancelled = || budget_from.is_some_and(|(_, budget)| budget.is_cancelled());
    let next = AtomicUsize::new(0);
    let late = AtomicBool::new(false);
    let threads = READ_THREADS.min(ids.len()).max(1);
    let parts: Vec<Result<Vec<Read>, gitstore::Error>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut read = Vec::new();
                    loop {
                        if late.load(Ordering::Relaxed) {
                            return Ok(read);
                        }
                        if deadline.is_some_and(|d| Instant::now() > d) || cancelled() {
                            late.store(true, Ordering::Relaxed);
                            return Ok(read);
                        }
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        let Some(id) = ids.get(at) else {
                            return Ok(read);
                        };
                        read.push((at, Arc::from(reader.read(id)?)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker.join().unwrap_or_else(|_| {
                    Err(gitstore::Error::Storage(
                        "reading the object database".into(),
                    ))
                })
            })
            .collect()
    });
    if late.load(Ordering::Relaxed) {
        return None;
    }
    let mut texts: Vec<Option<Arc<[u8]>>> = vec![None; ids.len()];
    for part in parts {
        match part {
            Ok(read) => {
                for (at, text) in read {
                    texts[at] = Some(text);
                }
            }
            Err(error) => return Some(Err(error)),
        }
    }
    Some(Ok(texts
        .into_iter()
        .map(|t| t.unwrap_or_else(|| Arc::from(&[][..])))
        .collect()))
}
