//! A directory's README on the repository and tree pages, rendered off the HTTP workers and
//! once (issue 42, point 6).
//!
//! The README is read through the service like any file (access first, W-34). A Markdown
//! README is then rendered by `website::render_readme` on the blocking pool with a slot of
//! [`Class::Readme`] under the page's budget (`Service::offload`), and what it made is kept
//! in [`RenderedReadmes`], keyed by everything the HTML depends on: the repository, the
//! commit its links name, the README's path (its directory, whose listing decides its links
//! and images) and its text. A visit whose README is kept renders nothing and takes no slot;
//! visits that miss the same README at once render it once, the others wait for it.

use super::SiteState;
use service::{Budget, CallContext, Class, ListAnswer, ListRequest, ReadRequest};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use website::{Readme, RenderedReadme};

/// Directories listed at most to learn which of a README's relative images exist: the rest
/// show without a source (no request fails on the page).
const README_IMAGE_DIRECTORIES: usize = 8;

/// Bytes of rendered READMEs kept (the least recently shown go first).
pub(super) const README_CACHE_BYTES: usize = 32 << 20;

/// What a rendered README depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    repo: String,
    /// The full SHA its links name.
    commit: String,
    /// Its path: its directory's listing decides where relative links and images go.
    path: String,
    /// Its text, by length and hash (the rest of the key fixes the text already; this keeps
    /// a README read differently, cut at another budget, apart).
    text_len: usize,
    text_hash: u64,
    cut: bool,
}

impl Key {
    fn new(repo: &str, readme: &Readme, text: &str) -> Self {
        let mut hasher = std::hash::DefaultHasher::new();
        text.hash(&mut hasher);
        Key {
            repo: repo.to_owned(),
            commit: readme.commit.clone(),
            path: readme.path.clone(),
            text_len: text.len(),
            text_hash: hasher.finish(),
            cut: readme.cut,
        }
    }
}

/// Rendered READMEs, at most [`README_CACHE_BYTES`] of them, the least recently shown
/// dropped first; and the renders under way, so that one README renders once at a time.
pub(super) struct RenderedReadmes {
    capacity: usize,
    kept: Mutex<Kept>,
    flights: Mutex<HashMap<Key, Weak<tokio::sync::Mutex<()>>>>,
}

#[derive(Default)]
struct Kept {
    entries: HashMap<Key, (Arc<RenderedReadme>, u64)>,
    /// Entries by when they were last shown.
    order: BTreeMap<u64, Key>,
    bytes: usize,
    clock: u64,
}

impl RenderedReadmes {
    pub(super) fn new(capacity: usize) -> Self {
        RenderedReadmes {
            capacity,
            kept: Mutex::default(),
            flights: Mutex::default(),
        }
    }

    fn get(&self, key: &Key) -> Option<Arc<RenderedReadme>> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = &mut *kept;
        let (readme, last) = kept.entries.get_mut(key)?;
        kept.clock += 1;
        let key = kept.order.remove(last)?;
        *last = kept.clock;
        kept.order.insert(kept.clock, key);
        Some(Arc::clone(readme))
    }

    fn insert(&self, key: Key, readme: Arc<RenderedReadme>) {
        let weight = readme.weight() + 2 * (key.repo.len() + key.commit.len() + key.path.len());
        // One README may not push out half of the others.
        if weight > self.capacity / 2 {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = &mut *kept;
        kept.clock += 1;
        if let Some((old, last)) = kept.entries.remove(&key) {
            kept.order.remove(&last);
            kept.bytes -= old.weight() + 2 * (key.repo.len() + key.commit.len() + key.path.len());
        }
        while kept.bytes + weight > self.capacity {
            let Some((_, oldest)) = kept.order.pop_first() else {
                break;
            };
            if let Some((old, _)) = kept.entries.remove(&oldest) {
                kept.bytes -= old.weight()
                    + 2 * (oldest.repo.len() + oldest.commit.len() + oldest.path.len());
            }
        }
        kept.order.insert(kept.clock, key.clone());
        kept.entries.insert(key, (readme, kept.clock));
        kept.bytes += weight;
    }

    /// The lock of `key`'s render: held while it renders, so that a second visit waits for
    /// the first one's result instead of rendering it again.
    fn flight(&self, key: &Key) -> Arc<tokio::sync::Mutex<()>> {
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(flight) = flights.get(key).and_then(Weak::upgrade) {
            return flight;
        }
        if flights.len() >= 64 {
            flights.retain(|_, flight| flight.strong_count() > 0);
        }
        let flight = Arc::new(tokio::sync::Mutex::new(()));
        flights.insert(key.clone(), Arc::downgrade(&flight));
        flight
    }

    /// Bytes kept now.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bytes
    }
}

