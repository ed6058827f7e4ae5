//! The gateway's metrics, as handles created once so the hot path only bumps atomics.
//! Refusals have one handle per code ([`Refusal::CODES`]), registered up front: counting
//! one takes no lock.
//!
//! Names (all prefixed `proxypool_gateway_`): `connections_total{listener}`,
//! `connections_open{listener}` (`http`, `https`, `socks5`),
//! `connections_rejected_total{reason}`,
//! `tls_handshake_failures_total{reason}` (the TLS listener: `timeout`, `error`, `plaintext`),
//! `requests_total{kind}`, `refusals_total{code}`, `bytes_total{direction}`,
//! `upstream_failures_total{reason}` (failures of the proxy itself, counted against it),
//! `target_failures_total{reason}` (the target behind a proxy failed: one of the fixed
//! `crate::failure::TARGET_REASONS`, never counted against the proxy),
//! `selection_misses_total`, `capacity_waits_total`,
//! `capacity_wait_outcomes_total{outcome}` (`served`, `timed_out`, `over_bound`),
//! `limiter_denials_total{limiter}`, `destination_denials_total{reason}`, `tunnels_open`,
//! `tunnels_closed_total{reason}` (closed because the proxy's lease went: `lease_lapsed`,
//! `stale`), `snapshot_age_seconds`, `snapshot_version`, `snapshot_proxies`,
//! `snapshot_updates_total{kind}`,
//! `leased_proxies`, `ready`, `upstream_dial_seconds`, `request_duration_seconds{kind}`
//! and `tunnel_duration_seconds{kind}` (histograms; the last two,
//! `access_log_lines_total{outcome}` and `access_log_dropped_total{kind}` are recorded by
//! `crate::access`), and for ban-aware
//! routing `bans_total` (origin ban statuses seen), `ban_retries_total{cause}` (`ban`,
//! `upstream_status`), `cooldown_skips_total` (candidates passed over because they cool
//! down for the target's domain), `cooldown_changes_dropped_total`,
//! `session_feedback_applied_total`.

use crate::proxies::cutoff::CutReason;
use crate::refusal::Refusal;
use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use proxypool_core::LockExt;
use std::collections::HashMap;
use std::sync::Mutex;

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    Http,
    Socks5,
    Https,
}

/// Why a TLS listener's handshake did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandshakeFailure {
    /// Not done within the header-read timeout.
    Timeout,
    /// Refused by either side (a client certificate missing or not chaining to
    /// `client_ca` among others).
    Error,
    /// The client spoke plain HTTP.
    Plaintext,
}

/// Cached handles.
#[derive(Debug)]
pub(crate) struct GatewayMetrics {
    connections: [Counter; 3],
    open: [Gauge; 3],
    tls_handshake_failures: [Counter; 3],
    pub rejected_connection_cap: Counter,
    /// Connections closed, unused, to admit a new one at the global cap.
    pub connections_evicted: Counter,
    pub rejected_per_ip_cap: Counter,
    /// A trusted balancer's connection without a valid PROXY header.
    pub rejected_proxy_header: Counter,
    pub http_requests: Counter,
    pub connect_requests: Counter,
    pub socks_requests: Counter,
    pub bytes_up: Counter,
    pub bytes_down: Counter,
    pub selection_misses: Counter,
    /// Requests that waited for a free slot, and how the waits ended.
    pub capacity_waits: Counter,
    pub capacity_waits_served: Counter,
    pub capacity_wait_timeouts: Counter,
    /// Refused at once: the waiters' bound (per client or overall) was reached.
    pub capacity_waits_rejected: Counter,
    pub shield_denials: Counter,
    pub client_denials: Counter,
    pub tunnels_open: Gauge,
    /// One counter per [`CutReason`], in the order of [`CutReason::ALL`].
    tunnels_closed: [Counter; CutReason::ALL.len()],
    pub snapshot_age: Gauge,
    /// 1 while the gateway can route (see `crate::snapshot::readiness`), else 0.
    pub ready: Gauge,
    /// Proxies of the snapshot the gateway may relay through now.
    pub leased_proxies: Gauge,
    /// Runtime reports the controller accepted, and the ones that failed.
    pub reports_accepted: Counter,
    pub reports_failed: Counter,
    pub snapshot_version: Gauge,
    pub snapshot_proxies: Gauge,
    /// Snapshots applied whole, and deltas applied.
    pub snapshot_wholes: Counter,
    pub snapshot_deltas: Counter,
    pub dial_seconds: Histogram,
    pub bans: Counter,
    pub ban_retries: Counter,
    pub status_retries: Counter,
    pub cooldown_skips: Counter,
    pub cooldown_changes_dropped: Counter,
    pub session_feedback_applied: Counter,
    /// One counter per refusal code, in the order of [`Refusal::CODES`].
    refusals: [Counter; Refusal::CODES.len()],
    /// Label values seen on the (rare) upstream failure path.
    failures: Mutex<HashMap<&'static str, Counter>>,
    target_failures: Mutex<HashMap<&'static str, Counter>>,
    destinations: Mutex<HashMap<&'static str, Counter>>,
}

