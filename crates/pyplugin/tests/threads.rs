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
        // on_tool_call keeps the interpreter busy for 150 ms per call; a read queued behind
        // five of them (750 ms of work) waits at most its limit. (Calls queue among calls:
        // only an index build's files let a call go ahead.)
        let dir = plugin_dir(&[(
            "busy.py",
            "import time\n\
             def on_tool_call(call):\n    end = time.monotonic() + 0.15\n    while time.monotonic() < end:\n        pass\n\
             def on_read_result(result):\n    return {\"notes\": [\"ran\"]}\n",
        )]);
        let host = host(dir.path());
        let epoch = host.current().unwrap();
        let builders: Vec<_> = (0..5)
            .map(|_| {
                let epoch = epoch.clone();
                std::thread::spawn(move || {
                    epoch.run_blocking(Hook::ToolCall, Hook::ToolCall.sample_payload())
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

/// Issue 29 point 12: an index build runs one file per job, and a call goes ahead of the
/// files the build threads have queued: it waits for the file running now, not for the rest.
#[test]
fn p23_a_call_goes_ahead_of_queued_index_build_files() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    within(LIMIT, || {
        let out = tempfile::tempdir().unwrap();
        let started = out.path().join("started");
        let gate = out.path().join("gate");
        // The first file holds its job (sleeping, so not the interpreter's lock) until the
        // test opens the gate; every file is logged when its hook ends.
        let source = format!(
            "import os, time\n\
             _log = []\n\
             def on_source_file(file):\n    if file['path'] == 'first':\n        open({started:?}, 'w').close()\n        end = time.monotonic() + 20\n        while not os.path.exists({gate:?}) and time.monotonic() < end:\n            time.sleep(0.005)\n    _log.append(file['path'])\n\
             def on_read_result(result):\n    return {{\"notes\": list(_log)}}\n",
            started = started.to_str().unwrap(),
            gate = gate.to_str().unwrap(),
        );
        let dir = plugin_dir(&[("build.py", &source)]);
        let mut config = pyplugin::HostConfig::new(dir.path().to_path_buf());
        config.hook_timeout = Duration::from_secs(30);
        let host = pyplugin::PluginHost::start(config);
        let epoch = host.current().unwrap();
        let file = |path: &str| {
            let mut payload = Hook::SourceFile.sample_payload();
            payload["path"] = json!(path);
            payload
        };
        std::thread::scope(|scope| {
            let first = file("first");
            let running = epoch.clone();
            scope.spawn(move || running.run_blocking(Hook::SourceFile, first));
            while !started.exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
            for path in ["b1", "b2", "b3"] {
                let payload = file(path);
                let queued = epoch.clone();
                scope.spawn(move || queued.run_blocking(Hook::SourceFile, payload));
            }
            // The three build files queue behind "first" (the threads only submit).
            std::thread::sleep(Duration::from_millis(200));
            let call = epoch.clone();
            let read = scope.spawn(move || {
                call.run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload())
            });
            std::thread::sleep(Duration::from_millis(200));
            std::fs::write(&gate, b"").unwrap();
            let read = read.join().unwrap();
            assert_eq!(read.changed_by, ["build.py"], "{read:?}");
            assert_eq!(
                read.value["notes"],
                json!(["first"]),
                "the call ran right after the file that was running"
            );
        });
    });
}

/// Issue 29 point 3: a reload never blocks on a plugin thread that holds the interpreter in
/// C code: once no job could start for the hook limit and its grace, the reload answers
/// `Busy`, nothing changes, and a reload after the thread let go loads as usual.
#[test]
fn p23_a_reload_does_not_wait_for_a_plugin_thread_holding_the_interpreter() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    within(LIMIT, || {
        let out = tempfile::tempdir().unwrap();
        let marker = out.path().join("holding");
        let done = out.path().join("done");
        // The thread holds the interpreter in C code for about 4 s, then lets go for good.
        let source = format!(
            "import threading, time\n\
             def _hold():\n    time.sleep(0.3)\n    end = time.monotonic() + 4\n    open({marker:?}, 'w').close()\n    while time.monotonic() < end:\n        sum(range(300_000_000))\n    open({done:?}, 'w').close()\n\
             threading.Thread(target=_hold, daemon=True).start()\n\
             def on_read_result(result):\n    return {{\"notes\": [\"ran\"]}}\n",
            marker = marker.to_str().unwrap(),
            done = done.to_str().unwrap(),
        );
        let dir = plugin_dir(&[("holder.py", &source)]);
        let host = host(dir.path());
        let before = host.status().epoch;
        while !marker.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(50));
        let refused = host.reload();
        assert!(
            !done.exists(),
            "the reload answered only after the thread let go: {refused:?}"
        );
        match refused {
            Err(pyplugin::HostError::Busy(reason)) => {
                assert!(reason.contains("holds it"), "{reason}")
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        assert_eq!(host.status().epoch, before, "nothing changed");
        assert_eq!(host.status().state, pyplugin::State::Active);
        while !done.exists() {
            std::thread::sleep(Duration::from_millis(50));
        }
        let reloaded = host
            .reload()
            .expect("a reload after the thread let go loads");
        assert!(reloaded.epoch > before);
    });
}
