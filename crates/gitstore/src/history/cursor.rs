//! A log page's cursor (O-9, issue 42): the paused walk's frontier, tamper-evident.
//!
//! A cursor carries what the next page needs to go on exactly where the walk stopped: the
//! commit the log started from, the commits waiting in the walk's queue (in the order it
//! would take them), the commits just walked whose committer date equals the newest one
//! still waiting (the only walked commits a later step can reach again while committer dates
//! do not go backwards from a parent to its child: see `history.rs`), and for a followed log
//! the path the file had where the walk stopped. Resuming costs what the next page walks,
//! never the history before it.
//!
//! The bytes are signed with HMAC-SHA-256 under a key the server holds (a cluster's secret,
//! or 32 random bytes kept in `<data>/cursor.key`, made once per data directory so every
//! process sharing it agrees), then written in base64url. A forged or altered cursor is
//! refused before anything is walked, so a caller cannot make a page start from a frontier
//! the server did not hand out. The signed bytes also bind the cursor to its log: the
//! repository, the path asked for and whether it follows renames.

use crate::{CommitId, Error};
use gix::ObjectId;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The format's version byte.
const VERSION: u8 = 1;
/// Bytes of the truncated HMAC.
const MAC_BYTES: usize = 16;
/// Bytes of the digest that binds a cursor to its log.
const BINDING_BYTES: usize = 8;
/// Most commits a cursor's queue may hold (a page ends long before: `PAGE_FRONTIER`).
pub(crate) const MAX_FRONTIER: usize = 4096;
/// Most walked commits a cursor carries as already seen.
pub(crate) const MAX_CARRIED: usize = 1024;
/// Longest cursor text accepted: the largest a server hands out, with room to spare.
const MAX_CURSOR_CHARS: usize = 4 * (MAX_FRONTIER + MAX_CARRIED + 8) * 32 / 3 + 4096;
/// The file holding a data directory's key.
const KEY_FILE: &str = "cursor.key";

/// Why a cursor was refused. Each message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not a cursor at all (cut short, or never one).
    #[error(
        "invalid cursor: pass the `next_cursor` of the previous log page exactly as it was given, or drop `cursor` to start from the newest commit"
    )]
    Malformed,
    /// A cursor of the old form (`<sha>.<count>`), which counted commits to skip.
    #[error(
        "this cursor is of an older form that is no longer accepted: drop `cursor` and start the log again from its first page"
    )]
    OldFormat,
    /// The signature does not match: altered, or made by another server.
    #[error(
        "invalid cursor: it was altered or made by another server; pass `next_cursor` exactly as it was given, or drop `cursor` to start again"
    )]
    Forged,
    /// A genuine cursor of a log with the other `follow` setting.
    #[error(
        "the cursor belongs to a log with the other `follow` setting: pass `follow` as on the first page, or drop the cursor"
    )]
    OtherFollow,
    /// A genuine cursor of a log of another repository or path.
    #[error(
        "the cursor belongs to a log of another repository or path: pass `repo` and `path` as on the first page, or drop the cursor"
    )]
    OtherLog,
    /// The server's key could not be read or made.
    #[error(transparent)]
    Store(#[from] Error),
}

/// Where a paused walk goes on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Frontier {
    /// The commits waiting in the walk's queue, in the order the walk takes them.
    pub(crate) queue: Vec<ObjectId>,
    /// Walked commits a later step may reach again (see the module doc).
    pub(crate) carried: Vec<ObjectId>,
    /// A followed log: the file's path where the walk stopped.
    pub(crate) followed: Option<String>,
}

/// A verified cursor: the log's start and its frontier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCursor {
    pub(crate) start: CommitId,
    pub(crate) frontier: Frontier,
}

impl LogCursor {
    /// The commit the log started from (the same on every page).
    pub fn start(&self) -> &CommitId {
        &self.start
    }
}

/// What a cursor is bound to: its log's repository, path and `follow` setting.
pub(crate) struct Binding<'a> {
    pub(crate) repo: &'a str,
    pub(crate) path: &'a str,
    pub(crate) follow: bool,
}

impl Binding<'_> {
    fn digest(&self) -> [u8; BINDING_BYTES] {
        let mut hash = Sha256::new();
        hash.update(b"csg log cursor binding\0");
        hash.update(self.repo.as_bytes());
        hash.update([0]);
        hash.update(self.path.as_bytes());
        let full = hash.finalize();
        let mut out = [0u8; BINDING_BYTES];
        out.copy_from_slice(&full[..BINDING_BYTES]);
        out
    }
}

