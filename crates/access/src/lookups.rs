//! The budget of database look-ups for sessions and tokens the view does not know (issue 43
//! finding 3). Such a look-up finds a session or token another replica made a moment ago,
//! before its announcement reached this one; a made-up one finds nothing and must not turn
//! into database load.
//!
//! The budget is kept per client address, so one client sending forged cookies or made-up
//! tokens spends only its own look-ups: a real visitor elsewhere still gets theirs, and is
//! never signed out for someone else's flood. A cap over all clients stays as the database's
//! last line against many addresses at once; one client's share is far below it, so no single
//! client can spend it. A spent budget is "unknown now" ([`crate::Error::UnknownNow`]), never
//! "no such session".

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

/// Look-ups one client may make at once: a browser's first page after signing in on another
/// replica, with its parallel requests, needs a few, until the announcement arrives.
const CLIENT_BURST: f64 = 20.0;
/// Look-ups per second one client gets after its burst.
const CLIENT_PER_SECOND: f64 = 2.0;
/// Look-ups of all clients together at once: ten clients' bursts.
const TOTAL_BURST: f64 = 200.0;
/// Look-ups per second of all clients together: a primary-key query each, well within any
/// database, and 25 single clients' worth.
const TOTAL_PER_SECOND: f64 = 50.0;
// No single client can spend the cap over all, at once or over time.
const _: () = assert!(CLIENT_BURST < TOTAL_BURST && CLIENT_PER_SECOND < TOTAL_PER_SECOND);

/// Client addresses remembered at most, as httpserver's wrong-token limiter: quiet ones
/// (their budget full again, so forgetting them changes nothing) are forgotten first.
pub(crate) const MAX_CLIENTS: usize = 10_000;

/// The key of a client address, as httpserver's wrong-token limiter keys it: an IPv4 address
/// as itself, also when a dual-stack listener reports it IPv4-mapped; an IPv6 address by its
/// /64, the block one subscriber gets, so hopping through addresses of one network does not
/// reset a budget.
pub fn client_key(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => {
            let network = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(network.into())
        }
        v4 => v4,
    }
}

/// A token bucket: `level` look-ups left at `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    level: f64,
    at: Instant,
}

impl Bucket {
    /// The level at `now`, refilled at `rate` per second up to `burst`.
    fn level(&self, now: Instant, rate: f64, burst: f64) -> f64 {
        (self.level + now.saturating_duration_since(self.at).as_secs_f64() * rate).min(burst)
    }
}

/// Whole seconds until a bucket at `level` holds a look-up again, at least one.
fn wait_secs(level: f64, rate: f64) -> u64 {
    // At most CLIENT_BURST / CLIENT_PER_SECOND: the cast cannot overflow.
    (((1.0 - level) / rate).ceil() as u64).max(1)
}

/// The budgets: one per client address (key `None`: callers without an address, such as
/// in-process ones, share one) and the cap over all.
pub(crate) struct LookUps {
    total: Bucket,
    clients: HashMap<Option<IpAddr>, Bucket>,
}

