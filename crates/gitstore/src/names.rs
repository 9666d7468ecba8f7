//! Validated names: repository names, repository-relative paths and full commit ids.

use crate::Error;
use std::fmt;

/// A repository name `owner/name` (G-1): two segments of `[A-Za-z0-9._-]`, neither `.` nor
/// `..`, at most 100 bytes each.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoName(String);

impl RepoName {
    /// Validates `name`.
    pub fn parse(name: &str) -> Result<Self, Error> {
        let bad = |reason: &str| Error::InvalidName {
            name: name.chars().take(200).collect(),
            reason: reason.to_string(),
        };
        let mut parts = name.split('/');
        let (Some(owner), Some(repo), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("it must have exactly two segments"));
        };
        for segment in [owner, repo] {
            if segment.is_empty() {
                return Err(bad("a segment is empty"));
            }
            if segment.len() > 100 {
                return Err(bad("a segment is longer than 100 bytes"));
            }
            if segment == "." || segment == ".." {
                return Err(bad("a segment is `.` or `..`"));
            }
            if !segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            {
                return Err(bad(
                    "segments may only hold letters, digits, `.`, `_` and `-`",
                ));
            }
        }
        Ok(Self(name.to_string()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A normal repository-relative path (G-6): `/`-separated segments, no empty segment, no `.`
/// or `..`, no leading `/`, no backslash, no NUL, no control characters, at most 4096 bytes.
/// The empty path is the repository root (see [`RepoPath::root`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RepoPath(String);

impl RepoPath {
    /// The repository root.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// Validates `path`. A single trailing `/` is tolerated (`docs/` names the directory
    /// `docs`); everything else that is not normal is refused with the reason.
    pub fn parse(path: &str) -> Result<Self, Error> {
        let bad = |reason: &'static str| Error::InvalidPath {
            path: path
                .chars()
                .take(200)
                .collect::<String>()
                .escape_debug()
                .to_string(),
            reason,
        };
        if path.len() > 4096 {
            return Err(bad("longer than 4096 bytes"));
        }
        if path.contains('\0') {
            return Err(bad("contains a NUL byte"));
        }
        if path.contains('\\') {
            return Err(bad("contains a backslash; use `/` between segments"));
        }
        if path.chars().any(char::is_control) {
            return Err(bad("contains a control character"));
        }
        if path.starts_with('/') {
            return Err(bad("absolute paths are not allowed"));
        }
        let trimmed = path.strip_suffix('/').unwrap_or(path);
        if trimmed.is_empty() {
            return if path.is_empty() {
                Ok(Self::root())
            } else {
                Err(bad("absolute paths are not allowed"))
            };
        }
        for segment in trimmed.split('/') {
            match segment {
                "" => return Err(bad("contains an empty segment (`//`)")),
                "." => return Err(bad("contains a `.` segment")),
                ".." => return Err(bad("contains a `..` segment")),
                _ => {}
            }
        }
        Ok(Self(trimmed.to_string()))
    }

    /// The path as text (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `self` is `scope` or lies below it.
    pub fn is_within(&self, scope: &RepoPath) -> bool {
        scope.is_root()
            || self.0 == scope.0
            || (self.0.starts_with(&scope.0) && self.0.as_bytes().get(scope.0.len()) == Some(&b'/'))
    }

    /// The path's segments.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }
}

impl fmt::Display for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A full 40-hex commit SHA, lower case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommitId(String);

impl CommitId {
    /// Accepts exactly 40 hex digits (either case; stored lower case).
    pub fn parse(hex: &str) -> Option<Self> {
        (hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Self(hex.to_ascii_lowercase()))
    }

    /// The SHA as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G-6: the bad-path table.
    #[test]
    fn g6_repo_path_rejects_unsafe_paths() {
        for bad in [
            "..",
            "../x",
            "a/../b",
            "/etc/passwd",
            "a//b",
            "a\\b",
            "..\\x",
            "a\0b",
            "./a",
            "a/./b",
            "/",
            "a\nb",
        ] {
            assert!(RepoPath::parse(bad).is_err(), "{bad:?} must be refused");
        }
        for good in [
            "",
            "a",
            "a/b.md",
            "docs/",
            ".github/workflows/ci.yml",
            "a..b",
            "…/ünïcode",
        ] {
            assert!(RepoPath::parse(good).is_ok(), "{good:?} must be accepted");
        }
        assert_eq!(RepoPath::parse("docs/").unwrap().as_str(), "docs");
    }

    #[test]
    fn g2_scope_containment() {
        let scope = RepoPath::parse("packages/docs").unwrap();
        assert!(
            RepoPath::parse("packages/docs/a.md")
                .unwrap()
                .is_within(&scope)
        );
        assert!(RepoPath::parse("packages/docs").unwrap().is_within(&scope));
        assert!(
            !RepoPath::parse("packages/docsx/a.md")
                .unwrap()
                .is_within(&scope)
        );
        assert!(!RepoPath::parse("packages").unwrap().is_within(&scope));
        assert!(
            RepoPath::parse("anything")
                .unwrap()
                .is_within(&RepoPath::root())
        );
    }

    #[test]
    fn g1_repo_names() {
        assert!(RepoName::parse("local/csg").is_ok());
        for bad in ["csg", "a/b/c", "/b", "a/", "../x", "a/..", "a b/c", "a/ü"] {
            assert!(RepoName::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
