//! The lease keeper: the task that closes what is still open through a proxy (CONNECT and
//! SOCKS5 tunnels, plain HTTP upstream connections, idle or busy) once the proxy's cutoff
//! passes without a newer snapshot extending it, so the gateway never relays through a
//! proxy whose lease it no longer holds. Revocations by the store take the other path: the
//! control loop cuts those at once ([`crate::snapshot::SnapshotStore::revoke`]).
//!
//! It reads the gateway's clock, not tokio's timers, so a test's manual clock drives it:
//! it sleeps until the earliest cutoff ahead but never longer than [`TICK`], and each tick
//! with nothing due costs one clock read. A new snapshot wakes it at once (a lease may have
//! moved either way). Picks need none of this: they compare the cutoff themselves.

use crate::context::GatewayContext;
use crate::snapshot::readiness;
use proxypool_core::UnixMillis;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

/// The longest the keeper sleeps between looks at the clock.
const TICK: Duration = Duration::from_millis(200);

/// Runs until the gateway stops (the task is aborted). Takes any owner of the context
/// (the gateway hands it its `Shared`), and reads only the context.
pub(crate) async fn run<S>(owner: Arc<S>)
where
    S: Deref<Target = GatewayContext> + Send + Sync + 'static,
{
    let shared: &GatewayContext = &owner;
    let mut swaps = shared.store.swaps();
    // Sweep at once; then whenever the earliest cutoff ahead comes, or a snapshot arrives.
    let mut due: UnixMillis = 0;
    let mut swept_at: UnixMillis = 0;
    loop {
        let now = shared.clock.now();
        // A session end granted since the last sweep may come before every lease end.
        let session_cut = shared
            .store
            .session_end()
            .saturating_sub(crate::proxies::cutoff::SKEW_MARGIN_MS);
        if session_cut > swept_at {
            due = due.min(session_cut);
        }
        if now >= due {
            swept_at = now;
            due = sweep(shared, now);
            readiness::publish(&shared.store, &shared.metrics, now);
        }
        let wait =
            Duration::from_millis(due.saturating_sub(now)).clamp(Duration::from_millis(1), TICK);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = swaps.changed() => {
                if changed.is_err() {
                    return;
                }
                due = 0;
            }
        }
    }
}

/// Cuts every tracked proxy whose cutoff is at or before `now` (once per lease end) and
/// returns the earliest cutoff still ahead (`u64::MAX` when none).
fn sweep(shared: &GatewayContext, now: UnixMillis) -> UnixMillis {
    let mut next = UnixMillis::MAX;
    for (proxy, slot) in shared.store.registry().slots() {
        let open = slot.in_use();
        let active = slot.load().active;
        if slot.lapse_if_due(now) {
            if open {
                // Once per proxy and lease: the tunnels count themselves as they close.
                tracing::warn!(
                    %proxy,
                    active,
                    lease_end_ms = slot.cutoff.lease_end_ms(),
                    "the proxy's lease (or the worker's session) ended without being renewed; closing what is open through it"
                );
            }
            continue;
        }
        let until = slot.cutoff.until_ms();
        if until > now {
            next = next.min(until);
        }
    }
    next
}
