//! TLS to PostgreSQL (O-10) against a real server that takes TCP connections over TLS only
//! (`hostssl`), its certificate (for `localhost` and `127.0.0.1`) signed by a throwaway CA
//! made with `openssl` (`metadb::testing::shared_tls`).

mod common;

use std::time::Duration;

use common::within;
use metadb::testing;
use metadb::{Database, Error, Options};

const LIMIT: Duration = Duration::from_secs(60);

/// A fresh database on the TLS server, and its CA files.
fn database() -> (String, testing::TlsFiles) {
    let server = testing::shared_tls();
    let files = server.tls().expect("a TLS server").clone();
    (server.create_database(), files)
}

/// Whether the connection that runs the call is encrypted, as the server sees it.
fn encrypted(db: &Database) -> bool {
    db.run(|c| {
        c.query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .map(|row| row.get(0))
    })
    .unwrap()
}

#[test]
fn verify_full_with_the_servers_ca_connects_encrypted() {
    within(LIMIT, || {
        let (url, files) = database();
        let url = format!(
            "{url}?sslmode=verify-full&sslrootcert={}",
            files.ca.display()
        );
        let db = Database::connect(&url, Options::default()).unwrap();
        assert!(encrypted(&db));
        // The change listener's connection is TLS too: a change is heard.
        let before = db.change_count("tls-topic");
        db.run(|c| {
            let mut tx = c.transaction()?;
            metadb::notify_change(&mut tx, "tls-topic")?;
            tx.commit()
        })
        .unwrap();
        common::eventually(Duration::from_secs(10), "the change is heard", || {
            db.change_count("tls-topic") > before
        });
    });
}

#[test]
fn require_encrypts_without_checking_the_certificate() {
    within(LIMIT, || {
        let (url, _) = database();
        // No CA given and none of the system's signed the server's: still encrypted.
        let db = Database::connect(&format!("{url}?sslmode=require"), Options::default()).unwrap();
        assert!(encrypted(&db));
        // So is the default (`prefer`) against a server that offers TLS.
        let db = Database::connect(&url, Options::default()).unwrap();
        assert!(encrypted(&db));
    });
}

#[test]
fn verify_full_refuses_a_host_name_the_certificate_does_not_hold() {
    within(LIMIT, || {
        let (url, files) = database();
        // The same server, reached at 127.0.0.1 but named otherwise.
        let url = url.replace("@127.0.0.1:", "@db.invalid:");
        let ca = files.ca.display();
        let named = format!("{url}?hostaddr=127.0.0.1&sslrootcert={ca}");
        let error = Database::connect(&format!("{named}&sslmode=verify-full"), Options::default())
            .unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::Unreachable(_)), "{error:?}");
        assert!(text.contains("over TLS"), "{text}");
        assert!(text.contains("does not name the host"), "{text}");
        assert!(text.contains("sslmode=verify-ca"), "{text}");
        assert!(text.contains("sslmode=verify-full"), "{text}");
        // verify-ca checks the chain only, which holds.
        let db =
            Database::connect(&format!("{named}&sslmode=verify-ca"), Options::default()).unwrap();
        assert!(encrypted(&db));
    });
}

#[test]
fn verify_full_refuses_a_certificate_of_another_ca() {
    within(LIMIT, || {
        let (url, files) = database();
        for mode in ["verify-full", "verify-ca", "require"] {
            let url = format!(
                "{url}?sslmode={mode}&sslrootcert={}",
                files.unrelated_ca.display()
            );
            let error = Database::connect(&url, Options::default()).unwrap_err();
            let text = error.to_string();
            assert!(matches!(error, Error::Unreachable(_)), "{mode}: {error:?}");
            assert!(
                text.contains("not signed by a trusted CA"),
                "{mode}: {text}"
            );
            assert!(text.contains("sslrootcert=FILE"), "{mode}: {text}");
            assert!(!text.contains(&common::password_of(&url)), "{text}");
        }
    });
}

#[test]
fn a_plain_connection_to_a_server_that_requires_tls_is_refused_clearly() {
    within(LIMIT, || {
        let (url, _) = database();
        let error =
            Database::connect(&format!("{url}?sslmode=disable"), Options::default()).unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::Refused(_)), "{error:?}");
        assert!(text.contains("no encryption"), "{text}");
        assert!(text.contains("only over TLS"), "{text}");
        assert!(text.contains("sslmode=verify-full"), "{text}");
    });
}

#[test]
fn require_against_a_server_without_tls_fails_clearly() {
    within(LIMIT, || {
        // The plain test server offers no TLS.
        let url = testing::shared().create_database();
        let error =
            Database::connect(&format!("{url}?sslmode=require"), Options::default()).unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::Unreachable(_)), "{error:?}");
        assert!(text.contains("does not offer TLS"), "{text}");
    });
}

#[test]
fn a_bad_ca_file_is_named_before_anything_is_contacted() {
    within(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let not_pem = dir.path().join("ca.txt");
        std::fs::write(&not_pem, "not a certificate\n").unwrap();
        // Port 1: nothing listens, yet the file is what fails.
        let base = "postgres://csg:pw-Secret@127.0.0.1:1/csg?sslmode=verify-full";
        for (file, says) in [
            (
                dir.path().join("missing.pem"),
                "cannot read CA certificates",
            ),
            (not_pem, "holds no PEM certificate"),
        ] {
            let url = format!("{base}&sslrootcert={}", file.display());
            let error = Database::connect(&url, Options::default()).unwrap_err();
            let text = error.to_string();
            assert!(matches!(error, Error::InvalidUrl(_)), "{error:?}");
            assert!(text.contains(&file.display().to_string()), "{text}");
            assert!(text.contains(says), "{text}");
            assert!(!text.contains("pw-Secret"), "{text}");
        }
    });
}
