//! `dev`'s readiness: the printed commands must work the moment they are printed.
//!
//! Polled (cross-component readiness has no single signal) every 100 ms until a deadline:
//! - every simulated proxy is AVAILABLE (fetched and health-checked), so extraction finds
//!   the unowned half;
//! - a GET through the gateway's HTTP listener reaches the origin;
//! - a GET through the gateway's SOCKS5 listener reaches the origin;
//! - a GET through the gateway's TLS listener (trusting its certificate) reaches it.

use super::banner::Endpoints;
use super::setup::{CLIENT, Credentials, UPSTREAM};
use crate::failure::Failure;
use crate::stack::Stack;
use proxypool_core::{ProxyStatus, UpstreamId, now_millis};
use proxypool_proto::TargetAddr;
use proxypool_sim::SimVendor;
use proxypool_sim::client::{get_via_http_proxy, get_via_socks5};
use std::time::{Duration, Instant};

/// One probe's own bound (a probe stuck on a slow path must not eat the deadline).
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(100);

/// Waits until everything answers, or fails naming what did not within `deadline`.
pub(super) async fn wait(
    stack: &Stack,
    sim: &SimVendor,
    endpoints: &Endpoints,
    credentials: &Credentials,
    proxies: usize,
    deadline: Duration,
) -> Result<(), Failure> {
    let until = Instant::now() + deadline;
    let upstream = UpstreamId::new(UPSTREAM).map_err(|e| Failure::runtime(e.to_string()))?;
    let pool = stack.controller().pool();
    let auth = Some((CLIENT, credentials.gateway_password.as_str()));
    let origin = sim.origin().addr();
    let (mut checked, mut http, mut socks5, mut https) = (false, false, false, false);
    loop {
        if !checked {
            checked = pool
                .inventory(now_millis(), &upstream)
                .await
                .ok()
                .and_then(|view| view.by_status.get(&ProxyStatus::Available).copied())
                .is_some_and(|available| available >= proxies as u64);
        }
        if checked && !http {
            let probe = get_via_http_proxy(endpoints.http, auth, origin, "/ready");
            http = matches!(tokio::time::timeout(PROBE_TIMEOUT, probe).await,
                Ok(Ok(fetched)) if fetched.status == 200 && fetched.echo().is_some());
        }
        if checked && !socks5 {
            let target = TargetAddr::from(origin);
            let probe = get_via_socks5(endpoints.socks5, auth, &target, "/ready");
            socks5 = matches!(tokio::time::timeout(PROBE_TIMEOUT, probe).await,
                Ok(Ok(fetched)) if fetched.status == 200 && fetched.echo().is_some());
        }
        if checked && !https {
            let cert = &endpoints.https_cert.cert;
            let auth = (CLIENT, credentials.gateway_password.as_str());
            let probe = super::tls::probe(endpoints.https, cert, auth, origin);
            https = matches!(tokio::time::timeout(PROBE_TIMEOUT, probe).await, Ok(true));
        }
        if checked && http && socks5 && https {
            return Ok(());
        }
        if Instant::now() >= until {
            let mut missing = Vec::new();
            if !checked {
                missing.push("not every simulated proxy passed its health check");
            }
            if !http {
                missing.push("no answer through the gateway's HTTP listener");
            }
            if !socks5 {
                missing.push("no answer through the gateway's SOCKS5 listener");
            }
            if !https {
                missing.push("no answer through the gateway's TLS listener");
            }
            return Err(Failure::runtime(format!(
                "dev was not ready within {deadline:?}: {} (run with PROXYPOOL_LOG=debug to see why)",
                missing.join("; ")
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}
