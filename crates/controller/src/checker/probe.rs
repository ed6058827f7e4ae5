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
//! dialed: for a fetched list (unless `allow_private_hosts`), a host with any address
//! that `proxypool_core::is_internal_address` refuses (loopback, private, link-local, ...)
//! is not dialed at all (failure `dns`). The gateways apply the same rule to the same
//! upstreams when they dial (`crate::upstream_tls::refuses_internal`).
//!
//! The wire protocols are `proxypool-proto`'s; this module only sequences them. A failure
//! becomes one of the bounded reasons of [`CheckFailure`], which is what the record keeps,
//! and a cause for the log: the error's own chain (an OS error, rustls's reason, a SOCKS5
//! reply code, a status number), never a message whose text the proxy chose, which could
//! echo credentials.

use crate::config::{CheckTarget, HttpCheckMode, TargetUrl};
use proxypool_core::{
    CheckFailure, CheckOutcome, Protocol, ProxyRecord, dial_address, is_internal_address,
};
use proxypool_edge::{ClientTls, Conn, ProxyTrust};
use proxypool_proto::http_connect::{
    self, MAX_RESPONSE_HEAD, basic_auth_value, read_response_head,
};
use proxypool_proto::{ProtoError, TargetAddr, socks5};
use std::error::Error;
use std::net::SocketAddr;
use std::sync::Mutex;
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
    /// dialed (failure `dns`): set for fetched lists unless `allow_private_hosts`.
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

/// A failed check: the reason kept and counted, and its cause for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub reason: CheckFailure,
    /// What went wrong, from our errors' text only (see the module doc).
    pub cause: String,
}

impl Failed {
    fn new(reason: CheckFailure, cause: impl Into<String>) -> Self {
        Failed {
            reason,
            cause: cause.into(),
        }
    }

    /// `reason`, caused by `error` and the errors under it.
    fn of(reason: CheckFailure, error: &dyn Error) -> Self {
        Failed::new(reason, chain(error))
    }
}

/// An error and its sources, `": "`-separated; a source whose text its parent's already
/// ends with (`"i/o error: {0}"` over the `io::Error`) is not repeated.
pub fn chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let part = source.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = source.source();
    }
    text
}

/// The step a check is at, so that a timeout can say where it was waiting.
#[derive(Debug)]
struct Progress(Mutex<&'static str>);

impl Progress {
    fn at(&self, step: &'static str) {
        // A poisoned lock only loses the step's name; the check goes on.
        if let Ok(mut current) = self.0.lock() {
            *current = step;
        }
    }

    fn step(&self) -> &'static str {
        self.0.lock().map_or("checking", |current| *current)
    }
}

/// Checks `record` against every target of `plan` within `timeout` (for the whole check).
pub async fn probe(record: &ProxyRecord, plan: &ProbePlan, timeout: Duration) -> CheckOutcome {
    match check(record, plan, timeout).await {
        Ok(latency_ms) => CheckOutcome::Success { latency_ms },
        Err(failed) => CheckOutcome::failure(failed.reason),
    }
}

/// As [`probe`], with the cause of a failure: the latency in milliseconds (at least 1), or
/// why the check failed.
pub async fn check(
    record: &ProxyRecord,
    plan: &ProbePlan,
    timeout: Duration,
) -> Result<u32, Failed> {
    let started = Instant::now();
    let progress = Progress(Mutex::new("resolving the proxy's host"));
    let result = tokio::time::timeout(timeout, probe_all(record, plan, &progress)).await;
    let elapsed = started.elapsed();
    match result {
        Err(_) => Err(Failed::new(
            CheckFailure::Timeout,
            format!("no result within {timeout:?}, while {}", progress.step()),
        )),
        Ok(Err(failed)) => Err(failed),
        Ok(Ok(())) => match plan.max_latency {
            Some(max) if elapsed > max => Err(Failed::new(
                CheckFailure::Slow,
                format!("took {elapsed:?}, more than max_latency {max:?}"),
            )),
            _ => Ok(u32::try_from(elapsed.as_millis())
                .unwrap_or(u32::MAX)
                .max(1)),
        },
    }
}

async fn probe_all(
    record: &ProxyRecord,
    plan: &ProbePlan,
    progress: &Progress,
) -> Result<(), Failed> {
    if plan.targets.is_empty() {
        return Err(Failed::new(CheckFailure::Other, "no check target"));
    }
    // Resolved once per check, and only an address that was checked is dialed, so a name
    // cannot pass the check and then be dialed as another address.
    let proxy = checked_address(record, plan.refuse_internal).await?;
    for (target, expect) in &plan.targets {
        let status = probe_one(record, proxy, target, plan, progress).await?;
        if status == 407 && *expect != 407 {
            // Absolute-form: the proxy itself answered the request.
            return Err(Failed::new(
                CheckFailure::Auth,
                "the proxy answered 407 Proxy Authentication Required",
            ));
        }
        if status != *expect {
            return Err(Failed::new(
                CheckFailure::Status,
                format!(
                    "{} answered {status}, expected {expect}",
                    target.host_header()
                ),
            ));
        }
    }
    Ok(())
}

/// The address the proxy's host resolves to, refused when `refuse_internal` and any of
/// its addresses is internal.
async fn checked_address(
    record: &ProxyRecord,
    refuse_internal: bool,
) -> Result<SocketAddr, Failed> {
    let host = record.host.trim_start_matches('[').trim_end_matches(']');
    // Canonical (an IPv4-mapped answer as its IPv4 address), so the rule judges the
    // address the socket connects to.
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, record.port))
        .await
        .map_err(|e| Failed::of(CheckFailure::Dns, &e))?
        .map(dial_address)
        .collect();
    if refuse_internal && addrs.iter().any(|addr| is_internal_address(addr.ip())) {
        return Err(Failed::new(
            CheckFailure::Dns,
            "the host resolves to an internal address, which this fetched list may not name \
             (allow_private_hosts)",
        ));
    }
    addrs
        .first()
        .copied()
        .ok_or_else(|| Failed::new(CheckFailure::Dns, "the host resolves to no address"))
}

