//! The controller's tests that assert values of the process's one metrics recorder, which
//! every controller in the process writes to: in the `it` binary the other tests'
//! controllers would add to the counters they read. Here they run in a process of their
//! own, one at a time ([`SERIAL`]).
//!
//! - `snapshot_deltas`: incremental snapshots at 100,000 proxies, as small deltas made from
//!   the store's change journal (counted by how each update was read).
//! - `snapshot_versions`: a waiting snapshot long-poll over the store's snapshot version
//!   (counted by store call).

// The `it` binary's helpers; this binary uses a few of them.
#[allow(dead_code)]
#[path = "../it/common/mod.rs"]
mod common;

mod snapshot_deltas;
mod snapshot_versions;

/// Held by every test here for its whole run: the recorder's counters are theirs alone.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
