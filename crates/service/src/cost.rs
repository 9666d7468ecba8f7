//! Bounded cost (O-9, issue 42): what an operation may spend, and the slots heavy work
//! takes.
//!
//! Every operation states a [`Cost`] where the rest of it is defined — a tool beside its
//! capability in `crates/tools`, a website route in the site's route table — and hands it to
//! the service on its [`CallContext`](crate::CallContext) ([`CallContext::with_cost`]). The
//! service frame runs the call under it:
//!
//! - **a deadline that cancels**: the call's [`Budget`] ends at `time`; the frame stops
//!   waiting there and cancels the budget, and the work inside (history walks, blame, diffs,
//!   tree listings, renders) checks it between steps, so it stops too. A caller that goes
//!   away (its future dropped) cancels it the same way;
//! - **admission per class**: a heavy [`Class`] takes a slot from its bounded pool, waits
//!   briefly for one, then answers busy (HTTP 503 with `Retry-After`, an MCP tool error that
//!   says to retry); no one client holds more than its share of a class;
//! - **walk and byte bounds**: `walk` (commits or entries visited) and `bytes` (text held)
//!   are what the operation's own code cuts its work at, answering a partial page with a
//!   cursor where it can.

use crate::ServiceError;
use budget::Budget;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A class of work. Each heavy class has its own pool of slots, so a flood of one kind
/// (blame pages, say) cannot take the slots another kind (reads of large files) needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Answers from memory or a bounded number of object reads: no slot.
    Light,
    /// Code, symbol, commit and diff searches over the indexes (S-1's slots).
    Search,
    /// History walks: `log`, `follow`, a commit's files with rename detection.
    History,
    /// `blame`: a file's history line by line.
    Blame,
    /// Unified diffs of a commit or between two commits.
    Diff,
    /// A file's exact bytes (`raw`), streamed.
    Raw,
    /// A text read that inflates a large blob (over the inline bound).
    LargeRead,
    /// Markdown rendered to HTML (a README on a repository or tree page).
    Readme,
    /// A code search at a revision the index does not hold (its overlay is built).
    Overlay,
    /// A tree-sitter parse of a file not parsed before: cold highlighting, `outline`.
    Parse,
}

impl Class {
    /// Every class, in order (the metrics and the settings table list them so).
    pub const ALL: [Class; 10] = [
        Class::Light,
        Class::Search,
        Class::History,
        Class::Blame,
        Class::Diff,
        Class::Raw,
        Class::LargeRead,
        Class::Readme,
        Class::Overlay,
        Class::Parse,
    ];

    /// The class's name in messages, metrics and documentation.
    pub fn name(self) -> &'static str {
        match self {
            Class::Light => "light",
            Class::Search => "search",
            Class::History => "history",
            Class::Blame => "blame",
            Class::Diff => "diff",
            Class::Raw => "raw",
            Class::LargeRead => "large_read",
            Class::Readme => "readme",
            Class::Overlay => "overlay",
            Class::Parse => "parse",
        }
    }

    /// What a caller refused a slot of this class is told it was trying to do.
    fn doing(self) -> &'static str {
        match self {
            Class::Light => "light calls",
            Class::Search => "searches",
            Class::History => "history walks",
            Class::Blame => "blame calls",
            Class::Diff => "diffs",
            Class::Raw => "raw downloads",
            Class::LargeRead => "reads of large files",
            Class::Readme => "README renders",
            Class::Overlay => "searches at an unindexed revision",
            Class::Parse => "first parses of files",
        }
    }
}

/// When an operation of a heavy class takes its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Before any work: every call of the operation is heavy.
    Always,
    /// Only once the operation finds its work heavy (a read that must inflate a large blob,
    /// a file not highlighted before, a README not rendered before); what a cache answers
    /// takes no slot.
    WhenHeavy,
}

/// What one operation may spend (O-9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// Its class: the pool its slot comes from.
    pub class: Class,
    /// When it takes the slot.
    pub admit: Admit,
    /// Its deadline: past it the frame answers that the call ran out of time, and the work
    /// is cancelled.
    pub time: Duration,
    /// Where in `time` work that can answer a partial page (history walks) stops and
    /// answers, in hundredths.
    pub partial_at_percent: u8,
    /// Commits or entries a walk may visit per call (0: the operation walks nothing).
    pub walk: u64,
    /// Bytes of text the operation may hold at once (what it answers and what it decodes to
    /// answer it).
    pub bytes: u64,
}

