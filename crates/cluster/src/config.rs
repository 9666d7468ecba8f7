//! How a replica takes part in the cluster.

use std::time::Duration;

use crate::{Error, NodeUrl};

/// How a replica takes part in the cluster. Every replica should use the same `lease` and
/// `owners_per_repo` (each computes owners itself, and they agree only on the same settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// This replica's URL as the others reach it.
    pub node_url: NodeUrl,
    /// How often this replica writes its heartbeat and re-reads the members. Default 2 s.
    pub heartbeat_every: Duration,
    /// A member whose last heartbeat is older than this, by the database's clock, is dead.
    /// At least twice `heartbeat_every`, so that one late heartbeat does not kill a member.
    /// Default 10 s.
    pub lease: Duration,
    /// How many members own each repository (fewer while fewer members are live). Default 2.
    pub owners_per_repo: usize,
    /// A member dead for this long is deleted from the table, so that replicas whose address
    /// changed do not pile up; it joins again by itself if it comes back. Default 24 h.
    pub forget_after: Duration,
}

impl ClusterConfig {
    /// The default settings for the replica at `node_url`.
    pub fn new(node_url: NodeUrl) -> ClusterConfig {
        ClusterConfig {
            node_url,
            heartbeat_every: Duration::from_secs(2),
            lease: Duration::from_secs(10),
            owners_per_repo: 2,
            forget_after: Duration::from_secs(24 * 60 * 60),
        }
    }

    /// Refuses settings that contradict each other.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let invalid = |text: String| Err(Error::InvalidConfig(text));
        if self.heartbeat_every < Duration::from_millis(10) {
            return invalid(format!(
                "the heartbeat period {:?} is shorter than 10 ms; the default is 2 s",
                self.heartbeat_every
            ));
        }
        if self.lease < self.heartbeat_every * 2 {
            return invalid(format!(
                "the lease {:?} is shorter than two heartbeat periods ({:?} each), so one late \
                 heartbeat would make a live member look dead; the defaults are a 10 s lease \
                 and a 2 s heartbeat",
                self.lease, self.heartbeat_every
            ));
        }
        if self.lease > Duration::from_secs(24 * 60 * 60) {
            return invalid(format!(
                "the lease {:?} is longer than a day; a dead member would keep its repositories \
                 that long; the default is 10 s",
                self.lease
            ));
        }
        if self.owners_per_repo == 0 {
            return invalid(
                "owners per repository is 0: every repository needs at least one owner; the \
                 default is 2"
                    .to_owned(),
            );
        }
        if self.forget_after < self.lease {
            return invalid(format!(
                "dead members are forgotten after {:?}, before their lease of {:?} runs out; \
                 forget them after a day (the default) or more",
                self.forget_after, self.lease
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_and_contradictions_are_refused() {
        let base = ClusterConfig::new(NodeUrl::parse("http://a:1").unwrap());
        base.check().unwrap();
        let bad = [
            ClusterConfig {
                heartbeat_every: Duration::from_millis(1),
                ..base.clone()
            },
            ClusterConfig {
                lease: Duration::from_secs(3),
                ..base.clone()
            },
            ClusterConfig {
                lease: Duration::from_secs(100_000),
                forget_after: Duration::from_secs(200_000),
                ..base.clone()
            },
            ClusterConfig {
                owners_per_repo: 0,
                ..base.clone()
            },
            ClusterConfig {
                forget_after: Duration::from_secs(5),
                ..base.clone()
            },
        ];
        for config in bad {
            let e = config.check().unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
            assert!(e.to_string().contains("default"), "{e}");
        }
    }
}
