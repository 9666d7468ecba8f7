//! metadb against a real PostgreSQL server (started by `metadb::testing`).

mod common;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::{abort_after, eventually, password_of, within};
use metadb::postgres;
use metadb::testing::{self, TestServer};
use metadb::{Database, Error, Health, Migration, Options};

const LIMIT: Duration = Duration::from_secs(60);

fn connect(url: &str) -> Database {
    Database::connect(url, Options::default()).unwrap()
}

fn count(db: &Database, sql: &'static str) -> i64 {
    db.run(move |c| c.query_one(sql, &[]).map(|row| row.get(0)))
        .unwrap()
}

#[test]
fn a_wrong_password_is_refused_without_being_shown() {
    within(LIMIT, || {
        let url = testing::shared().create_database();
        let right = password_of(&url);
        let wrong = url.replace(&right, "not-the-Secret-42");
        let error = Database::connect(&wrong, Options::default()).unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::Refused(_)), "{error:?}");
        assert!(!error.is_unreachable());
        assert!(text.contains("password authentication failed"), "{text}");
        assert!(text.contains("check the user, password"), "{text}");
        assert!(text.contains("postgres://csg:***@127.0.0.1:"), "{text}");
        assert!(!text.contains("not-the-Secret-42"), "{text}");
        assert!(!format!("{error:?}").contains("not-the-Secret-42"));
    });
}

#[test]
fn an_unreachable_port_fails_clearly_and_fast() {
    within(LIMIT, || {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("postgres://csg:hunter2-secret@127.0.0.1:{port}/csg");
        let start = Instant::now();
        let error = Database::connect(&url, Options::default()).unwrap_err();
        let text = error.to_string();
        assert!(error.is_unreachable(), "{error:?}");
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(text.contains("check that the server is running"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    });
}

#[test]
fn a_missing_database_is_refused() {
    within(LIMIT, || {
        let url = testing::shared().url("no_such_database");
        let error = Database::connect(&url, Options::default()).unwrap_err();
        assert!(matches!(error, Error::Refused(_)), "{error:?}");
        assert!(error.to_string().contains("does not exist"), "{error}");
    });
}

#[test]
fn debug_and_shown_url_never_show_the_password() {
    within(LIMIT, || {
        let url = testing::shared().create_database();
        let db = connect(&url);
        let password = password_of(&url);
        let debug = format!("{db:?}");
        assert!(!debug.contains(&password), "{debug}");
        assert!(debug.contains("csg:***@127.0.0.1"), "{debug}");
        assert!(!db.shown_url().contains(&password));
        assert_eq!(db.health(), Health::Ok);
    });
}

const TOKENS: Migration = Migration {
    version: 1,
    name: "tokens",
    sql: "CREATE TABLE tokens (id BIGINT PRIMARY KEY, name TEXT NOT NULL);
          SELECT pg_sleep(0.2);",
};
const FIRST_TOKEN: Migration = Migration {
    version: 2,
    name: "first token",
    sql: "INSERT INTO tokens VALUES (1, 'first')",
};

#[test]
fn migrating_twice_changes_nothing_the_second_time() {
    within(LIMIT, || {
        let db = connect(&testing::shared().create_database());
        db.migrate("access", &[FIRST_TOKEN, TOKENS]).unwrap();
        db.migrate("access", &[TOKENS, FIRST_TOKEN]).unwrap();
        assert_eq!(count(&db, "SELECT count(*) FROM tokens"), 1);
        let recorded = db
            .run(|c| {
                let rows = c.query(
                    "SELECT component, version, name FROM csg_schema_migrations ORDER BY version",
                    &[],
                )?;
                Ok(rows
                    .iter()
                    .map(|r| {
                        (
                            r.get::<_, String>(0),
                            r.get::<_, i64>(1),
                            r.get::<_, String>(2),
                        )
                    })
                    .collect::<Vec<_>>())
            })
            .unwrap();
        assert_eq!(
            recorded,
            [
                ("access".to_owned(), 1, "tokens".to_owned()),
                ("access".to_owned(), 2, "first token".to_owned())
            ]
        );
        // Another component has its own versions in the same table.
        let other = Migration {
            version: 1,
            name: "repos",
            sql: "CREATE TABLE repos (name TEXT PRIMARY KEY)",
        };
        db.migrate("gitstore", &[other]).unwrap();
        assert_eq!(count(&db, "SELECT count(*) FROM csg_schema_migrations"), 3);
    });
}

#[test]
fn concurrent_migrations_apply_each_version_once() {
    within(LIMIT, || {
        let url = testing::shared().create_database();
        // Replicas starting at once: two processes' handles, two threads each.
        let replicas = [connect(&url), connect(&url)];
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let db = replicas[i % 2].clone();
                std::thread::spawn(move || db.migrate("access", &[TOKENS, FIRST_TOKEN]))
            })
            .collect();
        for thread in threads {
            thread.join().unwrap().unwrap();
        }
        assert_eq!(count(&replicas[0], "SELECT count(*) FROM tokens"), 1);
        assert_eq!(
            count(&replicas[1], "SELECT count(*) FROM csg_schema_migrations"),
            2
        );
    });
}

