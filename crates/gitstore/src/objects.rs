//! Reading trees and blobs with gix: the read path (no `git` subprocess here).

use crate::db::storage;
use crate::{CommitId, EntryKind, Error, FoundFile, RepoPath, Text, TreeEntry};
use gix::ObjectId;
use gix::objs::tree::EntryKind as GitKind;

/// G-7: how much of a file is searched for a NUL byte.
const BINARY_PROBE: usize = 8 * 1024;
/// Git LFS pointer files are small; anything larger is content.
const LFS_POINTER_MAX: usize = 1024;
const LFS_PREFIX: &[u8] = b"version https://git-lfs.github.com/spec/v1";
/// Symlink targets are repository data shown in an error message: keep them short.
const LINK_TARGET_MAX: usize = 512;

pub(crate) fn odb<E: std::fmt::Display>(e: E) -> Error {
    storage("reading the object database")(e)
}

/// A commit id of ours as gix's object id.
pub(crate) fn to_oid(commit: &CommitId) -> Result<ObjectId, Error> {
    ObjectId::from_hex(commit.as_str().as_bytes()).map_err(odb)
}

/// A gix object id as a commit id of ours (an error only for an id that is not SHA-1).
pub(crate) fn to_commit_id(id: &ObjectId) -> Result<CommitId, Error> {
    CommitId::parse(&id.to_string()).ok_or_else(|| odb("object id is not 40 hex digits"))
}

/// What a path names inside a commit's tree.
pub(crate) enum Target {
    Tree(ObjectId),
    Blob { id: ObjectId, executable: bool },
    Symlink { target: String },
    Submodule { commit: ObjectId },
}

/// The root tree of `commit`, which must be a commit.
pub(crate) fn commit_tree(repo: &gix::Repository, commit: ObjectId) -> Result<ObjectId, Error> {
    let object = repo.find_object(commit).map_err(odb)?;
    if object.kind != gix::objs::Kind::Commit {
        return Err(odb(format!("{commit} is not a commit")));
    }
    gix::objs::CommitRefIter::from_bytes(&object.data, repo.object_hash())
        .tree_id()
        .map_err(odb)
}

struct Found {
    kind: GitKind,
    id: ObjectId,
}

fn find_entry(repo: &gix::Repository, tree: ObjectId, name: &[u8]) -> Result<Option<Found>, Error> {
    let object = repo.find_object(tree).map_err(odb)?;
    for entry in gix::objs::TreeRefIter::from_bytes(&object.data, repo.object_hash()) {
        let entry = entry.map_err(odb)?;
        if entry.filename.as_ref() as &[u8] == name {
            return Ok(Some(Found {
                kind: entry.mode.kind(),
                id: entry.oid.to_owned(),
            }));
        }
    }
    Ok(None)
}

fn target_of(repo: &gix::Repository, found: Found) -> Result<Target, Error> {
    Ok(match found.kind {
        GitKind::Tree => Target::Tree(found.id),
        GitKind::Blob => Target::Blob {
            id: found.id,
            executable: false,
        },
        GitKind::BlobExecutable => Target::Blob {
            id: found.id,
            executable: true,
        },
        GitKind::Link => Target::Symlink {
            target: link_target(repo, found.id)?,
        },
        GitKind::Commit => Target::Submodule { commit: found.id },
    })
}

fn link_target(repo: &gix::Repository, id: ObjectId) -> Result<String, Error> {
    let object = repo.find_object(id).map_err(odb)?;
    let text = String::from_utf8_lossy(&object.data);
    let mut shown: String = text
        .chars()
        .take(LINK_TARGET_MAX)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if text.chars().count() > LINK_TARGET_MAX {
        shown.push('…');
    }
    Ok(shown)
}

/// Walks `path` from `root` one segment at a time. Symlinks and gitlinks on the way are
/// errors naming themselves (G-6): nothing is ever followed.
pub(crate) fn locate(
    repo: &gix::Repository,
    root: ObjectId,
    path: &RepoPath,
    commit: &CommitId,
) -> Result<Target, Error> {
    let mut current = Target::Tree(root);
    let mut walked = String::new();
    for segment in path.segments() {
        let tree = match current {
            Target::Tree(id) => id,
            Target::Symlink { target } => {
                return Err(Error::Symlink {
                    path: walked,
                    target,
                });
            }
            Target::Submodule { commit: sub } => {
                return Err(Error::Submodule {
                    path: walked,
                    commit: sub.to_string(),
                });
            }
            Target::Blob { .. } => {
                return Err(Error::NotFound {
                    path: path.to_string(),
                    commit: commit.clone(),
                });
            }
        };
        if !walked.is_empty() {
            walked.push('/');
        }
        walked.push_str(segment);
        let Some(found) = find_entry(repo, tree, segment.as_bytes())? else {
            return Err(Error::NotFound {
                path: path.to_string(),
                commit: commit.clone(),
            });
        };
        current = target_of(repo, found)?;
    }
    Ok(current)
}

