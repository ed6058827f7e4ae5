//! Who may write what to the PostgreSQL store ledger: the runtime role the replicas connect
//! as does everything a controller's store guard does (first entry, install, raise, record
//! a loss it detected, lengthen a recovery, end one whose hold is over), and none of the
//! operator's orders: the raw statements of `proxypool store recover` and `acknowledge`,
//! and every shortcut to their effect (shortening or backdating a recovery, a loss label
//! changed, an entry installed before it was), are refused with SQLSTATE 42501 and change
//! nothing. The owner's role may (`connect_operator` tells the two apart), and a database
//! migrated before the rule gets it from `migrate`.

#![cfg(feature = "postgres")]

use std::time::Duration;

use crate::support::postgres::{
    Database, empty_database, fresh_database, owner_ledger, quota, shared_server, with_quota_role,
};
use proxypool_core::store_mark::{LedgerEntry, LossReason, Recovery, StoreLedger};
use proxypool_quota::postgres::migrate;
use proxypool_quota::postgres::operator::{OperatorLedger, connect_operator};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

const POOL: &str = "pp";
const FIRST: &str = "0123456789abcdef0123456789abcdef";
const SECOND: &str = "fedcba9876543210fedcba9876543210";
const FORCED: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// A recovery the test never waits out.
const LONG_HOLD_MS: u64 = 3_600_000;

fn entry(identity: &str, generation: u64, recovery: Option<Recovery>) -> LedgerEntry {
    LedgerEntry {
        identity: identity.to_owned(),
        generation,
        recovery,
        loss: recovery.map(|_| LossReason::Missing),
        installed: false,
    }
}

