//! Routing one request: sticky-session lookup, pick, dial, and bounded retries on other
//! proxies when a proxy fails. The dial itself is a closure so HTTP forwarding, CONNECT
//! tunnels and SOCKS5 share the exact same selection, retry and failure accounting.
//!
//! When every proxy the request could use is at its `max_sessions`, the request waits up
//! to `limits.capacity_wait` for one to free a slot (woken by the slot's release, not by
//! polling), then picks again the usual way; the pick's reservation stays the only way a
//! slot is taken.

use crate::config::GatewayConfig;
use crate::failure::Fault;
use crate::metrics::GatewayMetrics;
use crate::proxies::capacity::Lease;
use crate::proxies::cooldowns::TargetDomain;
use crate::refusal::Refusal;
use crate::routing::dialer::{DialFailure, Dialer};
use crate::routing::request::Authenticated;
use crate::routing::rotation::Plan;
use crate::routing::rotation::SessionOutcome;
use crate::routing::select::{Eligibility, Pick, Picker};
use crate::routing::sticky::StickyTable;
use crate::routing::wait::CapacityWaiters;
use crate::snapshot::{SnapshotView, ViewProxy};
use arc_swap::ArcSwap;
use proxypool_core::{ClientId, SharedClock, UnixMillis};
use smallvec::SmallVec;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

/// The response header telling a client what happened to its sticky session.
pub const SESSION_HEADER: &str = "x-proxypool-session";

/// The response header naming the proxy that carried the request (its id): what a client
/// reports in `POST /v1/feedback` when a site inside a tunnel bans it.
pub const PROXY_HEADER: &str = "x-proxypool-proxy";

/// The response header carrying the feedback ticket for the proxy [`PROXY_HEADER`] names:
/// the client's proof, good for `proxypool_core::TICKET_LIFETIME_MS`, that this gateway
/// routed it through that proxy while it stays in the lease it was routed under (`POST
/// /v1/feedback` takes it as `ticket`; `proxypool_core::ticket`). Absent when the snapshot
/// carries no ticket key.
pub const TICKET_HEADER: &str = "x-proxypool-ticket";

/// The response header counting the proxies tried for the request (1 = the first worked).
pub const ATTEMPTS_HEADER: &str = "x-proxypool-attempts";

/// The names, made at compile time (a `from_static` at run time checks the text each call).
const PROXY_HEADER_NAME: http::HeaderName = http::HeaderName::from_static(PROXY_HEADER);
const TICKET_HEADER_NAME: http::HeaderName = http::HeaderName::from_static(TICKET_HEADER);
const ATTEMPTS_HEADER_NAME: http::HeaderName = http::HeaderName::from_static(ATTEMPTS_HEADER);

/// Adds [`PROXY_HEADER`], [`TICKET_HEADER`] (for `client`, signed with the view's key,
/// bound to the lease this gateway holds on the proxy, good for at least
/// `TICKET_LIFETIME_MS` from `now`: `crate::proxies::tickets`) and [`ATTEMPTS_HEADER`] to
/// a response.
pub(crate) fn name_the_proxy(
    headers: &mut http::HeaderMap,
    view: &SnapshotView,
    proxy: &ViewProxy,
    client: &ClientId,
    now: UnixMillis,
    attempts: u32,
) {
    const FEW: [&str; 8] = ["1", "2", "3", "4", "5", "6", "7", "8"];
    headers.insert(PROXY_HEADER_NAME, proxy.id_header.clone());
    if let Some(signer) = &view.tickets
        && let Some(value) = proxy.slot.tickets.header(signer, client, &proxy.id, now)
    {
        headers.insert(TICKET_HEADER_NAME, value);
    }
    let attempts = attempts.max(1);
    let value = match FEW.get(attempts as usize - 1) {
        Some(text) => http::HeaderValue::from_static(text),
        None => http::HeaderValue::from(attempts),
    };
    headers.insert(ATTEMPTS_HEADER_NAME, value);
}

/// A dialed upstream: what the dial produced, the active lease, and the session outcome.
#[derive(Debug)]
pub(crate) struct Routed<T> {
    pub value: T,
    pub lease: Lease,
    pub index: u32,
    pub session: SessionOutcome,
    /// Proxies dialed for this route, the one that answered included.
    pub attempts: u32,
}

/// What a request is for, beyond who asks and the selectors.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RouteTarget<'a> {
    /// The target's registrable domain: proxies cooling down for it are not used.
    pub domain: Option<&'a TargetDomain<'a>>,
    /// Proxies (view indexes) this request already went through, not to be used again
    /// (a retry after a ban or an upstream's own error).
    pub avoid: &'a [u32],
}

/// Routing settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RouteSettings {
    pub max_attempts: u32,
    pub failure_threshold: u32,
    pub failure_cooldown_ms: u64,
    pub default_sesstime_minutes: u32,
    pub max_sticky_per_client: usize,
    /// Zero: a full pool refuses at once.
    pub capacity_wait: Duration,
    pub max_waiters_per_client: usize,
    pub max_waiters: usize,
}

