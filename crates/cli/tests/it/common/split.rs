//! Configuration files of the split-mode tests: controllers on a private Redis and
//! PostgreSQL (optionally with TLS on every link), and the gateways that register with
//! them (`gw-a` with `$WORKER_TOKEN_A`, `gw-b` with `$WORKER_TOKEN_B`).

use super::allow_sim_origin;

/// The TLS files of one run: a CA for every server certificate and the gateways' own.
pub struct Tls {
    pub ca: proxypool_testkit::TestCa,
}

impl Tls {
    pub fn ca(&self) -> String {
        self.ca.ca_path().display().to_string()
    }

    /// A `[table]` with a server certificate for 127.0.0.1 (and `extra` lines).
    pub fn server_table(&self, table: &str, stem: &str, extra: &str) -> String {
        let files = self.ca.server(stem).unwrap();
        format!(
            "[{table}]\ncert = \"{}\"\nkey = \"{}\"\n{extra}",
            files.cert.display(),
            files.key.display()
        )
    }

    /// `sslmode=verify-full` against the CA, appended to a PostgreSQL URL.
    pub fn pg(&self, url: &str) -> String {
        format!("{url}?sslmode=verify-full&sslrootcert={}", self.ca())
    }
}

/// The simulated vendor's list behind https (a certificate of the run's CA), as an
/// upstream that trusts that CA: no allow_plaintext.
pub fn sim_upstream_tls(list_url: &str, sim: &proxypool_sim::SimVendor, tls: &Tls) -> String {
    format!(
        "[[upstreams]]\nid = \"sim\"\nttl = \"10m\"\nmax_size = 100\n[upstreams.provider]\nkind = \"http\"\nallow_private_hosts = true\nurl = \"{list_url}\"\nformat = \"json\"\ninterval = \"2s\"\n[upstreams.provider.tls]\nca = \"{}\"\n[[upstreams.health.targets]]\nurl = \"{}\"\n",
        tls.ca(),
        sim.origin().url("/health"),
    )
}

pub fn controller_config(
    redis: &proxypool_testkit::RedisServer,
    pg_port: u16,
    control: u16,
    api: u16,
    per_worker_target: usize,
    upstream: &str,
    tls: Option<&Tls>,
) -> String {
    controller_config_with(
        redis,
        pg_port,
        control,
        api,
        per_worker_target,
        upstream,
        tls,
        false,
    )
}

/// [`controller_config`] in plain text with `acme` an admin client when `admin` (so a
/// test can drain a gateway).
pub fn controller_config_as(
    redis: &proxypool_testkit::RedisServer,
    pg_port: u16,
    control: u16,
    api: u16,
    per_worker_target: usize,
    upstream: &str,
    admin: bool,
) -> String {
    controller_config_with(
        redis,
        pg_port,
        control,
        api,
        per_worker_target,
        upstream,
        None,
        admin,
    )
}

#[allow(clippy::too_many_arguments)]
fn controller_config_with(
    redis: &proxypool_testkit::RedisServer,
    pg_port: u16,
    control: u16,
    api: u16,
    per_worker_target: usize,
    upstream: &str,
    tls: Option<&Tls>,
    admin: bool,
) -> String {
    let store_url = match tls {
        Some(_) => redis.tls_url().unwrap().to_owned(),
        None => format!("redis://127.0.0.1:{}/0", redis.port()),
    };
    controller_config_on(
        &store_url,
        pg_port,
        control,
        api,
        per_worker_target,
        upstream,
        tls,
        admin,
    )
}

/// The `[store] url` of a controller on `cluster`, its primaries as the seeds
/// (`redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...`): the client reads the slot map from
/// whichever seed answers, so a seed killed later costs nothing.
pub fn cluster_store_url(cluster: &proxypool_testkit::RedisCluster) -> String {
    let seeds: Vec<String> = cluster
        .primaries()
        .unwrap()
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    format!("redis+cluster://{}", seeds.join(","))
}

/// The controller file every split-mode test shares, on the pool store at `store_url` (one
/// Redis, or a cluster's `redis+cluster://` seeds). With `tls` the control and client APIs
/// serve TLS, PostgreSQL is verified against the run's CA, and so is the store (`[store.tls]`,
/// for a `rediss://` URL).
#[allow(clippy::too_many_arguments)]
pub fn controller_config_on(
    store_url: &str,
    pg_port: u16,
    control: u16,
    api: u16,
    per_worker_target: usize,
    upstream: &str,
    tls: Option<&Tls>,
    admin: bool,
) -> String {
    let quota_url = match tls {
        Some(tls) => tls.pg(&format!(
            "postgres://proxypool_quota@127.0.0.1:{pg_port}/proxypool_split"
        )),
        None => format!("postgres://proxypool_quota@127.0.0.1:{pg_port}/proxypool_split"),
    };
    let tls_tables = match tls {
        Some(tls) => format!(
            "[store.tls]\nca = \"{}\"\n\n{}\n{}",
            tls.ca(),
            tls.server_table(
                "control.tls",
                "control",
                &format!("client_ca = \"{}\"\n", tls.ca())
            ),
            tls.server_table("api.tls", "api", ""),
        ),
        None => String::new(),
    };
    let tenants = tenants(upstream, admin);
    format!(
        r#"
[store]
url = "{store_url}"
call_timeout = "250ms"
leader_lease = "2s"

[quota]
url = "{quota_url}"
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
# The failover rule: 2 s x 1.1 + 200 ms + 2 x 250 ms + 100 ms + 1 s = 4 s.
lease = "6s"
renew_before = "4s"
interval = "200ms"
per_worker_target = {per_worker_target}

[checker]
interval = "200ms"

{tenants}

{tls_tables}
"#,
    )
}

