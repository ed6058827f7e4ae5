//! The whole quota contract suite against SqliteQuota (a fresh file per test).

#![cfg(feature = "sqlite")]

#[path = "support/scratch.rs"]
mod scratch;
#[path = "support/sqlite.rs"]
mod sqlite;

use sqlite::SqliteFactory;

proxypool_quota::contract_suite!(SqliteFactory);
