//! The base operations that find things out rather than read a file: `list` (S-7), `resolve`
//! (S-6), `discovery` (S-5) and `availability` (SPEC section 9).

use crate::frame::Op;
use crate::{
    AvailabilityAnswer, AvailabilityRequest, CallContext, Caller, ErrorKind, ListAnswer, ListEntry,
    ListRequest, PluginDiscovery, RepoSummary, ResolveAnswer, Service, ServiceError, permissions,
    rfc3339,
};
use gitstore::{RepoName, RepoPath};
use std::time::Instant;

impl Service {
    /// `list` (S-7): the tree below a directory, inside the registered scope.
    pub async fn list(
        &self,
        ctx: &CallContext,
        req: ListRequest,
    ) -> Result<ListAnswer, ServiceError> {
        let ListRequest {
            repo,
            revision,
            path,
            depth,
        } = req;
        self.framed_blocking(ctx, Op::LIST, repo, move |call, inner| {
            let lease = call.lease(inner, revision.as_deref())?;
            let (name, commit) = (lease.repo(), lease.commit());
            let path = RepoPath::parse(path.as_deref().unwrap_or(""))?;
            let max_depth = inner.config.max_list_depth;
            let depth = depth.unwrap_or(1);
            if depth == 0 || depth > max_depth {
                return Err(ServiceError::invalid(format!(
                    "depth must be between 1 and {max_depth}"
                )));
            }
            let (entries, truncated) = inner.store.list_tree_limited(
                name,
                commit,
                &path,
                depth,
                inner.config.max_list_entries,
            )?;
            Ok(ListAnswer {
                repo: name.to_string(),
                commit: commit.to_string(),
                path: path.to_string(),
                depth,
                entries: entries
                    .into_iter()
                    .map(|e| ListEntry {
                        path: e.path,
                        kind: e.kind.into(),
                        size: e.size,
                    })
                    .collect(),
                truncated,
            })
        })
        .await
    }

    /// `resolve` (S-6): a revision to the full SHA, or why not.
    pub async fn resolve(
        &self,
        ctx: &CallContext,
        repo: String,
        revision: String,
    ) -> Result<ResolveAnswer, ServiceError> {
        self.framed_blocking(ctx, Op::RESOLVE, repo, move |call, inner| {
            // Leased like every framed operation: the SHA answered is readable on the
            // registry snapshot it was resolved on.
            let lease = call.lease(inner, Some(&revision))?;
            Ok(ResolveAnswer {
                repo: lease.repo().to_string(),
                revision,
                commit: lease.commit().to_string(),
            })
        })
        .await
    }

    /// `discovery` (S-5): the repositories the caller may read.
    pub async fn discovery(&self, ctx: &CallContext) -> Result<Vec<RepoSummary>, ServiceError> {
        let caller = ctx.caller.clone();
        self.blocking(move |inner| {
            if caller == Caller::Anonymous && !inner.config.public_read {
                return Err(ServiceError::unauthenticated(permissions::TOKEN_NEEDED));
            }
            Ok(inner
                .store
                .repos()?
                .into_iter()
                .filter(|info| inner.may_read(&caller, &info.name))
                .map(|info| RepoSummary {
                    name: info.name.to_string(),
                    registered_path: info.registered_path.to_string(),
                    default_branch: info.default_branch,
                    indexed: inner.indexed(&info.name, info.head.as_ref()),
                    head: info.head.map(|c| c.to_string()),
                    last_sync: info.last_sync.map(rfc3339),
                    last_sync_error: info.last_error,
                })
                .collect())
        })
        .await
    }

    /// `availability` (SPEC §9): is the repository visible, does the revision resolve and is
    /// it readable. Repository-plugin discovery (`include_plugins`) joins with the plugin
    /// host.
    pub async fn availability(
        &self,
        ctx: &CallContext,
        req: AvailabilityRequest,
    ) -> Result<AvailabilityAnswer, ServiceError> {
        let AvailabilityRequest {
            repo,
            revision,
            include_plugins,
        } = req;
        self.framed_blocking(ctx, Op::AVAILABILITY, repo, move |call, inner| {
            // a repository the caller may not read is answered as an unknown one.
            let opened = match call.open(inner) {
                Ok(opened) => opened,
                Err(e) if e.kind == ErrorKind::NotFound => {
                    let name = RepoName::parse(call.repo())?;
                    return Ok(AvailabilityAnswer {
                        repo: name.to_string(),
                        visible: false,
                        revision,
                        commit: None,
                        readable: false,
                        reason: Some(gitstore::Error::UnknownRepo(name).to_string()),
                        indexed: false,
                        plugins: None,
                    });
                }
                Err(other) => return Err(other),
            };
            let name = opened.name().clone();
            let mut answer = AvailabilityAnswer {
                repo: name.to_string(),
                visible: true,
                revision: revision.clone(),
                commit: None,
                readable: false,
                reason: None,
                indexed: false,
                plugins: None,
            };
            // One lease: the answer and the plugin discovery use one registry snapshot.
            match opened.lease(inner, revision.as_deref()) {
                Ok(lease) => {
                    let commit = lease.commit();
                    answer.commit = Some(commit.to_string());
                    answer.readable = true;
                    answer.indexed = inner.indexed(&name, Some(commit));
                    if include_plugins {
                        // W-26: TIMEOUT bounds the discovery, and the wait on another
                        // request's discovery of the same commit, as it bounds enrichment.
                        let deadline = Instant::now() + inner.plugins.config.timeout;
                        answer.plugins = Some(match inner.plugin_infos(&lease, deadline) {
                            Ok(found) => PluginDiscovery::Found(found),
                            Err(why) => PluginDiscovery::Failed(why),
                        });
                    }
                }
                Err(gitstore::Error::OutsideRetention { commit, .. }) => {
                    answer.commit = Some(commit.to_string());
                    answer.reason =
                        Some(gitstore::Error::OutsideRetention { repo: name, commit }.to_string());
                }
                Err(other) => answer.reason = Some(other.to_string()),
            }
            Ok(answer)
        })
        .await
    }
}
