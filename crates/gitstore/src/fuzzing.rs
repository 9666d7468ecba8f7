//! Entry points of the fuzz targets `cursor` (a `log` page's signed cursor) and `paths`
//! (repository names and paths) of `fuzz/` (issue 43), and of their corpus replay in CI
//! (`tests/fuzz_corpus.rs`). Each feeds untrusted bytes to the real parser and asserts what
//! must hold of its answer; a panic is a finding. Not an API (hidden); nothing here changes
//! what the store does.

use crate::history::{Binding, decode_cursor, encode_cursor};
use crate::{CommitId, RepoName, RepoPath};
use gix::ObjectId;
use sha2::{Digest, Sha256};

/// The key the target signs with: `decode` takes the key it is given.
const KEY: [u8; 32] = [0x5a; 32];

/// The logs a cursor may be bound to.
const BINDINGS: [Binding<'static>; 2] = [
    Binding {
        repo: "acme/widgets",
        path: "",
        follow: false,
    },
    Binding {
        repo: "acme/widgets",
        path: "src/lib.rs",
        follow: true,
    },
];

/// Target `cursor`, its `log` part: the first byte chooses the log (bit 1) and whether the
/// rest is a cursor's text as a caller sends it (bit 0 clear: the signature refuses nearly
/// all of it) or the bytes a cursor signs after its version, follow flag and binding, which
/// are then signed with the key and written as a cursor (so the parser behind the signature
/// sees them). A cursor that decodes is written again as the same text.
pub fn log_cursor(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let binding = &BINDINGS[usize::from(mode >> 1) & 1];
    let text = if mode & 1 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        let mut signed = vec![1, u8::from(binding.follow)];
        signed.extend_from_slice(&binding_digest(binding));
        signed.extend_from_slice(rest);
        let mac = hmac(&KEY, &signed);
        signed.extend_from_slice(&mac[..16]);
        base64url(&signed)
    };
    if let Ok(cursor) = decode_cursor(&KEY, binding, &text) {
        let start = ObjectId::from_hex(cursor.start().as_str().as_bytes()).expect("a full SHA");
        let again =
            encode_cursor(&KEY, binding, &start, &cursor.frontier).expect("a decoded cursor");
        assert_eq!(again, text, "a cursor decoded and written again differs");
    }
}

/// Target `paths`, its repository part: each line of the input as a repository name
/// (G-1), a repository-relative path (G-6) and a commit id; what parses is normal (parsing
/// its text again gives it back), and scopes nest as their segments do.
pub fn names(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parsed = Vec::new();
    for line in text.split('\n') {
        if let Ok(path) = RepoPath::parse(line) {
            assert_eq!(RepoPath::parse(path.as_str()).as_ref(), Ok(&path));
            let shown = path.as_str();
            assert!(!shown.starts_with('/') && !shown.ends_with('/') && !shown.contains("//"));
            assert!(path.segments().all(|s| s != "." && s != ".."));
            assert!(path.is_within(&RepoPath::root()));
            let mut prefix = String::new();
            for segment in path.segments() {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(segment);
                let scope = RepoPath::parse(&prefix).expect("a prefix of a normal path");
                assert!(path.is_within(&scope), "{path} not within {scope}");
            }
            parsed.push(path);
        }
        if let Ok(name) = RepoName::parse(line) {
            assert_eq!(RepoName::parse(name.as_str()).as_ref(), Ok(&name));
            assert_eq!(name.as_str().split('/').count(), 2);
        }
        if let Some(id) = CommitId::parse(line) {
            assert_eq!(id.as_str(), line.to_ascii_lowercase());
        }
    }
    for pair in parsed.windows(2) {
        let (a, b) = (pair[0].as_str(), pair[1].as_str());
        let within =
            b.is_empty() || a == b || a.strip_prefix(b).is_some_and(|r| r.starts_with('/'));
        assert_eq!(pair[0].is_within(&pair[1]), within, "{a:?} within {b:?}");
    }
}

/// The binding digest a cursor carries (`cursor.rs`), computed on its own here.
fn binding_digest(binding: &Binding<'_>) -> [u8; 8] {
    let mut hash = Sha256::new();
    hash.update(b"csg log cursor binding\0");
    hash.update(binding.repo.as_bytes());
    hash.update([0]);
    hash.update(binding.path.as_bytes());
    let full = hash.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&full[..8]);
    out
}

/// HMAC-SHA-256 (RFC 2104), written independently of `cursor.rs`'s.
fn hmac(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Base64url without padding (RFC 4648 §5).
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (16 - 8 * i);
        }
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The target's own signing matches the store's: a cursor the store writes decodes
    /// through the target's path, so the fuzzer reaches the parser behind the signature.
    #[test]
    fn the_target_signs_as_the_store_does() {
        let start = ObjectId::from_hex(&[b'a'; 40]).unwrap();
        let frontier = crate::history::Frontier {
            queue: vec![start],
            carried: Vec::new(),
            followed: None,
        };
        let text = encode_cursor(&KEY, &BINDINGS[0], &start, &frontier).unwrap();
        assert!(decode_cursor(&KEY, &BINDINGS[0], &text).is_ok());
        let bytes = from_text(&text);
        let mut input = vec![1u8];
        input.extend_from_slice(&bytes[10..bytes.len() - 16]);
        // The same bytes signed by the target give the same text.
        let mut signed = vec![1, 0];
        signed.extend_from_slice(&binding_digest(&BINDINGS[0]));
        signed.extend_from_slice(&input[1..]);
        let mac = hmac(&KEY, &signed);
        signed.extend_from_slice(&mac[..16]);
        assert_eq!(base64url(&signed), text);
        log_cursor(&input);
    }

    fn from_text(text: &str) -> Vec<u8> {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let value = |c: u8| ALPHABET.iter().position(|a| *a == c).unwrap() as u32;
        let mut out = Vec::new();
        for chunk in text.as_bytes().chunks(4) {
            let mut n = 0u32;
            for (i, c) in chunk.iter().enumerate() {
                n |= value(*c) << (18 - 6 * i);
            }
            for i in 0..chunk.len() - 1 {
                out.push((n >> (16 - 8 * i)) as u8);
            }
        }
        out
    }
}
