//! What every page shares: the document around its content, a repository's header with its
//! tabs, breadcrumbs and short SHAs.

use crate::paths::{plugins_url, repo_url, tree_url};
use crate::{CSS_PATH, Chrome, JS_PATH};
use maud::{DOCTYPE, Markup, html};

/// The document around every page's content.
pub(crate) fn layout(chrome: &Chrome, title: &str, content: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) " · Context Source Graph" }
                link rel="stylesheet" href=(CSS_PATH);
                script src=(JS_PATH) defer {}
            }
            body {
                header.top {
                    a.brand href="/sourcegraph/" { "Context Source Graph" }
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
    Plugins,
}

/// A repository's name and its tabs.
pub(crate) fn repo_header(repo: &str, tab: Tab, rev: Option<&str>) -> Markup {
    html! {
        h1 { a href=(repo_url(repo)) { (repo) } }
        nav.tabs {
            a.active[tab == Tab::Files] href=(repo_url(repo)) { "Files" }
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