/// G-6, G-7: the text of the file at `path`, or the typed reason it is not served as text.
/// The raw bytes of the blob at `path` (symlinks, submodules and directories are errors).
/// The blob at `path`; with `max`, a larger blob is refused from its header, before it is
/// inflated.
pub(crate) fn read_bytes(
    repo: &gix::Repository,
    root: ObjectId,
    path: &RepoPath,
    commit: &CommitId,
    max: Option<u64>,
) -> Result<Vec<u8>, Error> {
    let id = blob_id(repo, root, path, commit)?;
    if let Some(limit) = max {
        let size = repo.find_header(id).map_err(odb)?.size();
        if size > limit {
            return Err(Error::TooLarge {
                path: path.to_string(),
                size,
                limit,
            });
        }
    }
    read_blob(repo, id)
}

/// The id of the blob at `path` below `root`; a directory, symlink or submodule there is the
/// error that says so (G-6).
pub(crate) fn blob_id(
    repo: &gix::Repository,
    root: ObjectId,
    path: &RepoPath,
    commit: &CommitId,
) -> Result<ObjectId, Error> {
    match locate(repo, root, path, commit)? {
        Target::Tree(_) => Err(Error::IsDirectory {
            path: path.to_string(),
        }),
        Target::Symlink { target } => Err(Error::Symlink {
            path: path.to_string(),
            target,
        }),
        Target::Submodule { commit: sub } => Err(Error::Submodule {
            path: path.to_string(),
            commit: sub.to_string(),
        }),
        Target::Blob { id, .. } => Ok(id),
    }
}