async fn db_now_ms(pool: &PgPool) -> u64 {
    let now: i64 =
        sqlx::query_scalar("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
            .fetch_one(pool)
            .await
            .unwrap();
    u64::try_from(now).unwrap()
}

async fn runtime_pool(database: &Database) -> PgPool {
    PgPoolOptions::new()
        .max_connections(1)
        .connect(&database.role_url)
        .await
        .expect("connect as the runtime role")
}

/// Runs `statement` as `pool`'s role and expects it refused as a privilege (42501).
async fn refused(pool: &PgPool, statement: &str) {
    let error = sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(pool)
        .await
        .expect_err(statement);
    let code = error
        .as_database_error()
        .and_then(|error| error.code())
        .map(|code| code.into_owned());
    assert_eq!(code.as_deref(), Some("42501"), "{statement}: {error}");
}

/// The statement `proxypool store recover` makes: a new incarnation, forced, withholding
/// everything for `hold_ms` from now.
fn forced_recovery(identity: &str, generation: u64, now_ms: u64) -> String {
    format!(
        "UPDATE proxypool_quota.store_ledger SET identity = '{identity}', \
         generation = {generation}, lost_at_ms = {now_ms}, hold_ms = {LONG_HOLD_MS}, \
         loss = 'forced', installed = false WHERE pool = '{POOL}'"
    )
}

/// The statement `proxypool store acknowledge` makes: the recovery ends now.
const ACKNOWLEDGE: &str = "UPDATE proxypool_quota.store_ledger SET lost_at_ms = NULL, \
                           hold_ms = NULL WHERE pool = 'pp'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_role_does_what_a_controller_does_to_the_ledger() {
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let ledger = quota(&database.role_url);
    let replace = async |expected: Option<&str>, next: &LedgerEntry| {
        ledger.replace(POOL, expected, next).await
    };
    // The first controller records a fresh store, installs it, raises its generation.
    assert!(replace(None, &entry(FIRST, 1, None)).await.unwrap());
    let installed = LedgerEntry {
        installed: true,
        ..entry(FIRST, 1, None)
    };
    assert!(replace(Some(FIRST), &installed).await.unwrap());
    ledger.raise_generation(POOL, FIRST, 5).await.unwrap();
    // A settle that read an older generation keeps the higher one.
    assert!(replace(Some(FIRST), &installed).await.unwrap());
    assert_eq!(ledger.load(POOL).await.unwrap().unwrap().generation, 5);

    // A loss it detected: a new incarnation, its recovery starting at the database's
    // clock whatever the writer said (here: long ago).
    let before = db_now_ms(&database.admin).await;
    let lost = entry(
        SECOND,
        6,
        Some(Recovery {
            lost_at_ms: 1,
            hold_ms: 1_000,
        }),
    );
    assert!(replace(Some(FIRST), &lost).await.unwrap());
    let recorded = ledger.load(POOL).await.unwrap().unwrap();
    let recovery = recorded.recovery.unwrap();
    assert!(recovery.lost_at_ms >= before, "{recorded:?}");
    assert_eq!(
        (recorded.loss, recorded.installed),
        (Some(LossReason::Missing), false)
    );
    // Lengthened by a controller with a longer hold, then installed.
    let longer = LedgerEntry {
        recovery: Some(Recovery {
            hold_ms: 2_000,
            ..recovery
        }),
        ..recorded.clone()
    };
    assert!(replace(Some(SECOND), &longer).await.unwrap());
    let installed = LedgerEntry {
        installed: true,
        ..longer.clone()
    };
    assert!(replace(Some(SECOND), &installed).await.unwrap());
    // Ended once its hold is over by the database's clock, and not before.
    let ended = LedgerEntry {
        recovery: None,
        ..installed.clone()
    };
    assert!(replace(Some(SECOND), &ended).await.is_err(), "ended early");
    assert_eq!(ledger.load(POOL).await.unwrap().unwrap(), installed);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if replace(Some(SECOND), &ended).await.is_ok() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(db_now_ms(&database.admin).await >= recovery.lost_at_ms + 2_000);
    assert_eq!(ledger.load(POOL).await.unwrap().unwrap(), ended);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_role_cannot_write_the_operators_orders_and_the_owner_can() {
    let Some(server) = shared_server() else {
        return;
    };
    let database = fresh_database(server).await;
    let ledger = quota(&database.role_url);
    let runtime = runtime_pool(&database).await;
    // A running store in recovery after a loss, as a controller leaves it; and a second
    // pool without one.
    assert!(
        ledger
            .replace(POOL, None, &entry(FIRST, 1, None))
            .await
            .unwrap()
    );
    let lost = entry(
        SECOND,
        2,
        Some(Recovery {
            lost_at_ms: 0,
            hold_ms: LONG_HOLD_MS,
        }),
    );
    assert!(ledger.replace(POOL, Some(FIRST), &lost).await.unwrap());
    let before = ledger.load(POOL).await.unwrap().unwrap();
    assert!(
        ledger
            .replace("calm", None, &entry(FIRST, 1, None))
            .await
            .unwrap()
    );
    let now = db_now_ms(&database.admin).await;
    let table = "proxypool_quota.store_ledger";
    let statements = [
        // The commands' own statements.
        forced_recovery(FORCED, 3, now),
        ACKNOWLEDGE.to_owned(),
        // Their effect by other means.
        format!("UPDATE {table} SET hold_ms = 1 WHERE pool = '{POOL}'"),
        format!("UPDATE {table} SET lost_at_ms = lost_at_ms - 3600000 WHERE pool = '{POOL}'"),
        format!("UPDATE {table} SET loss = 'forced' WHERE pool = '{POOL}'"),
        format!("UPDATE {table} SET loss = NULL WHERE pool = '{POOL}'"),
        format!("UPDATE {table} SET hold_ms = 86400001 WHERE pool = '{POOL}'"),
        format!(
            "UPDATE {table} SET lost_at_ms = {now}, hold_ms = {LONG_HOLD_MS} WHERE pool = 'calm'"
        ),
        format!(
            "UPDATE {table} SET identity = '{FORCED}', generation = 9, lost_at_ms = {now}, \
             hold_ms = {LONG_HOLD_MS}, loss = 'missing', installed = true WHERE pool = '{POOL}'"
        ),
        format!(
            "UPDATE {table} SET identity = '{FORCED}', generation = 2, lost_at_ms = {now}, \
             hold_ms = {LONG_HOLD_MS}, loss = 'missing', installed = false WHERE pool = '{POOL}'"
        ),
        format!(
            "UPDATE {table} SET identity = '{FORCED}', generation = 9, lost_at_ms = NULL, \
             hold_ms = NULL, loss = 'missing', installed = false WHERE pool = '{POOL}'"
        ),
        format!(
            "UPDATE {table} SET identity = '{FORCED}', generation = 9, lost_at_ms = {now}, \
             hold_ms = 86400001, loss = 'missing', installed = false WHERE pool = '{POOL}'"
        ),
        format!(
            "INSERT INTO {table} (pool, identity, generation, lost_at_ms, hold_ms, loss, \
             installed, updated_at_ms) VALUES ('fresh', '{FORCED}', 1, {now}, 60000, \
             'forced', false, 0)"
        ),
        // And the rule itself is the owner's.
        format!("ALTER TABLE {table} DISABLE TRIGGER store_ledger_guard"),
        format!("DROP TRIGGER store_ledger_guard ON {table}"),
        "DROP FUNCTION proxypool_quota.store_ledger_guard() CASCADE".to_owned(),
        "CREATE OR REPLACE FUNCTION proxypool_quota.store_ledger_guard() RETURNS trigger \
         LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
            .to_owned(),
    ];
    for statement in &statements {
        refused(&runtime, statement).await;
    }
    assert_eq!(ledger.load(POOL).await.unwrap().unwrap(), before);
    assert_eq!(
        ledger.load("calm").await.unwrap().unwrap(),
        entry(FIRST, 1, None)
    );
    assert_eq!(ledger.load("fresh").await.unwrap(), None);

    // The operator's URL names the owner; the runtime's does not.
    match connect_operator(&database.role_url, None).await.unwrap() {
        OperatorLedger::NotOperator { role } => {
            assert!(database.role_url.contains(&role), "{role}");
        }
        OperatorLedger::Operator(_) => panic!("the runtime role passed as the operator"),
    }
    let OperatorLedger::Operator(operator) =
        connect_operator(&database.admin_url, None).await.unwrap()
    else {
        panic!("the owner is the operator");
    };
    // The same statements as the owner: a forced recovery, then its acknowledgement.
    sqlx::query(sqlx::AssertSqlSafe(forced_recovery(FORCED, 3, now)))
        .execute(operator.pool())
        .await
        .expect("the operator forces a recovery");
    let forced = ledger.load(POOL).await.unwrap().unwrap();
    assert_eq!(
        (forced.identity.as_str(), forced.loss),
        (FORCED, Some(LossReason::Forced))
    );
    sqlx::query(ACKNOWLEDGE)
        .execute(operator.pool())
        .await
        .expect("the operator acknowledges it");
    assert_eq!(ledger.load(POOL).await.unwrap().unwrap().recovery, None);
    operator.pool().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_puts_the_rule_on_a_ledger_written_before_it() {
    let Some(server) = shared_server() else {
        return;
    };
    // The schema as it was before the rule: the first three migrations.
    let database = empty_database(server).await;
    let mut before = sqlx::migrate::Migrator::with_migrations(
        [
            include_str!("../../migrations/postgres/0001_quota_buckets.sql"),
            include_str!("../../migrations/postgres/0002_settled_receipts.sql"),
            include_str!("../../migrations/postgres/0003_store_ledger.sql"),
        ]
        .into_iter()
        .zip(1..)
        .map(|(sql, version)| {
            sqlx::migrate::Migration::new(
                version,
                std::borrow::Cow::Borrowed("before"),
                sqlx::migrate::MigrationType::Simple,
                sqlx::SqlSafeStr::into_sql_str(sql),
                false,
            )
        })
        .collect(),
    );
    before.create_schema("proxypool_quota");
    before.dangerous_set_table_name("proxypool_quota._sqlx_migrations");
    before
        .run(&database.admin)
        .await
        .expect("the old migrations");
    let database = with_quota_role(database).await;
    let ledger = quota(&database.role_url);
    let runtime = runtime_pool(&database).await;
    assert!(
        ledger
            .replace(POOL, None, &entry(FIRST, 1, None))
            .await
            .unwrap()
    );
    // Before the rule, the runtime role could force a recovery: the attack this closes.
    let now = db_now_ms(&database.admin).await;
    sqlx::query(sqlx::AssertSqlSafe(forced_recovery(FORCED, 2, now)))
        .execute(&runtime)
        .await
        .expect("no rule yet");
    let written = ledger.load(POOL).await.unwrap().unwrap();
    assert_eq!(written.loss, Some(LossReason::Forced));

    migrate(&database.admin).await.expect("the upgrade");
    assert_eq!(ledger.load(POOL).await.unwrap().unwrap(), written);
    refused(&runtime, &forced_recovery(SECOND, 3, now)).await;
    refused(&runtime, ACKNOWLEDGE).await;
    assert_eq!(ledger.load(POOL).await.unwrap().unwrap(), written);
    // The owner still can.
    let owner = owner_ledger(&database);
    let acknowledged = LedgerEntry {
        recovery: None,
        ..written.clone()
    };
    assert!(
        owner
            .replace(POOL, Some(FORCED), &acknowledged)
            .await
            .unwrap()
    );
}
