//! The controller's integration tests, one binary; `common` holds the shared helpers (a
//! control API client, configs, pool seeding) and `common::e2e` the end-to-end scenario.
//! One module per concern:
//!
//! - `backconnect`: backconnect sessions kept, checked, handed out and replaced.
//! - `checker`: the health checker through real proxies: alive, dead, slow, refused.
//! - `control_api`: the worker control API: fencing, authentication, long-poll, reports.
//! - `cooldowns`: cooldowns and session feedback from reports back into snapshots.
//! - `edges`: the control API's listener under hostile connections.
//! - `end_to_end`: the end-to-end scenario on the memory store.
//! - `fleet`: the gateway fleet's members in report answers and at the fleet path.
//! - `leadership`: lease leadership in paused time; singleton loops parking and resuming.
//! - `ownership`: assign, renew, drain and expire across two workers.
//! - `proxy_tls`: an upstream's proxy TLS settings reach every gateway's snapshot.
//! - `reconciler`: the provider reconciler against a simulated vendor endpoint.
//! - `redis_store`: controllers on a private Redis: the scenario, and lease failover.
//! - `redis_tls`: the activity pool over `rediss://` with and without the server's CA.
//! - `store_loss`: the store guard noticing a Redis that came back empty or older.
//! - `vendor_apis`: paginated, authenticated vendor list APIs over real sockets.
//! - `vendor_lists`: vendor lists over https and the entry rules.
//! - `webshare`: a Webshare-shaped list API read with the configuration its docs show.
//!
//! One exception runs in a process of its own, the `recorder` binary: `snapshot_deltas`
//! and `snapshot_versions` assert counter values of the process's one metrics recorder,
//! which every controller here would add to.

mod common;

mod backconnect;
mod checker;
mod control_api;
mod cooldowns;
mod edges;
mod end_to_end;
mod fleet;
mod leadership;
mod ownership;
mod proxy_tls;
mod reconciler;
mod redis_store;
mod redis_tls;
mod store_loss;
mod vendor_apis;
mod vendor_lists;
mod webshare;
