//! Issue 42 point 7: nothing walks on the async workers. The retention memo is keyed on the
//! retained roots (a sync that adds a head extends it, only a root that leaves restarts it), a
//! lease that must not walk answers "needs a blocking thread" instead, a walk stops at its
//! budget, and a call never waits for another thread's registry reconcile. Counters, not
//! clocks, prove what walked; every test runs under a timeout of its own.
#![allow(dead_code, unused_imports)]

mod common;

use common::{Fixture, cid, open_store, within};
use gitstore::{Error, GitStore, WalkStats};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Every test's hang guard: generous, the work takes a fraction of it.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Makes `main` of the (empty) source a linear history of `count` commits, each setting
/// `file.txt` to `line <n>`; answers the root commit's SHA.
fn linear_history(f: &Fixture, count: u64) -> String {
    testgit::fastimport::linear(&f.src, count, "file.txt", |n| format!("line {n}\n"))
}

fn walks(store: &GitStore, f: &Fixture) -> WalkStats {
    store.retention_walks(&f.name).expect("registered")
}

/// A read pinned to an old commit right after a sync answers from the memo: the sync's new
/// head extends the walk (its history holds the old roots), nothing restarts and nothing is
/// walked again; completing the walk after the sync decodes only the new commit. A root that
/// leaves (an unpin) restarts it.
#[test]
fn g5_an_old_commit_after_a_sync_is_answered_without_restarting_the_walk() {
    within(TIMEOUT, || {
        let f = Fixture::new();
        let root = linear_history(&f, 300);
        f.register("");
        f.sync();
        let first = f
            .store
            .complete_retention(&f.name, &budget::Budget::unlimited())
            .expect("walk");
        assert!(first.complete, "{first:?}");
        assert_eq!(first.restarts, 1, "{first:?}");
        assert!(first.steps >= 300, "every commit decoded once: {first:?}");
        assert_eq!(first.reached, 300, "{first:?}");

        let lease = f
            .store
            .lease_revision_inline(&f.name, Some(&root))
            .expect("lease")
            .expect("answered from the memo");
        assert_eq!(lease.commit(), &cid(&root));
        drop(lease);

        for n in 0..3u64 {
            let head = f.commit(&[("more.txt", format!("{n}\n").as_bytes())], "more");
            f.sync();
            let lease = f
                .store
                .lease_revision_inline(&f.name, Some(&root))
                .expect("lease")
                .expect("the old commit is still answered from the memo after a sync");
            drop(lease);
            let after = walks(&f.store, &f);
            assert_eq!(after.restarts, 1, "no restart after sync {n}: {after:?}");
            assert_eq!(after.extensions, n + 1, "{after:?}");
            assert_eq!(
                after.steps,
                first.steps + n,
                "nothing walked by the read after sync {n}: {after:?}"
            );
            let completed = f
                .store
                .complete_retention(&f.name, &budget::Budget::unlimited())
                .expect("walk");
            assert_eq!(
                completed.steps,
                first.steps + n + 1,
                "completing the walk decodes the new head only: {completed:?}"
            );
            assert!(completed.complete);
            assert_eq!(
                f.store.resolve(&f.name, None).expect("head"),
                cid(&head),
                "the sync landed"
            );
        }

        // A pin of a reached commit adds a root (an extension); its unpin removes one: a
        // restart, after which only a walk can tell.
        let pinned = cid(&root);
        let middle = f.git(&["rev-parse", "main~150"]).trim().to_string();
        f.store.pin(&f.name, &pinned).expect("pin");
        let lease = f.store.lease_revision_inline(&f.name, Some(&middle));
        assert!(matches!(lease, Ok(Some(_))), "{lease:?}");
        drop(lease);
        let pinned_walks = walks(&f.store, &f);
        assert_eq!((pinned_walks.restarts, pinned_walks.extensions), (1, 4));
        f.store.unpin(&f.name, &pinned).expect("unpin");
        let lease = f.store.lease_revision_inline(&f.name, Some(&middle));
        assert!(matches!(lease, Ok(None)), "{lease:?}");
        drop(lease);
        assert_eq!(walks(&f.store, &f).restarts, 2);
    });
}

/// A lease on an async thread never walks: an old commit no walk has reached yet answers
/// "needs a blocking thread" (`Ok(None)`) and decodes nothing, leaving no lease counted; the
/// lease on a blocking thread walks under its budget, and then the async one answers.
#[test]
fn g5_a_lease_that_may_not_walk_answers_needs_a_blocking_thread() {
    within(TIMEOUT, || {
        let f = Fixture::new();
        let root = linear_history(&f, 200);
        f.register("");
        f.sync();

        let inline = f.store.lease_revision_inline(&f.name, Some(&root));
        assert!(matches!(inline, Ok(None)), "{inline:?}");
        let stats = walks(&f.store, &f);
        assert_eq!(stats.steps, 0, "nothing walked: {stats:?}");
        assert!(!stats.complete);
        // The branch head is a root: answered at once.
        assert!(matches!(
            f.store.lease_revision_inline(&f.name, Some("main")),
            Ok(Some(_))
        ));

        let lease = f
            .store
            .lease_revision_within(&f.name, Some(&root), &budget::Budget::lasting(TIMEOUT, 1.0))
            .expect("walked on a blocking thread");
        assert_eq!(lease.commit(), &cid(&root));
        let stats = walks(&f.store, &f);
        assert_eq!(
            stats.steps, 199,
            "walked down to the root's child: {stats:?}"
        );
        drop(lease);
        assert!(matches!(
            f.store.lease_revision_inline(&f.name, Some(&root)),
            Ok(Some(_))
        ));
        assert_eq!(walks(&f.store, &f).steps, stats.steps, "no walk again");
    });
}