const MIB: u64 = 1024 * 1024;

impl Cost {
    /// What a call gets that came without a cost: in-process callers (the `csg` commands,
    /// background work, tests). Generous, but still a deadline.
    pub const IN_PROCESS: Cost = Cost {
        class: Class::Light,
        admit: Admit::WhenHeavy,
        time: Duration::from_secs(300),
        partial_at_percent: 50,
        walk: u64::MAX,
        bytes: u64::MAX,
    };

    /// A light operation: answers from memory or a bounded number of object reads.
    pub const fn light(time: Duration) -> Cost {
        Cost {
            class: Class::Light,
            admit: Admit::WhenHeavy,
            time,
            partial_at_percent: 100,
            walk: 0,
            bytes: MIB,
        }
    }

    /// An operation of `class` that takes a slot on every call.
    pub const fn heavy(class: Class, time: Duration) -> Cost {
        Cost {
            class,
            admit: Admit::Always,
            time,
            partial_at_percent: 100,
            walk: 0,
            bytes: 32 * MIB,
        }
    }

    /// An operation of `class` that takes a slot only when its work turns out heavy.
    pub const fn when_heavy(class: Class, time: Duration) -> Cost {
        Cost {
            admit: Admit::WhenHeavy,
            ..Cost::heavy(class, time)
        }
    }

    /// This cost walking at most `walk` commits or entries, answering partially at
    /// `partial_at_percent` of its time.
    pub const fn walking(self, walk: u64, partial_at_percent: u8) -> Cost {
        Cost {
            walk,
            partial_at_percent,
            ..self
        }
    }

    /// This cost holding at most `bytes` of text.
    pub const fn holding(self, bytes: u64) -> Cost {
        Cost { bytes, ..self }
    }

    /// A fresh budget for a call of this cost, inside `outer` (the transport's: cancelled
    /// when the caller goes away).
    pub(crate) fn budget(&self, outer: &Budget) -> Budget {
        let now = Instant::now();
        let deadline = now + self.time;
        let soft = now
            + self
                .time
                .mul_f64(f64::from(self.partial_at_percent.min(100)) / 100.0);
        outer.within_soft(deadline, soft)
    }

    /// The cost in a few words, for the generated documentation (the README's tables):
    /// `history slot · 6 s · partial page after 3 s or 100000 commits`.
    pub fn summary(&self) -> String {
        let mut parts = vec![match (self.class, self.admit) {
            (Class::Light, _) => "no slot".to_owned(),
            (class, Admit::Always) => format!("`{}` slot", class.name()),
            (class, Admit::WhenHeavy) => format!("`{}` slot when heavy", class.name()),
        }];
        parts.push(seconds(self.time));
        if self.walk > 0 && self.walk < u64::MAX {
            let partial = self
                .time
                .mul_f64(f64::from(self.partial_at_percent.min(100)) / 100.0);
            parts.push(format!(
                "partial page after {} or {} commits",
                seconds(partial),
                self.walk
            ));
        }
        parts.join(" · ")
    }

    /// Whether the cost states a real bound: a class, a deadline of at least a millisecond
    /// and at most ten minutes, a partial point within its time. What the tables' tests ask
    /// of every entry.
    pub fn is_bounded(&self) -> bool {
        self.time >= Duration::from_millis(1)
            && self.time <= Duration::from_secs(600)
            && (1..=100).contains(&self.partial_at_percent)
            && self.bytes > 0
    }
}

/// Who a call counts against for the per-client shares of a class: the token it presented,
/// else its client address (behind `--trusted-proxy`, the forwarded one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClientKey {
    /// An in-process caller (stdio, the `csg` commands): one client.
    #[default]
    Local,
    /// A caller with a token, by the token's id.
    Token(i64),
    /// A caller of the identity provider, by a hash of its user (issue 44).
    ProviderUser(u64),
    /// A caller without a token, by its address.
    Address(IpAddr),
    /// An HTTP caller whose address the server was not told (the app served without its
    /// listener, as in tests): all such callers count as one.
    Unknown,
}

/// Admission per class (O-9): a pool of slots per heavy class and every client's share.
pub(crate) struct Admission {
    pools: HashMap<Class, Pool>,
    wait: Duration,
}

/// Per client, the permits of its share of one pool: present only while the client holds or
/// waits for a slot, so the map is as large as the calls in flight, never as the clients
/// ever seen.
type Shares = Arc<Mutex<HashMap<ClientKey, Arc<tokio::sync::Semaphore>>>>;

