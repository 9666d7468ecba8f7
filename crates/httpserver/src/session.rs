//! The site's sessions and CSRF tokens. A visitor signs in by pasting an API token; the
//! session keeps it in this process's memory (never in a cookie) and the access layer checks
//! it again through the service on every request, so a revoked token or a removed user ends
//! the session on the next page. Cookies are `HttpOnly`, `SameSite=Strict`, scoped to
//! `/sourcegraph` and `Secure` when the site's origin is https.
//!
//! Every form carries a CSRF token: a random value kept in its own cookie for a visitor, and
//! the one fixed at sign-in for a session; a POST whose form value differs is refused.

use axum::http::{HeaderMap, HeaderValue, header};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The cookie that names a session.
pub(crate) const SESSION_COOKIE: &str = "csg_session";
/// The cookie with a visitor's CSRF token.
pub(crate) const CSRF_COOKIE: &str = "csg_csrf";
/// A session unused this long is over.
const IDLE: Duration = Duration::from_secs(12 * 60 * 60);
/// Sessions one process keeps at most; the least recently used goes first.
const MAX_SESSIONS: usize = 10_000;

/// A signed-in visitor: the token they pasted and the CSRF token of their forms.
#[derive(Clone)]
pub(crate) struct Session {
    pub(crate) token: String,
    pub(crate) csrf: String,
    last_seen: Instant,
}

/// The sessions of this process.
#[derive(Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// A new session for `token`; answers its id (the cookie value).
    pub(crate) fn create(&self, token: String, csrf: String) -> Option<String> {
        let id = random_hex()?;
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if map.len() >= MAX_SESSIONS {
            map.retain(|_, s| now.saturating_duration_since(s.last_seen) < IDLE);
            if map.len() >= MAX_SESSIONS
                && let Some(oldest) = map
                    .iter()
                    .min_by_key(|(_, s)| s.last_seen)
                    .map(|(id, _)| id.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(
            id.clone(),
            Session {
                token,
                csrf,
                last_seen: now,
            },
        );
        Some(id)
    }

    /// The live session `id`, marked used now.
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let session = map.get_mut(id)?;
        if now.saturating_duration_since(session.last_seen) >= IDLE {
            map.remove(id);
            return None;
        }
        session.last_seen = now;
        Some(session.clone())
    }

    /// Ends session `id`.
    pub(crate) fn remove(&self, id: &str) {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
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

/// A `Set-Cookie` value; `None` as `value` deletes the cookie.
pub(crate) fn set_cookie(name: &str, value: Option<&str>, secure: bool) -> Option<HeaderValue> {
    let mut text = match value {
        Some(value) => format!("{name}={value}"),
        None => format!("{name}=; Max-Age=0"),
    };
    text.push_str("; Path=/sourcegraph; HttpOnly; SameSite=Strict");
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
    fn sessions_live_until_removed() {
        let sessions = Sessions::default();
        let id = sessions.create("csg_t".into(), "c".into()).unwrap();
        assert!(well_formed(&id));
        assert_eq!(sessions.get(&id).unwrap().token, "csg_t");
        sessions.remove(&id);
        assert!(sessions.get(&id).is_none());
        assert!(same_secret("abc", "abc") && !same_secret("abc", "abd") && !same_secret("a", "ab"));
    }
}
