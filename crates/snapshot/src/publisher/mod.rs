//! The publisher: the controller's side of the protocol, as decisions and per-worker state
//! that a driver (`proxypool-controller`'s `snapshot` module) feeds with what it read from
//! the store and acts on. Nothing here does I/O or waits.
//!
//! One poll of a worker's session goes (the per-worker memory is a [`PublisherState`]):
//!
//! 1. Read the change signal's generation, the store's [`SnapshotVersion`] and the time
//!    ([`PollStart`]), then [`PublisherState::plan`]: nothing can have changed
//!    ([`Plan::Unchanged`]), only the session needs a look ([`Plan::SessionDue`], then
//!    [`PublisherState::session_read`]), or build.
//! 2. [`PublisherState::base`]: when this controller issued the content the caller holds
//!    and a whole read is not due, read only what changed
//!    (`WorkerRuntimeStore::snapshot_changes` from [`Issued::counter`], plus the proxies
//!    whose [`Horizons`] passed) and turn it into a delta ([`add_proxies`],
//!    [`add_cooldowns`], [`add_inputs`], [`Issued::advance`]). Otherwise read everything
//!    ([`WholeRead::into_issued`]) and, when the caller's content is known, send the
//!    difference ([`SnapshotContent::delta_to`]).
//! 3. [`issue::decide`] which version the content goes out as; the driver records a new one
//!    in the store (`issue_snapshot`), answers with [`issue::answer`] and hands the content
//!    back ([`PublisherState::settle`]); a build that failed calls
//!    [`PublisherState::build_failed`].
//!
//! [`SnapshotVersion`]: proxypool_core::SnapshotVersion
//! [`SnapshotContent::delta_to`]: crate::SnapshotContent::delta_to

mod changes;
pub mod issue;
mod issued;
mod memo;
mod state;
mod whole;

pub use changes::{Inputs, add_cooldowns, add_inputs, add_proxies};
pub use issue::Issue;
pub(crate) use issued::IssuedContents;
pub use issued::{Horizons, Issued};
pub(crate) use memo::{BuildMemo, Remembered, Verdict};
pub use state::{Base, Plan, PollStart, PublisherState};
pub use whole::{WholeRead, listed_ids};
