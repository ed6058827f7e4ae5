//! The upstream side of a forwarded request: a kept-alive connection through the proxy
//! when one is idle, else a new one, tied to the proxy's lease so it closes when the lease
//! goes. For `http`, the new connection goes to an HTTP proxy itself, or is a SOCKS5
//! tunnel to the target; for `https` it is a tunnel to the target through the proxy
//! (HTTP `CONNECT` or SOCKS5 alike), then TLS to the origin, verified by the gateway's
//! [`OriginTls`].

use crate::failure::{DialFailure, TARGET_TLS_ERROR};
use crate::origin_tls::{OriginTls, certificate_problem};
use crate::outbound::dial::{self, DialTimeouts};
use crate::proxies::idle_pool::PoolKey;
use crate::proxies::request_body::CountingBody;
use crate::proxy_addresses::ProxyAddresses;
use crate::refusal::{Refusal, socks_reply};
use crate::routing::dialer::Dialer;
use crate::snapshot::ViewProxy;
use hyper::client::conn::http1::{self as client_http1, SendRequest};
use hyper_util::rt::TokioIo;
use proxypool_core::{Clock, Protocol};
use proxypool_proto::TargetAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// How an `https` request reaches its origin.
pub(super) struct HttpsLink {
    /// The trust the origin's certificate must chain to (the one in force when the
    /// request came).
    pub(super) origin: Arc<OriginTls>,
    /// `false` for a WebSocket upgrade: it takes a connection of its own, never pooled.
    pub(super) pooled: bool,
}

/// Finds or opens a forwarding connection through one proxy.
pub(super) struct ForwardDialer<'c> {
    pub(super) target: &'c TargetAddr,
    pub(super) timeouts: DialTimeouts,
    pub(super) addresses: &'c ProxyAddresses,
    pub(super) pool_idle: Duration,
    pub(super) clock: &'c dyn Clock,
    /// `Some` for the `https` scheme.
    pub(super) https: Option<&'c HttpsLink>,
}

/// A connection ready for the request: what it may be pooled for, and whether it came
/// from the pool.
pub(super) struct Upstream {
    pub(super) sender: SendRequest<CountingBody>,
    pub(super) key: PoolKey,
    pub(super) reused: bool,
}

/// Why a new connection could not be had.
pub(super) enum OpenFailure {
    /// Blamed as [`crate::failure`] says: retried elsewhere when it is the proxy's.
    Dial(DialFailure),
    /// The proxy did its part, and the origin's certificate failed verification: refused
    /// to the client as it is, through any proxy.
    Refused(Refusal),
}

impl Dialer for ForwardDialer<'_> {
    /// The connection; `Err` when the proxy reached the origin and the origin cannot be
    /// trusted (no other proxy would make it trustworthy, so the router must not retry).
    type Output = Result<Upstream, Refusal>;

    async fn dial(&self, proxy: &ViewProxy) -> Result<Self::Output, DialFailure> {
        let key = pool_key(self.https.is_some(), proxy.protocol, self.target);
        let poolable = self.https.is_none_or(|link| link.pooled);
        if poolable && let Some(sender) = pooled(proxy, &key, self.pool_idle).await {
            return Ok(Ok(Upstream {
                sender,
                key,
                reused: true,
            }));
        }
        let opened = open(
            proxy,
            self.target,
            self.https,
            self.timeouts,
            self.addresses,
            self.clock,
        )
        .await;
        match opened {
            Ok(sender) => Ok(Ok(Upstream {
                sender,
                key,
                reused: false,
            })),
            Err(OpenFailure::Dial(failure)) => Err(failure),
            Err(OpenFailure::Refused(refusal)) => Ok(Err(refusal)),
        }
    }
}

/// What a connection through a proxy speaking `protocol` is pooled under: any
/// absolute-form request shares an HTTP proxy's connections; a tunnel (SOCKS5, or any
/// proxy for `https`) leads to one target, named `host:port` for SOCKS5 tunnels and
/// `https://host:port` for TLS to the origin (the name is only made for those).
fn pool_key(https: bool, protocol: Protocol, target: &TargetAddr) -> PoolKey {
    match (https, protocol) {
        (false, Protocol::Http | Protocol::Https) => PoolKey::Proxy,
        (false, Protocol::Socks5) => PoolKey::Target(target.to_string()),
        (true, _) => PoolKey::Target(format!("https://{target}")),
    }
}