/// A split gateway's file; it lists the controllers on the `controls` ports in that order.
pub fn gateway_config(
    worker: &str,
    controls: &[u16],
    http: u16,
    admin: u16,
    sim: &proxypool_sim::SimVendor,
    tls: Option<&Tls>,
) -> String {
    let destinations = allow_sim_origin(sim);
    // With a token, so `gateway_status` sees the cooldowns' detail.
    let admin_token = super::gateway_admin_token_toml();
    let token_var = if worker == "gw-a" {
        "WORKER_TOKEN_A"
    } else {
        "WORKER_TOKEN_B"
    };
    let (scheme, controller_tls) = match tls {
        Some(tls) => {
            let identity = tls.ca.client(worker, worker).unwrap();
            (
                "https",
                format!(
                    "[gateway.controller_tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
                    tls.ca(),
                    identity.cert.display(),
                    identity.key.display()
                ),
            )
        }
        None => ("http", String::new()),
    };
    let controllers = controls
        .iter()
        .map(|port| format!("\"{scheme}://127.0.0.1:{port}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
[gateway]
worker_id = "{worker}"
controller_url = [{controllers}]
worker_token = {{ env = "{token_var}" }}
shutdown_grace = "2000ms"
{admin_token}
[gateway.listeners]
http = "127.0.0.1:{http}"
admin = "127.0.0.1:{admin}"
[gateway.control]
max_backoff = "500ms"
{controller_tls}
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

/// A controller of a failover pair: plain text, every timing of the store, snapshots and
/// ownership at its default, `acme` an admin client (so the tests can cordon and drain).
pub fn failover_controller_config(
    redis: &proxypool_testkit::RedisServer,
    pg_port: u16,
    control: u16,
    api: u16,
    upstream: &str,
) -> String {
    let tenants = tenants(upstream, true);
    format!(
        r#"
[store]
url = "redis://127.0.0.1:{redis_port}/0"

[quota]
url = "postgres://proxypool_quota@127.0.0.1:{pg_port}/proxypool_split"
password = {{ env = "QUOTA_PASSWORD" }}

[listen]
control = "127.0.0.1:{control}"
api = "127.0.0.1:{api}"

{tenants}"#,
        redis_port = redis.port(),
    )
}

/// What every split-mode controller file shares: the two gateways' worker tokens, the
/// vendor, and the client `acme` (an admin when `admin`).
fn tenants(upstream: &str, admin: bool) -> String {
    let admin = if admin { "admin = true\n" } else { "" };
    format!(
        r#"[[worker_tokens]]
name = "gw-a"
token = {{ env = "WORKER_TOKEN_A" }}
workers = ["gw-a"]

[[worker_tokens]]
name = "gw-b"
token = {{ env = "WORKER_TOKEN_B" }}
workers = ["gw-b"]

{upstream}

[[clients]]
id = "acme"
project = "acme"
{admin}api_token = {{ env = "ACME_TOKEN" }}
gateway_password = {{ env = "ACME_PASSWORD" }}
"#
    )
}

/// [`controller_config`] in plain text for a fleet of three gateways: a third worker
/// token, `gw-c` with `$WORKER_TOKEN_C`, beside the two every split test has.
pub fn fleet_controller_config(
    redis: &proxypool_testkit::RedisServer,
    pg_port: u16,
    control: u16,
    api: u16,
    per_worker_target: usize,
    upstream: &str,
) -> String {
    let mut text = controller_config(
        redis,
        pg_port,
        control,
        api,
        per_worker_target,
        upstream,
        None,
    );
    // An array-of-tables entry may follow any other table: it joins the two above.
    text.push_str(
        "\n[[worker_tokens]]\nname = \"gw-c\"\ntoken = { env = \"WORKER_TOKEN_C\" }\nworkers = [\"gw-c\"]\n",
    );
    text
}

/// The listeners of one fleet member.
#[derive(Debug, Clone, Copy)]
pub struct FleetPorts {
    pub http: u16,
    pub socks5: u16,
    pub admin: u16,
    /// `[gateway.fleet] listen`: where the other members relay keyed requests to it.
    pub fleet: u16,
}

impl FleetPorts {
    pub fn free() -> FleetPorts {
        FleetPorts {
            http: super::free_port(),
            socks5: super::free_port(),
            admin: super::free_port(),
            fleet: super::free_port(),
        }
    }
}

/// A fleet member's file in plain text: worker `gw-x` registers with `$WORKER_TOKEN_X`
/// (see [`fleet_controller_config`]) with the controllers on `controls`, serves HTTP and
/// SOCKS5, and is a member of the fleet (`[gateway.fleet] listen`, advertised as is).
pub fn fleet_gateway_config(
    worker: &str,
    controls: &[u16],
    ports: FleetPorts,
    sim: &proxypool_sim::SimVendor,
) -> String {
    let destinations = allow_sim_origin(sim);
    let admin_token = super::gateway_admin_token_toml();
    let suffix = worker.strip_prefix("gw-").unwrap_or(worker).to_uppercase();
    let controllers = controls
        .iter()
        .map(|port| format!("\"http://127.0.0.1:{port}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let FleetPorts {
        http,
        socks5,
        admin,
        fleet,
    } = ports;
    format!(
        r#"
[gateway]
worker_id = "{worker}"
controller_url = [{controllers}]
worker_token = {{ env = "WORKER_TOKEN_{suffix}" }}
shutdown_grace = "2000ms"
{admin_token}
[gateway.listeners]
http = "127.0.0.1:{http}"
socks5 = "127.0.0.1:{socks5}"
admin = "127.0.0.1:{admin}"
[gateway.control]
max_backoff = "500ms"
[gateway.fleet]
listen = "127.0.0.1:{fleet}"
{destinations}
"#
    )
}
