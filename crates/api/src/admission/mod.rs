//! The admission chain, in the order every request meets it (docs/ARCHITECTURE.md):
//!
//! 1. [`crate::serve`]: open connections, per address and in total, capped at accept;
//! 2. [`forwarded`]: behind a trusted load balancer, the client address it names;
//! 3. [`shield`]: the per-IP token bucket, still before authentication (the limiter
//!    itself, which the state holds, is [`shield_limiter`]'s `Shield`);
//! 4. [`in_flight`]: requests in flight per address (429 at once beyond the cap; the
//!    table, which the state holds, is [`address_slots`]'s `AddressSlots`);
//! 5. [`body_first`]: the body read whole, capped (413) and within its deadline (408),
//!    before the request takes a global slot;
//! 6. [`limits`]: the global slots for requests being processed (503 at once when none
//!    is free) and the request timeout;
//! 7. [`auth`]: bearer token → client (hashed tokens, constant-time comparison);
//! 8. [`authorize`]: the client's allowed upstreams and regions (403 never touches quota);
//! 9. [`policy`]: the client's rate-limit policy (429 `rate_limited`, charges nothing) and,
//!    for extractions, its cap on extractions in flight, then for a keyed one its turn
//!    with the key ([`key_turns`]: an earlier attempt with it settles first); for
//!    feedback, first its own bucket ([`feedback_rate`]);
//! 10. [`quota`]: the durable per-(project, client, operation) quota, whose receipt is the
//!     idempotency key (or the request id, in another namespace), so a replay is never
//!     charged twice; its answers become statuses and headers in [`quota_http`]; once the
//!     work has run, its charge is settled: refunded when the service failed the request,
//!     spent when an extraction found nothing for a keyed request;
//! 11. the mutation itself (the routes).
//!
//! Layers 2-6 are middleware (`crate::routes::router` stacks them in this order); 7 is an
//! extractor every protected route takes; 8-10 are calls the routes make in this order
//! before touching a store (the policy check is the first thing `quota::charge` does). A
//! denial at any layer returns before the next one runs, which the integration tests
//! check layer by layer.

pub(crate) mod address_slots;
pub(crate) mod auth;
pub(crate) mod authorize;
pub(crate) mod body_first;
pub(crate) mod feedback_rate;
pub(crate) mod forwarded;
pub(crate) mod in_flight;
pub(crate) mod key_turns;
pub(crate) mod limits;
pub(crate) mod policy;
pub(crate) mod quota;
pub(crate) mod quota_board;
pub(crate) mod quota_http;
pub(crate) mod shield;
pub(crate) mod shield_limiter;
