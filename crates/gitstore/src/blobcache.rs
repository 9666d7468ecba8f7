//! Decoded blobs shared between calls (issue 42 point 5): the texts of recently read blobs,
//! so a continuation read of a big file (the next 200 lines, and the next) does not find and
//! inflate the same blob again; one decode per blob however many calls want it at once
//! (single flight); and the raw bytes of blobs being served, shared by every download of
//! the same blob while any of them is still being sent.
//!
//! Keyed by blob id alone: a blob id names its bytes, so one entry serves every commit,
//! path and repository that holds that blob. Nothing about access lives here: scope,
//! retention and the path lookup in the commit's tree all happen before the cache is asked.
//!
//! A wait here is only ever for another reader's decode of a blob within the text cap (or
//! the raw cap), never for a lock a writer holds: the maps are locked for a lookup or
//! an insert, never across a decode.

use crate::{Error, Text};
use gix::ObjectId;
use hashlink::LruCache;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};

/// Bytes of decoded text the cache holds by default (64 MiB).
pub const DEFAULT_BLOB_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// The largest blob the text tools decode by default (32 MiB): a bigger one is refused from
/// its object header, before it is inflated ([`Error::TextTooLarge`]).
pub const DEFAULT_MAX_TEXT_BYTES: u64 = 32 * 1024 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A least-recently-used cache of UTF-8 blob texts with their line tables, bounded in bytes
/// (text plus table), with the decodes in flight and the raw blobs being served. Only text
/// is cached: binary, non-UTF-8 and LFS-pointer answers are errors, cheap to recompute from
/// the header (and shared between concurrent callers while their decode runs).
pub(crate) struct BlobCache {
    state: Mutex<State>,
    /// Text decodes running now, by blob id.
    texts: Flights<Result<Arc<Text>, Error>>,
    /// Raw decodes running now, by blob id.
    raws: Flights<Result<Arc<Vec<u8>>, Error>>,
    /// Raw blobs some download still holds: a further download of the same blob shares the
    /// copy instead of decoding its own.
    live: Mutex<HashMap<ObjectId, Weak<Vec<u8>>>>,
    /// The text cap in bytes.
    max_text: AtomicU64,
    /// Blobs decoded (inflated) so far, text and raw.
    decodes: AtomicU64,
}

struct State {
    entries: LruCache<ObjectId, Arc<Text>>,
    /// The newest text over the capacity (at most the text cap), kept beside the entries.
    large: Option<(ObjectId, Arc<Text>)>,
    /// Bytes held (texts and line tables).
    bytes: usize,
    /// At most this many bytes; 0 turns the cache off.
    capacity: usize,
}

