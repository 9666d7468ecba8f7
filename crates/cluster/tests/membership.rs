//! Membership against a real PostgreSQL server (started by `metadb::testing`): several
//! replicas' memberships on one database, as several processes would have.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use cluster::{ClusterConfig, Error, Membership, NodeUrl};
use common::{FAST_LEASE, database, eventually, fast, join, sample, slow, url, urls, within};
use metadb::testing::{self, TestServer};

const LIMIT: Duration = Duration::from_secs(60);

const A: &str = "http://a.test:7878";
const B: &str = "http://b.test:7878";
const C: &str = "http://c.test:7878";

fn live(membership: &Membership) -> Vec<String> {
    let view = membership.view();
    urls(view.live()).into_iter().map(str::to_owned).collect()
}

/// Replicas at `nodes` joined on the database `db` with `settings`, in that order, once each
/// sees them all live (within `limit`).
fn joined<const N: usize>(
    db: &str,
    nodes: [&str; N],
    settings: fn(&str) -> ClusterConfig,
    limit: Duration,
) -> [Membership; N] {
    let members = nodes.map(|node| join(db, settings(node)));
    eventually(limit, "every replica to see the others", || {
        members.iter().all(|m| live(m) == nodes)
    });
    members
}

fn ownership(membership: &Membership) -> BTreeMap<String, Vec<NodeUrl>> {
    let view = membership.view();
    sample()
        .into_iter()
        .map(|repo| {
            let owners = view.owners(&repo);
            (repo, owners)
        })
        .collect()
}

#[test]
fn three_replicas_see_each_other_and_agree_on_the_owners() {
    within(LIMIT, || {
        let db = testing::shared().create_database();
        // Within a couple of heartbeats (joins are also announced).
        let [a, b, c] = joined(&db, [A, B, C], fast, Duration::from_secs(1));
        let all = [A, B, C].map(str::to_owned).to_vec();
        let owned = ownership(&a);
        assert_eq!(ownership(&b), owned);
        assert_eq!(ownership(&c), owned);
        let mut held = BTreeMap::<String, usize>::new();
        for (repo, owners) in &owned {
            assert_eq!(owners.len(), 2, "{repo}");
            assert_ne!(owners[0], owners[1], "{repo}");
            for owner in owners {
                assert!(all.contains(&owner.to_string()), "{repo}: {owner}");
                *held.entry(owner.to_string()).or_default() += 1;
            }
            for m in [&a, &b, &c] {
                assert_eq!(m.view().owns(repo), owners.contains(m.self_url()));
            }
        }
        // 400 slots over three members.
        assert!(held.values().all(|&h| (90..=180).contains(&h)), "{held:?}");
        for m in [&a, &b, &c] {
            let view = m.view();
            assert!(view.database_reachable());
            assert!(view.last_heartbeat_ok().is_some());
            assert!(!view.draining());
            let me = view.self_member().unwrap();
            assert!(me.live && !me.draining);
            assert_eq!(me.node_url, *m.self_url());
            assert_eq!(view.self_url(), m.self_url());
            assert_eq!(view.owners_per_repo(), 2);
            assert_eq!(urls(view.assignable()), [A, B, C]);
        }
    });
}

