//! The controller's metrics: names, help texts and the helpers its loops call.
//!
//! Everything goes through the `metrics` facade into the process's one recorder
//! (`proxypool_metrics`, installed by [`install`]), so the client API's `GET /metrics`
//! (and, in `serve`/`dev`, the gateway admin's) shows them. The controller is not a hot
//! path: helpers look their series up per call rather than caching handles.
//!
//! Label values are bounded: upstream ids and worker ids come from the configuration
//! (upstreams, worker tokens), states are [`ProxyStatus::ALL`], outcomes and reasons are
//! fixed names (error kinds, enum variants), store calls are the port methods.
//!
//! - [`pool`]: the periodic read that sets the pool, worker and leadership gauges.
//! - [`metered`]: the activity pool as the controller calls it, timed per call.

pub mod metered;
pub mod pool;

use proxypool_core::{
    CheckFailure, CooldownReport, PoolError, ProxyStatus, SweepReport, UpsertReport, UpstreamId,
    WorkerId,
};
use std::time::Duration;

pub const PROXIES: &str = "proxypool_pool_proxies";
pub const FETCHES: &str = "proxypool_controller_fetches_total";
pub const FETCH_SECONDS: &str = "proxypool_controller_fetch_duration_seconds";
pub const ENTRIES_ACCEPTED: &str = "proxypool_controller_entries_accepted_total";
pub const ENTRIES_REFUSED: &str = "proxypool_controller_entries_refused_total";
pub const HEALTH_CHECKS: &str = "proxypool_controller_health_checks_total";
pub const HEALTH_SECONDS: &str = "proxypool_controller_health_check_duration_seconds";
pub const WORKER_LEASES: &str = "proxypool_controller_worker_leases";
pub const WORKER_SESSIONS: &str = "proxypool_controller_worker_sessions";
pub const SNAPSHOT_AGE: &str = "proxypool_controller_worker_snapshot_age_seconds";
pub const LEADER: &str = "proxypool_controller_leader";
pub const LEADER_TERM: &str = "proxypool_controller_leader_term";
pub const SWEEPS: &str = "proxypool_controller_sweeps_total";
pub const SWEEP_REMOVED: &str = "proxypool_controller_sweep_removed_total";
pub const STORE_SECONDS: &str = "proxypool_controller_store_duration_seconds";
pub const STORE_ERRORS: &str = "proxypool_controller_store_errors_total";
pub const COOLDOWN_CHANGES: &str = "proxypool_controller_cooldown_changes_total";
pub const STORE_LOSSES: &str = "proxypool_controller_store_losses_total";
pub const STORE_STATE: &str = "proxypool_controller_store_state";
pub const SNAPSHOT_UPDATES: &str = "proxypool_controller_snapshot_updates_total";

/// Every family the controller exports (for tests that look for all of them).
pub const FAMILIES: [&str; 20] = [
    PROXIES,
    FETCHES,
    FETCH_SECONDS,
    ENTRIES_ACCEPTED,
    ENTRIES_REFUSED,
    HEALTH_CHECKS,
    HEALTH_SECONDS,
    WORKER_LEASES,
    WORKER_SESSIONS,
    SNAPSHOT_AGE,
    LEADER,
    LEADER_TERM,
    SWEEPS,
    SWEEP_REMOVED,
    STORE_SECONDS,
    STORE_ERRORS,
    COOLDOWN_CHANGES,
    STORE_LOSSES,
    STORE_STATE,
    SNAPSHOT_UPDATES,
];

