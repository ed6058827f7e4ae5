//! The gateway's metrics, as handles created once so the hot path only bumps atomics.
//!
//! Names (all prefixed `proxypool_gateway_`): `connections_total{listener}`,
//! `connections_open{listener}`, `connections_rejected_total{reason}`,
//! `requests_total{kind}`, `refusals_total{code}`, `bytes_total{direction}`,
//! `upstream_failures_total{reason}`, `selection_misses_total`,
//! `limiter_denials_total{limiter}`, `tunnels_open`, `snapshot_age_seconds`,
//! `snapshot_version`, `snapshot_proxies`, `upstream_dial_seconds` (sum/count).

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use proxypool_core::LockExt;
use std::collections::HashMap;
use std::sync::Mutex;

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    Http,
    Socks5,
}

/// Cached handles.
#[derive(Debug)]
pub(crate) struct GatewayMetrics {
    connections: [Counter; 2],
    open: [Gauge; 2],
    pub rejected_connection_cap: Counter,
    pub rejected_per_ip_cap: Counter,
    pub http_requests: Counter,
    pub connect_requests: Counter,
    pub socks_requests: Counter,
    pub bytes_up: Counter,
    pub bytes_down: Counter,
    pub selection_misses: Counter,
    pub shield_denials: Counter,
    pub client_denials: Counter,
    pub tunnels_open: Gauge,
    pub snapshot_age: Gauge,
    pub snapshot_version: Gauge,
    pub snapshot_proxies: Gauge,
    pub dial_seconds: Histogram,
    /// Label values seen on the (rare) refusal and failure paths.
    refusals: Mutex<HashMap<&'static str, Counter>>,
    failures: Mutex<HashMap<&'static str, Counter>>,
}

impl GatewayMetrics {
    pub(crate) fn new() -> Self {
        describe();
        Self {
            connections: [
                counter!("proxypool_gateway_connections_total", "listener" => "http"),
                counter!("proxypool_gateway_connections_total", "listener" => "socks5"),
            ],
            open: [
                gauge!("proxypool_gateway_connections_open", "listener" => "http"),
                gauge!("proxypool_gateway_connections_open", "listener" => "socks5"),
            ],
            rejected_connection_cap: counter!(
                "proxypool_gateway_connections_rejected_total", "reason" => "connection_cap"
            ),
            rejected_per_ip_cap: counter!(
                "proxypool_gateway_connections_rejected_total", "reason" => "per_ip_cap"
            ),
            http_requests: counter!("proxypool_gateway_requests_total", "kind" => "http"),
            connect_requests: counter!("proxypool_gateway_requests_total", "kind" => "connect"),
            socks_requests: counter!("proxypool_gateway_requests_total", "kind" => "socks5"),
            bytes_up: counter!("proxypool_gateway_bytes_total", "direction" => "client_to_upstream"),
            bytes_down: counter!("proxypool_gateway_bytes_total", "direction" => "upstream_to_client"),
            selection_misses: counter!("proxypool_gateway_selection_misses_total"),
            shield_denials: counter!("proxypool_gateway_limiter_denials_total", "limiter" => "shield"),
            client_denials: counter!("proxypool_gateway_limiter_denials_total", "limiter" => "client"),
            tunnels_open: gauge!("proxypool_gateway_tunnels_open"),
            snapshot_age: gauge!("proxypool_gateway_snapshot_age_seconds"),
            snapshot_version: gauge!("proxypool_gateway_snapshot_version"),
            snapshot_proxies: gauge!("proxypool_gateway_snapshot_proxies"),
            dial_seconds: histogram!("proxypool_gateway_upstream_dial_seconds"),
            refusals: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn connection_opened(&self, listener: Listener) {
        self.connections[listener as usize].increment(1);
        self.open[listener as usize].increment(1.0);
    }

    pub(crate) fn connection_closed(&self, listener: Listener) {
        self.open[listener as usize].decrement(1.0);
    }

    pub(crate) fn refusal(&self, code: &'static str) {
        labelled(
            &self.refusals,
            code,
            |code| counter!("proxypool_gateway_refusals_total", "code" => code),
        )
        .increment(1);
    }

    pub(crate) fn upstream_failure(&self, reason: &'static str) {
        labelled(
            &self.failures,
            reason,
            |reason| counter!("proxypool_gateway_upstream_failures_total", "reason" => reason),
        )
        .increment(1);
    }
}

impl Default for GatewayMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn labelled(
    cache: &Mutex<HashMap<&'static str, Counter>>,
    value: &'static str,
    make: impl FnOnce(&'static str) -> Counter,
) -> Counter {
    cache
        .lock_or_recover()
        .entry(value)
        .or_insert_with(|| make(value))
        .clone()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "proxypool_gateway_connections_total",
        "Client connections accepted."
    );
    describe_gauge!(
        "proxypool_gateway_connections_open",
        "Client connections open."
    );
    describe_counter!(
        "proxypool_gateway_connections_rejected_total",
        "Client connections closed on accept."
    );
    describe_counter!(
        "proxypool_gateway_requests_total",
        "Proxy requests by kind."
    );
    describe_counter!(
        "proxypool_gateway_refusals_total",
        "Requests refused, by error code."
    );
    describe_counter!("proxypool_gateway_bytes_total", "Payload bytes relayed.");
    describe_counter!(
        "proxypool_gateway_upstream_failures_total",
        "Failed upstream dials, by reason."
    );
    describe_counter!(
        "proxypool_gateway_selection_misses_total",
        "Requests for which no eligible proxy was found."
    );
    describe_counter!(
        "proxypool_gateway_limiter_denials_total",
        "Limiter denials."
    );
    describe_gauge!(
        "proxypool_gateway_tunnels_open",
        "CONNECT and SOCKS5 tunnels open."
    );
    describe_gauge!(
        "proxypool_gateway_snapshot_age_seconds",
        "Seconds since the controller last answered."
    );
    describe_gauge!(
        "proxypool_gateway_snapshot_version",
        "Applied snapshot version."
    );
    describe_gauge!(
        "proxypool_gateway_snapshot_proxies",
        "Proxies in the applied snapshot."
    );
    describe_histogram!(
        "proxypool_gateway_upstream_dial_seconds",
        "Time to connect and handshake with an upstream proxy."
    );
}
