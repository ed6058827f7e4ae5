//! One check of one proxy: dial it, go through it to each target, compare the status.
//!
//! - HTTP proxies, `via = "absolute"`: an absolute-form `GET http://target/...` to the proxy.
//! - HTTP proxies, `via = "connect"`, and HTTPS-labelled proxies: `CONNECT target`, then an
//!   origin-form `GET` through the tunnel.
//! - SOCKS5 proxies: RFC 1928 CONNECT with RFC 1929 username/password, then the `GET`.
//! - An `https` proxy is reached over TLS first (its upstream's `proxy_tls`), as the
//!   gateways reach it; an `https://` target is always tunnelled and spoken to over TLS
//!   inside the tunnel, its certificate verified against the health `ca` (or the public
//!   roots).
//!
//! The proxy's host is resolved once per check and only an address that was checked is
//! dialed: for a fetched list (unless `allow_private_hosts`), a host with any loopback,
//! private or link-local address is not dialed at all (failure `private_host`).
//!
//! The wire protocols are `proxypool-proto`'s; this module only sequences them. A failure
//! becomes a short error kind (never text the proxy sent, which could echo credentials).

use crate::config::{CheckTarget, HttpCheckMode, TargetUrl};
use crate::provider::hygiene::is_internal_address;
use proxypool_core::{CheckOutcome, Protocol, ProxyRecord};
use proxypool_edge::{ClientTls, Conn, ProxyTrust};
use proxypool_proto::http_connect::{
    self, MAX_RESPONSE_HEAD, basic_auth_value, read_response_head,
};
use proxypool_proto::{ProtoError, TargetAddr, socks5};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// How to check the proxies of one upstream.
#[derive(Debug, Clone)]
pub struct ProbePlan {
    pub targets: Vec<(TargetUrl, u16)>,
    pub via: HttpCheckMode,
    /// Slower than this (but in time) is a failure of kind `slow`.
    pub max_latency: Option<Duration>,
    /// A proxy whose host resolves to a loopback, private or link-local address is not
    /// dialed (failure `private_host`): set for fetched lists unless `allow_private_hosts`.
    pub refuse_internal: bool,
    /// TLS to the upstream's `https` proxies.
    pub proxy_tls: ProxyTrust,
    /// Trust for `https://` targets.
    pub target_tls: Result<ClientTls, String>,
}

impl ProbePlan {
    pub fn new(targets: &[CheckTarget], via: HttpCheckMode, max_latency: Option<Duration>) -> Self {
        ProbePlan {
            targets: targets
                .iter()
                .filter_map(|t| t.parsed.clone().map(|url| (url, t.expect_status)))
                .collect(),
            via,
            max_latency,
            refuse_internal: false,
            proxy_tls: ProxyTrust::of(None),
            target_tls: Ok(ClientTls::public_roots()),
        }
    }

    /// The same plan with this TLS to the proxies and this trust for `https://` targets.
    pub fn with_tls(
        mut self,
        proxy_tls: ProxyTrust,
        target_tls: Result<ClientTls, String>,
    ) -> Self {
        self.proxy_tls = proxy_tls;
        self.target_tls = target_tls;
        self
    }

    /// The same plan, refusing internal addresses when `refuse` is set.
    pub fn refusing_internal(mut self, refuse: bool) -> Self {
        self.refuse_internal = refuse;
        self
    }
}

/// Checks `record` against every target of `plan` within `timeout` (for the whole check).
pub async fn probe(record: &ProxyRecord, plan: &ProbePlan, timeout: Duration) -> CheckOutcome {
    let started = Instant::now();
    let result = tokio::time::timeout(timeout, probe_all(record, plan)).await;
    let elapsed = started.elapsed();
    match result {
        Err(_) => failure("timeout"),
        Ok(Err(kind)) => failure(kind),
        Ok(Ok(())) if plan.max_latency.is_some_and(|max| elapsed > max) => failure("slow"),
        Ok(Ok(())) => CheckOutcome::Success {
            latency_ms: u32::try_from(elapsed.as_millis())
                .unwrap_or(u32::MAX)
                .max(1),
        },
    }
}

fn failure(kind: &str) -> CheckOutcome {
    CheckOutcome::Failure {
        error: kind.to_owned(),
    }
}

