//! Counters of an upstream proxy, updated before the answer they describe is sent, so a
//! test that got the answer can read the count without waiting.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of an [`crate::UpstreamProxy`]'s counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpstreamStats {
    /// TCP connections accepted (dead drops included).
    pub accepted: u64,
    /// Connections dropped because the proxy was dead.
    pub dead_drops: u64,
    /// Requests refused for missing or wrong credentials.
    pub auth_failures: u64,
    /// Tunnels opened (`CONNECT` via HTTP or SOCKS5).
    pub tunnels: u64,
    /// Absolute-form plain HTTP requests forwarded.
    pub requests: u64,
    /// Requests failed on purpose by the failure rate.
    pub injected_failures: u64,
    /// Outgoing connects that failed (target down or unresolvable).
    pub connect_failures: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) accepted: AtomicU64,
    pub(super) dead_drops: AtomicU64,
    pub(super) auth_failures: AtomicU64,
    pub(super) tunnels: AtomicU64,
    pub(super) requests: AtomicU64,
    pub(super) injected_failures: AtomicU64,
    pub(super) connect_failures: AtomicU64,
}

impl Counters {
    pub(super) fn snapshot(&self) -> UpstreamStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        UpstreamStats {
            accepted: get(&self.accepted),
            dead_drops: get(&self.dead_drops),
            auth_failures: get(&self.auth_failures),
            tunnels: get(&self.tunnels),
            requests: get(&self.requests),
            injected_failures: get(&self.injected_failures),
            connect_failures: get(&self.connect_failures),
        }
    }

    pub(super) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
