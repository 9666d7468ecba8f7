//! The membership thread ends with the last `Membership` or on `leave`. A test binary of its
//! own, so that no other test's threads are counted.

mod common;

use std::time::Duration;

use cluster::{ClusterConfig, Membership};
use common::{database, eventually, fast, url, within};
use metadb::testing;

/// This process's membership threads.
fn membership_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.trim_end() == "cluster-member")
        })
        .count()
}

#[test]
fn the_thread_ends_with_the_last_membership_or_on_leave() {
    within(Duration::from_secs(60), || {
        let db = testing::shared().create_database();
        assert_eq!(membership_threads(), 0);
        let a = Membership::join(database(&db), fast("http://a.test:1")).unwrap();
        let b = Membership::join(database(&db), fast("http://b.test:1")).unwrap();
        // A thread names itself once it runs.
        eventually(Duration::from_secs(1), "two membership threads", || {
            membership_threads() == 2
        });

        let clone = a.clone();
        drop(a);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(membership_threads(), 2, "a clone keeps the thread");
        assert!(clone.view().database_reachable());
        drop(clone);
        eventually(
            Duration::from_secs(1),
            "the dropped membership's thread to end",
            || membership_threads() == 1,
        );

        b.leave().unwrap();
        eventually(Duration::from_secs(1), "the thread to end on leave", || {
            membership_threads() == 0
        });
        drop(b);

        // A refused join starts no thread.
        let config = ClusterConfig {
            owners_per_repo: 0,
            ..ClusterConfig::new(url("http://c.test:1"))
        };
        assert!(Membership::join(database(&db), config).is_err());
        assert_eq!(membership_threads(), 0);
    });
}
