//! Where a repository is served, in cluster mode (issue 31): each repository has a few owner
//! replicas, and a call for one this replica does not serve is forwarded to an owner by the
//! transport. The service only answers the question; the membership behind it (heartbeats,
//! rendezvous hashing) is the binary's to plug in, so this crate stays free of it.

use crate::{CallContext, Service};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// How long a repository this replica holds but no longer owns is kept before the
    /// maintenance loop drops its mirror, index and plugin caches here
    /// ([`Service::DEFAULT_RELEASE_GRACE`] unless a placement says otherwise; tests shorten
    /// it).
    fn release_grace(&self) -> Duration {
        Service::DEFAULT_RELEASE_GRACE
    }
    /// How this replica asks the others for their parts of a `search` or `references` over
    /// every repository (issue 31, behaviour 3). `None` (the default): it answers such a
    /// query from its own indexes only, naming the repositories it holds none of as not
    /// indexed.
    fn peers(&self) -> Option<Arc<dyn crate::Peers>> {
        None
    }
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
    /// Each registered repository with its owners and this replica's standing, by name.
    pub repositories: Vec<RepoPlacement>,
    /// Repositories this replica owns and holds a synced mirror of.
    pub served_here: usize,
}

/// One registered repository in a [`ClusterStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoPlacement {
    /// Its name.
    pub name: String,
    /// The replicas that own it (node URLs, the preferred first).
    pub owners: Vec<String>,
    /// Whether this replica owns it and holds a synced mirror of it.
    pub served_here: bool,
    /// Whether this replica owns it and has an index a search can use, so that searches
    /// over every repository search it here rather than asking another owner. Asked only
    /// by the operator's status route ([`Service::cluster`]); `None` elsewhere (a metrics
    /// scrape must not lease every index).
    pub indexed_here: Option<bool>,
}

/// A replica's standing for `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// The membership.
    pub membership: Membership,
    /// Repositories this replica owns and holds a synced copy of.
    pub served_here: usize,
}

/// Why a replica refuses a call another replica forwarded to it, so the forwarding one
/// tries the next owner ([`Service::forwarded_refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardedRefusal {
    /// This replica does not hold a synced copy of the repository (yet).
    NotHeld,
    /// The call reads the search index, which this replica has not built for the
    /// repository yet.
    NotIndexed,
}