struct Pool {
    slots: Arc<tokio::sync::Semaphore>,
    size: usize,
    /// Most slots of this pool one client may hold at once.
    share: usize,
    shares: Shares,
    /// Calls refused as busy since start.
    refused: std::sync::atomic::AtomicU64,
}

/// A slot of a class's pool, held while the work runs (also on the blocking pool after its
/// caller left, until the work notices its budget was cancelled).
#[derive(Debug)]
pub(crate) struct Slot {
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Released after the slot (its drop may clean the client's entry).
    _share: ShareHeld,
}

/// One of a client's share permits; the last one dropped removes the client's entry.
#[derive(Debug)]
struct ShareHeld {
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    shares: Shares,
    client: ClientKey,
}

impl Drop for ShareHeld {
    fn drop(&mut self) {
        let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
        drop(self.permit.take());
        // Only the map holds the semaphore now, with all its permits back: nobody holds or
        // waits for a slot of this client's.
        if shares
            .get(&self.client)
            .is_some_and(|share| Arc::strong_count(share) == 1)
        {
            shares.remove(&self.client);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The pool's slot first, then the share (whose drop may clean the client's entry).
        drop(self.slot.take());
    }
}

/// Figures of one class's pool, for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassStats {
    pub class: Class,
    /// Slots in the pool.
    pub slots: usize,
    /// Slots held right now.
    pub busy: usize,
    /// Calls refused as busy since start.
    pub refused: u64,
}

impl Admission {
    /// Pools of `heavy` slots for every heavy class but search, which has `searches`;
    /// a caller waits up to `wait` for a slot.
    pub(crate) fn new(heavy: usize, searches: usize, wait: Duration) -> Self {
        let pools = Class::ALL
            .into_iter()
            .filter(|class| *class != Class::Light)
            .map(|class| {
                let size = if class == Class::Search {
                    searches
                } else {
                    heavy
                }
                .max(1);
                let pool = Pool {
                    slots: Arc::new(tokio::sync::Semaphore::new(size)),
                    size,
                    share: share_of(size),
                    shares: Arc::default(),
                    refused: Default::default(),
                };
                (class, pool)
            })
            .collect();
        Self { pools, wait }
    }

    /// A slot of `class` for `client`: first one of the client's share, then one of the
    /// pool, waiting at most the admission wait for both (and never past the call's
    /// deadline); `None` for a light class. Refused as busy when either does not free up in
    /// time: a flood from one client waits behind its own calls, not in front of everyone
    /// else's.
    pub(crate) async fn admit(
        &self,
        class: Class,
        client: ClientKey,
        budget: &Budget,
    ) -> Result<Option<Slot>, ServiceError> {
        let Some(pool) = self.pools.get(&class) else {
            return Ok(None);
        };
        let busy = |why: String| {
            pool.refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Err(ServiceError::busy(why))
        };
        let wait = budget
            .remaining()
            .map_or(self.wait, |left| left.min(self.wait));
        let until = tokio::time::Instant::now() + wait;
        let semaphore = {
            let mut shares = pool.shares.lock().unwrap_or_else(PoisonError::into_inner);
            shares
                .entry(client)
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(pool.share)))
                .clone()
        };
        // Held from here on, so dropping it (a refusal, the caller gone) cleans the entry.
        let mut share = ShareHeld {
            permit: None,
            shares: pool.shares.clone(),
            client,
        };
        match tokio::time::timeout_at(until, semaphore.acquire_owned()).await {
            Ok(Ok(permit)) => share.permit = Some(permit),
            Ok(Err(_)) | Err(_) => {
                return busy(format!(
                    "too many {} of yours are running already (at most {} of the {} slots at \
                     once); retry when one has answered",
                    class.doing(),
                    pool.share,
                    pool.size
                ));
            }
        }
        match tokio::time::timeout_at(until, pool.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Some(Slot {
                slot: Some(permit),
                _share: share,
            })),
            Ok(Err(_)) | Err(_) => busy(format!(
                "the server is busy: {} {} are running already; retry in a moment",
                pool.size,
                class.doing()
            )),
        }
    }

    /// Every heavy class's figures.
    pub(crate) fn stats(&self) -> Vec<ClassStats> {
        let mut stats: Vec<ClassStats> = self
            .pools
            .iter()
            .map(|(class, pool)| ClassStats {
                class: *class,
                slots: pool.size,
                busy: pool.size - pool.slots.available_permits(),
                refused: pool.refused.load(std::sync::atomic::Ordering::Relaxed),
            })
            .collect();
        stats.sort_by_key(|s| s.class);
        stats
    }

    /// Clients holding or waiting for a slot of `class` (a test's view of the cleanup).
    #[cfg(test)]
    fn clients(&self, class: Class) -> usize {
        self.pools[&class]
            .shares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Most slots a heavy class's pool may have (a setting's upper bound).
