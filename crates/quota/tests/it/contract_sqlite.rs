//! The whole quota contract suite against SqliteQuota (a fresh file per test).

#![cfg(feature = "sqlite")]

use crate::support::sqlite::SqliteFactory;

proxypool_quota::contract_suite!(SqliteFactory);
