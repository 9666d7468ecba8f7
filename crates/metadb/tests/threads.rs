//! Dropping the last `Database` ends its threads. A test binary of its own, so that no other
//! test's threads are counted.

mod common;

use std::time::Duration;

use common::{eventually, within};
use metadb::{Database, Options, testing};

/// This process's threads whose name starts with `metadb-`.
fn metadb_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.starts_with("metadb-"))
        })
        .count()
}

#[test]
fn dropping_the_last_database_ends_its_threads() {
    within(Duration::from_secs(60), || {
        let url = testing::shared().create_database();
        assert_eq!(metadb_threads(), 0);
        let options = Options {
            connections: 3,
            ..Options::default()
        };
        let db = Database::connect(&url, options).unwrap();
        db.subscribe("repos", || {});
        let clone = db.clone();
        // Three connection threads and the listener.
        assert_eq!(metadb_threads(), 4);
        drop(db);
        clone.run(|c| c.batch_execute("SELECT 1")).unwrap();
        assert_eq!(metadb_threads(), 4, "a clone keeps the threads");
        drop(clone);
        eventually(Duration::from_secs(2), "the threads to end", || {
            metadb_threads() == 0
        });

        // Also when the server was never reached: the failed connect leaves no thread behind.
        let wrong = url.replace("@127.0.0.1:", "@127.0.0.1:1");
        let _ = Database::connect(&wrong, Options::default());
        eventually(
            Duration::from_secs(2),
            "the threads of a failed connect to end",
            || metadb_threads() == 0,
        );
    });
}
