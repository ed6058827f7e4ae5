//! The PostgreSQL backend as a contract-suite factory.

use async_trait::async_trait;
use proxypool_quota::contract::{QuotaFactory, QuotaHarness, StoredBucket};
use proxypool_quota::{Operation, PostgresQuota};

use super::postgres::{
    Database, expire_windows, fresh_database, owner_ledger, quota, shared_server, stored,
};

/// The contract factory: shared server, fresh database, quota as the least-privilege role
/// (so the suite also proves that SELECT/INSERT/UPDATE are enough). The ledger is the
/// owner's: the contract writes entries of every shape, the operator's forced recoveries
/// included, which the runtime role may not (`ledger_roles` tests what it may).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PostgresFactory;

#[derive(Debug)]
pub(crate) struct PostgresHarness {
    quota: PostgresQuota,
    ledger: PostgresQuota,
    database: Database,
}

#[async_trait]
impl QuotaFactory for PostgresFactory {
    type Harness = PostgresHarness;

    async fn create(&self) -> Option<PostgresHarness> {
        let server = shared_server()?;
        let database = fresh_database(server).await;
        Some(PostgresHarness {
            quota: quota(&database.role_url),
            ledger: owner_ledger(&database),
            database,
        })
    }
}

#[async_trait]
impl QuotaHarness for PostgresHarness {
    type Quota = PostgresQuota;

    fn quota(&self) -> &PostgresQuota {
        &self.quota
    }

    type Ledger = PostgresQuota;

    fn ledger(&self) -> &PostgresQuota {
        &self.ledger
    }

    async fn ledger_count(&self) -> u64 {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM proxypool_quota.store_ledger")
            .fetch_one(&self.database.admin)
            .await
            .expect("count ledger entries");
        u64::try_from(count).expect("count >= 0")
    }

    async fn stored(
        &self,
        project: &str,
        subject: &str,
        operation: Operation,
    ) -> Option<StoredBucket> {
        stored(&self.database.admin, project, subject, operation).await
    }

    async fn bucket_count(&self) -> u64 {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM proxypool_quota.quota_buckets")
            .fetch_one(&self.database.admin)
            .await
            .expect("count buckets");
        u64::try_from(count).expect("count >= 0")
    }

    async fn expire_windows(&self) {
        expire_windows(&self.database.admin).await;
    }
}
