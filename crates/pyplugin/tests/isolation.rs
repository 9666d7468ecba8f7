//! Nothing a plugin does ends the process (issue 29, points 1, 2 and 16): recursion through C
//! code raises RecursionError instead of overflowing the interpreter thread's stack (P-5),
//! what would end or signal the process raises PluginForbidden, and a file is decoded as
//! CPython decodes it. Real plugin files, run by the real embedded CPython; every test is
//! bounded in time, so a hang fails it.
#![cfg(feature = "python")]

mod bounded;
mod common;

use bounded::within;
use common::{host, plugin_dir};
use pyplugin::{Hook, State};
use serde_json::json;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// One plugin file per way of recursing through C code, then one that works.
const RECURSING: &[(&str, &str)] = &[
    (
        "a_sorted.py",
        "def _key(x):\n    return sorted([x, x], key=_key)\n\
         def on_read_result(result):\n    _key(0)\n",
    ),
    (
        "b_map.py",
        "def _f(x):\n    return list(map(_f, [x]))\n\
         def on_read_result(result):\n    _f(0)\n",
    ),
    (
        "c_reduce.py",
        "import functools\n\
         def _f(a, b):\n    return functools.reduce(_f, [a, b])\n\
         def on_read_result(result):\n    _f(0, 1)\n",
    ),
    (
        "d_eq.py",
        "class _Chain:\n    def __eq__(self, other):\n        return _Chain() == other\n\
         def on_read_result(result):\n    _Chain() == 1\n",
    ),
    (
        "e_mixed.py",
        "import functools\n\
         def _s(x):\n    return sorted([x, x], key=_m)\n\
         def _m(x):\n    return list(map(_r, [x]))\n\
         def _r(x):\n    return functools.reduce(lambda a, b: _s(b), [x, x])\n\
         def on_read_result(result):\n    _s(0)\n",
    ),
    (
        "z_works.py",
        "def on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"works\"]}\n",
    ),
];

#[test]
fn p5_recursion_through_c_code_is_a_recursion_error_not_a_crash() {
    within(LIMIT, || {
        let dir = plugin_dir(RECURSING);
        let host = host(dir.path());
        let epoch = host.current().unwrap();
        let out = epoch.run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
        assert_eq!(out.value["notes"], json!(["works"]), "{:?}", out.failures);
        let failed: Vec<&str> = out.failures.iter().map(|f| f.file.as_str()).collect();
        assert_eq!(
            failed,
            [
                "a_sorted.py",
                "b_map.py",
                "c_reduce.py",
                "d_eq.py",
                "e_mixed.py"
            ]
        );
        for failure in &out.failures {
            assert!(
                failure.message.contains("RecursionError"),
                "{}",
                failure.message
            );
        }
        assert_eq!(host.state(), State::Active);
        // Disabled as failing (P-5); the next call runs the rest at once.
        assert_eq!(host.status().disabled.len(), 5);
        let again = epoch.run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
        assert!(again.failures.is_empty(), "{:?}", again.failures);
        assert_eq!(again.value["notes"], json!(["works"]));
    });
}

#[test]
fn p5_recursion_in_a_thread_a_plugin_starts_is_a_recursion_error_too() {
    within(LIMIT, || {
        let dir = plugin_dir(&[(
            "t.py",
            "import threading\n\
             def _key(x):\n    return sorted([x, x], key=_key)\n\
             def _run(out):\n    try:\n        _key(0)\n    except RecursionError as e:\n        out.append('RecursionError')\n\
             def on_read_result(result):\n    out = []\n    t = threading.Thread(target=_run, args=(out,))\n    t.start()\n    t.join()\n    return {\"notes\": out}\n",
        )]);
        let host = host(dir.path());
        let out = host
            .current()
            .unwrap()
            .run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
        assert_eq!(out.value["notes"], json!(["RecursionError"]), "{out:?}");
    });
}

