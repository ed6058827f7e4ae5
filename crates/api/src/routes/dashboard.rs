//! Admin read routes the dashboard polls, and scripts may too: `GET /v1/admin/overview`
//! (the pool by upstream and state, gateway and extraction rates, check latency),
//! `GET /v1/admin/proxies` (the bounded listing, `ProxyLister`) and
//! `GET /v1/admin/clients` (usage, quota and lockouts per configured client).
//!
//! Each is one `inspect` charge and reads only bounded ports: one page of the listing,
//! one inventory per configured upstream, the usage of the configured clients.

use crate::admission::auth::AdminPrincipal;
use crate::admission::quota::{QuotaGrant, charge_request, refund_unserved};
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::state::ApiState;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Query, State};
use axum::response::{IntoResponse, Response};
use proxypool_core::usage::{ClientUsage, MINUTE_MS, UsageAmounts};
use proxypool_core::{
    ClientId, ListedProxy, MAX_LIST_LIMIT, PoolError, ProxyId, ProxyListFilter, ProxyStatus,
    UnixMillis, UpstreamId, WorkerMode,
};
use proxypool_quota::Operation;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Minutes of history the overview's chart shows.
const CHART_MINUTES: u64 = 15;
/// The listing page size when the caller names none.
const DEFAULT_LIMIT: usize = 200;

