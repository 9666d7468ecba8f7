//! The store: the in-memory view the decisions answer from, over the tables of one
//! metadata database (see `backend.rs`).

use crate::backend::{AccessBackend, SessionRow, View};
use crate::lookups::LookUps;
use crate::names::{valid_group_name, valid_token_name, valid_user_name};
use crate::pg::PgAccess;
use crate::records::from_secs;
pub use crate::records::{GrantInfo, TokenInfo, UserInfo};
use crate::reload::Worker;
use crate::sqlite::SqliteAccess;
use crate::tables::{Tables, lock};
use crate::token::{self, SessionHash};
use crate::{Error, NewSession, NewToken, Principal, ProviderGrant};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often the last-use time of one token (or website session) is written at most: a write
/// per call would cost more than the call.
const LAST_USE_EVERY: Duration = Duration::from_secs(60);

/// A website session unused this long has ended.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 60 * 60);

/// Website sessions one token keeps at most: a sign-in beyond them ends the least recently
/// used, so signing in again and again does not grow the table (and every view) without end.
const SESSIONS_PER_TOKEN: i64 = 100;

/// Whether a session check may ask the database about a session its view cannot vouch for.
#[derive(Debug, Clone, Copy)]
enum LookUp {
    /// Yes, charged to this client address's budget (`None`: callers without one share one).
    For(Option<IpAddr>),
    /// No: the transport gives this client no look-ups now.
    Never,
}

/// Users, tokens and grants: of one data directory (SQLite) or of a cluster (PostgreSQL).
pub struct AccessStore {
    tables: Arc<Tables>,
    /// When each token's last use was last written (or queued): at most once per
    /// [`LAST_USE_EVERY`].
    last_use: Mutex<HashMap<i64, Instant>>,
    /// Website sessions this store saw used: the last use (seconds since the epoch), newer
    /// than the view's while its write waits, and when it was last written (or queued).
    sessions_seen: Mutex<HashMap<SessionHash, SessionSeen>>,
    /// The budgets of database look-ups for tokens and sessions the view does not answer:
    /// per client address, under a cap over all (`lookups.rs`).
    fallbacks: Mutex<LookUps>,
    /// PostgreSQL only: the thread that reloads the view when the database tells of a change
    /// and writes last uses, so no request waits on the database. SQLite has none: each
    /// check asks the shared change counter, an atomic load.
    worker: Option<Worker>,
}

/// What a store knows of a session's use beyond its view.
#[derive(Debug, Clone, Copy)]
struct SessionSeen {
    /// The last use (seconds since the epoch).
    at: i64,
    /// When it was last written (or queued for writing).
    written: Option<Instant>,
}

fn idle_secs() -> i64 {
    i64::try_from(SESSION_IDLE.as_secs()).unwrap_or(i64::MAX)
}

fn now_secs() -> i64 {
    to_secs(SystemTime::now())
}

