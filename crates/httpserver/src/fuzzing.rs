//! Entry points of the fuzz targets `routing`, `proxy` and `paths` (`fuzz/`, issue 43) and of
//! their corpus replay in CI (`tests/fuzz_corpus.rs`). Each feeds untrusted bytes to the real
//! parser it names and asserts what must hold of the answer; a panic is a finding. Not an API
//! (hidden), and nothing here changes what the server does.

use crate::client::{Prelude, TrustedProxies, prelude};
use http::{HeaderMap, HeaderValue};
use std::net::IpAddr;

/// Target `routing`: what cluster routing reads from a request before forwarding it
/// (`forward.rs`: the route, the query or the JSON body's `repo`, an MCP call's tool and
/// arguments; the site's paths through the site's parser) and the body limit's JSON count.
/// The input is `METHOD URI` on the first line, the body after it.
pub fn routing(data: &[u8]) {
    let (head, body) = match data.iter().position(|&b| b == b'\n') {
        Some(end) => (&data[..end], &data[end + 1..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let head = head.trim_end_matches('\r');
    let (method, uri) = head.split_once(' ').unwrap_or(("GET", head));
    let _ = crate::body::too_many_json_values(body);
    let Ok(method) = http::Method::from_bytes(method.as_bytes()) else {
        return;
    };
    let Ok(request) = http::Request::builder().method(method).uri(uri).body(()) else {
        return;
    };
    let (parts, ()) = request.into_parts();
    let (named, mcp) = crate::forward::named_for_fuzzing(&parts, Some(body));
    let (without_body, _) = crate::forward::named_for_fuzzing(&parts, None);
    let path = parts.uri.path();
    if let Some(raw) = path.strip_prefix("/sourcegraph/repos/") {
        // A repository page is routed by exactly what the page's own handler parses.
        let page = crate::site::repo_page_for_fuzzing(raw);
        assert_eq!(
            named.as_ref(),
            page.as_ref().map(|(_, repo, _, _)| repo),
            "routing and the site disagree on {path:?}"
        );
        assert_eq!(named, without_body, "a page's body named its repository");
    }
    if let Some(repo) = &named
        && path.starts_with("/sourcegraph/api/")
        && parts.method == http::Method::POST
    {
        // A JSON body names a repository only as a string it holds.
        let text = String::from_utf8_lossy(body);
        assert!(
            repo.is_empty() || text.contains(repo.as_str()) || text.contains('\\'),
            "routing named {repo:?}, which the body does not hold"
        );
    }
    if let Some((tool, _)) = &mcp {
        assert!(!tool.is_empty() || body.windows(2).any(|w| w == b"\"\""));
    }
}

/// Target `proxy`: a connection's PROXY protocol header (v1 text, v2 binary: `client.rs`'s
/// `prelude`, as `listener.rs` calls it on every read) and the client address of a request
/// behind trusted proxies (`X-Forwarded-For`, `--trusted-proxy` values). The whole input is
/// a connection's first bytes; read as text, its lines are the trusted-proxy setting, the
/// TCP peer, then `X-Forwarded-For` values.
pub fn proxy(data: &[u8]) {
    let whole = prelude(data);
    if let Prelude::Header { len, .. } = whole {
        assert!(len <= data.len(), "a header longer than its bytes");
        assert!(
            len >= 16 || data.starts_with(b"PROXY "),
            "a header shorter than its signature"
        );
        // The listener reads until the header is complete: every cut of it must ask for more
        // (never refuse a header that is only split across reads), and the header alone must
        // read the same.
        assert_eq!(
            prelude(&data[..len]),
            whole,
            "the header alone reads otherwise"
        );
        let step = (len / 64).max(1);
        for cut in (0..len).step_by(step) {
            let partial = prelude(&data[..cut]);
            assert!(
                matches!(partial, Prelude::More),
                "{cut} of a {len}-byte header read as {partial:?}"
            );
        }
    }
    let source = match whole {
        Prelude::Header { source, .. } => source,
        _ => None,
    };
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    let trusted = match TrustedProxies::parse(lines.next().unwrap_or_default()) {
        Ok(trusted) => {
            // The setting reads back from how it is shown.
            let shown = trusted.to_string();
            if !shown.is_empty() {
                let again = TrustedProxies::parse(&shown).expect("a shown setting parses");
                assert_eq!(again.to_string(), shown);
            }
            trusted
        }
        Err(_) => TrustedProxies::none(),
    };
    let peer: IpAddr = lines
        .next()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or(IpAddr::from([10, 0, 0, 1]));
    let mut headers = HeaderMap::new();
    for line in lines {
        if let Ok(value) = HeaderValue::from_bytes(line.as_bytes()) {
            headers.append("x-forwarded-for", value);
        }
    }
    let proxied = source.filter(|_| trusted.trusts(peer));
    let client = trusted.client(peer, proxied, &headers);
    if !trusted.trusts(peer) {
        assert_eq!(
            client,
            peer.to_canonical(),
            "an untrusted peer is the client"
        );
    }
    if let Some(source) = proxied
        && !trusted.trusts(source)
    {
        assert_eq!(
            client,
            source.to_canonical(),
            "an untrusted PROXY source is the client"
        );
    }
    assert_eq!(client, client.to_canonical());
}

/// Target `paths`: the site's repository paths (`site.rs`'s `parse_repo_page`, which routing
/// uses too) against the URLs the website writes (`website::paths`). The input's first line
/// is a raw path under `/sourcegraph/repos/`; its next lines a repository, a revision and a
/// file path to write URLs of.
pub fn paths(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let raw = lines.next().unwrap_or_default();
    if let Some((route, repo, rev, path)) = crate::site::repo_page_for_fuzzing(raw) {
        // A parsed page, written again by the website and parsed again, is the same page:
        // the site's paths are normal once parsed.
        let again = match route.as_str() {
            "Home" => Some(website::repo_url(&repo)),
            "Tree" => Some(website::tree_url(&repo, &rev, &path)),
            "Blob" => Some(website::blob_url(&repo, &rev, &path)),
            "Raw" => Some(website::raw_url(&repo, &rev, &path)),
            "Blame" => Some(website::blame_url(&repo, &rev, &path)),
            "Commits" => Some(website::commits_url(&repo, &rev, &path)),
            "Commit" => Some(website::commit_url(&repo, &rev)),
            "Plugins" => Some(website::plugins_url(&repo, None)),
            _ => None,
        };
        // Only a page of a valid name and a normal path is the same page written again: a
        // segment `%2F` or an empty revision is refused by the page's handler anyway.
        let well_formed = gitstore_like_repo(&repo)
            && normal_path(&path)
            && (matches!(route.as_str(), "Home" | "Plugins") || normal_rev(&rev));
        if let Some(url) = again
            && well_formed
        {
            let reparsed = url
                .strip_prefix("/sourcegraph/repos/")
                .and_then(crate::site::repo_page_for_fuzzing);
            assert_eq!(
                reparsed,
                Some((route, repo, rev, path)),
                "{raw:?} written as {url:?}"
            );
        }
    }
    let repo = lines.next().unwrap_or("owner/name");
    let rev = lines.next().unwrap_or("main");
    let path = lines.next().unwrap_or("src/lib.rs");
    // A URL the website writes for a real repository, revision and file names that page.
    let valid_repo = gitstore_like_repo(repo);
    let valid_path = !path.is_empty()
        && !path.starts_with('/')
        && !path.ends_with('/')
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..");
    if valid_repo && valid_path && normal_rev(rev) {
        for (route, url) in [
            ("Tree", website::tree_url(repo, rev, path)),
            ("Blob", website::blob_url(repo, rev, path)),
            ("Raw", website::raw_url(repo, rev, path)),
            ("Blame", website::blame_url(repo, rev, path)),
            ("Commits", website::commits_url(repo, rev, path)),
        ] {
            let parsed = url
                .strip_prefix("/sourcegraph/repos/")
                .and_then(crate::site::repo_page_for_fuzzing);
            assert_eq!(
                parsed,
                Some((
                    route.to_owned(),
                    repo.to_owned(),
                    rev.to_owned(),
                    path.to_owned()
                )),
                "{url:?}"
            );
            let query = format!("{url}?from=1");
            let _ = crate::site::named_repo(&url, Some(&query));
        }
        let compare = website::compare_url(repo, rev, rev);
        let parsed = compare
            .strip_prefix("/sourcegraph/repos/")
            .and_then(crate::site::repo_page_for_fuzzing);
        assert_eq!(
            parsed,
            Some((
                "Compare".into(),
                repo.to_owned(),
                format!("{rev}...{rev}"),
                String::new()
            )),
            "{compare:?}"
        );
    }
}

/// A repository name as `gitstore::RepoName` takes it (G-1): two segments of
/// `[A-Za-z0-9._-]`, neither `.` nor `..`, at most 100 bytes each.
fn gitstore_like_repo(name: &str) -> bool {
    let segments: Vec<&str> = name.split('/').collect();
    segments.len() == 2
        && segments.iter().all(|s| {
            !s.is_empty()
                && s.len() <= 100
                && *s != "."
                && *s != ".."
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
}

/// A repository-relative path as `gitstore::RepoPath` keeps it (G-6), or the root.
fn normal_path(path: &str) -> bool {
    path.is_empty()
        || path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// A revision a comparison can hold on either side of its `...`: not empty, no `..` (git's
/// ranges), neither starting nor ending with `.` (no ref name does, G-4).
fn normal_rev(rev: &str) -> bool {
    !rev.is_empty() && !rev.contains("..") && !rev.starts_with('.') && !rev.ends_with('.')
}
