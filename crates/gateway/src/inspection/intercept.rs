//! The end of an inspected `CONNECT`: answer 200 without routing anything, take the
//! client's TLS handshake with the host's leaf (under the header timeout; a client that
//! refuses the leaf ends the tunnel, counted), then serve HTTP/1.1 inside like the plain
//! listener does (header timeout and size cap, header case kept, a keep-alive idle
//! watchdog, upgrades), each inner request on its own:
//!
//! per-IP shield → snapshot (fail closed) → the client as the snapshot has it now (a
//! client a reload removed or turned `off` is refused) → its rate-limit policy → the
//! inner target (the absolute URI's authority, else `Host`) must be the `CONNECT`'s host
//! and port (403 `forbidden` otherwise: a tunnel to one site never carries requests for
//! another) → the destination policy on it → [`crate::outbound::forward`] with the https
//! scheme, the `CONNECT`'s selectors, session and rotation applying to every request.
//!
//! The tunnel holds the `CONNECT`'s per-IP, global and client connection slots for its
//! life (they go with the client's stream, so a WebSocket relay after an upgrade keeps
//! them too); it ends when the client closes, idles past `keepalive_idle`, the gateway drains
//! (after the request in flight) or stops, or a shutdown grace after a reload removed its
//! client. A proxy's lease cut ends the inner response it carries, like a plain one's.

use super::authority::Authority;
use crate::access::{Exchange, Kind};
use crate::context::{GatewayContext, Phase};
use crate::outbound::forward::{self, Admitted, Scheme, body::ProxyBody};
use crate::policy::limits::{ClientPolicy, ConnectionPermit, Shield};
use crate::refusal::Refusal;
use crate::routing::request::Authenticated;
use crate::routing::selector::Selectors;
use crate::snapshot::ClientEntry;
use http::header::{self, HeaderValue};
use http::uri::{Authority as UriAuthority, Uri};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proxypool_config::gateway::inspection::canonical_host;
use proxypool_core::{ClientId, LockExt, SharedClock};
use proxypool_proto::TargetAddr;
use proxypool_throttle::ConnectionScopes;
use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What the inbound side hands over with a `CONNECT` it lets this module end: the state
/// (`S`, which derefs to the context routing and outbound read), the connection's peer,
/// shield and slots, the client's place under its connection cap, and inbound's own
/// destination admission and refusal answer (plain functions, so this module stays below
/// inbound).
pub(crate) struct Handover<S> {
    pub shared: Arc<S>,
    pub peer: SocketAddr,
    pub shield: Option<Arc<Shield>>,
    /// The connection's per-IP and global slots (the tunnel carries the connection's place).
    pub slots: Option<proxypool_edge::Admitted>,
    pub permit: ConnectionPermit,
    pub admit: fn(&S, &ClientEntry, &TargetAddr) -> Result<(), Refusal>,
    pub refuse: fn(&Refusal) -> Response<ProxyBody>,
}

/// Answers the `CONNECT` to `target` with 200 and ends the tunnel here (module docs); the
/// `CONNECT`'s account goes with the tunnel.
pub(crate) fn intercept<S>(
    handover: Handover<S>,
    authority: Arc<Authority>,
    auth: &Authenticated,
    target: TargetAddr,
    request: Request<Incoming>,
    exchange: &mut Exchange,
) -> Response<ProxyBody>
where
    S: Deref<Target = GatewayContext> + Send + Sync + 'static,
{
    exchange.answered(200);
    let exchange = exchange.hand_over();
    let Handover {
        shared,
        peer,
        shield,
        slots,
        permit,
        admit,
        refuse,
    } = handover;
    let scopes = shield.map(|shield| {
        let scopes = shield.connection(peer.ip());
        (shield, Mutex::new(scopes))
    });
    let tunnel = Arc::new(Tunnel {
        host: canonical_host(&target.host()),
        shared,
        authority,
        peer,
        shield: scopes,
        client: auth.client.id.clone(),
        selectors: auth.selectors.clone(),
        target,
        admit,
        refuse,
        in_flight: AtomicUsize::new(0),
    });
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(request).await else {
            return;
        };
        // The slots go with the client's stream: held while the inner server reads it, and
        // after a WebSocket upgrade while the relay does.
        let held = Held {
            _slots: slots,
            _permit: permit,
        };
        tunnel.run(upgraded, exchange, held).await;
    });
    Response::new(ProxyBody::empty())
}

