//! The history pages (issue 34): blame (`/-/blame/<rev>/<path>`), commits
//! (`/-/commits/<rev>[/<path>]`), one commit (`/-/commit/<sha>`) and a comparison
//! (`/-/compare/<base>...<head>`), from the service's `blame`, `log`, `commit` and `diff`.

use super::{Page, RepoQuery, SiteState, error, html};
use axum::http::StatusCode;
use axum::response::Response;
use service::{
    BlameRequest, CallContext, DiffAnswer, DiffRequest, ErrorKind, HighlightRequest,
    HighlightedFile, LogRequest, MAX_BLAME_LINES, ReadRequest, Service, ServiceError,
};
use std::time::{SystemTime, UNIX_EPOCH};

/// Commits one history page lists.
const PAGE_COMMITS: usize = 50;

/// Files of one diff page highlighted at most (two highlight calls each, cached per blob).
const HIGHLIGHTED_FILES: usize = 50;

/// Lines `first..=last` of a file at a commit, highlighted (`None`: plain, as for a file
/// without a grammar, a binary one, or one the highlighter refuses).
async fn side(
    service: &Service,
    ctx: &CallContext,
    repo: &str,
    commit: &str,
    path: &str,
    (first, last): (u64, u64),
) -> Option<website::SideTokens> {
    if commit.is_empty() || last < first.max(1) {
        return None;
    }
    let request = HighlightRequest {
        repo: repo.to_owned(),
        revision: Some(commit.to_owned()),
        path: path.to_owned(),
        start_line: Some(first.max(1)),
        max_lines: Some(last - first.max(1) + 1),
        max_bytes: None,
        definitions: false,
    };
    let answer = service.highlight(ctx, request).await.ok()?;
    let HighlightedFile::Text(text) = answer.file else {
        return None;
    };
    answer.lang?;
    Some(website::SideTokens(
        text.lines
            .into_iter()
            .map(|line| (line.number, line))
            .collect(),
    ))
}

/// The highlighting of a diff page's files, both sides, in their order.
async fn diff_tokens(
    service: &Service,
    ctx: &CallContext,
    diff: &DiffAnswer,
) -> Vec<website::FileTokens> {
    let mut out = Vec::new();
    for file in diff.files.iter().take(HIGHLIGHTED_FILES) {
        let (old_last, new_last) = website::diff_extent(&file.text);
        let old_path = file.old_path.as_deref().unwrap_or(&file.path);
        let old = match file.status {
            "added" => None,
            _ => {
                side(
                    service,
                    ctx,
                    &diff.repo,
                    &diff.base,
                    old_path,
                    (1, old_last),
                )
                .await
            }
        };
        let new = match file.status {
            "deleted" => None,
            _ => {
                side(
                    service,
                    ctx,
                    &diff.repo,
                    &diff.head,
                    &file.path,
                    (1, new_last),
                )
                .await
            }
        };
        out.push(website::FileTokens { old, new });
    }
    out
}

/// Now, seconds since the Unix epoch (the reference of relative dates).
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `GET …/-/blame/<rev>/<path>`: one page of at most [`MAX_BLAME_LINES`] lines from `?from=`.
pub(super) async fn blame(
    state: &SiteState,
    page: &Page,
    repo: &str,
    rev: &str,
    path: &str,
    query: &RepoQuery,
) -> Response {
    let service = &state.service;
    let start = query.from.unwrap_or(1).max(1);
    // The text first (it pins the commit, and may stop early at the read budget), then the
    // blame of exactly the lines read.
    let read = service
        .read(
            &page.ctx,
            ReadRequest {
                repo: repo.to_owned(),
                revision: Some(rev.to_owned()),
                path: path.to_owned(),
                start_line: Some(start),
                end_line: Some(start + MAX_BLAME_LINES - 1),
                plugins: None,
            },
        )
        .await;
    let item = match read {
        Ok(item) => item,
        Err(e) => return error(&page.chrome, &e),
    };
    let range = match item.outcome {
        Ok(range) => range,
        Err(message) => {
            return error(
                &page.chrome,
                &ServiceError {
                    kind: ErrorKind::InvalidArgument,
                    message,
                },
            );
        }
    };
    let answer = service
        .blame(
            &page.ctx,
            BlameRequest {
                repo: repo.to_owned(),
                revision: Some(item.commit.clone()),
                path: path.to_owned(),
                start_line: Some(start),
                end_line: Some(range.end_line.max(start)),
            },
        )
        .await;
    match answer {
        Ok(blame) => {
            let tokens = side(
                service,
                &page.ctx,
                repo,
                &blame.commit,
                path,
                (blame.start_line, blame.end_line),
            )
            .await;
            html(
                StatusCode::OK,
                website::blame_page(
                    &page.chrome,
                    &website::BlameView {
                        repo: repo.to_owned(),
                        rev: rev.to_owned(),
                        blame,
                        content: range.content,
                        tokens,
                        now: now(),
                    },
                ),
            )
        }
        // O-9: blame walks the file's history under the page's budget; past it, say why and
        // where to look instead (the same page may answer in a moment: Retry-After).
        Err(e) if e.kind == ErrorKind::TimedOut => {
            let mut response = html(
                StatusCode::SERVICE_UNAVAILABLE,
                website::blame_refused_page(
                    &page.chrome,
                    &website::BlameRefusal {
                        repo: repo.to_owned(),
                        rev: rev.to_owned(),
                        path: path.to_owned(),
                        start_line: start,
                        end_line: range.end_line.max(start),
                    },
                ),
            );
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
            response
        }
        Err(e) => error(&page.chrome, &e),
    }
}