/// The bytes of blob `id`.
pub(crate) fn read_blob(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>, Error> {
    Ok(repo.find_object(id).map_err(odb)?.detach().data)
}

/// Every entry below `tree` whose file name ends with `suffix`, whatever its kind (so a
/// symlinked or submodule artifact can be diagnosed). Only matches pay a header lookup.
/// Collects the entries below `tree` whose name ends with `suffix`. `base` is the tree's
/// path, `base_utf8` whether every segment of it was valid UTF-8 (`base` is then exact; Git
/// allows any bytes but `/` and NUL in a name, shown lossily).
pub(crate) fn find_suffix(
    repo: &gix::Repository,
    tree: ObjectId,
    base: &str,
    base_utf8: bool,
    suffix: &str,
    out: &mut Vec<FoundFile>,
) -> Result<(), Error> {
    let children: Vec<(Vec<u8>, GitKind, ObjectId)> = {
        let object = repo.find_object(tree).map_err(odb)?;
        gix::objs::TreeRefIter::from_bytes(&object.data, repo.object_hash())
            .map(|entry| entry.map(|e| (e.filename.to_vec(), e.mode.kind(), e.oid.to_owned())))
            .collect::<Result<_, _>>()
            .map_err(odb)?
    };
    for (name, kind, id) in children {
        let utf8 = base_utf8 && std::str::from_utf8(&name).is_ok();
        let name = String::from_utf8_lossy(&name);
        let path = if base.is_empty() {
            name.to_string()
        } else {
            format!("{base}/{name}")
        };
        if kind == GitKind::Tree {
            find_suffix(repo, id, &path, utf8, suffix, out)?;
        } else if name.ends_with(suffix) {
            let size = match kind {
                GitKind::Blob | GitKind::BlobExecutable => {
                    repo.find_header(id).map_err(odb)?.size()
                }
                _ => 0,
            };
            out.push(FoundFile {
                path,
                path_utf8: utf8,
                kind: entry_kind(kind),
                size,
                id: id.to_string(),
            });
        }
    }
    Ok(())
}

/// Classifies a blob's bytes (G-6, G-7) and, when it is text, indexes its lines.
pub(crate) fn classify_blob(path: &str, data: Vec<u8>) -> Result<Text, Error> {
    let size = data.len() as u64;
    if data.len() < LFS_POINTER_MAX
        && data.starts_with(LFS_PREFIX)
        && let Some((oid, lfs_size)) = parse_lfs_pointer(&data)
    {
        return Err(Error::LfsPointer {
            path: path.to_string(),
            oid,
            size: lfs_size,
        });
    }
    if data[..data.len().min(BINARY_PROBE)].contains(&0) {
        return Err(Error::Binary {
            path: path.to_string(),
            size,
        });
    }
    // Validated in place: the decoded buffer becomes the text without a copy.
    let text = String::from_utf8(data).map_err(|_| Error::NotUtf8 {
        path: path.to_string(),
        size,
    })?;
    Text::new(text).ok_or_else(|| Error::TextTooLarge {
        path: path.to_string(),
        size,
        limit: Text::MAX_BYTES as u64,
    })
}

/// `oid sha256:<hex>` and `size <n>` lines of a pointer file; `None` when either is missing
/// (then the file is just text that happens to start like a pointer).
fn parse_lfs_pointer(data: &[u8]) -> Option<(String, u64)> {
    let text = std::str::from_utf8(data).ok()?;
    let mut oid = None;
    let mut size = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("oid ") {
            let rest = rest.trim();
            let (algo, hex) = rest.split_once(':')?;
            if algo.is_empty()
                || !algo.bytes().all(|b| b.is_ascii_alphanumeric())
                || hex.is_empty()
                || !hex.bytes().all(|b| b.is_ascii_hexdigit())
            {
                return None;
            }
            oid = Some(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("size ") {
            size = Some(rest.trim().parse::<u64>().ok()?);
        }
    }
    Some((oid?, size?))
}

fn entry_kind(kind: GitKind) -> EntryKind {
    match kind {
        GitKind::Tree => EntryKind::Directory,
        GitKind::Blob => EntryKind::File,
        GitKind::BlobExecutable => EntryKind::Executable,
        GitKind::Link => EntryKind::Symlink,
        GitKind::Commit => EntryKind::Submodule,
    }
}

/// Appends the entries of `tree` (named below `base`) down to `depth` levels, level by level
/// (all direct children before any grandchild), and stops once `limit` are collected.
/// Answers whether entries were left out. A huge subtree is never walked (nor its blob sizes
/// looked up) beyond the limit, and a truncated listing still shows the top levels whole.
pub(crate) fn list(
    repo: &gix::Repository,
    tree: ObjectId,
    base: &str,
    depth: u32,
    limit: usize,
    out: &mut Vec<TreeEntry>,
) -> Result<bool, Error> {
    let mut level = vec![(tree, base.to_string())];
    for remaining in (1..=depth).rev() {
        let mut next = Vec::new();
        for (tree, base) in level {
            let object = repo.find_object(tree).map_err(odb)?;
            for entry in gix::objs::TreeRefIter::from_bytes(&object.data, repo.object_hash()) {
                let entry = entry.map_err(odb)?;
                if out.len() >= limit {
                    return Ok(true);
                }
                let name = String::from_utf8_lossy(entry.filename.as_ref());
                let path = if base.is_empty() {
                    name.into_owned()
                } else {
                    format!("{base}/{name}")
                };
                let kind = entry.mode.kind();
                let id = entry.oid.to_owned();
                let size = match kind {
                    GitKind::Blob | GitKind::BlobExecutable => {
                        Some(repo.find_header(id).map_err(odb)?.size())
                    }
                    _ => None,
                };
                if kind == GitKind::Tree && remaining > 1 {
                    next.push((id, path.clone()));
                }
                out.push(TreeEntry {
                    path,
                    kind: entry_kind(kind),
                    size,
                });
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Ok(false)
}

/// The single entry a listing of a non-directory path shows.
pub(crate) fn single_entry(
    repo: &gix::Repository,
    path: &RepoPath,
    target: &Target,
) -> Result<TreeEntry, Error> {
    let (kind, size) = match target {
        Target::Tree(_) => (EntryKind::Directory, None),
        Target::Blob { id, executable } => (
            if *executable {
                EntryKind::Executable
            } else {
                EntryKind::File
            },
            Some(repo.find_header(*id).map_err(odb)?.size()),
        ),
        Target::Symlink { .. } => (EntryKind::Symlink, None),
        Target::Submodule { .. } => (EntryKind::Submodule, None),
    };
    Ok(TreeEntry {
        path: path.to_string(),
        kind,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(path: &str, data: &[u8]) -> Result<Text, Error> {
        classify_blob(path, data.to_vec())
    }

    /// G-6, G-7: classification order and sizes.
    #[test]
    fn g7_blob_classification() {
        assert_eq!(&*classify("a", b"hello\n").unwrap(), "hello\n");
        assert_eq!(&*classify("a", b"").unwrap(), "");
        let pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
        assert_eq!(
            classify("big.bin", pointer),
            Err(Error::LfsPointer {
                path: "big.bin".into(),
                oid: "sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"
                    .into(),
                size: 12345
            })
        );
        // Starts like a pointer but is not one: plain text.
        let fake = b"version https://git-lfs.github.com/spec/v1 is the LFS spec URL\n";
        assert!(classify("notes.md", fake).is_ok());
        assert_eq!(
            classify("x", b"ab\0cd"),
            Err(Error::Binary {
                path: "x".into(),
                size: 5
            })
        );
        // NUL beyond the probe: not binary, and valid UTF-8 text.
        let mut late_nul = vec![b'a'; BINARY_PROBE];
        late_nul.push(0);
        assert!(classify("x", &late_nul).is_ok());
        assert_eq!(
            classify("l1.txt", b"caf\xe9\n"),
            Err(Error::NotUtf8 {
                path: "l1.txt".into(),
                size: 5
            })
        );
        // Binary wins over not-UTF-8.
        assert!(matches!(
            classify("x", b"\xff\0"),
            Err(Error::Binary { .. })
        ));
    }
}
