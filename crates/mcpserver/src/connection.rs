//! The connection parameter `plugins` (M-2) as it arrives over Streamable HTTP: the query of
//! the endpoint URL (`/sourcegraph/mcp?plugins=auto`), which every POST of the connection
//! repeats, so it is read from each request's [`http::request::Parts`] (rmcp puts them into
//! the request context's extensions).

use service::ConnectionPlugins;

/// Reads `plugins` from a URL query string (without the `?`). Absent → `Auto`.
///
/// Percent-encoding and `+` are decoded as browsers and HTTP clients encode queries, so
/// `plugins=a%2Cb` is `a,b`. A parameter given twice is refused rather than guessed at.
pub(crate) fn plugins_from_query(query: Option<&str>) -> Result<ConnectionPlugins, String> {
    let mut found: Option<String> = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if decode(key).as_deref() != Some("plugins") {
            continue;
        }
        let Some(value) = decode(value) else {
            return Err(
                "invalid connection parameter plugins: the value is not valid percent-encoded UTF-8"
                    .to_string(),
            );
        };
        if found.is_some() {
            return Err(
                "invalid connection parameter plugins: it is given more than once in the endpoint URL; give it once, e.g. `?plugins=a,b`"
                    .to_string(),
            );
        }
        found = Some(value);
    }
    ConnectionPlugins::parse(found.as_deref()).map_err(|e| e.to_string())
}

/// `application/x-www-form-urlencoded` decoding of one key or value; `None` when the bytes are
/// not UTF-8.
fn decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| {
                    std::str::from_utf8(h)
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                });
                match hex {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    // A stray `%` stays literal, as in WHATWG URL parsing.
                    None => out.push(b'%'),
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// M-2: absent, `auto`, `off`, a list (encoded or not), and refusals.
    #[test]
    fn m2_plugins_from_query() {
        assert_eq!(plugins_from_query(None), Ok(ConnectionPlugins::Auto));
        assert_eq!(plugins_from_query(Some("")), Ok(ConnectionPlugins::Auto));
        assert_eq!(
            plugins_from_query(Some("plugins=auto")),
            Ok(ConnectionPlugins::Auto)
        );
        assert_eq!(
            plugins_from_query(Some("x=1&plugins=off")),
            Ok(ConnectionPlugins::Off)
        );
        let named = ConnectionPlugins::Named(vec!["a".into(), "b".into()]);
        assert_eq!(plugins_from_query(Some("plugins=a,b")), Ok(named.clone()));
        assert_eq!(plugins_from_query(Some("plugins=a%2Cb")), Ok(named.clone()));
        assert_eq!(plugins_from_query(Some("plugins=a%2C+b")), Ok(named));
        assert_eq!(
            plugins_from_query(Some("plugins")),
            Ok(ConnectionPlugins::Auto)
        );
        let bogus = plugins_from_query(Some("plugins=bogus%20value")).unwrap_err();
        assert!(bogus.contains("plugins=bogus value"), "{bogus}");
        let twice = plugins_from_query(Some("plugins=a&plugins=b")).unwrap_err();
        assert!(twice.contains("more than once"), "{twice}");
        assert!(plugins_from_query(Some("plugins=%FF")).is_err());
        assert_eq!(
            plugins_from_query(Some("plugin=zz z")),
            Ok(ConnectionPlugins::Auto)
        );
    }
}
