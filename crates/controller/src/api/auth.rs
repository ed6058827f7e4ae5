//! Worker authentication: `Authorization: Bearer <token>` against the configured worker
//! tokens (stored as salted hashes, compared in constant time), and the token's allowed
//! worker ids.

use super::error::ApiError;
use super::request_id::RequestId;
use crate::config::WorkerTokenConfig;
use arc_swap::ArcSwap;
use axum::http::HeaderMap;
use proxypool_core::WorkerId;
use std::sync::Arc;

/// The configured worker tokens.
#[derive(Debug, Default)]
pub struct WorkerTokens {
    // Swapped whole on a configuration reload.
    tokens: ArcSwap<Vec<WorkerTokenConfig>>,
}

impl WorkerTokens {
    pub fn new(tokens: Vec<WorkerTokenConfig>) -> Self {
        WorkerTokens {
            tokens: ArcSwap::from_pointee(tokens),
        }
    }

    /// Replaces the tokens (a configuration reload): the next call is checked against them.
    pub fn replace(&self, tokens: Vec<WorkerTokenConfig>) {
        self.tokens.store(Arc::new(tokens));
    }

    /// Checks the bearer token from the headers alone (before any body is read) and
    /// returns what it may act for.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        rid: &RequestId,
    ) -> Result<Authenticated, ApiError> {
        let presented =
            proxypool_edge::bearer_token(headers).ok_or_else(|| ApiError::unauthenticated(rid))?;
        // Check every token (no early exit) so timing does not tell which one matched.
        let mut matched: Option<&WorkerTokenConfig> = None;
        let tokens = self.tokens.load();
        for token in tokens.iter() {
            if token.token.verifier().is_some_and(|h| h.verify(presented)) && matched.is_none() {
                matched = Some(token);
            }
        }
        let token = matched.ok_or_else(|| ApiError::unauthenticated(rid))?;
        Ok(Authenticated {
            name: token.name.clone(),
            workers: token.workers.clone(),
        })
    }

    /// Checks the bearer token and that it may act for `worker`.
    pub fn authorize(
        &self,
        headers: &HeaderMap,
        worker: &WorkerId,
        rid: &RequestId,
    ) -> Result<(), ApiError> {
        self.authenticate(headers, rid)?.may_act_for(worker, rid)
    }
}

/// A verified worker token.
#[derive(Debug, Clone)]
pub struct Authenticated {
    name: String,
    /// Worker ids it may act for; empty = any.
    workers: Vec<WorkerId>,
}

impl Authenticated {
    /// Whether the token may act for `worker` (403 otherwise).
    pub fn may_act_for(&self, worker: &WorkerId, rid: &RequestId) -> Result<(), ApiError> {
        if !self.workers.is_empty() && !self.workers.contains(worker) {
            tracing::info!(token = %self.name, %worker, "worker token used for a worker it does not cover");
            return Err(ApiError::forbidden(
                "this token may not act for this worker id",
                rid,
            ));
        }
        Ok(())
    }
}
