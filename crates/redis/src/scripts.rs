//! The Lua scripts, one file per port operation under `src/lua/`, each prefixed with the
//! shared helpers of `lib.lua` (and `owned.lua` / `workers.lua` where needed: Redis
//! scripts cannot import, and each helper costs a closure per call). Sent as EVALSHA; reloaded
//! transparently on NOSCRIPT.

use redis::Script;
use std::fmt;

const LIB: &str = include_str!("lua/lib.lua");
const OWNED: &str = include_str!("lua/owned.lua");
const WORKERS: &str = include_str!("lua/workers.lua");
const USAGE: &str = include_str!("lua/usage.lua");

fn compose(parts: &[&str]) -> Script {
    Script::new(&parts.join("\n"))
}

fn with_lib(body: &str) -> Script {
    compose(&[LIB, body])
}

fn with_owned(body: &str) -> Script {
    compose(&[LIB, OWNED, body])
}

fn with_workers(body: &str) -> Script {
    compose(&[LIB, WORKERS, body])
}

/// Every script of the adapter, loaded once per pool.
pub(crate) struct Scripts {
    pub(crate) upsert: Script,
    pub(crate) health: Script,
    pub(crate) due: Script,
    pub(crate) extract: Script,
    pub(crate) assign: Script,
    pub(crate) renew: Script,
    pub(crate) drain: Script,
    pub(crate) ack_drain: Script,
    pub(crate) expire: Script,
    pub(crate) release_orphaned: Script,
    pub(crate) get: Script,
    pub(crate) assignable: Script,
    pub(crate) owned_by: Script,
    pub(crate) draining_of: Script,
    pub(crate) session_open: Script,
    pub(crate) session_renew: Script,
    pub(crate) session_close: Script,
    pub(crate) session_get: Script,
    pub(crate) sessions_live: Script,
    pub(crate) snapshot_issue: Script,
    pub(crate) snapshot_ack: Script,
    pub(crate) report: Script,
    pub(crate) usage_read: Script,
    pub(crate) runtime_get: Script,
    pub(crate) inventory: Script,
    pub(crate) proxies: Script,
    pub(crate) sweep: Script,
    pub(crate) footprint: Script,
    pub(crate) lease_acquire: Script,
    pub(crate) lease_release: Script,
    pub(crate) lease_current: Script,
    pub(crate) worker_mode_set: Script,
    pub(crate) worker_modes: Script,
    pub(crate) provider_status_put: Script,
    pub(crate) provider_statuses: Script,
    /// `return 1`, without the helpers: the cheapest possible round trip.
    pub(crate) probe: Script,
}

impl Scripts {
    pub(crate) fn load() -> Scripts {
        Scripts {
            upsert: with_lib(include_str!("lua/upsert.lua")),
            health: with_lib(include_str!("lua/health.lua")),
            due: with_lib(include_str!("lua/due.lua")),
            extract: compose(&[LIB, USAGE, include_str!("lua/extract.lua")]),
            assign: with_lib(include_str!("lua/assign.lua")),
            renew: with_owned(include_str!("lua/renew.lua")),
            drain: with_owned(include_str!("lua/drain.lua")),
            ack_drain: compose(&[LIB, OWNED, WORKERS, include_str!("lua/ack_drain.lua")]),
            expire: with_lib(include_str!("lua/expire.lua")),
            release_orphaned: with_workers(include_str!("lua/release_orphaned.lua")),
            get: with_lib(include_str!("lua/get.lua")),
            assignable: with_lib(include_str!("lua/assignable.lua")),
            owned_by: with_lib(include_str!("lua/owned_by.lua")),
            draining_of: with_lib(include_str!("lua/draining_of.lua")),
            session_open: with_workers(include_str!("lua/session_open.lua")),
            session_renew: with_workers(include_str!("lua/session_renew.lua")),
            session_close: with_workers(include_str!("lua/session_close.lua")),
            session_get: with_workers(include_str!("lua/session_get.lua")),
            sessions_live: with_workers(include_str!("lua/sessions_live.lua")),
            snapshot_issue: with_workers(include_str!("lua/snapshot_issue.lua")),
            snapshot_ack: with_workers(include_str!("lua/snapshot_ack.lua")),
            report: compose(&[LIB, WORKERS, USAGE, include_str!("lua/report.lua")]),
            usage_read: with_lib(include_str!("lua/usage_read.lua")),
            runtime_get: with_workers(include_str!("lua/runtime_get.lua")),
            inventory: with_workers(include_str!("lua/inventory.lua")),
            proxies: with_lib(include_str!("lua/proxies.lua")),
            sweep: with_workers(include_str!("lua/sweep.lua")),
            footprint: with_lib(include_str!("lua/footprint.lua")),
            lease_acquire: with_lib(include_str!("lua/lease_acquire.lua")),
            lease_release: with_lib(include_str!("lua/lease_release.lua")),
            lease_current: with_lib(include_str!("lua/lease_current.lua")),
            worker_mode_set: with_lib(include_str!("lua/worker_mode_set.lua")),
            worker_modes: with_lib(include_str!("lua/worker_modes.lua")),
            provider_status_put: with_lib(include_str!("lua/provider_status_put.lua")),
            provider_statuses: with_lib(include_str!("lua/provider_statuses.lua")),
            probe: Script::new(include_str!("lua/probe.lua")),
        }
    }
}

impl fmt::Debug for Scripts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scripts(35 Lua scripts)")
    }
}
