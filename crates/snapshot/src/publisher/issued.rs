//! The content the publisher last issued to each worker's session, kept so the next
//! change can go out as a delta that costs what changed, not what is listed.
//!
//! Each entry holds the content at the issued version, the store's worker counter it
//! reflects (changes after it are read from the store's journal), and per listed or held
//! proxy the earliest time at which time alone changes it (a lease, usable-until or hard
//! expiry, a cooldown forgotten), so those proxies are read again when it passes.
//!
//! An entry is taken out while a poll works on it and put back after, so no lock is held
//! across an `.await`; a second poll of the same worker meanwhile finds none and rebuilds
//! whole. Bounded by [`MAX_ISSUED`] workers.

use crate::content::SnapshotContent;
use crate::delta::SnapshotDelta;
use proxypool_core::control::GatewayClient;
use proxypool_core::{LockExt, ProxyId, SnapshotVersion, UnixMillis, WorkerId};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// Most workers whose issued content is kept; past it an arbitrary one is dropped (its
/// next change goes out whole).
pub(crate) const MAX_ISSUED: usize = 1_024;

/// What was issued to one session.
#[derive(Debug)]
pub struct Issued {
    pub content: SnapshotContent,
    /// The store's worker counter the content reflects.
    pub counter: u64,
    /// The store's session-feedback counter the content reflects.
    pub feedback: u64,
    /// The clients list it was built from (a reload swaps the `Arc`).
    pub clients: Arc<Vec<GatewayClient>>,
    pub horizons: Horizons,
    /// The drain epoch of each held (draining) proxy: a snapshot must be at an epoch at
    /// least the largest of them.
    pub drain_epochs: HashMap<ProxyId, u64>,
    /// When the content was last read whole from the store.
    pub read_whole_at_ms: UnixMillis,
}

impl Issued {
    /// The ownership epoch a snapshot of this content must be at, at least.
    pub fn needed_epoch(&self) -> u64 {
        self.drain_epochs.values().copied().max().unwrap_or(0)
    }

    /// Whether the next build must read the snapshot whole anyway: the last whole read is
    /// `interval_ms` old (a bound on what a missed journal entry could cost).
    pub fn read_whole_due(&self, now: UnixMillis, interval_ms: u64) -> bool {
        now.saturating_sub(self.read_whole_at_ms) >= interval_ms
    }

    /// The earliest instant at which time alone changes this content: a listed or held
    /// proxy's horizon or a session feedback's expiry.
    pub fn content_until(&self) -> UnixMillis {
        let feedback_until = self
            .content
            .session_feedback()
            .iter()
            .map(|f| f.expires_at_ms)
            .min()
            .unwrap_or(UnixMillis::MAX);
        self.horizons.earliest().min(feedback_until)
    }

    /// Whether the session feedback must be read again: its counter moved, the clients
    /// changed (the feedback served is theirs), or some of it expired.
    pub fn feedback_due(
        &self,
        counters: SnapshotVersion,
        clients_changed: bool,
        now: UnixMillis,
    ) -> bool {
        counters.feedback != self.feedback
            || clients_changed
            || self
                .content
                .session_feedback()
                .iter()
                .any(|f| f.expires_at_ms <= now)
    }

    /// This content with `delta` applied, at the store's `counters` and built from
    /// `clients`; `None` when the delta does not fit it or the result lists more than
    /// `max_proxies` (cannot happen from a consistent store, but never serve a guess:
    /// read whole).
    pub fn advance(
        mut self,
        delta: &SnapshotDelta,
        counters: SnapshotVersion,
        clients: Arc<Vec<GatewayClient>>,
        max_proxies: usize,
    ) -> Option<Issued> {
        self.counter = counters.worker;
        self.feedback = counters.feedback;
        self.clients = clients;
        self.content.apply_unchecked(delta).ok()?;
        let within =
            self.content.proxy_count() <= max_proxies && self.content.held_count() <= max_proxies;
        within.then_some(self)
    }
}

/// Per proxy, the earliest instant at which time alone changes its place in a snapshot.
#[derive(Debug, Default, Clone)]
pub struct Horizons {
    by_time: BTreeSet<(UnixMillis, ProxyId)>,
    of: HashMap<ProxyId, UnixMillis>,
}

impl Horizons {
    pub fn set(&mut self, id: &ProxyId, at: UnixMillis) {
        if let Some(old) = self.of.insert(id.clone(), at) {
            self.by_time.remove(&(old, id.clone()));
        }
        self.by_time.insert((at, id.clone()));
    }

    pub fn remove(&mut self, id: &ProxyId) {
        if let Some(old) = self.of.remove(id) {
            self.by_time.remove(&(old, id.clone()));
        }
    }

