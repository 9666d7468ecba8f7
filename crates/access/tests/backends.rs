//! The same behaviour of the access store over both metadata databases: embedded SQLite in a
//! temporary data directory, and PostgreSQL (a real throwaway server, `metadb::testing`).
//! Then what only PostgreSQL has: replicas sharing one database, and its outages.

use access::{AccessStore, Error};
use metadb::testing::{eventually, within};
use std::time::{Duration, Instant};

/// How long any one test may take: a hang fails the test instead of stalling the run.
const LIMIT: Duration = Duration::from_secs(120);

/// How long a change may take to reach another replica.
const PROPAGATION: Duration = Duration::from_secs(5);

/// One metadata database to open stores on, with raw access to what it stores.
trait Backend {
    /// A store on this database (another process or replica when called twice).
    fn open(&self) -> AccessStore;
    /// Every stored token hash and name, as raw bytes and text.
    fn stored_tokens(&self) -> Vec<(Vec<u8>, String)>;
    /// Sets a token's last-use time behind the store's back.
    fn set_last_used(&self, id: i64, secs: i64);
    /// Every stored session: its key and token id.
    fn stored_sessions(&self) -> Vec<(Vec<u8>, i64)>;
    /// Sets every session's last use behind the store's back (another replica's use, which
    /// is not announced; or a long idle time).
    fn set_sessions_seen(&self, secs: i64);
    /// The stored last use of the session with this key.
    fn session_seen(&self, key: &[u8]) -> i64;
}

struct Sqlite {
    dir: tempfile::TempDir,
}

impl Sqlite {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.dir.path().join("csg.sqlite")).expect("open the file")
    }
}

impl Backend for Sqlite {
    fn open(&self) -> AccessStore {
        AccessStore::open(&self.dir.path().join("csg.sqlite")).expect("open")
    }

    fn stored_tokens(&self) -> Vec<(Vec<u8>, String)> {
        let conn = self.raw();
        let mut stmt = conn
            .prepare("SELECT hash, name FROM tokens")
            .expect("query");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    fn set_last_used(&self, id: i64, secs: i64) {
        self.raw()
            .execute(
                "UPDATE tokens SET last_used = ?2 WHERE id = ?1",
                rusqlite::params![id, secs],
            )
            .expect("update");
    }

    fn stored_sessions(&self) -> Vec<(Vec<u8>, i64)> {
        let conn = self.raw();
        let mut stmt = conn
            .prepare("SELECT hash, token_id FROM sessions")
            .expect("query");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    fn set_sessions_seen(&self, secs: i64) {
        self.raw()
            .execute("UPDATE sessions SET last_seen = ?1", [secs])
            .expect("update");
    }

    fn session_seen(&self, key: &[u8]) -> i64 {
        self.raw()
            .query_row(
                "SELECT last_seen FROM sessions WHERE hash = ?1",
                [key],
                |r| r.get(0),
            )
            .expect("a session")
    }
}

struct Postgres {
    url: String,
}

impl Postgres {
    fn new() -> Self {
        Self {
            url: metadb::testing::shared().create_database(),
        }
    }

    fn connect(&self) -> metadb::Database {
        metadb::Database::connect(&self.url, metadb::Options::default()).expect("connect")
    }
}

impl Backend for Postgres {
    fn open(&self) -> AccessStore {
        AccessStore::open_postgres(self.connect()).expect("open")
    }

    fn stored_tokens(&self) -> Vec<(Vec<u8>, String)> {
        self.connect()
            .run(|client| {
                let rows = client.query("SELECT hash, name FROM tokens", &[])?;
                rows.iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect()
            })
            .expect("query")
    }

    fn set_last_used(&self, id: i64, secs: i64) {
        self.connect()
            .run(move |client| {
                client.execute(
                    "UPDATE tokens SET last_used = $2 WHERE id = $1",
                    &[&id, &secs],
                )
            })
            .expect("update");
    }

    fn stored_sessions(&self) -> Vec<(Vec<u8>, i64)> {
        self.connect()
            .run(|client| {
                let rows = client.query("SELECT hash, token_id FROM sessions", &[])?;
                rows.iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect()
            })
            .expect("query")
    }

    fn set_sessions_seen(&self, secs: i64) {
        self.connect()
            .run(move |client| client.execute("UPDATE sessions SET last_seen = $1", &[&secs]))
            .expect("update");
    }

    fn session_seen(&self, key: &[u8]) -> i64 {
        let key = key.to_vec();
        self.connect()
            .run(move |client| {
                client
                    .query_one("SELECT last_seen FROM sessions WHERE hash = $1", &[&key])?
                    .try_get(0)
            })
            .expect("a session")
    }
}

/// Each behaviour below, once per backend.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::within(super::LIMIT, || super::$name(&super::Sqlite::new()));
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                super::within(super::LIMIT, || super::$name(&super::Postgres::new()));
            })*
        }
    };
}