/// The status the target answered through the proxy at `proxy`.
async fn probe_one(
    record: &ProxyRecord,
    proxy: SocketAddr,
    target: &TargetUrl,
    plan: &ProbePlan,
    progress: &Progress,
) -> Result<u16, Failed> {
    progress.at("connecting to the proxy");
    let tcp = TcpStream::connect(proxy)
        .await
        .map_err(|e| Failed::of(CheckFailure::Connect, &e))?;
    let _ = tcp.set_nodelay(true);
    let mut stream = match record.protocol {
        Protocol::Https => {
            progress.at("in the TLS handshake with the proxy");
            let tls = plan.proxy_tls.client().map_err(|e| {
                Failed::new(
                    CheckFailure::ProxyTls,
                    format!("the upstream's proxy CA bundle cannot be used: {e}"),
                )
            })?;
            tls.handshake(plan.proxy_tls.server_name(&record.host), tcp)
                .await
                .map_err(|e| Failed::of(CheckFailure::ProxyTls, &e))?
        }
        Protocol::Http | Protocol::Socks5 => Conn::Plain(tcp),
    };
    let creds = record
        .credentials
        .as_ref()
        .map(|c| (c.username.as_str(), c.password.expose()));
    progress.at("waiting for the proxy to open the tunnel");
    let tunnel = match record.protocol {
        Protocol::Socks5 => {
            let addr = TargetAddr::domain(target.host.clone(), target.port)
                .map_err(|e| Failed::of(CheckFailure::Other, &e))?;
            socks5::connect(&mut stream, &addr, creds)
                .await
                .map_err(proto_failure)?;
            true
        }
        Protocol::Http if plan.via == HttpCheckMode::Absolute && !target.tls => false,
        Protocol::Http | Protocol::Https => {
            let authority = authority(target);
            http_connect::connect(&mut stream, &authority, creds)
                .await
                .map_err(proto_failure)?;
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
        progress.at("waiting for the target's answer");
        return exchange(&mut stream, &request).await;
    }
    // TLS to the site inside the tunnel: a proxy that cannot carry it (or tampers with
    // it) fails its check.
    progress.at("in the TLS handshake with the target");
    let trust = plan.target_tls.as_ref().map_err(|e| {
        Failed::new(
            CheckFailure::TargetTls,
            format!("the health check CA bundle cannot be used: {e}"),
        )
    })?;
    let mut inner = trust
        .connect(&target.host, &mut stream)
        .await
        .map_err(|e| Failed::of(CheckFailure::TargetTls, &e))?;
    progress.at("waiting for the target's answer");
    exchange(&mut inner, &request).await
}

/// Sends `request` and reads the status of the answer's head.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: &str,
) -> Result<u16, Failed> {
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| proto_failure(ProtoError::Io(e)))?;
    let head = read_response_head(stream, MAX_RESPONSE_HEAD)
        .await
        .map_err(proto_failure)?;
    Ok(head.status)
}

fn authority(target: &TargetUrl) -> String {
    if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    }
}

/// The reason for a protocol step's error. Its text is ours: a status number, a SOCKS5
/// reply code, what was malformed, an OS error.
fn proto_failure(error: ProtoError) -> Failed {
    let reason = match &error {
        e if e.is_auth_rejected() => CheckFailure::Auth,
        e if e.is_timeout() => CheckFailure::Timeout,
        ProtoError::Rejected { .. } | ProtoError::SocksRejected { .. } => CheckFailure::Refused,
        ProtoError::Malformed { .. } | ProtoError::Io(_) => CheckFailure::Protocol,
        _ => CheckFailure::Other,
    };
    Failed::of(reason, &error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxypool_proto::socks5::Reply;
    use std::io;

    #[test]
    fn protocol_errors_map_to_their_reasons() {
        let reason = |e: ProtoError| proto_failure(e).reason;
        assert_eq!(
            reason(ProtoError::Rejected { status: 407 }),
            CheckFailure::Auth
        );
        assert_eq!(reason(ProtoError::AuthRejected), CheckFailure::Auth);
        assert_eq!(
            reason(ProtoError::Rejected { status: 403 }),
            CheckFailure::Refused
        );
        assert_eq!(
            reason(ProtoError::SocksRejected {
                reply: Reply::HostUnreachable
            }),
            CheckFailure::Refused
        );
        assert_eq!(
            reason(ProtoError::Timeout(Duration::from_secs(1))),
            CheckFailure::Timeout
        );
        assert_eq!(
            reason(ProtoError::Io(io::ErrorKind::TimedOut.into())),
            CheckFailure::Timeout
        );
        assert_eq!(
            reason(ProtoError::Io(io::ErrorKind::ConnectionReset.into())),
            CheckFailure::Protocol
        );
        assert_eq!(
            reason(ProtoError::Malformed {
                protocol: "http",
                reason: "invalid status line".into()
            }),
            CheckFailure::Protocol
        );
    }

    #[test]
    fn a_cause_is_the_chain_without_repeats() {
        let io = io::Error::new(io::ErrorKind::ConnectionReset, "reset by peer");
        let failed = proto_failure(ProtoError::Io(io));
        assert_eq!(failed.cause, "i/o error: reset by peer");
        let failed = proto_failure(ProtoError::Rejected { status: 502 });
        assert_eq!(
            failed.cause,
            "proxy rejected the request with HTTP status 502"
        );
    }
}
