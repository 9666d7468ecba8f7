//! P-13: `csg plugins check DIR` runs plugin code in a child process, so a plugin that ends,
//! crashes or hangs that process fails the check with a report instead of passing it (or
//! taking the check down with it). The real binary, real plugin files, the real CPython.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CSG: &str = env!("CARGO_BIN_EXE_csg");

/// A plugins directory holding `name` with `source`.
fn plugins(name: &str, source: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), source).unwrap();
    dir
}

/// `csg plugins check DIR EXTRA…`, which must end within `limit` (the test's own bound: a
/// hang fails the test instead of stalling it).
fn check(dir: &Path, extra: &[&str], limit: Duration) -> (Output, String) {
    let mut child = Command::new(CSG)
        .args(["plugins", "check"])
        .arg(dir)
        .args(extra)
        .env_remove("SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("csg starts");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`csg plugins check` did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output, stdout)
}

#[test]
fn p13_check_fails_when_a_hook_calls_os_exit() {
    let dir = plugins(
        "exits.py",
        "import os\ndef on_tool_call(call):\n    os._exit(0)\n",
    );
    let (output, report) = check(dir.path(), &[], Duration::from_secs(60));
    assert!(!output.status.success(), "{report}");
    assert!(report.contains("NOT OK"), "{report}");
    assert!(report.contains("exits.py"), "names the plugin: {report}");
}

#[test]
fn p13_check_fails_when_a_plugin_exits_at_load() {
    let dir = plugins("exits.py", "import os\nos._exit(0)\n");
    let (output, report) = check(dir.path(), &[], Duration::from_secs(60));
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains("NOT OK") && report.contains("exits.py"),
        "{report}"
    );
}

/// Ends the process through C, which no replacement of `os._exit` in the plugin's view can
/// stop: only the child process ends, and the check says so.
#[test]
fn p13_check_fails_when_a_hook_ends_the_process_through_c() {
    let dir = plugins(
        "exits.py",
        "import ctypes\ndef on_search_results(result):\n    ctypes.CDLL(None)._exit(0)\n",
    );
    let (output, report) = check(dir.path(), &[], Duration::from_secs(60));
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains("the dry-run process exited with status 0 before it reported")
            && report.contains("its plugin files: exits.py")
            && report.contains("NOT OK: the dry-run did not complete"),
        "{report}"
    );
}

#[test]
fn p13_check_fails_when_a_hook_crashes_the_process() {
    let dir = plugins(
        "crashes.py",
        "import ctypes\ndef on_read_result(result):\n    ctypes.string_at(0)\n",
    );
    let (output, report) = check(dir.path(), &[], Duration::from_secs(60));
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains("killed by signal 11 (SIGSEGV) before it reported"),
        "{report}"
    );
    assert!(
        report.contains("crashes.py") && report.contains("NOT OK"),
        "{report}"
    );
}

#[test]
fn p13_check_fails_when_a_plugin_hangs_past_the_time_limit() {
    // The exception's text never comes: formatting it for the report loops.
    let dir = plugins(
        "hangs.py",
        "class _Endless(Exception):\n    def __str__(self):\n        while True:\n            pass\n\nraise _Endless()\n",
    );
    let started = Instant::now();
    let (output, report) = check(
        dir.path(),
        &["--timeout-secs", "5", "--hook-timeout-ms", "500"],
        Duration::from_secs(60),
    );
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains("NOT OK") && report.contains("hangs.py"),
        "{report}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "bounded by --timeout-secs: {:?}",
        started.elapsed()
    );
}

/// A hang no watchdog inside the process can end: the hook stops the whole process (through C,
/// past any replacement of `os.kill`). The check's own time limit kills it and says so.
#[test]
fn p13_check_fails_when_a_hook_stops_the_process() {
    let dir = plugins(
        "stops.py",
        "import ctypes, os, signal\ndef on_tool_call(call):\n    ctypes.CDLL(None).kill(os.getpid(), signal.SIGSTOP)\n",
    );
    let started = Instant::now();
    let (output, report) = check(
        dir.path(),
        &["--timeout-secs", "3"],
        Duration::from_secs(60),
    );
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains("the dry-run did not finish within 3 s and was stopped")
            && report.contains("its plugin files: stops.py")
            && report.contains("NOT OK: the dry-run did not complete"),
        "{report}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

/// Plugin output on stdout, even a forged report line, does not confuse the check.
#[test]
fn p13_a_good_directory_still_passes_through_the_child_process() {
    let dir = plugins(
        "notes.py",
        "import os\nos.write(1, b'csg-plugins-check-report: {not json\\nnoise on stdout')\ndef on_read_result(result):\n    return {'notes': ['checked']}\n",
    );
    let (output, report) = check(dir.path(), &[], Duration::from_secs(60));
    assert!(output.status.success(), "{report}");
    assert!(
        report.contains("LOADED    notes.py  hooks=on_read_result")
            && report.contains("RAN       notes.py on_read_result: ok")
            && report.contains("OK: 1 loaded, 0 rejected, 0 of 1 hook runs failed"),
        "{report}"
    );
}
