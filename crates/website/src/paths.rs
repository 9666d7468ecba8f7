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
    rev_path_url("tree", repo, rev, path)
}

/// `/sourcegraph/repos/<owner>/<name>/-/blob/<rev>/<path>` (the form evidence-chain plugins
/// link to; add `#L2-L4`).
pub fn blob_url(repo: &str, rev: &str, path: &str) -> String {
    rev_path_url("blob", repo, rev, path)
}

/// `/sourcegraph/repos/<owner>/<name>/-/<kind>/<rev>/<path>`: the shape of every page that
/// names a revision and a file.
fn rev_path_url(kind: &str, repo: &str, rev: &str, path: &str) -> String {
    let mut url = format!("{}/-/{kind}/{}", repo_url(repo), encode_segment(rev));
    if !path.is_empty() {
        url.push('/');
        url.push_str(&encode_path(path));
    }
    url
}

/// `/sourcegraph/repos/<owner>/<name>/-/raw/<rev>/<path>`: the file's exact bytes.
pub fn raw_url(repo: &str, rev: &str, path: &str) -> String {
    rev_path_url("raw", repo, rev, path)
}

/// `/sourcegraph/repos/<owner>/<name>/-/blame/<rev>/<path>`.
pub fn blame_url(repo: &str, rev: &str, path: &str) -> String {
    rev_path_url("blame", repo, rev, path)
}

/// `/sourcegraph/repos/<owner>/<name>/-/commits/<rev>[/<path>]`: the history of the
/// repository, or of one path when `path` is not empty.
pub fn commits_url(repo: &str, rev: &str, path: &str) -> String {
    rev_path_url("commits", repo, rev, path)
}

/// `/sourcegraph/repos/<owner>/<name>/-/commit/<sha>`.
pub fn commit_url(repo: &str, sha: &str) -> String {
    rev_path_url("commit", repo, sha, "")
}

/// `/sourcegraph/repos/<owner>/<name>/-/compare/<base>...<head>`.
pub fn compare_url(repo: &str, base: &str, head: &str) -> String {
    format!(
        "{}/-/compare/{}...{}",
        repo_url(repo),
        encode_segment(base),
        encode_segment(head)
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
            compare_url("acme/docs", "v1", "feature/x"),
            "/sourcegraph/repos/acme/docs/-/compare/v1...feature%2Fx"
        );
        assert_eq!(
            commits_url("acme/docs", "main", "src/a b.rs"),
            "/sourcegraph/repos/acme/docs/-/commits/main/src/a%20b.rs"
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
