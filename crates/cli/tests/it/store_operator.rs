//! `proxypool store recover` and `acknowledge` on PostgreSQL are the operator's orders, on
//! `proxypool serve` with its quota (and the pool store's ledger) in a private PostgreSQL,
//! connected as the runtime role `proxypool migrate --create-role` makes:
//!
//! - `store status` reads with the runtime configuration; `recover` and `acknowledge`
//!   without `--admin-url-env`, or with the runtime role's URL in it, exit 2 saying an
//!   operator's credential is needed, and change nothing.
//! - The attack: the runtime role's own connection sends the commands' statements by
//!   hand (a forced recovery, an early acknowledgement): refused, nothing changes.
//! - The operator's URL (`--admin-url-env`, as `migrate` takes it): the forced recovery
//!   and its acknowledgement are written, and the running controller carries each out
//!   within seconds.
//! - A loss forged with the runtime role (a new incarnation holding for 1 ms) is what a
//!   controller may record, but the controller installs it withholding for its own hold.
//! - `--admin-url-env` on a SQLite quota is refused: SQLite has no roles.

use crate::common::split::migrate_quota;
use crate::common::{Proc, Scratch, curl, eventually, free_port, run, sim_upstream, sim_vendor};
use serde_json::Value;
use std::time::Duration;

/// The upstream's `ttl` in `sim_upstream`: the controller's recovery hold.
const HOLD_MS: u64 = 600_000;
const OPS_TOKEN: &str = "ops-api-token-0001";

/// `store` of `GET /v1/upstreams` (Null until it answers).
fn store_of(api: u16) -> Value {
    let (code, body) = curl(&[
        "-H",
        &format!("Authorization: Bearer {OPS_TOKEN}"),
        &format!("http://127.0.0.1:{api}/v1/upstreams"),
    ]);
    if code != 0 {
        return Value::Null;
    }
    serde_json::from_str::<Value>(&body).map_or(Value::Null, |v| v["store"].clone())
}

/// The runtime role's connection, sending `statement` by hand: the database's error code
/// (None: it was written).
fn as_runtime(runtime_url: &str, statement: &str) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(runtime_url)
            .await
            .expect("connect as the runtime role");
        let result = sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
            .execute(&pool)
            .await;
        pool.close().await;
        result.err().map(|error| {
            error
                .as_database_error()
                .and_then(|e| e.code())
                .map_or_else(|| error.to_string(), |code| code.into_owned())
        })
    })
}

