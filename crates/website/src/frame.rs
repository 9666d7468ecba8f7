//! What every page shares: the document around its content, a repository's header with its
//! tabs, breadcrumbs and short SHAs.

use crate::paths::{commits_url, plugins_url, repo_url, tree_url};
use crate::{CSS_PATH, Chrome, JS_PATH};
use maud::{DOCTYPE, Markup, html};

/// Where [`FAVICON_SVG`] is served: every page names it, so browsers ask for no
/// `/favicon.ico` (a 404 in every page's console otherwise).
pub const FAVICON_PATH: &str = "/sourcegraph/static/favicon.svg";
/// The site's icon: a graph of three nodes (SVG, same origin, as the CSP's `img-src 'self'`
/// allows).
pub const FAVICON_SVG: &str = concat!(
    r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">"##,
    r##"<rect width="32" height="32" rx="7" fill="#0550ae"/>"##,
    r##"<path d="M9 22 16 9l7 13z" fill="none" stroke="#fff" stroke-width="2"/>"##,
    r##"<circle cx="16" cy="9" r="3.5" fill="#fff"/><circle cx="9" cy="22" r="3.5" fill="#fff"/>"##,
    r##"<circle cx="23" cy="22" r="3.5" fill="#fff"/></svg>"##,
);

/// The document around every page's content, with the search box in the top bar.
pub(crate) fn layout(chrome: &Chrome, title: &str, content: Markup) -> String {
    document(chrome, title, content, true)
}

/// The document around the search page's content: its own form has the query box (with the
/// id `site-search`, which `/` focuses), so the top bar shows none.
pub(crate) fn layout_for_search(chrome: &Chrome, title: &str, content: Markup) -> String {
    document(chrome, title, content, false)
}

fn document(chrome: &Chrome, title: &str, content: Markup, top_search: bool) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) " · Context Source Graph" }
                link rel="icon" type="image/svg+xml" href=(FAVICON_PATH);
                link rel="stylesheet" href=(CSS_PATH);
                script src=(JS_PATH) defer {}
            }
            body {
                header.top {
                    a.brand href="/sourcegraph/" { "Context Source Graph" }
                    // `/` focuses this box (site.js), as on the code hosts.
                    @if top_search { form.site-search role="search" method="get" action="/sourcegraph/search" {
                        input #site-search type="search" name="q" placeholder="Search code (press /)"
                            aria-label="Search code" aria-keyshortcuts="/" autocomplete="off";
                    } }
                    nav {
                        a href="/sourcegraph/" { "Repositories" }
                        a href="/sourcegraph/search" { "Search" }
                        a href="/sourcegraph/connect" { "Connect" }
                        @if let Some(user) = &chrome.user {
                            a href="/sourcegraph/settings/tokens" { "Tokens" }
                            form.inline method="post" action="/sourcegraph/sign-out" {
                                input type="hidden" name="csrf" value=(chrome.csrf);
                                button type="submit" { "Sign out " (user) }
                            }
                        } @else {
                            a href="/sourcegraph/sign-in" { "Sign in" }
                        }
                    }
                }
                main { (content) }
            }
        }
    }
    .into_string()
}

/// Which tab of a repository page is open.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tab {
    Files,
    /// The history pages (`/-/commits/…`, `/-/commit/…`, `/-/compare/…`).
    Commits,
    Plugins,
}

/// A repository's name and its tabs; `rev` is the page's revision (a commit on pages that
/// show one): the Plugins tab looks there and the Commits tab lists its history (the default
/// branch's when `None`, the server's `HEAD`).
pub(crate) fn repo_header(repo: &str, tab: Tab, rev: Option<&str>) -> Markup {
    repo_header_at(repo, tab, rev, rev)
}

/// [`repo_header`] with the Commits tab's revision given on its own (`commits_rev`: a
/// branch the page was opened at, or the default branch; `None`: `HEAD`).
pub(crate) fn repo_header_at(
    repo: &str,
    tab: Tab,
    rev: Option<&str>,
    commits_rev: Option<&str>,
) -> Markup {
    html! {
        h1 { a href=(repo_url(repo)) { (repo) } }
        nav.tabs {
            a.active[tab == Tab::Files] href=(repo_url(repo)) { "Files" }
            a.active[tab == Tab::Commits] href=(commits_url(repo, commits_rev.unwrap_or("HEAD"), "")) { "Commits" }
            a.active[tab == Tab::Plugins] href=(plugins_url(repo, rev)) { "Plugins" }
        }
    }
}

/// The first 12 hex digits of a SHA, the whole SHA as a tooltip.
pub(crate) fn short_sha(sha: &str) -> Markup {
    html! { code title=(sha) { (sha.get(..12).unwrap_or(sha)) } }
}

pub(crate) fn display_path(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

/// `repo / dir / sub / file`, each directory a link to its tree.
pub(crate) fn breadcrumbs(repo: &str, rev: &str, path: &str) -> Markup {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    html! {
        nav.crumbs {
            a href=(tree_url(repo, rev, "")) { (repo) }
            @for (i, segment) in segments.iter().enumerate() {
                " / "
                @if i + 1 == segments.len() {
                    span { (segment) }
                } @else {
                    a href=(tree_url(repo, rev, &segments[..=i].join("/"))) { (segment) }
                }
            }
        }
    }
}

/// The link to the same page at the full SHA (`url`), shown on pages opened at a branch or tag;
/// the script's `y` key follows the page's `a[data-permalink]`, as on GitHub.
pub(crate) fn permalink(url: &str) -> Markup {
    html! { a.permalink data-permalink href=(url) { "Permalink" } }
}
