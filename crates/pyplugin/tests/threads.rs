//! Threads a plugin starts cannot stall calls (issue 29, point 4; P-23): a call-scoped hook
//! has a deadline on getting the interpreter (its queue and the interpreter lock); past it the
//! call answers as without server plugins and the wait is counted. The tests share one
//! interpreter, and a thread holding it would distort the others: they run one at a time.
#![cfg(feature = "python")]

mod bounded;
mod common;

use bounded::within;
use common::{host, plugin_dir};
use pyplugin::Hook;
use serde_json::json;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(90);
/// common::host: 200 ms per hook, 300 ms grace.
const TIMEOUT_AND_GRACE: Duration = Duration::from_millis(500);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn p23_a_plugin_thread_holding_the_interpreter_in_c_code_cannot_stall_calls() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    within(LIMIT, || {
        let out = tempfile::tempdir().unwrap();
        let marker = out.path().join("holding");
        // After the load, the thread holds the interpreter in C code (`sum` over a range
        // never lets it go) for seconds at a time; it stops by itself after about 3 s.
        let source = format!(
            "import threading, time\n\
             def _hold():\n    time.sleep(0.3)\n    end = time.monotonic() + 3\n    open({marker:?}, 'w').close()\n    while time.monotonic() < end:\n        sum(range(300_000_000))\n\
             threading.Thread(target=_hold, daemon=True).start()\n\
             def on_read_result(result):\n    return {{\"notes\": [\"ran\"]}}\n",
            marker = marker.to_str().unwrap()
        );
        let dir = plugin_dir(&[("holder.py", &source)]);
        let host = host(dir.path());
        let epoch = host.current().unwrap();
        while !marker.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(50));
        let payload = Hook::ReadResult.sample_payload();
        let started = Instant::now();
        let first = epoch.run_blocking(Hook::ReadResult, payload.clone());
        let waited = started.elapsed();
        assert!(waited <= TIMEOUT_AND_GRACE, "the call waited {waited:?}");
        assert!(first.changed().is_none(), "{first:?}");
        assert_eq!(
            first.value, payload,
            "answered as without plugins, payload intact"
        );
        assert!(
            host.status().interpreter_wait_timeouts >= 1,
            "the wait is counted"
        );
        assert_eq!(
            host.interpreter_wait_timeouts(),
            host.status().interpreter_wait_timeouts
        );
        // Once the thread lets go, calls run the hook again.
        let recovered = Instant::now();
        loop {
            let out = epoch.run_blocking(Hook::ReadResult, payload.clone());
            if out.changed_by == ["holder.py"] {
                assert_eq!(out.value["notes"], json!(["ran"]));
                break;
            }
            assert!(
                recovered.elapsed() < Duration::from_secs(30),
                "never ran again"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    });
}

#[test]
fn p23_a_plugin_thread_spinning_in_python_does_not_stall_calls() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    within(LIMIT, || {
        let dir = plugin_dir(&[(
            "spinner.py",
            "import threading, time\n\
             def _spin():\n    end = time.monotonic() + 4\n    while time.monotonic() < end:\n        pass\n\
             threading.Thread(target=_spin, daemon=True).start()\n\
             def on_read_result(result):\n    return {\"notes\": [\"ran\"]}\n",
        )]);
        let host = host(dir.path());
        let epoch = host.current().unwrap();
        for _ in 0..20 {
            let started = Instant::now();
            let out = epoch.run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
            let waited = started.elapsed();
            assert!(waited <= TIMEOUT_AND_GRACE, "a call waited {waited:?}");
            assert_eq!(out.value["notes"], json!(["ran"]), "{out:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(host.status().interpreter_wait_timeouts, 0);
    });
}

#[test]
fn p23_a_plugin_cannot_make_its_threads_keep_the_interpreter_longer() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    within(LIMIT, || {
        let dir = plugin_dir(&[(
            "slow_switch.py",
            "import sys\nsys.setswitchinterval(1000.0)\n",
        )]);
        let status = host(dir.path()).status();
        assert_eq!(status.rejected.len(), 1, "{status:?}");
        assert!(
            status.rejected[0].reasons[0].contains("PluginForbidden"),
            "{:?}",
            status.rejected
        );
    });
}

#[test]
fn p23_calls_queued_behind_a_long_hook_answer_by_their_deadline() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    within(LIMIT, || {
        // on_source_file (derived-state: no deadline to start, its own time limit) keeps the
        // interpreter busy for 150 ms at a time; a read behind five of them (750 ms of work)
        // waits at most its limit.
        let dir = plugin_dir(&[(
            "busy.py",
            "import time\n\
             def on_source_file(file):\n    end = time.monotonic() + 0.15\n    while time.monotonic() < end:\n        pass\n\
             def on_read_result(result):\n    return {\"notes\": [\"ran\"]}\n",
        )]);
        let host = host(dir.path());
        let epoch = host.current().unwrap();
        let builders: Vec<_> = (0..5)
            .map(|_| {
                let epoch = epoch.clone();
                std::thread::spawn(move || {
                    epoch.run_blocking(Hook::SourceFile, Hook::SourceFile.sample_payload())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        let out = epoch.run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
        let waited = started.elapsed();
        assert!(waited <= TIMEOUT_AND_GRACE, "the call waited {waited:?}");
        assert!(out.changed().is_none(), "{out:?}");
        assert!(host.status().interpreter_wait_timeouts >= 1);
        for builder in builders {
            let built = builder.join().unwrap();
            assert!(built.failures.is_empty(), "{:?}", built.failures);
        }
    });
}
