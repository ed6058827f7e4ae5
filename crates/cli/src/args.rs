//! The command line: every subcommand and flag, as clap derive types.
//!
//! Only parsing lives here; what each subcommand does is in `commands`. Defaults that a
//! newcomer sees in `--help` are chosen so `proxypool dev` works with no flags at all.

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// proxypool: a proxy pool platform (vendor fetch, health checks, exclusive extraction
/// API, rotating HTTP/SOCKS5 gateway).
#[derive(Debug, Parser)]
#[command(name = "proxypool", version, about, long_about = None)]
#[command(
    after_help = "Logs go to stderr; filter them with PROXYPOOL_LOG (or RUST_LOG), \
e.g. PROXYPOOL_LOG=debug or PROXYPOOL_LOG=warn,proxypool_gateway=debug."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Everything in one process on loopback with a simulated vendor: try it in a minute.
    Dev(DevArgs),
    /// Write a starter configuration with freshly generated secrets into DIR: one `serve`
    /// (--single) or a controller and a gateway (--split).
    Init(InitArgs),
    /// Controller, client API and a gateway in one process (one machine).
    Serve(ConfigArg),
    /// Controller and client API (split mode: gateways run as `proxypool gateway`).
    Controller(ConfigArg),
    /// A gateway worker talking to a controller's worker control API.
    Gateway(ConfigArg),
    /// Extract proxies through the client API and print them.
    Extract(ExtractArgs),
    /// Validate a configuration file and print a short summary.
    CheckConfig(CheckConfigArgs),
    /// Apply the quota store's migrations (and optionally create the PostgreSQL role).
    Migrate(MigrateArgs),
    /// What the quota's database remembers of the pool store (its identity, generation and
    /// any recovery from a loss), and an operator's say over recoveries.
    Store(StoreArgs),
    /// The simulated vendor on its own: upstream proxies, a list endpoint and an origin on
    /// loopback, to point a controller at by hand.
    Sim(SimArgs),
    /// GET an http:// or https:// URL and exit 0 on a 2xx answer (1 otherwise), printing
    /// the body: a health check for images that ship no HTTP client (`proxypool probe
    /// http://127.0.0.1:7080/healthz`).
    Probe(ProbeArgs),
    /// Read a secret (an API token, a gateway password, a worker or metrics token) from
    /// standard input and print the `{ hash = "..." }` reference to put in the
    /// configuration file instead of the secret. In a terminal it asks for one line (the
    /// line is shown as typed); from a pipe it reads everything, silently.
    HashSecret,
    /// The certificate authority TLS inspection mints its leaf certificates from
    /// (`[gateway.inspection]`).
    Ca(CaArgs),
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("shape").required(true).args(["single", "split"])))]
pub(crate) struct InitArgs {
    /// Where the files go: created (mode 0700) if missing; one writable by every user is
    /// refused.
    #[arg(value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// One `proxypool serve` (controller, client API and gateway in one process): the pool
    /// in memory, the quota in SQLite.
    #[arg(long)]
    pub single: bool,
    /// `proxypool controller` and `proxypool gateway` as separate processes, the pool in
    /// Redis and the quota in PostgreSQL (gateway.toml is the gateway's file).
    #[arg(long)]
    pub split: bool,
    /// The vendor's proxy list (https://; JSON by default, see docs/vendors.md). Without
    /// it the upstream is a commented placeholder to fill in before serving.
    #[arg(long, value_name = "URL")]
    pub vendor_url: Option<String>,
    /// The list at --vendor-url is a `proxypool sim` on this machine and URL the origin it
    /// printed: the list may be plain http with loopback proxies, the checks go to that
    /// origin and the gateway may reach it (and nothing else on loopback).
    #[arg(long, value_name = "URL", requires = "vendor_url")]
    pub sim_origin: Option<String>,
    /// Replace files a previous `init` wrote (their secrets are made anew).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SimArgs {
    /// How many simulated upstream proxies the vendor lists.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=200))]
    pub proxies: u16,
    /// Lifetime of each simulated proxy in seconds; 0 = no rotation.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub proxy_ttl: u64,
    /// Where the proxies and the list endpoint listen: an IPv4 address or a name resolved
    /// at start (in a container, its service name, so other containers reach them; the
    /// list then names that address). The origin stays on loopback, reached through the
    /// proxies.
    #[arg(long, value_name = "HOST", default_value = "127.0.0.1")]
    pub listen: String,
    /// The list endpoint's port (0 = any free port).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub list_port: u16,
    /// The origin's port on loopback (0 = any free port).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub origin_port: u16,
    /// Where the HTTPS proxy's CA and certificate are written (default: a directory of
    /// this run under the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    pub tls_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ProbeArgs {
    /// The URL to GET: http://, or https:// verified against the public roots.
    #[arg(value_name = "URL")]
    pub url: String,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 3)]
    pub timeout: u64,
}

