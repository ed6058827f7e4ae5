//! The operators' web dashboard, served at `/ui/` by the client API itself.
//!
//! Plain HTML, CSS and JavaScript built into the binary (`assets/`, no build step). The
//! page holds no data of its own: it signs in here (`POST /ui/session` with an admin
//! token, answered with an HttpOnly, SameSite=Strict session cookie and the session's CSRF
//! token) and then polls the same documented JSON routes a script would
//! (`/v1/admin/overview`, `/v1/upstreams`, `/v1/admin/proxies`, `/v1/admin/workers`,
//! `/v1/admin/clients`), authenticated by the cookie (`auth`). The assets themselves are
//! public and contain no data; every number comes from an authenticated route.
//!
//! | module | what it is for |
//! | --- | --- |
//! | `session` | the bounded server-side session table, random ids, CSRF tokens |
//! | `auth` | the cookie as credentials; CSRF and same-site checks on writes |
//! | `assets` | the built-in files and their security headers |

mod assets;
pub(crate) mod auth;
pub(crate) mod session;

use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;
use session::{COOKIE, SESSION_TTL_MS};

/// The longest token a sign-in accepts (as `openapi.json` says); longer is a 400.
const MAX_TOKEN_CHARS: usize = 512;
/// Most bytes a sign-in body may have. Anyone may send one, and it is read before the
/// token is checked (`admission::body_first` applies this cap), so it is small: the
/// longest token written plainly (`{"token":"…"}`, about 525 bytes) fits with room to
/// spare, and a plain token somewhat over the limit is still named overlong (400); a token
/// written mostly in `\u` escapes may be over it and get 413 instead.
pub(crate) const SIGN_IN_BODY_CAP: usize = 1024;

/// The dashboard's routes, merged into the API's router (inside its middleware).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/ui/", get(assets::index))
        .route("/ui/app.js", get(assets::script))
        .route("/ui/app.css", get(assets::style))
        .route("/ui/session", get(current).post(sign_in).delete(sign_out))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    token: String,
}

/// `POST /ui/session`: an admin token in, a session cookie out.
async fn sign_in(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    auth::check_same_site(&headers)?;
    let SignIn { token } = crate::body::read_json(&headers, body, SIGN_IN_BODY_CAP).await?;
    if token.chars().count() > MAX_TOKEN_CHARS {
        return Err(ApiError::invalid("token: at most 512 characters"));
    }
    let client = state
        .clients()
        .authenticate(&token)
        .ok_or_else(|| ApiError::new(ErrorCode::Unauthenticated, "unknown token"))?;
    if !client.admin {
        return Err(ApiError::forbidden("the dashboard needs an admin token"));
    }
    let now = state.now();
    let opened = state
        .ui_sessions()
        .open(now, client.id.clone())
        .ok_or_else(|| ApiError::unavailable("no random source for a session id", 1))?;
    tracing::info!(client = %client.id, "dashboard session opened");
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        opened.id,
        SESSION_TTL_MS / 1000,
        if state.secure_cookies() {
            "; Secure"
        } else {
            ""
        },
    );
    let mut response = Json(json!({
        "client": client.id,
        "csrf_token": opened.csrf,
        "expires_at": now.saturating_add(SESSION_TTL_MS),
    }))
    .into_response();
    *response.status_mut() = StatusCode::CREATED;
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(|_| ApiError::internal())?,
    );
    Ok(response)
}

/// `GET /ui/session`: who the cookie signs in, and the CSRF token a reloaded page needs.
async fn current(State(state): State<ApiState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let (session, client) = auth::live_session(&headers, &state)?;
    Ok(Json(json!({
        "client": client.id,
        "csrf_token": session.csrf,
        "expires_at": session.expires_at_ms,
    }))
    .into_response())
}

/// `DELETE /ui/session`: signs out; the cookie no longer opens anything.
async fn sign_out(State(state): State<ApiState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let (session, client) = auth::live_session(&headers, &state)?;
    auth::check_same_site(&headers)?;
    let presented = headers
        .get(session::CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !session::csrf_matches(&session, presented) {
        return Err(ApiError::forbidden(
            "signing out needs the session's X-CSRF-Token",
        ));
    }
    if let Some(id) = auth::cookie_value(&headers) {
        state.ui_sessions().end(id);
    }
    tracing::info!(client = %client.id, "dashboard session ended");
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("pp_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    );
    Ok(response)
}
