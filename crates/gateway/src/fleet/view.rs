//! The fleet's members as the controllers last listed them ([`FleetView`]), read lock-free
//! on the hot path, and the lists seen before it (what moved keys are judged by).
//!
//! The control loop replaces the list from every report's answer and, on demand, from
//! `GET /control/v1/fleet`: [`FleetView::refresh_now`] (a hop to an unknown or dead peer)
//! asks the loop for one, coalesced to at most one request per [`REFRESH_EVERY`], and waits
//! for the next list within a bound. A member whose pin is not a SHA-256 in lowercase hex
//! cannot be dialled nor recognised, so it is left out of the list.

use super::identity::{Pin, parse_pin};
use arc_swap::ArcSwap;
use proxypool_core::fleet::FleetMember;
use proxypool_core::{LockExt, WorkerId};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// At most one on-demand list request per this long, however many hops ask.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_millis(250);

/// How many earlier lists are remembered.
pub(crate) const HISTORY: usize = 8;

/// The gauge of the members in the current list.
const MEMBERS_GAUGE: &str = "proxypool_gateway_fleet_members";

/// One live member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub worker: WorkerId,
    /// `host:port` its fleet listener is dialled at.
    pub address: String,
    /// The SHA-256 of its hop certificate's SubjectPublicKeyInfo.
    pub pin: Pin,
    /// The same pin in lowercase hex, as the controllers list it.
    pub pin_hex: String,
    /// When its current session opened (milliseconds since the epoch).
    pub since_ms: u64,
    /// [`fnv1a64`] of the worker id: its rendezvous seed, fixed by the id alone so a
    /// member restarted under its id owns the same keys.
    pub seed: u64,
}

/// One member list, sorted by worker id as the controllers send it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Members {
    pub list: Vec<Member>,
    /// Counts replacements of this view (0: nothing listed yet).
    pub version: u64,
}

/// The lists remembered before the current one, oldest first, each with when (the
/// process's monotonic milliseconds, `proxypool_core::clock::monotonic_ms`) it was
/// replaced.
pub(crate) type History = Vec<(Arc<Members>, u64)>;

/// The fleet's membership as this gateway knows it.
#[derive(Debug)]
pub(crate) struct FleetView {
    me: WorkerId,
    my_pin: String,
    current: ArcSwap<Members>,
    history: ArcSwap<History>,
    /// Serialises replacements (the control loop's answers and its on-demand fetches may
    /// land together), so versions and history stay in order. Never held across `.await`.
    replacing: Mutex<()>,
    /// The version of the current list, for waiters of the next one.
    replaced: watch::Sender<u64>,
    /// Wakes the control loop to fetch the list now.
    wanted: Notify,
    /// When the last on-demand request was made (monotonic milliseconds since `origin`,
    /// plus one so that 0 means never).
    last_request: AtomicU64,
    origin: Instant,
}

impl FleetView {
    /// An empty view of the member `me`, whose own pin is `my_pin` (lowercase hex).
    pub(crate) fn new(me: WorkerId, my_pin: String) -> Self {
        FleetView {
            me,
            my_pin,
            current: ArcSwap::from_pointee(Members::default()),
            history: ArcSwap::from_pointee(Vec::new()),
            replacing: Mutex::new(()),
            replaced: watch::Sender::new(0),
            wanted: Notify::new(),
            last_request: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }

    /// This gateway's worker id.
    pub(crate) fn me(&self) -> &WorkerId {
        &self.me
    }

    /// This gateway's own pin, lowercase hex.
    pub(crate) fn my_pin(&self) -> &str {
        &self.my_pin
    }

    /// The current list.
    pub(crate) fn current(&self) -> Arc<Members> {
        self.current.load_full()
    }

    /// The lists before the current one (at most [`HISTORY`], oldest first).
    pub(crate) fn history(&self) -> Arc<History> {
        self.history.load_full()
    }

    /// Makes `list` the current one (members with a malformed pin left out) and remembers
    /// the one it replaces. An identical list changes nothing but wakes the waiters of
    /// [`FleetView::refresh_now`]: it is the fresh answer they asked for.
    pub(crate) fn replace(&self, list: Vec<FleetMember>) {
        let mut members: Vec<Member> = list
            .into_iter()
            .filter_map(|member| {
                let Some(pin) = parse_pin(&member.spki_sha256) else {
                    tracing::debug!(worker = %member.worker, "fleet member with a malformed pin left out");
                    return None;
                };
                Some(Member {
                    seed: fnv1a64(member.worker.as_str().as_bytes()),
                    worker: member.worker,
                    address: member.address,
                    pin,
                    pin_hex: member.spki_sha256,
                    since_ms: member.since_ms,
                })
            })
            .collect();
        // The controllers sort; owners and lookups may rely on it whoever sent the list.
        members.sort_by(|a, b| a.worker.cmp(&b.worker));
        members.dedup_by(|a, b| a.worker == b.worker);
        {
            let _one_at_a_time = self.replacing.lock_or_recover();
            let previous = self.current.load_full();
            if previous.list != members {
                let version = previous.version + 1;
                metrics::gauge!(MEMBERS_GAUGE).set(members.len() as f64);
                self.current.store(Arc::new(Members {
                    list: members,
                    version,
                }));
                if previous.version > 0 {
                    let mut history = self.history.load().as_ref().clone();
                    history.push((previous, proxypool_core::clock::monotonic_ms()));
                    let excess = history.len().saturating_sub(HISTORY);
                    history.drain(..excess);
                    self.history.store(Arc::new(history));
                }
            }
        }
        self.replaced.send_modify(|answers| *answers += 1);
    }

    /// The member whose hop certificate has `pin`, if listed.
    pub(crate) fn member_by_pin(&self, pin: &Pin) -> Option<Member> {
        self.current
            .load()
            .list
            .iter()
            .find(|member| member.pin == *pin)
            .cloned()
    }

    /// Whether the current list has this gateway with its own current pin (until then its
    /// peers cannot recognise it).
    pub(crate) fn includes_me(&self) -> bool {
        self.current
            .load()
            .list
            .iter()
            .any(|member| member.worker == self.me && member.pin_hex == self.my_pin)
    }

    /// Asks the control loop for a fresh list (unless one was asked for within
    /// [`REFRESH_EVERY`]: that answer serves this caller too) and waits for the next list
    /// to arrive, from that request or a report's answer, at most `wait`.
    pub(crate) async fn refresh_now(&self, wait: Duration) {
        let mut replaced = self.replaced.subscribe();
        replaced.borrow_and_update();
        let now = u64::try_from(self.origin.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let last = self.last_request.load(Ordering::Acquire);
        let due = last == 0 || now.saturating_sub(last) >= REFRESH_EVERY.as_millis() as u64;
        if due
            && self
                .last_request
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.wanted.notify_one();
        }
        let _ = tokio::time::timeout(wait, replaced.changed()).await;
    }

    /// Resolves when a refresh was asked for (the control loop waits on it). A request
    /// made while nobody waits is kept for the next wait.
    pub(crate) fn refresh_wanted(&self) -> impl Future<Output = ()> + '_ {
        self.wanted.notified()
    }
}

/// FNV-1a, 64 bits: a hash every process and version computes alike (never the standard
/// library's hasher, whose values may change).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests;
