//! The inspection's metrics (all prefixed `proxypool_gateway_inspection_`):
//! `leaves_minted_total`, `leaf_cache_hits_total`, `cached_leaves` (gauge),
//! `tunnels_total{outcome}` (`inspected`: the client's TLS handshake with the minted leaf
//! succeeded; `bypassed`: the host is on the bypass list, the tunnel passed through;
//! `handshake_failed`: the client refused the leaf or spoke no TLS; `handshake_timeout`;
//! `mint_failed`), and the inner requests as `proxypool_gateway_requests_total{kind="https"}`.
//! Nothing here carries a host name or key material.

use metrics::{Counter, Gauge, counter, gauge};

/// Cached handles (created with the authority, after the recorder is installed).
#[derive(Debug)]
pub(crate) struct InspectionMetrics {
    pub leaves_minted: Counter,
    pub cache_hits: Counter,
    pub cached_leaves: Gauge,
    pub inspected: Counter,
    pub bypassed: Counter,
    pub handshake_failed: Counter,
    pub handshake_timeout: Counter,
    pub mint_failed: Counter,
    pub requests: Counter,
}

impl InspectionMetrics {
    pub(crate) fn new() -> Self {
        let tunnels = |outcome: &'static str| counter!("proxypool_gateway_inspection_tunnels_total", "outcome" => outcome);
        Self {
            leaves_minted: counter!("proxypool_gateway_inspection_leaves_minted_total"),
            cache_hits: counter!("proxypool_gateway_inspection_leaf_cache_hits_total"),
            cached_leaves: gauge!("proxypool_gateway_inspection_cached_leaves"),
            inspected: tunnels("inspected"),
            bypassed: tunnels("bypassed"),
            handshake_failed: tunnels("handshake_failed"),
            handshake_timeout: tunnels("handshake_timeout"),
            mint_failed: tunnels("mint_failed"),
            requests: counter!("proxypool_gateway_requests_total", "kind" => "https"),
        }
    }
}
