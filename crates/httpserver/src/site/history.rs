//! The history pages: blame (`/-/blame/<rev>/<path>`), commits (`/-/commits/<rev>[/<path>]`),
//! one commit (`/-/commit/<sha>`) and a comparison (`/-/compare/<base>...<head>`).

use super::{Page, RepoQuery, SiteState};
use axum::response::Response;

/// `GET …/-/blame/<rev>/<path>`.
pub(super) async fn blame(
    _state: &SiteState,
    page: &Page,
    _repo: &str,
    _rev: &str,
    _path: &str,
    _query: &RepoQuery,
) -> Response {
    super::not_found(&page.chrome, "blame pages are not served yet")
}

/// `GET …/-/commits/<rev>[/<path>]`.
pub(super) async fn commits(
    _state: &SiteState,
    page: &Page,
    _repo: &str,
    _rev: &str,
    _path: &str,
    _query: &RepoQuery,
) -> Response {
    super::not_found(&page.chrome, "history pages are not served yet")
}

/// `GET …/-/commit/<sha>`.
pub(super) async fn commit(
    _state: &SiteState,
    page: &Page,
    _repo: &str,
    _sha: &str,
    _query: &RepoQuery,
) -> Response {
    super::not_found(&page.chrome, "commit pages are not served yet")
}

/// `GET …/-/compare/<base>...<head>`.
pub(super) async fn compare(
    _state: &SiteState,
    page: &Page,
    _repo: &str,
    _base: &str,
    _head: &str,
    _query: &RepoQuery,
) -> Response {
    super::not_found(&page.chrome, "compare pages are not served yet")
}
