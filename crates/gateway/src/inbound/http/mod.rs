//! The HTTP proxy listener (hyper 1.x, HTTP/1.1): absolute-form requests with keep-alive
//! (each request authenticated, admitted and routed on its own, so rotation works on a
//! kept-alive connection) and `CONNECT` tunnels. The TLS listener
//! ([`crate::inbound::tls_accept`]) serves the same protocol inside TLS.
//!
//! Per connection: admission at accept (the per-IP cap, the shield's verdict, the global
//! connection cap: [`crate::inbound::accept`]), a header read timeout and
//! size cap (hyper answers 400/431 to malformed or oversized heads and closes), an idle
//! watchdog for kept-alive connections, and a cache of the last verified credentials so a
//! kept-alive client does not pay a hash per request.

mod canonical;
mod connect;
mod connection;
mod fleet_auth;
mod response;
mod service;

use crate::context::Phase;
use crate::inbound::accept::{Accepted, ShieldAtAccept, accept_loop};
use crate::inbound::client_cert::ClientCertificate;
use crate::io::ActivityIo;
use crate::metrics::Listener;
use crate::state::Shared;
use connection::ConnectionState;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proxypool_core::WorkerId;
use proxypool_edge::Admitted;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

/// Accepts HTTP proxy connections until the gateway starts draining (admission at
/// accept: [`crate::inbound::accept`]).
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    accept_loop(
        listener,
        shared,
        Listener::Http,
        |shared, accepted| async move {
            let Accepted {
                stream,
                peer,
                admitted,
                shield,
            } = accepted;
            let _ = stream.set_nodelay(true);
            serve_connection(&shared, stream, peer, admitted, shield, None, None).await;
        },
    )
    .await;
}

/// Serves the HTTP proxy protocol on one admitted connection's stream: a socket from the
/// plain listener, or a TLS stream from [`crate::inbound::tls_accept`] with the client
/// certificate's names when it presented one, or a TLS stream from
/// [`crate::inbound::fleet_accept`] with the fleet member it authenticated as. One
/// monomorphic copy per stream type, so the plain listener's path is what it was before TLS.
pub(crate) async fn serve_connection<S>(
    shared: &Arc<Shared>,
    stream: S,
    peer: SocketAddr,
    admitted: Admitted,
    shield: ShieldAtAccept,
    certificate: Option<ClientCertificate>,
    fleet_peer: Option<WorkerId>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let clock = Arc::clone(&shared.clock);
    let last_activity = Arc::new(AtomicU64::new(clock.monotonic_ms()));
    let state = Arc::new(ConnectionState::new(
        peer,
        admitted,
        shield,
        certificate,
        fleet_peer,
    ));
    let io = TokioIo::new(ActivityIo::new(
        stream,
        Arc::clone(&last_activity),
        Arc::clone(&clock),
        Arc::clone(&state.mark),
    ));
    let service = {
        // One reference per connection, cloned per request: the gateway-wide `Shared` is
        // not, so requests on two threads do not bounce its count between cores.
        let context = Arc::new((Arc::clone(shared), Arc::clone(&state)));
        service_fn(move |request| {
            let context = Arc::clone(&context);
            async move {
                let (shared, state) = &*context;
                Ok::<_, std::convert::Infallible>(service::handle(shared, state, request).await)
            }
        })
    };
    let connection = shared
        .client_http1()
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(connection);
    let idle = shared.config().limits.keepalive_idle.as_ms();
    let check_every = Duration::from_millis((idle / 4).clamp(10, 1_000));
    let mut phase = shared.phase.clone();
    let mut closing = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => break,
            () = state.mark.evicted(), if !closing => {
                // Chosen to make room: an unused connection goes at once; one whose
                // request began meanwhile finishes it first.
                if state.in_flight() == 0 {
                    break;
                }
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
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
