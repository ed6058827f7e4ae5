//! [`PublisherState`]: what a controller remembers per worker between polls (the build
//! memo, the issued contents, the latest snapshot served), and the decisions a poll takes
//! from it before and after its reads. Every lock is held only to copy in or out, never
//! across the driver's `.await`s.

use super::issue::{Issue, latest_version_of};
use super::{BuildMemo, Issued, IssuedContents, Remembered, Verdict};
use proxypool_core::{LockExt, SnapshotVersion, UnixMillis, WorkerId, WorkerSession};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// What one poll read first: the caller's position and the counters its reads start from.
#[derive(Debug, Clone, Copy)]
pub struct PollStart<'a> {
    pub worker: &'a WorkerId,
    pub session_id: &'a str,
    pub after_version: u64,
    /// The store's counters, read before anything the build reads.
    pub counters: SnapshotVersion,
    /// The controller's change signal generation, read before the counters.
    pub local: u64,
    /// The time, read after the counters.
    pub now: UnixMillis,
}

/// What a poll does after its first reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Nothing the last build read can have changed: answer "nothing new" (or wait).
    Unchanged,
    /// Nothing changed but the session's remembered end passed: read the session only,
    /// then [`PublisherState::session_read`].
    SessionDue,
    /// Build: [`PublisherState::base`] says from what.
    Build,
}

/// Where a build starts.
#[derive(Debug)]
pub enum Base {
    /// Read what changed since this content (the caller holds it), as a delta.
    Changes(Issued),
    /// Read everything; send the difference to this content when there is one (the caller
    /// holds it), else the whole snapshot.
    Whole(Option<Issued>),
}

/// The latest snapshot served to a worker's session, and when it was built.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Served {
    session_id: String,
    version: u64,
    at_ms: UnixMillis,
}

/// The publisher's memory of every worker (see the module doc).
#[derive(Debug, Default)]
pub struct PublisherState {
    memo: BuildMemo,
    issued: IssuedContents,
    served: Mutex<HashMap<WorkerId, Served>>,
}

impl PublisherState {
    /// Whether the poll must build (see [`Plan`]).
    pub fn plan(&self, start: &PollStart<'_>) -> Plan {
        match self.memo.verdict(
            start.worker,
            start.session_id,
            start.after_version,
            start.counters,
            start.local,
            start.now,
        ) {
            Verdict::Unchanged => Plan::Unchanged,
            Verdict::SessionDue => Plan::SessionDue,
            Verdict::Rebuild => Plan::Build,
        }
    }

    /// After [`Plan::SessionDue`]: the session as the store has it (still the caller's).
    /// `true` when the caller still holds the latest snapshot: nothing to serve, and the
    /// session is remembered until its new end; `false`: build.
    pub fn session_read(&self, start: &PollStart<'_>, session: &WorkerSession) -> bool {
        let current = latest_version_of(session) == start.after_version;
        if current {
            self.memo
                .session_renewed(start.worker, start.session_id, session.expires_at_ms);
        }
        current
    }

    /// The session is gone (or could not be read): forget everything about the worker.
    pub fn session_lost(&self, worker: &WorkerId) {
        self.memo.forget(worker);
        self.issued.forget(worker);
    }

    /// Where the build starts: from what changed when this controller issued the content
    /// the caller holds and a whole read is not due (`full_read_interval_ms` since the
    /// last), else a whole read. A caller at version 0 (nothing held, or starting over)
    /// gets the snapshot whole. Takes the issued content out until [`Self::settle`].
    pub fn base(&self, start: &PollStart<'_>, full_read_interval_ms: u64) -> Base {
        let issued = match start.after_version {
            0 => None,
            v => self.issued.take(start.worker, start.session_id, v),
        };
        match issued {
            Some(issued) if !issued.read_whole_due(start.now, full_read_interval_ms) => {
                Base::Changes(issued)
            }
            issued => Base::Whole(issued),
        }
    }

    /// A build failed: what was taken out is gone, and the next poll starts over from the
    /// store.
    pub fn build_failed(&self, worker: &WorkerId) {
        self.memo.forget(worker);
    }