/// What a call that names a repository does with it, as routing needs to know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoutedCall {
    /// It answers from the search index (`search`, `definitions`, `references`).
    pub reads_index: bool,
    /// It is an operator action (a registration, `prepare`): routed for a caller with the
    /// `prepare` capability, not for a reader.
    pub prepares: bool,
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

    /// Where a read naming `repo` (an alias, P-22, is replaced first, as the frame would)
    /// runs: [`Service::route_call`] for a read that does not use the index. An unknown or
    /// unreadable name is answered here, as unknown.
    ///
    /// An owner that has not fetched the repository yet (it just joined, or just gained it)
    /// sends the call to the other owners until it has.
    pub fn route(&self, ctx: &CallContext, repo: &str) -> Route {
        self.route_call(ctx, repo, RoutedCall::default())
    }

    /// Whether this replica holds a synced copy of the repository `repo` names (an alias is
    /// replaced first). An unknown name counts as held: it is answered here, as unknown.
    pub fn holds_repo(&self, ctx: &CallContext, repo: &str) -> bool {
        self.holds(&self.unalias(ctx, repo.to_owned()))
    }

    /// Whether a cluster's placement is plugged in.
    pub(crate) fn clustered(&self) -> bool {
        self.inner.placement.get().is_some()
    }

    /// Whether this replica owns the repository `name` (a real name, not an alias): always
    /// in the embedded default.
    pub(crate) fn owns_here(&self, name: &str) -> bool {
        let Some(placement) = self.inner.placement.get() else {
            return true;
        };
        owned_by(&placement.owners(name), placement.self_url())
    }

    /// The cluster as this replica sees it (`None` in the embedded default), from the
    /// registry snapshot, the membership view and this replica's mirrors.
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
                let served = owners.contains(&self_url) && self.holds(&name);
                served_here += usize::from(served);
                RepoPlacement {
                    name,
                    owners,
                    served_here: served,
                    indexed_here: None,
                }
            })
            .collect();
        Some(ClusterStatus {
            self_url,
            membership,
            repositories,
            served_here,
        })
    }

    /// This replica's standing for `/readyz` (`None` in the embedded default): the
    /// membership and how many repositories it owns and holds, as the last maintenance round
    /// counted them (counted now before the first round). Cheap: a probe every second or two
    /// from each balancer must not walk every repository.
    pub fn readiness(&self) -> Option<Readiness> {
        let placement = self.inner.placement.get()?;
        let counted = self
            .inner
            .served_here
            .load(std::sync::atomic::Ordering::Relaxed);
        if counted == usize::MAX {
            return self.cluster_status().map(|status| Readiness {
                membership: status.membership,
                served_here: status.served_here,
            });
        }
        Some(Readiness {
            membership: placement.members(),
            served_here: counted,
        })
    }

    /// Notes what a maintenance round counted for [`Service::readiness`].
    pub(crate) fn note_served_here(&self, served: usize) {
        self.inner
            .served_here
            .store(served, std::sync::atomic::Ordering::Relaxed);
    }

    /// [`Service::cluster_status`] for an operator (the prepare capability, A-3): the
    /// members, every repository's owners, and which of them this replica serves and can
    /// search here.
    pub fn cluster(&self, ctx: &CallContext) -> Result<ClusterStatus, crate::ServiceError> {
        self.inner
            .check_prepare(&ctx.caller, "the cluster's status")?;
        let mut status = self.cluster_status().ok_or_else(|| crate::ServiceError {
            kind: crate::ErrorKind::NotFound,
            message: "this server does not run in cluster mode (start it with --database)"
                .to_owned(),
        })?;
        // Without search nothing is indexed here (routing counts that as served: every
        // replica answers alike; an operator asks what this one has).
        let search = self.inner.indexes().is_ok();
        for repo in &mut status.repositories {
            repo.indexed_here = Some(search && repo.served_here && self.index_serves(&repo.name));
        }
        Ok(status)
    }

    /// Whether this replica holds a synced copy of the repository `name` (a real name), at
    /// the head the cluster recorded or following a newer one (a read then waits for that
    /// follow on the blocking pool, rather than being sent to an owner that is likely
    /// following it too). An unknown name is "held": the call is answered here, as unknown.
    pub(crate) fn holds(&self, name: &str) -> bool {
        let Ok(repo) = gitstore::RepoName::parse(name) else {
            return true;
        };
        !matches!(self.inner.store.holds_copy(&repo), Ok(false))
    }
}

/// Whether `me` is among `owners`; no owners at all (no live member known) counts as owned:
/// the call is answered here rather than nowhere.
fn owned_by(owners: &[String], me: &str) -> bool {
    owners.is_empty() || owners.iter().any(|owner| owner == me)
}

/// Repositories this replica holds but does not own, each with the moment a maintenance
/// round first found it so. In memory only: after a restart the grace starts again, which
/// only ever keeps a repository longer.
#[derive(Debug, Default)]
pub(crate) struct Releases {
    noted: HashMap<String, Instant>,
}

impl Releases {
    /// Notes `repo` as held and not owned at `now` (unless it is noted already); answers
    /// how long it has been so once that reaches `grace` (its release is due), else `None`.
    pub(crate) fn due(&mut self, repo: &str, now: Instant, grace: Duration) -> Option<Duration> {
        let since = *self.noted.entry(repo.to_owned()).or_insert(now);
        let not_owned_for = now.saturating_duration_since(since);
        (not_owned_for >= grace).then_some(not_owned_for)
    }

    /// Forgets `repo`'s note: it is owned again, or no longer held here.
    pub(crate) fn clear(&mut self, repo: &str) {
        self.noted.remove(repo);
    }

    /// Forgets repositories no longer registered.
    pub(crate) fn retain(&mut self, registered: &HashSet<&str>) {
        self.noted
            .retain(|repo, _| registered.contains(repo.as_str()));
    }
}

