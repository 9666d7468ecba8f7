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
