//! What the operator allows, compiled for the hot path: the per-IP shield and per-client
//! limiters with the per-client connection cap, IP allowlists, the destination policy and
//! the origin statuses that count as bans. Pure checks over settings and counters; the
//! snapshot compiles each client's entry from them and [`crate::inbound`] applies them.

pub(crate) mod ban_statuses;
pub(crate) mod cidr;
pub(crate) mod destination;
pub(crate) mod limits;