impl RouteSettings {
    pub(crate) fn of(config: &GatewayConfig) -> Self {
        RouteSettings {
            max_attempts: config.dial.max_attempts,
            failure_threshold: config.dial.failure_threshold,
            failure_cooldown_ms: config.dial.failure_cooldown.as_ms(),
            default_sesstime_minutes: config.sessions.default_minutes,
            max_sticky_per_client: config.limits.max_sticky_sessions_per_client,
            capacity_wait: config.limits.capacity_wait.as_duration(),
            max_waiters_per_client: config.limits.max_capacity_waiters_per_client,
            max_waiters: config.limits.max_capacity_waiters,
        }
    }
}

/// Selection state shared by every listener.
#[derive(Debug)]
pub(crate) struct Router {
    picker: Picker,
    sticky: StickyTable,
    // Swapped whole on a configuration reload.
    settings: ArcSwap<RouteSettings>,
    metrics: Arc<GatewayMetrics>,
    clock: SharedClock,
    waiters: CapacityWaiters,
}

impl Router {
    pub(crate) fn new(
        picker: Picker,
        sticky: StickyTable,
        settings: RouteSettings,
        metrics: Arc<GatewayMetrics>,
        clock: SharedClock,
        waiters: CapacityWaiters,
    ) -> Self {
        Self {
            picker,
            sticky,
            settings: ArcSwap::from_pointee(settings),
            metrics,
            clock,
            waiters,
        }
    }

    pub(crate) fn sticky(&self) -> &StickyTable {
        &self.sticky
    }

    /// Applies reloaded routing settings and rotation to the requests that come next.
    pub(crate) fn reconfigure(&self, config: &GatewayConfig) {
        self.settings.store(Arc::new(RouteSettings::of(config)));
        self.picker.set_rotation(config.rotation);
    }

