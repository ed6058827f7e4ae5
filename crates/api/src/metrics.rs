//! The API's metrics: names, help texts and the few helpers the routes call.
//!
//! Everything goes through the `metrics` facade into the process's one recorder
//! (`proxypool_metrics::install`), which `GET /metrics` renders with every other role's
//! metrics in the process. Label values are bounded: route templates (never raw paths),
//! fixed outcomes, status codes.

use std::time::Duration;

pub(crate) const REQUESTS: &str = "proxypool_api_requests_total";
pub(crate) const REQUEST_SECONDS: &str = "proxypool_api_request_duration_seconds";
pub(crate) const EXTRACTIONS: &str = "proxypool_api_extractions_total";
pub(crate) const EXTRACTED_PROXIES: &str = "proxypool_api_extracted_proxies_total";
pub(crate) const SHIELD_DENIALS: &str = "proxypool_api_rate_limited_total";
pub(crate) const QUOTA_DENIALS: &str = "proxypool_api_quota_denials_total";
pub(crate) const STORE_SECONDS: &str = "proxypool_api_store_duration_seconds";
pub(crate) const OVERLOAD: &str = "proxypool_api_overload_total";
pub(crate) const POLICY_DENIALS: &str = "proxypool_api_policy_denials_total";
pub(crate) const QUOTA_SETTLEMENTS: &str = "proxypool_api_quota_settlements_total";
pub(crate) const QUOTA_DECISIONS: &str = "proxypool_quota_decisions_total";
pub(crate) const USAGE_EXTRACTED: &str = "proxypool_usage_extracted_total";
pub(crate) const SIGN_IN_FAILURES: &str = "proxypool_api_sign_in_failures_total";

/// Registers the help texts (called when the state is built: after the recorder is
/// installed, or the texts go nowhere).
pub(crate) fn describe() {
    metrics::describe_counter!(
        REQUESTS,
        "HTTP requests by route template, method and status."
    );
    metrics::describe_histogram!(REQUEST_SECONDS, "HTTP request latency by route template.");
    metrics::describe_counter!(
        EXTRACTIONS,
        "Extraction requests by outcome (created, replayed, insufficient, conflict, expired, unavailable, rejected)."
    );
    metrics::describe_counter!(EXTRACTED_PROXIES, "Proxies handed out by new extractions.");
    metrics::describe_counter!(
        SHIELD_DENIALS,
        "Requests denied by the per-IP shield before authentication, by reason."
    );
    metrics::describe_counter!(
        QUOTA_DENIALS,
        "Requests denied by the durable quota, by operation and reason (exceeded, unavailable)."
    );
    proxypool_metrics::set_buckets(STORE_SECONDS, proxypool_metrics::STORE_CALL_BUCKETS);
    metrics::describe_histogram!(
        STORE_SECONDS,
        "Latency of calls into the stores (activity pool ports, quota) by port and call."
    );
    metrics::describe_counter!(
        POLICY_DENIALS,
        "Authenticated requests denied by the client's rate-limit policy or its cap on extractions in flight, by reason (soft_throttle, hard_lockout, in_flight; feedback: the feedback rate of `[cooldowns]`)."
    );
    metrics::describe_counter!(
        SIGN_IN_FAILURES,
        "Dashboard sign-ins refused, by reason (refused: a wrong, non-admin or out-of-allowlist token; locked_out: the address is backed off)."
    );
    metrics::describe_counter!(
        USAGE_EXTRACTED,
        "Proxies handed out by new extractions, by client and upstream."
    );
    metrics::describe_counter!(
        QUOTA_DECISIONS,
        "Durable quota decisions by operation and outcome (charged, replayed, exceeded, unavailable, invalid)."
    );
    metrics::describe_counter!(
        QUOTA_SETTLEMENTS,
        "Quota charges settled after the request ran, by operation, settlement (refund: the service failed it; spend: a keyed extraction found nothing) and outcome (settled, not_found, unavailable)."
    );
    metrics::describe_counter!(
        OVERLOAD,
        "Requests the API refused for load or slowness, by reason (saturated and timeout: 503; in_flight_per_ip: 429; body_timeout: 408)."
    );
}

pub(crate) fn request_finished(route: &str, method: &str, status: u16, elapsed: Duration) {
    metrics::counter!(REQUESTS, "route" => route.to_owned(), "method" => method.to_owned(), "status" => status.to_string())
        .increment(1);
    metrics::histogram!(REQUEST_SECONDS, "route" => route.to_owned()).record(elapsed.as_secs_f64());
}

pub(crate) fn extraction(outcome: &'static str, proxies: u64) {
    metrics::counter!(EXTRACTIONS, "outcome" => outcome).increment(1);
    if proxies > 0 {
        metrics::counter!(EXTRACTED_PROXIES).increment(proxies);
    }
}

pub(crate) fn shield_denied(reason: &'static str) {
    metrics::counter!(SHIELD_DENIALS, "reason" => reason).increment(1);
}

pub(crate) fn quota_denied(operation: &'static str, reason: &'static str) {
    metrics::counter!(QUOTA_DENIALS, "operation" => operation, "reason" => reason).increment(1);
}

pub(crate) fn policy_denied(reason: &'static str) {
    metrics::counter!(POLICY_DENIALS, "reason" => reason).increment(1);
}

/// Proxies a new extraction handed out, per upstream (labels: a configured client and the
/// upstreams of the proxies the store returned).
pub(crate) fn extracted_by_upstream(client: &str, response: &proxypool_core::ExtractResponse) {
    for proxy in &response.proxies {
        metrics::counter!(USAGE_EXTRACTED, "client" => client.to_owned(), "upstream" => proxy.upstream.to_string())
            .increment(1);
    }
}

pub(crate) fn quota_decided(operation: &'static str, outcome: &'static str) {
    metrics::counter!(QUOTA_DECISIONS, "operation" => operation, "outcome" => outcome).increment(1);
}

pub(crate) fn quota_settled(
    operation: &'static str,
    settlement: &'static str,
    outcome: &'static str,
) {
    metrics::counter!(QUOTA_SETTLEMENTS, "operation" => operation, "settlement" => settlement, "outcome" => outcome)
        .increment(1);
}

pub(crate) fn store_call(port: &'static str, call: &'static str, elapsed: Duration) {
    metrics::histogram!(STORE_SECONDS, "port" => port, "call" => call)
        .record(elapsed.as_secs_f64());
}

pub(crate) fn overload(reason: &'static str) {
    metrics::counter!(OVERLOAD, "reason" => reason).increment(1);
}

/// Times one store call and records it.
pub(crate) async fn timed<T>(
    port: &'static str,
    call: &'static str,
    future: impl std::future::Future<Output = T>,
) -> T {
    let started = std::time::Instant::now();
    let result = future.await;
    store_call(port, call, started.elapsed());
    result
}

/// Counts a refused dashboard sign-in (`reason` is `refused` or `locked_out`).
pub(crate) fn sign_in_failed(reason: &'static str) {
    metrics::counter!(SIGN_IN_FAILURES, "reason" => reason).increment(1);
}
