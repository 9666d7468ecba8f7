//! One replica's picture of the cluster at one moment.

use std::time::SystemTime;

use crate::NodeUrl;
use crate::rendezvous;

/// One row of the members table, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member's URL, exactly as it wrote it.
    pub node_url: NodeUrl,
    /// When this incarnation of the member joined, by the database's clock.
    pub started_at: SystemTime,
    /// Its last heartbeat, by the database's clock.
    pub last_heartbeat: SystemTime,
    /// It asked to be drained: it owns no repository but serves until it leaves.
    pub draining: bool,
    /// Its last heartbeat was within the lease when the row was read, by the database's clock
    /// (so clock skew between replicas cannot make a member look dead or alive); or, in the
    /// lease after this replica's heartbeats got through again after failing, it was live
    /// before they failed (see the crate docs, "No flap after an outage").
    pub live: bool,
}

/// One replica's picture of the cluster: the members as last read and the ownership they
/// imply. Immutable; [`crate::Membership::view`] hands out the current one without a lock.
#[derive(Debug, Clone)]
pub struct ClusterView {
    self_url: NodeUrl,
    members: Vec<Member>,
    live: Vec<NodeUrl>,
    assignable: Vec<NodeUrl>,
    owners_per_repo: usize,
    generation: u64,
    database_reachable: bool,
    last_heartbeat_ok: Option<SystemTime>,
}

impl ClusterView {
    /// A fixed view of `members` (any order) as `self_url` would see it: generation 1, the
    /// database reachable, no heartbeat written. For tests and tools that need ownership
    /// without a database; a running replica's views come from [`crate::Membership::view`].
    pub fn from_members(
        self_url: NodeUrl,
        members: Vec<Member>,
        owners_per_repo: usize,
    ) -> ClusterView {
        ClusterView::new(self_url, members, owners_per_repo, 1, true, None)
    }

    /// A view of `members` (any order) seen by `self_url`.
    pub(crate) fn new(
        self_url: NodeUrl,
        mut members: Vec<Member>,
        owners_per_repo: usize,
        generation: u64,
        database_reachable: bool,
        last_heartbeat_ok: Option<SystemTime>,
    ) -> ClusterView {
        members.sort_by(|a, b| a.node_url.cmp(&b.node_url));
        let live: Vec<NodeUrl> = members
            .iter()
            .filter(|m| m.live)
            .map(|m| m.node_url.clone())
            .collect();
        let serving: Vec<NodeUrl> = members
            .iter()
            .filter(|m| m.live && !m.draining)
            .map(|m| m.node_url.clone())
            .collect();
        // With every live member draining, they keep their repositories rather than leave
        // them to nobody (a lone replica draining before a restart).
        let assignable = if serving.is_empty() {
            live.clone()
        } else {
            serving
        };
        ClusterView {
            self_url,
            members,
            live,
            assignable,
            owners_per_repo,
            generation,
            database_reachable,
            last_heartbeat_ok,
        }
    }

    /// The same members with another generation and database state.
    pub(crate) fn with_state(
        &self,
        generation: u64,
        database_reachable: bool,
        last_heartbeat_ok: Option<SystemTime>,
    ) -> ClusterView {
        ClusterView {
            generation,
            database_reachable,
            last_heartbeat_ok,
            ..self.clone()
        }
    }

    /// What decides ownership and the generation: the live members and whether each drains.
    pub(crate) fn live_set(&self) -> Vec<(&NodeUrl, bool)> {
        self.members
            .iter()
            .filter(|m| m.live)
            .map(|m| (&m.node_url, m.draining))
            .collect()
    }

    /// This replica's URL.
    pub fn self_url(&self) -> &NodeUrl {
        &self.self_url
    }

    /// This replica's own row as last read; `None` once it has left (or before its row was
    /// read back, which `join` does before returning).
    pub fn self_member(&self) -> Option<&Member> {
        self.members.iter().find(|m| m.node_url == self.self_url)
    }