/// Installs the process's recorder (or finds it installed) and registers the help texts.
/// Called when a controller is assembled, before any of its metrics is recorded.
pub fn install() {
    if let Err(error) = proxypool_metrics::install() {
        tracing::warn!(%error, "controller metrics go to the foreign recorder");
    }
    describe();
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        PROXIES,
        "Proxies in the activity pool by upstream and state, read every few seconds; the \
         states of one upstream sum to its records in the pool."
    );
    describe_counter!(
        FETCHES,
        "Provider rounds (vendor fetch or static list, then upsert) by upstream and outcome \
         (success, or the error kind: connect, tls, timeout, http_status, too_large, body, \
         request, foreign_host, insecure_redirect, too_many_redirects, too_many_pages, \
         page_loop, bad_next_link, malformed_body, store_unavailable, store_rejected)."
    );
    proxypool_metrics::set_buckets(FETCH_SECONDS, proxypool_metrics::REMOTE_CALL_BUCKETS);
    describe_histogram!(
        FETCH_SECONDS,
        "Duration of provider rounds (fetch, parse and upsert) by upstream."
    );
    describe_counter!(
        ENTRIES_ACCEPTED,
        "Vendor entries upserted into the pool (inserted or refreshed), by upstream."
    );
    describe_counter!(
        ENTRIES_REFUSED,
        "Vendor entries not taken into the pool, by upstream and reason (a parse or \
         validation reason, over_max_size, foreign_duplicate, extracted)."
    );
    describe_counter!(
        HEALTH_CHECKS,
        "Health checks through proxies by upstream, outcome (success, failure) and reason \
         (none for a success; for a failure one of dns, connect, proxy_tls, auth, refused, \
         protocol, target_tls, status, timeout, slow, other)."
    );
    proxypool_metrics::set_buckets(HEALTH_SECONDS, proxypool_metrics::REMOTE_CALL_BUCKETS);
    describe_histogram!(
        HEALTH_SECONDS,
        "Duration of health checks through proxies (either outcome), by upstream."
    );
    describe_gauge!(
        WORKER_LEASES,
        "Proxies leased to each gateway worker (serving and draining), as of the last \
         ownership round; 0 once the worker has no live session."
    );
    describe_gauge!(WORKER_SESSIONS, "Live gateway worker sessions.");
    describe_gauge!(
        SNAPSHOT_AGE,
        "Seconds since the snapshot a worker last acknowledged was built by this \
         controller; 0 when this controller did not build it or the worker has no session."
    );
    describe_gauge!(
        LEADER,
        "1 while this controller leads (runs the reconcilers, checker, ownership and \
         maintenance loops), else 0."
    );
    describe_gauge!(
        LEADER_TERM,
        "The leadership term this controller holds or last held (0 before the first)."
    );
    describe_counter!(
        STORE_LOSSES,
        "Losses of the pool store's memory this controller recorded first, by reason \
         (missing, replaced, rolled_back, forced): each started a new incarnation and a \
         recovery."
    );
    for reason in ["missing", "replaced", "rolled_back", "forced"] {
        metrics::counter!(STORE_LOSSES, "reason" => reason).increment(0);
    }
    describe_gauge!(
        STORE_STATE,
        "The pool store as this controller knows it: 0 unknown (not established yet), 1 ok, \
         2 recovering from a loss (proxies that may have been handed out are withheld), \
         3 lost (every call refused until the new incarnation is in place)."
    );
    describe_counter!(
        SNAPSHOT_UPDATES,
        "Snapshot updates served to gateways, by what went out (update: full, delta) and \
         what the controller read to make it (read: whole, the worker's every proxy; \
         changes, only the proxies the store's change journal named)."
    );
    for (update, read) in [("full", "whole"), ("delta", "whole"), ("delta", "changes")] {
        metrics::counter!(SNAPSHOT_UPDATES, "update" => update, "read" => read).increment(0);
    }
    describe_counter!(
        SWEEPS,
        "Maintenance sweep rounds by outcome (success, failure)."
    );
    describe_counter!(
        SWEEP_REMOVED,
        "Expired state removed by maintenance sweeps, by kind (records, assignments, \
         sessions, results)."
    );
    proxypool_metrics::set_buckets(STORE_SECONDS, proxypool_metrics::STORE_CALL_BUCKETS);
    describe_histogram!(
        STORE_SECONDS,
        "Latency of the controller's calls into the activity pool, by call."
    );
    describe_counter!(
        COOLDOWN_CHANGES,
        "Cooldown changes the gateways' runtime reports carried, by result (applied to a \
         proxy the pool holds, unknown: its proxy is gone, so the change was ignored, \
         unknown_scope: its project is not configured, so it was dropped before the store)."
    );
    describe_counter!(
        STORE_ERRORS,
        "Failed activity-pool calls of the controller, by call and error (unavailable, \
         conflict, not_found, invalid_input, insufficient_inventory)."
    );
}

/// A proxy state as a label value.
pub(crate) fn state_label(status: ProxyStatus) -> &'static str {
    match status {
        ProxyStatus::Fetched => "fetched",
        ProxyStatus::Checking => "checking",
        ProxyStatus::Available => "available",
        ProxyStatus::Suspect => "suspect",
        ProxyStatus::Unhealthy => "unhealthy",
        ProxyStatus::Extracted => "extracted",
        ProxyStatus::Expired => "expired",
        ProxyStatus::Removed => "removed",
    }
}

/// An activity-pool error as a label value.
pub(crate) fn error_label(error: &PoolError) -> &'static str {
    match error {
        // The store is not the one this controller remembers, or withholds what was asked:
        // counted apart, since they say the store lost its memory, not that it is down.
        PoolError::Unavailable(proxypool_core::Unavailable::StoreLost(_)) => "store_lost",
        PoolError::Unavailable(proxypool_core::Unavailable::StoreRecovering { .. }) => {
            "store_recovering"
        }
        PoolError::Unavailable(_) => "unavailable",
        // A leader's write refused because its term is over: counted apart, since it is
        // the fencing doing its job, not a store failure.
        PoolError::Conflict(proxypool_core::Conflict::StaleTerm) => "stale_term",
        PoolError::Conflict(_) => "conflict",
        PoolError::NotFound => "not_found",
        PoolError::InvalidInput(_) => "invalid_input",
        PoolError::InsufficientInventory { .. } => "insufficient_inventory",
    }
}