    /// The proxies whose horizon is at or before `now`.
    pub fn due(&self, now: UnixMillis) -> Vec<ProxyId> {
        self.by_time
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, id)| id.clone())
            .collect()
    }

    pub fn earliest(&self) -> UnixMillis {
        self.by_time.first().map_or(UnixMillis::MAX, |(at, _)| *at)
    }
}

#[derive(Debug, Default)]
pub(crate) struct IssuedContents {
    entries: Mutex<HashMap<WorkerId, Issued>>,
}

impl IssuedContents {
    /// Takes the worker's entry out when it is for `session_id` at `version` (what the
    /// caller holds); otherwise leaves everything as it is.
    pub(crate) fn take(&self, worker: &WorkerId, session_id: &str, version: u64) -> Option<Issued> {
        let mut entries = self.entries.lock_or_recover();
        let fits = entries.get(worker).is_some_and(|issued| {
            issued.content.session_id() == session_id
                && issued.content.reference().version == version
        });
        if fits { entries.remove(worker) } else { None }
    }

    pub(crate) fn put(&self, worker: &WorkerId, issued: Issued) {
        let mut entries = self.entries.lock_or_recover();
        if entries.len() >= MAX_ISSUED
            && !entries.contains_key(worker)
            && let Some(any) = entries.keys().next().cloned()
        {
            entries.remove(&any);
        }
        entries.insert(worker.clone(), issued);
    }

    pub(crate) fn forget(&self, worker: &WorkerId) {
        self.entries.lock_or_recover().remove(worker);
    }

    /// Drops the workers not in `live` (their sessions ended).
    pub(crate) fn retain(&self, live: &BTreeSet<WorkerId>) {
        self.entries
            .lock_or_recover()
            .retain(|w, _| live.contains(w));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::control::{Advisories, WorkerSnapshot};
    use proxypool_core::{ClientId, Domain, SessionFeedback, SnapshotRef, Verdict};

    fn id(i: u32) -> ProxyId {
        ProxyId::new(format!("{i:032x}")).unwrap()
    }

    #[test]
    fn horizons_come_due_in_time_order_and_move() {
        let mut h = Horizons::default();
        h.set(&id(1), 300);
        h.set(&id(2), 100);
        h.set(&id(3), 200);
        assert_eq!(h.earliest(), 100);
        assert_eq!(h.due(200), vec![id(2), id(3)]);
        h.set(&id(2), 400);
        assert_eq!(h.due(200), vec![id(3)]);
        h.remove(&id(3));
        assert_eq!(h.due(350), vec![id(1)]);
        assert_eq!(h.earliest(), 300);
    }

    fn issued(feedback_expiry: UnixMillis, horizon: UnixMillis) -> Issued {
        let feedback = SessionFeedback {
            id: "f1".to_owned(),
            client: ClientId::new("acme").unwrap(),
            session: "s".to_owned(),
            domain: Domain::of_host("example.com").unwrap(),
            project: None,
            verdict: Verdict::Banned,
            ttl_ms: None,
            expires_at_ms: feedback_expiry,
        };
        let snapshot = WorkerSnapshot {
            worker: WorkerId::new("gw-1").unwrap(),
            session_id: "s1".to_owned(),
            reference: SnapshotRef {
                version: 1,
                epoch: 1,
                checksum: String::new(),
            },
            generated_at_ms: 0,
            max_staleness_ms: 0,
            proxies: Vec::new(),
            clients: Vec::new(),
            held: Vec::new(),
            advisories: Advisories {
                policy: None,
                cooldowns: Vec::new(),
                session_feedback: vec![feedback],
            },
            ticket_key: None,
            upstream_tls: Vec::new(),
        };
        let mut horizons = Horizons::default();
        horizons.set(&ProxyId::new(format!("{:032x}", 1)).unwrap(), horizon);
        Issued {
            content: SnapshotContent::of(&snapshot).unwrap(),
            counter: 4,
            feedback: 2,
            clients: Arc::new(Vec::new()),
            horizons,
            drain_epochs: HashMap::new(),
            read_whole_at_ms: 0,
        }
    }

    #[test]
    fn feedback_is_read_again_when_its_counter_moved_the_clients_changed_or_it_expired() {
        let issued = issued(300, 1_000);
        let same = SnapshotVersion {
            worker: 9,
            feedback: 2,
        };
        assert!(
            !issued.feedback_due(same, false, 299),
            "the worker counter is not its"
        );
        assert!(issued.feedback_due(
            SnapshotVersion {
                feedback: 3,
                ..same
            },
            false,
            0
        ));
        assert!(issued.feedback_due(same, true, 0));
        assert!(issued.feedback_due(same, false, 300));
    }

    #[test]
    fn time_alone_changes_the_content_at_its_earliest_horizon_or_feedback_expiry() {
        assert_eq!(issued(300, 1_000).content_until(), 300);
        assert_eq!(issued(2_000, 1_000).content_until(), 1_000);
    }
}
