//! Reads at a commit: trees, texts, bytes, file lists, commit details, diffs, blame and logs,
//! each after the scope check (G-2) and the retention check (a live lease suffices).

use super::{Inner, RepoState, View};
use crate::blobcache::{SharedBlob, TextMemo, TextRead};
use crate::handles;
use crate::objects::{self, Target, odb, to_commit_id, to_oid};
use crate::{CommitId, Error, FoundFile, RepoName, RepoPath, Text, TreeEntry};
use gix::ObjectId;
use std::sync::Arc;

impl Inner {
    fn outside_scope(state: &RepoState, path: &RepoPath) -> Error {
        Error::OutsideScope {
            repo: state.name.clone(),
            path: path.to_string(),
            scope: state.registered_path.to_string(),
        }
    }

    /// Runs `read` on the root tree of `commit` after the scope check of `path`, the
    /// retention check (a live lease suffices) and with the object lock held.
    fn with_tree<T>(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        read: impl FnOnce(&RepoState, &gix::Repository, ObjectId) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let (state, view) = self.synced(name)?;
        self.tree_in(&state, &view, to_oid(commit)?, path, read)
    }

    /// [`Inner::with_tree`] against a view already taken.
    fn tree_in<T>(
        &self,
        state: &RepoState,
        view: &View,
        id: ObjectId,
        path: &RepoPath,
        read: impl FnOnce(&RepoState, &gix::Repository, ObjectId) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if !path.is_root() && !path.is_within(&state.registered_path) {
            return Err(Self::outside_scope(state, path));
        }
        self.check_readable(state, view, &id, true)?;
        handles::with_repo(&view.repo, |repo| {
            let tree = objects::commit_tree(repo, id)?;
            read(state, repo, tree)
        })
    }

