//! Authentication, as axum extractors: [`Principal`] for client routes,
//! [`AdminPrincipal`] for admin routes. A route that takes one cannot run unauthenticated.
//!
//! A request authenticates with a bearer token or, without one, with the dashboard's
//! session cookie (`crate::ui::auth`, which also demands the CSRF token on anything but a
//! read). Both end in the same configured client, so every route behaves the same for a
//! script and for the dashboard.

use crate::clients::ApiClient;
use crate::error::ApiError;
use crate::state::ApiState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use std::sync::Arc;

/// The authenticated client of a request.
#[derive(Debug, Clone)]
pub struct Principal(pub Arc<ApiClient>);

/// An authenticated client with the admin flag; others get 403.
#[derive(Debug, Clone)]
pub struct AdminPrincipal(pub Arc<ApiClient>);

impl FromRequestParts<ApiState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let client = match proxypool_edge::bearer_token(&parts.headers) {
            Some(token) => state
                .clients()
                .authenticate(token)
                .ok_or_else(ApiError::unauthenticated)?,
            None => crate::ui::auth::session_client(parts, state)?,
        };
        // Checked after the token, so an address outside the list learns nothing about
        // which tokens exist; and before any route runs or any quota is charged.
        let peer = crate::admission::shield::peer_of(&parts.extensions).map(|peer| peer.ip());
        if !client.ip_allowlist.is_empty() && peer.is_none_or(|ip| !client.may_call_from(ip)) {
            return Err(ApiError::forbidden(
                "this client may not call from this address",
            ));
        }
        // The client id is not secret; the token never reaches a log line.
        tracing::Span::current().record("client", client.id.as_str());
        Ok(Principal(client))
    }
}

impl FromRequestParts<ApiState> for AdminPrincipal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let Principal(client) = Principal::from_request_parts(parts, state).await?;
        if client.admin {
            Ok(AdminPrincipal(client))
        } else {
            Err(ApiError::forbidden("this route needs an admin token"))
        }
    }
}
