//! What the publisher last built for each worker's session, so a waiting long-poll can
//! tell from one counter read that a rebuild would give the same answer.
//!
//! A rebuild reads the session, the worker's records, its draining leases, their cooldowns
//! and the session feedback. Between two builds those reads can only answer differently
//! when (a) a write moved the store's [`SnapshotVersion`] (every controller's writes move
//! it), (b) this controller's local inputs changed (gateway clients, cooldown policy: the
//! change signal's generation), (c) time alone ended something the last build listed (a
//! lease, a usable-until, a hard expiry, a cooldown, a feedback: `content_until_ms`), or
//! (d) the session lapsed (`session_until_ms`: only the session is re-read then, as it is
//! renewed by every report without a write that concerns the snapshot).
//!
//! One entry per worker (a worker has one current session), bounded by
//! [`MAX_REMEMBERED`]; held only to copy in or out, never across an `.await`.

use proxypool_core::{LockExt, SnapshotVersion, UnixMillis, WorkerId};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// Most workers remembered at once; past it an arbitrary entry is forgotten (that worker's
/// next poll rebuilds once).
pub(crate) const MAX_REMEMBERED: usize = 10_000;

/// The inputs and the outcome of one build for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remembered {
    pub(crate) session_id: String,
    /// The store's counters, read before the build's first read.
    pub(crate) version: SnapshotVersion,
    /// The local change signal's generation, read before the counters.
    pub(crate) local: u64,
    /// The earliest instant at which time alone changes what the build's reads answer.
    pub(crate) content_until_ms: UnixMillis,
    /// When the session lapses unless a report renewed it in between.
    pub(crate) session_until_ms: UnixMillis,
    /// The version of the session's latest snapshot (issued, else acknowledged) after the
    /// build: a caller at it has the current snapshot.
    pub(crate) latest_version: u64,
}

/// What a waiting poll may skip, given what it just read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing changed and the caller has the latest snapshot.
    Unchanged,
    /// Nothing changed and the caller has the latest snapshot, but the session's
    /// remembered end passed: re-read the session only.
    SessionDue,
    /// Build (and issue if the content changed).
    Rebuild,
}

#[derive(Debug, Default)]
pub(crate) struct BuildMemo {
    entries: Mutex<HashMap<WorkerId, Remembered>>,
}

impl BuildMemo {
    /// Whether a caller at `after_version` of `session_id` needs a rebuild, given the
    /// counters and the local generation just read and the time now.
    pub(crate) fn verdict(
        &self,
        worker: &WorkerId,
        session_id: &str,
        after_version: u64,
        version: SnapshotVersion,
        local: u64,
        now: UnixMillis,
    ) -> Verdict {
        let entries = self.entries.lock_or_recover();
        let Some(last) = entries.get(worker) else {
            return Verdict::Rebuild;
        };
        let same = last.session_id == session_id
            && last.version == version
            && last.local == local
            && now < last.content_until_ms
            // A caller behind the latest snapshot (a lost answer) gets it again, and one
            // ahead of it holds a version another controller issued: both need a build.
            && last.latest_version == after_version;
        match (same, now < last.session_until_ms) {
            (false, _) => Verdict::Rebuild,
            (true, true) => Verdict::Unchanged,
            (true, false) => Verdict::SessionDue,
        }
    }

    /// Remembers a build (replacing what was remembered for the worker).
    pub(crate) fn remember(&self, worker: &WorkerId, remembered: Remembered) {
        let mut entries = self.entries.lock_or_recover();
        if entries.len() >= MAX_REMEMBERED
            && !entries.contains_key(worker)
            && let Some(any) = entries.keys().next().cloned()
        {
            entries.remove(&any);
        }
        entries.insert(worker.clone(), remembered);
    }

    /// The session was re-read and is still current: it lasts until `until_ms`.
    pub(crate) fn session_renewed(&self, worker: &WorkerId, session_id: &str, until_ms: u64) {
        let mut entries = self.entries.lock_or_recover();
        if let Some(last) = entries.get_mut(worker)
            && last.session_id == session_id
        {
            last.session_until_ms = last.session_until_ms.max(until_ms);
        }
    }

    /// Forgets what was built for the worker (its session is not the remembered one).
    pub(crate) fn forget(&self, worker: &WorkerId) {
        self.entries.lock_or_recover().remove(worker);
    }

    /// Drops the workers not in `live` (their sessions ended).
    pub(crate) fn retain(&self, live: &BTreeSet<WorkerId>) {
        self.entries
            .lock_or_recover()
            .retain(|w, _| live.contains(w));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock_or_recover().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(i: usize) -> WorkerId {
        WorkerId::new(format!("gw-{i}")).unwrap()
    }

    fn built(version: u64) -> Remembered {
        Remembered {
            session_id: "s1".to_owned(),
            version: SnapshotVersion {
                worker: version,
                feedback: 0,
            },
            local: 7,
            content_until_ms: 1_000,
            session_until_ms: 500,
            latest_version: 3,
        }
    }

    #[test]
    fn only_an_unmoved_version_before_both_horizons_skips() {
        let memo = BuildMemo::default();
        let (w, v) = (
            worker(1),
            SnapshotVersion {
                worker: 4,
                feedback: 0,
            },
        );
        assert_eq!(
            memo.verdict(&w, "s1", 3, v, 7, 0),
            Verdict::Rebuild,
            "nothing built"
        );
        memo.remember(&w, built(4));
        assert_eq!(memo.verdict(&w, "s1", 3, v, 7, 499), Verdict::Unchanged);
        assert_eq!(memo.verdict(&w, "s1", 3, v, 7, 500), Verdict::SessionDue);
        assert_eq!(memo.verdict(&w, "s1", 3, v, 7, 1_000), Verdict::Rebuild);
        let moved = SnapshotVersion {
            worker: 5,
            feedback: 0,
        };
        assert_eq!(memo.verdict(&w, "s1", 3, moved, 7, 0), Verdict::Rebuild);
        let feedback = SnapshotVersion {
            worker: 4,
            feedback: 1,
        };
        assert_eq!(memo.verdict(&w, "s1", 3, feedback, 7, 0), Verdict::Rebuild);
        assert_eq!(
            memo.verdict(&w, "s1", 3, v, 8, 0),
            Verdict::Rebuild,
            "local"
        );
        assert_eq!(
            memo.verdict(&w, "s2", 3, v, 7, 0),
            Verdict::Rebuild,
            "session"
        );
        assert_eq!(
            memo.verdict(&w, "s1", 2, v, 7, 0),
            Verdict::Rebuild,
            "behind"
        );
        assert_eq!(
            memo.verdict(&w, "s1", 4, v, 7, 0),
            Verdict::Rebuild,
            "ahead"
        );
        memo.session_renewed(&w, "s1", 800);
        assert_eq!(memo.verdict(&w, "s1", 3, v, 7, 799), Verdict::Unchanged);
        memo.forget(&w);
        assert_eq!(memo.verdict(&w, "s1", 3, v, 7, 0), Verdict::Rebuild);
    }

    #[test]
    fn stays_bounded() {
        let memo = BuildMemo::default();
        for i in 0..MAX_REMEMBERED + 5 {
            memo.remember(&worker(i), built(1));
        }
        assert_eq!(memo.len(), MAX_REMEMBERED);
        let live: BTreeSet<WorkerId> = [worker(MAX_REMEMBERED + 4)].into_iter().collect();
        memo.retain(&live);
        assert_eq!(memo.len(), 1);
    }
}
