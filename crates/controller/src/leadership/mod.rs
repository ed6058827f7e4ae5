//! Who may run the singleton loops (reconciler, checker, ownership, maintenance).
//!
//! With several controllers on one store only one should fetch from vendors, check
//! proxies and move ownership, or vendor fetches and checks multiply. A [`Leadership`]
//! publishes the current term through a watch channel; each singleton loop runs a round
//! only while it holds a term and parks otherwise. The memory store has exactly one
//! controller, so [`AlwaysLeader`] grants a permanent term. A store-backed fenced lease
//! implements the same trait; the serving paths (control API, snapshots) do not consult it
//! because any controller may serve any worker.

use std::fmt::Debug;
use tokio::sync::watch;

/// A leadership term. Terms grow each time leadership is (re)acquired, so a store write
/// may be fenced with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Term(pub u64);

/// The source of leadership for this controller.
pub trait Leadership: Send + Sync + Debug + 'static {
    /// `Some(term)` while this controller leads; updates when that changes.
    fn watch(&self) -> watch::Receiver<Option<Term>>;
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
