//! The upstream side of a forwarded request: a kept-alive connection through the proxy
//! when one is idle, else a new one (to an HTTP proxy itself, or a SOCKS5 tunnel to the
//! target), tied to the proxy's lease so it closes when the lease goes.

use crate::outbound::dial::{self, DialTimeouts};
use crate::proxies::idle_pool::PoolKey;
use crate::proxies::request_body::CountingBody;
use crate::proxy_addresses::ProxyAddresses;
use crate::routing::dialer::{DialFailure, Dialer};
use crate::snapshot::ViewProxy;
use hyper::client::conn::http1::{self as client_http1, SendRequest};
use hyper_util::rt::TokioIo;
use proxypool_core::{Clock, Protocol};
use proxypool_proto::TargetAddr;
use std::time::Duration;

/// Finds or opens a forwarding connection through one proxy.
pub(super) struct ForwardDialer<'c> {
    pub(super) target: TargetAddr,
    pub(super) target_key: String,
    pub(super) timeouts: DialTimeouts,
    pub(super) addresses: &'c ProxyAddresses,
    pub(super) pool_idle: Duration,
    pub(super) clock: &'c dyn Clock,
}

impl Dialer for ForwardDialer<'_> {
    /// The connection, what it may be pooled for, and whether it came from the pool.
    type Output = (SendRequest<CountingBody>, PoolKey, bool);

    async fn dial(&self, proxy: &ViewProxy) -> Result<Self::Output, DialFailure> {
        let key = match proxy.protocol {
            Protocol::Http | Protocol::Https => PoolKey::Proxy,
            Protocol::Socks5 => PoolKey::Target(self.target_key.clone()),
        };
        if let Some(sender) = pooled(proxy, &key, self.pool_idle).await {
            return Ok((sender, key, true));
        }
        let sender = open(
            proxy,
            &self.target,
            self.timeouts,
            self.addresses,
            self.clock,
        )
        .await?;
        Ok((sender, key, false))
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

/// A new upstream connection: to the HTTP proxy itself, or a SOCKS5 tunnel to the target.
/// It lives until its sender is dropped, the peer closes, or the proxy's lease goes.
pub(super) async fn open(
    proxy: &ViewProxy,
    target: &TargetAddr,
    timeouts: DialTimeouts,
    addresses: &ProxyAddresses,
    clock: &dyn Clock,
) -> Result<SendRequest<CountingBody>, DialFailure> {
    let stream = match proxy.protocol {
        Protocol::Http | Protocol::Https => dial::connect_proxy(proxy, timeouts, addresses).await?,
        Protocol::Socks5 => dial::tunnel(proxy, target, timeouts, addresses).await?,
    };
    let (sender, connection) = client_http1::Builder::new()
        .preserve_header_case(true)
        .handshake::<_, CountingBody>(TokioIo::new(stream))
        .await
        .map_err(|_| DialFailure::proxy("proxy_io_error"))?;
    // Watched before the connection is used, so a cut from here on reaches it.
    let cut = proxy.slot.cutoff.watch(clock);
    tokio::spawn(async move {
        // Errors are the request's. Dropping the connection on a cut closes the socket; a
        // response in flight on it ends with an error, so the client sees it cut short.
        tokio::select! {
            _ = connection => {}
            _ = cut.closed() => {}
        }
    });
    Ok(sender)
}
