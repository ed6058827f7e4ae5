//! Handing back a cleanly stopped worker's proxies at once.
//!
//! A worker that ends its session (`DELETE .../sessions/{s}`) has told us it is gone, so
//! nothing is active or reserved on its proxies any more. Instead of leaving them until
//! their leases lapse, [`release_worker`] drains and acknowledges each assignment through
//! the ordinary ownership port (`begin_drain`, then `acknowledge_drain(.., 0, 0)`), so the
//! store's epoch checks still decide every step and a proxy is never owned twice.
//!
//! Only assignments made at or before `up_to_epoch` are touched: the caller reads the
//! epoch before it closes the session, so proxies assigned afterwards (to a new session of
//! the same worker id) are left alone. Work is bounded ([`RELEASE_BATCH`] per read, at most
//! [`MAX_BATCHES`] reads per phase); whatever is left over still comes back by expiry.

use proxypool_core::{OwnershipRepository, PoolError, PoolResult, ProxyId, UnixMillis, WorkerId};
use std::collections::BTreeSet;

/// Assignments read per `owned_by` / `draining_of` call.
pub const RELEASE_BATCH: usize = 256;
/// Reads per phase; bounds one release to `RELEASE_BATCH * MAX_BATCHES` proxies per phase.
pub const MAX_BATCHES: usize = 16;

/// What [`release_worker`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Released {
    /// Assignments released (now unowned).
    pub released: usize,
    /// Assignments left alone: a conflict (lapsed, taken elsewhere, fenced) or assigned
    /// after the session closed.
    pub skipped: usize,
}

/// Releases every assignment of `worker` made at or before `up_to_epoch` (see the module
/// doc). A per-proxy conflict is skipped and logged; only a store outage is an error, and
/// what was released before it stays released.
pub async fn release_worker(
    pool: &dyn OwnershipRepository,
    now: UnixMillis,
    worker: &WorkerId,
    up_to_epoch: u64,
) -> PoolResult<Released> {
    let mut done = Released::default();
    // Proxies we gave up on: not retried, and not counted twice when a later read lists
    // them again.
    let mut skipped: BTreeSet<ProxyId> = BTreeSet::new();

    // Serving leases: drain, then acknowledge with zero counts.
    for _ in 0..MAX_BATCHES {
        let owned = pool.owned_by(now, worker, RELEASE_BATCH).await?;
        let mut progressed = false;
        for owned in &owned {
            let a = &owned.assignment;
            if skipped.contains(&a.proxy_id) {
                continue;
            }
            let outcome = if a.epoch > up_to_epoch {
                Err(None)
            } else {
                release_one(pool, now, &a.proxy_id, worker, a.epoch).await
            };
            progressed |= tally(outcome, &a.proxy_id, worker, &mut done, &mut skipped)?;
        }
        // A short read is the last one; a read of only skipped proxies would repeat forever.
        if owned.len() < RELEASE_BATCH || !progressed {
            break;
        }
    }

    // Drains already under way (a rebalance or cordon, or a drain above whose
    // acknowledgement failed): the worker's counts are zero now, so acknowledge them.
    for _ in 0..MAX_BATCHES {
        let draining = pool.draining_of(now, worker, RELEASE_BATCH).await?;
        let mut progressed = false;
        for a in &draining {
            if skipped.contains(&a.proxy_id) {
                continue;
            }
            let outcome = if a.epoch > up_to_epoch {
                Err(None)
            } else {
                pool.acknowledge_drain(now, &a.proxy_id, worker, a.epoch, 0, 0)
                    .await
                    .map_err(Some)
            };
            progressed |= tally(outcome, &a.proxy_id, worker, &mut done, &mut skipped)?;
        }
        if draining.len() < RELEASE_BATCH || !progressed {
            break;
        }
    }

    done.skipped = skipped.len();
    Ok(done)
}

/// Drains and acknowledges one serving lease. `Err(None)` is never returned here; the
/// `Option` lets the caller fold "assigned after the close" into the same skip path.
async fn release_one(
    pool: &dyn OwnershipRepository,
    now: UnixMillis,
    proxy: &ProxyId,
    worker: &WorkerId,
    epoch: u64,
) -> Result<(), Option<PoolError>> {
    let drained = pool.begin_drain(now, proxy, worker, epoch).await?;
    pool.acknowledge_drain(now, proxy, worker, drained.epoch, 0, 0)
        .await?;
    Ok(())
}

/// Counts one assignment's outcome in both phases: released, or skipped (logged, never
/// retried). A store outage stops the release; `Ok(true)` means one was released.
fn tally(
    outcome: Result<(), Option<PoolError>>,
    proxy: &ProxyId,
    worker: &WorkerId,
    done: &mut Released,
    skipped: &mut BTreeSet<ProxyId>,
) -> PoolResult<bool> {
    match outcome {
        Ok(()) => {
            done.released += 1;
            Ok(true)
        }
        Err(Some(e)) if e.is_unavailable() => Err(e),
        Err(why) => {
            log_skip(proxy, worker, why.as_ref());
            skipped.insert(proxy.clone());
            Ok(false)
        }
    }
}

fn log_skip(proxy: &ProxyId, worker: &WorkerId, why: Option<&PoolError>) {
    match why {
        Some(e) => tracing::info!(%proxy, %worker, "release on session close skipped: {e}"),
        None => tracing::debug!(
            %proxy, %worker,
            "release on session close skipped: assigned after the session closed"
        ),
    }
}
