//! Cluster mode's wiring for `csg serve` (issue 31): the replica joins the membership, the
//! service learns where repositories are served, and the router forwards what is not served
//! here. Without `--database` none of this runs.

use crate::setting::Settings;
use anyhow::{Context, Result};
use std::sync::Arc;
use std::time::Duration;

/// How long one owner gets to answer a forwarded call before the next owner is tried. A
/// replica that died refuses connections at once; this bounds one that hangs.
const FORWARD_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// This replica's part in the cluster.
pub struct Replica {
    membership: cluster::Membership,
    routing: httpserver::ClusterRouting,
}

/// The service's view of the membership: who owns a repository.
struct Placement {
    membership: cluster::Membership,
    self_url: String,
}

impl service::Placement for Placement {
    fn owners(&self, repo: &str) -> Vec<String> {
        self.membership
            .view()
            .owners(repo)
            .into_iter()
            .map(|url| url.as_str().to_owned())
            .collect()
    }

    fn self_url(&self) -> &str {
        &self.self_url
    }

    fn members(&self) -> service::Membership {
        let view = self.membership.view();
        service::Membership {
            members: view
                .members()
                .iter()
                .map(|member| service::Member {
                    node_url: member.node_url.as_str().to_owned(),
                    last_heartbeat: member.last_heartbeat,
                    live: member.live,
                })
                .collect(),
            database_reachable: view.database_reachable(),
            draining: view.draining(),
        }
    }
}

impl Replica {
    /// Joins the cluster whose database `settings` name (`None` without `--database`), and
    /// tells `service` where repositories are served.
    pub async fn join(settings: &Settings, service: &service::Service) -> Result<Option<Self>> {
        let Some(url) = settings.database.clone() else {
            return Ok(None);
        };
        // `check_cluster` made sure both are there.
        let node_url = settings
            .node_url
            .clone()
            .context("cluster mode needs --node-url")?;
        let secret = settings
            .cluster_secret
            .clone()
            .context("cluster mode needs CSG_CLUSTER_SECRET")?;
        let node_url = cluster::NodeUrl::parse(&node_url)
            .map_err(|error| anyhow::anyhow!("invalid --node-url (CSG_NODE_URL): {error}"))?;
        let config = cluster::ClusterConfig::new(node_url.clone());
        // The heartbeat gets a connection of its own: behind the stores' slow calls it could
        // miss its lease, and the others would take this replica for dead.
        let membership = tokio::task::spawn_blocking(move || {
            let options = metadb::Options {
                connections: 1,
                ..metadb::Options::default()
            };
            let db = metadb::Database::connect(url.expose(), options)
                .context("cannot open the cluster's metadata database (--database)")?;
            cluster::Membership::join(db, config).context("cannot join the cluster")
        })
        .await
        .context("joining the cluster stopped")??;
        service.set_placement(Arc::new(Placement {
            membership: membership.clone(),
            self_url: node_url.as_str().to_owned(),
        }));
        let view = membership.view();
        crate::progress(&format!(
            "joined the cluster as {} ({} live replicas)",
            node_url,
            view.live().len()
        ));
        Ok(Some(Self {
            membership,
            routing: httpserver::ClusterRouting {
                secret: secret.expose().to_owned(),
                attempt_timeout: FORWARD_ATTEMPT_TIMEOUT,
            },
        }))
    }

    /// `app` with calls for other replicas' repositories forwarded.
    pub fn route(&self, app: axum::Router, service: service::Service) -> Result<axum::Router> {
        httpserver::with_cluster_routing(app, service, self.routing.clone())
            .map_err(|error| anyhow::anyhow!("{error}"))
    }

    /// Shutting down: the others take this replica's repositories over at once instead of
    /// after its lease runs out.
    pub async fn leave(self) {
        let membership = self.membership;
        match tokio::task::spawn_blocking(move || membership.leave()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "leaving the cluster failed; the others will notice after the lease")
            }
            Err(error) => tracing::warn!(%error, "leaving the cluster stopped"),
        }
    }
}