#[test]
fn a_database_migrated_by_a_newer_csg_is_refused() {
    within(LIMIT, || {
        let db = connect(&testing::shared().create_database());
        db.migrate("access", &[TOKENS, FIRST_TOKEN]).unwrap();
        let error = db.migrate("access", &[TOKENS]).unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::Migration(_)), "{error:?}");
        assert!(text.contains("migrated by a newer csg"), "{text}");
        assert!(text.contains("upgrade csg"), "{text}");
        assert!(text.contains("version 2"), "{text}");
    });
}

#[test]
fn a_migration_inserted_below_an_applied_one_is_refused() {
    within(LIMIT, || {
        let db = connect(&testing::shared().create_database());
        let third = Migration {
            version: 3,
            name: "third",
            sql: "SELECT 1",
        };
        db.migrate("access", &[TOKENS, third]).unwrap();
        let error = db
            .migrate("access", &[TOKENS, FIRST_TOKEN, third])
            .unwrap_err();
        assert!(error.to_string().contains("renumber"), "{error}");
        assert_eq!(count(&db, "SELECT count(*) FROM tokens"), 0);
    });
}

#[test]
fn a_failing_migration_is_rolled_back_and_not_recorded() {
    within(LIMIT, || {
        let db = connect(&testing::shared().create_database());
        let broken = Migration {
            version: 2,
            name: "broken",
            sql: "CREATE TABLE half (x INT); INSERT INTO nowhere VALUES (1);",
        };
        let error = db.migrate("access", &[TOKENS, broken]).unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::Migration(_)), "{error:?}");
        assert!(
            text.contains("access migration 2 (broken) failed"),
            "{text}"
        );
        assert!(text.contains("nowhere"), "{text}");
        assert_eq!(count(&db, "SELECT count(*) FROM csg_schema_migrations"), 1);
        assert_eq!(
            count(
                &db,
                "SELECT count(*) FROM pg_tables WHERE tablename = 'half'"
            ),
            0
        );
    });
}

#[test]
fn a_bad_migration_list_is_refused_before_any_database_work() {
    within(LIMIT, || {
        let db = connect(&testing::shared().create_database());
        let twin = Migration {
            name: "twin",
            ..TOKENS
        };
        let error = db.migrate("access", &[TOKENS, twin]).unwrap_err();
        assert!(
            error.to_string().contains("two migrations numbered 1"),
            "{error}"
        );
        let zero = Migration {
            version: 0,
            ..TOKENS
        };
        assert!(db.migrate("access", &[zero]).is_err());
        assert_eq!(
            count(
                &db,
                "SELECT count(*) FROM pg_tables WHERE tablename = 'csg_schema_migrations'"
            ),
            0
        );
    });
}