#[test]
fn a_killed_replica_dies_after_its_lease_and_only_its_repositories_move() {
    within(LIMIT, || {
        let db = testing::shared().create_database();
        let [a, b, c] = joined(&db, [A, B, C], fast, Duration::from_secs(2));
        let before = ownership(&a);
        let generation = a.view().generation();

        // Like SIGKILL: the heartbeats stop, the row stays.
        drop(c);
        let killed = Instant::now();
        let survivors = [A, B].map(str::to_owned).to_vec();
        eventually(
            Duration::from_secs(5),
            "the killed replica to be seen dead",
            || live(&a) == survivors && live(&b) == survivors,
        );
        // Its last heartbeat was at most a heartbeat (100 ms) before it stopped, and it counts
        // as alive for the lease after it.
        assert!(
            killed.elapsed() >= FAST_LEASE - Duration::from_millis(150),
            "seen dead after {:?}, before its lease ran out",
            killed.elapsed()
        );
        let view = a.view();
        let dead = view
            .members()
            .iter()
            .find(|m| m.node_url.as_str() == C)
            .expect("a killed replica keeps its row");
        assert!(!dead.live);
        assert!(view.generation() > generation);

        let after = ownership(&a);
        assert_eq!(ownership(&b), after);
        let mut moved = 0;
        for (repo, owners) in &before {
            let now = &after[repo];
            if owners.contains(&url(C)) {
                moved += 1;
                assert_eq!(urls(now).len(), 2, "{repo}");
                assert!(!now.contains(&url(C)), "{repo}");
                let kept: Vec<&NodeUrl> = owners.iter().filter(|o| **o != url(C)).collect();
                assert!(
                    kept.iter().all(|o| now.contains(o)),
                    "{repo}: {owners:?} -> {now:?}"
                );
            } else {
                assert_eq!(now, owners, "{repo} moved though its owners live");
            }
        }
        assert!(moved > 0);
    });
}

#[test]
fn leave_is_seen_at_once_and_drain_takes_a_replica_out_of_ownership() {
    within(LIMIT, || {
        let db = testing::shared().create_database();
        // Heartbeats 20 s apart: what the views learn within a second, they learn from the
        // announcements.
        let [a, b, c] = joined(&db, [A, B, C], slow, Duration::from_secs(1));

        c.drain().unwrap();
        eventually(Duration::from_secs(1), "the drain to be announced", || {
            [&a, &b, &c]
                .iter()
                .all(|m| urls(m.view().assignable()) == [A, B])
        });
        for m in [&a, &b, &c] {
            let view = m.view();
            assert_eq!(
                urls(view.live()),
                [A, B, C],
                "a draining replica stays a member"
            );
            let member = view.members().iter().find(|m| m.node_url.as_str() == C);
            assert!(member.is_some_and(|m| m.live && m.draining));
            for repo in sample() {
                let owners = view.owners(&repo);
                assert_eq!(urls(&owners).len(), 2);
                assert!(!owners.contains(&url(C)), "{repo}");
            }
        }
        assert!(c.view().draining());
        assert!(sample().iter().all(|repo| !c.view().owns(repo)));

        b.leave().unwrap();
        let rest = [A, C].map(str::to_owned).to_vec();
        eventually(Duration::from_secs(1), "the leave to be announced", || {
            live(&a) == rest && live(&c) == rest
        });
        assert!(
            a.view().members().iter().all(|m| m.node_url.as_str() != B),
            "a replica that left has no row"
        );
        assert!(b.view().self_member().is_none());
        assert!(sample().iter().all(|repo| !b.view().owns(repo)));
        // With the only other member draining, `a` owns everything alone.
        for repo in sample() {
            assert_eq!(urls(&a.view().owners(&repo)), [A]);
        }
        b.leave().unwrap();
        assert!(matches!(b.drain(), Err(Error::Left(_))));
    });
}

#[test]
fn a_restarted_replica_rejoins_and_takes_its_row_over() {
    within(LIMIT, || {
        let db = testing::shared().create_database();
        let a = join(&db, fast(A));
        let b = join(&db, fast(B));
        let both = [A, B].map(str::to_owned).to_vec();
        eventually(Duration::from_secs(2), "both to be live", || {
            live(&a) == both
        });
        let started = a.view().members()[1].started_at;

        drop(b);
        let alone = [A].map(str::to_owned).to_vec();
        eventually(Duration::from_secs(5), "b to be seen dead", || {
            live(&a) == alone
        });
        let restarted = join(&db, fast(B));
        eventually(Duration::from_secs(1), "the restart to be seen", || {
            live(&a) == both && live(&restarted) == both
        });
        assert!(a.view().members()[1].started_at > started);

        // A second copy with the same node URL takes the row over from a live one; the old
        // copy's leave then must not remove the new copy's row.
        let copy = join(&db, fast(B));
        assert!(matches!(restarted.drain(), Err(Error::Superseded(_))));
        restarted.leave().unwrap();
        std::thread::sleep(FAST_LEASE + Duration::from_millis(300));
        assert_eq!(live(&a), both);
        assert_eq!(live(&copy), both);
        assert!(copy.view().database_reachable());
    });
}

