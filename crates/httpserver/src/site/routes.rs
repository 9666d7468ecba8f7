//! The website's routes and what one request of each may spend (O-9): the one table. A
//! page's [`CallContext`](service::CallContext) carries its route's cost, so every service
//! call the page makes runs under it — the same frame, classes and slots as the tools.

use service::{Class, Cost};
use std::time::Duration;

/// A kind of website page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/sourcegraph/`: the repositories.
    Repositories,
    /// `/sourcegraph/repos/<owner>/<name>`: facts, top directory, README.
    Home,
    /// `/-/tree/<rev>/<path>`: a directory and its README.
    Tree,
    /// `/-/blob/<rev>/<path>`: a highlighted file.
    Blob,
    /// `/-/raw/<rev>/<path>`: a file's exact bytes.
    Raw,
    /// `/-/blame/<rev>/<path>`.
    Blame,
    /// `/-/commits/<rev>[/<path>]`: history, a file's across renames.
    Commits,
    /// `/-/commit/<sha>`: one commit and its diff.
    Commit,
    /// `/-/compare/<base>...<head>`.
    Compare,
    /// `/-/plugins`: the Plugins tab.
    Plugins,
    /// `/sourcegraph/search`.
    Search,
    /// The access page, tokens, sign-in and sign-out, assets, anything else.
    Other,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SiteRoute {
    pub(crate) route: Route,
    /// The route as SPEC §9 names it, in Markdown (the README's table shows it).
    pub(crate) pattern: &'static str,
    pub(crate) cost: Cost,
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Every route with its cost. A README renders under the page's deadline with a slot of
/// its own class ([`Class::Readme`]) when it is not cached; a file page parses with one
/// ([`Class::Parse`]) when the file was not highlighted before.
pub(crate) const ROUTES: &[SiteRoute] = &[
    SiteRoute {
        route: Route::Repositories,
        pattern: "`/sourcegraph/`",
        cost: Cost::light(secs(10)),
    },
    SiteRoute {
        route: Route::Home,
        pattern: "`/sourcegraph/repos/<owner>/<name>`",
        cost: Cost::when_heavy(Class::Readme, secs(10)),
    },
    SiteRoute {
        route: Route::Tree,
        pattern: "`/sourcegraph/repos/<owner>/<name>/-/tree/<rev>/<path>`",
        cost: Cost::when_heavy(Class::Readme, secs(10)),
    },
    SiteRoute {
        route: Route::Blob,
        pattern: "`/sourcegraph/repos/<owner>/<name>/-/blob/<rev>/<path>`",
        cost: Cost::when_heavy(Class::Parse, secs(10)),
    },
    SiteRoute {
        route: Route::Raw,
        pattern: "`/sourcegraph/repos/<owner>/<name>/-/raw/<rev>/<path>`",
        cost: Cost::heavy(Class::Raw, secs(30)),
    },
    SiteRoute {
        route: Route::Blame,
        pattern: "`/sourcegraph/repos/<owner>/<name>/-/blame/<rev>/<path>`",
        cost: Cost::heavy(Class::Blame, secs(6)),
    },
    SiteRoute {
        route: Route::Commits,
        pattern: "`/sourcegraph/repos/<owner>/<name>/-/commits/<rev>[/<path>]`",
        cost: Cost::heavy(Class::History, secs(6)).walking(100_000, 50),
    },
    SiteRoute {
        route: Route::Commit,
        pattern: "`/sourcegraph/repos/<owner>/<name>/-/commit/<sha>`",
        cost: Cost::heavy(Class::Diff, secs(8)),
    },
    SiteRoute {
        route: Route::Compare,
        pattern: "`/sourcegraph/repos/<owner>/<name>/-/compare/<base>...<head>`",
        cost: Cost::heavy(Class::Diff, secs(8)),
    },
    SiteRoute {
        route: Route::Plugins,
        pattern: "`/sourcegraph/repos/<owner>/<name>/-/plugins`",
        cost: Cost::light(secs(10)),
    },
    SiteRoute {
        route: Route::Search,
        pattern: "`/sourcegraph/search`",
        cost: Cost::when_heavy(Class::Search, secs(30)),
    },
    SiteRoute {
        route: Route::Other,
        pattern: "`/sourcegraph/connect`, `/sourcegraph/settings/tokens`, sign-in, sign-out, assets",
        cost: Cost::light(secs(10)),
    },
];

impl Route {
    /// Every route (the table's test walks them).
    #[cfg(test)]
    pub(crate) const ALL: [Route; 12] = [
        Route::Repositories,
        Route::Home,
        Route::Tree,
        Route::Blob,
        Route::Raw,
        Route::Blame,
        Route::Commits,
        Route::Commit,
        Route::Compare,
        Route::Plugins,
        Route::Search,
        Route::Other,
    ];

    /// The route's cost from [`ROUTES`].
    pub(crate) fn cost(self) -> Cost {
        ROUTES
            .iter()
            .find(|row| row.route == self)
            .map_or(Cost::light(secs(10)), |row| row.cost)
    }
}

/// The README's table of the website's budgets (Markdown), one row per route of the site's
/// route table: what each page may spend (O-9).
pub fn site_budgets_table() -> String {
    let mut out = String::from("| website page | budget |\n| --- | --- |\n");
    for row in ROUTES {
        out.push_str(&format!("| {} | {} |\n", row.pattern, row.cost.summary()));
    }
    out
}

/// The website's pages as the table names them (`/sourcegraph/repos/<owner>/<name>/-/blob/<rev>/<path>`,
/// `/sourcegraph/search`, …), each a path pattern: what the access matrix walks (issue 43).
/// The last row (the access page, tokens, sign-in, assets) names no repository and is left
/// out.
pub fn site_route_patterns() -> Vec<&'static str> {
    ROUTES
        .iter()
        .filter(|row| row.route != Route::Other)
        .map(|row| row.pattern.trim_matches('`'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// O-9: the README documents every route's budget from the table
    /// (`CSG_BLESS=1 cargo test -p httpserver --lib site_routes_readme` rewrites the block).
    #[test]
    fn o9_site_routes_readme_block_is_generated_from_the_table() {
        let (begin, end) = (
            "<!-- generated:site-routes -->",
            "<!-- /generated:site-routes -->",
        );
        let path = format!("{}/../../README.md", env!("CARGO_MANIFEST_DIR"));
        let committed = std::fs::read_to_string(&path).unwrap();
        let fresh = tools::reference::replace_block(&committed, begin, end, &site_budgets_table())
            .expect("README.md has the site-routes block");
        if std::env::var_os("CSG_BLESS").is_some() && fresh != committed {
            std::fs::write(&path, &fresh).unwrap();
            return;
        }
        assert!(
            fresh == committed,
            "README.md: the site-routes block differs from ROUTES; run `CSG_BLESS=1 cargo \
             test -p httpserver --lib site_routes_readme` and review the diff"
        );
    }

    /// O-9: every route has exactly one row, with a bounded cost; heavy pages take slots.
    #[test]
    fn o9_every_route_has_one_bounded_cost() {
        for route in Route::ALL {
            let rows: Vec<_> = ROUTES.iter().filter(|row| row.route == route).collect();
            assert_eq!(rows.len(), 1, "{route:?} needs exactly one row in ROUTES");
            assert!(rows[0].cost.is_bounded(), "{route:?}: {:?}", rows[0].cost);
            assert!(!rows[0].pattern.is_empty());
        }
        assert_eq!(
            ROUTES.len(),
            Route::ALL.len(),
            "a row for a route not in ALL"
        );
        for heavy in [
            Route::Blame,
            Route::Commits,
            Route::Commit,
            Route::Compare,
            Route::Raw,
        ] {
            assert_ne!(heavy.cost().class, Class::Light, "{heavy:?}");
            assert_eq!(heavy.cost().admit, service::Admit::Always, "{heavy:?}");
        }
        assert!(Route::Commits.cost().walk > 0);
    }
}
