//! P-1: a build without the `python` feature (`cargo test -p pyplugin --no-default-features`)
//! reports the subsystem unavailable, answers every hook unchanged and refuses a dry run,
//! while the parts that need no interpreter work as in the full build.
#![cfg(not(feature = "python"))]

mod common;

use common::{check_config, host, plugin_dir};
use pyplugin::{Hook, HostError, State, check_directory};
use std::time::Duration;

#[test]
fn p1_without_python_the_subsystem_is_unavailable() {
    let dir = plugin_dir(&[("notes.py", "def on_read_result(result):\n    return None\n")]);
    let host = host(dir.path());
    let status = host.status();
    assert!(
        matches!(&status.state, State::Unavailable(reason) if reason.contains("`python`")),
        "{status:?}"
    );
    assert!(host.current().is_none());
    assert!(matches!(host.reload(), Err(HostError::Unavailable(_))));

    let report = check_directory(check_config(
        dir.path().to_path_buf(),
        Duration::from_secs(1),
    ));
    let error = report.error.expect("a dry run needs Python");
    assert!(error.contains("without Python support"), "{error}");

    // The hook set and its sample payloads need no interpreter.
    for hook in Hook::ALL {
        assert!(hook.sample_payload().is_object(), "{hook:?}");
    }
}