    /// Whether this replica is draining (it asked to; see [`crate::Membership::drain`]).
    pub fn draining(&self) -> bool {
        self.self_member().is_some_and(|m| m.draining)
    }

    /// Every row of the members table, the dead ones included, ordered by URL.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The live members, draining ones included, ordered by URL.
    pub fn live(&self) -> &[NodeUrl] {
        &self.live
    }

    /// The members repositories are assigned to, ordered by URL: the live ones that are not
    /// draining, or, if every live member drains, all the live ones.
    pub fn assignable(&self) -> &[NodeUrl] {
        &self.assignable
    }

    /// How many owners each repository has when enough members are live.
    pub fn owners_per_repo(&self) -> usize {
        self.owners_per_repo
    }

    /// The owners of the repository named `repo` (its name as the registry stores it), the
    /// preferred one first: [`crate::owners`] over [`Self::assignable`]. Empty only when no
    /// member is live.
    pub fn owners(&self, repo: &str) -> Vec<NodeUrl> {
        rendezvous::owners(repo, &self.assignable, self.owners_per_repo)
    }

    /// Whether this replica is among the owners of `repo`.
    pub fn owns(&self, repo: &str) -> bool {
        self.owners(repo).contains(&self.self_url)
    }

    /// 1 for the view `join` makes, then one more each time the live set changes: a member
    /// joins, dies, leaves, comes back, or starts draining. Equal generations of one
    /// `Membership` mean equal ownership; generations of two replicas are not comparable.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// False once this replica's heartbeat could not be written for longer than the lease
    /// (PostgreSQL unreachable). The members are then those last read: the others may already
    /// count this replica as dead and serve its repositories, while it keeps serving what it
    /// holds. True again after the next heartbeat that gets through.
    pub fn database_reachable(&self) -> bool {
        self.database_reachable
    }

    /// When this replica's last heartbeat was written, by the database's clock.
    pub fn last_heartbeat_ok(&self) -> Option<SystemTime> {
        self.last_heartbeat_ok
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn member(url: &str, live: bool, draining: bool) -> Member {
        Member {
            node_url: NodeUrl::parse(url).unwrap(),
            started_at: SystemTime::UNIX_EPOCH,
            last_heartbeat: SystemTime::UNIX_EPOCH,
            draining,
            live,
        }
    }

    fn urls(list: &[NodeUrl]) -> Vec<&str> {
        list.iter().map(NodeUrl::as_str).collect()
    }

    #[test]
    fn dead_and_draining_members_own_nothing() {
        let me = NodeUrl::parse("http://c:1").unwrap();
        let view = ClusterView::from_members(
            me.clone(),
            vec![
                member("http://c:1", true, false),
                member("http://b:1", true, true),
                member("http://a:1", false, false),
                member("http://d:1", true, false),
            ],
            2,
        );
        let all: Vec<&str> = view.members().iter().map(|m| m.node_url.as_str()).collect();
        assert_eq!(
            all,
            ["http://a:1", "http://b:1", "http://c:1", "http://d:1"]
        );
        assert_eq!(view.generation(), 1);
        assert!(view.database_reachable());
        assert_eq!(
            urls(view.live()),
            ["http://b:1", "http://c:1", "http://d:1"]
        );
        assert_eq!(urls(view.assignable()), ["http://c:1", "http://d:1"]);
        for i in 0..50 {
            let owners = view.owners(&format!("repo{i}"));
            assert_eq!(urls(&owners).len(), 2);
            assert!(view.owns(&format!("repo{i}")));
        }
        assert!(!view.draining());
        assert_eq!(view.self_member().map(|m| m.live), Some(true));
    }

    #[test]
    fn when_everyone_drains_the_live_members_keep_their_repositories() {
        let view = ClusterView::from_members(
            NodeUrl::parse("http://a:1").unwrap(),
            vec![
                member("http://a:1", true, true),
                member("http://b:1", false, false),
            ],
            2,
        );
        assert_eq!(urls(view.assignable()), ["http://a:1"]);
        assert_eq!(urls(&view.owners("r")), ["http://a:1"]);
        assert!(view.draining());
    }
}
