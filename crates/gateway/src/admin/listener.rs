//! The admin listener: `/metrics` (Prometheus text), `/healthz` (liveness: 200 while the
//! process answers), `/readyz` (readiness: 200 while the gateway can route, else 503 with
//! the reason, see [`crate::snapshot::readiness`]; behind the per-IP shield) and `/status`
//! (JSON for operators, `super::status`). With `[gateway] admin_token` set, `/metrics` and
//! `/status` need it as a bearer token; without one they show only the aggregate, no
//! tenant's series or detail (`super::token`). The probes stay open. Readiness reads only
//! the applied snapshot in memory, so a probe costs the controller nothing and needs no
//! cached result.

use super::status::status_json;
use super::token::{self, Access};
use crate::config::Limits;
use crate::context::Phase;
use crate::outbound::forward::body::ProxyBody;
use crate::refusal::Refusal;
use crate::snapshot::readiness;
use crate::state::Shared;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use proxypool_edge::ServeLimits;
use proxypool_metrics::MetricsHandle;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use tokio::net::TcpListener;

/// The admin listener's limits: the gateway's header and idle timeouts and head size,
/// `limits.admin_max_connections` in total and a quarter of them (at least one) per
/// address, so one address cannot shut operators out. Read when the listener starts: a
/// reload changes the client listeners' timeouts, not the admin listener's.
pub(crate) fn admin_limits(limits: &Limits) -> ServeLimits {
    ServeLimits {
        max_connections: limits.admin_max_connections,
        max_connections_per_ip: (limits.admin_max_connections / 4).max(1),
        ipv6_prefix: limits.ipv6_prefix,
        first_byte_timeout: limits.first_byte_deadline().as_duration(),
        header_read_timeout: limits.header_read_timeout.as_duration(),
        keepalive_idle: limits.keepalive_idle.as_duration(),
        max_header_bytes: limits.max_header_bytes,
        proxy_protocol_from: Vec::new(),
        uncounted_per_ip: Vec::new(),
        tls: None,
    }
}

/// Serves admin requests (on the edge's server scaffold) until the gateway stops.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    metrics: Option<MetricsHandle>,
) {
    let mut limits = admin_limits(&shared.config().limits);
    limits.tls = shared.admin_tls.clone();
    let mut phase = shared.phase.clone();
    let stopped = async move {
        let _ = phase.wait_for(|p| *p == Phase::Stopped).await;
    };
    let service = service_fn(move |request: Request<Incoming>| {
        let peer = request
            .extensions()
            .get::<proxypool_edge::Peer>()
            .map(|peer| peer.0.ip());
        let path = request.uri().path();
        let response = match shielded(&shared, path, peer) {
            Ok(()) => match token::access(&shared, path, request.headers()) {
                Access::Refused => token::unauthorized(),
                access => answer(&shared, metrics.as_ref(), path, access),
            },
            Err(refusal) => refused(&refusal),
        };
        async move { Ok::<_, std::convert::Infallible>(response) }
    });
    if let Err(error) = proxypool_edge::serve(listener, service, limits, stopped).await {
        tracing::warn!(%error, "admin listener failed");
    }
}

/// `/readyz` is charged to the per-IP shield (when it is on) like a client request, so
/// a flood of probes from one address is refused; `/healthz` and the operator routes are
/// not (the per-address connection cap bounds them).
fn shielded(shared: &Shared, path: &str, peer: Option<IpAddr>) -> Result<(), Refusal> {
    if path != "/readyz" {
        return Ok(());
    }
    let Some(shield) = shared.shield.load_full() else {
        return Ok(());
    };
    // Without a peer (never on the scaffold) every request shares one bucket: fail closed.
    let ip = peer.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    shield.check(&mut shield.connection(ip))
}

/// The shield's refusal in the JSON error shape, with `Retry-After`.
fn refused(refusal: &Refusal) -> Response<ProxyBody> {
    let body = proxypool_edge::error_body(refusal.code(), refusal.to_string(), "");
    let mut response = Response::new(ProxyBody::text(String::from_utf8_lossy(&body)));
    *response.status_mut() =
        StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = refusal.retry_after_secs() {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// The answer to `path`, showing what `access` allows.
fn answer(
    shared: &Shared,
    metrics: Option<&MetricsHandle>,
    path: &str,
    access: Access,
) -> Response<ProxyBody> {
    let detail = access == Access::Full;
    let (status, content_type, body) = match path {
        "/metrics" => {
            if let Some(age) = shared.store.since_fresh_ms() {
                shared.metrics.snapshot_age.set(age as f64 / 1000.0);
            }
            readiness::publish(&shared.store, &shared.metrics, shared.clock.now());
            // The aggregate is chosen series by series while rendering: no second pass.
            let text = metrics.map_or_else(
                || "# the process has another metrics recorder installed\n".to_owned(),
                |handle| {
                    if detail {
                        handle.render()
                    } else {
                        handle.render_aggregate()
                    }
                },
            );
            (StatusCode::OK, proxypool_metrics::CONTENT_TYPE, text)
        }
        // Liveness only: an outage of the controller or its store is not a reason to
        // restart a gateway (it would lose the snapshot it still serves from).
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        "/readyz" => match readiness::readiness(&shared.store, shared.clock.now()) {
            Ok(_) => (
                StatusCode::OK,
                "application/json",
                serde_json::json!({ "ready": true }).to_string(),
            ),
            Err(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "application/json",
                serde_json::json!({ "ready": false, "reason": why.reason() }).to_string(),
            ),
        },
        "/status" => (
            StatusCode::OK,
            "application/json",
            status_json(shared, detail),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    let mut response = Response::new(ProxyBody::text(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
