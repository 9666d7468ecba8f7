//! Registrations: adding a name (its source checked; the same registration again answers the
//! existing one), removing one (its mirror moved to the trash, emptied by a later sweep once no
//! process holds a lease record on it), and what the registry says of a name.
//!
//! A registration made by an admin command in cluster mode (`csg --database URL repo add`):
//! the command's process is no replica that owns the repository, so it clones nothing. It
//! checks the source first ([`check_source`]: a typo fails at once and nothing is recorded),
//! records the registration, and waits until an owner replica's sync recorded the
//! repository's heads ([`Inner::wait_recorded`]). With SQLite nothing here runs: the
//! command's own data directory is the server's, and it syncs there as it always did.

use super::{Inner, RepoState, lock, shared};
use crate::db::storage;
use crate::gitcli::{self, CHECK_TIMEOUT, GitFailure};
use crate::objects::to_commit_id;
use crate::revision;
use crate::{CommitId, Error, Registration, RepoInfo, RepoName, RepoPath};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often a wait looks at the registration again: a cached row, re-read from the
/// database only once a notification (a replica's record) came in.
const POLL: Duration = Duration::from_millis(250);

/// How often a wait reports that it is still waiting (and at once when the owners' last
/// attempt failed with a new error).
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Why a source cannot be registered ([`crate::GitStore::check_source`]). The source is
/// shown with any password of its URL replaced by `***`, and git's reason never names a
/// host path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// Empty, too long, a control character, or a leading `-`.
    #[error(
        "source `{shown}` is not usable: {reason}; give a Git URL (https, ssh, git, file://) or the path of a Git repository"
    )]
    Invalid { shown: String, reason: &'static str },
    /// A local path that does not exist here.
    #[error(
        "source `{shown}` does not exist; give the path of a Git repository (it must exist at the same path on every replica) or a Git URL"
    )]
    Missing { shown: String },
    /// A local path that is no Git repository.
    #[error(
        "source `{shown}` is not a Git repository ({reason}); give the path of a Git repository (a work tree or a bare repository) or a Git URL"
    )]
    NotGit { shown: String, reason: String },
    /// `git ls-remote` of a URL failed.
    #[error(
        "cannot list the branches of `{shown}`: {reason}; check the URL, the network and the credentials, then try again"
    )]
    Unreachable { shown: String, reason: String },
    /// `git ls-remote` did not finish in time.
    #[error(
        "`{shown}` did not answer within {seconds} s; check the network and that its host is up, then try again"
    )]
    TimedOut { shown: String, seconds: u64 },
    /// The configured default branch is not among the source's branches.
    #[error(
        "branch `{branch}` does not exist in `{shown}`; name an existing branch, or none to take the source's HEAD"
    )]
    NoBranch { shown: String, branch: String },
}

/// What [`crate::GitStore::wait_recorded`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Awaited {
    /// A sync (of any replica) recorded the repository's heads.
    Recorded {
        /// The default branch's head it recorded; `None` when the source has no commits.
        head: Option<CommitId>,
    },
    /// Nothing was recorded within the bound. The registration stays.
    NotYet {
        /// The error of the owners' last failed attempt, if one was recorded.
        last_error: Option<String>,
    },
}

/// A report of a wait still going ([`crate::GitStore::wait_recorded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitProgress {
    /// How long it has waited so far.
    pub waited: Duration,
    /// The error of the owners' last failed attempt, if one was recorded (they try again).
    pub last_error: Option<String>,
}