impl BlobCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(State {
                entries: LruCache::new_unbounded(),
                large: None,
                bytes: 0,
                capacity,
            }),
            texts: Flights::default(),
            raws: Flights::default(),
            live: Mutex::default(),
            max_text: AtomicU64::new(DEFAULT_MAX_TEXT_BYTES),
            decodes: AtomicU64::new(0),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The text of blob `id`, if cached (and marks it recently used).
    pub(crate) fn get(&self, id: &ObjectId) -> Option<Arc<Text>> {
        let mut state = self.state();
        if let Some(text) = state.entries.get(id) {
            return Some(text.clone());
        }
        state
            .large
            .as_ref()
            .filter(|(kept, _)| kept == id)
            .map(|(_, text)| text.clone())
    }

    /// Keeps `text` as the text of blob `id`, evicting the least recently used entries to
    /// make room. A text up to the whole capacity is kept (a big file read page by page is
    /// what the cache is for); the one newest text over the capacity (within the text cap,
    /// which raised past the cache's bound allows such texts) is kept beside the others, so
    /// the pages of one such file read one after the other find it too.
    pub(crate) fn insert(&self, id: ObjectId, text: Arc<Text>) {
        let mut state = self.state();
        if state.capacity == 0 || state.entries.contains_key(&id) {
            return;
        }
        if text.footprint() > state.capacity {
            state.large = Some((id, text));
            return;
        }
        state.bytes += text.footprint();
        state.entries.insert(id, text);
        state.evict_to_capacity();
    }

    /// Changes the bound (0 turns the cache off and empties it).
    pub(crate) fn set_capacity(&self, capacity: usize) {
        let mut state = self.state();
        state.capacity = capacity;
        state.evict_to_capacity();
        if capacity == 0 {
            state.large = None;
        }
    }

    /// (entries, text bytes) held now, the large text beyond the bound included.
    pub(crate) fn usage(&self) -> (usize, usize) {
        let state = self.state();
        let large = state.large.as_ref().map_or(0, |(_, t)| t.footprint());
        (
            state.entries.len() + usize::from(state.large.is_some()),
            state.bytes + large,
        )
    }

    /// The text cap: the largest blob decoded as text.
    pub(crate) fn max_text(&self) -> u64 {
        self.max_text.load(Ordering::Relaxed)
    }

    /// Sets the text cap (at most [`Text::MAX_BYTES`], which a line table can describe).
    pub(crate) fn set_max_text(&self, bytes: u64) {
        self.max_text
            .store(bytes.min(Text::MAX_BYTES as u64), Ordering::Relaxed);
    }

    /// Blobs inflated so far (text and raw reads; cache hits and shared decodes not counted).
    pub(crate) fn decodes(&self) -> u64 {
        self.decodes.load(Ordering::Relaxed)
    }

    /// Whether a text decode of blob `id` runs now (a reader that needs it will share it).
    pub(crate) fn decoding(&self, id: &ObjectId) -> bool {
        self.texts.flying(id)
    }

    /// The text of blob `id` (shown as `path` in errors): from the cache, else from the
    /// decode another call runs now, else decoded here with `decode` and cached.
    pub(crate) fn text(
        &self,
        id: ObjectId,
        path: &str,
        decode: impl FnOnce() -> Result<Text, Error>,
    ) -> Result<Arc<Text>, Error> {
        if let Some(text) = self.get(&id) {
            return Ok(text);
        }
        self.texts
            .run(id, || {
                // A decode that landed between the look above and this flight's start.
                if let Some(text) = self.get(&id) {
                    return Ok(text);
                }
                self.decodes.fetch_add(1, Ordering::Relaxed);
                let text = Arc::new(decode()?);
                // Cached before the flight lands: a later caller finds one or the other.
                self.insert(id, text.clone());
                Ok(text)
            })
            .map_err(|e| repath(e, path))
    }

    /// The bytes of blob `id` (shown as `path` in errors) to serve whole: the cached text
    /// when there is one, else the copy another download holds, else the decode another
    /// call runs now, else decoded here with `decode`.
    pub(crate) fn raw(
        &self,
        id: ObjectId,
        path: &str,
        decode: impl FnOnce() -> Result<Vec<u8>, Error>,
    ) -> Result<SharedBlob, Error> {
        if let Some(text) = self.get(&id) {
            return Ok(SharedBlob(Shared::Text(text)));
        }
        if let Some(bytes) = self.live_copy(&id) {
            return Ok(SharedBlob(Shared::Bytes(bytes)));
        }
        let bytes = self
            .raws
            .run(id, || {
                if let Some(bytes) = self.live_copy(&id) {
                    return Ok(bytes);
                }
                self.decodes.fetch_add(1, Ordering::Relaxed);
                let bytes = Arc::new(decode()?);
                let mut live = lock(&self.live);
                live.retain(|_, copy| copy.strong_count() > 0);
                live.insert(id, Arc::downgrade(&bytes));
                Ok(bytes)
            })
            .map_err(|e| repath(e, path))?;
        Ok(SharedBlob(Shared::Bytes(bytes)))
    }

    fn live_copy(&self, id: &ObjectId) -> Option<Arc<Vec<u8>>> {
        lock(&self.live).get(id).and_then(Weak::upgrade)
    }
}

