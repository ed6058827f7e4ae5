//! [`Cutoff`]: the instant this gateway must stop relaying through one upstream proxy, and
//! the signal that closes what it still relays through it when that instant passes.
//!
//! A gateway may route through a proxy only while it holds the proxy's lease: the store
//! releases a lapsed lease and may give the proxy to another worker or to a client. So
//! every proxy's slot carries its cutoff, the end of the lease (never later than the
//! proxy's `usable_until`) as the latest applied snapshot listing it says, less
//! [`SKEW_MARGIN_MS`]. Picks read it (one atomic load); open tunnels and upstream
//! connections wait on its signal, which the lease keeper (`crate::control::keeper`) raises when the
//! cutoff passes unextended and the control loop raises when the store answers that the
//! worker no longer owns the proxy ([`Cutoff::revoke`]).
//!
//! A proxy a new snapshot no longer lists keeps its cutoff: it is draining, and what is
//! open on it may finish while the lease the gateway knows of lasts, but not past it. The
//! controller keeps renewing a busy draining lease and lists the new end in the snapshot's
//! `held` leases, which move the cutoff on like a listed proxy's lease end does.
//!
//! **The session bounds every lease.** The controller gives a worker's proxies back as
//! soon as its session lapses (a crashed gateway must not hold them for a whole lease), so
//! a gateway that cannot renew its session (every controller or the store unreachable)
//! must stop at the session's end too, even when a lease lasts longer: the cutoff is the
//! earlier of the two, less the margin. The session's end is the one the controller gave
//! with the registration or the last accepted report.

use proxypool_core::{Clock, UnixMillis};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::watch;

/// How long before a lease's end the gateway stops relaying through its proxy.
///
/// Leases are wall-clock instants set on the controller's clock and read on the gateway's,
/// so the gateway stops a little early to stay inside the lease even when its clock runs
/// behind. 250 ms covers the skew NTP keeps between hosts (milliseconds on a LAN, tens of
/// milliseconds across a WAN) with room to spare, and it costs nothing in normal operation:
/// the controller renews leases `[ownership] renew_before` (10 s by default) ahead of their
/// end. It must stay well under `renew_before`, or the gateway would drop proxies between
/// a lease's early end and its renewal.
pub(crate) const SKEW_MARGIN_MS: u64 = 250;

/// Why what was open through a proxy was closed (also the metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CutReason {
    /// The lease end passed without a newer snapshot extending it.
    LeaseLapsed,
    /// The store answered a runtime report saying the worker no longer owns the proxy.
    Stale,
    /// The worker's session ended before the lease did, without an accepted report
    /// renewing it (the controller releases a lapsed session's proxies).
    SessionLapsed,
}

impl CutReason {
    pub(crate) const ALL: [CutReason; 3] = [
        CutReason::LeaseLapsed,
        CutReason::Stale,
        CutReason::SessionLapsed,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            CutReason::LeaseLapsed => "lease_lapsed",
            CutReason::Stale => "stale",
            CutReason::SessionLapsed => "session_lapsed",
        }
    }
}

/// No session bound yet (`Cutoff::session_end` before the first registration).
pub(crate) const UNBOUNDED: UnixMillis = u64::MAX;

/// Sentinel of `cut_for`: no cut yet.
const NEVER: u64 = u64::MAX;

/// One proxy's cutoff and its signal.
#[derive(Debug)]
pub(crate) struct Cutoff {
    /// The lease end the latest snapshot listing the proxy gave (0 before the first).
    lease_end: AtomicU64,
    /// The end of the worker's session as last granted ([`UNBOUNDED`] before the first).
    session_end: AtomicU64,
    /// Wall-clock milliseconds from which nothing may be relayed through the proxy; 0 before
    /// the first lease and after a revocation.
    until_ms: AtomicU64,
    /// The lease end the store disowned: a snapshot that still carries exactly that end
    /// (built before the answer) does not bring the proxy back; a renewed lease does.
    revoked_end: AtomicU64,
    /// The `until_ms` the last cut was for, so one lapse is cut (and logged) once.
    cut_for: AtomicU64,
    /// Each cut publishes its reason; open tunnels and connections wait for a change.
    signal: watch::Sender<Option<CutReason>>,
}

impl Default for Cutoff {
    fn default() -> Self {
        Self {
            lease_end: AtomicU64::new(0),
            session_end: AtomicU64::new(UNBOUNDED),
            until_ms: AtomicU64::new(0),
            revoked_end: AtomicU64::new(0),
            cut_for: AtomicU64::new(NEVER),
            signal: watch::channel(None).0,
        }
    }
}