/// The README of a listed directory, read at the listing's full SHA (one read, so at most
/// the read budget; the page says when the rest is not shown), rendered (or taken from what
/// was rendered before) with what is known of the paths its relative links and images name:
/// the listing's entries and the directories of its images.
pub(super) async fn readme(
    state: &SiteState,
    ctx: &CallContext,
    listing: &ListAnswer,
) -> Option<Arc<RenderedReadme>> {
    let service = &state.service;
    let path = website::readme_path(listing)?.to_owned();
    let item = service
        .read(
            ctx,
            ReadRequest {
                repo: listing.repo.clone(),
                revision: Some(listing.commit.clone()),
                path: path.clone(),
                start_line: None,
                end_line: None,
                plugins: None,
            },
        )
        .await;
    let (text, cut) = match item.map(|item| item.outcome) {
        Ok(Ok(range)) => (Ok(range.content), range.has_more || range.truncated),
        Ok(Err(message)) => (Err(message), false),
        Err(e) => (Err(e.message), false),
    };
    let readme = Readme {
        path,
        commit: listing.commit.clone(),
        text,
        cut,
    };
    let (files, dirs) = website::known_paths(listing);
    let key = match &readme.text {
        Ok(text) if readme.is_markdown() => Key::new(&listing.repo, &readme, text),
        // Text shown as it is: nothing worth a slot or a place in the cache.
        _ => {
            return website::render_readme(&listing.repo, &readme, &dirs, &Budget::unlimited())
                .ok()
                .map(Arc::new);
        }
    };
    if let Some(kept) = state.readmes.get(&key) {
        return Some(kept);
    }
    let flight = state.readmes.flight(&key);
    // Waiting no longer than the page may: past its deadline the page renders on its own.
    let _turn = match ctx.budget.deadline() {
        Some(deadline) => tokio::time::timeout_at(deadline.into(), flight.lock_owned())
            .await
            .ok(),
        None => Some(flight.lock_owned().await),
    };
    if let Some(kept) = state.readmes.get(&key) {
        return Some(kept);
    }
    let repo = listing.repo.clone();
    let unreadable = |message: String| {
        let readme = Readme {
            text: Err(message),
            ..readme.clone()
        };
        website::render_readme(&repo, &readme, &dirs, &Budget::unlimited())
            .ok()
            .map(Arc::new)
    };
    let work = {
        let (repo, readme, dirs) = (repo.clone(), readme.clone(), dirs.clone());
        move |budget: &Budget| website::render_readme(&repo, &readme, &dirs, budget)
    };
    let mut rendered = match service.offload(ctx, Class::Readme, work).await {
        Ok(Ok(rendered)) => rendered,
        // The page's deadline passed or its visitor left while it rendered.
        Ok(Err(stop)) => return unreadable(format!("rendering it stopped: {stop}")),
        // Busy (every README slot taken) or out of time: the page says so, and the next
        // visit renders it.
        Err(e) => return unreadable(e.message),
    };
    let (files, complete) = image_files(state, ctx, listing, &rendered, files).await;
    rendered.show_images(&files);
    let rendered = Arc::new(rendered);
    // A README whose image directories could not all be listed is shown, not kept: the next
    // visit may find its images.
    if complete {
        state.readmes.insert(key, Arc::clone(&rendered));
    }
    Some(rendered)
}

