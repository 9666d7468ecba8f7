//! Views: a mirror's refs, with the pins and seen heads of the metadata, assembled into the
//! immutable snapshot a call reads (the retention roots among them).

use super::{Branches, Heads, Inner, RepoState, Tags, View};
use crate::Error;
use crate::db::storage;
use crate::handles;
use crate::objects::{odb, to_oid};
use crate::retention::Roots;
use gix::ObjectId;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

impl Inner {
    pub(super) fn open_repo(&self, state: &RepoState) -> Result<gix::ThreadSafeRepository, Error> {
        // Isolated: the mirror's own config only, nothing from the environment or the
        // operator's global config can change how objects are read.
        gix::ThreadSafeRepository::open_opts(&state.mirror, gix::open::Options::isolated())
            .map_err(storage("opening a mirror"))
    }

    /// Builds a view from the mirror's refs and the metadata (pins, seen heads). In cluster
    /// mode the branches are the heads the last sync recorded, whichever replica ran it: those
    /// this mirror lacks are `pending`, and the mirror's own branch refs count for nothing
    /// (they may be older, or newer than what was recorded). Until a sync records heads (a
    /// database from before they were recorded), the mirror's refs stand.
    pub(super) fn load_view(
        &self,
        state: &RepoState,
        default_branch: Option<String>,
    ) -> Result<View, Error> {
        let repo = self.open_repo(state)?;
        let local = repo.to_thread_local();
        let (mut branches, tags) = read_refs(&local)?;
        let mut pending = Branches::new();
        if let Some(recorded) = self.db.recorded_heads(&state.name)?
            && !recorded.is_empty()
        {
            branches.clear();
            for (branch, commit) in recorded {
                let id = to_oid(&commit)?;
                if is_commit(&local, id)? {
                    branches.insert(branch, id);
                } else {
                    pending.insert(branch, id);
                }
            }
        }
        let head = default_branch
            .as_ref()
            .and_then(|b| branches.get(b))
            .copied();
        self.assemble_view(
            state,
            Arc::new(repo),
            Heads {
                default_branch,
                head,
                branches,
                pending,
            },
            tags,
        )
    }

    pub(super) fn assemble_view(
        &self,
        state: &RepoState,
        repo: Arc<gix::ThreadSafeRepository>,
        heads: Heads,
        tags: HashMap<String, ObjectId>,
    ) -> Result<View, Error> {
        let Heads {
            default_branch,
            head,
            branches,
            pending,
        } = heads;
        let pins: HashSet<ObjectId> = self
            .db
            .pins(&state.name)?
            .iter()
            .map(to_oid)
            .collect::<Result<_, _>>()?;
        let seen = self
            .db
            .seen_heads(&state.name)?
            .iter()
            .map(|(c, t)| Ok((to_oid(c)?, *t)))
            .collect::<Result<HashMap<_, _>, Error>>()?;
        let fixed = branches
            .values()
            .chain(tags.values())
            .chain(pins.iter())
            .copied()
            .collect();
        // Cluster mode: which shared rows name commits this mirror lacks (one header lookup
        // each, when a view is built, never per read).
        let mut absent = HashSet::new();
        if self.mirrors_per_replica {
            handles::with_repo(&repo, |local| {
                for id in seen.keys().chain(pins.iter()) {
                    if !is_commit(local, *id)? {
                        absent.insert(*id);
                    }
                }
                Ok::<(), Error>(())
            })?;
        }
        Ok(View {
            repo,
            default_branch,
            head,
            branches,
            tags,
            pins,
            roots: Roots {
                generation: self.next_id(),
                fixed,
                seen,
                absent,
            },
            pending,
        })
    }

    /// A copy of `view` with pins and seen heads re-read from the metadata.
    pub(super) fn refreshed_view(&self, state: &RepoState, view: &View) -> Result<View, Error> {
        self.assemble_view(state, view.repo.clone(), Heads::of(view), view.tags.clone())
    }
}

fn refs_err<E: std::fmt::Display>(e: E) -> Error {
    storage("reading mirror refs")(e)
}

/// Branch heads and tags (peeled to commits) of the mirror.
pub(super) fn read_refs(repo: &gix::Repository) -> Result<(Branches, Tags), Error> {
    let platform = repo.references().map_err(refs_err)?;
    let mut branches = BTreeMap::new();
    for reference in platform.local_branches().map_err(refs_err)? {
        let mut reference = reference.map_err(refs_err)?;
        let Some(name) = ref_suffix(&reference, "refs/heads/") else {
            continue;
        };
        let id = reference.peel_to_id().map_err(refs_err)?.detach();
        if is_commit(repo, id)? {
            branches.insert(name, id);
        }
    }
    let mut tags = HashMap::new();
    for reference in platform.tags().map_err(refs_err)? {
        let mut reference = reference.map_err(refs_err)?;
        let Some(name) = ref_suffix(&reference, "refs/tags/") else {
            continue;
        };
        let id = reference.peel_to_id().map_err(refs_err)?.detach();
        if is_commit(repo, id)? {
            tags.insert(name, id);
        }
    }
    Ok((branches, tags))
}

fn ref_suffix(reference: &gix::Reference<'_>, prefix: &str) -> Option<String> {
    let full = std::str::from_utf8(reference.name().as_bstr().as_ref()).ok()?;
    full.strip_prefix(prefix).map(str::to_string)
}

pub(super) fn is_commit(repo: &gix::Repository, id: ObjectId) -> Result<bool, Error> {
    Ok(repo
        .try_find_header(id)
        .map_err(odb)?
        .is_some_and(|h| h.kind() == gix::objs::Kind::Commit))
}
