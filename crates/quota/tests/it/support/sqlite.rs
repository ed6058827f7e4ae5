//! The SQLite backend as a contract-suite factory: a fresh file per quota.

use async_trait::async_trait;
use proxypool_quota::contract::{QuotaFactory, QuotaHarness, StoredBucket};
use proxypool_quota::{Operation, SqliteQuota, SqliteSettings};

use super::scratch::ScratchDir;

/// Every contract quota gets its own database file in its own scratch directory.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SqliteFactory;

/// The quota, and the directory its file lives in (removed when the harness drops).
#[derive(Debug)]
pub(crate) struct SqliteHarness {
    pub(crate) quota: SqliteQuota,
    // Held for its Drop: the file goes away with the harness.
    _dir: ScratchDir,
}

#[async_trait]
impl QuotaFactory for SqliteFactory {
    type Harness = SqliteHarness;

    async fn create(&self) -> Option<SqliteHarness> {
        let dir = ScratchDir::new("sqlite");
        let settings = SqliteSettings::new(dir.path().join("quota.db"));
        let quota = SqliteQuota::open(&settings)
            .await
            .expect("open the SQLite quota");
        Some(SqliteHarness { quota, _dir: dir })
    }
}

/// Reads a bucket straight from the file (the suite's view of the store).
pub(crate) async fn stored(
    pool: &sqlx::SqlitePool,
    project: &str,
    subject: &str,
    operation: Operation,
) -> Option<StoredBucket> {
    let (count, window_started_at_ms): (i64, i64) = sqlx::query_as(
        "SELECT consumed_count, window_started_at_ms FROM quota_buckets \
         WHERE project_id = ?1 AND subject_id = ?2 AND operation = ?3",
    )
    .bind(project)
    .bind(subject)
    .bind(operation.as_str())
    .fetch_optional(pool)
    .await
    .expect("read bucket")?;
    let receipt_ids: Vec<String> = sqlx::query_scalar(
        "SELECT receipt.value FROM quota_buckets, json_each(quota_buckets.receipt_ids) AS receipt \
         WHERE project_id = ?1 AND subject_id = ?2 AND operation = ?3 ORDER BY receipt.key",
    )
    .bind(project)
    .bind(subject)
    .bind(operation.as_str())
    .fetch_all(pool)
    .await
    .expect("read receipts");
    Some(StoredBucket {
        consumed_count: u32::try_from(count).expect("count fits"),
        receipt_ids,
        window_started_at_ms: u64::try_from(window_started_at_ms).expect("window start >= 0"),
    })
}

#[async_trait]
impl QuotaHarness for SqliteHarness {
    type Quota = SqliteQuota;

    fn quota(&self) -> &SqliteQuota {
        &self.quota
    }

    type Ledger = SqliteQuota;

    fn ledger(&self) -> &SqliteQuota {
        &self.quota
    }

    async fn ledger_count(&self) -> u64 {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM store_ledger")
            .fetch_one(self.quota.pool())
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
        stored(self.quota.pool(), project, subject, operation).await
    }

    async fn bucket_count(&self) -> u64 {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM quota_buckets")
            .fetch_one(self.quota.pool())
            .await
            .expect("count buckets");
        u64::try_from(count).expect("count >= 0")
    }

    async fn expire_windows(&self) {
        // Move every stored window back by the longest window, as the seed's tests do:
        // the next decision sees a window older than the current one on SQLite's clock.
        sqlx::query(
            "UPDATE quota_buckets SET window_started_at_ms = window_started_at_ms - 300000, \
             updated_at_ms = updated_at_ms - 300000",
        )
        .execute(self.quota.pool())
        .await
        .expect("move windows back");
    }
}
