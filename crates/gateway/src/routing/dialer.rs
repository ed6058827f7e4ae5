//! What the router needs from the outbound side: a [`Dialer`] that reaches the target
//! through one proxy, and the [`DialFailure`] that says whom to blame when it cannot
//! (the proxy: count it and try another; the target: every proxy would fail alike).
//! [`crate::outbound::dial`] implements it; routing never opens a socket itself.

use crate::refusal::socks_reply;
use crate::snapshot::ViewProxy;

/// Why a dial failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DialFailure {
    /// Metric label and 502 reason.
    pub reason: &'static str,
    /// The SOCKS5 reply for the client.
    pub socks: u8,
    /// The proxy is to blame (count the failure, try another proxy). When false the
    /// target is (unreachable, refused): retrying elsewhere would not help.
    pub proxy_fault: bool,
}

impl DialFailure {
    pub(crate) const fn proxy(reason: &'static str) -> Self {
        Self {
            reason,
            socks: socks_reply::GENERAL_FAILURE,
            proxy_fault: true,
        }
    }

    /// The upstream proxy failed after accepting the connection.
    pub(crate) const fn upstream(reason: &'static str) -> Self {
        Self::proxy(reason)
    }

    pub(crate) const fn target(reason: &'static str, socks: u8) -> Self {
        Self {
            reason,
            socks,
            proxy_fault: false,
        }
    }
}

/// How to reach the target through one proxy (a tunnel, or a forwarding connection).
/// A trait rather than a closure so the futures stay `Send` for any borrowed proxy.
pub(crate) trait Dialer: Sync {
    type Output: Send;

    fn dial<'a>(
        &'a self,
        proxy: &'a ViewProxy,
    ) -> impl Future<Output = Result<Self::Output, DialFailure>> + Send + 'a;
}
