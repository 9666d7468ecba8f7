//! The file pages: `/-/blob/<rev>/<path>` (numbered lines and the outline) and
//! `/-/raw/<rev>/<path>`.

use super::{Page, RepoQuery, SiteState, error, html};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use service::{CallContext, ErrorKind, OutlineRequest, ReadRequest, Service, ServiceError};
use website::FileView;

/// Lines of one file page at most; the page links to the next.
const PAGE_LINES: u64 = 20_000;
/// Reads (each up to the read budget) that make up one file page at most.
const PAGE_READS: usize = 8;

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
        Err(e)
            if e.message
                .ends_with("is a directory; use `list` to see its entries") =>
        {
            Redirect::to(&website::tree_url(repo, rev, path)).into_response()
        }
        Err(e) => error(&page.chrome, &e),
    }
}

/// `GET …/-/raw/<rev>/<path>`: the file's exact bytes.
pub(super) async fn raw(
    _state: &SiteState,
    page: &Page,
    _repo: &str,
    _rev: &str,
    _path: &str,
) -> Response {
    super::not_found(&page.chrome, "raw files are not served yet")
}

/// Files longer than this show no outline: parsing one costs more than the page itself.
const OUTLINE_MAX_LINES: u64 = 5_000;

/// One page of a file: consecutive reads from `from` until the page is full.
async fn file_view(
    service: &Service,
    ctx: &CallContext,
    repo: &str,
    rev: &str,
    path: &str,
    from: Option<u64>,
) -> Result<FileView, ServiceError> {
    let first_line = from.unwrap_or(1).max(1);
    let mut view = FileView {
        repo: repo.to_owned(),
        rev: rev.to_owned(),
        path: path.to_owned(),
        first_line,
        ..FileView::default()
    };
    let mut start = first_line;
    for _ in 0..PAGE_READS {
        let item = service
            .read(
                ctx,
                ReadRequest {
                    repo: repo.to_owned(),
                    // The first read pins the commit; the rest read the same one.
                    revision: Some(if view.commit.is_empty() {
                        rev.to_owned()
                    } else {
                        view.commit.clone()
                    }),
                    path: path.to_owned(),
                    start_line: Some(start),
                    // The page's last line: a read stops earlier at its byte budget.
                    end_line: Some(first_line + PAGE_LINES - 1),
                    plugins: None,
                },
            )
            .await?;
        let range = item.outcome.map_err(|message| ServiceError {
            kind: ErrorKind::InvalidArgument,
            message,
        })?;
        view.commit = item.commit;
        view.total_lines = range.total_lines;
        view.content.push_str(&range.content);
        if !view.content.ends_with('\n') && range.has_more {
            view.content.push('\n');
        }
        view.next_start_line = range.next_start_line;
        match range.next_start_line {
            Some(next) if next - first_line < PAGE_LINES => start = next,
            _ => break,
        }
    }
    // The outline is an aid: a long file (which may need parsing, at a commit other than the
    // indexed head) or one it cannot outline shows without one.
    if view.total_lines > OUTLINE_MAX_LINES {
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
