//! The activity-pool contract suite.
//!
//! Public async test functions, one module per port family. An adapter runs all of them by
//! implementing [`PoolFactory`] and invoking [`contract_suite!`](crate::contract_suite) in a
//! test file; the macro lists every function once, so every adapter runs the same suite,
//! never a copy. All time is explicit (`now`), so the suite time-travels any store.
//!
//! `factory` holds what an adapter implements, `suite` the macros, `fixtures` the shared
//! helpers. Behind the crate's `contract` feature: the suite is for tests, never in a
//! production build.

pub mod admin;
pub mod cooldowns;
pub mod extract;
mod factory;
pub mod fencing;
pub mod fixtures;
pub mod geo;
pub mod given_back;
pub mod health;
pub mod identity;
pub mod inventory;
pub mod journal;
pub mod lease;
pub mod listing;
pub mod maintenance;
pub mod ownership;
pub mod runtime;
mod suite;
pub mod tickets;
pub mod upsert;
pub mod usage;
pub mod versions;

pub use factory::{PoolFactory, ScanLimits};