/// One inspected tunnel, shared by its inner requests.
struct Tunnel<S> {
    shared: Arc<S>,
    authority: Arc<Authority>,
    peer: SocketAddr,
    shield: Option<(Arc<Shield>, Mutex<ConnectionScopes>)>,
    client: ClientId,
    /// The `CONNECT` username's selectors: every inner request is routed by them.
    selectors: Selectors,
    /// The `CONNECT`'s target, and its host in canonical form (the leaf's name).
    target: TargetAddr,
    host: String,
    admit: fn(&S, &ClientEntry, &TargetAddr) -> Result<(), Refusal>,
    refuse: fn(&Refusal) -> Response<ProxyBody>,
    in_flight: AtomicUsize,
}

impl<S> Tunnel<S>
where
    S: Deref<Target = GatewayContext> + Send + Sync + 'static,
{
    async fn run(
        self: Arc<Self>,
        upgraded: hyper::upgrade::Upgraded,
        mut exchange: Exchange,
        held: Held,
    ) {
        let shared: &GatewayContext = &self.shared;
        let metrics = self.authority.metrics();
        exchange.tunnel_started();
        let config = match self.authority.server_config(&self.host).await {
            Ok(config) => config,
            Err(error) => {
                metrics.mint_failed.increment(1);
                tracing::warn!(%error, "no leaf for an inspected tunnel");
                return;
            }
        };
        let accept = tokio_rustls::TlsAcceptor::from(config).accept(TokioIo::new(upgraded));
        let tls = match tokio::time::timeout(shared.header_timeout(), accept).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(error)) => {
                // The client does not trust the gateway's CA, or spoke no TLS.
                metrics.handshake_failed.increment(1);
                tracing::debug!(client = %self.client, %error, "inspected tunnel: the client's TLS handshake failed");
                return;
            }
            Err(_) => {
                metrics.handshake_timeout.increment(1);
                return;
            }
        };
        metrics.inspected.increment(1);
        self.serve(tls, held).await;
    }

    /// Serves the inner HTTP/1.1 connection until it ends (module docs).
    async fn serve<T>(self: &Arc<Self>, stream: T, held: Held)
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let shared: &GatewayContext = &self.shared;
        let clock = Arc::clone(&shared.clock);
        let last_activity = Arc::new(AtomicU64::new(clock.monotonic_ms()));
        let io = TokioIo::new(Stamped {
            inner: stream,
            last: Arc::clone(&last_activity),
            clock: Arc::clone(&clock),
            _held: held,
        });
        let service = {
            let tunnel = Arc::clone(self);
            service_fn(move |request| {
                let tunnel = Arc::clone(&tunnel);
                async move { Ok::<_, std::convert::Infallible>(tunnel.handle(request).await) }
            })
        };
        let (idle, grace) = {
            let config = shared.config();
            (config.limits.keepalive_idle.as_ms(), config.shutdown_grace)
        };
        let connection = shared
            .client_http1()
            .serve_connection(io, service)
            .with_upgrades();
        tokio::pin!(connection);
        let check_every = Duration::from_millis((idle / 4).clamp(10, 1_000));
        let mut phase = shared.phase.clone();
        let removed = client_removed(shared, &self.client, grace);
        tokio::pin!(removed);
        let mut closing = false;
        loop {
            tokio::select! {
                _ = connection.as_mut() => break,
                _ = tokio::time::sleep(check_every), if !closing => {
                    let quiet = clock.monotonic_ms().saturating_sub(last_activity.load(Ordering::Relaxed));
                    if quiet >= idle && self.in_flight.load(Ordering::Relaxed) == 0 {
                        closing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
                () = &mut removed, if !closing => {
                    tracing::info!(client = %self.client, "closing an inspected tunnel of a client the configuration no longer has");
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
                changed = phase.changed() => {
                    let now = if changed.is_err() { Phase::Stopped } else { *phase.borrow() };
                    match now {
                        Phase::Running => {}
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

    /// One inner request; never fails (refusals are responses, as on the listener).
    async fn handle(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let shared: &GatewayContext = &self.shared;
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let _in_flight = InFlight(&self.in_flight);
        self.authority.metrics().requests.increment(1);
        let mut exchange = Exchange::start(&shared.access, Kind::Https, self.peer);
        exchange.client(&self.client);
        match self.admit_and_forward(request, &mut exchange).await {
            Ok(mut response) => {
                exchange.answered(response.status().as_u16());
                exchange.response_headers(response.headers());
                if let ProxyBody::Upstream(body) = response.body_mut() {
                    body.account(exchange.hand_over());
                }
                response
            }
            Err(refusal) => {
                shared.metrics.refusal(refusal.code());
                tracing::debug!(peer = %self.peer, code = refusal.code(), %refusal, "inspected request refused");
                exchange.refused(&refusal);
                (self.refuse)(&refusal)
            }
        }
    }

    async fn admit_and_forward(
        &self,
        mut request: Request<Incoming>,
        exchange: &mut Exchange,
    ) -> Result<Response<ProxyBody>, Refusal> {
        let shared: &GatewayContext = &self.shared;
        // Charged like a kept-alive connection's next request.
        if let Some((shield, scopes)) = &self.shield {
            let mut scopes = scopes.lock_or_recover();
            shield.check(&mut scopes).inspect_err(|_| {
                shared.metrics.shield_denials.increment(1);
            })?;
        }
        let view = shared.store.current()?;
        let client = view
            .client(self.client.as_str())
            .ok_or(Refusal::AuthRequired)?;
        if client.inspection.is_off() {
            return Err(Refusal::Forbidden(
                "TLS inspection is off for this client now".into(),
            ));
        }
        if !client.ip_allowed(self.peer.ip()) {
            return Err(Refusal::Forbidden(format!(
                "source address {} is not in the client's allowlist",
                self.peer.ip()
            )));
        }
        match client.policy {
            ClientPolicy::Limited(handle) => view
                .limiter
                .check(handle, self.peer.ip())
                .inspect_err(|_| shared.metrics.client_denials.increment(1))?,
            ClientPolicy::Invalid => {
                return Err(Refusal::Forbidden(
                    "the client's rate-limit policy is invalid".into(),
                ));
            }
            ClientPolicy::Unlimited => {}
        }
        absolute_https(&mut request, &self.target)?;
        exchange.request(&request);
        exchange.target(&self.target);
        (self.admit)(&self.shared, client, &self.target)?;
        let auth = Authenticated {
            client: Arc::clone(client),
            selectors: self.selectors.clone(),
            fleet_moved: false,
        };
        // The tunnel holds the client's place; its request in flight is counted, never
        // refused for it (it would count the one connection twice).
        let permit = ConnectionPermit::try_acquire(&auth.client.connections, u32::MAX)?;
        let admitted = Admitted {
            target: self.target.clone(),
            permit,
            scheme: Scheme::Https,
        };
        forward::forward(shared, &view, &auth, admitted, request, exchange).await
    }
}

/// Checks that `request` names the tunnel's host and port (its absolute URI's authority,
/// else its `Host`; no port is 443) and writes its URI in absolute `https://` form, as the
/// client named the host, with a `Host` when it sent none.
fn absolute_https<B>(request: &mut Request<B>, tunnel: &TargetAddr) -> Result<(), Refusal> {
    let named = match request.uri().authority() {
        Some(authority) => authority.clone(),
        None => request
            .headers()
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<UriAuthority>().ok())
            .ok_or_else(|| {
                Refusal::BadRequest("a request inside the tunnel needs a Host".into())
            })?,
    };
    let host = named.host().trim_start_matches('[').trim_end_matches(']');
    let port = named.port_u16().unwrap_or(443);
    let target = TargetAddr::domain(host, port)
        .map_err(|error| Refusal::BadRequest(format!("bad Host: {error}")))?;
    if !same_target(&target, tunnel) {
        return Err(Refusal::Forbidden(format!(
            "this tunnel was opened to {tunnel}; a request inside it cannot go to {target}"
        )));
    }
    if !request.headers().contains_key(header::HOST)
        && let Ok(value) = HeaderValue::from_str(named.as_str())
    {
        request.headers_mut().insert(header::HOST, value);
    }
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |path| path.as_str());
    let uri = Uri::builder()
        .scheme("https")
        .authority(named)
        .path_and_query(path)
        .build()
        .map_err(|error| Refusal::BadRequest(format!("bad request target: {error}")))?;
    *request.uri_mut() = uri;
    Ok(())
}

/// Whether two targets are one: names compared in canonical form (case, trailing dot).
fn same_target(a: &TargetAddr, b: &TargetAddr) -> bool {
    match (a, b) {
        (TargetAddr::Ip(a), TargetAddr::Ip(b)) => a == b,
        (TargetAddr::Domain(a, a_port), TargetAddr::Domain(b, b_port)) => {
            a_port == b_port && canonical_host(a) == canonical_host(b)
        }
        _ => false,
    }
}

/// Completes a shutdown grace after the snapshot in force stops listing `client`.
async fn client_removed(shared: &GatewayContext, client: &ClientId, grace: Duration) {
    let mut swaps = shared.store.swaps();
    loop {
        let listed = shared
            .store
            .view()
            .is_none_or(|view| view.client(client.as_str()).is_some());
        if !listed {
            break;
        }
        if swaps.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
    tokio::time::sleep(grace).await;
}

/// One inner request in flight, ended however its handler returns.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The tunnel's per-IP and global slots and the client's place under its connection cap,
/// released when the client's stream is dropped.
struct Held {
    _slots: Option<proxypool_edge::Admitted>,
    _permit: ConnectionPermit,
}

/// The client's TLS stream, stamping the monotonic time of its last read or write for the
/// idle watchdog, and carrying the tunnel's slots wherever the stream goes (the inner
/// server, then an upgrade's relay).
struct Stamped<T> {
    inner: T,
    last: Arc<AtomicU64>,
    clock: SharedClock,
    _held: Held,
}

impl<T> Stamped<T> {
    fn touch(&self) {
        self.last
            .store(self.clock.monotonic_ms(), Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Stamped<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.touch();
        }
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Stamped<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        result
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(uri: &str, host: Option<&str>, tunnel: &str) -> Result<(String, String), Refusal> {
        let mut builder = Request::get(uri);
        if let Some(host) = host {
            builder = builder.header(header::HOST, host);
        }
        let mut request = builder.body(()).unwrap();
        absolute_https(&mut request, &tunnel.parse().unwrap())?;
        let host = request.headers()[header::HOST].to_str().unwrap().to_owned();
        Ok((request.uri().to_string(), host))
    }

    #[test]
    fn an_inner_request_names_the_tunnel_s_host_and_port() {
        assert_eq!(
            checked("/a?b=1", Some("Shop-A.test"), "shop-a.test:443").unwrap(),
            ("https://Shop-A.test/a?b=1".into(), "Shop-A.test".into())
        );
        assert_eq!(
            checked("/", Some("shop-a.test.:8443"), "shop-a.test:8443")
                .unwrap()
                .0,
            "https://shop-a.test.:8443/"
        );
        assert_eq!(
            checked("https://shop-a.test/x", None, "shop-a.test:443").unwrap(),
            ("https://shop-a.test/x".into(), "shop-a.test".into())
        );
        assert!(checked("/", Some("[::1]"), "[::1]:443").is_ok());
        assert!(checked("/", Some("0x7f000001"), "127.0.0.1:443").is_ok());
    }

    #[test]
    fn another_host_or_port_or_no_host_is_refused() {
        for (uri, host) in [
            ("/", Some("shop-b.test")),
            ("/", Some("shop-a.test:8443")),
            ("https://shop-b.test/", Some("shop-a.test")),
            ("/", Some("evil.shop-a.test")),
        ] {
            let refusal = checked(uri, host, "shop-a.test:443").unwrap_err();
            assert!(
                matches!(refusal, Refusal::Forbidden(_)),
                "{uri} {host:?}: {refusal:?}"
            );
        }
        assert!(matches!(
            checked("/", None, "shop-a.test:443").unwrap_err(),
            Refusal::BadRequest(_)
        ));
    }
}
