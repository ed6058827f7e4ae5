//! SQLite-only behaviour of the quota and the store ledger: the file survives restarts, the
//! CHECK constraints hold, broken rows and a held write lock are Unavailable within the
//! time bound.

#![cfg(feature = "sqlite")]

use std::time::{Duration, Instant};

use crate::support::scratch::ScratchDir;
use proxypool_core::store_mark::{LedgerEntry, LossReason, Recovery, StoreLedger};
use proxypool_core::{PoolError, Unavailable};
use proxypool_quota::contract::fixtures::{
    OneWindow, PROJECT, command, consume, in_one_window, limits, remaining, retry_after,
};
use proxypool_quota::{
    Operation, QuotaDecision, SetupError, SqliteQuota, SqliteSettings, UnavailableReason,
};
use sqlx::Connection;
use sqlx::sqlite::SqliteConnection;

/// The upper bound asserted on a decision whose own bound is 1 s: generous for a loaded
/// 2-core machine running several test binaries, still far from a hang or from sqlx's
/// 30 s default acquire timeout.
const SLACK_BOUND: Duration = Duration::from_secs(3);

async fn open(settings: &SqliteSettings) -> SqliteQuota {
    SqliteQuota::open(settings)
        .await
        .expect("open the SQLite quota")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_survive_a_restart_of_the_process() {
    let limits = limits(3);
    let dir = ScratchDir::new("restart");
    let settings = SqliteSettings::new(dir.path().join("quota.db"));
    in_one_window(async |attempt| {
        let subject = format!("client-{attempt}");
        let decide = async |quota: &SqliteQuota, receipt: &str| {
            consume(
                quota,
                &command(PROJECT, &subject, Operation::Extract, receipt),
                limits,
            )
            .await
        };
        let mut window = OneWindow::default();
        let first_life = open(&settings).await;
        for (receipt, left) in [("a", 2), ("b", 1)] {
            let decision = decide(&first_life, receipt).await;
            window.check(&decision)?;
            assert_eq!(remaining(&decision), left);
        }
        first_life.close().await;

        // A new process opens the same file (migrations run again, harmlessly).
        let second_life = open(&settings).await;
        let replay = decide(&second_life, "a").await;
        window.check(&replay)?;
        assert_eq!(remaining(&replay), 1, "the replay remembers its receipt");
        let last = decide(&second_life, "c").await;
        window.check(&last)?;
        assert_eq!(remaining(&last), 0);
        let over = decide(&second_life, "d").await;
        window.check(&over)?;
        retry_after(&over);
        second_life.close().await;
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_constraints_reject_rows_that_break_the_invariants() {
    let dir = ScratchDir::new("checks");
    let quota = open(&SqliteSettings::new(dir.path().join("quota.db"))).await;
    let insert = |project: &str,
                  subject: &str,
                  operation: &str,
                  start: i64,
                  count: i64,
                  receipts: &str,
                  updated: i64| {
        format!(
            "INSERT INTO quota_buckets (project_id, subject_id, operation, window_started_at_ms, \
             consumed_count, receipt_ids, updated_at_ms) VALUES \
             ('{project}', {subject}, '{operation}', {start}, {count}, {receipts}, {updated})"
        )
    };
    let huge = "jsonb_array(printf('%.*c', 327680, 'x'))";
    let thousand_and_one = "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1001) \
          SELECT jsonb_group_array(i) FROM n)";
    let broken = [
        insert("p", "'s'", "extract", 0, -1, "jsonb_array()", 0),
        insert("p", "'s'", "extract", 0, 0, "jsonb_array('a')", 0),
        insert("p", "'s'", "extract", 0, 1001, thousand_and_one, 0),
        insert("p", "'s'", "extract", 0, 2, "jsonb_array('a')", 0),
        insert("p", "'s'", "extract", 0, 1, "jsonb('{\"a\": 1}')", 0),
        insert("p", "'s'", "extract", 0, 1, "'[\"a\"]'", 0),
        insert("p", "'s'", "extract", 0, 1, "x'00ff'", 0),
        insert("p", "'s'", "delete", 0, 1, "jsonb_array('a')", 0),
        insert(
            &"p".repeat(129),
            "'s'",
            "extract",
            0,
            1,
            "jsonb_array('a')",
            0,
        ),
        insert(
            "p",
            "printf('%.*c', 256, 's')",
            "extract",
            0,
            1,
            "jsonb_array('a')",
            0,
        ),
        insert("p", "''", "extract", 0, 1, "jsonb_array('a')", 0),
        insert("p", "'s'", "extract", -1, 1, "jsonb_array('a')", 0),
        insert("p", "'s'", "extract", 10, 1, "jsonb_array('a')", 9),
        insert("p", "'s'", "extract", 0, 1, huge, 0),
    ];
    for statement in &broken {
        let error = sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(quota.pool())
            .await
            .expect_err(statement);
        let message = error.to_string();
        assert!(
            message.contains("CHECK constraint failed") || message.contains("cannot store"),
            "{statement}: {message}"
        );
    }
    sqlx::query(sqlx::AssertSqlSafe(insert(
        "p",
        "'s'",
        "extract",
        0,
        1,
        "jsonb_array('a')",
        0,
    )))
    .execute(quota.pool())
    .await
    .expect("a valid row is accepted");
    // An empty bucket is valid too: a refund can leave one.
    sqlx::query(sqlx::AssertSqlSafe(insert(
        "p",
        "'empty'",
        "extract",
        0,
        0,
        "jsonb_array()",
        0,
    )))
    .execute(quota.pool())
    .await
    .expect("an empty bucket is accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_or_future_rows_are_unavailable_never_admitted() {
    let limits = limits(5);
    let dir = ScratchDir::new("malformed");
    let path = dir.path().join("quota.db");
    let quota = open(&SqliteSettings::new(&path)).await;
    assert!(
        consume(
            &quota,
            &command(PROJECT, "broken", Operation::Extract, "r1"),
            limits
        )
        .await
        .is_admitted()
    );
    assert!(
        consume(
            &quota,
            &command(PROJECT, "skewed", Operation::Extract, "r1"),
            limits
        )
        .await
        .is_admitted()
    );
    // Break rows behind the quota's back, with the constraints switched off on this
    // connection only (the quota's own connection still enforces them).
    let mut vandal = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("PRAGMA ignore_check_constraints = ON")
        .execute(&mut vandal)
        .await
        .unwrap();
    sqlx::query("UPDATE quota_buckets SET consumed_count = 2 WHERE subject_id = 'broken'")
        .execute(&mut vandal)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE quota_buckets SET window_started_at_ms = window_started_at_ms + 3000000, \
         updated_at_ms = updated_at_ms + 3000000 WHERE subject_id = 'skewed'",
    )
    .execute(&mut vandal)
    .await
    .unwrap();
    vandal.close().await.unwrap();

    // The broken row cannot even be updated (its CHECK fails): Unavailable either way.
    for receipt in ["r1", "r2"] {
        let decision = consume(
            &quota,
            &command(PROJECT, "broken", Operation::Extract, receipt),
            limits,
        )
        .await;
        assert!(
            matches!(decision, QuotaDecision::Unavailable { .. }),
            "{decision:?}"
        );
    }
    // A window in the future (the clock went back): never an admission.
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
async fn held_write_lock_is_unavailable_within_the_timeout_then_works() {
    let limits = limits(5);
    let dir = ScratchDir::new("locked");
    let path = dir.path().join("quota.db");
    let settings = SqliteSettings {
        busy_timeout: Duration::from_millis(300),
        decision_timeout: Duration::from_secs(1),
        ..SqliteSettings::new(&path)
    };
    let quota = open(&settings).await;
    assert!(
        consume(
            &quota,
            &command(PROJECT, "s", Operation::Extract, "r1"),
            limits
        )
        .await
        .is_admitted()
    );

    // Another process holds the write lock.
    let mut other = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let started = Instant::now();
    let decision = consume(
        &quota,
        &command(PROJECT, "s", Operation::Extract, "r2"),
        limits,
    )
    .await;
    let took = started.elapsed();
    assert_eq!(
        decision,
        QuotaDecision::unavailable(UnavailableReason::Timeout)
    );
    assert!(took < SLACK_BOUND, "took {took:?}");

    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    let after = consume(
        &quota,
        &command(PROJECT, "s", Operation::Extract, "r2"),
        limits,
    )
    .await;
    assert!(after.is_admitted(), "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_path_fails_at_open() {
    let dir = ScratchDir::new("unusable");
    let settings = SqliteSettings::new(dir.path().join("missing-dir").join("quota.db"));
    let error = SqliteQuota::open(&settings)
        .await
        .expect_err("no such directory");
    assert!(
        matches!(error, SetupError::Migrate(_) | SetupError::Database(_)),
        "{error}"
    );
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
        loss: Some(LossReason::Missing),
        installed: true,
    }
}

const LEDGER_ID: &str = "00112233445566778899aabbccddeeff";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_entries_survive_a_restart_of_the_process() {
    let dir = ScratchDir::new("ledger-restart");
    let settings = SqliteSettings::new(dir.path().join("quota.db"));
    let entry = ledger_entry(LEDGER_ID);
    let first_life = open(&settings).await;
    assert!(first_life.replace("pool", None, &entry).await.unwrap());
    first_life
        .raise_generation("pool", LEDGER_ID, 20)
        .await
        .unwrap();
    first_life.close().await;

    let second_life = open(&settings).await;
    assert_eq!(
        second_life.load("pool").await.unwrap(),
        Some(LedgerEntry {
            generation: 20,
            ..entry.clone()
        })
    );
    assert!(!second_life.replace("pool", None, &entry).await.unwrap());
    second_life.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_ledger_rows_are_refused_by_the_constraints_and_read_as_corrupt() {
    let dir = ScratchDir::new("ledger-broken");
    let path = dir.path().join("quota.db");
    let quota = open(&SqliteSettings::new(&path)).await;
    let breakages = [
        ("identity", "identity = 'not-an-identity'"),
        ("generation", "generation = -1"),
        ("recovery", "hold_ms = NULL"),
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
    // With the constraints on (the quota's own connection), none of it can be written.
    for (pool, breakage) in breakages {
        let statement = format!("UPDATE store_ledger SET {breakage} WHERE pool = '{pool}'");
        let error = sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(quota.pool())
            .await
            .expect_err(&statement);
        assert!(
            error.to_string().contains("CHECK constraint failed"),
            "{statement}: {error}"
        );
    }
    // Written anyway behind the ledger's back, each row reads as corrupt, never as an
    // entry.
    let mut vandal = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("PRAGMA ignore_check_constraints = ON")
        .execute(&mut vandal)
        .await
        .unwrap();
    for (pool, breakage) in breakages {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE store_ledger SET {breakage} WHERE pool = '{pool}'"
        )))
        .execute(&mut vandal)
        .await
        .unwrap();
    }
    vandal.close().await.unwrap();
    for (pool, _) in breakages {
        let loaded = quota.load(pool).await;
        assert!(
            matches!(loaded, Err(PoolError::Unavailable(Unavailable::Corrupt(_)))),
            "{pool}: {loaded:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_under_a_held_write_lock_is_store_down_within_the_timeout() {
    let dir = ScratchDir::new("ledger-locked");
    let path = dir.path().join("quota.db");
    let settings = SqliteSettings {
        busy_timeout: Duration::from_millis(300),
        decision_timeout: Duration::from_secs(1),
        ..SqliteSettings::new(&path)
    };
    let quota = open(&settings).await;
    let entry = ledger_entry(LEDGER_ID);
    assert!(quota.replace("pool", None, &entry).await.unwrap());

    let mut other = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let started = Instant::now();
    let raised = quota.raise_generation("pool", LEDGER_ID, 30).await;
    let took = started.elapsed();
    assert!(
        matches!(raised, Err(PoolError::Unavailable(Unavailable::Store(_)))),
        "{raised:?}"
    );
    assert!(took < SLACK_BOUND, "took {took:?}");

    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    quota.raise_generation("pool", LEDGER_ID, 30).await.unwrap();
    assert_eq!(quota.load("pool").await.unwrap().unwrap().generation, 30);
}
