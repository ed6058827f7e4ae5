//! Dialing through an upstream proxy: TCP connect to the proxy, then its handshake
//! (HTTP `CONNECT` with Basic credentials, or SOCKS5 with username/password), each under
//! its own timeout; to an `https` proxy, TLS comes between the two (under the proxy's
//! name, whatever address was dialed). Failures are classified ([`crate::failure`]) so
//! the caller knows whether to blame the proxy (count it, retry elsewhere) or the target
//! (no retry: every proxy would fail alike, and the proxy is not counted).
//!
//! The TCP connect goes only to an address [`ProxyAddresses`] judged: a name's kept answer,
//! never a fresh lookup of the system resolver at connect time, and nothing at all when
//! the proxy's upstream refuses internal addresses and one of them is internal.

use crate::config::GatewayConfig;
use crate::failure::classify;
use crate::outbound::heard::Heard;
use crate::outbound::peeked_head::PeekedHead;
use crate::proxy_addresses::ProxyAddresses;
use crate::routing::dialer::{DialFailure, Dialer};
use crate::snapshot::ViewProxy;
use proxypool_core::Protocol;
use proxypool_edge::Conn;
use proxypool_proto::{TargetAddr, http_connect, socks5, with_timeout};
use std::io;
use std::time::Duration;
use tokio::net::TcpStream;

/// Timeouts for one dial.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DialTimeouts {
    pub connect: Duration,
    pub handshake: Duration,
}

impl DialTimeouts {
    /// The timeouts `[gateway.dial]` sets.
    pub(crate) fn of(config: &GatewayConfig) -> Self {
        DialTimeouts {
            connect: config.dial.connect_timeout.as_duration(),
            handshake: config.dial.handshake_timeout.as_duration(),
        }
    }
}

/// The link to the proxy itself: TCP, then for an `https` proxy TLS, verified against its
/// upstream's CA bundle under the expected name, before a byte of the proxy protocol.
pub(crate) async fn connect_proxy(
    proxy: &ViewProxy,
    timeouts: DialTimeouts,
    addresses: &ProxyAddresses,
) -> Result<Conn, DialFailure> {
    let tcp = connect_tcp(proxy, timeouts.connect, addresses).await?;
    let Some(tls) = &proxy.tls else {
        return Ok(Conn::Plain(tcp));
    };
    let handshake = tls.client.handshake(&tls.server_name, tcp);
    match tokio::time::timeout(timeouts.handshake, handshake).await {
        Err(_) => Err(DialFailure::proxy("proxy_tls_timeout")),
        Ok(Err(error)) => {
            // Most often the upstream's CA bundle or server name is wrong: the operator's
            // to fix, so say what TLS said.
            tracing::warn!(proxy = %proxy.id, upstream = %proxy.upstream, %error, "TLS with the proxy failed");
            Err(DialFailure::proxy("proxy_tls_error"))
        }
        Ok(Ok(conn)) => Ok(conn),
    }
}

/// TCP to the proxy, at the first of its judged addresses that accepts, all within
/// `timeout` (a name's lookup, when none was kept, included).
async fn connect_tcp(
    proxy: &ViewProxy,
    timeout: Duration,
    addresses: &ProxyAddresses,
) -> Result<TcpStream, DialFailure> {
    let connecting = tokio::time::timeout(timeout, async {
        let targets = addresses
            .to_dial(proxy)
            .await
            .map_err(|not| DialFailure::proxy(not.reason()))?;
        let mut last = None;
        for addr in targets.addrs() {
            match TcpStream::connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(error) => last = Some(error),
            }
        }
        Err(connect_failure(last))
    })
    .await;
    match connecting {
        Err(_) => Err(DialFailure::proxy("proxy_connect_timeout")),
        Ok(Err(failure)) => Err(failure),
        Ok(Ok(stream)) => {
            // Small writes (handshakes, interactive tunnels) must not wait for Nagle.
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
    }
}

/// The failure of a connect whose last attempt failed with `error`.
fn connect_failure(error: Option<io::Error>) -> DialFailure {
    match error {
        Some(error) if error.kind() == io::ErrorKind::ConnectionRefused => {
            DialFailure::proxy("proxy_connect_refused")
        }
        _ => DialFailure::proxy("proxy_connect_error"),
    }
}

/// A tunnel to `target` through `proxy`: the returned stream carries the target's bytes.
pub(crate) async fn tunnel(
    proxy: &ViewProxy,
    target: &TargetAddr,
    timeouts: DialTimeouts,
    addresses: &ProxyAddresses,
) -> Result<Conn, DialFailure> {
    let mut stream = connect_proxy(proxy, timeouts, addresses).await?;
    let mut answered = false;
    let handshake = async {
        match (proxy.protocol, &mut stream) {
            (Protocol::Http | Protocol::Https, Conn::Plain(tcp)) => {
                let mut tcp = PeekedHead::new(tcp);
                http_connect::connect(&mut tcp, &target.to_string(), proxy.auth()).await
            }
            // Over TLS the reader's small steps come from rustls's buffer, not the socket.
            (Protocol::Http | Protocol::Https, tls) => {
                http_connect::connect(tls, &target.to_string(), proxy.auth()).await
            }
            // A SOCKS5 proxy that answered the greeting and then goes quiet is connecting
            // to the target: whether it answered at all decides whom a timeout blames.
            (Protocol::Socks5, stream) => {
                let mut stream = Heard::new(stream, &mut answered);
                socks5::connect(&mut stream, target, proxy.auth())
                    .await
                    .map(|_bound| ())
            }
        }
    };
    let outcome = with_timeout(timeouts.handshake, handshake).await;
    match outcome {
        Ok(()) => Ok(stream),
        Err(error) => Err(classify(&error, answered)),
    }
}

/// Dials tunnels to one target.
#[derive(Debug)]
pub(crate) struct TunnelDialer<'a> {
    pub target: TargetAddr,
    pub timeouts: DialTimeouts,
    pub addresses: &'a ProxyAddresses,
}

impl Dialer for TunnelDialer<'_> {
    type Output = Conn;

    fn dial<'a>(
        &'a self,
        proxy: &'a ViewProxy,
    ) -> impl Future<Output = Result<Conn, DialFailure>> + Send + 'a {
        tunnel(proxy, &self.target, self.timeouts, self.addresses)
    }
}
