//! Cookie authentication for the dashboard: the session cookie stands in for the bearer
//! token, and every request that is not a read must also prove it comes from the
//! dashboard's own page (the session's CSRF token in `X-CSRF-Token`, and no cross-site
//! `Origin` or `Sec-Fetch-Site`).
//!
//! A session names a client by id and the token hash it signed in with; the client is
//! looked up again on every request, so a reload that removes it, takes its admin flag or
//! rotates its token ends the session at once.

use super::session::{COOKIE, CSRF_HEADER, SECURE_COOKIE, Session, csrf_matches};
use crate::clients::ApiClient;
use crate::error::ApiError;
use crate::state::ApiState;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use std::sync::Arc;

/// The admin client behind the request's session cookie (401 without a live one; 403 for
/// a state-changing request without the session's CSRF token or from another site).
pub(crate) fn session_client(parts: &Parts, state: &ApiState) -> Result<Arc<ApiClient>, ApiError> {
    let (session, client) = live_session(&parts.headers, state)?;
    if !is_read(&parts.method) {
        check_same_site(&parts.headers)?;
        let presented = parts
            .headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !csrf_matches(&session, presented) {
            return Err(ApiError::forbidden(
                "a request with the session cookie needs the session's X-CSRF-Token",
            ));
        }
    }
    Ok(client)
}

/// The session of the request's cookie and its client, still configured and still admin.
pub(crate) fn live_session(
    headers: &HeaderMap,
    state: &ApiState,
) -> Result<(Session, Arc<ApiClient>), ApiError> {
    let id = cookie_value(headers).ok_or_else(ApiError::unauthenticated)?;
    let session = state
        .ui_sessions()
        .get(state.now(), id)
        .ok_or_else(ApiError::unauthenticated)?;
    let client = state
        .clients()
        .clients()
        .iter()
        .find(|c| c.id == session.client && c.admin && c.token_hash == session.credential)
        .cloned();
    match client {
        Some(client) => Ok((session, client)),
        None => {
            state.ui_sessions().end(id);
            Err(ApiError::unauthenticated())
        }
    }
}

/// The session cookie's value, if the request carries one: the `__Host-` cookie first (a
/// browser only keeps it from a secure origin), else the plain-HTTP one. Either is only a
/// random id the server issued, so accepting both lets no one pick a session.
pub(crate) fn cookie_value(headers: &HeaderMap) -> Option<&str> {
    let pairs = || {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
    };
    let named = |wanted: &str| pairs().find(|(name, _)| *name == wanted).map(|(_, v)| v);
    named(SECURE_COOKIE).or_else(|| named(COOKIE))
}

fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
}

/// Refuses a request a browser marks as coming from another site: `Sec-Fetch-Site` other
/// than `same-origin` (or `none`, typed by the user), or an `Origin` whose host is not the
/// one the request was sent to. Requests without either header (scripts) pass; the CSRF
/// token still has to match.
pub(crate) fn check_same_site(headers: &HeaderMap) -> Result<(), ApiError> {
    let refuse = || ApiError::forbidden("cross-site requests are refused");
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().map_err(|_| refuse())?;
        if site != "same-origin" && site != "none" {
            return Err(refuse());
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().map_err(|_| refuse())?;
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .ok_or_else(refuse)?;
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .ok_or_else(refuse)?;
        if !origin_host.eq_ignore_ascii_case(host) {
            return Err(refuse());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn finds_the_session_cookie_among_others() {
        let h = headers(&[("cookie", "a=1; pp_session=abc; b=2")]);
        assert_eq!(cookie_value(&h), Some("abc"));
        assert_eq!(cookie_value(&headers(&[("cookie", "pp_sessionx=1")])), None);
        assert_eq!(cookie_value(&HeaderMap::new()), None);
        let both = headers(&[("cookie", "pp_session=plain; __Host-pp_session=secure")]);
        assert_eq!(cookie_value(&both), Some("secure"));
    }

    #[test]
    fn cross_site_requests_are_refused() {
        assert!(check_same_site(&headers(&[])).is_ok());
        assert!(
            check_same_site(&headers(&[
                ("host", "127.0.0.1:8080"),
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "same-origin"),
            ]))
            .is_ok()
        );
        for bad in [
            headers(&[("sec-fetch-site", "cross-site")]),
            headers(&[("sec-fetch-site", "same-site")]),
            headers(&[("host", "127.0.0.1:8080"), ("origin", "http://evil.test")]),
            headers(&[("host", "127.0.0.1:8080"), ("origin", "null")]),
            headers(&[("origin", "http://127.0.0.1:8080")]),
        ] {
            assert!(check_same_site(&bad).is_err(), "{bad:?}");
        }
    }
}