/// One provider round: its outcome and duration; after a success, what was taken in and
/// what was refused. `refused` holds parse and validation drops by reason.
pub(crate) fn provider_round(
    upstream: &UpstreamId,
    outcome: &'static str,
    elapsed: Duration,
    report: Option<(&UpsertReport, &std::collections::BTreeMap<String, u32>)>,
) {
    let upstream = upstream.to_string();
    metrics::counter!(FETCHES, "upstream" => upstream.clone(), "outcome" => outcome).increment(1);
    metrics::histogram!(FETCH_SECONDS, "upstream" => upstream.clone())
        .record(elapsed.as_secs_f64());
    let Some((report, dropped)) = report else {
        return;
    };
    let accepted = u64::from(report.inserted) + u64::from(report.refreshed);
    metrics::counter!(ENTRIES_ACCEPTED, "upstream" => upstream.clone()).increment(accepted);
    let refused = dropped
        .iter()
        .map(|(reason, n)| (reason.clone(), *n))
        .chain([
            ("over_max_size".to_owned(), report.over_max_size),
            ("foreign_duplicate".to_owned(), report.foreign_duplicates),
            ("extracted".to_owned(), report.extracted_ignored),
        ]);
    for (reason, n) in refused {
        // The pool's own reasons are registered at 0 from the first round; a parse or
        // validation reason gets a series when it first happens.
        if n > 0
            || matches!(
                reason.as_str(),
                "over_max_size" | "foreign_duplicate" | "extracted"
            )
        {
            metrics::counter!(ENTRIES_REFUSED, "upstream" => upstream.clone(), "reason" => reason)
                .increment(u64::from(n));
        }
    }
}

/// One health check through a proxy: `failed` is its reason, `None` for a success.
pub(crate) fn health_check(upstream: &UpstreamId, failed: Option<CheckFailure>, elapsed: Duration) {
    let upstream = upstream.to_string();
    let (outcome, reason) = match failed {
        None => ("success", "none"),
        Some(reason) => ("failure", reason.as_str()),
    };
    metrics::counter!(
        HEALTH_CHECKS,
        "upstream" => upstream.clone(),
        "outcome" => outcome,
        "reason" => reason
    )
    .increment(1);
    metrics::histogram!(HEALTH_SECONDS, "upstream" => upstream).record(elapsed.as_secs_f64());
}

/// One maintenance round finished (or failed).
/// One snapshot update served: `delta` or whole, made from a `whole` read or the changes.
pub(crate) fn snapshot_update(delta: bool, whole_read: bool) {
    let update = if delta { "delta" } else { "full" };
    let read = if whole_read { "whole" } else { "changes" };
    metrics::counter!(SNAPSHOT_UPDATES, "update" => update, "read" => read).increment(1);
}

pub(crate) fn sweep_round(success: bool) {
    let outcome = if success { "success" } else { "failure" };
    metrics::counter!(SWEEPS, "outcome" => outcome).increment(1);
}

/// What one sweep call removed.
pub(crate) fn sweep_removed(report: &SweepReport) {
    for (kind, n) in [
        ("records", report.records_removed),
        ("assignments", report.assignments_removed),
        ("sessions", report.sessions_removed),
        ("results", report.results_removed),
    ] {
        // Registered even at 0, so every kind is there from the first sweep.
        metrics::counter!(SWEEP_REMOVED, "kind" => kind).increment(u64::from(n));
    }
}

/// The cooldown changes of one runtime report: as the store took them, and those dropped
/// before it for a scope no configured project has.
pub(crate) fn cooldown_changes(report: &CooldownReport, unknown_scope: usize) {
    for (result, n) in [
        ("applied", report.applied),
        ("unknown", report.unknown),
        ("unknown_scope", unknown_scope),
    ] {
        // Every accepted report counts, at 0 when it carries none: every series exists
        // from the first report on, so a rate is never missing.
        metrics::counter!(COOLDOWN_CHANGES, "result" => result).increment(n as u64);
    }
}

/// Proxies leased to one worker.
pub(crate) fn worker_leases(worker: &WorkerId, leases: usize) {
    metrics::gauge!(WORKER_LEASES, "worker" => worker.to_string()).set(leases as f64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_metrics::MetricsHandle;

    #[test]
    fn cooldown_changes_are_counted_by_result_and_both_series_exist_at_zero() {
        let (recorder, handle) = MetricsHandle::local();
        metrics::with_local_recorder(&recorder, || {
            cooldown_changes(&CooldownReport::default(), 0);
            cooldown_changes(
                &CooldownReport {
                    applied: 3,
                    unknown: 1,
                },
                2,
            );
        });
        let text = handle.render();
        for expected in [
            "proxypool_controller_cooldown_changes_total{result=\"applied\"} 3\n",
            "proxypool_controller_cooldown_changes_total{result=\"unknown\"} 1\n",
            "proxypool_controller_cooldown_changes_total{result=\"unknown_scope\"} 2\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in {text}");
        }
    }
}
