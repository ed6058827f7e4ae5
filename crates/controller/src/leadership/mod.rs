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
//! - `term`: [`Term`] and the [`Leadership`] trait every source of terms implements.
//! - `rounds`: how a loop waits for a term and drops its round when the term ends.
//! - `term_store`: [`TermStore`], the store fenced with the current term.
//! - `always`: [`AlwaysLeader`]: the memory store has exactly one controller, so a
//!   permanent term.
//! - [`LeaseLeadership`] ([`lease`]): a fenced lease in a shared store (Redis), renewed in
//!   the background, given up as soon as it cannot be renewed in time.
//! - [`holder`]: the per-process holder id written into the lease.
//! - `job`: the one scaffold every leader-only loop runs in.

mod always;
pub mod holder;
pub(crate) mod job;
pub mod lease;
mod rounds;
mod term;
mod term_store;

pub use always::AlwaysLeader;
pub use lease::{CONTROLLER_LEASE, LeaseLeadership, LeaseOptions};
pub use term::{Leadership, Term};
pub use term_store::TermStore;
