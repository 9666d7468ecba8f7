//! Search at a commit that is not indexed (S-8): the repository's current generation with
//! the files that differ laid over it. The caller lists the base's paths the commit does not
//! have as they are (`hidden`) and the commit's files the base does not have as they are
//! (`added`, with their bytes); the search then runs over an in-memory generation holding
//! the unchanged documents of the base (their texts and postings shared, ids remapped) and
//! the added ones, in the same document order a generation built at that commit would have,
//! so hits, ranking, pages and cursors are those of such a generation.
//!
//! What is kept for the next call: each added blob's classification and trigram set, by blob
//! id (bounded by [`crate::overlay_cache::BLOB_CACHE_BYTES`], least recently used first), and the few most recent
//! overlay generations (by repository, base generation and commit; [`crate::overlay_cache::OVERLAY_CACHE_ENTRIES`],
//! [`crate::overlay_cache::OVERLAY_CACHE_BYTES`]), which the result cache then recognises, so the same call again is
//! a cache hit and another query at the same commit verifies only.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};

use crate::build::classify;
use crate::error::SearchError;
use crate::indexes::Indexes;
use crate::lang::DocLang;
use crate::order::static_rank;
use crate::request::{SearchRequest, SearchResults};
use crate::store::{Doc, DocKind, Generation};
use crate::trigram::{Trigram, TrigramScratch, doc_trigrams};

/// A commit searched through the repository's current generation: the files that differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// Full SHA of the commit searched (what the answer names).
    pub commit: String,
    /// Full SHA the differences were computed against; must be the commit of the
    /// repository's current generation, else [`SearchError::OverlayBase`] (the caller
    /// recomputes against the new head).
    pub base_commit: String,
    /// Paths of the base commit whose content differs at `commit`, or that `commit` lacks
    /// (repository-relative, any order).
    pub hidden: Vec<String>,
    /// Files of `commit` that the base lacks or has with other content.
    pub added: Vec<OverlayDoc>,
}

/// One file of an overlay's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayDoc {
    /// Repository-relative path with `/` separators.
    pub path: String,
    /// Hex blob id (equal ids mean equal bytes: what the blob cache is keyed by).
    pub blob: String,
    /// The file's bytes.
    pub text: Arc<[u8]>,
}

/// The sorted trigram set of a text document (empty for any other kind).
fn text_trigrams(kind: DocKind, text: &[u8]) -> Arc<[Trigram]> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<TrigramScratch> =
            std::cell::RefCell::new(TrigramScratch::new());
    }
    if kind != DocKind::Text {
        return Arc::from(&[][..]);
    }
    let mut trigrams = Vec::new();
    SCRATCH.with(|scratch| doc_trigrams(text, &mut scratch.borrow_mut(), &mut trigrams));
    trigrams.sort_unstable();
    trigrams.into()
}

