//! The TLS to each upstream's `https` proxies, as its `proxy_tls` gives it: read once at
//! start, shipped in every snapshot (so a gateway verifies a proxy exactly as the checker
//! did) and turned into the checker's TLS client.

use crate::config::UpstreamConfig;
use proxypool_core::control::UpstreamTls;
use proxypool_edge::ClientTls;

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

/// How the checker speaks TLS to a proxy: the client and the name to verify (`None`: the
/// proxy's own host).
#[derive(Debug, Clone)]
pub struct ProxyTlsClient {
    pub client: Result<ClientTls, String>,
    pub server_name: Option<String>,
}

impl ProxyTlsClient {
    /// The TLS to `upstream`'s `https` proxies (the public roots when it sets nothing).
    pub fn of(upstream: &UpstreamConfig) -> Self {
        let shipped = shipped(std::slice::from_ref(upstream)).pop();
        let ca = shipped.as_ref().and_then(|tls| tls.ca_pem.as_deref());
        ProxyTlsClient {
            client: ClientTls::from_ca_pem(ca).map_err(|error| error.to_string()),
            server_name: shipped.and_then(|tls| tls.server_name),
        }
    }

    /// TLS against the public roots, under each proxy's host.
    pub fn public() -> Self {
        ProxyTlsClient {
            client: Ok(ClientTls::public_roots()),
            server_name: None,
        }
    }

    /// The name a proxy at `host` must be certified for.
    pub fn name_for<'a>(&'a self, host: &'a str) -> &'a str {
        self.server_name.as_deref().unwrap_or(host)
    }
}