#[tokio::test]
async fn run_works_inside_a_current_thread_runtime() {
    let _bound = abort_after(LIMIT, "run_works_inside_a_current_thread_runtime");
    let db = connect(&testing::shared().create_database());
    let two: i32 = db
        .run(|c| c.query_one("SELECT 1 + 1", &[]).map(|r| r.get(0)))
        .unwrap();
    assert_eq!(two, 2);
    let task_db = db.clone();
    let from_task = tokio::spawn(async move {
        task_db.run(|c| c.query_one("SELECT 3", &[]).map(|r| r.get::<_, i32>(0)))
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(from_task, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_works_inside_a_multi_thread_runtime_and_its_blocking_pool() {
    let _bound = abort_after(LIMIT, "run_works_inside_a_multi_thread_runtime");
    let db = connect(&testing::shared().create_database());
    let mut tasks = Vec::new();
    for i in 0..8i32 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            db.run(move |c| {
                c.query_one("SELECT $1::INT * 2", &[&i])
                    .map(|r| r.get::<_, i32>(0))
            })
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap().unwrap(), 2 * i as i32);
    }
    let blocking_db = db.clone();
    let from_pool = tokio::task::spawn_blocking(move || {
        blocking_db.run(|c| c.query_one("SELECT 5", &[]).map(|r| r.get::<_, i32>(0)))
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(from_pool, 5);
}

#[test]
fn run_works_from_many_plain_threads() {
    within(LIMIT, || {
        let db = connect(&testing::shared().create_database());
        db.run(|c| c.batch_execute("CREATE TABLE hits (n INT)"))
            .unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0..20i32 {
                        let n = t * 100 + i;
                        db.run(move |c| c.execute("INSERT INTO hits VALUES ($1)", &[&n]))
                            .unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(count(&db, "SELECT count(DISTINCT n) FROM hits"), 160);
    });
}

/// A store's own error type, as gitstore and access would have.
#[derive(Debug)]
enum StoreError {
    NotFound(String),
    Database(Error),
}

impl From<Error> for StoreError {
    fn from(e: Error) -> Self {
        StoreError::Database(e)
    }
}

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> Self {
        StoreError::Database(Error::from(e))
    }
}

#[test]
fn run_with_returns_the_callers_own_errors() {
    within(LIMIT, || {
        let db = connect(&testing::shared().create_database());
        let found: Result<i64, StoreError> = db.run_with(|c| {
            let row = c.query_opt("SELECT 1::BIGINT WHERE false", &[])?;
            row.map(|r| r.get(0))
                .ok_or_else(|| StoreError::NotFound("token 7".into()))
        });
        assert!(matches!(found, Err(StoreError::NotFound(ref what)) if what == "token 7"));
        let broken: Result<(), StoreError> = db.run_with(|c| {
            c.batch_execute("SELEC 1")?;
            Ok(())
        });
        match broken {
            Err(StoreError::Database(Error::Query(text))) => {
                assert!(text.contains("42601"), "{text}")
            }
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn a_panic_in_work_reaches_the_caller_and_the_pool_goes_on() {
    within(LIMIT, || {
        let db = Database::connect(
            &testing::shared().create_database(),
            Options {
                connections: 1,
                ..Options::default()
            },
        )
        .unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            db.run(|_c| -> Result<(), postgres::Error> { panic!("work went wrong") })
        }));
        assert!(caught.is_err());
        assert_eq!(count(&db, "SELECT 7::BIGINT"), 7);
    });
}

#[test]
fn a_slow_call_times_out_and_a_queued_one_never_runs() {
    within(LIMIT, || {
        let db = Database::connect(
            &testing::shared().create_database(),
            Options {
                connections: 1,
                call_timeout: Duration::from_millis(500),
                ..Options::default()
            },
        )
        .unwrap();
        let slow_db = db.clone();
        let (started, has_started) = mpsc::channel();
        let slow = std::thread::spawn(move || {
            slow_db.run(move |_c| {
                started.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(1500));
                Ok(())
            })
        });
        has_started.recv_timeout(Duration::from_secs(10)).unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let queued = db.run(move |_c| {
            flag.store(true, Ordering::SeqCst);
            Ok(())
        });
        assert!(matches!(queued, Err(Error::Busy(_))), "{queued:?}");
        assert!(queued.unwrap_err().to_string().contains("nothing was done"));
        let slow = slow.join().unwrap();
        assert!(matches!(slow, Err(Error::Timeout(_))), "{slow:?}");
        eventually(Duration::from_secs(5), "the slow call to end", || {
            db.run(|c| c.batch_execute("SELECT 1")).is_ok()
        });
        // The server cancels a statement the caller no longer waits for (statement_timeout):
        // the connection is free again long before the statement would have ended.
        let start = Instant::now();
        let sleeping = db.run(|c| c.batch_execute("SELECT pg_sleep(5)"));
        assert!(sleeping.is_err(), "{sleeping:?}");
        eventually(Duration::from_secs(3), "a free connection", || {
            db.run(|c| c.batch_execute("SELECT 1")).is_ok()
        });
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "{:?}",
            start.elapsed()
        );
        assert!(!ran.load(Ordering::SeqCst), "an abandoned call ran");
    });
}

/// A subscriber that counts its calls and reports each on a channel.
fn counting_subscriber(db: &Database, topic: &str) -> (Arc<AtomicU64>, mpsc::Receiver<()>) {
    let calls = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel();
    let counted = calls.clone();
    let tx = Mutex::new(tx);
    db.subscribe(topic, move || {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = tx.lock().unwrap().send(());
    });
    (calls, rx)
}

fn write_and_notify(db: &Database, topic: &'static str, commit: bool) {
    db.run(move |c| {
        let mut tx = c.transaction()?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS t (x INT); INSERT INTO t VALUES (1)")?;
        metadb::notify_change(&mut tx, topic)?;
        if commit { tx.commit() } else { tx.rollback() }
    })
    .unwrap();
}

#[test]
fn a_committed_change_reaches_every_replica_and_a_rolled_back_one_none() {
    within(LIMIT, || {
        let url = testing::shared().create_database();
        let (writer, reader) = (connect(&url), connect(&url));
        let (calls, heard) = counting_subscriber(&reader, "tokens");
        let (own_calls, own_heard) = counting_subscriber(&writer, "tokens");
        let (_, barrier) = counting_subscriber(&reader, "barrier");
        let before = reader.change_count("tokens");
        let counter = reader.change_counter("tokens");

        write_and_notify(&writer, "tokens", true);
        heard.recv_timeout(Duration::from_secs(5)).unwrap();
        own_heard.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(own_calls.load(Ordering::SeqCst), 1);
        assert_eq!(reader.change_count("tokens"), before + 1);
        assert_eq!(counter.get(), before + 1);

        write_and_notify(&writer, "tokens", false);
        // Notifications arrive in commit order: once a later one is heard, a rolled-back one
        // would have been too.
        write_and_notify(&writer, "barrier", true);
        barrier.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(reader.change_count("tokens"), before + 1);
        // The first write and the barrier's; the rolled-back one left nothing.
        assert_eq!(count(&reader, "SELECT count(*) FROM t"), 2);
    });
}

#[test]
fn a_panicking_subscriber_does_not_stop_the_listener() {
    within(LIMIT, || {
        let db = connect(&testing::shared().create_database());
        db.subscribe("repos", || panic!("subscriber bug"));
        let (calls, heard) = counting_subscriber(&db, "repos");
        write_and_notify(&db, "repos", true);
        heard.recv_timeout(Duration::from_secs(5)).unwrap();
        write_and_notify(&db, "repos", true);
        heard.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn an_outage_fails_calls_fast_and_heals_without_a_new_database() {
    within(Duration::from_secs(120), || {
        // Its own server: stopping the shared one would fail the other tests.
        let server = TestServer::start().unwrap();
        let db = connect(&server.create_database());
        db.run(|c| c.batch_execute("CREATE TABLE t (x INT)"))
            .unwrap();
        let (calls_a, _) = counting_subscriber(&db, "a");
        let (calls_b, _) = counting_subscriber(&db, "b");
        let count_a = db.change_count("a");

        server.stop();
        // Calls on connections the server closed fail too (as unreachable); after that every
        // call fails at once, without waiting for a connect timeout.
        eventually(Duration::from_secs(5), "the outage to be noticed", || {
            matches!(db.health(), Health::Unreachable { .. })
        });
        for _ in 0..20 {
            let start = Instant::now();
            let error = db
                .run(|c| c.batch_execute("INSERT INTO t VALUES (1)"))
                .unwrap_err();
            let took = start.elapsed();
            assert!(error.is_unreachable(), "{error:?}");
            assert!(
                took < Duration::from_millis(500),
                "a failing call took {took:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let since = match db.health() {
            Health::Unreachable { since } => since,
            Health::Ok => panic!("healthy while stopped"),
        };
        assert!(since.elapsed().unwrap() < Duration::from_secs(10));

        server.restart();
        eventually(Duration::from_secs(10), "calls to work again", || {
            db.run(|c| c.batch_execute("INSERT INTO t VALUES (1)"))
                .is_ok()
        });
        // The listener reconnected: every subscriber was called and every count moved, since
        // notifications may have been lost meanwhile.
        eventually(
            Duration::from_secs(10),
            "the subscribers to be called",
            || calls_a.load(Ordering::SeqCst) >= 1 && calls_b.load(Ordering::SeqCst) >= 1,
        );
        assert!(db.change_count("a") > count_a);
        assert_eq!(db.health(), Health::Ok);
        // And it listens again.
        let heard = calls_a.load(Ordering::SeqCst);
        write_and_notify(&db, "a", true);
        eventually(
            Duration::from_secs(5),
            "a notification after the outage",
            || calls_a.load(Ordering::SeqCst) > heard,
        );
    });
}
