//! The operators' web dashboard, served at `/ui/` by the client API itself.
//!
//! Plain HTML, CSS and JavaScript built into the binary (`assets/`, no build step). The
//! page holds no data of its own: it signs in here (`POST /ui/session` with an admin
//! token, answered with an HttpOnly, SameSite=Strict session cookie, `Secure` and
//! `__Host-` named when the origin is https, and the session's CSRF token) and then polls the same documented JSON routes a script would
//! (`/v1/admin/overview`, `/v1/upstreams`, `/v1/admin/proxies`, `/v1/admin/workers`,
//! `/v1/admin/clients`), authenticated by the cookie (`auth`). The assets themselves are
//! public and contain no data; every number comes from an authenticated route.
//!
//! | module | what it is for |
//! | --- | --- |
//! | `session` | the bounded server-side session table, random ids, CSRF tokens |
//! | `auth` | the cookie as credentials; CSRF and same-site checks on writes |
//! | `sign_in_guard` | failed sign-ins per address group and the lockout they earn |
//! | `assets` | the built-in files and their security headers |

mod assets;
pub(crate) mod auth;
pub(crate) mod session;
pub(crate) mod sign_in_guard;

use crate::admission::forwarded::ForwardedHttps;
use crate::admission::shield::peer_of;
use crate::error::{ApiError, ErrorCode};
use crate::state::ApiState;
use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use proxypool_core::address_group;
use serde::Deserialize;
use serde_json::json;
use session::{COOKIE, SECURE_COOKIE, SESSION_TTL_MS};
use std::net::{IpAddr, Ipv4Addr};

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
///
/// Every refusal (unknown token, a token without the admin flag, an address outside the
/// client's `ip_allowlist`) is the same 401, so a caller cannot tell which tokens exist or
/// where they may be used from; each counts against the caller's address
/// (`sign_in_guard`), and a locked-out address gets 429 before its token is looked at.
async fn sign_in(State(state): State<ApiState>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    auth::check_same_site(&parts.headers)?;
    let peer = peer_of(&parts.extensions).map(|peer| peer.ip());
    let group = address_group(
        peer.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        state.limits().ipv6_prefix,
    );
    if let Some(wait_ms) = state.sign_in_guard().locked_for(state.now(), group) {
        crate::metrics::sign_in_failed("locked_out");
        let wait_secs = wait_ms.div_ceil(1000);
        return Err(ApiError::new(
            ErrorCode::RateLimited,
            format!("too many failed sign-ins from this address; try again in {wait_secs} s"),
        )
        .retry_after(wait_secs));
    }
    let SignIn { token } = crate::body::read_json(&parts.headers, body, SIGN_IN_BODY_CAP).await?;
    if token.chars().count() > MAX_TOKEN_CHARS {
        return Err(ApiError::invalid("token: at most 512 characters"));
    }
    let client = state.clients().authenticate(&token).filter(|client| {
        client.admin
            && (client.ip_allowlist.is_empty() || peer.is_some_and(|ip| client.may_call_from(ip)))
    });
    let Some(client) = client else {
        state.sign_in_guard().failed(state.now(), group);
        crate::metrics::sign_in_failed("refused");
        return Err(ApiError::new(
            ErrorCode::Unauthenticated,
            "an admin token, used from an address its client allows, is required",
        ));
    };
    state.sign_in_guard().succeeded(group);
    let now = state.now();
    let opened = state
        .ui_sessions()
        .open(now, client.id.clone(), client.token_hash.clone())
        .ok_or_else(|| ApiError::unavailable("no random source for a session id", 1))?;
    tracing::info!(client = %client.id, "dashboard session opened");
    let cookie = if secure_origin(&state, &parts) {
        format!(
            "{SECURE_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}; Secure",
            opened.id,
            SESSION_TTL_MS / 1000,
        )
    } else {
        format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
            opened.id,
            SESSION_TTL_MS / 1000,
        )
    };
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

/// Whether the browser reached us over https: the listener is TLS, the operator says a
/// TLS-terminating balancer is in front (`[api] secure_cookies`), or a trusted balancer
/// says so (`X-Forwarded-Proto: https`). Only then is the cookie `Secure` and `__Host-`
/// named; over plain HTTP a browser would drop a `Secure` cookie on anything but a
/// loopback origin, so there it stays a plain `SameSite=Strict` cookie.
fn secure_origin(state: &ApiState, parts: &Parts) -> bool {
    state.secure_cookies() || parts.extensions.get::<ForwardedHttps>().is_some()
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
    response.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "__Host-pp_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0; Secure",
        ),
    );
    Ok(response)
}
