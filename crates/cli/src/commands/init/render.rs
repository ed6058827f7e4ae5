//! The text of the files `init` writes: the configuration of each shape and what each
//! generated secret file holds.
//!
//! The configurations say only what a working start needs and leave every other key to
//! its default (examples/proxypool.toml explains them all). Secrets the service only
//! verifies (the client's API token and gateway password, the worker token on the
//! controller's side) appear as `{ hash = ... }` references, so the configuration may be
//! shared; secrets the service sends (the worker token on the gateway's side, the
//! PostgreSQL password) are `{ file = ... }` references, relative to the configuration.

use super::vendor::Vendor;
use crate::failure::Failure;
use proxypool_config::gateway::Destinations;
use proxypool_core::PortSet;
use std::fmt::Write as _;

/// The one client `init` configures (the gateway username, the dashboard's account).
pub(super) const CLIENT: &str = "main";
/// The split gateway's id and the name of its worker token.
const WORKER: &str = "gw-1";
/// Listen addresses: the defaults of examples/proxypool.toml, all on loopback.
pub(super) const API: &str = "127.0.0.1:7080";
pub(super) const HTTP: &str = "127.0.0.1:8080";
const SOCKS5: &str = "127.0.0.1:1080";
const ADMIN: &str = "127.0.0.1:9090";
const CONTROL: &str = "127.0.0.1:7070";
/// Where the split shape expects its stores (edit the file where they run elsewhere).
pub(super) const REDIS_URL: &str = "redis://127.0.0.1:6379/0";
pub(super) const POSTGRES_ROLE: &str = "proxypool";
pub(super) const POSTGRES_HOST: &str = "127.0.0.1:5432";
pub(super) const POSTGRES_DB: &str = "proxypool";

/// The secret files, relative to the directory.
pub(super) const API_TOKEN_FILE: &str = "secrets/api-token";
pub(super) const GATEWAY_PASSWORD_FILE: &str = "secrets/gateway-password";
pub(super) const WORKER_TOKEN_FILE: &str = "secrets/worker-token";
pub(super) const POSTGRES_PASSWORD_FILE: &str = "secrets/postgres-password";

/// The generated secrets of one run.
pub(super) struct Secrets {
    pub api_token: String,
    pub gateway_password: String,
    pub worker_token: String,
    pub postgres_password: String,
}

impl Secrets {
    /// Fresh from the operating system's random source; long enough for the configuration
    /// (`MIN_VERIFIED_LEN`) with room to spare.
    pub(super) fn generate() -> Secrets {
        Secrets {
            api_token: crate::random::token(32),
            gateway_password: crate::random::token(24),
            worker_token: crate::random::token(32),
            postgres_password: crate::random::token(32),
        }
    }
}

/// `proxypool.toml` for one `proxypool serve`.
pub(super) fn single(secrets: &Secrets, vendor: &Vendor) -> Result<String, Failure> {
    let mut text = String::from(
        "# proxypool: one `proxypool serve` (controller, client API and gateway in one\n\
         # process), written by `proxypool init --single`. The pool lives in memory (the\n\
         # vendor's list is fetched again at start), the quota in SQLite. Every key left out\n\
         # has its default; examples/proxypool.toml explains them all, and\n\
         # `proxypool check-config` checks this file.\n\
         #\n\
         # The generated secrets are in secrets/ (mode 0600); this file holds only the hashes\n\
         # of the ones the service verifies.\n\n\
         [store]\n\
         url = \"memory\"\n\n\
         [quota]\n\
         url = \"sqlite://data/quota.sqlite3\"   # relative to this file\n\n\
         [listen]\n\
         control = \"127.0.0.1:0\"   # the worker control API: only this process's gateway uses it\n",
    );
    let _ = writeln!(
        text,
        "api = \"{API}\"        # the client API: extraction, /readyz, the dashboard at /ui/\n"
    );
    text.push_str(&upstream(vendor));
    text.push_str(&client(secrets)?);
    text.push_str("\n[gateway]\n");
    text.push_str(&listeners());
    text.push_str(&destinations(vendor));
    Ok(text)
}