on_both!(
    users,
    token_lifecycle,
    token_names,
    grants,
    forget_repo,
    removing_a_user_revokes_everything,
    last_use,
    session_lifecycle,
    sessions_end_with_their_token_or_user,
    idle_sessions_end,
    session_last_use,
    sessions_per_token_are_bounded,
    provider_sessions,
    group_grants,
);

/// Issue 44 point 4: `csg grant --group`: read for the members of an identity provider's
/// group, seen by every store, dropped with the repository's registration.
fn group_grants(backend: &dyn Backend) {
    let access = backend.open();
    let groups = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        access.granted_to_groups(&groups(&["eng"]), "acme/a"),
        Ok(false)
    );
    access.grant_group("eng team", "acme/a").expect("grant");
    access
        .grant_group("eng team", "acme/a")
        .expect("granting again changes nothing");
    access.grant_group("ops", "acme/b").expect("grant");
    assert_eq!(
        access.grant_group("a\nb", "acme/a"),
        Err(Error::InvalidGroupName("a\nb".into()))
    );
    let fresh = backend.open();
    assert_eq!(
        fresh.granted_to_groups(&groups(&["x", "eng team"]), "acme/a"),
        Ok(true)
    );
    assert_eq!(
        fresh.granted_to_groups(&groups(&["eng team"]), "acme/b"),
        Ok(false)
    );
    assert_eq!(fresh.granted_to_groups(&groups(&[]), "acme/a"), Ok(false));
    let listed: Vec<(String, String)> = fresh
        .group_grants()
        .expect("list")
        .into_iter()
        .map(|g| (g.user, g.repo))
        .collect();
    assert_eq!(
        listed,
        [
            ("eng team".into(), "acme/a".into()),
            ("ops".into(), "acme/b".into())
        ]
    );
    assert!(
        access.grants().expect("user grants").is_empty(),
        "groups are not users"
    );
    assert_eq!(access.ungrant_group("ops", "acme/b"), Ok(true));
    assert_eq!(access.ungrant_group("ops", "acme/b"), Ok(false));
    access.forget_repo("acme/a").expect("forget");
    assert_eq!(
        backend
            .open()
            .granted_to_groups(&groups(&["eng team"]), "acme/a"),
        Ok(false)
    );
}

/// A-6 (issue 44): website sessions of the identity provider's users carry the grant of
/// their last sign-in, on one sign-in token per user, and end like any session.
fn provider_sessions(backend: &dyn Backend) {
    let access = backend.open();
    let grant = |groups: &[&str]| access::ProviderGrant {
        subject: "alice".into(),
        scopes: vec!["openid".into(), "csg:read".into()],
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
    };
    assert_eq!(
        access
            .start_provider_session("alice", grant(&[]))
            .map(|s| s.principal),
        Err(Error::UnknownUser("alice".into()))
    );
    access.add_user("alice", false).expect("user");
    let first = access
        .start_provider_session("alice", grant(&["eng", "the ops team"]))
        .expect("sign in");
    assert_eq!(
        first.principal.provider,
        Some(grant(&["eng", "the ops team"]))
    );
    assert!(!first.principal.prepare);
    let who = access.session(&first.id, None).expect("live");
    assert_eq!(who, first.principal, "the grant comes back from the tables");
    // A second sign-in: the same token, the newer grant, both sessions live.
    let second = access
        .start_provider_session("alice", grant(&["ops"]))
        .expect("sign in again");
    assert_eq!(second.principal.token_id, first.principal.token_id);
    let tokens = access.tokens(Some("alice")).expect("tokens");
    assert_eq!(tokens.len(), 1, "{tokens:?}");
    assert_eq!(tokens[0].name, "website sign-in (identity provider)");
    // A fresh store reads the grant from the tables, for either session.
    let fresh = backend.open();
    let who = fresh.session(&first.id, None).expect("live");
    assert_eq!(who.provider, Some(grant(&["ops"])));
    // The user's own capability counts.
    access.set_prepare("alice", true).expect("prepare");
    assert!(
        backend
            .open()
            .session(&second.id, None)
            .expect("live")
            .prepare
    );
    // Revoking the sign-in token signs every website session out.
    access.revoke_token(tokens[0].id).expect("revoke");
    assert_eq!(access.session(&first.id, None), Err(Error::SessionEnded));
    assert_eq!(access.session(&second.id, None), Err(Error::SessionEnded));
    // The next sign-in makes a new token.
    let third = access
        .start_provider_session("alice", grant(&[]))
        .expect("sign in after the revocation");
    assert_ne!(third.principal.token_id, tokens[0].id);
    assert_eq!(
        access.session(&third.id, None).expect("live").provider,
        Some(grant(&[]))
    );
}