impl State {
    fn evict_to_capacity(&mut self) {
        while self.bytes > self.capacity {
            match self.entries.remove_lru() {
                Some((_, text)) => self.bytes -= text.footprint(),
                None => break,
            }
        }
    }
}

/// A decoded error names the path of the call that decoded the blob; another call that
/// shared the decode may know the same blob by another path.
fn repath(error: Error, path: &str) -> Error {
    let path = path.to_owned();
    match error {
        Error::Binary { size, .. } => Error::Binary { path, size },
        Error::NotUtf8 { size, .. } => Error::NotUtf8 { path, size },
        Error::LfsPointer { oid, size, .. } => Error::LfsPointer { path, oid, size },
        Error::TextTooLarge { size, limit, .. } => Error::TextTooLarge { path, size, limit },
        other => other,
    }
}

/// Decodes in flight, by blob id: the first caller decodes, the others wait for its result.
struct Flights<T> {
    running: Mutex<HashMap<ObjectId, Arc<Flight<T>>>>,
}

impl<T> Default for Flights<T> {
    fn default() -> Self {
        Self {
            running: Mutex::default(),
        }
    }
}

/// One decode in flight and the callers waiting for it.
struct Flight<T> {
    landing: Mutex<Landing<T>>,
    landed: Condvar,
}

enum Landing<T> {
    Flying,
    Landed(T),
    /// The decoding call panicked: a waiter decodes for itself.
    Crashed,
}

impl<T: Clone> Flights<T> {
    fn flying(&self, id: &ObjectId) -> bool {
        lock(&self.running).contains_key(id)
    }

    /// `work`'s result for `id`: run here, or shared with the call running it already.
    fn run(&self, id: ObjectId, work: impl FnOnce() -> T) -> T {
        loop {
            let (flight, lead) = {
                let mut running = lock(&self.running);
                match running.get(&id) {
                    Some(flight) => (flight.clone(), false),
                    None => {
                        let flight = Arc::new(Flight {
                            landing: Mutex::new(Landing::Flying),
                            landed: Condvar::new(),
                        });
                        running.insert(id, flight.clone());
                        (flight, true)
                    }
                }
            };
            if lead {
                return self.lead(id, &flight, work);
            }
            if let Some(value) = flight.wait() {
                return value;
            }
        }
    }

    fn lead(&self, id: ObjectId, flight: &Arc<Flight<T>>, work: impl FnOnce() -> T) -> T {
        /// Lands the flight as crashed if `work` unwinds, so no waiter waits forever.
        struct Crash<'a, T: Clone> {
            flights: &'a Flights<T>,
            id: ObjectId,
            flight: &'a Arc<Flight<T>>,
            armed: bool,
        }
        impl<T: Clone> Drop for Crash<'_, T> {
            fn drop(&mut self) {
                if self.armed {
                    self.flights.land(self.id, self.flight, Landing::Crashed);
                }
            }
        }
        let mut crash = Crash {
            flights: self,
            id,
            flight,
            armed: true,
        };
        let value = work();
        crash.armed = false;
        self.land(id, flight, Landing::Landed(value.clone()));
        value
    }

    fn land(&self, id: ObjectId, flight: &Arc<Flight<T>>, landing: Landing<T>) {
        *lock(&flight.landing) = landing;
        flight.landed.notify_all();
        let mut running = lock(&self.running);
        if running
            .get(&id)
            .is_some_and(|kept| Arc::ptr_eq(kept, flight))
        {
            running.remove(&id);
        }
    }
}

