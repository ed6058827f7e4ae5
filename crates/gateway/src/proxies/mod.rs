//! The proxies as this gateway holds them, across snapshots: one slot per proxy with its
//! capacity counters and failure count, its cutoff (when relaying through it must stop),
//! its cooldowns per target domain, its recent-use count, its kept-alive upstream
//! connections and its lease's feedback tickets, and the registry that keeps the slots
//! while they are listed or busy.
//!
//! Everything here is local atomics and short locks: the hot path's per-proxy state. It
//! depends on no other part of the gateway but [`crate::policy`].

pub(crate) mod capacity;
pub(crate) mod cooldowns;
pub(crate) mod cutoff;
pub(crate) mod idle_pool;
pub(crate) mod recent_use;
pub(crate) mod request_body;
pub(crate) mod tickets;