#[test]
fn p5_a_plugin_cannot_raise_the_recursion_limit_or_shrink_thread_stacks() {
    within(LIMIT, || {
        let dir = plugin_dir(&[
            ("a.py", "import sys\nsys.setrecursionlimit(100000)\n"),
            ("b.py", "import threading\nthreading.stack_size(65536)\n"),
            (
                "c.py",
                "import sys\nsys.setrecursionlimit(500)\nsys.setrecursionlimit(1000)\n",
            ),
        ]);
        let status = host(dir.path()).status();
        let rejected: Vec<&str> = status.rejected.iter().map(|r| r.file.as_str()).collect();
        assert_eq!(rejected, ["a.py", "b.py"], "{status:?}");
        for rejection in &status.rejected {
            assert!(
                rejection.reasons[0].contains("PluginForbidden"),
                "{rejection:?}"
            );
        }
        assert_eq!(status.files.len(), 1, "lowering it is allowed: {status:?}");
    });
}

/// Calls that would end or signal the server process, each in a hook of its own file. The
/// signals chosen end the process when not refused (SIGTERM, SIGABRT, SIGALRM), or are
/// harmless to the whole process group (SIGWINCH), so a test run on unguarded code fails
/// without disturbing anything else.
const FORBIDDEN: &[(&str, &str)] = &[
    ("os_exit", "os._exit(3)"),
    ("os_abort", "os.abort()"),
    ("os_kill_self", "os.kill(os.getpid(), signal.SIGTERM)"),
    ("os_kill_group", "os.kill(0, signal.SIGWINCH)"),
    ("os_killpg", "os.killpg(os.getpgid(0), signal.SIGWINCH)"),
    ("os_execv", "os.execv('/bin/false', ['false'])"),
    ("os_execl", "os.execl('/bin/false', 'false')"),
    ("posix_exit", "import posix; posix._exit(3)"),
    (
        "signal_signal",
        "signal.signal(signal.SIGTERM, lambda *a: None)",
    ),
    ("signal_raise", "signal.raise_signal(signal.SIGTERM)"),
    (
        "signal_pthread_kill",
        "signal.pthread_kill(threading.get_ident(), signal.SIGTERM)",
    ),
    ("signal_alarm", "signal.alarm(1)"),
    (
        "signal_setitimer",
        "signal.setitimer(signal.ITIMER_REAL, 0.5)",
    ),
    (
        "c_signal",
        "import _signal; _signal.signal(signal.SIGTERM, lambda *a: None)",
    ),
    ("interrupt_main", "import _thread; _thread.interrupt_main()"),
    (
        "faulthandler_crash",
        "import faulthandler; faulthandler._sigsegv()",
    ),
    (
        "faulthandler_exit",
        "import faulthandler; faulthandler.dump_traceback_later(0.1, exit=True)",
    ),
    (
        "setrlimit",
        "import resource; resource.setrlimit(resource.RLIMIT_CORE, resource.getrlimit(resource.RLIMIT_CORE))",
    ),
    (
        "switch_interval",
        "import sys; sys.setswitchinterval(1000.0)",
    ),
];

#[test]
fn p5_what_would_end_or_signal_the_process_raises_plugin_forbidden_in_a_hook() {
    within(LIMIT, || {
        let mut files: Vec<(String, String)> = FORBIDDEN
            .iter()
            .map(|(name, call)| {
                (
                    format!("{name}.py"),
                    format!(
                        "import os, signal, threading\ndef on_tool_call(call):\n    {call}\n    return {{\"arguments\": {{\"query\": \"not refused\"}}}}\n"
                    ),
                )
            })
            .collect();
        files.push((
            "zz_works.py".into(),
            "def on_tool_call(call):\n    return {\"arguments\": dict(call[\"arguments\"], works=True)}\n"
                .into(),
        ));
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(n, s)| (n.as_str(), s.as_str()))
            .collect();
        let dir = plugin_dir(&files);
        let host = host(dir.path());
        let epoch = host.current().unwrap();
        let out = epoch.run_blocking(Hook::ToolCall, Hook::ToolCall.sample_payload());
        // The process is alive (this line runs) and only the working file applied.
        assert_eq!(out.changed_by, ["zz_works.py"], "{:?}", out.failures);
        assert_eq!(out.failures.len(), FORBIDDEN.len(), "{:?}", out.failures);
        for failure in &out.failures {
            assert!(
                failure.message.contains("PluginForbidden")
                    && failure
                        .message
                        .contains("is not available to server plugins"),
                "{}: {}",
                failure.file,
                failure.message
            );
        }
        assert_eq!(host.state(), State::Active);
        // Nothing was left armed: an alarm or a timer would have ended the process by now.
        std::thread::sleep(Duration::from_millis(1500));
        let again = epoch.run_blocking(Hook::ToolCall, Hook::ToolCall.sample_payload());
        assert_eq!(again.changed_by, ["zz_works.py"]);
    });
}