/// `proxypool.toml` for `proxypool controller` in the split shape.
pub(super) fn controller(secrets: &Secrets, vendor: &Vendor) -> Result<String, Failure> {
    let worker_hash = hash(&secrets.worker_token)?;
    let mut text = String::from(
        "# proxypool: the controller's file (`proxypool controller`: vendor fetch, checks,\n\
         # leases, the client API), written by `proxypool init --split`; gateway.toml is the\n\
         # gateway's. The pool lives in Redis, the quota in PostgreSQL. Every key left out has\n\
         # its default; examples/proxypool.toml explains them all, and\n\
         # `proxypool check-config` checks this file without connecting to either store.\n\
         #\n\
         # The generated secrets are in secrets/ (mode 0600); this file holds only the hashes\n\
         # of the ones the service verifies, and the path of the PostgreSQL password.\n\n\
         [store]\n",
    );
    let _ = write!(
        text,
        "url = \"{REDIS_URL}\"   # Redis with appendonly yes and maxmemory-policy noeviction\n\
         # password = {{ file = \"secrets/redis-password\" }}   # if Redis asks for one\n\n\
         [quota]\n\
         url = \"postgres://{POSTGRES_ROLE}@{POSTGRES_HOST}/{POSTGRES_DB}\"   # the role `proxypool migrate --create-role` makes\n\
         password = {{ file = \"{POSTGRES_PASSWORD_FILE}\" }}\n\n\
         [listen]\n\
         control = \"{CONTROL}\"   # gateways register here: listen where they reach it (with [control.tls] across machines)\n\
         api = \"{API}\"       # the client API: extraction, /readyz, the dashboard at /ui/\n\n\
         # The gateways leave half of the usable proxies unowned, for the client to extract\n\
         # (a split controller keeps none unless told; 0 gives the gateways everything).\n\
         [ownership]\n\
         extraction_share = 0.5\n\n\
         # The gateway's token for the control API; the token itself is in\n\
         # {WORKER_TOKEN_FILE}, which gateway.toml reads. One token per gateway.\n\
         [[worker_tokens]]\n\
         name = \"{WORKER}\"\n\
         token = {worker_hash}\n\
         workers = [\"{WORKER}\"]\n\n"
    );
    text.push_str(&upstream(vendor));
    text.push_str(&client(secrets)?);
    Ok(text)
}

/// `gateway.toml` for `proxypool gateway` in the split shape.
pub(super) fn gateway(vendor: &Vendor) -> String {
    let mut text = format!(
        "# proxypool: the gateway's file (`proxypool gateway`: the forward proxy over the\n\
         # proxies the controller leases to it), written by `proxypool init --split`.\n\
         # examples/gateway.toml explains every key.\n\n\
         [gateway]\n\
         worker_id = \"{WORKER}\"                         # leases are made to this id\n\
         controller_url = \"http://{CONTROL}\"    # the controller's [listen] control\n\
         worker_token = {{ file = \"{WORKER_TOKEN_FILE}\" }}   # relative to this file\n\n"
    );
    text.push_str(&listeners());
    text.push_str(&destinations(vendor));
    text
}

/// What a secret file holds: the secret and a newline (which `{ file = ... }` and
/// `$(cat ...)` both leave out).
pub(super) fn secret_file(secret: &str) -> String {
    format!("{secret}\n")
}

fn hash(secret: &str) -> Result<String, Failure> {
    crate::commands::hash_secret::reference(secret)
}

fn client(secrets: &Secrets) -> Result<String, Failure> {
    Ok(format!(
        "# The one client: it routes through the gateway (username \"{CLIENT}\", the password in\n\
         # {GATEWAY_PASSWORD_FILE}) and extracts through the client API (the bearer token in\n\
         # {API_TOKEN_FILE}). It is an admin (dashboard, reload): give each team or scraper a\n\
         # client of its own with admin = false (`proxypool hash-secret` makes the hashes).\n\
         [[clients]]\n\
         id = \"{CLIENT}\"\n\
         project = \"{CLIENT}\"\n\
         api_token = {api}\n\
         gateway_password = {gateway}\n\
         admin = true\n",
        api = hash(&secrets.api_token)?,
        gateway = hash(&secrets.gateway_password)?,
    ))
}

fn listeners() -> String {
    format!(
        "# On loopback: to serve other machines, listen on their network and narrow the\n\
         # clients' ip_allowlist.\n\
         [gateway.listeners]\n\
         http = \"{HTTP}\"     # HTTP proxy (absolute-form requests and CONNECT)\n\
         socks5 = \"{SOCKS5}\"   # SOCKS5 proxy (username and password)\n\
         admin = \"{ADMIN}\"    # /healthz, /readyz, /status, /metrics\n"
    )
}

