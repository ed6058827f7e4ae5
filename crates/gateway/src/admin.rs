//! The admin listener: `/metrics` (Prometheus text), `/healthz` (200 while the snapshot
//! is fresh, 503 when the gateway refuses traffic) and `/status` (JSON for operators).

use crate::forward::body::ProxyBody;
use crate::prometheus::PrometheusHandle;
use crate::state::{Phase, Shared};
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Serves admin requests until the gateway stops.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    metrics: Option<PrometheusHandle>,
) {
    let mut phase = shared.phase.clone();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = phase.wait_for(|p| *p == Phase::Stopped) => break,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = answer(&shared, metrics.as_ref(), request.uri().path());
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(shared: &Shared, metrics: Option<&PrometheusHandle>, path: &str) -> Response<ProxyBody> {
    let (status, content_type, body) = match path {
        "/metrics" => {
            if let Some(age) = shared.store.since_fresh_ms() {
                shared.metrics.snapshot_age.set(age as f64 / 1000.0);
            }
            let text = metrics.map_or_else(
                || "# the process has another metrics recorder installed\n".to_owned(),
                PrometheusHandle::render,
            );
            (StatusCode::OK, "text/plain; version=0.0.4", text)
        }
        "/healthz" => match shared.store.current() {
            Ok(_) => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
            Err(refusal) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("{}\n", refusal.code()),
            ),
        },
        "/status" => (StatusCode::OK, "application/json", status_json(shared)),
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

fn status_json(shared: &Shared) -> String {
    let view = shared.store.view();
    serde_json::json!({
        "worker": shared.config().worker_id,
        "phase": format!("{:?}", *shared.phase.borrow()).to_lowercase(),
        "serving": shared.store.current().is_ok(),
        "since_controller_ms": shared.store.since_fresh_ms(),
        "snapshot": view.as_ref().map(|v| serde_json::json!({
            "session_id": v.session_id,
            "version": v.reference.version,
            "epoch": v.reference.epoch,
            "generated_at_ms": v.generated_at_ms,
            "checksum": v.reference.checksum,
            "max_staleness_ms": v.max_staleness_ms,
            "proxies": v.proxies.len(),
            "clients": v.client_count(),
        })),
        "tracked_proxies": shared.store.registry().len(),
        "open_connections": shared.open_connections(),
        "config_reload": shared.last_reload.load_full().as_deref().cloned(),
    })
    .to_string()
}
