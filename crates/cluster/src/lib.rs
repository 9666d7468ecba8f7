//! Cluster mode's membership and ownership (issue 31): which replicas are alive, and which of
//! them own each repository.
//!
//! - **Membership.** Each replica ([`Membership::join`]) keeps a row in the `csg_members` table
//!   of the shared PostgreSQL database (through [`metadb`]) and heartbeats it every
//!   [`ClusterConfig::heartbeat_every`]. A member whose last heartbeat is older than
//!   [`ClusterConfig::lease`] is dead. Heartbeats are written with the database's `now()` and
//!   liveness is decided by the database's `now()`, never a replica's own clock, so clock skew
//!   between replicas cannot make a member look dead. Joins, drains and leaves are announced
//!   on the metadb topic `cluster` and seen by every replica at once; a death is seen when each
//!   replica re-reads the members, at every heartbeat.
//! - **Ownership.** Each repository has [`ClusterConfig::owners_per_repo`] owners, chosen by
//!   rendezvous hashing ([`owners`]) over the live members that are not draining. The hash is
//!   fixed forever, so replicas of different versions agree.
//! - **The view.** The membership thread publishes a [`ClusterView`] (members, owners,
//!   generation, whether the database answers) that calls load without a lock, and calls the
//!   subscribers ([`Membership::subscribe`]) when the live set changes.
//! - **Outages.** While PostgreSQL is unreachable the view keeps the last membership and the
//!   thread keeps trying to heartbeat; after a lease without one it says
//!   [`ClusterView::database_reachable`] `false` (the others may then count this replica dead
//!   and take over its repositories, while it keeps serving what it holds). When the database
//!   answers again the heartbeats resume by themselves; no new join is needed.
//! - **No flap after an outage.** During an outage every member's heartbeats lapse by the
//!   database's clock, so the first replica whose heartbeat gets through would find the others
//!   dead and own everything alone until they heartbeat again. So once any of this replica's
//!   heartbeats has failed, the members live in its last view before the failure stay live in
//!   its views until a full lease has passed, by the database's clock, since its first
//!   heartbeat that got through again (the first heartbeat written at or after that time ends
//!   the grace). The database's clock, because the lapse is measured on it: by then every
//!   member that is alive has heartbeaten again, while one that died meanwhile is seen dead.
//!   Members that are new join the live set at once; a member that leaves (its row is deleted)
//!   or drains is honoured at once. The lease must exceed the time the others take to
//!   reconnect (metadb retries at most once a second) plus a heartbeat period, which the
//!   defaults (10 s, 2 s) leave room for.
//!
//! Plain threads, no async runtime: usable from anywhere.

mod config;
mod error;
mod membership;
mod node_url;
mod rendezvous;
mod store;
mod view;

pub use config::ClusterConfig;
pub use error::Error;
pub use membership::Membership;
pub use node_url::NodeUrl;
pub use rendezvous::owners;
pub use view::{ClusterView, Member};
