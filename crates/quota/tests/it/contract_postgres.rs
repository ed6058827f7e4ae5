//! The whole quota contract suite against PostgresQuota: the binary's private server,
//! a fresh database per test, the quota connected as its least-privilege role.

#![cfg(feature = "postgres")]

use crate::support::postgres_contract::PostgresFactory;

proxypool_quota::contract_suite!(PostgresFactory);