/// `make` of each of `items`, in order, on up to `threads` threads (taking items in turn).
fn made_in_parallel<T: Send>(
    items: &[usize],
    threads: usize,
    make: impl Fn(usize) -> T + Sync,
) -> Vec<T> {
    let threads = threads.min(items.len().div_ceil(16)).max(1);
    if threads == 1 {
        return items.iter().map(|&i| make(i)).collect();
    }
    let next = AtomicUsize::new(0);
    let mut parts: Vec<(usize, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&item) = items.get(at) else {
                            return out;
                        };
                        out.push((at, make(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| match worker.join() {
                Ok(part) => part,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    parts.sort_unstable_by_key(|(at, _)| *at);
    parts.into_iter().map(|(_, made)| made).collect()
}

impl Indexes {
    /// One repository (`request.repos` has exactly it) searched at `overlay.commit`: the hits
    /// `git grep -n` finds at that commit (and the file-name hits of its paths), ranked and
    /// paged as a generation built at that commit would rank and page them; the answer and
    /// its cursor name `overlay.commit`. Added files go through the build's rules (over the
    /// size limit, binary or not UTF-8: path only; language by path); no transform applies.
    ///
    /// Fails with [`SearchError::OverlayBase`] when the repository's current generation is
    /// not at `overlay.base_commit`. A repository without an index is answered as
    /// [`SearchResults::not_indexed`].
    pub fn search_overlay(
        &self,
        request: &SearchRequest,
        overlay: &Overlay,
    ) -> Result<SearchResults, SearchError> {
        let [repo] = request.repos.as_slice() else {
            return Err(SearchError::OverlayRepos {
                count: request.repos.len(),
            });
        };
        let (mut pinned, not_indexed) = self.pinned(std::slice::from_ref(repo), false);
        if let Some((_, base)) = pinned.pop() {
            if base.meta.commit != overlay.base_commit {
                return Err(SearchError::OverlayBase {
                    repo: repo.clone(),
                    indexed: base.meta.commit.clone(),
                    base: overlay.base_commit.clone(),
                });
            }
            let generation = self.overlay_generation(repo, base, overlay);
            pinned.push((repo.clone(), generation));
        }
        self.search_pinned(request, (pinned, not_indexed), true)
    }

    /// The overlay generation of `overlay` over `base`: kept from an earlier call, or made
    /// (trigram sets from the blob cache where it has them) and kept.
    fn overlay_generation(
        &self,
        repo: &str,
        base: Arc<Generation>,
        overlay: &Overlay,
    ) -> Arc<Generation> {
        if let Some(kept) = self
            .overlays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(repo, &base, &overlay.commit)
        {
            return kept;
        }
        let max = self.config.max_file_bytes;
        // One document per path, as a build keeps.
        let mut seen = HashSet::new();
        let files: Vec<&OverlayDoc> = overlay
            .added
            .iter()
            .filter(|file| seen.insert(file.path.as_str()))
            .collect();
        let cached: Vec<Option<(DocKind, Arc<[Trigram]>)>> = {
            let mut blobs = self.blobs.lock().unwrap_or_else(PoisonError::into_inner);
            files.iter().map(|file| blobs.get(&file.blob)).collect()
        };
        // The trigram sets the cache lacks, on every core: over a thousand commits of moby
        // that is ~50 MB of text, most of a cold overlay's making on one core.
        let missing: Vec<usize> = (0..files.len()).filter(|&i| cached[i].is_none()).collect();
        let made = made_in_parallel(&missing, self.threads, |i| {
            let text = &files[i].text;
            let kind = classify(text, max);
            (kind, text_trigrams(kind, text))
        });
        {
            let mut blobs = self.blobs.lock().unwrap_or_else(PoisonError::into_inner);
            for (&i, (kind, trigrams)) in missing.iter().zip(&made) {
                blobs.insert(&files[i].blob, *kind, trigrams.clone());
            }
        }
        let mut made = missing.iter().copied().zip(made).peekable();
        let mut added = Vec::with_capacity(files.len());
        let mut bytes = 0usize;
        for (i, (file, cached)) in files.iter().zip(cached).enumerate() {
            let (kind, trigrams) = match cached {
                Some(found) => found,
                None => match made.next_if(|(at, _)| *at == i) {
                    Some((_, found)) => found,
                    None => continue, // not reached: every miss was made
                },
            };
            let (text, len): (Arc<[u8]>, u64) = if kind == DocKind::Text {
                (file.text.clone(), file.text.len() as u64)
            } else {
                (Arc::from(&[][..]), 0)
            };
            bytes += text.len() + std::mem::size_of_val(&trigrams[..]);
            added.push((
                Doc {
                    rank: static_rank(&file.path),
                    path: file.path.clone(),
                    blob_id: file.blob.clone(),
                    size: file.text.len() as u64,
                    kind,
                    offset: 0,
                    len,
                    lang: DocLang::FromPath,
                },
                text,
                trigrams,
            ));
        }
        // A path both hidden and added is the added one; a hidden path the base lacks hides
        // nothing.
        let mut hidden: HashSet<&str> = overlay.hidden.iter().map(String::as_str).collect();
        hidden.extend(seen.iter().copied());
        let generation = Arc::new(Generation::overlaid(
            base.clone(),
            &overlay.commit,
            &hidden,
            added,
        ));
        self.overlays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(repo, &base, &overlay.commit, generation.clone(), bytes);
        generation
    }
}