impl<T: Clone> Flight<T> {
    /// The flight's result; `None` if it crashed.
    fn wait(&self) -> Option<T> {
        let mut landing = lock(&self.landing);
        loop {
            match &*landing {
                Landing::Flying => {
                    landing = self
                        .landed
                        .wait(landing)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Landing::Landed(value) => return Some(value.clone()),
                Landing::Crashed => return None,
            }
        }
    }
}

/// A blob's bytes shared between the calls serving it (see [`crate::Lease::read_shared`]):
/// cheap to clone, and every clone reads one copy.
#[derive(Clone)]
pub struct SharedBlob(Shared);

#[derive(Clone)]
enum Shared {
    /// The blob's text from the blob cache: UTF-8 text, known.
    Text(Arc<Text>),
    Bytes(Arc<Vec<u8>>),
}

impl SharedBlob {
    /// The blob's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Shared::Text(text) => text.as_str().as_bytes(),
            Shared::Bytes(bytes) => bytes,
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    /// Whether the blob is known to be text (it came from the text cache): no need to check
    /// it again.
    pub fn known_text(&self) -> bool {
        matches!(self.0, Shared::Text(_))
    }
}

impl AsRef<[u8]> for SharedBlob {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::fmt::Debug for SharedBlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBlob")
            .field("len", &self.len())
            .field("known_text", &self.known_text())
            .finish()
    }
}

/// The texts one call has read (`read_many`'s items), so a call that names the same blob in
/// several items decodes it once even when the blob cache cannot keep it (off, or smaller
/// than the text). Holds at most about the text cap beyond its newest text.
#[derive(Default)]
pub struct TextMemo {
    texts: Vec<(ObjectId, Arc<Text>)>,
}

impl TextMemo {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn get(&self, id: &ObjectId) -> Option<Arc<Text>> {
        self.texts
            .iter()
            .find(|(kept, _)| kept == id)
            .map(|(_, text)| text.clone())
    }

    /// Keeps `text` as the newest, dropping the oldest while the rest is over `limit` bytes.
    pub(crate) fn keep(&mut self, id: ObjectId, text: Arc<Text>, limit: u64) {
        if self.get(&id).is_some() {
            return;
        }
        self.texts.push((id, text));
        let held = |texts: &[(ObjectId, Arc<Text>)]| -> u64 {
            texts.iter().map(|(_, t)| t.footprint() as u64).sum()
        };
        while self.texts.len() > 1 && held(&self.texts[..self.texts.len() - 1]) > limit {
            self.texts.remove(0);
        }
    }
}

/// What a text read under an allowance found (see [`crate::Lease::read_text_shared`]).
#[derive(Debug, Clone)]
pub enum TextRead {
    /// The text.
    Text(Arc<Text>),
    /// The blob is not cached and bigger than what is left of the allowance: read it where
    /// inflating is allowed (the blocking pool). `shared`: another call decodes it right
    /// now, so the read there will wait for that decode rather than inflate its own.
    Deferred { shared: bool },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    /// A one-line text of `len` bytes: it costs `len + 4` (one line start).
    fn text(len: usize) -> Arc<Text> {
        Arc::new(Text::new("x".repeat(len)).expect("small"))
    }

    /// R-2 support: the cache stays within its byte bound, evicting least recently used
    /// entries first, and never keeps a text over the whole of it.
    #[test]
    fn bounded_in_bytes_lru_first() {
        let cache = BlobCache::new(100);
        cache.insert(id(1), text(36));
        cache.insert(id(2), text(36));
        assert!(
            cache.get(&id(1)).is_some(),
            "1 is now the most recently used"
        );
        cache.insert(id(3), text(36));
        assert!(cache.get(&id(2)).is_none(), "2 was the least recently used");
        assert!(cache.get(&id(1)).is_some() && cache.get(&id(3)).is_some());
        assert_eq!(cache.usage(), (2, 80));
        // Over the capacity: kept beside the others, the newest such text only.
        cache.insert(id(4), text(97));
        assert!(
            cache.get(&id(4)).is_some(),
            "the large text beside the others"
        );
        assert_eq!(cache.usage(), (3, 181));
        cache.insert(id(7), text(120));
        assert!(cache.get(&id(4)).is_none() && cache.get(&id(7)).is_some());
        // A big text up to the capacity is kept among the others, at their expense.
        cache.insert(id(5), text(90));
        assert!(cache.get(&id(5)).is_some());
        assert_eq!(cache.usage(), (2, 94 + 124));
        cache.set_capacity(0);
        assert_eq!(cache.usage(), (0, 0));
        cache.insert(id(6), text(1));
        assert!(
            cache.get(&id(6)).is_none(),
            "a zero capacity caches nothing"
        );
    }

