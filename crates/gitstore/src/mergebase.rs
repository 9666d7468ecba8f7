//! The merge base of two commits, for a comparison `BASE...HEAD` (issue 34's compare page):
//! what `git diff BASE...HEAD` diffs from. Both sides are walked together, newest committer
//! date first, each commit marked with the sides it is reachable from (git's
//! `paint_down_to_common`); the first commit reached from both is the answer. With clock
//! skew or criss-cross merges git may pick another of several common ancestors.

use crate::objects::{odb, to_commit_id, to_oid};
use crate::{CommitId, Error, GitStore, RepoName};
use gix::ObjectId;
use std::collections::{BinaryHeap, HashMap};

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
    if a == b {
        return Ok(Some(a));
    }
    let time = |id: ObjectId| -> Result<i64, Error> {
        Ok(repo
            .find_commit(id)
            .map_err(odb)?
            .time()
            .map_err(odb)?
            .seconds)
    };
    let mut sides: HashMap<ObjectId, u8> = HashMap::from([(a, 1), (b, 2)]);
    let mut queue = BinaryHeap::from([(time(a)?, a), (time(b)?, b)]);
    while let Some((_, id)) = queue.pop() {
        let mine = sides.get(&id).copied().unwrap_or(0);
        if mine == 3 {
            return Ok(Some(id));
        }
        let commit = repo.find_commit(id).map_err(odb)?;
        for parent in commit.parent_ids() {
            let parent = parent.detach();
            let theirs = sides.entry(parent).or_insert(0);
            if *theirs | mine != *theirs {
                *theirs |= mine;
                queue.push((time(parent)?, parent));
            }
        }
    }
    Ok(None)
}
