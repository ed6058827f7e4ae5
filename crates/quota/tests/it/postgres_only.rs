//! PostgreSQL-only behaviour of the quota, on private servers: replicas sharing buckets,
//! lost replies, the database clock, faults with time bounds, the least-privilege role, the
//! CHECK constraints, and the races the single statement has to get right; and of the store
//! ledger: its constraints, broken rows, an unreachable server.

#![cfg(feature = "postgres")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::postgres::{
    expire_windows, fresh_database, owner_ledger, quota, shared_server, stored,
};
use crate::support::proxy::{FaultProxy, Mode};
use proxypool_core::store_mark::{LedgerEntry, LossReason, Recovery, StoreLedger};
use proxypool_core::{PoolError, Unavailable};
use proxypool_quota::contract::fixtures::{
    OneWindow, PROJECT, WINDOW_MS, command, consume, in_one_window, limits, remaining, retry_after,
};
use proxypool_quota::postgres::{create_quota_role, migrate};
use proxypool_quota::{
    Operation, PostgresQuota, PostgresSettings, QuotaDecision, QuotaPort as _, UnavailableReason,
};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::Barrier;

/// The upper bound asserted on a decision whose own bound is 1 s: generous for a loaded
/// 2-core machine running several test binaries, still far from a hang or from sqlx's
/// 30 s default acquire timeout.
const SLACK_BOUND: Duration = Duration::from_secs(3);

/// A quota with short, explicit time bounds for the fault tests.
fn bounded_quota(url: &str, max_connections: u32) -> PostgresQuota {
    let settings = PostgresSettings {
        max_connections,
        acquire_timeout: Duration::from_millis(500),
        statement_timeout: Duration::from_secs(1),
        decision_timeout: Duration::from_secs(1),
        ..PostgresSettings::new(url)
    };
    PostgresQuota::connect_lazy(&settings).expect("quota URL")
}

/// `url` pointed at another port on the same host (the fault proxy).
fn via_port(url: &str, server_port: u16, port: u16) -> String {
    let proxied = url.replace(&format!(":{server_port}/"), &format!(":{port}/"));
    assert_ne!(proxied, url, "the URL names the server port");
    proxied
}

fn is_unavailable(decision: &QuotaDecision) -> bool {
    matches!(decision, QuotaDecision::Unavailable { .. })
}

/// Waits (bounded, polling the server) until a session of `role` waits on a lock.
async fn until_waiting_on_lock(admin: &PgPool, role: &str) {
    proxypool_testkit::eventually_async(
        "the decision waiting on the lock",
        Duration::from_secs(10),
        || async move {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'",
            )
            .bind(role)
            .fetch_one(admin)
            .await
            .expect("pg_stat_activity");
            (waiting > 0).then_some(())
        },
    )
    .await;
}

/// Waits (bounded) until `idle` connections sit in the quota's pool: the pool pings each
/// connection it takes back, and a test that cuts the network must not cut that ping.
async fn until_idle(quota: &PostgresQuota, idle: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while quota.pool().num_idle() != idle {
        assert!(
            Instant::now() < deadline,
            "the connection never came back to the pool"
        );
        tokio::task::yield_now().await;
    }
}

