//! Where a repository is served, in cluster mode (issue 31): each repository has a few owner
//! replicas, and a call for one this replica does not serve is forwarded to an owner by the
//! transport. The service only answers the question; the membership behind it (heartbeats,
//! rendezvous hashing) is the binary's to plug in, so this crate stays free of it.

use crate::{CallContext, Service};
use std::sync::Arc;

/// The cluster's placement of repositories, as this replica sees it now.
pub trait Placement: Send + Sync + 'static {
    /// The replicas that own `repo` (their node URLs), the preferred first.
    fn owners(&self, repo: &str) -> Vec<String>;
    /// This replica's node URL.
    fn self_url(&self) -> &str;
    /// The membership as this replica last saw it.
    fn members(&self) -> Membership;
    /// A caller reloaded the server plugins here: tell the other replicas to reload theirs
    /// ([`Service::reload_server_plugins_here`]). Must not block.
    fn announce_plugin_reload(&self) {}
}

/// The members of the cluster and this replica's standing, for `/readyz` and the cluster
/// page of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// Every member row, dead ones too.
    pub members: Vec<Member>,
    /// This replica's heartbeats get through to the metadata database.
    pub database_reachable: bool,
    /// This replica is draining: the others take its repositories over.
    pub draining: bool,
}

/// One member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its node URL.
    pub node_url: String,
    /// Its last heartbeat, by the database's clock.
    pub last_heartbeat: std::time::SystemTime,
    /// Whether its lease still runs.
    pub live: bool,
}

/// The cluster as this replica sees it: members, each repository's owners, and what this
/// replica serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// This replica's node URL.
    pub self_url: String,
    /// The membership.
    pub membership: Membership,
    /// Each registered repository with its owners, by name.
    pub repositories: Vec<(String, Vec<String>)>,
    /// Repositories this replica owns and holds a synced mirror of.
    pub served_here: usize,
}

/// Where a call for one repository runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Here: the embedded default, or this replica owns the repository.
    Here,
    /// On one of these replicas (node URLs, the preferred first); this one is not among them.
    Elsewhere(Vec<String>),
}

impl Service {
    /// Plugs the cluster's placement in (once; `false` if one was already set). Without one,
    /// every repository is served here.
    pub fn set_placement(&self, placement: Arc<dyn Placement>) -> bool {
        self.inner.placement.set(placement).is_ok()
    }

    /// Where a call naming `repo` (an alias, P-22, is replaced first, as the frame would)
    /// runs. An unknown or unreadable name routes like any other: the owner answers it, and
    /// answers it exactly as it would an unknown one.
    pub fn route(&self, ctx: &CallContext, repo: &str) -> Route {
        let Some(placement) = self.inner.placement.get() else {
            return Route::Here;
        };
        let name = self.unalias(ctx, repo.to_owned());
        if !self.owns_here(&name) {
            return Route::Elsewhere(placement.owners(&name));
        }
        // An owner that has not fetched the repository yet (it just joined, or just gained
        // it) sends the call to the other owners until it has.
        let others: Vec<String> = placement
            .owners(&name)
            .into_iter()
            .filter(|owner| owner != placement.self_url())
            .collect();
        if others.is_empty() || self.holds(&name) {
            Route::Here
        } else {
            Route::Elsewhere(others)
        }
    }

    /// Whether this replica owns the repository `name` (a real name, not an alias): always
    /// in the embedded default.
    pub(crate) fn owns_here(&self, name: &str) -> bool {
        let Some(placement) = self.inner.placement.get() else {
            return true;
        };
        let owners = placement.owners(name);
        owners.is_empty() || owners.iter().any(|owner| owner == placement.self_url())
    }

    /// The cluster as this replica sees it (`None` in the embedded default). Reads the
    /// registry snapshot and the membership view only: a probe never waits on a database.
    pub fn cluster_status(&self) -> Option<ClusterStatus> {
        let placement = self.inner.placement.get()?;
        let membership = placement.members();
        let self_url = placement.self_url().to_owned();
        let mut served_here = 0;
        let repositories = self
            .inner
            .store
            .repos()
            .unwrap_or_default()
            .into_iter()
            .map(|repo| {
                let name = repo.name.as_str().to_owned();
                let owners = placement.owners(&name);
                if owners.contains(&self_url) && repo.head.is_some() {
                    served_here += 1;
                }
                (name, owners)
            })
            .collect();
        Some(ClusterStatus {
            self_url,
            membership,
            repositories,
            served_here,
        })
    }

    /// [`Service::cluster_status`] for an operator (the prepare capability, A-3): the
    /// members and every repository's owners.
    pub fn cluster(&self, ctx: &CallContext) -> Result<ClusterStatus, crate::ServiceError> {
        self.inner
            .check_prepare(&ctx.caller, "the cluster's status")?;
        self.cluster_status().ok_or_else(|| crate::ServiceError {
            kind: crate::ErrorKind::NotFound,
            message: "this server does not run in cluster mode (start it with --database)"
                .to_owned(),
        })
    }

    /// Whether this replica holds a synced mirror of the repository `name` (a real name).
    /// An unknown name is "held": the call is answered here, as unknown.
    pub(crate) fn holds(&self, name: &str) -> bool {
        let Ok(repo) = gitstore::RepoName::parse(name) else {
            return true;
        };
        !matches!(
            self.inner.store.lease_revision(&repo, None),
            Err(gitstore::Error::NotSynced(_))
        )
    }
}
