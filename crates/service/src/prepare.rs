//! `prepare {repo, action, revision?}` (A-3, SPEC §9): the state-changing operations an
//! operator asks for — sync now, pin or unpin a revision, rebuild the search index. Kept
//! apart from the read operations because it needs the `prepare` capability, which plugins
//! never grant.

use crate::frame::Op;
use crate::{BuildProgress, CallContext, Service, ServiceError};
use gitstore::RepoName;
use serde::Serialize;

/// What `prepare` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepareAction {
    /// Fetch now, then index the new head (incrementally) and prepare its plugins.
    Sync,
    /// Keep `revision` readable whatever retention says (G-5).
    Pin,
    /// Drop a pin.
    Unpin,
    /// Rebuild the head's search index from scratch (S-3).
    Reindex,
}

impl PrepareAction {
    /// Parses the wire name; the error lists the valid ones.
    pub fn parse(text: &str) -> Result<Self, ServiceError> {
        match text {
            "sync" => Ok(Self::Sync),
            "pin" => Ok(Self::Pin),
            "unpin" => Ok(Self::Unpin),
            "reindex" => Ok(Self::Reindex),
            other => Err(ServiceError::invalid(format!(
                "unknown prepare action `{}`; use one of sync, pin, unpin, reindex",
                other.chars().take(40).collect::<String>()
            ))),
        }
    }
}

/// `prepare {repo, action, revision?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareRequest {
    pub repo: String,
    pub action: PrepareAction,
    /// Required by `pin` and `unpin`; ignored by the others (they act on the head).
    pub revision: Option<String>,
}

/// What `prepare` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrepareAnswer {
    pub repo: String,
    pub action: PrepareAction,
    /// The commit acted on (the head for sync and reindex), full SHA.
    pub commit: Option<String>,
    /// The index built by `sync` or `reindex`.
    pub index: Option<IndexReport>,
}

/// A finished index build, for callers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexReport {
    /// Files in the index (path-only ones included).
    pub documents: u64,
    /// Files reused from the previous index without reading Git.
    pub reused: u64,
    /// Files read from Git.
    pub read: u64,
    /// Files indexed by path only (binary, not UTF-8, or over the size limit).
    pub path_only: u64,
    /// Bytes on disk.
    pub bytes: u64,
    pub elapsed_ms: u64,
    /// The index was already current (sync with an unchanged head).
    pub unchanged: bool,
    /// Files whose indexed text a server plugin's `on_source_file` replaced (P-21).
    pub transformed: u64,
    /// Files a server plugin's `on_source_file` left out of the index.
    pub skipped_by_plugins: u64,
    /// Server-plugin file → files its `on_source_file` failed on in this build (that file's
    /// transform left out, the others' kept: P-7).
    pub plugin_failures: std::collections::BTreeMap<String, u64>,
}

impl From<crate::BuildStats> for IndexReport {
    fn from(stats: crate::BuildStats) -> Self {
        Self {
            documents: stats.documents,
            reused: stats.reused,
            read: stats.read,
            path_only: stats.path_only,
            bytes: stats.bytes,
            elapsed_ms: stats.elapsed.as_millis() as u64,
            unchanged: stats.skipped_same,
            transformed: stats.transformed,
            skipped_by_plugins: stats.skipped,
            plugin_failures: stats.transform_failures_by_step,
        }
    }
}

/// What `POST /sourcegraph/api/repos` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddRepoAnswer {
    pub repo: String,
    /// False when the same registration existed already (the call is idempotent).
    pub created: bool,
    /// The default branch's head after the first sync, full SHA.
    pub head: Option<String>,
    pub private: bool,
    /// The index-branch patterns (S-8) besides the default branch; empty: none.
    pub index_branches: Vec<String>,
    /// The head's index; `None` when the build failed (the log says why; the background
    /// round retries).
    pub index: Option<IndexReport>,
}

/// Whether `source` names a remote the service may fetch for an API caller: a URL with a
/// network scheme or the scp-like `user@host:path`. Local paths and `file://` would let a
/// caller read any Git repository on the server's disk; they are registered there, with
/// `csg repo add`.
fn remote_source(source: &str) -> Result<(), ServiceError> {
    let network_scheme = ["https://", "http://", "ssh://", "git://"]
        .iter()
        .any(|scheme| {
            source
                .get(..scheme.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(scheme))
        });
    let scp_like = source
        .split_once(':')
        .is_some_and(|(host, _)| host.contains('@') && !host.contains('/'));
    if network_scheme || scp_like {
        Ok(())
    } else {
        Err(ServiceError::invalid(
            "`source` must be a remote Git URL (https://, http://, ssh://, git:// or \
             user@host:path); local paths and file:// are registered on the server with \
             `csg repo add`",
        ))
    }
}

impl Service {
    /// Registers a remote repository for a caller with the prepare capability (A-3, SPEC
    /// §9), fetches it and indexes its head. Registering the same again answers the existing
    /// registration. When the first fetch of a new registration fails, nothing stays
    /// registered and the error says why.
    pub async fn add_repo(
        &self,
        ctx: &CallContext,
        req: crate::RegisterRequest,
    ) -> Result<AddRepoAnswer, ServiceError> {
        self.add_repo_with(ctx, req, None).await
    }