#[test]
fn liveness_is_decided_by_the_database_clock() {
    within(LIMIT, || {
        let db_url = testing::shared().create_database();
        let config = ClusterConfig {
            heartbeat_every: Duration::from_millis(200),
            lease: Duration::from_secs(10),
            ..ClusterConfig::new(url(A))
        };
        let a = join(&db_url, config);
        let db = database(&db_url);
        // Rows stamped relative to the database's now(), the way heartbeats are.
        db.run(|client| {
            client.batch_execute(
                "INSERT INTO csg_members (node_url, started_at, last_heartbeat, draining, incarnation)
                 VALUES ('http://fresh.test:1', now(), now() - interval '7 seconds', false, -1),
                        ('http://stale.test:1', now(), now() - interval '13 seconds', false, -2),
                        ('http://ancient.test:1', now(), now() - interval '2 hours', false, -3)",
            )
        })
        .unwrap();
        eventually(Duration::from_secs(2), "the rows to be read", || {
            a.view().members().len() == 4
        });
        let view = a.view();
        let flags: Vec<(&str, bool)> = view
            .members()
            .iter()
            .map(|m| (m.node_url.as_str(), m.live))
            .collect();
        assert_eq!(
            flags,
            [
                (A, true),
                ("http://ancient.test:1", false),
                ("http://fresh.test:1", true),
                ("http://stale.test:1", false),
            ]
        );
        // The times are the database's, read back unchanged: this replica's heartbeat is the
        // row's `now()`, not a time this process made up.
        let stored: Vec<(String, SystemTime)> = db
            .run(|client| {
                let rows = client.query(
                    "SELECT node_url, last_heartbeat FROM csg_members ORDER BY node_url",
                    &[],
                )?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            })
            .unwrap();
        let view = a.view();
        let ours = stored.iter().find(|(u, _)| u == A).unwrap().1;
        let written = view.last_heartbeat_ok().unwrap();
        let member = view.self_member().unwrap().last_heartbeat;
        // The row may have been heartbeaten again since the view was published.
        assert!(
            written <= ours && member == written,
            "{written:?} {member:?} {ours:?}"
        );
        for m in view.members().iter().filter(|m| m.node_url.as_str() != A) {
            let row = stored
                .iter()
                .find(|(u, _)| u == m.node_url.as_str())
                .unwrap();
            assert_eq!(m.last_heartbeat, row.1, "{}", m.node_url);
        }
        // Stamped in the future by the database's clock (as a skewed host would write it, were
        // hosts' clocks used), the member is live; stamped just past the lease, it is dead.
        db.run(|client| {
            client.batch_execute(
                "UPDATE csg_members SET last_heartbeat = now() - interval '10.5 seconds'
                     WHERE node_url = 'http://fresh.test:1';
                 UPDATE csg_members SET last_heartbeat = now() + interval '1 hour'
                     WHERE node_url = 'http://stale.test:1'",
            )
        })
        .unwrap();
        eventually(Duration::from_secs(2), "the new stamps to be read", || {
            let view = a.view();
            let live = |u: &str| {
                view.members()
                    .iter()
                    .any(|m| m.node_url.as_str() == u && m.live)
            };
            !live("http://fresh.test:1") && live("http://stale.test:1")
        });
    });
}

