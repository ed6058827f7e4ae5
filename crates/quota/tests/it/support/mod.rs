//! Shared by the quota tests: the PostgreSQL server of this binary and its fresh
//! databases, a fault-injecting TCP proxy, scratch directories, and the SQL backends as
//! contract-suite factories.

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "postgres")]
pub(crate) mod postgres_contract;
#[cfg(feature = "postgres")]
pub(crate) mod proxy;
#[cfg(feature = "sqlite")]
pub(crate) mod scratch;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
