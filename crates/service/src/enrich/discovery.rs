//! Discovery of a commit's plugins (W-29): one discovery per catalog key at a time (single
//! flight, each waiter only until its own deadline), under a global cap over every key (O-9),
//! its catalog cached; and what `availability` shows of a catalog (W-6).

use super::catalog_cache::{CatalogKey, Lookup};
use crate::Inner;
use crate::model::PluginInfo;
use gitstore::{EntryKind, Lease, RepoPath};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;
use wasmplugin::{ArtifactEntry, ArtifactKind, Catalog, Code, Diagnostic};

/// One discovery in progress (W-29 single flight): later requests for its key wait for it,
/// each only until its own deadline.
#[derive(Default)]
pub(super) struct Flight {
    done: Mutex<bool>,
    finished: Condvar,
}

impl Flight {
    fn finish(&self) {
        *self.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.finished.notify_all();
    }

    /// Waits for the flight to end; false when `deadline` passed first.
    fn wait(&self, deadline: Option<Instant>) -> bool {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        while !*done {
            match deadline {
                None => {
                    done = self
                        .finished
                        .wait(done)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    done = self
                        .finished
                        .wait_timeout(done, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
        true
    }
}

/// Ends the owner's flight when dropped (also on a panic): the flight leaves the table and
/// its waiters wake. The owner caches its catalog before this runs (W-29).
struct FlightEnd<'a> {
    flights: &'a Mutex<HashMap<CatalogKey, Arc<Flight>>>,
    key: &'a CatalogKey,
    flight: Arc<Flight>,
}

impl Drop for FlightEnd<'_> {
    fn drop(&mut self) {
        self.flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(self.key);
        self.flight.finish();
    }
}

/// Discoveries of different commits that run at once, whatever their keys (O-9): each reads
/// and checks every artifact of a tree, so a flood of reads at distinct commits must not
/// run one discovery per caller. The cores, at least 2.
pub(super) fn discovery_slots() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2)
}

/// A counting gate over discoveries: a request waits for a place until its deadline, then
/// answers PLUGIN_BUSY; background preparation waits as long as it takes.
pub(super) struct Gate {
    max: usize,
    running: Mutex<usize>,
    freed: Condvar,
}

/// A place in the [`Gate`], given back when dropped (also on a panic).
struct Place<'a>(&'a Gate);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        *self
            .0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.freed.notify_one();
    }
}

impl Gate {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            running: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// A place, or `None` when `deadline` passed first.
    fn enter(&self, deadline: Option<Instant>) -> Option<Place<'_>> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        while *running >= self.max {
            running = match deadline {
                None => self
                    .freed
                    .wait(running)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.checked_duration_since(Instant::now())?;
                    self.freed
                        .wait_timeout(running, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        *running += 1;
        Some(Place(self))
    }
}

impl Inner {
    /// What `availability(include_plugins: true)` shows (W-6): static information only.
    pub(crate) fn plugin_infos(
        &self,
        lease: &Lease,
        deadline: Instant,
    ) -> Result<Vec<PluginInfo>, String> {
        let (repo, commit) = (lease.repo(), lease.commit());
        let catalog = self.catalog(lease, Some(deadline)).map_err(|diagnostic| {
            // The answer carries the message only; the log keeps the code beside it.
            tracing::debug!(%repo, %commit, code = %diagnostic.code, error = %diagnostic.message, "plugin discovery failed");
            diagnostic.message
        })?;
        let runnable = catalog.plugins.iter().map(|p| PluginInfo {
            name: p.name.clone(),
            directory: p.dir.clone(),
            title: p.metadata.title.clone(),
            description: p.metadata.description.clone(),
            version: p.metadata.version.clone(),
            operations: p.metadata.operations.clone(),
            default_enabled: p.metadata.default_enabled,
            input_schema: p.metadata.input_schema.clone(),
            diagnostic: None,
        });
        let broken = catalog.broken.iter().map(|b| PluginInfo {
            name: b.name.clone(),
            directory: b.dir.clone(),
            title: None,
            description: None,
            version: None,
            operations: Vec::new(),
            default_enabled: false,
            input_schema: None,
            diagnostic: Some(b.diagnostic.to_string()),
        });
        let mut infos: Vec<PluginInfo> = runnable.chain(broken).collect();
        infos.sort_by(|a, b| {
            (a.name.as_bytes(), &a.directory).cmp(&(b.name.as_bytes(), &b.directory))
        });
        // A discovery that stopped at the catalog bounds says so, last, as an entry without a
        // name (the artifacts it left out are not listed).
        if let Some(truncated) = &catalog.truncated {
            infos.push(PluginInfo {
                name: String::new(),
                directory: String::new(),
                title: None,
                description: None,
                version: None,
                operations: Vec::new(),
                default_enabled: false,
                input_schema: None,
                diagnostic: Some(truncated.to_string()),
            });
        }
        Ok(infos)
    }

