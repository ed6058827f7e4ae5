//! The HTTP proxy listener (hyper 1.x, HTTP/1.1): absolute-form requests with keep-alive
//! (each request authenticated, admitted and routed on its own, so rotation works on a
//! kept-alive connection) and `CONNECT` tunnels.
//!
//! Per connection: a permit from the global connection cap, a header read timeout and
//! size cap (hyper answers 400/431 to malformed or oversized heads and closes), an idle
//! watchdog for kept-alive connections, and a cache of the last verified credentials so a
//! kept-alive client does not pay a hash per request.

mod connect;
mod response;
mod service;

pub(crate) use connect::run_tunnel;

use crate::io::ActivityIo;
use crate::metrics::Listener;
use crate::state::{Phase, Shared};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use service::ConnectionState;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OwnedSemaphorePermit;

/// Accepts HTTP proxy connections until the gateway starts draining.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut phase = shared.phase.clone();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = phase.wait_for(|p| *p != Phase::Running) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors and similar: back off instead of spinning.
                tracing::warn!(%error, "http accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&shared.connections).try_acquire_owned() else {
            shared.metrics.rejected_connection_cap.increment(1);
            drop(stream);
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            shared.metrics.connection_opened(Listener::Http);
            serve_connection(&shared, stream, peer, permit).await;
            shared.metrics.connection_closed(Listener::Http);
        });
    }
}

async fn serve_connection(
    shared: &Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let clock = Arc::clone(&shared.clock);
    let last_activity = Arc::new(AtomicU64::new(clock.monotonic_ms()));
    let io = TokioIo::new(ActivityIo::new(
        stream,
        Arc::clone(&last_activity),
        Arc::clone(&clock),
    ));
    let state = Arc::new(ConnectionState::new(shared, peer, permit));
    let service = {
        let shared = Arc::clone(shared);
        let state = Arc::clone(&state);
        service_fn(move |request| {
            let shared = Arc::clone(&shared);
            let state = Arc::clone(&state);
            async move {
                Ok::<_, std::convert::Infallible>(service::handle(&shared, &state, request).await)
            }
        })
    };
    let config = shared.config();
    let limits = &config.limits;
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.header_timeout())
        .max_buf_size(limits.max_header_bytes.max(8192))
        .max_header_size(limits.max_header_bytes)
        .keep_alive(true);
    let connection = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(connection);
    let idle = limits.keepalive_idle.as_ms();
    let check_every = Duration::from_millis((idle / 4).clamp(10, 1_000));
    let mut phase = shared.phase.clone();
    let mut closing = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => break,
            _ = tokio::time::sleep(check_every), if !closing => {
                let quiet = clock.monotonic_ms().saturating_sub(last_activity.load(Ordering::Relaxed));
                if quiet >= idle && state.in_flight() == 0 {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
            changed = phase.changed() => {
                let now = if changed.is_err() { Phase::Stopped } else { *phase.borrow() };
                match now {
                    Phase::Running => {}
                    // Finish the request in flight, then close instead of keeping alive.
                    Phase::Draining if !closing => {
                        closing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                    Phase::Draining => {}
                    Phase::Stopped => break,
                }
            }
        }
    }
}
