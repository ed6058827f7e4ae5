//! PostgreSQL for the quota tests: one server per test binary, a fresh database, migrated
//! by the superuser, and a least-privilege role per quota.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use proxypool_quota::contract::StoredBucket;
use proxypool_quota::postgres::{create_quota_role, migrate};
use proxypool_quota::{Operation, PostgresQuota, PostgresSettings};
use proxypool_testkit::PostgresServer;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// The shared server of this test binary (`None`: skipped, the testkit said so loudly).
/// A static is never dropped; the testkit's janitor stops the server when the process ends.
pub(crate) fn shared_server() -> Option<&'static PostgresServer> {
    static SERVER: OnceLock<Option<PostgresServer>> = OnceLock::new();
    SERVER
        .get_or_init(proxypool_testkit::postgres_or_skip)
        .as_ref()
}

/// A fresh database on `server`: migrated, with a quota role of its own.
#[derive(Debug)]
pub(crate) struct Database {
    /// The superuser, connected to the database (for looking and for fault injection).
    pub(crate) admin: PgPool,
    /// The superuser's URL of the database (what an operator connects with).
    pub(crate) admin_url: String,
    /// The least-privilege role's URL.
    pub(crate) role_url: String,
}

pub(crate) async fn fresh_database(server: &PostgresServer) -> Database {
    let database = empty_database(server).await;
    migrate(&database.admin).await.expect("migrate");
    with_quota_role(database).await
}

/// A fresh database on `server` with nothing in it yet; `role_url` names the role
/// [`with_quota_role`] creates.
pub(crate) async fn empty_database(server: &PostgresServer) -> Database {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let suffix = format!(
        "{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let name = format!("quota_{suffix}");
    let admin_url = server.create_database(&name).expect("create database");
    let admin = PgPoolOptions::new()
        .max_connections(2)
        .connect(&admin_url)
        .await
        .expect("connect as superuser");
    Database {
        admin,
        admin_url,
        role_url: server.url_for(&name, &format!("quota_role_{suffix}")),
    }
}

/// Creates the quota role `database.role_url` names (after the migrations).
pub(crate) async fn with_quota_role(database: Database) -> Database {
    let after_scheme = database.role_url.split("://").nth(1).expect("scheme");
    let role = after_scheme.split('@').next().expect("user").to_owned();
    create_quota_role(&database.admin, &role, None)
        .await
        .expect("create the quota role");
    database
}

/// The store ledger as the database's owner: the operator's orders pass, as do the
/// contract suite's writes of every shape.
pub(crate) fn owner_ledger(database: &Database) -> PostgresQuota {
    PostgresQuota::from_pool(database.admin.clone(), std::time::Duration::from_secs(5))
}

/// A quota on `url` with test-sized timeouts.
pub(crate) fn quota(url: &str) -> PostgresQuota {
    PostgresQuota::connect_lazy(&PostgresSettings::new(url)).expect("quota URL")
}

/// Reads a bucket as the superuser.
pub(crate) async fn stored(
    admin: &PgPool,
    project: &str,
    subject: &str,
    operation: Operation,
) -> Option<StoredBucket> {
    let (count, window_started_at_ms, receipt_ids): (i32, i64, Vec<String>) = sqlx::query_as(
        "SELECT consumed_count, window_started_at_ms, \
                ARRAY(SELECT receipt FROM jsonb_array_elements_text(receipt_ids) \
                      WITH ORDINALITY AS element(receipt, position) ORDER BY position) \
         FROM proxypool_quota.quota_buckets \
         WHERE project_id = $1 AND subject_id = $2 AND operation = $3",
    )
    .bind(project)
    .bind(subject)
    .bind(operation.as_str())
    .fetch_optional(admin)
    .await
    .expect("read bucket")?;
    Some(StoredBucket {
        consumed_count: u32::try_from(count).expect("count >= 0"),
        receipt_ids,
        window_started_at_ms: u64::try_from(window_started_at_ms).expect("window start >= 0"),
    })
}

/// Moves every stored window back by the longest window, as the seed's tests do: the next
/// decision sees an older window on the database clock and resets it.
pub(crate) async fn expire_windows(admin: &PgPool) {
    sqlx::query(
        "UPDATE proxypool_quota.quota_buckets \
         SET window_started_at_ms = window_started_at_ms - 300000, \
             updated_at_ms = updated_at_ms - 300000",
    )
    .execute(admin)
    .await
    .expect("move windows back");
}
