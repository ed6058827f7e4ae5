//! What the router needs from the outbound side: a [`Dialer`] that reaches the target
//! through one proxy, and the [`DialFailure`] that says whom to blame when it cannot
//! (the proxy: count it and try another; the target: every proxy would fail alike; the
//! rules are in [`crate::failure`]).
//! [`crate::outbound::dial`] implements it; routing never opens a socket itself.

pub(crate) use crate::failure::DialFailure;
use crate::snapshot::ViewProxy;

/// How to reach the target through one proxy (a tunnel, or a forwarding connection).
/// A trait rather than a closure so the futures stay `Send` for any borrowed proxy.
pub(crate) trait Dialer: Sync {
    type Output: Send;

    fn dial<'a>(
        &'a self,
        proxy: &'a ViewProxy,
    ) -> impl Future<Output = Result<Self::Output, DialFailure>> + Send + 'a;
}