impl GatewayMetrics {
    pub(crate) fn new() -> Self {
        describe();
        Self {
            connections: [
                counter!("proxypool_gateway_connections_total", "listener" => "http"),
                counter!("proxypool_gateway_connections_total", "listener" => "socks5"),
                counter!("proxypool_gateway_connections_total", "listener" => "https"),
            ],
            open: [
                gauge!("proxypool_gateway_connections_open", "listener" => "http"),
                gauge!("proxypool_gateway_connections_open", "listener" => "socks5"),
                gauge!("proxypool_gateway_connections_open", "listener" => "https"),
            ],
            tls_handshake_failures: ["timeout", "error", "plaintext"].map(|reason| {
                counter!("proxypool_gateway_tls_handshake_failures_total", "reason" => reason)
            }),
            rejected_connection_cap: counter!(
                "proxypool_gateway_connections_rejected_total", "reason" => "connection_cap"
            ),
            connections_evicted: counter!("proxypool_gateway_connections_evicted_total"),
            rejected_per_ip_cap: counter!(
                "proxypool_gateway_connections_rejected_total", "reason" => "per_ip_cap"
            ),
            rejected_proxy_header: counter!(
                "proxypool_gateway_connections_rejected_total", "reason" => "proxy_header"
            ),
            http_requests: counter!("proxypool_gateway_requests_total", "kind" => "http"),
            connect_requests: counter!("proxypool_gateway_requests_total", "kind" => "connect"),
            socks_requests: counter!("proxypool_gateway_requests_total", "kind" => "socks5"),
            bytes_up: counter!("proxypool_gateway_bytes_total", "direction" => "client_to_upstream"),
            bytes_down: counter!("proxypool_gateway_bytes_total", "direction" => "upstream_to_client"),
            selection_misses: counter!("proxypool_gateway_selection_misses_total"),
            capacity_waits: counter!("proxypool_gateway_capacity_waits_total"),
            capacity_waits_served: counter!(
                "proxypool_gateway_capacity_wait_outcomes_total", "outcome" => "served"
            ),
            capacity_wait_timeouts: counter!(
                "proxypool_gateway_capacity_wait_outcomes_total", "outcome" => "timed_out"
            ),
            capacity_waits_rejected: counter!(
                "proxypool_gateway_capacity_wait_outcomes_total", "outcome" => "over_bound"
            ),
            reports_accepted: counter!("proxypool_gateway_reports_total", "outcome" => "accepted"),
            reports_failed: counter!("proxypool_gateway_reports_total", "outcome" => "failed"),
            shield_denials: counter!("proxypool_gateway_limiter_denials_total", "limiter" => "shield"),
            client_denials: counter!("proxypool_gateway_limiter_denials_total", "limiter" => "client"),
            tunnels_open: gauge!("proxypool_gateway_tunnels_open"),
            tunnels_closed: CutReason::ALL.map(|reason| {
                counter!("proxypool_gateway_tunnels_closed_total", "reason" => reason.label())
            }),
            ready: gauge!("proxypool_gateway_ready"),
            leased_proxies: gauge!("proxypool_gateway_leased_proxies"),
            snapshot_age: gauge!("proxypool_gateway_snapshot_age_seconds"),
            snapshot_version: gauge!("proxypool_gateway_snapshot_version"),
            snapshot_wholes: counter!("proxypool_gateway_snapshot_updates_total", "kind" => "full"),
            snapshot_deltas: counter!("proxypool_gateway_snapshot_updates_total", "kind" => "delta"),
            snapshot_proxies: gauge!("proxypool_gateway_snapshot_proxies"),
            dial_seconds: histogram!("proxypool_gateway_upstream_dial_seconds"),
            bans: counter!("proxypool_gateway_bans_total"),
            ban_retries: counter!("proxypool_gateway_ban_retries_total", "cause" => "ban"),
            status_retries: counter!(
                "proxypool_gateway_ban_retries_total", "cause" => "upstream_status"
            ),
            cooldown_skips: counter!("proxypool_gateway_cooldown_skips_total"),
            cooldown_changes_dropped: counter!("proxypool_gateway_cooldown_changes_dropped_total"),
            session_feedback_applied: counter!("proxypool_gateway_session_feedback_applied_total"),
            refusals: Refusal::CODES
                .map(|code| counter!("proxypool_gateway_refusals_total", "code" => code)),
            failures: Mutex::new(HashMap::new()),
            target_failures: Mutex::new(HashMap::new()),
            destinations: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn connection_opened(&self, listener: Listener) {
        self.connections[listener as usize].increment(1);
        self.open[listener as usize].increment(1.0);
    }

    pub(crate) fn connection_closed(&self, listener: Listener) {
        self.open[listener as usize].decrement(1.0);
    }

    pub(crate) fn tls_handshake_failed(&self, why: HandshakeFailure) {
        self.tls_handshake_failures[why as usize].increment(1);
    }

    /// Counts a refusal: no lock, one atomic increment (`code` is one of
    /// [`Refusal::CODES`], as [`Refusal::code`] returns).
    pub(crate) fn refusal(&self, code: &'static str) {
        match Refusal::CODES.iter().position(|known| *known == code) {
            Some(index) => self.refusals[index].increment(1),
            None => debug_assert!(false, "unknown refusal code {code}"),
        }
    }

    /// A tunnel closed because its proxy's lease went.
    pub(crate) fn tunnel_closed(&self, reason: CutReason) {
        self.tunnels_closed[reason as usize].increment(1);
    }

    /// A target the destination policy refused; `reason` is `port`, `deny_cidrs`, a
    /// built-in range (`loopback`, `private`, ...) or `invalid_policy`.
    pub(crate) fn destination_denied(&self, reason: &'static str) {
        labelled(
            &self.destinations,
            reason,
            |reason| counter!("proxypool_gateway_destination_denials_total", "reason" => reason),
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

    /// The target behind a proxy failed (`reason`: one of `TARGET_REASONS`).
    pub(crate) fn target_failure(&self, reason: &'static str) {
        debug_assert!(crate::failure::TARGET_REASONS.contains(&reason));
        labelled(
            &self.target_failures,
            reason,
            |reason| counter!("proxypool_gateway_target_failures_total", "reason" => reason),
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

/// Control calls a controller refused because the pool store lost its memory.
pub(crate) const STORE_LOST_ANSWERS: &str = "proxypool_gateway_store_lost_answers_total";

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        STORE_LOST_ANSWERS,
        "Control calls the controller answered store_lost: the pool store lost its memory \
         and no new one is in place yet (the gateway keeps serving its leases until they end)."
    );
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
        "proxypool_gateway_connections_evicted_total",
        "Client connections closed before their first request, or idle between requests, to admit a new one at the connection cap."
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
        "proxypool_gateway_reports_total",
        "Runtime reports sent to the controller, by outcome (accepted, failed)."
    );
    describe_counter!(
        crate::usage::USAGE_REQUESTS,
        "Requests and tunnels routed through an upstream proxy, by client and upstream."
    );
    describe_counter!(
        crate::usage::USAGE_FAILURES,
        "Routed requests whose upstream failed before answering, by client and upstream."
    );
    describe_counter!(
        crate::usage::USAGE_BYTES,
        "Payload bytes relayed, by client, upstream and direction."
    );
    describe_counter!(
        "proxypool_gateway_upstream_failures_total",
        "Failures of upstream proxies themselves (counted against the proxy), by reason."
    );
    describe_counter!(
        "proxypool_gateway_target_failures_total",
        "Targets that failed behind a working upstream proxy (never counted against it), by reason."
    );
    describe_counter!(
        "proxypool_gateway_bans_total",
        "Plain-HTTP answers with a ban status: the proxy cooled down for the target's domain."
    );
    describe_counter!(
        "proxypool_gateway_ban_retries_total",
        "Plain-HTTP requests sent again through another proxy, by cause (ban, upstream_status: an upstream's own 502/504)."
    );
    describe_counter!(
        "proxypool_gateway_cooldown_skips_total",
        "Candidate proxies passed over because they cool down for the target's domain."
    );
    describe_counter!(
        "proxypool_gateway_cooldown_changes_dropped_total",
        "Cooldown changes dropped before a report took them (the report queue was full)."
    );
    describe_counter!(
        "proxypool_gateway_session_feedback_applied_total",
        "Client feedback on this gateway's sticky sessions applied to the session's proxy."
    );
    describe_counter!(
        "proxypool_gateway_selection_misses_total",
        "Requests for which no eligible proxy was found."
    );
    describe_counter!(
        "proxypool_gateway_capacity_waits_total",
        "Requests that waited for a free session slot (every usable proxy was full)."
    );
    describe_counter!(
        "proxypool_gateway_capacity_wait_outcomes_total",
        "How capacity waits ended: served (a slot freed in time), timed_out (refused at the deadline), over_bound (refused at once: too many waiters)."
    );
    describe_counter!(
        "proxypool_gateway_limiter_denials_total",
        "Limiter denials."
    );
    describe_counter!(
        "proxypool_gateway_destination_denials_total",
        "Targets refused by the destination policy before any dial, by reason."
    );
    describe_gauge!(
        "proxypool_gateway_tunnels_open",
        "CONNECT and SOCKS5 tunnels open."
    );
    describe_counter!(
        "proxypool_gateway_tunnels_closed_total",
        "Tunnels closed because the gateway no longer held their proxy's lease: lease_lapsed (it ended unrenewed), stale (the store said the worker no longer owns the proxy)."
    );
    describe_gauge!(
        "proxypool_gateway_ready",
        "1 while the gateway can route (a fresh snapshot with at least one leased proxy), else 0."
    );
    describe_gauge!(
        "proxypool_gateway_leased_proxies",
        "Proxies of the applied snapshot whose lease the gateway holds now."
    );
    describe_gauge!(
        "proxypool_gateway_snapshot_age_seconds",
        "Seconds since the controller last answered."
    );
    describe_gauge!(
        "proxypool_gateway_snapshot_version",
        "Applied snapshot version."
    );
    describe_counter!(
        "proxypool_gateway_snapshot_updates_total",
        "Snapshot updates applied, by kind: the whole snapshot or a delta."
    );
    describe_gauge!(
        "proxypool_gateway_snapshot_proxies",
        "Proxies in the applied snapshot."
    );
    describe_histogram!(
        "proxypool_gateway_upstream_dial_seconds",
        "Time to connect and handshake with an upstream proxy."
    );
    describe_histogram!(
        crate::access::sink::REQUEST_SECONDS,
        "Time from a request read to its answer's head (plain HTTP: the response head; \
         CONNECT: the 200 or the refusal; SOCKS5: the reply), by kind (http, connect, socks5)."
    );
    describe_histogram!(
        crate::access::sink::TUNNEL_SECONDS,
        "Life of a tunnel from its start to its close, by kind (connect, socks5)."
    );
    describe_counter!(
        crate::access::sink::LINES,
        "Access-log lines by outcome: written, failed (the write failed), dropped (the \
         writer was behind, or the log closed)."
    );
    describe_counter!(
        crate::access::sink::DROPPED,
        "Access-log lines dropped before they were formatted, by kind: refusal (beyond \
         refusals_per_second or the refusals' quarter of the queue)."
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_metrics::MetricsHandle;

    #[test]
    fn every_refusal_code_has_a_counter_registered_up_front() {
        let refusals = Refusal::examples();
        let mut codes: Vec<_> = refusals.iter().map(Refusal::code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Refusal::CODES.len(), "each code once");
        let (recorder, handle) = MetricsHandle::local();
        let metrics = metrics::with_local_recorder(&recorder, GatewayMetrics::new);
        // Every series exists before the first refusal.
        let text = handle.render();
        for code in Refusal::CODES {
            assert!(
                text.contains(&format!(
                    "proxypool_gateway_refusals_total{{code=\"{code}\"}} 0"
                )),
                "{code}: {text}"
            );
        }
        // Counting uses those handles only: no registry lookup (this runs outside the
        // recorder's scope, where a lookup would find no recorder).
        for refusal in &refusals {
            metrics.refusal(refusal.code());
        }
        metrics.refusal(Refusal::AuthRequired.code());
        let text = handle.render();
        assert!(
            text.contains("proxypool_gateway_refusals_total{code=\"auth_required\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("proxypool_gateway_refusals_total{code=\"locked_out\"} 1"),
            "{text}"
        );
    }
}
