//! [`Term`], a leadership term, and [`Leadership`], the source of terms a controller
//! watches.

use async_trait::async_trait;
use std::fmt::Debug;
use tokio::sync::watch;

/// A leadership term. Terms grow each time leadership is (re)acquired, so a store write
/// may be fenced with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Term(pub u64);

/// The source of leadership for this controller.
#[async_trait]
pub trait Leadership: Send + Sync + Debug + 'static {
    /// `Some(term)` while this controller leads; updates when that changes.
    fn watch(&self) -> watch::Receiver<Option<Term>>;

    /// The store lease whose token a term is, so the leader's writes can be fenced with
    /// it; `None` when nothing can contest the term (one controller per memory store).
    fn lease_name(&self) -> Option<&str> {
        None
    }

    /// This controller's holder id in that lease (a fence names it as well as the token).
    fn lease_holder(&self) -> Option<&str> {
        None
    }

    /// Clean shutdown: stop leading and hand the term over at once (a lease is released,
    /// so a standby need not wait for it to lapse). Call after the loops have stopped.
    async fn resign(&self) {}

    /// Stops leading without handing anything over, as a crash would: a lease is left to
    /// lapse. For [`crate::RunningController::abort`].
    fn abandon(&self) {}
}