fn users(backend: &dyn Backend) {
    let access = backend.open();
    assert!(access.users().expect("users").is_empty());
    let alice = access.add_user("alice", false).expect("add");
    assert_eq!((alice.name.as_str(), alice.prepare), ("alice", false));
    access.add_user("Bob", true).expect("add");
    access.add_user("carol-2", false).expect("add");
    assert_eq!(
        access.add_user("alice", true),
        Err(Error::UserExists("alice".into()))
    );
    assert_eq!(
        access.add_user("-x", false),
        Err(Error::InvalidUserName("-x".into()))
    );
    access.set_prepare("alice", true).expect("prepare");
    assert_eq!(
        access.set_prepare("dave", true),
        Err(Error::UnknownUser("dave".into()))
    );
    let users = access.users().expect("users");
    // Byte order, upper case first, in both.
    let listed: Vec<_> = users.iter().map(|u| (u.name.as_str(), u.prepare)).collect();
    assert_eq!(listed, [("Bob", true), ("alice", true), ("carol-2", false)]);
    assert_eq!(
        users[1].created, alice.created,
        "the stored time is the answered one"
    );
    access.remove_user("carol-2").expect("remove");
    assert_eq!(
        access.remove_user("carol-2"),
        Err(Error::UnknownUser("carol-2".into()))
    );
    assert_eq!(access.users().expect("users").len(), 2);
    // Another store on the same database sees the same rows.
    let names: Vec<_> = backend
        .open()
        .users()
        .expect("users")
        .into_iter()
        .map(|u| u.name)
        .collect();
    assert_eq!(names, ["Bob", "alice"]);
}

fn token_lifecycle(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", true).expect("user");
    let new = access.create_token("alice", Some("laptop")).expect("token");
    assert!(!format!("{new:?}").contains(&new.secret), "Debug redacts");
    assert_eq!(
        (new.info.user.as_str(), new.info.name.as_str()),
        ("alice", "laptop")
    );
    assert_eq!((new.info.last_used, new.info.revoked), (None, None));
    // This store sees its own write at once.
    let who = access.authenticate(&new.secret).expect("valid");
    assert_eq!(
        (who.user.as_str(), who.prepare, who.token_id),
        ("alice", true, new.info.id)
    );
    // Stored only as the SHA-256 of the whole text.
    let stored = backend.stored_tokens();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].0.len(), 32);
    assert!(
        !format!("{:?}{}", stored[0].0, stored[0].1).contains(&new.secret[4..]),
        "the plaintext is not stored"
    );
    access.set_prepare("alice", false).expect("prepare");
    assert!(!access.authenticate(&new.secret).expect("valid").prepare);

    assert_eq!(access.authenticate("hunter2"), Err(Error::Malformed));
    let unknown = format!("csg_{}", "0".repeat(64));
    assert_eq!(access.authenticate(&unknown), Err(Error::InvalidToken));

    access.revoke_token(new.info.id).expect("revoke");
    assert_eq!(access.authenticate(&new.secret), Err(Error::InvalidToken));
    let revoked = access.tokens(None).expect("list")[0].revoked;
    assert!(revoked.is_some());
    // Revoking again changes nothing; an unknown id is said to be one.
    access.revoke_token(new.info.id).expect("revoke again");
    assert_eq!(access.tokens(None).expect("list")[0].revoked, revoked);
    assert_eq!(access.revoke_token(9999), Err(Error::UnknownToken(9999)));
    assert_eq!(
        access.create_token("bob", None).map(|t| t.info),
        Err(Error::UnknownUser("bob".into()))
    );
}