/// The walk stops at the call's budget and keeps what it reached: a spent budget answers
/// `Stopped` (no lease), and the next call resumes the walk rather than restarting it.
#[test]
fn o9_a_retention_walk_stops_at_the_budget_and_keeps_its_progress() {
    within(TIMEOUT, || {
        let f = Fixture::new();
        let root = linear_history(&f, 200);
        f.register("");
        f.sync();
        let spent = budget::Budget::unlimited();
        spent.cancel();
        let stopped = f.store.lease_revision_within(&f.name, Some(&root), &spent);
        assert!(
            matches!(stopped, Err(Error::Stopped(budget::Stop::Cancelled))),
            "{stopped:?}"
        );
        let stopped = f.store.complete_retention(&f.name, &spent);
        assert!(matches!(stopped, Err(Error::Stopped(_))), "{stopped:?}");
        assert_eq!(walks(&f.store, &f).steps, 0);

        // Half the history, then the rest: one walk, resumed.
        let middle = f.git(&["rev-parse", "main~100"]).trim().to_string();
        drop(
            f.store
                .lease_revision_within(&f.name, Some(&middle), &budget::Budget::unlimited())
                .expect("walked to the middle"),
        );
        let half = walks(&f.store, &f);
        assert_eq!(half.steps, 100, "down to the middle's child: {half:?}");
        assert!(!half.complete);
        drop(
            f.store
                .lease_revision_within(&f.name, Some(&root), &budget::Budget::unlimited())
                .expect("walked to the root"),
        );
        let whole = walks(&f.store, &f);
        assert_eq!(whole.restarts, 1, "{whole:?}");
        assert_eq!(
            whole.steps, 199,
            "resumed: each commit decoded once over both walks: {whole:?}"
        );
    });
}

/// A gate the reconcile hook waits at until the test opens it (or a timeout passes).
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let open = self.open.lock().expect("gate");
        let _open = self
            .opened
            .wait_timeout_while(open, TIMEOUT, |open| !*open)
            .expect("gate");
    }

    fn open(&self) {
        *self.open.lock().expect("gate") = true;
        self.opened.notify_all();
    }
}

/// 13 (cross-process view) without waiting: while one thread of the server is stuck in a
/// reconcile (another process changed the metadata; the hook holds the reconcile where a
/// slow metadata read would), another thread's lease answers at once from the snapshot in
/// force. Once the reconcile ends, the next call sees the other process's new head.
#[test]
fn g1_a_lease_never_waits_for_another_threads_reconcile() {
    within(TIMEOUT, || {
        let f = Fixture::new();
        let tip = f.commit(&[("a.md", b"alpha\n")], "a");
        f.register("");
        f.sync();
        let server = open_store(&f.data, &f.clock);
        assert_eq!(server.resolve(&f.name, None).expect("head"), cid(&tip));

        let gate = Arc::new(Gate::default());
        let (entered, in_reconcile) = mpsc::channel();
        let entered = Mutex::new(Some(entered));
        let hook_gate = gate.clone();
        server.set_reconcile_hook(Some(Arc::new(move || {
            // Only the first reconcile is held.
            if let Some(entered) = entered.lock().expect("hook").take() {
                let _ = entered.send(());
                hook_gate.wait();
            }
        })));

        // Another process syncs a new head: the change counter moves.
        let next = f.commit(&[("a.md", b"beta\n")], "b");
        f.sync();

        let stuck = {
            let (server, name) = (server.clone(), f.name.clone());
            std::thread::spawn(move || server.resolve(&name, None))
        };
        in_reconcile
            .recv_timeout(TIMEOUT)
            .expect("the first call reconciles and is held there");

        let (answered, answer) = mpsc::channel();
        {
            let (server, name, tip) = (server.clone(), f.name.clone(), tip.clone());
            std::thread::spawn(move || {
                let lease = server.lease_revision_inline(&name, Some(&tip));
                let _ = answered.send(lease.map(|lease| lease.map(|l| l.commit().clone())));
            });
        }
        let lease = answer
            .recv_timeout(Duration::from_secs(10))
            .expect("the lease answered while the reconcile is held");
        assert_eq!(lease, Ok(Some(cid(&tip))));
        gate.open();
        let resolved = stuck.join().expect("reconciling thread");
        assert_eq!(resolved, Ok(cid(&next)), "the held reconcile adopted it");
        assert_eq!(server.resolve(&f.name, None), Ok(cid(&next)));
        server.set_reconcile_hook(None);
    });
}
