//! P-23, P-12 (issue 42, point 10): plugin code that overruns the time limit while an epoch
//! is released (a `__del__` that loops) is interrupted, and `plugin_status` names it. Real
//! plugin files, the real embedded CPython; every test bounded in time.
//!
//! A test binary of its own, its tests one at a time: every host of a process shares the one
//! interpreter and its garbage collector, so a collection any host runs (or one the
//! interpreter starts by itself) may free another host's objects, and run their `__del__` in
//! the wrong host's step.
#![cfg(feature = "python")]

mod bounded;
mod common;

use bounded::within;
use common::{host, plugin_dir, write};
use pyplugin::{Hook, State};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// Held by each test for its whole run.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

const WORKS: (&str, &str) = (
    "z_works.py",
    "def on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"works\"]}\n",
);

/// Runs `on_read_result` on the current epoch until `z_works.py`'s note comes back: calls
/// queued behind an interrupted release answer as without plugins, the ones after it run.
fn until_calls_run(host: &pyplugin::PluginHost) {
    let started = Instant::now();
    loop {
        let out = host
            .current()
            .expect("active")
            .run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
        if out.changed_by == ["z_works.py"] {
            assert!(out.failures.is_empty(), "{:?}", out.failures);
            return;
        }
        assert!(out.changed().is_none(), "{out:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never ran again"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The release faults once `done` holds for them (a release runs after the reload that
/// dropped the epoch has answered).
fn faults_once(
    host: &pyplugin::PluginHost,
    done: impl Fn(&[pyplugin::ReleaseFault]) -> bool,
) -> Vec<pyplugin::ReleaseFault> {
    let started = Instant::now();
    loop {
        let faults = host.status().release_faults;
        if done(&faults) {
            return faults;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the release never finished: {faults:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// P-23, P-12 (issue 42, point 10): a `__del__` that loops when its epoch is released is
/// interrupted, and `plugin_status` names the file, the finalizer, the limit and the epoch
/// (before, the status said nothing). Calls run again; a later epoch's copy of the file that
/// releases within the limit clears the record.
#[test]
fn p23_a_del_that_loops_at_release_is_named_in_the_status() {
    let _serial = one_at_a_time();
    within(LIMIT, || {
        // A class of the file itself: the instance sits in a reference cycle (the module's
        // dict holds the class, whose methods hold the dict), so the collection the release
        // runs is what calls the `__del__`.
        let sticky = "class _Sticky:\n    def __del__(self):\n        while True:\n            pass\n\
                      _keep = _Sticky()\n";
        let dir = plugin_dir(&[("a_sticky.py", sticky), WORKS]);
        let host = host(dir.path());
        assert_eq!(host.status().release_faults, []);

        // Epoch 1 is released when this reload drops it.
        assert_eq!(host.reload().unwrap().epoch, 2);
        let faults = faults_once(&host, |faults| !faults.is_empty());
        assert_eq!(
            faults.len(),
            1,
            "only the file whose __del__ looped: {faults:?}"
        );
        let fault = &faults[0];
        assert_eq!((fault.file.as_str(), fault.epoch), ("a_sticky.py", 1));
        for part in [
            "`_Sticky.__del__`",
            "200 ms time limit",
            "epoch 1 was released",
            "interrupted",
        ] {
            assert!(
                fault.reason.contains(part),
                "{part:?} in {:?}",
                fault.reason
            );
        }
        let status = host.status();
        assert_eq!(status.state, State::Active);
        assert_eq!(status.epoch, 2);
        assert!(status.disabled.is_empty(), "{status:?}");
        until_calls_run(&host);

        // Fixed on disk: epoch 3 loads the fixed file, and releasing epoch 2 (still the
        // looping copy) is recorded in place of epoch 1's.
        write(dir.path(), "a_sticky.py", "_keep = object()\n");
        assert_eq!(host.reload().unwrap().epoch, 3);
        let faults = faults_once(&host, |faults| faults.iter().any(|f| f.epoch == 2));
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert!(
            faults[0].reason.contains("epoch 2 was released"),
            "{faults:?}"
        );
        until_calls_run(&host);

        // Epoch 3 (the fixed copy) releases within the limit: the fault is history.
        assert_eq!(host.reload().unwrap().epoch, 4);
        faults_once(&host, <[_]>::is_empty);
        until_calls_run(&host);
        assert_eq!(host.state(), State::Active);
    });
}

/// P-23: a `__del__` whose code is not in a plugin file (made with `exec`), on an object in a
/// reference cycle, is freed by the release's one collection: the status cannot tell which
/// file it belongs to and says so, naming the epoch's files rather than guessing one.
#[test]
fn p23_a_del_from_exec_in_a_cycle_names_the_epochs_files() {
    let _serial = one_at_a_time();
    within(LIMIT, || {
        let cyclic = "_ns = {}\n\
                      exec(\"class S:\\n    def __del__(self):\\n        while True:\\n            pass\\n\", _ns)\n\
                      _keep = _ns[\"S\"]()\n\
                      _keep.me = _keep\n\
                      del _ns\n";
        let dir = plugin_dir(&[("a_cycle.py", cyclic), WORKS]);
        let host = host(dir.path());
        host.reload().unwrap();
        let faults = faults_once(&host, |faults| !faults.is_empty());
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert_eq!(faults[0].file, "one of a_cycle.py, z_works.py");
        assert!(faults[0].reason.contains("`S.__del__`"), "{faults:?}");
        until_calls_run(&host);
    });
}