fn token_names(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    access.add_user("bob", false).expect("user");
    let first = access.create_token("alice", None).expect("token");
    assert_eq!(first.info.name, "token-1");
    let laptop = access.create_token("alice", Some("laptop")).expect("token");
    assert!(matches!(
        access.create_token("alice", Some("laptop")),
        Err(Error::TokenNameTaken { ref user, ref name }) if user == "alice" && name == "laptop"
    ));
    // Another user may use the name; a revoked token frees it.
    access.create_token("bob", Some("laptop")).expect("bob's");
    access.revoke_token(laptop.info.id).expect("revoke");
    let again = access.create_token("alice", Some("laptop")).expect("reuse");
    // The default name counts revoked tokens too.
    assert_eq!(
        access.create_token("alice", None).expect("token").info.name,
        "token-4"
    );
    assert!(matches!(
        access.create_token("alice", Some("a\nb")),
        Err(Error::InvalidTokenName(_))
    ));
    let alices: Vec<_> = access
        .tokens(Some("alice"))
        .expect("list")
        .into_iter()
        .map(|t| (t.id, t.name, t.revoked.is_some()))
        .collect();
    assert_eq!(alices.len(), 4);
    assert_eq!(alices[0], (first.info.id, "token-1".into(), false));
    assert_eq!(alices[2], (again.info.id, "laptop".into(), false));
    assert!(alices.windows(2).all(|w| w[0].0 < w[1].0), "by id");
    assert_eq!(access.tokens(None).expect("list").len(), 5);
    assert!(access.tokens(Some("nobody")).expect("list").is_empty());
}

fn grants(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    access.add_user("Bob", false).expect("user");
    assert!(!access.granted("alice", "acme/private").expect("view"));
    access.grant("alice", "acme/private").expect("grant");
    access
        .grant("alice", "acme/private")
        .expect("granting twice is one grant");
    access.grant("alice", "Acme/other").expect("grant");
    access.grant("Bob", "acme/private").expect("grant");
    assert!(access.granted("alice", "acme/private").expect("view"));
    assert!(!access.granted("alice", "acme/elsewhere").expect("view"));
    assert_eq!(
        access.grant("carol", "acme/private"),
        Err(Error::UnknownUser("carol".into()))
    );
    let listed: Vec<_> = access
        .grants()
        .expect("grants")
        .into_iter()
        .map(|g| (g.user, g.repo))
        .collect();
    assert_eq!(
        listed,
        [
            ("Bob".to_owned(), "acme/private".to_owned()),
            ("alice".to_owned(), "Acme/other".to_owned()),
            ("alice".to_owned(), "acme/private".to_owned()),
        ]
    );
    assert!(access.ungrant("alice", "acme/private").expect("ungrant"));
    assert!(
        !access
            .ungrant("alice", "acme/private")
            .expect("no grant left")
    );
    assert!(!access.granted("alice", "acme/private").expect("view"));
    assert!(access.granted("Bob", "acme/private").expect("view"));
}

fn forget_repo(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    access.add_user("bob", false).expect("user");
    access.grant("alice", "acme/private").expect("grant");
    access.grant("bob", "acme/private").expect("grant");
    access.grant("bob", "acme/kept").expect("grant");
    access.forget_repo("acme/private").expect("forget");
    access.forget_repo("acme/never").expect("nothing to forget");
    assert!(!access.granted("alice", "acme/private").expect("view"));
    assert!(!access.granted("bob", "acme/private").expect("view"));
    assert!(access.granted("bob", "acme/kept").expect("view"));
    assert_eq!(access.grants().expect("grants").len(), 1);
}

