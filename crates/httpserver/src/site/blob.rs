//! The file pages: `/-/blob/<rev>/<path>` (highlighted lines, the outline, definition
//! links, pages for large files) and `/-/raw/<rev>/<path>` (the exact bytes).

use super::{Page, RepoQuery, SiteState, error, html};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use service::{
    CallContext, HighlightRequest, HighlightedFile, OutlineRequest, RawRequest, Service,
    ServiceError,
};
use website::FileView;

/// Lines of one file page at most; the page links to the next. A page also stops at the
/// read budget's bytes, so a file over the budget is shown in pages.
const PAGE_LINES: u64 = 20_000;

/// Files longer than this show no outline: parsing one costs more than the page itself.
const OUTLINE_MAX_LINES: u64 = 5_000;

/// The policy of a raw file: no script runs, no plugin loads, nothing is framed as the
/// site's own (`sandbox` gives the document a unique origin).
const RAW_CSP: &str = "sandbox";

/// `GET …/-/blob/<rev>/<path>`; a directory's blob URL shows the directory.
pub(super) async fn blob(
    state: &SiteState,
    page: &Page,
    repo: &str,
    rev: &str,
    path: &str,
    query: &RepoQuery,
) -> Response {
    match file_view(&state.service, &page.ctx, repo, rev, path, query.from).await {
        Ok(view) => html(StatusCode::OK, website::blob(&page.chrome, &view)),
        Err(e) if is_directory(&e) => {
            Redirect::to(&website::tree_url(repo, rev, path)).into_response()
        }
        Err(e) => error(&page.chrome, &e),
    }
}

fn is_directory(e: &ServiceError) -> bool {
    e.message
        .ends_with("is a directory; use `list` to see its entries")
}

/// `GET …/-/raw/<rev>/<path>`: the file's exact bytes, `text/plain; charset=utf-8` for text
/// and `application/octet-stream` otherwise, never sniffed and sandboxed, so no file of a
/// repository runs as a page of the site.
pub(super) async fn raw(
    state: &SiteState,
    page: &Page,
    repo: &str,
    rev: &str,
    path: &str,
) -> Response {
    let request = RawRequest {
        repo: repo.to_owned(),
        revision: Some(rev.to_owned()),
        path: path.to_owned(),
    };
    let answer = match state.service.raw(&page.ctx, request).await {
        Ok(answer) => answer,
        Err(e) if is_directory(&e) => {
            return Redirect::to(&website::tree_url(repo, rev, path)).into_response();
        }
        Err(e) => return error(&page.chrome, &e),
    };
    let content_type = if answer.binary {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    };
    let length = answer.bytes.len();
    let mut response = (StatusCode::OK, streamed(answer.bytes)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CONTENT_SECURITY_POLICY, RAW_CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        // Private repositories' files too: no shared cache keeps them.
        (header::CACHE_CONTROL, "private, no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Bytes of a raw answer handed to the connection at a time.
const RAW_CHUNK: usize = 64 * 1024;

/// A raw answer's body: slices of the one shared copy of the file (issue 42 point 5), one
/// [`RAW_CHUNK`] at a time as the connection takes them, so a slow client holds no copy of
/// its own and the connection buffers at most a few chunks.
fn streamed(bytes: service::RawBytes) -> Body {
    let whole = Bytes::from_owner(bytes);
    let len = whole.len();
    let chunks = (0..len).step_by(RAW_CHUNK).map(move |at| {
        Ok::<_, std::convert::Infallible>(whole.slice(at..(at + RAW_CHUNK).min(len)))
    });
    Body::from_stream(tokio_stream::iter(chunks))
}

/// One page of a file: its highlighted lines from `from` (within the read budget), with
/// definition links and, for a file short enough, its outline.
async fn file_view(
    service: &Service,
    ctx: &CallContext,
    repo: &str,
    rev: &str,
    path: &str,
    from: Option<u64>,
) -> Result<FileView, ServiceError> {
    let answer = service
        .highlight(
            ctx,
            HighlightRequest {
                repo: repo.to_owned(),
                revision: Some(rev.to_owned()),
                path: path.to_owned(),
                start_line: Some(from.unwrap_or(1).max(1)),
                max_lines: Some(PAGE_LINES),
                max_bytes: Some(service.config().read_budget),
                definitions: true,
            },
        )
        .await?;
    let mut view = FileView {
        repo: repo.to_owned(),
        rev: rev.to_owned(),
        commit: answer.commit,
        path: path.to_owned(),
        lang: answer.lang,
        file: answer.file,
        outline: Vec::new(),
    };
    // The outline is an aid: a long file (which may need parsing, at a commit other than the
    // indexed head), a binary one or one it cannot outline shows without one.
    let HighlightedFile::Text(text) = &view.file else {
        return Ok(view);
    };
    if view.lang.is_none() || text.total_lines > OUTLINE_MAX_LINES {
        return Ok(view);
    }
    let outline = service
        .outline(
            ctx,
            OutlineRequest {
                repo: repo.to_owned(),
                revision: Some(view.commit.clone()),
                path: path.to_owned(),
                cursor: None,
            },
        )
        .await;
    if let Ok(outline) = outline {
        view.outline = outline.symbols;
    }
    Ok(view)
}