/// A ready pooled connection, if one is idle.
async fn pooled(
    proxy: &ViewProxy,
    key: &PoolKey,
    max_idle: Duration,
) -> Option<SendRequest<CountingBody>> {
    while let Some(mut sender) = proxy.slot.idle.take(key, max_idle) {
        if sender.is_ready() {
            // The usual case: no timer, no await.
            return Some(sender);
        }
        // Just returned, and hyper has not seen the end of the last message yet.
        if let Ok(Ok(())) = tokio::time::timeout(Duration::from_millis(50), sender.ready()).await {
            return Some(sender);
        }
    }
    None
}

/// A new upstream connection: to the HTTP proxy itself, or a SOCKS5 tunnel to the target
/// (`http`), or TLS to the origin through a tunnel (`https`). It lives until its sender
/// is dropped, the peer closes, or the proxy's lease goes.
pub(super) async fn open(
    proxy: &ViewProxy,
    target: &TargetAddr,
    https: Option<&HttpsLink>,
    timeouts: DialTimeouts,
    addresses: &ProxyAddresses,
    clock: &dyn Clock,
) -> Result<SendRequest<CountingBody>, OpenFailure> {
    let Some(link) = https else {
        let stream = match proxy.protocol {
            Protocol::Http | Protocol::Https => {
                dial::connect_proxy(proxy, timeouts, addresses).await
            }
            Protocol::Socks5 => dial::tunnel(proxy, target, timeouts, addresses).await,
        }
        .map_err(OpenFailure::Dial)?;
        return handshake(proxy, stream, clock, false).await;
    };
    // The proxy's part: failures here are blamed as for a CONNECT.
    let tunnel = dial::tunnel(proxy, target, timeouts, addresses)
        .await
        .map_err(OpenFailure::Dial)?;
    // The origin's part, the tunnel being up.
    let connecting = link.origin.connect(&proxy.id, target, tunnel);
    let tls = match tokio::time::timeout(timeouts.handshake, connecting).await {
        Ok(Ok(tls)) => tls,
        Err(_) => return Err(OpenFailure::Dial(DialFailure::target_timeout())),
        Ok(Err(error)) => {
            if let Some(why) = certificate_problem(&error) {
                tracing::info!(proxy = %proxy.id, %target, why, %error, "the origin's certificate failed verification; refused");
                return Err(OpenFailure::Refused(Refusal::OriginCertificateInvalid {
                    why,
                }));
            }
            tracing::debug!(proxy = %proxy.id, %target, %error, "TLS with the origin failed");
            return Err(OpenFailure::Dial(DialFailure::target(
                TARGET_TLS_ERROR,
                socks_reply::CONNECTION_REFUSED,
            )));
        }
    };
    // Ready for a WebSocket upgrade; any other request goes as on any connection.
    handshake(proxy, tls, clock, true).await
}

/// HTTP/1.1 on `stream`, its connection task watching the proxy's cutoff.
async fn handshake<S>(
    proxy: &ViewProxy,
    stream: S,
    clock: &dyn Clock,
    upgrades: bool,
) -> Result<SendRequest<CountingBody>, OpenFailure>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = client_http1::Builder::new()
        .preserve_header_case(true)
        .handshake::<_, CountingBody>(TokioIo::new(stream))
        .await
        .map_err(|_| OpenFailure::Dial(DialFailure::proxy("proxy_io_error")))?;
    // Watched before the connection is used, so a cut from here on reaches it.
    let cut = proxy.slot.cutoff.watch(clock);
    if upgrades {
        // A 101 ends this task and hands the stream to the upgrade's relay, which watches
        // the cutoff itself.
        tokio::spawn(async move {
            tokio::select! {
                _ = connection.with_upgrades() => {}
                _ = cut.closed() => {}
            }
        });
    } else {
        tokio::spawn(async move {
            // Errors are the request's. Dropping the connection on a cut closes the
            // socket; a response in flight on it ends with an error, so the client sees
            // it cut short.
            tokio::select! {
                _ = connection => {}
                _ = cut.closed() => {}
            }
        });
    }
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_connections_are_pooled_per_origin_whatever_the_proxy_speaks() {
        let target: TargetAddr = "shop-a.test:443".parse().unwrap();
        let https = "https://shop-a.test:443";
        for protocol in [Protocol::Http, Protocol::Https, Protocol::Socks5] {
            assert_eq!(
                pool_key(true, protocol, &target),
                PoolKey::Target(https.into()),
                "{protocol:?}"
            );
        }
        // Plain http keeps its keys; a SOCKS5 tunnel in clear to the same host and port
        // is never handed to an https request (nor the other way round).
        assert_eq!(pool_key(false, Protocol::Http, &target), PoolKey::Proxy);
        let clear = pool_key(false, Protocol::Socks5, &target);
        assert_eq!(clear, PoolKey::Target("shop-a.test:443".into()));
        assert_ne!(clear, pool_key(true, Protocol::Socks5, &target));
    }
}
