//! Who may run the singleton loops (reconciler, checker, ownership, maintenance).
//!
//! With several controllers on one store only one should fetch from vendors, check
//! proxies and move ownership, or vendor fetches and checks multiply. A [`Leadership`]
//! publishes the current term through a watch channel; each singleton loop runs a round
//! only while it holds a term, drops a round in flight the moment the term ends
//! (`while_leading`), and parks until the next term (`wait_for_term`). The serving
//! paths (control API, snapshots) do not consult it: any controller may serve any worker,
//! because every store operation they make is atomic on its own.
//!
//! - [`AlwaysLeader`]: the memory store has exactly one controller, so a permanent term.
//! - [`LeaseLeadership`] ([`lease`]): a fenced lease in a shared store (Redis), renewed in
//!   the background, given up as soon as it cannot be renewed in time.
//! - [`holder`]: the per-process holder id written into the lease.
//! - `job`: the one scaffold every leader-only loop runs in.

pub mod holder;
pub(crate) mod job;
pub mod lease;

pub use lease::{CONTROLLER_LEASE, LeaseLeadership, LeaseOptions};

use async_trait::async_trait;
use proxypool_core::{ActivityPool, Fence};
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
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

    /// Clean shutdown: stop leading and hand the term over at once (a lease is released,
    /// so a standby need not wait for it to lapse). Call after the loops have stopped.
    async fn resign(&self) {}

    /// Stops leading without handing anything over, as a crash would: a lease is left to
    /// lapse. For [`crate::RunningController::abort`].
    fn abandon(&self) {}
}

/// The store as a leader-only loop sees it in one term: every call fenced with the term's
/// token when the term is a store lease, so a controller that lost the lease (paused past
/// it, say) has its writes refused by the store itself, not only by its own clock.
#[derive(Debug, Clone)]
pub struct TermStore {
    base: Arc<dyn ActivityPool>,
    lease: Option<String>,
}

impl TermStore {
    pub fn new(base: Arc<dyn ActivityPool>, leadership: &dyn Leadership) -> Self {
        TermStore {
            base,
            lease: leadership.lease_name().map(str::to_owned),
        }
    }

    /// The handle for `term`'s rounds.
    pub fn for_term(&self, term: Term) -> Arc<dyn ActivityPool> {
        match &self.lease {
            Some(lease) => self.base.fenced(Fence::new(lease.clone(), term.0)),
            None => self.base.clone(),
        }
    }
}

/// Always the leader, in term 1 (one controller per memory store).
#[derive(Debug)]
pub struct AlwaysLeader {
    sender: watch::Sender<Option<Term>>,
}

impl AlwaysLeader {
    pub fn new() -> Self {
        AlwaysLeader {
            sender: watch::Sender::new(Some(Term(1))),
        }
    }
}

impl Default for AlwaysLeader {
    fn default() -> Self {
        AlwaysLeader::new()
    }
}

impl Leadership for AlwaysLeader {
    fn watch(&self) -> watch::Receiver<Option<Term>> {
        self.sender.subscribe()
    }
}

/// Waits until this controller leads (or `shutdown` fires: then `None`).
pub(crate) async fn wait_for_term(
    leadership: &mut watch::Receiver<Option<Term>>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Term> {
    loop {
        if *shutdown.borrow() {
            return None;
        }
        if let Some(term) = *leadership.borrow_and_update() {
            return Some(term);
        }
        tokio::select! {
            changed = leadership.changed() => if changed.is_err() { return None },
            _ = shutdown.changed() => {}
        }
    }
}

/// Runs one round of a singleton loop while `term` lasts. When the term ends first (lost,
/// lapsed, or replaced by a newer one) the round is dropped where it stands and `None`
/// comes back: a controller that no longer leads must not keep writing on the strength of
/// a term another controller may now hold. Rounds are made of atomic store calls, so
/// dropping one between (or during) calls leaves nothing half done.
pub(crate) async fn while_leading<F: Future>(
    term: Term,
    leadership: &mut watch::Receiver<Option<Term>>,
    round: F,
) -> Option<F::Output> {
    tokio::select! {
        output = round => Some(output),
        // A closed channel means the leadership is gone: as good as lost.
        _ = leadership.wait_for(|current| *current != Some(term)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_round_in_flight_is_dropped_when_the_term_ends() {
        let (sender, mut receiver) = watch::channel(Some(Term(3)));
        let flip = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            sender.send_replace(None);
            sender
        });
        let round = std::future::pending::<()>();
        assert_eq!(while_leading(Term(3), &mut receiver, round).await, None);
        let sender = flip.await.unwrap();

        // A newer term ends the old term's round too.
        sender.send_replace(Some(Term(4)));
        let slow = tokio::time::sleep(Duration::from_secs(60));
        assert_eq!(while_leading(Term(3), &mut receiver, slow).await, None);
        // A round in the current term finishes normally.
        assert_eq!(
            while_leading(Term(4), &mut receiver, async { 7 }).await,
            Some(7)
        );
    }

    #[tokio::test]
    async fn waiting_for_a_term_parks_until_one_comes_or_shutdown() {
        let (leader, mut leadership) = watch::channel(None);
        let (stop, mut shutdown) = watch::channel(false);
        let waiting = tokio::spawn(async move {
            let term = wait_for_term(&mut leadership, &mut shutdown).await;
            (term, leadership, shutdown)
        });
        leader.send_replace(Some(Term(9)));
        let (term, mut leadership, mut shutdown) = waiting.await.unwrap();
        assert_eq!(term, Some(Term(9)));
        leader.send_replace(None);
        stop.send_replace(true);
        assert_eq!(wait_for_term(&mut leadership, &mut shutdown).await, None);
    }
}
