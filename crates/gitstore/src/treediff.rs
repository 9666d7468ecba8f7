//! What search at a commit other than the indexed head needs from Git (S-8):
//!
//! - the files whose content differs between two leased commits' trees
//!   ([`Lease::file_deltas_from`]): regular and executable files inside the registered path,
//!   as (path, old blob, new blob). Trees are compared by object id (`changes::pending`), so
//!   unchanged directories are never opened; a change of mode alone, and symlinks and
//!   submodules (which the search index never holds), are left out;
//! - the blobs themselves, by id, through the lease's [`BlobReader`] (its
//!   [`BlobReader::size`] reads only the object header, so a caller can bound what it will
//!   inflate before it inflates anything);
//! - the index-branch patterns of each registration ([`GitStore::set_index_branches`]):
//!   branch names or globs like `release/*`, at most [`MAX_INDEX_BRANCHES`], matched by
//!   [`index_branch_matches`]; [`GitStore::indexed_branches`] answers the tracked branches
//!   they match, with their heads.

use crate::changes::{self, Leaf};
use crate::objects::{commit_tree, odb, to_oid};
use crate::{BlobReader, CommitId, Error, GitStore, Lease, RepoName, handles};
use budget::Budget;

/// The most index-branch patterns one repository may have (S-8): each matching branch keeps
/// an overlay of its differing files warm in memory, so the number is bounded.
pub const MAX_INDEX_BRANCHES: usize = 64;

/// The longest index-branch pattern, in bytes (as for a revision).
const MAX_PATTERN_LEN: usize = 255;

/// One file whose content differs between two commits: in the base only (`new` absent:
/// deleted, renamed away, or no longer a regular file), in the other commit only (`old`
/// absent), or in both with other content. Blob ids are 40 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileDelta {
    /// Repository-relative path (lossy for a name that is not UTF-8, as
    /// [`GitStore::find_files`] shows it).
    pub path: String,
    /// The blob at the base commit.
    pub old: Option<String>,
    /// The blob at the other commit.
    pub new: Option<String>,
}

/// Whether a tree entry's mode is a regular or executable file (what the search index
/// holds; symlinks and submodules are not indexed).
fn indexed_file(leaf: Option<Leaf>) -> Option<gix::ObjectId> {
    match leaf {
        Some(Leaf::Blob(id, mode)) if mode & 0o170000 == 0o100000 => Some(id),
        _ => None,
    }
}

impl Lease {
    /// The regular and executable files inside the registered path whose content differs
    /// between `base` (a lease on another commit of the same repository) and this lease's
    /// commit, sorted by path. Both commits stay readable while their leases live, so no
    /// retention check is repeated here.
    pub fn file_deltas_from(&self, base: &Lease) -> Result<Vec<FileDelta>, Error> {
        self.file_deltas_from_within(base, &Budget::unlimited())
    }

    /// [`Lease::file_deltas_from`] under `budget` (O-9): the tree walk checks it every few
    /// entries and stops with [`Error::Stopped`] once it runs out or its caller went away.
    pub fn file_deltas_from_within(
        &self,
        base: &Lease,
        budget: &Budget,
    ) -> Result<Vec<FileDelta>, Error> {
        if base.repo() != self.repo() {
            return Err(odb("file deltas between leases of two repositories"));
        }
        let reader = self.blobs()?;
        let (old, new) = (to_oid(base.commit())?, to_oid(self.commit())?);
        let scope = self.registered_path().clone();
        handles::with_repo(&reader.repo, |repo| {
            let old_tree = commit_tree(repo, old)?;
            let new_tree = commit_tree(repo, new)?;
            let pending =
                changes::pending_within(repo, Some(old_tree), Some(new_tree), &scope, budget)?;
            Ok(pending
                .into_iter()
                .filter_map(|p| {
                    let (before, after) = (indexed_file(p.old), indexed_file(p.new));
                    if before == after {
                        // A mode change alone, or a symlink or submodule on both sides.
                        return None;
                    }
                    Some(FileDelta {
                        path: p.path,
                        old: before.map(|id| id.to_string()),
                        new: after.map(|id| id.to_string()),
                    })
                })
                .collect())
        })
    }

    /// A reader of blobs by id in this lease's repository, for ids a
    /// [`Lease::file_deltas_from`] of it answered; keep the lease while it reads.
    pub fn blobs(&self) -> Result<BlobReader, Error> {
        self.store.blob_reader(self.repo(), self.commit())
    }
}

impl BlobReader {
    /// The size in bytes of blob `id` (40 hex digits), from its object header: nothing is
    /// inflated.
    pub fn size(&self, id: &str) -> Result<u64, Error> {
        let oid = gix::ObjectId::from_hex(id.as_bytes()).map_err(odb)?;
        handles::with_repo(&self.repo, |repo| {
            Ok(repo.find_header(oid).map_err(odb)?.size())
        })
    }
}

/// Checks index-branch patterns (S-8): at most [`MAX_INDEX_BRANCHES`], each a branch name
/// or a glob over branch names, where `*` matches within one `/`-separated segment and
/// `**` across segments (`release/*`, `team/**`). The error names the offending pattern and
/// what to give instead.
pub fn check_index_branches(patterns: &[String]) -> Result<(), Error> {
    if patterns.len() > MAX_INDEX_BRANCHES {
        return Err(Error::InvalidRevision {
            revision: format!("{} index-branch patterns", patterns.len()),
            reason: format!(
                "a repository has at most {MAX_INDEX_BRANCHES} index-branch patterns; use globs such as `release/*` to cover many branches with one"
            ),
        });
    }
    for pattern in patterns {
        check_pattern(pattern).map_err(|reason| Error::InvalidRevision {
            revision: pattern
                .chars()
                .take(100)
                .collect::<String>()
                .escape_debug()
                .to_string(),
            reason: format!(
                "not a valid index-branch pattern: {reason}; give a branch name such as `main` or a glob such as `release/*`"
            ),
        })?;
    }
    Ok(())
}