    /// [`Service::add_repo`] that also sets the repository's index-branch patterns (S-8:
    /// branch names or globs such as `release/*`, at most [`gitstore::MAX_INDEX_BRANCHES`];
    /// `None` leaves them as they are, empty means the default branch only). The patterns
    /// are checked before anything is registered; given for a registration that exists
    /// already, they replace its patterns.
    pub async fn add_repo_with(
        &self,
        ctx: &CallContext,
        req: crate::RegisterRequest,
        index_branches: Option<Vec<String>>,
    ) -> Result<AddRepoAnswer, ServiceError> {
        self.inner
            .check_prepare(&ctx.caller, "registering a repository")?;
        remote_source(&req.source)?;
        let name = RepoName::parse(&req.name)?;
        if let Some(patterns) = &index_branches {
            gitstore::check_index_branches(patterns)?;
        }
        let created = self.register(req).await?;
        if let Some(patterns) = index_branches {
            let repo = name.clone();
            let stored = self
                .blocking(move |inner| Ok(inner.store.set_index_branches(&repo, &patterns)?))
                .await;
            if let Err(error) = stored {
                if created && let Err(undo) = self.unregister(name.to_string()).await {
                    tracing::warn!(repo = %name, error = %undo, "a failed registration stayed");
                }
                return Err(error);
            }
        }
        let synced = match self.sync(name.to_string()).await {
            Ok(synced) => synced,
            Err(error) if created => {
                if let Err(undo) = self.unregister(name.to_string()).await {
                    tracing::warn!(repo = %name, error = %undo, "a failed registration stayed");
                }
                return Err(ServiceError {
                    kind: error.kind,
                    message: format!("{error}; nothing was registered"),
                });
            }
            Err(error) => return Err(error),
        };
        let index = match self.index(name.to_string(), |_| {}).await {
            Ok(stats) => Some(stats.into()),
            Err(error) => {
                tracing::warn!(repo = %name, %error, "indexing a new registration failed");
                None
            }
        };
        self.prepare_plugins_in_background(&name);
        self.warm_index_branches_in_background(&name);
        let info = self
            .blocking({
                let name = name.clone();
                move |inner| Ok(inner.store.repo(&name)?)
            })
            .await?;
        Ok(AddRepoAnswer {
            repo: name.to_string(),
            created,
            head: synced.head,
            private: info.private,
            index_branches: info.index_branches,
            index,
        })
    }

    /// Runs one `prepare` action; `progress` sees index-build progress (O-5).
    pub async fn prepare(
        &self,
        ctx: &CallContext,
        req: PrepareRequest,
        mut progress: impl FnMut(BuildProgress) + Send + 'static,
    ) -> Result<PrepareAnswer, ServiceError> {
        let PrepareRequest {
            repo,
            action,
            revision,
        } = req;
        self.framed(ctx, Op::PREPARE, repo, move |call| async move {
            // an operator capability over every repository; it does not grant read.
            let opened = call.open(&self.inner)?;
            let name = opened.name().clone();
            let answer = |commit: Option<String>, index: Option<IndexReport>| PrepareAnswer {
                repo: name.to_string(),
                action,
                commit,
                index,
            };
            match action {
                PrepareAction::Sync => {
                    // G-3: a successful sync triggers indexing, then plugin preparation (W-31).
                    let outcome = self.sync(name.to_string()).await?;
                    let stats = self.index(name.to_string(), progress).await?;
                    self.prepare_plugins_in_background(&name);
                    self.warm_index_branches_in_background(&name);
                    Ok(answer(outcome.head, Some(stats.into())))
                }
                PrepareAction::Reindex => {
                    let repo = name.to_string();
                    let (commit, stats) = self
                        .blocking(move |inner| {
                            let stats = inner.index(&repo, true, &mut progress)?;
                            let commit = inner.indexes()?.current(&repo).map(|info| info.commit);
                            Ok((commit, stats))
                        })
                        .await?;
                    Ok(answer(commit, Some(stats.into())))
                }
                PrepareAction::Pin | PrepareAction::Unpin => {
                    let Some(revision) = revision else {
                        return Err(ServiceError::invalid(
                            "`revision` is required to pin or unpin: give a branch, tag or SHA",
                        ));
                    };
                    let pin = action == PrepareAction::Pin;
                    let commit = self
                        .blocking(move |inner| {
                            let lease = opened.lease(inner, Some(&revision))?;
                            if pin {
                                inner.store.pin(lease.repo(), lease.commit())?;
                            } else {
                                inner.store.unpin(lease.repo(), lease.commit())?;
                            }
                            Ok(lease.commit().clone())
                        })
                        .await?;
                    Ok(answer(Some(commit.to_string()), None))
                }
            }
        })
        .await
    }
}

impl Service {
    /// S-8 after a sync and index build: warm the overlays of the indexed branches in the
    /// background ([`Service::warm_index_branches`]), so the answer does not wait for them.
    fn warm_index_branches_in_background(&self, name: &RepoName) {
        let (service, repo) = (self.clone(), name.to_string());
        tokio::spawn(async move { service.warm_index_branches(repo).await });
    }

    /// W-31 after a sync: prepare the plugins of the new heads in the background, so the
    /// caller's answer does not wait for discovery and compiles; a failure only costs the
    /// first enriched read its discovery.
    fn prepare_plugins_in_background(&self, name: &RepoName) {
        let (service, repo) = (self.clone(), name.to_string());
        tokio::spawn(async move {
            if let Err(error) = service.prepare_plugins(repo.clone()).await {
                tracing::debug!(%repo, %error, "plugin preparation skipped");
            }
        });
    }
}
