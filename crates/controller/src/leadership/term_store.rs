//! [`TermStore`]: the store as a leader-only loop sees it in one term.

use super::term::{Leadership, Term};
use proxypool_core::{ActivityPool, Fence};
use std::sync::Arc;

/// The store as a leader-only loop sees it in one term: every call fenced with the term's
/// holder and token when the term is a store lease, so a controller that lost the lease
/// (paused past it, say) has its writes refused by the store itself, not only by its own
/// clock.
#[derive(Debug, Clone)]
pub struct TermStore {
    base: Arc<dyn ActivityPool>,
    /// (lease name, holder) when terms are store leases.
    lease: Option<(String, String)>,
}

impl TermStore {
    pub fn new(base: Arc<dyn ActivityPool>, leadership: &dyn Leadership) -> Self {
        let lease = leadership
            .lease_name()
            .zip(leadership.lease_holder())
            .map(|(name, holder)| (name.to_owned(), holder.to_owned()));
        TermStore { base, lease }
    }

    /// The handle for `term`'s rounds.
    pub fn for_term(&self, term: Term) -> Arc<dyn ActivityPool> {
        match &self.lease {
            Some((lease, holder)) => self.base.fenced(Fence::new(lease, holder, term.0)),
            None => self.base.clone(),
        }
    }
}