fn to_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl AccessStore {
    /// Opens (creating the tables if needed) the access store of the metadata database at
    /// `path` (`<data>/csg.sqlite`); the change counter is `<data>/csg.changes`, shared with
    /// the registry.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let store = Self::over(Box::new(SqliteAccess::open(path, now_secs())?));
        store.refresh()?;
        Ok(store)
    }

    /// Opens the access store of a cluster on its shared PostgreSQL database: brings the
    /// tables to the newest schema (component `access`), loads the view and subscribes to
    /// the changes every replica announces, so a write on any replica reaches this one's
    /// view within moments, off the request path. Fails if the database cannot be reached
    /// now; once open, the store keeps answering checks from its last view while the
    /// database is away, and refuses writes with [`Error::Unavailable`].
    pub fn open_postgres(db: metadb::Database) -> Result<Self, Error> {
        let backend = PgAccess::open(db.clone())?;
        let mut store = Self::over(Box::new(backend));
        let worker = Worker::start(Arc::clone(&store.tables))?;
        // Subscribed before the first load: a change committed in between wakes the worker,
        // which loads again, instead of being missed.
        db.subscribe(crate::pg::TOPIC, worker.waker());
        store.worker = Some(worker);
        store.tables.reload()?;
        Ok(store)
    }

    /// A store over `backend` with an empty view and no worker.
    fn over(backend: Box<dyn AccessBackend>) -> Self {
        Self {
            tables: Arc::new(Tables::new(backend)),
            last_use: Mutex::new(HashMap::new()),
            sessions_seen: Mutex::new(HashMap::new()),
            fallbacks: Mutex::new(LookUps::new(Instant::now())),
            worker: None,
        }
    }

    /// The view, reloaded first if the tables may have changed (a counter load when nothing
    /// did; nothing at all with PostgreSQL, whose changes are pushed).
    fn current(&self) -> Result<Arc<View>, Error> {
        self.refresh()?;
        Ok(self.tables.view.load_full())
    }

    fn refresh(&self) -> Result<(), Error> {
        self.tables.backend.refresh(&self.tables.view)
    }

    /// After a write through this store: with PostgreSQL, the view is reloaded before the
    /// write returns, so this process sees it on its very next call (other replicas see it
    /// through the notification). SQLite's next check sees the change counter moved.
    fn wrote<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        let value = result?;
        if let Some(worker) = &self.worker
            && self.tables.reload().is_err()
        {
            // The write is committed: it must not look failed. The worker tries again.
            worker.wake();
        }
        Ok(value)
    }

    /// The user a presented bearer token belongs to. Hashes the text and looks the
    /// hash up; a revoked or unknown token, or one of a removed user, is
    /// [`Error::InvalidToken`].
    pub fn authenticate(&self, presented: &str) -> Result<Principal, Error> {
        if !token::looks_like_token(presented) {
            return Err(Error::Malformed);
        }
        let view = self.current()?;
        let (id, user) = view
            .tokens
            .get(&token::hash(presented))
            .ok_or(Error::InvalidToken)?;
        let prepare = *view.users.get(user).ok_or(Error::InvalidToken)?;
        self.note_use(*id);
        Ok(Principal {
            user: user.clone(),
            prepare,
            token_id: *id,
            provider: None,
        })
    }

    /// Whether a token [`AccessStore::authenticate`] refused may still be one the database
    /// knows: where changes are pushed (PostgreSQL), a token created on another replica a
    /// moment ago, before its announcement reloaded this view. SQLite's view is always
    /// current.
    pub fn may_know_more(&self) -> bool {
        self.worker.is_some()
    }

    /// A token [`AccessStore::authenticate`] refused, as the database has it now (see
    /// [`AccessStore::may_know_more`]): so a token made on another replica works here at its
    /// first call. Within a budget of such look-ups per second of the `client` address
    /// (`None`: callers without one share a budget), so made-up tokens cost no database load
    /// and one client's never use up another's look-ups; beyond it [`Error::UnknownNow`], as
    /// nothing is known of the token then. A database that cannot answer leaves the view's
    /// answer. Blocks for up to a second: call it off the async threads.
    pub fn authenticate_in_database(
        &self,
        presented: &str,
        client: Option<IpAddr>,
    ) -> Result<Principal, Error> {
        if !token::looks_like_token(presented) {
            return Err(Error::Malformed);
        }
        if !self.may_know_more() {
            return Err(Error::InvalidToken);
        }
        self.take_lookup(client)?;
        match self.tables.backend.find_token(&token::hash(presented)) {
            Ok(Some((token_id, user, prepare))) => {
                self.note_use(token_id);
                Ok(Principal {
                    user,
                    prepare,
                    token_id,
                    provider: None,
                })
            }
            Ok(None) => Err(Error::InvalidToken),
            Err(error) => {
                tracing::debug!(%error, "access: a token the view lacks was not looked up");
                Err(Error::InvalidToken)
            }
        }
    }

    /// Records that token `id` was used, at most once per [`LAST_USE_EVERY`]. Never makes
    /// the call wait: SQLite's write never waits for a lock held by another writer (the next
    /// use tries again); PostgreSQL's is queued to the worker.
    fn note_use(&self, id: i64) {
        let mut written = lock(&self.last_use);
        let now = Instant::now();
        if written
            .get(&id)
            .is_some_and(|at| now.saturating_duration_since(*at) < LAST_USE_EVERY)
        {
            return;
        }
        let noted = match &self.worker {
            Some(worker) => {
                worker.queue_use(id, now_secs());
                true
            }
            None => self.tables.backend.note_use(id, now_secs()).is_ok(),
        };
        if noted {
            written.insert(id, now);
        }
    }

    /// Starts a website session for a presented bearer token (the site's sign-in): the
    /// token is checked as by [`AccessStore::authenticate`], and the session stored by the
    /// SHA-256 of a new random id, naming the token by its id. Answers the id, for the
    /// visitor's cookie: the only time it exists outside the cookie. Sessions unused for
    /// [`SESSION_IDLE`] are dropped on the way, and so are the oldest of the token's sessions
    /// beyond a hundred.
    pub fn start_session(&self, token: &str) -> Result<NewSession, Error> {
        self.start_session_from(token, None)
    }

    /// [`AccessStore::start_session`] for a visitor at `client`: a token the view does not
    /// know yet (another replica made it a moment ago) is looked up in the database within
    /// `client`'s budget of such look-ups, as a bearer token is
    /// ([`AccessStore::authenticate_in_database`]); a spent budget is
    /// [`Error::UnknownNow`], not a wrong token.
    pub fn start_session_from(
        &self,
        token: &str,
        client: Option<IpAddr>,
    ) -> Result<NewSession, Error> {
        let principal = match self.authenticate(token) {
            Err(Error::InvalidToken) => self.authenticate_in_database(token, client)?,
            known => known?,
        };
        let id = self.begin_session(principal.token_id)?;
        Ok(NewSession { id, principal })
    }

    /// A new session of token `token_id`, stored: its id (the cookie value).
    fn begin_session(&self, token_id: i64) -> Result<String, Error> {
        let id = token::generate_session_id()
            .map_err(crate::backend::storage("drawing a random session id"))?;
        let hash = token::hash(&id);
        let now = now_secs();
        self.wrote(self.tables.backend.create_session(
            &hash,
            token_id,
            now,
            now.saturating_sub(idle_secs()),
            SESSIONS_PER_TOKEN,
        ))?;
        // Just written: the first pages write no last use.
        lock(&self.sessions_seen).insert(
            hash,
            SessionSeen {
                at: now,
                written: Some(Instant::now()),
            },
        );
        Ok(id)
    }

    /// A website session for `user`, signed in through the identity provider with `grant`
    /// on the user's sign-in token (made on the first sign-in, its secret kept by
    /// nobody; `csg token list` shows it, and revoking it ends these sessions), whose grant
    /// is replaced by this one. The principal holds `prepare` as the user does; the service
    /// adds what the grant's scopes and groups give.
    pub fn start_provider_session(
        &self,
        user: &str,
        grant: ProviderGrant,
    ) -> Result<NewSession, Error> {
        let secret =
            token::generate().map_err(crate::backend::storage("drawing a random token"))?;
        let token_id = self.wrote(self.tables.backend.provider_token(
            user,
            &grant,
            &token::hash(&secret),
            now_secs(),
        ))?;
        let id = self.begin_session(token_id)?;
        let prepare = self.user_prepare(user)?.unwrap_or(false);
        Ok(NewSession {
            id,
            principal: Principal {
                user: user.to_owned(),
                prepare,
                token_id,
                provider: Some(grant),
            },
        })
    }

    /// Takes a database look-up from `client`'s budget, or answers [`Error::UnknownNow`].
    fn take_lookup(&self, client: Option<IpAddr>) -> Result<(), Error> {
        lock(&self.fallbacks)
            .take(client, Instant::now())
            .map_err(|retry_after| Error::UnknownNow { retry_after })
    }

    /// Who the website session `id` (the cookie value) is signed in as, asked by a visitor
    /// from `client` (`None`: callers without an address share a budget); the session counts
    /// as used now. [`Error::SessionEnded`] if it ended: signed out, unused for
    /// [`SESSION_IDLE`], its token revoked or its user removed, or never started. Answers
    /// from the view: the database is asked only for a session the view does not know or
    /// thinks idle too long (another replica started it a moment ago, or used it since the
    /// view was loaded), within `client`'s budget of such look-ups per second, so forged
    /// cookies cost no database load and one client's forged cookies never use up another's
    /// look-ups. Beyond the budget, [`Error::UnknownNow`]: nothing is known of the session, so
    /// the caller must not end it (issue 43 finding 3).
    pub fn session(&self, id: &str, client: Option<IpAddr>) -> Result<Principal, Error> {
        self.checked_session(id, LookUp::For(client))
    }

    /// [`AccessStore::session`] answered from the view alone, for a client the transport
    /// asks no database look-ups for (it presented too many wrong tokens or session ids): a
    /// session the view cannot vouch for is [`Error::UnknownNow`] (`retry_after` one second:
    /// the transport's limiter knows how long its refusal lasts).
    pub fn session_in_view(&self, id: &str) -> Result<Principal, Error> {
        self.checked_session(id, LookUp::Never)
    }

    /// A session check, asking the database as `lookup` allows.
    fn checked_session(&self, id: &str, lookup: LookUp) -> Result<Principal, Error> {
        let hash = token::hash(id);
        let view = self.current()?;
        let now = now_secs();
        let (row, prepare) = match view.sessions.get(&hash) {
            Some(row) => {
                let prepare = *view.users.get(&row.user).ok_or(Error::SessionEnded)?;
                let seen = lock(&self.sessions_seen).get(&hash).map(|s| s.at);
                let last = seen.map_or(row.last_seen, |at| at.max(row.last_seen));
                if now.saturating_sub(last) < idle_secs() {
                    (row.clone(), prepare)
                } else {
                    self.session_in_database(&hash, now, lookup)?
                }
            }
            None => self.session_in_database(&hash, now, lookup)?,
        };
        self.note_seen(hash, now, &view);
        self.note_use(row.token_id);
        Ok(Principal {
            user: row.user,
            prepare,
            token_id: row.token_id,
            provider: row.provider,
        })
    }

    /// A session the view cannot vouch for, as the database has it now: within the budget of
    /// the client `lookup` names; beyond it, or without a look-up, unknown now (never ended:
    /// a forged cookie from elsewhere must not sign a real visitor out).
    fn session_in_database(
        &self,
        hash: &SessionHash,
        now: i64,
        lookup: LookUp,
    ) -> Result<(SessionRow, bool), Error> {
        match lookup {
            LookUp::For(client) => self.take_lookup(client)?,
            LookUp::Never => return Err(Error::UnknownNow { retry_after: 1 }),
        }
        match self.tables.backend.find_session(hash)? {
            Some((row, prepare)) if now.saturating_sub(row.last_seen) < idle_secs() => {
                Ok((row, prepare))
            }
            _ => Err(Error::SessionEnded),
        }
    }

    /// Records that a session was used at `now`, written at most once per
    /// [`LAST_USE_EVERY`], as a token's last use.
    fn note_seen(&self, hash: SessionHash, now: i64, view: &View) {
        let mut seen = lock(&self.sessions_seen);
        let instant = Instant::now();
        let entry = seen.entry(hash).or_insert(SessionSeen {
            at: now,
            written: None,
        });
        entry.at = entry.at.max(now);
        if entry
            .written
            .is_some_and(|at| instant.saturating_duration_since(at) < LAST_USE_EVERY)
        {
            return;
        }
        let noted = match &self.worker {
            Some(worker) => {
                worker.queue_seen(hash, now);
                true
            }
            None => self.tables.backend.note_seen(&hash, now).is_ok(),
        };
        if noted {
            entry.written = Some(instant);
        }
        // Ended sessions are forgotten once they outnumber the live ones.
        if seen.len() > 2 * view.sessions.len() + 64 {
            seen.retain(|hash, _| view.sessions.contains_key(hash));
        }
    }

    /// Ends the website session `id` (sign-out), on every replica. Ending one that already
    /// ended changes nothing.
    pub fn end_session(&self, id: &str) -> Result<(), Error> {
        let hash = token::hash(id);
        lock(&self.sessions_seen).remove(&hash);
        self.wrote(self.tables.backend.end_session(&hash))
    }

    /// Whether `user` holds a read grant on `repo`.
    pub fn granted(&self, user: &str, repo: &str) -> Result<bool, Error> {
        Ok(self
            .current()?
            .grants
            .contains(&(user.to_owned(), repo.to_owned())))
    }

    /// Whether a member of one of `groups` (an identity provider's) may read `repo` by a
    /// group grant (`csg grant --group`).
    pub fn granted_to_groups(&self, groups: &[String], repo: &str) -> Result<bool, Error> {
        let view = self.current()?;
        Ok(view
            .group_grants
            .get(repo)
            .is_some_and(|granted| groups.iter().any(|group| granted.contains(group))))
    }

    /// Whether `user` is known, and then whether it holds `prepare`, as the view has it.
    pub fn user_prepare(&self, user: &str) -> Result<Option<bool>, Error> {
        Ok(self.current()?.users.get(user).copied())
    }

    /// Adds a user, with the `prepare` capability or not.
    pub fn add_user(&self, name: &str, prepare: bool) -> Result<UserInfo, Error> {
        if !valid_user_name(name) {
            return Err(Error::InvalidUserName(name.to_owned()));
        }
        let created = now_secs();
        self.wrote(self.tables.backend.add_user(name, prepare, created))?;
        Ok(UserInfo {
            name: name.to_owned(),
            prepare,
            created: from_secs(created),
        })
    }

    /// Gives or takes the `prepare` capability.
    pub fn set_prepare(&self, name: &str, prepare: bool) -> Result<(), Error> {
        self.wrote(self.tables.backend.set_prepare(name, prepare))
    }

    /// Removes a user: their tokens are revoked, their website sessions ended and their
    /// grants dropped.
    pub fn remove_user(&self, name: &str) -> Result<(), Error> {
        self.wrote(self.tables.backend.remove_user(name, now_secs()))
    }

    /// Every user, by name.
    pub fn users(&self) -> Result<Vec<UserInfo>, Error> {
        self.tables.backend.users()
    }

    /// Creates a token for `user` (named `name`, or `token-<n>`), and answers it: the only
    /// time its secret exists outside the caller's hands.
    pub fn create_token(&self, user: &str, name: Option<&str>) -> Result<NewToken, Error> {
        if let Some(name) = name
            && !valid_token_name(name)
        {
            return Err(Error::InvalidTokenName(name.to_owned()));
        }
        let secret =
            token::generate().map_err(crate::backend::storage("drawing a random token"))?;
        let hash = token::hash(&secret);
        let info = self.wrote(
            self.tables
                .backend
                .create_token(user, name, &hash, now_secs()),
        )?;
        Ok(NewToken { info, secret })
    }

    /// Every token (of `user`, when given), oldest first, revoked ones included.
    pub fn tokens(&self, user: Option<&str>) -> Result<Vec<TokenInfo>, Error> {
        self.tables.backend.tokens(user)
    }

    /// Revokes token `id`: it is refused from the next call on, in every process, and its
    /// website sessions end. Revoking a revoked token changes nothing.
    pub fn revoke_token(&self, id: i64) -> Result<(), Error> {
        self.wrote(self.tables.backend.revoke_token(id, now_secs()))
    }

    /// Grants `user` read on `repo` (a private repository; public ones need no grant). The
    /// caller checks that the repository is registered.
    pub fn grant(&self, user: &str, repo: &str) -> Result<(), Error> {
        self.wrote(self.tables.backend.grant(user, repo, now_secs()))
    }

    /// Takes a grant back; answers whether there was one.
    pub fn ungrant(&self, user: &str, repo: &str) -> Result<bool, Error> {
        self.wrote(self.tables.backend.ungrant(user, repo))
    }

    /// Grants the members of the identity provider's group `group` read on `repo` (issue
    /// 44): whoever presents a token or signs in with the group in their groups claim.
    pub fn grant_group(&self, group: &str, repo: &str) -> Result<(), Error> {
        if !valid_group_name(group) {
            return Err(Error::InvalidGroupName(group.to_owned()));
        }
        self.wrote(self.tables.backend.grant_group(group, repo, now_secs()))
    }

    /// Takes a group grant back; answers whether there was one.
    pub fn ungrant_group(&self, group: &str, repo: &str) -> Result<bool, Error> {
        self.wrote(self.tables.backend.ungrant_group(group, repo))
    }

    /// Every group grant, by group then repository (`user` names the group).
    pub fn group_grants(&self) -> Result<Vec<GrantInfo>, Error> {
        self.tables.backend.group_grants()
    }

    /// Drops every grant on `repo` (its registration was removed: a repository registered
    /// later under the name must not inherit them).
    pub fn forget_repo(&self, repo: &str) -> Result<(), Error> {
        self.wrote(self.tables.backend.forget_repo(repo))
    }

    /// Every grant, by user then repository.
    pub fn grants(&self) -> Result<Vec<GrantInfo>, Error> {
        self.tables.backend.grants()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &tempfile::TempDir) -> AccessStore {
        AccessStore::open(&dir.path().join("csg.sqlite")).expect("open")
    }

    /// A connection of the test's own to the file, to look at what is stored.
    fn raw(dir: &tempfile::TempDir) -> rusqlite::Connection {
        rusqlite::Connection::open(dir.path().join("csg.sqlite")).expect("open the file")
    }

    /// a created token authenticates as its user, is stored only as a hash, and is
    /// refused once revoked; a malformed bearer value is told apart from an unknown token.
    #[test]
    fn a1_token_lifecycle() {
        let dir = tempfile::tempdir().expect("tempdir");
        let access = store(&dir);
        access.add_user("alice", false).expect("user");
        let new = access.create_token("alice", Some("laptop")).expect("token");
        assert!(!format!("{new:?}").contains(&new.secret), "Debug redacts");
        let who = access.authenticate(&new.secret).expect("valid");
        assert_eq!((who.user.as_str(), who.prepare), ("alice", false));
        let stored: Vec<u8> = raw(&dir)
            .query_row("SELECT hash FROM tokens", [], |r| r.get(0))
            .expect("row");
        assert_eq!(stored, token::hash(&new.secret).to_vec());
        let raw: String = raw(&dir)
            .query_row(
                "SELECT group_concat(quote(hash) || name) FROM tokens",
                [],
                |r| r.get(0),
            )
            .expect("row");
        assert!(
            !raw.contains(&new.secret[4..]),
            "the plaintext is not stored"
        );
        let listed = access.tokens(Some("alice")).expect("list");
        assert_eq!(listed.len(), 1);
        assert!(listed[0].last_used.is_some(), "last use recorded");
        access.revoke_token(new.info.id).expect("revoke");
        assert_eq!(access.authenticate(&new.secret), Err(Error::InvalidToken));
        assert_eq!(access.authenticate("hunter2"), Err(Error::Malformed));
        assert_eq!(
            access.authenticate(&token::generate().expect("random")),
            Err(Error::InvalidToken)
        );
        assert!(access.tokens(None).expect("list")[0].revoked.is_some());
        // The name is free again once the token is revoked.
        access
            .create_token("alice", Some("laptop"))
            .expect("reuse name");
        assert!(matches!(
            access.create_token("alice", Some("laptop")),
            Err(Error::TokenNameTaken { .. })
        ));
        assert_eq!(
            access.create_token("bob", None).map(|t| t.info),
            Err(Error::UnknownUser("bob".into()))
        );
    }

    /// W-34 across processes: a second store on the same files (another `csg` process)
    /// sees a revocation and a grant change on its very next call.
    #[test]
    fn w34_changes_elsewhere_take_effect_on_the_next_call() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, cli) = (store(&dir), store(&dir));
        cli.add_user("alice", true).expect("user");
        let new = cli.create_token("alice", None).expect("token");
        assert_eq!(new.info.name, "token-1");
        assert!(server.authenticate(&new.secret).expect("valid").prepare);
        cli.grant("alice", "acme/private").expect("grant");
        assert!(server.granted("alice", "acme/private").expect("view"));
        cli.ungrant("alice", "acme/private").expect("ungrant");
        assert!(!server.granted("alice", "acme/private").expect("view"));
        cli.grant("alice", "acme/private").expect("grant");
        cli.forget_repo("acme/private").expect("forget");
        assert!(!server.granted("alice", "acme/private").expect("view"));
        cli.set_prepare("alice", false).expect("change");
        assert!(!server.authenticate(&new.secret).expect("valid").prepare);
        cli.revoke_token(new.info.id).expect("revoke");
        assert_eq!(server.authenticate(&new.secret), Err(Error::InvalidToken));
    }

    /// A-1, issue 43 finding 3: cookies naming no session spend the database look-ups of
    /// their client address only. Once they are spent, that client's unknown sessions are
    /// unknown now (not ended: nothing is known of them), while another client's look-ups
    /// still answer, and sessions the view knows need no look-up at all.
    #[test]
    fn a1_session_lookups_are_budgeted_per_client() {
        let dir = tempfile::tempdir().expect("tempdir");
        let access = store(&dir);
        access.add_user("alice", false).expect("user");
        let new = access.create_token("alice", None).expect("token");
        let session = access.start_session(&new.secret).expect("sign in");
        let (flood, visitor): (IpAddr, IpAddr) = (
            "192.0.2.1".parse().expect("an address"),
            "192.0.2.2".parse().expect("an address"),
        );
        let forged = |n: usize| format!("{n:064x}");
        let mut ended = 0;
        let mut unknown = 0;
        for n in 0..100 {
            match access.session(&forged(n), Some(flood)) {
                Err(Error::SessionEnded) => ended += 1,
                Err(Error::UnknownNow { retry_after }) => {
                    assert!(retry_after >= 1);
                    unknown += 1;
                }
                other => panic!("a forged cookie answered {other:?}"),
            }
        }
        assert!(
            (10..100).contains(&ended),
            "{ended} looked up, {unknown} not"
        );
        assert_eq!(
            access.session(&forged(1000), Some(visitor)),
            Err(Error::SessionEnded),
            "another client's look-ups are whole"
        );
        assert_eq!(
            access
                .session(&session.id, Some(flood))
                .expect("known")
                .user,
            "alice",
            "the view needs no look-up"
        );
        assert_eq!(
            access.session_in_view(&session.id).expect("known").user,
            "alice"
        );
        assert!(matches!(
            access.session_in_view(&forged(1001)),
            Err(Error::UnknownNow { .. })
        ));
    }

    /// Removing a user revokes their tokens and drops their grants.
    #[test]
    fn removing_a_user_revokes_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let access = store(&dir);
        access.add_user("alice", false).expect("user");
        assert_eq!(
            access.add_user("alice", false),
            Err(Error::UserExists("alice".into()))
        );
        assert!(matches!(
            access.add_user("-x", false),
            Err(Error::InvalidUserName(_))
        ));
        let new = access.create_token("alice", None).expect("token");
        access.grant("alice", "acme/private").expect("grant");
        access.remove_user("alice").expect("remove");
        assert_eq!(access.authenticate(&new.secret), Err(Error::InvalidToken));
        assert!(access.grants().expect("grants").is_empty());
        assert!(access.users().expect("users").is_empty());
        assert_eq!(
            access.remove_user("alice"),
            Err(Error::UnknownUser("alice".into()))
        );
    }
}