fn removing_a_user_revokes_everything(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    access.add_user("bob", false).expect("user");
    let alices = access.create_token("alice", None).expect("token");
    let bobs = access.create_token("bob", None).expect("token");
    access.grant("alice", "acme/private").expect("grant");
    access.grant("bob", "acme/private").expect("grant");
    access.remove_user("alice").expect("remove");
    assert_eq!(
        access.authenticate(&alices.secret),
        Err(Error::InvalidToken)
    );
    assert!(!access.granted("alice", "acme/private").expect("view"));
    assert_eq!(
        access.authenticate(&bobs.secret).expect("valid").user,
        "bob"
    );
    assert!(access.granted("bob", "acme/private").expect("view"));
    let tokens = access.tokens(None).expect("list");
    assert!(tokens[0].revoked.is_some() && tokens[1].revoked.is_none());
    // A new user of the same name inherits nothing.
    access.add_user("alice", false).expect("user again");
    assert_eq!(
        access.authenticate(&alices.secret),
        Err(Error::InvalidToken)
    );
    assert!(!access.granted("alice", "acme/private").expect("view"));
}

/// The last use is written (by PostgreSQL's store off the request path: polled), and at
/// most once a minute per token.
fn last_use(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    let first = access.create_token("alice", None).expect("token");
    let second = access.create_token("alice", None).expect("token");
    let used = |id: i64| {
        access
            .tokens(None)
            .expect("list")
            .into_iter()
            .find(|t| t.id == id)
            .and_then(|t| t.last_used)
    };
    assert_eq!(used(first.info.id), None);
    access.authenticate(&first.secret).expect("valid");
    eventually(PROPAGATION, "last use recorded", || {
        used(first.info.id).is_some()
    });
    let recorded = used(first.info.id).expect("recorded");
    assert!(recorded >= first.info.created);
    // Within the minute, another use writes nothing: the older time stays. The second token's
    // first use is written after anything the first one's would have been.
    backend.set_last_used(first.info.id, 0);
    access.authenticate(&first.secret).expect("valid");
    access.authenticate(&second.secret).expect("valid");
    eventually(PROPAGATION, "the second token's last use recorded", || {
        used(second.info.id).is_some()
    });
    assert_eq!(used(first.info.id), Some(std::time::UNIX_EPOCH));
}

/// Seconds since the epoch now.
fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs(),
    )
    .expect("in range")
}

/// What a session is stored under: the SHA-256 of its id.
fn key(id: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(id.as_bytes()).to_vec()
}