impl Service {
    /// How long a repository this replica holds but no longer owns is kept before its
    /// mirror, index and plugin caches are dropped here (issue 31, behaviour 2): ten minutes.
    ///
    /// Ownership moves whenever the membership does: a replica restarted for a deploy, or
    /// cut off for longer than its heartbeat lease, is taken for dead and comes back within
    /// a minute or two, and with it the repositories the others took over meanwhile. Keeping
    /// what they lost that long spares a clone and a full index build per repository on
    /// every such blip, while calls already go to the owners ([`Service::route`]). It is
    /// also [`crate::CATALOG_IDLE`]: the plugin catalogs of a repository whose calls went
    /// elsewhere for that long have been swept as idle by then.
    pub const DEFAULT_RELEASE_GRACE: Duration = Duration::from_secs(600);

    /// Cluster mode with a mirror per replica: how long a repository no longer owned here is
    /// kept. `None` when nothing is ever released: without a placement (everything is owned
    /// here), and with SQLite metadata, where this data directory's mirror is the only copy.
    pub(crate) fn release_grace(&self) -> Option<Duration> {
        let placement = self.inner.placement.get()?;
        matches!(self.inner.store.metadata(), gitstore::Metadata::Postgres(_))
            .then(|| placement.release_grace())
    }

    /// Whether this replica keeps anything of the repository `name` that a release would
    /// drop: a synced mirror or a search index. Unlike [`Service::holds`] it takes no lease,
    /// so it never asks for a follow of a mirror that is about to go.
    pub(crate) fn keeps_anything(&self, name: &str) -> bool {
        let mirror = gitstore::RepoName::parse(name)
            .is_ok_and(|repo| self.inner.store.branch_heads(&repo).is_ok());
        mirror || self.index_info(name).is_some()
    }

    /// Drops what this replica keeps of `repo`, a repository it has not owned for
    /// `not_owned_for` (past the grace): its mirror (to the trash, see
    /// [`gitstore::GitStore::release_local`]), its search index and what background plugin
    /// preparation recorded for it. Answers whether it is gone; `false` when it is kept for
    /// the next round: a reader holds a lease on it or a sync works on it (then nothing is
    /// dropped, so a read never finds half of it), or it is owned here again.
    pub(crate) async fn release_here(
        &self,
        repo: String,
        not_owned_for: Duration,
    ) -> Result<bool, crate::ServiceError> {
        let this = self.clone();
        self.blocking(move |inner| {
            if this.owns_here(&repo) {
                return Ok(false);
            }
            let name = gitstore::RepoName::parse(&repo)?;
            let mirror = match inner.store.release_local(&name)? {
                gitstore::Released::InUse => {
                    tracing::debug!(repo, "release postponed: in use; tried again next round");
                    return Ok(false);
                }
                gitstore::Released::Dropped => true,
                gitstore::Released::NotHeld => false,
            };
            let index = inner.drop_index(&repo)?;
            // Heads prepared before are prepared again once the repository is back here.
            drop(inner.preparations.start(&repo, false));
            tracing::info!(
                repo,
                mirror,
                index,
                not_owned_for_s = not_owned_for.as_secs(),
                "released a repository this replica no longer owns: its mirror, index and plugin preparations are dropped here"
            );
            Ok(true)
        })
        .await
    }
}

impl Service {
    /// Whether this replica can answer a call naming `repo` (an alias is replaced first)
    /// itself: it holds a synced copy and, for a call answered from the search index
    /// (`needs_index`: `search`, `definitions`, `references`), an index of it whose commit it
    /// can still lease, as those calls do. Otherwise the call is better answered by another
    /// owner: here it would answer "not synced", or name the repository as not indexed (a
    /// replica that just gained the repository, or restarted, and is still building). An
    /// unknown name counts as served: it is answered here, as unknown.
    pub fn serves_repo(&self, ctx: &CallContext, repo: &str, needs_index: bool) -> bool {
        self.serves(&self.unalias(ctx, repo.to_owned()), needs_index)
    }

    /// Whether a call of `ctx`'s caller naming `name` (a real name) may be routed at all
    /// for a read, the caller may read the repository; for an operator action
    /// (`prepares`: a registration, `prepare`), the caller holds the `prepare` capability,
    /// which covers every repository and every name, new ones included. Any other
    /// call, for an unknown name or a repository the caller may not read (`prepare` is not
    /// read), is answered where it arrived, on the unknown-name path, so that nothing about
    /// the name's owners, holders or state can tell the two apart.
    fn routable(&self, ctx: &CallContext, name: &str, prepares: bool) -> bool {
        match &ctx.caller {
            crate::Caller::Local => true,
            crate::Caller::User(principal) if prepares => principal.prepare,
            _ if prepares => false,
            caller => {
                gitstore::RepoName::parse(name).is_ok_and(|repo| self.inner.may_read(caller, &repo))
            }
        }
    }