impl Cutoff {
    /// The cutoff instant (wall clock, milliseconds).
    pub(crate) fn until_ms(&self) -> UnixMillis {
        self.until_ms.load(Ordering::Acquire)
    }

    /// The lease end as the latest snapshot listing the proxy gave it (for `/status`).
    pub(crate) fn lease_end_ms(&self) -> UnixMillis {
        self.lease_end.load(Ordering::Acquire)
    }

    /// Whether the proxy may be relayed through at `now_ms`.
    pub(crate) fn is_open(&self, now_ms: UnixMillis) -> bool {
        now_ms < self.until_ms()
    }

    /// A snapshot lists the proxy with this lease end (already cut at `usable_until`).
    pub(crate) fn set_lease_end(&self, lease_end_ms: UnixMillis) {
        self.lease_end.store(lease_end_ms, Ordering::Release);
        self.recompute();
    }

    /// The controller granted the worker's session until `session_end_ms`.
    pub(crate) fn set_session_end(&self, session_end_ms: UnixMillis) {
        self.session_end.store(session_end_ms, Ordering::Release);
        self.recompute();
    }

    /// `until_ms` from the lease end and the session end (both are written by the one
    /// control loop, so the last writer saw both).
    fn recompute(&self) {
        let lease_end = self.lease_end.load(Ordering::Acquire);
        let until = if lease_end == self.revoked_end.load(Ordering::Acquire) {
            0
        } else {
            lease_end
                .min(self.session_end.load(Ordering::Acquire))
                .saturating_sub(SKEW_MARGIN_MS)
        };
        self.until_ms.store(until, Ordering::Release);
    }

    /// Whether the session's end, not the lease's, is what the cutoff stands at.
    fn session_bound(&self) -> bool {
        let session_end = self.session_end.load(Ordering::Acquire);
        session_end < self.lease_end.load(Ordering::Acquire)
            && self.until_ms() == session_end.saturating_sub(SKEW_MARGIN_MS)
    }

    /// The store no longer has the worker owning the proxy: closes at once whatever is
    /// open through it and keeps it out of picks until a snapshot renews its lease.
    /// Returns whether the proxy was still open (the first revocation of this lease).
    pub(crate) fn revoke(&self) -> bool {
        let until = self.until_ms.swap(0, Ordering::AcqRel);
        if until == 0 {
            return false;
        }
        self.revoked_end
            .store(self.lease_end.load(Ordering::Acquire), Ordering::Release);
        // The keeper must not count this cutoff again as a lapse.
        self.cut_for.store(0, Ordering::Release);
        self.signal.send_replace(Some(CutReason::Stale));
        true
    }

    /// Cuts once per lease end when the cutoff is at or before `now_ms` (the lease keeper).
    /// Returns whether this call cut.
    pub(crate) fn lapse_if_due(&self, now_ms: UnixMillis) -> bool {
        let until = self.until_ms();
        if now_ms < until {
            return false;
        }
        let previous = self.cut_for.swap(until, Ordering::AcqRel);
        if previous == until {
            return false;
        }
        self.signal.send_replace(Some(self.closed_reason()));
        true
    }

    /// A watch for what opens through the proxy now (a tunnel, an upstream connection):
    /// [`CutWatch::closed`] completes at once when the cutoff has passed already, else at
    /// the next cut.
    ///
    /// It subscribes before it reads the clock, so a cut can never fall between the two:
    /// one made before the subscription is seen in the cutoff, one made after it wakes the
    /// watch. The watch does not keep the slot alive (a pooled connection must not).
    pub(crate) fn watch(&self, clock: &dyn Clock) -> CutWatch {
        let signal = self.signal.subscribe();
        let already = (!self.is_open(clock.now())).then(|| self.closed_reason());
        CutWatch { signal, already }
    }

    fn closed_reason(&self) -> CutReason {
        if self.until_ms() == 0 && self.revoked_end.load(Ordering::Acquire) != 0 {
            CutReason::Stale
        } else if self.session_bound() {
            CutReason::SessionLapsed
        } else {
            CutReason::LeaseLapsed
        }
    }

    /// Whether a tunnel or connection is waiting on the signal.
    pub(crate) fn watched(&self) -> bool {
        self.signal.receiver_count() > 0
    }
}

/// What [`Cutoff::watch`] hands out.
#[derive(Debug)]
pub(crate) struct CutWatch {
    signal: watch::Receiver<Option<CutReason>>,
    already: Option<CutReason>,
}

