//! The website's sign-in and sign-out: a pasted API token, or the company's
//! identity provider (authorization code with PKCE through `auth/provider.rs`); sessions live
//! in the access store.

use super::{Page, html, not_found, refuse_forgery};
use crate::auth::{SignInRefusal, SiteAccess};
use axum::extract::{Form, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

/// `GET /sourcegraph/sign-in`.
pub(super) async fn sign_in_form(page: Page) -> Response {
    html(StatusCode::OK, website::sign_in(&page.chrome, None))
}

#[derive(Deserialize)]
pub(super) struct SignInForm {
    csrf: String,
    token: String,
}

/// `POST /sourcegraph/sign-in`: a session for a pasted token.
pub(super) async fn sign_in(
    page: Page,
    access: axum::Extension<SiteAccess>,
    Form(form): Form<SignInForm>,
) -> Response {
    if let Some(refusal) = refuse_forgery(&page, &form.csrf) {
        return refusal;
    }
    let (status, message) = match access.0.0.sign_in(&form.token, page.client).await {
        Ok((id, csrf)) => {
            if let Some(old) = &page.visitor.session {
                access.0.0.sign_out(old).await;
            }
            return home_with(access.0.0.session_cookies(Some((&id, &csrf))));
        }
        Err(SignInRefusal::Wait(seconds)) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!("Too many wrong tokens from this address: wait {seconds} s and try again."),
        ),
        Err(SignInRefusal::Invalid(message)) => (StatusCode::UNAUTHORIZED, message),
        Err(SignInRefusal::Unavailable(message)) => (StatusCode::SERVICE_UNAVAILABLE, message),
    };
    html(status, website::sign_in(&page.chrome, Some(&message)))
}

/// `GET /sourcegraph/sign-in/provider`: off to the identity provider, the sign-in's
/// secrets in a cookie until it sends the browser back.
pub(super) async fn provider_sign_in(
    page: Page,
    access: Option<axum::Extension<SiteAccess>>,
) -> Response {
    let Some(access) = access else {
        return not_found(&page.chrome, "This page");
    };
    match access.0.0.start_provider_sign_in() {
        Ok((url, cookie)) => {
            let mut response = Redirect::to(&url).into_response();
            if let Some(cookie) = cookie {
                response.headers_mut().append(header::SET_COOKIE, cookie);
            }
            response
        }
        Err(error) => html(
            StatusCode::SERVICE_UNAVAILABLE,
            website::sign_in(&page.chrome, Some(&error.to_string())),
        ),
    }
}

/// What the identity provider sends back to [`crate::oauth::CALLBACK_PATH`].
#[derive(Deserialize)]
pub(super) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /sourcegraph/oauth/callback`: the provider's answer to a sign-in. A session
/// on success; the sign-in page saying what went wrong otherwise. The pending sign-in's
/// cookie is dropped either way (a code is used once).
pub(super) async fn provider_callback(
    page: Page,
    access: Option<axum::Extension<SiteAccess>>,
    headers: HeaderMap,
    Query(callback): Query<Callback>,
) -> Response {
    let Some(access) = access else {
        return not_found(&page.chrome, "This page");
    };
    let access = &access.0.0;
    let outcome = match (&callback.code, &callback.state, &callback.error) {
        (_, _, Some(error)) => {
            // Anyone can make this link: the page says only what the code means, and the
            // provider's own words go to the log, cut short.
            let description: String = callback
                .error_description
                .as_deref()
                .unwrap_or_default()
                .chars()
                .take(200)
                .collect();
            tracing::info!(error = %error.chars().take(64).collect::<String>(), %description, "the identity provider answered a sign-in with an error");
            Err((StatusCode::UNAUTHORIZED, provider_refusal(error).to_owned()))
        }
        (Some(code), Some(state), None) => {
            access.finish_provider_sign_in(&headers, code, state).await
        }
        _ => Err((
            StatusCode::BAD_REQUEST,
            "the identity provider's answer has no code and state; start again".to_owned(),
        )),
    };
    let drop_pending = crate::oauth::pending_cookie(None, access.secure_cookies());
    let mut response = match outcome {
        Ok((id, csrf)) => {
            if let Some(old) = &page.visitor.session {
                access.sign_out(old).await;
            }
            // A page that moves on by itself rather than a redirect: the session cookie is
            // `SameSite=Strict`, and a redirect still belongs to the navigation that began at
            // the provider's site, which would not send it.
            let mut response = html(StatusCode::OK, website::signed_in_page(&page.chrome));
            for cookie in access.session_cookies(Some((&id, &csrf))) {
                response.headers_mut().append(header::SET_COOKIE, cookie);
            }
            response
        }
        Err((status, message)) => {
            tracing::info!(%message, "a sign-in through the identity provider failed");
            html(status, website::sign_in(&page.chrome, Some(&message)))
        }
    };
    if let Some(cookie) = drop_pending {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

#[derive(Deserialize)]
pub(super) struct SignOutForm {
    csrf: String,
}

/// `POST /sourcegraph/sign-out`.
pub(super) async fn sign_out(
    page: Page,
    access: axum::Extension<SiteAccess>,
    Form(form): Form<SignOutForm>,
) -> Response {
    if let Some(refusal) = refuse_forgery(&page, &form.csrf) {
        return refusal;
    }
    if let Some(id) = &page.visitor.session {
        access.0.0.sign_out(id).await;
    }
    home_with(access.0.0.session_cookies(None))
}

/// A redirect to the repository list that sets `cookies` (a session begun or ended).
fn home_with(cookies: Vec<HeaderValue>) -> Response {
    let mut response = Redirect::to("/sourcegraph/").into_response();
    for cookie in cookies {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// What an RFC 6749 §4.1.2.1 error code of the provider means, for the visitor.
fn provider_refusal(code: &str) -> &'static str {
    match code {
        "access_denied" => "the sign-in was declined at the identity provider",
        "login_required"
        | "interaction_required"
        | "consent_required"
        | "account_selection_required" => {
            "the identity provider needs you to sign in (or consent) there first; start again"
        }
        "temporarily_unavailable" | "server_error" => {
            "the identity provider could not answer the sign-in now; try again shortly"
        }
        _ => {
            "the identity provider refused the sign-in; start again, and if it fails again ask \
             the administrator (the server log has the provider's reason)"
        }
    }
}
