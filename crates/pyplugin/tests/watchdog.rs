//! P-23: hooks that overrun their time limit. A test binary of its own, because a wedged
//! host leaves a Python thread busy for a while.
#![cfg(feature = "python")]

mod common;

use common::{host, plugin_dir};
use pyplugin::{Hook, HostError, State};
use serde_json::json;

#[test]
fn p23_an_infinite_loop_is_interrupted_and_disabled_and_the_host_lives_on() {
    let dir = plugin_dir(&[
        (
            "a_loops.py",
            "def on_read_result(result):\n    while True:\n        pass\n",
        ),
        (
            "b_works.py",
            "def on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"b\"]}\n",
        ),
    ]);
    let host = host(dir.path());
    let epoch = host.current().unwrap();
    let out = epoch.run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
    assert_eq!(out.value["notes"], json!(["b"]));
    assert!(
        out.failures[0].message.contains("time limit of 200 ms"),
        "{:?}",
        out.failures
    );
    assert_eq!(host.state(), State::Active);
    let status = host.status();
    assert_eq!(status.disabled[0].file, "a_loops.py");
    // The interpreter is healthy: the next call runs b.py at once, without a.py.
    let again = epoch.run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
    assert!(again.failures.is_empty());
    assert!(host.reload().is_ok());
}

#[test]
fn p23_a_hook_that_swallows_the_interrupt_wedges_the_host() {
    // Ends by itself after 20 s so the test process is not kept busy forever.
    let dir = plugin_dir(&[(
        "stubborn.py",
        "import time\ndef on_tool_call(call):\n    end = time.monotonic() + 20\n    while time.monotonic() < end:\n        try:\n            while time.monotonic() < end:\n                pass\n        except BaseException:\n            pass\n",
    )]);
    assert_wedges(&dir);
}

#[test]
fn p23_a_hook_blocked_in_c_code_wedges_the_host() {
    let dir = plugin_dir(&[(
        "sleeper.py",
        "import time\ndef on_tool_call(call):\n    time.sleep(600)\n",
    )]);
    assert_wedges(&dir);
}

fn assert_wedges(dir: &tempfile::TempDir) {
    let host = host(dir.path());
    let epoch = host.current().unwrap();
    let payload = Hook::ToolCall.sample_payload();
    let out = epoch.run_blocking(Hook::ToolCall, payload.clone());
    assert!(
        out.changed().is_none(),
        "the call answers as without plugins"
    );
    let State::Wedged(reason) = host.state() else {
        panic!("not wedged: {:?}", host.state());
    };
    assert!(reason.contains("on_tool_call"), "{reason}");
    assert!(host.current().is_none(), "every hook is bypassed");
    // Calls on an epoch taken before still answer, at once.
    let later = epoch.run_blocking(Hook::ToolCall, payload.clone());
    assert!(later.changed().is_none());
    assert_eq!(
        later.value, payload,
        "a job that never started gets its payload back"
    );
    let status = host.status();
    assert!(matches!(status.state, State::Wedged(_)));
    let err = host.reload().unwrap_err();
    assert!(matches!(err, HostError::Wedged(_)));
    assert!(err.to_string().contains("restarted"), "{err}");
}