pub const MAX_HEAVY_CALLS: usize = 256;

/// Slots of each heavy class by default: the cores, at least 2 (so a client's share, half,
/// leaves room for another client).
pub(crate) fn default_heavy_calls() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2)
}

/// A duration as a caller reads it: `6 s`, `250 ms`.
pub(crate) fn seconds(time: Duration) -> String {
    if time >= Duration::from_secs(1) && time.subsec_millis() == 0 {
        format!("{} s", time.as_secs())
    } else if time >= Duration::from_secs(1) {
        format!("{:.1} s", time.as_secs_f64())
    } else {
        format!("{} ms", time.as_millis())
    }
}

/// One client's share of a pool of `size` slots: half of it, at least one.
pub fn share_of(size: usize) -> usize {
    (size / 2).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget::lasting(Duration::from_secs(60), 1.0)
    }

    /// O-9: a client holds at most its share of a class (a further call of its own waits
    /// for one of them, then is refused); others still get the rest; a released slot is
    /// free again; light work takes none; no entry outlives a client's calls.
    #[tokio::test]
    async fn o9_a_client_holds_at_most_its_share_and_others_get_the_rest() {
        let admission = Admission::new(4, 8, Duration::from_millis(50));
        let a = ClientKey::Address("10.0.0.1".parse().unwrap());
        let b = ClientKey::Token(7);
        let first = admission.admit(Class::Blame, a, &budget()).await.unwrap();
        let second = admission.admit(Class::Blame, a, &budget()).await.unwrap();
        assert!(first.is_some() && second.is_some());
        let refused = admission
            .admit(Class::Blame, a, &budget())
            .await
            .unwrap_err();
        assert_eq!(refused.kind, crate::ErrorKind::Busy);
        assert!(refused.message.contains("of yours"), "{}", refused.message);
        // Another client gets the other half; then the pool is full for everyone.
        let b1 = admission.admit(Class::Blame, b, &budget()).await.unwrap();
        let b2 = admission.admit(Class::Blame, b, &budget()).await.unwrap();
        assert!(b1.is_some() && b2.is_some());
        let c = ClientKey::Token(8);
        let full = admission
            .admit(Class::Blame, c, &budget())
            .await
            .unwrap_err();
        assert!(full.message.contains("busy"), "{}", full.message);
        // A call of `a`'s own waits for `a`'s share: it gets the slot `first` frees.
        let waiting = {
            let admission = &admission;
            async move { admission.admit(Class::Blame, a, &budget()).await }
        };
        let (third, ()) = tokio::join!(waiting, async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            drop(first);
        });
        let third = third.unwrap();
        assert!(third.is_some());
        // Classes do not share slots; light work takes none.
        assert!(
            admission
                .admit(Class::Raw, a, &budget())
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            admission
                .admit(Class::Light, a, &budget())
                .await
                .unwrap()
                .is_none()
        );
        let stats = admission.stats();
        let blame = stats.iter().find(|s| s.class == Class::Blame).unwrap();
        assert_eq!((blame.slots, blame.busy, blame.refused), (4, 4, 2));
        assert_eq!(admission.clients(Class::Blame), 2);
        drop((second, b1, b2));
        assert_eq!(
            admission.clients(Class::Blame),
            1,
            "only the third call's client"
        );
        assert_eq!(admission.clients(Class::Raw), 0, "dropped at once above");
    }

    #[test]
    fn o9_shares_and_named_costs_are_bounded() {
        assert_eq!((share_of(1), share_of(2), share_of(5)), (1, 1, 2));
        assert!(Cost::IN_PROCESS.is_bounded());
        assert!(Cost::light(Duration::from_secs(5)).is_bounded());
        let walk = Cost::heavy(Class::History, Duration::from_secs(6)).walking(1000, 50);
        assert!(walk.is_bounded() && walk.walk == 1000);
        assert!(!Cost::light(Duration::ZERO).is_bounded());
    }
}