/// See [`crate::GitStore::check_source`].
pub(crate) fn check_source(registration: &Registration) -> Result<(), SourceError> {
    let source = registration.source.as_str();
    let shown = shown_source(source);
    let invalid = |reason| SourceError::Invalid {
        shown: shown.clone(),
        reason,
    };
    if source.trim().is_empty() {
        return Err(invalid("it is empty"));
    }
    if source.len() > 4096 {
        return Err(invalid("it is longer than 4096 bytes"));
    }
    if source.chars().any(char::is_control) {
        return Err(invalid("it contains a control character"));
    }
    if source.starts_with('-') {
        return Err(invalid("it starts with `-`"));
    }
    let local = local_path(source);
    if let Some(path) = local
        && !Path::new(path).exists()
    {
        return Err(SourceError::Missing { shown });
    }
    let branch_ref = registration
        .branch
        .as_ref()
        .map(|b| format!("refs/heads/{b}"));
    let mut patterns = vec!["HEAD"];
    patterns.extend(branch_ref.as_deref());
    let listing = gitcli::ls_remote(source, &patterns, CHECK_TIMEOUT).map_err(|failure| {
        if matches!(failure, GitFailure::Timeout) {
            return SourceError::TimedOut {
                shown: shown.clone(),
                seconds: CHECK_TIMEOUT.as_secs(),
            };
        }
        let reason = describe(source, &failure);
        tracing::debug!(source = %shown, error = %reason, "gitstore: the source check failed");
        match local {
            Some(_) => SourceError::NotGit {
                shown: shown.clone(),
                reason,
            },
            None => SourceError::Unreachable {
                shown: shown.clone(),
                reason,
            },
        }
    })?;
    if let (Some(branch), Some(wanted)) = (&registration.branch, &branch_ref) {
        let listing = String::from_utf8_lossy(&listing);
        let listed = listing
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .any(|(sha, refname)| !sha.starts_with("ref: ") && refname == wanted);
        if !listed {
            return Err(SourceError::NoBranch {
                shown,
                branch: branch.clone(),
            });
        }
    }
    Ok(())
}

/// The local path `source` names, or `None` for a remote URL: `file://` URLs and existing
/// paths are local, other `scheme://` URLs and scp-like `host:path` (a colon before any
/// slash) remote, and anything else a path, as git reads them.
fn local_path(source: &str) -> Option<&str> {
    if let Some(path) = source.strip_prefix("file://") {
        return Some(path);
    }
    if source.contains("://") {
        return None;
    }
    if Path::new(source).exists() {
        return Some(source);
    }
    let scp_like = source
        .find(':')
        .is_some_and(|colon| !source[..colon].contains('/'));
    (!scp_like).then_some(source)
}

/// `source` fit for a message: a URL's password replaced by `***`, control characters
/// dropped, at most 200 characters.
pub(crate) fn shown_source(source: &str) -> String {
    let redacted = match password(source) {
        Some(password) => source.replacen(&format!(":{password}@"), ":***@", 1),
        None => source.to_string(),
    };
    let mut shown: String = redacted.chars().filter(|c| !c.is_control()).collect();
    if shown.chars().count() > 200 {
        shown = shown.chars().take(200).collect::<String>() + "…";
    }
    shown
}

/// The password in a `scheme://user:password@host/…` URL.
fn password(source: &str) -> Option<&str> {
    let rest = source.split_once("://")?.1;
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let userinfo = authority.rsplit_once('@')?.0;
    let password = userinfo.split_once(':')?.1;
    (!password.is_empty()).then_some(password)
}

/// git's reason, with the source (which may carry a password or a host path) and the
/// password alone replaced.
fn describe(source: &str, failure: &GitFailure) -> String {
    let mut secrets: Vec<(String, &str)> = vec![(source.to_string(), "<source>")];
    if let Some(path) = source.strip_prefix("file://") {
        secrets.push((path.to_string(), "<source>"));
    }
    if let Ok(canonical) = Path::new(source).canonicalize() {
        secrets.push((canonical.to_string_lossy().into_owned(), "<source>"));
    }
    if let Some(password) = password(source) {
        secrets.push((password.to_string(), "***"));
    }
    let secrets: Vec<(&str, &str)> = secrets.iter().map(|(s, p)| (s.as_str(), *p)).collect();
    gitcli::describe(failure, &secrets)
}

impl Inner {
    pub(crate) fn register(&self, reg: Registration) -> Result<RepoInfo, Error> {
        validate_source(&reg.source)?;
        if let Some(branch) = &reg.branch {
            revision::validate_branch(branch)?;
        }
        // Held across the check and the insert so two registrations cannot race (across
        // processes the primary key decides: the loser's insert fails and it answers from
        // the row that won). Readers never take it: they keep the published snapshot.
        let _writes = lock(&self.writes);
        if let Some(row) = self.db.repo(&reg.name)? {
            return same_registration(&row, &reg);
        }
        let incarnation = match self.db.insert_repo(&reg) {
            Ok(incarnation) => incarnation,
            // Another process registered the name between our check and our insert.
            Err(e) => {
                return match self.db.repo(&reg.name)? {
                    Some(row) => same_registration(&row, &reg),
                    None => Err(e),
                };
            }
        };
        let state = Arc::new(self.new_state(
            incarnation,
            reg.name.clone(),
            reg.source.clone(),
            reg.registered_path.clone(),
            reg.branch.clone(),
            reg.private.unwrap_or(false),
        ));
        self.publish_registry(incarnation, |repos| {
            repos.insert(reg.name.clone(), Arc::clone(&state));
        });
        self.repo(&reg.name)
    }

