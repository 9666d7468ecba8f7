//! The site's URLs (SPEC §9). Repository paths and revisions are untrusted: every segment is
//! percent-encoded, so a file named `a#b?.md` links to itself and never to something else.

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

/// What must be encoded inside one path segment: everything that would end it, start a query
/// or fragment, or be read as markup.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'\'')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// `path` (segments separated by `/`) with each segment encoded.
fn encode_path(path: &str) -> String {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(encode_segment)
        .collect::<Vec<_>>()
        .join("/")
}

/// `/sourcegraph/repos/<owner>/<name>`.
pub fn repo_url(repo: &str) -> String {
    format!("/sourcegraph/repos/{}", encode_path(repo))
}

/// One segment, `/` included (a branch `feature/x` is one revision).
fn encode_segment(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

/// `/sourcegraph/repos/<owner>/<name>/-/tree/<rev>/<path>`.
pub fn tree_url(repo: &str, rev: &str, path: &str) -> String {
    let mut url = format!("{}/-/tree/{}", repo_url(repo), encode_segment(rev));
    if !path.is_empty() {
        url.push('/');
        url.push_str(&encode_path(path));
    }
    url
}

/// `/sourcegraph/repos/<owner>/<name>/-/blob/<rev>/<path>` (the form evidence-chain plugins
/// link to; add `#L2-L4`).
pub fn blob_url(repo: &str, rev: &str, path: &str) -> String {
    format!(
        "{}/-/blob/{}/{}",
        repo_url(repo),
        encode_segment(rev),
        encode_path(path)
    )
}

/// `/sourcegraph/repos/<owner>/<name>/-/plugins[?rev=<sha>]`.
pub fn plugins_url(repo: &str, rev: Option<&str>) -> String {
    let mut url = format!("{}/-/plugins", repo_url(repo));
    if let Some(rev) = rev {
        url.push_str("?rev=");
        url.push_str(&encode_segment(rev));
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_encoded() {
        assert_eq!(
            blob_url("acme/docs", "main", "dir/a #b?.md"),
            "/sourcegraph/repos/acme/docs/-/blob/main/dir/a%20%23b%3F.md"
        );
        assert_eq!(
            tree_url("acme/docs", "v1", ""),
            "/sourcegraph/repos/acme/docs/-/tree/v1"
        );
        assert_eq!(
            tree_url("acme/docs", "feature/x", "src"),
            "/sourcegraph/repos/acme/docs/-/tree/feature%2Fx/src"
        );
        assert_eq!(
            plugins_url("acme/docs", Some("abc")),
            "/sourcegraph/repos/acme/docs/-/plugins?rev=abc"
        );
        assert_eq!(
            blob_url("a/b", "m", "x\"><script>"),
            "/sourcegraph/repos/a/b/-/blob/m/x%22%3E%3Cscript%3E"
        );
    }
}
