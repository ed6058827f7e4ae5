//! `proxypool sim`: the simulated vendor on its own (the one `dev` runs inside), so split
//! mode can be tried and tested by hand without writing a vendor: it prints its list URL,
//! its vendor APIs (Webshare's shape among them), its proxies, its origin, its backconnect
//! gateway and a ready `[[upstreams]]` entry for the list and for the gateway, then serves
//! until a signal.

use crate::args::SimArgs;
use crate::failure::Failure;
use crate::signal::Shutdown;
use proxypool_sim::{
    BACKCONNECT_ACCOUNT, BACKCONNECT_PASSWORD, ListFormat, ProxyKind, SimConfig, SimVendor,
};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

pub(crate) async fn run(args: SimArgs) -> Result<(), Failure> {
    let shutdown =
        Shutdown::install().map_err(|e| Failure::runtime(format!("signal handlers: {e}")))?;
    let listen_ip = resolve_ipv4(&args.listen).await?;
    let tls_dir = args.tls_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("proxypool-sim-{}", std::process::id()))
    });
    // The HTTPS proxy is an extra: where its files cannot be written (a read-only
    // container), the rest runs without it.
    let tls = match super::sim_tls::make(&tls_dir, listen_ip) {
        Ok(tls) => Some(tls),
        Err(failure) => {
            tracing::warn!(error = %failure, "no HTTPS proxy: its certificate cannot be made");
            None
        }
    };
    let ca_file = tls.as_ref().map(|tls| tls.ca_file.clone());
    let config = SimConfig {
        listen_ip,
        list_port: args.list_port,
        origin_port: args.origin_port,
        https_proxy: tls.map(|tls| tls.config),
        ..vendor_config(args.proxies, args.proxy_ttl)
    };
    let sim = SimVendor::start(config)
        .await
        .map_err(|e| Failure::runtime(format!("simulated vendor: {e}")))?;
    print!("{}", banner(&sim, args.proxy_ttl, ca_file.as_deref()));
    shutdown.wait().await;
    Ok(())
}

/// `--listen`: an IPv4 address as written, or the first IPv4 address a name resolves to
/// (a container's own service name resolves to its address on the network).
async fn resolve_ipv4(host: &str) -> Result<Ipv4Addr, Failure> {
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    let addresses = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| Failure::config(format!("--listen {host}: {e}")))?;
    addresses
        .filter_map(|address| match address.ip() {
            IpAddr::V4(ip) => Some(ip),
            IpAddr::V6(_) => None,
        })
        .next()
        .ok_or_else(|| Failure::config(format!("--listen {host}: no IPv4 address")))
}

/// The simulated vendor `sim` and `dev` run: HTTP and SOCKS5 proxies alternating, three
/// regions, a JSON list; each proxy lives `ttl_secs` (0: no rotation).
pub(crate) fn vendor_config(proxies: u16, ttl_secs: u64) -> SimConfig {
    SimConfig {
        proxies: usize::from(proxies),
        kinds: vec![ProxyKind::Http, ProxyKind::Socks5],
        regions: vec!["us".into(), "de".into(), "jp".into()],
        carriers: vec!["simnet".into()],
        ttl: (ttl_secs > 0).then(|| Duration::from_secs(ttl_secs)),
        format: ListFormat::Json,
        ..SimConfig::default()
    }
}