/// The files known to exist among those a README's relative images name: the listing's, and
/// those of up to [`README_IMAGE_DIRECTORIES`] directories of its images; and whether every
/// directory needed was listed (or is known not to be there).
async fn image_files(
    state: &SiteState,
    ctx: &CallContext,
    listing: &ListAnswer,
    rendered: &RenderedReadme,
    mut files: HashSet<String>,
) -> (HashSet<String>, bool) {
    let listed = listing.path.trim_matches('/');
    let mut image_dirs: Vec<String> = Vec::new();
    for image in rendered.image_paths() {
        let dir = image.rsplit_once('/').map_or("", |(dir, _)| dir).to_owned();
        if dir != listed && !image_dirs.contains(&dir) {
            image_dirs.push(dir);
        }
    }
    let mut complete = true;
    for dir in image_dirs.into_iter().take(README_IMAGE_DIRECTORIES) {
        let request = ListRequest {
            repo: listing.repo.clone(),
            revision: Some(listing.commit.clone()),
            path: (!dir.is_empty()).then_some(dir),
            depth: Some(1),
        };
        match state.service.list(ctx, request).await {
            Ok(listed) => files.extend(website::known_paths(&listed).0),
            // A directory that is not there just leaves its images unshown.
            Err(e) if e.kind == service::ErrorKind::NotFound => {}
            Err(_) => complete = false,
        }
    }
    (files, complete)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(path: &str, text: &str) -> (Key, Arc<RenderedReadme>) {
        let readme = Readme {
            path: path.to_owned(),
            commit: "0123456789abcdef0123456789abcdef01234567".to_owned(),
            text: Ok(text.to_owned()),
            cut: false,
        };
        let shown =
            website::render_readme("acme/docs", &readme, &HashSet::new(), &Budget::unlimited())
                .unwrap();
        (Key::new("acme/docs", &readme, text), Arc::new(shown))
    }

    /// Issue 42 point 6: the cache holds at most its bytes, dropping the least recently
    /// shown README first, and hands back what it holds.
    #[test]
    fn the_cache_is_bounded_by_bytes_and_drops_the_least_recently_shown() {
        let (a, ra) = rendered("a/README.md", &"# A\n\ntext\n".repeat(200));
        let (b, rb) = rendered("b/README.md", &"# B\n\ntext\n".repeat(200));
        let (c, rc) = rendered("c/README.md", &"# C\n\ntext\n".repeat(200));
        let weight = ra.weight() + 200;
        let cache = RenderedReadmes::new(weight * 2 + weight / 2);
        cache.insert(a.clone(), ra);
        cache.insert(b.clone(), rb);
        assert!(
            cache.get(&a).is_some(),
            "a is shown again: b is now the oldest"
        );
        cache.insert(c.clone(), rc);
        assert!(cache.get(&a).is_some() && cache.get(&c).is_some());
        assert!(cache.get(&b).is_none(), "the least recently shown went");
        assert!(
            cache.bytes() <= weight * 2 + weight / 2,
            "{}",
            cache.bytes()
        );
        // Bigger than half the cache: shown, not kept.
        let (big, rbig) = rendered("big/README.md", &"# big\n\ntext\n".repeat(2000));
        cache.insert(big.clone(), rbig);
        assert!(cache.get(&big).is_none());
    }

    /// The key is what the HTML depends on: another commit or path, or other text, is
    /// another README.
    #[test]
    fn the_key_is_what_the_html_depends_on() {
        let (a, _) = rendered("README.md", "# x\n");
        let (b, _) = rendered("docs/README.md", "# x\n");
        let (c, _) = rendered("README.md", "# y\n");
        assert!(a != b && a != c);
        let mut d = a.clone();
        d.commit = "f".repeat(40);
        assert_ne!(a, d);
    }

    /// Visits that miss the same README at once take turns: the second finds what the first
    /// rendered.
    #[tokio::test]
    async fn one_render_at_a_time_per_readme() {
        let cache = RenderedReadmes::new(README_CACHE_BYTES);
        let (key, shown) = rendered("README.md", "# x\n");
        let first = cache.flight(&key).lock_owned().await;
        let second = cache.flight(&key);
        assert!(second.try_lock().is_err(), "the second visit waits");
        cache.insert(key.clone(), shown);
        drop(first);
        let _turn = second.lock_owned().await;
        assert!(cache.get(&key).is_some());
        // Nobody waiting: the lock is gone from the map once dropped.
        drop(_turn);
        assert!(cache.flight(&key).try_lock().is_ok());
    }
}
