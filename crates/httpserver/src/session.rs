//! The site's sessions and CSRF tokens. A visitor signs in by pasting an API token; the
//! session lives in the access store (`access::AccessStore::start_session`): a row keyed by
//! the SHA-256 of the session id, naming the token by its id, so it survives a restart,
//! works on every replica, and ends the moment its token is revoked or its user removed
//! (A-1, W-34), or after twelve hours unused. Neither the token nor the session id is kept
//! anywhere in plaintext but in the visitor's cookie. Cookies are `HttpOnly`,
//! `SameSite=Strict`, scoped to `/sourcegraph` and `Secure` when the site's origin is https.
//!
//! Every form carries a CSRF token: a random value kept in its own cookie for a visitor, and
//! for a session one derived from the session id ([`csrf_of`]), so the store keeps none: a
//! POST whose form value differs is refused.

use axum::http::{HeaderMap, HeaderValue, header};
use sha2::{Digest, Sha256};

/// The cookie that names a session.
pub(crate) const SESSION_COOKIE: &str = "csg_session";
/// The cookie with a visitor's CSRF token.
pub(crate) const CSRF_COOKIE: &str = "csg_csrf";

/// The CSRF token of the session `id`: the SHA-256 of the id under a label of its own, as 64
/// hex digits. Only the holder of the id (its cookie is `HttpOnly`) can compute it, and it
/// gives the id away to nobody who reads a page; the store keeps the id only as another
/// hash (unlabelled), so a copy of the database yields neither the id nor this token.
pub(crate) fn csrf_of(id: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"csg website csrf\0");
    hash.update(id.as_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// 256 random bits as 64 hex digits; `None` when the system has no randomness to give.
pub(crate) fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `value` could be one of ours (a cookie is client input).
pub(crate) fn well_formed(value: &str) -> bool {
    value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// A `Set-Cookie` value of the site's (`Path=/sourcegraph`, `SameSite=Strict`, a browser
/// session's life); `None` as `value` deletes the cookie.
pub(crate) fn set_cookie(name: &str, value: Option<&str>, secure: bool) -> Option<HeaderValue> {
    cookie_with(name, value, "/sourcegraph", "SameSite=Strict", secure)
}

/// A `HttpOnly` `Set-Cookie` value of `name` on `path` with the attributes `rest`
/// (`SameSite=Lax; Max-Age=600`); `None` as `value` deletes it.
pub(crate) fn cookie_with(
    name: &str,
    value: Option<&str>,
    path: &str,
    rest: &str,
    secure: bool,
) -> Option<HeaderValue> {
    let mut text = match value {
        Some(value) => format!("{name}={value}"),
        None => format!("{name}=; Max-Age=0"),
    };
    text.push_str(&format!("; Path={path}; HttpOnly; {rest}"));
    if secure {
        text.push_str("; Secure");
    }
    HeaderValue::from_str(&text).ok()
}

/// Compares two secrets in time that does not depend on where they differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_and_made_strict() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; csg_csrf=abc; b=2".parse().unwrap());
        assert_eq!(cookie(&headers, CSRF_COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, SESSION_COOKIE), None);
        let set = set_cookie(SESSION_COOKIE, Some("x"), true).unwrap();
        assert_eq!(
            set,
            "csg_session=x; Path=/sourcegraph; HttpOnly; SameSite=Strict; Secure"
        );
        let gone = set_cookie(SESSION_COOKIE, None, false).unwrap();
        assert!(gone.to_str().unwrap().contains("Max-Age=0"));
    }

    #[test]
    fn session_csrf_tokens_are_derived_apart() {
        let (a, b) = (random_hex().unwrap(), random_hex().unwrap());
        assert_eq!(csrf_of(&a), csrf_of(&a));
        assert_ne!(csrf_of(&a), csrf_of(&b));
        assert!(well_formed(&csrf_of(&a)), "usable as the CSRF cookie");
        assert_ne!(csrf_of(&a), a);
        // Not the stored key of the session (the plain SHA-256 of the id).
        let stored: String = Sha256::digest(a.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_ne!(csrf_of(&a), stored);
        assert!(same_secret("abc", "abc") && !same_secret("abc", "abd") && !same_secret("a", "ab"));
    }
}
