//! Cluster mode's wiring for `csg serve` (issue 31): the replica joins the membership, the
//! service learns where repositories are served, and the router forwards what is not served
//! here. Without `--database` none of this runs.

use crate::setting::Settings;
use anyhow::{Context, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How long one owner gets to answer a forwarded call before the next owner is tried. A
/// replica that died refuses connections at once; this bounds one that hangs.
const FORWARD_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// This replica's part in the cluster.
pub struct Replica {
    membership: cluster::Membership,
    routing: httpserver::ClusterRouting,
}

/// The cluster's TLS of `settings` (O-10), its files read and checked; `None` when none of
/// `--cluster-tls-cert`, `--cluster-tls-key`, `--cluster-ca` or `--cluster-mtls` is given.
fn cluster_tls(settings: &Settings) -> Result<Option<httpserver::ClusterTls>> {
    let files = httpserver::ClusterTlsFiles {
        cert: settings.cluster_tls_cert.clone(),
        key: settings.cluster_tls_key.clone(),
        ca: settings.cluster_ca.clone(),
        mutual: settings.cluster_mtls,
    };
    if files.cert.is_none() && files.key.is_none() && files.ca.is_none() && !files.mutual {
        return Ok(None);
    }
    httpserver::ClusterTls::load(&files)
        .map(Some)
        .map_err(|error| anyhow::anyhow!("cannot set up TLS between the replicas: {error}"))
}

/// The change topic on which a replica announces a server-plugin reload to the others.
const PLUGINS_TOPIC: &str = "plugins";

/// The service's view of the membership: who owns a repository.
struct Placement {
    membership: cluster::Membership,
    self_url: String,
    /// The metadata database the announcements go through.
    db: metadb::Database,
    /// Announcements of this replica not yet heard back (`LISTEN` hears its own `NOTIFY`).
    own_announcements: Arc<AtomicUsize>,
    /// How this replica asks the others for their parts of a search over every repository.
    peers: Arc<httpserver::PeerClient>,
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

    fn announce_plugin_reload(&self) {
        self.own_announcements.fetch_add(1, Ordering::SeqCst);
        let (db, own) = (self.db.clone(), self.own_announcements.clone());
        // On a thread of its own: the caller is an async handler, the announcement a
        // database round trip.
        let spawned = std::thread::Builder::new()
            .name("csg-announce".into())
            .spawn(move || {
                let sent = db.run(|client| {
                    let mut tx = client.transaction()?;
                    metadb::Database::notify_change(&mut tx, PLUGINS_TOPIC)?;
                    tx.commit()
                });
                if let Err(error) = sent {
                    own.fetch_sub(1, Ordering::SeqCst);
                    tracing::warn!(%error, "the other replicas were not told to reload their server plugins; reload them one by one");
                }
            });
        if spawned.is_err() {
            self.own_announcements.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn peers(&self) -> Option<Arc<dyn service::Peers>> {
        Some(self.peers.clone())
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
        // A `log` cursor one replica hands out goes on on every other (issue 42).
        service.set_cursor_secret(secret.expose().as_bytes());
        let node_url = cluster::NodeUrl::parse(&node_url)
            .map_err(|error| anyhow::anyhow!("invalid --node-url (CSG_NODE_URL): {error}"))?;
        // Read before joining: a bad certificate stops the start before the others route here.
        let tls = cluster_tls(settings)?;
        let config = cluster::ClusterConfig::new(node_url.clone());
        // The heartbeat gets a connection of its own: behind the stores' slow calls it could
        // miss its lease, and the others would take this replica for dead.
        let (membership, db) = tokio::task::spawn_blocking(move || {
            let options = metadb::Options {
                connections: 1,
                ..metadb::Options::default()
            };
            let db = metadb::Database::connect(url.expose(), options)
                .context("cannot open the cluster's metadata database (--database)")?;
            let membership =
                cluster::Membership::join(db.clone(), config).context("cannot join the cluster")?;
            anyhow::Ok((membership, db))
        })
        .await
        .context("joining the cluster stopped")??;
        let own_announcements = Arc::new(AtomicUsize::new(0));
        // Another replica's reload (issue 31 point 5): reload here too, off the listener
        // thread. This replica's own announcement comes back once and is skipped.
        let (runtime, reloading, own) = (
            tokio::runtime::Handle::current(),
            service.clone(),
            own_announcements.clone(),
        );
        db.subscribe(PLUGINS_TOPIC, move || {
            let skip = own
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            // Also called after every reconnect of the listener (an announcement may have been
            // missed): a replica without server plugins has nothing to do either way.
            if skip || !reloading.server_plugins_enabled() {
                return;
            }
            let service = reloading.clone();
            runtime.spawn(async move {
                if let Err(error) = service.reload_server_plugins_here().await {
                    tracing::warn!(%error, "reloading server plugins as another replica asked failed");
                }
            });
        });
        let routing = httpserver::ClusterRouting {
            secret: secret.expose().to_owned(),
            attempt_timeout: FORWARD_ATTEMPT_TIMEOUT,
            tls,
        };
        let peers =
            httpserver::PeerClient::new(&routing).map_err(|error| anyhow::anyhow!("{error}"))?;
        service.set_placement(Arc::new(Placement {
            membership: membership.clone(),
            self_url: node_url.as_str().to_owned(),
            db,
            own_announcements,
            peers: Arc::new(peers),
        }));
        let view = membership.view();
        crate::progress(&format!(
            "joined the cluster as {} ({} live replicas)",
            node_url,
            view.live().len()
        ));
        Ok(Some(Self {
            membership,
            routing,
        }))
    }

    /// What the listener serves HTTPS with (`--cluster-tls-cert`); `None`: plain HTTP.
    pub fn server_tls(&self) -> Option<httpserver::ServerTls> {
        self.routing
            .tls
            .as_ref()
            .and_then(httpserver::ClusterTls::server)
    }

    /// `app` with calls for other replicas' repositories forwarded: the layer inside the
    /// access layer (it routes by the caller that layer established, A-7).
    pub fn route(&self, app: axum::Router, service: service::Service) -> Result<axum::Router> {
        httpserver::with_cluster_routing(app, service, self.routing.clone())
            .map_err(|error| anyhow::anyhow!("{error}"))
    }

    /// `app` (access layer included) behind the replica gate, with the cluster's own routes
    /// (search parts, the status for other replicas) beside it: the outermost layer.
    pub fn gate(&self, app: axum::Router, service: service::Service) -> Result<axum::Router> {
        httpserver::with_replica_gate(app, service, &self.routing)
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
