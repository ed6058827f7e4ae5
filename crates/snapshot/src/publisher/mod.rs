//! The publisher: the controller's side of the protocol, as decisions and per-worker state
//! that a driver (`proxypool-controller`'s `snapshot` module) feeds with what it read from
//! the store and acts on. Nothing here does I/O or waits.
//!
//! One poll of a worker's session goes:
//!
//! 1. Read the change signal's generation and the store's [`SnapshotVersion`], then ask the
//!    [`BuildMemo`] for a [`Verdict`]: nothing can have changed ([`Verdict::Unchanged`]),
//!    only the session needs a look ([`Verdict::SessionDue`]), or build.
//! 2. Take the content this controller last issued to the session out of the
//!    [`IssuedContents`] when the caller holds exactly it. With it, and a whole read not
//!    yet due ([`Issued::read_whole_due`]), read only what changed
//!    (`WorkerRuntimeStore::snapshot_changes` from [`Issued::counter`], plus the proxies
//!    whose [`Horizons`] passed) and turn it into a delta ([`add_proxies`],
//!    [`add_cooldowns`], [`add_inputs`], [`Issued::advance`]). Otherwise read everything
//!    ([`WholeRead::into_issued`]) and, when the caller's content is known, send the
//!    difference ([`SnapshotContent::delta_to`]).
//! 3. [`issue::decide`] which version the content goes out as; the driver records a new one
//!    in the store (`issue_snapshot`), answers with [`issue::answer`], remembers the build
//!    in the memo and puts the content back.
//!
//! [`SnapshotVersion`]: proxypool_core::SnapshotVersion
//! [`SnapshotContent::delta_to`]: crate::SnapshotContent::delta_to

mod changes;
pub mod issue;
mod issued;
mod memo;
mod whole;

pub use changes::{Inputs, add_cooldowns, add_inputs, add_proxies};
pub use issue::Issue;
pub use issued::{Horizons, Issued, IssuedContents, MAX_ISSUED};
pub use memo::{BuildMemo, MAX_REMEMBERED, Remembered, Verdict};
pub use whole::{WholeRead, listed_ids};