#[derive(Debug, Args)]
pub(crate) struct ConfigArg {
    /// The configuration file (see examples/proxypool.toml); without the flag,
    /// `PROXYPOOL_CONFIG` names it.
    #[arg(long, short = 'c', value_name = "FILE", env = "PROXYPOOL_CONFIG")]
    pub config: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct DevArgs {
    /// Gateway HTTP proxy listener (port 0 = any free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:18080")]
    pub http: SocketAddr,
    /// Gateway SOCKS5 listener.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:11080")]
    pub socks5: SocketAddr,
    /// Gateway HTTP proxy inside TLS (`--proxy https://`), with a self-signed certificate
    /// for localhost and 127.0.0.1 kept in the data directory.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:18443")]
    pub https: SocketAddr,
    /// Client API listener.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:17080")]
    pub api: SocketAddr,
    /// Worker control API listener (the gateway reaches the controller here).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub control: SocketAddr,
    /// Where the SQLite quota file goes.
    #[arg(long, value_name = "DIR", default_value = ".proxypool-data")]
    pub data_dir: PathBuf,
    /// How many simulated upstream proxies the vendor lists.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(2..=200))]
    pub proxies: u16,
    /// Lifetime of each simulated proxy in seconds (the vendor rotates them like a
    /// residential vendor); 0 = no rotation.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub proxy_ttl: u64,
    /// How long to wait for everything to be ready before giving up.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub ready_timeout: u64,
    /// Makes the simulated origin ban one exit for one host name, as a site that has
    /// blocked an address: requests to HOST (a name under `.test`, which the simulated
    /// proxies resolve to the origin) leaving from EXIT are answered STATUS (default 403;
    /// 429 for rate limiting). Repeat for more bans, e.g.
    /// `--ban-exit 127.0.0.2=shop-a.test --ban-exit 127.0.0.3=shop-a.test:429`.
    #[arg(long, value_name = "EXIT=HOST[:STATUS]", value_parser = parse_dev_ban)]
    pub ban_exit: Vec<DevBan>,
}

/// One `--ban-exit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DevBan {
    pub exit: Ipv4Addr,
    pub host: String,
    pub status: u16,
}

fn parse_dev_ban(raw: &str) -> Result<DevBan, String> {
    let (exit, rest) = raw
        .split_once('=')
        .ok_or("expected EXIT=HOST[:STATUS], e.g. 127.0.0.2=shop-a.test:429")?;
    let exit: Ipv4Addr = exit
        .parse()
        .map_err(|_| format!("{exit:?} is not an IPv4 exit address (127.0.0.x)"))?;
    if !exit.is_loopback() {
        return Err(format!("{exit}: simulated exits are loopback addresses"));
    }
    let (host, status) = match rest.rsplit_once(':') {
        Some((host, status)) => {
            let status: u16 = status
                .parse()
                .ok()
                .filter(|s| (400..=599).contains(s))
                .ok_or_else(|| format!("{status:?}: the ban status must be 400-599"))?;
            (host, status)
        }
        None => (rest, 403),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let under_test = host
        .strip_suffix(".test")
        .is_some_and(|name| !name.is_empty() && !name.ends_with('.'));
    let valid = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
    if !under_test || !valid {
        return Err(format!(
            "{host:?}: the host must be a name under .test (the simulated proxies send those to the origin)"
        ));
    }
    Ok(DevBan { exit, host, status })
}

#[derive(Debug, Args)]
pub(crate) struct ExtractArgs {
    /// Base URL of the client API.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:17080")]
    pub api: String,
    /// Environment variable holding the API token.
    #[arg(long, value_name = "VAR", default_value = "PROXYPOOL_TOKEN")]
    pub token_env: String,
    /// CA bundle (PEM) the API's certificate must chain to, for an https:// URL with a
    /// private CA (default: the public roots).
    #[arg(long, value_name = "FILE")]
    pub ca: Option<std::path::PathBuf>,
    /// How many proxies to extract.
    #[arg(long, short = 'n', default_value_t = 1)]
    pub count: u32,
    /// `partial` returns what is there; `all-or-nothing` changes nothing unless all are found.
    #[arg(long, value_enum, default_value_t = Mode::Partial)]
    pub mode: Mode,
    /// Only proxies of this protocol (http, https, socks5).
    #[arg(long)]
    pub protocol: Option<String>,
    /// Only proxies in this region (`--country` is the same filter).
    #[arg(long, visible_alias = "country")]
    pub region: Option<String>,
    /// Only proxies of this carrier.
    #[arg(long)]
    pub carrier: Option<String>,
    /// Only proxies of this upstream (vendor) id.
    #[arg(long)]
    pub upstream: Option<String>,
    /// Only proxies in this city, in any case and with spaces, -, + or _ between words
    /// ("New York", new_york).
    #[arg(long)]
    pub city: Option<String>,
    /// Only proxies in this state or province, written as a city is.
    #[arg(long)]
    pub state: Option<String>,
    /// Only proxies of this autonomous system (AS7922 or 7922).
    #[arg(long)]
    pub asn: Option<String>,
    /// Only proxies checked within this many milliseconds.
    #[arg(long, value_name = "MS")]
    pub min_health_freshness_ms: Option<u64>,
    /// Makes a retry return the same extraction instead of a new one.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// Print the API's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Give up on the request after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 15)]
    pub timeout: u64,
}

/// How an extraction treats a shortfall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    Partial,
    AllOrNothing,
}