    /// Issue 42 point 5: concurrent readers of one blob share one decode, errors included
    /// (each named by its own path); a decode that panics lets the waiters decode.
    #[test]
    fn concurrent_readers_share_one_decode() {
        // No cache: only the flight can share the decode.
        let cache = BlobCache::new(0);
        let readers = 8;
        let barrier = Barrier::new(readers);
        let gate = Barrier::new(2);
        let first = std::sync::atomic::AtomicBool::new(true);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..readers)
                .map(|n| {
                    let (cache, barrier, gate, first) = (&cache, &barrier, &gate, &first);
                    scope.spawn(move || {
                        barrier.wait();
                        cache.text(id(1), &format!("p{n}"), || {
                            // The first decoder waits until every reader has joined its
                            // flight (a second decode, which would fail the test, does not).
                            if first.swap(false, Ordering::SeqCst) {
                                gate.wait();
                            }
                            Err(Error::Binary {
                                path: "leader".into(),
                                size: 3,
                            })
                        })
                    })
                })
                .collect();
            // Wait until the flight is up and all the others wait on it, then land it.
            while !cache.decoding(&id(1)) {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            gate.wait();
            for (n, handle) in handles.into_iter().enumerate() {
                let answer = handle.join().expect("no panic");
                assert_eq!(
                    answer,
                    Err(Error::Binary {
                        path: format!("p{n}"),
                        size: 3
                    })
                );
            }
        });
        assert_eq!(cache.decodes(), 1, "one decode for {readers} readers");
        assert!(!cache.decoding(&id(1)), "the flight landed");

        // A decoder that panics: the next caller decodes for itself.
        let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cache.text(id(2), "x", || panic!("decoder failed"))
        }));
        assert!(crashed.is_err());
        assert!(!cache.decoding(&id(2)));
        let text = cache.text(id(2), "x", || Ok(Text::new("ok\n".into()).expect("small")));
        assert_eq!(text.map(|t| t.as_str().to_owned()), Ok("ok\n".to_owned()));
    }

    /// Raw bytes: a cached text is served without a decode; a copy a download still holds
    /// is shared; once every holder let go, the next download decodes again.
    #[test]
    fn raw_blobs_share_the_copy_being_served() {
        let cache = BlobCache::new(1000);
        cache.insert(id(1), text(10));
        let served = cache.raw(id(1), "a", || panic!("cached")).expect("cached");
        assert!(served.known_text() && served.len() == 10);
        let first = cache
            .raw(id(2), "b", || Ok(vec![0, 1, 2]))
            .expect("decoded");
        let second = cache.raw(id(2), "b", || panic!("shared")).expect("shared");
        assert!(std::ptr::eq(first.as_bytes(), second.as_bytes()));
        assert_eq!(cache.decodes(), 1);
        drop((first, second));
        let third = cache.raw(id(2), "b", || Ok(vec![0, 1, 2])).expect("again");
        assert_eq!(third.as_bytes(), &[0, 1, 2]);
        assert_eq!(cache.decodes(), 2);
    }

    #[test]
    fn a_memo_keeps_the_newest_and_about_the_limit() {
        let mut memo = TextMemo::new();
        memo.keep(id(1), text(40), 50);
        memo.keep(id(2), text(40), 50);
        assert!(memo.get(&id(1)).is_some() && memo.get(&id(2)).is_some());
        memo.keep(id(3), text(40), 50);
        assert!(memo.get(&id(1)).is_none(), "the oldest went");
        assert!(memo.get(&id(2)).is_some() && memo.get(&id(3)).is_some());
        memo.keep(id(4), text(500), 50);
        assert!(
            memo.get(&id(4)).is_some(),
            "the newest stays, whatever its size"
        );
    }
}