/// The upstream: the vendor's list, `proxypool sim`'s, or a commented placeholder.
fn upstream(vendor: &Vendor) -> String {
    match vendor {
        Vendor::Placeholder => {
            let entry = list_entry("vendor", "https://vendor.example/api/proxies");
            // One more `#` on every line, so taking the first `#` off each gives the entry
            // with its own comments still comments.
            let commented: String = entry
                .lines()
                .map(|line| {
                    if line.starts_with('#') {
                        format!("#{line}\n")
                    } else {
                        format!("# {line}\n")
                    }
                })
                .collect();
            format!(
                "# No vendor yet (`proxypool init` ran without --vendor-url): nothing is fetched,\n\
                 # so there is nothing to serve. Take the first # off each line below and put\n\
                 # your vendor's list URL in (docs/vendors.md has well-known vendors' settings).\n\
                 {commented}\n"
            )
        }
        Vendor::List(url) => format!("{}\n", list_entry("vendor", url.as_str())),
        Vendor::Sim { list, origin } => format!(
            "# `proxypool sim`: its list is plain http on loopback and lists proxies on loopback\n\
             # addresses, and its origin answers the health checks.\n\
             [[upstreams]]\n\
             id = \"sim\"\n\
             ttl = \"10m\"\n\
             max_size = 1000\n\
             [upstreams.provider]\n\
             kind = \"http\"\n\
             allow_plaintext = true\n\
             allow_private_hosts = true\n\
             url = {url}\n\
             format = \"json\"\n\
             interval = \"2s\"\n\
             [[upstreams.health.targets]]\n\
             url = \"http://{origin}/health\"\n\
             expect_status = 200\n\n",
            url = quoted(list.as_str()),
        ),
    }
}

/// A vendor's list entry for the list at `url`.
fn list_entry(id: &str, url: &str) -> String {
    let url = quoted(url);
    format!(
        "# The vendor: its proxy list, fetched every interval.\n\
         [[upstreams]]\n\
         id = \"{id}\"\n\
         ttl = \"5m\"                 # lifetime of a proxy the list gives no expiry for\n\
         max_size = 1000            # most proxies kept from this vendor\n\
         [upstreams.provider]\n\
         kind = \"http\"\n\
         url = {url}\n\
         format = \"json\"            # or \"text\": one proxy per line (docs/vendors.md)\n\
         interval = \"30s\"\n\
         # When the proxies take a username and password the list leaves out:\n\
         # allowed_hosts = [\"vendor.example\"]   # the only hosts that get them (required with them)\n\
         # [upstreams.credentials]\n\
         # username = \"customer-42\"\n\
         # password = {{ file = \"secrets/vendor-password\" }}\n\
         [[upstreams.health.targets]]   # fetched through each proxy before it serves\n\
         url = \"https://example.com/\"\n\
         expect_status = 200\n"
    )
}

/// With `proxypool sim`: the gateway may reach its origin on loopback and nothing else
/// there, as under `proxypool dev` (the origin's one-address block lifted out of the
/// refused ranges, its port the only port).
fn destinations(vendor: &Vendor) -> String {
    let Vendor::Sim { origin, .. } = vendor else {
        return String::new();
    };
    let mut destinations = Destinations {
        ports: PortSet::Only([origin.port()].into()),
        ..Destinations::default()
    };
    destinations.allow_origin(*origin);
    format!(
        "\n# The simulated origin is on loopback, which the gateway refuses by default: its\n\
         # address and port only.\n\
         [gateway.destinations]\n\
         allow_cidrs = {:?}\n\
         ports = {}\n",
        destinations.allow_cidrs, destinations.ports
    )
}

/// A TOML basic string: JSON's escapes are a subset of TOML's.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_config::{Config, Env, Role};

    #[test]
    fn the_placeholder_with_the_first_hash_taken_off_each_line_is_an_upstream() {
        let block = upstream(&Vendor::Placeholder);
        let (header, entry): (Vec<&str>, Vec<&str>) = block
            .lines()
            .partition(|line| !line.starts_with("##") && !line.starts_with("# "));
        assert!(header.iter().all(|line| line.is_empty()), "{header:?}");
        let uncommented: String = entry
            .iter()
            .skip(3) // what it is and how to fill it in
            .map(|line| format!("{}\n", &line[1..]))
            .collect();
        let config = Config::from_toml_str(
            &uncommented,
            "placeholder.toml",
            &std::env::temp_dir(),
            Role::Controller,
            &Env::default(),
        )
        .unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
        assert_eq!(config.upstreams.len(), 1);
        assert_eq!(config.upstreams[0].id.as_str(), "vendor");
    }
}