/// The cursor text of `frontier` for the log `binding` from `start`, signed with `key`.
pub(crate) fn encode(
    key: &[u8; 32],
    binding: &Binding<'_>,
    start: &ObjectId,
    frontier: &Frontier,
) -> Result<String, Error> {
    if frontier.queue.len() > MAX_FRONTIER {
        return Err(Error::InvalidRevision {
            revision: "this history".into(),
            reason: format!(
                "it is too wide to page (over {MAX_FRONTIER} lines of history open at once); \
                 pass a `path` or a more recent `revision`"
            ),
        });
    }
    let mut out = vec![VERSION, u8::from(binding.follow)];
    out.extend_from_slice(&binding.digest());
    let id_len = start.as_bytes().len();
    out.push(u8::try_from(id_len).unwrap_or(0));
    out.extend_from_slice(start.as_bytes());
    for ids in [
        &frontier.queue,
        &frontier.carried[..frontier.carried.len().min(MAX_CARRIED)],
    ] {
        out.extend_from_slice(&(ids.len() as u16).to_be_bytes());
        for id in ids.iter() {
            out.extend_from_slice(id.as_bytes());
        }
    }
    if binding.follow {
        let path = frontier.followed.as_deref().unwrap_or("").as_bytes();
        let len = u16::try_from(path.len()).map_err(|_| Error::InvalidPath {
            path: String::from_utf8_lossy(&path[..64]).into_owned(),
            reason: "it is too long to follow",
        })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(path);
    }
    let mac = hmac(key, &out);
    out.extend_from_slice(&mac[..MAC_BYTES]);
    Ok(base64url(&out))
}