    /// The catalog of the leased commit in the scope of the lease's registration: cached,
    /// else discovered (W-29). A failure is never cached. `deadline` bounds the discovery and
    /// the wait on another request's discovery of the same key (PLUGIN_TIMEOUT); `None` only
    /// for background preparation.
    pub(super) fn catalog(
        &self,
        lease: &Lease,
        deadline: Option<Instant>,
    ) -> Result<Arc<Catalog>, Diagnostic> {
        self.catalog_observed(lease, deadline, || {})
    }

    /// The catalog of the leased commit if it is cached now (no discovery, no wait).
    pub(super) fn cached_catalog(&self, lease: &Lease) -> Option<Arc<Catalog>> {
        self.plugins
            .cache()
            .get(&self.catalog_key(lease), Lookup::Request)
    }

    /// The key of the leased commit's catalog. The scope comes from the lease's registration
    /// (G-2): a registration that changes the scope is another key, and a discovery under
    /// one lease reads and caches under that one scope only.
    fn catalog_key(&self, lease: &Lease) -> CatalogKey {
        CatalogKey {
            storage_root: self.store.storage_root().to_string_lossy().into_owned(),
            repo: lease.repo().to_string(),
            commit: lease.commit().to_string(),
            scope: lease.registered_path().to_string(),
        }
    }

    /// [`Inner::catalog`]; `discovered` runs in the owner after its discovery succeeded,
    /// before the catalog is cached (a test uses it to send a request into that moment).
    ///
    /// Nothing here holds a lock a registry change can take: the flight table's
    /// mutex is held for map operations only, and a waiter waits on its flight alone, until
    /// its own deadline (W-26).
    fn catalog_observed(
        &self,
        lease: &Lease,
        deadline: Option<Instant>,
        discovered: impl FnOnce(),
    ) -> Result<Arc<Catalog>, Diagnostic> {
        let mut discovered = Some(discovered);
        let key = self.catalog_key(lease);
        let lookup = match deadline {
            Some(_) => Lookup::Request,
            None => Lookup::Preparation,
        };
        let cached = || {
            let mut cache = self.plugins.cache();
            let found = cache.get(&key, lookup);
            cache.hits += u64::from(found.is_some());
            found
        };
        loop {
            if let Some(found) = cached() {
                return Ok(found);
            }
            // Single flight (W-29): concurrent cold requests for one key wait for the first
            // one's discovery instead of repeating it.
            let (flight, owner) = {
                let mut flights = self
                    .plugins
                    .flights
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                // An owner caches its catalog before it removes its flight, so a miss here
                // with no flight means no discovery of this key finished or is running.
                if let Some(found) = cached() {
                    return Ok(found);
                }
                match flights.get(&key) {
                    Some(flight) => (flight.clone(), false),
                    None => {
                        let flight = Arc::<Flight>::default();
                        flights.insert(key.clone(), flight.clone());
                        (flight, true)
                    }
                }
            };
            if !owner {
                if !flight.wait(deadline) {
                    return Err(Diagnostic::new(
                        Code::Timeout,
                        "the request deadline passed while another request discovered the plugins of this commit (TIMEOUT)",
                    ));
                }
                // Cached now, or that discovery failed: look again (and maybe discover).
                continue;
            }
            let end = FlightEnd {
                flights: &self.plugins.flights,
                key: &key,
                flight,
            };
            let Some(_place) = self.plugins.discovering.enter(deadline) else {
                return Err(Diagnostic::new(
                    Code::Busy,
                    "too many plugin discoveries of other commits run at once; the read is \
                     answered without plugins, retry in a moment",
                ));
            };
            self.plugins
                .discoveries
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let catalog = Arc::new(self.discover(lease, deadline)?);
            if let Some(observe) = discovered.take() {
                observe();
            }
            self.plugins
                .cache()
                .put(key.clone(), catalog.clone(), lookup);
            drop(end);
            return Ok(catalog);
        }
    }