#[test]
fn subscribers_hear_each_change_of_the_live_set() {
    within(LIMIT, || {
        let db = testing::shared().create_database();
        let a = join(&db, slow(A));
        // (generation, live members) of each call.
        type Heard = Vec<(u64, Vec<String>)>;
        let heard: Arc<Mutex<Heard>> = Arc::default();
        let log = heard.clone();
        a.subscribe(|_| panic!("a subscriber that panics"));
        a.subscribe(move |view| {
            let live = urls(view.live()).into_iter().map(str::to_owned).collect();
            log.lock().unwrap().push((view.generation(), live));
        });
        let first = a.view().generation();
        let b = join(&db, slow(B));
        eventually(Duration::from_secs(1), "the join to be heard", || {
            heard.lock().unwrap().len() == 1
        });
        b.leave().unwrap();
        eventually(Duration::from_secs(1), "the leave to be heard", || {
            heard.lock().unwrap().len() == 2
        });
        let heard = heard.lock().unwrap().clone();
        assert_eq!(
            heard,
            [
                (first + 1, vec![A.to_owned(), B.to_owned()]),
                (first + 2, vec![A.to_owned()]),
            ]
        );
        assert_eq!(a.view().generation(), first + 2);
    });
}

#[test]
fn an_outage_keeps_the_last_membership_and_heartbeats_resume_by_themselves() {
    within(LIMIT * 2, || {
        let server = TestServer::start().unwrap();
        let db = server.create_database();
        let [a, b] = joined(&db, [A, B], fast, Duration::from_secs(2));
        let both = [A, B].map(str::to_owned).to_vec();
        let owned = ownership(&a);
        let generations = [a.view().generation(), b.view().generation()];

        server.stop();
        let stopped = Instant::now();
        eventually(Duration::from_secs(5), "the outage to show", || {
            !a.view().database_reachable() && !b.view().database_reachable()
        });
        assert!(
            stopped.elapsed() >= FAST_LEASE - Duration::from_millis(150),
            "{:?}",
            stopped.elapsed()
        );
        let last_ok = a.view().last_heartbeat_ok();
        std::thread::sleep(Duration::from_millis(500));
        for (m, generation) in [&a, &b].into_iter().zip(generations) {
            let view = m.view();
            assert_eq!(live(m), both, "the last membership is kept");
            assert_eq!(view.generation(), generation);
            assert!(!view.database_reachable());
        }
        assert_eq!(ownership(&a), owned);
        assert_eq!(a.view().last_heartbeat_ok(), last_ok);
        assert!(matches!(a.drain(), Err(Error::Database(e)) if e.is_unreachable()));

        server.restart();
        eventually(Duration::from_secs(15), "the heartbeats to resume", || {
            [&a, &b].iter().all(|m| {
                let view = m.view();
                view.database_reachable() && view.last_heartbeat_ok() > last_ok && live(m) == both
            })
        });
        assert_eq!(ownership(&a), owned);
        assert_eq!(ownership(&b), owned);
        drop((a, b));
        drop(server);
    });
}

/// One look at a replica's view, taken while PostgreSQL goes away and comes back.
struct Sample {
    replica: usize,
    at: Instant,
    reachable: bool,
    last_ok: Option<SystemTime>,
    generation: u64,
    live: Vec<String>,
}