    fn eligibility<'a>(
        &'a self,
        settings: &RouteSettings,
        domain: Option<&'a TargetDomain<'a>>,
        auth: &'a Authenticated,
    ) -> Eligibility<'a> {
        Eligibility {
            now_ms: self.clock.now(),
            mono_ms: self.clock.monotonic_ms(),
            failure_threshold: settings.failure_threshold,
            failure_cooldown_ms: settings.failure_cooldown_ms,
            domain,
            project: auth.client.project.as_ref(),
            cooldown_skips: Some(&self.metrics.cooldown_skips),
        }
    }

    /// Picks a proxy for `auth`, dials it with `dial`, and retries on other proxies while
    /// failures are the proxy's fault (bounded by `max_attempts`). When the only obstacle
    /// is that the usable proxies are full, waits up to `capacity_wait` for a free slot.
    pub(crate) async fn route<D: Dialer>(
        &self,
        view: &SnapshotView,
        auth: &Authenticated,
        target: RouteTarget<'_>,
        dialer: &D,
    ) -> Result<Routed<D::Output>, Refusal> {
        let first = self.route_once(view, auth, target, dialer).await;
        let result = match first {
            Err(Refusal::NoEligibleProxy) => {
                self.wait_for_capacity(view, auth, target, dialer).await
            }
            other => other,
        };
        if matches!(result, Err(Refusal::NoEligibleProxy)) {
            self.metrics.selection_misses.increment(1);
        }
        result
    }

    /// A full pool: waits for a slot to free (bounded in time and in waiters), picking
    /// again after every release. Refused with `no_eligible_proxy` as before when the wait
    /// is off, the waiters' bound is reached, the deadline passes, or the miss is no longer
    /// about capacity.
    async fn wait_for_capacity<D: Dialer>(
        &self,
        view: &SnapshotView,
        auth: &Authenticated,
        target: RouteTarget<'_>,
        dialer: &D,
    ) -> Result<Routed<D::Output>, Refusal> {
        let settings = self.settings.load_full();
        if settings.capacity_wait.is_zero() || !self.is_full(view, auth, target, &settings) {
            return Err(Refusal::NoEligibleProxy);
        }
        let Some(_ticket) = self.waiters.enter(
            auth.client.id.as_str(),
            settings.max_waiters_per_client,
            settings.max_waiters,
        ) else {
            self.metrics.capacity_waits_rejected.increment(1);
            return Err(Refusal::NoEligibleProxy);
        };
        self.metrics.capacity_waits.increment(1);
        // The view stays the one the request started with, as for a dial in progress.
        let deadline = tokio::time::Instant::now() + settings.capacity_wait;
        loop {
            let notified = self.waiters.signal().notified();
            tokio::pin!(notified);
            // Listen before looking: a slot freed between the look and the wait still wakes.
            notified.as_mut().enable();
            fence(Ordering::SeqCst);
            match self.route_once(view, auth, target, dialer).await {
                Err(Refusal::NoEligibleProxy) if self.is_full(view, auth, target, &settings) => {}
                other => {
                    if other.is_ok() {
                        self.metrics.capacity_waits_served.increment(1);
                    }
                    return other;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                self.metrics.capacity_wait_timeouts.increment(1);
                return Err(Refusal::NoEligibleProxy);
            }
        }
    }

    fn is_full(
        &self,
        view: &SnapshotView,
        auth: &Authenticated,
        target: RouteTarget<'_>,
        settings: &RouteSettings,
    ) -> bool {
        let when = self.eligibility(settings, target.domain, auth);
        self.picker
            .capacity_full(view, &auth.client, &auth.selectors, when)
    }

    /// One round of picks and dials.
    async fn route_once<D: Dialer>(
        &self,
        view: &SnapshotView,
        auth: &Authenticated,
        target: RouteTarget<'_>,
        dialer: &D,
    ) -> Result<Routed<D::Output>, Refusal> {
        let client = &auth.client;
        let selectors = &auth.selectors;
        let settings = self.settings.load();
        let when = self.eligibility(&settings, target.domain, auth);
        let plan = Plan::lookup(&self.sticky, auth, when.now_ms);
        let pin = plan.pin.clone();
        let mut outcome = plan.outcome;
        // Inline for the usual few attempts: a routed request allocates no list.
        let mut tried: SmallVec<[u32; 4]> = SmallVec::from_slice(target.avoid);
        let mut last_failure: Option<DialFailure> = None;
        for attempt in 0..settings.max_attempts {
            let pinned = match (&pin, attempt) {
                (Some(pin), 0) => view
                    .index_of(&pin.proxy)
                    .filter(|i| !tried.contains(i))
                    .and_then(|i| self.picker.pick_exact(view, client, selectors, i, when)),
                _ => None,
            };
            if pin.is_some() && pinned.is_none() {
                outcome = SessionOutcome::Reassigned;
            }
            let pick = match pinned {
                Some(pick) => Some(pick),
                // Cooldown only deprioritizes: when every candidate is cooling down, try
                // them anyway (half-open), so a dead pool answers 502 with the real
                // failure instead of an empty 503.
                None => plan
                    .pick(&self.picker, view, client, selectors, &tried, when)
                    .or_else(|| {
                        let half_open = Eligibility {
                            failure_threshold: u32::MAX,
                            ..when
                        };
                        plan.pick(&self.picker, view, client, selectors, &tried, half_open)
                    }),
            };
            let Some(Pick { index, reservation }) = pick else {
                break;
            };
            tried.push(index);
            let proxy = &view.proxies[index as usize];
            let started = Instant::now();
            match dialer.dial(proxy).await {
                Ok(value) => {
                    self.metrics
                        .dial_seconds
                        .record(started.elapsed().as_secs_f64());
                    proxy.slot.record_success();
                    let lease = reservation.activate();
                    plan.settle(
                        &self.sticky,
                        auth,
                        proxy,
                        when,
                        settings.default_sesstime_minutes,
                        settings.max_sticky_per_client,
                    )?;
                    // A key whose fleet owner changed had a proxy at its old owner: to
                    // the client its first proxy here is a reassignment, not a new session.
                    if auth.fleet_moved && outcome == SessionOutcome::New {
                        outcome = SessionOutcome::Reassigned;
                    }
                    return Ok(Routed {
                        value,
                        lease,
                        index,
                        session: plan.outcome_of(outcome),
                        attempts: (tried.len() - target.avoid.len()) as u32,
                    });
                }
                Err(failure) => {
                    drop(reservation);
                    if failure.fault == Fault::Target {
                        // Every proxy would fail alike, and the proxy did its part: not
                        // counted against it, not retried.
                        self.metrics.target_failure(failure.reason);
                        return Err(Refusal::UpstreamFailed {
                            reason: failure.reason,
                            socks: failure.socks,
                        });
                    }
                    self.metrics.upstream_failure(failure.reason);
                    proxy.slot.record_failure(self.clock.monotonic_ms());
                    tracing::debug!(proxy = %proxy.id, reason = failure.reason, attempt, "upstream dial failed");
                    last_failure = Some(failure);
                    if pin.is_some() {
                        outcome = SessionOutcome::Reassigned;
                    }
                }
            }
        }
        match last_failure {
            Some(failure) => Err(Refusal::UpstreamFailed {
                reason: failure.reason,
                socks: failure.socks,
            }),
            // During an outage the answer must say so, never blame the selectors.
            None if self
                .picker
                .lease_miss(view, client, selectors, self.clock.now()) =>
            {
                Err(Refusal::NoLeasedProxies)
            }
            None => match target
                .domain
                .and_then(TargetDomain::get)
                .and_then(|domain| {
                    self.picker
                        .domain_miss(view, client, selectors, domain, when.now_ms)
                }) {
                Some(retry_after_ms) => Err(Refusal::DomainCoolingDown { retry_after_ms }),
                None => Err(Refusal::NoEligibleProxy),
            },
        }
    }
}
