//! The whole quota contract suite against PostgresQuota: a private server per test binary,
//! a fresh database per test, the quota connected as its least-privilege role.

#![cfg(feature = "postgres")]

#[path = "support/postgres.rs"]
mod postgres;
#[path = "support/postgres_contract.rs"]
mod postgres_contract;

use postgres_contract::PostgresFactory;

proxypool_quota::contract_suite!(PostgresFactory);