    /// Removes the registration and moves its mirror to the trash, under the mirror lock
    /// (a sync or gc of any process finishes first). The trash entry is deleted by a later
    /// sweep once no live process holds a lease record on this registration: a server
    /// reading it meanwhile sees the repository as unknown on its next call.
    pub(crate) fn unregister(&self, name: &RepoName) -> Result<(), Error> {
        let state = self.state_fresh(name)?;
        let _maintenance = lock(&state.maintenance);
        let _mirror = shared::lock_exclusive(&state.mirror_lock)?;
        {
            let _writes = lock(&self.writes);
            let removed = self.db.delete_repo(name, state.id)?;
            self.publish_registry(removed.unwrap_or(0), |repos| {
                if repos.get(name).is_some_and(|s| s.id == state.id) {
                    repos.remove(name);
                }
            });
            state.set_view(None);
            if removed.is_none() {
                // Another process removed (or replaced) it meanwhile.
                return Err(Error::UnknownRepo(name.clone()));
            }
        }
        self.trash_mirror(&state)
    }

    fn trash_dir(&self) -> PathBuf {
        self.config.data_dir.join("trash")
    }

    /// Renames a removed registration's mirror into the trash (atomic: no half-deleted
    /// mirror is ever left where a mirror is expected).
    pub(super) fn trash_mirror(&self, state: &RepoState) -> Result<(), Error> {
        if !state.mirror.exists() {
            return Ok(());
        }
        let trash = self.trash_dir();
        std::fs::create_dir_all(&trash).map_err(storage("creating the trash directory"))?;
        let base = format!("{}-{}", state.id, state.name.as_str().replace('/', "-"));
        let mut target = trash.join(format!("{base}.git"));
        let mut n = 1;
        while target.exists() {
            target = trash.join(format!("{base}.{n}.git"));
            n += 1;
        }
        std::fs::rename(&state.mirror, &target).map_err(storage("removing the mirror"))
    }

    /// Deletes trash entries no live process holds a lease record on.
    pub(super) fn empty_trash(&self) -> Result<(), Error> {
        let entries = match std::fs::read_dir(self.trash_dir()) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(storage("reading the trash directory")(e)),
        };
        let leases_root = self.leases_root();
        for entry in entries {
            let entry = entry.map_err(storage("reading the trash directory"))?;
            let name = entry.file_name();
            let Some(incarnation) = name.to_str().and_then(shared::trash_incarnation) else {
                continue;
            };
            if shared::live_leases(&leases_root, incarnation)?.is_empty() {
                std::fs::remove_dir_all(entry.path()).map_err(storage("emptying the trash"))?;
            }
        }
        Ok(())
    }

    pub(super) fn leases_root(&self) -> PathBuf {
        self.config.data_dir.join("leases")
    }

    pub(crate) fn repos(&self) -> Result<Vec<RepoInfo>, Error> {
        Ok(self.db.all_repos()?.iter().map(|r| r.info()).collect())
    }

    /// The registered path of `name` as this store knows it now (after the per-call
    /// registry check), without a metadata query.
    pub(crate) fn is_private(&self, name: &RepoName) -> Result<bool, Error> {
        Ok(self.state(name)?.private.load(Ordering::SeqCst))
    }

    pub(crate) fn set_private(&self, name: &RepoName, private: bool) -> Result<(), Error> {
        let state = self.state(name)?;
        if !self.db.set_private(name, private)? {
            return Err(Error::UnknownRepo(name.clone()));
        }
        state.private.store(private, Ordering::SeqCst);
        Ok(())
    }

    pub(crate) fn registered_path(&self, name: &RepoName) -> Result<RepoPath, Error> {
        Ok(self.state(name)?.registered_path.clone())
    }

    pub(crate) fn repo(&self, name: &RepoName) -> Result<RepoInfo, Error> {
        self.db
            .repo(name)?
            .map(|r| r.info())
            .ok_or_else(|| Error::UnknownRepo(name.clone()))
    }

    /// Every tracked branch head as of the last good sync, by branch name.
    pub(crate) fn branch_heads(&self, name: &RepoName) -> Result<Vec<(String, CommitId)>, Error> {
        let (_, view) = self.synced(name)?;
        view.branches
            .iter()
            .map(|(branch, id)| Ok((branch.clone(), to_commit_id(id)?)))
            .collect()
    }
}

