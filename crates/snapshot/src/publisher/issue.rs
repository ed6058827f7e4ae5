//! The last decision of a build: which version the content goes out as, and the answer
//! the caller gets. Versions derive from the session's references in the store (the
//! issued one, else the acknowledged one), so any controller continues a session's
//! sequence; a new version is issued only when the content (its checksum) differs from
//! the latest, or a drain needs the worker to confirm a newer ownership epoch.

use super::Issued;
use crate::delta::{SnapshotDelta, SnapshotUpdate};
use proxypool_core::{SnapshotRef, UnixMillis, WorkerId, WorkerSession};

/// What a build comes to, given the session as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issue {
    /// The session's latest snapshot has this content and the caller holds it (or a newer
    /// one): nothing to serve.
    Current(SnapshotRef),
    /// The session's latest snapshot has this content but the caller missed it (a lost
    /// answer): serve it again, unchanged.
    Again(SnapshotRef),
    /// A new version: record it in the store as issued (`issue_snapshot`), then serve it.
    New(SnapshotRef),
}

impl Issue {
    /// The reference the content is at once the decision is carried out.
    pub fn reference(&self) -> &SnapshotRef {
        match self {
            Issue::Current(r) | Issue::Again(r) | Issue::New(r) => r,
        }
    }
}

/// Decides how content with `checksum`, which needs an epoch of at least `needed_epoch`
/// (its draining leases' drain epochs) and was read at ownership epoch `epoch`, goes out
/// to a caller at `after_version` of `session`.
pub fn decide(
    session: &WorkerSession,
    after_version: u64,
    checksum: String,
    needed_epoch: u64,
    epoch: u64,
) -> Issue {
    let latest = session
        .issued_snapshot
        .clone()
        .or_else(|| session.acked_snapshot.clone());
    match latest {
        Some(latest) if latest.checksum == checksum && latest.epoch >= needed_epoch => {
            if latest.version <= after_version {
                Issue::Current(latest)
            } else {
                Issue::Again(latest)
            }
        }
        latest => {
            // Above everything either side has seen, so a version never names two contents.
            let floor = [
                latest.map_or(0, |l| l.version),
                session.acked_snapshot.as_ref().map_or(0, |a| a.version),
                after_version,
            ]
            .into_iter()
            .max()
            .unwrap_or(0);
            Issue::New(SnapshotRef {
                version: floor + 1,
                epoch,
                checksum,
            })
        }
    }
}

/// The version of the session's latest snapshot: the issued one, else the acknowledged.
pub fn latest_version_of(session: &WorkerSession) -> u64 {
    session
        .issued_snapshot
        .as_ref()
        .or(session.acked_snapshot.as_ref())
        .map_or(0, |r| r.version)
}

/// The answer for `issued` (its content already at its new reference): `delta` when there
/// is one against what the caller holds, else the whole snapshot.
pub fn answer(
    worker: &WorkerId,
    issued: &Issued,
    delta: Option<SnapshotDelta>,
    now: UnixMillis,
    max_staleness_ms: u64,
) -> SnapshotUpdate {
    match delta {
        Some(mut delta) => {
            delta.reference = issued.content.reference().clone();
            delta.generated_at_ms = now;
            delta.max_staleness_ms = max_staleness_ms;
            SnapshotUpdate::Delta(Box::new(delta))
        }
        None => SnapshotUpdate::Full(Box::new(issued.content.to_snapshot(
            worker,
            now,
            max_staleness_ms,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(version: u64, epoch: u64, checksum: &str) -> SnapshotRef {
        SnapshotRef {
            version,
            epoch,
            checksum: checksum.to_owned(),
        }
    }

    fn session(issued: Option<SnapshotRef>, acked: Option<SnapshotRef>) -> WorkerSession {
        WorkerSession {
            worker: WorkerId::new("gw-1").unwrap(),
            session_id: "s1".to_owned(),
            opened_at_ms: 0,
            expires_at_ms: 1_000,
            issued_snapshot: issued,
            acked_snapshot: acked,
            last_report_sequence: None,
        }
    }

    #[test]
    fn the_same_content_keeps_its_version() {
        let s = session(Some(reference(4, 2, "aa")), Some(reference(3, 2, "bb")));
        assert_eq!(
            decide(&s, 4, "aa".into(), 0, 9),
            Issue::Current(reference(4, 2, "aa"))
        );
        assert_eq!(
            decide(&s, 3, "aa".into(), 2, 9),
            Issue::Again(reference(4, 2, "aa")),
            "a caller that missed the answer gets it again"
        );
        let acked_only = session(None, Some(reference(3, 2, "bb")));
        assert_eq!(
            decide(&acked_only, 3, "bb".into(), 0, 9),
            Issue::Current(reference(3, 2, "bb"))
        );
    }

    #[test]
    fn new_content_or_a_newer_drain_epoch_is_a_new_version_above_all_seen() {
        let s = session(Some(reference(4, 2, "aa")), Some(reference(3, 2, "bb")));
        assert_eq!(
            decide(&s, 4, "cc".into(), 0, 9),
            Issue::New(reference(5, 9, "cc"))
        );
        assert_eq!(
            decide(&s, 4, "aa".into(), 3, 9),
            Issue::New(reference(5, 9, "aa")),
            "a drain at epoch 3 needs a snapshot at epoch 3 or later"
        );
        assert_eq!(
            decide(&s, 7, "cc".into(), 0, 9),
            Issue::New(reference(8, 9, "cc")),
            "a caller ahead (another controller's version) is passed too"
        );
        let fresh = session(None, None);
        assert_eq!(
            decide(&fresh, 0, "cc".into(), 0, 1),
            Issue::New(reference(1, 1, "cc"))
        );
        assert_eq!(latest_version_of(&s), 4);
        assert_eq!(
            latest_version_of(&session(None, Some(reference(3, 2, "bb")))),
            3
        );
        assert_eq!(latest_version_of(&fresh), 0);
    }
}