impl Mode {
    /// The API's spelling.
    pub(crate) fn wire(self) -> &'static str {
        match self {
            Mode::Partial => "partial",
            Mode::AllOrNothing => "all_or_nothing",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct CheckConfigArgs {
    /// The configuration file (controller, `[api]` and/or `[gateway]` sections); without
    /// it, `PROXYPOOL_CONFIG` names it.
    #[arg(value_name = "FILE", env = "PROXYPOOL_CONFIG")]
    pub file: PathBuf,
    /// Print the resolved configuration (overrides applied, defaults filled in, every
    /// secret shown only as its reference) instead of the summary.
    #[arg(long)]
    pub effective: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    #[command(subcommand)]
    pub action: StoreAction,
    /// The configuration file: `[store] key_prefix` names the pool, `[quota]` the database
    /// that remembers it. Without the flag, `PROXYPOOL_CONFIG` names it.
    #[arg(
        long,
        short = 'c',
        value_name = "FILE",
        env = "PROXYPOOL_CONFIG",
        global = true
    )]
    pub config: Option<PathBuf>,
    /// PostgreSQL: environment variable with the operator's URL (the database owner's, as
    /// `migrate --admin-url-env` takes it; password included). `acknowledge` and `recover`
    /// need it: the runtime role of `[quota]` may not write them. `status` reads with
    /// either.
    #[arg(long, value_name = "VAR", global = true)]
    pub admin_url_env: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct CaArgs {
    #[command(subcommand)]
    pub command: CaCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum CaCommand {
    /// Make a new CA: DIR/ca.pem (the certificate inspected clients trust, mode 0644) and
    /// DIR/ca-key.pem (its key, mode 0600), then print the `[gateway.inspection]` lines to
    /// paste and how clients trust it.
    Init(CaInitArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CaInitArgs {
    /// Where the files go: created (mode 0700) if missing; one writable by every user is
    /// refused.
    #[arg(long, value_name = "DIR", default_value = "ca")]
    pub dir: PathBuf,
    /// The CA's common name, as clients show it.
    #[arg(long, value_name = "NAME", default_value = "proxypool inspection CA")]
    pub name: String,
    /// Replace a CA already in DIR (every inspected client must then trust the new one).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub(crate) enum StoreAction {
    /// Print the pool store's record as JSON.
    Status,
    /// End the current recovery now: proxies withheld since a loss are released. Only when
    /// you know nothing was handed out before the loss (a fresh deployment, a test).
    Acknowledge,
    /// Start a recovery as if the store had been lost (e.g. after restoring Redis from a
    /// copy): the controllers put a new, empty store in place and withhold every proxy
    /// listed again until its hold ends.
    Recover,
}

#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The configuration file; its `[quota] url` names the store. Without the flag,
    /// `PROXYPOOL_CONFIG` names it.
    #[arg(long, short = 'c', value_name = "FILE", env = "PROXYPOOL_CONFIG")]
    pub config: PathBuf,
    /// PostgreSQL: environment variable with an owner/admin URL (password included) to
    /// migrate with, instead of the configured (least-privilege) quota URL.
    #[arg(long, value_name = "VAR")]
    pub admin_url_env: Option<String>,
    /// PostgreSQL: also create (or re-assert) this least-privilege login role.
    #[arg(long, value_name = "ROLE")]
    pub create_role: Option<String>,
    /// PostgreSQL: environment variable with the password to give the role.
    #[arg(long, value_name = "VAR", requires = "create_role")]
    pub role_password_env: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_bans_parse_with_a_default_status() {
        assert_eq!(
            parse_dev_ban("127.0.0.2=Shop-A.test"),
            Ok(DevBan {
                exit: Ipv4Addr::new(127, 0, 0, 2),
                host: "shop-a.test".into(),
                status: 403
            })
        );
        assert_eq!(
            parse_dev_ban("127.0.0.3=shop-b.test:429").unwrap().status,
            429
        );
        for bad in [
            "shop-a.test",
            "10.0.0.1=shop-a.test",
            "127.0.0.2=example.com",
            "127.0.0.2=.test",
            "127.0.0.2=shop-a.test:200",
            "127.0.0.2=shop-a.test:abc",
            "127.0.0.2=shop a.test",
        ] {
            assert!(parse_dev_ban(bad).is_err(), "{bad}");
        }
    }
}