    /// Records a finished build: `issued` (its content at the decision's reference) is the
    /// base of the next delta, the memo remembers what the build read, and a snapshot
    /// served (any decision but [`Issue::Current`]) is remembered with its build time.
    pub fn settle(
        &self,
        start: &PollStart<'_>,
        session: &WorkerSession,
        decision: &Issue,
        issued: Issued,
    ) {
        let version = decision.reference().version;
        self.memo.remember(
            start.worker,
            Remembered {
                session_id: start.session_id.to_owned(),
                version: start.counters,
                local: start.local,
                content_until_ms: issued.content_until(),
                session_until_ms: session.expires_at_ms,
                latest_version: version,
            },
        );
        self.issued.put(start.worker, issued);
        if !matches!(decision, Issue::Current(_)) {
            self.remember_served(start.worker, start.session_id, version, start.now);
        }
    }

    /// Remembers a served snapshot; serving the same version again keeps its build time.
    fn remember_served(&self, worker: &WorkerId, session_id: &str, version: u64, now: UnixMillis) {
        let mut served = self.served.lock_or_recover();
        let same = served
            .get(worker)
            .is_some_and(|s| s.session_id == session_id && s.version == version);
        if !same {
            served.insert(
                worker.clone(),
                Served {
                    session_id: session_id.to_owned(),
                    version,
                    at_ms: now,
                },
            );
        }
    }

    /// When this controller built version `version` of the session's snapshot (`None`
    /// when it did not: another controller did, or it was not the latest served).
    pub fn built_at(
        &self,
        worker: &WorkerId,
        session_id: &str,
        version: u64,
    ) -> Option<UnixMillis> {
        self.served
            .lock_or_recover()
            .get(worker)
            .filter(|s| s.session_id == session_id && s.version == version)
            .map(|s| s.at_ms)
    }

