//! `dev`'s generated configuration: the client's credentials and a controller config
//! written as TOML text and loaded through the same loader as a file, so `dev` exercises
//! the real configuration path. The simulated vendor is the one `sim` runs
//! (`commands/sim.rs`).
//!
//! Intervals are short (fetch every 2 s, checks every 200 ms) so the system is ready in
//! seconds; the lease and session settings are the defaults' shape, scaled down. The
//! simulated origin listens on loopback, which the gateway's destination policy refuses
//! by default: the config lifts exactly its address out of the refused ranges and makes
//! its port the only destination port (the policy has no address-and-port pairs), so
//! nothing else on loopback is reachable and the dev gateway reaches the origin only.

use crate::args::DevArgs;
use crate::failure::Failure;
use crate::random;
use proxypool_config::gateway::Destinations;
use proxypool_config::{Config, Env, Role};
use proxypool_core::{PortSet, SecretHash};
use proxypool_sim::SimVendor;

/// The one client `dev` configures.
pub(super) const CLIENT: &str = "dev";
/// The upstream id of the simulated vendor.
pub(super) const UPSTREAM: &str = "sim";

/// The generated secrets, shown once in the banner (only their hashes are configured).
#[derive(Debug)]
pub(super) struct Credentials {
    pub gateway_password: String,
    pub api_token: String,
}

impl Credentials {
    pub(super) fn generate() -> Self {
        Credentials {
            gateway_password: random::token(20),
            api_token: random::token(32),
        }
    }
}

/// The controller configuration for `dev`.
pub(super) fn controller_config(
    args: &DevArgs,
    sim: &SimVendor,
    credentials: &Credentials,
    listener_cert: &super::tls::ListenerCert,
    inspection: &super::inspection::Demo,
) -> Result<Config, Failure> {
    let salt = random::token(16);
    let hash = |secret: &str| {
        SecretHash::derive(secret, &salt)
            .map(|h| h.as_str().to_owned())
            .map_err(|e| Failure::runtime(format!("hashing a generated secret: {e}")))
    };
    // The policy has no (address, port) pairs: the narrowest it can say is the origin's
    // one-host block and the origin's port as the only port, so no other service on
    // loopback (nor any other port anywhere) is reachable through the dev gateway.
    let origin = sim.origin().addr();
    let mut destinations = Destinations {
        ports: PortSet::Only([origin.port()].into()),
        ..Destinations::default()
    };
    destinations.allow_origin(origin);
    // The https origin of inspected requests: its address and port too.
    let https_origin = inspection.origin.addr();
    destinations.allow_origin(https_origin);
    if let PortSet::Only(ports) = &mut destinations.ports {
        ports.insert(https_origin.port());
    }
    let text = format!(
        r#"
[store]
url = "memory"

[quota]
url = "sqlite://quota.sqlite3"

[listen]
control = "{control}"
api = "{api}"

[snapshot]
long_poll_wait = "10s"
session_ttl = "15s"
report_interval = "2s"
poll_interval = "200ms"

[ownership]
lease = "20s"
renew_before = "8s"
interval = "200ms"
per_worker_target = {per_worker}

[checker]
concurrency = 32
timeout = "3s"
interval = "200ms"

[[upstreams]]
id = "{UPSTREAM}"
ttl = "10m"
safety_margin = "5s"
max_size = 1000
max_sessions = 32

[upstreams.provider]
kind = "http"
# the simulated vendor: plain HTTP on loopback, listing loopback proxies
allow_plaintext = true
allow_private_hosts = true
url = "{list}"
format = "json"
interval = "2s"
timeout = "3s"

[upstreams.health]
interval = "30s"

[[upstreams.health.targets]]
url = "{health}"
expect_status = 200

[[clients]]
id = "{CLIENT}"
project = "dev"
api_token = {{ hash = "{api_hash}" }}
gateway_password = {{ hash = "{gateway_hash}" }}
admin = true
max_connections = 256
# TLS inspection when the username asks (dev-inspect): https gets what plain http gets.
inspection = "allowed"

[gateway]
# Ctrl-C should not wait out long-lived demo tunnels.
shutdown_grace = "5s"

[gateway.listeners]
http = "{http}"
https = "{https}"
socks5 = "{socks5}"

# The TLS listener's self-signed certificate (made once in the data directory).
[gateway.tls]
cert = {tls_cert:?}
key = {tls_key:?}

# TLS inspection: the CA made once in the data directory; origins verified against the
# dev https origin's CA.
[gateway.inspection]
ca_cert = {inspection_cert:?}
ca_key = {inspection_key:?}
origin_ca = {origin_ca:?}

# The simulated origin is on loopback: allow its address, and its port as the only port.
[gateway.destinations]
allow_cidrs = {allow_cidrs:?}
ports = {ports}
"#,
        allow_cidrs = destinations.allow_cidrs,
        ports = destinations.ports,
        control = args.control,
        api = args.api,
        http = args.http,
        socks5 = args.socks5,
        https = args.https,
        tls_cert = listener_cert.cert.display().to_string(),
        tls_key = listener_cert.key.display().to_string(),
        inspection_cert = inspection.ca_cert.display().to_string(),
        inspection_key = inspection.ca_key.display().to_string(),
        origin_ca = inspection.origin_ca.display().to_string(),
        per_worker = (args.proxies / 2).max(1),
        list = sim.list_url(),
        health = sim.origin().url("/health"),
        api_hash = hash(&credentials.api_token)?,
        gateway_hash = hash(&credentials.gateway_password)?,
    );
    Config::from_toml_str(&text, "<dev>", &args.data_dir, Role::Serve, &Env::default())
        .map_err(|e| Failure::runtime(format!("dev configuration: {e}")))
}