/// A session is started with a valid token only, stored under the hash of its id with the
/// token's id (neither the id nor the token in plaintext), answers as its user, survives the
/// store (a restart), and ends at sign-out, everywhere.
fn session_lifecycle(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", true).expect("user");
    let token = access.create_token("alice", None).expect("token");
    assert_eq!(
        access.start_session("hunter2").map(|s| s.principal),
        Err(Error::Malformed)
    );
    let unknown = format!("csg_{}", "0".repeat(64));
    assert_eq!(
        access.start_session(&unknown).map(|s| s.principal),
        Err(Error::InvalidToken)
    );
    assert!(backend.stored_sessions().is_empty(), "nothing stored");

    let session = access.start_session(&token.secret).expect("sign in");
    assert_eq!(session.id.len(), 64);
    assert!(session.id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(
        !format!("{session:?}").contains(&session.id),
        "Debug redacts"
    );
    assert_eq!(
        (session.principal.user.as_str(), session.principal.token_id),
        ("alice", token.info.id)
    );
    let who = access.session(&session.id, None).expect("live");
    assert_eq!(who, session.principal);
    assert!(who.prepare);
    let stored = backend.stored_sessions();
    assert_eq!(stored, [(key(&session.id), token.info.id)]);
    let raw = format!("{stored:?}");
    assert!(
        !raw.contains(&session.id) && !raw.contains(&token.secret[4..]),
        "neither the session id nor the token is stored"
    );
    assert_eq!(
        access.session(&"f".repeat(64), None),
        Err(Error::SessionEnded)
    );
    assert_eq!(access.session("garbage", None), Err(Error::SessionEnded));

    // A restart: a new store on the same database knows the session.
    drop(access);
    let access = backend.open();
    assert_eq!(
        access.session(&session.id, None).expect("survives").user,
        "alice"
    );
    let other = access
        .start_session(&token.secret)
        .expect("a second session");
    assert_ne!(other.id, session.id);

    access.end_session(&session.id).expect("sign out");
    assert_eq!(access.session(&session.id, None), Err(Error::SessionEnded));
    assert!(
        access.session(&other.id, None).is_ok(),
        "only that one ended"
    );
    assert_eq!(
        backend.open().session(&session.id, None),
        Err(Error::SessionEnded),
        "ended for every store"
    );
    access
        .end_session(&session.id)
        .expect("ending it again changes nothing");
    assert_eq!(backend.stored_sessions().len(), 1);
}

/// Revoking the token or removing the user ends the session on the next check, and drops
/// its row.
fn sessions_end_with_their_token_or_user(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    access.add_user("bob", false).expect("user");
    let (first, second) = (
        access.create_token("alice", None).expect("token"),
        access.create_token("alice", None).expect("token"),
    );
    let bob = access.create_token("bob", None).expect("token");
    let by_first = access.start_session(&first.secret).expect("sign in");
    let by_second = access.start_session(&second.secret).expect("sign in");
    let by_bob = access.start_session(&bob.secret).expect("sign in");
    let elsewhere = backend.open();
    assert!(elsewhere.session(&by_first.id, None).is_ok());

    access.revoke_token(first.info.id).expect("revoke");
    assert_eq!(access.session(&by_first.id, None), Err(Error::SessionEnded));
    eventually(PROPAGATION, "ended in every store", || {
        elsewhere.session(&by_first.id, None) == Err(Error::SessionEnded)
    });
    assert!(
        access.session(&by_second.id, None).is_ok(),
        "the other token's stays"
    );
    assert_eq!(
        access.start_session(&first.secret).map(|s| s.principal),
        Err(Error::InvalidToken)
    );

    access.remove_user("alice").expect("remove");
    assert_eq!(
        access.session(&by_second.id, None),
        Err(Error::SessionEnded)
    );
    assert!(
        access.session(&by_bob.id, None).is_ok(),
        "another user's stays"
    );
    assert_eq!(
        backend
            .stored_sessions()
            .into_iter()
            .map(|(_, token)| token)
            .collect::<Vec<_>>(),
        [bob.info.id],
        "the ended sessions' rows are gone"
    );
}

/// A session unused for twelve hours has ended, unless another store used it since this
/// one's view was loaded; idle rows are dropped at the next sign-in.
fn idle_sessions_end(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    let token = access.create_token("alice", None).expect("token");
    let session = access.start_session(&token.secret).expect("sign in");
    let idle = i64::try_from(access::SESSION_IDLE.as_secs()).expect("in range");
    assert_eq!(idle, 12 * 60 * 60);
    backend.set_sessions_seen(now() - idle - 60);
    // A store whose view holds the idle time, as a replica restarted now.
    let later = backend.open();
    assert_eq!(later.session(&session.id, None), Err(Error::SessionEnded));
    // Another replica used it a moment ago (not announced): the database says so.
    backend.set_sessions_seen(now() - 5);
    assert_eq!(
        later
            .session(&session.id, None)
            .expect("used elsewhere")
            .user,
        "alice"
    );

    backend.set_sessions_seen(now() - idle - 60);
    let fresh = later.start_session(&token.secret).expect("sign in again");
    assert_eq!(
        backend.stored_sessions(),
        [(key(&fresh.id), token.info.id)],
        "the idle session was dropped"
    );
    assert_eq!(later.session(&session.id, None), Err(Error::SessionEnded));
}

/// A session's use is written (PostgreSQL: off the request path, polled), at most once a
/// minute per session and store.
fn session_last_use(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    let token = access.create_token("alice", None).expect("token");
    let first = access.start_session(&token.secret).expect("sign in");
    let second = access.start_session(&token.secret).expect("sign in");
    let (first_key, second_key) = (key(&first.id), key(&second.id));
    backend.set_sessions_seen(now() - 600);
    // A store that has not seen the sessions used writes their first use at once.
    let other = backend.open();
    other.session(&first.id, None).expect("live");
    eventually(PROPAGATION, "the use is recorded", || {
        backend.session_seen(&first_key) >= now() - 60
    });
    // Within the minute, another use writes nothing: the older time stays. The second
    // session's first use is written after anything the first one's would have been.
    backend.set_sessions_seen(now() - 600);
    other.session(&first.id, None).expect("live");
    other.session(&second.id, None).expect("live");
    eventually(PROPAGATION, "the second session's use is recorded", || {
        backend.session_seen(&second_key) >= now() - 60
    });
    assert!(backend.session_seen(&first_key) <= now() - 600);
}

/// One token keeps at most a hundred sessions: the least recently used go first.
fn sessions_per_token_are_bounded(backend: &dyn Backend) {
    let access = backend.open();
    access.add_user("alice", false).expect("user");
    let token = access.create_token("alice", None).expect("token");
    let first = access.start_session(&token.secret).expect("sign in");
    backend.set_sessions_seen(now() - 600);
    let mut last = None;
    for _ in 0..100 {
        last = Some(access.start_session(&token.secret).expect("sign in"));
    }
    assert_eq!(backend.stored_sessions().len(), 100);
    assert_eq!(
        backend.open().session(&first.id, None),
        Err(Error::SessionEnded)
    );
    assert!(access.session(&last.expect("one").id, None).is_ok());
}

/// Two replicas on one database: what one writes, the other's checks see within moments,
/// without a database query per check.
#[test]
fn postgres_replicas_share_tokens_and_grants() {
    within(LIMIT, || {
        let backend = Postgres::new();
        let (one, two) = (backend.open(), backend.open());
        one.add_user("alice", false).expect("user");
        let new = one.create_token("alice", None).expect("token");
        assert_eq!(
            one.authenticate(&new.secret).expect("at once").user,
            "alice"
        );
        eventually(
            PROPAGATION,
            "a token made on one replica works on the other",
            || two.authenticate(&new.secret).is_ok(),
        );
        two.grant("alice", "acme/private").expect("grant");
        assert!(two.granted("alice", "acme/private").expect("at once"));
        eventually(PROPAGATION, "the grant seen on the other replica", || {
            one.granted("alice", "acme/private").expect("view")
        });
        two.set_prepare("alice", true).expect("prepare");
        eventually(
            PROPAGATION,
            "the prepare flag seen on the other replica",
            || one.authenticate(&new.secret).is_ok_and(|p| p.prepare),
        );
        one.revoke_token(new.info.id).expect("revoke");
        assert_eq!(one.authenticate(&new.secret), Err(Error::InvalidToken));
        eventually(
            PROPAGATION,
            "a token revoked on one replica is refused by the other",
            || two.authenticate(&new.secret) == Err(Error::InvalidToken),
        );
        one.forget_repo("acme/private").expect("forget");
        eventually(
            PROPAGATION,
            "the forgotten grant gone on the other replica",
            || !two.granted("alice", "acme/private").expect("view"),
        );
        // Dropping a store ends its thread; the other keeps working.
        drop(one);
        let later = two.create_token("alice", None).expect("token");
        assert!(two.authenticate(&later.secret).is_ok());
    });
}

/// The website on two replicas (issue 31 point 5): a visitor signs in through one and uses
/// the cookie on the other at once (the redirect after sign-in may land there before the
/// change is announced), signs out through the other, and a revocation on either ends it on
/// both.
#[test]
fn postgres_replicas_share_sessions() {
    within(LIMIT, || {
        let backend = Postgres::new();
        let (one, two) = (backend.open(), backend.open());
        one.add_user("alice", false).expect("user");
        let token = one.create_token("alice", None).expect("token");
        let session = one.start_session(&token.secret).expect("sign in on one");
        assert_eq!(
            two.session(&session.id, None)
                .expect("at once on the other")
                .user,
            "alice"
        );
        eventually(PROPAGATION, "and from its view once announced", || {
            two.session(&session.id, None).is_ok()
        });
        two.end_session(&session.id).expect("sign out on the other");
        assert_eq!(two.session(&session.id, None), Err(Error::SessionEnded));
        eventually(PROPAGATION, "signed out on both", || {
            one.session(&session.id, None) == Err(Error::SessionEnded)
        });

        let again = two.start_session(&token.secret).expect("sign in on two");
        assert!(one.session(&again.id, None).is_ok());
        two.revoke_token(token.info.id).expect("revoke on two");
        eventually(
            PROPAGATION,
            "a revocation on one replica ends the session on the other",
            || one.session(&again.id, None) == Err(Error::SessionEnded),
        );
    });
}

/// PostgreSQL stopped: known tokens and grants keep working from the last view, writes and
/// listings fail at once with the clear error, and all recovers when it is back, without
/// reopening the store.
#[test]
fn postgres_outage_keeps_checks_and_refuses_writes() {
    within(LIMIT, || {
        let server = metadb::testing::TestServer::start().expect("a server of this test's own");
        let url = server.create_database();
        let db = metadb::Database::connect(&url, metadb::Options::default()).expect("connect");
        let store = AccessStore::open_postgres(db.clone()).expect("open");
        store.add_user("alice", false).expect("user");
        store.grant("alice", "acme/private").expect("grant");
        let known = store.create_token("alice", None).expect("token");
        let session = store.start_session(&known.secret).expect("sign in");
        // The test server commits without waiting for the disk (synchronous_commit = off)
        // and `stop` is a crash: without a checkpoint the last commits would be lost.
        db.run(|client| client.batch_execute("CHECKPOINT"))
            .expect("checkpoint");

        server.stop();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            assert_eq!(
                store.authenticate(&known.secret).expect("still known").user,
                "alice"
            );
            assert!(
                store
                    .granted("alice", "acme/private")
                    .expect("still granted")
            );
            assert_eq!(
                store
                    .session(&session.id, None)
                    .expect("still signed in")
                    .user,
                "alice"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let started = Instant::now();
        let refused = store.add_user("bob", false);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a write fails at once, not after {:?}",
            started.elapsed()
        );
        let Err(error @ Error::Unavailable(_)) = refused else {
            panic!("a write while PostgreSQL is down: {refused:?}");
        };
        let message = error.to_string();
        assert!(
            message.starts_with(
                "the metadata database is unreachable; writes (users, tokens, grants, sign-ins) are \
                 refused"
            ),
            "{message}"
        );
        assert!(!message.contains("127.0.0.1") && !message.contains("postgres://"));
        assert!(matches!(
            store.create_token("alice", None),
            Err(Error::Unavailable(_))
        ));
        assert!(matches!(
            store.revoke_token(known.info.id),
            Err(Error::Unavailable(_))
        ));
        assert!(matches!(store.users(), Err(Error::Unavailable(_))));
        assert!(matches!(
            store.start_session(&known.secret),
            Err(Error::Unavailable(_))
        ));
        // Authentication still answers, and does not wait on the database.
        let started = Instant::now();
        store.authenticate(&known.secret).expect("still known");
        assert!(started.elapsed() < Duration::from_millis(100));

        server.restart();
        let deadline = Instant::now() + Duration::from_secs(30);
        let bob = loop {
            match store.add_user("bob", false) {
                Ok(bob) => break bob,
                Err(Error::Unavailable(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(other) => panic!("the write after the restart: {other:?}"),
            }
        };
        assert_eq!(bob.name, "bob");
        let new = store
            .create_token("bob", None)
            .expect("token after the outage");
        assert_eq!(store.authenticate(&new.secret).expect("valid").user, "bob");
        store
            .revoke_token(known.info.id)
            .expect("revoke after the outage");
        assert_eq!(store.authenticate(&known.secret), Err(Error::InvalidToken));
    });
}

/// A database a newer `csg` migrated is refused with metadb's message, which says so.
#[test]
fn postgres_newer_schema_is_refused() {
    within(LIMIT, || {
        let backend = Postgres::new();
        drop(backend.open());
        backend
            .connect()
            .run(|client| {
                client.execute(
                    "INSERT INTO csg_schema_migrations (component, version, name)
                     VALUES ('access', 99, 'later')",
                    &[],
                )
            })
            .expect("a later version");
        let refused = AccessStore::open_postgres(backend.connect()).map(|_| ());
        let Err(Error::Storage(message)) = refused else {
            panic!("opened a database of a newer csg: {refused:?}");
        };
        assert!(message.contains("newer csg"), "{message}");
    });
}
