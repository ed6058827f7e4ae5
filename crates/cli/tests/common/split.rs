//! Configuration files of the split-mode tests: controllers on a private Redis and
//! PostgreSQL, and the gateways that register with them.

use super::allow_sim_origin;

/// A controller on Redis and PostgreSQL with fast split-mode timings, the worker token
/// for `gw-a` and `gw-b`, the client `acme`, and `upstreams` (`[[upstreams]]` entries).
pub fn controller_config(
    redis_port: u16,
    pg_port: u16,
    control: u16,
    api: u16,
    per_worker_target: usize,
    upstreams: &str,
) -> String {
    format!(
        r#"
[store]
url = "redis://127.0.0.1:{redis_port}/0"
call_timeout = "250ms"
leader_lease = "2s"

[quota]
url = "postgres://proxypool_quota@127.0.0.1:{pg_port}/proxypool_split"
password = {{ env = "QUOTA_PASSWORD" }}

[listen]
control = "127.0.0.1:{control}"
api = "127.0.0.1:{api}"

[snapshot]
long_poll_wait = "2s"
session_ttl = "3s"
report_interval = "1s"
poll_interval = "100ms"

[ownership]
lease = "3s"
renew_before = "1s"
interval = "200ms"
per_worker_target = {per_worker_target}

[checker]
interval = "200ms"

[[worker_tokens]]
name = "gateways"
token = {{ env = "WORKER_TOKEN" }}
workers = ["gw-a", "gw-b"]

{upstreams}

[[clients]]
id = "acme"
project = "acme"
api_token = {{ env = "ACME_TOKEN" }}
gateway_password = {{ env = "ACME_PASSWORD" }}
"#
    )
}

/// A split gateway `worker` of the controller at `control`, allowed to reach `sim`'s origin.
pub fn gateway_config(
    worker: &str,
    control: u16,
    http: u16,
    admin: u16,
    sim: &proxypool_sim::SimVendor,
) -> String {
    let destinations = allow_sim_origin(sim);
    format!(
        r#"
[gateway]
worker_id = "{worker}"
controller_url = "http://127.0.0.1:{control}"
worker_token = {{ env = "WORKER_TOKEN" }}
shutdown_grace = "2000ms"
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
[gateway.control]
max_backoff = "500ms"
{destinations}
"#
    )
}

/// `proxypool migrate` as an operator runs it once: the quota tables and the
/// least-privilege role `proxypool_quota` with the password in `$QUOTA_PASSWORD`, as the
/// admin in `$PG_ADMIN_URL` (both in `env`).
pub fn migrate_quota(config: &str, env: &[(&str, &str)]) -> String {
    let (code, stdout, stderr) = super::run(
        &[
            "migrate",
            "--config",
            config,
            "--admin-url-env",
            "PG_ADMIN_URL",
            "--create-role",
            "proxypool_quota",
            "--role-password-env",
            "QUOTA_PASSWORD",
        ],
        env,
    );
    assert_eq!(code, 0, "{stderr}");
    stdout
}