async fn probe_all(record: &ProxyRecord, plan: &ProbePlan) -> Result<(), &'static str> {
    if plan.targets.is_empty() {
        return Err("no_targets");
    }
    // Resolved once per check, and only an address that was checked is dialed, so a name
    // cannot pass the check and then be dialed as another address.
    let proxy = dial_address(record, plan.refuse_internal).await?;
    for (target, expect) in &plan.targets {
        let status = probe_one(record, proxy, target, plan).await?;
        if status != *expect {
            return Err(if status == 407 {
                "proxy_auth"
            } else {
                "bad_status"
            });
        }
    }
    Ok(())
}

/// The address the proxy's host resolves to, refused when `refuse_internal` and any of
/// its addresses is internal.
async fn dial_address(
    record: &ProxyRecord,
    refuse_internal: bool,
) -> Result<SocketAddr, &'static str> {
    let host = record.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, record.port))
        .await
        .map_err(|_| "resolve_failed")?
        .collect();
    if refuse_internal && addrs.iter().any(|addr| is_internal_address(addr.ip())) {
        return Err("private_host");
    }
    addrs.first().copied().ok_or("resolve_failed")
}

/// The status the target answered through the proxy at `proxy`.
async fn probe_one(
    record: &ProxyRecord,
    proxy: SocketAddr,
    target: &TargetUrl,
    plan: &ProbePlan,
) -> Result<u16, &'static str> {
    let tcp = TcpStream::connect(proxy)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "connect_refused",
            _ => "connect_failed",
        })?;
    let _ = tcp.set_nodelay(true);
    let mut stream = match record.protocol {
        Protocol::Https => {
            let tls = plan.proxy_tls.client().map_err(|_| "proxy_tls")?;
            tls.handshake(plan.proxy_tls.server_name(&record.host), tcp)
                .await
                .map_err(|_| "proxy_tls")?
        }
        Protocol::Http | Protocol::Socks5 => Conn::Plain(tcp),
    };
    let creds = record
        .credentials
        .as_ref()
        .map(|c| (c.username.as_str(), c.password.expose()));
    let tunnel = match record.protocol {
        Protocol::Socks5 => {
            let addr =
                TargetAddr::domain(target.host.clone(), target.port).map_err(|_| "bad_target")?;
            socks5::connect(&mut stream, &addr, creds)
                .await
                .map_err(proto_kind)?;
            true
        }
        Protocol::Http if plan.via == HttpCheckMode::Absolute && !target.tls => false,
        Protocol::Http | Protocol::Https => {
            let authority = authority(target);
            http_connect::connect(&mut stream, &authority, creds)
                .await
                .map_err(proto_kind)?;
            true
        }
    };
    let mut request = if tunnel {
        format!("GET {} HTTP/1.1\r\n", target.path_and_query)
    } else {
        let mut head = format!("GET {} HTTP/1.1\r\n", target.absolute());
        if let Some((user, pass)) = creds {
            head.push_str(&format!(
                "Proxy-Authorization: {}\r\n",
                basic_auth_value(user, pass)
            ));
        }
        head
    };
    request.push_str(&format!(
        "Host: {}\r\nUser-Agent: proxypool-checker\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        target.host_header()
    ));
    if !target.tls {
        return exchange(&mut stream, &request).await;
    }
    // TLS to the site inside the tunnel: a proxy that cannot carry it (or tampers with
    // it) fails its check.
    let trust = plan.target_tls.as_ref().map_err(|_| "target_tls")?;
    let mut inner = trust
        .connect(&target.host, &mut stream)
        .await
        .map_err(|_| "target_tls")?;
    exchange(&mut inner, &request).await
}

/// Sends `request` and reads the status of the answer's head.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: &str,
) -> Result<u16, &'static str> {
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|_| "io_error")?;
    let head = read_response_head(stream, MAX_RESPONSE_HEAD)
        .await
        .map_err(proto_kind)?;
    Ok(head.status)
}

fn authority(target: &TargetUrl) -> String {
    if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    }
}

fn proto_kind(error: ProtoError) -> &'static str {
    match error {
        e if e.is_auth_rejected() => "proxy_auth",
        e if e.is_timeout() => "timeout",
        ProtoError::Rejected { .. } | ProtoError::SocksRejected { .. } => "proxy_refused",
        ProtoError::Malformed { .. } => "protocol_error",
        ProtoError::Io(_) => "io_error",
        _ => "proxy_error",
    }
}