fn role_of(url: &str) -> String {
    let after_scheme = url.split("://").nth(1).expect("scheme");
    after_scheme.split('@').next().expect("user").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_admit_exactly_the_limit_and_replays_are_free() {
    let limits = limits(8);
    const CALLERS: usize = 16;
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    // Two independent pools, as two controller replicas would have.
    let replicas = [
        bounded_quota(&database.role_url, 8),
        bounded_quota(&database.role_url, 8),
    ];
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let barrier = Arc::new(Barrier::new(CALLERS));
        let mut tasks = tokio::task::JoinSet::new();
        for caller in 0..CALLERS {
            let replica = caller % 2;
            let quota = replicas[replica].clone();
            let barrier = barrier.clone();
            let command = command(
                PROJECT,
                &subject,
                Operation::Inspect,
                &format!("i{caller:02}"),
            );
            tasks.spawn(async move {
                barrier.wait().await;
                (
                    replica,
                    command.clone(),
                    consume(&quota, &command, limits).await,
                )
            });
        }
        let mut window = OneWindow::default();
        let (mut admitted, mut exceeded) = (Vec::new(), 0);
        while let Some(joined) = tasks.join_next().await {
            let (replica, command, decision) = joined.expect("caller");
            window.check(&decision)?;
            match decision {
                QuotaDecision::Admitted { .. } => admitted.push((replica, command)),
                _ => exceeded += 1,
            }
        }
        assert_eq!(
            (admitted.len(), exceeded),
            (8, 8),
            "exactly the limit across replicas"
        );
        let before = stored(&database.admin, PROJECT, &subject, Operation::Inspect)
            .await
            .unwrap();
        assert_eq!(before.consumed_count, 8);

        // An admitted receipt replayed through the other replica: admitted, not charged.
        let (replica, replayed) = &admitted[0];
        let replay = consume(&replicas[1 - replica], replayed, limits).await;
        window.check(&replay)?;
        assert_eq!(remaining(&replay), 0);
        let after = stored(&database.admin, PROJECT, &subject, Operation::Inspect)
            .await
            .unwrap();
        assert_eq!(after, before, "a replay changes nothing");
        let fresh = consume(
            &replicas[0],
            &command(PROJECT, &subject, Operation::Inspect, "late"),
            limits,
        )
        .await;
        window.check(&fresh)?;
        retry_after(&fresh);
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_lost_after_commit_is_replayed_without_a_second_charge() {
    let limits = limits(5);
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let proxy = FaultProxy::start(server.port()).await;
    let proxied = via_port(&database.role_url, server.port(), proxy.port());
    let quota = bounded_quota(&proxied, 1);
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        // Warm the one connection with the decision statement, so the lost exchange below
        // is Bind/Execute/Sync of a prepared statement: the server runs it to the commit.
        let warm = consume(
            &quota,
            &command(PROJECT, &format!("warm-{attempt}"), Operation::Extract, "w"),
            limits,
        )
        .await;
        window.check(&warm)?;
        // The pool pings a connection as it takes it back; that exchange must be over
        // before replies are cut, or the cut lands on the ping instead of the decision.
        until_idle(&quota, 1).await;

        proxy.set(Mode::CutReplies);
        let lost = command(PROJECT, &subject, Operation::Extract, "idem-lost");
        let decision = consume(&quota, &lost, limits).await;
        assert!(
            is_unavailable(&decision),
            "the client cannot know: {decision:?}"
        );
        proxy.set(Mode::Pass);

        // The server committed although the client never heard back (bounded wait: the
        // backend may still be finishing the statement when the client gives up).
        let committed = proxypool_testkit::eventually_async(
            "the lost statement committed",
            Duration::from_secs(5),
            || stored(&database.admin, PROJECT, &subject, Operation::Extract),
        )
        .await;
        assert_eq!(
            (committed.consumed_count, committed.receipt_ids.clone()),
            (1, vec!["idem-lost".to_owned()])
        );

        // Replaying the same receipt, through the same pool and through another replica.
        for replayer in [&quota, &bounded_quota(&database.role_url, 1)] {
            let replay = consume(replayer, &lost, limits).await;
            window.check(&replay)?;
            assert_eq!(remaining(&replay), 4, "charged once");
        }
        let after = stored(&database.admin, PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(after.consumed_count, 1);
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_reset_is_driven_by_the_database_clock() {
    let limits = limits(2);
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let quota = quota(&database.role_url);
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let decide = async |receipt: &str| {
            consume(
                &quota,
                &command(PROJECT, &subject, Operation::Admin, receipt),
                limits,
            )
            .await
        };
        let mut window = OneWindow::default();
        for receipt in ["a", "b"] {
            let decision = decide(receipt).await;
            window.check(&decision)?;
            remaining(&decision);
        }
        let full = decide("c").await;
        window.check(&full)?;
        retry_after(&full);

        // Move the stored window back, as the seed's test did; only the database clock
        // decides that it has ended.
        expire_windows(&database.admin).await;
        let reset = decide("c").await;
        let mut after = OneWindow::default();
        after.check(&reset)?;
        assert_eq!(remaining(&reset), 1);
        let bucket = stored(&database.admin, PROJECT, &subject, Operation::Admin)
            .await
            .unwrap();
        assert_eq!(
            (bucket.consumed_count, bucket.receipt_ids.clone()),
            (1, vec!["c".to_owned()])
        );
        let database_now: i64 = sqlx::query_scalar(
            "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint",
        )
        .fetch_one(&database.admin)
        .await
        .unwrap();
        let database_now = u64::try_from(database_now).unwrap();
        let aligned = database_now - database_now % WINDOW_MS;
        if bucket.window_started_at_ms != aligned {
            return Err(proxypool_quota::contract::fixtures::Crossed);
        }
        assert_eq!(reset.reset_at_ms(), Some(aligned + WINDOW_MS));
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_server_is_unavailable_within_the_timeout_then_works_again() {
    let limits = limits(5);
    let Some(mut server) = proxypool_testkit::private_postgres_or_skip() else {
        return;
    };
    let database = fresh_database(&server).await;
    let quota = bounded_quota(&database.role_url, 2);
    let before = command(PROJECT, "client-1", Operation::Extract, "before-stop");
    assert!(consume(&quota, &before, limits).await.is_admitted());
    assert!(quota.ready().await, "a running server is ready");

    server.stop().expect("stop the server");
    let started = Instant::now();
    assert!(!quota.ready().await, "a stopped server is not ready");
    assert!(
        started.elapsed() < SLACK_BOUND,
        "readiness took {:?}",
        started.elapsed()
    );
    for receipt in ["while-down-1", "while-down-2"] {
        let started = Instant::now();
        let decision = consume(
            &quota,
            &command(PROJECT, "client-1", Operation::Extract, receipt),
            limits,
        )
        .await;
        let took = started.elapsed();
        assert!(is_unavailable(&decision), "{decision:?}");
        assert!(took < SLACK_BOUND, "took {took:?}");
    }

    server.start_again().expect("start the server again");
    assert!(quota.ready().await, "ready again after the restart");
    // The same pool, not rebuilt: a new receipt is decided, the old one replays.
    let after = consume(
        &quota,
        &command(PROJECT, "client-1", Operation::Extract, "after-restart"),
        limits,
    )
    .await;
    let replay = consume(&quota, &before, limits).await;
    let window_unchanged = after.reset_at_ms() == replay.reset_at_ms();
    assert!(
        after.is_admitted() && replay.is_admitted(),
        "{after:?} {replay:?}"
    );
    if window_unchanged {
        assert_eq!(
            remaining(&replay),
            remaining(&after),
            "the replay is not charged"
        );
    }
    drop(database);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_server_is_unavailable_within_the_timeout_and_frees_the_connection() {
    let limits = limits(5);
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let proxy = FaultProxy::start(server.port()).await;
    let proxied = via_port(&database.role_url, server.port(), proxy.port());
    // One connection: if the abandoned one were not closed, the next decision could not run.
    let quota = bounded_quota(&proxied, 1);
    assert!(
        consume(
            &quota,
            &command(PROJECT, "client-1", Operation::Extract, "r1"),
            limits
        )
        .await
        .is_admitted()
    );

    // As above: the connection must be back in the pool before the server goes silent.
    until_idle(&quota, 1).await;
    proxy.set(Mode::Blackhole);
    let started = Instant::now();
    let decision = consume(
        &quota,
        &command(PROJECT, "client-1", Operation::Extract, "r2"),
        limits,
    )
    .await;
    let took = started.elapsed();
    assert_eq!(
        decision,
        QuotaDecision::unavailable(UnavailableReason::Timeout)
    );
    assert!(
        took >= Duration::from_millis(900) && took < SLACK_BOUND,
        "took {took:?}"
    );

    proxy.set(Mode::Pass);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let decision = consume(
            &quota,
            &command(PROJECT, "client-1", Operation::Extract, "r3"),
            limits,
        )
        .await;
        if decision.is_admitted() {
            break;
        }
        // The pool slot comes back once the abandoned connection is closed (bounded by
        // sqlx's close-on-drop timeout); until then a decision may time out acquiring.
        assert!(
            Instant::now() < deadline,
            "the pool never recovered: {decision:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_role_may_only_select_insert_and_update() {
    let limits = limits(5);
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let role_pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&database.role_url)
        .await
        .expect("connect as the quota role");
    // What it needs works.
    let quota = quota(&database.role_url);
    assert!(
        consume(
            &quota,
            &command(PROJECT, "s", Operation::Extract, "r"),
            limits
        )
        .await
        .is_admitted()
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM proxypool_quota.quota_buckets")
        .fetch_one(&role_pool)
        .await
        .expect("SELECT is granted");
    assert_eq!(rows, 1);

    let server_version: i32 =
        sqlx::query_scalar("SELECT current_setting('server_version_num')::int")
            .fetch_one(&role_pool)
            .await
            .unwrap();
    let mut forbidden = vec![
        "DELETE FROM proxypool_quota.quota_buckets",
        "TRUNCATE proxypool_quota.quota_buckets",
        "DROP TABLE proxypool_quota.quota_buckets",
        "DELETE FROM proxypool_quota.store_ledger",
        "TRUNCATE proxypool_quota.store_ledger",
        "DROP TABLE proxypool_quota.store_ledger",
        "ALTER TABLE proxypool_quota.quota_buckets DROP CONSTRAINT quota_buckets_consumed_count_range",
        "CREATE TABLE proxypool_quota.sneaky (x int)",
        "CREATE SCHEMA sneaky",
        "DROP SCHEMA proxypool_quota CASCADE",
        "SELECT * FROM proxypool_quota._sqlx_migrations",
        "CREATE ROLE sneaky",
    ];
    // Before PostgreSQL 15 every role may create in `public`; ours is no exception there.
    if server_version >= 150_000 {
        forbidden.push("CREATE TABLE public.sneaky (x int)");
    }
    for statement in forbidden {
        let error = sqlx::query(statement)
            .execute(&role_pool)
            .await
            .expect_err(statement);
        let code = error
            .as_database_error()
            .and_then(|error| error.code())
            .map(|code| code.into_owned());
        assert_eq!(code.as_deref(), Some("42501"), "{statement}: {error}");
    }
    let (superuser, create_role, create_db, inherit): (bool, bool, bool, bool) = sqlx::query_as(
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolinherit FROM pg_roles WHERE rolname = $1",
    )
    .bind(role_of(&database.role_url))
    .fetch_one(&database.admin)
    .await
    .unwrap();
    assert_eq!(
        (superuser, create_role, create_db, inherit),
        (false, false, false, false)
    );
    assert_eq!(rows, 1, "nothing was deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_and_role_setup_are_idempotent() {
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    migrate(&database.admin).await.expect("second migrate");
    create_quota_role(
        &database.admin,
        &role_of(&database.role_url),
        Some("s3cret'\"pw"),
    )
    .await
    .expect("re-assert the role, with an awkward password");
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM proxypool_quota._sqlx_migrations")
        .fetch_one(&database.admin)
        .await
        .unwrap();
    assert_eq!(applied, 4);
    let privileges: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, privilege_type::text FROM information_schema.role_table_grants \
         WHERE grantee = $1 AND table_schema = 'proxypool_quota' \
         ORDER BY table_name, privilege_type",
    )
    .bind(role_of(&database.role_url))
    .fetch_all(&database.admin)
    .await
    .unwrap();
    let granted = |table: &str, privilege: &str| (table.to_owned(), privilege.to_owned());
    assert_eq!(
        privileges,
        [
            granted("quota_buckets", "INSERT"),
            granted("quota_buckets", "SELECT"),
            granted("quota_buckets", "UPDATE"),
            granted("store_ledger", "INSERT"),
            granted("store_ledger", "SELECT"),
            granted("store_ledger", "UPDATE"),
        ]
    );
    assert!(
        create_quota_role(&database.admin, "Bad-Name", None)
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_constraints_reject_rows_that_break_the_invariants() {
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let insert = |project: &str,
                  subject: &str,
                  operation: &str,
                  start: &str,
                  count: &str,
                  receipts: &str,
                  updated: &str| {
        format!(
            "INSERT INTO proxypool_quota.quota_buckets VALUES \
             ('{project}', {subject}, '{operation}', {start}, {count}, {receipts}, {updated})"
        )
    };
    let huge = format!("jsonb_build_array(repeat('x', {}))", 327_680);
    let broken = [
        insert("p", "'s'", "extract", "0", "-1", "'[]'", "0"),
        insert("p", "'s'", "extract", "0", "0", "'[\"a\"]'", "0"),
        insert(
            "p",
            "'s'",
            "extract",
            "0",
            "1001",
            "(SELECT jsonb_agg(g::text) FROM generate_series(1, 1001) g)",
            "0",
        ),
        insert("p", "'s'", "extract", "0", "2", "'[\"a\"]'", "0"),
        insert("p", "'s'", "extract", "0", "1", "'{\"a\": 1}'", "0"),
        insert("p", "'s'", "delete", "0", "1", "'[\"a\"]'", "0"),
        insert(
            &"p".repeat(129),
            "'s'",
            "extract",
            "0",
            "1",
            "'[\"a\"]'",
            "0",
        ),
        insert(
            "p",
            "repeat('s', 256)",
            "extract",
            "0",
            "1",
            "'[\"a\"]'",
            "0",
        ),
        insert("p", "''", "extract", "0", "1", "'[\"a\"]'", "0"),
        insert("p", "'s'", "extract", "-1", "1", "'[\"a\"]'", "0"),
        insert("p", "'s'", "extract", "10", "1", "'[\"a\"]'", "9"),
        insert("p", "'s'", "extract", "0", "1", &huge, "0"),
    ];
    for statement in &broken {
        let error = sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&database.admin)
            .await
            .expect_err(statement);
        let code = error
            .as_database_error()
            .and_then(|error| error.code())
            .map(|code| code.into_owned());
        assert_eq!(code.as_deref(), Some("23514"), "{statement}: {error}");
    }
    // The same shape with valid values is accepted: the constraints are not just refusing.
    // An empty bucket is valid too: a refund can leave one.
    for (subject, count, receipts) in [("'s'", "1", "'[\"a\"]'"), ("'empty'", "0", "'[]'")] {
        sqlx::query(sqlx::AssertSqlSafe(insert(
            "p", subject, "extract", "0", count, receipts, "0",
        )))
        .execute(&database.admin)
        .await
        .expect("a valid row");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_or_future_rows_are_unavailable_never_admitted() {
    let limits = limits(5);
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let quota = quota(&database.role_url);
    let first = command(PROJECT, "broken", Operation::Extract, "r1");
    assert!(consume(&quota, &first, limits).await.is_admitted());
    // Someone dropped a constraint and broke the row: count and receipts disagree.
    sqlx::query(
        "ALTER TABLE proxypool_quota.quota_buckets DROP CONSTRAINT quota_buckets_receipts_match_count",
    )
    .execute(&database.admin)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE proxypool_quota.quota_buckets SET consumed_count = 2 WHERE subject_id = 'broken'",
    )
    .execute(&database.admin)
    .await
    .unwrap();
    assert_eq!(
        consume(&quota, &first, limits).await,
        QuotaDecision::unavailable(UnavailableReason::MalformedResult)
    );

    // A window that starts in the future (a clock that went back): never an admission.
    let skewed = command(PROJECT, "skewed", Operation::Extract, "r1");
    assert!(consume(&quota, &skewed, limits).await.is_admitted());
    sqlx::query(
        "UPDATE proxypool_quota.quota_buckets \
         SET window_started_at_ms = window_started_at_ms + 3000000, \
             updated_at_ms = updated_at_ms + 3000000 \
         WHERE subject_id = 'skewed'",
    )
    .execute(&database.admin)
    .await
    .unwrap();
    for receipt in ["r1", "r2"] {
        let decision = consume(
            &quota,
            &command(PROJECT, "skewed", Operation::Extract, receipt),
            limits,
        )
        .await;
        assert_eq!(
            decision,
            QuotaDecision::unavailable(UnavailableReason::MalformedResult)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_bucket_inserted_concurrently_is_read_again_and_denied() {
    let limits = limits(1);
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let quota = quota(&database.role_url);
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        // Another transaction inserts the bucket, full, and holds it uncommitted.
        let mut other = database.admin.begin().await.unwrap();
        sqlx::query(
            "INSERT INTO proxypool_quota.quota_buckets \
             SELECT $1, $2, 'extract', now_ms - now_ms % 300000, 1, '[\"theirs\"]', now_ms \
             FROM (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms) clock",
        )
        .bind(PROJECT)
        .bind(&subject)
        .execute(&mut *other)
        .await
        .unwrap();
        // Our decision starts (its snapshot cannot see that row) and waits on it.
        let decision = tokio::spawn({
            let (quota, command) = (quota.clone(), command(PROJECT, &subject, Operation::Extract, "mine"));
            async move { consume(&quota, &command, limits).await }
        });
        until_waiting_on_lock(&database.admin, &role_of(&database.role_url)).await;
        other.commit().await.unwrap();
        let decision = decision.await.unwrap();
        OneWindow::default().check(&decision)?;
        assert!(matches!(decision, QuotaDecision::Exceeded { .. }), "{decision:?}");
        let bucket = stored(&database.admin, PROJECT, &subject, Operation::Extract).await.unwrap();
        assert_eq!(bucket.receipt_ids, ["theirs"]);
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_filled_concurrently_is_decided_on_its_latest_version() {
    let limits = limits(2);
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let quota = quota(&database.role_url);
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let first = consume(
            &quota,
            &command(PROJECT, &subject, Operation::Extract, "a"),
            limits,
        )
        .await;
        window.check(&first)?;
        // Another transaction takes the last slot and holds the row.
        let mut other = database.admin.begin().await.unwrap();
        sqlx::query(
            "UPDATE proxypool_quota.quota_buckets \
             SET consumed_count = 2, receipt_ids = receipt_ids || '[\"b\"]' \
             WHERE subject_id = $1",
        )
        .bind(&subject)
        .execute(&mut *other)
        .await
        .unwrap();
        // Our decision's snapshot still shows one slot free; the row it locks is full.
        let decision = tokio::spawn({
            let (quota, command) = (
                quota.clone(),
                command(PROJECT, &subject, Operation::Extract, "c"),
            );
            async move { consume(&quota, &command, limits).await }
        });
        until_waiting_on_lock(&database.admin, &role_of(&database.role_url)).await;
        other.commit().await.unwrap();
        let decision = decision.await.unwrap();
        window.check(&decision)?;
        assert!(
            matches!(decision, QuotaDecision::Exceeded { .. }),
            "{decision:?}"
        );
        let bucket = stored(&database.admin, PROJECT, &subject, Operation::Extract)
            .await
            .unwrap();
        assert_eq!(bucket.receipt_ids, ["a", "b"]);
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denial_of_a_full_bucket_takes_no_row_lock() {
    let limits = limits(1);
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let quota = bounded_quota(&database.role_url, 2);
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let mut window = OneWindow::default();
        let first = consume(
            &quota,
            &command(PROJECT, &subject, Operation::Extract, "a"),
            limits,
        )
        .await;
        window.check(&first)?;
        // Another transaction holds the full bucket's row lock for as long as it likes.
        let mut other = database.admin.begin().await.unwrap();
        sqlx::query("SELECT 1 FROM proxypool_quota.quota_buckets WHERE subject_id = $1 FOR UPDATE")
            .bind(&subject)
            .execute(&mut *other)
            .await
            .unwrap();
        // A new receipt on the full bucket is denied from the snapshot: no wait on the lock
        // (which would end as a 1 s statement timeout, Unavailable), no write.
        let started = Instant::now();
        let denied = consume(
            &quota,
            &command(PROJECT, &subject, Operation::Extract, "b"),
            limits,
        )
        .await;
        let took = started.elapsed();
        window.check(&denied)?;
        retry_after(&denied);
        assert!(
            took < Duration::from_millis(900),
            "waited {took:?} on the row lock"
        );
        other.rollback().await.unwrap();
        Ok(())
    })
    .await;
}

/// An entry with every field set.
fn ledger_entry(identity: &str) -> LedgerEntry {
    LedgerEntry {
        identity: identity.to_owned(),
        generation: 12,
        recovery: Some(Recovery {
            lost_at_ms: 1_700_000_000_000,
            hold_ms: 600_000,
        }),
        loss: Some(LossReason::Replaced),
        installed: true,
    }
}

const LEDGER_ID: &str = "00112233445566778899AABBCCDDEEFF";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_ledger_rows_are_refused_by_the_constraints_and_read_as_corrupt() {
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    // The owner writes these entries (recoveries, losses): the constraints are what this
    // test is about, not the runtime role's limits (`ledger_roles`).
    let quota = owner_ledger(&database);
    let breakages = [
        ("identity", "identity = 'not-an-identity'"),
        ("short", "identity = '0011'"),
        ("generation", "generation = -1"),
        ("recovery", "hold_ms = NULL"),
        ("negative", "lost_at_ms = -1"),
        ("loss", "loss = 'vanished'"),
    ];
    for (pool, _) in breakages {
        assert!(
            quota
                .replace(pool, None, &ledger_entry(LEDGER_ID))
                .await
                .unwrap()
        );
    }
    let insert = |pool: &str| {
        format!(
            "INSERT INTO proxypool_quota.store_ledger \
             (pool, identity, generation, installed, updated_at_ms) \
             VALUES ({pool}, '{LEDGER_ID}', 1, false, 0)"
        )
    };
    let mut refused: Vec<String> = breakages
        .iter()
        .map(|(pool, breakage)| {
            format!("UPDATE proxypool_quota.store_ledger SET {breakage} WHERE pool = '{pool}'")
        })
        .collect();
    for pool in [
        "''".to_owned(),
        "E'line\\nbreak'".to_owned(),
        "'caf\u{e9}'".to_owned(),
        format!("'{}'", "p".repeat(129)),
    ] {
        refused.push(insert(&pool));
    }
    // Even the owner cannot write any of it while the constraints stand.
    for statement in &refused {
        let error = sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&database.admin)
            .await
            .expect_err(statement);
        let code = error
            .as_database_error()
            .and_then(|error| error.code())
            .map(|code| code.into_owned());
        assert_eq!(code.as_deref(), Some("23514"), "{statement}: {error}");
    }
    // The widest valid name is accepted: the constraints are not just refusing.
    sqlx::query(sqlx::AssertSqlSafe(insert(&format!(
        "' !~{}'",
        "p".repeat(125)
    ))))
    .execute(&database.admin)
    .await
    .expect("128 printable characters");

    // With the constraints dropped and the rows broken, each reads as corrupt.
    let constraints: Vec<String> = sqlx::query_scalar(
        "SELECT conname::text FROM pg_constraint \
         WHERE conrelid = 'proxypool_quota.store_ledger'::regclass AND contype = 'c'",
    )
    .fetch_all(&database.admin)
    .await
    .unwrap();
    assert_eq!(constraints.len(), 6, "{constraints:?}");
    for constraint in constraints {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE proxypool_quota.store_ledger DROP CONSTRAINT {constraint}"
        )))
        .execute(&database.admin)
        .await
        .unwrap();
    }
    for statement in refused.iter().take(breakages.len()) {
        sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&database.admin)
            .await
            .expect(statement);
    }
    for (pool, _) in breakages {
        let loaded = quota.load(pool).await;
        assert!(
            matches!(loaded, Err(PoolError::Unavailable(Unavailable::Corrupt(_)))),
            "{pool}: {loaded:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_on_an_unreachable_server_is_store_down_and_names_no_credentials() {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://ledger_user:hunter2secret@127.0.0.1:{port}/ledger_db");
    let quota = bounded_quota(&url, 1);
    let started = Instant::now();
    let outcomes = [
        quota.load("pool").await.map(|_| ()),
        quota
            .replace("pool", None, &ledger_entry(LEDGER_ID))
            .await
            .map(|_| ()),
        quota.raise_generation("pool", LEDGER_ID, 13).await,
    ];
    assert!(started.elapsed() < SLACK_BOUND * 3);
    for outcome in outcomes {
        let Err(PoolError::Unavailable(Unavailable::Store(text))) = outcome else {
            panic!("expected the store to be down, got {outcome:?}");
        };
        for secret in ["hunter2secret", "ledger_user", "ledger_db", "127.0.0.1"] {
            assert!(!text.contains(secret), "{text:?} names {secret}");
        }
    }
}
