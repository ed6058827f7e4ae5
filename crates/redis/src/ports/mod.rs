//! The Rust half of every port: validation (shared with MemoryPool through core), the
//! script call, and decoding of the reply. One file per port family.

mod admin;
mod cooldown;
pub(crate) mod extract;
mod health;
mod identity;
mod inventory;
mod lease;
mod listing;
mod maintenance;
mod ownership;
mod runtime;
mod ticket;
mod upsert;
mod usage;