#[test]
fn after_an_outage_no_live_member_is_counted_dead_for_a_lease() {
    within(LIMIT * 2, || {
        // A lease longer than metadb's reconnect interval (a second) plus a heartbeat, so that
        // every survivor heartbeats again within the grace.
        const LEASE: Duration = Duration::from_secs(2);
        let settings = |node: &str| ClusterConfig {
            heartbeat_every: Duration::from_millis(100),
            lease: LEASE,
            ..ClusterConfig::new(url(node))
        };
        let server = TestServer::start().unwrap();
        let db = server.create_database();
        let [a, b, c] = joined(&db, [A, B, C], settings, Duration::from_secs(3));
        let all = [A, B, C].map(str::to_owned).to_vec();
        let survivors = [A, B].map(str::to_owned).to_vec();

        // Every few milliseconds, each survivor's view, from before the outage to the end.
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let stop = stop.clone();
            let watched = [a.clone(), b.clone()];
            std::thread::spawn(move || {
                let mut samples = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    for (replica, m) in watched.iter().enumerate() {
                        let view = m.view();
                        samples.push(Sample {
                            replica,
                            at: Instant::now(),
                            reachable: view.database_reachable(),
                            last_ok: view.last_heartbeat_ok(),
                            generation: view.generation(),
                            live: urls(view.live()).into_iter().map(str::to_owned).collect(),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                samples
            })
        };
        let before = [a.view(), b.view()];

        server.stop();
        eventually(Duration::from_secs(10), "the outage to show", || {
            !a.view().database_reachable() && !b.view().database_reachable()
        });
        // Dies during the outage without leaving: its row stays, its heartbeats stop.
        drop(c);
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(live(&a), all);
        assert_eq!(live(&b), all);

        server.restart();
        let restarted = Instant::now();
        eventually(
            Duration::from_secs(20),
            "the heartbeats to resume and the dead replica to be seen dead",
            || {
                [&a, &b].iter().all(|m| {
                    let view = m.view();
                    view.database_reachable() && live(m) == survivors
                })
            },
        );
        stop.store(true, Ordering::Release);
        let mut samples = sampler.join().unwrap();
        // The state `eventually` saw, in case the sampler stopped before it sampled it (a
        // loaded machine can leave a 2 ms sampler behind).
        for (replica, member) in [&a, &b].into_iter().enumerate() {
            let view = member.view();
            samples.push(Sample {
                replica,
                at: Instant::now(),
                reachable: view.database_reachable(),
                last_ok: view.last_heartbeat_ok(),
                generation: view.generation(),
                live: urls(view.live()).into_iter().map(str::to_owned).collect(),
            });
        }

        for (replica, old) in before.iter().enumerate() {
            let mine: Vec<&Sample> = samples.iter().filter(|s| s.replica == replica).collect();
            // Its first view built on a heartbeat that got through after the outage.
            let recovered = mine
                .iter()
                .find(|s| s.reachable && s.last_ok > old.last_heartbeat_ok())
                .expect("a view after the outage was sampled")
                .at;
            assert!(recovered >= restarted - Duration::from_secs(1));
            // Whatever a view loses before a lease has passed since then (less the round trip
            // and the sampling interval) it lost too early.
            let grace_end = recovered + LEASE - Duration::from_millis(100);
            for s in &mine {
                assert!(
                    s.live.len() >= 2 && s.live[..2] == survivors[..],
                    "replica {replica} counted a live member dead: {:?} at {:?} after the restart",
                    s.live,
                    s.at.saturating_duration_since(restarted)
                );
                if s.at < grace_end {
                    assert_eq!(
                        s.live,
                        all,
                        "replica {replica} counted a member dead {:?} after its recovery, within \
                         the lease",
                        s.at.saturating_duration_since(recovered)
                    );
                }
                // One change only: the dead replica leaving the live set, no flap before it.
                let expected = if s.live == all {
                    old.generation()
                } else {
                    old.generation() + 1
                };
                assert_eq!(s.generation, expected, "replica {replica}: {:?}", s.live);
            }
            assert!(mine.iter().any(|s| s.at >= recovered && s.live == all));
            assert!(mine.iter().any(|s| s.live == survivors));
        }
        // Both survivors agree again on the owners, over the two of them.
        assert_eq!(ownership(&a), ownership(&b));
        assert_eq!(urls(a.view().assignable()), [A, B]);
        drop((a, b));
        drop(server);
    });
}

#[test]
fn join_refuses_contradicting_settings() {
    within(LIMIT, || {
        let db = testing::shared().create_database();
        let config = ClusterConfig {
            lease: Duration::from_secs(1),
            ..ClusterConfig::new(url(A))
        };
        let e = Membership::join(database(&db), config).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
    });
}
