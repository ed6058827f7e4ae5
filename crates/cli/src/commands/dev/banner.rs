//! What `dev` prints on stdout once it is ready: the addresses, the generated client
//! credentials, and three commands that work when pasted as they are.
//!
//! The labels are stable (the end-to-end tests read them): `gateway HTTP`, `gateway
//! HTTPS`, `gateway TLS cert`, `gateway SOCKS5`, `client API`, `dashboard`, `origin`,
//! `proxy username`, `proxy password`, `API token`, `https origin`, `inspection CA`, and
//! the six command lines start with `curl` (the fifth through the TLS listener, the last
//! an inspected https request). The dashboard signs in with the API token (the dev client
//! is an admin).

use super::setup::{CLIENT, Credentials};
use crate::args::DevArgs;
use crate::failure::Failure;
use crate::stack::{Stack, dialable};
use proxypool_sim::SimVendor;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

/// The addresses a user (or a probe) connects to.
#[derive(Debug, Clone)]
pub(super) struct Endpoints {
    pub http: SocketAddr,
    pub https: SocketAddr,
    /// The TLS listener's self-signed certificate (what a client trusts).
    pub https_cert: super::tls::ListenerCert,
    pub socks5: SocketAddr,
    pub api: SocketAddr,
    pub control: SocketAddr,
}

impl Endpoints {
    pub(super) fn new(
        stack: &Stack,
        https_cert: super::tls::ListenerCert,
    ) -> Result<Self, Failure> {
        let missing = || Failure::runtime("the gateway has no listener address");
        Ok(Endpoints {
            http: dialable(stack.http_addr.ok_or_else(missing)?),
            https: dialable(stack.https_addr.ok_or_else(missing)?),
            https_cert,
            socks5: dialable(stack.socks5_addr.ok_or_else(missing)?),
            api: dialable(stack.api_addr),
            control: dialable(stack.control_addr()),
        })
    }
}

/// Prints the banner to stdout (and flushes: a pipe would otherwise hold it back).
pub(super) fn print(
    endpoints: &Endpoints,
    sim: &SimVendor,
    credentials: &Credentials,
    args: &DevArgs,
    inspection: &super::inspection::Demo,
    took: Duration,
) {
    let text = render(endpoints, sim, credentials, args, inspection, took);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn render(
    endpoints: &Endpoints,
    sim: &SimVendor,
    credentials: &Credentials,
    args: &DevArgs,
    inspection: &super::inspection::Demo,
    took: Duration,
) -> String {
    let origin = sim.origin().url("/");
    let password = &credentials.gateway_password;
    let token = &credentials.api_token;
    let exits = sim
        .proxies()
        .iter()
        .map(|p| p.exit_ip())
        .fold(None, |range: Option<(_, _)>, ip| match range {
            None => Some((ip, ip)),
            Some((lo, hi)) => Some((lo.min(ip), hi.max(ip))),
        })
        .map(|(lo, hi)| format!("exits {lo}-{hi}"))
        .unwrap_or_default();
    let rotation = if args.proxy_ttl > 0 {
        format!(
            "each lives up to {}s, then the vendor replaces it",
            args.proxy_ttl
        )
    } else {
        "no rotation".to_owned()
    };
    let quota = args.data_dir.join("quota.sqlite3");
    let shop_a = sim.origin().host_url("shop-a.test", "/");
    let shop_b = sim.origin().host_url("shop-b.test", "/");
    let https_shop_a = inspection.origin.host_url("shop-a.test", "/");
    let bans = if args.ban_exit.is_empty() {
        "none (try --ban-exit 127.0.0.2=shop-a.test:429)".to_owned()
    } else {
        args.ban_exit
            .iter()
            .map(|ban| format!("{} on {} ({})", ban.exit, ban.host, ban.status))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        r#"
proxypool dev is ready ({took:.1?} after start)

  simulated vendor   {n} proxies, HTTP and SOCKS5, {exits}; {rotation}
  origin             {origin}   (answers with the exit address it saw)
  origin by name     {shop_a} {shop_b}   (any name under .test; through the proxies only)
  origin bans        {bans}
  gateway HTTP       {http}
  gateway HTTPS      {https}   (the HTTP proxy inside TLS)
  gateway TLS cert   {https_cert}   (self-signed for localhost and 127.0.0.1: trust it)
  gateway SOCKS5     {socks5}
  client API         http://{api}
  dashboard          http://{api}/ui/   (sign in with the API token below)
  control API        {control}   (the gateway registers here)
  quota (SQLite)     {quota}
  https origin       {https_shop_a}   (the origin behind TLS, for inspected requests)
  inspection CA      {inspection_ca}   (the gateway's CA: trust it for {CLIENT}-inspect)

  proxy username     {CLIENT}
  proxy password     {password}
  API token          {token}

Try it (each request may leave through another exit):

  curl -x http://{CLIENT}:{password}@{http} {origin}
  curl --socks5-hostname {socks5} --proxy-user {CLIENT}:{password} {origin}
  curl -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' -d '{{"count":2}}' http://{api}/v1/extractions
  curl -i -x http://{CLIENT}:{password}@{http} {shop_a}
  curl --proxy https://{CLIENT}:{password}@{https} --proxy-cacert {https_cert} {origin}
  curl -i --proxy http://{CLIENT}-inspect:{password}@{http} --cacert {inspection_ca} {https_shop_a}

Keep one exit with a sticky session: use the username {CLIENT}-session-mysession.
Extract with the CLI: PROXYPOOL_TOKEN={token} {exe} extract --api http://{api} --count 2
Stop with Ctrl-C.
"#,
        n = sim.proxies().len(),
        exe = crate::shell::this_binary(),
        quota = quota.display(),
        inspection_ca = inspection.ca_cert.display(),
        http = endpoints.http,
        https = endpoints.https,
        https_cert = endpoints.https_cert.cert.display(),
        socks5 = endpoints.socks5,
        api = endpoints.api,
        control = endpoints.control,
    )
}
