//! proxypool-controller: the control plane of proxypool.
//!
//! Module map:
//! - [`config`]: the TOML configuration, environment overrides, validation, secret refs.
//! - [`controller`]: [`Controller`] / [`RunningController`], what the CLI builds and runs
//!   (`assembly`, `loops`, `running`, `listener`, `gateway_clients`, `error`).
//! - [`store`]: opens the configured activity pool (MemoryPool, or RedisPool single/Sentinel):
//!   `open`, `opened` ([`OpenedStore`], [`StoreOpenError`]), `redis`.
//! - [`leadership`]: who runs the singleton loops ([`AlwaysLeader`] for the memory store,
//!   [`LeaseLeadership`], a fenced lease in the store, for Redis): `term` ([`Term`],
//!   [`Leadership`]), `rounds`, `term_store`, `always`, `lease`, `holder`, `job`.
//! - [`clock`]: the one place `now` is read ([`SystemClock`], [`ManualClock`] for tests).
//! - [`provider`]: the provider reconciler (vendor fetch, list formats, chunked upsert).
//! - [`checker`]: the health checker (dials through proxies with `proxypool-proto`).
//! - [`upstream_tls`]: the TLS to `https` proxies, shipped in snapshots and used by the
//!   checker.
//! - [`ownership`]: the ownership manager (balanced leases, renewals, drains, expiry).
//! - [`snapshot`]: the snapshot publisher's driver (reads, long-poll waits) over the decisions
//!   of `proxypool_snapshot::publisher`.
//! - [`api`]: the worker control API (axum): `router`, `state` ([`api::ControlState`]),
//!   `handlers`, `auth`, `body`, `error`, `request_id`.
//! - [`maintenance`]: the bounded sweep of expired state.
//! - [`metrics`]: the controller's metric names and helpers, the pool/worker/leadership
//!   gauges, and the activity pool timed per call ([`metrics::metered::MeteredPool`]).
//!
//! No lock is held across an `.await`; shared status lives in small std-mutex maps that are
//! copied out, and change notifications go through watch channels.

pub mod api;
pub mod checker;
pub mod clock;
pub mod config;
pub mod controller;
mod jitter;
pub mod leadership;
pub mod maintenance;
pub mod metrics;
pub mod ownership;
pub mod provider;
pub mod snapshot;
pub mod store;
pub mod upstream_tls;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use config::{Config, ConfigError, Env};
pub use controller::{Controller, ControllerError, RunningController, serve_limits, server_tls};
pub use leadership::{AlwaysLeader, Leadership, LeaseLeadership, LeaseOptions, Term};
pub use store::{
    GUARD_INTERVAL, OpenedStore, StoreGuard, StoreOpenError, open_store, recovery_hold_ms,
};