fn with_grant(body: impl IntoResponse, grant: &QuotaGrant) -> Response {
    let mut response = body.into_response();
    for (name, value) in &grant.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

fn failed(state: &ApiState, grant: &QuotaGrant) -> impl Fn(PoolError) -> ApiError {
    let retry = state.retry_after();
    let headers = grant.headers.clone();
    move |error| ApiError::from_pool(error, retry).with_headers(headers.clone())
}

fn sum(into: &mut UsageAmounts, add: &UsageAmounts) {
    into.requests = into.requests.saturating_add(add.requests);
    into.failures = into.failures.saturating_add(add.failures);
    into.bytes_up = into.bytes_up.saturating_add(add.bytes_up);
    into.bytes_down = into.bytes_down.saturating_add(add.bytes_down);
    into.extracted = into.extracted.saturating_add(add.extracted);
}

fn totals_of(usage: &ClientUsage) -> UsageAmounts {
    let mut total = UsageAmounts::default();
    for upstream in &usage.totals {
        sum(&mut total, &upstream.amounts);
    }
    total
}

fn success_rate(amounts: &UsageAmounts) -> Option<f64> {
    (amounts.requests > 0)
        .then(|| amounts.requests.saturating_sub(amounts.failures) as f64 / amounts.requests as f64)
}

/// The `p`-th percentile (nearest rank) of sorted samples.
fn percentile(sorted: &[u32], p: usize) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

async fn all_usage(state: &ApiState, now: UnixMillis) -> Result<Vec<ClientUsage>, PoolError> {
    let clients: Vec<ClientId> = state
        .clients()
        .clients()
        .iter()
        .map(|client| client.id.clone())
        .collect();
    crate::metrics::timed("usage", "usage", state.ports().usage.usage(now, &clients)).await
}

pub(crate) async fn overview(
    State(state): State<ApiState>,
    AdminPrincipal(client): AdminPrincipal,
    Extension(request_id): Extension<RequestId>,
) -> Result<Response, ApiError> {
    let grant = charge_request(&state, &client, Operation::Inspect, request_id.as_str()).await?;
    let built = overview_charged(&state, &grant).await;
    let body = refund_unserved(&state, &grant, built).await?;
    Ok(with_grant(Json(body), &grant))
}

async fn overview_charged(state: &ApiState, grant: &QuotaGrant) -> Result<Value, ApiError> {
    let fail = failed(state, grant);
    let now = state.now();
    let upstreams = state.ports().upstreams.upstreams().await.map_err(&fail)?;
    let page = crate::metrics::timed(
        "proxies",
        "list_proxies",
        state
            .ports()
            .proxies
            .list_proxies(now, &ProxyListFilter::default(), MAX_LIST_LIMIT),
    )
    .await
    .map_err(&fail)?;
    let mut owned: BTreeMap<&UpstreamId, u64> = BTreeMap::new();
    let mut latencies: Vec<u32> = Vec::new();
    let mut by_status: BTreeMap<ProxyStatus, u64> = BTreeMap::new();
    for proxy in &page.proxies {
        *by_status.entry(proxy.status).or_default() += 1;
        if proxy.owner.is_some() {
            *owned.entry(&proxy.upstream).or_default() += 1;
        }
        if let Some(latency) = proxy.latency_ms
            && proxy.status != ProxyStatus::Expired
        {
            latencies.push(latency);
        }
    }
    latencies.sort_unstable();

    let providers = crate::metrics::timed(
        "admin",
        "provider_statuses",
        state.ports().admin.provider_statuses(),
    )
    .await
    .map_err(&fail)?;
    let mut rows = Vec::with_capacity(upstreams.len());
    for upstream in &upstreams {
        let view = crate::metrics::timed(
            "inventory",
            "inventory",
            state.ports().inventory.inventory(now, &upstream.id),
        )
        .await
        .map_err(&fail)?;
        let available = view
            .by_status
            .get(&ProxyStatus::Available)
            .copied()
            .unwrap_or(0);
        let last_list = providers
            .iter()
            .find(|p| p.upstream.as_ref() == Some(&upstream.id))
            .map(|p| {
                let dropped: u64 = p.last_dropped.values().map(|n| u64::from(*n)).sum();
                json!({
                    "accepted": u64::from(p.last_inserted) + u64::from(p.last_refreshed),
                    "inserted": p.last_inserted,
                    "refreshed": p.last_refreshed,
                    "dropped": dropped
                        + u64::from(p.last_over_max_size)
                        + u64::from(p.last_foreign_duplicates),
                    "refused": p.last_refused,
                    "total_inserted": p.total_inserted,
                    "total_dropped": p.total_dropped,
                    "total_refused": p.total_refused,
                })
            });
        rows.push(json!({
            "id": upstream.id,
            "last_list": last_list,
            "health": upstream.health,
            "by_status": view.by_status,
            "managed": view.managed,
            "unextracted": view.unextracted,
            "available_slots": view.available_slots,
            "owned": owned.get(&upstream.id).copied().unwrap_or(0),
            "healthy_share": (view.managed > 0).then(|| available as f64 / view.managed as f64),
        }));
    }

    let usage = all_usage(state, now).await.map_err(&fail)?;
    let mut total = UsageAmounts::default();
    let current_minute = now - now % MINUTE_MS;
    let first_minute = current_minute.saturating_sub((CHART_MINUTES - 1) * MINUTE_MS);
    let mut minutes: BTreeMap<UnixMillis, UsageAmounts> = (0..CHART_MINUTES)
        .map(|i| (first_minute + i * MINUTE_MS, UsageAmounts::default()))
        .collect();
    for client_usage in &usage {
        sum(&mut total, &totals_of(client_usage));
        for bucket in &client_usage.minutes {
            if let Some(slot) = minutes.get_mut(&bucket.start_ms) {
                for upstream in &bucket.upstreams {
                    sum(slot, &upstream.amounts);
                }
            }
        }
    }
    let last_minute = minutes.get(&current_minute).copied().unwrap_or_default();

    let sessions = crate::metrics::timed(
        "runtime",
        "live_sessions",
        state
            .ports()
            .runtime
            .live_sessions(now, state.extraction().max_workers_listed),
    )
    .await
    .map_err(&fail)?;
    let modes = crate::metrics::timed("admin", "worker_modes", state.ports().admin.worker_modes())
        .await
        .map_err(&fail)?;
    let mode_count = |mode: WorkerMode| modes.iter().filter(|m| m.mode == mode).count();

    Ok(json!({
        "as_of_ms": now,
        "store": state.ports().upstreams.store_status(),
        "upstreams": rows,
        "proxies": {
            "listed": page.proxies.len(),
            "truncated": page.next.is_some(),
            "by_status": by_status,
            "owned": owned.values().sum::<u64>(),
        },
        "check_latency_ms": {
            "samples": latencies.len(),
            "p50": percentile(&latencies, 50),
            "p90": percentile(&latencies, 90),
            "p99": percentile(&latencies, 99),
        },
        "gateway": {
            "requests": total.requests,
            "failures": total.failures,
            "bytes_up": total.bytes_up,
            "bytes_down": total.bytes_down,
            "success_rate": success_rate(&total),
            "requests_this_minute": last_minute.requests,
        },
        "extraction": {
            "extracted": total.extracted,
            "extracted_this_minute": last_minute.extracted,
        },
        "minute_ms": MINUTE_MS,
        "minutes": minutes.iter().map(|(start, amounts)| json!({
            "start_ms": start,
            "requests": amounts.requests,
            "failures": amounts.failures,
            "extracted": amounts.extracted,
        })).collect::<Vec<_>>(),
        "workers": {
            "live": sessions.len(),
            "cordoned": mode_count(WorkerMode::Cordoned),
            "draining": mode_count(WorkerMode::Draining),
        },
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProxiesQuery {
    upstream: Option<String>,
    status: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

impl ProxiesQuery {
    fn filter(&self) -> Result<(ProxyListFilter, usize), ApiError> {
        let upstream = self
            .upstream
            .as_deref()
            .map(UpstreamId::new)
            .transpose()
            .map_err(|_| ApiError::invalid("upstream: not an upstream id"))?;
        let status = self
            .status
            .as_deref()
            .map(|raw| {
                ProxyStatus::ALL
                    .into_iter()
                    .find(|s| s.as_str().eq_ignore_ascii_case(raw))
                    .ok_or_else(|| ApiError::invalid("status: not a proxy status"))
            })
            .transpose()?;
        let after = self
            .after
            .as_deref()
            .map(ProxyId::new)
            .transpose()
            .map_err(|_| ApiError::invalid("after: not a proxy id"))?;
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > MAX_LIST_LIMIT {
            return Err(ApiError::invalid(format!(
                "limit: between 1 and {MAX_LIST_LIMIT}"
            )));
        }
        Ok((
            ProxyListFilter {
                upstream,
                status,
                after,
            },
            limit,
        ))
    }
}

pub(crate) async fn proxies(
    State(state): State<ApiState>,
    AdminPrincipal(client): AdminPrincipal,
    Extension(request_id): Extension<RequestId>,
    query: Result<Query<ProxiesQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|_| {
        ApiError::invalid("query: only upstream, status, after and limit are understood")
    })?;
    // Input errors cost no quota.
    let (filter, limit) = query.filter()?;
    let grant = charge_request(&state, &client, Operation::Inspect, request_id.as_str()).await?;
    let now = state.now();
    let listed = crate::metrics::timed(
        "proxies",
        "list_proxies",
        state.ports().proxies.list_proxies(now, &filter, limit),
    )
    .await
    .map_err(failed(&state, &grant));
    let page = refund_unserved(&state, &grant, listed).await?;
    let rows: Vec<Value> = page.proxies.iter().map(|p| row(now, p)).collect();
    Ok(with_grant(
        Json(json!({ "as_of_ms": now, "proxies": rows, "next": page.next })),
        &grant,
    ))
}

fn row(now: UnixMillis, proxy: &ListedProxy) -> Value {
    let mut value = serde_json::to_value(proxy).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert(
            "time_left_ms".into(),
            json!(proxy.usable_until_ms.saturating_sub(now)),
        );
    }
    value
}

pub(crate) async fn clients(
    State(state): State<ApiState>,
    AdminPrincipal(caller): AdminPrincipal,
    Extension(request_id): Extension<RequestId>,
) -> Result<Response, ApiError> {
    let grant = charge_request(&state, &caller, Operation::Inspect, request_id.as_str()).await?;
    let now = state.now();
    let read = all_usage(&state, now).await.map_err(failed(&state, &grant));
    let usage = refund_unserved(&state, &grant, read).await?;
    let directory = state.clients();
    let board = state.quota_board();
    let rows: Vec<Value> = directory
        .clients()
        .iter()
        .map(|client| {
            let totals = usage
                .iter()
                .find(|u| u.client == client.id)
                .map(totals_of)
                .unwrap_or_default();
            let mut locked_out = false;
            let quota: Vec<Value> = Operation::ALL
                .into_iter()
                .map(|operation| {
                    let limits = client.quota.limits(operation);
                    // A window that has ended since is empty again.
                    let seen = board
                        .get(&client.id, operation)
                        .filter(|s| s.reset_at_ms.is_none_or(|reset| reset > now));
                    let refused_until = seen.and_then(|s| s.refused_until_ms).filter(|t| *t > now);
                    locked_out |= refused_until.is_some();
                    json!({
                        "operation": operation.as_str(),
                        "limit": limits.limit(),
                        "window_ms": limits.window_ms(),
                        "used": seen.and_then(|s| s.remaining).map(|r| limits.limit().saturating_sub(r)),
                        "reset_at_ms": seen.and_then(|s| s.reset_at_ms),
                        "refused_until_ms": refused_until,
                        "refused_by": refused_until.and(seen.and_then(|s| s.refused_by)),
                        "seen_at_ms": seen.map(|s| s.at_ms),
                    })
                })
                .collect();
            json!({
                "client": client.id,
                "project": client.project,
                "admin": client.admin,
                "rate_limited": client.rate_limit.is_some(),
                "usage": totals,
                "success_rate": success_rate(&totals),
                "quota": quota,
                "locked_out": locked_out,
            })
        })
        .collect();
    Ok(with_grant(
        Json(json!({ "as_of_ms": now, "clients": rows })),
        &grant,
    ))
}
