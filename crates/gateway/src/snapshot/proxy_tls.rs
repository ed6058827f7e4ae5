//! TLS to `https` upstream proxies: the trust each upstream asks for (its CA bundle and
//! the name its proxies' certificates carry, shipped in the snapshot), resolved once per
//! view into what a dial needs.

use proxypool_core::UpstreamId;
use proxypool_core::control::UpstreamTls;
use proxypool_edge::ClientTls;
use std::collections::HashMap;
use std::sync::OnceLock;

/// How to reach one `https` proxy: the TLS client to use and the name to verify.
#[derive(Debug, Clone)]
pub(crate) struct ProxyTls {
    pub client: ClientTls,
    pub server_name: String,
}

/// The upstreams' TLS settings of one snapshot, each loaded once.
#[derive(Debug, Default)]
pub(crate) struct UpstreamTrust {
    by_upstream: HashMap<UpstreamId, (Result<ClientTls, String>, Option<String>)>,
}

impl UpstreamTrust {
    pub(crate) fn of(settings: &[UpstreamTls]) -> Self {
        let by_upstream = settings
            .iter()
            .map(|tls| {
                let client =
                    ClientTls::from_ca_pem(tls.ca_pem.as_deref()).map_err(|e| e.to_string());
                if let Err(error) = &client {
                    tracing::error!(upstream = %tls.upstream, %error, "the upstream's CA bundle cannot be used; its https proxies are left out");
                }
                (tls.upstream.clone(), (client, tls.server_name.clone()))
            })
            .collect();
        UpstreamTrust { by_upstream }
    }

    /// The TLS of an `https` proxy of `upstream` at `host`; `Err` says why it cannot
    /// be dialed.
    pub(crate) fn for_proxy(&self, upstream: &UpstreamId, host: &str) -> Result<ProxyTls, String> {
        let (client, server_name) = match self.by_upstream.get(upstream) {
            Some((Ok(client), name)) => (client.clone(), name.clone()),
            Some((Err(error), _)) => return Err(format!("its upstream's CA bundle: {error}")),
            None => (public_roots().clone(), None),
        };
        Ok(ProxyTls {
            client,
            server_name: server_name.unwrap_or_else(|| host.to_owned()),
        })
    }
}

/// The public roots, built once per process.
fn public_roots() -> &'static ClientTls {
    static ROOTS: OnceLock<ClientTls> = OnceLock::new();
    ROOTS.get_or_init(ClientTls::public_roots)
}
