//! The crate's error.

use std::time::Duration;

/// What went wrong with cluster membership. Messages say what was wrong and what to do; a
/// database error never carries the database URL's password (see [`metadb::Error`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A node URL could not be used; nothing was contacted.
    #[error(
        "invalid node URL {given:?}: {problem}; write it as http://HOST:PORT or https://HOST:PORT, the address other replicas reach this one at"
    )]
    InvalidNodeUrl {
        /// The URL as given.
        given: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The settings contradict each other; nothing was contacted.
    #[error("invalid cluster settings: {0}")]
    InvalidConfig(String),
    /// The metadata database failed the call (unreachable, refused, timed out, a failed
    /// statement or migration).
    #[error(transparent)]
    Database(#[from] metadb::Error),
    /// This node's membership row is no longer its own: another process joined with the same
    /// node URL and took it over (or an operator deleted it).
    #[error(
        "the membership row of {0} was taken over by another process that joined with the same \
         node URL; give every replica its own node URL, and stop this process if it is an old copy"
    )]
    Superseded(String),
    /// This membership has already left the cluster; only a new [`crate::Membership::join`]
    /// makes the node a member again.
    #[error("{0} has left the cluster; join again to take part")]
    Left(String),
    /// The membership thread did not answer in time (it may be waiting on a slow database).
    #[error(
        "the cluster membership thread did not answer within {0:?}; the database may be slow \
         or a membership subscriber may be blocking: retry later"
    )]
    Timeout(Duration),
    /// The membership thread could not be started.
    #[error(
        "could not start the cluster membership thread ({0}); the process may be out of threads or memory"
    )]
    Spawn(String),
}