    /// Drops what is remembered for workers not in `live` (their sessions ended).
    pub fn retain(&self, live: &BTreeSet<WorkerId>) {
        self.served
            .lock_or_recover()
            .retain(|w, _| live.contains(w));
        self.memo.retain(live);
        self.issued.retain(live);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::SnapshotContent;
    use crate::publisher::Horizons;
    use proxypool_core::SnapshotRef;
    use proxypool_core::control::WorkerSnapshot;
    use std::sync::Arc;

    fn worker() -> WorkerId {
        WorkerId::new("gw-1").unwrap()
    }

    fn reference(version: u64) -> SnapshotRef {
        SnapshotRef {
            version,
            epoch: 1,
            checksum: format!("{version:032x}"),
        }
    }

    fn session(issued: u64, expires_at_ms: UnixMillis) -> WorkerSession {
        WorkerSession {
            worker: worker(),
            session_id: "s1".to_owned(),
            opened_at_ms: 0,
            expires_at_ms,
            issued_snapshot: Some(reference(issued)),
            acked_snapshot: None,
            last_report_sequence: None,
        }
    }

    /// Empty content read whole at `read_at`, as a build would hand it back.
    fn issued(read_at: UnixMillis) -> Issued {
        let snapshot = WorkerSnapshot {
            worker: worker(),
            session_id: "s1".to_owned(),
            reference: reference(0),
            generated_at_ms: 0,
            max_staleness_ms: 0,
            proxies: Vec::new(),
            clients: Vec::new(),
            held: Vec::new(),
            advisories: Default::default(),
            ticket_key: None,
            upstream_tls: Vec::new(),
        };
        Issued {
            content: SnapshotContent::of(&snapshot).unwrap(),
            counter: 4,
            feedback: 0,
            clients: Arc::new(Vec::new()),
            horizons: Horizons::default(),
            drain_epochs: HashMap::new(),
            read_whole_at_ms: read_at,
        }
    }

    fn start<'a>(w: &'a WorkerId, after: u64, counter: u64, now: UnixMillis) -> PollStart<'a> {
        PollStart {
            worker: w,
            session_id: "s1",
            after_version: after,
            counters: SnapshotVersion {
                worker: counter,
                feedback: 0,
            },
            local: 7,
            now,
        }
    }

    /// Settles a build of version `version` decided as `decision`.
    fn settle(state: &PublisherState, at: &PollStart<'_>, decision: Issue, expires: UnixMillis) {
        let mut content = issued(at.now);
        content.content.set_reference(decision.reference().clone());
        state.settle(
            at,
            &session(decision.reference().version, expires),
            &decision,
            content,
        );
    }

    #[test]
    fn a_build_starts_from_changes_only_on_the_content_it_issued_the_caller() {
        let state = PublisherState::default();
        let w = worker();
        assert!(matches!(
            state.base(&start(&w, 0, 4, 0), 1_000),
            Base::Whole(None)
        ));
        settle(&state, &start(&w, 0, 4, 0), Issue::New(reference(3)), 500);
        assert!(
            matches!(state.base(&start(&w, 2, 4, 10), 1_000), Base::Whole(None)),
            "behind"
        );
        assert!(matches!(
            state.base(&start(&w, 3, 4, 10), 1_000),
            Base::Changes(_)
        ));
        assert!(
            matches!(state.base(&start(&w, 3, 4, 10), 1_000), Base::Whole(None)),
            "taken out while the first build works on it"
        );
        settle(&state, &start(&w, 0, 4, 0), Issue::New(reference(3)), 500);
        assert!(
            matches!(
                state.base(&start(&w, 3, 4, 1_000), 1_000),
                Base::Whole(Some(_))
            ),
            "a whole read is due, still sent as the difference"
        );
        assert!(
            matches!(state.base(&start(&w, 0, 4, 10), 1_000), Base::Whole(None)),
            "start over"
        );
    }

    #[test]
    fn a_poll_skips_while_nothing_it_read_can_have_changed() {
        let state = PublisherState::default();
        let w = worker();
        assert_eq!(
            state.plan(&start(&w, 3, 4, 0)),
            Plan::Build,
            "nothing built"
        );
        settle(&state, &start(&w, 0, 4, 0), Issue::New(reference(3)), 500);
        assert_eq!(state.plan(&start(&w, 3, 4, 499)), Plan::Unchanged);
        assert_eq!(
            state.plan(&start(&w, 3, 5, 10)),
            Plan::Build,
            "the counter moved"
        );
        assert_eq!(state.plan(&start(&w, 3, 4, 500)), Plan::SessionDue);
        // Renewed by a report and nobody issued since: skip again until the new end.
        assert!(state.session_read(&start(&w, 3, 4, 500), &session(3, 900)));
        assert_eq!(state.plan(&start(&w, 3, 4, 899)), Plan::Unchanged);
        // Another controller issued version 4 meanwhile: build.
        assert!(!state.session_read(&start(&w, 3, 4, 900), &session(4, 1_500)));
        state.session_lost(&w);
        assert_eq!(state.plan(&start(&w, 3, 4, 10)), Plan::Build);
        assert!(matches!(
            state.base(&start(&w, 3, 4, 10), 1_000),
            Base::Whole(None)
        ));
    }

    #[test]
    fn only_a_served_snapshot_has_a_build_time_and_serving_it_again_keeps_it() {
        let state = PublisherState::default();
        let w = worker();
        settle(&state, &start(&w, 0, 4, 100), Issue::New(reference(3)), 500);
        assert_eq!(state.built_at(&w, "s1", 3), Some(100));
        settle(
            &state,
            &start(&w, 2, 4, 200),
            Issue::Again(reference(3)),
            500,
        );
        assert_eq!(
            state.built_at(&w, "s1", 3),
            Some(100),
            "the same snapshot again"
        );
        settle(
            &state,
            &start(&w, 3, 4, 300),
            Issue::Current(reference(3)),
            500,
        );
        assert_eq!(state.built_at(&w, "s1", 3), Some(100));
        settle(&state, &start(&w, 3, 5, 400), Issue::New(reference(4)), 500);
        assert_eq!(state.built_at(&w, "s1", 3), None, "not the latest served");
        assert_eq!(state.built_at(&w, "s2", 4), None, "another session");
        state.retain(&BTreeSet::new());
        assert_eq!(state.built_at(&w, "s1", 4), None);
    }
}