    /// Whether a call another replica forwarded here should be answered by its owners, and
    /// if so whether this one cannot (it does not hold the repository yet, or has no index
    /// of it for a call that reads one): `Some(reason)` to refuse it as the routing's own
    /// "try another owner". A call its caller may not route (see [`Service::route_call`]) is
    /// answered, on the unknown-name path, like any other.
    pub fn forwarded_refusal(
        &self,
        ctx: &CallContext,
        repo: &str,
        call: RoutedCall,
        index_optional: bool,
    ) -> Option<ForwardedRefusal> {
        let needs_index = call.reads_index;
        let name = self.unalias(ctx, repo.to_owned());
        if !self.routable(ctx, &name, call.prepares) {
            return None;
        }
        if !self.holds(&name) {
            return Some(ForwardedRefusal::NotHeld);
        }
        (needs_index && !index_optional && !self.index_serves(&name))
            .then_some(ForwardedRefusal::NotIndexed)
    }

    /// [`Service::serves_repo`] for a real name.
    fn serves(&self, name: &str, needs_index: bool) -> bool {
        self.holds(name) && (!needs_index || self.index_serves(name))
    }

    /// [`Service::route`] for a call that does (`needs_index`) or does not read the search
    /// index: an owner that holds the repository but has no usable index of it yet sends a
    /// call that needs one to the other owners, as one that does not hold it sends every
    /// call. [`Service::serves_repo`] then tells whether it could still answer here if they
    /// cannot (a "not indexed" answer beats none).
    ///
    /// Access is decided first: a call its caller may not route (an unknown name, a
    /// private repository the caller may not read) is answered here, on the unknown-name
    /// path, in every cluster state.
    pub fn route_call(&self, ctx: &CallContext, repo: &str, call: RoutedCall) -> Route {
        let needs_index = call.reads_index;
        let Some(placement) = self.inner.placement.get() else {
            return Route::Here;
        };
        let name = self.unalias(ctx, repo.to_owned());
        if !self.routable(ctx, &name, call.prepares) {
            return Route::Here;
        }
        let owners = placement.owners(&name);
        if !owned_by(&owners, placement.self_url()) {
            return Route::Elsewhere(owners);
        }
        let others: Vec<String> = owners
            .into_iter()
            .filter(|owner| owner != placement.self_url())
            .collect();
        if others.is_empty() || self.serves(&name, needs_index) {
            Route::Here
        } else {
            Route::Elsewhere(others)
        }
    }

    /// Whether this replica has an index of `name` (a real name) that a search can use: one
    /// whose commit it can lease (as `RepoCall::targets` does). Without search at all, every
    /// replica answers alike: counted as served; so is a name no mirror here answers for
    /// (unknown: answered here, as unknown).
    ///
    /// Asked by the routing on an async worker: the lease never walks the history (issue
    /// 42 point 7). A commit only the retention walk could vouch for counts as served; the
    /// call's own lease, on the blocking pool, then decides.
    fn index_serves(&self, name: &str) -> bool {
        let Ok(indexes) = self.inner.indexes() else {
            return true;
        };
        let Ok(repo) = gitstore::RepoName::parse(name) else {
            return true;
        };
        if self.inner.store.branch_heads(&repo).is_err() {
            return true;
        }
        indexes.indexed_commit(name).is_some_and(|commit| {
            self.inner
                .store
                .lease_revision_inline(&repo, Some(&commit))
                .is_ok()
        })
    }
}

impl Service {
    /// Whether this replica keeps a synced copy of the repository `repo` names (an alias is
    /// replaced first), at the head the cluster recorded or still following it (a read on
    /// the blocking pool waits for that follow): the last resort of a call no owner
    /// answered. Unlike [`Service::serves_repo`], an unknown name does not count: whether it
    /// is unknown is for its owners to say.
    pub fn has_copy(&self, ctx: &CallContext, repo: &str) -> bool {
        let name = self.unalias(ctx, repo.to_owned());
        gitstore::RepoName::parse(&name)
            .is_ok_and(|repo| self.inner.store.branch_heads(&repo).is_ok())
    }
}
