//! MemoryPool: the reference implementation of every activity-pool port.
//!
//! All state sits behind one mutex, and every port method runs as one critical section
//! without awaiting, so each call is atomic exactly as a Lua script is in Redis. That makes
//! this the executable specification the contract suite checks other adapters against, and
//! the embedded store for one machine.

mod admin;
mod available;
mod cooldown;
mod extract;
mod generation;
mod health;
mod identity;
mod inventory;
mod lease;
mod listing;
mod ownership;
mod runtime;
mod state;
mod ticket;
mod upsert;
mod usage;
mod usage_state;

use proxypool_core::{
    ActivityPool, Conflict, Expectation, Fence, Fencing, PoolError, PoolResult, Unavailable,
    UnixMillis,
};
use state::State;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Work bounds and retention of a MemoryPool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPoolOptions {
    /// Candidates one extraction may examine before it must answer `Unavailable`.
    pub extract_scan_budget: usize,
    /// Records of one upstream an inventory read may examine before it is `Unavailable`.
    pub inventory_scan_budget: usize,
    /// How long an upsert's operation id is remembered.
    pub operation_ttl_ms: u64,
    /// Expired records every write removes on the side, so memory stays bounded even if
    /// nobody runs the maintenance sweep.
    pub opportunistic_cleanup: usize,
}

impl Default for MemoryPoolOptions {
    fn default() -> Self {
        MemoryPoolOptions {
            extract_scan_budget: 10_000,
            inventory_scan_budget: 100_000,
            operation_ttl_ms: 10 * 60 * 1000,
            opportunistic_cleanup: 16,
        }
    }
}

/// The in-memory activity pool. Cheap to share behind an `Arc`.
#[derive(Default)]
pub struct MemoryPool {
    options: MemoryPoolOptions,
    state: Arc<Mutex<State>>,
    /// Set on a handle made by [`Fencing::fenced`]: every call first checks, under the same
    /// lock, that this term's lease is the live one.
    fence: Option<Fence>,
    /// What every call is checked against (`StoreIdentity::expect`), shared by every handle
    /// on the same state.
    expected: Arc<RwLock<Option<Expectation>>>,
}

// Hand-written on purpose: components holding the pool derive `Debug`, and printing them
// must not dump every record (nor take the lock).
impl std::fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryPool")
            .field("options", &self.options)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

impl MemoryPool {
    pub fn new(options: MemoryPoolOptions) -> Self {
        MemoryPool {
            options,
            state: Arc::default(),
            fence: None,
            expected: Arc::default(),
        }
    }

    /// Locks the state without checking the store's identity (the identity port's own
    /// calls).
    fn lock_unchecked(&self) -> PoolResult<MutexGuard<'_, State>> {
        // The one exception to the workspace's recover-from-poisoning policy
        // (`proxypool_core::sync`): a port call is one long critical section over several
        // indexes, so a panic inside it may have left them half-updated. Refuse to serve
        // from that state rather than answer wrongly.
        self.state
            .lock()
            .map_err(|_| PoolError::corrupt("memory pool lock poisoned by an earlier panic"))
    }

    fn lock(&self) -> PoolResult<MutexGuard<'_, State>> {
        let state = self.lock_unchecked()?;
        let expected = self.expected.read().unwrap_or_else(|e| e.into_inner());
        if let Some(expected) = expected.as_ref()
            && let Some(reason) = expected.judge(state.mark.as_ref())
        {
            return Err(PoolError::Unavailable(Unavailable::StoreLost(reason)));
        }
        drop(expected);
        // Reads carry no `now`: a read through a fenced handle only needs the holder and
        // token to be the last ones handed out under the lease's name.
        if let Some(fence) = &self.fence
            && state
                .leases
                .get(&fence.lease)
                .map(|l| (l.holder.as_str(), l.token))
                != Some((fence.holder.as_str(), fence.token))
        {
            return Err(PoolError::Conflict(Conflict::StaleTerm));
        }
        Ok(state)
    }

    /// Locks the state and removes a few expired records first, as every write does. A
    /// fenced handle's write also needs its lease to be live at `now`.
    fn lock_for_write(&self, now: UnixMillis) -> PoolResult<MutexGuard<'_, State>> {
        let mut state = self.lock()?;
        if let Some(fence) = &self.fence
            && !fence.admits(state.leases.get(&fence.lease), now)
        {
            return Err(PoolError::Conflict(Conflict::StaleTerm));
        }
        state.remove_expired_records(now, self.options.opportunistic_cleanup);
        Ok(state)
    }
}

impl Fencing for MemoryPool {
    fn fenced(&self, fence: Fence) -> Arc<dyn ActivityPool> {
        Arc::new(MemoryPool {
            options: self.options,
            state: self.state.clone(),
            fence: Some(fence),
            expected: self.expected.clone(),
        })
    }
}
