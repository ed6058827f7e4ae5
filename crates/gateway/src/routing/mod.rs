//! Routing: which proxy carries a request. Username selectors, the sticky-session table,
//! rotation plans, eligibility and the pick over the snapshot's indexes, the short wait
//! for a free slot, bans learned from answers, and the router that ties them together
//! with bounded retries through a [`route::Dialer`] that [`crate::outbound`] implements.
//!
//! Routing reads the snapshot ([`crate::snapshot`]) and the per-proxy slots
//! ([`crate::proxies`]); it never opens a socket itself.

pub(crate) mod bans;
pub(crate) mod dialer;
pub(crate) mod request;
pub(crate) mod rotation;
pub(crate) mod route;
pub(crate) mod select;
pub(crate) mod selector;
pub(crate) mod sticky;
pub(crate) mod wait;
