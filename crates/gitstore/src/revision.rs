//! What a revision string may be (G-4). We accept SHAs and plain ref names only: rev-parse
//! syntax (`HEAD~2`, `a..b`, `main@{yesterday}`, `:/msg`) is refused, so a caller can never
//! reach objects through expressions we do not check for retention.

use crate::Error;

/// Shortest accepted short SHA (G-4).
pub(crate) const MIN_SHORT_SHA: usize = 7;
/// Longest revision string we look at.
pub(crate) const MAX_REVISION_LEN: usize = 255;

/// Refuses anything that is not a plausible SHA or ref name.
pub(crate) fn validate_revision(revision: &str) -> Result<(), Error> {
    check_ref_like(revision).map_err(|reason| Error::InvalidRevision {
        revision: shown(revision),
        reason: reason.to_string(),
    })
}

/// The same rules for a configured default branch.
pub(crate) fn validate_branch(branch: &str) -> Result<(), Error> {
    check_ref_like(branch).map_err(|reason| Error::InvalidRevision {
        revision: shown(branch),
        reason: format!("not a valid branch name: {reason}"),
    })
}

/// A bounded, escaped copy for error messages.
fn shown(revision: &str) -> String {
    revision
        .chars()
        .take(100)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

fn check_ref_like(rev: &str) -> Result<(), &'static str> {
    if rev.is_empty() {
        return Err("it is empty");
    }
    if rev.len() > MAX_REVISION_LEN {
        return Err("it is longer than 255 bytes");
    }
    if rev.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("it contains whitespace or a control character");
    }
    for needle in ["..", "^", "~", ":", "@{", "?", "*", "[", "\\"] {
        if rev.contains(needle) {
            return Err(
                "revision expressions (`..`, `^`, `~`, `:`, `@{`, globs) are not supported; give a full SHA, a branch, a tag or a short SHA",
            );
        }
    }
    if rev == "@" {
        return Err("`@` is not supported; omit the revision for the default branch head");
    }
    if rev.starts_with('-') {
        return Err("it starts with `-`");
    }
    if rev.starts_with('/') || rev.ends_with('/') || rev.contains("//") {
        return Err("it has an empty path segment");
    }
    if rev.ends_with('.') || rev.ends_with(".lock") {
        return Err("it ends with `.` or `.lock`");
    }
    if rev.split('/').any(|segment| segment.starts_with('.')) {
        return Err("a segment starts with `.`");
    }
    Ok(())
}

/// Whether `s` is all hex digits.
pub(crate) fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G-4: rev-parse syntax and junk are refused before any lookup.
    #[test]
    fn g4_revision_syntax_is_refused() {
        for bad in [
            "",
            "main~1",
            "main^",
            "main^{tree}",
            "a..b",
            "a...b",
            ":/message",
            "main:README.md",
            "main@{1}",
            "@",
            "has space",
            "tab\t",
            "nl\n",
            "-flag",
            "/abs",
            "trailing/",
            "a//b",
            "x.lock",
            "dot.",
            ".hidden",
            "a/.b",
            "glob*",
            "q?",
            "br[",
            "back\\slash",
        ] {
            assert!(validate_revision(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(validate_revision(&"a".repeat(256)).is_err());
        for good in [
            "main",
            "feature/x",
            "v1.0.0",
            "refs/heads/main",
            "abc1234",
            "0123456789abcdef0123456789abcdef01234567",
            "HEAD",
            "release-2024_01",
        ] {
            assert!(validate_revision(good).is_ok(), "{good:?} must be accepted");
        }
    }
}
