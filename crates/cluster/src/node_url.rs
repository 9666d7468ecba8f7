//! A replica's address as the other replicas reach it.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// A replica's URL as other replicas reach it, e.g. `http://10.0.0.5:7878`: `http` or `https`,
/// a host, an optional port, nothing else. [`NodeUrl::parse`] normalises it to
/// `scheme://host[:port]` (lower-case scheme and host name, no trailing slash, no default
/// port), so that one replica always writes the same string.
///
/// Ownership hashes the URL's exact text. A `NodeUrl` read from the members table keeps the
/// text another replica wrote, unchanged, so every replica hashes the same strings whatever
/// version normalised them.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeUrl(String);

impl NodeUrl {
    /// Checks and normalises `text`: `http://` or `https://`, a host name or IP address
    /// (IPv6 in brackets), an optional port; a trailing `/` is dropped; a path, query, fragment
    /// or user name is refused.
    pub fn parse(text: &str) -> Result<NodeUrl, Error> {
        let invalid = |problem: &str| Error::InvalidNodeUrl {
            given: without_userinfo(text),
            problem: problem.to_owned(),
        };
        let trimmed = text.trim();
        if !trimmed.contains("://") {
            return Err(invalid("it has no scheme"));
        }
        let url = url::Url::parse(trimmed).map_err(|e| invalid(&e.to_string()))?;
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(invalid(&format!(
                "its scheme is {scheme}, not http or https"
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("it carries a user name or password"));
        }
        let host = match url.host_str() {
            Some(host) if !host.is_empty() => host,
            _ => return Err(invalid("it names no host")),
        };
        if url.path() != "/" && !url.path().is_empty() {
            return Err(invalid(&format!("it has a path ({})", url.path())));
        }
        if url.query().is_some() {
            return Err(invalid("it has a query string"));
        }
        if url.fragment().is_some() {
            return Err(invalid("it has a fragment"));
        }
        Ok(NodeUrl(match url.port() {
            Some(port) => format!("{scheme}://{host}:{port}"),
            None => format!("{scheme}://{host}"),
        }))
    }

    /// A URL exactly as a members row holds it (written by some replica's `parse`).
    pub(crate) fn stored(text: String) -> NodeUrl {
        NodeUrl(text)
    }

    /// The normalised URL, e.g. `http://10.0.0.5:7878`; append a path to it (`/sourcegraph/…`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `text` with any user info (`user:password@`) replaced by `***@`: an error must not echo a
/// password.
fn without_userinfo(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => text.to_owned(),
    }
}

impl FromStr for NodeUrl {
    type Err = Error;

    fn from_str(text: &str) -> Result<NodeUrl, Error> {
        NodeUrl::parse(text)
    }
}

impl AsRef<str> for NodeUrl {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NodeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_what_it_accepts() {
        let good = [
            ("http://10.0.0.5:7878", "http://10.0.0.5:7878"),
            ("http://10.0.0.5:7878/", "http://10.0.0.5:7878"),
            (
                "  HTTP://Replica-1.Example:7878/ ",
                "http://replica-1.example:7878",
            ),
            ("https://csg.example", "https://csg.example"),
            ("https://csg.example:443/", "https://csg.example"),
            ("http://csg.example:80", "http://csg.example"),
            ("http://[::1]:7878", "http://[::1]:7878"),
            ("https://csg.example:8443", "https://csg.example:8443"),
        ];
        for (given, normal) in good {
            let url = NodeUrl::parse(given).unwrap();
            assert_eq!(url.as_str(), normal, "{given}");
            assert_eq!(url.to_string(), normal);
            assert_eq!(NodeUrl::parse(url.as_str()).unwrap(), url, "idempotent");
        }
    }

    #[test]
    fn refuses_what_it_cannot_use_and_says_why() {
        let bad = [
            ("10.0.0.5:7878", "no scheme"),
            ("ftp://10.0.0.5", "not http or https"),
            ("http://user:secret@10.0.0.5:7878", "user name or password"),
            ("http://user@10.0.0.5:7878", "user name or password"),
            (
                "http://u:secret@10.0.0.5:7878/x?y",
                "\"http://***@10.0.0.5:7878/x?y\"",
            ),
            ("http://10.0.0.5:7878/csg", "path"),
            ("http://10.0.0.5:7878//", "path"),
            ("http://10.0.0.5:7878/?a=b", "query"),
            ("http://10.0.0.5:7878/?", "query"),
            ("http://10.0.0.5:7878#x", "fragment"),
            ("http://10.0.0.5:notaport", "invalid port"),
            ("http://", "empty host"),
            ("", "no scheme"),
        ];
        for (given, says) in bad {
            let e = NodeUrl::parse(given).unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, Error::InvalidNodeUrl { .. }), "{given}: {e:?}");
            assert!(text.contains(says), "{given}: {text}");
            assert!(text.contains("write it as http://HOST:PORT"), "{text}");
            assert!(!text.contains("secret"), "{text}");
        }
    }
}
