//! Dialing through an upstream proxy: TCP connect to the proxy, then its handshake
//! (HTTP `CONNECT` with Basic credentials, or SOCKS5 with username/password), each under
//! its own timeout. Failures are classified so the caller knows whether to blame the proxy
//! (count it, retry elsewhere) or the target (no retry: every proxy would fail alike).

use crate::config::GatewayConfig;
use crate::outbound::peeked_head::PeekedHead;
use crate::refusal::socks_reply;
use crate::routing::dialer::{DialFailure, Dialer};
use crate::snapshot::ViewProxy;
use proxypool_core::Protocol;
use proxypool_proto::socks5::Reply;
use proxypool_proto::{ProtoError, TargetAddr, http_connect, socks5, with_timeout};
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

/// TCP to the proxy itself.
pub(crate) async fn connect_proxy(
    proxy: &ViewProxy,
    timeout: Duration,
) -> Result<TcpStream, DialFailure> {
    let connecting = match &proxy.address {
        TargetAddr::Ip(addr) => tokio::time::timeout(timeout, TcpStream::connect(*addr)).await,
        TargetAddr::Domain(host, port) => {
            tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), *port))).await
        }
    };
    match connecting {
        Err(_) => Err(DialFailure::proxy("proxy_connect_timeout")),
        Ok(Err(error)) if error.kind() == io::ErrorKind::ConnectionRefused => {
            Err(DialFailure::proxy("proxy_connect_refused"))
        }
        Ok(Err(_)) => Err(DialFailure::proxy("proxy_connect_error")),
        Ok(Ok(stream)) => {
            // Small writes (handshakes, interactive tunnels) must not wait for Nagle.
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
    }
}

/// A tunnel to `target` through `proxy`: the returned stream carries the target's bytes.
pub(crate) async fn tunnel(
    proxy: &ViewProxy,
    target: &TargetAddr,
    timeouts: DialTimeouts,
) -> Result<TcpStream, DialFailure> {
    let mut stream = connect_proxy(proxy, timeouts.connect).await?;
    let handshake = async {
        match proxy.protocol {
            Protocol::Http | Protocol::Https => {
                let mut stream = PeekedHead::new(&mut stream);
                http_connect::connect(&mut stream, &target.to_string(), proxy.auth()).await
            }
            Protocol::Socks5 => socks5::connect(&mut stream, target, proxy.auth())
                .await
                .map(|_bound| ()),
        }
    };
    match with_timeout(timeouts.handshake, handshake).await {
        Ok(()) => Ok(stream),
        Err(error) => Err(classify(&error)),
    }
}

/// Dials tunnels to one target.
#[derive(Debug)]
pub(crate) struct TunnelDialer {
    pub target: TargetAddr,
    pub timeouts: DialTimeouts,
}

impl Dialer for TunnelDialer {
    type Output = TcpStream;

    fn dial<'a>(
        &'a self,
        proxy: &'a ViewProxy,
    ) -> impl Future<Output = Result<TcpStream, DialFailure>> + Send + 'a {
        tunnel(proxy, &self.target, self.timeouts)
    }
}

/// Maps a handshake error to who is at fault and what to tell the client.
pub(crate) fn classify(error: &ProtoError) -> DialFailure {
    match error {
        ProtoError::Timeout(_) => DialFailure::proxy("proxy_handshake_timeout"),
        _ if error.is_auth_rejected() => DialFailure::proxy("proxy_auth_rejected"),
        ProtoError::Rejected { status: 502..=504 } => {
            DialFailure::target("target_unreachable", socks_reply::HOST_UNREACHABLE)
        }
        ProtoError::Rejected { status: 403 } => {
            DialFailure::target("target_not_allowed", socks_reply::NOT_ALLOWED)
        }
        ProtoError::Rejected { .. } => DialFailure::proxy("proxy_rejected"),
        ProtoError::SocksRejected { reply } => match reply {
            Reply::HostUnreachable => {
                DialFailure::target("target_unreachable", socks_reply::HOST_UNREACHABLE)
            }
            Reply::NetworkUnreachable => {
                DialFailure::target("target_unreachable", socks_reply::NETWORK_UNREACHABLE)
            }
            Reply::ConnectionRefused => {
                DialFailure::target("target_refused", socks_reply::CONNECTION_REFUSED)
            }
            Reply::TtlExpired => DialFailure::target("target_timeout", socks_reply::TTL_EXPIRED),
            Reply::NotAllowed => {
                DialFailure::target("target_not_allowed", socks_reply::NOT_ALLOWED)
            }
            Reply::AddressTypeNotSupported => DialFailure::target(
                "target_address_not_supported",
                socks_reply::ADDRESS_NOT_SUPPORTED,
            ),
            _ => DialFailure::proxy("proxy_rejected"),
        },
        ProtoError::Malformed { .. } => DialFailure::proxy("proxy_protocol_error"),
        ProtoError::Io(_) | ProtoError::AuthRejected => DialFailure::proxy("proxy_io_error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blames_the_proxy_or_the_target() {
        let refused = classify(&ProtoError::SocksRejected {
            reply: Reply::ConnectionRefused,
        });
        assert!(!refused.proxy_fault);
        assert_eq!(refused.socks, socks_reply::CONNECTION_REFUSED);
        assert!(classify(&ProtoError::Rejected { status: 407 }).proxy_fault);
        assert!(!classify(&ProtoError::Rejected { status: 502 }).proxy_fault);
        assert!(classify(&ProtoError::Timeout(Duration::from_secs(1))).proxy_fault);
        assert!(classify(&ProtoError::AuthRejected).proxy_fault);
    }
}
