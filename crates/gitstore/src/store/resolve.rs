//! Revisions to commits (G-4): `HEAD`, branches, tags, full and unique short SHAs, against a
//! view, each checked against retention.

use super::views::is_commit;
use super::{Inner, RepoState, View, Walk, unwalked};
use crate::objects::{odb, to_commit_id};
use crate::revision::{self, MIN_SHORT_SHA};
use crate::{CommitId, Error, RepoName, handles};
use gix::ObjectId;
use std::collections::HashSet;

impl Inner {
    pub(crate) fn resolve(
        &self,
        name: &RepoName,
        revision: Option<&str>,
    ) -> Result<CommitId, Error> {
        let (state, view) = self.synced(name)?;
        let id = self.resolve_in(&state, &view, revision, Walk::Unbounded)?;
        to_commit_id(&id.ok_or_else(unwalked)?)
    }

    /// [`Inner::resolve`] against a view already taken; `Ok(None)` when the retention check
    /// needs the ancestor walk and `walk` says it may not run here.
    pub(super) fn resolve_in(
        &self,
        state: &RepoState,
        view: &View,
        revision: Option<&str>,
        walk: Walk<'_>,
    ) -> Result<Option<ObjectId>, Error> {
        let name = &state.name;
        let unknown = |rev: &str| Error::UnknownRevision {
            repo: name.clone(),
            revision: rev.to_string(),
        };
        let id = match revision {
            None | Some("HEAD") => match view.head {
                Some(id) => id,
                None if view
                    .default_branch
                    .as_ref()
                    .is_some_and(|b| view.pending.contains_key(b)) =>
                {
                    return Err(self.catching_up(state));
                }
                None => return Err(unknown("HEAD")),
            },
            Some(rev) => {
                revision::validate_revision(rev)?;
                self.resolve_name(state, view, rev)?
            }
        };
        Ok(self
            .check_readable_with(state, view, &id, false, walk)?
            .map(|()| id))
    }

    fn resolve_name(&self, state: &RepoState, view: &View, rev: &str) -> Result<ObjectId, Error> {
        let unknown = || Error::UnknownRevision {
            repo: state.name.clone(),
            revision: rev.to_string(),
        };
        if rev.len() == 40 && revision::is_hex(rev) {
            let id = ObjectId::from_hex(rev.as_bytes()).map_err(|_| unknown())?;
            return match handles::with_repo(&view.repo, |repo| peel_to_commit(repo, id))? {
                Some(commit) => Ok(commit),
                None if self.behind(view, &id) => Err(self.catching_up(state)),
                None => Err(unknown()),
            };
        }
        // A ref wins over a short SHA of the same spelling, as in git; a branch whose
        // recorded head this mirror lacks (cluster mode) is still that branch.
        let branch = |b: &str| match view.branches.get(b) {
            Some(id) => Some(Ok(*id)),
            None if view.pending.contains_key(b) => Some(Err(())),
            None => None,
        };
        let by_ref = branch(rev)
            .or_else(|| view.tags.get(rev).map(|id| Ok(*id)))
            .or_else(|| rev.strip_prefix("refs/heads/").and_then(branch))
            .or_else(|| {
                rev.strip_prefix("refs/tags/")
                    .and_then(|t| view.tags.get(t))
                    .map(|id| Ok(*id))
            });
        match by_ref {
            Some(Ok(id)) => return Ok(id),
            Some(Err(())) => return Err(self.catching_up(state)),
            None => {}
        }
        if revision::is_hex(rev) && rev.len() >= MIN_SHORT_SHA {
            return match handles::with_repo(&view.repo, |repo| {
                resolve_prefix(&state.name, repo, rev, MIN_SHORT_SHA)
            }) {
                // Maybe a commit of a recorded head this mirror has not fetched yet.
                Err(Error::UnknownRevision { .. })
                    if self.mirrors_per_replica && !view.pending.is_empty() =>
                {
                    Err(self.catching_up(state))
                }
                other => other,
            };
        }
        Err(unknown())
    }
}

/// Follows annotated tags to what they point at; `None` unless that is an existing commit.
fn peel_to_commit(repo: &gix::Repository, mut id: ObjectId) -> Result<Option<ObjectId>, Error> {
    // Tag chains are short; a bound keeps a pathological cycle-free chain from looping long.
    for _ in 0..16 {
        let Some(object) = repo.try_find_object(id).map_err(odb)? else {
            return Ok(None);
        };
        match object.kind {
            gix::objs::Kind::Commit => return Ok(Some(id)),
            gix::objs::Kind::Tag => {
                id = gix::objs::TagRefIter::from_bytes(&object.data, repo.object_hash())
                    .target_id()
                    .map_err(odb)?;
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// Unique-prefix lookup among commits (G-4). `min_len` is a parameter so tests can prove the
/// ambiguity logic with short prefixes, which collide in small repositories.
pub(crate) fn resolve_prefix(
    repo_name: &RepoName,
    repo: &gix::Repository,
    hex: &str,
    min_len: usize,
) -> Result<ObjectId, Error> {
    let unknown = || Error::UnknownRevision {
        repo: repo_name.clone(),
        revision: hex.to_string(),
    };
    if hex.len() < min_len || hex.len() >= 40 || !revision::is_hex(hex) {
        return Err(unknown());
    }
    let prefix = gix::hash::Prefix::from_hex(&hex.to_ascii_lowercase()).map_err(|_| unknown())?;
    let mut candidates = HashSet::new();
    repo.objects
        .lookup_prefix(prefix, Some(&mut candidates))
        .map_err(odb)?;
    let mut commits = Vec::new();
    for id in candidates {
        if is_commit(repo, id)? {
            commits.push(id);
        }
    }
    commits.sort();
    match commits.as_slice() {
        [] => Err(unknown()),
        [one] => Ok(*one),
        many => Err(Error::Ambiguous {
            repo: repo_name.clone(),
            prefix: hex.to_string(),
            candidates: many.iter().map(to_commit_id).collect::<Result<_, _>>()?,
        }),
    }
}