/// What `sim` prints: every line a person (or a test) needs to point a controller at it.
fn banner(sim: &SimVendor, ttl: u64, ca_file: Option<&std::path::Path>) -> String {
    let mut out = String::new();
    let rotation = if ttl > 0 {
        format!("each lives up to {ttl}s, then the vendor replaces it")
    } else {
        "no rotation".to_owned()
    };
    let _ = writeln!(out, "proxypool sim is ready\n");
    let _ = writeln!(
        out,
        "  vendor list   {}   (JSON; {rotation})",
        sim.list_url()
    );
    let api = sim.vendor().api_config();
    let _ = writeln!(
        out,
        "  vendor API    {}   (paginated gzip JSON; Authorization: Token {})",
        sim.vendor().api_url(),
        api.token
    );
    let _ = writeln!(
        out,
        "  basic list    {}   (text, HTTP Basic {}:{})",
        sim.vendor().basic_url(),
        api.basic.0,
        api.basic.1
    );
    let _ = writeln!(
        out,
        "  webshare list {}   (Webshare's shape, docs/vendors.md's example: gzip JSON pages, the http proxies, every third entry \"valid\": false; Authorization: Token {})",
        sim.vendor().webshare_url(),
        api.token
    );
    let _ = writeln!(
        out,
        "  origin        {}   (answers with the exit address it saw)",
        sim.origin().url("/")
    );
    let _ = writeln!(out, "  proxies       {}", sim.proxies().len());
    for proxy in sim.proxies() {
        let kind = match proxy.kind() {
            ProxyKind::Http => "http",
            ProxyKind::Socks5 => "socks5",
        };
        let credentials = proxy
            .credentials()
            .map(|(user, pass)| format!("  {user}:{pass}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    {kind:<6} {}  exit {}{credentials}",
            proxy.addr(),
            proxy.exit_ip()
        );
    }
    let _ = writeln!(
        out,
        "  backconnect   {}   (user {BACKCONNECT_ACCOUNT}[-country-CC][-session-ID][-sesstime-MIN], password {BACKCONNECT_PASSWORD})",
        sim.backconnect().addr()
    );
    if let (Some(https), Some(ca_file)) = (sim.https_proxy(), ca_file) {
        let credentials = https
            .credentials()
            .map(|(user, pass)| format!("{user}:{pass}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  https proxy   {}   (exit {}, {credentials}, CA {})",
            https.addr(),
            https.exit_ip(),
            ca_file.display()
        );
    }
    let _ = writeln!(
        out,
        "\nAn upstream entry for the controller's file (the origin serves the health check; the\nlist is plain http on a private address, hence allow_plaintext and allow_private_hosts):\n"
    );
    let _ = writeln!(
        out,
        "[[upstreams]]\nid = \"sim\"\nttl = \"{}s\"\nmax_size = 1000\n[upstreams.provider]\nkind = \"http\"\nallow_plaintext = true\nallow_private_hosts = true\nurl = \"{}\"\nformat = \"json\"\ninterval = \"2s\"\n[[upstreams.health.targets]]\nurl = \"{}\"",
        // A record lives as long as the vendor keeps a proxy (ten minutes without rotation).
        if ttl > 0 { ttl } else { 600 },
        sim.list_url(),
        sim.origin().url("/health"),
    );
    let _ = writeln!(
        out,
        "\nAnd one for the backconnect gateway (with SIM_BC_PASSWORD={BACKCONNECT_PASSWORD} in the\nenvironment): two sessions per country, each its own proxy for two minutes:\n\n{}",
        backconnect_upstream(sim)
    );
    let _ = writeln!(
        out,
        "\nThe origin is on loopback: let the gateways reach it with\n[gateway.destinations] allow_cidrs = [\"{}/32\"] and a ports list with {}.",
        sim.origin().addr().ip(),
        sim.origin().addr().port()
    );
    let _ = writeln!(out, "Stop with Ctrl-C.");
    out
}

/// The `[[upstreams]]` entry of the backconnect gateway (`sim_bc`), its password from the
/// environment variable `SIM_BC_PASSWORD`.
pub(crate) fn backconnect_upstream(sim: &SimVendor) -> String {
    let gateway = sim.backconnect().addr();
    let mut entry = format!(
        "[[upstreams]]\nid = \"sim_bc\"\nttl = \"10m\"\nsafety_margin = \"10s\"\nmax_size = 100\n\
         [upstreams.credentials]\nusername = \"{BACKCONNECT_ACCOUNT}\"\npassword = {{ env = \"SIM_BC_PASSWORD\" }}\n\
         [upstreams.provider]\nkind = \"backconnect\"\ninterval = \"1s\"\n\
         [upstreams.provider.backconnect]\nhost = \"{}\"\nport = {}\n\
         username = \"{{account}}[-country-{{country}}]-session-{{session}}-sesstime-{{minutes}}\"\n\
         session_lifetime = \"2m\"\n",
        gateway.ip(),
        gateway.port()
    );
    for country in ["us", "de"] {
        let _ = write!(
            entry,
            "[[upstreams.provider.backconnect.sessions]]\ncountry = \"{country}\"\ncount = 2\n"
        );
    }
    let _ = write!(
        entry,
        "[[upstreams.health.targets]]\nurl = \"{}\"",
        sim.origin().url("/health")
    );
    entry
}
