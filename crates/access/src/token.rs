//! The token format: `csg_` and 64 lower-case hex digits (256 random bits). The prefix lets
//! secret scanners and the URL check recognise a token; the hash is SHA-256 of the whole text.

use sha2::{Digest, Sha256};

/// What every API token of this server starts with.
pub const TOKEN_PREFIX: &str = "csg_";

/// Random bytes in a token.
const SECRET_BYTES: usize = 32;

/// The SHA-256 of a token's text, the only form in which it is stored.
pub(crate) type TokenHash = [u8; 32];

/// The SHA-256 of a website session's id (the cookie value), the only form in which it is
/// stored.
pub(crate) type SessionHash = [u8; 32];

/// A new token from the operating system's random source.
pub(crate) fn generate() -> Result<String, getrandom::Error> {
    Ok(format!("{TOKEN_PREFIX}{}", random_hex()?))
}

/// A new website session id: 64 lower-case hex digits (256 random bits) and no prefix, so it
/// is never taken for an API token.
pub(crate) fn generate_session_id() -> Result<String, getrandom::Error> {
    random_hex()
}

/// [`SECRET_BYTES`] random bytes as lower-case hex.
fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes)?;
    let mut text = String::with_capacity(2 * SECRET_BYTES);
    for byte in bytes {
        text.push(hex_digit(byte >> 4));
        text.push(hex_digit(byte & 0xf));
    }
    Ok(text)
}

fn hex_digit(nibble: u8) -> char {
    char::from_digit(u32::from(nibble), 16).unwrap_or('0')
}

/// Whether `text` has the shape of a token (prefix, then exactly 64 lower-case hex digits).
pub fn looks_like_token(text: &str) -> bool {
    text.strip_prefix(TOKEN_PREFIX).is_some_and(|rest| {
        rest.len() == 2 * SECRET_BYTES
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Whether `text` holds something shaped like a token anywhere: the prefix followed by 64
/// lower-case hex digits. Ordinary text that merely mentions the prefix (a search for
/// `csg_session`, say) does not.
pub fn contains_token(text: &str) -> bool {
    text.match_indices(TOKEN_PREFIX).any(|(at, _)| {
        let rest = &text.as_bytes()[at + TOKEN_PREFIX.len()..];
        rest.len() >= 2 * SECRET_BYTES
            && rest[..2 * SECRET_BYTES]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    })
}

/// The stored form of a token.
pub(crate) fn hash(text: &str) -> TokenHash {
    Sha256::digest(text.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a1_tokens_are_random_and_well_formed() {
        let (a, b) = (generate().expect("random"), generate().expect("random"));
        assert_ne!(a, b);
        assert!(looks_like_token(&a), "{a}");
        assert_eq!(a.len(), 4 + 64);
        assert!(!looks_like_token(&a.to_uppercase()));
        assert!(!looks_like_token(&a[..a.len() - 1]));
        assert!(!looks_like_token("Bearer x"));
        assert!(contains_token(&a));
        assert!(contains_token(&format!("see {a} here")));
        assert!(!contains_token("csg_session csg_0123 csg_"));
        assert!(!contains_token(&a[..a.len() - 1]));
        assert!(!contains_token(&a.to_uppercase()));
        assert_ne!(hash(&a), hash(&b));
        // The known SHA-256 of the empty string: the hash is the standard one.
        assert_eq!(
            hash("")[..4],
            [0xe3, 0xb0, 0xc4, 0x42],
            "SHA-256 of the empty text"
        );
    }
}