#[test]
fn p5_what_would_end_or_signal_the_process_at_load_rejects_the_file() {
    within(LIMIT, || {
        let dir = plugin_dir(&[
            ("a_exit.py", "import os\nos._exit(3)\n"),
            (
                "b_handler.py",
                "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n",
            ),
            (
                "c_kill.py",
                "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
            ),
            ("d_abort.py", "import os\nos.abort()\n"),
            (
                "e_fine.py",
                "import os, signal\n\
                 # Signal 0 only checks that a process exists; other processes may be signalled.\n\
                 os.kill(os.getpid(), 0)\n\
                 _HANDLER = signal.getsignal(signal.SIGTERM)\n",
            ),
        ]);
        let host = host(dir.path());
        let status = host.status();
        let rejected: Vec<&str> = status.rejected.iter().map(|r| r.file.as_str()).collect();
        assert_eq!(
            rejected,
            ["a_exit.py", "b_handler.py", "c_kill.py", "d_abort.py"],
            "{status:?}"
        );
        for rejection in &status.rejected {
            assert!(
                rejection.reasons[0].contains("PluginForbidden"),
                "{rejection:?}"
            );
        }
        assert_eq!(status.files.len(), 1);
        assert_eq!(host.state(), State::Active);
    });
}

#[test]
fn p5_sys_exit_in_a_thread_a_plugin_starts_ends_only_that_thread() {
    within(LIMIT, || {
        let dir = plugin_dir(&[(
            "t.py",
            "import sys, threading\n\
             def on_read_result(result):\n    t = threading.Thread(target=sys.exit, args=(3,))\n    t.start()\n    t.join()\n    return {\"notes\": [\"alive\"]}\n",
        )]);
        let host = host(dir.path());
        let out = host
            .current()
            .unwrap()
            .run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
        assert_eq!(out.value["notes"], json!(["alive"]), "{out:?}");
    });
}

#[test]
fn p16_a_utf8_bom_and_a_coding_cookie_load_as_cpython_loads_them() {
    within(LIMIT, || {
        let dir = plugin_dir(&[]);
        let write =
            |name: &str, bytes: &[u8]| std::fs::write(dir.path().join(name), bytes).unwrap();
        write(
            "a_bom.py",
            b"\xef\xbb\xbfdef on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"bom\"]}\n",
        );
        write(
            "b_latin1.py",
            b"# -*- coding: latin-1 -*-\ndef on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"caf\xe9\"]}\n",
        );
        // Without a cookie, the same bytes are not UTF-8: CPython's SyntaxError, naming the line.
        write(
            "c_no_cookie.py",
            b"def on_read_result(result):\n    return {\"notes\": [\"caf\xe9\"]}\n",
        );
        let host = host(dir.path());
        let status = host.status();
        let loaded: Vec<&str> = status.files.iter().map(|f| f.file.as_str()).collect();
        assert_eq!(loaded, ["a_bom.py", "b_latin1.py"], "{status:?}");
        let reason = &status.rejected[0].reasons[0];
        assert!(
            status.rejected[0].file == "c_no_cookie.py" && reason.contains("SyntaxError"),
            "{reason}"
        );
        let out = host
            .current()
            .unwrap()
            .run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
        assert_eq!(out.value["notes"], json!(["bom", "café"]), "{out:?}");
    });
}