#[test]
fn store_orders_need_the_operators_credential_and_the_controller_carries_them_out() {
    if !crate::common::curl_or_skip() {
        return;
    }
    let Some(pg) = proxypool_testkit::private_postgres_or_skip() else {
        return;
    };
    let admin_url = pg.create_database("proxypool_store").unwrap();
    let runtime_url = format!(
        "postgres://proxypool_quota:quota-role-password@127.0.0.1:{}/proxypool_store",
        pg.port()
    );
    let (_runtime, sim) = sim_vendor(4);
    let scratch = Scratch::new("store-operator");
    let api = free_port();
    let config = scratch.write(
        "proxypool.toml",
        &format!(
            r#"
[quota]
url = "postgres://proxypool_quota@127.0.0.1:{port}/proxypool_store"
password = {{ env = "QUOTA_PASSWORD" }}

[listen]
control = "127.0.0.1:0"
api = "127.0.0.1:{api}"

{upstream}

[[clients]]
id = "ops"
project = "ops"
admin = true
api_token = {{ env = "OPS_TOKEN" }}

[gateway]
worker_id = "box-1"
[gateway.listeners]
http = "127.0.0.1:{http}"
"#,
            http = free_port(),
            port = pg.port(),
            upstream = sim_upstream(&sim),
        ),
    );
    let config = config.to_str().unwrap();
    let env = [
        ("OPS_TOKEN", OPS_TOKEN),
        ("QUOTA_PASSWORD", "quota-role-password"),
        ("PG_ADMIN", admin_url.as_str()),
        ("PG_RUNTIME", runtime_url.as_str()),
    ];
    let mut migrate_env = env.to_vec();
    migrate_env.push(("PG_ADMIN_URL", &admin_url));
    migrate_quota(config, &migrate_env);
    let mut serve = Proc::start("serve", &["serve", "--config", config], &env, &scratch.path);
    eventually("the store is established", Duration::from_secs(30), || {
        store_of(api)["state"] == "ok"
    });
    let identity = store_of(api)["identity"].clone();
    let store = |args: &[&str]| {
        let mut all = vec!["store"];
        all.extend_from_slice(args);
        all.extend(["--config", config]);
        let (code, stdout, stderr) = run(&all, &env);
        (
            code,
            serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null),
            stderr,
        )
    };

    // The runtime configuration reads; it orders nothing.
    let (code, status, stderr) = store(&["status"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(status["ledger"]["identity"], identity);
    let generation = status["ledger"]["generation"].as_u64().unwrap();
    for action in ["recover", "acknowledge"] {
        let (code, _, stderr) = store(&[action]);
        assert_eq!(code, 2, "{action}: {stderr}");
        assert!(
            stderr.contains("operator") && stderr.contains("--admin-url-env"),
            "{action}: {stderr}"
        );
        let (code, _, stderr) = store(&[action, "--admin-url-env", "PG_RUNTIME"]);
        assert_eq!(code, 2, "{action}: {stderr}");
        assert!(
            stderr.contains("\"proxypool_quota\" may not write the operator's orders"),
            "{action}: {stderr}"
        );
        assert!(!stderr.contains("quota-role-password"), "{stderr}");
    }
    let (code, _, stderr) = store(&["recover", "--admin-url-env", "NOT_SET_ANYWHERE"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("NOT_SET_ANYWHERE is not set"), "{stderr}");

    // The attack: the command's statement sent by hand as the runtime role.
    let forced = format!(
        "UPDATE proxypool_quota.store_ledger SET identity = '{}', generation = {}, \
         lost_at_ms = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, \
         hold_ms = {HOLD_MS}, loss = 'forced', installed = false",
        "ab".repeat(16),
        generation + 100
    );
    assert_eq!(as_runtime(&runtime_url, &forced).as_deref(), Some("42501"));
    assert_eq!(store_of(api)["state"], "ok");
    assert_eq!(store(&["status"]).1["ledger"]["identity"], identity);

    // The operator forces a recovery: the controller puts a new store in place.
    let (code, ordered, stderr) = store(&["recover", "--admin-url-env", "PG_ADMIN"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ordered["ledger"]["loss"], "forced");
    eventually(
        "the forced recovery is in place",
        Duration::from_secs(30),
        || {
            let store = store_of(api);
            store["state"] == "recovering" && store["loss"] == "forced"
        },
    );
    assert_ne!(store_of(api)["identity"], identity, "a new store");
    // The runtime role cannot end it early.
    let acknowledge = "UPDATE proxypool_quota.store_ledger SET lost_at_ms = NULL, hold_ms = NULL";
    assert_eq!(
        as_runtime(&runtime_url, acknowledge).as_deref(),
        Some("42501")
    );
    assert_eq!(store_of(api)["state"], "recovering");
    // The operator can.
    let (code, acknowledged, stderr) = store(&["acknowledge", "--admin-url-env", "PG_ADMIN"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(acknowledged["ledger"]["recovery"], Value::Null);
    eventually("the recovery ends", Duration::from_secs(30), || {
        store_of(api)["state"] == "ok"
    });

    // A loss forged with the runtime role, holding for 1 ms: the controller withholds for
    // its own hold.
    let generation = store(&["status"]).1["ledger"]["generation"]
        .as_u64()
        .unwrap();
    let forged = format!(
        "UPDATE proxypool_quota.store_ledger SET identity = '{}', generation = {}, \
         lost_at_ms = 0, hold_ms = 1, loss = 'missing', installed = false",
        "cd".repeat(16),
        generation + 100
    );
    assert_eq!(as_runtime(&runtime_url, &forged), None);
    eventually(
        "the forged loss withholds for the controller's hold",
        Duration::from_secs(30),
        || {
            let store = store_of(api);
            store["state"] == "recovering"
                && store["identity"] == "cd".repeat(16)
                && store["until_ms"].as_u64().zip(store["lost_at_ms"].as_u64())
                    == store["lost_at_ms"].as_u64().map(|at| (at + HOLD_MS, at))
        },
    );

    serve.signal("TERM");
    assert_eq!(serve.wait(Duration::from_secs(30)).code(), Some(0));

    // SQLite has no roles: the flag is refused, the command works without it.
    let sqlite = scratch.write(
        "sqlite.toml",
        &std::fs::read_to_string(config).unwrap().replace(
            &format!(
                "url = \"postgres://proxypool_quota@127.0.0.1:{}/proxypool_store\"\n\
                 password = {{ env = \"QUOTA_PASSWORD\" }}",
                pg.port()
            ),
            "url = \"sqlite://data/quota.sqlite3\"",
        ),
    );
    let (code, _, stderr) = run(
        &[
            "store",
            "status",
            "--admin-url-env",
            "PG_ADMIN",
            "--config",
            sqlite.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("PostgreSQL quota only"), "{stderr}");
}
