//! The TLS to each upstream's `https` proxies, as its `proxy_tls` gives it: read once at
//! start, shipped in every snapshot (so a gateway verifies a proxy exactly as the checker
//! did) and turned into the checker's [`ProxyTrust`], the one the gateways build.

use crate::config::UpstreamConfig;
use proxypool_core::control::UpstreamTls;
use proxypool_edge::ProxyTrust;

/// The entries a snapshot carries: one per upstream with `proxy_tls`. A CA bundle that
/// cannot be read is shipped empty, which no gateway accepts: the upstream's `https`
/// proxies are then left out rather than checked against the public roots.
pub fn shipped(upstreams: &[UpstreamConfig]) -> Vec<UpstreamTls> {
    upstreams
        .iter()
        .filter_map(|upstream| {
            let tls = upstream.proxy_tls.as_ref()?;
            let ca_pem = tls.ca.as_ref().map(|path| {
                std::fs::read_to_string(path).unwrap_or_else(|error| {
                    tracing::error!(upstream = %upstream.id, path = %path.display(), %error, "the upstream's proxy CA bundle cannot be read; its https proxies will not be used");
                    String::new()
                })
            });
            Some(UpstreamTls {
                upstream: upstream.id.clone(),
                ca_pem,
                server_name: tls.server_name.clone(),
            })
        })
        .collect()
}

/// How the checker reaches `upstream`'s `https` proxies: as the gateways do, from what
/// the snapshots ship (the public roots when it sets nothing).
pub fn trust_of(upstream: &UpstreamConfig) -> ProxyTrust {
    ProxyTrust::of(shipped(std::slice::from_ref(upstream)).first())
}
