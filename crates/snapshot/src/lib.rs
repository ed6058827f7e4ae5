//! proxypool-snapshot: the snapshot protocol, how the controller tells each gateway worker
//! which proxies it may route (and the clients, cooldowns and keys that go with them), in
//! one place.
//!
//! # The protocol in one paragraph
//!
//! A gateway registers a session and long-polls `GET .../snapshot?after_version=V`. The
//! controller's publisher ([`publisher`]) reads what the worker owns from the pool store,
//! decides whether that is new for the session, and answers with a [`SnapshotUpdate`]: the
//! whole [`WorkerSnapshot`] when the gateway holds nothing this controller knows, else a
//! [`SnapshotDelta`] against version `V`. Both sides hold the snapshot as a
//! [`SnapshotContent`] whose [`checksum`] a delta updates in the size of the delta; the
//! gateway's applier ([`applier`]) applies a delta only to exactly its base and only when
//! the result has the announced checksum, else it asks for the whole snapshot (`V = 0`).
//! The gateway acknowledges what it applied and names it in every runtime report. To read
//! only what changed, the store keeps per worker a counter and a change [`journal`].
//!
//! # Module map
//!
//! - [`checksum`]: the digest sum of a snapshot's content ([`snapshot_checksum`]).
//! - [`content`]: [`SnapshotContent`], the content by proxy id; applying a delta to it
//!   (checked whole first) and the delta between two contents.
//! - [`delta`]: the wire messages ([`SnapshotUpdate`], [`SnapshotDelta`], [`LeaseEnd`],
//!   [`ProxyCooldowns`]) and the worker control protocol's version ([`CONTROL_PROTOCOL`]).
//! - [`journal`]: the rules of a worker's change journal ([`Journal`]), which every store
//!   keeps.
//! - [`publisher`]: the controller's decisions: whether a poll must build, what changed,
//!   which version content goes out as, and the per-worker memory that makes those cheap.
//! - [`applier`]: the gateway's decisions: whether an update fits what it holds and how it
//!   reaches the gateway's views ([`ApplyTarget`]).
//!
//! The store's side lives with the port (`proxypool_core::ports::WorkerRuntimeStore`:
//! `snapshot_version`, `snapshot_changes`, `issue_snapshot`, `ack_snapshot`), the message
//! types every store reads and writes with it (`proxypool_core::runtime`:
//! [`SnapshotRef`], [`SnapshotVersion`], [`Holding`], [`SNAPSHOT_JOURNAL_CAP`]), and the
//! stores themselves (the memory pool, on [`Journal`]; Redis's Lua `lib/counters.lua` and
//! `snapshot_changes.lua`). This crate depends on `proxypool-core` only, so the gateway
//! uses it without reaching a store.
//!
//! # Glossary: the numbers that order the protocol
//!
//! Each counter is monotonic where it lives (the checksum and the session id are not
//! orders but names). None orders anything outside its scope: a reader may compare two
//! values only within it.
//!
//! - **Snapshot version** ([`SnapshotRef::version`]). Orders the snapshots issued to *one
//!   worker session*. Advanced by the publisher of whichever controller issues new content
//!   ([`publisher::issue::decide`]: one above the largest of the session's issued version,
//!   its acknowledged version and the caller's), recorded in the store with
//!   `issue_snapshot`, so any controller continues the sequence. Within a session a larger
//!   version was issued later; `0` means "nothing held, send it whole". Not comparable
//!   across sessions (each starts again at 1), and a version alone does not say what
//!   content it is: two controllers racing may issue one version with different contents,
//!   which is why a delta's base is the whole [`SnapshotRef`] (version, epoch, checksum).
//! - **Epoch** ([`SnapshotRef::epoch`], `Assignment::epoch`, the `drain_epoch` of a
//!   draining assignment). The store's one global ownership epoch, advanced by every
//!   assignment and every drain (`OwnershipRepository::assign`, `begin_drain`). A
//!   snapshot's epoch is the one read *before* its content, so a snapshot at epoch `E`
//!   lists no proxy whose drain moved the epoch to `E` or less; a drain is done only when a
//!   report against a snapshot at or after its `drain_epoch` shows the proxy idle. An
//!   assignment's epoch names the lease (renew, drain and ack must name it). It orders
//!   ownership changes store-wide; it says nothing about time or about one worker's
//!   snapshot versions (a new snapshot may keep an old epoch when nothing needed a newer).
//! - **Worker counter** ([`SnapshotVersion::worker`]). Per worker, in the store: moved by
//!   every write that may change what the worker's snapshot lists (its assignments, the
//!   records and cooldowns of proxies it holds, its session, a report with stale entries),
//!   and each move for a proxy names it in the worker's [`journal`]. Equal values mean no
//!   such write happened in between; a moved value only means one *may* have changed the
//!   snapshot. Time alone (a lease, usable-until, cooldown running out) moves nothing, so
//!   the publisher keeps horizons for that ([`publisher::Horizons`]). Not an order of
//!   snapshots; with several shard groups it is read as one by raising every group to the
//!   highest value seen.
//! - **Feedback counter** ([`SnapshotVersion::feedback`]). Store-wide: moved by every new
//!   session feedback (kept per client, carried by every worker's snapshot). Same reading
//!   as the worker counter: only its movement means anything.
//! - **Journal floor** (the memory pool's [`Journal`], Redis's `*floor:<worker>` field).
//!   The highest worker-counter value trimmed from a worker's journal: changes after a
//!   value below it are no longer known, so `snapshot_changes` from there answers "cannot
//!   say" and the publisher reads whole.
//! - **Checksum** ([`SnapshotRef::checksum`], [`snapshot_checksum`]). Not an order: a
//!   digest sum of the content. Equal checksums mean the same content (up to accidents the
//!   128 bits make negligible); the publisher issues a new version only when it changed,
//!   and the applier applies a delta only when the result has the announced one.
//! - **Store generation** (`proxypool_core::store_mark::StoreMark::generation`). Orders the
//!   pool store's incarnations and proves its memory: the controller's store guard advances
//!   it every second and every pool call is checked against the generation and identity
//!   its controller expects, atomically with the call; a store whose generation went
//!   backwards (a restored copy) or whose identity changed refuses every call
//!   (`Unavailable::StoreLost`). So the publisher never compares counters across a loss: a
//!   recovered store starts in a new, empty keyspace (counters and journals at zero, a new
//!   ticket key, whose id is in the checksum, and new sessions). It says nothing about any
//!   one worker's snapshots.
//! - **Lease token** (`proxypool_core::lease::Lease::token`, in a `Fence`). Orders the
//!   terms of the leader lease: it grows every time the lease changes hands. The leader's
//!   singleton loops (ownership among them, which moves epochs and worker counters) write
//!   through a fenced handle that the store refuses after the term ended. The publisher
//!   runs on every controller and is not fenced: its correctness rests on the store's
//!   atomic calls, never on the token.
//! - **Report sequence** (`RuntimeReport::sequence`). Orders one gateway process's runtime
//!   reports: its counter never restarts, not even across the process's sessions. The
//!   store keeps the last accepted one per session and refuses one at or below it, unless
//!   it is a replay (the same sequence and content, answered as the first time). It says
//!   nothing about snapshot versions; a report names the acknowledged [`SnapshotRef`]
//!   separately, and its stale entries and finished drains are judged by that snapshot's
//!   epoch.
//! - **Session id** (`WorkerSession::session_id`). Not a number but the fence of a
//!   worker's control session: a new registration replaces the session and fences the old
//!   one's writes (`Conflict::Fenced`). Snapshot versions, the publisher's memory and the
//!   applier's content all belong to one session id.
//! - **Change signal generation** (the controller's `ChangeSignal::generation`). Local to
//!   one controller process: counts its own changes (a reload of the clients or the policy,
//!   an ownership round). Equal before and after a build means nothing local changed in
//!   between; it means nothing to another controller.
//! - **Gateway view generation and swaps** (the gateway's `SnapshotStore`). Local to one
//!   gateway process: count the views it built and swapped in, so waiters react to a new
//!   view. Unrelated to snapshot versions (a patch changes the version without a swap).

pub mod applier;
pub mod checksum;
pub mod content;
pub mod delta;
pub mod journal;
pub mod publisher;

pub use applier::{Applier, ApplyError, ApplyTarget, Outcome, UpdateKind};
pub use checksum::snapshot_checksum;
pub use content::{ContentError, SnapshotContent};
pub use delta::{CONTROL_PROTOCOL, LeaseEnd, ProxyCooldowns, SnapshotDelta, SnapshotUpdate};
pub use journal::Journal;

// The types the store's port shares with this protocol live in core, beside the port.
#[cfg(doc)]
use proxypool_core::{
    Holding, SNAPSHOT_JOURNAL_CAP, SnapshotRef, SnapshotVersion, control::WorkerSnapshot,
};