/// A `source` we are willing to hand to git as its repository argument.
fn validate_source(source: &str) -> Result<(), Error> {
    // No dedicated variant exists for a bad source; the message names it as the source.
    let bad = |reason: &str| Error::InvalidName {
        name: shown_source(source),
        reason: format!("not a usable source ({reason})"),
    };
    if source.trim().is_empty() {
        return Err(bad("it is empty"));
    }
    if source.len() > 4096 {
        return Err(bad("it is longer than 4096 bytes"));
    }
    if source.chars().any(char::is_control) {
        return Err(bad("it contains a control character"));
    }
    if source.starts_with('-') {
        return Err(bad("it starts with `-`"));
    }
    Ok(())
}

/// Registering a name that is registered already: the same source and path is the existing
/// registration (unless the visibility asked for differs), anything else is taken.
fn same_registration(row: &crate::db::RepoRow, reg: &Registration) -> Result<RepoInfo, Error> {
    if row.source != reg.source || row.registered_path != reg.registered_path {
        return Err(Error::NameTaken(reg.name.clone()));
    }
    match reg.private {
        Some(private) if private != row.private => Err(Error::VisibilityDiffers {
            name: reg.name.clone(),
            private: row.private,
        }),
        _ => Ok(row.info()),
    }
}

impl Inner {
    /// See [`crate::GitStore::wait_recorded`].
    pub(crate) fn wait_recorded(
        &self,
        name: &RepoName,
        timeout: Duration,
        observer: &mut dyn FnMut(&WaitProgress),
    ) -> Result<Awaited, Error> {
        let unknown = || Error::UnknownRepo(name.clone());
        let incarnation = self.db.repo(name)?.ok_or_else(unknown)?.incarnation;
        let started = Instant::now();
        // The caller said it waits when it began; the first report is due after a round.
        let mut reported: (Instant, Option<String>) = (started, None);
        loop {
            // Removed (or removed and registered again) meanwhile: not the one to wait for.
            let row = self
                .db
                .repo(name)?
                .filter(|row| row.incarnation == incarnation)
                .ok_or_else(unknown)?;
            if row.last_good_sync.is_some() {
                return Ok(Awaited::Recorded { head: row.head });
            }
            let waited = started.elapsed();
            if waited >= timeout {
                return Ok(Awaited::NotYet {
                    last_error: row.last_error,
                });
            }
            if reported.0.elapsed() >= REPORT_EVERY || reported.1 != row.last_error {
                observer(&WaitProgress {
                    waited,
                    last_error: row.last_error.clone(),
                });
                reported = (Instant::now(), row.last_error);
            }
            std::thread::sleep(POLL.min(timeout.saturating_sub(waited)));
        }
    }
}

impl Inner {
    /// Stores the index-branch patterns of `name` (S-8), checked by the caller. Not part of
    /// the registration's identity (like its visibility): registering the same again keeps
    /// them.
    pub(crate) fn set_index_branches(
        &self,
        name: &RepoName,
        patterns: &[String],
    ) -> Result<(), Error> {
        if !self.db.set_index_branches(name, patterns)? {
            return Err(Error::UnknownRepo(name.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_source_hides_the_password() {
        assert_eq!(
            shown_source("https://bob:s3cret@git.example.org/a/b.git"),
            "https://bob:***@git.example.org/a/b.git"
        );
        assert_eq!(
            shown_source("https://git.example.org/a/b.git"),
            "https://git.example.org/a/b.git"
        );
        assert_eq!(shown_source("git@host:a/b.git"), "git@host:a/b.git");
        assert_eq!(password("ssh://git@host/x"), None);
        assert_eq!(password("https://u:p@w@host/x"), Some("p@w"));
    }

    #[test]
    fn local_and_remote_sources_are_told_apart() {
        assert_eq!(local_path("/no/such/dir"), Some("/no/such/dir"));
        assert_eq!(local_path("file:///srv/x.git"), Some("/srv/x.git"));
        assert_eq!(local_path("https://h/x.git"), None);
        assert_eq!(local_path("git@host:x.git"), None);
        assert_eq!(local_path("./a:b"), Some("./a:b"));
    }
}