/// `GET …/-/commits/<rev>[/<path>]`: a file's history follows renames (`git log --follow`);
/// a directory's is `git log -- <dir>`.
pub(super) async fn commits(
    state: &SiteState,
    page: &Page,
    repo: &str,
    rev: &str,
    path: &str,
    query: &RepoQuery,
) -> Response {
    let request = |follow: bool| LogRequest {
        repo: repo.to_owned(),
        revision: Some(rev.to_owned()),
        path: (!path.is_empty()).then(|| path.to_owned()),
        limit: Some(PAGE_COMMITS),
        cursor: query.cursor.clone(),
        follow,
    };
    let service = &state.service;
    let mut answer = service.log(&page.ctx, request(!path.is_empty())).await;
    // A directory, or a path the revision no longer has (deleted): `git log -- <path>`; its
    // later pages carry a cursor of that log, which a followed log refuses as such.
    if let Err(e) = &answer
        && !path.is_empty()
        && ((e.kind == ErrorKind::InvalidArgument
            && (e.message.contains("is a directory")
                || e.message.contains("other `follow` setting")))
            || (e.kind == ErrorKind::NotFound && e.message.starts_with("no file")))
    {
        answer = service.log(&page.ctx, request(false)).await;
    }
    match answer {
        Ok(log) => html(
            StatusCode::OK,
            website::commits_page(
                &page.chrome,
                &website::CommitsView {
                    repo: repo.to_owned(),
                    rev: rev.to_owned(),
                    commit: log.commit,
                    path: log.path,
                    follow: log.follow,
                    commits: log.commits,
                    later_page: query.cursor.is_some(),
                    next_cursor: log.next_cursor,
                    partial: log.partial,
                    now: now(),
                },
            ),
        ),
        Err(e) => error(&page.chrome, &e),
    }
}

/// `GET …/-/commit/<sha>`: the commit and its diff as `git show` prints it (against the first
/// parent, renames detected), paged by `?cursor=`.
pub(super) async fn commit(
    state: &SiteState,
    page: &Page,
    repo: &str,
    sha: &str,
    query: &RepoQuery,
) -> Response {
    let service = &state.service;
    let answer = match service
        .commit(&page.ctx, repo.to_owned(), sha.to_owned())
        .await
    {
        Ok(answer) => answer,
        Err(e) => return error(&page.chrome, &e),
    };
    let (diff, diff_error) = match service
        .commit_diff(
            &page.ctx,
            repo.to_owned(),
            answer.entry.commit.clone(),
            query.cursor.clone(),
        )
        .await
    {
        Ok(diff) => (Some(diff), None),
        Err(e) => (None, Some(e.message)),
    };
    let tokens = match &diff {
        Some(diff) => diff_tokens(service, &page.ctx, diff).await,
        None => Vec::new(),
    };
    html(
        StatusCode::OK,
        website::commit_page(
            &page.chrome,
            &website::CommitView {
                repo: repo.to_owned(),
                rev: sha.to_owned(),
                commit: answer,
                diff,
                diff_error,
                cursor: query.cursor.clone(),
                tokens,
                now: now(),
            },
        ),
    )
}

/// `GET …/-/compare/<base>...<head>`: HEAD's changes since its merge base with BASE.
pub(super) async fn compare(
    state: &SiteState,
    page: &Page,
    repo: &str,
    base: &str,
    head: &str,
    query: &RepoQuery,
) -> Response {
    // `BASE...HEAD` is what HEAD changed since it left BASE: the diff from their merge base,
    // as `git diff BASE...HEAD` (histories without a common commit: from BASE itself).
    let sides = state
        .service
        .merge_base(&page.ctx, repo.to_owned(), base.to_owned(), head.to_owned())
        .await;
    let (from, merge_base) = match sides {
        Ok(sides) => match sides.merge_base {
            Some(found) => (found.clone(), Some(found)),
            None => (sides.base, None),
        },
        Err(e) => return error(&page.chrome, &e),
    };
    let request = DiffRequest {
        repo: repo.to_owned(),
        base: from,
        head: head.to_owned(),
        path: None,
        cursor: query.cursor.clone(),
    };
    match state.service.diff(&page.ctx, request).await {
        Ok(diff) => {
            let tokens = diff_tokens(&state.service, &page.ctx, &diff).await;
            html(
                StatusCode::OK,
                website::compare_page(
                    &page.chrome,
                    &website::CompareView {
                        repo: repo.to_owned(),
                        base_rev: base.to_owned(),
                        head_rev: head.to_owned(),
                        diff,
                        merge_base,
                        cursor: query.cursor.clone(),
                        tokens,
                    },
                ),
            )
        }
        Err(e) => error(&page.chrome, &e),
    }
}