fn check_pattern(pattern: &str) -> Result<(), &'static str> {
    if pattern.is_empty() {
        return Err("it is empty");
    }
    if pattern.len() > MAX_PATTERN_LEN {
        return Err("it is longer than 255 bytes");
    }
    if pattern.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("it contains whitespace or a control character");
    }
    for needle in ["..", "^", "~", ":", "@{", "?", "[", "\\", "//"] {
        if pattern.contains(needle) {
            return Err("it contains `..`, `^`, `~`, `:`, `@{`, `?`, `[`, `\\` or `//`");
        }
    }
    if pattern.starts_with(['-', '/', '.']) || pattern.ends_with(['/', '.']) {
        return Err("it starts with `-`, `/` or `.`, or ends with `/` or `.`");
    }
    if pattern.contains("***") {
        return Err("`***` means nothing; use `*` (one segment) or `**` (any depth)");
    }
    if pattern.starts_with("refs/") {
        return Err("give the branch name without `refs/heads/`");
    }
    Ok(())
}

/// Whether `branch` matches the index-branch `pattern`: `*` matches any characters but `/`,
/// `**` any characters at all, everything else itself.
pub fn index_branch_matches(pattern: &str, branch: &str) -> bool {
    glob(pattern.as_bytes(), branch.as_bytes())
}

fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern {
        [] => text.is_empty(),
        [b'*', b'*', rest @ ..] => (0..=text.len()).any(|skip| glob(rest, &text[skip..])),
        [b'*', rest @ ..] => {
            let segment = text.iter().position(|&b| b == b'/').unwrap_or(text.len());
            (0..=segment).any(|skip| glob(rest, &text[skip..]))
        }
        [first, rest @ ..] => text.first() == Some(first) && glob(rest, &text[1..]),
    }
}

impl GitStore {
    /// Sets the index-branch patterns of `name` (S-8): the branches (besides the default
    /// branch, always indexed) whose search stays fast. Empty: the default branch only.
    /// Duplicates are dropped; the patterns are checked first ([`check_index_branches`]).
    /// Answers the patterns stored. Every process sees them from its next sync.
    pub fn set_index_branches(
        &self,
        name: &RepoName,
        patterns: &[String],
    ) -> Result<Vec<String>, Error> {
        check_index_branches(patterns)?;
        let mut unique: Vec<String> = Vec::with_capacity(patterns.len());
        for pattern in patterns {
            if !unique.contains(pattern) {
                unique.push(pattern.clone());
            }
        }
        self.inner.set_index_branches(name, &unique)?;
        Ok(unique)
    }

    /// The index-branch patterns of `name` (empty: the default branch only). Reads the
    /// metadata: not for the read path.
    pub fn index_branches(&self, name: &RepoName) -> Result<Vec<String>, Error> {
        Ok(self.repo(name)?.index_branches)
    }

    /// The tracked branches of `name` that its index-branch patterns match, with their heads
    /// as of the last good sync, sorted by branch; the default branch is left out (its head
    /// is what the full index holds).
    pub fn indexed_branches(&self, name: &RepoName) -> Result<Vec<(String, CommitId)>, Error> {
        let info = self.repo(name)?;
        if info.index_branches.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .branch_heads(name)?
            .into_iter()
            .filter(|(branch, _)| info.default_branch.as_deref() != Some(branch.as_str()))
            .filter(|(branch, _)| {
                info.index_branches
                    .iter()
                    .any(|pattern| index_branch_matches(pattern, branch))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S-8: `*` stays within a segment, `**` crosses them, the rest matches itself.
    #[test]
    fn s8_index_branch_globs() {
        assert!(index_branch_matches("main", "main"));
        assert!(!index_branch_matches("main", "main2"));
        assert!(index_branch_matches("release/*", "release/1.0"));
        assert!(!index_branch_matches("release/*", "release/1.0/hotfix"));
        assert!(!index_branch_matches("release/*", "release"));
        assert!(index_branch_matches("release/**", "release/1.0/hotfix"));
        assert!(index_branch_matches("*", "dev"));
        assert!(!index_branch_matches("*", "team/dev"));
        assert!(index_branch_matches("**", "team/dev"));
        assert!(index_branch_matches("v*-rc", "v1.2-rc"));
        assert!(!index_branch_matches("v*-rc", "v1/2-rc"));
    }

    /// S-8: the cap and malformed patterns are refused with a message naming them.
    #[test]
    fn s8_index_branch_patterns_checked() {
        let many: Vec<String> = (0..=MAX_INDEX_BRANCHES).map(|i| format!("b{i}")).collect();
        let error = check_index_branches(&many).unwrap_err().to_string();
        assert!(error.contains("at most 64"), "{error}");
        assert!(check_index_branches(&many[..MAX_INDEX_BRANCHES]).is_ok());
        for bad in ["", "a b", "x..y", "-x", "refs/heads/x", "a/", "x[0]", "***"] {
            let error = check_index_branches(&[bad.to_string()]).unwrap_err();
            assert!(
                error.to_string().contains("index-branch pattern"),
                "{bad}: {error}"
            );
        }
    }
}