    /// Discovery proper: the artifacts of the leased commit inside the lease's scope, read
    /// and checked, within `deadline`. Holds no lock: the lease carries its snapshot.
    fn discover(&self, lease: &Lease, deadline: Option<Instant>) -> Result<Catalog, Diagnostic> {
        let failed = |e: gitstore::Error| {
            Diagnostic::new(Code::Artifact, format!("plugin discovery failed: {e}"))
        };
        let found = lease
            .find_files(wasmplugin::ARTIFACT_SUFFIX)
            .map_err(failed)?;
        let entries: Vec<ArtifactEntry> = found
            .into_iter()
            .map(|f| ArtifactEntry {
                path: f.path,
                path_utf8: f.path_utf8,
                kind: match f.kind {
                    EntryKind::Symlink => ArtifactKind::Symlink,
                    EntryKind::Submodule => ArtifactKind::Submodule,
                    _ => ArtifactKind::Blob,
                },
                size: f.size,
                digest: f.id,
            })
            .collect();
        wasmplugin::discover(&entries, &self.plugins.config, deadline, |entry| {
            let path = RepoPath::parse(&entry.path).map_err(failed)?;
            lease.read_bytes(&path, None).map_err(failed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CallContext;
    use gitstore::{CommitId, RepoName};
    use std::panic::AssertUnwindSafe;
    use wasmplugin::PluginConfig;

    /// O-9: discoveries of different commits have a global cap: past it a request waits
    /// only until its deadline (then PLUGIN_BUSY), and a place given back lets the next in.
    #[test]
    fn o9_discoveries_over_every_commit_are_capped() {
        use std::time::Duration;
        let gate = Gate::new(2);
        let soon = || Some(Instant::now() + Duration::from_millis(30));
        let first = gate.enter(soon()).expect("a place");
        let second = gate.enter(soon()).expect("a place");
        let started = Instant::now();
        assert!(
            gate.enter(soon()).is_none(),
            "the third waits, then gives up"
        );
        assert!(started.elapsed() >= Duration::from_millis(25));
        drop(first);
        let third = gate.enter(soon()).expect("the place given back");
        // Without a deadline (background preparation) a waiter is let in once one leaves.
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| gate.enter(None).is_some());
            std::thread::sleep(Duration::from_millis(20));
            drop(second);
            assert!(waiter.join().expect("the waiter"));
        });
        drop(third);
        assert_eq!(*gate.running.lock().unwrap(), 0);
    }

    /// W-29: a request arriving after the owner's discovery finished but before its catalog
    /// is cached joins the flight (which ends only after caching) instead of discovering
    /// again; it waits until its own deadline at most. Here the owner blocks in that moment
    /// until the newcomer is done, so the newcomer times out, and nothing is discovered twice.
    #[test]
    fn w29_request_between_discovery_and_caching_never_discovers_twice() {
        let source = testgit::SourceRepo::with_files(&[("a.md", b"a\n")]);
        let service = crate::Service::new(
            source.store("test/repo", ""),
            crate::ServiceConfig::default(),
        );
        let inner = service.inner.clone();
        let repo = RepoName::parse("test/repo").unwrap();
        let commit = CommitId::parse(&source.head()).unwrap();
        let discoveries = || {
            inner
                .plugins
                .discoveries
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        let lease = || inner.store.lease(&repo, &commit).unwrap();
        let mut newcomer = None;
        let owner = inner.catalog_observed(&lease(), None, || {
            let (inner, lease) = (inner.clone(), lease());
            let bounded = Instant::now() + std::time::Duration::from_millis(200);
            newcomer = Some(
                std::thread::spawn(move || inner.catalog(&lease, Some(bounded)))
                    .join()
                    .unwrap(),
            );
        });
        assert!(owner.is_ok());
        let newcomer = newcomer.expect("the newcomer ran inside the window");
        assert_eq!(
            newcomer.map(|_| ()).unwrap_err().code,
            Code::Timeout,
            "the newcomer waited for the flight"
        );
        assert_eq!(discoveries(), 1);
        assert!(inner.catalog(&lease(), None).is_ok());
        assert_eq!(discoveries(), 1, "cached");
    }

    /// W-26, R-8: `availability` with plugins, finding another request's discovery of the
    /// same commit in flight, waits only until its own TIMEOUT and answers the discovery as
    /// failed with PLUGIN_TIMEOUT's message; and while the discovery is parked, a registry
    /// change (removing the very repository) completes: nothing the discovery holds is a
    /// lock a registry change takes.
    #[test]
    fn w26_r8_availability_waits_for_a_flight_only_until_its_timeout() {
        let source = testgit::SourceRepo::with_files(&[("a.md", b"a\n")]);
        let config = crate::ServiceConfig {
            plugins: PluginConfig {
                timeout: std::time::Duration::from_millis(300),
                ..PluginConfig::default()
            },
            ..crate::ServiceConfig::default()
        };
        let service = crate::Service::new(source.store("test/repo", ""), config);
        let inner = service.inner.clone();
        let repo = RepoName::parse("test/repo").unwrap();
        let commit = CommitId::parse(&source.head()).unwrap();
        let lease = inner.store.lease(&repo, &commit).unwrap();
        let guard = std::time::Duration::from_secs(20);
        let mut seen = None;
        let owner = inner.catalog_observed(&lease, None, || {
            let service = service.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                let asked = Instant::now();
                let answer = runtime.block_on(service.availability(
                    &CallContext::default(),
                    crate::AvailabilityRequest {
                        repo: "test/repo".into(),
                        revision: None,
                        include_plugins: true,
                    },
                ));
                let waited = asked.elapsed();
                let removed = runtime.block_on(service.unregister("test/repo".into()));
                let _ = tx.send((answer, waited, removed));
            });
            seen = Some(
                rx.recv_timeout(guard)
                    .expect("availability and the removal answered while the discovery was parked"),
            );
        });
        assert!(owner.is_ok());
        let (answer, waited, removed) = seen.unwrap();
        match answer.unwrap().plugins {
            Some(crate::PluginDiscovery::Failed(why)) => assert!(why.contains("TIMEOUT"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(
            waited < guard,
            "bounded by TIMEOUT, not by the flight: {waited:?}"
        );
        removed.expect("the registry change completed");
    }

    /// W-26, W-29: a request waiting on another request's discovery waits only until its own
    /// deadline; a finished flight wakes every waiter at once.
    #[test]
    fn w26_w29_flight_wait_ends_at_the_deadline() {
        let flight = Arc::new(Flight::default());
        assert!(
            !flight.wait(Some(Instant::now())),
            "deadline already passed"
        );
        let waiter = {
            let flight = flight.clone();
            std::thread::spawn(move || flight.wait(None))
        };
        flight.finish();
        assert!(waiter.join().unwrap());
        assert!(
            flight.wait(Some(Instant::now())),
            "a finished flight never waits"
        );
    }

    /// W-29: the owner's flight ends only when its guard drops (after the catalog is cached),
    /// also when discovery panics, so waiters never hang.
    #[test]
    fn w29_flight_end_removes_and_wakes_even_on_panic() {
        let flights: Mutex<HashMap<CatalogKey, Arc<Flight>>> = Mutex::default();
        let key = CatalogKey {
            storage_root: "/data".into(),
            repo: "a/b".into(),
            commit: "c".repeat(40),
            scope: String::new(),
        };
        let flight = Arc::new(Flight::default());
        flights.lock().unwrap().insert(key.clone(), flight.clone());
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _end = FlightEnd {
                flights: &flights,
                key: &key,
                flight: flight.clone(),
            };
            assert!(
                flights.lock().unwrap().contains_key(&key),
                "still in flight"
            );
            panic!("discovery failed badly");
        }));
        assert!(outcome.is_err());
        assert!(flights.lock().unwrap().is_empty());
        assert!(flight.wait(Some(Instant::now())));
    }
}
