//! `website` renders the pages of the site under `/sourcegraph/` (SPEC §9 routes, M-6, W-6's
//! Plugins tab) from the plain answers of `service`: repositories, a repository with its
//! tree, a file with line numbers and anchors, the Plugins tab, search, the access page, the
//! token page and sign-in.
//!
//! It knows no HTTP: `httpserver` routes requests here, keeps sessions and checks CSRF
//! tokens, and sends what these functions return. Everything that comes from a repository
//! (paths, contents, plugin metadata) or a caller (queries) is untrusted text: it reaches the
//! page only through `maud`'s escaping splices, and the pages load no script or style but
//! this crate's own two files ([`SITE_CSS`], [`SITE_JS`]), so a strict Content-Security-Policy
//! holds. Pages work without JavaScript; the script adds copy buttons and highlights a line
//! range (`#L2-L4`).

mod blob;
mod connect;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod history;
mod pages;
mod paths;
mod readme;
mod size;

pub use blob::{FileView, blob};
pub use connect::ClientConfig;
pub use frame::{FAVICON_PATH, FAVICON_SVG};
pub use history::{
    BlameRefusal, BlameView, CommitView, CommitsView, CompareView, FileTokens, SideTokens,
    blame_page, blame_refused_page, commit_page, commits_page, compare_page, diff_extent,
    relative_date,
};
pub use pages::{
    PROVIDER_SIGN_IN_PATH, connect_page, error_page, plugins, repositories, repository, search,
    sign_in, signed_in_page, tokens, tree,
};
pub use paths::{
    blame_url, blob_url, commit_url, commits_url, compare_url, plugins_url, raw_url, repo_url,
    tree_url,
};
pub use readme::{
    README_HTML_BYTES, Readme, RenderedReadme, known_paths, readme_path, readme_renders,
    render_readme,
};
pub use size::human_size;

/// The site's style sheet, served at [`CSS_PATH`]: one file per concern under `assets/`, served
/// as one.
pub const SITE_CSS: &str = concat!(
    include_str!("../assets/site.css"),
    include_str!("../assets/code.css"),
    include_str!("../assets/history.css"),
);
/// The site's only script (copy buttons, line-range highlight), served at [`JS_PATH`]: one
/// file per concern under `assets/` (their top-level names share one scope), served as one.
pub const SITE_JS: &str = concat!(
    include_str!("../assets/site.js"),
    include_str!("../assets/code.js"),
);
/// Where [`SITE_CSS`] is served.
pub const CSS_PATH: &str = "/sourcegraph/static/site.css";
/// Where [`SITE_JS`] is served.
pub const JS_PATH: &str = "/sourcegraph/static/site.js";

/// The Content-Security-Policy of every page: nothing but this site's own style sheet and
/// script, no inline code (no `unsafe-inline`), no framing, forms only to this site. Images
/// only from this site: a README's relative images come from its raw URLs (same origin);
/// images from other sites stay blocked (the README renderer never requests them).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; \
     script-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// What every page shows around its content: who is signed in, and the CSRF token its forms
/// carry.
#[derive(Debug, Clone, Default)]
pub struct Chrome {
    /// The signed-in user, if any.
    pub user: Option<String>,
    /// The value every form posts back as `csrf`.
    pub csrf: String,
    /// Whether visitors sign in through the company's identity provider.
    pub provider_sign_in: bool,
}
