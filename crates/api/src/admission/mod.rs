//! The admission chain, in the order every request meets it (docs/ARCHITECTURE.md):
//!
//! 1. [`limits`] and [`crate::serve`]: open connections, requests in flight, the request
//!    timeout and the declared body size;
//! 2. [`shield`]: the per-IP token bucket, still before authentication (the limiter
//!    itself, which the state holds, is [`shield_limiter`]'s `Shield`);
//! 3. [`auth`]: bearer token → client (hashed tokens, constant-time comparison);
//! 4. [`authorize`]: the client's allowed upstreams and regions (403 never touches quota);
//! 5. [`policy`]: the client's rate-limit policy (429 `rate_limited`, charges nothing) and,
//!    for extractions, its cap on extractions in flight;
//! 6. [`quota`]: the durable per-(project, client, operation) quota, whose receipt is the
//!    idempotency key (or the request id, in another namespace), so a replay is never
//!    charged twice; its answers become statuses and headers in [`quota_http`]; once the
//!    work has run, its charge is settled: refunded when the service failed the request,
//!    spent when an extraction found nothing for a keyed request;
//! 7. the mutation itself (the routes).
//!
//! Layers 1-2 are middleware; 3 is an extractor every protected route takes; 4-6 are
//! calls the routes make in this order before touching a store (the policy check is the
//! first thing `quota::charge` does). A denial at any layer
//! returns before the next one runs, which the integration tests check layer by layer.

pub(crate) mod auth;
pub(crate) mod authorize;
pub(crate) mod forwarded;
pub(crate) mod limits;
pub(crate) mod policy;
pub(crate) mod quota;
pub(crate) mod quota_board;
pub(crate) mod quota_http;
pub(crate) mod shield;
pub(crate) mod shield_limiter;
