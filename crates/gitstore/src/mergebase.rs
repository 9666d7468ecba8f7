//! The merge base of two commits, for a comparison `BASE...HEAD` (issue 34's compare page):
//! what `git diff BASE...HEAD` diffs from. `gix`'s port of git's `merge-base` (the best
//! common ancestor, criss-cross merges and clock skew handled as git handles them).

use crate::objects::{odb, to_commit_id, to_oid};
use crate::{CommitId, Error, GitStore, RepoName};
use gix::ObjectId;

impl GitStore {
    /// A merge base of two readable commits (`git merge-base A B`), `None` when their
    /// histories share no commit.
    pub fn merge_base(
        &self,
        name: &RepoName,
        a: &CommitId,
        b: &CommitId,
    ) -> Result<Option<CommitId>, Error> {
        let reader = self.inner.blob_reader(name, a)?;
        // The other side must be readable too.
        self.inner.blob_reader(name, b)?;
        let (a, b) = (to_oid(a)?, to_oid(b)?);
        crate::handles::with_repo(&reader.repo, |repo| {
            merge_base(repo, a, b)?
                .map(|id| to_commit_id(&id))
                .transpose()
        })
    }
}

fn merge_base(repo: &gix::Repository, a: ObjectId, b: ObjectId) -> Result<Option<ObjectId>, Error> {
    Ok(repo.merge_base(a, b).map_err(odb)?.map(|id| id.detach()))
}