impl CutWatch {
    /// Completes with the reason when what it watches must close. Never completes once
    /// the slot is gone (nothing can cut it any more, and nothing can pick it either).
    pub(crate) async fn closed(mut self) -> CutReason {
        if let Some(reason) = self.already {
            return reason;
        }
        match self.signal.changed().await {
            Ok(()) => (*self.signal.borrow()).unwrap_or(CutReason::LeaseLapsed),
            Err(_) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_core::ManualClock;
    use std::time::Duration;

    #[test]
    fn the_cutoff_is_the_lease_end_less_the_margin() {
        let cutoff = Cutoff::default();
        assert!(!cutoff.is_open(0), "closed before the first lease");
        cutoff.set_lease_end(10_000);
        assert!(cutoff.is_open(10_000 - SKEW_MARGIN_MS - 1));
        assert!(!cutoff.is_open(10_000 - SKEW_MARGIN_MS));
    }

    #[test]
    fn a_lapse_is_cut_once_per_lease_end() {
        let cutoff = Cutoff::default();
        cutoff.set_lease_end(10_000);
        assert!(!cutoff.lapse_if_due(5_000));
        assert!(cutoff.lapse_if_due(10_000));
        assert!(!cutoff.lapse_if_due(11_000), "the same lapse again");
        cutoff.set_lease_end(20_000);
        assert!(!cutoff.lapse_if_due(11_000), "renewed");
        assert!(cutoff.lapse_if_due(20_000), "the renewed lease lapses too");
    }

    #[test]
    fn a_revocation_holds_until_a_renewed_lease() {
        let cutoff = Cutoff::default();
        cutoff.set_lease_end(10_000);
        assert!(cutoff.revoke());
        assert!(!cutoff.revoke(), "once");
        assert!(!cutoff.is_open(1_000));
        assert!(!cutoff.lapse_if_due(1_000), "not counted again as a lapse");
        cutoff.set_lease_end(10_000);
        assert!(!cutoff.is_open(1_000), "the same lease does not come back");
        cutoff.set_lease_end(40_000);
        assert!(cutoff.is_open(1_000), "a renewed lease does");
    }

    #[test]
    fn the_session_end_bounds_the_lease() {
        let cutoff = Cutoff::default();
        cutoff.set_lease_end(30_000);
        cutoff.set_session_end(20_000);
        assert!(cutoff.is_open(20_000 - SKEW_MARGIN_MS - 1));
        assert!(
            !cutoff.is_open(20_000 - SKEW_MARGIN_MS),
            "the session ends first"
        );
        assert_eq!(cutoff.closed_reason(), CutReason::SessionLapsed);
        // A renewed session leaves the lease as the bound, and a later lease stays bound
        // by the session.
        cutoff.set_session_end(50_000);
        assert!(cutoff.is_open(25_000));
        assert!(!cutoff.is_open(30_000 - SKEW_MARGIN_MS));
        assert_eq!(cutoff.closed_reason(), CutReason::LeaseLapsed);
        cutoff.set_lease_end(80_000);
        assert!(!cutoff.is_open(50_000 - SKEW_MARGIN_MS));
        assert!(cutoff.lapse_if_due(50_000));
        // A revocation is not undone by a session renewal.
        assert!(cutoff.revoke());
        cutoff.set_session_end(90_000);
        assert!(!cutoff.is_open(1_000));
    }

    #[tokio::test]
    async fn closed_completes_at_once_past_the_cutoff_and_on_a_cut() {
        let clock = ManualClock::new(1_000);
        let cutoff = Cutoff::default();
        cutoff.set_lease_end(10_000);
        let waiting = cutoff.watch(&*clock).closed();
        let waiting = tokio::time::timeout(Duration::from_millis(50), waiting);
        assert!(waiting.await.is_err(), "open: it waits");
        let watch = cutoff.watch(&*clock);
        assert!(cutoff.watched());
        assert!(cutoff.revoke());
        assert_eq!(watch.closed().await, CutReason::Stale);
        let revoked = cutoff.watch(&*clock).closed();
        assert_eq!(revoked.await, CutReason::Stale, "already revoked");
        cutoff.set_lease_end(20_000);
        clock.advance(20_000);
        let lapsed = cutoff.watch(&*clock).closed();
        assert_eq!(
            lapsed.await,
            CutReason::LeaseLapsed,
            "already past the cutoff"
        );
        let dropped = Cutoff::default();
        dropped.set_lease_end(100_000);
        let orphan = dropped.watch(&*clock);
        drop(dropped);
        let orphan = tokio::time::timeout(Duration::from_millis(50), orphan.closed());
        assert!(orphan.await.is_err(), "a gone slot never cuts");
    }
}