impl LookUps {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            total: Bucket {
                level: TOTAL_BURST,
                at: now,
            },
            clients: HashMap::new(),
        }
    }

    /// Takes a look-up for `client` (any address: keyed by [`client_key`]) at `now`, or
    /// answers the whole seconds until it may look up again. A refused client's bucket is
    /// left as it was, so refusals cost no memory.
    pub(crate) fn take(&mut self, client: Option<IpAddr>, now: Instant) -> Result<(), u64> {
        let key = client.map(client_key);
        let own = self.clients.get(&key).map_or(CLIENT_BURST, |bucket| {
            bucket.level(now, CLIENT_PER_SECOND, CLIENT_BURST)
        });
        let total = self.total.level(now, TOTAL_PER_SECOND, TOTAL_BURST);
        if own < 1.0 || total < 1.0 {
            let own_wait = (own < 1.0).then(|| wait_secs(own, CLIENT_PER_SECOND));
            let total_wait = (total < 1.0).then(|| wait_secs(total, TOTAL_PER_SECOND));
            return Err(own_wait.max(total_wait).unwrap_or(1));
        }
        self.make_room(key, now);
        self.clients.insert(
            key,
            Bucket {
                level: own - 1.0,
                at: now,
            },
        );
        self.total = Bucket {
            level: total - 1.0,
            at: now,
        };
        Ok(())
    }

    /// Before a new client is remembered in a full table: forgets the quiet ones, then (under
    /// a flood of addresses) an arbitrary one rather than grow. A forgotten client starts
    /// again with a full budget; the cap over all still bounds the database's load.
    fn make_room(&mut self, key: Option<IpAddr>, now: Instant) {
        if self.clients.len() < MAX_CLIENTS || self.clients.contains_key(&key) {
            return;
        }
        self.clients
            .retain(|_, bucket| bucket.level(now, CLIENT_PER_SECOND, CLIENT_BURST) < CLIENT_BURST);
        if self.clients.len() >= MAX_CLIENTS
            && let Some(any) = self.clients.keys().next().copied()
        {
            self.clients.remove(&any);
        }
    }

    /// How many clients are remembered (for tests).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.clients.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().expect("an address"))
    }

    /// A-1, issue 43 finding 3: one client spending its budget of look-ups leaves every other
    /// client's whole, and the spent one answers how long to wait, then gets more as time
    /// passes.
    #[test]
    fn a1_lookups_are_budgeted_per_client() {
        let start = Instant::now();
        let mut lookups = LookUps::new(start);
        for attempt in 0..CLIENT_BURST as usize {
            assert_eq!(lookups.take(ip("192.0.2.1"), start), Ok(()), "{attempt}");
        }
        assert_eq!(lookups.take(ip("192.0.2.1"), start), Err(1));
        assert_eq!(
            lookups.take(ip("::ffff:192.0.2.1"), start),
            Err(1),
            "IPv4-mapped is the same client"
        );
        for _ in 0..CLIENT_BURST as usize {
            assert_eq!(
                lookups.take(ip("192.0.2.2"), start),
                Ok(()),
                "another client"
            );
        }
        assert_eq!(
            lookups.take(None, start),
            Ok(()),
            "callers without an address"
        );
        let later = start + Duration::from_millis(500);
        assert_eq!(lookups.take(ip("192.0.2.1"), later), Ok(()), "refilled");
        assert_eq!(lookups.take(ip("192.0.2.1"), later), Err(1));
    }

    /// A-1, issue 43 finding 3: an IPv6 client is its /64: hopping through the addresses of
    /// its network does not give it a new budget; the next network is another client.
    #[test]
    fn a1_an_ipv6_client_is_its_network() {
        let start = Instant::now();
        let mut lookups = LookUps::new(start);
        for host in 0..CLIENT_BURST as u32 {
            assert_eq!(
                lookups.take(ip(&format!("2001:db8:1:2::{host:x}")), start),
                Ok(())
            );
        }
        assert_eq!(lookups.take(ip("2001:db8:1:2:ffff::1"), start), Err(1));
        assert_eq!(lookups.take(ip("2001:db8:1:3::1"), start), Ok(()));
    }

    /// A-1, issue 43 finding 3: many clients together meet the cap over all (the database's
    /// last line), which no single client can reach; it refills too.
    #[test]
    fn a1_the_cap_over_all_clients_holds() {
        let start = Instant::now();
        let mut lookups = LookUps::new(start);
        let mut taken = 0;
        for client in 0..=255u8 {
            while lookups
                .take(ip(&format!("198.51.100.{client}")), start)
                .is_ok()
            {
                taken += 1;
            }
        }
        assert_eq!(taken, TOTAL_BURST as usize);
        assert_eq!(lookups.take(ip("203.0.113.9"), start), Err(1));
        let later = start + Duration::from_secs(1);
        assert_eq!(lookups.take(ip("203.0.113.9"), later), Ok(()));
    }

    /// A-1, issue 43 finding 3: the table of clients stays bounded: under a flood of
    /// addresses an arbitrary one goes, and once clients are quiet (their budget full again)
    /// they are forgotten first, while one that spent its budget keeps it spent.
    #[test]
    fn a1_the_table_of_clients_is_bounded() {
        let start = Instant::now();
        let mut lookups = LookUps::new(start);
        let v4 = |n: u32| Some(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n)));
        // A full table of clients that each looked up once at the start.
        for n in 0..MAX_CLIENTS as u32 {
            lookups.clients.insert(
                v4(n),
                Bucket {
                    level: CLIENT_BURST - 1.0,
                    at: start,
                },
            );
        }
        assert_eq!(lookups.take(v4(u32::MAX / 2), start), Ok(()));
        assert_eq!(
            lookups.remembered(),
            MAX_CLIENTS,
            "none quiet yet: one went"
        );

        // Ten seconds on, one client has just spent its budget; the rest are quiet again.
        let later = start + Duration::from_secs(10);
        let busy = ip("192.0.2.200");
        lookups.clients.remove(&v4(0));
        lookups.clients.insert(
            busy,
            Bucket {
                level: 0.0,
                at: later,
            },
        );
        assert_eq!(lookups.take(ip("203.0.113.1"), later), Ok(()));
        assert_eq!(lookups.remembered(), 2, "the quiet ones were forgotten");
        assert_eq!(lookups.take(busy, later), Err(1), "the spent one was not");
    }
}
