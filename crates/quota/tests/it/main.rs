//! The quota's integration tests, one binary; `support` holds the PostgreSQL server of
//! this binary (a fresh database per test), a fault-injecting TCP proxy, scratch
//! directories and the SQL backends as contract factories. One module per concern:
//!
//! - `contract_memory`: the whole quota contract suite against MemoryQuota.
//! - `contract_postgres`: the contract suite against PostgresQuota as its least-privilege
//!   role.
//! - `contract_sqlite`: the contract suite against SqliteQuota (a fresh file per test).
//! - `ledger_roles`: who may write what to the PostgreSQL store ledger: the runtime role
//!   what a controller does, the owner the operator's orders; the upgrade that adds it.
//! - `postgres_only`: PostgreSQL-only behaviour of the quota and the store ledger: replicas
//!   sharing buckets, lost replies, the database clock, faults with time bounds, the role,
//!   the CHECK constraints, the races of the single statement.
//! - `postgres_tls`: the PostgreSQL quota over `sslmode=verify-full` TLS; an unknown server
//!   is refused.
//! - `sqlite_only`: SQLite-only behaviour: the file survives restarts, CHECK constraints,
//!   broken rows and a held write lock are Unavailable within the time bound.

mod support;

mod contract_memory;
mod contract_postgres;
mod contract_sqlite;
mod ledger_roles;
mod postgres_only;
mod postgres_tls;
mod sqlite_only;