/// The verified cursor in `text` for the log `binding`, or why it is refused.
pub(crate) fn decode(
    key: &[u8; 32],
    binding: &Binding<'_>,
    text: &str,
) -> Result<LogCursor, CursorError> {
    if let Some((sha, _)) = text.split_once('.')
        && CommitId::parse(sha).is_some()
    {
        return Err(CursorError::OldFormat);
    }
    if text.len() > MAX_CURSOR_CHARS {
        return Err(CursorError::Malformed);
    }
    let bytes = from_base64url(text).ok_or(CursorError::Malformed)?;
    if bytes.len() < MAC_BYTES + 2 || bytes[0] != VERSION {
        return Err(CursorError::Malformed);
    }
    let (signed, mac) = bytes.split_at(bytes.len() - MAC_BYTES);
    if !same(&hmac(key, signed)[..MAC_BYTES], mac) {
        return Err(CursorError::Forged);
    }
    // Signed by this server: what follows was written by `encode`.
    let mut reader = Reader(&signed[1..]);
    let follow = reader.take(1).ok_or(CursorError::Malformed)?[0] == 1;
    if follow != binding.follow {
        return Err(CursorError::OtherFollow);
    }
    if reader.take(BINDING_BYTES).ok_or(CursorError::Malformed)? != binding.digest() {
        return Err(CursorError::OtherLog);
    }
    let id_len = usize::from(reader.take(1).ok_or(CursorError::Malformed)?[0]);
    let start = reader.id(id_len).ok_or(CursorError::Malformed)?;
    let mut lists = [Vec::new(), Vec::new()];
    for (list, max) in lists.iter_mut().zip([MAX_FRONTIER, MAX_CARRIED]) {
        let count = reader.count().ok_or(CursorError::Malformed)?;
        if count > max {
            return Err(CursorError::Malformed);
        }
        for _ in 0..count {
            list.push(reader.id(id_len).ok_or(CursorError::Malformed)?);
        }
    }
    let followed = if follow {
        let len = reader.count().ok_or(CursorError::Malformed)?;
        let path = reader.take(len).ok_or(CursorError::Malformed)?;
        Some(String::from_utf8(path.to_vec()).map_err(|_| CursorError::Malformed)?)
    } else {
        None
    };
    if !reader.0.is_empty() {
        return Err(CursorError::Malformed);
    }
    let [queue, carried] = lists;
    Ok(LogCursor {
        start: crate::objects::to_commit_id(&start).map_err(|_| CursorError::Malformed)?,
        frontier: Frontier {
            queue,
            carried,
            followed,
        },
    })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn count(&mut self) -> Option<usize> {
        let b = self.take(2)?;
        Some(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn id(&mut self, len: usize) -> Option<ObjectId> {
        ObjectId::try_from(self.take(len)?).ok()
    }
}

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
fn hmac(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Equal bytes, compared in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64url without padding (RFC 4648 §5): safe in a URL query and in JSON as it is.
fn base64url(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

fn from_base64url(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| ALPHABET.iter().position(|a| *a == c).map(|v| v as u32);
    let bytes = text.as_bytes();
    if bytes.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    // Only the canonical text of the bytes decodes (no stray low bits).
    (base64url(&out) == text).then_some(out)
}

/// The keys in use, per data directory: read or made once per process.
static KEYS: Mutex<Option<HashMap<PathBuf, [u8; 32]>>> = Mutex::new(None);

/// Sets the key of the store at `data_dir` from a secret every server of a cluster shares,
/// so a cursor one replica handed out continues on another.
pub(crate) fn set_secret(data_dir: &Path, secret: &[u8]) {
    let mut hash = Sha256::new();
    hash.update(b"csg log cursor key\0");
    hash.update(secret);
    let key: [u8; 32] = hash.finalize().into();
    KEYS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_default()
        .insert(data_dir.to_path_buf(), key);
}

/// The key of the store at `data_dir`: the cluster's (see [`set_secret`]), else the one in
/// `<data>/cursor.key`, made on first use.
pub(crate) fn key(data_dir: &Path) -> Result<[u8; 32], Error> {
    let mut keys = KEYS.lock().unwrap_or_else(PoisonError::into_inner);
    let keys = keys.get_or_insert_default();
    if let Some(key) = keys.get(data_dir) {
        return Ok(*key);
    }
    let key = key_file(data_dir)?;
    keys.insert(data_dir.to_path_buf(), key);
    Ok(key)
}

fn read_key(path: &Path) -> Result<Option<[u8; 32]>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(<[u8; 32]>::try_from(bytes.as_slice()).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(crate::db::storage("reading the cursor key")(e)),
    }
}

/// Reads `<data>/cursor.key`, or makes it: 32 random bytes written to a file of mode 0600
/// and linked into place, so a concurrent process either finds no key or a whole one, and
/// two processes making one at once agree on the first linked.
fn key_file(data_dir: &Path) -> Result<[u8; 32], Error> {
    let path = data_dir.join(KEY_FILE);
    if let Some(key) = read_key(&path)? {
        return Ok(key);
    }
    let storage = crate::db::storage("making the cursor key");
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(crate::db::storage("making the cursor key"))?;
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).map_err(crate::db::storage("making the cursor key"))?;
    let temp = data_dir.join(format!(
        "{KEY_FILE}.{}.{}.tmp",
        std::process::id(),
        u64::from_le_bytes(suffix)
    ));
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp)?;
        file.write_all(&key)?;
        file.sync_all()?;
        match std::fs::hard_link(&temp, &path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    })();
    let _ = std::fs::remove_file(&temp);
    match written {
        Ok(true) => Ok(key),
        // Another process linked its key first: that one is everyone's.
        Ok(false) => match read_key(&path)? {
            Some(key) => Ok(key),
            None => Err(Error::Storage(
                "the cursor key file is damaged; remove `cursor.key` from the data directory"
                    .into(),
            )),
        },
        Err(e) => Err(storage(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn oid(n: u8) -> ObjectId {
        ObjectId::try_from(&[n; 20][..]).unwrap()
    }

    const BINDING: Binding<'static> = Binding {
        repo: "acme/widgets",
        path: "src",
        follow: false,
    };

    proptest! {
        #[test]
        fn base64url_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let text = base64url(&bytes);
            prop_assert!(text.bytes().all(|b| ALPHABET.contains(&b)));
            prop_assert_eq!(from_base64url(&text), Some(bytes));
        }
    }

    /// O-9: a cursor round-trips; every altered byte, another key, another log and the old
    /// form are refused, each with its own message.
    #[test]
    fn o9_cursors_are_signed_and_bound_to_their_log() {
        let key = [7u8; 32];
        let frontier = Frontier {
            queue: vec![oid(1), oid(2)],
            carried: vec![oid(3)],
            followed: None,
        };
        let text = encode(&key, &BINDING, &oid(9), &frontier).unwrap();
        let cursor = decode(&key, &BINDING, &text).unwrap();
        assert_eq!(cursor.frontier, frontier);
        assert_eq!(cursor.start().as_str(), oid(9).to_string());
        let bytes = from_base64url(&text).unwrap();
        for i in 0..bytes.len() {
            let mut altered = bytes.clone();
            altered[i] ^= 1;
            let error = decode(&key, &BINDING, &base64url(&altered)).unwrap_err();
            assert!(
                matches!(error, CursorError::Forged | CursorError::Malformed),
                "byte {i}: {error:?}"
            );
        }
        assert_eq!(
            decode(&[8u8; 32], &BINDING, &text),
            Err(CursorError::Forged)
        );
        let other_path = Binding {
            path: "docs",
            ..BINDING
        };
        assert_eq!(decode(&key, &other_path, &text), Err(CursorError::OtherLog));
        let follow = Binding {
            follow: true,
            ..BINDING
        };
        assert_eq!(decode(&key, &follow, &text), Err(CursorError::OtherFollow));
        let old = format!("{}.50", "a".repeat(40));
        assert_eq!(decode(&key, &BINDING, &old), Err(CursorError::OldFormat));
        assert_eq!(
            decode(&key, &BINDING, "nonsense!"),
            Err(CursorError::Malformed)
        );
        assert_eq!(
            decode(&key, &BINDING, &"A".repeat(MAX_CURSOR_CHARS + 4)),
            Err(CursorError::Malformed)
        );
        // A followed log carries its path.
        let followed = Frontier {
            followed: Some("a/b.txt".into()),
            ..frontier
        };
        let text = encode(&key, &follow, &oid(9), &followed).unwrap();
        assert_eq!(decode(&key, &follow, &text).unwrap().frontier, followed);
    }

    /// The key is made once per data directory, mode 0600, and read back by the next user.
    #[test]
    fn the_key_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = key_file(dir.path()).unwrap();
        assert_eq!(key_file(dir.path()).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
    }
}
