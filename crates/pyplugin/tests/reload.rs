//! P-12: reloads are serialised and epochs exact, against the real embedded CPython.
#![cfg(feature = "python")]

mod common;

use common::{host, plugin_dir, write};
use pyplugin::{Hook, State};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Bound of the whole concurrent-reload run: a reload that hangs fails the test.
const GUARD: Duration = Duration::from_secs(60);

/// Replaces `name` in `dir` whole (write beside it under a name of `writer`'s own, then
/// rename).
fn replace(dir: &Path, name: &str, source: &str, writer: usize) {
    let staged = dir.join(format!(".{name}.{writer}.staged"));
    std::fs::write(&staged, source).unwrap();
    std::fs::rename(&staged, dir.join(name)).unwrap();
}

/// P-12: concurrent `reload` calls get strictly increasing, distinct epochs; the epoch in
/// force afterwards is the last one handed out, its hooks are the ones applied, and
/// `plugin_status` says exactly that (before, two reloads could share an epoch number, the
/// release of one dropping the other's modules: hooks dead, status active).
#[test]
fn p12_concurrent_reloads_give_distinct_increasing_epochs_and_live_hooks() {
    const RELOADERS: usize = 8;
    const ROUNDS: usize = 4;
    let dir = plugin_dir(&[(
        "notes.py",
        "def on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"v0\"]}\n",
    )]);
    let host = host(dir.path());
    assert_eq!(host.status().epoch, 1);
    let (done_tx, done) = std::sync::mpsc::channel();
    let barrier = Arc::new(Barrier::new(RELOADERS));
    for reloader in 0..RELOADERS {
        let (host, barrier, done_tx) = (host.clone(), barrier.clone(), done_tx.clone());
        let dir = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let mut epochs = Vec::new();
            barrier.wait();
            for round in 0..ROUNDS {
                // The file changes under the reloads too (renamed into place, so a load sees one
                // whole version of it).
                replace(
                    &dir,
                    "notes.py",
                    &format!(
                        "def on_read_result(result):\n    return {{\"notes\": result[\"notes\"] + [\"v{reloader}-{round}\"]}}\n"
                    ),
                    reloader,
                );
                epochs.push(host.reload().map(|status| status.epoch));
            }
            let _ = done_tx.send(epochs);
        });
    }
    drop(done_tx);
    let mut all = Vec::new();
    for _ in 0..RELOADERS {
        let epochs = done.recv_timeout(GUARD).expect("every reloader finished");
        let epochs: Vec<u64> = epochs
            .into_iter()
            .collect::<Result<_, _>>()
            .expect("reloads succeed");
        assert!(
            epochs.windows(2).all(|w| w[0] < w[1]),
            "one caller's epochs increase: {epochs:?}"
        );
        all.extend(epochs);
    }
    all.sort_unstable();
    let expected: Vec<u64> = (2..2 + (RELOADERS * ROUNDS) as u64).collect();
    assert_eq!(all, expected, "distinct epochs, none skipped or shared");

    let status = host.status();
    assert_eq!(status.state, State::Active);
    assert_eq!(
        status.epoch,
        *expected.last().unwrap(),
        "the last epoch applies"
    );
    assert!(status.disabled.is_empty(), "{status:?}");
    let epoch = host.current().expect("active");
    assert_eq!(epoch.number(), status.epoch);
    let out = epoch.run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert_eq!(
        out.changed_by,
        ["notes.py"],
        "the hooks of the last epoch run"
    );
    let notes = out.value["notes"].as_array().unwrap();
    assert_eq!(
        notes.len(),
        1 + Hook::ReadResult.sample_payload()["notes"]
            .as_array()
            .unwrap()
            .len()
    );
    assert!(notes.last().unwrap().as_str().unwrap().starts_with('v'));

    // One more reload after the storm: the file as it is now applies.
    write(
        dir.path(),
        "notes.py",
        "def on_read_result(result):\n    return {\"notes\": [\"final\"]}\n",
    );
    let status = host.reload().unwrap();
    assert_eq!(status.epoch, *expected.last().unwrap() + 1);
    let out = host
        .current()
        .unwrap()
        .run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
    assert_eq!(out.value["notes"], json!(["final"]));
}
