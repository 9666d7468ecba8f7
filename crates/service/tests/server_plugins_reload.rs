//! P-12, P-23 (issue 42, point 10): `reload_plugins` answers the epoch it made (eight reloads
//! at once used to answer `[2,3,4,5,6,7,9,9]`: each read the newest epoch after reloading, not
//! its own), and `plugin_status` names a plugin whose `__del__` looped when its epoch was
//! released (the loop was interrupted, the status said nothing). Real plugin files, the real
//! embedded CPython.
//!
//! The tests run one at a time: every host of a process shares the one interpreter and its
//! garbage collector, so one test's reloads could free (and interrupt) another's looping
//! `__del__`.

use pyplugin::{HostConfig, PluginHost};
use service::{CallContext, Caller, Service, ServiceConfig};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Bound of the whole run: a reload that hangs fails the test.
const GUARD: Duration = Duration::from_secs(120);

/// Held by each test for its whole run.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const RELOADS: u64 = 8;

/// Counts its loads (in the process's one interpreter; no other plugin here touches the
/// count): the load that makes epoch N is the N-th (loads are serialised and the
/// first is epoch 1), so the hook a status shows tells which epoch's files it describes:
/// `on_read_result` for an even epoch, `on_search_results` for an odd one.
const COUNTING: &str = "import sys\n\
sys._csg_reload_test_loads = getattr(sys, '_csg_reload_test_loads', 0) + 1\n\
if sys._csg_reload_test_loads % 2 == 0:\n    def on_read_result(result):\n        return None\n\
else:\n    def on_search_results(result):\n        return None\n";

fn hook_of(epoch: u64) -> &'static str {
    if epoch.is_multiple_of(2) {
        "on_read_result"
    } else {
        "on_search_results"
    }
}

/// Eight reloads at once each answer the epoch they made and that epoch's files: together the
/// epochs 2..=9, each once. The runtime's one thread is kept busy while the reloads run (on
/// the blocking pool), as on a loaded server: every answer is read after all eight epochs
/// are published, so an answer taken from the newest epoch instead of its own shows.
#[tokio::test(flavor = "current_thread")]
async fn p12_concurrent_reloads_each_answer_their_own_epoch() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(plugins.path().join("count.py"), COUNTING).unwrap();
    let (_source, service) = service_with(HostConfig::new(plugins.path().to_path_buf())).await;
    let first = service.server_plugins_status();
    assert_eq!(first.host.epoch, 1);
    assert_eq!(first.host.files[0].hooks, [hook_of(1)], "{first:?}");

    let reloads: Vec<_> = (0..RELOADS)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move {
                // One context per call, as a transport makes them.
                let ctx = CallContext {
                    caller: Caller::Local,
                    ..CallContext::default()
                };
                service.reload_server_plugins(&ctx).await
            })
        })
        .collect();
    // Every task starts its reload ...
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
    // ... and the runtime's thread is busy until all of them have published.
    let deadline = Instant::now() + GUARD;
    while service.server_plugins().status().epoch < 1 + RELOADS {
        assert!(Instant::now() < deadline, "the reloads did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
    let run = async {
        let mut answers = Vec::new();
        for reload in reloads {
            answers.push(reload.await.unwrap().expect("the reload succeeds"));
        }
        answers
    };
    let answers = tokio::time::timeout(GUARD, run)
        .await
        .expect("the reloads finished");

    let epochs: Vec<u64> = answers.iter().map(|status| status.host.epoch).collect();
    let distinct: BTreeSet<u64> = epochs.iter().copied().collect();
    assert_eq!(
        distinct,
        (2..2 + RELOADS).collect::<BTreeSet<u64>>(),
        "each reload answers the epoch it made, and together the ones made: {epochs:?}"
    );
    for status in &answers {
        let host = &status.host;
        assert!(host.last_reload_ok, "{status:?}");
        assert_eq!(host.files.len(), 1, "{status:?}");
        assert_eq!(
            host.files[0].hooks,
            [hook_of(host.epoch)],
            "the status is the files of epoch {}, not a later one's",
            host.epoch
        );
    }
    let now = service.server_plugins_status();
    assert_eq!(
        now.host.epoch,
        1 + RELOADS,
        "the last epoch made is in force"
    );
    assert_eq!(now.host.files[0].hooks, [hook_of(1 + RELOADS)]);
}

/// A service over a one-file repository with the server plugins `config` sets up.
async fn service_with(config: HostConfig) -> (testgit::SourceRepo, Service) {
    let source = testgit::SourceRepo::with_files(&[("a.md", b"a\n")]);
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .unwrap();
    let service = Service::with_server_plugins(
        source.store("test/repo", ""),
        ServiceConfig::default(),
        host,
    );
    (source, service)
}

/// P-23, P-12: a plugin whose `__del__` loops when a reload releases its epoch: the release
/// is interrupted and finishes, `plugin_status` names the file and what happened (for an
/// anonymous caller too, as one line), and calls run the plugins again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p23_plugin_status_names_a_del_that_looped_when_its_epoch_was_released() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(
        plugins.path().join("a_sticky.py"),
        "class _Sticky:\n    def __del__(self):\n        while True:\n            pass\n\
         _keep = _Sticky()\n",
    )
    .unwrap();
    std::fs::write(
        plugins.path().join("z_notes.py"),
        "def on_read_result(result):\n    return {'notes': result['notes'] + ['z']}\n",
    )
    .unwrap();
    // 200 ms per hook, 300 ms grace.
    let mut config = HostConfig::new(plugins.path().to_path_buf());
    config.hook_timeout = Duration::from_millis(200);
    config.wedge_grace = Duration::from_millis(300);
    let (_source, service) = service_with(config).await;
    assert_eq!(service.server_plugins_status().host.release_faults, []);
    let run = async {
        let reloaded = service
            .reload_server_plugins(&CallContext::default())
            .await
            .expect("the reload succeeds");
        assert_eq!(reloaded.host.epoch, 2);
        // Epoch 1 is released once the reload has dropped it: poll until that is done.
        let anonymous = CallContext {
            caller: Caller::Anonymous,
            ..CallContext::default()
        };
        loop {
            let status = service.server_plugins_status_for(&anonymous);
            if !status.host.release_faults.is_empty() {
                break status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let status = tokio::time::timeout(GUARD, run)
        .await
        .expect("the release finished");
    assert_eq!(status.detail, service::StatusDetail::Summary);
    let faults = &status.host.release_faults;
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(
        (faults[0].file.as_str(), faults[0].epoch),
        ("a_sticky.py", 1)
    );
    for part in [
        "`_Sticky.__del__`",
        "200 ms",
        "epoch 1 was released",
        "interrupted",
    ] {
        assert!(faults[0].reason.contains(part), "{part:?} in {faults:?}");
    }
    assert_eq!(status.host.state, pyplugin::State::Active);

    // Later calls run the plugins (a call queued behind the interrupted release may have
    // answered without them).
    let read = service::ReadRequest {
        repo: "test/repo".into(),
        revision: None,
        path: "a.md".into(),
        start_line: None,
        end_line: None,
        plugins: None,
    };
    let run = async {
        loop {
            let (_, enrichment) = service
                .read_enriched(&CallContext::default(), read.clone())
                .await
                .expect("the read answers");
            if enrichment.operator_notes == ["z"] {
                return;
            }
            assert!(enrichment.operator_notes.is_empty(), "{enrichment:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(GUARD, run)
        .await
        .expect("calls run the plugins again");
}