    pub(crate) fn commit_details(
        &self,
        name: &RepoName,
        commit: &CommitId,
        max_files: usize,
    ) -> Result<crate::CommitDetails, Error> {
        let (state, view) = self.synced(name)?;
        let id = to_oid(commit)?;
        self.check_readable(&state, &view, &id, true)?;
        handles::with_repo(&view.repo, |repo| {
            crate::changes::details(repo, id, &state.registered_path, max_files)
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn diff(
        &self,
        name: &RepoName,
        base: &CommitId,
        head: &CommitId,
        path: &RepoPath,
        skip: usize,
        budget: usize,
        call: &budget::Budget,
    ) -> Result<crate::DiffPage, Error> {
        let (state, view) = self.synced(name)?;
        let limit = Self::history_scope(&state, path)?;
        let (base, head) = (to_oid(base)?, to_oid(head)?);
        self.check_readable(&state, &view, &base, true)?;
        self.check_readable(&state, &view, &head, true)?;
        let page = crate::diff::Page {
            skip,
            bytes: budget,
            call,
            blobs: &self.blobs,
        };
        handles::with_repo(&view.repo, |repo| {
            crate::diff::diff(repo, base, head, limit, page)
        })
    }

    pub(crate) fn blame(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        start_line: u64,
        end_line: u64,
    ) -> Result<(Vec<crate::BlameRange>, u64), Error> {
        // Scope, retention and the text checks of a read; the text gives the line count.
        let total = self.read_text(name, commit, path)?.line_count();
        let end = end_line.min(total);
        if total == 0 || start_line > end {
            return Ok((Vec::new(), total));
        }
        let (_, view) = self.synced(name)?;
        let id = to_oid(commit)?;
        let ranges = handles::with_repo(&view.repo, |repo| {
            crate::blame::blame(repo, id, path, start_line.max(1), end)
        })?;
        Ok((ranges, total))
    }

    pub(crate) fn log(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        skip: usize,
        limit: usize,
    ) -> Result<(Vec<crate::CommitSummary>, bool), Error> {
        let (state, view) = self.synced(name)?;
        let path = Self::history_scope(&state, path)?;
        let id = to_oid(commit)?;
        self.check_readable(&state, &view, &id, true)?;
        handles::with_repo(&view.repo, |repo| {
            crate::history::log(repo, id, path, skip, limit)
        })
    }

    /// What a history query limited to `path` covers: `path` inside the registered scope, or
    /// the scope itself for the root (G-2).
    fn history_scope<'a>(state: &'a RepoState, path: &'a RepoPath) -> Result<&'a RepoPath, Error> {
        if path.is_root() {
            Ok(&state.registered_path)
        } else if path.is_within(&state.registered_path) {
            Ok(path)
        } else {
            Err(Self::outside_scope(state, path))
        }
    }

    /// A reader of `commit`'s blobs by object id (see [`crate::BlobReader`]).
    pub(crate) fn blob_reader(
        &self,
        name: &RepoName,
        commit: &CommitId,
    ) -> Result<crate::BlobReader, Error> {
        let (state, view) = self.synced(name)?;
        let id = to_oid(commit)?;
        self.check_readable(&state, &view, &id, true)?;
        Ok(crate::BlobReader {
            repo: view.repo.clone(),
        })
    }

    pub(crate) fn read_text(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
    ) -> Result<Arc<Text>, Error> {
        let (state, view) = self.synced(name)?;
        let text = self.text_in(&state, &view, to_oid(commit)?, path, None)?;
        // Without an allowance every blob is read.
        text.ok_or_else(|| odb("a text read without allowance stopped early"))
    }

    /// [`Inner::read_text`] against a view already taken (a lease's). With `allowance`, a
    /// blob not in the cache is inflated only if its size (from the object header) is within
    /// what is left of it, which it then takes; `Ok(None)` means it was not.
    pub(crate) fn text_in(
        &self,
        state: &RepoState,
        view: &View,
        commit: ObjectId,
        path: &RepoPath,
        allowance: Option<&mut u64>,
    ) -> Result<Option<Arc<Text>>, Error> {
        Ok(
            match self.text_read(state, view, commit, path, allowance, None)? {
                TextRead::Text(text) => Some(text),
                TextRead::Deferred { .. } => None,
            },
        )
    }

    /// The read path of every text tool (issue 42 point 5): the blob at `path` from the
    /// call's `memo`, the blob cache, or a decode another call runs now (single flight),
    /// else decoded here. A blob over the text cap is refused from its object header before
    /// it is inflated ([`Error::TextTooLarge`]). With `allowance`, a blob that must be inflated
    /// here is inflated only if its size is within what is left of it, which it then takes;
    /// else the read is [`TextRead::Deferred`].
    pub(crate) fn text_read(
        &self,
        state: &RepoState,
        view: &View,
        commit: ObjectId,
        path: &RepoPath,
        allowance: Option<&mut u64>,
        mut memo: Option<&mut TextMemo>,
    ) -> Result<TextRead, Error> {
        if path.is_root() {
            return Err(Error::IsDirectory {
                path: String::new(),
            });
        }
        self.tree_in(state, view, commit, path, |_, repo, tree| {
            let shown = to_commit_id(&commit)?;
            let id = objects::blob_id(repo, tree, path, &shown)?;
            let limit = self.blobs.max_text();
            let too_large = |size: u64| Error::TextTooLarge {
                path: path.to_string(),
                size,
                limit,
            };
            let kept = memo.as_ref().and_then(|memo| memo.get(&id));
            if let Some(text) = kept.or_else(|| self.blobs.get(&id)) {
                // Cached before the cap was lowered: the cap still holds.
                if text.len() as u64 > limit {
                    return Err(too_large(text.len() as u64));
                }
                if let Some(memo) = memo.as_mut() {
                    memo.keep(id, text.clone(), limit);
                }
                return Ok(TextRead::Text(text));
            }
            let size = repo.find_header(id).map_err(odb)?.size();
            if size > limit {
                return Err(too_large(size));
            }
            if let Some(left) = allowance {
                if size > *left {
                    return Ok(TextRead::Deferred {
                        shared: self.blobs.decoding(&id),
                    });
                }
                *left -= size;
            }
            let text = self.blobs.text(id, path.as_str(), || {
                objects::classify_blob(path.as_str(), objects::read_blob(repo, id)?)
            })?;
            if let Some(memo) = memo {
                memo.keep(id, text.clone(), limit);
            }
            Ok(TextRead::Text(text))
        })
    }

    /// The bytes of the blob at `path` to serve whole (`raw`): shared with every other call
    /// serving the same blob now, or with the blob cache's text of it (see
    /// [`crate::SharedBlob`]). A blob over `max` bytes is refused from its header.
    pub(crate) fn blob_in(
        &self,
        state: &RepoState,
        view: &View,
        commit: ObjectId,
        path: &RepoPath,
        max: u64,
    ) -> Result<SharedBlob, Error> {
        if path.is_root() {
            return Err(Error::IsDirectory {
                path: String::new(),
            });
        }
        let shown = to_commit_id(&commit)?;
        self.tree_in(state, view, commit, path, |_, repo, tree| {
            let id = objects::blob_id(repo, tree, path, &shown)?;
            let size = repo.find_header(id).map_err(odb)?.size();
            if size > max {
                return Err(Error::TooLarge {
                    path: path.to_string(),
                    size,
                    limit: max,
                });
            }
            self.blobs
                .raw(id, path.as_str(), || objects::read_blob(repo, id))
        })
    }

    pub(crate) fn read_bytes(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        max: Option<u64>,
    ) -> Result<Vec<u8>, Error> {
        let (state, view) = self.synced(name)?;
        self.bytes_in(&state, &view, to_oid(commit)?, path, max)
    }

    /// [`Inner::read_bytes`] against a view already taken (a lease's).
    pub(crate) fn bytes_in(
        &self,
        state: &RepoState,
        view: &View,
        commit: ObjectId,
        path: &RepoPath,
        max: Option<u64>,
    ) -> Result<Vec<u8>, Error> {
        if path.is_root() {
            return Err(Error::IsDirectory {
                path: String::new(),
            });
        }
        let shown = to_commit_id(&commit)?;
        self.tree_in(state, view, commit, path, |_, repo, tree| {
            objects::read_bytes(repo, tree, path, &shown, max)
        })
    }

    pub(crate) fn find_files(
        &self,
        name: &RepoName,
        commit: &CommitId,
        suffix: &str,
    ) -> Result<Vec<FoundFile>, Error> {
        let (state, view) = self.synced(name)?;
        self.files_in(&state, &view, to_oid(commit)?, suffix)
    }

    /// [`Inner::find_files`] against a view already taken (a lease's).
    pub(crate) fn files_in(
        &self,
        state: &RepoState,
        view: &View,
        id: ObjectId,
        suffix: &str,
    ) -> Result<Vec<FoundFile>, Error> {
        let commit = &to_commit_id(&id)?;
        self.tree_in(state, view, id, &RepoPath::root(), |state, repo, tree| {
            let scope = &state.registered_path;
            let mut out = Vec::new();
            match objects::locate(repo, tree, scope, commit) {
                Ok(Target::Tree(dir)) => {
                    objects::find_suffix(repo, dir, scope.as_str(), true, suffix, &mut out)?
                }
                Ok(_) | Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            out.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(out)
        })
    }

    pub(crate) fn list_tree(
        &self,
        name: &RepoName,
        commit: &CommitId,
        path: &RepoPath,
        depth: u32,
        limit: usize,
    ) -> Result<(Vec<TreeEntry>, bool), Error> {
        self.with_tree(name, commit, path, |state, repo, tree| {
            let target_path = if path.is_root() {
                &state.registered_path
            } else {
                path
            };
            let mut out = Vec::new();
            let mut truncated = false;
            match objects::locate(repo, tree, target_path, commit) {
                Ok(Target::Tree(dir)) => {
                    let base = target_path.as_str();
                    truncated = objects::list(repo, dir, base, depth.max(1), limit, &mut out)?;
                }
                Ok(other) => out.push(objects::single_entry(repo, target_path, &other)?),
                // A registered path that does not exist at this commit is an empty scope.
                Err(Error::NotFound { .. }) if path.is_root() => {}
                Err(e) => return Err(e),
            }
            out.sort_by(|a, b| a.path.cmp(&b.path));
            Ok((out, truncated))
        })
    }
}
