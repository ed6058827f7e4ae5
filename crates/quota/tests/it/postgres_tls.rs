//! The PostgreSQL quota over TLS with `sslmode=verify-full`, on a private cluster with
//! `ssl = on` and a certificate of a test CA: migrations and decisions run over an
//! encrypted session, and a server the configured root does not vouch for is refused.

#![cfg(feature = "postgres")]

use proxypool_quota::contract::fixtures::{PROJECT, command, consume, limits};
use proxypool_quota::postgres::migrate_url;
use proxypool_quota::{Operation, PostgresQuota, PostgresSettings, QuotaDecision};
use proxypool_testkit::{TestCa, private_postgres_tls_or_skip};
use sqlx::postgres::PgPoolOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_runs_over_verify_full_tls_and_refuses_an_unknown_server() {
    let ca = TestCa::new("postgres ca").unwrap();
    let Some(server) = private_postgres_tls_or_skip(&ca) else {
        return;
    };
    let url = server.tls_url().unwrap();
    migrate_url(&url, None).await.expect("migrations over TLS");

    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(ssl, "the session is not encrypted");
    pool.close().await;

    let quota = PostgresQuota::connect_lazy(&PostgresSettings::new(url.clone())).unwrap();
    let decision = consume(
        &quota,
        &command(PROJECT, "tls-client", Operation::Extract, "req:1"),
        limits(5),
    )
    .await;
    assert!(
        matches!(decision, QuotaDecision::Admitted { .. }),
        "{decision:?}"
    );

    let stranger = TestCa::new("not the server's").unwrap();
    let wrong_root = url.replace(
        &ca.ca_path().display().to_string(),
        &stranger.ca_path().display().to_string(),
    );
    let refused = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect(&wrong_root)
        .await;
    assert!(
        refused.is_err(),
        "a server certificate from another CA was accepted"
    );
}
